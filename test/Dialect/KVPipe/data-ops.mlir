// RUN: kvpipe-opt %s | FileCheck %s
// RUN: kvpipe-opt %s | kvpipe-opt | FileCheck %s
// RUN: kvpipe-opt %s -mlir-print-op-generic | kvpipe-opt | FileCheck %s
// RUN: kvpipe-opt %s -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Round trip of every data-path op and of !kvpipe.tensor_map, in the pretty
// and the generic form.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>

// CHECK-LABEL: func @tensor_map_types
//  CHECK-SAME: !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
//  CHECK-SAME: !kvpipe.tensor_map<box = [256], element_type = i8, swizzle = 0>
//  CHECK-SAME: !kvpipe.tensor_map<box = [1, 1, 1, 8, 4], element_type = f32, swizzle = 32>
//  CHECK-SAME: !kvpipe.tensor_map<box = [16, 2], element_type = f64, swizzle = 64>
//  CHECK-SAME: !kvpipe.tensor_map<box = [64, 16], element_type = f8E4M3FN, swizzle = 0>
// GENERIC-LABEL: sym_name = "tensor_map_types"
func.func @tensor_map_types(
    %a: !map,
    %b: !kvpipe.tensor_map<box = [256], element_type = i8, swizzle = 0>,
    %c: !kvpipe.tensor_map<box = [1, 1, 1, 8, 4], element_type = f32, swizzle = 32>,
    %d: !kvpipe.tensor_map<box = [16, 2], element_type = f64, swizzle = 64>,
    %e: !kvpipe.tensor_map<box = [64, 16], element_type = f8E4M3FN, swizzle = 0>) {
  return
}

// CHECK-LABEL: func @tma
//  CHECK-SAME: (%[[MAP:.*]]: !kvpipe.tensor_map<{{.*}}>, %[[I:.*]]: index, %[[T:.*]]: memref<64x64xbf16, #gpu.address_space<workgroup>>, %[[MASK:.*]]: i16)
// GENERIC-LABEL: sym_name = "tma"
func.func @tma(%map: !map, %i: index, %t: memref<64x64xbf16, #smem>, %mask: i16) {
  %p = kvpipe.create : !p
  %b = kvpipe.producer_mbar %p : !p
  // CHECK: %[[B:.*]] = kvpipe.producer_mbar
  // CHECK: kvpipe.tma_prefetch_descriptor %[[MAP]] : !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
  // GENERIC: "kvpipe.tma_prefetch_descriptor"(%{{.*}}) : (!kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>) -> ()
  kvpipe.tma_prefetch_descriptor %map : !map
  // CHECK: kvpipe.tma_load %[[MAP]][%[[I]], %[[I]], %[[I]]], %[[T]], %[[B]] : !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>, memref<64x64xbf16, #gpu.address_space<workgroup>>
  // GENERIC: "kvpipe.tma_load"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{operandSegmentSizes = array<i32: 1, 3, 1, 1, 0>}>
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, memref<64x64xbf16, #smem>
  // CHECK: kvpipe.tma_load %[[MAP]][%[[I]], %[[I]], %[[I]]], %[[T]], %[[B]] multicast %[[MASK]] : !kvpipe.tensor_map
  // GENERIC: "kvpipe.tma_load"(%{{.*}}) <{operandSegmentSizes = array<i32: 1, 3, 1, 1, 1>}>
  kvpipe.tma_load %map[%i, %i, %i], %t, %b multicast %mask : !map, memref<64x64xbf16, #smem>
  // CHECK: kvpipe.tma_store %[[T]], %[[MAP]][%[[I]], %[[I]], %[[I]]] : memref<64x64xbf16, #gpu.address_space<workgroup>>, !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
  // GENERIC: "kvpipe.tma_store"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<64x64xbf16, #gpu.address_space<workgroup>>, !kvpipe.tensor_map
  kvpipe.tma_store %t, %map[%i, %i, %i] : memref<64x64xbf16, #smem>, !map
  return
}

