// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file | FileCheck %s

// kvpipe.store_fragment: thread t of the warpgroup (w = t/32, l = t%32)
// holds element i of the 64xN fragment at row 16w + l/4 + 8((i%4)/2),
// column 8(i/4) + 2(l%4) + i%2 (AccumulatorLayout.h): in every 8x8 block,
// stmatrix's register layout. So pairs 4m .. 4m+3 (rows +0/+8 of the column
// groups 2m, 2m+1) are one `stmatrix.x4`, and lane l addresses row l%8 of
// matrix l/8: row 16w + 8((l/8)%2) + l%8, columns 16m + 8(l/16). The
// address is the swizzled one: byte offset o = row * S + col * 2 within the
// column block, 16-byte chunk XOR (o >> 7) & (S/16 - 1) (the TMA swizzle:
// CUTLASS Swizzle<3,4,3> for 128B, <1,4,3> for 32B), which depends only on
// the row since a 16-byte chunk never straddles a swizzled row, plus the
// block's offset. store-fragment-map.test checks the resulting map address
// by address for every thread; this file checks the IR's shape.

!t = memref<2x64x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @swizzle128
//  CHECK-SAME: (%[[F:[^:]*]]: vector<64xbf16>, %[[T:[^:]*]]: memref<2x64x64xbf16, #gpu.address_space<workgroup>>)
//       CHECK:   %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
//       CHECK:   %[[T128:.*]] = llvm.urem %[[TID]], %{{.*}} : i32
//       CHECK:   %[[W:.*]] = llvm.udiv %[[T128]], %{{.*}} : i32
//       CHECK:   %[[L:.*]] = llvm.urem %[[T128]], %{{.*}} : i32
//       CHECK:   %[[C8:.*]] = llvm.mlir.constant(8 : i32) : i32
//       CHECK:   %[[MAT:.*]] = llvm.udiv %[[L]], %[[C8]] : i32
//       CHECK:   %[[RIM:.*]] = llvm.urem %[[L]], %{{.*}} : i32
//       CHECK:   %[[HALF:.*]] = llvm.urem %[[MAT]], %{{.*}} : i32
//       CHECK:   %[[HROW:.*]] = llvm.mul %[[HALF]], %{{.*}} : i32
//       CHECK:   %[[C16:.*]] = llvm.mlir.constant(16 : i32) : i32
//       CHECK:   %[[W16:.*]] = llvm.mul %[[W]], %[[C16]] : i32
//       CHECK:   %[[FROW:.*]] = llvm.add %[[W16]], %[[HROW]] : i32
//       CHECK:   %[[GRP:.*]] = llvm.udiv %[[MAT]], %{{.*}} : i32
//       CHECK:   %[[COL:.*]] = llvm.mul %[[GRP]], %{{.*}} : i32
//       CHECK:   %[[ROW:.*]] = llvm.add %[[FROW]], %[[RIM]] : i32
//       CHECK:   %[[S:.*]] = llvm.mlir.constant(128 : i32) : i32
//       CHECK:   %[[RB:.*]] = llvm.mul %[[ROW]], %[[S]] : i32
//       CHECK:   %[[SH4:.*]] = llvm.mlir.constant(4 : i32) : i32
//       CHECK:   %[[M7:.*]] = llvm.mlir.constant(7 : i32) : i32
//       CHECK:   %[[SH7:.*]] = llvm.mlir.constant(7 : i32) : i32
//       CHECK:   %[[HI:.*]] = llvm.lshr %[[RB]], %[[SH7]] : i32
//       CHECK:   %[[AT:.*]] = llvm.and %[[HI]], %[[M7]] : i32
//       CHECK:   %[[X:.*]] = llvm.shl %[[AT]], %[[SH4]] : i32
//       CHECK:   %[[BASE:.*]] = llvm.getelementptr %{{.*}} : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, bf16
//       CHECK:   %[[PAIRS:.*]] = llvm.bitcast %[[F]] : vector<64xbf16> to vector<32xi32>
// Instruction 0: columns 0..15, pairs 0..3.
//       CHECK:   %[[EB:.*]] = llvm.mlir.constant(2 : i32) : i32
//       CHECK:   %[[K0:.*]] = llvm.mlir.constant(0 : i32) : i32
//       CHECK:   %[[CC0:.*]] = llvm.add %[[COL]], %[[K0]] : i32
//       CHECK:   %[[CB0:.*]] = llvm.mul %[[CC0]], %[[EB]] : i32
//       CHECK:   %[[BLK0:.*]] = llvm.mlir.constant(0 : i32) : i32
//       CHECK:   %[[SW0:.*]] = llvm.xor %[[CB0]], %[[X]] : i32
//       CHECK:   %[[O0:.*]] = llvm.add %[[RB]], %[[SW0]] : i32
//       CHECK:   %[[BY0:.*]] = llvm.add %[[O0]], %[[BLK0]] : i32
//       CHECK:   %[[A0:.*]] = llvm.getelementptr %[[BASE]][%[[BY0]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
//       CHECK:   %[[I0:.*]] = llvm.mlir.constant(0 : i32) : i32
//       CHECK:   %[[P0:.*]] = llvm.extractelement %[[PAIRS]][%[[I0]] : i32] : vector<32xi32>
//       CHECK:   %[[I1:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   %[[P1:.*]] = llvm.extractelement %[[PAIRS]][%[[I1]] : i32] : vector<32xi32>
//       CHECK:   %[[I2:.*]] = llvm.mlir.constant(2 : i32) : i32
//       CHECK:   %[[P2:.*]] = llvm.extractelement %[[PAIRS]][%[[I2]] : i32] : vector<32xi32>
//       CHECK:   %[[I3:.*]] = llvm.mlir.constant(3 : i32) : i32
//       CHECK:   %[[P3:.*]] = llvm.extractelement %[[PAIRS]][%[[I3]] : i32] : vector<32xi32>
//       CHECK:   nvvm.stmatrix %[[A0]], %[[P0]], %[[P1]], %[[P2]], %[[P3]] {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>}
// Instruction 1: columns 16..31, pairs 4..7.
//       CHECK:   %[[K1:.*]] = llvm.mlir.constant(16 : i32) : i32
//       CHECK:   llvm.add %[[COL]], %[[K1]] : i32
//       CHECK:   llvm.mlir.constant(4 : i32) : i32
//       CHECK:   nvvm.stmatrix
// Instructions 4..7 are columns 64..127: the second block, 64 * 128 B further.
//   CHECK-COUNT-2:   nvvm.stmatrix
//       CHECK:   %[[K4:.*]] = llvm.mlir.constant(0 : i32) : i32
//  CHECK-NEXT:   llvm.add %[[COL]], %[[K4]] : i32
//       CHECK:   llvm.mlir.constant(8192 : i32) : i32
//       CHECK:   nvvm.stmatrix
//   CHECK-COUNT-3:   nvvm.stmatrix
//   CHECK-NOT:   nvvm.stmatrix
//   CHECK-NOT:   llvm.store
//       CHECK:   return
func.func @swizzle128(%f: vector<64xbf16>, %t: !t) {
  kvpipe.store_fragment %f, %t : vector<64xbf16>, !t
  return
}

