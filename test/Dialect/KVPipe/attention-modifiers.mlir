// RUN: kvpipe-opt %s | kvpipe-opt | FileCheck %s
// RUN: kvpipe-opt %s -mlir-print-op-generic | kvpipe-opt | FileCheck %s

// score_mod and mask_mod regions round-trip, with the auxiliary tensors they
// read; a declaration without them keeps its one-line form.

// CHECK-LABEL: gpu.module @kernels
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // CHECK: kvpipe.attention_kernel @plain {causal = true, element_type = bf16, head_dim = 128 : i64}
  // CHECK-NEXT: kvpipe.attention_kernel @alibi_window
  kvpipe.attention_kernel @plain {head_dim = 128 : i64, element_type = bf16, causal = true}
  // CHECK-SAME: aux_types = [f32]
  // CHECK-SAME: score_mod {
  // CHECK-NEXT: ^bb0(%[[S:.*]]: f32, %{{.*}}: index, %[[H:.*]]: index, %[[Q:.*]]: index, %[[KV:.*]]: index):
  // CHECK:        %[[SLOPE:.*]] = kvpipe.aux_load 0[%[[H]]] : f32
  // CHECK:        kvpipe.yield %{{.*}} : f32
  // CHECK-NEXT: } mask_mod {
  // CHECK-NEXT: ^bb0(%{{.*}}: index, %{{.*}}: index, %[[MQ:.*]]: index, %[[MKV:.*]]: index):
  // CHECK:        %[[KEEP:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}} : index
  // CHECK-NEXT:   kvpipe.yield %[[KEEP]] : i1
  kvpipe.attention_kernel @alibi_window {head_dim = 128 : i64, element_type = bf16, causal = false, aux_types = [f32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0[%h] : f32
    %d = arith.subi %q, %kv : index
    %di = arith.index_cast %d : index to i32
    %df = arith.sitofp %di : i32 to f32
    %a = math.absf %df : f32
    %bias = arith.mulf %slope, %a : f32
    %r = arith.subf %s, %bias : f32
    kvpipe.yield %r : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %d = arith.subi %q, %kv : index
    %w = arith.constant 256 : index
    %keep = arith.cmpi ult, %d, %w : index
    kvpipe.yield %keep : i1
  }
  // CHECK: kvpipe.attention_kernel @softcap {{{.*}}} score_mod {
  // CHECK:   math.tanh
  // CHECK-NOT: mask_mod
  kvpipe.attention_kernel @softcap {head_dim = 64 : i64, element_type = f16, causal = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %cap = arith.constant 30.0 : f32
    %x = arith.divf %s, %cap : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %t, %cap : f32
    kvpipe.yield %r : f32
  }
  // CHECK: kvpipe.attention_kernel @documents {{{.*}}} mask_mod {
  kvpipe.attention_kernel @documents {head_dim = 64 : i64, element_type = bf16, causal = false, aux_types = [i32]}
  mask_mod {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %dq = kvpipe.aux_load 0[%q] : i32
    %dk = kvpipe.aux_load 0[%kv] : i32
    %same = arith.cmpi eq, %dq, %dk : i32
    kvpipe.yield %same : i1
  }
}
