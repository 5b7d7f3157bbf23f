// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol='strict=true' -o /dev/null 2>&1 | FileCheck %s --allow-empty

// The persistent causal kernels pass the checker in strict mode. Their
// consumers used to broadcast the tile's K/V block count from lane 0 as an
// i32 and loop to the value widened back, while the producer looped to the
// index value itself: equal only when the count fits in 31 bits, which the
// checker could not show (seq_kv and seq_q are sign-extended i32 kernel
// parameters). The generator now loops to the same value on both sides.

// CHECK-NOT: warning
// CHECK-NOT: error

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_causal_persistent {head_dim = 64 : i64, element_type = bf16, causal = true, persistent = true}
  kvpipe.attention_kernel @d64_bf16_causal_persistent_pingpong {head_dim = 64 : i64, element_type = bf16, causal = true, persistent = true, pingpong = true}
  kvpipe.attention_kernel @d64_bf16_causal_persistent_no_overlap {head_dim = 64 : i64, element_type = bf16, causal = true, persistent = true, overlap_softmax = false}
  kvpipe.attention_kernel @d64_f16_causal_persistent {head_dim = 64 : i64, element_type = f16, causal = true, persistent = true}
  kvpipe.attention_kernel @d64_f16_causal_persistent_pingpong {head_dim = 64 : i64, element_type = f16, causal = true, persistent = true, pingpong = true}
  kvpipe.attention_kernel @d64_f16_causal_persistent_no_overlap {head_dim = 64 : i64, element_type = f16, causal = true, persistent = true, overlap_softmax = false}
  kvpipe.attention_kernel @d128_bf16_causal_persistent {head_dim = 128 : i64, element_type = bf16, causal = true, persistent = true}
  kvpipe.attention_kernel @d128_bf16_causal_persistent_pingpong {head_dim = 128 : i64, element_type = bf16, causal = true, persistent = true, pingpong = true}
  kvpipe.attention_kernel @d128_bf16_causal_persistent_no_overlap {head_dim = 128 : i64, element_type = bf16, causal = true, persistent = true, overlap_softmax = false}
  kvpipe.attention_kernel @d128_f16_causal_persistent {head_dim = 128 : i64, element_type = f16, causal = true, persistent = true}
  kvpipe.attention_kernel @d128_f16_causal_persistent_pingpong {head_dim = 128 : i64, element_type = f16, causal = true, persistent = true, pingpong = true}
  kvpipe.attention_kernel @d128_f16_causal_persistent_no_overlap {head_dim = 128 : i64, element_type = f16, causal = true, persistent = true, overlap_softmax = false}
}

