// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --canonicalize --cse | FileCheck %s --check-prefix=OVERLAP
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// `separable_bias_mma`: ALiBi's key term (expand-attention-separable-bias.mlir)
// by one more wgmma k-step instead of an FMA per element. Row n of a
// constant shared-memory tile holds n (the key's offset in the block) in
// each of its 16 columns; the A fragment holds G = +-F beta in three parts
// (bf16 roundings of G and of the remainders) in columns 0-2, so that
// S = G n + Q K^T in every row. Where d changes sign in the block the
// k-step's A is zero and the region runs per element as before.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @alibi {head_dim = 128 : i64, element_type = bf16, causal = false, consumer_warpgroups = 3 : i64, block_n = 80 : i64, overlap_softmax = true, separable_bias = true, separable_bias_mma = true, aux_types = [f32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0[%h] : f32
    %d = arith.subi %q, %kv : index
    %c0 = arith.constant 0 : index
    %n = arith.subi %c0, %d : index
    %a = arith.maxsi %d, %n : index
    %ai = arith.index_cast %a : index to i32
    %af = arith.sitofp %ai : i32 to f32
    %bias = arith.mulf %slope, %af : f32
    %r = arith.subf %s, %bias : f32
    kvpipe.yield %r : f32
  }
  // A score_mod that is not a separable bias: the tuning changes nothing
  // (no key offsets tile, no k-step).
  kvpipe.attention_kernel @softcap {head_dim = 128 : i64, element_type = bf16, causal = false, consumer_warpgroups = 3 : i64, block_n = 80 : i64, separable_bias = true, separable_bias_mma = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %inv = arith.constant 0.05 : f32
    %cap = arith.constant 20.0 : f32
    %x = arith.mulf %s, %inv : f32
    %t = math.tanh %x fastmath<afn> : f32
    %capped = arith.mulf %t, %cap : f32
    kvpipe.yield %capped : f32
  }
}

