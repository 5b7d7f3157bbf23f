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
      // expected-error-re @below {{'kvpipe.producer_commit' op 128 threads of the CTA's 2 warpgroups arrive on the producer barrier per commit (128, 0 per warpgroup), but the pipeline expects producers = 1: the phase completes early (the extra arrivals fall into the slot's next phase), and the consumers read the slot before every producer thread filled it (sub-stage 0 of pipeline created at {{.*}})}}
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
        // expected-error @below {{'kvpipe.producer_commit' op 4 threads of the CTA's 2 warpgroups arrive on the producer barrier per commit (4, 0 per warpgroup), but the pipeline expects producers = 1}}
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
        // expected-error @below {{'kvpipe.producer_commit' op 1 thread of the CTA's 2 warpgroups arrive on the producer barrier per commit (1, 0 per warpgroup), but the pipeline expects producers = 2: the phase never completes and the consumers' wait for the slot never returns}}
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
      // expected-error @below {{'kvpipe.producer_commit' op 128 threads of the CTA's 2 warpgroups arrive on the producer barrier per commit (128, 0 per warpgroup), but the pipeline expects producers = 1}}
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
        // expected-warning @below {{cannot prove how many threads arrive on the producer barrier (the pipeline expects 1): the checker cannot evaluate, per thread of the CTA's 2 warpgroups, a value a condition around it is computed from}}
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

// -----

// Held-out programs of the third checker audit (the arrivals per barrier, the
// block size against the roles, conditions around the roles, lane masks,
// inline assembly, blocks the checker cannot enumerate).

// WRONG: consumers = 1, one consumer warpgroup. The consumer loop releases in
// BOTH branches of an scf.if on the thread id: the then-branch (threads
// 128..191) elects tid 128, the else-branch (192..255) elects tid 192. Each
// release op alone has 1 arriving thread, but both run for the same slot and
// phase: 2 arrivals on a barrier that expects 1. The phase completes at the
// first arrival; the second falls into the next phase, so the producer
// refills the slot while half the warpgroup may still read it (race), and
// later phases complete one arrival early.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @k(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %c192 = arith.constant 192 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @+1 {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
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
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %low = arith.cmpi ult, %tid, %c192 : index
    %e1 = arith.cmpi eq, %tid, %c128 : index
    %e2 = arith.cmpi eq, %tid, %c192 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      %t = scf.if %low -> (!p) {
        kvpipe.consumer_wait %s : !p
        // expected-error @+1 {{'kvpipe.consumer_release' op 2 threads of the CTA's 2 warpgroups arrive on the consumer barrier per release (0, 2 per warpgroup), but the pipeline exp}}
        %a = kvpipe.consumer_release %s, %e1 : !p
        scf.yield %a : !p
      } else {
        kvpipe.consumer_wait %s : !p
        // expected-note @+1 {{another release of the sub-stage, which arrives on the same barrier}}
        %b = kvpipe.consumer_release %s, %e2 : !p
        scf.yield %b : !p
      }
      scf.yield %t : !p
    }
  }
  return
}

// -----

// VALID CONTROL (possible false positive): consumers = 2, two consumer warpgroups
// run the same loop in different cases of an scf.index_switch, each electing
// one thread (tid 128 / tid 256): 2 arrivals per phase = consumers. Valid.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
func.func @k(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
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
  } consumers(2) registers(232) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %e1 = arith.cmpi eq, %tid, %c128 : index
    %e2 = arith.cmpi eq, %tid, %c256 : index
    %wg = kvpipe.warpgroup_id : index
    scf.index_switch %wg
    case 1 {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %t = kvpipe.consumer_release %s, %e1 : !p
        scf.yield %t : !p
      }
      scf.yield
    }
    default {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %t = kvpipe.consumer_release %s, %e2 : !p
        scf.yield %t : !p
      }
      scf.yield
    }
  }
  return
}

// -----

