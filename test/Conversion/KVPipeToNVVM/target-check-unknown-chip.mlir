// RUN: kvpipe-opt %s --kvpipe-check-nvptx-targets -split-input-file -verify-diagnostics
// RUN: kvpipe-opt %s --kvpipe-check-nvptx-targets --convert-kvpipe-to-nvvm -split-input-file -verify-diagnostics

// Regression (found by tools/fuzz/kvpipe_fuzz.py): a chip name of sm_90 or
// above that NVPTX does not know (sm_95, sm_90f) passed the check, NVPTX
// ignored it with a warning and selected instructions for sm_20, and
// --kvpipe-to-ptx aborted ("LLVM ERROR: Cannot select: intrinsic
// %llvm.nvvm.prefetch.tensormap"). Such a chip is an error at the first
// kvpipe op.

!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>

gpu.module @unknown [#nvvm.target<chip = "sm_95">] {
  gpu.func @k(%map: !map) kernel {
    // expected-error @+1 {{'kvpipe.tma_prefetch_descriptor' op needs sm_90 or later (mbarrier transactions, TMA, wgmma), but its gpu.module targets sm_95, a chip NVPTX does not know}}
    kvpipe.tma_prefetch_descriptor %map : !map
    gpu.return
  }
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Family variants exist from sm_100f on, not for Hopper.
gpu.module @no_family [#nvvm.target<chip = "sm_90f">] {
  gpu.func @k() kernel {
    // expected-error @+1 {{'kvpipe.create' op needs sm_90 or later (mbarrier transactions, TMA, wgmma), but its gpu.module targets sm_90f, a chip NVPTX does not know}}
    %p = kvpipe.create : !p
    gpu.return
  }
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

gpu.module @blackwell_family [#nvvm.target<chip = "sm_100f">] {
  gpu.func @k() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}
