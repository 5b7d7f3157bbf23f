// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm | FileCheck %s

// kvpipe.tma_store: cp.async.bulk.tensor from this CTA's shared memory to the
// tensor map's box (bulk-group completion), coordinates innermost-first i32.

!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @store
//  CHECK-SAME: (%[[MAP:.*]]: !llvm.ptr, %[[T:.*]]: memref<64x64xbf16, #gpu.address_space<workgroup>>, %[[H:.*]]: index, %[[R:.*]]: index, %[[C:.*]]: index)
//   CHECK-DAG:   %[[C64:.*]] = builtin.unrealized_conversion_cast %[[C]] : index to i64
//   CHECK-DAG:   %[[R64:.*]] = builtin.unrealized_conversion_cast %[[R]] : index to i64
//   CHECK-DAG:   %[[H64:.*]] = builtin.unrealized_conversion_cast %[[H]] : index to i64
//       CHECK:   %[[SRC:.*]] = llvm.getelementptr %{{.*}} : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, bf16
//       CHECK:   %[[X0:.*]] = llvm.trunc %[[C64]] : i64 to i32
//       CHECK:   %[[X1:.*]] = llvm.trunc %[[R64]] : i64 to i32
//       CHECK:   %[[X2:.*]] = llvm.trunc %[[H64]] : i64 to i32
//       CHECK:   nvvm.cp.async.bulk.tensor.global.shared.cta %[[MAP]], %[[SRC]], box[%[[X0]], %[[X1]], %[[X2]]] : !llvm.ptr, <3>
//   CHECK-NOT:   nvvm.cp.async.bulk.commit.group
//       CHECK:   return
func.func @store(%map: !map, %t: !tile, %h: index, %r: index, %c: index) {
  kvpipe.tma_store %t, %map[%h, %r, %c] : !tile, !map
  return
}

// The epilogue around it is upstream NVVM, untouched.
// CHECK-LABEL: func.func @epilogue
//       CHECK:   nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
//       CHECK:   nvvm.cp.async.bulk.tensor.global.shared.cta
//       CHECK:   nvvm.cp.async.bulk.commit.group
//       CHECK:   nvvm.cp.async.bulk.wait_group 0
func.func @epilogue(%map: !map, %t: !tile, %i: index) {
  nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
  kvpipe.tma_store %t, %map[%i, %i, %i] : !tile, !map
  nvvm.cp.async.bulk.commit.group
  nvvm.cp.async.bulk.wait_group 0
  return
}
