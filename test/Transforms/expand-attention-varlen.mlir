// Packed variable-length batches (`varlen`): the skeleton with its tile
// lowered one per CTA, the strict protocol checker, the PTX, and the
// verifier's rules (the later split-input-file chunks).
// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// Sequence b is the query rows [cu_seqlens_q[b], cu_seqlens_q[b+1]) and key
// rows [cu_seqlens_k[b], cu_seqlens_k[b+1]) of the packed tensors. The tile
// reads the four offsets, clamps the query rows to [0, total_q] (no store
// can leave the output) and the key count to >= 0, and anchors the
// bottom-right diagonal at its own lengths; a Q block past the sequence's
// end visits no K/V block, and its CTA leaves at once.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @packed {head_dim = 128 : i64, element_type = bf16, causal = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>, varlen = true}
  kvpipe.attention_kernel @packed_window {head_dim = 96 : i64, element_type = f16, causal = false, sliding_window = true, varlen = true}
}

// CHECK-LABEL: gpu.func @packed(
//  CHECK-SAME:   %[[LSE:[^:]*]]: !llvm.ptr<1>, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %{{[^:]*}}: f32, %{{[^:]*}}: i32, %{{[^:]*}}: i32,
//  CHECK-SAME:   %[[CUQ:[^:]*]]: !llvm.ptr<1>, %[[CUK:[^:]*]]: !llvm.ptr<1>, %[[OUT:[^:]*]]: !llvm.ptr<1>, %[[TOTAL32:[^:]*]]: i32) kernel
//  CHECK-SAME:   params = [{{.*}}"batch", "cu_seqlens_q", "cu_seqlens_k", "o", "total_q"]
//  CHECK-SAME:   varlen = true
//       CHECK:   %[[BATCH:.*]] = gpu.block_id  z
//       CHECK:   %[[TOTAL:.*]] = arith.index_cast %[[TOTAL32]] : i32 to index
//       CHECK:   %[[B64:.*]] = arith.index_cast %[[BATCH]] : index to i64
//       CHECK:   %[[QADDR:.*]] = llvm.getelementptr %[[CUQ]][%[[B64]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
//       CHECK:   %[[QSTART32:.*]] = llvm.load %[[QADDR]] : !llvm.ptr<1> -> i32
//       CHECK:   %[[QSTART0:.*]] = arith.index_cast %[[QSTART32]] : i32 to index
//       CHECK:   %[[QSTART1:.*]] = arith.maxsi %[[QSTART0]], %c0 : index
//       CHECK:   %[[QSTART:.*]] = arith.minsi %[[QSTART1]], %[[TOTAL]] : index
//       CHECK:   %[[NEXT:.*]] = arith.addi %[[BATCH]], %c1 : index
//       CHECK:   %[[N64:.*]] = arith.index_cast %[[NEXT]] : index to i64
//       CHECK:   %[[QENDADDR:.*]] = llvm.getelementptr %[[CUQ]][%[[N64]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
//       CHECK:   %[[QEND32:.*]] = llvm.load %[[QENDADDR]] : !llvm.ptr<1> -> i32
//       CHECK:   %[[QEND0:.*]] = arith.index_cast %[[QEND32]] : i32 to index
//       CHECK:   %[[QEND1:.*]] = arith.maxsi %[[QEND0]], %[[QSTART]] : index
//       CHECK:   %[[QEND:.*]] = arith.minsi %[[QEND1]], %[[TOTAL]] : index
//       CHECK:   %[[LENQ:.*]] = arith.subi %[[QEND]], %[[QSTART]] : index
//       CHECK:   %[[KADDR:.*]] = llvm.getelementptr %[[CUK]][%[[B64]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
//       CHECK:   %[[KSTART32:.*]] = llvm.load %[[KADDR]] : !llvm.ptr<1> -> i32
//       CHECK:   %[[KSTART0:.*]] = arith.index_cast %[[KSTART32]] : i32 to index
//       CHECK:   %[[KSTART:.*]] = arith.maxsi %[[KSTART0]], %c0 : index
//       CHECK:   %[[KENDADDR:.*]] = llvm.getelementptr %[[CUK]][%[[N64]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
//       CHECK:   %[[KEND32:.*]] = llvm.load %[[KENDADDR]] : !llvm.ptr<1> -> i32
//       CHECK:   %[[KEND:.*]] = arith.index_cast %[[KEND32]] : i32 to index
//       CHECK:   %[[KSPAN:.*]] = arith.subi %[[KEND]], %[[KSTART]] : index
//       CHECK:   %[[LENK:.*]] = arith.maxsi %[[KSPAN]], %c0 : index
// The sequence's own diagonal.
//       CHECK:   arith.subi %[[LENK]], %[[LENQ]] : index
//       CHECK:   %[[BLOCKS:.*]] = arith.ceildivui %{{.*}}, %c128 : index
//       CHECK:   %[[INSIDE:.*]] = arith.cmpi slt, %[[QROW:.*]], %[[LENQ]] : index
//       CHECK:   arith.select %[[INSIDE]], %[[BLOCKS]], %c0 : index
// A Q block past its sequence's end has no work: the CTA leaves before its
// barriers are made (the kernel's whole work is under the tile's flag).
//       CHECK:   scf.if %[[INSIDE]] {
//  CHECK-NEXT:     gpu.dynamic_shared_memory
//       CHECK:     kvpipe.create
// Q at the sequence's first row + the block's, batch 0 of the packed map;
// K and V likewise.
//       CHECK:   %[[QMAPROW:.*]] = arith.addi %[[QSTART]], %[[QROW]] : index
//       CHECK:   kvpipe.tma_load %arg0[%c0, %{{.*}}, %[[QMAPROW]], %c0]
//       CHECK:   %[[KVROW:.*]] = arith.muli %{{.*}}, %c128 : index
//       CHECK:   %[[KVMAPROW:.*]] = arith.addi %[[KSTART]], %[[KVROW]] : index
//       CHECK:   kvpipe.tma_load %arg1[%c0, %{{.*}}, %[[KVMAPROW]], %c0]
//       CHECK:   kvpipe.tma_load %arg2[%c0, %{{.*}}, %[[KVMAPROW]], %c0]
// The epilogue: O staged in the warpgroup's Q rows, then 16-byte chunks
// (8 per thread at head dim 128) unswizzled and stored only for the rows
// below the sequence's length; no TMA store.
//   CHECK-NOT:   kvpipe.tma_store
//       CHECK:   %[[LEFT:.*]] = arith.subi %[[LENQ]], %[[FIRSTROW:.*]] : index
//       CHECK:   kvpipe.store_fragment
//       CHECK:   nvvm.barrier id
//       CHECK:   %[[ROW:.*]] = arith.divui %[[CHUNK:.*]], %c16 : index
//       CHECK:   %[[COL:.*]] = arith.remui %[[CHUNK]], %c16 : index
//       CHECK:   %[[PATTERN:.*]] = arith.andi %{{.*}}, %c7 : index
//       CHECK:   arith.xori %{{.*}}, %[[PATTERN]] : index
//       CHECK:   %[[VALUE:.*]] = vector.load %{{.*}} {alignment = 16 : i64} : memref<2x64x64xbf16, {{.*}}>, vector<8xbf16>
//       CHECK:   %[[IN:.*]] = arith.cmpi slt, %[[ROW]], %[[LEFT]] : index
//       CHECK:   scf.if %[[IN]] {
//       CHECK:     %[[ADDR:.*]] = llvm.getelementptr %[[OUT]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
//       CHECK:     llvm.store %[[VALUE]], %[[ADDR]] {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// Seven more chunks, then the log-sum-exp at (head, packed row), for rows
// below the length.
//   CHECK-COUNT-7:   llvm.store %{{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
//   CHECK-NOT:   llvm.store %{{.*}} : vector<8xbf16>
//       CHECK:   %[[HEADROW:.*]] = arith.muli %{{.*}}, %[[TOTAL]] : index
//       CHECK:   %[[LSEBASE:.*]] = arith.addi %[[HEADROW]], %[[QSTART]] : index
//       CHECK:   arith.cmpi ult, %{{.*}}, %[[LENQ]] : index
//       CHECK:   llvm.getelementptr %[[LSE]]
//       CHECK:   gpu.return

