// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 3 of --kvpipe-verify-protocol: a state passed to a callee the checker
// cannot see (func.call_indirect, an external function) may be waited on,
// released or advanced there; nothing about it is proven, and the checker
// says so. Each wrong program is followed by its corrected form.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

func.func private @consume(%s: !p, %e: i1) -> !p {
  kvpipe.consumer_wait %s : !p
  %t = kvpipe.consumer_release %s, %e : !p
  return %t : !p
}

// The consumer step is picked at run time through a function value.
func.func @through_call_indirect(%p: !p, %n: index, %e: i1) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = func.constant @consume : (!p, i1) -> !p
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    // expected-warning @below {{'func.call_indirect' op cannot prove which pipeline state this op produces}}
    %t = func.call_indirect %f(%s, %e) : (!p, i1) -> !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

func.func private @consume(%s: !p, %e: i1) -> !p {
  kvpipe.consumer_wait %s : !p
  %t = kvpipe.consumer_release %s, %e : !p
  return %t : !p
}

// Corrected: a direct call, which the checker follows into the callee.
func.func @through_direct_call(%p: !p, %n: index, %e: i1) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    %t = func.call @consume(%s, %e) : (!p, i1) -> !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// A state handed to an indirect callee that returns nothing: the slots it
// releases (or not) are not counted.
func.func @state_into_call_indirect(%p: !p, %e: i1, %f: (!p, i1) -> ()) {
  // expected-warning @below {{'func.call_indirect' op cannot prove what happens to the pipeline state passed to 'func.call_indirect'}}
  func.call_indirect %f(%p, %e) : (!p, i1) -> ()
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// An external consumer helper: its body is not in the module.
func.func private @external_consume(!p, i1) -> !p

func.func @through_external(%p: !p, %e: i1) -> !p {
  // expected-warning @below {{'func.call' op cannot prove which pipeline state this op produces}}
  %t = func.call @external_consume(%p, %e) : (!p, i1) -> !p
  return %t : !p
}

// -----

// Barrier handles (held-out F1 of the fifth audit). WRONG: the consumer
// hands the slot's full barrier to an external function before its wait:
// the callee can arrive on it, completing the phase before the TMA data
// landed. The checker does not see what the callee does with it.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @barrier_to_external_callee(%p: !p, %e: i1) -> !p {
  // expected-note @below {{the barrier}}
  %b = kvpipe.producer_mbar %p : !p
  // expected-warning @below {{'func.call' op cannot prove what happens to the pipeline barrier passed to 'func.call': the checker does not follow barriers into it (an external or indirect call, a cast, a branch, an op it does not model), which may arrive on it or wait on it outside the pipeline's protocol (sub-stage 0 of pipeline argument #0 of @barrier_to_external_callee}}
  func.call @ext_arrive(%b) : (!kvpipe.mbarrier) -> ()
  kvpipe.consumer_wait %p : !p
  %t = kvpipe.consumer_release %p, %e : !p
  return %t : !p
}
func.func private @ext_arrive(!kvpipe.mbarrier)

// -----

// WRONG: the barrier cast to a pointer and arrived on with nvvm ops: the
// consumers would see the slot full before the producer filled it.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @barrier_cast_and_arrived(%p: !p, %e: i1) -> !p {
  // expected-note @below {{the barrier}}
  %b = kvpipe.producer_mbar %p : !p
  // expected-warning @below {{'builtin.unrealized_conversion_cast' op cannot prove what happens to the pipeline barrier passed to 'builtin.unrealized_conversion_cast'}}
  %ptr = builtin.unrealized_conversion_cast %b : !kvpipe.mbarrier to !llvm.ptr<3>
  %tok = nvvm.mbarrier.arrive %ptr : !llvm.ptr<3> -> i64
  kvpipe.consumer_wait %p : !p
  %t = kvpipe.consumer_release %p, %e : !p
  return %t : !p
}

// -----

// WRONG: the barrier through an indirect call.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @barrier_to_call_indirect(%p: !p, %e: i1, %f: (!kvpipe.mbarrier) -> ()) -> !p {
  // expected-note @below {{the barrier}}
  %b = kvpipe.consumer_mbar %p : !p
  // expected-warning @below {{'func.call_indirect' op cannot prove what happens to the pipeline barrier passed to 'func.call_indirect'}}
  func.call_indirect %f(%b) : (!kvpipe.mbarrier) -> ()
  kvpipe.consumer_wait %p : !p
  %t = kvpipe.consumer_release %p, %e : !p
  return %t : !p
}

// -----

// Corrected: the barrier goes to a helper in the module, which completes a
// TMA load on it (followed into the helper: its argument's uses are the
// load's).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>
func.func @barrier_to_helper(%p: !p, %map: !map, %i: index, %t: !tile) -> !p {
  kvpipe.producer_acquire %p : !p
  %b = kvpipe.producer_mbar %p : !p
  func.call @load(%map, %i, %t, %b) : (!map, index, !tile, !kvpipe.mbarrier) -> ()
  kvpipe.producer_commit %p : !p
  %q = kvpipe.step %p : !p
  return %q : !p
}
func.func private @load(%map: !map, %i: index, %t: !tile, %b: !kvpipe.mbarrier) {
  kvpipe.tma_load %map[%i, %i, %i], %t, %b : !map, !tile
  return
}
