// A paged K/V cache (`page_size`): the producer fills each K/V slot page by
// page, one i32 load of the block table and one TMA box per page; the
// verifier names what it does not support.
// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// The example's kernels: the strict protocol check, PTX, ptxas.
// RUN: kvpipe-opt %kvpipe_src_root/examples/attention-paged-decode.mlir --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %kvpipe_src_root/examples/attention-paged-decode.mlir --kvpipe-to-ptx="ptx-file=%t.ptx abi-file=%t.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=ABI < %t.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @page16 {head_dim = 128 : i64, element_type = bf16, causal = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>, kv_lengths = true, page_size = 16 : i64}
  kvpipe.attention_kernel @page256 {head_dim = 64 : i64, element_type = f16, causal = false, kv_lengths = true, page_size = 256 : i64}
}

// Pages of 16 rows, block_n 128: the K/V maps' boxes are 16 rows of the
// whole cache, and the kernel takes the block table and its row stride
// after kv_lengths.
// CHECK-LABEL: gpu.func @page16(
//  CHECK-SAME:   %{{[^:]*}}: !kvpipe.tensor_map<box = [1, 1, 16, 64], element_type = bf16, swizzle = 128>
//  CHECK-SAME:   %[[KVLEN:[^:]*]]: !llvm.ptr<1>, %[[TABLE:[^:]*]]: !llvm.ptr<1>, %[[STRIDE32:[^:]*]]: i32)
//  CHECK-SAME:   block_n = 128
//  CHECK-SAME:   k_map = {box = [1, 1, 16, 64], swizzle = 128 : i64}
//  CHECK-SAME:   page_size = 16
//  CHECK-SAME:   block_table = "pointer"
//  CHECK-SAME:   max_pages_per_seq = "i32"
//  CHECK-SAME:   params = [{{.*}}"kv_lengths", "block_table", "max_pages_per_seq"]
//  CHECK-SAME:   v_map = {box = [1, 1, 16, 64], swizzle = 128 : i64}
// The batch's length, clamped to the capacity seq_kv.
//       CHECK:   %[[LEN32:.*]] = llvm.load %{{.*}} : !llvm.ptr<1> -> i32
//       CHECK:   %[[LEN:.*]] = arith.index_cast %[[LEN32]] : i32 to index
//       CHECK:   %[[LENPOS:.*]] = arith.maxsi %[[LEN]], %c0 : index
//       CHECK:   %[[SEQKV:.*]] = arith.minsi %[[LENPOS]], %{{.*}} : index
// The producer's K/V loop: eight pages per block, each from the block table
// at batch * max_pages_per_seq + min(row / 16, last page), with row the
// block's first key + 16 l and the last page that of key max(len, 1) - 1,
// at most max_pages_per_seq - 1.
//       CHECK:   scf.for %{{.*}} = %c0 to %{{.*}} step %c1
//       CHECK:     %[[ROW:.*]] = arith.muli %{{.*}}, %c128 : index
//   CHECK-DAG:     %[[STRIDE:.*]] = arith.index_cast %[[STRIDE32]] : i32 to index
//   CHECK-DAG:     %[[NONEMPTY:.*]] = arith.maxsi %[[SEQKV]], %c1 : index
//   CHECK-DAG:     %[[LASTKEY:.*]] = arith.subi %[[NONEMPTY]], %c1 : index
//   CHECK-DAG:     %[[ROWEND:.*]] = arith.subi %[[STRIDE]], %c1 : index
//   CHECK-DAG:     %[[ROWLAST:.*]] = arith.maxsi %[[ROWEND]], %c0 : index
//   CHECK-DAG:     %[[LASTPAGE:.*]] = arith.divui %[[LASTKEY]], %c16 : index
//       CHECK:     %[[LAST:.*]] = arith.minsi %[[LASTPAGE]], %[[ROWLAST]] : index
//       CHECK:     %[[LOGICAL0:.*]] = arith.divui %[[ROW]], %c16 : index
//       CHECK:     %[[PAGE0IDX:.*]] = arith.minsi %[[LOGICAL0]], %[[LAST]] : index
//       CHECK:     %[[BASE:.*]] = arith.muli %{{.*}}, %[[STRIDE]] : index
//       CHECK:     %[[ENTRY0:.*]] = arith.addi %[[BASE]], %[[PAGE0IDX]] : index
//       CHECK:     %[[ENTRY0I64:.*]] = arith.index_cast %[[ENTRY0]] : index to i64
//       CHECK:     %[[ADDR0:.*]] = llvm.getelementptr %[[TABLE]][%[[ENTRY0I64]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
//       CHECK:     %[[PAGE0I32:.*]] = llvm.load %[[ADDR0]] : !llvm.ptr<1> -> i32
//       CHECK:     %[[PAGE0:.*]] = arith.index_cast %[[PAGE0I32]] : i32 to index
//       CHECK:     %[[R0:.*]] = arith.remui %[[ROW]], %c16 : index
//       CHECK:     %[[ROW1:.*]] = arith.addi %[[ROW]], %c16 : index
//       CHECK:     %[[LOGICAL1:.*]] = arith.divui %[[ROW1]], %c16 : index
//       CHECK:     %[[PAGE1IDX:.*]] = arith.minsi %[[LOGICAL1]], %[[LAST]] : index
//       CHECK:     arith.addi %[[BASE]], %[[PAGE1IDX]] : index
//       CHECK:     %[[PAGE1I32:.*]] = llvm.load %{{.*}} : !llvm.ptr<1> -> i32
//       CHECK:     %[[PAGE1:.*]] = arith.index_cast %[[PAGE1I32]] : i32 to index
//       CHECK:     %[[R1:.*]] = arith.remui %[[ROW1]], %c16 : index
// Pages 2 to 7 likewise, before the slot is acquired (the loads overlap the
// wait); the last one at row + 112.
//       CHECK:     arith.addi %[[ROW]], %c112 : index
//       CHECK:     llvm.load
//   CHECK-NOT:     llvm.load
//       CHECK:     kvpipe.producer_acquire
// K's slot: per 64-column block, eight 16-row boxes at rows 0, 16, ..., 112
// of the slot, each at its page and row in page.
//       CHECK:     memref.subview %{{.*}}[%{{.*}}, 0, 0, 0] [1, 1, 16, 64]
//  CHECK-NEXT:     kvpipe.tma_load %{{.*}}[%[[PAGE0]], %{{.*}}, %[[R0]], %c0], %{{.*}}, %{{.*}} : !kvpipe.tensor_map<box = [1, 1, 16, 64], element_type = bf16, swizzle = 128>, memref<16x64xbf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>
//  CHECK-NEXT:     memref.subview %{{.*}}[%{{.*}}, 0, 16, 0] [1, 1, 16, 64]
//  CHECK-NEXT:     kvpipe.tma_load %{{.*}}[%[[PAGE1]], %{{.*}}, %[[R1]], %c0]
// 16 boxes for K in all (8 pages x 2 column blocks), then its commit.
// CHECK-COUNT-14:  kvpipe.tma_load
//  CHECK-NEXT:     kvpipe.producer_commit
// V: the same pages (no more block-table loads).
//   CHECK-NOT:     llvm.load
//       CHECK:     kvpipe.producer_acquire
//       CHECK:     kvpipe.tma_load %{{.*}}[%[[PAGE0]], %{{.*}}, %[[R0]], %c0]
// CHECK-COUNT-15:  kvpipe.tma_load
//  CHECK-NEXT:     kvpipe.producer_commit
//       CHECK:   gpu.return

