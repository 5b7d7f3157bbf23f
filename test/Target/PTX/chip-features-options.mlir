// RUN: kvpipe-opt %s --kvpipe-to-ptx="verify-protocol=false chip=sm_90a features=+ptx87 ptx-file=%t.ptx" | FileCheck %s
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// A fragment of a pipeline, not a whole protocol: verify-protocol=false.

// The chip and features options give the target of a module that declares
// none.

// CHECK: gpu.binary @undeclared [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx87">
// PTX: .version 8.7
// PTX: .target sm_90a
// PTX: .entry undeclared_kernel(

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

module attributes {gpu.container_module} {
gpu.module @undeclared {
  gpu.func @undeclared_kernel() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.consumer_wait %p : !p
    gpu.return
  }
}
}
