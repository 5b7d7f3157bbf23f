// RUN: kvpipe-opt %s --kvpipe-lower-tiles | FileCheck %s

// One tile of work per CTA (the default): the grid is the tile space, so
// kvpipe.tile's region runs once, on blockIdx (z, y, x: the order the
// generator emitted them in before the tile was an op), and each
// kvpipe.for_each_tile region runs once, on its iter_args; the results of
// both are what their regions yield.
// Values computed only for the tile sizes (which bound the persistent
// loop, not this) are dropped. A tile without work skips the rest
// (@idle_tile).

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

func.func private @work(index, index, index, !p)
func.func private @after(!p)

// CHECK-LABEL: func.func @one_tile(
//  CHECK-SAME:   %[[NQ:[^:]*]]: index, %[[HEADS:[^:]*]]: index, %{{[^:]*}}: i32, %[[P:[^:]*]]: !kvpipe.pipeline
//  CHECK-NEXT:   %[[Z:.*]] = gpu.block_id z
//  CHECK-NEXT:   %[[Y:.*]] = gpu.block_id y
//  CHECK-NEXT:   %[[X:.*]] = gpu.block_id x
//  CHECK-NEXT:   %[[C128:.*]] = arith.constant 128 : index
//  CHECK-NEXT:   %[[ROW:.*]] = arith.muli %[[X]], %[[C128]] : index
//  CHECK-NEXT:   call @work(%[[ROW]], %[[Y]], %[[Z]], %[[P]])
//  CHECK-NEXT:   %[[NEXT:.*]] = kvpipe.step %[[P]]
//  CHECK-NEXT:   call @after(%[[NEXT]])
//  CHECK-NEXT:   return
func.func @one_tile(%nq: index, %heads: index, %batch32: i32, %p: !p) {
  %batch = arith.index_cast %batch32 : i32 to index
  %row, %y, %z = kvpipe.tile in(%nq, %heads, %batch) {
  ^bb0(%tx: index, %ty: index, %tz: index):
    %c128 = arith.constant 128 : index
    %r = arith.muli %tx, %c128 : index
    kvpipe.yield %r, %ty, %tz : index, index, index
  } -> index, index, index
  %done = kvpipe.for_each_tile iter_args(%p : !p) {
  ^bb0(%s: !p):
    func.call @work(%row, %y, %z, %s) : (index, index, index, !p) -> ()
    %next = kvpipe.step %s : !p
    kvpipe.yield %next : !p
  } -> !p
  func.call @after(%done) : (!p) -> ()
  return
}

// Inside warp roles, without iter_args.
// CHECK-LABEL: func.func @roles(
//       CHECK:   kvpipe.warp_roles
//  CHECK-NEXT:     func.call @work
//   CHECK-NOT:   kvpipe.for_each_tile
func.func @roles(%n: index, %p: !p) {
  %x, %y, %z = kvpipe.tile in(%n, %n, %n) {
  ^bb0(%tx: index, %ty: index, %tz: index):
    kvpipe.yield %tx, %ty, %tz : index, index, index
  } -> index, index, index
  kvpipe.warp_roles producer registers(24) {
    kvpipe.for_each_tile {
      func.call @work(%x, %y, %z, %p) : (index, index, index, !p) -> ()
      kvpipe.yield
    }
  } consumers(1) registers(240) {
  ^bb0(%c: index):
  }
  return
}

// A schedule orders a persistent loop's tiles; one tile per CTA, the grid is
// the tile space and the table is not read.
func.func private @use(index)
// CHECK-LABEL: func.func @one_scheduled_tile(
//  CHECK-NEXT:   gpu.block_id z
//  CHECK-NEXT:   gpu.block_id y
//  CHECK-NEXT:   %[[X:.*]] = gpu.block_id x
//  CHECK-NEXT:   call @use(%[[X]])
//  CHECK-NEXT:   return
func.func @one_scheduled_tile(%n: index, %table: !llvm.ptr<1>) {
  %x = kvpipe.tile in(%n, %n, %n) schedule(%table) {
  ^bb0(%tx: index, %ty: index, %tz: index):
    kvpipe.yield %tx : index
  } -> index
  kvpipe.for_each_tile {
    func.call @use(%x) : (index) -> ()
    kvpipe.yield
  }
  return
}

// A tile that can say it has no work (`has_work`: its first value) puts
// the kernel's work after it, barriers and all, under that flag: a CTA
// without work leaves at once. The tile's values are computed first.
func.func private @make() -> !p
// CHECK-LABEL: func.func @idle_tile(
//  CHECK-SAME:   %[[N:[^:]*]]: index, %[[LEN:[^:]*]]: index)
//  CHECK-NEXT:   gpu.block_id z
//  CHECK-NEXT:   gpu.block_id y
//  CHECK-NEXT:   %[[X:.*]] = gpu.block_id x
//  CHECK-NEXT:   %[[WORK:.*]] = arith.cmpi slt, %[[X]], %[[LEN]] : index
//  CHECK-NEXT:   scf.if %[[WORK]] {
//  CHECK-NEXT:     %[[P:.*]] = func.call @make()
//  CHECK-NEXT:     func.call @work(%[[X]], %[[X]], %[[X]], %[[P]])
//  CHECK-NEXT:     kvpipe.step %[[P]]
//  CHECK-NEXT:     func.call @after
//  CHECK-NEXT:   }
//  CHECK-NEXT:   return
func.func @idle_tile(%n: index, %len: index) {
  %work, %x = kvpipe.tile in(%n, %n, %n) has_work {
  ^bb0(%tx: index, %ty: index, %tz: index):
    %inside = arith.cmpi slt, %tx, %len : index
    kvpipe.yield %inside, %tx : i1, index
  } -> i1, index
  %p = func.call @make() : () -> !p
  %done = kvpipe.for_each_tile iter_args(%p : !p) {
  ^bb0(%s: !p):
    func.call @work(%x, %x, %x, %s) : (index, index, index, !p) -> ()
    %next = kvpipe.step %s : !p
    kvpipe.yield %next : !p
  } -> !p
  func.call @after(%done) : (!p) -> ()
  return
}

// Work whose values the function returns cannot go under the flag: the
// tile is lowered as without it.
// CHECK-LABEL: func.func @idle_tile_returning(
//   CHECK-NOT:   scf.if
//       CHECK:   return %{{.*}} : !kvpipe.pipeline
func.func @idle_tile_returning(%n: index, %p: !p) -> !p {
  %work, %x = kvpipe.tile in(%n, %n, %n) has_work {
  ^bb0(%tx: index, %ty: index, %tz: index):
    %inside = arith.cmpi slt, %tx, %n : index
    kvpipe.yield %inside, %tx : i1, index
  } -> i1, index
  %done = kvpipe.for_each_tile iter_args(%p : !p) {
  ^bb0(%s: !p):
    func.call @work(%x, %x, %x, %s) : (index, index, index, !p) -> ()
    %next = kvpipe.step %s : !p
    kvpipe.yield %next : !p
  } -> !p
  return %done : !p
}
