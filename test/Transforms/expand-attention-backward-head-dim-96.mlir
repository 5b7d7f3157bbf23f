// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// The backward at head dim 96 (docs/backward.md): every shared-memory tile
// in the head dim's layout, the 64-byte swizzle with column blocks of 32
// (AttentionConfig::swizzleBytesFor), so that each wgmma reads both its
// operands in one swizzle -- dS (keys x 64 queries) too, in two blocks. Three
// column blocks are not split between the two consumers: they take turns by
// Q block, each computing dQ 32 columns at a time (64 x 32, 16 fp32 per
// thread), staged (64 x 96 fp32) and added by one bulk reduction.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @bwd {head_dim = 96 : i64, element_type = bf16, causal = true, backward = true}
}

// CHECK-LABEL: gpu.func @bwd(
//  CHECK-SAME:   !kvpipe.tensor_map<box = [1, 1, 64, 32], element_type = bf16, swizzle = 64>
//  CHECK-SAME:   !kvpipe.tensor_map<box = [1, 1, 128, 32], element_type = bf16, swizzle = 64>
// The ABI's maps are the parameters' types (withTensorMapABI): the launcher
// encodes 32-column boxes with the 64-byte swizzle, as the code expects.
//  CHECK-SAME:   dk_map = {box = [1, 1, 64, 32], swizzle = 64 : i64}
//  CHECK-SAME:   do_map = {box = [1, 1, 64, 32], swizzle = 64 : i64}
//  CHECK-SAME:   dv_map = {box = [1, 1, 64, 32], swizzle = 64 : i64}
//  CHECK-SAME:   k_map = {box = [1, 1, 128, 32], swizzle = 64 : i64}
//  CHECK-SAME:   q_map = {box = [1, 1, 64, 32], swizzle = 64 : i64}
//  CHECK-SAME:   v_map = {box = [1, 1, 128, 32], swizzle = 64 : i64}
// K and V; the Q and dO rings; dS: [buffers][2 blocks][128 keys][32].
//       CHECK:   memref<3x128x32xbf16, #gpu.address_space<workgroup>>
//       CHECK:   memref<3x128x32xbf16, #gpu.address_space<workgroup>>
//       CHECK:   memref<2x3x64x32xbf16, #gpu.address_space<workgroup>>
//       CHECK:   memref<2x3x64x32xbf16, #gpu.address_space<workgroup>>
//       CHECK:   memref<2x2x128x32xbf16, #gpu.address_space<workgroup>>
// The producer loads each row's three column blocks.
//   CHECK-COUNT-3:   kvpipe.tma_load %{{.*}} : !kvpipe.tensor_map<box = [1, 1, 128, 32], element_type = bf16, swizzle = 64>
// The consumer's dQ staging tile: 64 x 96 fp32.
//       CHECK:   memref<6144xf32, #gpu.address_space<workgroup>>
// S^T and dP^T over the three column blocks; dV and dK 64 x 96 (48 fp32).
//       CHECK:   kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64} : memref<3x64x32xbf16
//       CHECK:   kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64} : memref<3x64x32xbf16
//       CHECK:   kvpipe.warpgroup_mma %{{.*}} {swizzle = 64 : i64, transpose_b} : vector<32xbf16>, memref<3x64x32xbf16, {{.*}}> -> vector<48xf32>
//       CHECK:   kvpipe.warpgroup_mma %{{.*}} {swizzle = 64 : i64, transpose_b} : vector<32xbf16>, memref<3x64x32xbf16, {{.*}}> -> vector<48xf32>
// dS^T into this consumer's keys of both blocks.
//       CHECK:   kvpipe.store_fragment %{{.*}} {swizzle = 64 : i64} : vector<32xbf16>, memref<2x64x32xbf16
// dQ in the warpgroup's turn: A the whole dS buffer (MN-major, two blocks),
// B one column block of K, three times.
//       CHECK:   scf.if
//   CHECK-COUNT-3:   kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64, transpose_a, transpose_b} : memref<2x128x32xbf16, {{.*}}>, memref<1x128x32xbf16, {{.*}}> -> vector<16xf32>
//       CHECK:   llvm.inline_asm has_side_effects "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], $2;", "l,r,r,~{memory}" %{{.*}}, %{{.*}}, %c24576_i32
