// RUN: not kvpipe-opt %s --kvpipe-to-ptx="format=foo" -o %t.mlir 2>&1 | FileCheck %s
// RUN: not grep -q gpu.binary %t.mlir

// An unknown format must be an error that stops the pipeline (non-zero exit
// code, no gpu.binary). Today upstream gpu-module-to-binary (LLVM 22) reports
// "Invalid format specified." but does not fail the pass: kvpipe-opt exits 0
// and prints a gpu.binary with an object of no format. The fix belongs in
// lib/Pipelines/KVPipeToPTX.cpp (validate `format` before building the

// CHECK: error: {{.*}}format

module attributes {gpu.container_module} {
gpu.module @m {
  gpu.func @k() kernel {
    gpu.return
  }
}
}
