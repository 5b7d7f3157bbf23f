// RUN: kvpipe-opt %s | kvpipe-opt | FileCheck %s
// RUN: kvpipe-opt %s -mlir-print-op-generic | kvpipe-opt | FileCheck %s

// Round trip of the kernel-structure ops (KVPipeKernelOps.td): the warp
// roles, the tile of work and the fragment-level steps of the online
// softmax.

// CHECK-LABEL: func.func @roles(
func.func @roles(%n: index) {
  //      CHECK: kvpipe.warp_roles producer registers(24) {
  // CHECK-NEXT:   gpu.thread_id x
  //      CHECK: } consumers(2) registers(240) {
  // CHECK-NEXT: ^bb0(%[[C:.*]]: index):
  // CHECK-NEXT:   arith.muli %[[C]], %{{.*}} : index
  // CHECK-NEXT: }
  kvpipe.warp_roles producer registers(24) {
    %t = gpu.thread_id x
  } consumers(2) registers(240) {
  ^bb0(%c: index):
    %rows = arith.muli %c, %n : index
  }
  return
}

// An empty role is allowed (a kernel may give the producer nothing to do).
// CHECK-LABEL: func.func @empty_producer(
func.func @empty_producer() {
  // CHECK: kvpipe.warp_roles producer registers(56) {
  // CHECK: } consumers(1) registers(240) {
  kvpipe.warp_roles producer registers(56) {
  } consumers(1) registers(240) {
  ^bb0(%c: index):
  }
  return
}

// The tile of work: its coordinates and each role's work for one tile.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
// CHECK-LABEL: func.func @tiles(
//  CHECK-SAME:   %[[N:[^:]*]]: index, %[[H:[^:]*]]: index, %[[B:[^:]*]]: index, %[[P:[^:]*]]: !kvpipe.pipeline
func.func @tiles(%n: index, %h: index, %b: index, %p: !p) -> !p {
  //      CHECK: %[[T:.*]]:2 = kvpipe.tile in(%[[N]], %[[H]], %[[B]]) {
  // CHECK-NEXT: ^bb0(%[[X:.*]]: index, %[[Y:.*]]: index, %{{.*}}: index):
  // CHECK-NEXT:   %[[ROW:.*]] = arith.muli %[[X]], %[[N]] : index
  // CHECK-NEXT:   kvpipe.yield %[[ROW]], %[[Y]] : index, index
  // CHECK-NEXT: } -> index, index
  //      CHECK: kvpipe.for_each_tile {
  // CHECK-NEXT:   arith.addi %[[T]]#0, %[[T]]#1 : index
  // CHECK-NEXT:   kvpipe.yield
  // CHECK-NEXT: }
  //      CHECK: %[[R:.*]] = kvpipe.for_each_tile iter_args(%[[P]] : !kvpipe.pipeline<{{.*}}>) {
  // CHECK-NEXT: ^bb0(%[[S:.*]]: !kvpipe.pipeline<{{.*}}>):
  // CHECK-NEXT:   %[[NEXT:.*]] = kvpipe.step %[[S]]
  // CHECK-NEXT:   kvpipe.yield %[[NEXT]] : !kvpipe.pipeline<{{.*}}>
  // CHECK-NEXT: } -> !kvpipe.pipeline<{{.*}}>
  %row, %head = kvpipe.tile in(%n, %h, %b) {
  ^bb0(%x: index, %y: index, %z: index):
    %r = arith.muli %x, %n : index
    kvpipe.yield %r, %y : index, index
  } -> index, index
  kvpipe.for_each_tile {
    %sum = arith.addi %row, %head : index
    kvpipe.yield
  }
  %r = kvpipe.for_each_tile iter_args(%p : !p) {
  ^bb0(%s: !p):
    %next = kvpipe.step %s : !p
    kvpipe.yield %next : !p
  } -> !p
  return %r : !p
}

// A tile with a schedule: the table a persistent loop takes its tiles from.
// CHECK-LABEL: func.func @scheduled_tiles(
//  CHECK-SAME:   %[[N:[^:]*]]: index, %[[TABLE:[^:]*]]: !llvm.ptr<1>
//       CHECK: kvpipe.tile in(%[[N]], %[[N]], %[[N]]) schedule(%[[TABLE]]) {
func.func @scheduled_tiles(%n: index, %table: !llvm.ptr<1>) {
  %row = kvpipe.tile in(%n, %n, %n) schedule(%table) {
  ^bb0(%x: index, %y: index, %z: index):
    kvpipe.yield %x : index
  } -> index
  kvpipe.for_each_tile {
    %sum = arith.addi %row, %row : index
    kvpipe.yield
  }
  return
}

// A tile that says whether it has work (its first value).
// CHECK-LABEL: func.func @tiles_with_work_flag(
//       CHECK: %{{.*}}:2 = kvpipe.tile in(%{{.*}}, %{{.*}}, %{{.*}}) has_work {
//       CHECK:   kvpipe.yield %{{.*}}, %{{.*}} : i1, index
//       CHECK: } -> i1, index
func.func @tiles_with_work_flag(%n: index) {
  %work, %row = kvpipe.tile in(%n, %n, %n) has_work {
  ^bb0(%x: index, %y: index, %z: index):
    %inside = arith.cmpi slt, %x, %n : index
    kvpipe.yield %inside, %x : i1, index
  } -> i1, index
  kvpipe.for_each_tile {
    %sum = arith.addi %row, %row : index
    kvpipe.yield
  }
  return
}

// CHECK-LABEL: func.func @softmax_step(
//  CHECK-SAME:   %[[S:.*]]: vector<64xf32>, %[[C:.*]]: f32, %[[M0:.*]]: f32, %[[M1:.*]]: f32
func.func @softmax_step(%s: vector<64xf32>, %c: f32, %m0: f32, %m1: f32)
    -> (f32, f32, vector<64xf32>, f32, f32, vector<64xf32>) {
  // CHECK: %[[MAX0:.*]] = kvpipe.fragment_row_max %[[S]][0] : vector<64xf32>
  // CHECK: %[[MAX1:.*]] = kvpipe.fragment_row_max %[[S]][1] : vector<64xf32>
  // CHECK: kvpipe.fragment_row_max %[[S]][1] plus %[[C]] : vector<64xf32>
  %max0 = kvpipe.fragment_row_max %s[0] : vector<64xf32>
  %max1 = kvpipe.fragment_row_max %s[1] : vector<64xf32>
  %shifted = kvpipe.fragment_row_max %s[1] plus %c : vector<64xf32>
  // CHECK: %[[P:.*]] = kvpipe.fragment_exp2 %[[S]], %[[C]], %[[M0]], %[[M1]] : vector<64xf32>
  %p = kvpipe.fragment_exp2 %s, %c, %m0, %m1 : vector<64xf32>
  // CHECK: kvpipe.fragment_row_sum %[[P]][0] : vector<64xf32>
  %sum0 = kvpipe.fragment_row_sum %p[0] : vector<64xf32>
  // CHECK: kvpipe.quad_sum %{{.*}} : f32
  %all0 = kvpipe.quad_sum %sum0 : f32
  // CHECK: kvpipe.fragment_rescale %[[P]], %[[M0]], %[[M1]] : vector<64xf32>
  %o = kvpipe.fragment_rescale %p, %m0, %m1 : vector<64xf32>
  return %max0, %max1, %p, %sum0, %all0, %o
      : f32, f32, vector<64xf32>, f32, f32, vector<64xf32>
}

// The fragment ops are pure: unused ones fold away under canonicalization
// (checked in kernel-ops-pure.mlir).
