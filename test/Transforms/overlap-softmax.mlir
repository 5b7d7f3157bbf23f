// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-overlap-softmax | FileCheck %s
// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-overlap-softmax --kvpipe-verify-protocol -o /dev/null

// --kvpipe-overlap-softmax: FA3's intra-warpgroup overlap as a rewrite of a
// consumer's K/V loop. The skeleton's order per block j (S = Q K_j^T,
// retire, release K, softmax, O = rescale(O), O += P V_j, retire, release V)
// becomes: block 0's S and softmax peeled; the steady state issues S_j with
// O += P_{j-1} V_{j-1}, retires S_j first (pending 1), runs its softmax,
// retires O, releases V and rescales O; the last P V peeled.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
#smem = #gpu.address_space<workgroup>
!q = memref<2x64x64xbf16, #smem>
!ring = memref<2x2x128x64xbf16, #smem>
!tile = memref<2x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// CHECK-LABEL: func.func @kv_loop(
//  CHECK-SAME:   %[[PK:[^:]*]]: !kvpipe.pipeline<{{.*}}>, %[[PV:[^:]*]]: !kvpipe.pipeline<{{.*}}>,
func.func @kv_loop(%pk: !p, %pv: !p, %e: i1, %q: !q, %k: !ring, %v: !ring,
                   %n: index, %c: f32, %m: f32) {
  //      CHECK: %[[C0:.*]] = arith.constant 0 : index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant dense<0.0> : vector<64xf32>
  kvpipe.warp_roles producer registers(24) {
  } consumers(2) registers(240) {
  ^bb0(%consumer: index):
    // One elected thread per consumer warpgroup releases (consumers = 2).
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %t = arith.remui %tid, %c128 : index
    %el = arith.cmpi eq, %t, %c0 : index
    // The whole is guarded by n > 0 (else the inputs pass through).
    //      CHECK: %[[ANY:.*]] = arith.cmpi ugt, %{{.*}}, %[[C0]] : index
    //      CHECK: %[[R:.*]]:4 = scf.if %[[ANY]] -> (
    // Block 0: S_0, retired at once, and its softmax (j = 0).
    //      CHECK:   kvpipe.consumer_wait %[[PK]]
    //      CHECK:   %[[S0:.*]] = kvpipe.warpgroup_mma
    // CHECK-NEXT:   %[[S0R:.*]] = kvpipe.warpgroup_wait %[[S0]] {pending = 0 : i64}
    // CHECK-NEXT:   %[[K1:.*]] = kvpipe.consumer_release %[[PK]]
    // CHECK-NEXT:   arith.index_cast %[[C0]]
    // CHECK-NEXT:   kvpipe.fragment_row_max %[[S0R]][0]
    //      CHECK:   %[[P0:.*]] = arith.truncf
    // The steady state from block 1 carries P_{j-1} too.
    //      CHECK:   %[[FROM:.*]] = arith.addi %[[C0]], %{{.*}} : index
    //      CHECK:   %[[L:.*]]:5 = scf.for %[[J:.*]] = %[[FROM]] to %{{.*}} step %{{.*}} iter_args(%[[SK:.*]] = %[[K1]], %[[SV:.*]] = %[[PV]], %[[O:.*]] = %{{.*}}, %[[M:.*]] = %{{.*}}, %[[PP:.*]] = %[[P0]])
    //      CHECK:     kvpipe.consumer_wait %[[SK]]
    //      CHECK:     %[[SJ:.*]] = kvpipe.warpgroup_mma
    // CHECK-NEXT:     kvpipe.consumer_wait %[[SV]]
    //      CHECK:     %[[OJ:.*]] = kvpipe.warpgroup_mma %[[PP]], %{{.*}}, %[[O]] {transpose_b}
    // CHECK-NEXT:     %[[SJR:.*]] = kvpipe.warpgroup_wait %[[SJ]] {pending = 1 : i64}
    // CHECK-NEXT:     %[[NK:.*]] = kvpipe.consumer_release %[[SK]]
    // CHECK-NEXT:     arith.index_cast %[[J]]
    // CHECK-NEXT:     kvpipe.fragment_row_max %[[SJR]][0]
    //      CHECK:     %[[PJ:.*]] = arith.truncf
    //      CHECK:     %[[ALPHA:.*]] = arith.subf %[[M]]
    // CHECK-NEXT:     %[[OJR:.*]] = kvpipe.warpgroup_wait %[[OJ]] {pending = 0 : i64}
    // CHECK-NEXT:     %[[NV:.*]] = kvpipe.consumer_release %[[SV]]
    // CHECK-NEXT:     %[[OJS:.*]] = kvpipe.fragment_rescale %[[OJR]], %[[ALPHA]], %[[ALPHA]]
    // CHECK-NEXT:     scf.yield %[[NK]], %[[NV]], %[[OJS]], %{{.*}}, %[[PJ]]
    // The last P V.
    //      CHECK:   kvpipe.consumer_wait %[[L]]#1
    //      CHECK:   %[[OL:.*]] = kvpipe.warpgroup_mma %[[L]]#4, %{{.*}}, %[[L]]#2 {transpose_b}
    // CHECK-NEXT:   %[[OLR:.*]] = kvpipe.warpgroup_wait %[[OL]] {pending = 0 : i64}
    // CHECK-NEXT:   %[[VL:.*]] = kvpipe.consumer_release %[[L]]#1
    // CHECK-NEXT:   scf.yield %[[L]]#0, %[[VL]], %[[OLR]], %[[L]]#3
    // CHECK-NEXT: } else {
    // CHECK-NEXT:   scf.yield %[[PK]], %[[PV]], %{{.*}}, %{{.*}}
    // CHECK-NEXT: }
    %r:4 = scf.for %j = %c0 to %n step %c1
        iter_args(%sk = %pk, %sv = %pv, %o = %zero, %mi = %m)
        -> (!p, !p, vector<64xf32>, f32) {
      kvpipe.consumer_wait %sk : !p
      %ks = kvpipe.index %sk : !p
      %kt = memref.subview %k[%ks, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !tile
      %s = kvpipe.warpgroup_mma %q, %kt : !q, !tile -> vector<64xf32>
      %s1 = kvpipe.warpgroup_wait %s {pending = 0} : vector<64xf32>
      %nk = kvpipe.consumer_release %sk, %el : !p
      // The softmax: anything between K's release and O's rescale.
      %j32 = arith.index_cast %j : index to i32
      %mx = kvpipe.fragment_row_max %s1[0] : vector<64xf32>
      %mn = arith.maxnumf %mi, %mx : f32
      %pf = kvpipe.fragment_exp2 %s1, %c, %mn, %mn : vector<64xf32>
      %p16 = arith.truncf %pf : vector<64xf32> to vector<64xbf16>
      %alpha = arith.subf %mi, %mn : f32
      %o1 = kvpipe.fragment_rescale %o, %alpha, %alpha : vector<64xf32>
      kvpipe.consumer_wait %sv : !p
      %vs = kvpipe.index %sv : !p
      %vt = memref.subview %v[%vs, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !tile
      %o2 = kvpipe.warpgroup_mma %p16, %vt, %o1 {transpose_b} : vector<64xbf16>, !tile -> vector<64xf32>
      %o3 = kvpipe.warpgroup_wait %o2 {pending = 0} : vector<64xf32>
      %nv = kvpipe.consumer_release %sv, %el : !p
      scf.yield %nk, %nv, %o3, %mn : !p, !p, vector<64xf32>, f32
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
#smem = #gpu.address_space<workgroup>
!q = memref<2x64x64xbf16, #smem>
!ring = memref<2x2x128x64xbf16, #smem>
!tile = memref<2x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// A loop from block %first (a sliding window's first block): the peeled
// block is %first, the guard is n > first, the steady state starts at
// first + 1.
// CHECK-LABEL: func.func @kv_loop_from(
//  CHECK-SAME:   %[[FIRST:[^:]*]]: index, %[[N:[^:]*]]: index,
//       CHECK:   %[[ANY:.*]] = arith.cmpi ugt, %[[N]], %[[FIRST]] : index
//       CHECK:   scf.if %[[ANY]]
//       CHECK:     kvpipe.consumer_release
//  CHECK-NEXT:     arith.index_cast %[[FIRST]]
//       CHECK:     %[[FROM:.*]] = arith.addi %[[FIRST]], %{{.*}} : index
//       CHECK:     scf.for %{{.*}} = %[[FROM]] to %[[N]]
func.func @kv_loop_from(%first: index, %n: index, %pk: !p, %pv: !p, %e: i1, %q: !q,
      %k: !ring, %v: !ring, %c: f32, %m: f32) {
  %c1 = arith.constant 1 : index
  %zero = arith.constant dense<0.0> : vector<64xf32>
  kvpipe.warp_roles producer registers(24) {
  } consumers(2) registers(240) {
  ^bb0(%consumer: index):
    // One elected thread per consumer warpgroup releases (consumers = 2).
    %c0w = arith.constant 0 : index
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %t = arith.remui %tid, %c128 : index
    %el = arith.cmpi eq, %t, %c0w : index
    %r:4 = scf.for %j = %first to %n step %c1
        iter_args(%sk = %pk, %sv = %pv, %o = %zero, %mi = %m)
        -> (!p, !p, vector<64xf32>, f32) {
      kvpipe.consumer_wait %sk : !p
      %ks = kvpipe.index %sk : !p
      %kt = memref.subview %k[%ks, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !tile
      %s = kvpipe.warpgroup_mma %q, %kt : !q, !tile -> vector<64xf32>
      %s1 = kvpipe.warpgroup_wait %s {pending = 0} : vector<64xf32>
      %nk = kvpipe.consumer_release %sk, %el : !p
      %j32 = arith.index_cast %j : index to i32
      %mx = kvpipe.fragment_row_max %s1[0] : vector<64xf32>
      %mn = arith.maxnumf %mi, %mx : f32
      %pf = kvpipe.fragment_exp2 %s1, %c, %mn, %mn : vector<64xf32>
      %p16 = arith.truncf %pf : vector<64xf32> to vector<64xbf16>
      %alpha = arith.subf %mi, %mn : f32
      %o1 = kvpipe.fragment_rescale %o, %alpha, %alpha : vector<64xf32>
      kvpipe.consumer_wait %sv : !p
      %vs = kvpipe.index %sv : !p
      %vt = memref.subview %v[%vs, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !tile
      %o2 = kvpipe.warpgroup_mma %p16, %vt, %o1 {transpose_b} : vector<64xbf16>, !tile -> vector<64xf32>
      %o3 = kvpipe.warpgroup_wait %o2 {pending = 0} : vector<64xf32>
      %nv = kvpipe.consumer_release %sv, %el : !p
      scf.yield %nk, %nv, %o3, %mn : !p, !p, vector<64xf32>, f32
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// A consumer without a K/V loop of that shape: nothing to overlap.
func.func @no_loop(%pk: !p, %e: i1) {
  // expected-error @+1 {{has no consumer K/V loop whose softmax can be overlapped}}
  kvpipe.warp_roles producer registers(24) {
  } consumers(2) registers(240) {
  ^bb0(%consumer: index):
    kvpipe.consumer_wait %pk : !p
    %nk = kvpipe.consumer_release %pk, %e : !p
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
#smem = #gpu.address_space<workgroup>
!q = memref<2x64x64xbf16, #smem>
!ring = memref<2x2x128x64xbf16, #smem>
!tile = memref<2x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// S from an initial accumulator that the QK step computes from the block
// index (`bias_accumulator`'s bias): it moves with S, from the peeled
// block's index (the lower bound) and the steady state's.
// CHECK-LABEL: func.func @kv_loop_bias(
//       CHECK:   %[[C0:.*]] = arith.constant 0 : index
//       CHECK:   kvpipe.consumer_wait
//  CHECK-NEXT:   kvpipe.index
//  CHECK-NEXT:   memref.subview
//  CHECK-NEXT:   %[[B0I:.*]] = arith.index_cast %[[C0]] : index to i32
//  CHECK-NEXT:   %[[B0F:.*]] = arith.sitofp %[[B0I]]
//  CHECK-NEXT:   %[[B0:.*]] = vector.broadcast %[[B0F]]
//  CHECK-NEXT:   kvpipe.warpgroup_mma %{{.*}}, %{{.*}}, %[[B0]] :
//       CHECK:   scf.for %[[J:[^ ]*]] =
//       CHECK:     kvpipe.consumer_wait
//  CHECK-NEXT:     kvpipe.index
//  CHECK-NEXT:     memref.subview
//  CHECK-NEXT:     %[[BJI:.*]] = arith.index_cast %[[J]] : index to i32
//  CHECK-NEXT:     %[[BJF:.*]] = arith.sitofp %[[BJI]]
//  CHECK-NEXT:     %[[BJ:.*]] = vector.broadcast %[[BJF]]
//  CHECK-NEXT:     %[[SJ:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}}, %[[BJ]] :
//       CHECK:     kvpipe.warpgroup_wait %[[SJ]] {pending = 1 : i64}
func.func @kv_loop_bias(%pk: !p, %pv: !p, %e: i1, %q: !q, %k: !ring, %v: !ring,
                        %n: index, %c: f32, %m: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant dense<0.0> : vector<64xf32>
  kvpipe.warp_roles producer registers(24) {
  } consumers(2) registers(240) {
  ^bb0(%consumer: index):
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %t = arith.remui %tid, %c128 : index
    %el = arith.cmpi eq, %t, %c0 : index
    %r:4 = scf.for %j = %c0 to %n step %c1
        iter_args(%sk = %pk, %sv = %pv, %o = %zero, %mi = %m)
        -> (!p, !p, vector<64xf32>, f32) {
      kvpipe.consumer_wait %sk : !p
      %ks = kvpipe.index %sk : !p
      %kt = memref.subview %k[%ks, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !tile
      %ji = arith.index_cast %j : index to i32
      %jf = arith.sitofp %ji : i32 to f32
      %bias = vector.broadcast %jf : f32 to vector<64xf32>
      %s = kvpipe.warpgroup_mma %q, %kt, %bias : !q, !tile -> vector<64xf32>
      %s1 = kvpipe.warpgroup_wait %s {pending = 0} : vector<64xf32>
      %nk = kvpipe.consumer_release %sk, %el : !p
      %mx = kvpipe.fragment_row_max %s1[0] : vector<64xf32>
      %mn = arith.maxnumf %mi, %mx : f32
      %pf = kvpipe.fragment_exp2 %s1, %c, %mn, %mn : vector<64xf32>
      %p16 = arith.truncf %pf : vector<64xf32> to vector<64xbf16>
      %alpha = arith.subf %mi, %mn : f32
      %o1 = kvpipe.fragment_rescale %o, %alpha, %alpha : vector<64xf32>
      kvpipe.consumer_wait %sv : !p
      %vs = kvpipe.index %sv : !p
      %vt = memref.subview %v[%vs, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !tile
      %o2 = kvpipe.warpgroup_mma %p16, %vt, %o1 {transpose_b} : vector<64xbf16>, !tile -> vector<64xf32>
      %o3 = kvpipe.warpgroup_wait %o2 {pending = 0} : vector<64xf32>
      %nv = kvpipe.consumer_release %sv, %el : !p
      scf.yield %nk, %nv, %o3, %mn : !p, !p, vector<64xf32>, f32
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
#smem = #gpu.address_space<workgroup>
!q = memref<2x64x64xbf16, #smem>
!ring = memref<2x2x128x64xbf16, #smem>
!tile = memref<2x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
!offsets = memref<1x128x16xbf16, #smem>

// S accumulated by two wgmmas (`separable_bias_mma`'s key-term k-step, then
// Q K^T onto it): the QK step ends at the second, both move, and S's retire
// waits for the older groups only.
// CHECK-LABEL: func.func @kv_loop_two_mmas(
//       CHECK:   %[[T0:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 32 : i64}
//  CHECK-NEXT:   kvpipe.warpgroup_mma %{{.*}}, %{{.*}}, %[[T0]] :
//       CHECK:   scf.for
//       CHECK:     %[[TJ:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 32 : i64}
//  CHECK-NEXT:     %[[SJ:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}}, %[[TJ]] :
//       CHECK:     kvpipe.warpgroup_mma %{{.*}}, %{{.*}}, %{{.*}} {transpose_b}
//       CHECK:     kvpipe.warpgroup_wait %[[SJ]] {pending = 1 : i64}
func.func @kv_loop_two_mmas(%pk: !p, %pv: !p, %e: i1, %q: !q, %k: !ring, %v: !ring,
                            %n: index, %c: f32, %m: f32, %a: vector<8xbf16>,
                            %offsets: !offsets) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant dense<0.0> : vector<64xf32>
  kvpipe.warp_roles producer registers(24) {
  } consumers(2) registers(240) {
  ^bb0(%consumer: index):
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %t = arith.remui %tid, %c128 : index
    %el = arith.cmpi eq, %t, %c0 : index
    %r:4 = scf.for %j = %c0 to %n step %c1
        iter_args(%sk = %pk, %sv = %pv, %o = %zero, %mi = %m)
        -> (!p, !p, vector<64xf32>, f32) {
      kvpipe.consumer_wait %sk : !p
      %ks = kvpipe.index %sk : !p
      %kt = memref.subview %k[%ks, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !tile
      %keyterm = kvpipe.warpgroup_mma %a, %offsets {swizzle = 32} : vector<8xbf16>, !offsets -> vector<64xf32>
      %s = kvpipe.warpgroup_mma %q, %kt, %keyterm : !q, !tile -> vector<64xf32>
      %s1 = kvpipe.warpgroup_wait %s {pending = 0} : vector<64xf32>
      %nk = kvpipe.consumer_release %sk, %el : !p
      %mx = kvpipe.fragment_row_max %s1[0] : vector<64xf32>
      %mn = arith.maxnumf %mi, %mx : f32
      %pf = kvpipe.fragment_exp2 %s1, %c, %mn, %mn : vector<64xf32>
      %p16 = arith.truncf %pf : vector<64xf32> to vector<64xbf16>
      %alpha = arith.subf %mi, %mn : f32
      %o1 = kvpipe.fragment_rescale %o, %alpha, %alpha : vector<64xf32>
      kvpipe.consumer_wait %sv : !p
      %vs = kvpipe.index %sv : !p
      %vt = memref.subview %v[%vs, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !tile
      %o2 = kvpipe.warpgroup_mma %p16, %vt, %o1 {transpose_b} : vector<64xbf16>, !tile -> vector<64xf32>
      %o3 = kvpipe.warpgroup_wait %o2 {pending = 0} : vector<64xf32>
      %nv = kvpipe.consumer_release %sv, %el : !p
      scf.yield %nk, %nv, %o3, %mn : !p, !p, vector<64xf32>, f32
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
#smem = #gpu.address_space<workgroup>
!q = memref<2x64x64xbf16, #smem>
!ring = memref<2x2x128x64xbf16, #smem>
!tile = memref<2x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// An initial accumulator from outside the QK step (here the function's)
// would not move with it: no K/V loop the rewrite takes.
func.func @kv_loop_outer_acc(%pk: !p, %pv: !p, %e: i1, %q: !q, %k: !ring, %v: !ring,
                             %n: index, %c: f32, %m: f32, %init: vector<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant dense<0.0> : vector<64xf32>
  // expected-error @+1 {{has no consumer K/V loop whose softmax can be overlapped}}
  kvpipe.warp_roles producer registers(24) {
  } consumers(2) registers(240) {
  ^bb0(%consumer: index):
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %t = arith.remui %tid, %c128 : index
    %el = arith.cmpi eq, %t, %c0 : index
    %r:4 = scf.for %j = %c0 to %n step %c1
        iter_args(%sk = %pk, %sv = %pv, %o = %zero, %mi = %m)
        -> (!p, !p, vector<64xf32>, f32) {
      kvpipe.consumer_wait %sk : !p
      %ks = kvpipe.index %sk : !p
      %kt = memref.subview %k[%ks, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !tile
      %s = kvpipe.warpgroup_mma %q, %kt, %init : !q, !tile -> vector<64xf32>
      %s1 = kvpipe.warpgroup_wait %s {pending = 0} : vector<64xf32>
      %nk = kvpipe.consumer_release %sk, %el : !p
      %mx = kvpipe.fragment_row_max %s1[0] : vector<64xf32>
      %mn = arith.maxnumf %mi, %mx : f32
      %pf = kvpipe.fragment_exp2 %s1, %c, %mn, %mn : vector<64xf32>
      %p16 = arith.truncf %pf : vector<64xf32> to vector<64xbf16>
      %alpha = arith.subf %mi, %mn : f32
      %o1 = kvpipe.fragment_rescale %o, %alpha, %alpha : vector<64xf32>
      kvpipe.consumer_wait %sv : !p
      %vs = kvpipe.index %sv : !p
      %vt = memref.subview %v[%vs, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !tile
      %o2 = kvpipe.warpgroup_mma %p16, %vt, %o1 {transpose_b} : vector<64xbf16>, !tile -> vector<64xf32>
      %o3 = kvpipe.warpgroup_wait %o2 {pending = 0} : vector<64xf32>
      %nv = kvpipe.consumer_release %sv, %el : !p
      scf.yield %nk, %nv, %o3, %mn : !p, !p, vector<64xf32>, f32
    }
  }
  return
}
