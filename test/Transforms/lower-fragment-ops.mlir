// RUN: kvpipe-opt %s --kvpipe-lower-fragment-ops | FileCheck %s

// The online softmax's fragment ops on the wgmma accumulator layout
// (AccumulatorLayout.h): element i of a thread is in row half (i % 4) / 2,
// and a row is spread over the 4 lanes of a quad.

// Row half 1 of an 8-element fragment: elements 2, 3, 6, 7; the maximum over
// the thread's elements, then over the quad (shuffle-xor 1, then 2).
// CHECK-LABEL: func.func @row_max(
//  CHECK-SAME:   %[[S:.*]]: vector<8xf32>
//       CHECK:   %[[ROW:.*]] = vector.shuffle %[[S]], %[[S]] [2, 3, 6, 7] : vector<8xf32>, vector<8xf32>
//       CHECK:   %[[PART:.*]] = vector.reduction <maxnumf>, %[[ROW]] : vector<4xf32> into f32
//   CHECK-DAG:   %[[WIDTH:.*]] = arith.constant 32 : i32
//   CHECK-DAG:   %[[ONE:.*]] = arith.constant 1 : i32
//       CHECK:   %[[X1:.*]], %{{.*}} = gpu.shuffle  xor %[[PART]], %[[ONE]], %[[WIDTH]] : f32
//       CHECK:   %[[M1:.*]] = arith.maxnumf %[[PART]], %[[X1]] : f32
//       CHECK:   %[[TWO:.*]] = arith.constant 2 : i32
//       CHECK:   %[[X2:.*]], %{{.*}} = gpu.shuffle  xor %[[M1]], %[[TWO]], %[[WIDTH]] : f32
//       CHECK:   %[[M2:.*]] = arith.maxnumf %[[M1]], %[[X2]] : f32
//       CHECK:   return %[[M2]]
func.func @row_max(%s: vector<8xf32>) -> f32 {
  %m = kvpipe.fragment_row_max %s[1] : vector<8xf32>
  return %m : f32
}

// With an offset: the thread's part plus its offset, then the quad's lanes
// (a separable bias's key term differs by lane).
// CHECK-LABEL: func.func @row_max_plus(
//  CHECK-SAME:   %[[S:.*]]: vector<8xf32>, %[[OFF:.*]]: f32
//       CHECK:   %[[ROW:.*]] = vector.shuffle %[[S]], %[[S]] [2, 3, 6, 7] : vector<8xf32>, vector<8xf32>
//       CHECK:   %[[OWN:.*]] = vector.reduction <maxnumf>, %[[ROW]] : vector<4xf32> into f32
//       CHECK:   %[[SHIFTED:.*]] = arith.addf %[[OWN]], %[[OFF]] : f32
//       CHECK:   %[[X1:.*]], %{{.*}} = gpu.shuffle  xor %[[SHIFTED]]
//       CHECK:   %[[M1:.*]] = arith.maxnumf %[[SHIFTED]], %[[X1]] : f32
//       CHECK:   %[[X2:.*]], %{{.*}} = gpu.shuffle  xor %[[M1]]
//       CHECK:   %[[M2:.*]] = arith.maxnumf %[[M1]], %[[X2]] : f32
//       CHECK:   return %[[M2]]
func.func @row_max_plus(%s: vector<8xf32>, %offset: f32) -> f32 {
  %m = kvpipe.fragment_row_max %s[1] plus %offset : vector<8xf32>
  return %m : f32
}

// Row half 0: elements 0, 1, 4, 5; the thread's part only (no shuffles).
// CHECK-LABEL: func.func @row_sum(
//  CHECK-SAME:   %[[S:.*]]: vector<8xf32>
//       CHECK:   %[[ROW:.*]] = vector.shuffle %[[S]], %[[S]] [0, 1, 4, 5] : vector<8xf32>, vector<8xf32>
//       CHECK:   %[[SUM:.*]] = vector.reduction <add>, %[[ROW]] : vector<4xf32> into f32
//   CHECK-NOT:   gpu.shuffle
//       CHECK:   return %[[SUM]]
func.func @row_sum(%s: vector<8xf32>) -> f32 {
  %l = kvpipe.fragment_row_sum %s[0] : vector<8xf32>
  return %l : f32
}

