// RUN: kvpipe-opt %s --kvpipe-check-nvptx-targets -split-input-file -verify-diagnostics
// RUN: kvpipe-opt %s --kvpipe-check-nvptx-targets --convert-kvpipe-to-nvvm -split-input-file -verify-diagnostics

// kvpipe lowers to sm_90 instructions. A gpu.module that declares an older
// NVVM target is an error at its first kvpipe op (NVPTX could not select
// fence.mbarrier_init and would abort), and so is a chip name that is no
// sm_<version>; sm_90 and later and modules without a target pass.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

gpu.module @ampere [#nvvm.target<chip = "sm_80">] {
  gpu.func @k() kernel {
    // expected-error @+1 {{'kvpipe.create' op needs sm_90 or later (mbarrier transactions, TMA, wgmma), but its gpu.module targets sm_80}}
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

func.func @host_side_is_fine(%p: !p) -> !p {
  %q = kvpipe.step %p : !p
  return %q : !p
}

gpu.module @volta [#nvvm.target<chip = "sm_70">] {
  gpu.func @k(%p: !p) kernel {
    // expected-error @+1 {{'kvpipe.consumer_wait' op needs sm_90 or later (mbarrier transactions, TMA, wgmma), but its gpu.module targets sm_70}}
    kvpipe.consumer_wait %p : !p
    gpu.return
  }
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

gpu.module @not_a_chip [#nvvm.target<chip = "gfx942">] {
  gpu.func @k() kernel {
    // expected-error @+1 {{'kvpipe.create' op needs sm_90 or later (mbarrier transactions, TMA, wgmma), but its gpu.module targets gfx942}}
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Hopper and Blackwell targets, and none at all, are accepted.
gpu.module @hopper [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}
gpu.module @hopper_plain [#nvvm.target<chip = "sm_90", features = "+ptx80">] {
  gpu.func @k() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}
gpu.module @blackwell [#nvvm.target<chip = "sm_100a">] {
  gpu.func @k() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}
gpu.module @untargeted {
  gpu.func @k() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}
