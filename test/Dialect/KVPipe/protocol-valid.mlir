// RUN: kvpipe-opt %s --kvpipe-verify-protocol | FileCheck %s
// RUN: kvpipe-opt %s --pass-pipeline='builtin.module(gpu.module(gpu.func(kvpipe-verify-protocol)), func.func(kvpipe-verify-protocol))' | FileCheck %s

// Programs that keep the producer/consumer protocol pass
// --kvpipe-verify-protocol unchanged, whether it runs on the module or on
// each function.

!p1 = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!p2 = !kvpipe.pipeline<kv_stages = 3, qk_stages = 2, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!ring3 = memref<3x2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// CHECK-LABEL: gpu.module @kernels
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // A warp-specialised ring with qk_stages = 1: one thread of warpgroup 0
  // loads each K tile with TMA (the commit's recorded bytes match the box),
  // warpgroup 1 multiplies it and releases the slot after the wgmma retired.
  // CHECK-LABEL: gpu.func @ring_qk1
  gpu.func @ring_qk1(%map: !map, %n: index, %q: !q) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %p = kvpipe.create : !p1
    kvpipe.init %p : !p1
    %wg = kvpipe.warpgroup_id : index
    %producer = arith.cmpi eq, %wg, %c0 : index
    scf.if %producer {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p1) {
          kvpipe.producer_acquire %s : !p1
          %slot = kvpipe.index %s : !p1
          %b = kvpipe.producer_mbar %s : !p1
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          %row = arith.muli %i, %c128 : index
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !half
          kvpipe.producer_commit %s {kvpipe.transaction_bytes = 16384 : i64} : !p1
          %t = kvpipe.step %s : !p1
          scf.yield %t : !p1
        }
      }
    } else {
      // One arrival per slot (consumers = 1): the warpgroup's first thread.
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p1, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p1
        %slot = kvpipe.index %s : !p1
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
        %t = kvpipe.consumer_release %s, %first : !p1
        scf.yield %t, %done : !p1, vector<64xf32>
      }
    }
    gpu.return
  }

  // The same ring in a CTA whose work is under a flag every thread computes
  // alike (a tile without work leaves at once: `kvpipe.tile has_work`): the
  // whole CTA creates and initialises the barriers, or none of it.
  // CHECK-LABEL: gpu.func @ring_under_tile_flag
  gpu.func @ring_under_tile_flag(%map: !map, %n: index, %q: !q) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %x = gpu.block_id x
    %has_work = arith.cmpi slt, %x, %n : index
    scf.if %has_work {
      %p = kvpipe.create : !p1
      kvpipe.init %p : !p1
      %wg = kvpipe.warpgroup_id : index
      %producer = arith.cmpi eq, %wg, %c0 : index
      scf.if %producer {
        %tid = gpu.thread_id x
        %elected = arith.cmpi eq, %tid, %c0 : index
        scf.if %elected {
          %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p1) {
            kvpipe.producer_acquire %s : !p1
            %slot = kvpipe.index %s : !p1
            %b = kvpipe.producer_mbar %s : !p1
            %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
            %row = arith.muli %i, %c128 : index
            kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !half
            kvpipe.producer_commit %s {kvpipe.transaction_bytes = 16384 : i64} : !p1
            %t = kvpipe.step %s : !p1
            scf.yield %t : !p1
          }
        }
      } else {
        // One arrival per slot (consumers = 1): the warpgroup's first thread.
        %tid = gpu.thread_id x
        %first = arith.cmpi eq, %tid, %c128 : index
        %o0 = arith.constant dense<0.0> : vector<64xf32>
        %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p1, vector<64xf32>) {
          kvpipe.consumer_wait %s : !p1
          %slot = kvpipe.index %s : !p1
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
          %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
          %done = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
          %t = kvpipe.consumer_release %s, %first : !p1
          scf.yield %t, %done : !p1, vector<64xf32>
        }
      }
    }
    gpu.return
  }

  // qk_stages = 2: each K tile in two halves, one barrier per half, so the
  // consumer starts on the first half while the second is in flight; the
  // loop walks the ring two slots per iteration through a helper-free chain.
  // CHECK-LABEL: gpu.func @ring_qk2
  gpu.func @ring_qk2(%map: !map, %n: index, %q: !q) workgroup(%k: !ring3) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %p = kvpipe.create : !p2
    kvpipe.init %p : !p2
    %wg = kvpipe.warpgroup_id : index
    %producer = arith.cmpi eq, %wg, %c0 : index
    scf.if %producer {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p2) {
          %slot = kvpipe.index %s : !p2
          kvpipe.producer_acquire %s stage 0 : !p2
          %b0 = kvpipe.producer_mbar %s stage 0 : !p2
          %h0 = memref.subview %k[%slot, 0, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring3 to !half
          kvpipe.tma_load %map[%c0, %i, %c0], %h0, %b0 : !map, !half
          kvpipe.producer_commit %s stage 0 : !p2
          kvpipe.producer_acquire %s stage 1 : !p2
          %b1 = kvpipe.producer_mbar %s stage 1 : !p2
          %h1 = memref.subview %k[%slot, 1, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring3 to !half
          kvpipe.tma_load %map[%c0, %i, %c64], %h1, %b1 : !map, !half
          kvpipe.producer_commit %s stage 1 : !p2
          %t = kvpipe.step %s : !p2
          scf.yield %t : !p2
        }
      }
    } else {
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p2, vector<64xf32>) {
        %slot = kvpipe.index %s : !p2
        %k0 = memref.subview %k[%slot, 0, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring3 to !kt
        %k1 = memref.subview %k[%slot, 1, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring3 to !kt
        kvpipe.consumer_wait %s stage 0 : !p2
        %a = kvpipe.warpgroup_mma %q, %k0, %o : !q, !kt -> vector<64xf32>
        kvpipe.consumer_wait %s stage 1 : !p2
        %b = kvpipe.warpgroup_mma %q, %k1, %a : !q, !kt -> vector<64xf32>
        %w:2 = kvpipe.warpgroup_wait %a, %b {pending = 1} : vector<64xf32>, vector<64xf32>
        %s0 = kvpipe.consumer_release %s, %first stage 0 : !p2
        %d = kvpipe.warpgroup_wait %w#1 {pending = 0} : vector<64xf32>
        %s1 = kvpipe.consumer_release %s0, %first stage 1 : !p2
        scf.yield %s1, %d : !p2, vector<64xf32>
      }
    }
    gpu.return
  }
}

