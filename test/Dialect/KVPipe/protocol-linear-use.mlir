// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 1 of --kvpipe-verify-protocol: a pipeline state is consumed by at most
// one advancing op (kvpipe.step, kvpipe.consumer_release at the last
// sub-stage) and is not used after it: the old value names a slot the ring
// has moved past.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// The old state read after a step.
func.func @use_after_step() -> index {
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{advanced here}}
  // expected-warning @below {{cannot prove that the filled slots are ever consumed: the pipeline has no consumer side}}
  %q = kvpipe.step %p : !p
  // expected-error-re @below {{'kvpipe.index' op state used after it was advanced (pipeline created at {{.*}}protocol-linear-use.mlir:12:8 : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>)}}
  %i = kvpipe.index %p : !p
  return %i : index
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Advanced twice: two steps of one state (the second one names the sub-stage
// of nothing: a step moves the whole slot).
func.func @advanced_twice() -> (!p, !p) {
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{advanced here}}
  %q = kvpipe.step %p : !p
  // expected-error @below {{'kvpipe.step' op state used after it was advanced (pipeline created at}}
  %r = kvpipe.step %p : !p
  return %q, %r : !p, !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// The consumer releases (and so advances) the slot, then waits on the old
// state again: the message names the sub-stage of the offending op.
func.func @wait_after_release(%e: i1) -> !p {
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.consumer_wait %p : !p
  // expected-note @below {{advanced here}}
  %q = kvpipe.consumer_release %p, %e : !p
  // expected-error-re @below {{'kvpipe.consumer_wait' op state used after it was advanced (sub-stage 0 of pipeline created at {{.*}}:45:8 : !kvpipe.pipeline<{{.*}}>)}}
  kvpipe.consumer_wait %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// A loop that yields the old state after stepping it: every iteration
// starts on the same slot again.
func.func @yield_old_state(%n: index) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.producer_acquire %s : !p
    kvpipe.producer_commit %s : !p
    // expected-note @below {{advanced here}}
    %t = kvpipe.step %s : !p
    // expected-error @below {{'scf.yield' op state used after it was advanced (pipeline created at}}
    scf.yield %s : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

// The release of sub-stage 0 returns the same state as a new value; the
// release of the last sub-stage advances that slot, whichever value names
// it.
func.func @same_slot_after_release(%e: i1) -> index {
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.consumer_wait %p stage 0 : !p
  kvpipe.consumer_wait %p stage 1 : !p
  %q = kvpipe.consumer_release %p, %e stage 0 : !p
  // expected-note @below {{advanced here}}
  // expected-warning @below {{'kvpipe.consumer_release' op cannot prove that the consumed slots are ever filled: the pipeline has no producer side}}
  %r = kvpipe.consumer_release %q, %e stage 1 : !p
  // expected-error @below {{'kvpipe.index' op state used after it was advanced (pipeline created at}}
  %i = kvpipe.index %p : !p
  return %i : index
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Advanced in a branch that does not yield it: after the scf.if the old
// state may name a slot that was already released.
func.func @advanced_in_branch_then_used(%c: i1, %e: i1) -> !p {
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %c {
    kvpipe.consumer_wait %p : !p
    // expected-note @below {{advanced here}}
    // expected-warning @below {{'kvpipe.consumer_release' op cannot prove that the consumed slots are ever filled: the pipeline has no producer side}}
    %q = kvpipe.consumer_release %p, %e : !p
  }
  // expected-error @below {{'kvpipe.step' op state used after it was advanced}}
  %r = kvpipe.step %p : !p
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// A loop advances the state it was given (through its iter_arg): the state
// before the loop is stale after it.
func.func @use_after_loop(%n: index) -> index {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{advanced by this loop}}
  // expected-warning @below {{cannot prove that the filled slots are ever consumed: the pipeline has no consumer side}}
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.producer_acquire %s : !p
    kvpipe.producer_commit %s : !p
    %t = kvpipe.step %s : !p
    scf.yield %t : !p
  }
  // expected-error @below {{'kvpipe.producer_mbar' op state used after it was advanced (sub-stage 0 of pipeline created at}}
  %b = kvpipe.producer_mbar %p : !p
  %i = kvpipe.index %r : !p
  return %i : index
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// A state defined outside a loop and advanced inside it, instead of being
// carried as an iter_arg, is advanced again by every iteration.
func.func @advanced_in_every_iteration(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{the loop}}
  scf.for %i = %c0 to %n step %c1 {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    // expected-error @below {{'kvpipe.step' op advances a state defined outside its loop, once per iteration: carry it as an iter_arg (pipeline created at}}
    // expected-warning @below {{cannot prove that the filled slots are ever consumed: the pipeline has no consumer side}}
    %t = kvpipe.step %p : !p
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Calls: a callee that steps its argument advances the caller's state. The
// pipeline of a function argument is named by its position.
func.func private @produce_one(%s: !p) -> !p {
  kvpipe.producer_acquire %s : !p
  kvpipe.producer_commit %s : !p
  %t = kvpipe.step %s : !p
  return %t : !p
}

func.func @use_after_call(%p: !p) -> !p {
  // expected-note @below {{advanced by this call}}
  %q = func.call @produce_one(%p) : (!p) -> !p
  // expected-error-re @below {{'kvpipe.step' op state used after it was advanced (pipeline argument #0 of @use_after_call : !kvpipe.pipeline<{{.*}}>)}}
  %r = kvpipe.step %p : !p
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Correct: each state advanced once, the advanced value used afterwards,
// advances in disjoint branches, a callee that only reads its argument, the
// old value used before the advance.
func.func private @index_of(%s: !p) -> index {
  %i = kvpipe.index %s : !p
  return %i : index
}

func.func @linear(%c: i1, %e: i1) -> (!p, index) {
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %i0 = func.call @index_of(%p) : (!p) -> index
  %b = kvpipe.producer_mbar %p : !p
  kvpipe.producer_acquire %p : !p
  kvpipe.producer_commit %p : !p
  %q = kvpipe.step %p : !p
  %r = scf.if %c -> (!p) {
    kvpipe.consumer_wait %q : !p
    %n = kvpipe.consumer_release %q, %e : !p
    scf.yield %n : !p
  } else {
    kvpipe.consumer_wait %q : !p
    %n = kvpipe.consumer_release %q, %e : !p
    scf.yield %n : !p
  }
  %i1 = kvpipe.index %r : !p
  return %r, %i1 : !p, index
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// The tile loop's body steps the state from outside it instead of its block
// argument: the persistent rewrite runs the region once per tile, so every
// tile advances the same state (audit w05).
func.func @tile_loop_steps_outer_state() {
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{the tile loop}}
  kvpipe.for_each_tile {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    // expected-error @below {{'kvpipe.step' op advances a state defined outside its 'kvpipe.for_each_tile', once per tile: carry it as an iter_arg of the tile loop (pipeline created at}}
    // expected-warning @below {{cannot prove that the filled slots are ever consumed: the pipeline has no consumer side}}
    %t = kvpipe.step %p : !p
    kvpipe.yield
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// The same through a loop inside the tile loop that starts from the outer
// state: each tile restarts the loop at the outer state's slot.
func.func @tile_loop_inner_loop_on_outer_state(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{the tile loop}}
  kvpipe.for_each_tile {
    // expected-error @below {{'scf.for' op advances a state defined outside its 'kvpipe.for_each_tile', once per tile}}
    // expected-warning @below {{cannot prove that the filled slots are ever consumed: the pipeline has no consumer side}}
    %u = scf.for %i = %c0 to %n step %c1 iter_args(%a = %p) -> (!p) {
      kvpipe.producer_acquire %a : !p
      kvpipe.producer_commit %a : !p
      %t = kvpipe.step %a : !p
      scf.yield %t : !p
    }
    kvpipe.yield
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Corrected: the tile loop carries the state and the body advances its block
// argument. No linear-use error; the checker does not follow states through
// the tile loop's arguments (rule 3), which it reports as unproven.
func.func @tile_loop_carries_state(%n: index) -> (!p, index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-warning @below {{cannot prove what the pipeline state of block argument #0 of 'kvpipe.for_each_tile' is}}
  %r = kvpipe.for_each_tile iter_args(%p : !p) {
  ^bb0(%s: !p):
    %u = scf.for %i = %c0 to %n step %c1 iter_args(%a = %s) -> (!p) {
      kvpipe.producer_acquire %a : !p
      kvpipe.producer_commit %a : !p
      %t = kvpipe.step %a : !p
      scf.yield %t : !p
    }
    kvpipe.yield %u : !p
  } -> !p
  %i = kvpipe.index %r : !p
  return %r, %i : !p, index
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Corrected: the tile loop only reads the outer state's slot index, which
// does not advance it.
func.func @tile_loop_reads_outer_index(%buf: memref<2xindex>) {
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.for_each_tile {
    %i = kvpipe.index %p : !p
    memref.store %i, %buf[%i] : memref<2xindex>
    kvpipe.yield
  }
  return
}
