// A producer/consumer ring written with the core ops: lower it with
//   kvpipe-opt examples/ring.mlir --kvpipe-to-ptx="ptx-file=ring.ptx"
!pipe = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
module attributes {gpu.container_module} {
  gpu.module @ring {
    gpu.func @ring(%n: index) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %true = arith.constant true
      %p = kvpipe.create : !pipe
      kvpipe.init %p : !pipe
      %tid = gpu.thread_id x
      %producer = arith.cmpi eq, %tid, %c0 : index
      scf.if %producer {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!pipe) {
          kvpipe.producer_acquire %s : !pipe
          kvpipe.producer_commit %s : !pipe
          %t = kvpipe.step %s : !pipe
          scf.yield %t : !pipe
        }
      } else {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!pipe) {
          kvpipe.consumer_wait %s : !pipe
          %t = kvpipe.consumer_release %s, %true : !pipe
          scf.yield %t : !pipe
        }
      }
      gpu.return
    }
  }
}
