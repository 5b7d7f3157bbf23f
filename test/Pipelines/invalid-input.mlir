// Invalid IR through the whole pipeline: every case is a diagnostic with a
// location and exit code 1.

// RUN: not kvpipe-opt %s -split-input-file --kvpipe-to-ptx -o /dev/null 2>&1 | FileCheck %s

!p = !kvpipe.pipeline<kv_stages = 0, qk_stages = 1, producers = 1, consumers = 1>
// CHECK: invalid-input.mlir:[[@LINE-1]]:{{[0-9]+}}: error: pipeline parameter 'kv_stages' must be a positive integer, got 0

// -----

gpu.module @m {
  gpu.func @k(%p: !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>) kernel {
    // CHECK: invalid-input.mlir:[[@LINE+1]]:5: error: 'kvpipe.producer_acquire' op 'qk_stage' must be in [0, 1)
    kvpipe.producer_acquire %p stage 3 : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
    gpu.return
  }
}

// -----

// A syntax error.
gpu.module @m {
  gpu.func @k() kernel {
    // CHECK: invalid-input.mlir:[[@LINE+1]]:{{[0-9]+}}: error: {{.*}}
    %p = kvpipe.create !kvpipe.pipeline
    gpu.return
  }
}

// -----

// A commit whose bytes cannot be derived fails the lowering, inside the
// pipeline.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!tile = memref<64x64xbf16, #gpu.address_space<workgroup>>
gpu.module @m {
  gpu.func @k(%map: !map, %c: i1) workgroup(%t : !tile) kernel {
    %c0 = arith.constant 0 : index
    %p = kvpipe.create : !p
    %b = kvpipe.producer_mbar %p : !p
    scf.if %c {
      kvpipe.tma_load %map[%c0, %c0], %t, %b : !map, !tile
    }
    // CHECK: invalid-input.mlir:[[@LINE+1]]:5: error: 'kvpipe.producer_commit' op cannot derive its transaction bytes
    kvpipe.producer_commit %p : !p
    gpu.return
  }
}

// -----

// A kvpipe program for a gpu.module that declares a pre-Hopper target.
gpu.module @m [#nvvm.target<chip = "sm_80">] {
  gpu.func @k(%a: memref<64x64xbf16, #gpu.address_space<workgroup>>,
              %b: memref<8x64xbf16, #gpu.address_space<workgroup>>) kernel {
    // CHECK: invalid-input.mlir:[[@LINE+1]]:10: error: 'kvpipe.warpgroup_mma' op needs sm_90 or later (mbarrier transactions, TMA, wgmma), but its gpu.module targets sm_80
    %d = kvpipe.warpgroup_mma %a, %b : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<8x64xbf16, #gpu.address_space<workgroup>> -> vector<4xf32>
    gpu.return
  }
}

// -----

// sm_90 (without the "a" features) has mbarriers and TMA but no wgmma: the
// NVVM verifier names the chip once the lowering has produced the op.
gpu.module @m [#nvvm.target<chip = "sm_90", features = "+ptx80">] {
  gpu.func @k(%a: memref<64x64xbf16, #gpu.address_space<workgroup>>,
              %b: memref<8x64xbf16, #gpu.address_space<workgroup>>) kernel {
    // CHECK: invalid-input.mlir:[[@LINE+1]]:10: error: 'nvvm.wgmma.fence.aligned' op is not supported on sm_90
    %d = kvpipe.warpgroup_mma %a, %b : memref<64x64xbf16, #gpu.address_space<workgroup>>, memref<8x64xbf16, #gpu.address_space<workgroup>> -> vector<4xf32>
    gpu.return
  }
}
