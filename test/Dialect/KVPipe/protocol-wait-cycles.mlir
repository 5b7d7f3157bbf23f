// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 13 of --kvpipe-verify-protocol, no wait-for cycle across pipelines: a
// commit or release runs only after the waits and acquires its threads run
// before it, a wait returns only after the commit of its slot, and an
// acquire of slot k >= kv_stages only after the release of slot
// k - kv_stages. Each pipeline may be balanced alone while the roles wait
// for each other in a cycle: a deadlock (an error where every slot of the
// cycle is known; unproven through ops in loops, whose slots may or may not
// match). Each wrong program is next to its corrected form (the fifth
// audit's first).

// A wait-for cycle across pipelines: thread 0 waits on B, then commits A;
// thread 128 waits on A, then commits B.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        // expected-error-re @below {{'kvpipe.consumer_wait' op waits in a cycle across pipelines (a deadlock): the commit, release or barrier arrival it waits for runs, on the threads that run it, only after another wait of the cycle returns, and so on back to this one (sub-stage 0 of pipeline created at {{.*}})}}
        kvpipe.consumer_wait %b : !p
        %b1 = kvpipe.consumer_release %b, %true : !p
        kvpipe.producer_acquire %a : !p
        // expected-note-re @below {{then this 'producer_commit' of pipeline created at {{.*}} runs after it on the same threads}}
        kvpipe.producer_commit %a : !p
        %a1 = kvpipe.step %a : !p
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        // expected-note-re @below {{which this 'consumer_wait' of pipeline created at {{.*}} waits for}}
        kvpipe.consumer_wait %a : !p
        %a1 = kvpipe.consumer_release %a, %true : !p
        kvpipe.producer_acquire %b : !p
        // expected-note @below {{then this 'producer_commit'}}
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
      }
    }
    gpu.return
  }
}

// -----

// Corrected: thread 128 commits B before it waits on A.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        kvpipe.consumer_wait %b : !p
        %b1 = kvpipe.consumer_release %b, %true : !p
        kvpipe.producer_acquire %a : !p
        kvpipe.producer_commit %a : !p
        %a1 = kvpipe.step %a : !p
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        kvpipe.producer_acquire %b : !p
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
        kvpipe.consumer_wait %a : !p
        %a1 = kvpipe.consumer_release %a, %true : !p
      }
    }
    gpu.return
  }
}

// -----

// Through a full ring: the producer fills A's one slot twice before it
// fills B, and the consumer takes B before A. The second acquire of A waits
// for the release of A's first slot, which comes after the wait on B, which
// comes after the second acquire of A.
!p = !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        kvpipe.producer_acquire %a : !p
        kvpipe.producer_commit %a : !p
        %a1 = kvpipe.step %a : !p
        // expected-error @below {{'kvpipe.producer_acquire' op waits in a cycle across pipelines (a deadlock)}}
        kvpipe.producer_acquire %a1 : !p
        kvpipe.producer_commit %a1 : !p
        %a2 = kvpipe.step %a1 : !p
        kvpipe.producer_acquire %b : !p
        // expected-note @below {{then this 'producer_commit'}}
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        // expected-note @below {{which this 'consumer_wait'}}
        kvpipe.consumer_wait %b : !p
        %b1 = kvpipe.consumer_release %b, %true : !p
        kvpipe.consumer_wait %a : !p
        // expected-note @below {{then this 'consumer_release'}}
        %a1 = kvpipe.consumer_release %a, %true : !p
        kvpipe.consumer_wait %a1 : !p
        %a2 = kvpipe.consumer_release %a1, %true : !p
      }
    }
    gpu.return
  }
}

// -----

// Corrected: the consumer takes A's slots first, in the producer's order.
!p = !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        kvpipe.producer_acquire %a : !p
        kvpipe.producer_commit %a : !p
        %a1 = kvpipe.step %a : !p
        kvpipe.producer_acquire %a1 : !p
        kvpipe.producer_commit %a1 : !p
        %a2 = kvpipe.step %a1 : !p
        kvpipe.producer_acquire %b : !p
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        kvpipe.consumer_wait %a : !p
        %a1 = kvpipe.consumer_release %a, %true : !p
        kvpipe.consumer_wait %a1 : !p
        %a2 = kvpipe.consumer_release %a1, %true : !p
        kvpipe.consumer_wait %b : !p
        %b1 = kvpipe.consumer_release %b, %true : !p
      }
    }
    gpu.return
  }
}

// -----

