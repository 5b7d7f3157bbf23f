// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: FileCheck %s < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// A ring of kv_stages = 3 K/V tiles split into qk_stages = 2 sub-stages:
// 6 slots, 12 barriers. Each sub-stage has its own TMA box and its own
// expect_tx (8192 bytes for the 64x64 box of sub-stage 0, 4096 for the
// 32x64 box of sub-stage 1); the consumer waits and releases both, the
// second release stepping the state.

!p = !kvpipe.pipeline<kv_stages = 3, qk_stages = 2, producers = 1, consumers = 1>
!m0 = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!m1 = !kvpipe.tensor_map<box = [32, 64], element_type = bf16, swizzle = 128>
!t0 = memref<64x64xbf16, #gpu.address_space<workgroup>>
!t1 = memref<32x64xbf16, #gpu.address_space<workgroup>>

// CHECK-LABEL: .entry qk_stages(
// CHECK-DAG: .shared .align 8 .b8 __kvpipe_mbarriers_0[96];
// CHECK-COUNT-12: mbarrier.init.shared.b64 [{{.*}}], 1;
// CHECK-NOT: mbarrier.init
// CHECK-DAG: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes
// CHECK-DAG: mov.b32 [[TX0:%r[0-9]+]], 8192;
// CHECK-DAG: mbarrier.arrive.expect_tx.shared.b64 {{.*}}, [[TX0]];
// CHECK-DAG: mov.b32 [[TX1:%r[0-9]+]], 4096;
// CHECK-DAG: mbarrier.arrive.expect_tx.shared.b64 {{.*}}, [[TX1]];
// CHECK-DAG: mbarrier.arrive.shared.b64
// CHECK: ret;

module attributes {gpu.container_module} {
gpu.module @qk {
  gpu.func @qk_stages(%m0: !m0, %m1: !m1, %n: index)
      workgroup(%b0 : !t0 {llvm.align = 1024 : i64}, %b1 : !t1 {llvm.align = 1024 : i64}) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    %tid = gpu.thread_id x
    %producer = arith.cmpi eq, %tid, %c0 : index
    scf.if %producer {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s stage 0 : !p
        %bar0 = kvpipe.producer_mbar %s stage 0 : !p
        kvpipe.tma_load %m0[%i, %c0], %b0, %bar0 : !m0, !t0
        kvpipe.producer_commit %s stage 0 : !p
        kvpipe.producer_acquire %s stage 1 : !p
        %bar1 = kvpipe.producer_mbar %s stage 1 : !p
        kvpipe.tma_load %m1[%i, %c0], %b1, %bar1 : !m1, !t1
        kvpipe.producer_commit %s stage 1 : !p
        %next = kvpipe.step %s : !p
        scf.yield %next : !p
      }
    } else {
      %e = arith.cmpi eq, %tid, %c1 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s stage 0 : !p
        %s0 = kvpipe.consumer_release %s, %e stage 0 : !p
        kvpipe.consumer_wait %s0 stage 1 : !p
        %s1 = kvpipe.consumer_release %s0, %e stage 1 : !p
        scf.yield %s1 : !p
      }
    }
    gpu.return
  }
}
}
