// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm | FileCheck %s

// kvpipe.warpgroup_id: threadIdx.x / 128, broadcast from lane 0 with
// shfl.sync.idx (full mask, clamp 31) so that it is visibly warp-uniform.

// CHECK-LABEL: gpu.func @wg
//       CHECK:   %[[C128:.*]] = llvm.mlir.constant(128 : i32) : i32
//       CHECK:   %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
//       CHECK:   %[[WG:.*]] = llvm.udiv %[[TID]], %[[C128]] : i32
//   CHECK-DAG:   %[[MASK:.*]] = llvm.mlir.constant(-1 : i32) : i32
//   CHECK-DAG:   %[[LANE:.*]] = llvm.mlir.constant(0 : i32) : i32
//   CHECK-DAG:   %[[CLAMP:.*]] = llvm.mlir.constant(31 : i32) : i32
//       CHECK:   %[[U:.*]] = nvvm.shfl.sync idx %[[MASK]], %[[WG]], %[[LANE]], %[[CLAMP]] : i32 -> i32
//       CHECK:   %[[X:.*]] = llvm.zext %[[U]] : i32 to i64
//       CHECK:   %[[I:.*]] = builtin.unrealized_conversion_cast %[[X]] : i64 to index
//       CHECK:   arith.cmpi eq, %[[I]]
gpu.module @m {
  gpu.func @wg(%out: memref<1xi1>) kernel {
    %c0 = arith.constant 0 : index
    %wg = kvpipe.warpgroup_id : index
    %is_producer = arith.cmpi eq, %wg, %c0 : index
    memref.store %is_producer, %out[%c0] : memref<1xi1>
    gpu.return
  }
}
