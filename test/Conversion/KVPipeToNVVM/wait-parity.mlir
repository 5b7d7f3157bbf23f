// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm | FileCheck %s

// The phase convention: producer_acquire waits on the consumer ("empty")
// barrier of the current slot with parity phase ^ 1, so a fresh producer
// passes its first kv_stages acquires; consumer_wait waits on the producer
// ("full") barrier with parity phase. Without wait-timeout each wait is one
// nvvm.mbarrier.try_wait.parity (which loops by itself) and nothing else.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

// CHECK-LABEL: func.func @producer_acquire
//  CHECK-SAME: (%[[P:.*]]: !llvm.struct<(ptr<3>, i32, i32)>)
//       CHECK:   %[[BARS:.*]] = llvm.extractvalue %[[P]][0]
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %[[P]][1]
//       CHECK:   %[[PHASE:.*]] = llvm.extractvalue %[[P]][2]
//       CHECK:   %[[QK:.*]] = llvm.mlir.constant(2 : i32) : i32
//       CHECK:   %[[MUL:.*]] = llvm.mul %[[IDX]], %[[QK]] : i32
// Consumer barrier of sub-stage 0: + num_stages (4).
//       CHECK:   %[[C4:.*]] = llvm.mlir.constant(4 : i32) : i32
//       CHECK:   %[[OFF:.*]] = llvm.add %[[MUL]], %[[C4]] : i32
//       CHECK:   %[[BAR:.*]] = llvm.getelementptr %[[BARS]][%[[OFF]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
//       CHECK:   %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   %[[PARITY:.*]] = llvm.xor %[[PHASE]], %[[ONE]] : i32
//       CHECK:   nvvm.mbarrier.try_wait.parity %[[BAR]], %[[PARITY]], %{{.*}} : !llvm.ptr<3>, i32, i32
//   CHECK-NOT:   nvvm.mbarrier.try_wait
//   CHECK-NOT:   gpu.printf
//   CHECK-NOT:   scf.while
//       CHECK:   return
func.func @producer_acquire(%p: !p) {
  kvpipe.producer_acquire %p stage 0 : !p
  return
}

// CHECK-LABEL: func.func @producer_acquire_last_stage
//       CHECK:   %[[PHASE:.*]] = llvm.extractvalue %{{.*}}[2]
// Consumer barrier of sub-stage 1 (the default): 4 + 1.
//       CHECK:   %[[C5:.*]] = llvm.mlir.constant(5 : i32) : i32
//       CHECK:   %[[OFF:.*]] = llvm.add %{{.*}}, %[[C5]] : i32
//       CHECK:   %[[BAR:.*]] = llvm.getelementptr %{{.*}}[%[[OFF]]]
//       CHECK:   %[[PARITY:.*]] = llvm.xor %[[PHASE]], %{{.*}} : i32
//       CHECK:   nvvm.mbarrier.try_wait.parity %[[BAR]], %[[PARITY]]
func.func @producer_acquire_last_stage(%p: !p) {
  kvpipe.producer_acquire %p : !p
  return
}

// CHECK-LABEL: func.func @consumer_wait
//  CHECK-SAME: (%[[P:.*]]: !llvm.struct<(ptr<3>, i32, i32)>)
//       CHECK:   %[[BARS:.*]] = llvm.extractvalue %[[P]][0]
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %[[P]][1]
//       CHECK:   %[[PHASE:.*]] = llvm.extractvalue %[[P]][2]
//       CHECK:   %[[MUL:.*]] = llvm.mul %[[IDX]], %{{.*}} : i32
// Producer barrier of sub-stage 1: no num_stages offset.
//       CHECK:   %[[C1:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   %[[OFF:.*]] = llvm.add %[[MUL]], %[[C1]] : i32
//       CHECK:   %[[BAR:.*]] = llvm.getelementptr %[[BARS]][%[[OFF]]]
//   CHECK-NOT:   llvm.xor
//       CHECK:   nvvm.mbarrier.try_wait.parity %[[BAR]], %[[PHASE]], %{{.*}} : !llvm.ptr<3>, i32, i32
//   CHECK-NOT:   gpu.printf
//       CHECK:   return
func.func @consumer_wait(%p: !p) {
  kvpipe.consumer_wait %p stage 1 : !p
  return
}

// CHECK-LABEL: func.func @consumer_wait_stage0
//       CHECK:   %[[BARS:.*]] = llvm.extractvalue %{{.*}}[0]
//       CHECK:   %[[PHASE:.*]] = llvm.extractvalue %{{.*}}[2]
//       CHECK:   %[[OFF:.*]] = llvm.mul
//  CHECK-NEXT:   %[[BAR:.*]] = llvm.getelementptr %[[BARS]][%[[OFF]]]
//  CHECK-NEXT:   %{{.*}} = llvm.mlir.constant
//  CHECK-NEXT:   nvvm.mbarrier.try_wait.parity %[[BAR]], %[[PHASE]]
func.func @consumer_wait_stage0(%p: !p) {
  kvpipe.consumer_wait %p stage 0 : !p
  return
}
