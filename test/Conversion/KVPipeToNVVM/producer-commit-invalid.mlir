// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file -verify-diagnostics

// The transaction bytes of a producer_commit must be derivable statically;
// where they are not, the commit is an error (before any rewriting).

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!kt = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @load_under_if(%p: !p, %k: !k, %kt: !kt, %i: index, %c: i1) {
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  scf.if %c {
    // expected-note @+1 {{the load}}
    kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  }
  // expected-error @+1 {{'kvpipe.producer_commit' op cannot derive its transaction bytes: a TMA load completing on its barrier is under 'scf.if' (only scf.for loops of constant trip count are counted)}}
  kvpipe.producer_commit %p : !p
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!kt = memref<64x64xbf16, #gpu.address_space<workgroup>>

// After the commit (expect_tx first) the same rule holds.
func.func @load_under_if_after(%p: !p, %k: !k, %kt: !kt, %i: index, %c: i1) -> !p {
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  // expected-error @+1 {{'kvpipe.producer_commit' op cannot derive its transaction bytes: a TMA load completing on its barrier is under 'scf.if'}}
  kvpipe.producer_commit %p : !p
  scf.if %c {
    // expected-note @+1 {{the load}}
    kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  }
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!kt = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @dynamic_trip_count(%p: !p, %k: !k, %kt: !kt, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  scf.for %j = %c0 to %n step %c1 {
    // expected-note @+1 {{the load}}
    kvpipe.tma_load %k[%j, %j], %kt, %b : !k, !kt
  }
  // expected-error @+1 {{'kvpipe.producer_commit' op cannot derive its transaction bytes: a TMA load completing on its barrier is under 'scf.for' (only scf.for loops of constant trip count are counted)}}
  kvpipe.producer_commit %p : !p
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!kt = memref<64x64xbf16, #gpu.address_space<workgroup>>

// Inside a constant loop, a condition still hides the count.
func.func @if_in_loop(%p: !p, %k: !k, %kt: !kt, %c: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  scf.for %j = %c0 to %c4 step %c1 {
    scf.if %c {
      // expected-note @+1 {{the load}}
      kvpipe.tma_load %k[%j, %j], %kt, %b : !k, !kt
    }
  }
  // expected-error @+1 {{'kvpipe.producer_commit' op cannot derive its transaction bytes: a TMA load completing on its barrier is under 'scf.if'}}
  kvpipe.producer_commit %p : !p
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 2, consumers = 2>
!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!kt = memref<64x64xbf16, #gpu.address_space<workgroup>>

// A slot filled by TMA is committed by one elected thread, once.
func.func @producers(%p: !p, %k: !k, %kt: !kt, %i: index) {
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  // expected-error @+1 {{'kvpipe.producer_commit' op commits a slot filled by TMA, which one elected thread arrives on once: the pipeline must have producers = 1, got 2}}
  kvpipe.producer_commit %p : !p
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!k = !kvpipe.tensor_map<box = [128, 128], element_type = f64, swizzle = 0>
!kt = memref<128x128xf64, #gpu.address_space<workgroup>>

// 8 * 128 * 128 * 8 bytes: more than the 20-bit transaction count.
func.func @too_many_bytes(%p: !p, %k: !k, %kt: !kt, %i: index) {
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  kvpipe.tma_load %k[%i, %i], %kt, %b : !k, !kt
  // expected-error @+1 {{'kvpipe.producer_commit' op its slot's TMA loads deliver 1048576 bytes, more than an mbarrier phase can track (1048575)}}
  kvpipe.producer_commit %p : !p
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!kt = memref<64x64xbf16, #gpu.address_space<workgroup>>

// Exactly at the limit is fine only up to 2^20 - 1: 128 loads of 8192 bytes
// in a loop are 2^20.
func.func @too_many_in_loop(%p: !p, %k: !k, %kt: !kt, %i: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  scf.for %j = %c0 to %c128 step %c1 {
    kvpipe.tma_load %k[%j, %i], %kt, %b : !k, !kt
  }
  // expected-error @+1 {{'kvpipe.producer_commit' op its slot's TMA loads deliver 1048576 bytes, more than an mbarrier phase can track (1048575)}}
  kvpipe.producer_commit %p : !p
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// The barrier is passed to a callee whose loads cannot be counted.
func.func @barrier_to_external(%p: !p) {
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  // expected-note @below {{the call}}
  func.call @ext(%b) : (!kvpipe.mbarrier) -> ()
  // expected-error @below {{'kvpipe.producer_commit' op cannot derive its transaction bytes: its barrier is passed to a call whose callee is not in the module}}
  kvpipe.producer_commit %p : !p
  return
}
func.func private @ext(!kvpipe.mbarrier)