// WRONG: consumers = 1 but two consumer warpgroups each consume every slot,
// in different cases of an scf.index_switch on the warpgroup id (kvpipe.warpgroup_id). Each
// release op has 1 arriving thread (tid 128 resp. 256), so each op "matches"
// consumers = 1, yet both arrive on the same phase of the same barrier:
// 2 arrivals, the phase completes after the first warpgroup, and the producer
// overwrites the slot while warpgroup 2 still reads it.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @k(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @+1 {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
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
  } consumers(2) registers(232) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %e1 = arith.cmpi eq, %tid, %c128 : index
    %e2 = arith.cmpi eq, %tid, %c256 : index
    %wg = kvpipe.warpgroup_id : index
    scf.index_switch %wg
    case 1 {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        // expected-note @+1 {{another release of the sub-stage, which arrives on the same barrier}}
        %t = kvpipe.consumer_release %s, %e1 : !p
        scf.yield %t : !p
      }
      scf.yield
    }
    default {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        // expected-error @+1 {{'kvpipe.consumer_release' op 2 threads of the CTA's 3 warpgroups arrive on the consumer barrier per release (0, 1, 1 per warpgroup), but the pipeline }}
        %t = kvpipe.consumer_release %s, %e2 : !p
        scf.yield %t : !p
      }
      scf.yield
    }
  }
  return
}

// -----

// WRONG: producers = 1 but two producer threads (tid 0 and tid 32) each run
// their own acquire/commit/step chain over the same pipeline (if tid == 0
// {...} else if tid == 32 {...}). Each commit op counts 1 arriving thread,
// but both arrive on every slot's phase: 2 arrivals on a barrier expecting 1
// -> the phase completes at the first commit and the consumer reads the slot
// before the second producer filled it; the extra arrival completes the next
// phase early too.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @k(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %c32 = arith.constant 32 : index
  // expected-note @+1 {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
    %tid = gpu.thread_id x
    %t0 = arith.cmpi eq, %tid, %c0 : index
    %t32 = arith.cmpi eq, %tid, %c32 : index
    scf.if %t0 {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        // expected-error @+1 {{'kvpipe.producer_commit' op 2 threads of the CTA's 2 warpgroups arrive on the producer barrier per commit (2, 0 per warpgroup), but the pipeline expec}}
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    } else {
      scf.if %t32 {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        // expected-note @+1 {{another commit of the sub-stage, which arrives on the same barrier}}
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
      }
    }
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
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

// VALID CONTROL: producers = 2; two producer threads (tid 0, tid 32) each run
// an acquire/commit/step chain (if tid==0 {...} else if tid==32 {...}) with
// plain stores (no TMA): 2 arrivals per phase = producers.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 2, consumers = 1>
func.func @k(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %c32 = arith.constant 32 : index
  kvpipe.warp_roles producer registers(24) {
    %tid = gpu.thread_id x
    %t0 = arith.cmpi eq, %tid, %c0 : index
    %t32 = arith.cmpi eq, %tid, %c32 : index
    scf.if %t0 {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    } else {
      scf.if %t32 {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
      }
    }
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
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

// WRONG: a kernel launched with 384 threads (known_block_size) holds a
// kvpipe.warp_roles with consumers(1). --kvpipe-lower-warp-roles lowers it to
// "if warpgroup_id == 0 {producer} else {consumer}", so warpgroup 2 (threads
// 256..383) ALSO runs the consumer region (with %ci = 1). Each consumer
// warpgroup elects tid%128 == 0: 2 arrivals per phase on a barrier expecting
// consumers = 1 -> the phase completes after the first warpgroup and the
// producer refills a slot warpgroup 2 still reads. The checker counts only
// warpgroup 1 (threads 128..255) for a consumers(1) region.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @m {
gpu.func @k(%n: index) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @+1 {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
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
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %in = arith.remui %tid, %c128 : index
    %e = arith.cmpi eq, %in, %c0 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      // expected-error @+1 {{'kvpipe.consumer_release' op 2 threads of the CTA's 3 warpgroups arrive on the consumer barrier per release (0, 1, 1 per warpgroup), but the pipeline }}
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  gpu.return
}
}

// -----

// WRONG: nvvm.maxntid = 256 (the runtime launches exactly 256 threads: one
// producer and ONE consumer warpgroup), but warp_roles declares consumers(2)
// and the pipeline expects consumers = 2, one elected thread per consumer
// warpgroup. Only warpgroup 1 exists: 1 arrival per phase, the consumer
// barrier never completes and the producer's acquire of a refilled slot hangs.
// The checker counts the declared 2 consumer warpgroups (threads 128..383).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
gpu.module @m {
gpu.func @k(%n: index) kernel attributes {nvvm.maxntid = array<i32: 256, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @+1 {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
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
  } consumers(2) registers(232) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %in = arith.remui %tid, %c128 : index
    %e = arith.cmpi eq, %in, %c0 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      // expected-error @+1 {{'kvpipe.consumer_release' op 1 thread of the CTA's 2 warpgroups arrive on the consumer barrier per release (0, 1 per warpgroup), but the pipeline expe}}
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  gpu.return
}
}

// -----

// WRONG: nvvm.reqntid = 384 (the kernel launches with exactly 3 warpgroups)
// and warp_roles declares consumers(1): lowered, warpgroups 1 and 2 both run
// the consumer region and release with their first thread, 2 arrivals per
// phase on a barrier that expects 1 (the phase completes while a warpgroup
// may still read the slot). The checker counted the one consumer warpgroup
// the roles name: it ignored nvvm.reqntid.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @m {
gpu.func @k(%n: index) kernel attributes {nvvm.reqntid = array<i32: 384, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @+1 {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
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
  } consumers(1) registers(232) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %in = arith.remui %tid, %c128 : index
    %e = arith.cmpi eq, %in, %c0 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      // expected-error @+1 {{'kvpipe.consumer_release' op 2 threads of the CTA's 3 warpgroups arrive on the consumer barrier per release (0, 1, 1 per warpgroup), but the pipeline expects consumers = 1}}
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  gpu.return
}
}