// CHECK-LABEL: func.func @quad_sum(
//  CHECK-SAME:   %[[X:.*]]: f32
//       CHECK:   %[[X1:.*]], %{{.*}} = gpu.shuffle  xor %[[X]]
//       CHECK:   %[[S1:.*]] = arith.addf %[[X]], %[[X1]] : f32
//       CHECK:   %[[X2:.*]], %{{.*}} = gpu.shuffle  xor %[[S1]]
//       CHECK:   %[[S2:.*]] = arith.addf %[[S1]], %[[X2]] : f32
//       CHECK:   return %[[S2]]
func.func @quad_sum(%x: f32) -> f32 {
  %s = kvpipe.quad_sum %x : f32
  return %s : f32
}

// Each row half by its own factor: a constant mask selects factor1 for the
// elements of row half 1.
// CHECK-LABEL: func.func @rescale(
//  CHECK-SAME:   %[[O:.*]]: vector<8xf32>, %[[A0:.*]]: f32, %[[A1:.*]]: f32
//   CHECK-DAG:   %[[HALF1:.*]] = arith.constant dense<[false, false, true, true, false, false, true, true]> : vector<8xi1>
//   CHECK-DAG:   %[[B0:.*]] = vector.broadcast %[[A0]] : f32 to vector<8xf32>
//   CHECK-DAG:   %[[B1:.*]] = vector.broadcast %[[A1]] : f32 to vector<8xf32>
//       CHECK:   %[[F:.*]] = arith.select %[[HALF1]], %[[B1]], %[[B0]] : vector<8xi1>, vector<8xf32>
//       CHECK:   %[[R:.*]] = arith.mulf %[[O]], %[[F]] : vector<8xf32>
//       CHECK:   return %[[R]]
func.func @rescale(%o: vector<8xf32>, %a0: f32, %a1: f32) -> vector<8xf32> {
  %r = kvpipe.fragment_rescale %o, %a0, %a1 : vector<8xf32>
  return %r : vector<8xf32>
}

// skip_unit: the same product, computed only when some lane of the warp has
// a factor other than 1 (a warp-uniform branch on the vote).
// CHECK-LABEL: func.func @rescale_skip_unit(
//  CHECK-SAME:   %[[O:.*]]: vector<8xf32>, %[[A0:.*]]: f32, %[[A1:.*]]: f32
//   CHECK-DAG:   %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
//   CHECK-DAG:   %[[N0:.*]] = arith.cmpf une, %[[A0]], %[[ONE]] : f32
//   CHECK-DAG:   %[[N1:.*]] = arith.cmpf une, %[[A1]], %[[ONE]] : f32
//       CHECK:   %[[MINE:.*]] = arith.ori %[[N0]], %[[N1]] : i1
//       CHECK:   %[[FULL:.*]] = arith.constant -1 : i32
//       CHECK:   %[[ANY:.*]] = nvvm.vote.sync any %[[FULL]], %[[MINE]] -> i1
//       CHECK:   %[[R:.*]] = scf.if %[[ANY]] -> (vector<8xf32>) {
//       CHECK:     %[[M:.*]] = arith.mulf %[[O]], %{{.*}} : vector<8xf32>
//       CHECK:     scf.yield %[[M]]
//       CHECK:   } else {
//       CHECK:     scf.yield %[[O]]
//       CHECK:   return %[[R]]
func.func @rescale_skip_unit(%o: vector<8xf32>, %a0: f32, %a1: f32) -> vector<8xf32> {
  %r = kvpipe.fragment_rescale %o, %a0, %a1 {skip_unit} : vector<8xf32>
  return %r : vector<8xf32>
}

