// Asking for the PTX of an input that has nothing to compile says so: the
// file was not written, and exit code 1 (not a silent success).

// RUN: rm -f %t.ptx
// RUN: not kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null 2>&1 | FileCheck %s
// RUN: not test -e %t.ptx
// Without ptx-file, lowering nothing is fine.
// RUN: kvpipe-opt %s --kvpipe-to-ptx | FileCheck %s --check-prefix=OK

// CHECK: error: kvpipe-to-ptx: ptx-file={{.*}}.ptx: no PTX was produced, the input has no gpu.module to compile
// OK: func.func @host

func.func @host() {
  return
}
