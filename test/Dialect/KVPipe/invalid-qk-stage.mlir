// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// qk_stage names a sub-stage: 0 <= qk_stage < qk_stages, on every op that
// takes one.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

func.func @acquire(%p: !p) {
  // expected-error @+1 {{'kvpipe.producer_acquire' op 'qk_stage' must be in [0, 2) for a pipeline with qk_stages = 2, got 2}}
  kvpipe.producer_acquire %p stage 2 : !p
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

func.func @commit(%p: !p) {
  // expected-error @+1 {{'kvpipe.producer_commit' op 'qk_stage' must be in [0, 2) for a pipeline with qk_stages = 2, got -1}}
  kvpipe.producer_commit %p stage -1 : !p
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 4, qk_stages = 1, producers = 1, consumers = 2>

func.func @wait(%p: !p) {
  // expected-error @+1 {{'kvpipe.consumer_wait' op 'qk_stage' must be in [0, 1) for a pipeline with qk_stages = 1, got 1}}
  kvpipe.consumer_wait %p stage 1 : !p
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 3, producers = 1, consumers = 2>

func.func @release(%p: !p, %e: i1) -> !p {
  // expected-error @+1 {{'kvpipe.consumer_release' op 'qk_stage' must be in [0, 3) for a pipeline with qk_stages = 3, got 7}}
  %r = kvpipe.consumer_release %p, %e stage 7 : !p
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

func.func @producer_mbar(%p: !p) -> !kvpipe.mbarrier {
  // expected-error @+1 {{'kvpipe.producer_mbar' op 'qk_stage' must be in [0, 2) for a pipeline with qk_stages = 2, got 5}}
  %b = kvpipe.producer_mbar %p stage 5 : !p
  return %b : !kvpipe.mbarrier
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

func.func @consumer_mbar(%p: !p, %i: index) -> !kvpipe.mbarrier {
  // expected-error @+1 {{'kvpipe.consumer_mbar' op 'qk_stage' must be in [0, 2) for a pipeline with qk_stages = 2, got -3}}
  %b = kvpipe.consumer_mbar %p [%i] stage -3 : !p
  return %b : !kvpipe.mbarrier
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

func.func @generic_form_out_of_range(%p: !p) {
  // expected-error @+1 {{'kvpipe.consumer_wait' op 'qk_stage' must be in [0, 2) for a pipeline with qk_stages = 2, got 2}}
  "kvpipe.consumer_wait"(%p) {qk_stage = 2 : i32} : (!p) -> ()
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

func.func @stage_not_i32(%p: !p) {
  // expected-error @+1 {{'kvpipe.consumer_wait' op attribute 'qk_stage' failed to satisfy constraint: 32-bit signless integer attribute}}
  "kvpipe.consumer_wait"(%p) <{qk_stage = 1 : i64}> : (!p) -> ()
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

func.func @stage_not_integer(%p: !p) {
  // expected-error @+1 {{'kvpipe.producer_acquire' op attribute 'qk_stage' failed to satisfy constraint: 32-bit signless integer attribute}}
  "kvpipe.producer_acquire"(%p) {qk_stage = "last"} : (!p) -> ()
  return
}
