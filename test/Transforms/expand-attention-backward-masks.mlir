// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// The backward with the forward's other masks (docs/backward.md, "Masks"):
// a window aligned bottom-right and the bottom-right causal mask. Each K/V
// block's Q blocks are [first query of its first key / 64, ceil((last query
// of its last key + 1) / 64)), from the same bounds as the forward's block
// skipping (MaskBounds), shared by the producer's and the consumers' loops;
// S^T's rows (keys) are masked by the queries each key keeps, computed once
// per thread, on the tiles that cross a bound.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @window {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true, sliding_window = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>}
  kvpipe.attention_kernel @bottom_right {head_dim = 128 : i64, element_type = bf16, causal = true, backward = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>}
}

// The window's bounds are the main kernel's last parameters.
// CHECK-LABEL: gpu.func @window(
//  CHECK-SAME:   %[[SEQ_Q:[^:]*]]: i32, %[[SEQ_KV:[^:]*]]: i32, %{{[^:]*}}: i32, %{{[^:]*}}: f32, %{{[^:]*}}: f32, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %[[LEFT:[^:]*]]: i32, %[[RIGHT:[^:]*]]: i32) kernel
//  CHECK-SAME:   mask_alignment = "bottom_right"
//  CHECK-SAME:   params = ["q_map", "k_map", "v_map", "do_map", "dk_map", "dv_map", "lse_log2", "delta", "dq_accum", "seq_q", "seq_kv", "heads_per_kv_head", "scale_log2", "scale", "heads_q", "batch", "window_left", "window_right"]
//  CHECK-SAME:   sliding_window = true
//   CHECK-DAG:   %[[SQ:.*]] = arith.index_cast %[[SEQ_Q]] : i32 to index
//   CHECK-DAG:   %[[SKV:.*]] = arith.index_cast %[[SEQ_KV]] : i32 to index
//   CHECK-DAG:   %[[WL:.*]] = arith.index_cast %[[LEFT]] : i32 to index
//   CHECK-DAG:   %[[WR:.*]] = arith.index_cast %[[RIGHT]] : i32 to index
//       CHECK:   %[[D:.*]] = arith.subi %[[SKV]], %[[SQ]] : index
//       CHECK:   %[[KV0:.*]] = arith.muli %block_id_x, %c128 : index
//       CHECK:   %[[NQ:.*]] = arith.ceildivui %[[SQ]], %c64 : index
//       CHECK:   %[[LASTKEY:.*]] = arith.addi %[[KV0]], %c127 : index
// The first query of the first key: key - d - window_right (0 when unbounded).
//       CHECK:   %[[A:.*]] = arith.subi %[[KV0]], %[[D]] : index
//       CHECK:   %[[B:.*]] = arith.subi %[[A]], %[[WR]] : index
//       CHECK:   %[[RU:.*]] = arith.cmpi slt, %[[WR]], %c0 : index
//       CHECK:   %[[FIRSTQ:.*]] = arith.select %[[RU]], %c0, %{{.*}} : index
//       CHECK:   %[[QBEGIN:.*]] = arith.divui %[[FIRSTQ]], %c64 : index
// The last query of the last key: key - d + window_left.
//       CHECK:   %[[C:.*]] = arith.subi %[[LASTKEY]], %[[D]] : index
//       CHECK:   arith.addi %[[C]], %[[WL]] : index
//       CHECK:   %[[QEND0:.*]] = arith.minui %{{.*}}, %[[NQ]] : index
//       CHECK:   %[[QEND:.*]] = arith.maxui %[[QEND0]], %[[QBEGIN]] : index
//       CHECK:   kvpipe.warp_roles producer
//       CHECK:     scf.for %{{.*}} = %[[QBEGIN]] to %[[QEND]] step %c1
//       CHECK:   consumers(2)
//       CHECK:     scf.for %[[I:.*]] = %[[QBEGIN]] to %[[QEND]] step %c1
//       CHECK:       %[[QROW:.*]] = arith.muli %[[I]], %c64 : index
//       CHECK:       %[[ST:.*]] = kvpipe.warpgroup_wait %{{.*}} {pending = 1 : i64}
// The uniform test: the tile starts before the highest first query of its
// keys, or ends after the lowest last query.
//       CHECK:       arith.cmpi slt, %[[QROW]], %{{.*}} : index
//       CHECK:       arith.cmpi sgt, %{{.*}}, %{{.*}} : index
//       CHECK:       scf.if %{{.*}} -> (vector<32xf32>) {
//       CHECK:         arith.cmpi sge, %[[QUERIES:.*]], %{{.*}} : vector<32xi32>
//       CHECK:         arith.cmpi sle, %[[QUERIES]], %{{.*}} : vector<32xi32>
//       CHECK:         arith.select %{{.*}}, %[[ST]], %cst : vector<32xi1>, vector<32xf32>
//       CHECK:       math.exp2

// Bottom-right causal: the first Q block is that of key - d, no left bound
// (the loop runs to the last Q block), no window parameters.
// CHECK-LABEL: gpu.func @bottom_right(
//  CHECK-SAME:   %{{[^:]*}}: i32, %{{[^:]*}}: i32) kernel
//  CHECK-SAME:   mask_alignment = "bottom_right"
//  CHECK-SAME:   params = ["q_map", "k_map", "v_map", "do_map", "dk_map", "dv_map", "lse_log2", "delta", "dq_accum", "seq_q", "seq_kv", "heads_per_kv_head", "scale_log2", "scale", "heads_q", "batch"]
//  CHECK-SAME:   sliding_window = false
//       CHECK:   %[[D:.*]] = arith.subi %[[SKV:.*]], %[[SQ:.*]] : index
//       CHECK:   %[[KV0:.*]] = arith.muli %block_id_x, %c128 : index
//       CHECK:   %[[NQ:.*]] = arith.ceildivui %[[SQ]], %c64 : index
//       CHECK:   %[[A:.*]] = arith.subi %[[KV0]], %[[D]] : index
//       CHECK:   %[[B:.*]] = arith.maxsi %[[A]], %c0 : index
//       CHECK:   %[[FIRSTQ:.*]] = arith.minsi %[[B]], %[[SQ]] : index
//       CHECK:   %[[QBEGIN:.*]] = arith.divui %[[FIRSTQ]], %c64 : index
//       CHECK:   kvpipe.warp_roles producer
//       CHECK:     scf.for %{{.*}} = %[[QBEGIN]] to %[[NQ]] step %c1
//       CHECK:   consumers(2)
//       CHECK:     scf.for %{{.*}} = %[[QBEGIN]] to %[[NQ]] step %c1
//       CHECK:       scf.if %{{.*}} -> (vector<32xf32>) {
//       CHECK:         arith.cmpi sge, %{{.*}}, %{{.*}} : vector<32xi32>
//   CHECK-NOT:         arith.cmpi sle, %{{.*}}, %{{.*}} : vector<32xi32>
//       CHECK:         arith.select
