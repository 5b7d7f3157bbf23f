// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --kvpipe-lower-tiles --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx abi-file=%t.json" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// `bias_accumulator`: an additive score_mod's bias of each K/V block is S's
// initial accumulator (S = bias + Q K^T), computed after K's wait and before
// the QK wgmma (the step --kvpipe-overlap-softmax moves with the wgmma),
// instead of added to the retired scores: the bias's reads and arithmetic
// leave the path from S's retire to P. A separable bias (ALiBi with
// `separable_bias`) puts its key term there and keeps its row terms as the
// softmax's shifts; a score_mod that is not additive (the soft-cap) is as
// without the attribute.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // A relative-position bias from a table: its reads before the wgmma.
  kvpipe.attention_kernel @bias_table {head_dim = 64 : i64, element_type = bf16, causal = true, consumer_warpgroups = 1 : i64, bias_accumulator = true, aux_types = [f32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %d = arith.subi %q, %kv : index
    %bias = kvpipe.aux_load 0[%d] : f32
    %r = arith.addf %s, %bias : f32
    kvpipe.yield %r : f32
  }
  // ALiBi, separable: the key term's products (the slope's factor times a
  // constant column offset) in the one-sign blocks' initial accumulator.
  kvpipe.attention_kernel @alibi {head_dim = 128 : i64, element_type = bf16, causal = false, consumer_warpgroups = 2 : i64, bias_accumulator = true, separable_bias = true, aux_types = [f32]}
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
  kvpipe.attention_kernel @softcap {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64, bias_accumulator = true}
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

// CHECK-LABEL: gpu.func @bias_table(
//       CHECK:     %[[T0:.*]] = llvm.load %{{.*}} invariant
//  CHECK-NEXT:     %[[B0:.*]] = arith.mulf %[[T0]], %{{.*}} fastmath<contract> : f32
//       CHECK:     %[[INIT:.*]] = vector.from_elements %[[B0]],
//   CHECK-NOT:     llvm.load
//       CHECK:     %[[S:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}}, %[[INIT]] :
//  CHECK-NEXT:     %[[SR:.*]] = kvpipe.warpgroup_wait %[[S]] {pending = 0 : i64}
//  CHECK-NEXT:     kvpipe.consumer_release
//   CHECK-NOT:     llvm.load
//       CHECK:     kvpipe.fragment_row_max
//       CHECK: gpu.return

// CHECK-LABEL: gpu.func @alibi(
//       CHECK:     %[[SIGN:.*]]:3 = scf.if %{{.*}} -> (vector<64xf32>, f32, f32) {
//       CHECK:     %[[S:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}}, %[[SIGN]]#0 :
//  CHECK-NEXT:     %[[SR:.*]] = kvpipe.warpgroup_wait %[[S]] {pending = 0 : i64}
//  CHECK-NEXT:     kvpipe.consumer_release
//   CHECK-NOT:     scf.if %{{.*}} -> (vector<64xf32>, f32, f32)
//       CHECK:     kvpipe.fragment_row_max %{{.*}}[0] plus %[[SIGN]]#1
//       CHECK: gpu.return

// CHECK-LABEL: gpu.func @softcap(
//       CHECK:     %[[S:.*]] = kvpipe.warpgroup_mma %{{[^,]*}}, %{{[^,]*}} :
//       CHECK: gpu.return