// A box with unit dimensions lands in a tile without them; a tile may also
// keep them, or be a strided view at a swizzle-atom-aligned offset.
// CHECK-LABEL: func @tma_views
// GENERIC-LABEL: sym_name = "tma_views"
func.func @tma_views(%map: !map, %i: index, %b: !kvpipe.mbarrier,
    %t3: memref<1x64x64xbf16, #smem>,
    %v: memref<64x64xbf16, strided<[64, 1], offset: 4096>, #smem>,
    %d: memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>) {
  // CHECK: kvpipe.tma_load %{{.*}} : !kvpipe.tensor_map<{{.*}}>, memref<1x64x64xbf16, #gpu.address_space<workgroup>>
  kvpipe.tma_load %map[%i, %i, %i], %t3, %b : !map, memref<1x64x64xbf16, #smem>
  // CHECK: kvpipe.tma_load %{{.*}} : !kvpipe.tensor_map<{{.*}}>, memref<64x64xbf16, strided<[64, 1], offset: 4096>, #gpu.address_space<workgroup>>
  kvpipe.tma_load %map[%i, %i, %i], %v, %b : !map, memref<64x64xbf16, strided<[64, 1], offset: 4096>, #smem>
  // CHECK: kvpipe.tma_store %{{.*}} : memref<64x64xbf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>, !kvpipe.tensor_map
  kvpipe.tma_store %d, %map[%i, %i, %i] : memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>, !map
  return
}

// CHECK-LABEL: func @mma
//  CHECK-SAME: (%[[Q:.*]]: memref<2x64x64xbf16, #gpu.address_space<workgroup>>, %[[K:.*]]: memref<2x128x64xbf16, #gpu.address_space<workgroup>>, %[[V:.*]]: memref<2x128x64xbf16, #gpu.address_space<workgroup>>, %[[P:.*]]: vector<64xbf16>, %[[O:.*]]: vector<64xf32>)
// GENERIC-LABEL: sym_name = "mma"
func.func @mma(%q: memref<2x64x64xbf16, #smem>, %k: memref<2x128x64xbf16, #smem>,
               %v: memref<2x128x64xbf16, #smem>, %pf: vector<64xbf16>,
               %o: vector<64xf32>) -> (vector<64xf32>, vector<64xf32>, vector<64xf32>) {
  // The default swizzle (128) is not printed.
  // CHECK: %[[S:.*]] = kvpipe.warpgroup_mma %[[Q]], %[[K]] : memref<2x64x64xbf16, #gpu.address_space<workgroup>>, memref<2x128x64xbf16, #gpu.address_space<workgroup>> -> vector<64xf32>
  // GENERIC: "kvpipe.warpgroup_mma"(%{{.*}}, %{{.*}}) <{swizzle = 128 : i64}> : (memref<2x64x64xbf16, #gpu.address_space<workgroup>>, memref<2x128x64xbf16, #gpu.address_space<workgroup>>) -> vector<64xf32>
  %s = kvpipe.warpgroup_mma %q, %k {swizzle = 128} : memref<2x64x64xbf16, #smem>, memref<2x128x64xbf16, #smem> -> vector<64xf32>
  // CHECK: %[[S2:.*]] = kvpipe.warpgroup_mma %[[Q]], %[[K]], %[[O]] : memref<2x64x64xbf16, #gpu.address_space<workgroup>>, memref<2x128x64xbf16, #gpu.address_space<workgroup>> -> vector<64xf32>
  %s2 = kvpipe.warpgroup_mma %q, %k, %o : memref<2x64x64xbf16, #smem>, memref<2x128x64xbf16, #smem> -> vector<64xf32>
  // CHECK: %[[O1:.*]] = kvpipe.warpgroup_mma %[[P]], %[[V]], %[[O]] {transpose_b} : vector<64xbf16>, memref<2x128x64xbf16, #gpu.address_space<workgroup>> -> vector<64xf32>
  // GENERIC: "kvpipe.warpgroup_mma"(%{{.*}}, %{{.*}}, %{{.*}}) <{swizzle = 128 : i64, transpose_b}> : (vector<64xbf16>, memref<2x128x64xbf16, #gpu.address_space<workgroup>>, vector<64xf32>) -> vector<64xf32>
  %o1 = kvpipe.warpgroup_mma %pf, %v, %o {transpose_b} : vector<64xbf16>, memref<2x128x64xbf16, #smem> -> vector<64xf32>
  // CHECK: %[[W:.*]]:2 = kvpipe.warpgroup_wait %[[S]], %[[O1]] {pending = 1 : i64} : vector<64xf32>, vector<64xf32>
  // GENERIC: "kvpipe.warpgroup_wait"(%{{.*}}, %{{.*}}) <{pending = 1 : i64}> : (vector<64xf32>, vector<64xf32>) -> (vector<64xf32>, vector<64xf32>)
  %w:2 = kvpipe.warpgroup_wait %s, %o1 {pending = 1} : vector<64xf32>, vector<64xf32>
  // CHECK: kvpipe.warpgroup_wait {pending = 0 : i64}
  // CHECK-NOT: :
  // CHECK: return %[[W]]#0, %[[W]]#1, %[[S2]]
  // GENERIC: "kvpipe.warpgroup_wait"() <{pending = 0 : i64}> : () -> ()
  kvpipe.warpgroup_wait {pending = 0}
  return %w#0, %w#1, %s2 : vector<64xf32>, vector<64xf32>, vector<64xf32>
}