// The first program's cycle in loops: each iteration waits as before. Which
// slots of a loop's iterations match is not followed: unproven.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%n: index) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%sa = %a, %sb = %b) -> (!p, !p) {
          // expected-warning @below {{'kvpipe.consumer_wait' op cannot prove that the waits across pipelines form no cycle: through the ops in loops, whose slots the checker does not match, this wait may wait for itself}}
          kvpipe.consumer_wait %sb : !p
          %b1 = kvpipe.consumer_release %sb, %true : !p
          kvpipe.producer_acquire %sa : !p
          // expected-note @below {{then this 'producer_commit'}}
          kvpipe.producer_commit %sa : !p
          %a1 = kvpipe.step %sa : !p
          scf.yield %a1, %b1 : !p, !p
        }
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%sa = %a, %sb = %b) -> (!p, !p) {
          // expected-note @below {{which this 'consumer_wait'}}
          kvpipe.consumer_wait %sa : !p
          %a1 = kvpipe.consumer_release %sa, %true : !p
          kvpipe.producer_acquire %sb : !p
          // expected-note @below {{then this 'producer_commit'}}
          kvpipe.producer_commit %sb : !p
          %b1 = kvpipe.step %sb : !p
          scf.yield %a1, %b1 : !p, !p
        }
      }
    }
    gpu.return
  }
}

// -----

// Corrected: in each iteration thread 128 commits B before it waits on A.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%n: index) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%sa = %a, %sb = %b) -> (!p, !p) {
          kvpipe.consumer_wait %sb : !p
          %b1 = kvpipe.consumer_release %sb, %true : !p
          kvpipe.producer_acquire %sa : !p
          kvpipe.producer_commit %sa : !p
          %a1 = kvpipe.step %sa : !p
          scf.yield %a1, %b1 : !p, !p
        }
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%sa = %a, %sb = %b) -> (!p, !p) {
          kvpipe.producer_acquire %sb : !p
          kvpipe.producer_commit %sb : !p
          %b1 = kvpipe.step %sb : !p
          kvpipe.consumer_wait %sa : !p
          %a1 = kvpipe.consumer_release %sa, %true : !p
          scf.yield %a1, %b1 : !p, !p
        }
      }
    }
    gpu.return
  }
}

// -----

// The cycle with one role's half in a helper (the fifth audit's): the
// producer thread's helper waits for B, then commits A; the consumer thread
// waits for A before it commits B. A call is two nodes of the graph, the
// helper's waits and its commits, linked to the commits and waits of the
// pipelines it is passed; their slots are not matched: unproven.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  func.func @wait_b_then_commit_a(%a: !p, %b: !p) -> (!p, !p) {
    %true = arith.constant true
    kvpipe.consumer_wait %b : !p
    %b1 = kvpipe.consumer_release %b, %true : !p
    kvpipe.producer_acquire %a : !p
    kvpipe.producer_commit %a : !p
    %a1 = kvpipe.step %a : !p
    return %a1, %b1 : !p, !p
  }
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        // expected-note @below {{which this call waits for: its helper waits on (or acquires) a pipeline it is passed}}
        %r:2 = func.call @wait_b_then_commit_a(%a, %b) : (!p, !p) -> (!p, !p)
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        // expected-warning-re @below {{'kvpipe.consumer_wait' op cannot prove that the waits across pipelines form no cycle: through the waits and signals of a helper, whose slots the checker does not match with the caller's, this wait may wait for itself (sub-stage 0 of pipeline created at {{.*}})}}
        kvpipe.consumer_wait %a : !p
        %a1 = kvpipe.consumer_release %a, %true : !p
        kvpipe.producer_acquire %b : !p
        // expected-note @below {{then this 'producer_commit'}}
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
      }
    }
    gpu.return
  }
}

// -----

// Helpers on one side of two pipelines form no cycle: the producer's helper
// fills A and B (no wait of the other side), the consumer's waits for and
// releases both (no commit). Nothing to report.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  func.func @fill(%a: !p, %b: !p) -> (!p, !p) {
    kvpipe.producer_acquire %a : !p
    kvpipe.producer_commit %a : !p
    %a1 = kvpipe.step %a : !p
    kvpipe.producer_acquire %b : !p
    kvpipe.producer_commit %b : !p
    %b1 = kvpipe.step %b : !p
    return %a1, %b1 : !p, !p
  }
  func.func @drain(%a: !p, %b: !p) -> (!p, !p) {
    %true = arith.constant true
    kvpipe.consumer_wait %a : !p
    %a1 = kvpipe.consumer_release %a, %true : !p
    kvpipe.consumer_wait %b : !p
    %b1 = kvpipe.consumer_release %b, %true : !p
    return %a1, %b1 : !p, !p
  }
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        %r:2 = func.call @fill(%a, %b) : (!p, !p) -> (!p, !p)
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        %r:2 = func.call @drain(%a, %b) : (!p, !p) -> (!p, !p)
      }
    }
    gpu.return
  }
}

// -----

