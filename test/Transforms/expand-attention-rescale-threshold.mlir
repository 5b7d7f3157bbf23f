// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=skeleton" --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

// `rescale_threshold`: when the online softmax moves a row's running maximum.
// The default (8, FA4's conditional rescaling) keeps it until a block's
// maximum passes it by more than 8 in the exponent, so that O's rescale is
// exactly 1 in most iterations and skipped (fragment_rescale's skip_unit,
// lowered to a vote and a branch in test/Transforms/lower-fragment-ops.mlir);
// 0 moves it on every increase and still skips; -1 is the skeleton's form,
// a rescale in every iteration.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @default {head_dim = 128 : i64, element_type = bf16, causal = false}
  kvpipe.attention_kernel @exact {head_dim = 64 : i64, element_type = f16, causal = true, rescale_threshold = 0 : i64}
  kvpipe.attention_kernel @every {head_dim = 128 : i64, element_type = bf16, causal = true, rescale_threshold = -1 : i64}
}

// CHECK-LABEL: gpu.func @default(
//  CHECK-SAME:   %[[C:arg8]]: f32
//   CHECK-DAG:   %[[T:.*]] = arith.constant 8.000000e+00 : f32
//       CHECK:   scf.for
//       CHECK:     %[[MAX:.*]] = kvpipe.fragment_row_max %{{.*}}[0] : vector<64xf32>
//       CHECK:     %[[NEW:.*]] = arith.maxnumf %[[M:.*]], %[[MAX]] : f32
//       CHECK:     %[[RUNNING:.*]] = arith.mulf %[[M]], %[[C]] : f32
//       CHECK:     %[[BOUND:.*]] = arith.addf %[[RUNNING]], %[[T]] : f32
//       CHECK:     %[[BLOCK:.*]] = arith.mulf %[[MAX]], %[[C]] : f32
//       CHECK:     %[[GROWS:.*]] = arith.cmpf ogt, %[[BLOCK]], %[[BOUND]] : f32
//       CHECK:     arith.select %[[GROWS]], %[[NEW]], %[[M]] : f32
//       CHECK:     kvpipe.fragment_exp2
//       CHECK:     kvpipe.fragment_rescale %{{.*}} {skip_unit} : vector<64xf32>

// CHECK-LABEL: gpu.func @exact(
//   CHECK-NOT:   arith.cmpf ogt
//       CHECK:   kvpipe.fragment_rescale %{{.*}} {skip_unit} : vector<32xf32>

// CHECK-LABEL: gpu.func @every(
//   CHECK-NOT:   skip_unit
//       CHECK:   kvpipe.fragment_rescale %{{.*}} : vector<64xf32>
//   CHECK-NOT:   skip_unit
//       CHECK:   gpu.return

// Every kernel assembles without spills.
// PTXAS-COUNT-3: 0 bytes spill stores, 0 bytes spill loads
