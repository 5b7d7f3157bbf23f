// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file | FileCheck %s

// kvpipe.tma_load: cp.async.bulk.tensor into this CTA's shared memory
// (isCTAOnly, .shared::cta destination in address space 3), coordinates
// reversed to TMA's innermost-first order and truncated to i32, completing
// on the given mbarrier; with a multicast mask the destination is the
// cluster window (address space 7) and the mask is passed through.

!map = !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = bf16, swizzle = 128>
!tile = memref<128x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @load
//  CHECK-SAME: (%[[MAP:.*]]: !llvm.ptr, %[[T:.*]]: memref<128x64xbf16, #gpu.address_space<workgroup>>, %[[BAR:.*]]: !llvm.ptr<3>, %[[B:.*]]: index, %[[H:.*]]: index, %[[R:.*]]: index, %[[C:.*]]: index)
//   CHECK-DAG:   %[[C64:.*]] = builtin.unrealized_conversion_cast %[[C]] : index to i64
//   CHECK-DAG:   %[[R64:.*]] = builtin.unrealized_conversion_cast %[[R]] : index to i64
//   CHECK-DAG:   %[[H64:.*]] = builtin.unrealized_conversion_cast %[[H]] : index to i64
//   CHECK-DAG:   %[[B64:.*]] = builtin.unrealized_conversion_cast %[[B]] : index to i64
//   CHECK-DAG:   %[[DESC:.*]] = builtin.unrealized_conversion_cast %[[T]] : memref<128x64xbf16, #gpu.address_space<workgroup>> to !llvm.struct<(ptr<3>, ptr<3>, i64, array<2 x i64>, array<2 x i64>)>
//       CHECK:   %[[ALIGNED:.*]] = llvm.extractvalue %[[DESC]][1]
//       CHECK:   %[[DST:.*]] = llvm.getelementptr %[[ALIGNED]][%{{.*}}] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, bf16
//       CHECK:   %[[X0:.*]] = llvm.trunc %[[C64]] : i64 to i32
//       CHECK:   %[[X1:.*]] = llvm.trunc %[[R64]] : i64 to i32
//       CHECK:   %[[X2:.*]] = llvm.trunc %[[H64]] : i64 to i32
//       CHECK:   %[[X3:.*]] = llvm.trunc %[[B64]] : i64 to i32
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global %[[DST]], %[[MAP]], %[[BAR]], box[%[[X0]], %[[X1]], %[[X2]], %[[X3]]] {isCTAOnly = true} : !llvm.ptr<3>, !llvm.ptr
//   CHECK-NOT:   multicast
func.func @load(%map: !map, %t: !tile, %bar: !kvpipe.mbarrier,
                %b: index, %h: index, %r: index, %c: index) {
  kvpipe.tma_load %map[%b, %h, %r, %c], %t, %bar : !map, !tile
  return
}

// CHECK-LABEL: func.func @multicast
//  CHECK-SAME: (%[[MAP:.*]]: !llvm.ptr, %[[T:.*]]: memref<128x64xbf16, #gpu.address_space<workgroup>>, %[[BAR:.*]]: !llvm.ptr<3>, %[[I:.*]]: index, %[[MASK:.*]]: i16)
//       CHECK:   %[[DST:.*]] = llvm.getelementptr %{{.*}} : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, bf16
//       CHECK:   %[[CL:.*]] = llvm.addrspacecast %[[DST]] : !llvm.ptr<3> to !llvm.ptr<7>
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global %[[CL]], %[[MAP]], %[[BAR]], box[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] multicast_mask = %[[MASK]] : !llvm.ptr<7>, !llvm.ptr
//   CHECK-NOT:   isCTAOnly
func.func @multicast(%map: !map, %t: !tile, %bar: !kvpipe.mbarrier, %i: index, %mask: i16) {
  kvpipe.tma_load %map[%i, %i, %i, %i], %t, %bar multicast %mask : !map, !tile
  return
}

// -----

// A strided view (a slot of a multi-buffer) is addressed at its offset.
!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @view
//       CHECK:   %[[SV:.*]] = memref.subview
//       CHECK:   %[[DESC:.*]] = builtin.unrealized_conversion_cast %[[SV]]
//       CHECK:   %[[ALIGNED:.*]] = llvm.extractvalue %[[DESC]][1]
//       CHECK:   %[[OFFSET:.*]] = llvm.extractvalue %[[DESC]][2]
//       CHECK:   %[[P:.*]] = llvm.getelementptr %[[ALIGNED]][%[[OFFSET]]] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, bf16
//       CHECK:   %[[DST:.*]] = llvm.getelementptr %[[P]][%{{.*}}] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, bf16
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global %[[DST]], %{{.*}}, %{{.*}}, box[%{{.*}}, %{{.*}}] {isCTAOnly = true}
func.func @view(%map: !map, %buf: memref<2x64x64xbf16, #gpu.address_space<workgroup>>,
                %bar: !kvpipe.mbarrier, %slot: index, %i: index) {
  %t = memref.subview %buf[%slot, 0, 0] [1, 64, 64] [1, 1, 1]
      : memref<2x64x64xbf16, #gpu.address_space<workgroup>> to !tile
  kvpipe.tma_load %map[%i, %i], %t, %bar : !map, !tile
  return
}

// -----

// Loads through the producer barrier of a pipeline: one cp.async per load,
// the barrier address is the producer_mbar's.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @on_pipeline
//       CHECK:   %[[BAR:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %{{.*}}, %[[BAR]], box
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %{{.*}}, %[[BAR]], box
//   CHECK-NOT:   nvvm.cp.async.bulk.tensor
func.func @on_pipeline(%p: !p, %map: !map, %t: !tile, %i: index) {
  %b = kvpipe.producer_mbar %p : !p
  kvpipe.tma_load %map[%i, %i], %t, %b : !map, !tile
  kvpipe.tma_load %map[%i, %i], %t, %b : !map, !tile
  return
}
