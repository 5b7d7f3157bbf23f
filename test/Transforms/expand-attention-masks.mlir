// The skeleton with its tile lowered one per CTA (--kvpipe-lower-tiles: the
// kvpipe.tile region, where setTile computes the bounds, on blockIdx).
// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// Masks anchored at the diagonal d (query i aligned with key i + d):
// `mask_alignment = bottom_right` makes d = seq_kv - seq_q (signed: more
// queries than keys make it negative), `sliding_window` bounds each row's
// keys to [i + d - window_left, i + d + window_right] with two runtime
// parameters. The K/V blocks a Q block visits are those its rows see; K/V
// loops run from 0 to that count in the producer and in the consumers alike
// (the block is first + j), which is what lets the strict protocol checker
// prove that both sides advance the same number of slots.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @bottom_right {head_dim = 64 : i64, element_type = bf16, causal = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>}
  kvpipe.attention_kernel @window {head_dim = 128 : i64, element_type = bf16, causal = false, sliding_window = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>}
  kvpipe.attention_kernel @causal_window {head_dim = 128 : i64, element_type = f16, causal = true, sliding_window = true}
  kvpipe.attention_kernel @cache {head_dim = 128 : i64, element_type = bf16, causal = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>, kv_lengths = true}
}

// Bottom-right causal: the last row of the Q block (row + 191 at block_m
// 192) sees keys up to row + 191 + d, clamped to [-1, seq_kv - 1]; the
// blocks are those up to that key's.
// CHECK-LABEL: gpu.func @bottom_right(
//  CHECK-SAME:   %{{[^:]*}}: !llvm.ptr<1>, %[[SQ32:[^:]*]]: i32, %[[SKV32:[^:]*]]: i32,
//  CHECK-SAME:   mask_alignment = "bottom_right"
//  CHECK-SAME:   params = ["q_map", "k_map", "v_map", "o_map", "lse", "seq_q", "seq_kv", "heads_per_kv_head", "scale_log2", "heads_q", "batch"]
//  CHECK-SAME:   sliding_window = false
//       CHECK:   %[[SQ:.*]] = arith.index_cast %[[SQ32]] : i32 to index
//       CHECK:   %[[SKV:.*]] = arith.index_cast %[[SKV32]] : i32 to index
//       CHECK:   %[[D:.*]] = arith.subi %[[SKV]], %[[SQ]] : index
//       CHECK:   %[[LASTROW:.*]] = arith.addi %{{.*}}, %c191 : index
//       CHECK:   %[[LASTKEY:.*]] = arith.addi %[[LASTROW]], %[[D]] : index
//       CHECK:   %[[KVLAST:.*]] = arith.subi %[[SKV]], %c1 : index
//       CHECK:   %[[HI:.*]] = arith.minsi %[[LASTKEY]], %[[KVLAST]] : index
//       CHECK:   %[[CLAMPED:.*]] = arith.maxsi %[[HI]], %c-1 : index
//       CHECK:   %[[END:.*]] = arith.addi %[[CLAMPED]], %c1 : index
//       CHECK:   %[[BLOCKS:.*]] = arith.ceildivui %[[END]], %c128 : index
// Producer and consumer loops: the same count.
//       CHECK:   scf.for %{{.*}} = %c0 to %[[BLOCKS]] step %c1
//       CHECK:   scf.for %{{.*}} = %c0 to %[[BLOCKS]] step %c1
// A block needs the element mask when it crosses seq_kv or the warpgroup's
// first row's last key (signed: that key may be -1).
//       CHECK:     arith.cmpi ugt, %{{.*}}, %[[SKV]] : index
//       CHECK:     arith.cmpi sgt, %{{.*}}, %{{.*}} : index
//       CHECK:     scf.if
//       CHECK:       arith.cmpi slt, %{{.*}}, %{{.*}} : vector<64xi32>
//       CHECK:       arith.cmpi sle, %{{.*}}, %{{.*}} : vector<64xi32>
// A row that saw no key: lse = +inf.
//       CHECK:   arith.select %{{.*}}, %{{.*}}, %cst{{.*}} : f32
//       CHECK:   gpu.return

