// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// Every verifier message of the data-path ops (KVPipeDataOps.cpp and the
// canonical swizzled tile layout of SwizzledTile.cpp), one case each.

//===----------------------------------------------------------------------===//
// tma_load / tma_store: the shared-memory side of a TMA box
//===----------------------------------------------------------------------===//

!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>

func.func @load_coordinate_count(%m: !map, %b: !kvpipe.mbarrier, %i: index,
    %t: memref<64x64xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.tma_load' op expects 3 coordinates (one per box dimension), got 2}}
  kvpipe.tma_load %m[%i, %i], %t, %b : !map, memref<64x64xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>

func.func @load_global_memory(%m: !map, %b: !kvpipe.mbarrier, %i: index,
    %t: memref<64x64xbf16>) {
  // expected-error @+1 {{'kvpipe.tma_load' op destination must be in workgroup (shared) memory, got 'memref<64x64xbf16>'}}
  kvpipe.tma_load %m[%i, %i], %t, %b : !map, memref<64x64xbf16>
  return
}

// -----

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>

func.func @load_element_type(%m: !map, %b: !kvpipe.mbarrier, %i: index,
    %t: memref<64x64xf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.tma_load' op destination element type 'f16' does not match the tensor map's 'bf16'}}
  kvpipe.tma_load %m[%i, %i], %t, %b : !map, memref<64x64xf16, #gpu.address_space<workgroup>>
  return
}

// -----

!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>

