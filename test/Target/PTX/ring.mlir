// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o %t.mlir
// RUN: FileCheck %s < %t.ptx
// RUN: FileCheck %s --check-prefix=BINARY < %t.mlir
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

// A producer/consumer ring in one kernel, through the whole --kvpipe-to-ptx
// pipeline: warpgroup 0's elected thread loads two 64x64 bf16 boxes per slot
// by TMA into a 2-slot workgroup buffer and commits them with expect_tx of
// 2 * 8192 bytes; the 128 threads of warpgroup 1 wait for each slot and all
// release it (consumers = 128).

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 128>
!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!buf = memref<2x2x64x64xbf16, #gpu.address_space<workgroup>>
!tile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>

// BINARY: gpu.binary @ring [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">, {{.*}}assembly = "

// CHECK: .version 8.6
// CHECK: .target sm_90a
// CHECK-LABEL: .entry ring(
// The tensor map: a 128-byte, 64-byte aligned by-value parameter.
// CHECK: .param .align 64 .b8 ring_param_{{[0-9]+}}[128]
// The barriers: 2 * 2 mbarriers of 8 bytes; the tiles, 1024-byte aligned.
// CHECK-DAG: .shared .align 8 .b8 __kvpipe_mbarriers_0[32];
// CHECK-DAG: .shared .align 1024 .b8 {{.*}}[32768];
// Initialisation by one thread: producers = 1 on the full barriers,
// consumers = 128 on the empty ones, then the fence and a CTA barrier.
// CHECK-COUNT-2: mbarrier.init.shared.b64 [{{.*}}], 1;
// CHECK-COUNT-2: mbarrier.init.shared.b64 [{{.*}}], 128;
// CHECK: fence.mbarrier_init.release.cluster;
// CHECK: bar.sync 0;
// CHECK-DAG: shfl.sync.idx.b32
// CHECK-DAG: prefetch.tensormap
// CHECK-DAG: mbarrier.try_wait.parity.shared.b64
// CHECK-DAG: cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes
// CHECK-DAG: mov.b32 [[TX:%r[0-9]+]], 16384;
// CHECK-DAG: mbarrier.arrive.expect_tx.shared.b64 {{.*}}, [[TX]];
// CHECK-DAG: mbarrier.arrive.shared.b64
// CHECK: ret;

module attributes {gpu.container_module} {
gpu.module @ring {
  gpu.func @ring(%map: !map, %n: index)
      workgroup(%buf : !buf {llvm.align = 1024 : i64}) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    %wg = kvpipe.warpgroup_id : index
    %tid = gpu.thread_id x
    %producer = arith.cmpi eq, %wg, %c0 : index
    scf.if %producer {
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        kvpipe.tma_prefetch_descriptor %map : !map
        %last = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
          kvpipe.producer_acquire %s : !p
          %bar = kvpipe.producer_mbar %s : !p
          %slot = kvpipe.index %s : !p
          %row = arith.muli %i, %c64 : index
          %t0 = memref.subview %buf[%slot, 0, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : !buf to !tile
          %t1 = memref.subview %buf[%slot, 1, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : !buf to !tile
          kvpipe.tma_load %map[%row, %c0], %t0, %bar : !map, !tile
          kvpipe.tma_load %map[%row, %c64], %t1, %bar : !map, !tile
          kvpipe.producer_commit %s : !p
          %next = kvpipe.step %s : !p
          scf.yield %next : !p
        }
      }
    } else {
      %all = arith.constant true
      %last = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %next = kvpipe.consumer_release %s, %all : !p
        scf.yield %next : !p
      }
    }
    gpu.return
  }
}
}