// A wait-for cycle through a full ring, in loops (once a known gap): the
// producer fills A's one slot n times before it fills B, the consumer takes
// B before A. From n = 2 the second acquire of A waits for the release of
// A's first slot, which the consumer runs only after its wait on B returns,
// which needs the commit of B after the loop. The acquire's loop is left
// through program order (B's commit runs after every iteration): unproven
// (n is not known to be 1 or less).
!p = !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%n: index) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        %ra = scf.for %i = %c0 to %n step %c1 iter_args(%s = %a) -> (!p) {
          // expected-warning-re @below {{'kvpipe.producer_acquire' op cannot prove that the loop fills at most 'kv_stages' = 1 slots before the signals after it: the acquire of a refilled slot waits for the release of the slot 1 before it, which runs only after an op that runs after the whole loop (sub-stage 0 of pipeline created at {{.*}})}}
          kvpipe.producer_acquire %s : !p
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
        kvpipe.producer_acquire %b : !p
        // expected-note @below {{then this 'producer_commit'}}
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        // expected-note @below {{which this 'consumer_wait'}}
        kvpipe.consumer_wait %b : !p
        %b1 = kvpipe.consumer_release %b, %true : !p
        %ra = scf.for %i = %c0 to %n step %c1 iter_args(%s = %a) -> (!p) {
          kvpipe.consumer_wait %s : !p
          // expected-note @below {{then this 'consumer_release'}}
          %t = kvpipe.consumer_release %s, %true : !p
          scf.yield %t : !p
        }
      }
    }
    gpu.return
  }
}

// -----

// The same with a static trip count that fills the one-slot ring twice and
// known threads: a deadlock.
!p = !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        %ra = scf.for %i = %c0 to %c2 step %c1 iter_args(%s = %a) -> (!p) {
          // expected-error-re @below {{'kvpipe.producer_acquire' op fills more than 'kv_stages' = 1 slots in its loop before the signals after it (a deadlock): the acquire of a refilled slot waits for the release of the slot 1 before it, which runs only after an op that runs after the whole loop (sub-stage 0 of pipeline created at {{.*}})}}
          kvpipe.producer_acquire %s : !p
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
        kvpipe.producer_acquire %b : !p
        // expected-note @below {{then this 'producer_commit'}}
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        // expected-note @below {{which this 'consumer_wait'}}
        kvpipe.consumer_wait %b : !p
        %b1 = kvpipe.consumer_release %b, %true : !p
        %ra = scf.for %i = %c0 to %c2 step %c1 iter_args(%s = %a) -> (!p) {
          kvpipe.consumer_wait %s : !p
          // expected-note @below {{then this 'consumer_release'}}
          %t = kvpipe.consumer_release %s, %true : !p
          scf.yield %t : !p
        }
      }
    }
    gpu.return
  }
}

// -----

// Corrected: the consumer takes A before B (the release of each slot of A
// waits only for that slot's commit), or the loop fills at most kv_stages
// slots (one iteration of a one-slot ring: its acquire never refills).
!p = !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @a_first(%n: index) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        %ra = scf.for %i = %c0 to %n step %c1 iter_args(%s = %a) -> (!p) {
          kvpipe.producer_acquire %s : !p
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
        kvpipe.producer_acquire %b : !p
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        %ra = scf.for %i = %c0 to %n step %c1 iter_args(%s = %a) -> (!p) {
          kvpipe.consumer_wait %s : !p
          %t = kvpipe.consumer_release %s, %true : !p
          scf.yield %t : !p
        }
        kvpipe.consumer_wait %b : !p
        %b1 = kvpipe.consumer_release %b, %true : !p
      }
    }
    gpu.return
  }

  gpu.func @one_fill() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        %ra = scf.for %i = %c0 to %c1 step %c1 iter_args(%s = %a) -> (!p) {
          kvpipe.producer_acquire %s : !p
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
        kvpipe.producer_acquire %b : !p
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        kvpipe.consumer_wait %b : !p
        %b1 = kvpipe.consumer_release %b, %true : !p
        %ra = scf.for %i = %c0 to %c1 step %c1 iter_args(%s = %a) -> (!p) {
          kvpipe.consumer_wait %s : !p
          %t = kvpipe.consumer_release %s, %true : !p
          scf.yield %t : !p
        }
      }
    }
    gpu.return
  }
}

// -----

