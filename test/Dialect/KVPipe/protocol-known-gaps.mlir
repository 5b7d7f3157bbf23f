// Known gaps of the protocol checker (docs/protocol-checking.md): wrong
// programs it still accepts in strict mode. XFAIL until the checker rejects
// them (or reports them unproven); an XPASS means one is closed: move it to
// its rule's test file with -verify-diagnostics.
// XFAIL: *
// RUN: not kvpipe-opt %s -split-input-file --kvpipe-verify-protocol=strict=true -o /dev/null

// A wait-for cycle across pipelines: thread 0 waits on B, then commits A;
// thread 128 waits on A, then commits B.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
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
        kvpipe.consumer_wait %b : !p
        %b1 = kvpipe.consumer_release %b, %true : !p
        kvpipe.producer_acquire %a : !p
        kvpipe.producer_commit %a : !p
        %a1 = kvpipe.step %a : !p
      }
    } else {
      %e = arith.cmpi eq, %tid, %c128 : index
      scf.if %e {
        kvpipe.consumer_wait %a : !p
        %a1 = kvpipe.consumer_release %a, %true : !p
        kvpipe.producer_acquire %b : !p
        kvpipe.producer_commit %b : !p
        %b1 = kvpipe.step %b : !p
      }
    }
    gpu.return
  }
}
