// RUN: kvpipe-opt %s -split-input-file -allow-unregistered-dialect -verify-diagnostics --kvpipe-verify-protocol

// --kvpipe-verify-protocol on states it cannot follow everywhere: states
// made by unknown ops, recursive and external callees, graph regions,
// unstructured control flow, loops of huge or empty trip counts. It reports
// what it can see, and says where it cannot follow a state or count slots
// ("cannot prove" warnings; errors with strict=true).

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// A state made by an unknown op is named by where it is defined.
func.func @unknown_origin() -> index {
  // expected-warning @below {{'test.make_state' op cannot prove which pipeline state this op produces}}
  %p = "test.make_state"() : () -> !p
  // expected-note @below {{advanced here}}
  %q = kvpipe.step %p : !p
  // expected-error-re @below {{'kvpipe.index' op state used after it was advanced (pipeline state defined at {{.*}}:14:8 : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>)}}
  %i = kvpipe.index %p : !p
  return %i : index
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Recursive and external callees: what they do to the state is unknown, so
// the states they return are unproven.
func.func private @external(!p) -> !p

func.func @recursive(%p: !p, %c: i1) -> !p {
  %q = scf.if %c -> !p {
    // expected-warning @below {{'func.call' op cannot prove which pipeline state this op produces: the checker does not follow states through 'func.call'}}
    %r = func.call @recursive(%p, %c) : (!p, i1) -> !p
    scf.yield %r : !p
  } else {
    %s = kvpipe.step %p : !p
    scf.yield %s : !p
  }
  // expected-warning @below {{'func.call' op cannot prove which pipeline state this op produces}}
  %t = func.call @external(%q) : (!p) -> !p
  %i = kvpipe.index %q : !p
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Unstructured control flow: a block dominated by the step's block uses the
// state it stepped.
func.func @branches(%p: !p, %c: i1) -> !p {
  cf.br ^loop(%p : !p)
^loop(%x: !p):
  // expected-note @below {{advanced here}}
  %y = kvpipe.step %x : !p
  cf.cond_br %c, ^loop(%y : !p), ^exit
^exit:
  // expected-error @below {{'kvpipe.index' op state used after it was advanced (pipeline argument #0 of @branches}}
  %z = kvpipe.index %x : !p
  return %y : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// Trip counts that do not fit, empty loops, an scf.parallel that advances a
// state it does not carry, a graph region.
func.func @odd_loops(%p: !p, %n: index) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %big = arith.constant 9223372036854775807 : index
  // expected-warning @below {{'scf.for' op cannot prove that the producer and consumer sides advance the same number of slots: the checker cannot count the slots through this op}}
  %r = scf.for %i = %c0 to %big step %c1 iter_args(%s = %p) -> !p {
    %in = scf.for %j = %c0 to %big step %c1 iter_args(%x = %s) -> !p {
      %y = kvpipe.step %x : !p
      scf.yield %y : !p
    }
    scf.yield %in : !p
  }
  %e = scf.for %i = %c1 to %c0 step %c1 iter_args(%s = %r) -> !p {
    %y = kvpipe.step %s : !p
    scf.yield %y : !p
  }
  // expected-note @below {{the loop}}
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    // expected-error @below {{'kvpipe.step' op advances a state defined outside its loop, once per iteration: carry it as an iter_arg}}
    %z = kvpipe.step %e : !p
    scf.reduce
  }
  // expected-warning @below {{'test.graph' op cannot prove which pipeline state this op produces}}
  %g = "test.graph"() ({
    %a = kvpipe.step %b : !p
    %b = kvpipe.step %a : !p
    "test.terminator"() : () -> ()
  }) : () -> !p
  return %g : !p
}
