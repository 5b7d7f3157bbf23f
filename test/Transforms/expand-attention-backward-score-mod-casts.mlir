// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --canonicalize --cse | FileCheck %s

// A score_mod that converts a comparison of the score to a float (what
// `score * (score > 0)` traces to) is differentiable: the conversion's
// derivative is zero almost everywhere, so d(s * c)/ds = c.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @relu {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %zero = arith.constant 0.0 : f32
    %pos = arith.cmpf ogt, %s, %zero : f32
    %c = arith.uitofp %pos : i1 to f32
    %r = arith.mulf %s, %c : f32
    kvpipe.yield %r : f32
  }
}

// CHECK-LABEL: gpu.func @relu(
//       CHECK:   %[[POS:.*]] = arith.cmpf ogt, %[[S:.*]], %{{.*}} : f32
//       CHECK:   %[[C:.*]] = arith.uitofp %[[POS]] : i1 to f32
//       CHECK:   arith.mulf %[[S]], %[[C]]
// The derivative is the conversion itself (1 * c).
//       CHECK:   vector.from_elements %[[C]],
