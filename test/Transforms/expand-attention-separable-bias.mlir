// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// A separable bias (Modifiers.h: SeparableBias; the `separable_bias` tuning
// attribute, which expand-attention-score-mod-index-arith.mlir's ALiBi
// kernels go without): an additive score_mod
// `score - slope * |d|`, d linear in the query and key with a uniform rest
// (ALiBi, as the Python tracer writes it, with a shift read at run time).
// The softmax keeps the tile's scores shifted by a row term R = -F d(row,
// first row) (F = -slope / scale); in a block whose d keeps one sign (its
// corners say) the shifted score is the raw score plus G times the key's
// column offset (one FMA per element, G = +-F beta) and a row shift for the
// softmax; in a block d changes sign in, the region per element plus R.
// The maxima the epilogue's log-sum-exp takes are the unshifted ones.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @alibi {head_dim = 128 : i64, element_type = bf16, causal = true, aux_types = [f32, i32], separable_bias = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0[%h] : f32
    %z = arith.subi %q, %q : index
    %shift32 = kvpipe.aux_load 1[%z] : i32
    %shift = arith.index_cast %shift32 : i32 to index
    %d0 = arith.subi %q, %kv : index
    %d = arith.addi %d0, %shift : index
    %c0 = arith.constant 0 : index
    %n = arith.subi %c0, %d : index
    %a = arith.maxsi %d, %n : index
    %ai = arith.index_cast %a : index to i32
    %af = arith.sitofp %ai : i32 to f32
    %bias = arith.mulf %slope, %af : f32
    %r = arith.subf %s, %bias : f32
    kvpipe.yield %r : f32
  }
  // The same kernel without `separable_bias`: the region per element in
  // every block.
  kvpipe.attention_kernel @alibi_default {head_dim = 128 : i64, element_type = bf16, causal = true, aux_types = [f32]}
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
  // Not separable: the distance has no key term (a bias per row), or is
  // not linear (q * kv), or the bias is not uniform * |d| (a table).
  kvpipe.attention_kernel @rows_only {head_dim = 64 : i64, element_type = bf16, causal = false, aux_types = [f32], separable_bias = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0[%h] : f32
    %c3 = arith.constant 3 : index
    %d = arith.subi %q, %c3 : index
    %a = math.absi %d : index
    %ai = arith.index_cast %a : index to i32
    %af = arith.sitofp %ai : i32 to f32
    %bias = arith.mulf %slope, %af : f32
    %r = arith.subf %s, %bias : f32
    kvpipe.yield %r : f32
  }
  kvpipe.attention_kernel @product {head_dim = 64 : i64, element_type = bf16, causal = false, aux_types = [f32], separable_bias = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0[%h] : f32
    %d = arith.muli %q, %kv : index
    %a = math.absi %d : index
    %ai = arith.index_cast %a : index to i32
    %af = arith.sitofp %ai : i32 to f32
    %bias = arith.mulf %slope, %af : f32
    %r = arith.subf %s, %bias : f32
    kvpipe.yield %r : f32
  }
}

