// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol -o /dev/null 2>&1 | FileCheck %s
// RUN: ! kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol='strict=true' -o /dev/null 2> %t.strict
// RUN: FileCheck %s --check-prefix=STRICT < %t.strict

// The persistent causal kernels are the generated kernels the protocol
// checker cannot prove. Their consumers broadcast the tile's K/V block count
// from lane 0 as an i32 (gpu.shuffle) and loop to the value widened back,
// while the producer loops to the index value itself. Both are equal only
// when the count fits in 31 bits, which the checker cannot show: the count
// is ceil(min(seq_kv, q_row + block_m) / block_n), and seq_kv and seq_q are
// sign-extended i32 kernel parameters (negative ones wrap to huge unsigned
// values). Broadcasting the index value, or reading the lengths with
// arith.index_castui, would make the kernels provable. Until then they pass
// the default mode with a located "cannot prove" warning, and strict mode
// rejects them.

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

// CHECK: warning: {{.*}} cannot prove that the producer and consumer {{sides|loops}} advance the same number of slots
// CHECK-NOT: error:
// STRICT: error: {{.*}} cannot prove that the producer and consumer {{sides|loops}} advance the same number of slots
