// Decode kernels: one query (or a few) per sequence against a long KV cache,
// where reading K and V is all the time there is (docs/serving.md).
//
//   @decode        Llama-style GQA (32 query heads over 8 K/V heads): the 4
//                  query heads of a K/V head share a tile (pack_gqa), so
//                  each K/V block is read once per group; each sequence's
//                  keys are split over a runtime num_splits CTAs whose
//                  partials @decode_combine merges; per-sequence lengths.
//   @decode_qwen   a group of 7 (28 / 4 heads), bottom-right causal for
//                  chunked prefill: 9 query positions x 7 heads per
//                  warpgroup, not split.
//   @decode_gemma2 Gemma 2's local layers (16 / 8 heads of 256): the
//                  soft-cap 50 as a score_mod, a 4096-key window, packed
//                  and split over a paged cache (16-key pages): the
//                  modifiers run in the decode kernels as in the others.
//
//   kvpipe-opt examples/attention-decode.mlir --kvpipe-to-ptx="ptx-file=decode.ptx abi-file=decode.json"
gpu.module @decode [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @decode {head_dim = 128 : i64, element_type = bf16, causal = false,
      pack_gqa = 4 : i64, split_kv = true, kv_lengths = true, consumer_warpgroups = 1 : i64}
  kvpipe.attention_kernel @decode_qwen {head_dim = 128 : i64, element_type = bf16, causal = true,
      mask_alignment = #kvpipe.mask_alignment<bottom_right>, pack_gqa = 7 : i64, kv_lengths = true}
  kvpipe.attention_kernel @decode_gemma2 {head_dim = 256 : i64, element_type = bf16, causal = true,
      mask_alignment = #kvpipe.mask_alignment<bottom_right>, sliding_window = true,
      kv_lengths = true, page_size = 16 : i64, pack_gqa = 2 : i64, split_kv = true,
      consumer_warpgroups = 1 : i64}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %inv = arith.constant 2.000000e-02 : f32
    %cap = arith.constant 5.000000e+01 : f32
    %x = arith.mulf %s, %inv : f32
    %t = math.tanh %x fastmath<afn> : f32
    %r = arith.mulf %t, %cap : f32
    kvpipe.yield %r : f32
  }
}
