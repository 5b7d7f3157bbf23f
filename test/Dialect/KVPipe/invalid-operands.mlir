// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// Operand and result types: advancing ops return the pipeline's own type,
// the slot index is an `index`, the election flag an `i1`.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!q = !kvpipe.pipeline<kv_stages = 3, qk_stages = 1, producers = 1, consumers = 2>

func.func @step_result(%p: !p) -> !q {
  // expected-error @+1 {{'kvpipe.step' op failed to verify that all of {pipeline, result} have same type}}
  %r = "kvpipe.step"(%p) : (!p) -> !q
  return %r : !q
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!q = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 4>

func.func @release_result(%p: !p, %e: i1) -> !q {
  // expected-error @+1 {{'kvpipe.consumer_release' op failed to verify that all of {pipeline, result} have same type}}
  %r = "kvpipe.consumer_release"(%p, %e) : (!p, i1) -> !q
  return %r : !q
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

func.func @consumer_mbar_index(%p: !p, %i: i32) -> !kvpipe.mbarrier {
  // expected-error @+1 {{'kvpipe.consumer_mbar' op operand #1 must be index, but got 'i32'}}
  %b = "kvpipe.consumer_mbar"(%p, %i) : (!p, i32) -> !kvpipe.mbarrier
  return %b : !kvpipe.mbarrier
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

func.func @release_flag(%p: !p, %e: i32) -> !p {
  // expected-error @+1 {{'kvpipe.consumer_release' op operand #1 must be 1-bit signless integer, but got 'i32'}}
  %r = "kvpipe.consumer_release"(%p, %e) : (!p, i32) -> !p
  return %r : !p
}

// -----

func.func @not_a_pipeline(%x: i64) {
  // expected-error @+1 {{'kvpipe.producer_acquire' op operand #0 must be `!kvpipe.pipeline` state (barrier ring, index, phase), but got 'i64'}}
  "kvpipe.producer_acquire"(%x) : (i64) -> ()
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

func.func @index_result(%p: !p) -> i32 {
  // expected-error @+1 {{'kvpipe.index' op result #0 must be index, but got 'i32'}}
  %i = "kvpipe.index"(%p) : (!p) -> i32
  return %i : i32
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

func.func @phase_result(%p: !p) -> i32 {
  // expected-error @+1 {{'kvpipe.phase' op result #0 must be 1-bit signless integer, but got 'i32'}}
  %i = "kvpipe.phase"(%p) : (!p) -> i32
  return %i : i32
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

func.func @mbar_result(%p: !p) -> !p {
  // expected-error @+1 {{'kvpipe.producer_mbar' op result #0 must be `!kvpipe.mbarrier` (one mbarrier of a pipeline), but got '!kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>'}}
  %b = "kvpipe.producer_mbar"(%p) : (!p) -> !p
  return %b : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

func.func @create_operands(%p: !p) {
  // expected-error @+1 {{'kvpipe.create' op requires zero operands}}
  %q = "kvpipe.create"(%p) : (!p) -> !p
  return
}
