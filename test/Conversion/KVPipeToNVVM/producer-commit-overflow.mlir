// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file -verify-diagnostics

// The bytes a commit expects are the loads' box bytes times the trip counts
// of the constant loops around them. Trip counts near 2^63 overflowed that
// product: the sum wrapped around, passed the 20-bit limit check and
// lowered to a wrong mbarrier.expect_tx. The overflow is an error now.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @bytes_overflow(%p: !p, %map: !map, %t: !tile) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %big = arith.constant 4611686018427387904 : index
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  scf.for %i = %c0 to %big step %c1 {
    kvpipe.tma_load %map[%c0, %c0], %t, %b : !map, !tile
  }
  // expected-error @+1 {{'kvpipe.producer_commit' op its slot's TMA loads deliver more than 2^63 bytes, more than an mbarrier phase can track (1048575)}}
  kvpipe.producer_commit %p : !p
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @trips_overflow(%p: !p, %map: !map, %t: !tile) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %big = arith.constant 4294967296 : index
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  scf.for %i = %c0 to %big step %c1 {
    scf.for %j = %c0 to %big step %c1 {
      // expected-note @+1 {{the load}}
      kvpipe.tma_load %map[%c0, %c0], %t, %b : !map, !tile
    }
  }
  // expected-error @+1 {{'kvpipe.producer_commit' op cannot derive its transaction bytes: the loops around a TMA load completing on its barrier run more than 2^63 times}}
  kvpipe.producer_commit %p : !p
  return
}