// Head dim 96: three 32-wide blocks with the 64-byte swizzle (the chunk
// XOR is bits 1-2 of the row), 6 chunks per thread.
// CHECK-LABEL: gpu.func @packed_window(
//       CHECK:   kvpipe.store_fragment
//       CHECK:   arith.divui %{{.*}}, %c12 : index
//       CHECK:   arith.andi %{{.*}}, %c3 : index
//       CHECK:   vector.load %{{.*}} {alignment = 16 : i64} : memref<3x64x32xf16, {{.*}}>, vector<8xf16>
//   CHECK-COUNT-6:   llvm.store %{{.*}} {alignment = 16 : i64} : vector<8xf16>, !llvm.ptr<1>
//       CHECK:   gpu.return

// In the PTX, the offsets loaded, 16-byte shared loads and 16-byte global
// stores behind a branch on the row, no TMA store of O.
// PTX-LABEL: .entry packed(
//       PTX:   ld.global.b32
//   PTX-NOT:   cp.async.bulk.tensor{{.*}}global.shared
//       PTX:   ld.shared.v4
//       PTX:   setp.ge.s64 [[P:%p[0-9]+]]
//  PTX-NEXT:   @[[P]] bra
//       PTX:   st.global.v4
// PTX-LABEL: .entry packed_window(

// -----

gpu.module @m {
  // expected-error @+1 {{'varlen' is not supported with 'persistent' (the predicated epilogue stages the output in the Q rows, which a persistent CTA reloads)}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, varlen = true, persistent = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'varlen' with 'kv_lengths' needs 'page_size' (packed K/V rows are addressed by cu_seqlens_k; a paged cache's key counts may come from kv_lengths)}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = true, varlen = true, kv_lengths = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'varlen' is not supported with 'deterministic' in the backward (the ordered dQ additions number the K/V blocks of one sequence length)}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = true, varlen = true, backward = true, deterministic = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'varlen' is not supported with 'split_kv' (their tiles address padded batches)}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = true, varlen = true, split_kv = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'varlen' is not supported with 'pack_gqa' (their tiles address padded batches)}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = true, varlen = true, pack_gqa = 4 : i64}
}
