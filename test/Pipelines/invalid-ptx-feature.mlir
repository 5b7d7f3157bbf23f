// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-to-ptx -o /dev/null
// RUN: not kvpipe-opt %s -split-input-file --kvpipe-to-ptx="features=+ptx60" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OPTION

// Regression (found by tools/fuzz/kvpipe_fuzz.py): an NVVM target whose
// features name a PTX version older than its chip needs (sm_90a with +ptx60,
// sm_100f or sm_120a with +ptx86), declared or given with
// --kvpipe-to-ptx="chip=... features=...", made NVPTX abort ("LLVM ERROR:
// PTX version 6.0 does not support target 'sm_90a'"), whether or not the
// module held kvpipe ops. It is an error at the gpu.module.

// OPTION: invalid-ptx-feature.mlir:[[# @LINE + 2]]:1: error: 'gpu.module' op targets sm_90a with PTX ISA 6.0 (features "+ptx60"), but NVPTX needs PTX ISA 8.0 or later for sm_90a: raise the '+ptx' feature or leave it out
// expected-error @+1 {{'gpu.module' op targets sm_90a with PTX ISA 6.0 (features "+ptx60"), but NVPTX needs PTX ISA 8.0 or later for sm_90a: raise the '+ptx' feature or leave it out}}
gpu.module @old_ptx [#nvvm.target<chip = "sm_90a", features = "+ptx60">] {
  gpu.func @k() kernel {
    gpu.return
  }
}

// -----

// expected-error @+1 {{'gpu.module' op targets sm_100f with PTX ISA 8.6 (features "+ptx86"), but NVPTX needs PTX ISA 8.8 or later for sm_100f}}
gpu.module @family [#nvvm.target<chip = "sm_100f", features = "+ptx86">] {
  gpu.func @k() kernel {
    %p = kvpipe.create : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
    kvpipe.init %p : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
    gpu.return
  }
}

// -----

// expected-error @+1 {{'gpu.module' op targets sm_120a with PTX ISA 8.6 (features "+ptx86"), but NVPTX needs PTX ISA 8.7 or later for sm_120a}}
gpu.module @blackwell [#nvvm.target<chip = "sm_120a", features = "+ptx86">] {
  gpu.func @k() kernel {
    gpu.return
  }
}

// -----

// A version NVPTX does not know is ignored (with a warning), so the chip's
// default applies and the module compiles. A features option that disagrees
// with the module's own target is an error (test/Pipelines/chip-agreement.mlir).
// OPTION: error: kvpipe-to-ptx: features=+ptx60 disagrees with the target that gpu.module @unknown_version declares (features = "+ptx99")
gpu.module @unknown_version [#nvvm.target<chip = "sm_90a", features = "+ptx99">] {
  gpu.func @k() kernel {
    gpu.return
  }
}
