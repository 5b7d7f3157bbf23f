// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file | FileCheck %s

// kvpipe.warpgroup_mma, RS form (A from registers): upstream NVVM has no RS
// wgmma, so each k-step is inline PTX
//   wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T {d..}, {a0..a3}, b-desc,
//       p, 1, 1, imm-trans-b;
// with the accumulators tied to the outputs, four b32 A registers per k-step
// (bf16/f16 pairs of the fragment, in order), the B descriptor, and scale-d
// as a predicate set from an i32 operand (0 on the first step without an
// accumulator, else 1).

!b = memref<2x8x16xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @rs_zero_init
//  CHECK-SAME: (%[[P:.*]]: vector<16xbf16>, %[[B:.*]]: memref<2x8x16xbf16, #gpu.address_space<workgroup>>)
//       CHECK:   %[[DBRAW:.*]] = llvm.or %{{.*}}, %{{.*}} : i64
//       CHECK:   %[[DB:.*]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %[[DBRAW]] : (i64) -> i64
//       CHECK:   %[[UNDEF:.*]] = llvm.mlir.undef : f32
//       CHECK:   %[[REGS:.*]] = llvm.bitcast %[[P]] : vector<16xbf16> to vector<8xi32>
//       CHECK:   %[[A0:.*]] = llvm.extractelement %[[REGS]][%{{.*}} : i32] : vector<8xi32>
//       CHECK:   %[[A1:.*]] = llvm.extractelement %[[REGS]][%{{.*}} : i32] : vector<8xi32>
//       CHECK:   %[[A2:.*]] = llvm.extractelement %[[REGS]][%{{.*}} : i32] : vector<8xi32>
//       CHECK:   %[[A3:.*]] = llvm.extractelement %[[REGS]][%{{.*}} : i32] : vector<8xi32>
//       CHECK:   %[[A4:.*]] = llvm.extractelement %[[REGS]][%{{.*}} : i32] : vector<8xi32>
//       CHECK:   %[[A5:.*]] = llvm.extractelement %[[REGS]][%{{.*}} : i32] : vector<8xi32>
//       CHECK:   %[[A6:.*]] = llvm.extractelement %[[REGS]][%{{.*}} : i32] : vector<8xi32>
//       CHECK:   %[[A7:.*]] = llvm.extractelement %[[REGS]][%{{.*}} : i32] : vector<8xi32>
//       CHECK:   nvvm.wgmma.fence.aligned
//       CHECK:   %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
//       CHECK:   %[[D0:.*]] = llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, $9, 0;\0Awgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {$0, $1, $2, $3}, {$4, $5, $6, $7}, $8, p, 1, 1, 0;\0A}\0A", "=f,=f,=f,=f,r,r,r,r,l,r,0,1,2,3" %[[A0]], %[[A1]], %[[A2]], %[[A3]], %[[DB]], %[[ZERO]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (i32, i32, i32, i32, i64, i32, f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// Second k-step: the next 32-byte row block of B (+256 B = +16), A pairs
// 4..7, accumulating into the first step's registers.
//       CHECK:   %[[S1:.*]] = llvm.mlir.constant(16 : i64) : i64
//       CHECK:   %[[DB1:.*]] = llvm.add %[[DB]], %[[S1]] : i64
//       CHECK:   %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   %[[C0:.*]] = llvm.extractvalue %[[D0]][0]
//       CHECK:   %[[C1:.*]] = llvm.extractvalue %[[D0]][1]
//       CHECK:   %[[C2:.*]] = llvm.extractvalue %[[D0]][2]
//       CHECK:   %[[C3:.*]] = llvm.extractvalue %[[D0]][3]
//       CHECK:   %[[D1:.*]] = llvm.inline_asm has_side_effects "{{.*}}m64n8k16.f32.bf16.bf16{{.*}}, p, 1, 1, 0;{{.*}}", "=f,=f,=f,=f,r,r,r,r,l,r,0,1,2,3" %[[A4]], %[[A5]], %[[A6]], %[[A7]], %[[DB1]], %[[ONE]], %[[C0]], %[[C1]], %[[C2]], %[[C3]]
//   CHECK-NOT:   llvm.inline_asm
//       CHECK:   nvvm.wgmma.commit.group.sync.aligned
//       CHECK:   llvm.extractvalue %[[D1]][0]
func.func @rs_zero_init(%p: vector<16xbf16>, %b: !b) -> vector<4xf32> {
  %d = kvpipe.warpgroup_mma %p, %b {swizzle = 32} : vector<16xbf16>, !b -> vector<4xf32>
  return %d : vector<4xf32>
}

// -----

// O += P V in attention: f16, MN-major V (imm-trans-b = 1), N = 128, with an
// accumulator: pinned before the fence, scale-d = 1 on every step.
!v = memref<2x64x64xf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @rs_accumulate_transposed
//       CHECK:   llvm.inline_asm has_side_effects "", "=f{{(,=f)+}},0,1,{{([0-9]+,)+}}62,63"
//       CHECK:   llvm.bitcast %{{.*}} : vector<32xf16> to vector<16xi32>
//       CHECK:   nvvm.wgmma.fence.aligned
//       CHECK:   %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, $69, 0;\0Awgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {$0, {{.*}}, $63}, {$64, $65, $66, $67}, $68, p, 1, 1, 1;\0A}\0A", "=f{{(,=f)+}},r,r,r,r,l,r,0,1,{{([0-9]+,)+}}62,63" %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]],
//   CHECK-COUNT-3:   llvm.inline_asm has_side_effects "{{.*}}m64n128k16.f32.f16.f16{{.*}}p, 1, 1, 1;
//   CHECK-NOT:   llvm.inline_asm has_side_effects "{
//       CHECK:   nvvm.wgmma.commit.group.sync.aligned
func.func @rs_accumulate_transposed(%p: vector<32xf16>, %v: !v, %o: vector<64xf32>) -> vector<64xf32> {
  %d = kvpipe.warpgroup_mma %p, %v, %o {transpose_b} : vector<32xf16>, !v -> vector<64xf32>
  return %d : vector<64xf32>
}
