// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 6 of --kvpipe-verify-protocol, arrivals counted per thread of the
// producer warpgroup of a kvpipe.warp_roles: a producer_commit is an arrival
// of every thread that runs it, and the producer barrier completes its phase
// after `producers` arrivals. (The TMA loads of a slot are issued by the
// threads that commit it: rule 5 counts only loads in the commit's block.)

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// The whole producer warpgroup commits: 128 arrivals on a barrier that
// expects one.
func.func @every_producer_thread_commits(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.producer_acquire %s : !p
      // expected-error-re @below {{'kvpipe.producer_commit' op 128 threads of the producer warpgroup arrive on the producer barrier per commit, but the pipeline expects producers = 1: the phase completes early (the extra arrivals fall into the slot's next phase), and the consumers read the slot before every producer thread filled it (sub-stage 0 of pipeline created at {{.*}})}}
      kvpipe.producer_commit %s : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %e = arith.cmpi eq, %tid, %c128 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// Lane 0 of each warp: one thread per warp, 4 in the warpgroup.
func.func @one_thread_per_warp_commits(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
    %lane = gpu.lane_id
    %first = arith.cmpi eq, %lane, %c0 : index
    scf.if %first {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        // expected-error @below {{'kvpipe.producer_commit' op 4 threads of the producer warpgroup arrive on the producer barrier per commit, but the pipeline expects producers = 1}}
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %e = arith.cmpi eq, %tid, %c128 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 2, consumers = 1>

// Two producers expected, one elected: the phase never completes.
func.func @too_few_producers_commit(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
    %tid = gpu.thread_id x
    %leader = arith.cmpi eq, %tid, %c0 : index
    scf.if %leader {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        // expected-error @below {{'kvpipe.producer_commit' op 1 thread of the producer warpgroup arrive on the producer barrier per commit, but the pipeline expects producers = 2: the phase never completes and the consumers' wait for the slot never returns}}
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %e = arith.cmpi eq, %tid, %c128 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 2, consumers = 1>

// Two producer threads (0 and 32) that each fill the slot with plain stores
// and commit: the count the pipeline expects.
func.func @two_producers_commit(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
    %lane = gpu.lane_id
    %tid = gpu.thread_id x
    %c64 = arith.constant 64 : index
    %first = arith.cmpi eq, %lane, %c0 : index
    %low = arith.cmpi ult, %tid, %c64 : index
    %leader = arith.andi %first, %low : i1
    scf.if %leader {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %e = arith.cmpi eq, %tid, %c128 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!ring = memref<2x64x64xbf16, #gpu.address_space<workgroup>>
!tile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>

// Every producer thread loads and commits: each arrives with the box's bytes
// and issues its own copy, 128 arrivals on a barrier that expects one.
func.func @every_producer_thread_loads(%n: index, %map: !map, %ring: !ring) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @below {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.producer_acquire %s : !p
      %slot = kvpipe.index %s : !p
      %b = kvpipe.producer_mbar %s : !p
      %t0 = memref.subview %ring[%slot, 0, 0] [1, 64, 64] [1, 1, 1] : !ring to !tile
      kvpipe.tma_load %map[%c0, %i, %c0], %t0, %b : !map, !tile
      // expected-error @below {{'kvpipe.producer_commit' op 128 threads of the producer warpgroup arrive on the producer barrier per commit, but the pipeline expects producers = 1}}
      kvpipe.producer_commit %s : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %e = arith.cmpi eq, %tid, %c128 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>

// The producer is elected by a value read from memory: the count is
// unproven.
func.func @producer_elected_from_memory(%n: index, %flags: memref<128xi1>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
    %tid = gpu.thread_id x
    // expected-note @below {{this value}}
    %leader = memref.load %flags[%tid] : memref<128xi1>
    // expected-warning @below {{cannot prove that the producer side runs whenever the consumer side does}}
    scf.if %leader {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        // expected-warning @below {{cannot prove how many threads arrive on the producer barrier (the pipeline expects 1): the checker cannot evaluate, per thread of the producer warpgroup, a value a condition around it is computed from}}
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %e = arith.cmpi eq, %tid, %c128 : index
    // expected-note @below {{where the consumer side's chain ends}}
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

// Once the roles are branches on the warpgroup id (what
// --kvpipe-lower-warp-roles and the generators leave), the arrivals are
// counted on every thread of a kernel whose block size is known: here
// nvvm.maxntid, 3 warpgroups. The consumer elects lane 0 of each warp.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
gpu.module @kernels {
  // expected-note @below {{the kernel}}
  gpu.func @lane_zero_of_each_consumer_warp(%n: index) kernel attributes {nvvm.maxntid = array<i32: 384, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    %wg = kvpipe.warpgroup_id : index
    %producer = arith.cmpi eq, %wg, %c0 : index
    scf.if %producer {
      %tid = gpu.thread_id x
      %leader = arith.cmpi eq, %tid, %c0 : index
      scf.if %leader {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
          kvpipe.producer_acquire %s : !p
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } else {
      %lane = gpu.lane_id
      %e = arith.cmpi eq, %lane, %c0 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        // expected-error @below {{'kvpipe.consumer_release' op 8 threads of the CTA's 3 warpgroups arrive on the consumer barrier per release (0, 4, 4 per warpgroup), but the pipeline expects consumers = 2: the phase completes early}}
        %t = kvpipe.consumer_release %s, %e : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}

// -----

// The same kernel with known_block_size and a producer branch that every
// thread of warpgroup 0 runs: 128 commits.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
gpu.module @kernels {
  // expected-note @below {{the kernel}}
  gpu.func @unelected_producer(%n: index) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    %wg = kvpipe.warpgroup_id : index
    %producer = arith.cmpi eq, %wg, %c0 : index
    scf.if %producer {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        // expected-error @below {{'kvpipe.producer_commit' op 128 threads of the CTA's 3 warpgroups arrive on the producer barrier per commit (128, 0, 0 per warpgroup), but the pipeline expects producers = 1}}
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    } else {
      %tid = gpu.thread_id x
      %in = arith.remui %tid, %c128 : index
      %e = arith.cmpi eq, %in, %c0 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %t = kvpipe.consumer_release %s, %e : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}

// -----

// A kernel whose block size is not known: the count is not taken (an
// assumption of the checker: docs/protocol-checking.md).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
gpu.module @kernels {
  gpu.func @unknown_block_size(%n: index) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %true = arith.constant true
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    %wg = kvpipe.warpgroup_id : index
    %producer = arith.cmpi eq, %wg, %c0 : index
    scf.if %producer {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    } else {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %t = kvpipe.consumer_release %s, %true : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}