// -----

// WRONG: the whole kvpipe.warp_roles sits under "if tid >= 128": the
// producer warpgroup (threads 0..127) never enters it, so the producer region
// never runs on any thread and the consumers' first wait never returns (hang).
// The checker counts the producer region as threads 0..127 regardless of the
// condition outside the warp_roles (countThreads stops at the roles op).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @k(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %gtid = gpu.thread_id x
  %notwg0 = arith.cmpi uge, %gtid, %c128 : index
  scf.if %notwg0 {
  // expected-note @+1 {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
    %tid = gpu.thread_id x
    %leader = arith.cmpi eq, %tid, %c0 : index
    scf.if %leader {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        // expected-error @+1 {{'kvpipe.producer_commit' op 0 threads of the CTA's 2 warpgroups arrive on the producer barrier per commit (0, 0 per warpgroup), but the pipeline expec}}
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %e = arith.cmpi eq, %tid, %c128 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  }
  return
}

// -----

// WRONG: a kvpipe.warp_roles nested in the consumer region of another one.
// After --kvpipe-lower-warp-roles the inner "warpgroup_id == 0" branch sits in
// the outer else-branch (warpgroups >= 1), so the inner producer region never
// runs: the inner pipeline's consumers wait forever. The checker counts the
// inner producer region as threads 0..127 (1 elected committer = producers).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @k(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
  } consumers(2) registers(232) {
  ^bb0(%co: index):
  // expected-note @+1 {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
    %tid = gpu.thread_id x
    %leader = arith.cmpi eq, %tid, %c0 : index
    scf.if %leader {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        // expected-error @+1 {{'kvpipe.producer_commit' op 0 threads of the CTA's 3 warpgroups arrive on the producer barrier per commit (0, 0, 0 per warpgroup), but the pipeline ex}}
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %e = arith.cmpi eq, %tid, %c128 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  }
  return
}

// -----

