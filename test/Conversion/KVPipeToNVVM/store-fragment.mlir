// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file | FileCheck %s

// kvpipe.store_fragment: thread t of the warpgroup (w = t/32, l = t%32)
// holds element i of the 64xN fragment at row 16w + l/4 + 8((i%4)/2),
// column 8(i/4) + 2(l%4) + i%2 (gpu-workflow.md). Each adjacent pair is one
// 32-bit store at the swizzled address: byte offset o = row * S + col * 2
// within the column block, 16-byte chunk XOR (o >> 7) & (S/16 - 1) (the
// TMA swizzle: CUTLASS Swizzle<3,4,3> for 128B, <1,4,3> for 32B), plus the
// block's offset.

!t = memref<2x64x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @swizzle128
//  CHECK-SAME: (%[[F:[^:]*]]: vector<64xbf16>, %[[T:[^:]*]]: memref<2x64x64xbf16, #gpu.address_space<workgroup>>)
//       CHECK:   %[[C128:.*]] = llvm.mlir.constant(128 : i32) : i32
//       CHECK:   %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
//       CHECK:   %[[T128:.*]] = llvm.urem %[[TID]], %[[C128]] : i32
//       CHECK:   %[[C32:.*]] = llvm.mlir.constant(32 : i32) : i32
//       CHECK:   %[[W:.*]] = llvm.udiv %[[T128]], %[[C32]] : i32
//       CHECK:   %[[C32B:.*]] = llvm.mlir.constant(32 : i32) : i32
//       CHECK:   %[[L:.*]] = llvm.urem %[[T128]], %[[C32B]] : i32
//       CHECK:   %[[C4:.*]] = llvm.mlir.constant(4 : i32) : i32
//       CHECK:   %[[L4:.*]] = llvm.udiv %[[L]], %[[C4]] : i32
//       CHECK:   %[[C16:.*]] = llvm.mlir.constant(16 : i32) : i32
//       CHECK:   %[[W16:.*]] = llvm.mul %[[W]], %[[C16]] : i32
//       CHECK:   %[[ROW:.*]] = llvm.add %[[W16]], %[[L4]] : i32
//       CHECK:   %[[C2:.*]] = llvm.mlir.constant(2 : i32) : i32
//       CHECK:   %[[C4B:.*]] = llvm.mlir.constant(4 : i32) : i32
//       CHECK:   %[[LM:.*]] = llvm.urem %[[L]], %[[C4B]] : i32
//       CHECK:   %[[COL:.*]] = llvm.mul %[[LM]], %[[C2]] : i32
//       CHECK:   %[[BASE:.*]] = llvm.getelementptr %{{.*}} : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, bf16
//       CHECK:   %[[PAIRS:.*]] = llvm.bitcast %[[F]] : vector<64xbf16> to vector<32xi32>
// Pair 0: elements 0, 1 at (row, col).
//       CHECK:   %[[R0:.*]] = llvm.add %[[ROW]], %{{.*}} : i32
//       CHECK:   %[[EB:.*]] = llvm.mlir.constant(2 : i32) : i32
//       CHECK:   %[[K0:.*]] = llvm.mlir.constant(0 : i32) : i32
//       CHECK:   %[[CC0:.*]] = llvm.add %[[COL]], %[[K0]] : i32
//       CHECK:   %[[CB0:.*]] = llvm.mul %[[CC0]], %[[EB]] : i32
//       CHECK:   %[[S:.*]] = llvm.mlir.constant(128 : i32) : i32
//       CHECK:   %[[RB0:.*]] = llvm.mul %[[R0]], %[[S]] : i32
//       CHECK:   %[[O0:.*]] = llvm.add %[[RB0]], %[[CB0]] : i32
//       CHECK:   %[[SH4:.*]] = llvm.mlir.constant(4 : i32) : i32
//       CHECK:   %[[M7:.*]] = llvm.mlir.constant(7 : i32) : i32
//       CHECK:   %[[SH7:.*]] = llvm.mlir.constant(7 : i32) : i32
//       CHECK:   %[[HI0:.*]] = llvm.lshr %[[O0]], %[[SH7]] : i32
//       CHECK:   %[[AT0:.*]] = llvm.and %[[HI0]], %[[M7]] : i32
//       CHECK:   %[[X0:.*]] = llvm.shl %[[AT0]], %[[SH4]] : i32
//       CHECK:   %[[SW0:.*]] = llvm.xor %[[O0]], %[[X0]] : i32
//       CHECK:   %[[BLK0:.*]] = llvm.mlir.constant(0 : i32) : i32
//       CHECK:   %[[BY0:.*]] = llvm.add %[[SW0]], %[[BLK0]] : i32
//       CHECK:   %[[A0:.*]] = llvm.getelementptr %[[BASE]][%[[BY0]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
//       CHECK:   %[[V0:.*]] = llvm.extractelement %[[PAIRS]][%{{.*}} : i32] : vector<32xi32>
//       CHECK:   llvm.store %[[V0]], %[[A0]] {alignment = 4 : i64} : i32, !llvm.ptr<3>
// Pair 1: elements 2, 3 at (row + 8, col).
//       CHECK:   %[[EIGHT:.*]] = llvm.mlir.constant(8 : i32) : i32
//       CHECK:   %[[R1:.*]] = llvm.add %[[ROW]], %[[EIGHT]] : i32
//       CHECK:   %[[K1:.*]] = llvm.mlir.constant(0 : i32) : i32
//       CHECK:   llvm.add %[[COL]], %[[K1]] : i32
//       CHECK:   llvm.mul %[[R1]], %{{.*}} : i32
//       CHECK:   llvm.store
// Pair 2: elements 4, 5 at (row, col + 8).
//       CHECK:   llvm.add %[[ROW]], %{{.*}} : i32
//       CHECK:   %[[K2:.*]] = llvm.mlir.constant(8 : i32) : i32
//       CHECK:   llvm.add %[[COL]], %[[K2]] : i32
//       CHECK:   llvm.store
// Pairs 16..31 are columns 64..127: the second block, 64 * 128 B further.
//   CHECK-COUNT-13:   llvm.store
//       CHECK:   llvm.add %[[ROW]], %{{.*}} : i32
//  CHECK-NEXT:   llvm.mlir.constant(2 : i32) : i32
//  CHECK-NEXT:   %[[K16:.*]] = llvm.mlir.constant(0 : i32) : i32
//  CHECK-NEXT:   llvm.add %[[COL]], %[[K16]] : i32
//       CHECK:   %[[BLK1:.*]] = llvm.mlir.constant(8192 : i32) : i32
//       CHECK:   llvm.add %{{.*}}, %[[BLK1]] : i32
//       CHECK:   llvm.store
//   CHECK-COUNT-15:   llvm.store
//   CHECK-NOT:   llvm.store
//       CHECK:   return
func.func @swizzle128(%f: vector<64xbf16>, %t: !t) {
  kvpipe.store_fragment %f, %t : vector<64xbf16>, !t
  return
}

