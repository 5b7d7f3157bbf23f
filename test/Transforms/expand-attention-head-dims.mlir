// RUN: kvpipe-opt %s -split-input-file --kvpipe-expand-attention --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s -split-input-file --kvpipe-expand-attention --kvpipe-verify-protocol -o /dev/null

// Head dims other than 64 and 128 (docs/performance.md, "Head dims"): the
// tiles, boxes, wgmma shapes and the output store follow the head dim of Q/K
// (`head_dim`) and of V/O (`value_head_dim`), each tile in the layout of
// AttentionConfig::swizzleBytesFor.

// Head dim 96: rows of 192 bytes are three column blocks of 32 elements with
// the 64-byte swizzle; three consumer warpgroups, 192 x 112 tiles.
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d96 {head_dim = 96 : i64, element_type = bf16, causal = true}
}

// CHECK-LABEL: gpu.func @d96(
//  CHECK-SAME: %[[Q:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 192, 32], element_type = bf16, swizzle = 64>,
//  CHECK-SAME: %[[K:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 112, 32], element_type = bf16, swizzle = 64>,
//  CHECK-SAME: %[[V:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 112, 32], element_type = bf16, swizzle = 64>,
//  CHECK-SAME: %[[O:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 64, 32], element_type = bf16, swizzle = 64>,
//  CHECK-SAME: block_m = 192 : i64, block_n = 112 : i64
//  CHECK-SAME: dynamic_shared_memory = 123904 : i64
//  CHECK-SAME: head_dim = 96 : i64
//  CHECK-SAME: o_map = {box = [1, 1, 64, 32], swizzle = 64 : i64}
//  CHECK-SAME: value_head_dim = 96 : i64
//  CHECK-SAME: nvvm.maxntid = array<i32: 512, 1, 1>
//       CHECK: memref.view {{.*}} to memref<3x192x32xbf16, #gpu.address_space<workgroup>>
//       CHECK: memref.view {{.*}} to memref<2x3x112x32xbf16, #gpu.address_space<workgroup>>
//       CHECK: memref.view {{.*}} to memref<2x3x112x32xbf16, #gpu.address_space<workgroup>>
//       CHECK: nvvm.setmaxregister decrease 32
//  CHECK-COUNT-3: kvpipe.tma_load %[[Q]]
//  CHECK-COUNT-3: kvpipe.tma_load %[[K]]
//  CHECK-COUNT-3: kvpipe.tma_load %[[V]]
//       CHECK: nvvm.setmaxregister increase 160
//       CHECK: kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64} : memref<3x64x32xbf16, {{.*}}>, memref<3x112x32xbf16, {{.*}}> -> vector<56xf32>
//       CHECK: kvpipe.warpgroup_mma {{.*}} {swizzle = 64 : i64, transpose_b} : vector<56xbf16>, memref<3x112x32xbf16, {{.*}}> -> vector<48xf32>
//       CHECK: kvpipe.store_fragment %{{.*}}, %{{.*}} {swizzle = 64 : i64} : vector<48xbf16>, memref<3x64x32xbf16
//  CHECK-COUNT-3: kvpipe.tma_store {{.*}}, %[[O]]
//       CHECK: gpu.return

// -----

// Head dim 192: 128 x 112 tiles, what 227 KiB hold with two stages.
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d192 {head_dim = 192 : i64, element_type = f16, causal = false}
}

// CHECK-LABEL: gpu.func @d192(
//  CHECK-SAME: %[[Q:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = f16, swizzle = 128>,
//  CHECK-SAME: %[[K:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 112, 64], element_type = f16, swizzle = 128>,
//  CHECK-SAME: %[[V:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 112, 64], element_type = f16, swizzle = 128>,
//  CHECK-SAME: %[[O:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 64, 64], element_type = f16, swizzle = 128>,
//  CHECK-SAME: dynamic_shared_memory = 222208 : i64
//  CHECK-SAME: nvvm.maxntid = array<i32: 384, 1, 1>
//       CHECK: memref.view {{.*}} to memref<3x128x64xf16, #gpu.address_space<workgroup>>
//       CHECK: memref.view {{.*}} to memref<2x3x112x64xf16, #gpu.address_space<workgroup>>
//       CHECK: memref.view {{.*}} to memref<2x3x112x64xf16, #gpu.address_space<workgroup>>
//  CHECK-COUNT-3: kvpipe.tma_load %[[Q]]
//  CHECK-COUNT-3: kvpipe.tma_load %[[K]]
//  CHECK-COUNT-3: kvpipe.tma_load %[[V]]
//       CHECK: nvvm.setmaxregister increase 240
//       CHECK: kvpipe.warpgroup_mma %{{.*}}, %{{.*}} : memref<3x64x64xf16, {{.*}}>, memref<3x112x64xf16, {{.*}}> -> vector<56xf32>
//       CHECK: kvpipe.warpgroup_mma {{.*}} {transpose_b} : vector<56xf16>, memref<3x112x64xf16, {{.*}}> -> vector<96xf32>
//       CHECK: kvpipe.store_fragment %{{.*}}, %{{.*}} : vector<96xf16>, memref<3x64x64xf16
//  CHECK-COUNT-3: kvpipe.tma_store {{.*}}, %[[O]]

