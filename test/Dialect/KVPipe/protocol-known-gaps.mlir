// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol="strict=true"
// XFAIL: *

// Wrong programs the checker still accepts in strict mode (the sixth audit,
// session 25; docs/protocol-checking.md, "Known gaps"). Each expects an
// error (both hang at run time): while the checker accepts them silently the
// test fails, as marked; once both are fixed it passes (XPASS), and the
// programs move to the files of their rules with the fixes' messages.

// WRONG: one thread fills slot 0, steps, and waits on slot 1, which nothing
// fills: the wait never returns.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %c0 = arith.constant 0 : index
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    %tid = gpu.thread_id x
    %e = arith.cmpi eq, %tid, %c0 : index
    scf.if %e {
      kvpipe.producer_acquire %p : !p
      kvpipe.producer_commit %p : !p
      %u = kvpipe.step %p : !p
      // expected-error-re @+1 {{.*}}
      kvpipe.consumer_wait %u : !p
      %t = kvpipe.consumer_release %u, %e : !p
    }
    gpu.return
  }
}

// -----

// WRONG: the kernel passes a per-thread bound (n + warpgroup id) to a helper
// that loops to it in both roles: the producer fills n slots, the consumer
// waits for n + 1 (a hang). Written inline, it is reported unproven.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func private @body(%p: !p, %cnt: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %wg = kvpipe.warpgroup_id : index
  %tid = gpu.thread_id x
  %producer = arith.cmpi eq, %wg, %c0 : index
  scf.if %producer {
    %e = arith.cmpi eq, %tid, %c0 : index
    scf.if %e {
      %r = scf.for %i = %c0 to %cnt step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } else {
    %first = arith.cmpi eq, %tid, %c128 : index
    // expected-error-re @+1 {{.*}}
    %r = scf.for %i = %c0 to %cnt step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %first : !p
      scf.yield %t : !p
    }
  }
  return
}
func.func @k(%n: index) attributes {gpu.kernel, nvvm.maxntid = array<i32: 256>} {
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %wg = kvpipe.warpgroup_id : index
  %cnt = arith.addi %n, %wg : index
  func.call @body(%p, %cnt) : (!p, index) -> ()
  return
}