// -----

// 32B swizzle, f16, N = 32: rows of 32 bytes, mask 1 (XOR bit 4 with bit 7),
// blocks of 64 * 32 B = 2048 B, 8 pairs.
!t = memref<2x64x16xf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @swizzle32
//       CHECK:   llvm.bitcast %{{.*}} : vector<16xf16> to vector<8xi32>
//       CHECK:   %[[S:.*]] = llvm.mlir.constant(32 : i32) : i32
//       CHECK:   %[[RB:.*]] = llvm.mul %{{.*}}, %[[S]] : i32
//       CHECK:   %[[O:.*]] = llvm.add %[[RB]], %{{.*}} : i32
//       CHECK:   %[[SH4:.*]] = llvm.mlir.constant(4 : i32) : i32
//       CHECK:   %[[M1:.*]] = llvm.mlir.constant(1 : i32) : i32
//       CHECK:   %[[SH7:.*]] = llvm.mlir.constant(7 : i32) : i32
//       CHECK:   %[[HI:.*]] = llvm.lshr %[[O]], %[[SH7]] : i32
//       CHECK:   %[[AT:.*]] = llvm.and %[[HI]], %[[M1]] : i32
//       CHECK:   %[[X:.*]] = llvm.shl %[[AT]], %[[SH4]] : i32
//       CHECK:   llvm.xor %[[O]], %[[X]] : i32
//   CHECK-COUNT-4:   llvm.store %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
//       CHECK:   llvm.mlir.constant(2048 : i32) : i32
//   CHECK-COUNT-4:   llvm.store %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
//   CHECK-NOT:   llvm.store
func.func @swizzle32(%f: vector<16xf16>, %t: !t) {
  kvpipe.store_fragment %f, %t {swizzle = 32} : vector<16xf16>, !t
  return
}

// -----

// 64B swizzle: mask 3 (XOR bits 4-5 with bits 7-8).
!t = memref<64x32xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: func.func @swizzle64
//       CHECK:   %[[S:.*]] = llvm.mlir.constant(64 : i32) : i32
//       CHECK:   llvm.mul %{{.*}}, %[[S]] : i32
//       CHECK:   llvm.mlir.constant(4 : i32) : i32
//       CHECK:   %[[M3:.*]] = llvm.mlir.constant(3 : i32) : i32
//       CHECK:   llvm.and %{{.*}}, %[[M3]] : i32
//   CHECK-COUNT-8:   llvm.store
//   CHECK-NOT:   llvm.store
func.func @swizzle64(%f: vector<16xbf16>, %t: !t) {
  kvpipe.store_fragment %f, %t {swizzle = 64} : vector<16xbf16>, !t
  return
}
