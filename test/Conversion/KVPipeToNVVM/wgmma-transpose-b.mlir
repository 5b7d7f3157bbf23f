// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file | FileCheck %s

// kvpipe.warpgroup_mma with transpose_b: B is MN-major, the logical [K][N]
// tile (V of O = P V) stored as N/W column blocks of K rows. Its descriptor
// (verified on the H200 for a [64][128] bf16 V, shared/docs/gpu-workflow.md):
// LBO = the block stride (8192 B: the next 64 columns of N), SBO = 1024 B
// (the next 8 rows of K), 128B swizzle:
//   (512 << 16) | (64 << 32) | (1 << 62) = 4611686293338849280
// and each k16 step adds 16 rows * 128 B = 2048 B (+128). NVVM's B layout is
// `row` (imm-trans-b = 1); A stays K-major.

!a = memref<64x64xbf16, #gpu.address_space<workgroup>>
!v = memref<2x64x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @mn_major
//       CHECK:   %[[VADDR:.*]] = llvm.ptrtoint %{{.*}} : !llvm.ptr<3> to i64
//       CHECK:   %[[VSHR:.*]] = llvm.lshr %[[VADDR]], %{{.*}} : i64
//       CHECK:   %[[VSTART:.*]] = llvm.and %[[VSHR]], %{{.*}} : i64
//       CHECK:   %[[VHI:.*]] = llvm.mlir.constant(4611686293338849280 : i64) : i64
//       CHECK:   %[[DVRAW:.*]] = llvm.or %[[VSTART]], %[[VHI]] : i64
//       CHECK:   %[[DV:.*]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %[[DVRAW]] : (i64) -> i64
// A is K-major: the usual high bits.
//       CHECK:   %[[AHI:.*]] = llvm.mlir.constant(4611686293305360384 : i64) : i64
//       CHECK:   %[[DARAW:.*]] = llvm.or %{{.*}}, %[[AHI]] : i64
//       CHECK:   %[[DA:.*]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %[[DARAW]] : (i64) -> i64
//       CHECK:   nvvm.wgmma.fence.aligned
//       CHECK:   nvvm.wgmma.mma_async %[[DA]], %[[DV]], %{{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
//       CHECK:   %[[S1:.*]] = llvm.mlir.constant(128 : i64) : i64
//       CHECK:   %[[DV1:.*]] = llvm.add %[[DV]], %[[S1]] : i64
//       CHECK:   %[[A1:.*]] = llvm.mlir.constant(2 : i64) : i64
//       CHECK:   %[[DA1:.*]] = llvm.add %[[DA]], %[[A1]] : i64
//       CHECK:   nvvm.wgmma.mma_async %[[DA1]], %[[DV1]], %{{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
//       CHECK:   %[[S2:.*]] = llvm.mlir.constant(256 : i64) : i64
//       CHECK:   llvm.add %[[DV]], %[[S2]] : i64
//       CHECK:   nvvm.wgmma.mma_async
//       CHECK:   %[[S3:.*]] = llvm.mlir.constant(384 : i64) : i64
//       CHECK:   llvm.add %[[DV]], %[[S3]] : i64
//       CHECK:   nvvm.wgmma.mma_async
//   CHECK-NOT:   nvvm.wgmma.mma_async
//       CHECK:   nvvm.wgmma.commit.group.sync.aligned
func.func @mn_major(%a: !a, %v: !v) -> vector<64xf32> {
  %d = kvpipe.warpgroup_mma %a, %v {transpose_b} : !a, !v -> vector<64xf32>
  return %d : vector<64xf32>
}

// -----

// Padded blocks: LBO is the block stride (16384 B = 1024 << 4), not the
// block size.
!a = memref<64x64xbf16, #gpu.address_space<workgroup>>
!v = memref<2x64x64xbf16, strided<[8192, 64, 1]>, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @padded_blocks
//       CHECK:   llvm.mlir.constant(4611686293372403712 : i64) : i64
//       CHECK:   nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>
func.func @padded_blocks(%a: !a, %v: !v) -> vector<64xf32> {
  %d = kvpipe.warpgroup_mma %a, %v {transpose_b} : !a, !v -> vector<64xf32>
  return %d : vector<64xf32>
}

// -----

// A single block (N = 64 = W): the k-steps still walk down K.
!a = memref<2x64x64xbf16, #gpu.address_space<workgroup>>
!v = memref<128x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @single_block
//   CHECK-COUNT-8:   nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, {{.*}} B[<bf16>, <one>, <row>]
//       CHECK:   nvvm.wgmma.commit.group.sync.aligned
func.func @single_block(%a: !a, %v: !v) -> vector<32xf32> {
  %d = kvpipe.warpgroup_mma %a, %v {transpose_b} : !a, !v -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

// A partial last block (O += P [V | 1], the forward's tensor_row_sums): N is
// the result's, 72 = V's 64 columns and the first 8 of the block after them,
// at the block stride (LBO 8192 B, the same descriptor as N = 128).
!a = memref<64x64xbf16, #gpu.address_space<workgroup>>
!v = memref<2x64x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @partial_last_block
//       CHECK:   llvm.mlir.constant(4611686293338849280 : i64) : i64
//   CHECK-COUNT-4:   nvvm.wgmma.mma_async {{.*}} <m = 64, n = 72, k = 16>, {{.*}} B[<bf16>, <one>, <row>]
//   CHECK-NOT:   nvvm.wgmma.mma_async
//       CHECK:   nvvm.wgmma.commit.group.sync.aligned
func.func @partial_last_block(%a: !a, %v: !v) -> vector<36xf32> {
  %d = kvpipe.warpgroup_mma %a, %v {transpose_b} : !a, !v -> vector<36xf32>
  return %d : vector<36xf32>
}