func.func @load_shape(%m: !map, %b: !kvpipe.mbarrier, %i: index,
    %t: memref<32x64xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.tma_load' op destination shape must be the box [1, 64, 64] up to unit dimensions, got 'memref<32x64xbf16, #gpu.address_space<workgroup>>'}}
  kvpipe.tma_load %m[%i, %i, %i], %t, %b : !map, memref<32x64xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>

func.func @load_dynamic_shape(%m: !map, %b: !kvpipe.mbarrier, %i: index,
    %t: memref<?x64xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.tma_load' op destination shape must be the box [64, 64] up to unit dimensions, got 'memref<?x64xbf16, #gpu.address_space<workgroup>>'}}
  kvpipe.tma_load %m[%i, %i], %t, %b : !map, memref<?x64xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, affine_map<(d0, d1) -> (d1, d0)>, #gpu.address_space<workgroup>>

func.func @load_not_strided(%m: !map, %b: !kvpipe.mbarrier, %i: index, %t: !tile) {
  // expected-error @+1 {{'kvpipe.tma_load' op destination must have a strided layout}}
  kvpipe.tma_load %m[%i, %i], %t, %b : !map, !tile
  return
}

// -----

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, strided<[128, 1]>, #gpu.address_space<workgroup>>

func.func @load_not_contiguous(%m: !map, %b: !kvpipe.mbarrier, %i: index, %t: !tile) {
  // expected-error @+1 {{'kvpipe.tma_load' op destination must be contiguous (a TMA box is written densely), got 'memref<64x64xbf16, strided<[128, 1]>, #gpu.address_space<workgroup>>'}}
  kvpipe.tma_load %m[%i, %i], %t, %b : !map, !tile
  return
}

// -----

// A 128-byte swizzled box starts on a 1024-byte swizzle atom.
!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, strided<[64, 1], offset: 256>, #gpu.address_space<workgroup>>

func.func @load_swizzle_alignment(%m: !map, %b: !kvpipe.mbarrier, %i: index, %t: !tile) {
  // expected-error @+1 {{'kvpipe.tma_load' op destination must be 1024-byte aligned, got an offset of 512 bytes}}
  kvpipe.tma_load %m[%i, %i], %t, %b : !map, !tile
  return
}

// -----

// Without a swizzle TMA still needs 128-byte aligned shared memory.
!map = !kvpipe.tensor_map<box = [16, 32], element_type = f32, swizzle = 0>
!tile = memref<16x32xf32, strided<[32, 1], offset: 8>, #gpu.address_space<workgroup>>

func.func @load_alignment(%m: !map, %b: !kvpipe.mbarrier, %i: index, %t: !tile) {
  // expected-error @+1 {{'kvpipe.tma_load' op destination must be 128-byte aligned, got an offset of 32 bytes}}
  kvpipe.tma_load %m[%i, %i], %t, %b : !map, !tile
  return
}

// -----

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>

func.func @load_multicast_type(%m: !map, %b: !kvpipe.mbarrier, %i: index, %mask: i32,
    %t: memref<64x64xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.tma_load' op operand #5 must be 16-bit signless integer, but got 'i32'}}
  "kvpipe.tma_load"(%m, %i, %i, %t, %b, %mask) {operandSegmentSizes = array<i32: 1, 2, 1, 1, 1>}
      : (!map, index, index, memref<64x64xbf16, #gpu.address_space<workgroup>>, !kvpipe.mbarrier, i32) -> ()
  return
}

// -----

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>

func.func @load_coordinate_type(%m: !map, %b: !kvpipe.mbarrier, %i: i32,
    %t: memref<64x64xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.tma_load' op operand #1 must be variadic of index, but got 'i32'}}
  "kvpipe.tma_load"(%m, %i, %i, %t, %b) {operandSegmentSizes = array<i32: 1, 2, 1, 1, 0>}
      : (!map, i32, i32, memref<64x64xbf16, #gpu.address_space<workgroup>>, !kvpipe.mbarrier) -> ()
  return
}

// -----

!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>

func.func @store_coordinate_count(%m: !map, %i: index,
    %t: memref<64x64xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.tma_store' op expects 3 coordinates (one per box dimension), got 4}}
  kvpipe.tma_store %t, %m[%i, %i, %i, %i] : memref<64x64xbf16, #gpu.address_space<workgroup>>, !map
  return
}

// -----

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>

func.func @store_global_memory(%m: !map, %i: index, %t: memref<64x64xbf16, 1>) {
  // expected-error @+1 {{'kvpipe.tma_store' op source must be in workgroup (shared) memory, got 'memref<64x64xbf16, 1>'}}
  kvpipe.tma_store %t, %m[%i, %i] : memref<64x64xbf16, 1>, !map
  return
}

// -----

!map = !kvpipe.tensor_map<box = [64, 32], element_type = f32, swizzle = 128>

func.func @store_element_type(%m: !map, %i: index,
    %t: memref<64x32xi32, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.tma_store' op source element type 'i32' does not match the tensor map's 'f32'}}
  kvpipe.tma_store %t, %m[%i, %i] : memref<64x32xi32, #gpu.address_space<workgroup>>, !map
  return
}

// -----

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>

func.func @store_shape(%m: !map, %i: index,
    %t: memref<64x32xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.tma_store' op source shape must be the box [64, 64] up to unit dimensions, got 'memref<64x32xbf16, #gpu.address_space<workgroup>>'}}
  kvpipe.tma_store %t, %m[%i, %i] : memref<64x32xbf16, #gpu.address_space<workgroup>>, !map
  return
}

// -----

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, affine_map<(d0, d1) -> (d1, d0)>, #gpu.address_space<workgroup>>

func.func @store_not_strided(%m: !map, %i: index, %t: !tile) {
  // expected-error @+1 {{'kvpipe.tma_store' op source must have a strided layout}}
  kvpipe.tma_store %t, %m[%i, %i] : !tile, !map
  return
}

// -----

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, strided<[1, 64]>, #gpu.address_space<workgroup>>

func.func @store_not_contiguous(%m: !map, %i: index, %t: !tile) {
  // expected-error @+1 {{'kvpipe.tma_store' op source must be contiguous (a TMA box is written densely), got 'memref<64x64xbf16, strided<[1, 64]>, #gpu.address_space<workgroup>>'}}
  kvpipe.tma_store %t, %m[%i, %i] : !tile, !map
  return
}

// -----

// A 64-byte swizzle atom is 8 rows of 64 bytes.
!map = !kvpipe.tensor_map<box = [64, 32], element_type = f16, swizzle = 64>
!tile = memref<64x32xf16, strided<[32, 1], offset: 128>, #gpu.address_space<workgroup>>

func.func @store_swizzle_alignment(%m: !map, %i: index, %t: !tile) {
  // expected-error @+1 {{'kvpipe.tma_store' op source must be 512-byte aligned, got an offset of 256 bytes}}
  kvpipe.tma_store %t, %m[%i, %i] : !tile, !map
  return
}

//===----------------------------------------------------------------------===//
// warpgroup_mma: the canonical swizzled tiles (SwizzledTile.cpp)
//===----------------------------------------------------------------------===//

// -----

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_swizzle(%a: !t, %b: !t) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op 'swizzle' must be 32, 64 or 128 bytes, got 16}}
  %d = kvpipe.warpgroup_mma %a, %b {swizzle = 16} : !t, !t -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_b_global(%a: !t, %b: memref<64x64xbf16>) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B must be in workgroup (shared) memory, got 'memref<64x64xbf16>'}}
  %d = kvpipe.warpgroup_mma %a, %b : !t, memref<64x64xbf16> -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_a_global(%a: memref<64x64xbf16>, %b: !t) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand A must be in workgroup (shared) memory, got 'memref<64x64xbf16>'}}
  %d = kvpipe.warpgroup_mma %a, %b : memref<64x64xbf16>, !t -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!t = memref<64x32xf32, #gpu.address_space<workgroup>>

