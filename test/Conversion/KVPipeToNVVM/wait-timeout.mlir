// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm=wait-timeout=1000 | FileCheck %s
// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm=wait-timeout=1000 | FileCheck %s --check-prefix=NOSCF
// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm | FileCheck %s --check-prefix=NOTIMEOUT

// wait-timeout (debug): every wait becomes a call of a helper function of
// its own (internal, always inlined) that loops on try_wait and, once more
// than the given cycles (clock64) have passed, prints which op (name and
// location) hung, in which block and thread, on which barrier, slot, stage
// and parity, and traps. The loop is LLVM blocks in the helper, not
// scf.while/scf.if at the wait: the wait may sit in a single-block region.
// Off (the default), a wait is one nvvm.mbarrier.try_wait.parity and
// nothing else.

// NOSCF-NOT: scf.
// NOTIMEOUT-NOT: __kvpipe_wait_timeout

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

// The helper of the first wait, before the function that holds it.
// CHECK-LABEL: gpu.module @m
//       CHECK: llvm.func internal @[[WAIT0:__kvpipe_wait_timeout_0]](%[[BAR:.*]]: !llvm.ptr<3>, %[[PARITY:.*]]: i32, %[[SLOT:.*]]: i32) attributes {always_inline} {
//       CHECK:   %[[START:.*]] = nvvm.read.ptx.sreg.clock64 : i64
//       CHECK:   llvm.br ^[[LOOP:.*]]
//       CHECK: ^[[LOOP]]:
//       CHECK:   %[[DONE:.*]] = nvvm.mbarrier.try_wait %[[BAR]], %[[PARITY]] : !llvm.ptr<3>, i32 -> i1
//       CHECK:   llvm.cond_br %[[DONE]], ^[[EXIT:.*]], ^[[CHECK:.*]]
//       CHECK: ^[[CHECK]]:
//       CHECK:   %[[NOW:.*]] = nvvm.read.ptx.sreg.clock64 : i64
//       CHECK:   %[[EL:.*]] = llvm.sub %[[NOW]], %[[START]] : i64
//       CHECK:   %[[LIMIT:.*]] = llvm.mlir.constant(1000 : i64) : i64
//       CHECK:   %[[EXP:.*]] = llvm.icmp "ugt" %[[EL]], %[[LIMIT]] : i64
//       CHECK:   llvm.cond_br %[[EXP]], ^[[REPORT:.*]], ^[[LOOP]]
//       CHECK: ^[[REPORT]]:
//       CHECK:   %[[BX:.*]] = nvvm.read.ptx.sreg.ctaid.x : i32
//       CHECK:   %[[BY:.*]] = nvvm.read.ptx.sreg.ctaid.y : i32
//       CHECK:   %[[BZ:.*]] = nvvm.read.ptx.sreg.ctaid.z : i32
//       CHECK:   %[[TX:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// The producer barrier of sub-stage 1: 2 * index + 1.
//       CHECK:   %[[M:.*]] = llvm.mul %[[SLOT]], %{{.*}} : i32
//       CHECK:   %[[BI:.*]] = llvm.add %[[M]], %{{.*}} : i32
//       CHECK:   gpu.printf "kvpipe: consumer_wait at loc({{.*}}wait-timeout.mlir\22:[[@LINE+23]]:5): no arrival after 1000 cycles in block (%u,%u,%u) thread %u: producer barrier %d (slot %d stage 1) parity %d\0A", %[[BX]], %[[BY]], %[[BZ]], %[[TX]], %[[BI]], %[[SLOT]], %[[PARITY]] : i32, i32, i32, i32, i32, i32, i32
//  CHECK-NEXT:   llvm.intr.trap
//  CHECK-NEXT:   llvm.unreachable
//       CHECK: ^[[EXIT]]:
//  CHECK-NEXT:   llvm.return
//       CHECK: }
// At the wait: one call with the barrier, the parity and the slot.
// CHECK-LABEL: gpu.func @consumer
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %{{.*}}[1]
//       CHECK:   %[[PHASE:.*]] = llvm.extractvalue %{{.*}}[2]
//       CHECK:   %[[ADDR:.*]] = llvm.getelementptr
//       CHECK:   llvm.call @[[WAIT0]](%[[ADDR]], %[[PHASE]], %[[IDX]]) : (!llvm.ptr<3>, i32, i32) -> ()
//   CHECK-NOT:   nvvm.mbarrier.try_wait.parity
//       CHECK:   gpu.return
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
//       CHECK: llvm.func internal @[[WAIT1:__kvpipe_wait_timeout_1]](%{{.*}}: !llvm.ptr<3>, %[[PARITY:.*]]: i32, %[[SLOT:.*]]: i32)
//       CHECK:   nvvm.mbarrier.try_wait %{{.*}}, %[[PARITY]] : !llvm.ptr<3>, i32 -> i1
//       CHECK:   %[[M:.*]] = llvm.mul %[[SLOT]], %{{.*}} : i32
//       CHECK:   %[[C4:.*]] = llvm.mlir.constant(4 : i32) : i32
//       CHECK:   %[[BI:.*]] = llvm.add %[[M]], %[[C4]] : i32
//       CHECK:   gpu.printf "kvpipe: producer_acquire at loc({{.*}}wait-timeout.mlir\22:[[@LINE+11]]:5): no arrival after 1000 cycles in block (%u,%u,%u) thread %u: consumer barrier %d (slot %d stage 0) parity %d\0A", %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[BI]], %[[SLOT]], %[[PARITY]]
//       CHECK:   llvm.intr.trap
// CHECK-LABEL: gpu.func @producer
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %{{.*}}[1]
//       CHECK:   %[[PHASE:.*]] = llvm.extractvalue %{{.*}}[2]
//       CHECK:   %[[XOR:.*]] = llvm.xor %[[PHASE]], %{{.*}} : i32
//       CHECK:   llvm.call @[[WAIT1]](%{{.*}}, %[[XOR]], %[[IDX]])
// NOTIMEOUT-LABEL: gpu.func @producer
//       NOTIMEOUT:   nvvm.mbarrier.try_wait.parity
//   NOTIMEOUT-NOT:   gpu.printf
  gpu.func @producer(%p: !p) {
    kvpipe.producer_acquire %p stage 0 : !p
    gpu.return
  }
}
