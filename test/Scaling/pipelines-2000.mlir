// RUN: %python %S/gen_large.py pipelines 2000 > %t.mlir
// RUN: timeout 300 prlimit --cpu=10 kvpipe-opt %t.mlir --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s < %t.ptx
// UNSUPPORTED: sanitizers

// Scaling (docs/scaling.md): 2,000 pipelines in one kernel, hence 2,000
// barrier arrays to name in one gpu.module. Naming them by probing
// __kvpipe_mbarriers_<i> from 0, with a scan of the module per probe, was
// cubic (31 s of CPU time); the whole of --kvpipe-to-ptx must now take under 10 s of
// CPU time (prlimit: a CPU-time bound does not fail on a busy machine, a
// wall-clock one would). Each array is a distinct shared-memory variable.

// CHECK: .entry pipelines(
// CHECK-DAG: .shared .align 8 .b8 __kvpipe_mbarriers_0[16];
// CHECK-DAG: .shared .align 8 .b8 __kvpipe_mbarriers_1999[16];
// CHECK-NOT: __kvpipe_mbarriers_2000
