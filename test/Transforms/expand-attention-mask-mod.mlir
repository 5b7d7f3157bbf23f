// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx abi-file=%t.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=ABI < %t.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// A mask_mod is inlined per element (-inf where it yields false), after the
// built-in masks. The compiler reads its shape: comparisons of the query and
// key indices with constants become the K/V block range of each Q block
// (blocks outside are never loaded, in the producer and the consumers) and a
// per-block test that skips the per-element mask where every key is kept.
// What it cannot read (a document id from a tensor) is masked element by
// element in every visited block, and reported in the ABI.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // A causal window of 256 keys, `q - kv <u 256`: 0 <= q - kv <= 255.
  kvpipe.attention_kernel @window {head_dim = 128 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64}
  mask_mod {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %d = arith.subi %q, %kv : index
    %w = arith.constant 256 : index
    %keep = arith.cmpi ult, %d, %w : index
    kvpipe.yield %keep : i1
  }
  // Prefix-LM: the first 100 keys, and the others causally.
  kvpipe.attention_kernel @prefix_lm {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64}
  mask_mod {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %causal = arith.cmpi sle, %kv, %q : index
    %p = arith.constant 100 : index
    %prefix = arith.cmpi slt, %kv, %p : index
    %keep = arith.ori %causal, %prefix : i1
    kvpipe.yield %keep : i1
  }
  // Documents: ids read from a tensor, which the analysis cannot reason about.
  kvpipe.attention_kernel @documents {head_dim = 64 : i64, element_type = bf16, causal = true, consumer_warpgroups = 1 : i64, aux_types = [i32]}
  mask_mod {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %dq = kvpipe.aux_load 0[%q] : i32
    %dk = kvpipe.aux_load 0[%kv] : i32
    %same = arith.cmpi eq, %dq, %dk : i32
    kvpipe.yield %same : i1
  }
}

// The window's Q block of 64 rows from q0 keeps keys [q0 - 255, q0 + 63]:
// its first K/V block holds max(q0 - 255, 0), its last the key before
// min(seq_kv, q0 + 64).
// CHECK-LABEL: gpu.func @window(
//  CHECK-SAME:   %{{[^:]*}}: i32, %[[SKV32:[^:]*]]: i32,
//  CHECK-SAME:   mask_mod = true, mask_mod_shape = "proven", mask_mod_unproven = []
//   CHECK-DAG: %[[CM255:.*]] = arith.constant -255 : index
//       CHECK: %[[SKV:.*]] = arith.index_cast %[[SKV32]] : i32 to index
//       CHECK: %[[Q0:.*]] = arith.muli %block_id_x, %c64 : index
//       CHECK: %[[LO:.*]] = arith.addi %[[Q0]], %[[CM255]] : index
//       CHECK: %[[HI1:.*]] = arith.addi %[[Q0]], %c64 : index
//       CHECK: %[[END0:.*]] = arith.minsi %[[SKV]], %[[HI1]] : index
//       CHECK: %[[END:.*]] = arith.maxsi %[[END0]], %c0 : index
//       CHECK: %[[LO0:.*]] = arith.maxsi %[[LO]], %c0 : index
//       CHECK: %[[FIRST:.*]] = arith.minsi %[[LO0]], %[[END]] : index
//       CHECK: %[[FIRSTBLOCK:.*]] = arith.divui %[[FIRST]], %c128 : index
//       CHECK: %[[SPAN:.*]] = arith.subi %[[END]], %{{.*}} : index
//       CHECK: %[[COUNT:.*]] = arith.ceildivui %[[SPAN]], %c128 : index
// The producer loads only those blocks.
//       CHECK: kvpipe.warp_roles producer
//       CHECK:   scf.for %{{.*}} = %c0 to %[[COUNT]]
//       CHECK:     arith.addi %[[FIRSTBLOCK]],
//       CHECK:     kvpipe.tma_load
// The consumer: the per-element mask only where the block is not fully kept
// for the warpgroup's rows [r0, r0 + 63]: kv - q <= 0 and q - kv - 255 <= 0
// at the worst corners.
//       CHECK: consumers(1)
//       CHECK:   scf.for %{{.*}} = %c0 to %[[COUNT]]
//       CHECK:     %[[KEPT0:.*]] = arith.cmpi sle, %{{.*}}, %c0 : index
//       CHECK:     %[[KEPT1:.*]] = arith.cmpi sle, %{{.*}}, %c0 : index
//       CHECK:     %[[KEPT:.*]] = arith.andi %[[KEPT0]], %[[KEPT1]] : i1
//       CHECK:     scf.if %[[KEPT]] -> (vector<64xf32>) {
//  CHECK-NEXT:       scf.yield
//  CHECK-NEXT:     } else {
// The region's index arithmetic is done in i32 per element.
//       CHECK:       arith.cmpi ult, %{{.*}}, %c256_i32 : i32
//       CHECK:       %[[KEEP:.*]] = vector.from_elements %{{.*}} : vector<64xi1>
//       CHECK:       arith.select %[[KEEP]], %{{.*}}, %{{.*}} : vector<64xi1>, vector<64xf32>

// Prefix-LM: an or of a causal and a prefix bound; keys up to
// max(q0 + 63, 99) are kept by some row, none is bounded below.
// CHECK-LABEL: gpu.func @prefix_lm(
//  CHECK-SAME:   mask_mod_shape = "proven"
//       CHECK:   %[[Q0:.*]] = arith.muli %block_id_x, %c64 : index
//       CHECK:   %[[LAST:.*]] = arith.addi %[[Q0]], %c63 : index
//       CHECK:   %[[HI:.*]] = arith.maxsi %[[LAST]], %c99 : index
//       CHECK:   arith.addi %[[HI]], %c1 : index
// The blocks the shape does not prove kept take the region per
// element.
//       CHECK: consumers(1)
//       CHECK:   scf.for
//       CHECK:     vector.from_elements %{{.*}} : vector<64xi1>
//       CHECK:     kvpipe.fragment_row_max

// Documents: unknown, every visited block masked per element (the test of
// a fully kept block folds to false, and its branch away), reading the ids
// of the thread's (clamped) rows and columns.
// CHECK-LABEL: gpu.func @documents(
//  CHECK-SAME:   mask_mod_shape = "unknown", mask_mod_unproven = ["arith.cmpi at
//       CHECK: consumers(1)
//       CHECK:   scf.for
//       CHECK:     kvpipe.warpgroup_wait
//       CHECK:     %[[ID:.*]] = llvm.load %{{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> i32
//       CHECK:     arith.cmpi eq, %[[ID]], %{{.*}} : i32
//       CHECK:     kvpipe.fragment_row_max

// ABI: "mask_mod_shape": "proven"
// ABI: "mask_mod_shape": "proven"
// ABI: "mask_mod_shape": "unknown"
