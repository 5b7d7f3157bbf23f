// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file | FileCheck %s

// kvpipe.warpgroup_mma, SS form, 128-byte swizzle, K-major A and B: K/16
// nvvm.wgmma.mma_async m64nNk16 between one wgmma.fence and one commit_group.
// Matrix descriptor (PTX ISA "Matrix Descriptor Format", verified on the
// H200 in shared/docs/gpu-workflow.md):
//   ((addr >> 4) & 0x3FFF) | (1 << 16) | (64 << 32) | (1 << 62)
//   = start | 4611686293305360384
// (LBO unused = 1, SBO = 1024 B = 8 rows of 128 B, layout 1 = 128B swizzle),
// pinned at the wgmma by a side-effecting mov so that LLVM does not hoist the
// k-steps' descriptors out of loops (WgmmaToNVVM.cpp).
// A k-step of 16 bf16 is 32 bytes (+2 in the descriptor's 16-byte units)
// inside a 128-byte row; K beyond the 64-element row continues in the next
// column block, one block stride (8192 B for 64 rows: +512) further.

!t = memref<2x64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<2x8x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @zero_init
//  CHECK-SAME: (%[[A:.*]]: memref<2x64x64xbf16, #gpu.address_space<workgroup>>, %[[B:.*]]: memref<2x8x64xbf16, #gpu.address_space<workgroup>>) -> vector<4xf32>
//       CHECK:   %[[BD:.*]] = builtin.unrealized_conversion_cast %[[B]]
//       CHECK:   %[[AD:.*]] = builtin.unrealized_conversion_cast %[[A]]
// Descriptor of B.
//       CHECK:   %[[BPTR:.*]] = llvm.getelementptr {{.*}} : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, bf16
//       CHECK:   %[[BADDR:.*]] = llvm.ptrtoint %[[BPTR]] : !llvm.ptr<3> to i64
//       CHECK:   %[[MASK:.*]] = llvm.mlir.constant(16383 : i64) : i64
//       CHECK:   %[[FOUR:.*]] = llvm.mlir.constant(4 : i64) : i64
//       CHECK:   %[[BSHR:.*]] = llvm.lshr %[[BADDR]], %[[FOUR]] : i64
//       CHECK:   %[[BSTART:.*]] = llvm.and %[[BSHR]], %[[MASK]] : i64
//       CHECK:   %[[HI:.*]] = llvm.mlir.constant(4611686293305360384 : i64) : i64
//       CHECK:   %[[DBRAW:.*]] = llvm.or %[[BSTART]], %[[HI]] : i64
//       CHECK:   %[[DB:.*]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %[[DBRAW]] : (i64) -> i64
// No accumulator: undefined registers, and scale-d = 0 on the first step.
//       CHECK:   %[[UNDEF:.*]] = llvm.mlir.undef : f32
// Descriptor of A.
//       CHECK:   %[[APTR:.*]] = llvm.getelementptr {{.*}} : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, bf16
//       CHECK:   %[[AADDR:.*]] = llvm.ptrtoint %[[APTR]] : !llvm.ptr<3> to i64
//       CHECK:   llvm.lshr %[[AADDR]]
//       CHECK:   %[[DARAW:.*]] = llvm.or %{{.*}}, %{{.*}} : i64
//       CHECK:   %[[DA:.*]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %[[DARAW]] : (i64) -> i64
//       CHECK:   nvvm.wgmma.fence.aligned
//       CHECK:   %[[ACC0:.*]] = llvm.insertvalue %[[UNDEF]], %{{.*}}[3] : !llvm.struct<(f32, f32, f32, f32)>
//       CHECK:   %[[D0:.*]] = nvvm.wgmma.mma_async %[[DA]], %[[DB]], %[[ACC0]], <m = 64, n = 8, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
//       CHECK:   %[[O1:.*]] = llvm.mlir.constant(2 : i64) : i64
//       CHECK:   %[[DB1:.*]] = llvm.add %[[DB]], %[[O1]] : i64
//       CHECK:   %[[O1A:.*]] = llvm.mlir.constant(2 : i64) : i64
//       CHECK:   %[[DA1:.*]] = llvm.add %[[DA]], %[[O1A]] : i64
//       CHECK:   %[[D1:.*]] = nvvm.wgmma.mma_async %[[DA1]], %[[DB1]], %[[D0]], <m = 64, n = 8, k = 16>, D[<f32>, <one>]
//       CHECK:   llvm.mlir.constant(4 : i64) : i64
//       CHECK:   %[[D2:.*]] = nvvm.wgmma.mma_async %{{.*}}, %{{.*}}, %[[D1]], {{.*}} D[<f32>, <one>]
//       CHECK:   llvm.mlir.constant(6 : i64) : i64
//       CHECK:   %[[D3:.*]] = nvvm.wgmma.mma_async %{{.*}}, %{{.*}}, %[[D2]], {{.*}} D[<f32>, <one>]
// k = 64: the second column block, 8 rows * 128 B = 1024 B further for B
// (1024 >> 4 = 64), 64 rows * 128 B = 8192 B for A (512).
//       CHECK:   %[[O4B:.*]] = llvm.mlir.constant(64 : i64) : i64
//       CHECK:   %[[DB4:.*]] = llvm.add %[[DB]], %[[O4B]] : i64
//       CHECK:   %[[O4A:.*]] = llvm.mlir.constant(512 : i64) : i64
//       CHECK:   %[[DA4:.*]] = llvm.add %[[DA]], %[[O4A]] : i64
//       CHECK:   %[[D4:.*]] = nvvm.wgmma.mma_async %[[DA4]], %[[DB4]], %[[D3]], {{.*}} D[<f32>, <one>]
//       CHECK:   llvm.mlir.constant(66 : i64) : i64
//       CHECK:   llvm.mlir.constant(514 : i64) : i64
//       CHECK:   nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
//       CHECK:   llvm.mlir.constant(68 : i64) : i64
//       CHECK:   llvm.mlir.constant(516 : i64) : i64
//       CHECK:   nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
//       CHECK:   llvm.mlir.constant(70 : i64) : i64
//       CHECK:   llvm.mlir.constant(518 : i64) : i64
//       CHECK:   %[[D7:.*]] = nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
//   CHECK-NOT:   nvvm.wgmma.mma_async
//       CHECK:   nvvm.wgmma.commit.group.sync.aligned
//   CHECK-NOT:   nvvm.wgmma.wait.group
//       CHECK:   llvm.extractvalue %[[D7]][0] : !llvm.struct<(f32, f32, f32, f32)>
//       CHECK:   llvm.extractvalue %[[D7]][3] : !llvm.struct<(f32, f32, f32, f32)>
//       CHECK:   return %{{.*}} : vector<4xf32>
func.func @zero_init(%a: !t, %b: !b) -> vector<4xf32> {
  %d = kvpipe.warpgroup_mma %a, %b {swizzle = 128} : !t, !b -> vector<4xf32>
  return %d : vector<4xf32>
}

