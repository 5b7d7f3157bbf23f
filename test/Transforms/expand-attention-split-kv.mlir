// Split-KV (decode, docs/serving.md): the tile space grows a split
// coordinate (grid x = Q blocks * num_splits, the split fastest), each split
// takes ceil(n / num_splits) of the tile's n K/V blocks and writes its
// normalised fp32 partial O and log-sum-exp to the workspace, and the
// family's second kernel, @<name>_combine, merges them.
// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-expand-attention=abi-file=%t.json -o /dev/null
// RUN: FileCheck %s --check-prefix=ABI < %t.json
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}
// The decode example (packed and split) lowers and assembles without spills.
// RUN: kvpipe-opt %kvpipe_src_root/examples/attention-decode.mlir --kvpipe-to-ptx="ptx-file=%t.example.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.example.ptx -o %t.example.cubin 2>&1 | FileCheck %s --check-prefix=EXAMPLE --implicit-check-not=warning %}

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @split {head_dim = 128 : i64, element_type = bf16, causal = false, split_kv = true, kv_lengths = true, consumer_warpgroups = 1 : i64}
  kvpipe.attention_kernel @split_window {head_dim = 64 : i64, element_type = f16, causal = true, split_kv = true, sliding_window = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>}
}

// No o_map and no lse: the workspace (o_partial, lse_partial) after
// num_splits.
// CHECK-LABEL: gpu.func @split(
//  CHECK-SAME:   %[[KVLEN:[^:]*]]: !llvm.ptr<1>, %[[SPLITS32:[^:]*]]: i32, %[[OPART:[^:]*]]: !llvm.ptr<1>, %[[LSEPART:[^:]*]]: !llvm.ptr<1>)
//  CHECK-SAME:   family = "split"
//  CHECK-SAME:   params = ["q_map", "k_map", "v_map", "seq_q", "seq_kv", "heads_per_kv_head", "scale_log2", "heads_q", "batch", "kv_lengths", "num_splits", "o_partial", "lse_partial"]
//  CHECK-SAME:   role = "main"
//  CHECK-SAME:   split_kv = true
//       CHECK:   %[[SPLITS:.*]] = arith.index_cast %[[SPLITS32]] : i32 to index
// The tile's x: split = x % num_splits, Q block = x / num_splits.
//       CHECK:   %[[X:.*]] = gpu.block_id x
//       CHECK:   %[[SPLIT:.*]] = arith.remui %[[X]], %[[SPLITS]] : index
//       CHECK:   arith.divui %[[X]], %[[SPLITS]] : index
// The batch's K/V blocks, then this split's share of them.
//       CHECK:   %[[TOTAL:.*]] = arith.ceildivui %{{.*}}, %c128 : index
//       CHECK:   %[[PER:.*]] = arith.ceildivui %[[TOTAL]], %[[SPLITS]] : index
//       CHECK:   %[[BEGIN0:.*]] = arith.muli %[[SPLIT]], %[[PER]] : index
//       CHECK:   %[[BEGIN:.*]] = arith.minui %[[BEGIN0]], %[[TOTAL]] : index
//       CHECK:   %[[LEFT:.*]] = arith.subi %[[TOTAL]], %[[BEGIN]] : index
//       CHECK:   %[[MINE:.*]] = arith.minui %[[PER]], %[[LEFT]] : index
//       CHECK:   %[[COUNT:.*]] = arith.minui %[[TOTAL]], %[[MINE]] : index
// Producer and consumer: the same count, from the split's first block.
//       CHECK:   scf.for %{{.*}} = %c0 to %[[COUNT]] step %c1
//       CHECK:     arith.addi %[[BEGIN]], %{{.*}} : index
//       CHECK:   scf.for %{{.*}} = %c0 to %[[COUNT]] step %c1
// The epilogue: O normalised in fp32 (no truncation), rows
// ((split * B + b) * H + h) * S + s of D_v floats, two per store, for the
// rows below seq_q.
//       CHECK:   %[[O:.*]] = kvpipe.fragment_rescale
//   CHECK-NOT:   arith.truncf
//       CHECK:   arith.muli %[[SPLIT]], %{{.*}} : index
//       CHECK:   scf.if
//       CHECK:     llvm.getelementptr %[[OPART]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
//       CHECK:     llvm.store %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
//       CHECK:   scf.if
//       CHECK:     llvm.store %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
// The log-sum-exp at the split's offset; a row without keys keeps -inf (no
// +inf select: the combine's neutral element).
//       CHECK:   llvm.getelementptr %[[LSEPART]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
//   CHECK-NOT:   0x7F800000
//       CHECK:   llvm.store %{{.*}} : f32, !llvm.ptr<1>
//   CHECK-NOT:   kvpipe.tma_store
//       CHECK:   gpu.return

