// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rules 3 and 4 of --kvpipe-verify-protocol: states the checker cannot
// follow (arith.select, builtin.unrealized_conversion_cast) are reported as
// unproven; the same state passed twice, a loop whose yields trade states
// between two pipelines, and a loop body that uses the outer state instead of
// its iter_arg are errors. Each wrong program is followed by its corrected
// form.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Picking the state to release with a select.
func.func @select_of_states(%a: !p, %b: !p, %c: i1, %e: i1) -> !p {
  // expected-warning-re @below {{'arith.select' op cannot prove which pipeline state this op produces: the checker does not follow states through 'arith.select', so nothing about the states it makes is proven (pipeline state defined at {{.*}})}}
  %s = arith.select %c, %a, %b : !p
  kvpipe.consumer_wait %s : !p
  %t = kvpipe.consumer_release %s, %e : !p
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Corrected: the slot to consume is the state's own, not a run-time pick
// between two pipelines.
func.func @state_of_its_pipeline(%a: !p, %e: i1) -> !p {
  kvpipe.consumer_wait %a : !p
  %t = kvpipe.consumer_release %a, %e : !p
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!q = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// A state reinterpreted as another pipeline type through a cast.
func.func @conversion_cast(%a: !p, %e: i1) -> !q {
  // expected-warning @below {{'builtin.unrealized_conversion_cast' op cannot prove which pipeline state this op produces}}
  %s = builtin.unrealized_conversion_cast %a : !p to !q
  kvpipe.consumer_wait %s : !q
  %t = kvpipe.consumer_release %s, %e : !q
  return %t : !q
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// The K and V loops were fused and the same state passed for both.
func.func @iter_arg_twice(%p: !p, %n: index, %e: i1) -> (!p, !p) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @below {{'scf.for' op passes the same state as operands #3 and #4: each copy walks the ring on its own, so the slots are waited for or filled twice}}
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%k = %p, %v = %p) -> (!p, !p) {
    kvpipe.consumer_wait %k : !p
    %k1 = kvpipe.consumer_release %k, %e : !p
    kvpipe.consumer_wait %v : !p
    %v1 = kvpipe.consumer_release %v, %e : !p
    scf.yield %k1, %v1 : !p, !p
  }
  return %r#0, %r#1 : !p, !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Corrected: one state per pipeline.
func.func @two_pipelines(%pk: !p, %pv: !p, %n: index, %e: i1) -> (!p, !p) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%k = %pk, %v = %pv) -> (!p, !p) {
    kvpipe.consumer_wait %k : !p
    %k1 = kvpipe.consumer_release %k, %e : !p
    kvpipe.consumer_wait %v : !p
    %v1 = kvpipe.consumer_release %v, %e : !p
    scf.yield %k1, %v1 : !p, !p
  }
  return %r#0, %r#1 : !p, !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// The yield lists K and V the wrong way round: the next iteration waits on
// V's barrier for K's data.
func.func @swapped_yield(%pk: !p, %pv: !p, %n: index, %e: i1) -> (!p, !p) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%k = %pk, %v = %pv) -> (!p, !p) {
    kvpipe.consumer_wait %k : !p
    %k1 = kvpipe.consumer_release %k, %e : !p
    kvpipe.consumer_wait %v : !p
    %v1 = kvpipe.consumer_release %v, %e : !p
    // expected-error @below {{'scf.yield' op yields at position #0 the state carried at position #1: the two states trade places every iteration}}
    // expected-error @below {{'scf.yield' op yields at position #1 the state carried at position #0}}
    scf.yield %v1, %k1 : !p, !p
  }
  return %r#0, %r#1 : !p, !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// The body waits on the outer state: every iteration waits for slot 0.
func.func @outer_state_in_body(%p: !p, %n: index, %e: i1) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-note @below {{the loop}}
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    // expected-error @below {{'kvpipe.consumer_wait' op uses a state defined outside the loop that carries this pipeline: the loop never advances it, so every iteration sees the same slot; use the loop's iter_arg}}
    kvpipe.consumer_wait %p : !p
    // expected-error @below {{'kvpipe.consumer_release' op has no preceding consumer_wait of the same slot and sub-stage in its block}}
    %t = kvpipe.consumer_release %s, %e : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// The tile address is computed from the outer state: always slot 0.
func.func @outer_state_index(%p: !p, %n: index, %e: i1, %q: !q, %k: !ring) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-note @below {{the loop}}
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.consumer_wait %s : !p
    // expected-error @below {{'kvpipe.index' op uses a state defined outside the loop that carries this pipeline}}
    %slot = kvpipe.index %p : !p
    %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
    // (and the slot of %p, not the one of %s waited for, is read)
    // expected-warning @below {{cannot prove that the slot this wgmma reads was waited for: its pipeline state is an argument of a function nothing in the module calls}}
    %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
    %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
    %t = kvpipe.consumer_release %s, %e : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// A loop that yields the state it was given, not its iter_arg advanced.
func.func @yields_outer_state(%p: !p, %n: index, %e: i1) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.consumer_wait %s : !p
    %t = kvpipe.consumer_release %s, %e : !p
    // expected-error @below {{'scf.yield' op yields at position #0 a state defined outside the loop instead of its iter_arg advanced}}
    scf.yield %p : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>

// The Q tile's slot released inside the K/V loop, once per block, though
// the producer fills it once.
func.func @q_released_per_block(%pq: !p, %pk: !p, %n: index, %e: i1) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @below {{'kvpipe.consumer_wait' op has no consumer_release of the same slot and sub-stage after it in its block}}
  kvpipe.consumer_wait %pq : !p
  // expected-note @below {{the loop}}
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %pk) -> (!p) {
    kvpipe.consumer_wait %s : !p
    %t = kvpipe.consumer_release %s, %e : !p
    // expected-error @below {{'kvpipe.consumer_release' op advances a state defined outside its loop, once per iteration: carry it as an iter_arg}}
    // expected-error @below {{'kvpipe.consumer_release' op has no preceding consumer_wait of the same slot and sub-stage in its block}}
    %q1 = kvpipe.consumer_release %pq, %e : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

// A state picked between two pipelines by a branch: which pipeline it
// waits on depends on the path (like arith.select of states).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @if_picks_pipeline(%a: !p, %b: !p, %c: i1, %e: i1) -> !p {
  // expected-warning @below {{'scf.if' op cannot prove which pipeline this state belongs to: its branches yield states of different pipelines}}
  %s = scf.if %c -> !p {
    scf.yield %a : !p
  } else {
    scf.yield %b : !p
  }
  kvpipe.consumer_wait %s : !p
  %t = kvpipe.consumer_release %s, %e : !p
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @switch_picks_pipeline(%a: !p, %b: !p, %i: index, %e: i1) -> !p {
  // expected-warning @below {{'scf.index_switch' op cannot prove which pipeline this state belongs to}}
  %s = scf.index_switch %i -> !p
  case 0 {
    scf.yield %a : !p
  }
  default {
    scf.yield %b : !p
  }
  kvpipe.consumer_wait %s : !p
  %t = kvpipe.consumer_release %s, %e : !p
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @cf_picks_pipeline(%a: !p, %b: !p, %c: i1, %e: i1) -> !p {
  // expected-warning @below {{'cf.cond_br' op cannot prove which pipeline this state belongs to: the branches to its block pass states of different pipelines}}
  cf.cond_br %c, ^bb1(%a : !p), ^bb1(%b : !p)
^bb1(%s: !p):
  kvpipe.consumer_wait %s : !p
  %t = kvpipe.consumer_release %s, %e : !p
  return %t : !p
}

// -----

// Corrected: two pipelines, a branch picks one only to read its ring index;
// the pipelines keep their identities (one kvpipe.init each).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @if_picks_index_only(%producer: i1, %c: i1, %e: i1) -> index {
  %a = kvpipe.create : !p
  kvpipe.init %a : !p
  %b = kvpipe.create : !p
  kvpipe.init %b : !p
  %s = scf.if %c -> !p {
    scf.yield %a : !p
  } else {
    scf.yield %b : !p
  }
  %i = kvpipe.index %s : !p
  scf.if %producer {
    kvpipe.producer_acquire %a : !p
    kvpipe.producer_commit %a : !p
    %a1 = kvpipe.step %a : !p
    kvpipe.producer_acquire %b : !p
    kvpipe.producer_commit %b : !p
    %b1 = kvpipe.step %b : !p
  } else {
    kvpipe.consumer_wait %a : !p
    %a1 = kvpipe.consumer_release %a, %e : !p
    kvpipe.consumer_wait %b : !p
    %b1 = kvpipe.consumer_release %b, %e : !p
  }
  return %i : index
}

// -----

// The same state passed twice to one block, and an scf.while whose
// condition forwards its two states swapped.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @cf_same_twice(%p: !p) -> (!p, !p) {
  // expected-error @below {{'cf.br' op passes the same state as operands #0 and #1 to one block}}
  cf.br ^bb1(%p, %p : !p, !p)
^bb1(%a: !p, %b: !p):
  kvpipe.producer_acquire %a : !p
  kvpipe.producer_commit %a : !p
  // expected-note @below {{advanced here}}
  %x = kvpipe.step %a : !p
  // expected-error @below {{'func.return' op state used after it was advanced}}
  return %x, %b : !p, !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @while_permuted(%a: !p, %b: !p, %c: i1, %e: i1) -> (!p, !p) {
  %r:2 = scf.while (%x = %a, %y = %b) : (!p, !p) -> (!p, !p) {
    scf.condition(%c) %y, %x : !p, !p
  } do {
  ^bb0(%x: !p, %y: !p):
    kvpipe.consumer_wait %x : !p
    %x1 = kvpipe.consumer_release %x, %e : !p
    // expected-error @below {{'scf.yield' op yields at position #0 the state that the condition forwarded from position #1: the states trade places every iteration}}
    // expected-error @below {{'scf.yield' op yields at position #1 the state that the condition forwarded from position #0}}
    scf.yield %x1, %y : !p, !p
  }
  return %r#0, %r#1 : !p, !p
}

// -----

// A loop that carries the state through unadvanced returns the state it was
// given: %r is %p, and filling the slot through both is an alias (audit j04).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @for_pass_through_alias(%p: !p, %n: index) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    scf.yield %s : !p
  }
  kvpipe.producer_acquire %p : !p
  kvpipe.producer_commit %p : !p
  // expected-note @below {{advanced here}}
  %a = kvpipe.step %p : !p
  // expected-error @below {{'kvpipe.step' op state used after it was advanced}}
  %b = kvpipe.step %r : !p
  return %b : !p
}

