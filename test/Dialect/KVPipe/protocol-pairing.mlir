// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 3 of --kvpipe-verify-protocol, pairs: in one block (one loop
// iteration) every consumer_wait is followed by the consumer_release of the
// same slot and sub-stage and every release has its wait before it; the
// same for producer_acquire and producer_commit. The slot is the state up
// to releases of earlier sub-stages, which return it as a new value.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// A wait whose slot is never released: the producer's next lap hangs.
func.func @wait_without_release(%n: index) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    // expected-error-re @below {{'kvpipe.consumer_wait' op has no consumer_release of the same slot and sub-stage after it in its block (sub-stage 0 of pipeline created at {{.*}}:15:8 : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>)}}
    kvpipe.consumer_wait %s : !p
    // expected-error @below {{'kvpipe.step' op steps past a slot it did not fill}}
    %t = kvpipe.step %s : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// A release of a slot whose data the consumer never waited for.
func.func @release_without_wait(%p: !p, %e: i1) -> !p {
  // expected-error-re @below {{'kvpipe.consumer_release' op has no preceding consumer_wait of the same slot and sub-stage in its block (sub-stage 0 of pipeline argument #0 of @release_without_wait : !kvpipe.pipeline<{{.*}}>)}}
  %q = kvpipe.consumer_release %p, %e : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

// The release before the wait is not a pair either (sub-stage 0: the
// release returns the same slot).
func.func @release_before_wait(%p: !p, %e: i1) -> !p {
  // expected-error @below {{'kvpipe.consumer_release' op has no preceding consumer_wait of the same slot and sub-stage in its block (sub-stage 0 of}}
  // expected-error @below {{'kvpipe.consumer_release' op releases the slot up to sub-stage 0 but not sub-stage 1 in its block}}
  %q = kvpipe.consumer_release %p, %e stage 0 : !p
  // expected-error @below {{'kvpipe.consumer_wait' op has no consumer_release of the same slot and sub-stage after it in its block (sub-stage 0 of}}
  kvpipe.consumer_wait %q stage 0 : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Split across blocks: the wait in the loop body, the releases in the
// branches of an scf.if.
func.func @split_across_branches(%n: index, %c: i1, %e: i1) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    // expected-error @below {{'kvpipe.consumer_wait' op has no consumer_release of the same slot and sub-stage after it in its block}}
    kvpipe.consumer_wait %s : !p
    %t = scf.if %c -> (!p) {
      // expected-error @below {{'kvpipe.consumer_release' op has no preceding consumer_wait of the same slot and sub-stage in its block}}
      %u = kvpipe.consumer_release %s, %e : !p
      scf.yield %u : !p
    } else {
      // expected-error @below {{'kvpipe.consumer_release' op has no preceding consumer_wait of the same slot and sub-stage in its block}}
      %u = kvpipe.consumer_release %s, %e : !p
      scf.yield %u : !p
    }
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

// The wait and the release of different sub-stages do not pair.
func.func @different_sub_stages(%p: !p, %e: i1) -> !p {
  // expected-error @below {{'kvpipe.consumer_wait' op has no consumer_release of the same slot and sub-stage after it in its block (sub-stage 0 of pipeline argument #0}}
  kvpipe.consumer_wait %p stage 0 : !p
  // expected-error @below {{'kvpipe.consumer_release' op has no preceding consumer_wait of the same slot and sub-stage in its block (sub-stage 1 of pipeline argument #0}}
  // expected-error @below {{'kvpipe.consumer_release' op is out of qk_stage order: no consumer_release of sub-stage 0 of this slot in its block; the sub-stages of a slot start at 0}}
  %q = kvpipe.consumer_release %p, %e stage 1 : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// An acquire whose slot is never committed: the consumers wait forever.
func.func @acquire_without_commit(%n: index) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    // expected-error-re @below {{'kvpipe.producer_acquire' op has no producer_commit of the same slot and sub-stage after it in its block (sub-stage 0 of pipeline created at {{.*}} : !kvpipe.pipeline<{{.*}}>)}}
    kvpipe.producer_acquire %s : !p
    // expected-error @below {{'kvpipe.step' op steps past a slot it did not fill}}
    %t = kvpipe.step %s : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// A commit of a slot the producer did not acquire: it may overwrite data
// the consumers still read.
func.func @commit_without_acquire(%p: !p) -> !p {
  // expected-error @below {{'kvpipe.producer_commit' op has no preceding producer_acquire of the same slot and sub-stage in its block (sub-stage 0 of pipeline argument #0 of @commit_without_acquire}}
  kvpipe.producer_commit %p : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p1 = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!p2 = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

// Correct: pairs in one block, also interleaved over sub-stages and through
// the value a non-advancing release returns; two pipelines side by side.
func.func @pairs(%n: index, %e: i1) -> (!p1, !p2) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = kvpipe.create : !p1
  kvpipe.init %a : !p1
  %b = kvpipe.create : !p2
  kvpipe.init %b : !p2
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %a, %t = %b) -> (!p1, !p2) {
    kvpipe.producer_acquire %s : !p1
    kvpipe.consumer_wait %t stage 0 : !p2
    kvpipe.producer_commit %s : !p1
    %s1 = kvpipe.step %s : !p1
    %t0 = kvpipe.consumer_release %t, %e stage 0 : !p2
    kvpipe.consumer_wait %t0 stage 1 : !p2
    %t1 = kvpipe.consumer_release %t0, %e stage 1 : !p2
    scf.yield %s1, %t1 : !p1, !p2
  }
  return %r#0, %r#1 : !p1, !p2
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// The release's elected operand is constant false: no thread arrives on the
// consumer barrier, so the producer's next lap waits forever. (Correct: the
// elected thread of the consumer, %e.)
func.func @release_elected_false(%n: index, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %false = arith.constant false
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %q = kvpipe.create : !p
  kvpipe.init %q : !p
  scf.if %producer {
    %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %u = %q) -> (!p, !p) {
      kvpipe.producer_acquire %s : !p
      kvpipe.producer_commit %s : !p
      %t = kvpipe.step %s : !p
      kvpipe.producer_acquire %u : !p
      kvpipe.producer_commit %u : !p
      %v = kvpipe.step %u : !p
      scf.yield %t, %v : !p, !p
    }
  } else {
    %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %u = %q) -> (!p, !p) {
      kvpipe.consumer_wait %s : !p
      // expected-error-re @below {{'kvpipe.consumer_release' op releases the slot with no thread: its elected operand is constant false, so nobody arrives on the consumer barrier and the producer's next acquire of the slot waits forever (sub-stage 0 of pipeline created at {{.*}})}}
      %t = kvpipe.consumer_release %s, %false : !p
      kvpipe.consumer_wait %u : !p
      %v = kvpipe.consumer_release %u, %e : !p
      scf.yield %t, %v : !p, !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Two consumer warpgroups each release every slot through their elected
// thread, but the pipeline expects one arrival: each release completes the
// consumer barrier's phase twice (audit d02).
func.func @two_warpgroups_one_consumer(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
    // One thread of the producer warpgroup commits.
    %ptid = gpu.thread_id x
    %pc0 = arith.constant 0 : index
    %leader = arith.cmpi eq, %ptid, %pc0 : index
    scf.if %leader {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(2) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %lane = arith.remui %tid, %c128 : index
    %e = arith.cmpi eq, %lane, %c0 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      // expected-error-re @below {{'kvpipe.consumer_release' op 2 threads of the CTA's 3 warpgroups arrive on the consumer barrier per release (0, 1, 1 per warpgroup), but the pipeline expects consumers = 1: the phase completes early, and the producer refills the slot while a consumer warpgroup may still read it (sub-stage 0 of pipeline created at {{.*}})}}
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// `tid == 0` elects thread 0 of the CTA, which is in the producer warpgroup:
// no consumer thread arrives and the producer's next lap waits forever.
func.func @tid_zero_in_consumer_region(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
    // One thread of the producer warpgroup commits.
    %ptid = gpu.thread_id x
    %pc0 = arith.constant 0 : index
    %leader = arith.cmpi eq, %ptid, %pc0 : index
    scf.if %leader {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %e = arith.cmpi eq, %tid, %c0 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      // expected-error @below {{'kvpipe.consumer_release' op 0 threads of the CTA's 2 warpgroups arrive on the consumer barrier per release (0, 0 per warpgroup), but the pipeline expects consumers = 1: the phase never completes}}
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Every consumer thread arrives (elected = true), 256 arrivals for a barrier
// that expects one per warpgroup.
func.func @every_thread_releases(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
    // One thread of the producer warpgroup commits.
    %ptid = gpu.thread_id x
    %pc0 = arith.constant 0 : index
    %leader = arith.cmpi eq, %ptid, %pc0 : index
    scf.if %leader {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(2) registers(240) {
  ^bb0(%ci: index):
    %true = arith.constant true
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      // expected-error @below {{'kvpipe.consumer_release' op 256 threads of the CTA's 3 warpgroups arrive on the consumer barrier per release (0, 128, 128 per warpgroup), but the pipeline expects consumers = 2}}
      %t = kvpipe.consumer_release %s, %true : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// The elected operand is a kernel argument: every consumer thread or none
// arrives, which the checker cannot count.
// expected-note @below {{this value}}
func.func @elected_from_argument(%n: index, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
    // One thread of the producer warpgroup commits.
    %ptid = gpu.thread_id x
    %pc0 = arith.constant 0 : index
    %leader = arith.cmpi eq, %ptid, %pc0 : index
    scf.if %leader {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(2) registers(240) {
  ^bb0(%ci: index):
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      // expected-warning @below {{cannot prove how many threads arrive on the consumer barrier (the pipeline expects 2): the checker cannot evaluate, per thread of the CTA's 3 warpgroups, a value the release's elected operand or a condition around it is computed from}}
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Corrected d02: one elected thread per consumer warpgroup, consumers = 2.
func.func @one_elected_per_warpgroup(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
    // One thread of the producer warpgroup commits.
    %ptid = gpu.thread_id x
    %pc0 = arith.constant 0 : index
    %leader = arith.cmpi eq, %ptid, %pc0 : index
    scf.if %leader {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(2) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %lane = arith.remui %tid, %c128 : index
    %e = arith.cmpi eq, %lane, %c0 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 3>

// Corrected: the first thread of the warpgroup, from kvpipe.warpgroup_id
// (three warpgroups, three arrivals).
func.func @elected_from_warpgroup_id(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
    // One thread of the producer warpgroup commits.
    %ptid = gpu.thread_id x
    %pc0 = arith.constant 0 : index
    %leader = arith.cmpi eq, %ptid, %pc0 : index
    scf.if %leader {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(3) registers(152) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %c128 = arith.constant 128 : index
    %first = arith.muli %wg, %c128 : index
    %e = arith.cmpi eq, %tid, %first : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}