func.func @mma_b_element_type(%a: memref<64x64xbf16, #gpu.address_space<workgroup>>, %b: !t) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B must hold bf16 or f16 elements, got 'f32'}}
  %d = kvpipe.warpgroup_mma %a, %b : memref<64x64xbf16, #gpu.address_space<workgroup>>, !t -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_b_rank(%a: !t, %b: memref<2x2x64x64xbf16, #gpu.address_space<workgroup>>) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B must be a rank-2 [rows][W] or rank-3 [blocks][rows][W] tile, got rank 4}}
  %d = kvpipe.warpgroup_mma %a, %b : !t, memref<2x2x64x64xbf16, #gpu.address_space<workgroup>> -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_b_rank1(%a: !t, %b: memref<4096xbf16, #gpu.address_space<workgroup>>) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B must be a rank-2 [rows][W] or rank-3 [blocks][rows][W] tile, got rank 1}}
  %d = kvpipe.warpgroup_mma %a, %b : !t, memref<4096xbf16, #gpu.address_space<workgroup>> -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_b_dynamic(%a: !t, %b: memref<?x64xbf16, #gpu.address_space<workgroup>>) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B must have a static shape, got 'memref<?x64xbf16, #gpu.address_space<workgroup>>'}}
  %d = kvpipe.warpgroup_mma %a, %b : !t, memref<?x64xbf16, #gpu.address_space<workgroup>> -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>

// A 64-byte swizzle row holds 32 bf16 elements.
func.func @mma_b_width(%a: memref<2x64x32xbf16, #gpu.address_space<workgroup>>, %b: !t) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B rows must span the 64-byte swizzle: innermost dimension 32 expected, got 64}}
  %d = kvpipe.warpgroup_mma %a, %b {swizzle = 64} : memref<2x64x32xbf16, #gpu.address_space<workgroup>>, !t -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_b_rows(%a: !t, %b: memref<60x64xbf16, #gpu.address_space<workgroup>>) -> vector<30xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B must have a multiple of 8 rows (one swizzle atom), got 60}}
  %d = kvpipe.warpgroup_mma %a, %b : !t, memref<60x64xbf16, #gpu.address_space<workgroup>> -> vector<30xf32>
  return %d : vector<30xf32>
}

// -----

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<64x64xbf16, affine_map<(d0, d1) -> (d1, d0)>, #gpu.address_space<workgroup>>

func.func @mma_b_not_strided(%a: !t, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B must have a strided layout, got 'memref<64x64xbf16, affine_map<(d0, d1) -> (d1, d0)>, #gpu.address_space<workgroup>>'}}
  %d = kvpipe.warpgroup_mma %a, %b : !t, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<64x64xbf16, strided<[128, 1]>, #gpu.address_space<workgroup>>

func.func @mma_b_row_stride(%a: !t, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B rows must be contiguous and 64 elements apart, got strides 'memref<64x64xbf16, strided<[128, 1]>, #gpu.address_space<workgroup>>'}}
  %d = kvpipe.warpgroup_mma %a, %b : !t, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<64x64xbf16, strided<[64, 2]>, #gpu.address_space<workgroup>>

