// chip= and features= of --kvpipe-to-ptx apply to gpu.modules that declare
// no target; given for a module that declares a different one, they are an
// error naming both -- never silently ignored (chip=sm_80 used to exit 0
// with sm_90a PTX).

// RUN: not kvpipe-opt %s --kvpipe-to-ptx="chip=sm_80" -o /dev/null 2>%t.chip
// RUN: FileCheck %s --check-prefix=CHIP < %t.chip
// The message, the module's line and a caret; not the module's body.
// RUN: count 3 < %t.chip
// CHIP: chip-agreement.mlir:[[@LINE+9]]:1: error: kvpipe-to-ptx: chip=sm_80 disagrees with the target that gpu.module @declared declares (chip = "sm_90a"): drop the option or the module's #nvvm.target

// RUN: not kvpipe-opt %s --kvpipe-to-ptx="features=+ptx87" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FEATURES
// FEATURES: error: kvpipe-to-ptx: features=+ptx87 disagrees with the target that gpu.module @declared declares (features = "+ptx86")

// Options that agree with the module's own target are fine.
// RUN: kvpipe-opt %s --kvpipe-to-ptx="chip=sm_90a features=+ptx86" | FileCheck %s --check-prefix=SAME
// SAME: gpu.binary @declared [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">

gpu.module @declared [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel {
    gpu.return
  }
}
