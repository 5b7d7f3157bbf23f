// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol | FileCheck %s

// The generated attention kernels keep the producer/consumer protocol: the
// eight declarations (head dim 64/128 x bf16/f16 x causal or not) and a few
// tunings (ring depth, block_n, one consumer warpgroup, no softmax overlap,
// ping-pong) pass --kvpipe-verify-protocol unchanged.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_full {head_dim = 64 : i64, element_type = bf16, causal = false}
  kvpipe.attention_kernel @d64_bf16_causal {head_dim = 64 : i64, element_type = bf16, causal = true}
  kvpipe.attention_kernel @d64_f16_full {head_dim = 64 : i64, element_type = f16, causal = false}
  kvpipe.attention_kernel @d64_f16_causal {head_dim = 64 : i64, element_type = f16, causal = true}
  kvpipe.attention_kernel @d128_bf16_full {head_dim = 128 : i64, element_type = bf16, causal = false}
  kvpipe.attention_kernel @d128_bf16_causal {head_dim = 128 : i64, element_type = bf16, causal = true}
  kvpipe.attention_kernel @d128_f16_full {head_dim = 128 : i64, element_type = f16, causal = false}
  kvpipe.attention_kernel @d128_f16_causal {head_dim = 128 : i64, element_type = f16, causal = true}
  kvpipe.attention_kernel @tuned_deep_ring {head_dim = 64 : i64, element_type = f16, causal = false, kv_stages = 4, overlap_softmax = false}
  kvpipe.attention_kernel @tuned_one_consumer {head_dim = 128 : i64, element_type = bf16, causal = true, kv_stages = 3, block_n = 64, consumer_warpgroups = 1}
  kvpipe.attention_kernel @tuned_pingpong {head_dim = 128 : i64, element_type = bf16, causal = true, pingpong = true}
}

// CHECK-LABEL: gpu.func @d64_bf16_full(
//       CHECK:   kvpipe.consumer_release
// CHECK-LABEL: gpu.func @d64_bf16_causal(
// CHECK-LABEL: gpu.func @d64_f16_full(
// CHECK-LABEL: gpu.func @d64_f16_causal(
// CHECK-LABEL: gpu.func @d128_bf16_full(
// CHECK-LABEL: gpu.func @d128_bf16_causal(
// CHECK-LABEL: gpu.func @d128_f16_full(
// CHECK-LABEL: gpu.func @d128_f16_causal(
// CHECK-LABEL: gpu.func @tuned_deep_ring(
// CHECK-LABEL: gpu.func @tuned_one_consumer(
// CHECK-LABEL: gpu.func @tuned_pingpong(
//       CHECK:   gpu.return
