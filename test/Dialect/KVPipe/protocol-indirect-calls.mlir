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
