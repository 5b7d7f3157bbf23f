// RUN: kvpipe-opt %s --kvpipe-to-ptx="verify-protocol=false ptx-file=%t.ptx" | FileCheck %s
// RUN: FileCheck %s --check-prefix=UNDECLARED < %t.undeclared.ptx
// RUN: FileCheck %s --check-prefix=DECLARED < %t.declared.ptx
// A fragment of a pipeline, not a whole protocol: verify-protocol=false.

// Modules that declare no target get sm_90a and +ptx86 (or the chip and
// features options: chip-features-options.mlir); a module's own
// #nvvm.target keeps its chip and features (options that disagree with it
// are an error: test/Pipelines/chip-agreement.mlir). With several modules,
// ptx-file=F.ptx writes one F.<module>.ptx per binary.

// CHECK: gpu.binary @declared [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">
// CHECK: gpu.binary @undeclared [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">

// UNDECLARED: .version 8.6
// UNDECLARED: .target sm_90a
// UNDECLARED: .entry undeclared_kernel(

// DECLARED: .version 8.0
// DECLARED: .target sm_90
// DECLARED-NOT: sm_90a
// DECLARED: .entry declared_kernel(

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

module attributes {gpu.container_module} {
gpu.module @declared [#nvvm.target<chip = "sm_90", features = "+ptx80">] {
  gpu.func @declared_kernel() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.consumer_wait %p : !p
    gpu.return
  }
}
gpu.module @undeclared {
  gpu.func @undeclared_kernel() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.consumer_wait %p : !p
    gpu.return
  }
}
}
