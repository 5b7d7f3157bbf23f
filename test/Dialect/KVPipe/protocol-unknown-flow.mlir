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

// -----

// A cf loop that steps the function's state, not a block argument, every
// iteration.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @cf_loop_outer_state(%p: !p, %c: i1) {
  // expected-warning @below {{'cf.br' op cannot prove that the producer and consumer sides advance the same number of slots through unstructured control flow}}
  cf.br ^loop
^loop:
  kvpipe.producer_acquire %p : !p
  kvpipe.producer_commit %p : !p
  // expected-error @below {{'kvpipe.step' op advances a state defined outside its loop, once per iteration: a path of branches leads back to this block without redefining the state}}
  // expected-note @below {{a chain of the pipeline's states ends here}}
  %y = kvpipe.step %p : !p
  // expected-note @below {{the branch that starts the cycle}}
  cf.cond_br %c, ^loop, ^exit
^exit:
  return
}

// -----

// A producer that returns early on one path: the totals of unstructured
// control flow are not counted.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @cf_early_return(%producer: i1, %skip: i1, %e: i1) {
  // (The created state's chain ends on the path that skips the fill.)
  // expected-note @below {{a chain of the pipeline's states ends here}}
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-warning @below {{cannot prove that the producer and consumer sides advance the same number of slots through unstructured control flow: the checker does not count the paths of 'cf' branches}}
  cf.cond_br %producer, ^prod, ^cons
^prod:
  cf.cond_br %skip, ^done, ^fill
^fill:
  kvpipe.producer_acquire %p : !p
  kvpipe.producer_commit %p : !p
  %t = kvpipe.step %p : !p
  cf.br ^done
^cons:
  kvpipe.consumer_wait %p : !p
  %u = kvpipe.consumer_release %p, %e : !p
  cf.br ^done
^done:
  return
}

// -----

// Pairing along the paths of cf branches: a wait released in a later block
// is paired; a path that leaves with the wait open is an error.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @cf_wait_release_across_blocks(%p: !p, %e: i1) -> !p {
  kvpipe.consumer_wait %p : !p
  cf.br ^rel
^rel:
  %t = kvpipe.consumer_release %p, %e : !p
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @cf_wait_early_exit(%p: !p, %c: i1, %e: i1) -> !p {
  // expected-error @below {{'kvpipe.consumer_wait' op has no consumer_release of the same slot and sub-stage on every path after it}}
  kvpipe.consumer_wait %p : !p
  cf.cond_br %c, ^exit, ^rel
^rel:
  %t = kvpipe.consumer_release %p, %e : !p
  return %t : !p
^exit:
  // expected-note @below {{the path leaves here with it open}}
  return %p : !p
}

// -----

// A wgmma operand that reaches it through a cf block argument: not followed,
// so a release while the wgmma is in flight is unproven (first checker audit,
// v10; the argument used to be taken for a function argument).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
func.func @f(%p: !p, %e: i1, %c: i1, %q: !q, %k: !ring, %other: !kt, %n: index) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %v = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
  cf.br ^bb1(%v : !kt)
^bb1(%tile: !kt):
  // expected-note @+1 {{the wgmma}}
  %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
  // released while the wgmma reading the slot is in flight
  // expected-warning @+1 {{'kvpipe.consumer_release' op cannot prove that no wgmma in flight reads the released slot: the operand of a wgmma still in flight comes from 'func.fun}}
  %t = kvpipe.consumer_release %p, %e : !p
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  return %t : !p
}

// -----

// WRONG (red-team pass, session 35): two cf loops, the producer's filling n
// slots and the consumer's waiting n + 1 times (i <= n): the last wait never
// returns. Both drop their state on the exit edge (not passed to ^exit), so
// no chain ended anywhere and nothing was compared: accepted. A state that
// some path carries out of the region without passing it on ends there.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @cf_roles(%n: index, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-warning @below {{'cf.cond_br' op cannot prove that the producer and consumer sides advance the same number of slots through unstructured control flow}}
  cf.cond_br %producer, ^ph(%p, %c0 : !p, index), ^ch(%p, %c0 : !p, index)
^ph(%ps: !p, %pi: index):
  // expected-note @below {{a chain of the pipeline's states ends here}}
  %pgo = arith.cmpi slt, %pi, %n : index
  cf.cond_br %pgo, ^pbody, ^exit
^pbody:
  kvpipe.producer_acquire %ps : !p
  kvpipe.producer_commit %ps : !p
  %pt = kvpipe.step %ps : !p
  %pi1 = arith.addi %pi, %c1 : index
  cf.br ^ph(%pt, %pi1 : !p, index)
^ch(%cs: !p, %ci: index):
  %cgo = arith.cmpi sle, %ci, %n : index
  cf.cond_br %cgo, ^cbody, ^exit
^cbody:
  kvpipe.consumer_wait %cs : !p
  %ct = kvpipe.consumer_release %cs, %e : !p
  %ci1 = arith.addi %ci, %c1 : index
  cf.br ^ch(%ct, %ci1 : !p, index)
^exit:
  return
}