// -----

// 32B swizzle, f16, N = 32: rows of 32 bytes, mask 1 (XOR bit 4 with bit 7),
// blocks of 64 * 32 B = 2048 B, one instruction per block.
!t = memref<2x64x16xf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @swizzle32
//       CHECK:   %[[T:.*]] = llvm.urem %{{.*}}, %{{.*}} : i32
//       CHECK:   %[[L:.*]] = llvm.urem %[[T]], %{{.*}} : i32
//       CHECK:   %[[MAT:.*]] = llvm.udiv %[[L]], %{{.*}} : i32
//       CHECK:   %[[GRP:.*]] = llvm.udiv %[[MAT]], %{{.*}} : i32
//       CHECK:   llvm.mul %[[GRP]], %{{.*}} : i32
//       CHECK:   %[[S:.*]] = llvm.mlir.constant(32 : i32) : i32
//       CHECK:   %[[RB:.*]] = llvm.mul %{{.*}}, %[[S]] : i32
//       CHECK:   %[[SH4:.*]] = llvm.mlir.constant(4 : i32) : i32
//       CHECK:   %[[M1:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   %[[SH7:.*]] = llvm.mlir.constant(7 : i32) : i32
//       CHECK:   %[[HI:.*]] = llvm.lshr %[[RB]], %[[SH7]] : i32
//       CHECK:   %[[AT:.*]] = llvm.and %[[HI]], %[[M1]] : i32
//       CHECK:   %[[X:.*]] = llvm.shl %[[AT]], %[[SH4]] : i32
//       CHECK:   llvm.bitcast %{{.*}} : vector<16xf16> to vector<8xi32>
//       CHECK:   llvm.xor %{{.*}}, %[[X]] : i32
//       CHECK:   nvvm.stmatrix
//       CHECK:   llvm.mlir.constant(2048 : i32) : i32
//       CHECK:   nvvm.stmatrix
//   CHECK-NOT:   nvvm.stmatrix
//   CHECK-NOT:   llvm.store
func.func @swizzle32(%f: vector<16xf16>, %t: !t) {
  kvpipe.store_fragment %f, %t {swizzle = 32} : vector<16xf16>, !t
  return
}

// -----

