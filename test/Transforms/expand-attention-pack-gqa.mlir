// Pack-GQA (decode, docs/serving.md): the G query heads of a K/V head share
// a tile. The tile is (packed Q block, K/V head, batch); a consumer
// warpgroup's rows are floor(64 / G) query positions times G heads (row
// s * G + g), gathered by TMA through a 5-D (B, H_kv, S, G, D) map whose box
// is (1, 1, floor(64 / G), G, W). The masks and the log-sum-exp use each
// row's query position and head; the rows from floor(64 / G) * G on are
// never stored.
// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // Qwen's group of 7: 9 positions x 7 heads = 63 rows per warpgroup.
  kvpipe.attention_kernel @pack7 {head_dim = 128 : i64, element_type = bf16, causal = true, pack_gqa = 7 : i64, mask_alignment = #kvpipe.mask_alignment<bottom_right>}
  // The decode kernel: packed and split, one warpgroup, per-batch lengths, a window.
  kvpipe.attention_kernel @decode {head_dim = 128 : i64, element_type = bf16, causal = false, pack_gqa = 4 : i64, split_kv = true, kv_lengths = true, sliding_window = true, consumer_warpgroups = 1 : i64}
  // Head dim 64 (three warpgroups), MQA-like group of 16, f16.
  kvpipe.attention_kernel @pack16 {head_dim = 64 : i64, element_type = f16, causal = false, pack_gqa = 16 : i64}
}

// CHECK-LABEL: gpu.func @pack7(
//  CHECK-SAME:   %{{[^:]*}}: !kvpipe.tensor_map<box = [1, 1, 9, 7, 64], element_type = bf16, swizzle = 128>
//  CHECK-SAME:   %[[OMAP:[^:]*]]: !kvpipe.tensor_map<box = [1, 1, 9, 7, 64], element_type = bf16, swizzle = 128>
//  CHECK-SAME:   %[[LSE:[^:]*]]: !llvm.ptr<1>, %[[SQ32:[^:]*]]: i32
//  CHECK-SAME:   pack_gqa = 7
//  CHECK-SAME:   q_map = {box = [1, 1, 9, 7, 64], swizzle = 128 : i64}
//  CHECK-SAME:   queries_per_tile = 18
// Q blocks of 18 query positions (two warpgroups of 9).
//       CHECK:   %[[SQ:.*]] = arith.index_cast %[[SQ32]] : i32 to index
//       CHECK:   arith.ceildivui %[[SQ]], %c18 : index
//       CHECK:   %[[Y:.*]] = gpu.block_id y
// The group's first query head is the K/V head (the tile's y) times 7.
//       CHECK:   %[[HEAD:.*]] = arith.muli %[[Y]], %c7 : index
// Each warpgroup's box: positions from block * 18 + w * 9, all 7 heads,
// into its 63 rows seen as 9 x 7.
//       CHECK:   memref.expand_shape %{{.*}} {{\[\[}}0, 1], [2]] output_shape [9, 7, 64] : memref<63x64xbf16, strided<[64, 1]>, #gpu.address_space<workgroup>> into memref<9x7x64xbf16, strided<[448, 64, 1]>, #gpu.address_space<workgroup>>
//       CHECK:   kvpipe.tma_load %{{.*}}[%{{.*}}, %[[Y]], %[[POS0:.*]], %c0, %c0]
//       CHECK:   kvpipe.tma_load %{{.*}}[%{{.*}}, %[[Y]], %[[POS0]], %c0, %c64]
//       CHECK:   %[[POS1:.*]] = arith.addi %[[POS0]], %c9 : index
//       CHECK:   kvpipe.tma_load %{{.*}}[%{{.*}}, %[[Y]], %[[POS1]], %c0, %c0]
// K and V: the tile's K/V head, once for the group.
//       CHECK:   kvpipe.tma_load %{{.*}}[%{{.*}}, %[[Y]], %{{.*}}, %c0]{{.*}}: !kvpipe.tensor_map<box = [1, 1, 128, 64]
// Consumer rows: local row r = 16 warp + lane / 4 (and r + 8) is position
// first + r / 7 of head first_head + r % 7, used below row 63.
//       CHECK:   %[[R0:.*]] = arith.addi %{{.*}}, %{{.*}} : index
//       CHECK:   %[[R1:.*]] = arith.addi %[[R0]], %c8 : index
//       CHECK:   %[[FIRST:.*]] = arith.addi %{{.*}}, %{{.*}} : index
//       CHECK:   %[[S0:.*]] = arith.divui %[[R0]], %c7 : index
//       CHECK:   %[[ROW0:.*]] = arith.addi %[[FIRST]], %[[S0]] : index
//       CHECK:   arith.divui %[[R1]], %c7 : index
//       CHECK:   %[[G0:.*]] = arith.remui %[[R0]], %c7 : index
//       CHECK:   %[[HEAD0:.*]] = arith.addi %[[HEAD]], %[[G0]] : index
//       CHECK:   %[[G1:.*]] = arith.remui %[[R1]], %c7 : index
//       CHECK:   %[[HEAD1:.*]] = arith.addi %[[HEAD]], %[[G1]] : index
//       CHECK:   %[[USED0:.*]] = arith.cmpi ult, %[[R0]], %c63 : index
//       CHECK:   %[[USED1:.*]] = arith.cmpi ult, %[[R1]], %c63 : index
// The bottom-right causal mask from the rows' query positions.
//       CHECK:   arith.addi %[[ROW0]], %{{.*}} : index
// The O store: the first 63 staged rows as a 9 x 7 box at (b, kv head,
// first position, 0).
//       CHECK:   memref.expand_shape %{{.*}} output_shape [9, 7, 64] : memref<63x64xbf16, strided<[64, 1], offset: ?>
//       CHECK:   kvpipe.tma_store %{{.*}}, %[[OMAP]][%{{.*}}, %[[Y]], %[[FIRST]], %c0, %c0]
//       CHECK:   kvpipe.tma_store %{{.*}}, %[[OMAP]][%{{.*}}, %[[Y]], %[[FIRST]], %c0, %c64]
// lse[b, head_h, s_h] per row half, only for used rows below seq_q.
//       CHECK:   arith.addi %{{.*}}, %[[HEAD0]] : index
//       CHECK:   arith.addi %{{.*}}, %[[HEAD1]] : index
//       CHECK:   %[[IN0:.*]] = arith.cmpi ult, %[[ROW0]], %[[SQ]] : index
//       CHECK:   arith.andi %[[IN0]], %[[USED0]] : i1
//       CHECK:   llvm.getelementptr %[[LSE]]
//       CHECK:   arith.andi %{{.*}}, %[[USED1]] : i1
//       CHECK:   gpu.return

