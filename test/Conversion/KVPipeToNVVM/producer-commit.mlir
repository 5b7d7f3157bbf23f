// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file | FileCheck %s

// kvpipe.producer_commit: with TMA loads completing on the slot's producer
// barrier, one nvvm.mbarrier.arrive.expect_tx with the bytes their boxes
// deliver, summed by the compiler; without, a plain nvvm.mbarrier.arrive.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!k = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
!s = !kvpipe.tensor_map<box = [16, 32], element_type = f32, swizzle = 0>
!kt = memref<128x64xbf16, #gpu.address_space<workgroup>>
!st = memref<16x32xf32, #gpu.address_space<workgroup>>

// 128*64*2 + 16*32*4 = 16384 + 2048.
// CHECK-LABEL: func.func @several_loads
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %{{.*}}[1]
//       CHECK:   %[[OFF:.*]] = llvm.mul %[[IDX]], %{{.*}} : i32
//       CHECK:   %[[BAR:.*]] = llvm.getelementptr %{{.*}}[%[[OFF]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
//       CHECK:   %[[TX:.*]] = llvm.mlir.constant(18432 : i32) : i32
//       CHECK:   nvvm.mbarrier.arrive.expect_tx %[[BAR]], %[[TX]] : !llvm.ptr<3>, i32
//   CHECK-NOT:   nvvm.mbarrier.arrive
//       CHECK:   return
func.func @several_loads(%p: !p, %k: !k, %s: !s, %kt: !kt, %st: !st, %i: index) {
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  kvpipe.tma_load %k[%i, %i, %i], %kt, %b : !k, !kt
  kvpipe.tma_load %s[%i, %i], %st, %b : !s, !st
  kvpipe.producer_commit %p : !p
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!kt = memref<64x64xbf16, #gpu.address_space<workgroup>>

// A load in loops of constant trip count is counted once per iteration:
// 3 * 2 * 8192 + 8192 (a trip count of ceil(10 / 4) = 3 outside, 2 inside).
// CHECK-LABEL: func.func @loops
//       CHECK:   scf.for
//       CHECK:     scf.for
//       CHECK:       nvvm.cp.async.bulk.tensor.shared.cluster.global
//       CHECK:   %[[TX:.*]] = llvm.mlir.constant(57344 : i32) : i32
//       CHECK:   nvvm.mbarrier.arrive.expect_tx %{{.*}}, %[[TX]] : !llvm.ptr<3>, i32
func.func @loops(%p: !p, %k: !k, %kt: !kt, %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c10 = arith.constant 10 : index
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  scf.for %j = %c0 to %c10 step %c4 {
    scf.for %l = %c0 to %c2 step %c1 {
      kvpipe.tma_load %k[%j, %l], %kt, %b : !k, !kt
    }
  }
  kvpipe.producer_commit %p : !p
  return
}

// A loop that never runs issues nothing: a plain arrive.
// CHECK-LABEL: func.func @empty_loop
//   CHECK-NOT:   nvvm.mbarrier.arrive.expect_tx
//       CHECK:   nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
func.func @empty_loop(%p: !p, %k: !k, %kt: !kt, %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  scf.for %j = %c1 to %c0 step %c1 {
    kvpipe.tma_load %k[%j, %i], %kt, %b : !k, !kt
  }
  kvpipe.producer_commit %p : !p
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!kt = memref<64x64xbf16, #gpu.address_space<workgroup>>

// expect_tx may come before the copies: the loads between the commit and the
// state's next step count too; those of the next slot (after the step, on
// the stepped state) and of the previous one (before the acquire) do not.
// CHECK-LABEL: func.func @before_and_after
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global
//       CHECK:   %[[TX:.*]] = llvm.mlir.constant(24576 : i32) : i32
//       CHECK:   nvvm.mbarrier.arrive.expect_tx %{{.*}}, %[[TX]] : !llvm.ptr<3>, i32
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global
//       CHECK:   nvvm.mbarrier.try_wait.parity
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global
//       CHECK:   %[[TX2:.*]] = llvm.mlir.constant(8192 : i32) : i32
//       CHECK:   nvvm.mbarrier.arrive.expect_tx %{{.*}}, %[[TX2]] : !llvm.ptr<3>, i32
func.func @before_and_after(%p: !p, %k: !k, %kt: !kt, %i: index, %old: !kvpipe.mbarrier) -> !p {
  // The previous slot's barrier: not this commit's.
  kvpipe.tma_load %k[%i, %i], %kt, %old : !k, !kt
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  kvpipe.producer_commit %p : !p
  kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  %q = kvpipe.step %p : !p
  kvpipe.producer_acquire %q : !p
  %c = kvpipe.producer_mbar %q : !p
  kvpipe.tma_load %k[%i, %i], %kt, %c : !k, !kt
  kvpipe.producer_commit %q : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>
!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!v = !kvpipe.tensor_map<box = [32, 64], element_type = bf16, swizzle = 128>
!kt = memref<64x64xbf16, #gpu.address_space<workgroup>>
!vt = memref<32x64xbf16, #gpu.address_space<workgroup>>

// Each sub-stage commits the loads on its own barrier: 8192 bytes on
// mbar[2 * index + 0], 4096 on mbar[2 * index + 1]. Loads on a consumer
// barrier are not the producer's.
// CHECK-LABEL: func.func @sub_stages
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global
//       CHECK:   %[[I0:.*]] = llvm.extractvalue %{{.*}}[1]
//       CHECK:   %[[O0:.*]] = llvm.mul %[[I0]], %{{.*}} : i32
//       CHECK:   %[[B0:.*]] = llvm.getelementptr %{{.*}}[%[[O0]]]
//       CHECK:   %[[T0:.*]] = llvm.mlir.constant(8192 : i32) : i32
//       CHECK:   nvvm.mbarrier.arrive.expect_tx %[[B0]], %[[T0]]
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global
//       CHECK:   %[[I1:.*]] = llvm.extractvalue %{{.*}}[1]
//       CHECK:   %[[M1:.*]] = llvm.mul %[[I1]], %{{.*}} : i32
//       CHECK:   %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   %[[O1:.*]] = llvm.add %[[M1]], %[[ONE]] : i32
//       CHECK:   %[[B1:.*]] = llvm.getelementptr %{{.*}}[%[[O1]]]
//       CHECK:   %[[T1:.*]] = llvm.mlir.constant(4096 : i32) : i32
//       CHECK:   nvvm.mbarrier.arrive.expect_tx %[[B1]], %[[T1]]
func.func @sub_stages(%p: !p, %k: !k, %v: !v, %kt: !kt, %vt: !vt, %i: index) -> !p {
  kvpipe.producer_acquire %p stage 0 : !p
  %b0 = kvpipe.producer_mbar %p stage 0 : !p
  %c0 = kvpipe.consumer_mbar %p stage 0 : !p
  kvpipe.tma_load %k[%i, %i], %kt, %b0 : !k, !kt
  kvpipe.tma_load %k[%i, %i], %kt, %c0 : !k, !kt
  kvpipe.producer_commit %p stage 0 : !p
  kvpipe.producer_acquire %p stage 1 : !p
  %b1 = kvpipe.producer_mbar %p stage 1 : !p
  kvpipe.tma_load %v[%i, %i], %vt, %b1 : !v, !vt
  kvpipe.producer_commit %p stage 1 : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

// Producers that fill a slot with ordinary stores: each arrives once with a
// plain arrive (no transaction count), producers = 128 of them.
!p = !kvpipe.pipeline<kv_stages = 3, qk_stages = 1, producers = 128, consumers = 2>

// CHECK-LABEL: func.func @plain_arrive
//  CHECK-SAME: (%[[P:.*]]: !llvm.struct<(ptr<3>, i32, i32)>)
//       CHECK:   nvvm.mbarrier.try_wait.parity
//       CHECK:   %[[BARS:.*]] = llvm.extractvalue %[[P]][0]
//       CHECK:   %[[IDX:.*]] = llvm.extractvalue %[[P]][1]
//       CHECK:   %[[OFF:.*]] = llvm.mul %[[IDX]], %{{.*}} : i32
//       CHECK:   %[[BAR:.*]] = llvm.getelementptr %[[BARS]][%[[OFF]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
//  CHECK-NEXT:   nvvm.mbarrier.arrive %[[BAR]] : !llvm.ptr<3>
//   CHECK-NOT:   expect_tx
//       CHECK:   return
func.func @plain_arrive(%p: !p) {
  kvpipe.producer_acquire %p : !p
  kvpipe.producer_commit %p : !p
  return
}

// -----

// Loads on another pipeline's barrier are that pipeline's.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!kt = memref<64x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @two_pipelines
//       CHECK:   %[[T1:.*]] = llvm.mlir.constant(8192 : i32) : i32
//       CHECK:   nvvm.mbarrier.arrive.expect_tx %{{.*}}, %[[T1]]
//       CHECK:   %[[T2:.*]] = llvm.mlir.constant(16384 : i32) : i32
//       CHECK:   nvvm.mbarrier.arrive.expect_tx %{{.*}}, %[[T2]]
func.func @two_pipelines(%p: !p, %q: !p, %k: !k, %kt: !kt, %i: index) {
  kvpipe.producer_acquire %p : !p
  kvpipe.producer_acquire %q : !p
  %bp = kvpipe.producer_mbar %p : !p
  %bq = kvpipe.producer_mbar %q : !p
  kvpipe.tma_load %k[%i, %i], %kt, %bp : !k, !kt
  kvpipe.tma_load %k[%i, %i], %kt, %bq : !k, !kt
  kvpipe.tma_load %k[%i, %i], %kt, %bq : !k, !kt
  kvpipe.producer_commit %p : !p
  kvpipe.producer_commit %q : !p
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!k = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!kt = memref<64x64xbf16, #gpu.address_space<workgroup>>

// Loads a helper issues on the barrier passed to it are counted at the
// call: 2 * 8192 (twice in the helper) * 3 (a loop of three calls) + 8192
// (a helper calling the first once through another argument position).
// CHECK-LABEL: func.func @loads_in_helpers
//       CHECK:   %[[TX:.*]] = llvm.mlir.constant(57344 : i32) : i32
//       CHECK:   nvvm.mbarrier.arrive.expect_tx %{{.*}}, %[[TX]] : !llvm.ptr<3>, i32
func.func @loads_in_helpers(%p: !p, %k: !k, %kt: !kt, %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  scf.for %j = %c0 to %c3 step %c1 {
    func.call @load2(%k, %i, %kt, %b) : (!k, index, !kt, !kvpipe.mbarrier) -> ()
  }
  func.call @load1(%b, %k, %kt) : (!kvpipe.mbarrier, !k, !kt) -> ()
  kvpipe.producer_commit %p : !p
  return
}
func.func private @load2(%k: !k, %i: index, %kt: !kt, %b: !kvpipe.mbarrier) {
  kvpipe.tma_load %k[%i, %i, %i], %kt, %b : !k, !kt
  kvpipe.tma_load %k[%i, %i, %i], %kt, %b : !k, !kt
  return
}
func.func private @load1(%b: !kvpipe.mbarrier, %k: !k, %kt: !kt) {
  %c0 = arith.constant 0 : index
  kvpipe.tma_load %k[%c0, %c0, %c0], %kt, %b : !k, !kt
  return
}
