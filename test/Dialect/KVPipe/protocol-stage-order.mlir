// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 3 of --kvpipe-verify-protocol, order: in a block, the sub-stages of
// one slot are waited, released, acquired and committed in increasing
// qk_stage order (0, 1, ..., qk_stages - 1), each op kind on its own.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

// Waits out of order.
func.func @wait_order(%p: !p, %e: i1) -> !p {
  // expected-note @below {{the previous consumer_wait}}
  kvpipe.consumer_wait %p stage 1 : !p
  // expected-error-re @below {{'kvpipe.consumer_wait' op is out of qk_stage order: the previous consumer_wait of this slot in its block is sub-stage 1 (sub-stage 0 of pipeline argument #0 of @wait_order : !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, {{.*}}>)}}
  kvpipe.consumer_wait %p stage 0 : !p
  %q = kvpipe.consumer_release %p, %e stage 0 : !p
  %r = kvpipe.consumer_release %q, %e stage 1 : !p
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 3, producers = 1, consumers = 2>

// Releases out of order (sub-stages 0 and 1 do not advance the state).
func.func @release_order(%p: !p, %e: i1) -> !p {
  kvpipe.consumer_wait %p stage 0 : !p
  kvpipe.consumer_wait %p stage 1 : !p
  kvpipe.consumer_wait %p stage 2 : !p
  // expected-note @below {{the previous consumer_release}}
  %a = kvpipe.consumer_release %p, %e stage 1 : !p
  // expected-error @below {{'kvpipe.consumer_release' op is out of qk_stage order: the previous consumer_release of this slot in its block is sub-stage 1 (sub-stage 0 of pipeline argument #0}}
  %b = kvpipe.consumer_release %a, %e stage 0 : !p
  %c = kvpipe.consumer_release %b, %e stage 2 : !p
  return %c : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

// Acquires out of order.
func.func @acquire_order(%p: !p) -> !p {
  // expected-note @below {{the previous producer_acquire}}
  kvpipe.producer_acquire %p stage 1 : !p
  // expected-error @below {{'kvpipe.producer_acquire' op is out of qk_stage order: the previous producer_acquire of this slot in its block is sub-stage 1 (sub-stage 0 of pipeline argument #0}}
  kvpipe.producer_acquire %p stage 0 : !p
  kvpipe.producer_commit %p stage 0 : !p
  kvpipe.producer_commit %p stage 1 : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

// Commits out of order.
func.func @commit_order(%p: !p) -> !p {
  kvpipe.producer_acquire %p stage 0 : !p
  kvpipe.producer_acquire %p stage 1 : !p
  // expected-note @below {{the previous producer_commit}}
  kvpipe.producer_commit %p stage 1 : !p
  // expected-error @below {{'kvpipe.producer_commit' op is out of qk_stage order: the previous producer_commit of this slot in its block is sub-stage 1 (sub-stage 0 of pipeline argument #0}}
  kvpipe.producer_commit %p stage 0 : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 3, producers = 1, consumers = 2>

// A skipped sub-stage is out of order too; once reported, the order goes on
// from the last op in order.
func.func @skipped_stage(%p: !p) -> !p {
  // expected-note @below {{the previous producer_acquire}}
  kvpipe.producer_acquire %p stage 0 : !p
  // expected-error @below {{'kvpipe.producer_acquire' op is out of qk_stage order: the previous producer_acquire of this slot in its block is sub-stage 0 (sub-stage 2 of}}
  kvpipe.producer_acquire %p stage 2 : !p
  kvpipe.producer_acquire %p stage 1 : !p
  kvpipe.producer_commit %p stage 0 : !p
  kvpipe.producer_commit %p stage 1 : !p
  kvpipe.producer_commit %p stage 2 : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 3, producers = 1, consumers = 2>

// Correct: three sub-stages in order on both sides, in one loop iteration
// each; the order is per slot, so the next slot starts at 0 again.
func.func @in_order(%n: index, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.producer_acquire %s stage 0 : !p
      kvpipe.producer_commit %s stage 0 : !p
      kvpipe.producer_acquire %s stage 1 : !p
      kvpipe.producer_commit %s stage 1 : !p
      kvpipe.producer_acquire %s stage 2 : !p
      kvpipe.producer_commit %s stage 2 : !p
      %t = kvpipe.step %s : !p
      kvpipe.producer_acquire %t stage 0 : !p
      kvpipe.producer_commit %t stage 0 : !p
      kvpipe.producer_acquire %t stage 1 : !p
      kvpipe.producer_commit %t stage 1 : !p
      kvpipe.producer_acquire %t stage 2 : !p
      kvpipe.producer_commit %t stage 2 : !p
      %u = kvpipe.step %t : !p
      scf.yield %u : !p
    }
  } else {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s stage 0 : !p
      kvpipe.consumer_wait %s stage 1 : !p
      %a = kvpipe.consumer_release %s, %e stage 0 : !p
      kvpipe.consumer_wait %a stage 2 : !p
      %b = kvpipe.consumer_release %a, %e stage 1 : !p
      %c = kvpipe.consumer_release %b, %e stage 2 : !p
      kvpipe.consumer_wait %c stage 0 : !p
      kvpipe.consumer_wait %c stage 1 : !p
      kvpipe.consumer_wait %c stage 2 : !p
      %d = kvpipe.consumer_release %c, %e stage 0 : !p
      %f = kvpipe.consumer_release %d, %e stage 1 : !p
      %g = kvpipe.consumer_release %f, %e stage 2 : !p
      scf.yield %g : !p
    }
  }
  return
}
