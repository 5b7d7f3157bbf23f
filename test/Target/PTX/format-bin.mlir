// REQUIRES: ptxas
// RUN: kvpipe-opt %s --kvpipe-to-ptx="verify-protocol=false format=bin" | FileCheck %s
// A fragment of a pipeline, not a whole protocol: verify-protocol=false.

// format=bin: gpu-module-to-binary assembles the PTX with ptxas, and the
// gpu.binary holds the ELF cubin instead of the PTX text.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// CHECK: gpu.binary @cubin [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">, {{.*}}bin = "\7FELF
// CHECK-NOT: assembly =
module attributes {gpu.container_module} {
gpu.module @cubin {
  gpu.func @ring() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    kvpipe.consumer_wait %p : !p
    gpu.return
  }
}
}
