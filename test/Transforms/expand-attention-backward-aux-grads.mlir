// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// Gradients of learnable auxiliary tensors (docs/modifiers.md): with
// `aux_grads = [0]` the backward's main kernel takes `aux0_grad`, an fp32
// buffer of the bias table's elements, and adds into it, for every element
// of S^T and every read of the table, the modified score's gradient
// P^T (dP^T - delta) (the masks' zeros included) times the region's
// derivative with respect to the value read -- 1 for an added bias, so the
// product folds away -- at the element the region read (the same offset).

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
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
// ... and, after dP^T, P^T (dP^T - delta) added at the same element.
//       CHECK:   %[[DIFF:.*]] = arith.subf %{{.*}}, %{{.*}} : vector<32xf32>
//  CHECK-NEXT:   %[[P:.*]] = arith.extf %{{.*}} : vector<32xbf16> to vector<32xf32>
//  CHECK-NEXT:   %[[G:.*]] = arith.mulf %[[P]], %[[DIFF]] : vector<32xf32>
//  CHECK-NEXT:   %[[G0:.*]] = vector.extract %[[G]][0] : f32 from vector<32xf32>
//  CHECK-NEXT:   %[[DST:.*]] = llvm.getelementptr %[[GRAD]][%[[OFFSET]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
//  CHECK-NEXT:   llvm.atomicrmw fadd %[[DST]], %[[G0]] monotonic : !llvm.ptr<1>, f32
// One addition per element of the thread's 32.
// CHECK-COUNT-31: llvm.atomicrmw fadd

// PTX-COUNT-32: atom.global.add.f32
