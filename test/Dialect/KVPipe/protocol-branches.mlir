// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 3 of --kvpipe-verify-protocol, branches: an scf.if (or
// scf.index_switch) that yields a pipeline state must advance it by the same
// number of slots in every branch, or the two sides of the pipeline disagree
// on the phase depending on a condition the other side does not see.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

func.func @advanced_in_one_branch(%p: !p, %c: i1) -> !p {
  // expected-error-re @below {{'scf.if' op yields a state advanced in one branch but not in the other (pipeline argument #0 of @advanced_in_one_branch : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, {{.*}}>)}}
  %r = scf.if %c -> (!p) {
    // expected-note @below {{advanced here}}
    %q = kvpipe.step %p : !p
    scf.yield %q : !p
  } else {
    scf.yield %p : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Inside a producer loop: the state is stepped only when the condition
// holds.
func.func @in_a_loop(%n: index, %c: i1) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.producer_acquire %s : !p
    kvpipe.producer_commit %s : !p
    // expected-error @below {{'scf.if' op yields a state advanced in one branch but not in the other (pipeline created at}}
    %t = scf.if %c -> (!p) {
      scf.yield %s : !p
    } else {
      // expected-note @below {{advanced here}}
      %u = kvpipe.step %s : !p
      scf.yield %u : !p
    }
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Advanced in both branches, by different counts.
func.func @different_counts(%p: !p, %c: i1) -> !p {
  // expected-error @below {{'scf.if' op yields a state advanced by 2 slot(s) in one branch but 1 in another (pipeline argument #0}}
  %r = scf.if %c -> (!p) {
    %q = kvpipe.step %p : !p
    scf.yield %q : !p
  } else {
    %q = kvpipe.step %p : !p
    // expected-note @below {{advanced here}}
    %q2 = kvpipe.step %q : !p
    scf.yield %q2 : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// scf.index_switch: the default case forgets to advance.
func.func @switch(%p: !p, %k: index) -> !p {
  // expected-error @below {{'scf.index_switch' op yields a state advanced in one branch but not in the other}}
  %r = scf.index_switch %k -> !p
  case 0 {
    // expected-note @below {{advanced here}}
    %q = kvpipe.step %p : !p
    scf.yield %q : !p
  }
  case 1 {
    %q = kvpipe.step %p : !p
    scf.yield %q : !p
  }
  default {
    scf.yield %p : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Both branches advance once, but the else branch steps past the slot
// without releasing it: the producer waits for that release forever (this
// program used to pass). A branch that yields the state up to a
// non-advancing release, and branches that leave the state alone, are fine;
// a fill under a condition followed by an unconditional step is an error.
func.func @balanced(%p: !p, %c: i1, %e: i1) -> !p {
  %r = scf.if %c -> (!p) {
    kvpipe.consumer_wait %p : !p
    %q = kvpipe.consumer_release %p, %e : !p
    scf.yield %q : !p
  } else {
    // expected-error @below {{'kvpipe.step' op steps past a slot it did not fill}}
    %q = kvpipe.step %p : !p
    scf.yield %q : !p
  }
  %s = scf.if %c -> (!p) {
    scf.yield %r : !p
  } else {
    scf.yield %r : !p
  }
  scf.if %c {
    kvpipe.producer_acquire %s : !p
    kvpipe.producer_commit %s : !p
  }
  // expected-error @below {{'kvpipe.step' op steps past a slot it did not fill}}
  %t = kvpipe.step %s : !p
  return %t : !p
}

// -----

// Unstructured control flow and multi-block scf.execute_region: paths that
// advance one state by different counts and merge.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @cf_merge_different_counts(%p: !p, %c: i1) -> !p {
  // expected-note @below {{the other branch}}
  cf.cond_br %c, ^a, ^b(%p : !p)
^a:
  kvpipe.producer_acquire %p : !p
  kvpipe.producer_commit %p : !p
  %y = kvpipe.step %p : !p
  // expected-error @below {{'cf.br' op passes to a block a state advanced by 1 slot(s) from its base, where another branch passes it advanced by 0}}
  cf.br ^b(%y : !p)
^b(%z: !p):
  return %z : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @execute_region_paths(%p: !p, %c: i1) -> !p {
  // expected-error @below {{'scf.execute_region' op yields a state advanced in one branch but not in the other}}
  %r = scf.execute_region -> !p {
    cf.cond_br %c, ^a, ^b
  ^a:
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    // expected-note @below {{advanced here}}
    %y = kvpipe.step %p : !p
    scf.yield %y : !p
  ^b:
    scf.yield %p : !p
  }
  return %r : !p
}
