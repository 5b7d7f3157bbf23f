// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file | FileCheck %s

// kvpipe.bulk_load: cp.async.bulk (no tensor map) of the destination's
// bytes into this CTA's shared memory (address space 3, the .shared::cta
// form), from the global window (a generic pointer is cast to address space
// 1), completing on the given mbarrier.

!row = memref<64xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @load
//  CHECK-SAME: (%[[SRC:.*]]: !llvm.ptr, %[[ROW:.*]]: memref<64xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, %[[BAR:.*]]: !llvm.ptr<3>)
//       CHECK:   %[[DESC:.*]] = builtin.unrealized_conversion_cast %[[ROW]]
//       CHECK:   %[[ALIGNED:.*]] = llvm.extractvalue %[[DESC]][1]
//       CHECK:   %[[OFFSET:.*]] = llvm.extractvalue %[[DESC]][2]
//       CHECK:   %[[SLOT:.*]] = llvm.getelementptr %[[ALIGNED]][%[[OFFSET]]] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, f32
//       CHECK:   %[[DST:.*]] = llvm.getelementptr %[[SLOT]][%{{.*}}] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, f32
//       CHECK:   %[[GLOBAL:.*]] = llvm.addrspacecast %[[SRC]] : !llvm.ptr to !llvm.ptr<1>
//       CHECK:   %[[BYTES:.*]] = llvm.mlir.constant(256 : i32) : i32
//       CHECK:   nvvm.cp.async.bulk.shared.cluster.global %[[DST]], %[[GLOBAL]], %[[BAR]], %[[BYTES]] : !llvm.ptr<3>, <1>
func.func @load(%src: !llvm.ptr, %row: !row, %bar: !kvpipe.mbarrier) {
  kvpipe.bulk_load %src, %row, %bar : !llvm.ptr, !row
  return
}

// A global pointer is taken as is; the bytes are the whole destination's.
// CHECK-LABEL: func.func @global_source
//   CHECK-NOT:   llvm.addrspacecast
//       CHECK:   %[[BYTES:.*]] = llvm.mlir.constant(1024 : i32) : i32
//       CHECK:   nvvm.cp.async.bulk.shared.cluster.global %{{.*}}, %{{.*}}, %{{.*}}, %[[BYTES]] : !llvm.ptr<3>, <1>
func.func @global_source(%src: !llvm.ptr<1>,
                         %rows: memref<2x64xf64, #gpu.address_space<workgroup>>,
                         %bar: !kvpipe.mbarrier) {
  kvpipe.bulk_load %src, %rows, %bar : !llvm.ptr<1>, memref<2x64xf64, #gpu.address_space<workgroup>>
  return
}
