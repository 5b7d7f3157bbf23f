// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// The verifier of kvpipe.bulk_load: one rule per case.

func.func @not_shared(%src: !llvm.ptr, %row: memref<64xf32>, %bar: !kvpipe.mbarrier) {
  // expected-error @below {{'kvpipe.bulk_load' op destination must be in workgroup (shared) memory, got 'memref<64xf32>'}}
  kvpipe.bulk_load %src, %row, %bar : !llvm.ptr, memref<64xf32>
  return
}

// -----

func.func @bits(%src: !llvm.ptr, %row: memref<128xi1, #gpu.address_space<workgroup>>, %bar: !kvpipe.mbarrier) {
  // expected-error @below {{'kvpipe.bulk_load' op destination elements must be whole bytes of an integer or float type, got 'i1'}}
  kvpipe.bulk_load %src, %row, %bar : !llvm.ptr, memref<128xi1, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @dynamic(%src: !llvm.ptr, %row: memref<?xf32, #gpu.address_space<workgroup>>, %bar: !kvpipe.mbarrier) {
  // expected-error @below {{'kvpipe.bulk_load' op destination must have a static shape, got 'memref<?xf32, #gpu.address_space<workgroup>>'}}
  kvpipe.bulk_load %src, %row, %bar : !llvm.ptr, memref<?xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @not_16_bytes(%src: !llvm.ptr, %row: memref<6xf32, #gpu.address_space<workgroup>>, %bar: !kvpipe.mbarrier) {
  // expected-error @below {{'kvpipe.bulk_load' op copies a positive multiple of 16 bytes, at most 1048560 (an mbarrier phase's transaction count), got a destination of 24 bytes}}
  kvpipe.bulk_load %src, %row, %bar : !llvm.ptr, memref<6xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @too_large(%src: !llvm.ptr, %row: memref<1024x1024xf32, #gpu.address_space<workgroup>>, %bar: !kvpipe.mbarrier) {
  // expected-error @below {{'kvpipe.bulk_load' op copies a positive multiple of 16 bytes, at most 1048560 (an mbarrier phase's transaction count), got a destination of 4194304 bytes}}
  kvpipe.bulk_load %src, %row, %bar : !llvm.ptr, memref<1024x1024xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @overflow(%src: !llvm.ptr, %row: memref<4611686018427387904x4xf32, #gpu.address_space<workgroup>>, %bar: !kvpipe.mbarrier) {
  // expected-error @below {{got a destination of more than 2^63 bytes}}
  kvpipe.bulk_load %src, %row, %bar : !llvm.ptr, memref<4611686018427387904x4xf32, #gpu.address_space<workgroup>>
  return
}

// -----

!cols = memref<8x4xf32, strided<[8, 1]>, #gpu.address_space<workgroup>>
func.func @not_contiguous(%src: !llvm.ptr, %row: !cols, %bar: !kvpipe.mbarrier) {
  // expected-error @below {{'kvpipe.bulk_load' op destination must be contiguous (row-major dense strides), got 'memref<8x4xf32, strided<[8, 1]>, #gpu.address_space<workgroup>>'}}
  kvpipe.bulk_load %src, %row, %bar : !llvm.ptr, !cols
  return
}

// -----

!row = memref<64xf32, strided<[1], offset: 2>, #gpu.address_space<workgroup>>
func.func @misaligned(%src: !llvm.ptr, %row: !row, %bar: !kvpipe.mbarrier) {
  // expected-error @below {{'kvpipe.bulk_load' op destination must be 16-byte aligned, got an offset of 8 bytes}}
  kvpipe.bulk_load %src, %row, %bar : !llvm.ptr, !row
  return
}

// -----

!row = memref<64xf32, strided<[1], offset: 100000>, #gpu.address_space<workgroup>>
func.func @outside(%src: !llvm.ptr, %row: !row, %bar: !kvpipe.mbarrier) {
  // expected-error @below {{'kvpipe.bulk_load' op destination offset of 100000 elements is outside the 232448 bytes (227 KiB) of shared memory of an sm_90 CTA}}
  kvpipe.bulk_load %src, %row, %bar : !llvm.ptr, !row
  return
}

// -----

func.func @not_a_pointer(%src: i64, %row: memref<64xf32, #gpu.address_space<workgroup>>, %bar: !kvpipe.mbarrier) {
  // expected-error @below {{'kvpipe.bulk_load' op operand #0 must be LLVM pointer type, but got 'i64'}}
  kvpipe.bulk_load %src, %row, %bar : i64, memref<64xf32, #gpu.address_space<workgroup>>
  return
}

// -----

func.func @shared_source(%src: !llvm.ptr<3>, %row: memref<64xf32, #gpu.address_space<workgroup>>, %bar: !kvpipe.mbarrier) {
  // expected-error @below {{'kvpipe.bulk_load' op source must be a global (address space 1) or generic (0) pointer, got address space 3}}
  kvpipe.bulk_load %src, %row, %bar : !llvm.ptr<3>, memref<64xf32, #gpu.address_space<workgroup>>
  return
}