// WRONG: consumers = 128 (every consumer thread arrives, elected = true), but
// both roles run their chain under "if lanemask_lt == 0" (lane 0 of each warp
// only: nvvm.read.ptx.sreg.lanemask.lt is 0 exactly on lane 0). Only 4
// consumer threads arrive per phase of 128 -> the phase never completes,
// producer hangs. The checker numbers lanemask.lt as a CTA-uniform value
// (Pure, not in isThreadDependent): countThreads falls back to "all
// warpgroups the same way" and counts 128.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 128>
func.func @k(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c129 = arith.constant 129 : index
  %one = arith.constant 0 : i32
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-note @+1 {{the warp roles}}
  kvpipe.warp_roles producer registers(24) {
    %mask = nvvm.read.ptx.sreg.lanemask.lt : i32
    %g = arith.cmpi eq, %mask, %one : i32
    scf.if %g {
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
    }
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %mask = nvvm.read.ptx.sreg.lanemask.lt : i32
    %g = arith.cmpi eq, %mask, %one : i32
    scf.if %g {
      %tid = gpu.thread_id x
      %e = arith.constant true
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        // expected-error @+1 {{'kvpipe.consumer_release' op 4 threads of the CTA's 2 warpgroups arrive on the consumer barrier per release (0, 4 per warpgroup), but the pipeline exp}}
        %t = kvpipe.consumer_release %s, %e : !p
        scf.yield %t : !p
      }
    }
  }
  return
}

// -----

// WRONG: both roles wrap their chain in "if asm_lane == 0", asm_lane being
// llvm.inline_asm "mov.u32 $0, %laneid;" (no has_side_effects, so Pure).
// The producer elects tid 0 (lane 0: passes); the consumer elects tid 129
// (lane 1: never reaches the release). 0 arrivals on the consumer barrier:
// the producer hangs acquiring a refilled slot. The checker cannot evaluate
// the inline asm per thread but keyOf() numbers it as CTA-uniform (it is not
// in isThreadDependent), so countThreads takes the "uniform guard" fallback
// and the balance rule sees the same uniform condition on both sides.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @k(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c129 = arith.constant 129 : index
  %one = arith.constant 0 : i32
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
    // expected-note @+1 {{this value}}
    %mask = llvm.inline_asm "mov.u32 $0, %laneid;", "=r" : () -> i32
    %g = arith.cmpi eq, %mask, %one : i32
    scf.if %g {
      %tid = gpu.thread_id x
      %leader = arith.cmpi eq, %tid, %c0 : index
      scf.if %leader {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
          kvpipe.producer_acquire %s : !p
          // expected-warning @+1 {{'kvpipe.producer_commit' op cannot prove how many threads arrive on the producer barrier (the pipeline expects 1): the checker cannot evaluate, per th}}
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    }
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    // expected-note @+1 {{this value}}
    %mask = llvm.inline_asm "mov.u32 $0, %laneid;", "=r" : () -> i32
    %g = arith.cmpi eq, %mask, %one : i32
    scf.if %g {
      %tid = gpu.thread_id x
      %e = arith.cmpi eq, %tid, %c129 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        // expected-warning @+1 {{'kvpipe.consumer_release' op cannot prove how many threads arrive on the consumer barrier (the pipeline expects 1): the checker cannot evaluate, per t}}
        %t = kvpipe.consumer_release %s, %e : !p
        scf.yield %t : !p
      }
    }
  }
  return
}

// -----

