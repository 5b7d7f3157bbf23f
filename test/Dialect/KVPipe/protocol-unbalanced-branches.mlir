// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 6 of --kvpipe-verify-protocol, branches that advance alike but do not
// do the protocol alike: a consumer branch that steps past a slot instead of
// waiting for and releasing it, a producer that fills a slot only under a
// condition but steps every iteration. A kvpipe.step follows the commit of
// every sub-stage of its slot in its block. Each wrong program is followed
// by its corrected form.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Fully masked blocks are skipped by stepping past them: nobody releases the
// slot, and the producer's next lap waits for it forever.
func.func @consumer_steps_past(%p: !p, %n: index, %e: i1, %n_visible: index) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    %visible = arith.cmpi ult, %i, %n_visible : index
    %t = scf.if %visible -> !p {
      kvpipe.consumer_wait %s : !p
      %u = kvpipe.consumer_release %s, %e : !p
      scf.yield %u : !p
    } else {
      // expected-error-re @below {{'kvpipe.step' op steps past a slot it did not fill: no producer_commit of the slot runs before it on every path (a consumer advances with consumer_release; a producer that skips a slot leaves the consumers waiting for it) (pipeline argument #0 of @consumer_steps_past : {{.*}})}}
      %u = kvpipe.step %s : !p
      scf.yield %u : !p
    }
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Corrected: a skipped block still waits for and releases its slot.
func.func @consumer_releases_skipped(%p: !p, %n: index, %e: i1, %n_visible: index) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.consumer_wait %s : !p
    %t = kvpipe.consumer_release %s, %e : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// The producer loads only the blocks it needs but steps every iteration:
// the consumers wait for slots that never fill.
func.func @producer_conditional_fill(%p: !p, %n: index, %needed: i1) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    scf.if %needed {
      kvpipe.producer_acquire %s : !p
      kvpipe.producer_commit %s : !p
    }
    // expected-error @below {{'kvpipe.step' op steps past a slot it did not fill}}
    %t = kvpipe.step %s : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Corrected: the step moves under the condition with the fill, and the
// branch yields the state either way.
func.func @producer_fill_then_step(%p: !p, %n: index, %needed: i1) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.producer_acquire %s : !p
    kvpipe.producer_commit %s : !p
    %t = kvpipe.step %s : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// One branch waits and releases, the other only waits: the state advances
// in one branch only.
func.func @release_in_one_branch(%p: !p, %c: i1, %e: i1) -> !p {
  // expected-error @below {{'scf.if' op yields a state advanced in one branch but not in the other}}
  %t = scf.if %c -> !p {
    kvpipe.consumer_wait %p : !p
    // expected-note @below {{advanced here}}
    %u = kvpipe.consumer_release %p, %e : !p
    scf.yield %u : !p
  } else {
    scf.yield %p : !p
  }
  return %t : !p
}
