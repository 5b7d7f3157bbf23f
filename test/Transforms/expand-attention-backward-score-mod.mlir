// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx abi-file=%t.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// A score_mod in the backward (docs/modifiers.md): the region is inlined per
// element of S^T on the scaled score, together with its derivative with
// respect to that score, built op by op next to the values (forward mode,
// Modifiers.cpp). P^T is recomputed from the modified score (exponent in
// log2(e): the forward's log-sum-exp is of the modified scores), and
// dS^T = P^T d (dP^T - delta), the product zero where P^T is; the masks
// set P^T and P^T d (in the element type) to 0.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // Soft-capping: 20 tanh(s / 20), whose derivative is 1 - tanh(s / 20)^2.
  kvpipe.attention_kernel @softcap {head_dim = 64 : i64, element_type = bf16, causal = true, backward = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %inv = arith.constant 0.05 : f32
    %cap = arith.constant 20.0 : f32
    %x = arith.mulf %s, %inv : f32
    %t = math.tanh %x : f32
    %capped = arith.mulf %t, %cap : f32
    kvpipe.yield %capped : f32
  }
  // ALiBi adds to the score: derivative 1, no multiply; the slope is the
  // main kernel's aux0.
  kvpipe.attention_kernel @alibi {head_dim = 128 : i64, element_type = bf16, causal = false, backward = true, aux_types = [f32]}
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
  // The other rules: exp, divf (quotient rule), maximumf (the chosen
  // operand's derivative), select on a comparison of the score.
  kvpipe.attention_kernel @rules {head_dim = 64 : i64, element_type = f16, causal = false, backward = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %e = math.exp %s : f32
    %r = arith.divf %s, %e : f32
    %floor = arith.constant -3.0 : f32
    %m = arith.maximumf %r, %floor : f32
    %zero = arith.constant 0.0 : f32
    %neg = arith.cmpf olt, %s, %zero : f32
    %y = arith.select %neg, %m, %s : f32
    kvpipe.yield %y : f32
  }
}