// A window: two more parameters; the first K/V block is the one holding the
// first row's first key (row + d - window_left, clamped to [0, seq_kv]; 0
// when window_left < 0), and the count runs from there.
// CHECK-LABEL: gpu.func @window(
//  CHECK-SAME:   %[[SQ32:[^:]*]]: i32, %[[SKV32:[^:]*]]: i32, %{{[^:]*}}: i32, %{{[^:]*}}: f32, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %[[LEFT32:[^:]*]]: i32, %[[RIGHT32:[^:]*]]: i32)
//  CHECK-SAME:   param_kinds = {{{.*}}window_left = "i32", window_right = "i32"}
//  CHECK-SAME:   params = [{{.*}}"batch", "window_left", "window_right"]
//  CHECK-SAME:   sliding_window = true
//       CHECK:   %[[LEFT:.*]] = arith.index_cast %[[LEFT32]] : i32 to index
//       CHECK:   %[[RIGHT:.*]] = arith.index_cast %[[RIGHT32]] : i32 to index
//       CHECK:   %[[RIGHTOPEN:.*]] = arith.cmpi slt, %[[RIGHT]], %c0 : index
//       CHECK:   %[[LASTKEY:.*]] = arith.select %[[RIGHTOPEN]], %{{.*}}, %{{.*}} : index
//       CHECK:   %[[KVEND:.*]] = arith.addi %[[LASTKEY]], %c1 : index
//       CHECK:   %[[FROM:.*]] = arith.subi %{{.*}}, %[[LEFT]] : index
//       CHECK:   %[[LO:.*]] = arith.maxsi %[[FROM]], %c0 : index
//       CHECK:   %[[FIRSTKEY:.*]] = arith.minsi %[[LO]], %{{.*}} : index
//       CHECK:   %[[LEFTOPEN:.*]] = arith.cmpi slt, %[[LEFT]], %c0 : index
//       CHECK:   %[[FIRSTKEY2:.*]] = arith.select %[[LEFTOPEN]], %c0, %[[FIRSTKEY]] : index
//       CHECK:   %[[FIRST:.*]] = arith.divui %[[FIRSTKEY2]], %c128 : index
//       CHECK:   %[[SKIPPED:.*]] = arith.muli %[[FIRST]], %c128 : index
//       CHECK:   %[[SPAN:.*]] = arith.subi %[[KVEND]], %[[SKIPPED]] : index
//       CHECK:   %[[BLOCKS:.*]] = arith.ceildivui %[[SPAN]], %c128 : index
// The producer loads block first + j.
//       CHECK:   scf.for %[[J:.*]] = %c0 to %[[BLOCKS]] step %c1
//       CHECK:     %[[BLOCK:.*]] = arith.addi %[[FIRST]], %[[J]] : index
//       CHECK:     arith.muli %[[BLOCK]], %c128 : index
//       CHECK:     kvpipe.tma_load
// The consumers mask with both edges.
//       CHECK:   scf.for %{{.*}} = %c0 to %[[BLOCKS]] step %c1
//       CHECK:     arith.cmpi sgt
//       CHECK:     arith.cmpi slt
//       CHECK:     scf.if
//       CHECK:       arith.cmpi sle, %{{.*}}, %{{.*}} : vector<64xi32>
//       CHECK:       arith.cmpi sge, %{{.*}}, %{{.*}} : vector<64xi32>

// Causal with a window: the right bound is the diagonal (window_right is
// not read), the left one the window's.
// CHECK-LABEL: gpu.func @causal_window(
//  CHECK-SAME:   mask_alignment = "top_left"
//  CHECK-SAME:   sliding_window = true
//   CHECK-NOT:   arith.cmpi slt, %arg12
//       CHECK:   arith.divui %{{.*}}, %c128 : index
//       CHECK:   gpu.return

// Per-batch key counts (a padded KV cache): the tile's batch reads its
// length, clamped to [0, seq_kv], and the bottom-right diagonal is the
// batch's own.
// CHECK-LABEL: gpu.func @cache(
//  CHECK-SAME:   %[[SQ32:[^:]*]]: i32, %[[CAP32:[^:]*]]: i32,
//  CHECK-SAME:   %[[LENGTHS:[^:]*]]: !llvm.ptr<1>) kernel
//  CHECK-SAME:   kv_lengths = true
//  CHECK-SAME:   params = [{{.*}}"batch", "kv_lengths"]
//       CHECK:   %[[SQ:.*]] = arith.index_cast %[[SQ32]] : i32 to index
//       CHECK:   %[[BATCH:.*]] = gpu.block_id  z
//       CHECK:   %[[B64:.*]] = arith.index_cast %[[BATCH]] : index to i64
//       CHECK:   %[[ADDR:.*]] = llvm.getelementptr %[[LENGTHS]][%[[B64]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
//       CHECK:   %[[LEN32:.*]] = llvm.load %[[ADDR]] : !llvm.ptr<1> -> i32
//   CHECK-DAG:   %[[LEN:.*]] = arith.index_cast %[[LEN32]] : i32 to index
//   CHECK-DAG:   %[[CAP:.*]] = arith.index_cast %[[CAP32]] : i32 to index
//       CHECK:   %[[POS:.*]] = arith.maxsi %[[LEN]], %c0 : index
//       CHECK:   %[[SKV:.*]] = arith.minsi %[[POS]], %[[CAP]] : index
//       CHECK:   arith.subi %[[SKV]], %[[SQ]] : index
//       CHECK:   gpu.return
