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
//
//   kvpipe-opt examples/attention-decode.mlir --kvpipe-to-ptx="ptx-file=decode.ptx abi-file=decode.json"
gpu.module @decode [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @decode {head_dim = 128 : i64, element_type = bf16, causal = false,
      pack_gqa = 4 : i64, split_kv = true, kv_lengths = true, consumer_warpgroups = 1 : i64}
  kvpipe.attention_kernel @decode_qwen {head_dim = 128 : i64, element_type = bf16, causal = true,
      mask_alignment = #kvpipe.mask_alignment<bottom_right>, pack_gqa = 7 : i64, kv_lengths = true}
}