func.func @mma_b_element_stride(%a: !t, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B rows must be contiguous and 64 elements apart}}
  %d = kvpipe.warpgroup_mma %a, %b : !t, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!a = memref<2x64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<2x64x64xbf16, strided<[2048, 64, 1]>, #gpu.address_space<workgroup>>

func.func @mma_b_blocks_overlap(%a: !a, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B blocks must be static and must not overlap, got 'memref<2x64x64xbf16, strided<[2048, 64, 1]>, #gpu.address_space<workgroup>>'}}
  %d = kvpipe.warpgroup_mma %a, %b : !a, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!a = memref<2x64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<2x64x64xbf16, strided<[?, 64, 1]>, #gpu.address_space<workgroup>>

func.func @mma_b_blocks_dynamic(%a: !a, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B blocks must be static and must not overlap}}
  %d = kvpipe.warpgroup_mma %a, %b : !a, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

// Blocks 4096 + 64 elements apart: the second does not start on an atom.
!a = memref<2x64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<2x64x64xbf16, strided<[4160, 64, 1]>, #gpu.address_space<workgroup>>

func.func @mma_b_block_alignment(%a: !a, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B blocks must be 1024-byte aligned for the 128-byte swizzle, got a block stride of 8320 bytes}}
  %d = kvpipe.warpgroup_mma %a, %b : !a, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!t = memref<64x64xbf16, #gpu.address_space<workgroup>>
!a = memref<64x32xbf16, strided<[32, 1], offset: 64>, #gpu.address_space<workgroup>>
!b = memref<64x32xbf16, #gpu.address_space<workgroup>>

func.func @mma_a_offset(%a: !a, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand A must start 512-byte aligned for the 64-byte swizzle, got an offset of 128 bytes}}
  %d = kvpipe.warpgroup_mma %a, %b {swizzle = 64} : !a, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

//===----------------------------------------------------------------------===//
// warpgroup_mma: shapes and operands
//===----------------------------------------------------------------------===//

// -----

// MN-major B [K][N]: 8 rows of K is half a k-step.
!b = memref<8x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_k(%a: vector<4xbf16>, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op K must be a positive multiple of 16, got 8}}
  %d = kvpipe.warpgroup_mma %a, %b {transpose_b} : vector<4xbf16>, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

// No column blocks: K = 0 would leave the result unwritten.
!t = memref<0x64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_k_zero(%a: !t, %b: !t) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op K must be a positive multiple of 16, got 0}}
  %d = kvpipe.warpgroup_mma %a, %b : !t, !t -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!a = memref<64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<264x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_n_large(%a: !a, %b: !b) -> vector<132xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op N must be a multiple of 8 in [8, 256], got 264}}
  %d = kvpipe.warpgroup_mma %a, %b : !a, !b -> vector<132xf32>
  return %d : vector<132xf32>
}

// -----

// MN-major B: five 64-column blocks are N = 320.
!b = memref<5x16x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_n_large_transposed(%a: vector<8xbf16>, %b: !b) -> vector<160xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op N must be a multiple of 8 in [8, 256], got 320}}
  %d = kvpipe.warpgroup_mma %a, %b {transpose_b} : vector<8xbf16>, !b -> vector<160xf32>
  return %d : vector<160xf32>
}

// -----

!a = memref<64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<0x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_n_zero(%a: !a, %b: !b) -> vector<4xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op N must be a multiple of 8 in [8, 256], got 0}}
  %d = kvpipe.warpgroup_mma %a, %b : !a, !b -> vector<4xf32>
  return %d : vector<4xf32>
}

// -----

!a = memref<64x64xf16, #gpu.address_space<workgroup>>
!b = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_ss_element_types(%a: !a, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operands A and B must have the same element type, got 'f16' and 'bf16'}}
  %d = kvpipe.warpgroup_mma %a, %b : !a, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!a = memref<128x64xbf16, #gpu.address_space<workgroup>>
!b = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_a_rows(%a: !a, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand A must have 64 rows (wgmma's M), got 128}}
  %d = kvpipe.warpgroup_mma %a, %b : !a, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!a = memref<2x64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_a_k(%a: !a, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand A has K = 128 but operand B has K = 64}}
  %d = kvpipe.warpgroup_mma %a, %b : !a, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!b = memref<2x64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_rs_element_types(%a: vector<32xf16>, %b: !b) -> vector<64xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operands A and B must have the same element type, got 'f16' and 'bf16'}}
  %d = kvpipe.warpgroup_mma %a, %b {transpose_b} : vector<32xf16>, !b -> vector<64xf32>
  return %d : vector<64xf32>
}

