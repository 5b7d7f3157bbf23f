// RUN: kvpipe-opt %s -split-input-file --kvpipe-expand-attention=stage=skeleton --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t.relbias_kernels.ptx
// RUN: FileCheck %s --check-prefix=SLOPES-PTX < %t.slopes_kernels.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.relbias_kernels.ptx -o %t.relbias.cubin %}
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.slopes_kernels.ptx -o %t.slopes.cubin %}
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.key_bias_kernels.ptx -o %t.key_bias.cubin %}
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.query_bias_kernels.ptx -o %t.query_bias.cubin %}

// Gradients of learnable auxiliary tensors (docs/modifiers.md): with
// `aux_grads = [0]` the backward's main kernel takes `aux0_grad`, an fp32
// buffer of the bias table's elements, and adds into it, for every element
// of S^T and every read of the table, the modified score's gradient
// P^T (dP^T - delta) (the masks' zeros included) times the region's
// derivative with respect to the value read -- 1 for an added bias, so the
// product folds away -- at the element the region read (the same offset).

gpu.module @relbias_kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @relbias {head_dim = 128 : i64, element_type = bf16, causal = true, backward = true, aux_types = [f32], aux_grads = array<i64: 0>}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %d = arith.subi %kv, %q : index
    %c16 = arith.constant 16 : index
    %cm16 = arith.constant -16 : index
    %lo = arith.maxsi %d, %cm16 : index
    %cl = arith.minsi %lo, %c16 : index
    %off = arith.addi %cl, %c16 : index
    %c33 = arith.constant 33 : index
    %row = arith.muli %h, %c33 : index
    %i = arith.addi %row, %off : index
    %bias = kvpipe.aux_load 0[%i] : f32
    %r = arith.addf %s, %bias : f32
    kvpipe.yield %r : f32
  }
}

// CHECK-LABEL: gpu.func @relbias(
//  CHECK-SAME:   %[[TABLE:arg16]]: !llvm.ptr<1>, %[[GRAD:arg17]]: !llvm.ptr<1>)
//  CHECK-SAME:   params = [{{.*}}"batch", "aux0", "aux0_grad"]
// The region's read of element 0's bias ...
//       CHECK:   %[[AT:.*]] = llvm.getelementptr %[[TABLE]][%[[OFFSET:.*]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// ... the masks applied to the fp32 P^T beside its element-type copy (the
// gradient's sum cancels: an element-type P^T was a relative error of up to
// 0.1 in ALiBi's slope on the H200) ...
//       CHECK:   %[[MASKED:.*]]:2 = scf.if %{{.*}} -> (vector<32xbf16>, vector<32xf32>)
// ... and, after dP^T, P^T (dP^T - delta) added at the same element: the
// index depends on both the query and the key, so one atomic per element.
//       CHECK:   %[[DIFF:.*]] = arith.subf %{{.*}}, %{{.*}} : vector<32xf32>
//  CHECK-NEXT:   %[[P16:.*]] = arith.extf %[[MASKED]]#0 : vector<32xbf16> to vector<32xf32>
//  CHECK-NEXT:   %[[DS:.*]] = arith.mulf %[[P16]], %[[DIFF]] : vector<32xf32>
//  CHECK-NEXT:   %[[G:.*]] = arith.mulf %[[MASKED]]#1, %[[DIFF]] : vector<32xf32>
//  CHECK-NEXT:   %[[G0:.*]] = vector.extract %[[G]][0] : f32 from vector<32xf32>
//  CHECK-NEXT:   %[[DST:.*]] = llvm.getelementptr %[[GRAD]][%[[OFFSET]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
//   CHECK-NOT:   gpu.shuffle
//       CHECK:   llvm.atomicrmw fadd %[[DST]], %[[G0]] monotonic : !llvm.ptr<1>, f32
// One addition per element of the thread's 32.
// CHECK-COUNT-31: llvm.atomicrmw fadd
//   CHECK-NOT:   llvm.atomicrmw
//       CHECK: gpu.return

// PTX-COUNT-32: atom.global.add.f32
// PTX-NOT: atom.global.add.f32

// -----