// Pipelines through calls: the producer and consumer steps are helpers that
// take the state and return it advanced; the loops balance through them.
// CHECK-LABEL: func.func private @produce
func.func private @produce(%s: !p1) -> !p1 {
  kvpipe.producer_acquire %s : !p1
  kvpipe.producer_commit %s : !p1
  %t = kvpipe.step %s : !p1
  return %t : !p1
}

// CHECK-LABEL: func.func private @consume
func.func private @consume(%s: !p1, %e: i1) -> !p1 {
  kvpipe.consumer_wait %s : !p1
  %t = kvpipe.consumer_release %s, %e : !p1
  return %t : !p1
}

// CHECK-LABEL: func.func @through_calls
func.func @through_calls(%n: index, %producer: i1, %e: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p1
  kvpipe.init %p : !p1
  scf.if %producer {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p1) {
      %t = func.call @produce(%s) : (!p1) -> !p1
      scf.yield %t : !p1
    }
  } else {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p1) {
      %t = func.call @consume(%s, %e) : (!p1, i1) -> !p1
      scf.yield %t : !p1
    }
  }
  return
}

// An scf.while consumer and unstructured control flow carry states too.
// CHECK-LABEL: func.func @while_and_branches
func.func @while_and_branches(%p: !p1, %go: i1, %e: i1) -> !p1 {
  %r = scf.while (%s = %p) : (!p1) -> !p1 {
    scf.condition(%go) %s : !p1
  } do {
  ^bb0(%s: !p1):
    kvpipe.consumer_wait %s : !p1
    %t = kvpipe.consumer_release %s, %e : !p1
    scf.yield %t : !p1
  }
  cf.cond_br %go, ^more(%r : !p1), ^done(%r : !p1)
^more(%m: !p1):
  kvpipe.consumer_wait %m : !p1
  %n = kvpipe.consumer_release %m, %e : !p1
  cf.br ^done(%n : !p1)
^done(%d: !p1):
  return %d : !p1
}
