// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx

// The index arithmetic of a score_mod, inlined per score element:
// - an index expression converted to f32 is computed in f32 where every
//   intermediate is an integer of magnitude at most 2^24 (exact; sequences
//   of kernels with modifiers are below 2^23): ALiBi's |q - kv| is one
//   subtraction per row (q - first key), and per element the addition of
//   the key's column offset and |.| (a free operand modifier in SASS);
// - indices are clamped into the sequence only where they reach the index
//   of an aux read;
// - the float ops may contract into FMAs (no mul.rn/add.rn pairs).

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @alibi {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64, aux_types = [f32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0[%h] : f32
    %d = arith.subi %q, %kv : index
    %a = math.absi %d : index
    %ai = arith.index_cast %a : index to i32
    %af = arith.sitofp %ai : i32 to f32
    %bias = arith.mulf %slope, %af : f32
    %r = arith.subf %s, %bias : f32
    kvpipe.yield %r : f32
  }
  // A bias table indexed by (q, kv): both are clamped into the sequence.
  kvpipe.attention_kernel @bias_table {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64, aux_types = [f32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %n = arith.constant 4096 : index
    %row = arith.muli %q, %n : index
    %i = arith.addi %row, %kv : index
    %bias = kvpipe.aux_load 0[%i] : f32
    %r = arith.addf %s, %bias : f32
    kvpipe.yield %r : f32
  }
  // q * 4096 + kv can exceed 2^24: converted as an integer.
  // ALiBi as the Python tracer writes it (kvpipe.modifiers.alibi): |d| as
  // max(d, 0 - d), and a clamp of d into [-8, 8] (min(max(.))).
  kvpipe.attention_kernel @alibi_traced {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64, aux_types = [f32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0[%h] : f32
    %d = arith.subi %q, %kv : index
    %zero = arith.constant 0 : index
    %nd = arith.subi %zero, %d : index
    %a = arith.maxsi %d, %nd : index
    %lo = arith.constant -8 : index
    %hi = arith.constant 8 : index
    %c0 = arith.maxsi %d, %lo : index
    %c = arith.minsi %c0, %hi : index
    %ai = arith.index_cast %a : index to i32
    %af = arith.sitofp %ai : i32 to f32
    %ci = arith.index_cast %c : index to i32
    %cf = arith.sitofp %ci : i32 to f32
    %bias = arith.mulf %slope, %af : f32
    %r0 = arith.subf %s, %bias : f32
    %r = arith.addf %r0, %cf : f32
    kvpipe.yield %r : f32
  }
  kvpipe.attention_kernel @wide {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %n = arith.constant 4096 : index
    %row = arith.muli %q, %n : index
    %i = arith.addi %row, %kv : index
    %ii = arith.index_cast %i : index to i32
    %f = arith.sitofp %ii : i32 to f32
    %r = arith.addf %s, %f : f32
    kvpipe.yield %r : f32
  }
}

// CHECK-LABEL: gpu.func @alibi(
//   CHECK-NOT:   arith.minsi
//       CHECK:   scf.for
//       CHECK:     %[[ROW:.*]] = arith.sitofp %{{.*}} : i32 to f32
//       CHECK:     %[[KEY:.*]] = arith.sitofp %{{.*}} : i32 to f32
//       CHECK:     %[[D:.*]] = arith.subf %[[ROW]], %[[KEY]] : f32
//       CHECK:     %[[A0:.*]] = math.absf %[[D]] : f32
// score - slope * |d| is additive: the raw score minus (slope / scale) |d|,
// the slope divided by the scale once for the tile.
//       CHECK:     %[[SLOPE:.*]] = arith.mulf %{{.*}}, %[[INV:.*]] : f32
//       CHECK:     %[[NEG:.*]] = arith.negf %[[SLOPE]] : f32
//       CHECK:     %[[B0:.*]] = arith.mulf %[[A0]], %[[NEG]] fastmath<contract> : f32
//       CHECK:     arith.addf %{{.*}}, %[[B0]] fastmath<contract> : f32
// The next column: the same row difference, plus the column offset.
//       CHECK:     %[[D1:.*]] = arith.addf %[[D]], %{{.*}} : f32
//       CHECK:     math.absf %[[D1]] : f32
// One more conversion in all: the thread's second row.
//       CHECK:     arith.sitofp
//   CHECK-NOT:     arith.sitofp
//   CHECK-NOT:     math.absi
//       CHECK:     kvpipe.fragment_exp2
//   CHECK-NOT:     arith.sitofp

// CHECK-LABEL: gpu.func @bias_table(
//       CHECK:     arith.minsi
//       CHECK:     arith.minsi
//       CHECK:     arith.muli %{{.*}}, %c4096_i32 : i32
//       CHECK:     llvm.load %{{.*}} invariant

// The traced form takes the same float path: |d| from max(d, 0 - d), the
// clamp as maximumf / minimumf; no conversion per element.
// CHECK-LABEL: gpu.func @alibi_traced(
//       CHECK:   scf.for
//       CHECK:     %[[ROW:.*]] = arith.sitofp %{{.*}} : i32 to f32
//       CHECK:     %[[KEY:.*]] = arith.sitofp %{{.*}} : i32 to f32
//       CHECK:     %[[D:.*]] = arith.subf %[[ROW]], %[[KEY]] : f32
//       CHECK:     math.absf %[[D]] : f32
//       CHECK:     %[[C0:.*]] = arith.maximumf %[[D]], %{{.*}} : f32
//       CHECK:     arith.minimumf %[[C0]], %{{.*}} : f32
//       CHECK:     arith.sitofp
//   CHECK-NOT:     arith.sitofp
//   CHECK-NOT:     arith.maxsi
//       CHECK:     kvpipe.fragment_exp2
//   CHECK-NOT:     arith.sitofp

// CHECK-LABEL: gpu.func @wide(
//   CHECK-NOT:   arith.minsi
//       CHECK:     %[[I:.*]] = arith.addi %{{.*}}, %{{.*}} : i32
//       CHECK:     arith.sitofp %[[I]] : i32 to f32

// Per element one FMA of |d| with the tile's slope / scale into the raw
// score (the softmax then scales it as the plain kernel does).
// PTX-LABEL: .entry alibi(
//       PTX: abs.f32 [[A:%r[0-9]+]], %r{{[0-9]+}};
//       PTX: div.rn.f32
//  PTX-NEXT: mul.rn.f32 [[S:%r[0-9]+]],
//  PTX-NEXT: fma.rn.f32 %r{{[0-9]+}}, [[A]], [[S]], %r{{[0-9]+}};
//       PTX: abs.f32 [[A1:%r[0-9]+]], %r{{[0-9]+}};
//  PTX-NEXT: fma.rn.f32 %r{{[0-9]+}}, [[A1]], [[S]], %r{{[0-9]+}};
