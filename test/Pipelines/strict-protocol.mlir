// --kvpipe-to-ptx checks the protocol in strict mode: what the checker
// cannot prove stops the compilation (accepted means proven), unless
// strict-protocol=false, which reports it as a warning and goes on.

// RUN: not kvpipe-opt %s --kvpipe-to-ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=STRICT
// RUN: kvpipe-opt %s --kvpipe-to-ptx="strict-protocol=false" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LENIENT

// STRICT: error: 'scf.for' op cannot prove that the producer and consumer loops advance the same number of slots
// LENIENT: warning: 'scf.for' op cannot prove that the producer and consumer loops advance the same number of slots

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

gpu.module @m [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @unrelated_bounds(%n: index, %m: index, %producer: i1, %e: i1) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    scf.if %producer {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    } else {
      %r = scf.for %i = %c0 to %m step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %t = kvpipe.consumer_release %s, %e : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}