// -----

!b = memref<2x64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_rs_fragment(%a: vector<64xbf16>, %b: !b) -> vector<64xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op register operand A must hold K/2 = 32 elements per thread, got 64}}
  %d = kvpipe.warpgroup_mma %a, %b {transpose_b} : vector<64xbf16>, !b -> vector<64xf32>
  return %d : vector<64xf32>
}

// -----

!a = memref<64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<128x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_result(%a: !a, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op result must hold N/2 = 64 f32 elements per thread, got 32}}
  %d = kvpipe.warpgroup_mma %a, %b : !a, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

// An MN-major B may be read up to a column of its last block, not short of
// that block (72 columns of a [V | 1] tile of two blocks are allowed,
// data-ops.mlir; 64 are a whole block fewer).
!b = memref<2x128x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_result_partial_block(%p: vector<64xbf16>, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op result must hold N/2 = 64 f32 elements per thread (or, reading only the start of B's last block, a multiple of 4 above 32), got 32}}
  %d = kvpipe.warpgroup_mma %p, %b {transpose_b} : vector<64xbf16>, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!a = memref<64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_accumulator(%a: !a, %b: !b, %acc: vector<16xf32>) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op failed to verify that accumulator and result have the same type}}
  %d = "kvpipe.warpgroup_mma"(%a, %b, %acc) : (!a, !b, vector<16xf32>) -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!a = memref<64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_result_type(%a: !a, %b: !b) -> vector<32xf16> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op result #0 must be vector of 32-bit float values of ranks 1, but got 'vector<32xf16>'}}
  %d = "kvpipe.warpgroup_mma"(%a, %b) : (!a, !b) -> vector<32xf16>
  return %d : vector<32xf16>
}

// -----

!b = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_register_a_type(%a: vector<32xf32>, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand #0 must be memref of any type values or vector of bfloat16 type or 16-bit float values of ranks 1, but got 'vector<32xf32>'}}
  %d = kvpipe.warpgroup_mma %a, %b : vector<32xf32>, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

//===----------------------------------------------------------------------===//
// warpgroup_wait
//===----------------------------------------------------------------------===//

// -----

func.func @wait_pending(%f: vector<32xf32>) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_wait' op attribute 'pending' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative whose maximum value is 7}}
  %r = kvpipe.warpgroup_wait %f {pending = 8} : vector<32xf32>
  return %r : vector<32xf32>
}

// -----

func.func @wait_pending_negative() {
  // expected-error @+1 {{'kvpipe.warpgroup_wait' op attribute 'pending' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative whose maximum value is 7}}
  kvpipe.warpgroup_wait {pending = -1}
  return
}

// -----

func.func @wait_pending_missing() {
  // expected-error @+1 {{'kvpipe.warpgroup_wait' op requires attribute 'pending'}}
  kvpipe.warpgroup_wait
  return
}

// -----

func.func @wait_types(%f: vector<32xf32>) -> vector<16xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_wait' op failed to verify that all of {fragments, results} have same type}}
  %r = "kvpipe.warpgroup_wait"(%f) {pending = 0} : (vector<32xf32>) -> vector<16xf32>
  return %r : vector<16xf32>
}

//===----------------------------------------------------------------------===//
// store_fragment
//===----------------------------------------------------------------------===//

// -----

