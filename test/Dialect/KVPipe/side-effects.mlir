// RUN: kvpipe-opt %s -canonicalize -cse | FileCheck %s

// Waits and arrivals have memory effects: CSE and canonicalisation never drop
// or merge them, even when their results are unused or they look identical.
// Pure state arithmetic is merged and dropped like any pure op.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// CHECK-LABEL: func @sync_ops_survive
//       CHECK: kvpipe.create
//       CHECK: kvpipe.create
//       CHECK: kvpipe.init
//       CHECK: kvpipe.producer_acquire
//       CHECK: kvpipe.producer_acquire
//       CHECK: kvpipe.producer_commit
//       CHECK: kvpipe.consumer_wait
//       CHECK: kvpipe.consumer_wait
//       CHECK: kvpipe.consumer_release
//       CHECK: kvpipe.consumer_release
//       CHECK: return
func.func @sync_ops_survive(%e: i1) {
  %p = kvpipe.create : !p
  %q = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.producer_acquire %p : !p
  kvpipe.producer_acquire %p : !p
  kvpipe.producer_commit %p : !p
  kvpipe.consumer_wait %q : !p
  kvpipe.consumer_wait %q : !p
  %r0 = kvpipe.consumer_release %q, %e : !p
  %r1 = kvpipe.consumer_release %q, %e : !p
  return
}

// CHECK-LABEL: func @pure_ops_fold
//  CHECK-SAME: (%[[P:.*]]: !kvpipe.pipeline
//       CHECK: %[[S:.*]] = kvpipe.step %[[P]]
//   CHECK-NOT: kvpipe.step
//       CHECK: %[[I:.*]] = kvpipe.index %[[S]]
//   CHECK-NOT: kvpipe.index
//   CHECK-NOT: kvpipe.phase
//   CHECK-NOT: kvpipe.producer_mbar
//       CHECK: return %[[I]], %[[I]]
func.func @pure_ops_fold(%p: !p) -> (index, index) {
  %s0 = kvpipe.step %p : !p
  %s1 = kvpipe.step %p : !p
  %i0 = kvpipe.index %s0 : !p
  %i1 = kvpipe.index %s1 : !p
  %unused = kvpipe.phase %s0 : !p
  %b = kvpipe.producer_mbar %p : !p
  return %i0, %i1 : index, index
}
