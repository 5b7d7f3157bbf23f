// GPU-TEST-OPTIONS: verify-protocol=false wait-timeout=200000000
// A deliberately broken pipeline, compiled with wait-timeout on and the
// protocol check off: the producer fills one slot fewer than the consumers
// wait for, so the last consumer_wait can never complete. With
// wait-timeout=200000000 (about 0.1 s) that wait reports where it hung and
// traps: the process fails within seconds instead of hanging the GPU.
//
// RUN: kvpipe-opt %s --kvpipe-to-ptx="verify-protocol=false wait-timeout=200000000 ptx-file=%t.ptx" -o %t.mlir
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}
// RUN: %if gpu %{ %python %S/runners/wait_timeout.py %t.ptx | FileCheck %s %}
//
// The same kernel without the option: a plain try_wait loop, no report.
// RUN: kvpipe-opt %s --kvpipe-to-ptx="verify-protocol=false ptx-file=%t.off.ptx" -o %t.off.mlir
// RUN: FileCheck %s --check-prefix=OFF < %t.off.ptx

// PTX: vprintf
// PTX: trap
// OFF-NOT: vprintf
// OFF-NOT: trap

// CHECK: kvpipe: consumer_wait at loc({{.*}}wait_timeout.mlir{{.*}}): no arrival after 200000000 cycles
// CHECK: PASS broken_ring: the hang was reported and the launch failed with CUDA_ERROR_{{[A-Z_]+}} after {{[0-9.]+}} s

!pipe = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
module attributes {gpu.container_module} {
  gpu.module @broken {
    gpu.func @broken_ring(%n: i32) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %true = arith.constant true
      %tiles = arith.index_cast %n : i32 to index
      %short = arith.subi %tiles, %c1 : index
      %p = kvpipe.create : !pipe
      kvpipe.init %p : !pipe
      %tid = gpu.thread_id x
      %producer = arith.cmpi eq, %tid, %c0 : index
      scf.if %producer {
        // One slot too few.
        %r = scf.for %i = %c0 to %short step %c1 iter_args(%s = %p) -> (!pipe) {
          kvpipe.producer_acquire %s : !pipe
          kvpipe.producer_commit %s : !pipe
          %t = kvpipe.step %s : !pipe
          scf.yield %t : !pipe
        }
      } else {
        %r = scf.for %i = %c0 to %tiles step %c1 iter_args(%s = %p) -> (!pipe) {
          kvpipe.consumer_wait %s : !pipe
          %t = kvpipe.consumer_release %s, %true : !pipe
          scf.yield %t : !pipe
        }
      }
      gpu.return
    }
  }
}