func.func @store_fragment_element_type(%f: vector<32xf16>,
    %t: memref<64x64xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.store_fragment' op fragment element type 'f16' does not match the tile's 'bf16'}}
  kvpipe.store_fragment %f, %t : vector<32xf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @store_fragment_rows(%f: vector<32xbf16>,
    %t: memref<128x64xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.store_fragment' op destination must have 64 rows (one warpgroup's fragment), got 128}}
  kvpipe.store_fragment %f, %t : vector<32xbf16>, memref<128x64xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @store_fragment_size(%f: vector<32xbf16>,
    %t: memref<2x64x64xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.store_fragment' op fragment must hold N/2 = 64 elements per thread for a 64x128 tile, got 32}}
  kvpipe.store_fragment %f, %t : vector<32xbf16>, memref<2x64x64xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @store_fragment_swizzle(%f: vector<32xbf16>,
    %t: memref<64x64xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.store_fragment' op 'swizzle' must be 32, 64 or 128 bytes, got 0}}
  kvpipe.store_fragment %f, %t {swizzle = 0} : vector<32xbf16>, memref<64x64xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @store_fragment_global(%f: vector<32xbf16>, %t: memref<64x64xbf16>) {
  // expected-error @+1 {{'kvpipe.store_fragment' op destination must be in workgroup (shared) memory, got 'memref<64x64xbf16>'}}
  kvpipe.store_fragment %f, %t : vector<32xbf16>, memref<64x64xbf16>
  return
}

// -----

func.func @store_fragment_f32(%f: vector<32xf32>,
    %t: memref<64x64xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.store_fragment' op operand #0 must be vector of bfloat16 type or 16-bit float values of ranks 1, but got 'vector<32xf32>'}}
  kvpipe.store_fragment %f, %t : vector<32xf32>, memref<64x64xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

// Transposed: the tile is [N][64], here 64 x 32.
func.func @store_fragment_transposed_columns(%f: vector<32xbf16>,
    %t: memref<64x32xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.store_fragment' op transposed destination must have 64 columns (one warpgroup's fragment rows), got 32}}
  kvpipe.store_fragment %f, %t {swizzle = 64, transpose} : vector<32xbf16>, memref<64x32xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @store_fragment_transposed_size(%f: vector<32xbf16>,
    %t: memref<2x96x32xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.store_fragment' op fragment must hold N/2 = 48 elements per thread for a transposed 96x64 tile, got 32}}
  kvpipe.store_fragment %f, %t {swizzle = 64, transpose} : vector<32xbf16>, memref<2x96x32xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

// stmatrix.x4 stores 16 fragment columns: 16 transposed rows at a time.
func.func @store_fragment_transposed_rows(%f: vector<4xbf16>,
    %t: memref<8x64xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.store_fragment' op transposed destination rows must be a multiple of 16, got 8}}
  kvpipe.store_fragment %f, %t {transpose} : vector<4xbf16>, memref<8x64xbf16, #gpu.address_space<workgroup>>
  return
}

// -----

// 32-byte swizzle: rows of 16 bf16 elements, and 256-byte atoms.
func.func @store_fragment_width(%f: vector<32xbf16>,
    %t: memref<2x64x32xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{'kvpipe.store_fragment' op destination rows must span the 32-byte swizzle: innermost dimension 16 expected, got 32}}
  kvpipe.store_fragment %f, %t {swizzle = 32} : vector<32xbf16>, memref<2x64x32xbf16, #gpu.address_space<workgroup>>
  return
}

//===----------------------------------------------------------------------===//
// warpgroup_id
//===----------------------------------------------------------------------===//

// -----

func.func @warpgroup_id_type() -> i32 {
  // expected-error @+1 {{'kvpipe.warpgroup_id' op result #0 must be index, but got 'i32'}}
  %w = "kvpipe.warpgroup_id"() : () -> i32
  return %w : i32
}

// -----

// transpose_a: A is stored [K][64]; its 64 columns are M.
!a = memref<2x64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_transpose_a_rows(%a: !a, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand A must have 64 rows (wgmma's M), got 128}}
  %d = kvpipe.warpgroup_mma %a, %b {transpose_a} : !a, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!a = memref<128x64xbf16, #gpu.address_space<workgroup>>
!b = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_transpose_a_k(%a: !a, %b: !b) -> vector<32xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand A has K = 128 but operand B has K = 64}}
  %d = kvpipe.warpgroup_mma %a, %b {transpose_a} : !a, !b -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

!b = memref<2x64x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_transpose_a_registers(%a: vector<32xbf16>, %b: !b) -> vector<64xf32> {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op 'transpose_a' needs A in shared memory (the SS form): a register fragment is K-major}}
  %d = kvpipe.warpgroup_mma %a, %b {transpose_a, transpose_b} : vector<32xbf16>, !b -> vector<64xf32>
  return %d : vector<64xf32>
}