// -----

// (192, 128): Q and K in three column blocks, V and O in two; the output is
// staged in the first two blocks of the warpgroup's own Q rows.
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d192v128 {head_dim = 192 : i64, value_head_dim = 128 : i64, element_type = bf16, causal = true}
}

// CHECK-LABEL: gpu.func @d192v128(
//  CHECK-SAME: %[[Q:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = bf16, swizzle = 128>,
//  CHECK-SAME: %[[K:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = bf16, swizzle = 128>,
//  CHECK-SAME: %[[V:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = bf16, swizzle = 128>,
//  CHECK-SAME: %[[O:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 64, 64], element_type = bf16, swizzle = 128>,
//  CHECK-SAME: dynamic_shared_memory = 214016 : i64
//  CHECK-SAME: head_dim = 192 : i64
//  CHECK-SAME: value_head_dim = 128 : i64
//       CHECK: %[[SQ:.*]] = memref.view {{.*}} to memref<3x128x64xbf16, #gpu.address_space<workgroup>>
//       CHECK: memref.view {{.*}} to memref<2x3x128x64xbf16, #gpu.address_space<workgroup>>
//       CHECK: memref.view {{.*}} to memref<2x2x128x64xbf16, #gpu.address_space<workgroup>>
//  CHECK-COUNT-3: kvpipe.tma_load %[[Q]]
//  CHECK-COUNT-3: kvpipe.tma_load %[[K]]
//  CHECK-COUNT-2: kvpipe.tma_load %[[V]]
//   CHECK-NOT: kvpipe.tma_load %[[V]]
//       CHECK: nvvm.setmaxregister increase 240
//       CHECK: %[[QROWS:.*]] = memref.subview %[[SQ]][0, %{{.*}}, 0] [3, 64, 64] [1, 1, 1]
//       CHECK: %[[OROWS:.*]] = memref.subview %[[SQ]][0, %{{.*}}, 0] [2, 64, 64] [1, 1, 1]
//       CHECK: kvpipe.warpgroup_mma %[[QROWS]], %{{.*}} : memref<3x64x64xbf16, {{.*}}>, memref<3x128x64xbf16, {{.*}}> -> vector<64xf32>
//       CHECK: kvpipe.warpgroup_mma {{.*}} {transpose_b} : vector<64xbf16>, memref<2x128x64xbf16, {{.*}}> -> vector<64xf32>
//       CHECK: kvpipe.store_fragment %{{.*}}, %[[OROWS]] : vector<64xbf16>, memref<2x64x64xbf16
//  CHECK-COUNT-2: kvpipe.tma_store {{.*}}, %[[O]]
//   CHECK-NOT: kvpipe.tma_store

// -----

// Head dim 256: 128 x 80 tiles, the O accumulator is 128 registers a thread.
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d256 {head_dim = 256 : i64, element_type = bf16, causal = true}
}

// CHECK-LABEL: gpu.func @d256(
//  CHECK-SAME: %[[Q:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = bf16, swizzle = 128>,
//  CHECK-SAME: %[[K:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 80, 64], element_type = bf16, swizzle = 128>,
//  CHECK-SAME: %[[V:arg[0-9]+]]: !kvpipe.tensor_map<box = [1, 1, 80, 64], element_type = bf16, swizzle = 128>,
//  CHECK-SAME: block_n = 80 : i64
//  CHECK-SAME: dynamic_shared_memory = 230400 : i64
//  CHECK-SAME: kv_stages = 2 : i64
//       CHECK: memref.view {{.*}} to memref<4x128x64xbf16, #gpu.address_space<workgroup>>
//       CHECK: memref.view {{.*}} to memref<2x4x80x64xbf16, #gpu.address_space<workgroup>>
//       CHECK: memref.view {{.*}} to memref<2x4x80x64xbf16, #gpu.address_space<workgroup>>
//  CHECK-COUNT-4: kvpipe.tma_load %[[Q]]
//  CHECK-COUNT-4: kvpipe.tma_load %[[K]]
//  CHECK-COUNT-4: kvpipe.tma_load %[[V]]
//       CHECK: kvpipe.warpgroup_mma %{{.*}}, %{{.*}} : memref<4x64x64xbf16, {{.*}}>, memref<4x80x64xbf16, {{.*}}> -> vector<40xf32>
//       CHECK: kvpipe.warpgroup_mma {{.*}} {transpose_b} : vector<40xbf16>, memref<4x80x64xbf16, {{.*}}> -> vector<128xf32>
//       CHECK: kvpipe.store_fragment %{{.*}}, %{{.*}} : vector<128xbf16>, memref<4x64x64xbf16