// CHECK-LABEL: gpu.func @softcap(
//  CHECK-SAME:   %{{[^:]*}}: f32, %[[SCALE:[^:]*]]: f32, %{{[^:]*}}: i32, %{{[^:]*}}: i32) kernel
//  CHECK-SAME:   score_mod = true
//   CHECK-DAG:   %[[LOG2E:.*]] = arith.constant dense<1.44269502> : vector<32xf32>
//   CHECK-DAG:   %[[CAP:.*]] = arith.constant 2.000000e+01 : f32
//   CHECK-DAG:   %[[INV:.*]] = arith.constant 5.000000e-02 : f32
//   CHECK-DAG:   %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
//   CHECK-DAG:   %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<32xf32>
//       CHECK:   consumers(2)
//       CHECK:     scf.for
// The log-sum-exp of the columns before the wait, then per element: the
// scaled score, the region, and the derivative chain (d x = 1 / 20; d tanh
// = (1 - y^2) d x; d (20 y) = 20 d tanh).
//       CHECK:       %[[LSE:.*]] = vector.from_elements
//       CHECK:       %[[ST:.*]] = kvpipe.warpgroup_wait %{{.*}} {pending = 1 : i64}
//       CHECK:       %[[E0:.*]] = vector.extract %[[ST]][0] : f32 from vector<32xf32>
//  CHECK-NEXT:       %[[S0:.*]] = arith.mulf %[[E0]], %[[SCALE]]{{( fastmath<contract>)?}} : f32
//  CHECK-NEXT:       %[[X0:.*]] = arith.mulf %[[S0]], %[[INV]]{{( fastmath<contract>)?}} : f32
//  CHECK-NEXT:       %[[Y0:.*]] = math.tanh %[[X0]]{{( fastmath<contract>)?}} : f32
//  CHECK-NEXT:       %[[YY0:.*]] = arith.mulf %[[Y0]], %[[Y0]] : f32
//  CHECK-NEXT:       %[[OM0:.*]] = arith.subf %[[ONE]], %[[YY0]] : f32
//  CHECK-NEXT:       %[[DT0:.*]] = arith.mulf %[[OM0]], %[[INV]] : f32
//  CHECK-NEXT:       %[[V0:.*]] = arith.mulf %[[Y0]], %[[CAP]]{{( fastmath<contract>)?}} : f32
//  CHECK-NEXT:       %[[D0:.*]] = arith.mulf %[[DT0]], %[[CAP]] : f32
//       CHECK:       %[[VALUES:.*]] = vector.from_elements %[[V0]], {{.*}} : vector<32xf32>
//  CHECK-NEXT:       %[[DERIVS:.*]] = vector.from_elements %[[D0]], {{.*}} : vector<32xf32>
//  CHECK-NEXT:       %[[NEGLSE:.*]] = arith.negf %[[LSE]] : vector<32xf32>
//  CHECK-NEXT:       %[[EXPONENT:.*]] = math.fma %[[VALUES]], %[[LOG2E]], %[[NEGLSE]] : vector<32xf32>
//  CHECK-NEXT:       %[[P:.*]] = math.exp2 %[[EXPONENT]] fastmath<afn> : vector<32xf32>
// P^T rounded two at a time (one cvt.rn.bf16x2 per pair, packedTrunc).
//  CHECK-NEXT:       vector.extract %[[P]][0] : f32 from vector<32xf32>
//  CHECK-NEXT:       vector.extract %[[P]][1] : f32 from vector<32xf32>
//  CHECK-NEXT:       nvvm.convert.f32x2.to.bf16x2 %{{.*}}, %{{.*}} {rnd = #nvvm.fp_rnd_mode<rn>} : vector<2xbf16>
//       CHECK:       %[[P16:.*]] = vector.from_elements %{{.*}} : vector<32xbf16>
//  CHECK-NEXT:       %[[VANISHES:.*]] = arith.cmpf oeq, %[[P]], %[[ZERO]] : vector<32xf32>
//  CHECK-NEXT:       %[[PD:.*]] = arith.mulf %[[P]], %[[DERIVS]] : vector<32xf32>
//  CHECK-NEXT:       %[[PDZ:.*]] = arith.select %[[VANISHES]], %[[ZERO]], %[[PD]] : vector<32xi1>, vector<32xf32>
// P^T d rounded two at a time too.
//  CHECK-NEXT:       vector.extract %[[PDZ]][0] : f32 from vector<32xf32>
//  CHECK-NEXT:       vector.extract %[[PDZ]][1] : f32 from vector<32xf32>
//  CHECK-NEXT:       nvvm.convert.f32x2.to.bf16x2 %{{.*}}, %{{.*}} {rnd = #nvvm.fp_rnd_mode<rn>} : vector<2xbf16>
//       CHECK:       %[[PD16:.*]] = vector.from_elements %{{.*}} : vector<32xbf16>
// The masks set both to 0.
//       CHECK:       %[[MASKED:.*]]:2 = scf.if %{{.*}} -> (vector<32xbf16>, vector<32xbf16>) {
//       CHECK:         %[[M0:.*]] = arith.select %[[VALID:.*]], %[[P16]], %[[ZERO16:.*]] : vector<32xi1>, vector<32xbf16>
//  CHECK-NEXT:         %[[M1:.*]] = arith.select %[[VALID]], %[[PD16]], %[[ZERO16]] : vector<32xi1>, vector<32xbf16>
//  CHECK-NEXT:         scf.yield %[[M0]], %[[M1]] : vector<32xbf16>, vector<32xbf16>
//       CHECK:       %[[DP:.*]] = arith.subf %{{.*}}, %{{.*}} : vector<32xf32>
//  CHECK-NEXT:       %[[PDF:.*]] = arith.extf %[[MASKED]]#1 : vector<32xbf16> to vector<32xf32>
//  CHECK-NEXT:       %[[DS:.*]] = arith.mulf %[[PDF]], %[[DP]] : vector<32xf32>
// dV takes P^T itself.
//       CHECK:       kvpipe.warpgroup_mma %[[MASKED]]#0, %{{.*}}, %{{.*}} {transpose_b}