// The seventh audit: each role in a helper passed both pipelines; each waits
// on the other's pipeline before committing its own (a deadlock). A call of
// several pipelines is of another pipeline than any other call, so the cycle
// through the two calls is found (it was skipped); the helpers' one-sided
// chains are unproven by rule 5.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  func.func private @role0(%a: !p, %b: !p) {
    %true = arith.constant true
    kvpipe.consumer_wait %b : !p
    // expected-warning @+1 {{cannot prove that the producer side advances this pipeline by as many slots as this consumer chain}}
    %b1 = kvpipe.consumer_release %b, %true : !p
    kvpipe.producer_acquire %a : !p
    kvpipe.producer_commit %a : !p
    // expected-warning @+1 {{cannot prove that the consumer side advances this pipeline by as many slots as this producer chain}}
    %a1 = kvpipe.step %a : !p
    return
  }
  func.func private @role1(%a: !p, %b: !p) {
    %true = arith.constant true
    kvpipe.consumer_wait %a : !p
    // expected-warning @+1 {{cannot prove that the producer side advances this pipeline by as many slots as this consumer chain}}
    %a1 = kvpipe.consumer_release %a, %true : !p
    kvpipe.producer_acquire %b : !p
    kvpipe.producer_commit %b : !p
    // expected-warning @+1 {{cannot prove that the consumer side advances this pipeline by as many slots as this producer chain}}
    %b1 = kvpipe.step %b : !p
    return
  }
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        // expected-warning @+1 {{cannot prove that the waits across pipelines form no cycle: through the waits and signals of a helper}}
        func.call @role0(%a, %b) : (!p, !p) -> ()
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        // expected-note @+1 {{which this call waits for: its helper waits on (or acquires) a pipeline it is passed}}
        func.call @role1(%a, %b) : (!p, !p) -> ()
      }
    }
    gpu.return
  }
}

// -----

// The seventh audit: each iteration fills A three times (kv_stages = 2)
// before B; the consumer takes B first. The third acquire of A waits for
// the release of A's first slot of the same iteration, which comes after
// B's wait (a deadlock in iteration 0). An acquire kv_stages slots or more
// past its iteration's first state refills a slot of the same iteration:
// an edge from the pipeline's releases (not matched: unproven).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%n: index) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%sa = %a, %sb = %b) -> (!p, !p) {
          kvpipe.producer_acquire %sa : !p
          kvpipe.producer_commit %sa : !p
          %a1 = kvpipe.step %sa : !p
          kvpipe.producer_acquire %a1 : !p
          kvpipe.producer_commit %a1 : !p
          %a2 = kvpipe.step %a1 : !p
          // expected-warning @+1 {{cannot prove that the waits across pipelines form no cycle: through the ops in loops}}
          kvpipe.producer_acquire %a2 : !p
          kvpipe.producer_commit %a2 : !p
          %a3 = kvpipe.step %a2 : !p
          kvpipe.producer_acquire %sb : !p
          // expected-note @+1 {{then this 'producer_commit' of pipeline}}
          kvpipe.producer_commit %sb : !p
          %b1 = kvpipe.step %sb : !p
          scf.yield %a3, %b1 : !p, !p
        }
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%sa = %a, %sb = %b) -> (!p, !p) {
        // expected-note @+1 {{which this 'consumer_wait' of pipeline}}
        kvpipe.consumer_wait %sb : !p
        %b1 = kvpipe.consumer_release %sb, %e : !p
        kvpipe.consumer_wait %sa : !p
        // expected-note @+1 {{then this 'consumer_release' of pipeline}}
        %a1 = kvpipe.consumer_release %sa, %e : !p
        kvpipe.consumer_wait %a1 : !p
        %a2 = kvpipe.consumer_release %a1, %e : !p
        kvpipe.consumer_wait %a2 : !p
        %a3 = kvpipe.consumer_release %a2, %e : !p
        scf.yield %a3, %b1 : !p, !p
      }
    }
    gpu.return
  }
}


// -----

// Corrected: the consumer takes A's three slots before B.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%n: index) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%sa = %a, %sb = %b) -> (!p, !p) {
          kvpipe.producer_acquire %sa : !p
          kvpipe.producer_commit %sa : !p
          %a1 = kvpipe.step %sa : !p
          kvpipe.producer_acquire %a1 : !p
          kvpipe.producer_commit %a1 : !p
          %a2 = kvpipe.step %a1 : !p
          kvpipe.producer_acquire %a2 : !p
          kvpipe.producer_commit %a2 : !p
          %a3 = kvpipe.step %a2 : !p
          kvpipe.producer_acquire %sb : !p
          kvpipe.producer_commit %sb : !p
          %b1 = kvpipe.step %sb : !p
          scf.yield %a3, %b1 : !p, !p
        }
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%sa = %a, %sb = %b) -> (!p, !p) {
        kvpipe.consumer_wait %sa : !p
        %a1 = kvpipe.consumer_release %sa, %e : !p
        kvpipe.consumer_wait %a1 : !p
        %a2 = kvpipe.consumer_release %a1, %e : !p
        kvpipe.consumer_wait %a2 : !p
        %a3 = kvpipe.consumer_release %a2, %e : !p
        kvpipe.consumer_wait %sb : !p
        %b1 = kvpipe.consumer_release %sb, %e : !p
        scf.yield %a3, %b1 : !p, !p
      }
    }
    gpu.return
  }
}