// Learnable per-head slopes (ALiBi): the index depends on the head only,
// the same for the whole fragment. The thread sums its 32 contributions,
// the warp sums them over its lanes (five shuffles), and lane 0 adds the
// warp's sum: one atomic per warp and tile instead of one per score.
gpu.module @slopes_kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @slopes {head_dim = 128 : i64, element_type = bf16, causal = true, backward = true, aux_types = [f32], aux_grads = array<i64: 0>}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0[%h] : f32
    %d = arith.subi %kv, %q : index
    %di = arith.index_cast %d : index to i32
    %df = arith.sitofp %di : i32 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.addf %s, %bias : f32
    kvpipe.yield %r : f32
  }
}

// CHECK-LABEL: gpu.func @slopes(
//       CHECK:   %[[LANE:.*]] = gpu.lane_id
//       CHECK:   %[[S1:.*]], %{{.*}} = gpu.shuffle xor %[[SUM:.*]], %c1_i32, %c32_i32 : f32
//       CHECK:   gpu.shuffle xor %{{.*}}, %c2_i32, %c32_i32 : f32
//       CHECK:   gpu.shuffle xor %{{.*}}, %c4_i32, %c32_i32 : f32
//       CHECK:   gpu.shuffle xor %{{.*}}, %c8_i32, %c32_i32 : f32
//       CHECK:   %[[R:.*]], %{{.*}} = gpu.shuffle xor %[[P16:.*]], %c16_i32, %c32_i32 : f32
//  CHECK-NEXT:   %[[TOTAL:.*]] = arith.addf %[[P16]], %[[R]] : f32
//       CHECK:   %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %c0_i32 : i32
//  CHECK-NEXT:   scf.if %[[FIRST]] {
//  CHECK-NEXT:     llvm.atomicrmw fadd %{{.*}}, %[[TOTAL]] monotonic : !llvm.ptr<1>, f32
//  CHECK-NEXT:   }
//   CHECK-NOT:   llvm.atomicrmw
//       CHECK: gpu.return

// SLOPES-PTX-COUNT-5: shfl.sync.bfly.b32
// SLOPES-PTX: atom.global.add.f32
// SLOPES-PTX-NOT: atom.global.add.f32

// -----

// A learnable per-key bias: in S^T the keys are the rows, so the thread
// sums each row half's 16 contributions, the quad combines its four lanes,
// and the quad's first lane adds: two atomics per quad.
gpu.module @key_bias_kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @key_bias {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true, aux_types = [f32], aux_grads = array<i64: 0>}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %bias = kvpipe.aux_load 0[%kv] : f32
    %r = arith.addf %s, %bias : f32
    kvpipe.yield %r : f32
  }
}

// CHECK-LABEL: gpu.func @key_bias(
//       CHECK:   gpu.shuffle xor %{{.*}}, %c1_i32, %c32_i32 : f32
//       CHECK:   gpu.shuffle xor %{{.*}}, %c2_i32, %c32_i32 : f32
//       CHECK:   arith.andi %{{.*}}, %c3_i32 : i32
//       CHECK:   scf.if
//  CHECK-NEXT:     llvm.atomicrmw fadd
//       CHECK:   gpu.shuffle xor %{{.*}}, %c1_i32, %c32_i32 : f32
//       CHECK:   gpu.shuffle xor %{{.*}}, %c2_i32, %c32_i32 : f32
//       CHECK:   scf.if
//  CHECK-NEXT:     llvm.atomicrmw fadd
//   CHECK-NOT:   llvm.atomicrmw
//       CHECK: gpu.return

// -----

// A learnable per-query bias: the queries are S^T's columns; elements i and
// i + 2 share one, the warp's eight quads combine it (xor 4, 8, 16), and the
// lanes of the first quad add: 16 atomics per lane of it.
gpu.module @query_bias_kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @query_bias {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true, aux_types = [f32], aux_grads = array<i64: 0>}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %bias = kvpipe.aux_load 0[%q] : f32
    %r = arith.addf %s, %bias : f32
    kvpipe.yield %r : f32
  }
}

// CHECK-LABEL: gpu.func @query_bias(
//       CHECK:   gpu.shuffle xor %{{.*}}, %c4_i32, %c32_i32 : f32
//       CHECK:   gpu.shuffle xor %{{.*}}, %c8_i32, %c32_i32 : f32
//       CHECK:   gpu.shuffle xor %{{.*}}, %c16_i32, %c32_i32 : f32
//       CHECK:   arith.andi %{{.*}}, %c28_i32 : i32
//       CHECK:   scf.if
//  CHECK-NEXT:     llvm.atomicrmw fadd
// CHECK-COUNT-15: llvm.atomicrmw fadd
//   CHECK-NOT:   llvm.atomicrmw
//       CHECK: gpu.return