// late_retire: the wgmma wait that produced O (pending 0, used only here)
// moves into both arms of the branch, after the vote (ptxas issues a wait it
// finds before the vote at the start of the softmax), and the slot release
// between them after the branch: the slot is still released only after the
// wgmma reading it retired.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
// CHECK-LABEL: func.func @rescale_late_retire(
//  CHECK-SAME:   %[[O:[^:]*]]: vector<8xf32>, %{{[^:]*}}: f32, %{{[^:]*}}: f32, %[[V:[^:]*]]: !kvpipe.pipeline
//   CHECK-NOT:   kvpipe.warpgroup_wait
//       CHECK:   %[[ANY:.*]] = nvvm.vote.sync any
//       CHECK:   %[[R:.*]] = scf.if %[[ANY]] -> (vector<8xf32>) {
//       CHECK:     %[[W1:.*]] = kvpipe.warpgroup_wait %[[O]] {pending = 0 : i64} : vector<8xf32>
//       CHECK:     arith.mulf %[[W1]], %{{.*}} : vector<8xf32>
//       CHECK:   } else {
//       CHECK:     %[[W2:.*]] = kvpipe.warpgroup_wait %[[O]] {pending = 0 : i64} : vector<8xf32>
//       CHECK:     scf.yield %[[W2]]
//       CHECK:   }
//  CHECK-NEXT:   %[[NEXT:.*]] = kvpipe.consumer_release %[[V]]
//  CHECK-NEXT:   return %[[R]], %[[NEXT]]
func.func @rescale_late_retire(%o: vector<8xf32>, %a0: f32, %a1: f32, %v: !p, %e: i1) -> (vector<8xf32>, !p) {
  %w = kvpipe.warpgroup_wait %o {pending = 0} : vector<8xf32>
  %next = kvpipe.consumer_release %v, %e : !p
  %r = kvpipe.fragment_rescale %w, %a0, %a1 {skip_unit, late_retire} : vector<8xf32>
  return %r, %next : vector<8xf32>, !p
}

// late_retire where the wait retires more than this fragment (or keeps
// groups in flight): left where it is.
// CHECK-LABEL: func.func @rescale_late_retire_kept(
//       CHECK:   kvpipe.warpgroup_wait %{{.*}}, %{{.*}} {pending = 0 : i64}
//       CHECK:   nvvm.vote.sync any
//   CHECK-NOT:   kvpipe.warpgroup_wait
//       CHECK:   return
func.func @rescale_late_retire_kept(%o: vector<8xf32>, %s: vector<8xf32>, %a0: f32, %a1: f32) -> (vector<8xf32>, vector<8xf32>) {
  %w:2 = kvpipe.warpgroup_wait %o, %s {pending = 0} : vector<8xf32>, vector<8xf32>
  %r = kvpipe.fragment_rescale %w#0, %a0, %a1 {skip_unit, late_retire} : vector<8xf32>
  return %r, %w#1 : vector<8xf32>, vector<8xf32>
}

// exp2(x * c - m_row): one FMA per element with the negated row offsets; the
// exp2 approximate (afn: ex2.approx.ftz, test/Conversion/KVPipeToNVVM/approx-exp2.mlir).
// CHECK-LABEL: func.func @exp2(
//  CHECK-SAME:   %[[S:.*]]: vector<8xf32>, %[[C:.*]]: f32, %[[M0:.*]]: f32, %[[M1:.*]]: f32
//   CHECK-DAG:   %[[BC:.*]] = vector.broadcast %[[C]] : f32 to vector<8xf32>
//   CHECK-DAG:   %[[OFF:.*]] = arith.select %{{.*}} : vector<8xi1>, vector<8xf32>
//   CHECK-DAG:   %[[NEG:.*]] = arith.negf %[[OFF]] : vector<8xf32>
//       CHECK:   %[[FMA:.*]] = math.fma %[[S]], %[[BC]], %[[NEG]] : vector<8xf32>
//       CHECK:   %[[P:.*]] = math.exp2 %[[FMA]] fastmath<afn> : vector<8xf32>
//       CHECK:   return %[[P]]
func.func @exp2(%s: vector<8xf32>, %c: f32, %m0: f32, %m1: f32) -> vector<8xf32> {
  %p = kvpipe.fragment_exp2 %s, %c, %m0, %m1 : vector<8xf32>
  return %p : vector<8xf32>
}

