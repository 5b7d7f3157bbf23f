// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file | FileCheck %s

// 64- and 32-byte swizzles: layout codes 2 and 3 in bits 62-63, SBO = 8 rows
// of the swizzle span (512 B, 256 B), K-major LBO unused (1). With a row of
// W = 32 (64B) or 16 (32B) 16-bit elements, a k-step is 32 bytes within the
// row until the row ends, then the next column block.

// 64B, K-major: (1 << 16) | (32 << 32) | (2 << 62), as a signed i64.
!a = memref<2x64x32xf16, #gpu.address_space<workgroup>>
!b = memref<2x8x32xf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @swizzle64
//       CHECK:   %[[BHI:.*]] = llvm.mlir.constant(-9223371899415756800 : i64) : i64
//       CHECK:   %[[DBRAW:.*]] = llvm.or %{{.*}}, %[[BHI]] : i64
//       CHECK:   %[[DB:.*]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %[[DBRAW]] : (i64) -> i64
//       CHECK:   %[[AHI:.*]] = llvm.mlir.constant(-9223371899415756800 : i64) : i64
//       CHECK:   %[[DARAW:.*]] = llvm.or %{{.*}}, %[[AHI]] : i64
//       CHECK:   %[[DA:.*]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %[[DARAW]] : (i64) -> i64
//       CHECK:   nvvm.wgmma.mma_async %[[DA]], %[[DB]], %{{.*}}, <m = 64, n = 8, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// k = 16: 32 bytes into the row.
//       CHECK:   %[[B1:.*]] = llvm.mlir.constant(2 : i64) : i64
//       CHECK:   llvm.add %[[DB]], %[[B1]] : i64
//       CHECK:   %[[A1:.*]] = llvm.mlir.constant(2 : i64) : i64
//       CHECK:   llvm.add %[[DA]], %[[A1]] : i64
//       CHECK:   nvvm.wgmma.mma_async
// k = 32: block 1 (B: 8 rows * 64 B = 512 B; A: 64 rows * 64 B = 4096 B).
//       CHECK:   %[[B2:.*]] = llvm.mlir.constant(32 : i64) : i64
//       CHECK:   llvm.add %[[DB]], %[[B2]] : i64
//       CHECK:   %[[A2:.*]] = llvm.mlir.constant(256 : i64) : i64
//       CHECK:   llvm.add %[[DA]], %[[A2]] : i64
//       CHECK:   nvvm.wgmma.mma_async
//       CHECK:   %[[B3:.*]] = llvm.mlir.constant(34 : i64) : i64
//       CHECK:   llvm.add %[[DB]], %[[B3]] : i64
//       CHECK:   %[[A3:.*]] = llvm.mlir.constant(258 : i64) : i64
//       CHECK:   llvm.add %[[DA]], %[[A3]] : i64
//       CHECK:   nvvm.wgmma.mma_async
//   CHECK-NOT:   nvvm.wgmma.mma_async
func.func @swizzle64(%a: !a, %b: !b) -> vector<4xf32> {
  %d = kvpipe.warpgroup_mma %a, %b {swizzle = 64} : !a, !b -> vector<4xf32>
  return %d : vector<4xf32>
}

// -----

// 32B, K-major: (1 << 16) | (16 << 32) | (3 << 62). One k-step is a whole
// 32-byte row: every step is the next block (B: 256 B = +16, A: 2048 B = +128).
!a = memref<4x64x16xbf16, #gpu.address_space<workgroup>>
!b = memref<4x8x16xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @swizzle32
//       CHECK:   %[[BHI:.*]] = llvm.mlir.constant(-4611685949707845632 : i64) : i64
//       CHECK:   %[[DBRAW:.*]] = llvm.or %{{.*}}, %[[BHI]] : i64
//       CHECK:   %[[DB:.*]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %[[DBRAW]] : (i64) -> i64
//       CHECK:   %[[DARAW:.*]] = llvm.or %{{.*}}, %{{.*}} : i64
//       CHECK:   %[[DA:.*]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %[[DARAW]] : (i64) -> i64
//       CHECK:   nvvm.wgmma.mma_async %[[DA]], %[[DB]], {{.*}} <m = 64, n = 8, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
//       CHECK:   llvm.mlir.constant(16 : i64) : i64
//       CHECK:   llvm.mlir.constant(128 : i64) : i64
//       CHECK:   nvvm.wgmma.mma_async
//       CHECK:   llvm.mlir.constant(32 : i64) : i64
//       CHECK:   llvm.mlir.constant(256 : i64) : i64
//       CHECK:   nvvm.wgmma.mma_async
//       CHECK:   llvm.mlir.constant(48 : i64) : i64
//       CHECK:   llvm.mlir.constant(384 : i64) : i64
//       CHECK:   nvvm.wgmma.mma_async
//   CHECK-NOT:   nvvm.wgmma.mma_async
func.func @swizzle32(%a: !a, %b: !b) -> vector<4xf32> {
  %d = kvpipe.warpgroup_mma %a, %b {swizzle = 32} : !a, !b -> vector<4xf32>
  return %d : vector<4xf32>
}

// -----

// 64B, MN-major B [K = 32][N = 64] as 2 blocks of 32 rows of 32 columns:
// LBO = block stride 2048 B, SBO = 8 rows * 64 B = 512 B, code 2; a k-step
// is 16 rows * 64 B = 1024 B (+64).
!v = memref<2x32x32xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @swizzle64_mn
//       CHECK:   %[[HI:.*]] = llvm.mlir.constant(-9223371899407433728 : i64) : i64
//       CHECK:   %[[DVRAW:.*]] = llvm.or %{{.*}}, %[[HI]] : i64
//       CHECK:   %[[DV:.*]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %[[DVRAW]] : (i64) -> i64
//       CHECK:   llvm.inline_asm {{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
//       CHECK:   %[[S1:.*]] = llvm.mlir.constant(64 : i64) : i64
//       CHECK:   llvm.add %[[DV]], %[[S1]] : i64
//       CHECK:   llvm.inline_asm {{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
func.func @swizzle64_mn(%p: vector<16xbf16>, %v: !v) -> vector<32xf32> {
  %d = kvpipe.warpgroup_mma %p, %v {swizzle = 64, transpose_b} : vector<16xbf16>, !v -> vector<32xf32>
  return %d : vector<32xf32>
}

// -----

// 32B, MN-major B [K = 32][N = 16], one block of 32 rows of 16 columns:
// LBO = 1024 B, SBO = 256 B, code 3; a k-step is 16 * 32 B = 512 B (+32).
!v = memref<1x32x16xf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @swizzle32_mn
//       CHECK:   %[[HI:.*]] = llvm.mlir.constant(-4611685949703716864 : i64) : i64
//       CHECK:   %[[DVRAW:.*]] = llvm.or %{{.*}}, %[[HI]] : i64
//       CHECK:   %[[DV:.*]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %[[DVRAW]] : (i64) -> i64
//       CHECK:   llvm.inline_asm {{.*}}wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {{.*}}, p, 1, 1, 1;
//       CHECK:   %[[S1:.*]] = llvm.mlir.constant(32 : i64) : i64
//       CHECK:   llvm.add %[[DV]], %[[S1]] : i64
//       CHECK:   llvm.inline_asm {{.*}}wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16
func.func @swizzle32_mn(%p: vector<16xf16>, %v: !v) -> vector<8xf32> {
  %d = kvpipe.warpgroup_mma %p, %v {swizzle = 32, transpose_b} : vector<16xf16>, !v -> vector<8xf32>
  return %d : vector<8xf32>
}
