// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol='strict=true'

// --kvpipe-verify-protocol's `strict` option: what the checker cannot prove
// is an error, not a warning (the message is the same). A program it can
// prove passes.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

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
    // expected-error @below {{'scf.for' op cannot prove that the producer and consumer loops advance the same number of slots}}
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

func.func @select_of_states(%a: !p, %b: !p, %c: i1, %e: i1) -> !p {
  // expected-error @below {{'arith.select' op cannot prove which pipeline state this op produces}}
  %s = arith.select %c, %a, %b : !p
  kvpipe.consumer_wait %s : !p
  %t = kvpipe.consumer_release %s, %e : !p
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Proven: the same bounds on both sides.
func.func @same_bounds(%n: index, %producer: i1, %e: i1) {
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