// CHECK-LABEL: gpu.func @alibi(
// The key offsets tile after the rings, written by every thread before the
// pipelines exist: row n's 16 columns hold n.
//       CHECK:   %[[OFFSETS:.*]] = memref.view %{{.*}} to memref<1x80x16xbf16, #gpu.address_space<workgroup>>
//       CHECK:   scf.for %{{.*}} = %thread_id_x to %c160 step %c512 {
//       CHECK:     %[[ROW:.*]] = arith.divui %{{.*}}, %c2 : index
//       CHECK:     %[[ROWI:.*]] = arith.index_cast %[[ROW]] : index to i32
//       CHECK:     %[[N:.*]] = arith.uitofp %[[ROWI]] : i32 to bf16
//       CHECK:     %[[NS:.*]] = vector.broadcast %[[N]] : bf16 to vector<8xbf16>
//       CHECK:     vector.store %[[NS]], %[[OFFSETS]][%c0, %[[ROW]], %{{.*}}]
//       CHECK:   nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
//       CHECK:   kvpipe.create
// Per tile: G split in three parts, in the quad's lanes 0 (columns 0, 1)
// and 1 (column 2) of the A fragment; the same for -G.
//       CHECK:   %[[G:.*]] = arith.mulf %{{.*}}, %cst{{.*}} : f32
//       CHECK:   %[[HI:.*]] = arith.truncf %[[G]] : f32 to bf16
//       CHECK:   %[[HIF:.*]] = arith.extf %[[HI]] : bf16 to f32
//       CHECK:   %[[R:.*]] = arith.subf %[[G]], %[[HIF]] : f32
//       CHECK:   %[[MID:.*]] = arith.truncf %[[R]] : f32 to bf16
//       CHECK:   %[[MIDF:.*]] = arith.extf %[[MID]] : bf16 to f32
//       CHECK:   %[[R2:.*]] = arith.subf %[[R]], %[[MIDF]] : f32
//       CHECK:   %[[LO:.*]] = arith.truncf %[[R2]] : f32 to bf16
//       CHECK:   %[[QUAD:.*]] = arith.remui %{{.*}}, %c4 : index
//       CHECK:   %[[FIRST:.*]] = arith.cmpi eq, %[[QUAD]], %c0 : index
//       CHECK:   %[[SECOND:.*]] = arith.cmpi eq, %[[QUAD]], %c1 : index
//       CHECK:   %[[LOSEL:.*]] = arith.select %[[SECOND]], %[[LO]], %[[ZERO:.*]] : bf16
//       CHECK:   %[[EVEN:.*]] = arith.select %[[FIRST]], %[[HI]], %[[LOSEL]] : bf16
//       CHECK:   %[[ODD:.*]] = arith.select %[[FIRST]], %[[MID]], %[[ZERO]] : bf16
//       CHECK:   %[[APOS:.*]] = vector.from_elements %[[EVEN]], %[[ODD]], %[[EVEN]], %[[ODD]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]] : vector<8xbf16>
//       CHECK:   %[[NEGG:.*]] = arith.negf %[[G]] : f32
//       CHECK:   %[[ANEG:.*]] = vector.from_elements
// Per K/V block: its sign tests choose A, the k-step writes S and Q K^T
// accumulates onto it.
//       CHECK:   %[[ONE:.*]] = arith.ori %[[BELOW:.*]], %{{.*}} : i1
//       CHECK:   %[[SIGNED:.*]] = arith.select %[[BELOW]], %[[APOS]], %[[ANEG]] : vector<8xbf16>
//       CHECK:   %[[A:.*]] = arith.select %[[ONE]], %[[SIGNED]], %{{.*}} : vector<8xbf16>
//       CHECK:   %[[KEYTERM:.*]] = kvpipe.warpgroup_mma %[[A]], %[[OFFSETS]] {swizzle = 32 : i64} : vector<8xbf16>, memref<1x80x16xbf16, #gpu.address_space<workgroup>> -> vector<40xf32>
//  CHECK-NEXT:   %[[S:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}}, %[[KEYTERM]] :
//  CHECK-NEXT:   %[[SR:.*]] = kvpipe.warpgroup_wait %[[S]] {pending = 0 : i64}
// The one-sign blocks take S as it is, and the row shifts G (first key -
// first row), uniform across the quad's lanes (plus 2 R above the diagonal).
//       CHECK:   scf.if %[[ONE]] -> (vector<40xf32>, f32, f32) {
//   CHECK-NOT:     vector.extract
//       CHECK:     arith.select %[[BELOW]], %[[G]], %[[NEGG]] : f32
//   CHECK-NOT:     vector.extract
//       CHECK:     scf.yield %[[SR]], %{{.*}}, %{{.*}} : vector<40xf32>, f32, f32
//       CHECK:   } else {
//       CHECK:     math.absf

// --kvpipe-overlap-softmax moves the QK step with both wgmmas: in the
// pipelined loop the next block's k-step and Q K^T, then the previous
// block's P V, and S's retire leaves P V in flight (both of S's groups are
// older).
// OVERLAP-LABEL: gpu.func @alibi(
//       OVERLAP:   scf.for %{{.*}} = %c1 to
//       OVERLAP:     %[[KEYTERM:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 32 : i64} : vector<8xbf16>
//  OVERLAP-NEXT:     %[[S:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}}, %[[KEYTERM]] : memref
//       OVERLAP:     kvpipe.warpgroup_mma %{{.*}}, %{{.*}}, %{{.*}} {transpose_b}
//       OVERLAP:     kvpipe.warpgroup_wait %[[S]] {pending = 1 : i64}

// CHECK-LABEL: gpu.func @softcap(
//  CHECK-SAME:   dynamic_shared_memory = 132096
//   CHECK-NOT:   memref<1x80x16xbf16
//   CHECK-NOT:   vector<8xbf16>
//       CHECK:   gpu.return

// PTXAS-NOT: bytes spill stores
// PTXAS: 0 bytes spill stores
