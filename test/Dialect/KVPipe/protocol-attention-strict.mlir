// RUN: kvpipe-opt %s -split-input-file --kvpipe-expand-attention --kvpipe-verify-protocol='strict=true' | FileCheck %s

// Every generated attention kernel is proven by the protocol checker in
// strict mode (what it cannot prove would be an error): head dims 64 and
// 128, bf16 and f16, causal or not, and each tuning family: default,
// ping-pong, persistent, without softmax overlap, their combinations, a
// deeper ring and one consumer warpgroup. docs/protocol-checking.md.
// The persistent causal kernels are the exception, in
// protocol-attention-persistent-causal.mlir. One kernel per split, so that
// each is its own input for the fuzzer (tools/fuzz) too.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_full_default {head_dim = 64 : i64, element_type = bf16, causal = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_full_pingpong {head_dim = 64 : i64, element_type = bf16, causal = false, pingpong = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_full_persistent {head_dim = 64 : i64, element_type = bf16, causal = false, persistent = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_full_no_overlap {head_dim = 64 : i64, element_type = bf16, causal = false, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_full_persistent_pingpong {head_dim = 64 : i64, element_type = bf16, causal = false, persistent = true, pingpong = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_full_persistent_no_overlap {head_dim = 64 : i64, element_type = bf16, causal = false, persistent = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_full_pingpong_no_overlap {head_dim = 64 : i64, element_type = bf16, causal = false, pingpong = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_full_deep_ring {head_dim = 64 : i64, element_type = bf16, causal = false, kv_stages = 4, block_n = 64}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_full_one_consumer {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1, block_n = 64, kv_stages = 3}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_causal_default {head_dim = 64 : i64, element_type = bf16, causal = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_causal_pingpong {head_dim = 64 : i64, element_type = bf16, causal = true, pingpong = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_causal_no_overlap {head_dim = 64 : i64, element_type = bf16, causal = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_causal_pingpong_no_overlap {head_dim = 64 : i64, element_type = bf16, causal = true, pingpong = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_causal_deep_ring {head_dim = 64 : i64, element_type = bf16, causal = true, kv_stages = 4, block_n = 64}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_bf16_causal_one_consumer {head_dim = 64 : i64, element_type = bf16, causal = true, consumer_warpgroups = 1, block_n = 64, kv_stages = 3}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_full_default {head_dim = 64 : i64, element_type = f16, causal = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_full_pingpong {head_dim = 64 : i64, element_type = f16, causal = false, pingpong = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_full_persistent {head_dim = 64 : i64, element_type = f16, causal = false, persistent = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_full_no_overlap {head_dim = 64 : i64, element_type = f16, causal = false, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_full_persistent_pingpong {head_dim = 64 : i64, element_type = f16, causal = false, persistent = true, pingpong = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_full_persistent_no_overlap {head_dim = 64 : i64, element_type = f16, causal = false, persistent = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_full_pingpong_no_overlap {head_dim = 64 : i64, element_type = f16, causal = false, pingpong = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_full_deep_ring {head_dim = 64 : i64, element_type = f16, causal = false, kv_stages = 4, block_n = 64}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_full_one_consumer {head_dim = 64 : i64, element_type = f16, causal = false, consumer_warpgroups = 1, block_n = 64, kv_stages = 3}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_causal_default {head_dim = 64 : i64, element_type = f16, causal = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_causal_pingpong {head_dim = 64 : i64, element_type = f16, causal = true, pingpong = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_causal_no_overlap {head_dim = 64 : i64, element_type = f16, causal = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_causal_pingpong_no_overlap {head_dim = 64 : i64, element_type = f16, causal = true, pingpong = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_causal_deep_ring {head_dim = 64 : i64, element_type = f16, causal = true, kv_stages = 4, block_n = 64}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64_f16_causal_one_consumer {head_dim = 64 : i64, element_type = f16, causal = true, consumer_warpgroups = 1, block_n = 64, kv_stages = 3}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_full_default {head_dim = 128 : i64, element_type = bf16, causal = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_full_pingpong {head_dim = 128 : i64, element_type = bf16, causal = false, pingpong = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_full_persistent {head_dim = 128 : i64, element_type = bf16, causal = false, persistent = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_full_no_overlap {head_dim = 128 : i64, element_type = bf16, causal = false, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_full_persistent_pingpong {head_dim = 128 : i64, element_type = bf16, causal = false, persistent = true, pingpong = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_full_persistent_no_overlap {head_dim = 128 : i64, element_type = bf16, causal = false, persistent = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_full_pingpong_no_overlap {head_dim = 128 : i64, element_type = bf16, causal = false, pingpong = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_full_deep_ring {head_dim = 128 : i64, element_type = bf16, causal = false, kv_stages = 4, block_n = 64}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_full_one_consumer {head_dim = 128 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1, block_n = 64, kv_stages = 3}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_causal_default {head_dim = 128 : i64, element_type = bf16, causal = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_causal_pingpong {head_dim = 128 : i64, element_type = bf16, causal = true, pingpong = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_causal_no_overlap {head_dim = 128 : i64, element_type = bf16, causal = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_causal_pingpong_no_overlap {head_dim = 128 : i64, element_type = bf16, causal = true, pingpong = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_causal_deep_ring {head_dim = 128 : i64, element_type = bf16, causal = true, kv_stages = 4, block_n = 64}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_bf16_causal_one_consumer {head_dim = 128 : i64, element_type = bf16, causal = true, consumer_warpgroups = 1, block_n = 64, kv_stages = 3}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_full_default {head_dim = 128 : i64, element_type = f16, causal = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_full_pingpong {head_dim = 128 : i64, element_type = f16, causal = false, pingpong = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_full_persistent {head_dim = 128 : i64, element_type = f16, causal = false, persistent = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_full_no_overlap {head_dim = 128 : i64, element_type = f16, causal = false, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_full_persistent_pingpong {head_dim = 128 : i64, element_type = f16, causal = false, persistent = true, pingpong = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_full_persistent_no_overlap {head_dim = 128 : i64, element_type = f16, causal = false, persistent = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_full_pingpong_no_overlap {head_dim = 128 : i64, element_type = f16, causal = false, pingpong = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_full_deep_ring {head_dim = 128 : i64, element_type = f16, causal = false, kv_stages = 4, block_n = 64}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_full_one_consumer {head_dim = 128 : i64, element_type = f16, causal = false, consumer_warpgroups = 1, block_n = 64, kv_stages = 3}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_causal_default {head_dim = 128 : i64, element_type = f16, causal = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_causal_pingpong {head_dim = 128 : i64, element_type = f16, causal = true, pingpong = true}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_causal_no_overlap {head_dim = 128 : i64, element_type = f16, causal = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_causal_pingpong_no_overlap {head_dim = 128 : i64, element_type = f16, causal = true, pingpong = true, overlap_softmax = false}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_causal_deep_ring {head_dim = 128 : i64, element_type = f16, causal = true, kv_stages = 4, block_n = 64}
}

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_f16_causal_one_consumer {head_dim = 128 : i64, element_type = f16, causal = true, consumer_warpgroups = 1, block_n = 64, kv_stages = 3}
}

