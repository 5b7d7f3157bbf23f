// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// The shared-memory side of a TMA copy: its static layout offset is user
// input. A huge offset times the element size used to wrap around in signed
// 64-bit arithmetic (found by UBSan) into a multiple of the alignment, and
// the tile passed; the offset in bytes is now computed with an overflow check
// and must lie in the 227 KiB of shared memory.

// 2^62 f32 elements are 2^64 bytes: wrapped, that was offset 0, aligned.
!map = !kvpipe.tensor_map<box = [16, 32], element_type = f32, swizzle = 0>
!tile = memref<16x32xf32, strided<[32, 1], offset: 4611686018427387904>, #gpu.address_space<workgroup>>

func.func @load_offset_wraps(%m: !map, %b: !kvpipe.mbarrier, %i: index, %t: !tile) {
  // expected-error @+1 {{'kvpipe.tma_load' op destination offset of 4611686018427387904 elements is outside the 232448 bytes (227 KiB) of shared memory of an sm_90 CTA}}
  kvpipe.tma_load %m[%i, %i], %t, %b : !map, !tile
  return
}

// -----

// The same for a store's source, with an offset that does not wrap but is
// far beyond shared memory.
!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, strided<[64, 1], offset: 1099511627776>, #gpu.address_space<workgroup>>

func.func @store_offset_beyond(%m: !map, %i: index, %t: !tile) {
  // expected-error @+1 {{'kvpipe.tma_store' op source offset of 1099511627776 elements is outside the 232448 bytes (227 KiB) of shared memory of an sm_90 CTA}}
  kvpipe.tma_store %t, %m[%i, %i] : !tile, !map
  return
}

// -----

// A negative offset is before the start of shared memory.
!map = !kvpipe.tensor_map<box = [16, 32], element_type = f32, swizzle = 0>
!tile = memref<16x32xf32, strided<[32, 1], offset: -32>, #gpu.address_space<workgroup>>

func.func @load_offset_negative(%m: !map, %b: !kvpipe.mbarrier, %i: index, %t: !tile) {
  // expected-error @+1 {{'kvpipe.tma_load' op destination offset of -32 elements is outside the 232448 bytes (227 KiB) of shared memory of an sm_90 CTA}}
  kvpipe.tma_load %m[%i, %i], %t, %b : !map, !tile
  return
}

// -----

// Corrected: an aligned offset inside shared memory passes.
!map = !kvpipe.tensor_map<box = [16, 32], element_type = f32, swizzle = 0>
!tile = memref<16x32xf32, strided<[32, 1], offset: 1024>, #gpu.address_space<workgroup>>

func.func @load_offset_fine(%m: !map, %b: !kvpipe.mbarrier, %i: index, %t: !tile) {
  kvpipe.tma_load %m[%i, %i], %t, %b : !map, !tile
  return
}