// -----

// A wait-for cycle through a fill helper's acquire (found by session 35's
// red-team pass): the producer fills A's two slots, a third through a
// helper, then B; the consumer takes B first. The helper's acquire refills
// A's slot 0 and waits for its release, which the consumer runs only after
// its wait on B, which needs B's commit after the call. Unproven: the
// helper's slots are not matched with the caller's.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  func.func private @fill_one(%s: !p) -> !p {
    kvpipe.producer_acquire %s : !p
    kvpipe.producer_commit %s : !p
    %t = kvpipe.step %s : !p
    return %t : !p
  }
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        kvpipe.producer_acquire %a : !p
        kvpipe.producer_commit %a : !p
        %a1 = kvpipe.step %a : !p
        kvpipe.producer_acquire %a1 : !p
        kvpipe.producer_commit %a1 : !p
        %a2 = kvpipe.step %a1 : !p
        // expected-note @below {{which this call waits for: its helper waits on (or acquires) a pipeline it is passed}}
        %a3 = func.call @fill_one(%a2) : (!p) -> !p
        kvpipe.producer_acquire %b : !p
        // expected-note @below {{then this 'producer_commit'}}
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %c128 = arith.constant 128 : index
      %e = arith.cmpi eq, %tid, %c128 : index
      // expected-warning @below {{'kvpipe.consumer_wait' op cannot prove that the waits across pipelines form no cycle: through the waits and signals of a helper}}
      kvpipe.consumer_wait %b : !p
      %b1 = kvpipe.consumer_release %b, %e : !p
      kvpipe.consumer_wait %a : !p
      // expected-note @below {{then this 'consumer_release'}}
      %a1 = kvpipe.consumer_release %a, %e : !p
      kvpipe.consumer_wait %a1 : !p
      %a2 = kvpipe.consumer_release %a1, %e : !p
      kvpipe.consumer_wait %a2 : !p
      %a3 = kvpipe.consumer_release %a2, %e : !p
    }
    gpu.return
  }
}

// -----

// The same fills, the consumer taking A's three slots before B: no cycle
// (the helper's acquire waits for A's release of slot 0, which waits only
// for A's first commit). Nothing to report.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  func.func private @fill_one(%s: !p) -> !p {
    kvpipe.producer_acquire %s : !p
    kvpipe.producer_commit %s : !p
    %t = kvpipe.step %s : !p
    return %t : !p
  }
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        kvpipe.producer_acquire %a : !p
        kvpipe.producer_commit %a : !p
        %a1 = kvpipe.step %a : !p
        kvpipe.producer_acquire %a1 : !p
        kvpipe.producer_commit %a1 : !p
        %a2 = kvpipe.step %a1 : !p
        %a3 = func.call @fill_one(%a2) : (!p) -> !p
        kvpipe.producer_acquire %b : !p
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %c128 = arith.constant 128 : index
      %e = arith.cmpi eq, %tid, %c128 : index
      kvpipe.consumer_wait %a : !p
      %a1 = kvpipe.consumer_release %a, %e : !p
      kvpipe.consumer_wait %a1 : !p
      %a2 = kvpipe.consumer_release %a1, %e : !p
      kvpipe.consumer_wait %a2 : !p
      %a3 = kvpipe.consumer_release %a2, %e : !p
      kvpipe.consumer_wait %b : !p
      %b1 = kvpipe.consumer_release %b, %e : !p
    }
    gpu.return
  }
}

// -----

// A wait-for cycle through a drain helper's release: the producer fills
// A's two slots, a third (its acquire waits for the release of A's slot 0),
// then B; the consumer takes B first, then drains A's slot 0 through a
// helper. Unproven, as above.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  func.func private @drain_one(%s: !p, %e: i1) -> !p {
    kvpipe.consumer_wait %s : !p
    %t = kvpipe.consumer_release %s, %e : !p
    return %t : !p
  }
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        kvpipe.producer_acquire %a : !p
        kvpipe.producer_commit %a : !p
        %a1 = kvpipe.step %a : !p
        kvpipe.producer_acquire %a1 : !p
        kvpipe.producer_commit %a1 : !p
        %a2 = kvpipe.step %a1 : !p
        // expected-warning @below {{'kvpipe.producer_acquire' op cannot prove that the waits across pipelines form no cycle: through the waits and signals of a helper}}
        kvpipe.producer_acquire %a2 : !p
        kvpipe.producer_commit %a2 : !p
        %a3 = kvpipe.step %a2 : !p
        kvpipe.producer_acquire %b : !p
        // expected-note @below {{then this 'producer_commit'}}
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %c128 = arith.constant 128 : index
      %e = arith.cmpi eq, %tid, %c128 : index
      // expected-note @below {{which this 'consumer_wait'}}
      kvpipe.consumer_wait %b : !p
      %b1 = kvpipe.consumer_release %b, %e : !p
      // expected-note @below {{then this call, whose helper commits to (or releases) a pipeline it is passed}}
      %a1 = func.call @drain_one(%a, %e) : (!p, i1) -> !p
      kvpipe.consumer_wait %a1 : !p
      %a2 = kvpipe.consumer_release %a1, %e : !p
      kvpipe.consumer_wait %a2 : !p
      %a3 = kvpipe.consumer_release %a2, %e : !p
    }
    gpu.return
  }
}