// WRONG: producer and consumer loop to the same expression
// n + popc-free "lanemask_eq" (1 << laneid, as index). The committing producer
// thread (tid 0, lane 0) runs n+1 iterations; the releasing consumer thread
// (tid 130, lane 2) runs n+4: the consumers wait for 3 slots that are never
// filled (hang). The checker treats nvvm.read.ptx.sreg.lanemask.eq as
// CTA-uniform (not in isThreadDependent), so both bounds get the same uniform
// value number and the totals are "proven" equal.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
func.func @k(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c130 = arith.constant 130 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
    %mask = nvvm.read.ptx.sreg.lanemask.eq : i32
    %m = arith.index_castui %mask : i32 to index
    %ub = arith.addi %n, %m : index
    %tid = gpu.thread_id x
    %leader = arith.cmpi eq, %tid, %c0 : index
    scf.if %leader {
      // expected-note @+1 {{where the producer side ends}}
      %r = scf.for %i = %c0 to %ub step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %mask = nvvm.read.ptx.sreg.lanemask.eq : i32
    %m = arith.index_castui %mask : i32 to index
    %ub = arith.addi %n, %m : index
    %tid = gpu.thread_id x
    %e = arith.cmpi eq, %tid, %c130 : index
    // expected-warning @+1 {{'scf.for' op cannot prove that the producer and consumer loops advance the same number of slots: the consumer side advances }}
    %r = scf.for %i = %c0 to %ub step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

// WRONG: a kernel with a KNOWN but two-dimensional block, known_block_size =
// [128, 3, 1] (384 threads). kvpipe.warpgroup_id is threadIdx.x / 128, which
// is 0 on every thread, so ALL threads take the producer branch: the consumer
// branch never runs (hang), and the producer's unelected commit arrives 384
// times on a barrier expecting 1. getBlockThreads() returns nothing for a
// block with y != 1, so the kernel is treated like one of unknown block size
// and no arrival is counted (the doc's assumption covers only kernels of
// UNKNOWN block size).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
gpu.module @m {
gpu.func @k(%n: index) kernel attributes {known_block_size = array<i32: 128, 3, 1>} {
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
        // expected-warning @+1 {{'kvpipe.producer_commit' op cannot prove how many threads arrive on the producer barrier: the commit runs in a kernel whose threads the checker cannot}}
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
        // expected-warning @+1 {{'kvpipe.consumer_release' op cannot prove how many threads arrive on the consumer barrier: the release runs in a kernel whose threads the checker cann}}
        %t = kvpipe.consumer_release %s, %e : !p
        scf.yield %t : !p
      }
  }
  gpu.return
}
}

// -----

// CHECKER HANG (robustness): known_block_size = [2000000000, 1, 1] (not a
// launchable CTA: at most 1024 threads). getBlockThreads() accepts any
// positive size and countThreads() evaluates every one of the 2e9 threads:
// kvpipe-opt --kvpipe-verify-protocol does not finish (killed after 60 s).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
gpu.module @m {
gpu.func @k(%n: index) kernel attributes {known_block_size = array<i32: 2000000000, 1, 1>} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  %c256 = arith.constant 256 : index
  %wg = kvpipe.warpgroup_id : index
  %tid = gpu.thread_id x
  scf.index_switch %wg
  case 0 {
    %leader = arith.cmpi eq, %tid, %c0 : index
    scf.if %leader {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        // expected-warning @+1 {{'kvpipe.producer_commit' op cannot prove how many threads arrive on the producer barrier: the commit runs in a kernel whose threads the checker cannot}}
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
    scf.yield
  }
  case 1 {
    %e = arith.cmpi eq, %tid, %c128 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %t = kvpipe.consumer_release %s, %e : !p
        scf.yield %t : !p
      }
    scf.yield
  }
  default {
    %e = arith.cmpi eq, %tid, %c256 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        // expected-warning @+1 {{'kvpipe.consumer_release' op cannot prove how many threads arrive on the consumer barrier: the release runs in a kernel whose threads the checker cann}}
        %t = kvpipe.consumer_release %s, %e : !p
        scf.yield %t : !p
      }
    scf.yield
  }
  gpu.return
}
}


// -----

