// RUN: kvpipe-opt %s --kvpipe-to-ptx="verify-protocol=false wait-timeout=100000 ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}
// RUN: kvpipe-opt %s --kvpipe-to-ptx="verify-protocol=false ptx-file=%t.off.ptx" -o /dev/null
// RUN: FileCheck %s --check-prefix=OFF < %t.off.ptx
// A fragment of a pipeline, not a whole protocol: verify-protocol=false.

// The wait-timeout debug option survives to PTX: a bounded try_wait loop on
// clock64 that calls vprintf with a format naming the op ("kvpipe:
// consumer_wait at loc(...") and its location, block, thread, barrier, slot,
// stage and parity, then traps. Without it: no printf, no trap, and the wait
// is the suspending try_wait loop.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// CHECK: .extern .func  (.param .b32 func_retval0) vprintf
// "kvpipe: consumer_wait at loc(" in bytes.
// CHECK: .global .align 1 .b8 [[FMT:printfFormat_[0-9]+]][{{[0-9]+}}] = {107, 118, 112, 105, 112, 101, 58, 32, 99, 111, 110, 115, 117, 109, 101, 114, 95, 119, 97, 105, 116, 32, 97, 116, 32, 108, 111, 99, 40,
// CHECK-LABEL: .entry timeout(
// CHECK: fence.mbarrier_init.release.cluster;
// CHECK: mov.u64 [[START:%rd[0-9]+]], %clock64;
// CHECK: [[LOOP:\$L__BB[0-9_]+]]:
// CHECK: mbarrier.try_wait.parity.shared.b64 [[DONE:%p[0-9]+]], [{{.*}}], {{%r[0-9]+}};
// CHECK: mov.u64 [[NOW:%rd[0-9]+]], %clock64;
// CHECK: sub.s64 {{%rd[0-9]+}}, [[NOW]], [[START]];
// CHECK: setp.lt.u64 {{%p[0-9]+}}, {{%rd[0-9]+}}, 100001;
// CHECK: bra{{.*}} [[LOOP]];
// CHECK: mov.b64 {{%rd[0-9]+}}, [[FMT]];
// CHECK: call.uni (retval0), vprintf, (param0, param1);
// CHECK: trap;

// OFF-NOT: vprintf
// OFF-LABEL: .entry timeout(
// OFF: mbarrier.try_wait.parity.shared.b64 P1, [{{.*}}], {{.*}}, 10000000;
// OFF-NOT: clock64
// OFF-NOT: trap;
// OFF: ret;

module attributes {gpu.container_module} {
gpu.module @timeout {
  gpu.func @timeout() kernel {
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.consumer_wait %p : !p
    gpu.return
  }
}
}
