// RUN: kvpipe-opt %s --kvpipe-check-nvptx-targets -split-input-file -verify-diagnostics
// RUN: kvpipe-opt %s --kvpipe-check-nvptx-targets --convert-kvpipe-to-nvvm -split-input-file -verify-diagnostics

// Regression (found by tools/fuzz/kvpipe_fuzz.py): a TMA load without
// multicast lowers to cp.async.bulk.tensor with a .shared::cta destination,
// which PTX ISA 8.6 introduced. An sm_90a target with PTX ISA 8.0 (its
// default, or --kvpipe-to-ptx="features=") passed the check, and NVPTX
// aborted ("LLVM ERROR: Cannot select: intrinsic
// %llvm.nvvm.cp.async.bulk.tensor.g2s.cta.tile.2d"). The load is an error;
// a multicast load (.shared::cluster, PTX ISA 8.0) is not.

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

gpu.module @ptx80 [#nvvm.target<chip = "sm_90a">] {
  gpu.func @k(%map: !map, %bar: !kvpipe.mbarrier, %i: index, %mask: i16)
      workgroup(%t : !tile) kernel {
    kvpipe.tma_load %map[%i, %i], %t, %bar multicast %mask : !map, !tile
    // expected-error @+1 {{'kvpipe.tma_load' op needs PTX ISA 8.6 or later (cp.async.bulk.tensor into .shared::cta), but its gpu.module targets sm_90a with PTX ISA 8.0: add features = "+ptx86" (or later) to the target}}
    kvpipe.tma_load %map[%i, %i], %t, %bar : !map, !tile
    gpu.return
  }
}

// -----

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>

gpu.module @ptx86 [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %bar: !kvpipe.mbarrier, %i: index)
      workgroup(%t : !tile) kernel {
    kvpipe.tma_load %map[%i, %i], %t, %bar : !map, !tile
    gpu.return
  }
}

// -----

// A bulk load (cp.async.bulk, non-tensor) always has the .shared::cta
// destination: PTX ISA 8.6 as well.
gpu.module @bulk_ptx80 [#nvvm.target<chip = "sm_90a">] {
  gpu.func @k(%src: !llvm.ptr, %bar: !kvpipe.mbarrier)
      workgroup(%t : memref<64xf32, #gpu.address_space<workgroup>>) kernel {
    // expected-error @+1 {{'kvpipe.bulk_load' op needs PTX ISA 8.6 or later (cp.async.bulk into .shared::cta), but its gpu.module targets sm_90a with PTX ISA 8.0}}
    kvpipe.bulk_load %src, %t, %bar : !llvm.ptr, memref<64xf32, #gpu.address_space<workgroup>>
    gpu.return
  }
}

// -----

gpu.module @bulk_ptx86 [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%src: !llvm.ptr, %bar: !kvpipe.mbarrier)
      workgroup(%t : memref<64xf32, #gpu.address_space<workgroup>>) kernel {
    kvpipe.bulk_load %src, %t, %bar : !llvm.ptr, memref<64xf32, #gpu.address_space<workgroup>>
    gpu.return
  }
}