// CHECK-LABEL: gpu.func @alibi(
// Once per tile, before the K/V loop: F = -(slope / scale), d at (first
// row, first row) (the shift read once), and the row terms -F d(row, first
// row) (alpha = 1: d(first row) + row - first row), and the key term's
// factor G = F beta.
//       CHECK:   kvpipe.consumer_wait %{{.*}} : !kvpipe.pipeline<kv_stages = 1
//       CHECK:   %[[SLOPE:.*]] = llvm.load %{{.*}} invariant {{.*}} -> f32
//       CHECK:   %[[SHIFT:.*]] = llvm.load %{{.*}} invariant {{.*}} -> i32
//       CHECK:   %[[ORIGIN:.*]] = arith.addi %{{.*}}, %[[SHIFT]] : i32
//       CHECK:   %[[FS:.*]] = arith.mulf %[[SLOPE]], %{{.*}} : f32
//       CHECK:   %[[F:.*]] = arith.negf %[[FS]] : f32
//       CHECK:   %[[GB:.*]] = arith.mulf %[[F]], %cst{{.*}} : f32
//       CHECK:   %[[DR0:.*]] = arith.addi %[[ORIGIN]], %{{.*}} : i32
//       CHECK:   %[[D0:.*]] = arith.sitofp %[[DR0]] : i32 to f32
//       CHECK:   %[[FD0:.*]] = arith.mulf %[[F]], %[[D0]] : f32
//       CHECK:   %[[R0:.*]] = arith.negf %[[FD0]] : f32
//       CHECK:   %[[R1:.*]] = arith.negf %{{.*}} : f32
//       CHECK:   %[[LOOP:.*]]:7 = scf.for
//   CHECK-NOT:     llvm.load
// d over the warpgroup's 64 rows and the block's 128 keys (alpha 1, beta
// -1): the corner's value (the origin's minus the block's first key's
// offset from the first row) minus 127 at least, plus 63 at most.
//       CHECK:     %[[CORNER:.*]] = arith.subi %[[ORIGIN]], %{{.*}} : i32
//       CHECK:     %[[LOW:.*]] = arith.addi %[[CORNER]], %c-127_i32 : i32
//       CHECK:     %[[HIGH:.*]] = arith.addi %[[CORNER]], %c63_i32 : i32
// The causal mask keeps kv <= q, where d = origin + (q - kv) is at least the
// origin: the kept keys' lower bound (the diagonal's blocks take the
// one-sign path when the origin is not negative).
//       CHECK:     %[[KEPT:.*]] = arith.maxsi %[[LOW]], %[[ORIGIN]] : i32
//       CHECK:     %[[BELOW:.*]] = arith.cmpi sge, %[[KEPT]], %c0_i32 : i32
//       CHECK:     %[[ABOVE:.*]] = arith.cmpi sle, %[[HIGH]], %c0_i32 : i32
//       CHECK:     %[[ONESIGN:.*]] = arith.ori %[[BELOW]], %[[ABOVE]] : i1
//       CHECK:     %[[SEP:.*]]:3 = scf.if %[[ONESIGN]] -> (vector<64xf32>, f32, f32) {
// G negated above the diagonal; per element the key's column offset times
// G added (column 0 as it is, column 1 plus G).
//       CHECK:       %[[NG:.*]] = arith.negf %[[GB]] : f32
//       CHECK:       %[[G:.*]] = arith.select %[[BELOW]], %[[GB]], %[[NG]] : f32
//       CHECK:       %[[E0:.*]] = vector.extract %[[S:.*]][0] : f32 from vector<64xf32>
//       CHECK:       %[[E1:.*]] = vector.extract %[[S]][1] : f32 from vector<64xf32>
//       CHECK:       %[[K1:.*]] = arith.addf %[[E1]], %[[G]] fastmath<contract> : f32
//       CHECK:       %[[E4:.*]] = vector.extract %[[S]][4] : f32 from vector<64xf32>
//       CHECK:       %[[T8:.*]] = arith.mulf %[[G]], %cst{{.*}} fastmath<contract> : f32
//       CHECK:       arith.addf %[[E4]], %[[T8]] fastmath<contract> : f32
//   CHECK-NOT:       math.absf
//   CHECK-NOT:       arith.sitofp
//       CHECK:       %[[KEYS:.*]] = vector.from_elements %[[E0]], %[[K1]],
// The row shifts: G (thread's first key - first row), plus 2 R above.
//       CHECK:       %[[OFFSET:.*]] = arith.sitofp %{{.*}} : i32 to f32
//       CHECK:       %[[KEYSHIFT:.*]] = arith.mulf %[[G]], %[[OFFSET]] : f32
//       CHECK:       %[[TWICE0:.*]] = arith.addf %[[R0]], %[[R0]] : f32
//       CHECK:       %[[ROW0:.*]] = arith.select %[[BELOW]], %{{.*}}, %[[TWICE0]] : f32
//       CHECK:       %[[SHIFT0:.*]] = arith.addf %[[KEYSHIFT]], %[[ROW0]] : f32
//       CHECK:       scf.yield %[[KEYS]], %[[SHIFT0]], %{{.*}} : vector<64xf32>, f32, f32
// Where d changes sign: the region per element, shifted by R.
//       CHECK:     } else {
//       CHECK:       arith.sitofp
//       CHECK:       scf.yield %{{.*}}, %[[R0]], %[[R1]] : vector<64xf32>, f32, f32
//       CHECK:     }
// The causal mask on those scores, then the row maxima of the shifted
// scores (each lane's shift added before the quad's lanes combine: the key
// term is relative to the lane's first column).
//       CHECK:     kvpipe.fragment_row_max %{{.*}}[0] plus %[[SEP]]#1 : vector<64xf32>
//       CHECK:     kvpipe.fragment_row_max %{{.*}}[1] plus %[[SEP]]#2 : vector<64xf32>
//       CHECK:     kvpipe.fragment_exp2
// After the loop: the maxima without the row terms, for the log-sum-exp.
//       CHECK:   arith.subf %[[LOOP]]#3, %{{.*}} : f32
//       CHECK:   arith.subf %[[LOOP]]#4, %{{.*}} : f32

// CHECK-LABEL: gpu.func @alibi_default(
//   CHECK-NOT:   -> (vector<64xf32>, f32, f32)
//   CHECK-NOT:   plus
//       CHECK:   math.absf
//       CHECK:   kvpipe.fragment_exp2
// CHECK-LABEL: gpu.func @rows_only(
//   CHECK-NOT:   -> (vector<32xf32>, f32, f32)
//       CHECK:   kvpipe.fragment_exp2
// CHECK-LABEL: gpu.func @product(
//   CHECK-NOT:   -> (vector<32xf32>, f32, f32)
//       CHECK:   kvpipe.fragment_exp2

// PTXAS-NOT: bytes spill stores
// PTXAS: 0 bytes spill stores
