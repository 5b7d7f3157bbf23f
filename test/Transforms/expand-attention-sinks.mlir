// gpt-oss's attention sinks (`sinks = true`): one f32 logit per query head,
// read before the K/V loop, joins each row's softmax in the epilogue as a
// key of value zero: O / (l + 2^(sink log2 e - m c)) and the log-sum-exp of
// the keys and the sink from the larger of the two. Split kernels leave the
// sink to their combine kernel (one more split of output zero). The skeleton
// with its tile lowered one per CTA, the strict protocol checker, the PTX
// through ptxas, and the verifier's rule (the last split-input-file chunk).
// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @prefill {head_dim = 128 : i64, element_type = bf16, causal = true, sinks = true}
  kvpipe.attention_kernel @decode {head_dim = 64 : i64, element_type = f16, causal = false, kv_lengths = true, pack_gqa = 4 : i64, sinks = true}
  kvpipe.attention_kernel @split {head_dim = 128 : i64, element_type = bf16, causal = false, kv_lengths = true, split_kv = true, sinks = true}
  kvpipe.attention_kernel @packed {head_dim = 96 : i64, element_type = bf16, causal = true, varlen = true, sinks = true}
  kvpipe.attention_kernel @persistent {head_dim = 128 : i64, element_type = f16, causal = true, persistent = true, sinks = true}
}

// The sinks pointer is the last parameter; the ABI names it and says so.
// CHECK-LABEL: gpu.func @prefill(
//  CHECK-SAME:   %[[LSE:[^:]*]]: !llvm.ptr<1>, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %[[C:[^:]*]]: f32, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %[[SINKS:[^:]*]]: !llvm.ptr<1>) kernel
//  CHECK-SAME:   params = [{{.*}}"batch", "sinks"]
//  CHECK-SAME:   sinks = true
// The tile's head (grid y) picks the sink, loaded before the K/V loop.
//       CHECK:   %[[HEAD:.*]] = arith.index_cast %block_id_y : index to i64
//       CHECK:   %[[ADDR:.*]] = llvm.getelementptr %[[SINKS]][%[[HEAD]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
//       CHECK:   %[[RAW:.*]] = llvm.load %[[ADDR]] : !llvm.ptr<1> -> f32
//       CHECK:   %[[SINK:.*]] = arith.mulf %[[RAW]], %{{.*}} : f32
//       CHECK:   %[[LOOP:.*]]:7 = scf.for
// O's normaliser: l + 2^(sink - m c), 0 where it is not positive.
//       CHECK:   %[[L0:.*]] = kvpipe.quad_sum %[[LOOP]]#5 : f32
//       CHECK:   %[[MC0:.*]] = arith.mulf %[[LOOP]]#3, %[[C]] : f32
//       CHECK:   %[[T0:.*]] = arith.subf %[[SINK]], %[[MC0]] : f32
//       CHECK:   %[[E0:.*]] = math.exp2 %[[T0]] : f32
//       CHECK:   %[[DEN0:.*]] = arith.addf %[[L0]], %[[E0]] : f32
//       CHECK:   %[[POS0:.*]] = arith.cmpf ogt, %[[DEN0]], %{{.*}} : f32
//       CHECK:   %[[INV0:.*]] = arith.divf %{{.*}}, %[[DEN0]] : f32
//       CHECK:   arith.select %[[POS0]], %[[INV0]], %{{.*}} : f32
//       CHECK:   kvpipe.fragment_rescale %[[LOOP]]#2
// The log-sum-exp: hi + log2(l 2^(m c - hi) + 2^(sink - hi)), hi the larger
// exponent, in natural units; +inf only where neither keys nor a finite
// sink contribute.
//       CHECK:   llvm.icmp "ne" %[[LSE]]
//       CHECK:   %[[HI:.*]] = arith.maxnumf %[[MC0]], %[[SINK]] : f32
//       CHECK:   %[[DS:.*]] = arith.subf %[[SINK]], %[[HI]] : f32
//       CHECK:   %[[ES:.*]] = math.exp2 %[[DS]] : f32
//       CHECK:   %[[DK:.*]] = arith.subf %[[MC0]], %[[HI]] : f32
//       CHECK:   %[[EK:.*]] = math.exp2 %[[DK]] : f32
//       CHECK:   %[[LK:.*]] = arith.mulf %[[L0]], %[[EK]] : f32
//       CHECK:   %[[TOTAL:.*]] = arith.addf %[[LK]], %[[ES]] : f32
//       CHECK:   %[[LOG:.*]] = math.log2 %[[TOTAL]] : f32
//       CHECK:   %[[LSE2:.*]] = arith.addf %[[HI]], %[[LOG]] : f32
//       CHECK:   %[[NAT:.*]] = arith.mulf %[[LSE2]], %{{.*}} : f32
//       CHECK:   %[[FINITE:.*]] = arith.cmpf ogt, %[[SINK]], %{{.*}} : f32
//       CHECK:   %[[KEYS:.*]] = arith.cmpf ogt, %[[L0]], %{{.*}} : f32
//       CHECK:   %[[ANY:.*]] = arith.ori %[[KEYS]], %[[FINITE]] : i1
//       CHECK:   %[[VALUE:.*]] = arith.select %[[ANY]], %[[NAT]], %{{.*}} : f32
//       CHECK:   llvm.store %[[VALUE]]