// `emulated = 2`: elements 0, 1, 8, 9 (i mod 8 < 2) on the FMA pipe, the
// others on the SFU, then back in order. The polynomial: round by adding
// and subtracting 1.5 x 2^23, three FMAs, the rounded integer shifted into
// the exponent, 0 below -125. Its numbers: fragment-exp2-emulated-run.mlir.
// CHECK-LABEL: func.func @exp2_emulated(
//       CHECK:   %[[X:.*]] = math.fma
//       CHECK:   %[[SFU:.*]] = vector.shuffle %[[X]], %[[X]] [2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15] : vector<16xf32>, vector<16xf32>
//       CHECK:   %[[E:.*]] = math.exp2 %[[SFU]] fastmath<afn> : vector<12xf32>
//       CHECK:   %[[FMA:.*]] = vector.shuffle %[[X]], %[[X]] [0, 1, 8, 9] : vector<16xf32>, vector<16xf32>
//       CHECK:   %[[T:.*]] = arith.addf %[[FMA]], %[[MAGIC:.*]] : vector<4xf32>
//       CHECK:   %[[J:.*]] = arith.subf %[[T]], %[[MAGIC]] : vector<4xf32>
//       CHECK:   %[[F:.*]] = arith.subf %[[FMA]], %[[J]] : vector<4xf32>
//       CHECK:   math.fma %{{.*}}, %[[F]]
//       CHECK:   math.fma %{{.*}}, %[[F]]
//       CHECK:   %[[P:.*]] = math.fma %{{.*}}, %[[F]]
//       CHECK:   %[[TB:.*]] = arith.bitcast %[[T]] : vector<4xf32> to vector<4xi32>
//       CHECK:   %[[EXP:.*]] = arith.shli %[[TB]], %{{.*}} : vector<4xi32>
//       CHECK:   %[[PB:.*]] = arith.bitcast %[[P]] : vector<4xf32> to vector<4xi32>
//       CHECK:   %[[SUM:.*]] = arith.addi %[[PB]], %[[EXP]] : vector<4xi32>
//       CHECK:   %[[R:.*]] = arith.bitcast %[[SUM]] : vector<4xi32> to vector<4xf32>
//       CHECK:   %[[IN:.*]] = arith.cmpf oge, %[[FMA]], %{{.*}} : vector<4xf32>
//       CHECK:   %[[POLY:.*]] = arith.select %[[IN]], %[[R]], %{{.*}} : vector<4xi1>, vector<4xf32>
//       CHECK:   %[[OUT:.*]] = vector.shuffle %[[E]], %[[POLY]] [12, 13, 0, 1, 2, 3, 4, 5, 14, 15, 6, 7, 8, 9, 10, 11] : vector<12xf32>, vector<4xf32>
//       CHECK:   return %[[OUT]]
func.func @exp2_emulated(%s: vector<16xf32>, %c: f32, %m0: f32, %m1: f32) -> vector<16xf32> {
  %p = kvpipe.fragment_exp2 %s, %c, %m0, %m1 {emulated = 2 : i64} : vector<16xf32>
  return %p : vector<16xf32>
}

// All 8 of 8: the polynomial alone, no SFU exp2 and no shuffles.
// CHECK-LABEL: func.func @exp2_all_emulated(
//   CHECK-NOT:   math.exp2
//   CHECK-NOT:   vector.shuffle
//       CHECK:   arith.shli
//   CHECK-NOT:   math.exp2
//       CHECK:   return
func.func @exp2_all_emulated(%s: vector<8xf32>, %c: f32, %m0: f32, %m1: f32) -> vector<8xf32> {
  %p = kvpipe.fragment_exp2 %s, %c, %m0, %m1 {emulated = 8 : i64} : vector<8xf32>
  return %p : vector<8xf32>
}