// Pages of 256 rows, block_n 128: one 128-row box per slot, at row
// (block's first key) % 256 of its page.
// CHECK-LABEL: gpu.func @page256(
//  CHECK-SAME:   k_map = {box = [1, 1, 128, 64], swizzle = 128 : i64}
//  CHECK-SAME:   page_size = 256
//       CHECK:   scf.for
//       CHECK:     %[[ROW:.*]] = arith.muli %{{.*}}, %c128 : index
//       CHECK:     %[[PAGE:.*]] = llvm.load %{{.*}} : !llvm.ptr<1> -> i32
//       CHECK:     %[[PAGEIDX:.*]] = arith.index_cast %[[PAGE]] : i32 to index
//       CHECK:     %[[INPAGE:.*]] = arith.remui %[[ROW]], %c256 : index
//   CHECK-NOT:     llvm.load
//       CHECK:     kvpipe.producer_acquire
//       CHECK:     kvpipe.tma_load %{{.*}}[%[[PAGEIDX]], %{{.*}}, %[[INPAGE]], %c0], {{.*}} : !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = f16, swizzle = 128>
//  CHECK-NEXT:     kvpipe.producer_commit

// -----

// Default block sizes with pages: the head dim's default when it is made of
// whole pages (112 at head dim 96 with pages of 16), else the largest block
// of whole pages below it (96 with pages of 32), or with pages larger than
// the default the largest power of two below it (64).
gpu.module @defaults [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d96_page16 {head_dim = 96 : i64, element_type = bf16, causal = false, kv_lengths = true, page_size = 16 : i64}
  kvpipe.attention_kernel @d96_page32 {head_dim = 96 : i64, element_type = bf16, causal = false, kv_lengths = true, page_size = 32 : i64}
  kvpipe.attention_kernel @d256_page128 {head_dim = 256 : i64, element_type = bf16, causal = false, kv_lengths = true, page_size = 128 : i64}
  kvpipe.attention_kernel @d128_explicit {head_dim = 128 : i64, element_type = bf16, causal = false, kv_lengths = true, page_size = 32 : i64, block_n = 64 : i64}
}
// CHECK-LABEL: gpu.func @d96_page16(
//  CHECK-SAME:   block_n = 112
//  CHECK-SAME:   k_map = {box = [1, 1, 16, 32], swizzle = 64 : i64}
// CHECK-LABEL: gpu.func @d96_page32(
//  CHECK-SAME:   block_n = 96
//  CHECK-SAME:   k_map = {box = [1, 1, 32, 32], swizzle = 64 : i64}
// CHECK-LABEL: gpu.func @d256_page128(
//  CHECK-SAME:   block_n = 64
//  CHECK-SAME:   k_map = {box = [1, 1, 64, 64], swizzle = 128 : i64}
// CHECK-LABEL: gpu.func @d128_explicit(
//  CHECK-SAME:   block_n = 64
//  CHECK-SAME:   k_map = {box = [1, 1, 32, 64], swizzle = 128 : i64}

