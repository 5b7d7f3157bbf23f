// RUN: kvpipe-opt %s | kvpipe-opt | FileCheck %s
// RUN: kvpipe-opt %s -mlir-print-op-generic | kvpipe-opt | FileCheck %s

// The declaration round-trips with its tuning attributes.

// CHECK-LABEL: gpu.module @kernels
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // CHECK: kvpipe.attention_kernel @fa_fwd {causal = true, element_type = bf16, head_dim = 128 : i64}
  kvpipe.attention_kernel @fa_fwd {head_dim = 128 : i64, element_type = bf16, causal = true}
  // CHECK: kvpipe.attention_kernel @tuned {block_n = 64 : i64, causal = false, consumer_warpgroups = 1 : i64, element_type = f16, head_dim = 64 : i64, kv_stages = 4 : i64}
  kvpipe.attention_kernel @tuned {head_dim = 64 : i64, element_type = f16, causal = false, block_n = 64 : i64, kv_stages = 4 : i64, consumer_warpgroups = 1 : i64}
  // CHECK: kvpipe.attention_kernel @serving {causal = true, element_type = bf16, head_dim = 128 : i64, mask_alignment = #kvpipe.mask_alignment<bottom_right>, sliding_window = true}
  kvpipe.attention_kernel @serving {head_dim = 128 : i64, element_type = bf16, causal = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>, sliding_window = true}
}