// Packed and split: one 16 x 4 box per column block; the partial rows are
// (query, head) pairs like the log-sum-exp's, used rows only.
// CHECK-LABEL: gpu.func @decode(
//  CHECK-SAME:   !kvpipe.tensor_map<box = [1, 1, 16, 4, 64], element_type = bf16, swizzle = 128>
//  CHECK-SAME:   params = ["q_map", "k_map", "v_map", "seq_q",
//  CHECK-SAME:   queries_per_tile = 16
//       CHECK:   kvpipe.tma_load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %c0, %c0], %{{.*}} : !kvpipe.tensor_map<box = [1, 1, 16, 4, 64]
//       CHECK:   kvpipe.tma_load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %c0, %c64], %{{.*}} : !kvpipe.tensor_map<box = [1, 1, 16, 4, 64]
//   CHECK-NOT:   kvpipe.tma_load {{.*}}box = [1, 1, 16, 4, 64]
//       CHECK:   arith.cmpi ult, %{{.*}}, %c64 : index
//       CHECK:   llvm.store %{{.*}} : vector<2xf32>, !llvm.ptr<1>
//   CHECK-NOT:   kvpipe.tma_store
//       CHECK:   gpu.return
// CHECK-LABEL: gpu.func @decode_combine(

// Head dim 64: three warpgroups of 4 positions x 16 heads.
// CHECK-LABEL: gpu.func @pack16(
//  CHECK-SAME:   !kvpipe.tensor_map<box = [1, 1, 4, 16, 64], element_type = f16, swizzle = 128>
//  CHECK-SAME:   queries_per_tile = 12
//       CHECK:   output_shape [4, 16, 64] : memref<64x64xf16

// PTXAS-COUNT-4: 0 bytes spill stores, 0 bytes spill loads
