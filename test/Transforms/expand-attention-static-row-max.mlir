// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx abi-file=%t.json" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// `static_row_max`: where the compiler bounds the score_mod's result
// (getScoreModBounds), the online softmax's running maximum is a constant:
// no row maxima, P = exp2(s c - m c) with m c a constant, O rescaled by 1
// (folded away). m is the bound, lowered where the scores span more than
// 100 in the exponent so that P stays at most 2^60; with f16 P (at most
// 2^15, at least 2^-14) only where the span is at most 29.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // Soft-cap 20: the fragment holds tanh(.) in [-1, 1], exponentiated with
  // 20 log2(e) = 28.85; the span 57.7 keeps m = 1: m c = 28.85.
  kvpipe.attention_kernel @softcap {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64, static_row_max = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %inv = arith.constant 0.05 : f32
    %cap = arith.constant 20.0 : f32
    %x = arith.mulf %s, %inv : f32
    %t = math.tanh %x fastmath<afn> : f32
    %capped = arith.mulf %t, %cap : f32
    kvpipe.yield %capped : f32
  }
  // Soft-cap 50 (Gemma 2): the span 144.3 is more than 100, so m = 1 -
  // 44.3 / 72.13 = 0.386 (P at most 2^44.3, at least 2^-100): m c = 27.87.
  kvpipe.attention_kernel @softcap50 {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64, static_row_max = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %cap = arith.constant 50.0 : f32
    %x = arith.divf %s, %cap : f32
    %t = math.tanh %x fastmath<afn> : f32
    %capped = arith.mulf %t, %cap : f32
    kvpipe.yield %capped : f32
  }
  // A clamp to [-5, 5], exponentiated with log2(e): m c = 5 log2(e).
  kvpipe.attention_kernel @clamp {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64, static_row_max = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %lo = arith.constant -5.0 : f32
    %hi = arith.constant 5.0 : f32
    %x = arith.maximumf %s, %lo : f32
    %y = arith.minimumf %x, %hi : f32
    kvpipe.yield %y : f32
  }
  // Not bounded (the score doubled; a clamp from below only; ALiBi's raw
  // scores): the running maximum stays.
  kvpipe.attention_kernel @doubled {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64, static_row_max = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %two = arith.constant 2.0 : f32
    %y = arith.mulf %s, %two : f32
    kvpipe.yield %y : f32
  }
  kvpipe.attention_kernel @floor_only {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64, static_row_max = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %lo = arith.constant -5.0 : f32
    %y = arith.maximumf %s, %lo : f32
    kvpipe.yield %y : f32
  }
  kvpipe.attention_kernel @alibi {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64, static_row_max = true, aux_types = [f32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0[%h] : f32
    %d = arith.subi %q, %kv : index
    %di = arith.index_cast %d : index to i32
    %df = arith.sitofp %di : i32 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.subf %s, %bias : f32
    kvpipe.yield %r : f32
  }
  // f16 P: at most 2^15, at least 2^-14 of the bound. Soft-cap 20's span
  // 57.7 is more than f16 holds (a row of scores near 0 would give P =
  // 2^-28.85, 0 in f16): the running maximum.
  kvpipe.attention_kernel @softcap_f16 {head_dim = 64 : i64, element_type = f16, causal = false, consumer_warpgroups = 1 : i64, static_row_max = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %inv = arith.constant 0.05 : f32
    %cap = arith.constant 20.0 : f32
    %x = arith.mulf %s, %inv : f32
    %t = math.tanh %x fastmath<afn> : f32
    %capped = arith.mulf %t, %cap : f32
    kvpipe.yield %capped : f32
  }
  // The clamp's span 14.43 fits f16: m = 5 - 0.43 / log2(e), m c = 6.786.
  kvpipe.attention_kernel @clamp_f16 {head_dim = 64 : i64, element_type = f16, causal = false, consumer_warpgroups = 1 : i64, static_row_max = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %lo = arith.constant -5.0 : f32
    %hi = arith.constant 5.0 : f32
    %x = arith.maximumf %s, %lo : f32
    %y = arith.minimumf %x, %hi : f32
    kvpipe.yield %y : f32
  }
  // Without the attribute a bounded region keeps the running maximum.
  kvpipe.attention_kernel @softcap_default {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64}
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

// CHECK-LABEL: gpu.func @softcap(
//   CHECK-DAG:   %[[C:.*]] = arith.constant 2.885390e+01 : f32
//   CHECK-DAG:   %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
//   CHECK-NOT:   kvpipe.fragment_row_max
//       CHECK:   kvpipe.fragment_exp2 %{{.*}}, %[[C]], %[[C]], %[[C]] :
//       CHECK:   kvpipe.fragment_rescale %{{.*}}, %[[ONE]], %[[ONE]]
//   CHECK-NOT:   kvpipe.fragment_row_max
//       CHECK: gpu.return

// CHECK-LABEL: gpu.func @softcap50(
//   CHECK-DAG:   %[[MC:.*]] = arith.constant 27.865{{[0-9]*}} : f32
//   CHECK-DAG:   %[[C:.*]] = arith.constant 72.1347{{[0-9]*}} : f32
//   CHECK-NOT:   kvpipe.fragment_row_max
//       CHECK:   kvpipe.fragment_exp2 %{{.*}}, %[[C]], %[[MC]], %[[MC]] :
//   CHECK-NOT:   kvpipe.fragment_row_max
//       CHECK: gpu.return

// CHECK-LABEL: gpu.func @clamp(
//   CHECK-DAG:   %[[MC:.*]] = arith.constant 7.21347{{[0-9]*}} : f32
//   CHECK-DAG:   %[[C:.*]] = arith.constant 1.44269{{[0-9]*}} : f32
//   CHECK-NOT:   kvpipe.fragment_row_max
//       CHECK:   kvpipe.fragment_exp2 %{{.*}}, %[[C]], %[[MC]], %[[MC]] :
//   CHECK-NOT:   kvpipe.fragment_row_max
//       CHECK: gpu.return

// CHECK-LABEL: gpu.func @doubled(
//       CHECK:   kvpipe.fragment_row_max
// CHECK-LABEL: gpu.func @floor_only(
//       CHECK:   kvpipe.fragment_row_max
// CHECK-LABEL: gpu.func @alibi(
//       CHECK:   kvpipe.fragment_row_max
// CHECK-LABEL: gpu.func @softcap_f16(
//       CHECK:   kvpipe.fragment_row_max

// CHECK-LABEL: gpu.func @clamp_f16(
//   CHECK-DAG:   %[[MC:.*]] = arith.constant 6.786{{[0-9]*}} : f32
//   CHECK-DAG:   %[[C:.*]] = arith.constant 1.44269{{[0-9]*}} : f32
//   CHECK-NOT:   kvpipe.fragment_row_max
//       CHECK:   kvpipe.fragment_exp2 %{{.*}}, %[[C]], %[[MC]], %[[MC]] :
//   CHECK-NOT:   kvpipe.fragment_row_max
//       CHECK: gpu.return

// CHECK-LABEL: gpu.func @softcap_default(
//       CHECK:   kvpipe.fragment_row_max
