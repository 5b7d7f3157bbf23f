// Serving kernels: what an inference engine asks kvpipe for.
//
//   @decode  a decode / chunked-prefill step against a padded KV cache:
//            causal aligned bottom-right (query i of seq_q sees keys up to
//            i + len - seq_q), each sequence b attending to its first
//            kv_lengths[b] keys (flash-attn's cache_seqlens);
//   @window  a sliding-window model (Mistral, Gemma 2's local layers):
//            causal plus a runtime window_left, blocks outside the window
//            never loaded.
//
//   kvpipe-opt examples/attention-kvcache.mlir --kvpipe-to-ptx="ptx-file=kvcache.ptx abi-file=kvcache.json"
gpu.module @serving [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @decode {head_dim = 128 : i64, element_type = bf16, causal = true,
      mask_alignment = #kvpipe.mask_alignment<bottom_right>, kv_lengths = true}
  kvpipe.attention_kernel @window {head_dim = 128 : i64, element_type = bf16, causal = true,
      mask_alignment = #kvpipe.mask_alignment<bottom_right>, sliding_window = true}
}
