// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 5 of --kvpipe-verify-protocol: the bytes a producer_commit expects
// (kvpipe.transaction_bytes, where recorded) are those its slot's TMA loads
// deliver, and every TMA load completing on a producer barrier is counted by
// a commit; otherwise the barrier's phase never completes, or completes
// before the data landed.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// Two 8 KiB boxes, but the commit records 4 KiB.
func.func @recorded_bytes_disagree(%map: !map, %i: index, %t0: !tile, %t1: !tile) -> !p {
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  // expected-note @below {{the first of its 2 TMA load(s)}}
  kvpipe.tma_load %map[%i, %i, %i], %t0, %b : !map, !tile
  kvpipe.tma_load %map[%i, %i, %i], %t1, %b : !map, !tile
  // expected-error-re @below {{'kvpipe.producer_commit' op expect_tx of 4096 bytes disagrees with the 16384 bytes its TMA loads deliver (sub-stage 0 of pipeline created at {{.*}}:15:8 : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>)}}
  kvpipe.producer_commit %p {kvpipe.transaction_bytes = 4096 : i64} : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Bytes recorded for a slot no TMA load fills.
func.func @recorded_bytes_without_loads(%p: !p) -> !p {
  kvpipe.producer_acquire %p : !p
  // expected-error @below {{'kvpipe.producer_commit' op expect_tx of 8192 bytes disagrees with the 0 bytes its TMA loads deliver (sub-stage 0 of pipeline argument #0 of @recorded_bytes_without_loads}}
  kvpipe.producer_commit %p {kvpipe.transaction_bytes = 8192 : i64} : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

func.func @recorded_bytes_not_an_integer(%p: !p) -> !p {
  kvpipe.producer_acquire %p : !p
  // expected-error @below {{'kvpipe.producer_commit' op 'kvpipe.transaction_bytes' must be an integer attribute, got "8192" (sub-stage 0 of}}
  kvpipe.producer_commit %p {kvpipe.transaction_bytes = "8192"} : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// A load on a producer barrier that nothing commits: the barrier's phase
// never completes.
func.func @load_without_commit(%map: !map, %i: index, %t: !tile) {
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{the barrier}}
  %b = kvpipe.producer_mbar %p : !p
  // expected-error-re @below {{'kvpipe.tma_load' op completes on a barrier that no producer_commit expects: the producer barrier (sub-stage 0 of pipeline created at {{.*}}:62:8 : !kvpipe.pipeline<{{.*}}>)}}
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// The load completes on the barrier of sub-stage 1, the commit arrives on
// sub-stage 0's.
func.func @load_on_other_sub_stage(%p: !p, %map: !map, %i: index, %t: !tile) -> !p {
  kvpipe.producer_acquire %p stage 0 : !p
  // expected-note @below {{the barrier}}
  %b = kvpipe.producer_mbar %p stage 1 : !p
  // expected-error @below {{'kvpipe.tma_load' op completes on a barrier that no producer_commit expects: the producer barrier (sub-stage 1 of pipeline argument #0}}
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  // expected-error @below {{'kvpipe.producer_commit' op commits the slot up to sub-stage 0 but not sub-stage 1 in its block}}
  kvpipe.producer_commit %p stage 0 : !p
  // expected-error @below {{'kvpipe.step' op steps past a slot whose sub-stage 1 it did not commit on every path}}
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// The load comes after the state's step: it belongs to no commit's slot.
func.func @load_after_step(%p: !p, %map: !map, %i: index, %t: !tile) -> !p {
  kvpipe.producer_acquire %p : !p
  // expected-note @below {{the barrier}}
  %b = kvpipe.producer_mbar %p : !p
  kvpipe.producer_commit %p : !p
  %q = kvpipe.step %p : !p
  // expected-error @below {{'kvpipe.tma_load' op completes on a barrier that no producer_commit expects}}
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// What the transaction analysis cannot count is its error, at the commit
// (and the load is not reported a second time).
func.func @uncountable(%p: !p, %map: !map, %i: index, %t: !tile, %c: i1) -> !p {
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  scf.if %c {
    // expected-note @below {{the load}}
    kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  }
  // expected-error @below {{'kvpipe.producer_commit' op cannot derive its transaction bytes: a TMA load completing on its barrier is under 'scf.if'}}
  kvpipe.producer_commit %p : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 2, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

func.func @two_producers(%p: !p, %map: !map, %i: index, %t: !tile) -> !p {
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  // expected-error @below {{'kvpipe.producer_commit' op commits a slot filled by TMA, which one elected thread arrives on once: the pipeline must have producers = 1, got 2}}
  kvpipe.producer_commit %p : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// Correct: recorded bytes that match (a load counted once per iteration of a
// constant-trip loop), a load after its commit (expect_tx may come first),
// a commit without loads and without recorded bytes.
func.func @counted(%p: !p, %map: !map, %i: index, %t: !tile) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  kvpipe.producer_acquire %p stage 0 : !p
  %b0 = kvpipe.producer_mbar %p stage 0 : !p
  scf.for %j = %c0 to %c3 step %c1 {
    kvpipe.tma_load %map[%j, %i, %i], %t, %b0 : !map, !tile
  }
  kvpipe.producer_commit %p stage 0 {kvpipe.transaction_bytes = 24576 : i64} : !p
  kvpipe.producer_acquire %p stage 1 : !p
  %b1 = kvpipe.producer_mbar %p stage 1 : !p
  kvpipe.producer_commit %p stage 1 {kvpipe.transaction_bytes = 8192 : i64} : !p
  kvpipe.tma_load %map[%i, %i, %i], %t, %b1 : !map, !tile
  %q = kvpipe.step %p : !p
  kvpipe.producer_acquire %q stage 0 : !p
  kvpipe.producer_commit %q stage 0 : !p
  kvpipe.producer_acquire %q stage 1 : !p
  kvpipe.producer_commit %q stage 1 : !p
  %r = kvpipe.step %q : !p
  return %r : !p
}
