// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// Ping-pong scheduling in PTX: named barriers of 256 threads (a warpgroup
// and the one before it in the cycle); consumer 0 opens the cycle at barrier
// 4. The epilogue keeps its own 128-thread barrier.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @d128_pingpong {head_dim = 128 : i64, element_type = bf16, causal = true, pingpong = true}
  kvpipe.attention_kernel @d64_pingpong {head_dim = 64 : i64, element_type = f16, causal = false, pingpong = true}
}

// CHECK-LABEL: .entry d128_pingpong(
//       CHECK: bar.arrive 4, 256;
//       CHECK: bar.sync {{.*}}%r{{[0-9]+}}, 256;
//       CHECK: wgmma.mma_async
//       CHECK: bar.arrive %r{{[0-9]+}}, 256;
//       CHECK: bar.sync {{.*}}%r{{[0-9]+}}, 128;
// CHECK-LABEL: .entry d64_pingpong(
//       CHECK: bar.arrive 4, 256;
//       CHECK: bar.sync {{.*}}%r{{[0-9]+}}, 256;

// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS-NOT: setmaxnreg' ignored
// PTXAS-COUNT-2: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: warning
