// RUN: kvpipe-opt %s --kvpipe-to-ptx="opt-level=1" | FileCheck %s --check-prefix=O1
// RUN: kvpipe-opt %s --kvpipe-to-ptx | FileCheck %s --check-prefix=O3

// opt-level sets the NVPTX optimisation level of every module: on the
// target of modules without one, and on a module's own target (which keeps
// its chip and features). The default is 3.

// O1: gpu.binary @declared [#gpu.object<#nvvm.target<O = 1, chip = "sm_90a", features = "+ptx86">, properties = {{{.*}}O = 1 : i32}
// O1: gpu.binary @undeclared [#gpu.object<#nvvm.target<O = 1, chip = "sm_90a", features = "+ptx86">, properties = {{{.*}}O = 1 : i32}
// O3: gpu.binary @declared [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">
// O3: gpu.binary @undeclared [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">

module attributes {gpu.container_module} {
gpu.module @declared [#nvvm.target<O = 2, chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel {
    gpu.return
  }
}
gpu.module @undeclared {
  gpu.func @k() kernel {
    gpu.return
  }
}
}
