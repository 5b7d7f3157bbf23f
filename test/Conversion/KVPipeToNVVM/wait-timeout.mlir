// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm=wait-timeout=1000 | FileCheck %s
// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm | FileCheck %s --check-prefix=NOTIMEOUT

// wait-timeout (debug): every wait becomes a bounded loop of try_wait that,
// once more than the given cycles (clock64) have passed, prints which op
// (name and location) hung, in which block and thread, on which barrier,
// slot, stage and parity, and traps. Off (the default), a wait is one
// nvvm.mbarrier.try_wait.parity and nothing else.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

// CHECK-LABEL: gpu.func @consumer
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %{{.*}}[1]
//       CHECK:   %[[PHASE:.*]] = llvm.extractvalue %{{.*}}[2]
//       CHECK:   %[[BAR:.*]] = llvm.getelementptr
//       CHECK:   %[[START:.*]] = nvvm.read.ptx.sreg.clock64 : i64
//       CHECK:   scf.while : () -> () {
//       CHECK:     %[[DONE:.*]] = nvvm.mbarrier.try_wait %[[BAR]], %[[PHASE]] : !llvm.ptr<3>, i32 -> i1
//       CHECK:     %[[TRUE:.*]] = llvm.mlir.constant(true) : i1
//       CHECK:     %[[PENDING:.*]] = llvm.xor %[[DONE]], %[[TRUE]] : i1
//       CHECK:     %[[NOW:.*]] = nvvm.read.ptx.sreg.clock64 : i64
//       CHECK:     %[[EL:.*]] = llvm.sub %[[NOW]], %[[START]] : i64
//       CHECK:     %[[LIMIT:.*]] = llvm.mlir.constant(1000 : i64) : i64
//       CHECK:     %[[EXP:.*]] = llvm.icmp "ugt" %[[EL]], %[[LIMIT]] : i64
//       CHECK:     %[[HUNG:.*]] = llvm.and %[[PENDING]], %[[EXP]] : i1
//       CHECK:     scf.if %[[HUNG]] {
//       CHECK:       %[[BX:.*]] = nvvm.read.ptx.sreg.ctaid.x : i32
//       CHECK:       %[[BY:.*]] = nvvm.read.ptx.sreg.ctaid.y : i32
//       CHECK:       %[[BZ:.*]] = nvvm.read.ptx.sreg.ctaid.z : i32
//       CHECK:       %[[TX:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// The producer barrier of sub-stage 1: 2 * index + 1.
//       CHECK:       %[[M:.*]] = llvm.mul %[[IDX]], %{{.*}} : i32
//       CHECK:       %[[BI:.*]] = llvm.add %[[M]], %{{.*}} : i32
//       CHECK:       gpu.printf "kvpipe: consumer_wait at loc({{.*}}wait-timeout.mlir\22:[[@LINE+17]]:5): no arrival after 1000 cycles in block (%u,%u,%u) thread %u: producer barrier %d (slot %d stage 1) parity %d\0A", %[[BX]], %[[BY]], %[[BZ]], %[[TX]], %[[BI]], %[[IDX]], %[[PHASE]] : i32, i32, i32, i32, i32, i32, i32
//  CHECK-NEXT:       llvm.intr.trap
//  CHECK-NEXT:     }
//  CHECK-NEXT:     scf.condition(%[[PENDING]])
//  CHECK-NEXT:   } do {
//  CHECK-NEXT:     scf.yield
//  CHECK-NEXT:   }
//   CHECK-NOT:   nvvm.mbarrier.try_wait.parity
// NOTIMEOUT-LABEL: gpu.func @consumer
//       NOTIMEOUT:   nvvm.mbarrier.try_wait.parity
//   NOTIMEOUT-NOT:   gpu.printf
//   NOTIMEOUT-NOT:   scf.while
//   NOTIMEOUT-NOT:   clock64
//   NOTIMEOUT-NOT:   llvm.intr.trap
//       NOTIMEOUT:   gpu.return
gpu.module @m {
  gpu.func @consumer(%p: !p) {
    kvpipe.consumer_wait %p : !p
    gpu.return
  }

// The producer's acquire reports the consumer barrier, parity phase ^ 1.
// CHECK-LABEL: gpu.func @producer
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %{{.*}}[1]
//       CHECK:   %[[PHASE:.*]] = llvm.extractvalue %{{.*}}[2]
//       CHECK:   %[[PARITY:.*]] = llvm.xor %[[PHASE]], %{{.*}} : i32
//       CHECK:   nvvm.read.ptx.sreg.clock64
//       CHECK:   scf.while
//       CHECK:     nvvm.mbarrier.try_wait %{{.*}}, %[[PARITY]] : !llvm.ptr<3>, i32 -> i1
//       CHECK:       %[[M:.*]] = llvm.mul %[[IDX]], %{{.*}} : i32
//       CHECK:       %[[C4:.*]] = llvm.mlir.constant(4 : i32) : i32
//       CHECK:       %[[BI:.*]] = llvm.add %[[M]], %[[C4]] : i32
//       CHECK:       gpu.printf "kvpipe: producer_acquire at loc({{.*}}wait-timeout.mlir\22:[[@LINE+6]]:5): no arrival after 1000 cycles in block (%u,%u,%u) thread %u: consumer barrier %d (slot %d stage 0) parity %d\0A", %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[BI]], %[[IDX]], %[[PARITY]]
//       CHECK:       llvm.intr.trap
// NOTIMEOUT-LABEL: gpu.func @producer
//       NOTIMEOUT:   nvvm.mbarrier.try_wait.parity
//   NOTIMEOUT-NOT:   gpu.printf
  gpu.func @producer(%p: !p) {
    kvpipe.producer_acquire %p stage 0 : !p
    gpu.return
  }
}
