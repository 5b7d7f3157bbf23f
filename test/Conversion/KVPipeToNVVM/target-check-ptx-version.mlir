// RUN: kvpipe-opt %s --kvpipe-check-nvptx-targets -split-input-file -verify-diagnostics
// RUN: kvpipe-opt %s --kvpipe-check-nvptx-targets --convert-kvpipe-to-nvvm -split-input-file -verify-diagnostics

// Regression (found by tools/fuzz/kvpipe_fuzz.py): a gpu.module that targets
// sm_90 and names no PTX version gets NVPTX's default for that chip, PTX ISA
// 7.8, which has no fence.mbarrier_init, mbarrier transaction counts or TMA:
// --kvpipe-to-ptx aborted in NVPTX ("LLVM ERROR: Cannot select: intrinsic
// %llvm.nvvm.fence.mbarrier_init.release.cluster"). The first kvpipe op is
// an error instead; the same module with PTX ISA 8.0 or later lowers.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

gpu.module @default_ptx [#nvvm.target<chip = "sm_90">] {
  gpu.func @k() kernel {
    // expected-error @+1 {{'kvpipe.create' op needs PTX ISA 8.0 or later (mbarrier transactions, fence.mbarrier_init, TMA, wgmma), but its gpu.module targets sm_90 with PTX ISA 7.8: add features = "+ptx80" (or later) to the target}}
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

gpu.module @old_ptx [#nvvm.target<chip = "sm_90", features = "+ptx78">] {
  gpu.func @k(%p: !p) kernel {
    // expected-error @+1 {{'kvpipe.consumer_wait' op needs PTX ISA 8.0 or later (mbarrier transactions, fence.mbarrier_init, TMA, wgmma), but its gpu.module targets sm_90 with PTX ISA 7.8}}
    kvpipe.consumer_wait %p : !p
    gpu.return
  }
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// PTX ISA 8.0 or later, named or the chip's default, is accepted; of several
// versions NVPTX takes the highest, and so does the check.
gpu.module @ptx80 [#nvvm.target<chip = "sm_90", features = "+ptx80">] {
  gpu.func @k() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}
gpu.module @highest [#nvvm.target<chip = "sm_90", features = "+ptx78,+ptx83">] {
  gpu.func @k() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}
gpu.module @sm90a_default [#nvvm.target<chip = "sm_90a">] {
  gpu.func @k() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}
