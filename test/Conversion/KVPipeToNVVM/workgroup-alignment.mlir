// RUN: kvpipe-opt %s --convert-kvpipe-to-nvvm | FileCheck %s

// Workgroup buffers of kernels that use kvpipe's data path start on a
// 1024-byte swizzle atom; larger requests are kept; kernels without TMA or
// wgmma are left alone.

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!pipe = !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

gpu.module @m [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // CHECK-LABEL: gpu.func @tma
  //  CHECK-SAME: workgroup(%{{.*}} : memref<64x64xbf16, #gpu.address_space<workgroup>> {llvm.align = 1024 : i64}, %{{.*}} : memref<64x64xbf16, #gpu.address_space<workgroup>> {llvm.align = 4096 : i64})
  gpu.func @tma(%map: !map) workgroup(%a : !tile, %b : !tile {llvm.align = 4096 : i64}) kernel {
    %c0 = arith.constant 0 : index
    %p = kvpipe.create : !pipe
    kvpipe.init %p : !pipe
    kvpipe.producer_acquire %p : !pipe
    %bar = kvpipe.producer_mbar %p : !pipe
    kvpipe.tma_load %map[%c0, %c0], %a, %bar : !map, !tile
    kvpipe.producer_commit %p : !pipe
    gpu.return
  }

  // CHECK-LABEL: gpu.func @no_data_path
  //  CHECK-SAME: workgroup(%{{.*}} : memref<64x64xbf16, #gpu.address_space<workgroup>>)
  //   CHECK-NOT: llvm.align
  gpu.func @no_data_path() workgroup(%a : !tile) kernel {
    gpu.return
  }
}
