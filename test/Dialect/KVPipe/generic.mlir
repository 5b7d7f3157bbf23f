// RUN: kvpipe-opt %s | FileCheck %s
// RUN: kvpipe-opt %s -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// RUN: kvpipe-opt %s -mlir-print-op-generic | kvpipe-opt -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// The spec fixes op names, operands, results and attribute names so that
// other tools can emit them in MLIR's generic form: inherent attributes as
// properties (<{...}>) or, equivalently, in the attribute dictionary.

// CHECK-LABEL: func @generic
func.func @generic(%e: i1, %i: index) -> (index, i1) {
  // CHECK: kvpipe.create : !kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>
  // GENERIC: "kvpipe.create"() : () -> !kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>
  %p = "kvpipe.create"() : () -> !kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>
  // GENERIC: "kvpipe.init"(%{{.*}})
  "kvpipe.init"(%p) : (!kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>) -> ()
  // CHECK: kvpipe.producer_mbar %{{.*}} stage 1
  // GENERIC: "kvpipe.producer_mbar"(%{{.*}}) <{qk_stage = 1 : i32}>
  %b = "kvpipe.producer_mbar"(%p) <{qk_stage = 1 : i32}> : (!kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>) -> !kvpipe.mbarrier
  // CHECK: kvpipe.consumer_mbar %{{.*}}[%{{.*}}] stage 0
  // GENERIC: "kvpipe.consumer_mbar"(%{{.*}}, %{{.*}}) <{qk_stage = 0 : i32}>
  %c = "kvpipe.consumer_mbar"(%p, %i) {qk_stage = 0 : i32} : (!kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>, index) -> !kvpipe.mbarrier
  // CHECK: kvpipe.producer_acquire %{{.*}} stage 0
  // GENERIC: "kvpipe.producer_acquire"(%{{.*}}) <{qk_stage = 0 : i32}>
  "kvpipe.producer_acquire"(%p) {qk_stage = 0 : i32} : (!kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>) -> ()
  // CHECK: kvpipe.producer_commit %{{.*}} :
  // GENERIC: "kvpipe.producer_commit"(%{{.*}}) :
  "kvpipe.producer_commit"(%p) : (!kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>) -> ()
  // CHECK: kvpipe.consumer_wait %{{.*}} stage 1
  "kvpipe.consumer_wait"(%p) <{qk_stage = 1 : i32}> : (!kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>) -> ()
  // CHECK: kvpipe.consumer_release %{{.*}}, %{{.*}} stage 1
  // GENERIC: "kvpipe.consumer_release"(%{{.*}}, %{{.*}}) <{qk_stage = 1 : i32}>
  %r = "kvpipe.consumer_release"(%p, %e) <{qk_stage = 1 : i32}> : (!kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>, i1) -> !kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>
  // CHECK: kvpipe.step
  // GENERIC: "kvpipe.step"
  %s = "kvpipe.step"(%r) : (!kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>) -> !kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>
  // GENERIC: "kvpipe.index"({{.*}}) -> index
  %x = "kvpipe.index"(%s) : (!kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>) -> index
  // GENERIC: "kvpipe.phase"({{.*}}) -> i1
  %y = "kvpipe.phase"(%s) : (!kvpipe.pipeline<kv_stages = 4, qk_stages = 2, producers = 1, consumers = 256>) -> i1
  return %x, %y : index, i1
}
