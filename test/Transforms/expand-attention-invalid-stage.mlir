// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=tiled" -verify-diagnostics -o /dev/null

// The generator's stages are skeleton, scheduled and lowered
// (AttentionGenerator.h); anything else is reported, at the first
// declaration, not ignored.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // expected-error @+1 {{'stage' must be skeleton, scheduled or lowered, got 'tiled'}}
  kvpipe.attention_kernel @fa {head_dim = 64 : i64, element_type = bf16, causal = false}
}