// -----

// The same with the consumer draining A's slot 0 (through the helper)
// before it takes B: no cycle. Nothing to report.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  func.func private @drain_one(%s: !p, %e: i1) -> !p {
    kvpipe.consumer_wait %s : !p
    %t = kvpipe.consumer_release %s, %e : !p
    return %t : !p
  }
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        kvpipe.producer_acquire %a : !p
        kvpipe.producer_commit %a : !p
        %a1 = kvpipe.step %a : !p
        kvpipe.producer_acquire %a1 : !p
        kvpipe.producer_commit %a1 : !p
        %a2 = kvpipe.step %a1 : !p
        kvpipe.producer_acquire %a2 : !p
        kvpipe.producer_commit %a2 : !p
        %a3 = kvpipe.step %a2 : !p
        kvpipe.producer_acquire %b : !p
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %c128 = arith.constant 128 : index
      %e = arith.cmpi eq, %tid, %c128 : index
      %a1 = func.call @drain_one(%a, %e) : (!p, i1) -> !p
      kvpipe.consumer_wait %a1 : !p
      %a2 = kvpipe.consumer_release %a1, %e : !p
      kvpipe.consumer_wait %a2 : !p
      %a3 = kvpipe.consumer_release %a2, %e : !p
      kvpipe.consumer_wait %b : !p
      %b1 = kvpipe.consumer_release %b, %e : !p
    }
    gpu.return
  }
}

// -----

// A wait-for cycle through a named barrier (session 35's red-team pass,
// w18): both warpgroups meet barrier 1 (256 threads), the producer before
// it commits the slot, the consumer after it waits for that slot. The
// consumer's wait needs the commit, which follows the producer's barrier,
// whose phase needs the consumer's arrival, which follows its wait.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %id = arith.constant 1 : i32
    %count = arith.constant 256 : i32
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %producer = arith.cmpi eq, %wg, %c0 : index
    scf.if %producer {
      // expected-note @below {{which this named barrier waits for (the phase completes when every thread it counts arrives)}}
      nvvm.barrier id = %id number_of_threads = %count
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        kvpipe.producer_acquire %p : !p
        // expected-note @below {{then this 'producer_commit'}}
        kvpipe.producer_commit %p : !p
        %p1 = kvpipe.step %p : !p
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      // expected-error @below {{'kvpipe.consumer_wait' op waits in a cycle across pipelines (a deadlock)}}
      kvpipe.consumer_wait %p : !p
      // expected-note @below {{then this arrival on a named barrier runs after it on the same threads}}
      nvvm.barrier id = %id number_of_threads = %count
      %p1 = kvpipe.consumer_release %p, %e : !p
    }
    gpu.return
  }
}

// -----

// The producer meets the barrier after its commit: no cycle. Nothing to
// report.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %id = arith.constant 1 : i32
    %count = arith.constant 256 : i32
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %producer = arith.cmpi eq, %wg, %c0 : index
    scf.if %producer {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        kvpipe.producer_acquire %p : !p
        kvpipe.producer_commit %p : !p
        %p1 = kvpipe.step %p : !p
      }
      nvvm.barrier id = %id number_of_threads = %count
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      kvpipe.consumer_wait %p : !p
      nvvm.barrier id = %id number_of_threads = %count
      %p1 = kvpipe.consumer_release %p, %e : !p
    }
    gpu.return
  }
}

// -----

// Two warpgroups meet two named barriers in opposite orders: warpgroup 0
// waits on barrier 1 before it arrives on barrier 2, warpgroup 1 waits on
// barrier 2 before it arrives on barrier 1. A deadlock of barriers alone.
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %b1 = arith.constant 1 : i32
    %b2 = arith.constant 2 : i32
    %count = arith.constant 256 : i32
    %wg = kvpipe.warpgroup_id : index
    %first = arith.cmpi eq, %wg, %c0 : index
    scf.if %first {
      // expected-error @below {{'nvvm.barrier' op waits in a cycle of named barriers (a deadlock)}}
      nvvm.barrier id = %b1 number_of_threads = %count
      // expected-note @below {{then this arrival on a named barrier}}
      nvvm.barrier id = %b2 number_of_threads = %count
    } else {
      // expected-note @below {{which this named barrier waits for}}
      nvvm.barrier id = %b2 number_of_threads = %count
      // expected-note @below {{then this arrival on a named barrier}}
      nvvm.barrier id = %b1 number_of_threads = %count
    }
    gpu.return
  }
}

