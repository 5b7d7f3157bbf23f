// The modifiers in the decode kernels (docs/serving.md, docs/modifiers.md):
// pack-GQA rows are query heads of their own, so a region's head argument
// is each row's (the thread's two rows: two heads, two slopes), its query
// index the row's query position; split-KV tiles take the split's keys,
// whose indices are the keys' own. The mask_mod's tile bounds use the tile's
// query positions (queries_per_tile), not its packed rows.
// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // BLOOM-style ALiBi in a split, packed decode kernel over per-sequence
  // lengths: the slope is read at each row's head.
  kvpipe.attention_kernel @alibi_decode {head_dim = 128 : i64, element_type = bf16, causal = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>, kv_lengths = true, split_kv = true, pack_gqa = 4 : i64, consumer_warpgroups = 1 : i64, aux_types = [f32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0[%h] : f32
    %d = arith.subi %q, %kv : index
    %i = arith.index_cast %d : index to i32
    %f = arith.sitofp %i : i32 to f32
    %a = math.absf %f : f32
    %bias = arith.mulf %slope, %a : f32
    %r = arith.subf %s, %bias : f32
    kvpipe.yield %r : f32
  }
  // Gemma 2's soft-cap and a document mask (a mask the compiler cannot
  // bound) in a packed kernel of groups of 7 on 16-key pages.
  kvpipe.attention_kernel @softcap_documents {head_dim = 128 : i64, element_type = bf16, causal = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>, kv_lengths = true, page_size = 16 : i64, pack_gqa = 7 : i64, consumer_warpgroups = 1 : i64, aux_types = [i32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %inv = arith.constant 2.000000e-02 : f32
    %cap = arith.constant 5.000000e+01 : f32
    %x = arith.mulf %s, %inv : f32
    %t = math.tanh %x fastmath<afn> : f32
    %r = arith.mulf %t, %cap : f32
    kvpipe.yield %r : f32
  }
  mask_mod {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %dq = kvpipe.aux_load 0[%q] : i32
    %dk = kvpipe.aux_load 0[%kv] : i32
    %same = arith.cmpi eq, %dq, %dk : i32
    kvpipe.yield %same : i1
  }
  // A soft-cap in a split kernel: each split's log-sum-exp, by which the
  // combine kernel weighs the splits, takes the exponent's scale, log2(e)
  // times the cap folded out of the region (72.13), not the scale
  // parameter (the scores are already scaled).
  kvpipe.attention_kernel @softcap_split {head_dim = 64 : i64, element_type = bf16, causal = false, kv_lengths = true, split_kv = true, consumer_warpgroups = 1 : i64}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %inv = arith.constant 2.000000e-02 : f32
    %cap = arith.constant 5.000000e+01 : f32
    %x = arith.mulf %s, %inv : f32
    %t = math.tanh %x fastmath<afn> : f32
    %r = arith.mulf %t, %cap : f32
    kvpipe.yield %r : f32
  }
  // A window as a mask_mod in a split kernel packing groups of 8: the
  // split's keys; the blocks the window can reach, and the per-element
  // mask, from the tile's 8 query positions (not its 64 packed rows).
  kvpipe.attention_kernel @window_split {head_dim = 64 : i64, element_type = bf16, causal = false, kv_lengths = true, split_kv = true, pack_gqa = 8 : i64, consumer_warpgroups = 1 : i64}
  mask_mod {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %c127 = arith.constant 127 : index
    %lo = arith.subi %q, %c127 : index
    %after = arith.cmpi sge, %kv, %lo : index
    %before = arith.cmpi sle, %kv, %q : index
    %keep = arith.andi %after, %before : i1
    kvpipe.yield %keep : i1
  }
}

// CHECK-LABEL: gpu.func @alibi_decode(
// Row r of the warpgroup is query head head + r % 4 (setPackedRows).
//       CHECK:   %[[G0:.*]] = arith.remui %[[R0:.*]], %c4 : index
//       CHECK:   %[[HEAD0:.*]] = arith.addi %[[HEAD:.*]], %[[G0]] : index
//       CHECK:   %[[G1:.*]] = arith.remui %[[R1:.*]], %c4 : index
//       CHECK:   %[[HEAD1:.*]] = arith.addi %[[HEAD]], %[[G1]] : index
// The slope of each row half's own head.
//       CHECK:   scf.for
//       CHECK:   %[[H0:.*]] = arith.index_cast %[[HEAD0]] : index to i32
//  CHECK-NEXT:   %[[O0:.*]] = arith.extsi %[[H0]] : i32 to i64
//  CHECK-NEXT:   %[[A0:.*]] = llvm.getelementptr %[[AUX:.*]][%[[O0]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
//  CHECK-NEXT:   llvm.load %[[A0]] invariant
//       CHECK:   %[[H1:.*]] = arith.index_cast %[[HEAD1]] : index to i32
//  CHECK-NEXT:   %[[O1:.*]] = arith.extsi %[[H1]] : i32 to i64
//  CHECK-NEXT:   %[[A1:.*]] = llvm.getelementptr %[[AUX]][%[[O1]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
//  CHECK-NEXT:   llvm.load %[[A1]] invariant
// CHECK-LABEL: gpu.func @alibi_decode_combine(

// CHECK-LABEL: gpu.func @softcap_documents(
//       CHECK:   llvm.inline_asm "tanh.approx.f32 $0, $1;"

// CHECK-LABEL: gpu.func @softcap_split(
//       CHECK:   %[[EXPONENT:.*]] = arith.constant 72.1347{{[0-9]*}} : f32
//       CHECK:   %[[LSE:.*]] = llvm.getelementptr %[[LSEPARTIAL:arg12]][
//       CHECK:   %[[LOGSUM:.*]] = math.log2
//  CHECK-NEXT:   %[[MAX:.*]] = arith.mulf %{{.*}}, %[[EXPONENT]] : f32
//  CHECK-NEXT:   arith.addf %[[MAX]], %[[LOGSUM]] : f32
//       CHECK:   llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<1>
// CHECK-LABEL: gpu.func @softcap_split_combine(

// CHECK-LABEL: gpu.func @window_split(
// The tile's 8 query positions from block * 8: its keys from 127 before
// the first to the last (the block's end: + 8), then the split's share.
//       CHECK:   %[[QBLOCK:.*]] = arith.divui %block_id_x, %{{.*}} : index
//       CHECK:   %[[QROW:.*]] = arith.muli %[[QBLOCK]], %c8 : index
//       CHECK:   arith.addi %[[QROW]], %c-127 : index
//       CHECK:   arith.addi %[[QROW]], %c8 : index
// Per element where the window does not keep the whole block for the
// warpgroup's 8 positions (first + 7).
//       CHECK:   scf.for
//       CHECK:   arith.addi %{{.*}}, %c7 : index

// PTXAS-COUNT-7: 0 bytes spill stores, 0 bytes spill loads
