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

// -----

// Loop bounds from values that may differ between threads (a thread id, a
// warpgroup id, a load from memory) are not CTA-uniform: the producer's and
// the consumer's threads each compute them, so the same SSA value on both
// sides does not prove equal trip counts.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @thread_id_bound(%producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{the value}}
  %b = gpu.thread_id x
  scf.if %producer {
    // expected-note @below {{where the producer side ends}}
    %r = scf.for %i = %c0 to %b step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.producer_acquire %s : !p
      kvpipe.producer_commit %s : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } else {
    // expected-warning @below {{'scf.for' op cannot prove that the producer and consumer loops advance the same number of slots: both sides advance trips(loop at}}
    %r = scf.for %i = %c0 to %b step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @warpgroup_and_memory_bounds(%n: index, %producer: i1, %e: i1, %buf: memref<index>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %wg = kvpipe.warpgroup_id : index
  %b = arith.addi %n, %wg : index
  // expected-note @below {{the value}}
  %m = memref.load %buf[] : memref<index>
  scf.if %producer {
    // expected-note @below {{where the producer side ends}}
    %r = scf.for %i = %c0 to %b step %c1 iter_args(%s = %p) -> (!p) {
      %r2 = scf.for %j = %c0 to %m step %c1 iter_args(%s2 = %s) -> (!p) {
        kvpipe.producer_acquire %s2 : !p
        kvpipe.producer_commit %s2 : !p
        %t = kvpipe.step %s2 : !p
        scf.yield %t : !p
      }
      scf.yield %r2 : !p
    }
  } else {
    // expected-warning @below {{both sides advance sum over the iterations of the loop at}}
    %r = scf.for %i = %c0 to %b step %c1 iter_args(%s = %p) -> (!p) {
      %r2 = scf.for %j = %c0 to %m step %c1 iter_args(%s2 = %s) -> (!p) {
        kvpipe.consumer_wait %s2 : !p
        %t = kvpipe.consumer_release %s2, %e : !p
        scf.yield %t : !p
      }
      scf.yield %r2 : !p
    }
  }
  return
}

// -----

// Corrected: the block id and kernel arguments are CTA-uniform, and so is a
// load of a read-only kernel input at a block-id address.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @uniform_bounds {
  gpu.func @k(%lengths: !llvm.ptr<1>, %e: i1) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    // The roles: the producer warpgroup and the others (a kernel argument
    // would not split them: see protocol-balance.mlir).
    %wg = kvpipe.warpgroup_id : index
    %producer = arith.cmpi eq, %wg, %c0 : index
    %bx = gpu.block_id x
    %bz = gpu.block_id z
    %i64 = arith.index_cast %bz : index to i64
    %at = llvm.getelementptr %lengths[%i64] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
    %len = llvm.load %at : !llvm.ptr<1> -> i32
    %n = arith.index_cast %len : i32 to index
    %b = arith.addi %n, %bx : index
    scf.if %producer {
      %r = scf.for %i = %c0 to %b step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    } else {
      %r = scf.for %i = %c0 to %b step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %t = kvpipe.consumer_release %s, %e : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}

// -----

// Integer semantics: an i8 `n + 100` wraps, so shifted i8 bounds with the
// same span are not the same count; an unsigned loop from -1 to 1 runs no
// iteration where the signed one runs two.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @i8_wrap(%n: i8, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : i8
  %c1 = arith.constant 1 : i8
  %c100 = arith.constant 100 : i8
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    // expected-note @below {{where the producer side ends}}
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) : i8 {
      kvpipe.producer_acquire %s : !p
      kvpipe.producer_commit %s : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } else {
    %m = arith.addi %n, %c100 : i8
    // expected-warning @below {{cannot prove that the producer and consumer loops advance the same number of slots}}
    %r = scf.for %i = %c100 to %m step %c1 iter_args(%s = %p) -> (!p) : i8 {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @unsigned_loop(%lb: index, %ub: index, %producer: i1, %e: i1) {
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    // expected-note @below {{where the producer side ends}}
    %r = scf.for %i = %lb to %ub step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.producer_acquire %s : !p
      kvpipe.producer_commit %s : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } else {
    // expected-warning @below {{cannot prove that the producer and consumer loops advance the same number of slots}}
    %r = scf.for unsigned %i = %lb to %ub step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// WRONG (held-out A4 of the fifth audit): both loops run to a bound from
// llvm.mlir.undef. Each use of undef may be another value, on each thread:
// the producer's and the consumer's trip counts need not be equal.
func.func @undef_bound(%producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %u = llvm.mlir.undef : i64
  // expected-note @below {{the value}}
  %n = arith.index_cast %u : i64 to index
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
    // expected-warning @below {{'scf.for' op cannot prove that the producer and consumer loops advance the same number of slots: both sides advance trips(loop at}}
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// WRONG: llvm.mlir.poison used directly as the bound of both loops.
func.func @poison_bound(%producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %u = llvm.mlir.poison : i64
  // expected-note @below {{the value}}
  %n = arith.index_cast %u : i64 to index
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
    // expected-warning @below {{'scf.for' op cannot prove that the producer and consumer loops advance the same number of slots: both sides advance trips(loop at}}
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// WRONG: a frozen undef is one value per thread, but not the same on every
// thread: the producer's and the consumer's threads each freeze their own.
func.func @freeze_bound(%producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %u = llvm.mlir.undef : i64
  %f = llvm.freeze %u : i64
  // expected-note @below {{the value}}
  %n = arith.index_cast %f : i64 to index
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
    // expected-warning @below {{'scf.for' op cannot prove that the producer and consumer loops advance the same number of slots: both sides advance trips(loop at}}
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// WRONG: the producer thread is elected by comparing the thread id with an
// undefined value: which thread (if any) commits is not known.
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @undef_election(%n: index) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    // expected-note @below {{this value}}
    %u = llvm.mlir.undef : i64
    %who = arith.index_cast %u : i64 to index
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    %wg = kvpipe.warpgroup_id : index
    %tid = gpu.thread_id x
    %is_producer = arith.cmpi eq, %wg, %c0 : index
    scf.if %is_producer {
      %elected = arith.cmpi eq, %tid, %who : index
      // expected-warning @below {{'scf.if' op cannot prove that the producer side runs whenever the consumer side does}}
      scf.if %elected {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
          kvpipe.producer_acquire %s : !p
          // expected-warning @below {{'kvpipe.producer_commit' op cannot prove how many threads arrive on the producer barrier (the pipeline expects 1): the checker cannot evaluate, per thread of the CTA's 2 warpgroups, a value a condition around it is computed from}}
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } else {
      %first = arith.cmpi eq, %tid, %c128 : index
      // expected-note @below {{where the consumer side's chain ends}}
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Corrected: the bound is a (CTA-uniform) argument on both sides.
func.func @argument_bound(%n: index, %producer: i1, %e: i1) {
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
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

// A producer loop to `maxsi(n, 0)` (a clamped count) against a consumer
// loop to `n`, both from 0: the same trip count for every n (session 36's
// red-team pass: a false "cannot prove"). Nothing to report.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %m = arith.maxsi %n, %c0 : index
        %r = scf.for %i = %c0 to %m step %c1 iter_args(%s = %p) -> (!p) {
          kvpipe.producer_acquire %s : !p
          %slot = kvpipe.index %s : !p
          %b = kvpipe.producer_mbar %s : !p
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c0, %c0, %c0], %tile, %b : !map, !half
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r0 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc = kvpipe.warpgroup_mma %q, %tile, %o0 : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}

// -----

// Clamped at 1 instead: one fill against none when n <= 0. Unproven.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %m = arith.maxsi %n, %c1 : index
        // expected-note @below {{where the producer side ends}}
        %r = scf.for %i = %c0 to %m step %c1 iter_args(%s = %p) -> (!p) {
          kvpipe.producer_acquire %s : !p
          %slot = kvpipe.index %s : !p
          %b = kvpipe.producer_mbar %s : !p
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c0, %c0, %c0], %tile, %b : !map, !half
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      // expected-warning @below {{cannot prove that the producer and consumer loops advance the same number of slots}}
      %r0 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc = kvpipe.warpgroup_mma %q, %tile, %o0 : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}