// O += P [V | 1] (the forward's tensor_row_sums): N = 72 of an MN-major B of
// two 64-column blocks, V's and a block of ones, whose first 8 columns the
// wgmma reads.
// CHECK-LABEL: func @mma_partial_last_block
func.func @mma_partial_last_block(%pf: vector<64xbf16>, %vOnes: memref<2x128x64xbf16, #smem>,
                                  %o: vector<36xf32>) -> vector<36xf32> {
  // CHECK: kvpipe.warpgroup_mma %{{.*}}, %{{.*}}, %{{.*}} {transpose_b} : vector<64xbf16>, memref<2x128x64xbf16, #gpu.address_space<workgroup>> -> vector<36xf32>
  %o1 = kvpipe.warpgroup_mma %pf, %vOnes, %o {transpose_b} : vector<64xbf16>, memref<2x128x64xbf16, #smem> -> vector<36xf32>
  return %o1 : vector<36xf32>
}

// CHECK-LABEL: func @mma_swizzles
// GENERIC-LABEL: sym_name = "mma_swizzles"
func.func @mma_swizzles(%a64: memref<2x64x32xf16, #smem>, %b64: memref<2x64x32xf16, #smem>,
                        %a32: memref<4x64x16xbf16, #smem>, %b32: memref<8x16xbf16, #smem>,
                        %p: vector<8xbf16>) -> (vector<32xf32>, vector<32xf32>) {
  // CHECK: kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64} : memref<2x64x32xf16, #gpu.address_space<workgroup>>, memref<2x64x32xf16, #gpu.address_space<workgroup>> -> vector<32xf32>
  %x = kvpipe.warpgroup_mma %a64, %b64 {swizzle = 64} : memref<2x64x32xf16, #smem>, memref<2x64x32xf16, #smem> -> vector<32xf32>
  // CHECK: kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 32 : i64, transpose_b} : vector<8xbf16>, memref<4x16x16xbf16, #gpu.address_space<workgroup>> -> vector<32xf32>
  %b = memref.alloca() : memref<4x16x16xbf16, #smem>
  %y = kvpipe.warpgroup_mma %p, %b {swizzle = 32, transpose_b} : vector<8xbf16>, memref<4x16x16xbf16, #smem> -> vector<32xf32>
  return %x, %y : vector<32xf32>, vector<32xf32>
}

// CHECK-LABEL: func @fragments
//  CHECK-SAME: (%[[F:.*]]: vector<64xbf16>, %[[T:.*]]: memref<2x64x64xbf16, #gpu.address_space<workgroup>>, %[[H:.*]]: vector<16xf16>, %[[U:.*]]: memref<2x64x16xf16, #gpu.address_space<workgroup>>)
// GENERIC-LABEL: sym_name = "fragments"
func.func @fragments(%f: vector<64xbf16>, %t: memref<2x64x64xbf16, #smem>,
                     %h: vector<16xf16>, %u: memref<2x64x16xf16, #smem>) -> index {
  // CHECK: kvpipe.store_fragment %[[F]], %[[T]] : vector<64xbf16>, memref<2x64x64xbf16, #gpu.address_space<workgroup>>
  // GENERIC: "kvpipe.store_fragment"(%{{.*}}, %{{.*}}) <{swizzle = 128 : i64}> : (vector<64xbf16>, memref<2x64x64xbf16, #gpu.address_space<workgroup>>) -> ()
  kvpipe.store_fragment %f, %t : vector<64xbf16>, memref<2x64x64xbf16, #smem>
  // CHECK: kvpipe.store_fragment %[[H]], %[[U]] {swizzle = 32 : i64} : vector<16xf16>, memref<2x64x16xf16, #gpu.address_space<workgroup>>
  kvpipe.store_fragment %h, %u {swizzle = 32} : vector<16xf16>, memref<2x64x16xf16, #smem>
  // CHECK: %[[WG:.*]] = kvpipe.warpgroup_id : index
  // GENERIC: "kvpipe.warpgroup_id"() : () -> index
  %wg = kvpipe.warpgroup_id : index
  // CHECK: return %[[WG]]
  return %wg : index
}
