// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm | FileCheck %s

// kvpipe.consumer_release: the threads whose %e is true arrive on the
// consumer barrier of the current slot's sub-stage (under scf.if %e); the
// result is the stepped state at the last sub-stage and the same state
// otherwise. The input uses no scf itself: the pass must load the dialect.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

// CHECK-LABEL: func.func @release_last_stage
//  CHECK-SAME: (%[[P:.*]]: !llvm.struct<(ptr<3>, i32, i32)>, %[[E:.*]]: i1)
//       CHECK:   %[[BARS:.*]] = llvm.extractvalue %[[P]][0]
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %[[P]][1]
//       CHECK:   %[[PHASE:.*]] = llvm.extractvalue %[[P]][2]
//       CHECK:   %[[MUL:.*]] = llvm.mul %[[IDX]], %{{.*}} : i32
// Consumer barrier of sub-stage 1: 2 * index + 1 + 4.
//       CHECK:   %[[C5:.*]] = llvm.mlir.constant(5 : i32) : i32
//       CHECK:   %[[OFF:.*]] = llvm.add %[[MUL]], %[[C5]] : i32
//       CHECK:   %[[BAR:.*]] = llvm.getelementptr %[[BARS]][%[[OFF]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
//       CHECK:   scf.if %[[E]] {
//  CHECK-NEXT:     nvvm.mbarrier.arrive %[[BAR]] : !llvm.ptr<3>
//  CHECK-NEXT:   }
//       CHECK:   %[[NEXT:.*]] = llvm.add %[[IDX]], %{{.*}} : i32
//       CHECK:   %[[KV:.*]] = llvm.mlir.constant(2 : i32) : i32
//       CHECK:   %[[WRAP:.*]] = llvm.icmp "eq" %[[NEXT]], %[[KV]] : i32
//       CHECK:   %[[FLIP:.*]] = llvm.xor %[[PHASE]], %{{.*}} : i32
//       CHECK:   %[[NIDX:.*]] = llvm.select %[[WRAP]], %{{.*}}, %[[NEXT]] : i1, i32
//       CHECK:   %[[NPHASE:.*]] = llvm.select %[[WRAP]], %[[FLIP]], %[[PHASE]] : i1, i32
//       CHECK:   %[[S0:.*]] = llvm.insertvalue %[[BARS]], %{{.*}}[0]
//       CHECK:   %[[S1:.*]] = llvm.insertvalue %[[NIDX]], %[[S0]][1]
//       CHECK:   %[[S2:.*]] = llvm.insertvalue %[[NPHASE]], %[[S1]][2]
//       CHECK:   return %[[S2]]
func.func @release_last_stage(%p: !p, %e: i1) -> !p {
  %q = kvpipe.consumer_release %p, %e : !p
  return %q : !p
}

// Sub-stage 0 of 2: arrive, but the state is not stepped.
// CHECK-LABEL: func.func @release_first_stage
//  CHECK-SAME: (%[[P:.*]]: !llvm.struct<(ptr<3>, i32, i32)>, %[[E:.*]]: i1)
//       CHECK:   %[[BARS:.*]] = llvm.extractvalue %[[P]][0]
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %[[P]][1]
//       CHECK:   %[[PHASE:.*]] = llvm.extractvalue %[[P]][2]
//       CHECK:   %[[MUL:.*]] = llvm.mul %[[IDX]], %{{.*}} : i32
//       CHECK:   %[[C4:.*]] = llvm.mlir.constant(4 : i32) : i32
//       CHECK:   %[[OFF:.*]] = llvm.add %[[MUL]], %[[C4]] : i32
//       CHECK:   %[[BAR:.*]] = llvm.getelementptr %[[BARS]][%[[OFF]]]
//       CHECK:   scf.if %[[E]] {
//  CHECK-NEXT:     nvvm.mbarrier.arrive %[[BAR]] : !llvm.ptr<3>
//  CHECK-NEXT:   }
//   CHECK-NOT:   llvm.select
//   CHECK-NOT:   llvm.icmp
//       CHECK:   %[[S0:.*]] = llvm.insertvalue %[[BARS]], %{{.*}}[0]
//       CHECK:   %[[S1:.*]] = llvm.insertvalue %[[IDX]], %[[S0]][1]
//       CHECK:   %[[S2:.*]] = llvm.insertvalue %[[PHASE]], %[[S1]][2]
//       CHECK:   return %[[S2]]
func.func @release_first_stage(%p: !p, %e: i1) -> !p {
  %q = kvpipe.consumer_release %p, %e stage 0 : !p
  return %q : !p
}

// The two sub-stages in order: the second release steps what the first
// returned.
// CHECK-LABEL: func.func @release_both
//       CHECK:   scf.if
//       CHECK:   nvvm.mbarrier.arrive
//   CHECK-NOT:   llvm.select
//       CHECK:   scf.if
//       CHECK:   nvvm.mbarrier.arrive
//       CHECK:   llvm.select
//       CHECK:   llvm.select
//   CHECK-NOT:   llvm.select
//       CHECK:   return
func.func @release_both(%p: !p, %e: i1) -> !p {
  %a = kvpipe.consumer_release %p, %e stage 0 : !p
  %b = kvpipe.consumer_release %a, %e stage 1 : !p
  return %b : !p
}
