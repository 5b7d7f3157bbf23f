// Known gaps of the protocol checker (docs/protocol-checking.md): wrong
// programs it still accepts in strict mode. XFAIL until the checker rejects
// them (or reports them unproven); an XPASS means one is closed: move it to
// its rule's test file with -verify-diagnostics.
// XFAIL: *
// RUN: not kvpipe-opt %s -split-input-file --kvpipe-verify-protocol=strict=true -o /dev/null

// A wait-for cycle through a full ring, in loops: the producer fills A's one
// slot n times before it fills B, the consumer takes B before A. From n = 2
// the second acquire of A waits for the release of A's first slot, which the
// consumer runs only after its wait on B returns, which needs the commit of
// B after the loop. Rule 13 matches the slots of acquires and releases only
// outside loops (in loops, a release's slot is the acquire's a ring later,
// and the generated kernels' cycles through such edges are benign).
!p = !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%n: index) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %a = kvpipe.create : !p
    kvpipe.init %a : !p
    %b = kvpipe.create : !p
    kvpipe.init %b : !p
    %tid = gpu.thread_id x
    %wg = kvpipe.warpgroup_id : index
    %w0 = arith.cmpi eq, %wg, %c0 : index
    scf.if %w0 {
      %e = arith.cmpi eq, %tid, %c0 : index
      scf.if %e {
        %ra = scf.for %i = %c0 to %n step %c1 iter_args(%s = %a) -> (!p) {
          kvpipe.producer_acquire %s : !p
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
        kvpipe.producer_acquire %b : !p
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        kvpipe.consumer_wait %b : !p
        %b1 = kvpipe.consumer_release %b, %true : !p
        %ra = scf.for %i = %c0 to %n step %c1 iter_args(%s = %a) -> (!p) {
          kvpipe.consumer_wait %s : !p
          %t = kvpipe.consumer_release %s, %true : !p
          scf.yield %t : !p
        }
      }
    }
    gpu.return
  }
}
