// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm | FileCheck %s
// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm | FileCheck %s --check-prefix=NOSCF

// kvpipe.consumer_release: the threads whose %e is true arrive on the
// consumer barrier of the current slot's sub-stage, by one PTX instruction
// predicated on %e (no scf.if: the release may sit in a single-block region,
// and one scf.if per release made scf-to-cf quadratic); the result is the
// stepped state at the last sub-stage and the same state otherwise. A
// constant %e gives the plain NVVM arrive, or none.

// NOSCF-NOT: scf.

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
//  CHECK-NEXT:   nvvm.inline_ptx "mbarrier.arrive.shared.b64 _, [$0];" ro(%[[BAR]] : !llvm.ptr<3>), predicate = %[[E]]
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
//  CHECK-NEXT:   nvvm.inline_ptx "mbarrier.arrive.shared.b64 _, [$0];" ro(%[[BAR]] : !llvm.ptr<3>), predicate = %[[E]]
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
//       CHECK:   nvvm.inline_ptx "mbarrier.arrive
//   CHECK-NOT:   llvm.select
//       CHECK:   nvvm.inline_ptx "mbarrier.arrive
//       CHECK:   llvm.select
//       CHECK:   llvm.select
//   CHECK-NOT:   llvm.select
//       CHECK:   return
func.func @release_both(%p: !p, %e: i1) -> !p {
  %a = kvpipe.consumer_release %p, %e stage 0 : !p
  %b = kvpipe.consumer_release %a, %e stage 1 : !p
  return %b : !p
}

// Every thread releases (a constant true): the NVVM op, unpredicated.
// CHECK-LABEL: func.func @release_all
//       CHECK:   %[[BAR:.*]] = llvm.getelementptr
//  CHECK-NEXT:   nvvm.mbarrier.arrive %[[BAR]] : !llvm.ptr<3>
//   CHECK-NOT:   nvvm.inline_ptx
//       CHECK:   return
func.func @release_all(%p: !p) -> !p {
  %true = arith.constant true
  %q = kvpipe.consumer_release %p, %true : !p
  return %q : !p
}

// No thread releases (a constant false): no arrival, the state is stepped.
// CHECK-LABEL: func.func @release_none
//   CHECK-NOT:   nvvm.mbarrier.arrive
//   CHECK-NOT:   nvvm.inline_ptx
//       CHECK:   llvm.select
//       CHECK:   return
func.func @release_none(%p: !p) -> !p {
  %false = arith.constant false
  %q = kvpipe.consumer_release %p, %false : !p
  return %q : !p
}

// Many releases in one block stay in that block: nothing to split.
// CHECK-LABEL: func.func @release_chain
//  CHECK-COUNT-4:   nvvm.inline_ptx "mbarrier.arrive.shared.b64 _, [$0];"
//   CHECK-NOT:   ^bb
//       CHECK:   return
func.func @release_chain(%p: !p, %e: i1) -> !p {
  %a = kvpipe.consumer_release %p, %e stage 0 : !p
  %b = kvpipe.consumer_release %a, %e stage 1 : !p
  %c = kvpipe.consumer_release %b, %e stage 0 : !p
  %d = kvpipe.consumer_release %c, %e stage 1 : !p
  return %d : !p
}
