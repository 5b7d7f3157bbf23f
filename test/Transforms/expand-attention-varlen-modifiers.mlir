// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// Modifiers in the varlen kernel (docs/serving.md, docs/modifiers.md): the
// regions see b = the sequence (the tile's blockIdx.z), q and kv as
// positions in the sequence (the tile's rows before the sequence's first
// packed row is added for the loads), and their tensors after every other
// parameter, as the dense kernel's. flash-attn's ALiBi with packed
// sequences: the slope per head, the diagonal's shift per sequence
// (seqlen_k - seqlen_q, an i32 tensor indexed by b).

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @alibi {head_dim = 128 : i64, element_type = bf16, causal = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>, varlen = true, aux_types = [f32, i32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0[%h] : f32
    %shift = kvpipe.aux_load 1[%b] : i32
    %shifti = arith.index_cast %shift : i32 to index
    %d0 = arith.subi %q, %kv : index
    %d = arith.addi %d0, %shifti : index
    %df = arith.index_cast %d : index to i32
    %f = arith.sitofp %df : i32 to f32
    %a = math.absf %f : f32
    %m = arith.mulf %slope, %a : f32
    %r = arith.subf %s, %m : f32
    kvpipe.yield %r : f32
  }
  kvpipe.attention_kernel @softcap {head_dim = 64 : i64, element_type = f16, causal = false, varlen = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %c = arith.constant 3.000000e+01 : f32
    %x = arith.divf %s, %c : f32
    %t = math.tanh %x fastmath<afn> : f32
    %r = arith.mulf %t, %c : f32
    kvpipe.yield %r : f32
  }
}

// CHECK-LABEL: gpu.func @alibi(
//  CHECK-SAME:   %[[CUQ:arg11]]: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i32, %[[SLOPES:arg15]]: !llvm.ptr<1>, %[[SHIFTS:arg16]]: !llvm.ptr<1>)
//  CHECK-SAME:   params = ["q_map", "k_map", "v_map", "o_map", "lse", "seq_q", "seq_kv", "heads_per_kv_head", "scale_log2", "heads_q", "batch", "cu_seqlens_q", "cu_seqlens_k", "o", "total_q", "aux0", "aux1"]
//  CHECK-SAME:   score_mod = true
//  CHECK-SAME:   varlen = true
//       CHECK:   %[[SEQ:.*]] = gpu.block_id z
//       CHECK:   %[[HEAD:.*]] = gpu.block_id y
// The region, per score: the slope at the head, the shift at the sequence.
//       CHECK:   %[[B:.*]] = arith.index_cast %[[SEQ]] : index to i32
//  CHECK-NEXT:   %[[H:.*]] = arith.index_cast %[[HEAD]] : index to i32
//  CHECK-NEXT:   %[[H64:.*]] = arith.extsi %[[H]] : i32 to i64
//  CHECK-NEXT:   %[[SP:.*]] = llvm.getelementptr %[[SLOPES]][%[[H64]]]
//  CHECK-NEXT:   llvm.load %[[SP]] invariant
//  CHECK-NEXT:   %[[B64:.*]] = arith.extsi %[[B]] : i32 to i64
//  CHECK-NEXT:   %[[SHP:.*]] = llvm.getelementptr %[[SHIFTS]][%[[B64]]]
//  CHECK-NEXT:   llvm.load %[[SHP]] invariant

// A score_mod that is not an added bias: the softmax runs on the modified
// scaled scores with log2(e), and so does the log-sum-exp (not scale_log2,
// %arg8, as without one) — here times the cap, 30 log2(e), since the
// region's final `* 30` is folded into the exponent (ScoreModScaling).
// CHECK-LABEL: gpu.func @softcap(
//       CHECK:   %[[LOG2E:.*]] = arith.constant 43.2808495 : f32
//       CHECK:   math.log2
//  CHECK-NEXT:   arith.mulf %{{.*}}, %[[LOG2E]] : f32

// PTXAS: 0 bytes spill stores, 0 bytes spill loads
