// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 2 of --kvpipe-verify-protocol: every kvpipe.create has exactly one
// kvpipe.init, executed by every thread of the CTA (in the block of the
// create: not under a condition, not in a loop) before any other use of the
// pipeline. Each wrong program is followed by its corrected form.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Forgot the init: the barriers hold garbage.
func.func @create_without_init(%e: i1, %producer: i1) {
  // expected-error-re @below {{'kvpipe.create' op is never initialised: every thread of the CTA must execute kvpipe.init on it before its first use (pipeline created at {{.*}}:13:8 : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>)}}
  %p = kvpipe.create : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %q = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %q = kvpipe.consumer_release %p, %e : !p
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Corrected.
func.func @create_with_init(%e: i1, %producer: i1) {
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %q = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %q = kvpipe.consumer_release %p, %e : !p
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// The init inside the producer warpgroup's branch: the consumers use
// barriers nobody initialised for them (and the init's CTA barrier waits
// for threads that never arrive).
func.func @init_in_one_branch(%e: i1, %producer: i1) {
  %p = kvpipe.create : !p
  // expected-note @below {{the enclosing 'scf.if'}}
  scf.if %producer {
    // expected-error @below {{'kvpipe.init' op is under a condition: kvpipe.init is CTA-wide}}
    kvpipe.init %p : !p
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %q = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %q = kvpipe.consumer_release %p, %e : !p
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Initialised twice: the second init resets barriers the other warpgroup may
// already be waiting on.
func.func @init_twice(%e: i1, %producer: i1) {
  %p = kvpipe.create : !p
  // expected-note @below {{the first kvpipe.init}}
  kvpipe.init %p : !p
  // expected-error @below {{'kvpipe.init' op initialises the barriers a second time}}
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %q = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %q = kvpipe.consumer_release %p, %e : !p
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// The init in the tile loop: re-initialised every tile, under the feet of
// the other side.
func.func @init_in_loop(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  // expected-note @below {{the enclosing 'scf.for'}}
  scf.for %i = %c0 to %n step %c1 {
    // expected-error @below {{'kvpipe.init' op is inside a loop}}
    kvpipe.init %p : !p
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// The producer's first acquire is placed before the init: it waits on a
// barrier nobody initialised yet.
func.func @use_before_init() -> !p {
  %p = kvpipe.create : !p
  // expected-error @below {{'kvpipe.producer_acquire' op uses the pipeline before its kvpipe.init}}
  kvpipe.producer_acquire %p : !p
  // expected-note @below {{the kvpipe.init}}
  kvpipe.init %p : !p
  kvpipe.producer_commit %p : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Each role initialises the pipeline in its own branch: two inits, each
// under a condition.
func.func @init_in_each_role(%e: i1, %producer: i1) {
  %p = kvpipe.create : !p
  // expected-note @below {{the enclosing 'scf.if'}}
  scf.if %producer {
    // expected-error @below {{'kvpipe.init' op is under a condition: kvpipe.init is CTA-wide}}
    // expected-note @below {{the first kvpipe.init}}
    kvpipe.init %p : !p
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %q = kvpipe.step %p : !p
  } else {
    // expected-error @below {{'kvpipe.init' op initialises the barriers a second time}}
    kvpipe.init %p : !p
    kvpipe.consumer_wait %p : !p
    %q = kvpipe.consumer_release %p, %e : !p
  }
  return
}

// -----

// create + init in a loop (audit e01): one set of barriers per create op,
// initialised again every iteration while the last slot's waits may pend.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @create_init_in_loop(%n: index, %m: index, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-note @below {{the enclosing 'scf.for'}}
  scf.for %j = %c0 to %m step %c1 {
    // expected-error @below {{'kvpipe.create' op is inside a loop: kvpipe.create and kvpipe.init run once, by every thread of the CTA}}
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    scf.if %producer {
      kvpipe.producer_acquire %p : !p
      kvpipe.producer_commit %p : !p
      %t = kvpipe.step %p : !p
    } else {
      kvpipe.consumer_wait %p : !p
      %t = kvpipe.consumer_release %p, %e : !p
    }
  }
  return
}

// -----

// The same through a helper called once per tile (audit e07).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func private @tile(%producer: i1, %e: i1) {
  // expected-error @below {{'kvpipe.create' op runs through a call inside a loop}}
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %t = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %t = kvpipe.consumer_release %p, %e : !p
  }
  return
}
func.func @create_in_helper_called_in_loop(%m: index, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-note @below {{the enclosing 'scf.for'}}
  scf.for %j = %c0 to %m step %c1 {
    // expected-note @below {{the call}}
    func.call @tile(%producer, %e) : (i1, i1) -> ()
  }
  return
}

// -----

// create + init in one role's branch, on the warpgroup id (audit e09): the
// other warpgroups never initialise the barriers.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @create_init_in_role_branch(%e: i1) {
  %c0 = arith.constant 0 : index
  %wg = kvpipe.warpgroup_id : index
  %isp = arith.cmpi eq, %wg, %c0 : index
  // expected-note @below {{the enclosing 'scf.if'}}
  scf.if %isp {
    // expected-error @below {{'kvpipe.create' op is under a condition: kvpipe.create and kvpipe.init run once, by every thread of the CTA}}
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    %tid = gpu.thread_id x
    %el = arith.cmpi eq, %tid, %c0 : index
    scf.if %el {
      kvpipe.producer_acquire %p : !p
      kvpipe.producer_commit %p : !p
      %t = kvpipe.step %p : !p
    } else {
      kvpipe.consumer_wait %p : !p
      %t = kvpipe.consumer_release %p, %e : !p
    }
  }
  return
}

// -----

// A helper that creates a pipeline, called twice: the same barriers.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func private @run_once(%producer: i1, %e: i1) {
  // expected-error @below {{'kvpipe.create' op is in @run_once, called from 2 places: each call creates and initialises the same barriers again}}
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %t = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %t = kvpipe.consumer_release %p, %e : !p
  }
  return
}
func.func @create_in_helper_called_twice(%producer: i1, %e: i1) {
  // expected-note @below {{a call}}
  func.call @run_once(%producer, %e) : (i1, i1) -> ()
  // expected-note @below {{a call}}
  func.call @run_once(%producer, %e) : (i1, i1) -> ()
  return
}

// -----

// Corrected: the helper that creates the pipeline is called once, by every
// thread, from the kernel's top level (through an scf.execute_region, which
// runs its region once).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func private @run_pipeline(%producer: i1, %e: i1) {
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %t = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %t = kvpipe.consumer_release %p, %e : !p
  }
  return
}
func.func @create_in_helper_called_once(%producer: i1, %e: i1) {
  scf.execute_region {
    func.call @run_pipeline(%producer, %e) : (i1, i1) -> ()
    scf.yield
  }
  return
}

// -----

// A helper whose symbol is taken and called indirectly may run any number
// of times.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func private @run_indirect(%producer: i1, %e: i1) {
  // expected-warning @below {{'kvpipe.create' op cannot prove that the pipeline is created and initialised once: @run_indirect is referenced other than by a direct call}}
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %t = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %t = kvpipe.consumer_release %p, %e : !p
  }
  return
}
func.func @create_in_helper_called_indirectly(%producer: i1, %e: i1) {
  // expected-note @below {{the reference}}
  %f = func.constant @run_indirect : (i1, i1) -> ()
  func.call_indirect %f(%producer, %e) : (i1, i1) -> ()
  return
}