// -----

// The same through an scf.if whose branches both yield the iter_arg (j08).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @for_pass_through_if_alias(%p: !p, %n: index, %c: i1) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    %u = scf.if %c -> !p {
      scf.yield %s : !p
    } else {
      scf.yield %s : !p
    }
    scf.yield %u : !p
  }
  kvpipe.producer_acquire %r : !p
  kvpipe.producer_commit %r : !p
  // expected-note @below {{advanced here}}
  %a = kvpipe.step %r : !p
  // expected-error @below {{'func.return' op state used after it was advanced}}
  return %p : !p
}

// -----

// The same through an scf.while (j05).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @while_pass_through_alias(%p: !p, %c: i1) -> !p {
  %r = scf.while (%s = %p) : (!p) -> !p {
    scf.condition(%c) %s : !p
  } do {
  ^bb0(%s: !p):
    scf.yield %s : !p
  }
  kvpipe.producer_acquire %p : !p
  kvpipe.producer_commit %p : !p
  // expected-note @below {{advanced here}}
  %a = kvpipe.step %p : !p
  // expected-error @below {{'func.return' op state used after it was advanced}}
  return %r : !p
}

// -----

// Corrected: a pass-through loop whose result alone is used afterwards, and a
// loop that advances its state (its result is a later slot than the init).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @pass_through_result_only(%p: !p, %n: index) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    scf.yield %s : !p
  }
  %q = scf.for %i = %c0 to %n step %c1 iter_args(%s = %r) -> (!p) {
    kvpipe.producer_acquire %s : !p
    kvpipe.producer_commit %s : !p
    %t = kvpipe.step %s : !p
    scf.yield %t : !p
  }
  kvpipe.producer_acquire %q : !p
  kvpipe.producer_commit %q : !p
  %b = kvpipe.step %q : !p
  return %b : !p
}
