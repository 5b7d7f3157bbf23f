// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm -split-input-file | FileCheck %s

// Tensor-map arguments become generic pointers (to the by-value kernel
// parameter). Because upstream's gpu.func lowering drops by-value argument
// attributes, the pass records which arguments they were and the converted
// signature on the function (kvpipe.tensor_map_args, kvpipe.kernel_signature)
// for kvpipe-finalize-kernel-abi.

!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!v = !kvpipe.tensor_map<box = [1, 64, 32], element_type = f16, swizzle = 64>

// CHECK-LABEL: gpu.module @kernels
//       CHECK:   gpu.func @attention(%{{.*}}: memref<?xf32>, %[[K:.*]]: !llvm.ptr, %{{.*}}: index, %[[V:.*]]: !llvm.ptr) kernel
//  CHECK-SAME:       kvpipe.kernel_signature = (memref<?xf32>, !llvm.ptr, index, !llvm.ptr) -> ()
//  CHECK-SAME:       kvpipe.tensor_map_args = array<i32: 1, 3>
//       CHECK:     nvvm.prefetch tensormap, %[[K]] : !llvm.ptr
//       CHECK:     nvvm.prefetch tensormap, %[[V]] : !llvm.ptr
gpu.module @kernels {
  gpu.func @attention(%out: memref<?xf32>, %k: !k, %n: index, %v: !v) kernel {
    kvpipe.tma_prefetch_descriptor %k : !k
    kvpipe.tma_prefetch_descriptor %v : !v
    gpu.return
  }

// A function without tensor maps is left alone.
// CHECK-LABEL: gpu.func @plain
//   CHECK-NOT:   kvpipe.tensor_map_args
//   CHECK-NOT:   kvpipe.kernel_signature
//       CHECK:   gpu.return
  gpu.func @plain(%out: memref<?xf32>) kernel {
    gpu.return
  }
}

// -----

// A kernel with tensor maps and workgroup attributions keeps its buffers:
// only the inputs of the signature are converted.
!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: gpu.func @with_buffers
//  CHECK-SAME:   (%[[K:.*]]: !llvm.ptr, %[[I:.*]]: index)
//  CHECK-SAME:   workgroup(%[[BUF:[^ ]*]] : memref<64x64xbf16, #gpu.address_space<workgroup>> {llvm.align = 1024 : i64}, %[[BUF2:[^ ]*]] : memref<64x64xbf16, #gpu.address_space<workgroup>> {llvm.align = 1024 : i64})
//  CHECK-SAME:   private(%[[PRIV:.*]] : memref<4xf32, #gpu.address_space<private>>)
//  CHECK-SAME:   kernel
//  CHECK-SAME:   kvpipe.kernel_signature = (!llvm.ptr, index) -> ()
//  CHECK-SAME:   kvpipe.tensor_map_args = array<i32: 0>
//       CHECK:   builtin.unrealized_conversion_cast %[[BUF2]]
//       CHECK:   builtin.unrealized_conversion_cast %[[BUF]]
//       CHECK:   nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[K]]
//       CHECK:   nvvm.cp.async.bulk.tensor.global.shared.cta %[[K]]
//       CHECK:   memref.store %{{.*}}, %[[PRIV]]
gpu.module @kernels {
  gpu.func @with_buffers(%k: !k, %i: index)
      workgroup(%buf : !tile {llvm.align = 1024 : i64}, %buf2 : !tile)
      private(%priv : memref<4xf32, #gpu.address_space<private>>) kernel {
    %p = kvpipe.create : !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
    %b = kvpipe.producer_mbar %p : !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
    kvpipe.tma_load %k[%i, %i], %buf, %b : !k, !tile
    kvpipe.tma_store %buf2, %k[%i, %i] : !tile, !k
    %f = arith.constant 1.0 : f32
    memref.store %f, %priv[%i] : memref<4xf32, #gpu.address_space<private>>
    gpu.return
  }
}

// -----

// func.func kernels (lowered later by convert-func-to-llvm) get the same
// record.
!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>

// CHECK-LABEL: func.func @host_visible(%{{.*}}: i32, %{{.*}}: !llvm.ptr)
//  CHECK-SAME:   attributes {kvpipe.kernel_signature = (i32, !llvm.ptr) -> (), kvpipe.tensor_map_args = array<i32: 1>}
func.func @host_visible(%x: i32, %k: !k) {
  kvpipe.tma_prefetch_descriptor %k : !k
  return
}
