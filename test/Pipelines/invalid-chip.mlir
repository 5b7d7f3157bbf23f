// RUN: not kvpipe-opt %s --kvpipe-to-ptx="chip=sm_80" -o /dev/null 2>&1 | FileCheck %s
// RUN: not kvpipe-opt %s --kvpipe-to-ptx="chip=gfx942" -o /dev/null 2>&1 | FileCheck %s

// A chip without sm_90's instructions given on the command line, for a
// module that declares no target, must be a diagnostic. Today it crashes:
// --kvpipe-to-ptx attaches the target (kvpipe-attach-nvvm-target) only after
// the lowering, so convert-kvpipe-to-nvvm cannot see the chip, nothing
// rejects it, and NVPTX aborts ("LLVM ERROR: Cannot select: intrinsic
// %llvm.nvvm.fence.mbarrier_init.release.cluster"). A module that declares
// such a target is rejected (test/Conversion/KVPipeToNVVM/target-check.mlir).
// The fix belongs in lib/Pipelines/KVPipeToPTX.cpp: attach the targets

// CHECK: error: 'kvpipe.create' op needs sm_90 or later

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

module attributes {gpu.container_module} {
gpu.module @m {
  gpu.func @k() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}
}
