// Packed queries over a paged K/V cache (varlen + page_size; vLLM's mixed
// batches of decodes and prefill chunks, flash_attn_varlen_func with a
// block_table): the queries and the output are the varlen kernel's (rows
// from cu_seqlens_q, the predicated epilogue), each sequence's key count
// cu_seqlens_k[b + 1] - cu_seqlens_k[b], and its keys in its row of the
// block table, loaded page by page as the paged kernels load them. No
// kv_lengths: page_size needs it or varlen.
// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // 16-key pages: eight boxes per 128-key block.
  kvpipe.attention_kernel @paged_varlen {head_dim = 128 : i64, element_type = bf16, causal = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>, varlen = true, page_size = 16 : i64}
  // 256-key pages: a block lies in one page; a window.
  kvpipe.attention_kernel @paged_varlen256 {head_dim = 64 : i64, element_type = bf16, causal = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>, varlen = true, page_size = 256 : i64, sliding_window = true}
  // The key counts from kv_lengths (vLLM's seqused_k) in place of
  // cu_seqlens_k.
  kvpipe.attention_kernel @paged_varlen_used {head_dim = 128 : i64, element_type = bf16, causal = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>, varlen = true, page_size = 16 : i64, kv_lengths = true}
}

// CHECK-LABEL: gpu.func @paged_varlen(
//  CHECK-SAME:   %[[TABLE:arg11]]: !llvm.ptr<1>, %[[STRIDE32:arg12]]: i32, %[[CUQ:arg13]]: !llvm.ptr<1>, %[[CUK:arg14]]: !llvm.ptr<1>
//  CHECK-SAME:   params = ["q_map", "k_map", "v_map", "o_map", "lse", "seq_q", "seq_kv", "heads_per_kv_head", "scale_log2", "heads_q", "batch", "block_table", "max_pages_per_seq", "cu_seqlens_q", "cu_seqlens_k", "o", "total_q"]
// The sequence (the tile's z) has cu_seqlens_k[b + 1] - cu_seqlens_k[b] keys.
//       CHECK:   %[[B:.*]] = arith.index_cast %block_id_z : index to i64
//       CHECK:   llvm.getelementptr %[[CUQ]][%[[B]]]
//       CHECK:   %[[B1:.*]] = arith.index_cast %{{.*}} : index to i64
//       CHECK:   llvm.getelementptr %[[CUQ]][%[[B1]]]
//       CHECK:   %[[K0A:.*]] = llvm.getelementptr %[[CUK]][%[[B]]]
//       CHECK:   %[[K0:.*]] = llvm.load %[[K0A]]
//       CHECK:   %[[K1A:.*]] = llvm.getelementptr %[[CUK]][%[[B1]]]
//       CHECK:   %[[K1:.*]] = llvm.load %[[K1A]]
//       CHECK:   %[[K1I:.*]] = arith.index_cast %[[K1]] : i32 to index
//       CHECK:   %[[SPAN:.*]] = arith.subi %[[K1I]], %{{.*}} : index
//       CHECK:   %[[KEYS:.*]] = arith.maxsi %[[SPAN]], %c0 : index
// The producer: key row r's page is block_table[b * max_pages + min(r / 16,
// the sequence's last page)], its row r % 16.
//       CHECK:   %[[STRIDE:.*]] = arith.index_cast %[[STRIDE32]] : i32 to index
//       CHECK:   arith.maxsi %[[KEYS]], %c1 : index
//       CHECK:   %[[ROWBASE:.*]] = arith.muli %block_id_z, %[[STRIDE]] : index
//       CHECK:   %[[ENTRY:.*]] = arith.addi %[[ROWBASE]], %{{.*}} : index
//       CHECK:   %[[ENTRY64:.*]] = arith.index_cast %[[ENTRY]] : index to i64
//       CHECK:   %[[EA:.*]] = llvm.getelementptr %[[TABLE]][%[[ENTRY64]]]
//       CHECK:   %[[PAGE:.*]] = llvm.load %[[EA]]
//       CHECK:   %[[PAGEI:.*]] = arith.index_cast %[[PAGE]] : i32 to index
//       CHECK:   %[[INPAGE:.*]] = arith.remui %{{.*}}, %c16 : index
//       CHECK:   kvpipe.tma_load %arg1[%[[PAGEI]], %{{.*}}, %[[INPAGE]], %c0]{{.*}}box = [1, 1, 16, 64]

// CHECK-LABEL: gpu.func @paged_varlen256(
//  CHECK-SAME:   box = [1, 1, 128, 64]

// CHECK-LABEL: gpu.func @paged_varlen_used(
//  CHECK-SAME:   %[[LENS:arg11]]: !llvm.ptr<1>, %[[UTABLE:arg12]]: !llvm.ptr<1>, %{{.*}}: i32, %[[UCUQ:arg14]]: !llvm.ptr<1>
//  CHECK-SAME:   params = ["q_map", "k_map", "v_map", "o_map", "lse", "seq_q", "seq_kv", "heads_per_kv_head", "scale_log2", "heads_q", "batch", "kv_lengths", "block_table", "max_pages_per_seq", "cu_seqlens_q", "o", "total_q"]
// Sequence b has kv_lengths[b] keys, clamped to [0, seq_kv]; its queries
// still come from cu_seqlens_q.
//       CHECK:   %[[UB:.*]] = arith.index_cast %block_id_z : index to i64
//       CHECK:   %[[LA:.*]] = llvm.getelementptr %[[LENS]][%[[UB]]]
//       CHECK:   %[[L:.*]] = llvm.load %[[LA]]
//       CHECK:   %[[LI:.*]] = arith.index_cast %[[L]] : i32 to index
//       CHECK:   %[[LPOS:.*]] = arith.maxsi %[[LI]], %c0 : index
//       CHECK:   arith.minsi %[[LPOS]], %{{.*}} : index
//       CHECK:   llvm.getelementptr %[[UCUQ]][%[[UB]]]
//   CHECK-NOT:   cu_seqlens_k
//       CHECK:   llvm.getelementptr %[[UTABLE]]

// PTXAS-COUNT-3: 0 bytes spill stores, 0 bytes spill loads
