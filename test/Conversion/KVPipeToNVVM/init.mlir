// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm | FileCheck %s

// kvpipe.init: thread (0,0,0) initialises the producer ("full") barriers
// mbar[0 .. S) with `producers` arrivals and the consumer ("empty") barriers
// mbar[S .. 2S) with `consumers` (S = kv_stages * qk_stages = 4 here), then
// fence.mbarrier_init and a CTA barrier.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 3, consumers = 256>

// CHECK-LABEL: func.func @init
//  CHECK-SAME: (%[[P:.*]]: !llvm.struct<(ptr<3>, i32, i32)>)
//       CHECK:   %[[BARS:.*]] = llvm.extractvalue %[[P]][0]
//   CHECK-DAG:   %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
//   CHECK-DAG:   %[[TZ:.*]] = nvvm.read.ptx.sreg.tid.z : i32
//   CHECK-DAG:   %[[TY:.*]] = nvvm.read.ptx.sreg.tid.y : i32
//   CHECK-DAG:   %[[TX:.*]] = nvvm.read.ptx.sreg.tid.x : i32
//       CHECK:   %[[XY:.*]] = llvm.or %[[TX]], %[[TY]] : i32
//       CHECK:   %[[XYZ:.*]] = llvm.or %[[XY]], %[[TZ]] : i32
//       CHECK:   %[[EL:.*]] = llvm.icmp "eq" %[[XYZ]], %[[ZERO]] : i32
//   CHECK-DAG:   %[[PROD:.*]] = llvm.mlir.constant(3 : i32) : i32
//   CHECK-DAG:   %[[CONS:.*]] = llvm.mlir.constant(256 : i32) : i32
//       CHECK:   %[[B0:.*]] = llvm.getelementptr %[[BARS]][0] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i64
//       CHECK:   nvvm.mbarrier.init %[[B0]], %[[PROD]], predicate = %[[EL]] : !llvm.ptr<3>, i32, i1
//       CHECK:   %[[B1:.*]] = llvm.getelementptr %[[BARS]][1] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i64
//       CHECK:   nvvm.mbarrier.init %[[B1]], %[[PROD]], predicate = %[[EL]]
//       CHECK:   %[[B2:.*]] = llvm.getelementptr %[[BARS]][2] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i64
//       CHECK:   nvvm.mbarrier.init %[[B2]], %[[PROD]], predicate = %[[EL]]
//       CHECK:   %[[B3:.*]] = llvm.getelementptr %[[BARS]][3] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i64
//       CHECK:   nvvm.mbarrier.init %[[B3]], %[[PROD]], predicate = %[[EL]]
//       CHECK:   %[[B4:.*]] = llvm.getelementptr %[[BARS]][4] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i64
//       CHECK:   nvvm.mbarrier.init %[[B4]], %[[CONS]], predicate = %[[EL]]
//       CHECK:   %[[B5:.*]] = llvm.getelementptr %[[BARS]][5] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i64
//       CHECK:   nvvm.mbarrier.init %[[B5]], %[[CONS]], predicate = %[[EL]]
//       CHECK:   %[[B6:.*]] = llvm.getelementptr %[[BARS]][6] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i64
//       CHECK:   nvvm.mbarrier.init %[[B6]], %[[CONS]], predicate = %[[EL]]
//       CHECK:   %[[B7:.*]] = llvm.getelementptr %[[BARS]][7] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i64
//       CHECK:   nvvm.mbarrier.init %[[B7]], %[[CONS]], predicate = %[[EL]]
//   CHECK-NOT:   nvvm.mbarrier.init
//       CHECK:   nvvm.fence.mbarrier.init
//  CHECK-NEXT:   nvvm.barrier0
//  CHECK-NEXT:   return
func.func @init(%p: !p) {
  kvpipe.init %p : !p
  return
}

// A single-slot pipeline: one producer and one consumer barrier.
// CHECK-LABEL: func.func @one_slot
//       CHECK:   %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   %[[TWO:.*]] = llvm.mlir.constant(2 : i32) : i32
//       CHECK:   nvvm.mbarrier.init %{{.*}}, %[[ONE]], predicate
//       CHECK:   nvvm.mbarrier.init %{{.*}}, %[[TWO]], predicate
//   CHECK-NOT:   nvvm.mbarrier.init
//       CHECK:   nvvm.fence.mbarrier.init
func.func @one_slot(%p: !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 2>) {
  kvpipe.init %p : !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 2>
  return
}
