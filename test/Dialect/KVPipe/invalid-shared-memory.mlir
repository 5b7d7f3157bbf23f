// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// Shared memory is 227 KiB (232448 bytes) per CTA on sm_90. A TMA box, and a
// tile a wgmma or store_fragment reads or writes, lives there in one piece:
// one that cannot fit is an error at the type or op that names it. Before,
// a 4096-block operand B was accepted and unrolled into 16384 wgmmas, and
// tile sizes near 2^63 overflowed the layout arithmetic.

// 256 x 256 x 4 bytes = 256 KiB.
// expected-error @+1 {{tensor map box of 262144 bytes does not fit the 232448 bytes (227 KiB) of shared memory of an sm_90 CTA}}
func.func private @box_too_big(!kvpipe.tensor_map<box = [256, 256], element_type = f32, swizzle = 0>)

// -----

// 113 x 256 x 8 bytes = 231424 bytes: fits.
func.func private @box_fits(!kvpipe.tensor_map<box = [113, 256], element_type = f64, swizzle = 0>)

// -----

!a = memref<4096x64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<4096x8x64xbf16, #gpu.address_space<workgroup>>

func.func @mma_tile_too_big(%a: !a, %b: !b) {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B ends 4194304 bytes into shared memory, beyond the 232448 bytes (227 KiB) of an sm_90 CTA: 'memref<4096x8x64xbf16, #gpu.address_space<workgroup>>'}}
  %d = kvpipe.warpgroup_mma %a, %b : !a, !b -> vector<4xf32>
  return
}

// -----

// The offset counts: this block starts 256 KiB in.
!b = memref<64x64xbf16, strided<[64, 1], offset: 131072>, #gpu.address_space<workgroup>>

func.func @mma_tile_beyond(%a: memref<64x64xbf16, #gpu.address_space<workgroup>>, %b: !b) {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B ends 270336 bytes into shared memory}}
  %d = kvpipe.warpgroup_mma %a, %b : memref<64x64xbf16, #gpu.address_space<workgroup>>, !b -> vector<32xf32>
  return
}

// -----

// A row count near 2^63 would overflow the layout arithmetic.
!t = memref<4611686018427387904x64xbf16, #gpu.address_space<workgroup>>

func.func @store_rows_overflow(%f: vector<32xbf16>, %t: !t) {
  // expected-error @+1 {{'kvpipe.store_fragment' op destination has 4611686018427387904 rows, more than fit the 232448 bytes (227 KiB) of shared memory of an sm_90 CTA}}
  kvpipe.store_fragment %f, %t : vector<32xbf16>, !t
  return
}

// -----

// A block stride near 2^63 overflows the footprint.
!b = memref<2x64x64xbf16, strided<[4611686018427387904, 64, 1]>, #gpu.address_space<workgroup>>

func.func @mma_stride_overflow(%a: memref<2x64x64xbf16, #gpu.address_space<workgroup>>, %b: !b) {
  // expected-error @+1 {{'kvpipe.warpgroup_mma' op operand B ends more than 2^63 bytes into shared memory}}
  %d = kvpipe.warpgroup_mma %a, %b : memref<2x64x64xbf16, #gpu.address_space<workgroup>>, !b -> vector<32xf32>
  return
}
