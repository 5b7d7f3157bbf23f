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
// a commit without loads and without recorded bytes. (Each sub-stage loads
// its own tile.)
func.func @counted(%p: !p, %map: !map, %i: index, %t: !tile, %t1: !tile) -> !p {
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
  kvpipe.tma_load %map[%i, %i, %i], %t1, %b1 : !map, !tile
  %q = kvpipe.step %p : !p
  kvpipe.producer_acquire %q stage 0 : !p
  kvpipe.producer_commit %q stage 0 : !p
  kvpipe.producer_acquire %q stage 1 : !p
  kvpipe.producer_commit %q stage 1 : !p
  %r = kvpipe.step %q : !p
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// Loads in a helper that the producer barrier is passed to are counted at
// the call: two 8 KiB loads, but the commit records one.
func.func @helper_loads_disagree(%p: !p, %map: !map, %i: index, %t: !tile) -> !p {
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  // expected-note @below {{the first of its 2 TMA load(s)}}
  func.call @load2(%map, %i, %t, %b) : (!map, index, !tile, !kvpipe.mbarrier) -> ()
  // expected-error @below {{'kvpipe.producer_commit' op expect_tx of 8192 bytes disagrees with the 16384 bytes its TMA loads deliver (sub-stage 0 of pipeline argument #0 of @helper_loads_disagree}}
  kvpipe.producer_commit %p {kvpipe.transaction_bytes = 8192 : i64} : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}
func.func private @load2(%map: !map, %i: index, %t: !tile, %b: !kvpipe.mbarrier) {
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// Correct: the helper's loads are counted (16 KiB recorded, through a helper
// of a helper, and without recorded bytes, derived for the lowering).
func.func @helper_loads_counted(%p: !p, %map: !map, %i: index, %t: !tile) -> !p {
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  func.call @load2(%map, %i, %t, %b) : (!map, index, !tile, !kvpipe.mbarrier) -> ()
  kvpipe.producer_commit %p {kvpipe.transaction_bytes = 16384 : i64} : !p
  %q = kvpipe.step %p : !p
  kvpipe.producer_acquire %q : !p
  %c = kvpipe.producer_mbar %q : !p
  func.call @outer(%c, %map, %i, %t) : (!kvpipe.mbarrier, !map, index, !tile) -> ()
  kvpipe.producer_commit %q : !p
  %r = kvpipe.step %q : !p
  return %r : !p
}
func.func private @outer(%b: !kvpipe.mbarrier, %map: !map, %i: index, %t: !tile) {
  func.call @load2(%map, %i, %t, %b) : (!map, index, !tile, !kvpipe.mbarrier) -> ()
  return
}
func.func private @load2(%map: !map, %i: index, %t: !tile, %b: !kvpipe.mbarrier) {
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// The helper is called with the producer barrier after the commit's slot
// was stepped past: its load is counted by no commit.
func.func @helper_load_uncounted(%p: !p, %map: !map, %i: index, %t: !tile) -> !p {
  kvpipe.producer_acquire %p : !p
  // expected-note @below {{the barrier}}
  %b = kvpipe.producer_mbar %p : !p
  kvpipe.producer_commit %p : !p
  %q = kvpipe.step %p : !p
  // expected-note @below {{through this call}}
  func.call @load1(%map, %i, %t, %b) : (!map, index, !tile, !kvpipe.mbarrier) -> ()
  return %q : !p
}
func.func private @load1(%map: !map, %i: index, %t: !tile, %b: !kvpipe.mbarrier) {
  // expected-error @below {{'kvpipe.tma_load' op completes on a barrier that no producer_commit expects: the producer barrier (sub-stage 0 of pipeline argument #0 of @helper_load_uncounted}}
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// The barrier escapes to a callee whose body is not in the module: the
// bytes it delivers cannot be derived.
func.func @barrier_to_external(%p: !p, %map: !map, %i: index, %t: !tile) -> !p {
  kvpipe.producer_acquire %p : !p
  // expected-note @below {{the barrier}}
  %b = kvpipe.producer_mbar %p : !p
  // expected-note @below {{the call}}
  // expected-warning @below {{'func.call' op cannot prove what happens to the pipeline barrier passed to 'func.call': the checker does not follow barriers into it}}
  func.call @ext(%b) : (!kvpipe.mbarrier) -> ()
  // expected-error @below {{'kvpipe.producer_commit' op cannot derive its transaction bytes: its barrier is passed to a call whose callee is not in the module, which may complete TMA loads on it}}
  kvpipe.producer_commit %p : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}
func.func private @ext(!kvpipe.mbarrier)

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// TMA completing on the consumer (empty) barrier, directly, with an
// explicit slot index, and in a helper.
func.func @load_on_consumer_barrier(%p: !p, %map: !map, %i: index, %t: !tile) -> !p {
  kvpipe.producer_acquire %p : !p
  // expected-note @below {{the barrier}}
  %b = kvpipe.consumer_mbar %p : !p
  // expected-error @below {{'kvpipe.tma_load' op completes on the consumer (empty) barrier: the consumers never see the data land (they wait on the producer barrier) and its bytes corrupt the barrier the producer acquires the slot on (sub-stage 0 of pipeline argument #0 of @load_on_consumer_barrier}}
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  // expected-note @below {{the barrier}}
  %e = kvpipe.consumer_mbar %p[%i] : !p
  // expected-error @below {{'kvpipe.tma_load' op completes on the consumer (empty) barrier}}
  kvpipe.tma_load %map[%i, %i, %i], %t, %e : !map, !tile
  // expected-note @below {{through this call}}
  func.call @load1(%map, %i, %t, %b) : (!map, index, !tile, !kvpipe.mbarrier) -> ()
  kvpipe.producer_commit %p : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}
func.func private @load1(%map: !map, %i: index, %t: !tile, %b: !kvpipe.mbarrier) {
  // expected-error @below {{'kvpipe.tma_load' op completes on the consumer (empty) barrier}}
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// A barrier chosen by arith.select, and one that comes from the kernel's
// caller: the checker cannot tell which barrier the load completes on.
// expected-note @below {{the barrier is lost here}}
func.func @load_on_unknown_barrier(%p: !p, %map: !map, %i: index, %t: !tile, %c: i1, %x: !kvpipe.mbarrier) -> !p {
  kvpipe.producer_acquire %p : !p
  %b0 = kvpipe.producer_mbar %p : !p
  %b1 = kvpipe.consumer_mbar %p : !p
  // expected-note @below {{the barrier is lost here}}
  %b = arith.select %c, %b0, %b1 : !kvpipe.mbarrier
  // expected-warning @below {{'kvpipe.tma_load' op cannot prove which barrier this TMA load completes on: it is the result of 'arith.select', which the checker does not follow}}
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  // expected-warning @below {{cannot prove which barrier this TMA load completes on: it is argument #5 of @load_on_unknown_barrier, which nothing in the module calls}}
  kvpipe.tma_load %map[%i, %i, %i], %t, %x : !map, !tile
  kvpipe.producer_commit %p : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// Correct: a helper receives the state, takes its producer barrier and
// issues the loads; the caller acquires and commits. The loads are counted
// through the call (16 KiB recorded; the second slot's through a helper of a
// helper, in a loop of two iterations, and derived for the lowering).
func.func @state_helper_counted(%p: !p, %map: !map, %i: index, %t: !tile) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  kvpipe.producer_acquire %p : !p
  func.call @load2(%p, %map, %i, %t) : (!p, !map, index, !tile) -> ()
  kvpipe.producer_commit %p {kvpipe.transaction_bytes = 16384 : i64} : !p
  %q = kvpipe.step %p : !p
  kvpipe.producer_acquire %q : !p
  scf.for %j = %c0 to %c2 step %c1 {
    func.call @outer(%q, %map, %i, %t) : (!p, !map, index, !tile) -> ()
  }
  kvpipe.producer_commit %q {kvpipe.transaction_bytes = 32768 : i64} : !p
  %r = kvpipe.step %q : !p
  return %r : !p
}
func.func private @outer(%s: !p, %map: !map, %i: index, %t: !tile) {
  func.call @load2(%s, %map, %i, %t) : (!p, !map, index, !tile) -> ()
  return
}
func.func private @load2(%s: !p, %map: !map, %i: index, %t: !tile) {
  %b = kvpipe.producer_mbar %s : !p
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// The same helper, but the commit records one load's bytes.
func.func @state_helper_disagree(%p: !p, %map: !map, %i: index, %t: !tile) -> !p {
  kvpipe.producer_acquire %p : !p
  // expected-note @below {{the first of its 2 TMA load(s)}}
  func.call @load2(%p, %map, %i, %t) : (!p, !map, index, !tile) -> ()
  // expected-error @below {{'kvpipe.producer_commit' op expect_tx of 8192 bytes disagrees with the 16384 bytes its TMA loads deliver (sub-stage 0 of pipeline argument #0 of @state_helper_disagree}}
  kvpipe.producer_commit %p {kvpipe.transaction_bytes = 8192 : i64} : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}
func.func private @load2(%s: !p, %map: !map, %i: index, %t: !tile) {
  %b = kvpipe.producer_mbar %s : !p
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// The helper that takes the slot's barrier is also called where no commit
// of the state follows (a second caller, beside a correct one): at that call
// its load is counted by no commit.
func.func @state_helper_counted_here(%p: !p, %map: !map, %i: index, %t: !tile) -> !p {
  kvpipe.producer_acquire %p : !p
  func.call @load1(%p, %map, %i, %t) : (!p, !map, index, !tile) -> ()
  kvpipe.producer_commit %p {kvpipe.transaction_bytes = 8192 : i64} : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}
func.func @state_helper_uncounted(%p: !p, %map: !map, %i: index, %t: !tile) {
  // expected-note @below {{through this call}}
  func.call @load1(%p, %map, %i, %t) : (!p, !map, index, !tile) -> ()
  return
}
func.func private @load1(%s: !p, %map: !map, %i: index, %t: !tile) {
  // expected-note @below {{the barrier}}
  %b = kvpipe.producer_mbar %s : !p
  // expected-error @below {{'kvpipe.tma_load' op completes on a barrier that no producer_commit expects: the producer barrier (sub-stage 0 of pipeline argument #0 of @load1}}
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  return
}

// -----

// The producer loads ring slot (index + 1) mod 2 on the barrier of slot
// index (audit c02): the consumers wait on a slot that never gets the data.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!ring = memref<2x64x64xbf16, #gpu.address_space<workgroup>>
!tile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>
func.func @load_into_next_slot(%p: !p, %n: index, %map: !map, %k: !ring) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    %index = kvpipe.index %s : !p
    %next = arith.addi %index, %c1 : index
    %slot = arith.remui %next, %c2 : index
    kvpipe.producer_acquire %s : !p
    // expected-note @below {{the barrier}}
    %b = kvpipe.producer_mbar %s : !p
    %t = memref.subview %k[%slot, 0, 0] [1, 64, 64] [1, 1, 1] : !ring to !tile
    // expected-error @below {{'kvpipe.tma_load' op fills ring slot 0 while its barrier is of the state at slot 1: the consumers wait for a slot that never receives the data}}
    kvpipe.tma_load %map[%c0, %i, %c0], %t, %b : !map, !tile
    kvpipe.producer_commit %s : !p
    %u = kvpipe.step %s : !p
    scf.yield %u : !p
  }
  return %r : !p
}

// -----

// Always ring slot 0 (audit c03): wrong from the second slot on, unless the
// loop runs once; not provable.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!ring = memref<2x64x64xbf16, #gpu.address_space<workgroup>>
!tile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>
func.func @load_into_constant_slot(%p: !p, %n: index, %map: !map, %k: !ring) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.producer_acquire %s : !p
    // expected-note @below {{the barrier}}
    %b = kvpipe.producer_mbar %s : !p
    %t = memref.subview %k[%c0, 0, 0] [1, 64, 64] [1, 1, 1] : !ring to !tile
    // expected-warning @below {{'kvpipe.tma_load' op cannot prove that the TMA load fills the ring slot of its barrier's state: no offset of its destination is computed from the state's kvpipe.index}}
    kvpipe.tma_load %map[%c0, %i, %c0], %t, %b : !map, !tile
    kvpipe.producer_commit %s : !p
    %u = kvpipe.step %s : !p
    scf.yield %u : !p
  }
  return %r : !p
}

// -----

// Corrected: the loop loads into its state's kvpipe.index (through an
// index_cast round trip), and so does the first fill peeled off right after
// the create (a constant slot 0 there would be right, but which offset is the
// ring's is not known without an index: unproven, as in the program above).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!ring = memref<2x64x64xbf16, #gpu.address_space<workgroup>>
!tile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>
func.func @load_into_own_slot(%n: index, %map: !map, %k: !ring, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    %b0 = kvpipe.producer_mbar %p : !p
    %i0 = kvpipe.index %p : !p
    %t0 = memref.subview %k[%i0, 0, 0] [1, 64, 64] [1, 1, 1] : !ring to !tile
    kvpipe.tma_load %map[%c0, %c0, %c0], %t0, %b0 : !map, !tile
    kvpipe.producer_commit %p : !p
    %p1 = kvpipe.step %p : !p
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p1) -> (!p) {
      %index = kvpipe.index %s : !p
      %i32 = arith.index_cast %index : index to i32
      %slot = arith.index_cast %i32 : i32 to index
      kvpipe.producer_acquire %s : !p
      %b = kvpipe.producer_mbar %s : !p
      %t = memref.subview %k[%slot, 0, 0] [1, 64, 64] [1, 1, 1] : !ring to !tile
      kvpipe.tma_load %map[%c0, %i, %c0], %t, %b : !map, !tile
      kvpipe.producer_commit %s : !p
      %u = kvpipe.step %s : !p
      scf.yield %u : !p
    }
  } else {
    kvpipe.consumer_wait %p : !p
    %p1 = kvpipe.consumer_release %p, %e : !p
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p1) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %u = kvpipe.consumer_release %s, %e : !p
      scf.yield %u : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// A multicast load: the barrier also receives the copies the other CTAs of
// the cluster multicast to this one, which no local count sees.
func.func @multicast_bytes(%map: !map, %t: !tile, %mask: i16) -> !p {
  %c0 = arith.constant 0 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  // expected-note @below {{the multicast load}}
  kvpipe.tma_load %map[%c0, %c0], %t, %b multicast %mask : !map, !tile
  // expected-warning @below {{cannot prove the bytes that complete on the producer barrier: a TMA load of the slot is multicast, so the barrier of every CTA in its mask also receives the copies its peers issue, which the checker does not count (the commit expects only this CTA's loads, 8192 bytes)}}
  kvpipe.producer_commit %p : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

// kvpipe.bulk_load is counted as the TMA loads are (AsyncSlotCopyOpInterface):
// a Q tile and its 64 fp32 statistics (8192 + 256 bytes), the commit
// recording only the tile's.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>
!row = memref<64xf32, #gpu.address_space<workgroup>>
func.func @bulk_bytes_uncounted(%p: !p, %map: !map, %i: index, %t: !tile, %src: !llvm.ptr, %r: !row) -> !p {
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  // expected-note @below {{the first of its 2 TMA load(s)}}
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  kvpipe.bulk_load %src, %r, %b : !llvm.ptr, !row
  // expected-error @below {{'kvpipe.producer_commit' op expect_tx of 8192 bytes disagrees with the 8448 bytes its TMA loads deliver}}
  kvpipe.producer_commit %p {kvpipe.transaction_bytes = 8192 : i64} : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

// Corrected: the commit expects both copies.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>
!row = memref<64xf32, #gpu.address_space<workgroup>>
func.func @bulk_bytes_counted(%p: !p, %map: !map, %i: index, %t: !tile, %src: !llvm.ptr, %r: !row) -> !p {
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  kvpipe.bulk_load %src, %r, %b : !llvm.ptr, !row
  kvpipe.producer_commit %p {kvpipe.transaction_bytes = 8448 : i64} : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

// A bulk load into the next slot of its ring on the barrier of this one.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!ring = memref<2x64xf32, #gpu.address_space<workgroup>>
!row = memref<64xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
func.func @bulk_load_into_next_slot(%p: !p, %n: index, %src: !llvm.ptr, %k: !ring) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    %index = kvpipe.index %s : !p
    %next = arith.addi %index, %c1 : index
    %slot = arith.remui %next, %c2 : index
    kvpipe.producer_acquire %s : !p
    // expected-note @below {{the barrier}}
    %b = kvpipe.producer_mbar %s : !p
    %t = memref.subview %k[%slot, 0] [1, 64] [1, 1] : !ring to !row
    // expected-error @below {{'kvpipe.bulk_load' op fills ring slot 0 while its barrier is of the state at slot 1: the consumers wait for a slot that never receives the data}}
    kvpipe.bulk_load %src, %t, %b : !llvm.ptr, !row
    kvpipe.producer_commit %s : !p
    %u = kvpipe.step %s : !p
    scf.yield %u : !p
  }
  return %r : !p
}

// -----

// Corrected: the slot of the barrier's state.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!ring = memref<2x64xf32, #gpu.address_space<workgroup>>
!row = memref<64xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
func.func @bulk_load_into_own_slot(%p: !p, %n: index, %src: !llvm.ptr, %k: !ring) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    %slot = kvpipe.index %s : !p
    kvpipe.producer_acquire %s : !p
    %b = kvpipe.producer_mbar %s : !p
    %t = memref.subview %k[%slot, 0] [1, 64] [1, 1] : !ring to !row
    kvpipe.bulk_load %src, %t, %b : !llvm.ptr, !row
    kvpipe.producer_commit %s : !p
    %u = kvpipe.step %s : !p
    scf.yield %u : !p
  }
  return %r : !p
}

// -----

// The rules that hold for TMA loads hold for bulk loads (one interface):
// completing on the consumer (empty) barrier, under a condition the
// transaction analysis cannot count, and on a barrier no commit expects.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!row = memref<64xf32, #gpu.address_space<workgroup>>
func.func @bulk_load_on_consumer_barrier(%p: !p, %src: !llvm.ptr, %r: !row) -> !p {
  kvpipe.producer_acquire %p : !p
  // expected-note @below {{the barrier}}
  %b = kvpipe.consumer_mbar %p : !p
  // expected-error @below {{'kvpipe.bulk_load' op completes on the consumer (empty) barrier}}
  kvpipe.bulk_load %src, %r, %b : !llvm.ptr, !row
  kvpipe.producer_commit %p : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!row = memref<64xf32, #gpu.address_space<workgroup>>
func.func @bulk_load_under_condition(%p: !p, %src: !llvm.ptr, %r: !row, %c: i1) -> !p {
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  scf.if %c {
    // expected-note @below {{the load}}
    kvpipe.bulk_load %src, %r, %b : !llvm.ptr, !row
  }
  // expected-error @below {{'kvpipe.producer_commit' op cannot derive its transaction bytes: a TMA load completing on its barrier is under 'scf.if'}}
  kvpipe.producer_commit %p : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!row = memref<64xf32, #gpu.address_space<workgroup>>
// A helper that loads on the producer barrier of a state no caller
// commits.
func.func @bulk_load_uncommitted(%p: !p, %src: !llvm.ptr, %r: !row) {
  // expected-note @below {{through this call}}
  func.call @bulk_load1(%p, %src, %r) : (!p, !llvm.ptr, !row) -> ()
  return
}
func.func private @bulk_load1(%s: !p, %src: !llvm.ptr, %r: !row) {
  // expected-note @below {{the barrier}}
  %b = kvpipe.producer_mbar %s : !p
  // expected-error @below {{'kvpipe.bulk_load' op completes on a barrier that no producer_commit expects}}
  kvpipe.bulk_load %src, %r, %b : !llvm.ptr, !row
  return
}

// -----

// A ring of one slot for a pipeline of two stages: the second slot's copy
// lands past the ring, in the buffer after it (here the other statistic's).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!ring = memref<1x64xf32, #gpu.address_space<workgroup>>
!row = memref<64xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
func.func @bulk_load_ring_too_small(%p: !p, %n: index, %src: !llvm.ptr, %k: !ring) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    %slot = kvpipe.index %s : !p
    kvpipe.producer_acquire %s : !p
    // expected-note @below {{the barrier}}
    %b = kvpipe.producer_mbar %s : !p
    %t = memref.subview %k[%slot, 0] [1, 64] [1, 1] : !ring to !row
    // expected-error @below {{'kvpipe.bulk_load' op fills a ring of 1 slot(s) at its state's slot, but the pipeline has 2 (kv_stages): the slots past the ring's end are other memory}}
    kvpipe.bulk_load %src, %t, %b : !llvm.ptr, !row
    kvpipe.producer_commit %s : !p
    %u = kvpipe.step %s : !p
    scf.yield %u : !p
  }
  return %r : !p
}

// -----

// The same for a TMA load: a 2-stage pipeline's tiles in a 1-slot ring.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!ring = memref<1x64x64xbf16, #gpu.address_space<workgroup>>
!tile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>
func.func @tma_load_ring_too_small(%p: !p, %n: index, %map: !map, %k: !ring) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    %slot = kvpipe.index %s : !p
    kvpipe.producer_acquire %s : !p
    // expected-note @below {{the barrier}}
    %b = kvpipe.producer_mbar %s : !p
    %t = memref.subview %k[%slot, 0, 0] [1, 64, 64] [1, 1, 1] : !ring to !tile
    // expected-error @below {{'kvpipe.tma_load' op fills a ring of 1 slot(s) at its state's slot, but the pipeline has 2 (kv_stages)}}
    kvpipe.tma_load %map[%c0, %i, %c0], %t, %b : !map, !tile
    kvpipe.producer_commit %s : !p
    %u = kvpipe.step %s : !p
    scf.yield %u : !p
  }
  return %r : !p
}
