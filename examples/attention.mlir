// An ML compiler asks kvpipe for a FlashAttention forward kernel by
// declaring it in a gpu.module; --kvpipe-to-ptx generates, checks and
// lowers it:
//
//   kvpipe-opt examples/attention.mlir --kvpipe-to-ptx="ptx-file=fa.ptx abi-file=fa.json"
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @fa_fwd {head_dim = 128 : i64, element_type = bf16, causal = true}
}
