// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-persistent-tiles | FileCheck %s
// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-persistent-tiles --kvpipe-verify-protocol -o /dev/null

// --kvpipe-persistent-tiles: every kvpipe.for_each_tile becomes a loop over
// the tiles its CTA takes (round r: tile r * gridDim.x + blockIdx.x,
// mirrored in odd rounds, while that tile exists), the tile's coordinates
// (x fastest) and the values computed from them are computed per
// iteration; a bulk store waited for right after its commit is waited for
// before the next tile's first write of its staging rows, and once after
// the loop; staging rows that a TMA load also fills get a buffer of their
// own after the other shared-memory views. (A tile's value used outside its
// work, or computed with side effects, is rejected by kvpipe.tile's
// verifier: test/Dialect/KVPipe/invalid-kernel-ops.mlir.) With a
// schedule, the rounds' tiles come from the host's table (@scheduled).

!pq = !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
!qmap = !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = bf16, swizzle = 128>
!omap = !kvpipe.tensor_map<box = [1, 1, 64, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!qtile = memref<2x128x64xbf16, #smem>
!rows = memref<2x64x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
!qbox = memref<128x64xbf16, strided<[64, 1]>, #smem>
!obox = memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>

// CHECK-LABEL: func.func @tiles(
//  CHECK-SAME:   %{{[^:]*}}: !kvpipe.tensor_map<{{[^>]*}}>, %{{[^:]*}}: !kvpipe.tensor_map<{{[^>]*}}>, %[[PQ:[^:]*]]: !kvpipe.pipeline<{{[^>]*}}>,
//  CHECK-SAME:   %[[PAD:[^:]*]]: index, %[[NQ:[^:]*]]: index, %[[HEADS:[^:]*]]: index, %[[BATCH:[^:]*]]: index,
func.func @tiles(%qmap: !qmap, %omap: !omap, %pq: !pq, %pad: index,
                 %nq: index, %heads: index, %batch: index,
                 %o: vector<64xbf16>) {
  %c0 = arith.constant 0 : index
  %smem = gpu.dynamic_shared_memory : memref<?xi8, #smem>
  // Q's tile at 0 (32 KiB), a K ring after it (64 KiB): the output's own
  // rows go at 96 KiB.
  //      CHECK: %[[SMEM:.*]] = gpu.dynamic_shared_memory
  //      CHECK: %[[QVIEW:.*]] = memref.view %[[SMEM]]
  //      CHECK: memref.view %[[SMEM]]{{.*}} to memref<2x2x128x64xbf16
  // CHECK-NEXT: %[[OFFSET:.*]] = arith.constant 98304 : index
  // CHECK-NEXT: %[[SHIFT:.*]] = arith.addi %[[PAD]], %[[OFFSET]] : index
  // CHECK-NEXT: %[[OVIEW:.*]] = memref.view %[[SMEM]][%[[SHIFT]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2x128x64xbf16, #gpu.address_space<workgroup>>
  %s0 = arith.addi %pad, %c0 : index
  %q = memref.view %smem[%s0][] : memref<?xi8, #smem> to !qtile
  %c32768 = arith.constant 32768 : index
  %s1 = arith.addi %pad, %c32768 : index
  %k = memref.view %smem[%s1][] : memref<?xi8, #smem> to memref<2x2x128x64xbf16, #smem>
  // The tile count replaces the tile; its region moves into each loop.
  //      CHECK: %[[XY:.*]] = arith.muli %[[NQ]], %[[HEADS]] : index
  // CHECK-NEXT: %[[NTILES:.*]] = arith.muli %[[XY]], %[[BATCH]] : index
  //  CHECK-NOT: kvpipe.tile 
  //      CHECK: kvpipe.warp_roles
  %row, %head, %b = kvpipe.tile in(%nq, %heads, %batch) {
  ^bb0(%qb: index, %h: index, %bi: index):
    %c128 = arith.constant 128 : index
    %r = arith.muli %qb, %c128 : index
    kvpipe.yield %r, %h, %bi : index, index, index
  } -> index, index, index
  kvpipe.warp_roles producer registers(24) {
    // One thread of the producer warpgroup issues the loads and commits.
    %tid = gpu.thread_id x
    %leader = arith.cmpi eq, %tid, %c0 : index
    scf.if %leader {
      // The producer's loop.
      //      CHECK: %[[CTAS:.*]] = gpu.grid_dim x
      // CHECK-NEXT: %[[CTA:.*]] = gpu.block_id x
      //      CHECK: scf.while (%[[ROUND:.*]] = %{{.*}}, %{{.*}} = %[[PQ]]) : (index, !kvpipe.pipeline<{{.*}}>) -> (index, index, !kvpipe.pipeline<{{.*}}>)
      //      CHECK:   %[[ODD:.*]] = arith.cmpi ne
      //      CHECK:   %[[MIRROR:.*]] = arith.subi %{{.*}}, %[[CTA]] : index
      // CHECK-NEXT:   %[[POS:.*]] = arith.select %[[ODD]], %[[MIRROR]], %[[CTA]] : index
      // CHECK-NEXT:   %[[BASE:.*]] = arith.muli %[[ROUND]], %[[CTAS]] : index
      // CHECK-NEXT:   %[[TILE:.*]] = arith.addi %[[BASE]], %[[POS]] : index
      // CHECK-NEXT:   %[[EXISTS:.*]] = arith.cmpi ult, %[[TILE]], %[[NTILES]] : index
      // CHECK-NEXT:   scf.condition(%[[EXISTS]]) %[[ROUND]], %[[TILE]]
      //      CHECK: } do {
      // CHECK-NEXT: ^bb0(%[[R:.*]]: index, %[[T:.*]]: index, %[[S:.*]]: !kvpipe.pipeline<{{.*}}>):
      // CHECK-NEXT:   %[[ONE:.*]] = arith.constant 1 : index
      // CHECK-NEXT:   %[[NEXTROUND:.*]] = arith.addi %[[R]], %[[ONE]] : index
      // CHECK-NEXT:   %[[YZ:.*]] = arith.divui %[[T]], %[[NQ]] : index
      // CHECK-NEXT:   %[[Z:.*]] = arith.divui %[[YZ]], %[[HEADS]] : index
      // CHECK-NEXT:   %[[Y:.*]] = arith.remui %[[YZ]], %[[HEADS]] : index
      // CHECK-NEXT:   %[[X:.*]] = arith.remui %[[T]], %[[NQ]] : index
      // CHECK-NEXT:   %[[C128:.*]] = arith.constant 128 : index
      // CHECK-NEXT:   %[[ROW:.*]] = arith.muli %[[X]], %[[C128]] : index
      // CHECK-NEXT:   kvpipe.producer_acquire %[[S]]
      //      CHECK:   kvpipe.tma_load %{{.*}}[%[[Z]], %[[Y]], %[[ROW]], %{{.*}}]
      //      CHECK:   %[[NEXT:.*]] = kvpipe.step %[[S]]
      // CHECK-NEXT:   scf.yield %[[NEXTROUND]], %[[NEXT]] : index, !kvpipe.pipeline
      //      CHECK: }
      %done = kvpipe.for_each_tile iter_args(%pq : !pq) {
      ^bb0(%s: !pq):
        kvpipe.producer_acquire %s : !pq
        %bar = kvpipe.producer_mbar %s : !pq
        %dst = memref.subview %q[0, 0, 0] [1, 128, 64] [1, 1, 1] : !qtile to !qbox
        kvpipe.tma_load %qmap[%b, %head, %row, %c0], %dst, %bar : !qmap, !qbox
        kvpipe.producer_commit %s : !pq
        %next = kvpipe.step %s : !pq
        kvpipe.yield %next : !pq
      } -> !pq
    }
  } consumers(1) registers(240) {
  ^bb0(%c: index):
    // The staging rows move off Q's tile, which the next tile's load fills;
    // Q's rows stay Q's for the GEMM.
    //      CHECK: %[[ELECTED:.*]] = arith.cmpi eq
    //      CHECK: %[[QROWS:.*]] = memref.subview %[[QVIEW]][0, %{{.*}}, 0] [2, 64, 64]
    // CHECK-NEXT: %[[OROWS:.*]] = memref.subview %[[OVIEW]][0, %{{.*}}, 0] [2, 64, 64]
    //      CHECK: scf.while
    //      CHECK: } do {
    //      CHECK:   kvpipe.warpgroup_mma %[[QROWS]]
    // The previous tile's store must have read the rows before they are
    // written again: its thread waits, the others wait for it at the
    // epilogue's barrier.
    //      CHECK:   %[[ID:.*]] = arith.constant 1 : i32
    // CHECK-NEXT:   scf.if %[[ELECTED]] {
    // CHECK-NEXT:     nvvm.cp.async.bulk.wait_group 0 {read}
    // CHECK-NEXT:   }
    // CHECK-NEXT:   %[[N128:.*]] = arith.constant 128 : i32
    // CHECK-NEXT:   nvvm.barrier id = %[[ID]] number_of_threads = %[[N128]]
    // CHECK-NEXT:   kvpipe.store_fragment %{{.*}}, %[[OROWS]]
    // CHECK-NEXT:   nvvm.fence.proxy
    //      CHECK:   nvvm.barrier id = %[[ID]]
    // CHECK-NEXT:   scf.if %[[ELECTED]] {
    // CHECK-NEXT:     memref.subview %[[OROWS]][0, 0, 0] [1, 64, 64]
    // CHECK-NEXT:     kvpipe.tma_store
    // CHECK-NEXT:     nvvm.cp.async.bulk.commit.group
    // CHECK-NEXT:   }
    // CHECK-NEXT:   scf.yield
    // CHECK-NEXT: }
    // The last tile's store is waited for once, before the CTA exits.
    // CHECK-NEXT: scf.if %[[ELECTED]] {
    // CHECK-NEXT:   nvvm.cp.async.bulk.wait_group 0 {read}
    // CHECK-NEXT: }
    // One elected thread of the consumer warpgroup (thread 0 of the CTA is
    // in the producer's: tid == 0 would elect no consumer thread).
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %lane = arith.remui %tid, %c128 : index
    %elected = arith.cmpi eq, %lane, %c0 : index
    %c64 = arith.constant 64 : index
    %first = arith.muli %c, %c64 : index
    %rows = memref.subview %q[0, %first, 0] [2, 64, 64] [1, 1, 1] : !qtile to !rows
    %done = kvpipe.for_each_tile iter_args(%pq : !pq) {
    ^bb0(%s: !pq):
      kvpipe.consumer_wait %s : !pq
      %acc = kvpipe.warpgroup_mma %rows, %q : !rows, !qtile -> vector<64xf32>
      %accr = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
      %next = kvpipe.consumer_release %s, %elected : !pq
      %firstRow = arith.addi %row, %first : index
      %id = arith.constant 1 : i32
      kvpipe.store_fragment %o, %rows : vector<64xbf16>, !rows
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      %n128 = arith.constant 128 : i32
      nvvm.barrier id = %id number_of_threads = %n128
      scf.if %elected {
        %tile = memref.subview %rows[0, 0, 0] [1, 64, 64] [1, 1, 1] : !rows to !obox
        kvpipe.tma_store %tile, %omap[%b, %head, %firstRow, %c0] : !obox, !omap
        nvvm.cp.async.bulk.commit.group
        nvvm.cp.async.bulk.wait_group 0 {read}
      }
      kvpipe.yield %next : !pq
    } -> !pq
  }
  return
}

// -----

// Staging rows of their own (no TMA load fills them) stay; only the wait
// moves. A kernel with one role works the same.

!pq = !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
!omap = !kvpipe.tensor_map<box = [1, 1, 64, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!otile = memref<2x64x64xbf16, #smem>
!obox = memref<64x64xbf16, strided<[64, 1]>, #smem>

// CHECK-LABEL: func.func @own_rows(
//       CHECK:   %[[OVIEW:.*]] = memref.view
//   CHECK-NOT:   memref.view
//       CHECK:   scf.while
//       CHECK:     scf.if
//  CHECK-NEXT:       nvvm.cp.async.bulk.wait_group 0 {read}
//       CHECK:     nvvm.barrier id
//  CHECK-NEXT:     kvpipe.store_fragment %{{.*}}, %[[OVIEW]]
//       CHECK:     nvvm.cp.async.bulk.commit.group
//  CHECK-NEXT:   }
//  CHECK-NEXT:   scf.yield
//       CHECK:   scf.if
//  CHECK-NEXT:     nvvm.cp.async.bulk.wait_group 0 {read}
func.func @own_rows(%omap: !omap, %n: index, %o: vector<64xbf16>, %elected: i1,
                    %id: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %smem = gpu.dynamic_shared_memory : memref<?xi8, #smem>
  %rows = memref.view %smem[%c0][] : memref<?xi8, #smem> to !otile
  %x, %y, %z = kvpipe.tile in(%n, %c1, %c1) {
  ^bb0(%tx: index, %ty: index, %tz: index):
    kvpipe.yield %tx, %ty, %tz : index, index, index
  } -> index, index, index
  kvpipe.for_each_tile {
    kvpipe.store_fragment %o, %rows : vector<64xbf16>, !otile
    nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
    %n128 = arith.constant 128 : i32
    nvvm.barrier id = %id number_of_threads = %n128
    scf.if %elected {
      %tile = memref.subview %rows[0, 0, 0] [1, 64, 64] [1, 1, 1] : !otile to !obox
      kvpipe.tma_store %tile, %omap[%z, %y, %x, %c0] : !obox, !omap
      nvvm.cp.async.bulk.commit.group
      nvvm.cp.async.bulk.wait_group 0 {read}
    }
    kvpipe.yield
  }
  return
}

// -----

// With a schedule, round r's tile is the table's entry r * gridDim.x +
// blockIdx.x, loaded a round ahead (the first before the loop), and the loop
// runs while the entry is a tile (-1, the end of the CTA's column, is not).
// No snake: the host's table is the order.
!ps = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func private @scheduled_work(index)
// CHECK-LABEL: func.func @scheduled(
//  CHECK-SAME:   %[[N:[^:]*]]: index, %[[TABLE:[^:]*]]: !llvm.ptr<1>, %[[P:[^:]*]]: !kvpipe.pipeline
//       CHECK:   %[[XY:.*]] = arith.muli %[[N]], %[[N]] : index
//  CHECK-NEXT:   %[[NTILES:.*]] = arith.muli %[[XY]], %[[N]] : index
//       CHECK:   %[[CTAS:.*]] = gpu.grid_dim x
//  CHECK-NEXT:   %[[CTA:.*]] = gpu.block_id x
//  CHECK-NEXT:   %[[ZERO:.*]] = arith.constant 0 : index
//  CHECK-NEXT:   %[[B0:.*]] = arith.muli %[[ZERO]], %[[CTAS]] : index
//  CHECK-NEXT:   %[[E0:.*]] = arith.addi %[[B0]], %[[CTA]] : index
//  CHECK-NEXT:   %[[E0_64:.*]] = arith.index_cast %[[E0]] : index to i64
//  CHECK-NEXT:   %[[A0:.*]] = llvm.getelementptr %[[TABLE]][%[[E0_64]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
//  CHECK-NEXT:   %[[L0:.*]] = llvm.load %[[A0]] : !llvm.ptr<1> -> i32
//  CHECK-NEXT:   %[[FIRST:.*]] = arith.index_cast %[[L0]] : i32 to index
//  CHECK-NEXT:   %{{.*}}:3 = scf.while (%[[R0:.*]] = %[[ZERO]], %[[T0:.*]] = %[[FIRST]], %[[S0:.*]] = %[[P]]) : (index, index, !kvpipe.pipeline<{{.*}}>) -> (index, index, !kvpipe.pipeline<{{.*}}>) {
//  CHECK-NEXT:     %[[EXISTS:.*]] = arith.cmpi ult, %[[T0]], %[[NTILES]] : index
//  CHECK-NEXT:     scf.condition(%[[EXISTS]]) %[[R0]], %[[T0]], %[[S0]]
//  CHECK-NEXT:   } do {
//  CHECK-NEXT:   ^bb0(%[[R:[^:]*]]: index, %[[T:[^:]*]]: index, %[[S:[^:]*]]: !kvpipe.pipeline<{{.*}}>):
//  CHECK-NEXT:     %[[ONE:.*]] = arith.constant 1 : index
//  CHECK-NEXT:     %[[R1:.*]] = arith.addi %[[R]], %[[ONE]] : index
//  CHECK-NEXT:     %[[B1:.*]] = arith.muli %[[R1]], %[[CTAS]] : index
//  CHECK-NEXT:     %[[E1:.*]] = arith.addi %[[B1]], %[[CTA]] : index
//  CHECK-NEXT:     %[[E1_64:.*]] = arith.index_cast %[[E1]] : index to i64
//  CHECK-NEXT:     %[[A1:.*]] = llvm.getelementptr %[[TABLE]][%[[E1_64]]]
//  CHECK-NEXT:     %[[L1:.*]] = llvm.load %[[A1]] : !llvm.ptr<1> -> i32
//  CHECK-NEXT:     %[[NEXT:.*]] = arith.index_cast %[[L1]] : i32 to index
//  CHECK-NEXT:     %[[YZ:.*]] = arith.divui %[[T]], %[[N]] : index
//  CHECK-NEXT:     arith.divui %[[YZ]], %[[N]] : index
//  CHECK-NEXT:     arith.remui %[[YZ]], %[[N]] : index
//  CHECK-NEXT:     %[[X:.*]] = arith.remui %[[T]], %[[N]] : index
//  CHECK-NEXT:     func.call @scheduled_work(%[[X]])
//  CHECK-NEXT:     %[[STEP:.*]] = kvpipe.step %[[S]]
//  CHECK-NEXT:     scf.yield %[[R1]], %[[NEXT]], %[[STEP]]
func.func @scheduled(%n: index, %table: !llvm.ptr<1>, %p: !ps) -> !ps {
  %x = kvpipe.tile in(%n, %n, %n) schedule(%table) {
  ^bb0(%tx: index, %ty: index, %tz: index):
    kvpipe.yield %tx : index
  } -> index
  %done = kvpipe.for_each_tile iter_args(%p : !ps) {
  ^bb0(%s: !ps):
    func.call @scheduled_work(%x) : (index) -> ()
    %next = kvpipe.step %s : !ps
    kvpipe.yield %next : !ps
  } -> !ps
  return %done : !ps
}

// -----

func.func @no_tile_loop(%n: index) {
  // expected-error @+1 {{has no 'kvpipe.for_each_tile' to make persistent}}
  %x, %y, %z = kvpipe.tile in(%n, %n, %n) {
  ^bb0(%tx: index, %ty: index, %tz: index):
    kvpipe.yield %tx, %ty, %tz : index, index, index
  } -> index, index, index
  return
}

// -----

!omap = !kvpipe.tensor_map<box = [1, 1, 64, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!otile = memref<2x64x64xbf16, #smem>
!obox = memref<64x64xbf16, strided<[64, 1]>, #smem>

func.func @store_wait_without_write(%omap: !omap, %n: index, %rows: !otile,
                                    %elected: i1) {
  %c0 = arith.constant 0 : index
  %x, %y, %z = kvpipe.tile in(%n, %n, %n) {
  ^bb0(%tx: index, %ty: index, %tz: index):
    kvpipe.yield %tx, %ty, %tz : index, index, index
  } -> index, index, index
  kvpipe.for_each_tile {
    scf.if %elected {
      %tile = memref.subview %rows[0, 0, 0] [1, 64, 64] [1, 1, 1] : !otile to !obox
      kvpipe.tma_store %tile, %omap[%z, %y, %x, %c0] : !obox, !omap
      nvvm.cp.async.bulk.commit.group
      // expected-error @+1 {{ends a bulk store the persistent loop cannot defer: the staged buffer must be written by kvpipe.store_fragment in the tile's region, followed by an nvvm.barrier}}
      nvvm.cp.async.bulk.wait_group 0 {read}
    }
    kvpipe.yield
  }
  return
}

// -----

!pq = !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
!qmap = !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = bf16, swizzle = 128>
!omap = !kvpipe.tensor_map<box = [1, 1, 64, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!qtile = memref<2x128x64xbf16, #smem>
!rows = memref<2x64x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
!qbox = memref<128x64xbf16, strided<[64, 1]>, #smem>
!obox = memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>

// Staging rows a TMA load fills must move, but the rewrite cannot tell where
// the kernel's shared memory ends: it says so and changes nothing.
func.func @staging_rows_unplaceable(%qmap: !qmap, %omap: !omap, %pq: !pq,
                                    %n: index, %shift: index,
                                    %o: vector<64xbf16>, %elected: i1,
                                    %id: i32) {
  %c0 = arith.constant 0 : index
  %smem = gpu.dynamic_shared_memory : memref<?xi8, #smem>
  // expected-error @+1 {{holds staging rows the persistent loop must move, but the views of its shared memory are not at one base plus constant offsets in one block}}
  %q = memref.view %smem[%shift][] : memref<?xi8, #smem> to !qtile
  %rows = memref.subview %q[0, %n, 0] [2, 64, 64] [1, 1, 1] : !qtile to !rows
  %x, %y, %z = kvpipe.tile in(%n, %n, %n) {
  ^bb0(%tx: index, %ty: index, %tz: index):
    kvpipe.yield %tx, %ty, %tz : index, index, index
  } -> index, index, index
  %done = kvpipe.for_each_tile iter_args(%pq : !pq) {
  ^bb0(%s: !pq):
    %bar = kvpipe.producer_mbar %s : !pq
    %dst = memref.subview %q[0, 0, 0] [1, 128, 64] [1, 1, 1] : !qtile to !qbox
    kvpipe.tma_load %qmap[%z, %y, %x, %c0], %dst, %bar : !qmap, !qbox
    kvpipe.store_fragment %o, %rows : vector<64xbf16>, !rows
    %n128 = arith.constant 128 : i32
    nvvm.barrier id = %id number_of_threads = %n128
    scf.if %elected {
      %tile = memref.subview %rows[0, 0, 0] [1, 64, 64] [1, 1, 1] : !rows to !obox
      kvpipe.tma_store %tile, %omap[%z, %y, %x, %c0] : !obox, !omap
      nvvm.cp.async.bulk.commit.group
      nvvm.cp.async.bulk.wait_group 0 {read}
    }
    kvpipe.yield %s : !pq
  } -> !pq
  return
}

// -----

!pq = !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
!qmap = !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = bf16, swizzle = 128>
!omap = !kvpipe.tensor_map<box = [1, 1, 64, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!qtile = memref<2x128x64xbf16, #smem>
!rows = memref<2x64x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
!qbox = memref<128x64xbf16, strided<[64, 1]>, #smem>
!obox = memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>

// The output's own rows go after every view (here Q's 32 KiB and a 4 KiB
// table): they must end within the shared memory the kernel's ABI
// declares (41 KiB with the alignment pad's 1 KiB slack), which Q's shape
// of rows (32 KiB) at 36 KiB, plus the slack, do not.
func.func @own_rows_past_declared(%qmap: !qmap, %omap: !omap, %pq: !pq,
                                  %n: index, %pad: index,
                                  %o: vector<64xbf16>, %elected: i1,
                                  %id: i32)
    attributes {kvpipe.attention_abi = {dynamic_shared_memory = 41984 : i64}} {
  %c0 = arith.constant 0 : index
  %smem = gpu.dynamic_shared_memory : memref<?xi8, #smem>
  %c32768 = arith.constant 32768 : index
  %s0 = arith.addi %pad, %c0 : index
  %s1 = arith.addi %pad, %c32768 : index
  %q = memref.view %smem[%s0][] : memref<?xi8, #smem> to !qtile
  %table = memref.view %smem[%s1][] : memref<?xi8, #smem> to memref<1x128x16xbf16, #smem>
  %rows = memref.subview %q[0, %n, 0] [2, 64, 64] [1, 1, 1] : !qtile to !rows
  %x, %y, %z = kvpipe.tile in(%n, %n, %n) {
  ^bb0(%tx: index, %ty: index, %tz: index):
    kvpipe.yield %tx, %ty, %tz : index, index, index
  } -> index, index, index
  %done = kvpipe.for_each_tile iter_args(%pq : !pq) {
  ^bb0(%s: !pq):
    %bar = kvpipe.producer_mbar %s : !pq
    %dst = memref.subview %q[0, 0, 0] [1, 128, 64] [1, 1, 1] : !qtile to !qbox
    kvpipe.tma_load %qmap[%z, %y, %x, %c0], %dst, %bar : !qmap, !qbox
    kvpipe.store_fragment %o, %rows : vector<64xbf16>, !rows
    %n128 = arith.constant 128 : i32
    nvvm.barrier id = %id number_of_threads = %n128
    scf.if %elected {
      %tile = memref.subview %rows[0, 0, 0] [1, 64, 64] [1, 1, 1] : !rows to !obox
      kvpipe.tma_store %tile, %omap[%z, %y, %x, %c0] : !obox, !omap
      nvvm.cp.async.bulk.commit.group
      // expected-error @+1 {{ends a bulk store the persistent loop cannot defer: the output's own staging rows end at byte 70656, past the kernel's 41984 bytes of dynamic shared memory}}
      nvvm.cp.async.bulk.wait_group 0 {read}
    }
    kvpipe.yield %s : !pq
  } -> !pq
  return
}
