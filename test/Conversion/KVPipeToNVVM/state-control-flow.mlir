// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file | FileCheck %s

// A pipeline state is a value: the type conversion carries it as
// !llvm.struct<(ptr<3>, i32, i32)> through function signatures, calls and
// returns, scf.for iter_args, scf.if and scf.while results, and cf block
// arguments; mbarriers become !llvm.ptr<3>.

!p = !kvpipe.pipeline<kv_stages = 3, qk_stages = 1, producers = 1, consumers = 2>

// CHECK-LABEL: func.func private @external(!llvm.struct<(ptr<3>, i32, i32)>, !llvm.ptr<3>) -> !llvm.struct<(ptr<3>, i32, i32)>
func.func private @external(!p, !kvpipe.mbarrier) -> !p

// CHECK-LABEL: func.func @callee
//  CHECK-SAME: (%[[P:.*]]: !llvm.struct<(ptr<3>, i32, i32)>) -> !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:   %[[B:.*]] = llvm.getelementptr
//       CHECK:   %[[R:.*]] = call @external(%[[P]], %[[B]]) : (!llvm.struct<(ptr<3>, i32, i32)>, !llvm.ptr<3>) -> !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:   return %[[R]] : !llvm.struct<(ptr<3>, i32, i32)>
func.func @callee(%p: !p) -> !p {
  %b = kvpipe.producer_mbar %p : !p
  %r = func.call @external(%p, %b) : (!p, !kvpipe.mbarrier) -> !p
  return %r : !p
}

// CHECK-LABEL: func.func @loops
//  CHECK-SAME: (%[[C:.*]]: i1, %[[N:.*]]: index, %[[E:.*]]: i1) -> !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:   %[[INIT:.*]] = llvm.insertvalue %{{.*}}[2] : !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:   %[[FOR:.*]] = scf.for %{{.*}} = %{{.*}} to %[[N]] step %{{.*}} iter_args(%[[S:.*]] = %[[INIT]]) -> (!llvm.struct<(ptr<3>, i32, i32)>) {
//       CHECK:     nvvm.mbarrier.try_wait.parity
//       CHECK:     %[[NEXT:.*]] = llvm.insertvalue %{{.*}}[2] : !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:     %[[CALLED:.*]] = func.call @callee(%[[NEXT]]) : (!llvm.struct<(ptr<3>, i32, i32)>) -> !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:     scf.yield %[[CALLED]] : !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:   %[[IF:.*]] = scf.if %[[C]] -> (!llvm.struct<(ptr<3>, i32, i32)>) {
//       CHECK:     %[[STEPPED:.*]] = llvm.insertvalue %{{.*}}[2]
//       CHECK:     scf.yield %[[STEPPED]] : !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:   } else {
//       CHECK:     scf.yield %[[FOR]] : !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:   cf.cond_br %[[C]], ^[[BB1:.*]](%[[IF]] : !llvm.struct<(ptr<3>, i32, i32)>), ^[[BB2:.*]](%[[INIT]] : !llvm.struct<(ptr<3>, i32, i32)>)
//       CHECK: ^[[BB1]](%[[A:.*]]: !llvm.struct<(ptr<3>, i32, i32)>):
//       CHECK:   return %[[A]] : !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK: ^[[BB2]](%[[B:.*]]: !llvm.struct<(ptr<3>, i32, i32)>):
//       CHECK:   %[[W:.*]] = scf.while (%[[WA:.*]] = %[[B]]) : (!llvm.struct<(ptr<3>, i32, i32)>) -> !llvm.struct<(ptr<3>, i32, i32)> {
//       CHECK:     scf.condition(%[[C]]) %[[WA]] : !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:   } do {
//       CHECK:   ^bb0(%[[WB:.*]]: !llvm.struct<(ptr<3>, i32, i32)>):
//       CHECK:     llvm.extractvalue %[[WB]][1]
//       CHECK:     scf.yield %{{.*}} : !llvm.struct<(ptr<3>, i32, i32)>
//       CHECK:   return %[[W]] : !llvm.struct<(ptr<3>, i32, i32)>
//   CHECK-NOT:   !kvpipe
func.func @loops(%c: i1, %n: index, %e: i1) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.consumer_wait %s : !p
    %s1 = kvpipe.consumer_release %s, %e : !p
    %s2 = func.call @callee(%s1) : (!p) -> !p
    scf.yield %s2 : !p
  }
  %x = scf.if %c -> !p {
    %y = kvpipe.step %r : !p
    scf.yield %y : !p
  } else {
    scf.yield %r : !p
  }
  cf.cond_br %c, ^a(%x : !p), ^b(%p : !p)
^a(%a: !p):
  return %a : !p
^b(%b: !p):
  %w = scf.while (%s = %b) : (!p) -> !p {
    scf.condition(%c) %s : !p
  } do {
  ^bb0(%s: !p):
    %t = kvpipe.step %s : !p
    scf.yield %t : !p
  }
  return %w : !p
}

// -----

// Device functions in a gpu.module: gpu.func arguments and gpu.return.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

// CHECK-LABEL: gpu.func @device_step
//  CHECK-SAME: (%[[P:.*]]: !llvm.struct<(ptr<3>, i32, i32)>, %[[B:.*]]: !llvm.ptr<3>) -> (!llvm.struct<(ptr<3>, i32, i32)>, !llvm.ptr<3>)
//       CHECK:   gpu.return %{{.*}}, %[[B]] : !llvm.struct<(ptr<3>, i32, i32)>, !llvm.ptr<3>
gpu.module @device {
  gpu.func @device_step(%p: !p, %b: !kvpipe.mbarrier) -> (!p, !kvpipe.mbarrier) {
    %q = kvpipe.step %p : !p
    gpu.return %q, %b : !p, !kvpipe.mbarrier
  }
}
