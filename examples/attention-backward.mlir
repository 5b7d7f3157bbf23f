// The backward pass of FlashAttention, asked for with the forward's
// attributes plus `backward = true`: --kvpipe-to-ptx generates the family's
// three kernels (@fa_bwd_preprocess, @fa_bwd, @fa_bwd_postprocess,
// docs/backward.md), checks the main kernel's pipelines and lowers all three
// into one PTX module:
//
//   kvpipe-opt examples/attention-backward.mlir --kvpipe-to-ptx="ptx-file=fa_bwd.ptx abi-file=fa_bwd.json"
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @fa_bwd {head_dim = 128 : i64, element_type = bf16, causal = true, backward = true}
}
