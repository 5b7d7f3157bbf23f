// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file | FileCheck %s

// Barrier addresses: producer_mbar[qk](state) = mbar[qk_stages * index + qk],
// consumer_mbar[qk](idx) = mbar[qk_stages * idx + qk + num_stages]; the
// sub-stage defaults to qk_stages - 1. Here qk_stages = 2, num_stages = 6.

!p = !kvpipe.pipeline<kv_stages = 3, qk_stages = 2, producers = 1, consumers = 2>

// CHECK-LABEL: func.func @producer_stage0
//  CHECK-SAME: (%[[P:.*]]: !llvm.struct<(ptr<3>, i32, i32)>) -> !llvm.ptr<3>
//       CHECK:   %[[BARS:.*]] = llvm.extractvalue %[[P]][0]
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %[[P]][1]
//       CHECK:   %[[QK:.*]] = llvm.mlir.constant(2 : i32) : i32
//       CHECK:   %[[OFF:.*]] = llvm.mul %[[IDX]], %[[QK]] : i32
//   CHECK-NOT:   llvm.add
//       CHECK:   %[[B:.*]] = llvm.getelementptr %[[BARS]][%[[OFF]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
//       CHECK:   return %[[B]] : !llvm.ptr<3>
func.func @producer_stage0(%p: !p) -> !kvpipe.mbarrier {
  %b = kvpipe.producer_mbar %p stage 0 : !p
  return %b : !kvpipe.mbarrier
}

// CHECK-LABEL: func.func @producer_default_stage
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %{{.*}}[1]
//       CHECK:   %[[QK:.*]] = llvm.mlir.constant(2 : i32) : i32
//       CHECK:   %[[MUL:.*]] = llvm.mul %[[IDX]], %[[QK]] : i32
//       CHECK:   %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   %[[OFF:.*]] = llvm.add %[[MUL]], %[[ONE]] : i32
//       CHECK:   llvm.getelementptr %{{.*}}[%[[OFF]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
func.func @producer_default_stage(%p: !p) -> !kvpipe.mbarrier {
  %b = kvpipe.producer_mbar %p : !p
  return %b : !kvpipe.mbarrier
}

// CHECK-LABEL: func.func @consumer_current_slot
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %{{.*}}[1]
//       CHECK:   %[[MUL:.*]] = llvm.mul %[[IDX]], %{{.*}} : i32
//       CHECK:   %[[S:.*]] = llvm.mlir.constant(6 : i32) : i32
//       CHECK:   %[[OFF:.*]] = llvm.add %[[MUL]], %[[S]] : i32
//       CHECK:   llvm.getelementptr %{{.*}}[%[[OFF]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
func.func @consumer_current_slot(%p: !p) -> !kvpipe.mbarrier {
  %b = kvpipe.consumer_mbar %p stage 0 : !p
  return %b : !kvpipe.mbarrier
}

// An explicit slot index replaces the state's, truncated to i32.
// CHECK-LABEL: func.func @consumer_explicit_slot
//  CHECK-SAME: (%[[P:.*]]: !llvm.struct<(ptr<3>, i32, i32)>, %[[I:.*]]: index)
//       CHECK:   %[[I64:.*]] = builtin.unrealized_conversion_cast %[[I]] : index to i64
//       CHECK:   %[[BARS:.*]] = llvm.extractvalue %[[P]][0]
//       CHECK:   %[[SLOT:.*]] = llvm.trunc %[[I64]] : i64 to i32
//       CHECK:   %[[QK:.*]] = llvm.mlir.constant(2 : i32) : i32
//       CHECK:   %[[MUL:.*]] = llvm.mul %[[SLOT]], %[[QK]] : i32
//       CHECK:   %[[C:.*]] = llvm.mlir.constant(7 : i32) : i32
//       CHECK:   %[[OFF:.*]] = llvm.add %[[MUL]], %[[C]] : i32
//       CHECK:   llvm.getelementptr %[[BARS]][%[[OFF]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
func.func @consumer_explicit_slot(%p: !p, %i: index) -> !kvpipe.mbarrier {
  %b = kvpipe.consumer_mbar %p [%i] : !p
  return %b : !kvpipe.mbarrier
}

// -----

// qk_stages = 1: the index is the slot (times 1), consumers start at kv_stages.
!p = !kvpipe.pipeline<kv_stages = 4, qk_stages = 1, producers = 1, consumers = 2>

// CHECK-LABEL: func.func @single_stage
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %{{.*}}[1]
//       CHECK:   %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   %[[P:.*]] = llvm.mul %[[IDX]], %[[ONE]] : i32
//       CHECK:   %[[PB:.*]] = llvm.getelementptr %{{.*}}[%[[P]]]
//       CHECK:   %[[IDX2:.*]] = llvm.extractvalue %{{.*}}[1]
//       CHECK:   %[[M:.*]] = llvm.mul %[[IDX2]], %{{.*}} : i32
//       CHECK:   %[[FOUR:.*]] = llvm.mlir.constant(4 : i32) : i32
//       CHECK:   %[[C:.*]] = llvm.add %[[M]], %[[FOUR]] : i32
//       CHECK:   %[[CB:.*]] = llvm.getelementptr %{{.*}}[%[[C]]]
//       CHECK:   return %[[PB]], %[[CB]]
func.func @single_stage(%p: !p) -> (!kvpipe.mbarrier, !kvpipe.mbarrier) {
  %a = kvpipe.producer_mbar %p : !p
  %b = kvpipe.consumer_mbar %p : !p
  return %a, %b : !kvpipe.mbarrier, !kvpipe.mbarrier
}
