// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm | FileCheck %s

// kvpipe.tma_prefetch_descriptor: prefetch.tensormap on the descriptor (the
// generic pointer to the by-value kernel parameter).

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>

// CHECK-LABEL: gpu.func @prefetch
//  CHECK-SAME: (%[[MAP:.*]]: !llvm.ptr, %[[MAP2:.*]]: !llvm.ptr)
//       CHECK:   nvvm.prefetch tensormap, %[[MAP]] : !llvm.ptr
//  CHECK-NEXT:   nvvm.prefetch tensormap, %[[MAP2]] : !llvm.ptr
//  CHECK-NEXT:   gpu.return
gpu.module @m {
  gpu.func @prefetch(%map: !map, %map2: !kvpipe.tensor_map<box = [8], element_type = i64, swizzle = 0>) kernel {
    kvpipe.tma_prefetch_descriptor %map : !map
    kvpipe.tma_prefetch_descriptor %map2 : !kvpipe.tensor_map<box = [8], element_type = i64, swizzle = 0>
    gpu.return
  }
}
