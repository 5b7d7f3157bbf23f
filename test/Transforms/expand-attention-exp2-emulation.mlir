// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=skeleton" --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

// `exp2_emulation`: of every 8 exponentials of P, that many on the FMA pipe
// (kvpipe.fragment_exp2's `emulated`, lowered in
// test/Transforms/lower-fragment-ops.mlir); the default computes all on the
// SFU. With a soft-cap score_mod (whose tanh is an SFU op as well) and at
// head dim 64, where the SFU's 16 results a cycle bound the softmax.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @plain {head_dim = 64 : i64, element_type = bf16, causal = false}
  kvpipe.attention_kernel @emulated {head_dim = 64 : i64, element_type = bf16, causal = true, exp2_emulation = 2 : i64}
  kvpipe.attention_kernel @softcap {head_dim = 128 : i64, element_type = bf16, causal = false, exp2_emulation = 4 : i64}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %cap = arith.constant 30.0 : f32
    %x = arith.divf %s, %cap : f32
    %t = math.tanh %x : f32
    %y = arith.mulf %t, %cap : f32
    kvpipe.yield %y : f32
  }
}

// CHECK-LABEL: gpu.func @plain(
//   CHECK-NOT:   emulated
//       CHECK:   kvpipe.fragment_exp2 %{{.*}} : vector<64xf32>
// CHECK-LABEL: gpu.func @emulated(
//       CHECK:   kvpipe.fragment_exp2 %{{.*}} {emulated = 2 : i64} : vector<64xf32>
// CHECK-LABEL: gpu.func @softcap(
//       CHECK:   math.tanh
//       CHECK:   kvpipe.fragment_exp2 %{{.*}} {emulated = 4 : i64} : vector<64xf32>

// Every kernel assembles without spills.
// PTXAS-COUNT-3: 0 bytes spill stores, 0 bytes spill loads
