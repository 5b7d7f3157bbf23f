// RUN: kvpipe-opt %s -split-input-file \
// RUN:   --pass-pipeline='builtin.module(gpu.module(convert-kvpipe-to-nvvm,convert-gpu-to-nvvm,kvpipe-finalize-kernel-abi))' \
// RUN: | FileCheck %s
// RUN: kvpipe-opt %s -split-input-file \
// RUN:   --pass-pipeline='builtin.module(gpu.module(convert-kvpipe-to-nvvm,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1},kvpipe-finalize-kernel-abi{use-bare-ptr-memref-call-conv=1}))' \
// RUN: | FileCheck %s --check-prefix=BARE

// After convert-gpu-to-nvvm, kvpipe-finalize-kernel-abi finds the tensor-map
// arguments among the lowered llvm.func's (memref arguments expand into
// several) and makes each a by-value grid constant: llvm.byval = 128 bytes,
// llvm.align = 64, nvvm.grid_constant (CUDA's __grid_constant__ const
// CUtensorMap). The records of convert-kvpipe-to-nvvm are removed.

!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!v = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>

// A memref<?xf32> is 5 arguments (allocated, aligned, offset, size, stride),
// so the tensor maps, inputs 1 and 3, are llvm.func arguments 5 and 7.
// CHECK-LABEL: llvm.func @attention
//  CHECK-SAME: (%{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: i64, %{{[a-z0-9]+}}: i64, %{{[a-z0-9]+}}: i64,
//  CHECK-SAME:  %[[K:[a-z0-9]+]]: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant},
//  CHECK-SAME:  %{{[a-z0-9]+}}: i64,
//  CHECK-SAME:  %[[V:[a-z0-9]+]]: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})
//  CHECK-SAME:  attributes {gpu.kernel, nvvm.kernel}
//   CHECK-NOT:  kvpipe.tensor_map_args
//       CHECK:   nvvm.prefetch tensormap, %[[K]]
//       CHECK:   nvvm.prefetch tensormap, %[[V]]
// With bare pointers a memref is one argument: the maps are arguments 1, 3.
// BARE-LABEL: llvm.func @attention
//  BARE-SAME: (%{{[a-z0-9]+}}: !llvm.ptr,
//  BARE-SAME:  %{{[a-z0-9]+}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant},
//  BARE-SAME:  %{{[a-z0-9]+}}: i64,
//  BARE-SAME:  %{{[a-z0-9]+}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})
//   BARE-NOT:  kvpipe.kernel_signature
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @attention(%out: memref<16xf32>, %k: !k, %n: index, %v: !v) kernel {
      kvpipe.tma_prefetch_descriptor %k : !k
      kvpipe.tma_prefetch_descriptor %v : !v
      gpu.return
    }
  }
}

// -----

// A 2-D memref first (7 arguments; 1 with bare pointers), the map last; a kernel without maps is
// untouched.
!k = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>

// CHECK-LABEL: llvm.func @after_2d
//  CHECK-SAME: (%{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: i64, %{{[a-z0-9]+}}: i64, %{{[a-z0-9]+}}: i64, %{{[a-z0-9]+}}: i64, %{{[a-z0-9]+}}: i64,
//  CHECK-SAME:  %{{[a-z0-9]+}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})
// BARE-LABEL: llvm.func @after_2d
//  BARE-SAME: (%{{[a-z0-9]+}}: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})
// CHECK-LABEL: llvm.func @no_maps
//   CHECK-NOT: nvvm.grid_constant
//       CHECK: llvm.return
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @after_2d(%out: memref<4x8xf32>, %k: !k) kernel {
      kvpipe.tma_prefetch_descriptor %k : !k
      gpu.return
    }
    gpu.func @no_maps(%out: memref<16xf32>) kernel {
      gpu.return
    }
  }
}
