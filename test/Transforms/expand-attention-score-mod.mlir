// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx abi-file=%t.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=ABI < %t.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// A score_mod is inlined per element of the score fragment, on the scaled
// score (S * scale_log2 * ln 2 = S * scale); the softmax then exponentiates
// with log2(e), in the log-sum-exp too (times the region's final constant
// factor where it is folded: @softcap). An auxiliary tensor is a pointer
// parameter after the others, read with invariant loads; an approximate
// tanh (fastmath<afn>) is the hardware's tanh.approx.f32.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @alibi_softcap {head_dim = 64 : i64, element_type = bf16, causal = true, consumer_warpgroups = 1 : i64, aux_types = [f32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %inv = arith.constant 0.05 : f32
    %cap = arith.constant 20.0 : f32
    %x = arith.mulf %s, %inv : f32
    %t = math.tanh %x fastmath<afn> : f32
    %capped = arith.mulf %t, %cap : f32
    %slope = kvpipe.aux_load 0[%h] : f32
    %d = arith.subi %q, %kv : index
    %di = arith.index_cast %d : index to i32
    %df = arith.sitofp %di : i32 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.subf %capped, %bias : f32
    kvpipe.yield %r : f32
  }
  kvpipe.attention_kernel @softcap {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %inv = arith.constant 0.05 : f32
    %cap = arith.constant 20.0 : f32
    %x = arith.mulf %s, %inv : f32
    %t = math.tanh %x fastmath<afn> : f32
    %capped = arith.mulf %t, %cap : f32
    kvpipe.yield %capped : f32
  }
  kvpipe.attention_kernel @no_fold {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %c = arith.constant 0.5 : f32
    %neg = arith.constant -2.0 : f32
    %x = arith.mulf %s, %c : f32
    %y = arith.addf %x, %s : f32
    %r = arith.mulf %y, %neg : f32
    kvpipe.yield %r : f32
  }
}

// CHECK-LABEL: gpu.func @alibi_softcap(
//  CHECK-SAME:   %[[SCALE_LOG2:[^:]*]]: f32, %{{[^:]*}}: i32, %{{[^:]*}}: i32, %[[AUX0:[^:]*]]: !llvm.ptr<1>)
//  CHECK-SAME:   aux_types = ["f32"]
//  CHECK-SAME:   params = ["q_map", "k_map", "v_map", "o_map", "lse", "seq_q", "seq_kv", "heads_per_kv_head", "scale_log2", "heads_q", "batch", "aux0"]
//  CHECK-SAME:   score_mod = true
//   CHECK-DAG: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
//   CHECK-DAG: %[[LN2:.*]] = arith.constant 0.693147182 : f32
//       CHECK: scf.for
//       CHECK:   %[[S:.*]] = kvpipe.warpgroup_wait
//       CHECK:   %[[SCALE:.*]] = arith.mulf %[[SCALE_LOG2]], %[[LN2]] : f32
// The score enters the region only through `s * 0.05`: one multiplication
// per element, by scale * 0.05 (ScoreModScaling).
//       CHECK:   %[[FACTOR:.*]] = arith.mulf %[[SCALE]], %{{.*}} : f32
//       CHECK:   %[[E0:.*]] = vector.extract %[[S]][0] : f32 from vector<64xf32>
//       CHECK:   %[[SCALED:.*]] = arith.mulf %[[E0]], %[[FACTOR]] fastmath<contract> : f32
//       CHECK:   llvm.inline_asm "tanh.approx.f32 $0, $1;", "=f,f" %[[SCALED]] : (f32) -> f32
//       CHECK:   %[[ADDR:.*]] = llvm.getelementptr %[[AUX0]][%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
//       CHECK:   llvm.load %[[ADDR]] invariant {alignment = 4 : i64} : !llvm.ptr<1> -> f32
//       CHECK:   %[[MOD:.*]] = vector.from_elements
//  The causal mask comes after the score_mod.
//       CHECK:   scf.if
//       CHECK:     arith.select %{{.*}}, %[[MOD]]
//       CHECK:   kvpipe.fragment_exp2 %{{.*}}, %[[LOG2E]]

// A soft-cap alone: the region's result `tanh(.) * 20` leaves as tanh(.),
// and the exponent (in the softmax and the log-sum-exp) multiplies by
// 20 log2(e) = 28.85: per element one multiplication, the tanh and the
// softmax's FMA, as the plain kernel's FMA.
// CHECK-LABEL: gpu.func @softcap(
//       CHECK: %[[CAPLOG2E:.*]] = arith.constant 2.885390e+01 : f32
//       CHECK: scf.for
//       CHECK:   %[[E:.*]] = vector.extract %{{.*}}[0] : f32 from vector<64xf32>
//       CHECK:   %[[X:.*]] = arith.mulf %[[E]], %{{.*}} fastmath<contract> : f32
//       CHECK:   %[[T:.*]] = llvm.inline_asm "tanh.approx.f32 $0, $1;", "=f,f" %[[X]] : (f32) -> f32
//   CHECK-NOT:   arith.mulf %[[T]]
//       CHECK:   vector.from_elements %[[T]],
//       CHECK:   kvpipe.fragment_exp2 %{{.*}}, %[[CAPLOG2E]]
//       CHECK: arith.mulf %{{.*}}, %[[CAPLOG2E]]
//       CHECK: gpu.return

// PTX: .entry alibi_softcap(
// PTX: tanh.approx.f32
// PTX: ld.global.nc.b32
// ABI: "params": [
// ABI: "aux0"
// ABI: "score_mod": true

// What does not fold: the score used twice (the product is not its only
// use) and a negative output factor (the row maxima would be minima): the
// region's ops stay, and the exponent is log2(e).
// CHECK-LABEL: gpu.func @no_fold(
//   CHECK-DAG: %[[L2E:.*]] = arith.constant 1.44269502 : f32
//   CHECK-DAG: %[[NEG:.*]] = arith.constant -2.000000e+00 : f32
//       CHECK: scf.for
//       CHECK:   %[[SC:.*]] = arith.mulf %{{.*}}, %{{.*}} fastmath<contract> : f32
//       CHECK:   %[[X:.*]] = arith.mulf %[[SC]], %{{.*}} fastmath<contract> : f32
//       CHECK:   %[[Y:.*]] = arith.addf %[[X]], %[[SC]] fastmath<contract> : f32
//       CHECK:   arith.mulf %[[Y]], %[[NEG]] fastmath<contract> : f32
//       CHECK:   kvpipe.fragment_exp2 %{{.*}}, %[[L2E]]

