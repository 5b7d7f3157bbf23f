// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=skeleton" | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

// `lpt_tiles`: the tile region renumbers the grid's linear position
// x + X (y + Y z) in LPT order before the tile's values are computed: the
// (batch, head) pairs grouped by how many pairs' K and V (seq_kv rows of
// (64 + 64) x 2 bytes, shared by the heads of one K/V head) fit in
// kL2TileGroupBytes = 24 MiB, the group's pairs fastest within a Q block;
// causal then takes Q block 0 of the order as the longest. The persistent
// loop (third kernel) walks the same order; the protocol checker proves all
// three (--kvpipe-to-ptx, strict). ptxas fits the one-tile kernels without
// spills; the persistent ones spill 80-84 bytes (the order's loop-invariant
// values live across the tile loop), which keeps them out of the prefill
// plan.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64 {head_dim = 64 : i64, element_type = bf16, causal = true, lpt_tiles = true}
  kvpipe.attention_kernel @d128_w3 {head_dim = 128 : i64, element_type = bf16, causal = true, consumer_warpgroups = 3 : i64, block_n = 80 : i64, lpt_tiles = true}
  kvpipe.attention_kernel @d128_persistent {head_dim = 128 : i64, element_type = bf16, causal = true, persistent = true, lpt_tiles = true}
}

// CHECK-LABEL: gpu.func @d64(
//       CHECK:   kvpipe.tile in
//  CHECK-NEXT:   ^bb0(%[[X:.*]]: index, %[[Y:.*]]: index, %[[Z:.*]]: index):
//       CHECK:     %[[YZ:.*]] = arith.muli %[[HEADS:.*]], %[[Z]] : index
//       CHECK:     %[[Y2:.*]] = arith.addi %[[Y]], %[[YZ]] : index
//       CHECK:     %[[XY:.*]] = arith.muli %[[BLOCKS:.*]], %[[Y2]] : index
//       CHECK:     %[[LINEAR:.*]] = arith.addi %[[X]], %[[XY]] : index
//       CHECK:     %[[PAIRS:.*]] = arith.muli %[[HEADS]], %{{.*}} : index
//       CHECK:     %[[BYTES:.*]] = arith.muli %{{.*}}, %c256 : index
//       CHECK:     %[[PAIR_BYTES:.*]] = arith.divui %[[BYTES]], %{{.*}} : index
//       CHECK:     %[[PB:.*]] = arith.maxui %[[PAIR_BYTES]], %c1{{.*}} : index
//       CHECK:     %[[G0:.*]] = arith.divui %c25165824, %[[PB]] : index
//       CHECK:     %[[G1:.*]] = arith.maxui %[[G0]], %c1{{.*}} : index
//       CHECK:     %[[GROUP:.*]] = arith.minui %[[G1]], %[[PAIRS]] : index
//       CHECK:     %[[PER_GROUP:.*]] = arith.muli %[[BLOCKS]], %[[GROUP]] : index
//       CHECK:     %[[GI:.*]] = arith.divui %[[LINEAR]], %[[PER_GROUP]] : index
//       CHECK:     %[[FIRST:.*]] = arith.muli %[[GI]], %[[GROUP]] : index
//       CHECK:     %[[LEFT:.*]] = arith.subi %[[PAIRS]], %[[FIRST]] : index
//       CHECK:     %[[SIZE:.*]] = arith.minui %[[GROUP]], %[[LEFT]] : index
//       CHECK:     %[[DONE:.*]] = arith.muli %[[GI]], %[[PER_GROUP]] : index
//       CHECK:     %[[REST:.*]] = arith.subi %[[LINEAR]], %[[DONE]] : index
//       CHECK:     %[[IN_GROUP:.*]] = arith.remui %[[REST]], %[[SIZE]] : index
//       CHECK:     %[[PAIR:.*]] = arith.addi %[[FIRST]], %[[IN_GROUP]] : index
//       CHECK:     %[[QBLOCK:.*]] = arith.divui %[[REST]], %[[SIZE]] : index
//       CHECK:     %[[HEAD:.*]] = arith.remui %[[PAIR]], %[[HEADS]] : index
//       CHECK:     %[[BATCH:.*]] = arith.divui %[[PAIR]], %[[HEADS]] : index
// Causal: the order's first Q block is the last (the longest).
//       CHECK:     arith.subi %{{.*}}, %[[QBLOCK]] : index

// CHECK-LABEL: gpu.func @d128_w3(
//       CHECK:   kvpipe.tile in
//       CHECK:     arith.divui %c25165824

// CHECK-LABEL: gpu.func @d128_persistent(
//       CHECK:   kvpipe.tile in
//       CHECK:     arith.divui %c25165824

// PTXAS: Compiling entry function 'd128_w3'
// PTXAS-NEXT: Function properties for d128_w3
// PTXAS-NEXT: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: Compiling entry function 'd64'
// PTXAS-NEXT: Function properties for d64
// PTXAS-NEXT: 0 bytes spill stores, 0 bytes spill loads