// CHECK-LABEL: gpu.func @alibi(
//  CHECK-SAME:   %[[ASCALELOG2:[^:]*]]: f32, %[[ASCALE:[^:]*]]: f32, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %[[AUX0:[^:]*]]: !llvm.ptr<1>) kernel
//  CHECK-SAME:   "batch", "aux0"]
//       CHECK:   consumers(2)
//       CHECK:       %[[INVSCALE:.*]] = arith.divf %{{.*}}, %[[ASCALE]] : f32
//       CHECK:       llvm.getelementptr %[[AUX0]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
//       CHECK:       %[[SLOPE:.*]] = llvm.load %{{.*}} invariant {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// In the raw domain as the forward: s - slope / scale * |q - kv| (one FMA
// per element), exponentiated with the plain kernel's scale.
//       CHECK:       %[[RAWSLOPE:.*]] = arith.mulf %[[SLOPE]], %[[INVSCALE]] : f32
//  CHECK-NEXT:       %[[NEGSLOPE:.*]] = arith.negf %[[RAWSLOPE]] : f32
//  CHECK-NEXT:       %[[TERM:.*]] = arith.mulf %{{.*}}, %[[NEGSLOPE]] fastmath<contract> : f32
//  CHECK-NEXT:       arith.addf %{{.*}}, %[[TERM]] fastmath<contract> : f32
//       CHECK:       vector.broadcast %[[ASCALELOG2]] : f32 to vector<32xf32>
//       CHECK:       %[[P:.*]] = math.exp2 %{{.*}} : vector<32xf32>
// P^T rounded two at a time (one cvt.rn.bf16x2 per pair, packedTrunc).
//  CHECK-NEXT:       vector.extract %[[P]][0] : f32 from vector<32xf32>
//  CHECK-NEXT:       vector.extract %[[P]][1] : f32 from vector<32xf32>
//  CHECK-NEXT:       nvvm.convert.f32x2.to.bf16x2 %{{.*}}, %{{.*}} {rnd = #nvvm.fp_rnd_mode<rn>} : vector<2xbf16>
//       CHECK:       %[[P16:.*]] = vector.from_elements %{{.*}} : vector<32xbf16>
//   CHECK-NOT:       arith.cmpf oeq
//       CHECK:       %[[MASKED:.*]] = scf.if %{{.*}} -> (vector<32xbf16>) {
//       CHECK:       %[[PF:.*]] = arith.extf %[[MASKED]] : vector<32xbf16> to vector<32xf32>
//  CHECK-NEXT:       arith.mulf %[[PF]], %{{.*}} : vector<32xf32>

// CHECK-LABEL: gpu.func @rules(
//       CHECK:   consumers(2)
//       CHECK:       %[[S:.*]] = arith.mulf %{{.*}}, %{{.*}}{{( fastmath<contract>)?}} : f32
//  CHECK-NEXT:       %[[E:.*]] = math.exp %[[S]]{{( fastmath<contract>)?}} : f32
//  CHECK-NEXT:       %[[R:.*]] = arith.divf %[[S]], %[[E]]{{( fastmath<contract>)?}} : f32
// d (s / e) = (1 - (s / e) d e) / e, with d e = e.
//  CHECK-NEXT:       %[[RDE:.*]] = arith.mulf %[[R]], %[[E]] : f32
//  CHECK-NEXT:       %[[NUM:.*]] = arith.subf %{{.*}}, %[[RDE]] : f32
//  CHECK-NEXT:       %[[DR:.*]] = arith.divf %[[NUM]], %[[E]] : f32
//  CHECK-NEXT:       %[[M:.*]] = arith.maximumf %[[R]], %{{.*}}{{( fastmath<contract>)?}} : f32
//  CHECK-NEXT:       %[[GE:.*]] = arith.cmpf oge, %[[R]], %{{.*}} : f32
//  CHECK-NEXT:       %[[DM:.*]] = arith.select %[[GE]], %[[DR]], %{{.*}} : f32
//  CHECK-NEXT:       %[[NEG:.*]] = arith.cmpf olt, %[[S]], %{{.*}}{{( fastmath<contract>)?}} : f32
//  CHECK-NEXT:       arith.select %[[NEG]], %[[M]], %[[S]] : f32
//  CHECK-NEXT:       arith.select %[[NEG]], %[[DM]], %{{.*}} : f32

// The soft-cap's tanh is libdevice's here (no fastmath<afn>), in the value
// and, through it, in the derivative.
// PTX: .entry softcap(
// PTX: ex2.approx
// P^T's rounding is packed: no scalar bf16 conversion (F2F) in the kernels.
// PTX-NOT: cvt.rn.bf16.f32
// PTX: cvt.rn.bf16x2.f32