// -----

// A wait-for cycle through an acquire after a loop (session 36's red-team
// pass, w28): the producer fills A's two slots in a loop, B's slot 0, A's
// slot 2 and B's slot 1; the consumer takes B's two slots before A's. The
// acquire of A's slot 2 waits for the release of A's slot 0, in the
// consumer's loop after its wait on B's slot 1, whose commit follows that
// acquire. The release's slot (in a loop) is not matched: unproven.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q) workgroup(%ka: !ring, %kb: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %pa = kvpipe.create : !p
    kvpipe.init %pa : !p
    %pb = kvpipe.create : !p
    kvpipe.init %pb : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %a1 = scf.for %j = %c0 to %c2 step %c1 iter_args(%a = %pa) -> (!p) {
          kvpipe.producer_acquire %a : !p
          %slotan = kvpipe.index %a : !p
          %ban = kvpipe.producer_mbar %a : !p
          %tilean = memref.subview %ka[%slotan, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c0, %j, %c0], %tilean, %ban : !map, !half
          kvpipe.producer_commit %a : !p
          %an = kvpipe.step %a : !p
          scf.yield %an : !p
        }
        kvpipe.producer_acquire %pb : !p
        %slotb1 = kvpipe.index %pb : !p
        %bb1 = kvpipe.producer_mbar %pb : !p
        %tileb1 = memref.subview %kb[%slotb1, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
        kvpipe.tma_load %map[%c0, %c0, %c0], %tileb1, %bb1 : !map, !half
        kvpipe.producer_commit %pb : !p
        %b1 = kvpipe.step %pb : !p
        // expected-warning @below {{'kvpipe.producer_acquire' op cannot prove that the waits across pipelines form no cycle: through the ops in loops, whose slots the checker does not match, this wait may wait for itself}}
        kvpipe.producer_acquire %a1 : !p
        %slota2 = kvpipe.index %a1 : !p
        %ba2 = kvpipe.producer_mbar %a1 : !p
        %tilea2 = memref.subview %ka[%slota2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
        kvpipe.tma_load %map[%c0, %c2, %c0], %tilea2, %ba2 : !map, !half
        kvpipe.producer_commit %a1 : !p
        %a2 = kvpipe.step %a1 : !p
        kvpipe.producer_acquire %b1 : !p
        %slotb2 = kvpipe.index %b1 : !p
        %bb2 = kvpipe.producer_mbar %b1 : !p
        %tileb2 = memref.subview %kb[%slotb2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
        kvpipe.tma_load %map[%c0, %c1, %c0], %tileb2, %bb2 : !map, !half
        // expected-note @below {{then this 'producer_commit'}}
        kvpipe.producer_commit %b1 : !p
        %b2 = kvpipe.step %b1 : !p
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      kvpipe.consumer_wait %pb : !p
      %slotcb1 = kvpipe.index %pb : !p
      %tilecb1 = memref.subview %kb[%slotcb1, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
      %acccb1 = kvpipe.warpgroup_mma %q, %tilecb1, %o0 : !q, !kt -> vector<64xf32>
      %donecb1 = kvpipe.warpgroup_wait %acccb1 {pending = 0} : vector<64xf32>
      %cb1 = kvpipe.consumer_release %pb, %first : !p
      // expected-note @below {{which this 'consumer_wait'}}
      kvpipe.consumer_wait %cb1 : !p
      %slotcb2 = kvpipe.index %cb1 : !p
      %tilecb2 = memref.subview %kb[%slotcb2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
      %acccb2 = kvpipe.warpgroup_mma %q, %tilecb2, %o0 : !q, !kt -> vector<64xf32>
      %donecb2 = kvpipe.warpgroup_wait %acccb2 {pending = 0} : vector<64xf32>
      %cb2 = kvpipe.consumer_release %cb1, %first : !p
      %ra = scf.for %j = %c0 to %c2 step %c1 iter_args(%a = %pa) -> (!p) {
        kvpipe.consumer_wait %a : !p
        %slotan = kvpipe.index %a : !p
        %tilean = memref.subview %ka[%slotan, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %accan = kvpipe.warpgroup_mma %q, %tilean, %o0 : !q, !kt -> vector<64xf32>
        %donean = kvpipe.warpgroup_wait %accan {pending = 0} : vector<64xf32>
        // expected-note @below {{then this 'consumer_release'}}
        %an = kvpipe.consumer_release %a, %first : !p
        scf.yield %an : !p
      }
      kvpipe.consumer_wait %ra : !p
      %slotra2 = kvpipe.index %ra : !p
      %tilera2 = memref.subview %ka[%slotra2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
      %accra2 = kvpipe.warpgroup_mma %q, %tilera2, %o0 : !q, !kt -> vector<64xf32>
      %donera2 = kvpipe.warpgroup_wait %accra2 {pending = 0} : vector<64xf32>
      %ra2 = kvpipe.consumer_release %ra, %first : !p
    }
    gpu.return
  }
}

// -----

// The same with the consumer taking B's slot 0, A's three slots, then B's
// slot 1: no cycle. Nothing to report.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q) workgroup(%ka: !ring, %kb: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %pa = kvpipe.create : !p
    kvpipe.init %pa : !p
    %pb = kvpipe.create : !p
    kvpipe.init %pb : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %a1 = scf.for %j = %c0 to %c2 step %c1 iter_args(%a = %pa) -> (!p) {
          kvpipe.producer_acquire %a : !p
          %slotan = kvpipe.index %a : !p
          %ban = kvpipe.producer_mbar %a : !p
          %tilean = memref.subview %ka[%slotan, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c0, %j, %c0], %tilean, %ban : !map, !half
          kvpipe.producer_commit %a : !p
          %an = kvpipe.step %a : !p
          scf.yield %an : !p
        }
        kvpipe.producer_acquire %pb : !p
        %slotb1 = kvpipe.index %pb : !p
        %bb1 = kvpipe.producer_mbar %pb : !p
        %tileb1 = memref.subview %kb[%slotb1, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
        kvpipe.tma_load %map[%c0, %c0, %c0], %tileb1, %bb1 : !map, !half
        kvpipe.producer_commit %pb : !p
        %b1 = kvpipe.step %pb : !p
        kvpipe.producer_acquire %a1 : !p
        %slota2 = kvpipe.index %a1 : !p
        %ba2 = kvpipe.producer_mbar %a1 : !p
        %tilea2 = memref.subview %ka[%slota2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
        kvpipe.tma_load %map[%c0, %c2, %c0], %tilea2, %ba2 : !map, !half
        kvpipe.producer_commit %a1 : !p
        %a2 = kvpipe.step %a1 : !p
        kvpipe.producer_acquire %b1 : !p
        %slotb2 = kvpipe.index %b1 : !p
        %bb2 = kvpipe.producer_mbar %b1 : !p
        %tileb2 = memref.subview %kb[%slotb2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
        kvpipe.tma_load %map[%c0, %c1, %c0], %tileb2, %bb2 : !map, !half
        kvpipe.producer_commit %b1 : !p
        %b2 = kvpipe.step %b1 : !p
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      kvpipe.consumer_wait %pb : !p
      %slotcb1 = kvpipe.index %pb : !p
      %tilecb1 = memref.subview %kb[%slotcb1, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
      %acccb1 = kvpipe.warpgroup_mma %q, %tilecb1, %o0 : !q, !kt -> vector<64xf32>
      %donecb1 = kvpipe.warpgroup_wait %acccb1 {pending = 0} : vector<64xf32>
      %cb1 = kvpipe.consumer_release %pb, %first : !p
      %ra = scf.for %j = %c0 to %c2 step %c1 iter_args(%a = %pa) -> (!p) {
        kvpipe.consumer_wait %a : !p
        %slotan = kvpipe.index %a : !p
        %tilean = memref.subview %ka[%slotan, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %accan = kvpipe.warpgroup_mma %q, %tilean, %o0 : !q, !kt -> vector<64xf32>
        %donean = kvpipe.warpgroup_wait %accan {pending = 0} : vector<64xf32>
        %an = kvpipe.consumer_release %a, %first : !p
        scf.yield %an : !p
      }
      kvpipe.consumer_wait %ra : !p
      %slotra2 = kvpipe.index %ra : !p
      %tilera2 = memref.subview %ka[%slotra2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
      %accra2 = kvpipe.warpgroup_mma %q, %tilera2, %o0 : !q, !kt -> vector<64xf32>
      %donera2 = kvpipe.warpgroup_wait %accra2 {pending = 0} : vector<64xf32>
      %ra2 = kvpipe.consumer_release %ra, %first : !p
      kvpipe.consumer_wait %cb1 : !p
      %slotcb2 = kvpipe.index %cb1 : !p
      %tilecb2 = memref.subview %kb[%slotcb2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
      %acccb2 = kvpipe.warpgroup_mma %q, %tilecb2, %o0 : !q, !kt -> vector<64xf32>
      %donecb2 = kvpipe.warpgroup_wait %acccb2 {pending = 0} : vector<64xf32>
      %cb2 = kvpipe.consumer_release %cb1, %first : !p
    }
    gpu.return
  }
}
