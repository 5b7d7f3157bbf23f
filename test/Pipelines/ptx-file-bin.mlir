// REQUIRES: ptxas
// RUN: rm -f %t.ptx
// RUN: not kvpipe-opt %s --kvpipe-to-ptx="format=bin ptx-file=%t.ptx" -o /dev/null 2>&1 | FileCheck %s
// RUN: not test -e %t.ptx

// ptx-file writes the PTX that format=isa produces; with format=bin there is
// none to write, which is an error at the gpu.binary, not an empty file.

// CHECK: error: kvpipe-to-ptx: ptx-file={{.*}}ptx-file-bin.mlir.tmp.ptx: gpu.binary @cubin holds no PTX (format=bin gives a cubin): compile with format=isa
module attributes {gpu.container_module} {
gpu.module @cubin {
  gpu.func @empty() kernel {
    gpu.return
  }
}
}
