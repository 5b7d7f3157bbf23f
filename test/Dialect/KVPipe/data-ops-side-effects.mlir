// RUN: kvpipe-opt %s -canonicalize -cse | FileCheck %s

// The data-path ops read and write memory (shared tiles, accumulators in
// flight): CSE and canonicalisation neither merge identical copies and
// matrix products nor drop them when their results are unused. The
// warpgroup id is pure: merged like any pure op.

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<8x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func @data_ops_survive
//       CHECK:   kvpipe.tma_load
//       CHECK:   kvpipe.tma_load
//       CHECK:   kvpipe.tma_store
//       CHECK:   kvpipe.tma_store
//       CHECK:   kvpipe.warpgroup_mma
//       CHECK:   kvpipe.warpgroup_mma
//       CHECK:   kvpipe.warpgroup_wait {pending = 0 : i64}
//       CHECK:   kvpipe.warpgroup_wait %{{.*}} {pending = 0 : i64}
//       CHECK:   kvpipe.store_fragment
//       CHECK:   kvpipe.store_fragment
//       CHECK:   return
func.func @data_ops_survive(%m: !map, %t: !tile, %bar: !kvpipe.mbarrier, %i: index,
                            %b: !b, %h: vector<32xbf16>) {
  kvpipe.tma_load %m[%i, %i], %t, %bar : !map, !tile
  kvpipe.tma_load %m[%i, %i], %t, %bar : !map, !tile
  kvpipe.tma_store %t, %m[%i, %i] : !tile, !map
  kvpipe.tma_store %t, %m[%i, %i] : !tile, !map
  %d = kvpipe.warpgroup_mma %t, %b : !tile, !b -> vector<4xf32>
  %d2 = kvpipe.warpgroup_mma %t, %b : !tile, !b -> vector<4xf32>
  kvpipe.warpgroup_wait {pending = 0}
  %r = kvpipe.warpgroup_wait %d {pending = 0} : vector<4xf32>
  kvpipe.store_fragment %h, %t : vector<32xbf16>, !tile
  kvpipe.store_fragment %h, %t : vector<32xbf16>, !tile
  return
}

// CHECK-LABEL: func @warpgroup_id_is_pure
//       CHECK:   %[[W:.*]] = kvpipe.warpgroup_id : index
//   CHECK-NOT:   kvpipe.warpgroup_id
//       CHECK:   arith.addi %[[W]], %[[W]]
func.func @warpgroup_id_is_pure() -> index {
  %a = kvpipe.warpgroup_id : index
  %b = kvpipe.warpgroup_id : index
  %unused = kvpipe.warpgroup_id : index
  %s = arith.addi %a, %b : index
  return %s : index
}