// CHECK-LABEL: gpu.func @d64_bf16_full_default(
// CHECK-LABEL: gpu.func @d64_bf16_full_pingpong(
// CHECK-LABEL: gpu.func @d64_bf16_full_persistent(
// CHECK-LABEL: gpu.func @d64_bf16_full_no_overlap(
// CHECK-LABEL: gpu.func @d64_bf16_full_persistent_pingpong(
// CHECK-LABEL: gpu.func @d64_bf16_full_persistent_no_overlap(
// CHECK-LABEL: gpu.func @d64_bf16_full_pingpong_no_overlap(
// CHECK-LABEL: gpu.func @d64_bf16_full_deep_ring(
// CHECK-LABEL: gpu.func @d64_bf16_full_one_consumer(
// CHECK-LABEL: gpu.func @d64_bf16_causal_default(
// CHECK-LABEL: gpu.func @d64_bf16_causal_pingpong(
// CHECK-LABEL: gpu.func @d64_bf16_causal_no_overlap(
// CHECK-LABEL: gpu.func @d64_bf16_causal_pingpong_no_overlap(
// CHECK-LABEL: gpu.func @d64_bf16_causal_deep_ring(
// CHECK-LABEL: gpu.func @d64_bf16_causal_one_consumer(
// CHECK-LABEL: gpu.func @d64_f16_full_default(
// CHECK-LABEL: gpu.func @d64_f16_full_pingpong(
// CHECK-LABEL: gpu.func @d64_f16_full_persistent(
// CHECK-LABEL: gpu.func @d64_f16_full_no_overlap(
// CHECK-LABEL: gpu.func @d64_f16_full_persistent_pingpong(
// CHECK-LABEL: gpu.func @d64_f16_full_persistent_no_overlap(
// CHECK-LABEL: gpu.func @d64_f16_full_pingpong_no_overlap(
// CHECK-LABEL: gpu.func @d64_f16_full_deep_ring(
// CHECK-LABEL: gpu.func @d64_f16_full_one_consumer(
// CHECK-LABEL: gpu.func @d64_f16_causal_default(
// CHECK-LABEL: gpu.func @d64_f16_causal_pingpong(
// CHECK-LABEL: gpu.func @d64_f16_causal_no_overlap(
// CHECK-LABEL: gpu.func @d64_f16_causal_pingpong_no_overlap(
// CHECK-LABEL: gpu.func @d64_f16_causal_deep_ring(
// CHECK-LABEL: gpu.func @d64_f16_causal_one_consumer(
// CHECK-LABEL: gpu.func @d128_bf16_full_default(
// CHECK-LABEL: gpu.func @d128_bf16_full_pingpong(
// CHECK-LABEL: gpu.func @d128_bf16_full_persistent(
// CHECK-LABEL: gpu.func @d128_bf16_full_no_overlap(
// CHECK-LABEL: gpu.func @d128_bf16_full_persistent_pingpong(
// CHECK-LABEL: gpu.func @d128_bf16_full_persistent_no_overlap(
// CHECK-LABEL: gpu.func @d128_bf16_full_pingpong_no_overlap(
// CHECK-LABEL: gpu.func @d128_bf16_full_deep_ring(
// CHECK-LABEL: gpu.func @d128_bf16_full_one_consumer(
// CHECK-LABEL: gpu.func @d128_bf16_causal_default(
// CHECK-LABEL: gpu.func @d128_bf16_causal_pingpong(
// CHECK-LABEL: gpu.func @d128_bf16_causal_no_overlap(
// CHECK-LABEL: gpu.func @d128_bf16_causal_pingpong_no_overlap(
// CHECK-LABEL: gpu.func @d128_bf16_causal_deep_ring(
// CHECK-LABEL: gpu.func @d128_bf16_causal_one_consumer(
// CHECK-LABEL: gpu.func @d128_f16_full_default(
// CHECK-LABEL: gpu.func @d128_f16_full_pingpong(
// CHECK-LABEL: gpu.func @d128_f16_full_persistent(
// CHECK-LABEL: gpu.func @d128_f16_full_no_overlap(
// CHECK-LABEL: gpu.func @d128_f16_full_persistent_pingpong(
// CHECK-LABEL: gpu.func @d128_f16_full_persistent_no_overlap(
// CHECK-LABEL: gpu.func @d128_f16_full_pingpong_no_overlap(
// CHECK-LABEL: gpu.func @d128_f16_full_deep_ring(
// CHECK-LABEL: gpu.func @d128_f16_full_one_consumer(
// CHECK-LABEL: gpu.func @d128_f16_causal_default(
// CHECK-LABEL: gpu.func @d128_f16_causal_pingpong(
// CHECK-LABEL: gpu.func @d128_f16_causal_no_overlap(
// CHECK-LABEL: gpu.func @d128_f16_causal_pingpong_no_overlap(
// CHECK-LABEL: gpu.func @d128_f16_causal_deep_ring(
// CHECK-LABEL: gpu.func @d128_f16_causal_one_consumer(