// The combine: one warp per row (4 rows per CTA): the max of the splits'
// log-sum-exps and the sum of exp2 over lanes striding the splits (shuffle
// reductions), then each lane's D_v / 32 columns weighted by
// exp(lse_i - lse) over the splits that saw keys; O in the element type at
// the output's strides; lse = +inf for a row no split saw.
// CHECK-LABEL: gpu.func @split_combine(
//  CHECK-SAME:   %[[P:[^:]*]]: !llvm.ptr<1>, %[[L:[^:]*]]: !llvm.ptr<1>, %[[OUT:[^:]*]]: !llvm.ptr<1>, %[[LSE:[^:]*]]: !llvm.ptr<1>, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %[[N32:[^:]*]]: i32)
//  CHECK-SAME:   family = "split"
//  CHECK-SAME:   role = "combine"
//  CHECK-SAME:   rows_per_cta = 4
//  CHECK-SAME:   nvvm.maxntid = array<i32: 128, 1, 1>
//       CHECK:   %[[LANE:.*]] = arith.remui %{{.*}}, %c32 : index
//       CHECK:   scf.if
//       CHECK:     %[[N:.*]] = arith.index_cast %[[N32]] : i32 to index
//       CHECK:     scf.for %{{.*}} = %[[LANE]] to %[[N]] step %c32
//       CHECK:       llvm.getelementptr %[[L]]
//       CHECK:       arith.maxnumf
//       CHECK:     gpu.shuffle xor
//       CHECK:     scf.for %{{.*}} = %[[LANE]] to %[[N]] step %c32
//       CHECK:       math.exp2
//       CHECK:     gpu.shuffle xor
//       CHECK:     math.log2
//       CHECK:     scf.for %{{.*}} = %c0 to %[[N]] step %c1
//       CHECK:       arith.cmpf ogt
//       CHECK:       scf.if
//       CHECK:         llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
//       CHECK:     arith.truncf %{{.*}} : vector<4xf32> to vector<4xbf16>
//       CHECK:     llvm.store %{{.*}} {alignment = 8 : i64} : vector<4xbf16>, !llvm.ptr<1>
//       CHECK:     arith.select %{{.*}}, %{{.*}}, %cst_0 : f32
//       CHECK:     llvm.store %{{.*}} : f32, !llvm.ptr<1>

// A causal window: the split is of the blocks from the window's first.
// CHECK-LABEL: gpu.func @split_window(
//       CHECK:   %[[FIRST:.*]] = arith.divui %{{.*}}, %c128 : index
//       CHECK:   %[[TOTAL:.*]] = arith.ceildivui %{{.*}}, %c128 : index
//       CHECK:   %[[PER:.*]] = arith.ceildivui %[[TOTAL]], %{{.*}} : index
//       CHECK:   %[[BEGIN:.*]] = arith.minui %{{.*}}, %[[TOTAL]] : index
//       CHECK:   arith.addi %[[FIRST]], %[[BEGIN]] : index
// CHECK-LABEL: gpu.func @split_window_combine(
//       CHECK:   vector<2xf32>

// The ABI file: the main kernel and its combine, one family, the combine's
// parameters in order.
// ABI:      "family": "split"
// ABI:      "kernel": "split"
// ABI:      "queries_per_tile": 64
// ABI:      "role": "main"
// ABI:      "split_kv": true
// ABI:      "family": "split"
// ABI:      "kernel": "split_combine"
// ABI:      "o_partial",
// ABI-NEXT: "lse_partial",
// ABI-NEXT: "o",
// ABI-NEXT: "lse",
// ABI-NEXT: "o_stride_b",
// ABI-NEXT: "o_stride_h",
// ABI-NEXT: "o_stride_s",
// ABI-NEXT: "seq_q",
// ABI-NEXT: "heads_q",
// ABI-NEXT: "batch",
// ABI-NEXT: "num_splits"
// ABI:      "role": "combine"

// PTX: .entry split(
// PTX: .entry split_combine(
// PTX: .entry split_window(
// PTX: .entry split_window_combine(

// No spills in any of the four kernels.
// PTXAS-COUNT-4: 0 bytes spill stores, 0 bytes spill loads

// EXAMPLE-COUNT-5: 0 bytes spill stores, 0 bytes spill loads