// -----

// With an accumulator: its registers are pinned before the fence (their
// producers finish first), and every step accumulates (scale-d = 1).

!a = memref<64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<8x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @accumulate
//  CHECK-SAME: %[[ACC:[^:]*]]: vector<4xf32>
//       CHECK:   %[[E0:.*]] = llvm.extractelement %[[ACC]][%{{.*}} : i32] : vector<4xf32>
//       CHECK:   %[[E1:.*]] = llvm.extractelement %[[ACC]][%{{.*}} : i32] : vector<4xf32>
//       CHECK:   %[[E2:.*]] = llvm.extractelement %[[ACC]][%{{.*}} : i32] : vector<4xf32>
//       CHECK:   %[[E3:.*]] = llvm.extractelement %[[ACC]][%{{.*}} : i32] : vector<4xf32>
//       CHECK:   %[[PIN:.*]] = llvm.inline_asm has_side_effects "", "=f,=f,=f,=f,0,1,2,3" %[[E0]], %[[E1]], %[[E2]], %[[E3]] : (f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
//       CHECK:   nvvm.wgmma.fence.aligned
//   CHECK-NOT:   <zero>
//       CHECK:   nvvm.wgmma.mma_async {{.*}} <m = 64, n = 8, k = 16>, D[<f32>, <one>]
//       CHECK:   nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
//       CHECK:   nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
//       CHECK:   nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
//   CHECK-NOT:   nvvm.wgmma.mma_async
//       CHECK:   nvvm.wgmma.commit.group.sync.aligned
func.func @accumulate(%a: !a, %b: !b, %acc: vector<4xf32>) -> vector<4xf32> {
  %d = kvpipe.warpgroup_mma %a, %b, %acc : !a, !b -> vector<4xf32>
  return %d : vector<4xf32>
}

// f16 operands; N = 256, the largest shape.
// CHECK-LABEL: func.func @f16_n256
//       CHECK:   nvvm.wgmma.mma_async {{.*}} <m = 64, n = 256, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
//       CHECK:   nvvm.wgmma.mma_async {{.*}} <m = 64, n = 256, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
func.func @f16_n256(%a: memref<64x64xf16, #gpu.address_space<workgroup>>,
                    %b: memref<256x64xf16, #gpu.address_space<workgroup>>) -> vector<128xf32> {
  %d = kvpipe.warpgroup_mma %a, %b : memref<64x64xf16, #gpu.address_space<workgroup>>, memref<256x64xf16, #gpu.address_space<workgroup>> -> vector<128xf32>
  return %d : vector<128xf32>
}

// -----

// The B tile of a slot: a strided view of a multi-buffer, its descriptor
// starts at the view's offset.
!buf = memref<2x1x64x64xbf16, #gpu.address_space<workgroup>>
!view = memref<1x64x64xbf16, strided<[4096, 64, 1], offset: ?>, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @slot_view
//       CHECK:   %[[V:.*]] = builtin.unrealized_conversion_cast %{{.*}} : memref<1x64x64xbf16, strided<[4096, 64, 1], offset: ?>, #gpu.address_space<workgroup>>
//       CHECK:   %[[ALIGNED:.*]] = llvm.extractvalue %[[V]][1]
//       CHECK:   %[[OFF:.*]] = llvm.extractvalue %[[V]][2]
//       CHECK:   %[[BASE:.*]] = llvm.getelementptr %[[ALIGNED]][%[[OFF]]]
//       CHECK:   %[[P:.*]] = llvm.getelementptr %[[BASE]][%{{.*}}]
//       CHECK:   llvm.ptrtoint %[[P]] : !llvm.ptr<3> to i64
func.func @slot_view(%a: memref<64x64xbf16, #gpu.address_space<workgroup>>, %buf: !buf, %s: index) -> vector<32xf32> {
  %b = memref.subview %buf[%s, 0, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : !buf to !view
  %d = kvpipe.warpgroup_mma %a, %b : memref<64x64xbf16, #gpu.address_space<workgroup>>, !view -> vector<32xf32>
  return %d : vector<32xf32>
}
