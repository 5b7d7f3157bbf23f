// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 5 of --kvpipe-verify-protocol with trip counts that are not
// constants: the producer's and the consumer's totals are compared
// symbolically (the same span ub - lb and step, the same CTA-uniform
// expressions). Totals it cannot show equal are reported as unproven. Each
// wrong program is followed by its corrected form.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// The consumer walks the K/V blocks two at a time but releases one slot per
// iteration: half the slots are never released.
func.func @different_steps(%n: index, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    // expected-note @below {{where the producer side ends}}
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.producer_acquire %s : !p
      kvpipe.producer_commit %s : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } else {
    // expected-warning @below {{'scf.for' op cannot prove that the producer and consumer loops advance the same number of slots: the consumer side advances trips(loop at}}
    %r = scf.for %i = %c0 to %n step %c2 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Corrected: the same bounds, and shifted bounds with the same span.
func.func @same_span(%n: index, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.producer_acquire %s : !p
      kvpipe.producer_commit %s : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } else {
    %n1 = arith.addi %n, %c1 : index
    %r = scf.for %i = %c1 to %n1 step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// The consumer starts at block 1 (the first block was meant to be peeled
// but is not): one slot is never consumed.
func.func @shifted_bounds(%n: index, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    // expected-note @below {{where the producer side ends}}
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.producer_acquire %s : !p
      kvpipe.producer_commit %s : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } else {
    // expected-warning @below {{cannot prove that the producer and consumer loops advance the same number of slots}}
    %r = scf.for %i = %c1 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Corrected: the peeled first block is consumed before the loop; the count
// is the same when n > 0 and the consumer does nothing when n = 0.
func.func @peeled_first_block(%seq: index, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %blocks = arith.ceildivui %seq, %c128 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    %r = scf.for %i = %c0 to %blocks step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.producer_acquire %s : !p
      kvpipe.producer_commit %s : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } else {
    %any = arith.cmpi ugt, %blocks, %c0 : index
    %r = scf.if %any -> !p {
      kvpipe.consumer_wait %p : !p
      %first = kvpipe.consumer_release %p, %e : !p
      %rest = scf.for %i = %c1 to %blocks step %c1 iter_args(%s = %first) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %t = kvpipe.consumer_release %s, %e : !p
        scf.yield %t : !p
      }
      scf.yield %rest : !p
    } else {
      scf.yield %p : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Producer and consumer loops bounded by unrelated runtime values.
func.func @unrelated_bounds(%n: index, %m: index, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    // expected-note @below {{where the producer side ends}}
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.producer_acquire %s : !p
      kvpipe.producer_commit %s : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } else {
    // expected-warning @below {{cannot prove that the producer and consumer loops advance the same number of slots}}
    %r = scf.for %i = %c0 to %m step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// The consumer repeats the K/V loop for each of %h heads; the producer
// loads the blocks once.
func.func @nested_consumer_loop(%n: index, %h: index, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    // expected-note @below {{where the producer side ends}}
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.producer_acquire %s : !p
      kvpipe.producer_commit %s : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } else {
    // expected-warning @below {{cannot prove that the producer and consumer loops advance the same number of slots}}
    %r = scf.for %j = %c0 to %h step %c1 iter_args(%o = %p) -> (!p) {
      %inner = scf.for %i = %c0 to %n step %c1 iter_args(%s = %o) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %t = kvpipe.consumer_release %s, %e : !p
        scf.yield %t : !p
      }
      scf.yield %inner : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Corrected: both sides loop over the heads.
func.func @nested_both_sides(%n: index, %h: index, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    %r = scf.for %j = %c0 to %h step %c1 iter_args(%o = %p) -> (!p) {
      %inner = scf.for %i = %c0 to %n step %c1 iter_args(%s = %o) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
      scf.yield %inner : !p
    }
  } else {
    %r = scf.for %j = %c0 to %h step %c1 iter_args(%o = %p) -> (!p) {
      %inner = scf.for %i = %c0 to %n step %c1 iter_args(%s = %o) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %t = kvpipe.consumer_release %s, %e : !p
        scf.yield %t : !p
      }
      scf.yield %inner : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// The consumer's loop is in an outer loop over heads that does not carry
// the state: every head restarts from the same state.
func.func @consumer_in_outer_loop(%n: index, %h: index, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.producer_acquire %s : !p
      kvpipe.producer_commit %s : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } else {
    // expected-note @below {{the loop}}
    scf.for %j = %c0 to %h step %c1 {
      // expected-error @below {{'scf.for' op advances a state defined outside its loop, once per iteration: carry it as an iter_arg}}
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %t = kvpipe.consumer_release %s, %e : !p
        scf.yield %t : !p
      }
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Off by one with constant bounds: 8 blocks loaded, 7 consumed.
func.func @off_by_one_constant(%producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    // expected-note @below {{the producer-side loop}}
    %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.producer_acquire %s : !p
      kvpipe.producer_commit %s : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } else {
    // expected-error @below {{'scf.for' op consumer side advances 7 slot(s) in total (7 iteration(s) of 1) but the producer side advances 8 (8 of 1): their phases drift apart and the pipeline hangs}}
    %r = scf.for %i = %c0 to %c7 step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}
