// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=skeleton" --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

// `tensor_row_sums`: the softmax's row sums on the tensor cores. Each V slot
// holds one more column block, of ones, which the whole CTA writes before
// the pipelines exist (then a proxy fence: the wgmmas read it in the async
// proxy); `O += P [V | 1]` is one wgmma 8 columns wider than V, whose last 8
// accumulators are the row sums, rescaled with O; the loop adds no FADD row
// sums. Every lane of a quad holds the whole sum, so the epilogue, which adds
// the quad's partial sums, takes a quarter of it from each (exact).

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d64 {head_dim = 64 : i64, element_type = bf16, causal = false, tensor_row_sums = true}
  kvpipe.attention_kernel @d128_causal {head_dim = 128 : i64, element_type = f16, causal = true, tensor_row_sums = true}
  kvpipe.attention_kernel @d128_w3 {head_dim = 128 : i64, element_type = bf16, causal = false, consumer_warpgroups = 3 : i64, block_n = 80 : i64, tensor_row_sums = true}
  kvpipe.attention_kernel @d64_persistent {head_dim = 64 : i64, element_type = bf16, causal = true, persistent = true, consumer_warpgroups = 2 : i64, tensor_row_sums = true}
}

// CHECK-LABEL: gpu.func @d64(
//   CHECK-DAG:   %[[ONES:.*]] = arith.constant dense<1.000000e+00> : vector<8xbf16>
//   CHECK-DAG:   %[[QUARTER:.*]] = arith.constant 2.500000e-01 : f32
// The V ring's memory: two slots of [V | 1] blocks.
//       CHECK:   %[[VONES:.*]] = memref.view %{{.*}} to memref<2x2x128x64xbf16, #gpu.address_space<workgroup>>
//       CHECK:   scf.for
//       CHECK:     vector.store %[[ONES]], %[[VONES]][%c0, %c1, %{{.*}}, %{{.*}}]
//       CHECK:   scf.for
//       CHECK:     vector.store %[[ONES]], %[[VONES]][%c1, %c1, %{{.*}}, %{{.*}}]
//  CHECK-NEXT:   }
//  CHECK-NEXT:   nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
//  CHECK-NEXT:   kvpipe.create
//   CHECK-NOT:   kvpipe.fragment_row_sum
// The producer fills V's block of the slot; the wgmma reads both.
//       CHECK:   memref.subview %{{.*}}[%{{.*}}, 0, 0, 0] [1, 1, 128, 64]
//       CHECK:   kvpipe.fragment_rescale %{{.*}} {skip_unit} : vector<36xf32>
//       CHECK:   %[[SLOT:.*]] = kvpipe.index
//  CHECK-NEXT:   %[[WIDE:.*]] = memref.subview %[[VONES]][%[[SLOT]], 0, 0, 0] [1, 2, 128, 64]
//       CHECK:   kvpipe.warpgroup_mma %{{.*}}, %[[WIDE]], %{{.*}} {transpose_b} : vector<64xbf16>, memref<2x128x64xbf16, {{.*}}> -> vector<36xf32>
//   CHECK-NOT:   kvpipe.fragment_row_sum
//       CHECK:   %[[L0:.*]] = vector.extract %[[O:.*]][32] : f32 from vector<36xf32>
//       CHECK:   arith.mulf %[[L0]], %[[QUARTER]] : f32
//       CHECK:   %[[L1:.*]] = vector.extract %[[O]][34] : f32 from vector<36xf32>
//       CHECK:   arith.mulf %[[L1]], %[[QUARTER]] : f32
//       CHECK:   vector.shuffle %[[O]], %[[O]] [0, 1, {{.*}}, 31] : vector<36xf32>, vector<36xf32>
//       CHECK:   kvpipe.quad_sum
//       CHECK:   gpu.return

// At D 128, f16: V's two blocks and the ones block; N = 136.
// CHECK-LABEL: gpu.func @d128_causal(
//       CHECK:   memref<2x3x128x64xf16, #gpu.address_space<workgroup>>
//       CHECK:   vector.store %{{.*}}[%c0, %c2,
//       CHECK:   vector.store %{{.*}}[%c1, %c2,
//   CHECK-NOT:   kvpipe.fragment_row_sum
//       CHECK:   kvpipe.warpgroup_mma {{.*}} {transpose_b} : vector<64xf16>, memref<3x128x64xf16, {{.*}}> -> vector<68xf32>
//   CHECK-NOT:   kvpipe.fragment_row_sum
//       CHECK:   gpu.return

// CHECK-LABEL: gpu.func @d128_w3(
//       CHECK:   kvpipe.warpgroup_mma {{.*}} {transpose_b} : vector<40xbf16>, memref<3x80x64xbf16, {{.*}}> -> vector<68xf32>

// The persistent kernel fills the ones once; its tiles reuse them.
// CHECK-LABEL: gpu.func @d64_persistent(
//       CHECK:   nvvm.fence.proxy
//  CHECK-NEXT:   kvpipe.create
//       CHECK:   kvpipe.for_each_tile
//       CHECK:   kvpipe.warpgroup_mma {{.*}} -> vector<36xf32>

// Every kernel assembles without spills.
// PTXAS-COUNT-4: 0 bytes spill stores, 0 bytes spill loads