// A pack-GQA tile's two rows of a thread have heads of their own: one sink
// each.
// CHECK-LABEL: gpu.func @decode(
//  CHECK-SAME:   %[[SINKS:[^:]*]]: !llvm.ptr<1>) kernel
//  CHECK-SAME:   params = [{{.*}}"kv_lengths", "sinks"]
//       CHECK:   llvm.getelementptr %[[SINKS]]
//       CHECK:   llvm.getelementptr %[[SINKS]]
//       CHECK:   scf.for

// A split kernel writes its partials without the sink and takes no sinks
// parameter; its combine kernel takes them after num_splits and folds the
// head's sink into the maximum and the sum of the splits' exponentials.
// CHECK-LABEL: gpu.func @split(
//   CHECK-NOT:   "sinks"
//       CHECK:   params = [{{.*}}"lse_partial"]
// CHECK-LABEL: gpu.func @split_combine(
//  CHECK-SAME:   %[[NSPLITS:[^:]*]]: i32, %[[SINKS:[^:]*]]: !llvm.ptr<1>) kernel
//  CHECK-SAME:   params = [{{.*}}"num_splits", "sinks"]
//       CHECK:   scf.if
//       CHECK:   %[[BH:.*]] = arith.divui
//       CHECK:   %[[H:.*]] = arith.remui %[[BH]], %{{.*}} : index
//       CHECK:   %[[H64:.*]] = arith.index_cast %[[H]] : index to i64
//       CHECK:   %[[ADDR:.*]] = llvm.getelementptr %[[SINKS]][%[[H64]]]
//       CHECK:   %[[SINK:.*]] = llvm.load %[[ADDR]] : !llvm.ptr<1> -> f32
//       CHECK:   gpu.shuffle  xor
//       CHECK:   %[[MAX:.*]] = arith.maxnumf %{{.*}}, %[[SINK]] : f32
//       CHECK:   %[[ANY:.*]] = arith.cmpf ogt, %[[MAX]], %{{.*}} : f32
//       CHECK:   %[[SINK2:.*]] = arith.mulf %[[SINK]], %{{.*}} : f32
//       CHECK:   %[[DS:.*]] = arith.subf %[[SINK2]], %{{.*}} : f32
//       CHECK:   %[[ES:.*]] = math.exp2 %[[DS]] : f32
//       CHECK:   %[[SUM:.*]] = arith.addf %{{.*}}, %[[ES]] : f32
//       CHECK:   math.log2 %[[SUM]] : f32

// Packed sequences: the sink of the tile's head, before the K/V loop.
// CHECK-LABEL: gpu.func @packed(
//  CHECK-SAME:   %{{[^:]*}}: i32, %[[SINKS:[^:]*]]: !llvm.ptr<1>) kernel
//  CHECK-SAME:   params = [{{.*}}"total_q", "sinks"]
//       CHECK:   llvm.getelementptr %[[SINKS]]
//       CHECK:   scf.for

// The persistent kernel reads its sink in the tile's body, which the
// persistent rewrite (the scheduled stage, checked by the other RUN lines)
// loops over.
// CHECK-LABEL: gpu.func @persistent(
//  CHECK-SAME:   %[[SINKS:[^:]*]]: !llvm.ptr<1>) kernel
//       CHECK:   llvm.getelementptr %[[SINKS]]
//       CHECK:   scf.for

// No spills in any of the six kernels.
// PTXAS-COUNT-6: 0 bytes spill stores, 0 bytes spill loads

// In the PTX, the sink read through the last parameter.
// PTX-LABEL: .entry prefill(
//       PTX:   .param .u64 .ptr .global .align 1 prefill_param_11
//       PTX:   ld.param.b64 {{.*}}[prefill_param_11]
//       PTX:   ld.global.b32
// PTX-LABEL: .entry split_combine(
//       PTX:   .param .u64 .ptr .global .align 1 split_combine_param_11

// -----

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // expected-error @below {{'sinks' applies to the forward kernels: the backward reads the forward's log-sum-exp, which includes the sinks}}
  kvpipe.attention_kernel @sinks_backward {head_dim = 128 : i64, element_type = bf16, causal = true, backward = true, sinks = true}
}
