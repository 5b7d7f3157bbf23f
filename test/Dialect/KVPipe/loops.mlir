// RUN: kvpipe-opt %s | kvpipe-opt | FileCheck %s

// Pipeline states are values: loops carry them as iter_args and branches
// yield them.

!p = !kvpipe.pipeline<kv_stages = 3, qk_stages = 1, producers = 1, consumers = 128>

// CHECK-LABEL: func @producer_loop
//       CHECK: %[[P:.*]] = kvpipe.create
//       CHECK: scf.for {{.*}} iter_args(%[[IT:.*]] = %[[P]]) -> (!kvpipe.pipeline<kv_stages = 3, qk_stages = 1, producers = 1, consumers = 128>)
//       CHECK:   kvpipe.producer_acquire %[[IT]]
//       CHECK:   kvpipe.producer_commit %[[IT]]
//       CHECK:   %[[N:.*]] = kvpipe.step %[[IT]]
//       CHECK:   scf.yield %[[N]]
func.func @producer_loop(%n: index) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%it = %p) -> (!p) {
    kvpipe.producer_acquire %it : !p
    kvpipe.producer_commit %it : !p
    %next = kvpipe.step %it : !p
    scf.yield %next : !p
  }
  return %r : !p
}

// CHECK-LABEL: func @consumer_branch
//       CHECK: scf.if %{{.*}} -> (!kvpipe.pipeline<kv_stages = 3, qk_stages = 1, producers = 1, consumers = 128>)
//       CHECK:   kvpipe.consumer_wait
//       CHECK:   kvpipe.consumer_release
//       CHECK: } else {
//       CHECK:   kvpipe.step
func.func @consumer_branch(%p: !p, %c: i1, %e: i1) -> !p {
  %r = scf.if %c -> (!p) {
    kvpipe.consumer_wait %p : !p
    %n = kvpipe.consumer_release %p, %e : !p
    scf.yield %n : !p
  } else {
    %n = kvpipe.step %p : !p
    scf.yield %n : !p
  }
  return %r : !p
}
