// RUN: kvpipe-opt %s | FileCheck %s
// RUN: kvpipe-opt %s | kvpipe-opt | FileCheck %s
// RUN: kvpipe-opt %s -mlir-print-op-generic | kvpipe-opt | FileCheck %s

// Round trip of every core op in the pretty form.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>

// CHECK-LABEL: func @core_ops
//  CHECK-SAME: (%[[E:.*]]: i1, %[[I:.*]]: index)
func.func @core_ops(%e: i1, %i: index) -> (index, i1) {
  // CHECK: %[[P:.*]] = kvpipe.create : !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 2>
  %p = kvpipe.create : !p
  // CHECK: kvpipe.init %[[P]] : !kvpipe.pipeline
  kvpipe.init %p : !p
  // CHECK: kvpipe.producer_mbar %[[P]] stage 0 : !kvpipe.pipeline
  %b0 = kvpipe.producer_mbar %p stage 0 : !p
  // CHECK: kvpipe.producer_mbar %[[P]] : !kvpipe.pipeline
  %b1 = kvpipe.producer_mbar %p : !p
  // CHECK: kvpipe.consumer_mbar %[[P]][%[[I]]] stage 1 : !kvpipe.pipeline
  %c0 = kvpipe.consumer_mbar %p [%i] stage 1 : !p
  // CHECK: kvpipe.consumer_mbar %[[P]] : !kvpipe.pipeline
  %c1 = kvpipe.consumer_mbar %p : !p
  // CHECK: kvpipe.producer_acquire %[[P]] stage 0 : !kvpipe.pipeline
  kvpipe.producer_acquire %p stage 0 : !p
  // CHECK: kvpipe.producer_commit %[[P]] stage 0 : !kvpipe.pipeline
  kvpipe.producer_commit %p stage 0 : !p
  // CHECK: kvpipe.consumer_wait %[[P]] stage 0 : !kvpipe.pipeline
  kvpipe.consumer_wait %p stage 0 : !p
  // CHECK: %[[R0:.*]] = kvpipe.consumer_release %[[P]], %[[E]] stage 0 : !kvpipe.pipeline
  %r0 = kvpipe.consumer_release %p, %e stage 0 : !p
  // CHECK: %[[R1:.*]] = kvpipe.consumer_release %[[R0]], %[[E]] : !kvpipe.pipeline
  %r1 = kvpipe.consumer_release %r0, %e : !p
  // CHECK: %[[S:.*]] = kvpipe.step %[[R1]] : !kvpipe.pipeline
  %s = kvpipe.step %r1 : !p
  // CHECK: %[[X:.*]] = kvpipe.index %[[S]] : !kvpipe.pipeline
  %x = kvpipe.index %s : !p
  // CHECK: %[[Y:.*]] = kvpipe.phase %[[S]] : !kvpipe.pipeline
  %y = kvpipe.phase %s : !p
  // CHECK: return %[[X]], %[[Y]]
  return %x, %y : index, i1
}

// CHECK-LABEL: func @mbarrier_type
//  CHECK-SAME: !kvpipe.mbarrier
func.func @mbarrier_type(%b: !kvpipe.mbarrier) -> !kvpipe.mbarrier {
  return %b : !kvpipe.mbarrier
}

// CHECK-LABEL: func @largest_ring
//  CHECK-SAME: !kvpipe.pipeline<kv_stages = 8, qk_stages = 4, producers = 1, consumers = 1048575>
func.func @largest_ring(%p: !kvpipe.pipeline<kv_stages = 8, qk_stages = 4, producers = 1, consumers = 1048575>) {
  return
}