// -----

gpu.module @m {
  // expected-error @+1 {{'page_size' must be 16, 32, 64, 128 or 256, got 8}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, kv_lengths = true, page_size = 8 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'page_size' must be 16, 32, 64, 128 or 256, got 48}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, kv_lengths = true, page_size = 48 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'page_size' needs 'kv_lengths' = true or 'varlen' = true (the length of each batch's row of the block table)}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, page_size = 64 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'block_n' (96) must be a multiple of 'page_size' (64) or divide it}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, kv_lengths = true, page_size = 64 : i64, block_n = 96 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'page_size' is not supported with 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, backward = true, page_size = 64 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'kv_lengths' is not supported with 'persistent'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, kv_lengths = true, persistent = true, page_size = 64 : i64}
}

// PTX, pages of 16: eight block-table loads, then K's 16 boxes of 2 KiB (8
// pages x 2 column blocks, at 2048-byte steps of the slot) whose barrier
// expects the whole slot, 128 x 128 x 2 bytes.
// PTX-LABEL: .entry decode_page16(
// PTX-COUNT-8: ld.global.b32
// PTX: cp.async.bulk.tensor.4d.shared::cta.global.tile.mbarrier::complete_tx::bytes [%rd[[SLOT:[0-9]+]]+32768]
// PTX-NEXT: cp.async.bulk.tensor.4d.shared::cta.global.tile.mbarrier::complete_tx::bytes [%rd[[SLOT]]+34816]
// PTX-COUNT-14: cp.async.bulk.tensor.4d
// PTX: mov.b32 %r[[BYTES:[0-9]+]], 32768;
// PTX-NEXT: mbarrier.arrive.expect_tx.shared.b64 %rd{{[0-9]+}}, [%rd{{[0-9]+}}+-16], %r[[BYTES]];
// PTX-LABEL: .entry decode_page256(
// ABI: "page_size": 16
// ABI: "page_size": 256
// Both kernels assemble without spills.
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
