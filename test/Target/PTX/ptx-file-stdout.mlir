// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=-" -o /dev/null | FileCheck %s

// ptx-file=- writes the PTX to standard output: the documented one-line way
// to get the PTX of a module.

// CHECK: .target sm_90a
// CHECK-LABEL: .entry stdout_kernel(
// CHECK: mbarrier.init.shared.b64
// CHECK: ret;

!p = !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>

module attributes {gpu.container_module} {
gpu.module @stdout {
  gpu.func @stdout_kernel() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}
}