// The arrival count takes every thread that runs a release of the pipeline
// to arrive on every phase. Two ways consumer warpgroups could release
// disjoint phases, and why neither is counted wrong (a consumer chain cannot
// `kvpipe.step` past a slot: an error of its own, protocol-balance.mlir):
// WRONG: warpgroup 1 releases the even slots and warpgroup 2 the odd ones
// (the elected operand depends on the iteration): each phase gets one
// arrival of the two it needs. The count is not evaluated: unproven.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
func.func @alternate(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
    %tid = gpu.thread_id x
    %first = arith.cmpi eq, %tid, %c0 : index
    scf.if %first {
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(2) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %lane = arith.remui %tid, %c128 : index
    %first = arith.cmpi eq, %lane, %c0 : index
    %w = arith.subi %ci, %c1 : index
    // expected-note @below {{this value}}
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %par = arith.remui %i, %c2 : index
      %mine = arith.cmpi eq, %par, %w : index
      %e = arith.andi %mine, %first : i1
      // expected-warning @below {{'kvpipe.consumer_release' op cannot prove how many threads arrive on the consumer barrier (the pipeline expects 2): the checker cannot evaluate, per thread of the CTA's 3 warpgroups, a value the release's elected operand or a condition around it is computed from}}
      %t = kvpipe.consumer_release %s, %e : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

// WRONG: both consumer warpgroups release every slot they pass, but the
// second's loop stops halfway: the later phases get one arrival of two. The
// trip counts differ (`n` and `half`): unproven by the balance rule.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
func.func @uneven(%n: index, %half: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
    %tid = gpu.thread_id x
    %first = arith.cmpi eq, %tid, %c0 : index
    scf.if %first {
      // expected-note @below {{where the producer side ends}}
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    }
  } consumers(2) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %lane = arith.remui %tid, %c128 : index
    %first = arith.cmpi eq, %lane, %c0 : index
    %is1 = arith.cmpi eq, %ci, %c1 : index
    %ub = arith.select %is1, %n, %half : index
    // expected-warning @below {{'scf.for' op cannot prove that the producer and consumer loops advance the same number of slots}}
    %r = scf.for %i = %c0 to %ub step %c1 iter_args(%s = %p) -> (!p) {
      kvpipe.consumer_wait %s : !p
      %t = kvpipe.consumer_release %s, %first : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

// WRONG (the fourth audit's p28): the peeled first release elects one
// thread, the loop's every thread of the warpgroup. Together they are the
// 128 threads the pipeline expects, but they are separate phases: the first
// phase gets one arrival and never completes. Each op must make up its
// phases alone, or with ops on other threads' paths: unproven.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 128>
func.func @peeled(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %true = arith.constant true
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
    %tid = gpu.thread_id x
    %leader = arith.cmpi eq, %tid, %c0 : index
    scf.if %leader {
      kvpipe.producer_acquire %p : !p
      kvpipe.producer_commit %p : !p
      %p1 = kvpipe.step %p : !p
      %r = scf.for %i = %c1 to %n step %c1 iter_args(%s = %p1) -> (!p) {
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
    kvpipe.consumer_wait %p : !p
    // expected-warning @below {{'kvpipe.consumer_release' op cannot prove how many threads arrive on each phase of the consumer barrier: this release alone arrives 1 time (the pipeline expects 128), and the other ops of the sub-stage whose threads make up the count may run as separate phases}}
    %p1 = kvpipe.consumer_release %p, %e : !p
    %r = scf.for %i = %c1 to %n step %c1 iter_args(%s = %p1) -> (!p) {
      kvpipe.consumer_wait %s : !p
      // expected-note @below {{another release of the sub-stage}}
      %t = kvpipe.consumer_release %s, %true : !p
      scf.yield %t : !p
    }
  }
  return
}

// -----

// WRONG (the fourth audit's p23): under a CTA-uniform condition one branch
// elects one thread and the other all 128; every thread takes the same
// branch, so a phase of the first gets one arrival: unproven.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 128>
func.func @uniform_branches(%n: index, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %true = arith.constant true
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
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
  } consumers(1) registers(240) {
  ^bb0(%ci: index):
    %tid = gpu.thread_id x
    %c128 = arith.constant 128 : index
    %e = arith.cmpi eq, %tid, %c128 : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      %few = arith.cmpi ult, %i, %m : index
      %t = scf.if %few -> !p {
        kvpipe.consumer_wait %s : !p
        // expected-warning @below {{'kvpipe.consumer_release' op cannot prove how many threads arrive on each phase of the consumer barrier: this release alone arrives 1 time (the pipeline expects 128)}}
        %t1 = kvpipe.consumer_release %s, %e : !p
        scf.yield %t1 : !p
      } else {
        kvpipe.consumer_wait %s : !p
        // expected-note @below {{another release of the sub-stage}}
        %t2 = kvpipe.consumer_release %s, %true : !p
        scf.yield %t2 : !p
      }
      scf.yield %t : !p
    }
  }
  return
}