// 64B swizzle: mask 3 (XOR bits 4-5 with bits 7-8), N = 32 in one block.
!t = memref<64x32xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @swizzle64
//       CHECK:   %[[T:.*]] = llvm.urem %{{.*}}, %{{.*}} : i32
//       CHECK:   %[[L:.*]] = llvm.urem %[[T]], %{{.*}} : i32
//       CHECK:   %[[MAT:.*]] = llvm.udiv %[[L]], %{{.*}} : i32
//       CHECK:   %[[GRP:.*]] = llvm.udiv %[[MAT]], %{{.*}} : i32
//       CHECK:   llvm.mul %[[GRP]], %{{.*}} : i32
//       CHECK:   %[[S:.*]] = llvm.mlir.constant(64 : i32) : i32
//       CHECK:   llvm.mul %{{.*}}, %[[S]] : i32
//       CHECK:   llvm.mlir.constant(4 : i32) : i32
//       CHECK:   %[[M3:.*]] = llvm.mlir.constant(3 : i32) : i32
//       CHECK:   llvm.and %{{.*}}, %[[M3]] : i32
//   CHECK-COUNT-2:   nvvm.stmatrix
//   CHECK-NOT:   nvvm.stmatrix
//   CHECK-NOT:   llvm.store
func.func @swizzle64(%f: vector<16xbf16>, %t: !t) {
  kvpipe.store_fragment %f, %t {swizzle = 64} : vector<16xbf16>, !t
  return
}

// -----

// transpose: the tile is the fragment's transpose, [N][64] = 96 x 64 in two
// 64B-swizzled column blocks. Lane l addresses row 16 m + 8 (l / 16) + l % 8
// of instruction m (a fragment column) at columns 16 w + 8 ((l / 8) % 2) (its
// fragment rows): the column block and the XOR are the same in every
// instruction, which moves 16 rows (16 * 64 B) down. stmatrix .trans
// (layout col). store-fragment-map.test checks every address.
!t = memref<2x96x32xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @transposed
//       CHECK:   %[[W:.*]] = llvm.udiv %{{.*}}, %{{.*}} : i32
//       CHECK:   %[[L:.*]] = llvm.urem %{{.*}}, %{{.*}} : i32
//       CHECK:   %[[MAT:.*]] = llvm.udiv %[[L]], %{{.*}} : i32
//       CHECK:   %[[RIM:.*]] = llvm.urem %[[L]], %{{.*}} : i32
//       CHECK:   %[[FROW:.*]] = llvm.add %{{.*}}, %{{.*}} : i32
//       CHECK:   %[[GRP:.*]] = llvm.udiv %[[MAT]], %{{.*}} : i32
//       CHECK:   %[[FCOL:.*]] = llvm.mul %[[GRP]], %{{.*}} : i32
//       CHECK:   %[[ROW:.*]] = llvm.add %[[FCOL]], %[[RIM]] : i32
//       CHECK:   %[[W32:.*]] = llvm.mlir.constant(32 : i32) : i32
//       CHECK:   %[[BLK:.*]] = llvm.udiv %[[FROW]], %[[W32]] : i32
//       CHECK:   %[[INB:.*]] = llvm.urem %[[FROW]], %{{.*}} : i32
//       CHECK:   %[[STRIDE:.*]] = llvm.mlir.constant(6144 : i32) : i32
//       CHECK:   %[[BB:.*]] = llvm.mul %[[BLK]], %[[STRIDE]] : i32
//       CHECK:   %[[SW:.*]] = llvm.xor %{{.*}}, %{{.*}} : i32
//       CHECK:   %[[RB:.*]] = llvm.add %{{.*}}, %[[BB]] : i32
//       CHECK:   %[[FIXED:.*]] = llvm.add %[[RB]], %[[SW]] : i32
//       CHECK:   %[[C0:.*]] = llvm.mlir.constant(0 : i32) : i32
//       CHECK:   llvm.add %[[FIXED]], %[[C0]] : i32
//       CHECK:   nvvm.stmatrix {{.*}}layout = #nvvm.mma_layout<col>
//       CHECK:   %[[C1024:.*]] = llvm.mlir.constant(1024 : i32) : i32
//       CHECK:   llvm.add %[[FIXED]], %[[C1024]] : i32
//       CHECK:   nvvm.stmatrix {{.*}}layout = #nvvm.mma_layout<col>
//   CHECK-COUNT-4:   nvvm.stmatrix {{.*}}layout = #nvvm.mma_layout<col>
//   CHECK-NOT:   nvvm.stmatrix
//   CHECK-NOT:   llvm.store
func.func @transposed(%f: vector<48xbf16>, %t: !t) {
  kvpipe.store_fragment %f, %t {swizzle = 64, transpose} : vector<48xbf16>, !t
  return
}
