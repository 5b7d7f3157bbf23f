// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-pingpong-schedule --canonicalize --cse | FileCheck %s

// --kvpipe-pingpong-schedule: the consumer warpgroups issue their wgmma
// groups in turn. Consumer c waits at named barrier 4 + c (256 threads: its
// own 128 and the previous consumer's 128, which arrive) after the
// consumer_wait of a group's first slot, and arrives at the next consumer's
// barrier right after the group's last wgmma. Consumer 0 opens the cycle,
// before the consumers' first pipeline wait.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
#smem = #gpu.address_space<workgroup>
!q = memref<2x64x64xbf16, #smem>
!ring = memref<2x2x128x64xbf16, #smem>
!tile = memref<2x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// CHECK-LABEL: func.func @turns(
//   CHECK-DAG:   %[[N256:.*]] = arith.constant 256 : i32
//   CHECK-DAG:   %[[C4I32:.*]] = arith.constant 4 : i32
func.func @turns(%pk: !p, %pv: !p, %e: i1, %q: !q, %k: !ring, %v: !ring,
                 %n: index, %p16: vector<64xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  kvpipe.warp_roles producer registers(24) {
  } consumers(2) registers(240) {
  ^bb0(%consumer: index):
    // CHECK: ^bb0(%[[C:.*]]: index):
    // Without shared-memory views set up before the first pipeline wait,
    // the cycle opens right before that wait.
    // CHECK-NEXT: %[[FIRST:.*]] = arith.cmpi eq, %[[C]], %{{.*}} : index
    // CHECK-NEXT: scf.if %[[FIRST]] {
    // CHECK-NEXT:   nvvm.barrier.arrive id = %[[C4I32]] number_of_threads = %[[N256]]
    // CHECK-NEXT: }
    // A group of one wgmma: the turn is taken once the slot is full, and
    // passed on to consumer (c + 1) % 2 right after the wgmma is issued.
    //      CHECK: kvpipe.consumer_wait %{{.*}} : !kvpipe.pipeline
    // CHECK-NEXT: %[[OWN:.*]] = arith.addi %[[C]], %[[C4:.*]] : index
    // CHECK-NEXT: %[[OWN32:.*]] = arith.index_cast %[[OWN]] : index to i32
    // CHECK-NEXT: nvvm.barrier id = %[[OWN32]] number_of_threads = %[[N256]]
    // CHECK-NEXT: kvpipe.index
    // CHECK-NEXT: memref.subview
    // CHECK-NEXT: kvpipe.warpgroup_mma
    // CHECK-NEXT: %[[SUCC:.*]] = arith.addi %[[C]], %{{.*}} : index
    // CHECK-NEXT: %[[NEXT:.*]] = arith.remui %[[SUCC]], %{{.*}} : index
    // CHECK-NEXT: %[[NEXTB:.*]] = arith.addi %[[NEXT]], %[[C4]] : index
    // CHECK-NEXT: %[[NEXT32:.*]] = arith.index_cast %[[NEXTB]] : index to i32
    // CHECK-NEXT: nvvm.barrier.arrive id = %[[NEXT32]] number_of_threads = %[[N256]]
    // CHECK-NEXT: kvpipe.warpgroup_wait
    kvpipe.consumer_wait %pk : !p
    %slot = kvpipe.index %pk : !p
    %kt = memref.subview %k[%slot, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !tile
    %s = kvpipe.warpgroup_mma %q, %kt : !q, !tile -> vector<64xf32>
    %s1 = kvpipe.warpgroup_wait %s {pending = 0} : vector<64xf32>
    %k1 = kvpipe.consumer_release %pk, %e : !p
    // Two wgmmas without a retire between them are one group: one turn.
    //      CHECK: scf.for
    // CHECK-NEXT:   kvpipe.consumer_wait
    // CHECK-NEXT:   nvvm.barrier id = %[[OWN32]] number_of_threads = %[[N256]]
    // CHECK-NEXT:   kvpipe.index
    // CHECK-NEXT:   memref.subview
    // CHECK-NEXT:   kvpipe.warpgroup_mma
    // CHECK-NEXT:   kvpipe.consumer_wait
    // CHECK-NEXT:   kvpipe.index
    // CHECK-NEXT:   memref.subview
    // CHECK-NEXT:   kvpipe.warpgroup_mma {{.*}} {transpose_b}
    // CHECK-NEXT:   nvvm.barrier.arrive id = %[[NEXT32]] number_of_threads = %[[N256]]
    // CHECK-NEXT:   kvpipe.warpgroup_wait
    %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%sk = %k1, %sv = %pv) -> (!p, !p) {
      kvpipe.consumer_wait %sk : !p
      %ks = kvpipe.index %sk : !p
      %kj = memref.subview %k[%ks, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !tile
      %sj = kvpipe.warpgroup_mma %q, %kj : !q, !tile -> vector<64xf32>
      kvpipe.consumer_wait %sv : !p
      %vs = kvpipe.index %sv : !p
      %vj = memref.subview %v[%vs, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !tile
      %o = kvpipe.warpgroup_mma %p16, %vj {transpose_b} : vector<64xbf16>, !tile -> vector<64xf32>
      %w:2 = kvpipe.warpgroup_wait %sj, %o {pending = 0} : vector<64xf32>, vector<64xf32>
      %nk = kvpipe.consumer_release %sk, %e : !p
      %nv = kvpipe.consumer_release %sv, %e : !p
      scf.yield %nk, %nv : !p, !p
    }
    // A group with no slot wait before it: the turn is taken just before
    // its wgmma.
    //      CHECK: nvvm.barrier id = %[[OWN32]] number_of_threads = %[[N256]]
    // CHECK-NEXT: kvpipe.warpgroup_mma
    // CHECK-NEXT: nvvm.barrier.arrive id = %[[NEXT32]] number_of_threads = %[[N256]]
    // CHECK-NEXT: kvpipe.warpgroup_wait
    %again = kvpipe.warpgroup_mma %q, %kt : !q, !tile -> vector<64xf32>
    %done = kvpipe.warpgroup_wait %again {pending = 0} : vector<64xf32>
  }
  return
}

// -----

// One consumer warpgroup has nobody to take turns with.
func.func @alone() {
  // expected-error @+1 {{ping-pong needs 2 or more consumer warpgroups, got 1}}
  kvpipe.warp_roles producer registers(56) {
  } consumers(1) registers(240) {
  ^bb0(%c: index):
  }
  return
}

// -----

// kvpipe.turn_takers: only the first %active consumers issue wgmma groups
// after it (the others have no rows in the tile); the last of them passes
// the turn back to consumer 0, and the op is gone.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 3>
#smem = #gpu.address_space<workgroup>
!q = memref<2x64x64xbf16, #smem>
!ring = memref<2x2x128x64xbf16, #smem>
!tile = memref<2x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// CHECK-LABEL: func.func @turn_takers(
//  CHECK-SAME:   %{{[^:]*}}: !kvpipe.pipeline{{.*}}, %[[IDLE:[^:]*]]: i1, %[[ACTIVE:[^:]*]]: index,
func.func @turn_takers(%pk: !p, %e: i1, %idle: i1, %active: index, %q: !q, %k: !ring) {
  kvpipe.warp_roles producer registers(32) {
  } consumers(3) registers(160) {
  ^bb0(%consumer: index):
    // CHECK: ^bb0(%[[C:.*]]: index):
    // CHECK-NOT: kvpipe.turn_takers
    kvpipe.turn_takers %active
    // CHECK: scf.if %[[IDLE]]
    // CHECK-NOT: nvvm.barrier
    // CHECK: } else {
    // CHECK: kvpipe.warpgroup_mma
    // CHECK-NEXT: %[[SUCC:.*]] = arith.addi %[[C]], %{{.*}} : index
    // CHECK-NEXT: %[[LAST:.*]] = arith.cmpi eq, %[[SUCC]], %[[ACTIVE]] : index
    // CHECK-NEXT: %[[NEXT:.*]] = arith.select %[[LAST]], %{{.*}}, %[[SUCC]] : index
    // CHECK-NEXT: %[[NEXTB:.*]] = arith.addi %[[NEXT]], %{{.*}} : index
    // CHECK-NEXT: %[[NEXT32:.*]] = arith.index_cast %[[NEXTB]] : index to i32
    // CHECK-NEXT: nvvm.barrier.arrive id = %[[NEXT32]]
    // CHECK-NOT: kvpipe.turn_takers
    %k1 = scf.if %idle -> (!p) {
      kvpipe.consumer_wait %pk : !p
      %r = kvpipe.consumer_release %pk, %e : !p
      scf.yield %r : !p
    } else {
      kvpipe.consumer_wait %pk : !p
      %slot = kvpipe.index %pk : !p
      %kt = memref.subview %k[%slot, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !tile
      %s = kvpipe.warpgroup_mma %q, %kt : !q, !tile -> vector<64xf32>
      %s1 = kvpipe.warpgroup_wait %s {pending = 0} : vector<64xf32>
      %r = kvpipe.consumer_release %pk, %e : !p
      scf.yield %r : !p
    }
  }
  return
}
