// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file | FileCheck %s

// kvpipe.warpgroup_mma with transpose_a: A is MN-major, the logical [64][K]
// tile stored as [K][64] (M contiguous), as the backward's dS tile that
// kvpipe.store_fragment writes from dS^T. Its descriptor is the MN-major one
// of transpose_b: LBO = the block stride (4096 B for one [32][64] block: a
// single block of M, unused), SBO = 1024 B (the next 8 rows of K), 128B
// swizzle: (256 << 16) | (64 << 32) | (1 << 62) = 4611686293322072064;
// each k16 step adds 16 rows * 128 B = 2048 B (+128). NVVM's A layout is
// `col` (imm-trans-a = 1).

!a = memref<1x32x64xbf16, #gpu.address_space<workgroup>>
!k = memref<1x32x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @mn_major_a
// B's descriptor, then A's: both MN-major, of the same shape.
//       CHECK:   llvm.mlir.constant(4611686293322072064 : i64) : i64
//       CHECK:   llvm.mlir.constant(4611686293322072064 : i64) : i64
//       CHECK:   %[[DARAW:.*]] = llvm.or %{{.*}}, %{{.*}} : i64
//       CHECK:   %[[DA:.*]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %[[DARAW]] : (i64) -> i64
//       CHECK:   nvvm.wgmma.fence.aligned
//       CHECK:   nvvm.wgmma.mma_async %[[DA]], %{{.*}}, %{{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// B's k-step, then A's: 16 rows of 128 B further (128 in units of 16 B).
//       CHECK:   llvm.mlir.constant(128 : i64) : i64
//       CHECK:   %[[S1:.*]] = llvm.mlir.constant(128 : i64) : i64
//       CHECK:   %[[DA1:.*]] = llvm.add %[[DA]], %[[S1]] : i64
//       CHECK:   nvvm.wgmma.mma_async %[[DA1]], %{{.*}}, %{{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
//   CHECK-NOT:   nvvm.wgmma.mma_async
//       CHECK:   nvvm.wgmma.commit.group.sync.aligned
func.func @mn_major_a(%a: !a, %k: !k) -> vector<32xf32> {
  %d = kvpipe.warpgroup_mma %a, %k {transpose_a, transpose_b} : !a, !k -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

// Without transpose_a, A stays K-major (`row`).
!a = memref<1x64x64xf16, #gpu.address_space<workgroup>>
!b = memref<1x64x64xf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @k_major_a
//       CHECK:   nvvm.wgmma.mma_async {{.*}} A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
func.func @k_major_a(%a: !a, %b: !b) -> vector<32xf32> {
  %d = kvpipe.warpgroup_mma %a, %b : !a, !b -> vector<32xf32>
  return %d : vector<32xf32>
}
