// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 6 of --kvpipe-verify-protocol for qk_stages > 1: each side handles
// every sub-stage of a slot, in order from 0: the consumer waits for and
// releases each, the producer acquires and commits each before it steps.
// Each wrong program is followed by its corrected form.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 1>

// The consumer handles only the last sub-stage: sub-stage 0 is never
// released and the producer's next acquire of it hangs.
func.func @consumer_only_last_stage(%p: !p, %n: index, %e: i1) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    // expected-error @below {{'kvpipe.consumer_wait' op is out of qk_stage order: no consumer_wait of sub-stage 0 of this slot in its block; the sub-stages of a slot start at 0 (sub-stage 1 of pipeline}}
    kvpipe.consumer_wait %s stage 1 : !p
    // expected-error @below {{'kvpipe.consumer_release' op is out of qk_stage order: no consumer_release of sub-stage 0 of this slot in its block; the sub-stages of a slot start at 0 (sub-stage 1 of pipeline}}
    %t = kvpipe.consumer_release %s, %e stage 1 : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 1>

// Corrected: both sub-stages, in order.
func.func @consumer_both_stages(%p: !p, %n: index, %e: i1) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.consumer_wait %s stage 0 : !p
    kvpipe.consumer_wait %s stage 1 : !p
    %s0 = kvpipe.consumer_release %s, %e stage 0 : !p
    %t = kvpipe.consumer_release %s0, %e stage 1 : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 1>

// The consumer releases sub-stage 0 and never gets to sub-stage 1: the
// state never advances.
func.func @consumer_never_last_stage(%p: !p, %e: i1) -> !p {
  kvpipe.consumer_wait %p stage 0 : !p
  // expected-error @below {{'kvpipe.consumer_release' op releases the slot up to sub-stage 0 but not sub-stage 1 in its block: the producer waits for that release forever (sub-stage 1 of pipeline}}
  %t = kvpipe.consumer_release %p, %e stage 0 : !p
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 1>

// The producer commits sub-stage 0 only, then steps.
func.func @producer_only_first_stage(%p: !p, %n: index) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.producer_acquire %s stage 0 : !p
    // expected-error @below {{'kvpipe.producer_commit' op commits the slot up to sub-stage 0 but not sub-stage 1 in its block: the consumers wait for that data forever (sub-stage 1 of pipeline}}
    kvpipe.producer_commit %s stage 0 : !p
    // expected-error @below {{'kvpipe.step' op steps past a slot whose sub-stage 1 it did not commit on every path: the consumers wait for that data forever (sub-stage 1 of pipeline}}
    %t = kvpipe.step %s : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 1>

// Corrected: both sub-stages acquired and committed before the step.
func.func @producer_both_stages(%p: !p, %n: index) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.producer_acquire %s stage 0 : !p
    kvpipe.producer_commit %s stage 0 : !p
    kvpipe.producer_acquire %s stage 1 : !p
    kvpipe.producer_commit %s stage 1 : !p
    %t = kvpipe.step %s : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 1>

// The producer acquires and commits sub-stage 1 only (the stage attribute
// was dropped from the first pair and defaulted to the last sub-stage).
func.func @producer_default_stage(%p: !p) -> !p {
  // expected-error @below {{'kvpipe.producer_acquire' op is out of qk_stage order: no producer_acquire of sub-stage 0 of this slot in its block; the sub-stages of a slot start at 0}}
  kvpipe.producer_acquire %p : !p
  // expected-error @below {{'kvpipe.producer_commit' op is out of qk_stage order: no producer_commit of sub-stage 0 of this slot in its block}}
  kvpipe.producer_commit %p : !p
  // expected-error @below {{'kvpipe.step' op steps past a slot whose sub-stage 0 it did not commit on every path}}
  %t = kvpipe.step %p : !p
  return %t : !p
}
// -----

// Held-out D1 of the fifth audit. WRONG: the sub-stage 1 load goes into
// half 0 of the slot, which the sub-stage 0 load fills too: the consumer
// reads half 0 once sub-stage 0 completed, while sub-stage 1's TMA may
// still be writing it. (A read is matched to the sub-stage of its tile's
// load; with two, the collision itself is the error.)
!p = !kvpipe.pipeline<kv_stages = 3, qk_stages = 2, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<3x2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
func.func @stage_tile_collision(%p: !p, %map: !map, %k: !ring, %i: index) -> !p {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %slot = kvpipe.index %p : !p
  kvpipe.producer_acquire %p stage 0 : !p
  kvpipe.producer_acquire %p stage 1 : !p
  %b1 = kvpipe.producer_mbar %p stage 1 : !p
  %h1 = memref.subview %k[%slot, 0, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring to !half
  // expected-note @below {{the load of sub-stage 1}}
  kvpipe.tma_load %map[%c0, %i, %c64], %h1, %b1 : !map, !half
  %b0 = kvpipe.producer_mbar %p stage 0 : !p
  %h0 = memref.subview %k[%slot, 0, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring to !half
  // expected-error @below {{'kvpipe.tma_load' op loads sub-stage 0 into the tile that a load of sub-stage 1 also fills: a consumer that waited for one sub-stage reads the tile while the other's TMA may still be writing it (each sub-stage loads its own part of the slot) (sub-stage 0 of pipeline argument #0 of @stage_tile_collision}}
  kvpipe.tma_load %map[%c0, %i, %c0], %h0, %b0 : !map, !half
  kvpipe.producer_commit %p stage 0 : !p
  kvpipe.producer_commit %p stage 1 : !p
  %t = kvpipe.step %p : !p
  return %t : !p
}

// -----

// WRONG (unproven): the sub-stage 1 load goes into the lower 64 rows of
// half 0 (another view chain, the same bytes as the sub-stage 0 tile's
// second half).
!p = !kvpipe.pipeline<kv_stages = 3, qk_stages = 2, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
!map128 = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<3x2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!quarter = memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>
func.func @stage_tiles_overlap(%p: !p, %map: !map, %map128: !map128, %k: !ring, %i: index) -> !p {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %slot = kvpipe.index %p : !p
  kvpipe.producer_acquire %p stage 0 : !p
  %b0 = kvpipe.producer_mbar %p stage 0 : !p
  %h0 = memref.subview %k[%slot, 0, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring to !half
  // expected-note @below {{the load of sub-stage 0}}
  kvpipe.tma_load %map128[%c0, %i, %c0], %h0, %b0 : !map128, !half
  kvpipe.producer_commit %p stage 0 : !p
  kvpipe.producer_acquire %p stage 1 : !p
  %b1 = kvpipe.producer_mbar %p stage 1 : !p
  %h1 = memref.subview %k[%slot, 0, 64, 0] [1, 1, 64, 64] [1, 1, 1, 1] : !ring to !quarter
  // expected-warning @below {{'kvpipe.tma_load' op cannot prove that the tiles the loads of sub-stages 0 and 1 fill are apart: their bytes may overlap, and a consumer that waited for one sub-stage may read the other's tile while its TMA still writes it}}
  kvpipe.tma_load %map[%c0, %i, %c64], %h1, %b1 : !map, !quarter
  kvpipe.producer_commit %p stage 1 : !p
  %t = kvpipe.step %p : !p
  return %t : !p
}

// -----

// Corrected: each sub-stage loads its own half of the slot.
!p = !kvpipe.pipeline<kv_stages = 3, qk_stages = 2, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<3x2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
func.func @stage_tiles_apart(%p: !p, %map: !map, %k: !ring, %i: index) -> !p {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %slot = kvpipe.index %p : !p
  kvpipe.producer_acquire %p stage 0 : !p
  %b0 = kvpipe.producer_mbar %p stage 0 : !p
  %h0 = memref.subview %k[%slot, 0, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring to !half
  kvpipe.tma_load %map[%c0, %i, %c0], %h0, %b0 : !map, !half
  kvpipe.producer_commit %p stage 0 : !p
  kvpipe.producer_acquire %p stage 1 : !p
  %b1 = kvpipe.producer_mbar %p stage 1 : !p
  %h1 = memref.subview %k[%slot, 1, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring to !half
  kvpipe.tma_load %map[%c0, %i, %c64], %h1, %b1 : !map, !half
  kvpipe.producer_commit %p stage 1 : !p
  %t = kvpipe.step %p : !p
  return %t : !p
}

// -----

// WRONG (red-team pass, session 35): the consumer waits for sub-stage 0 only,
// then one wgmma reads the whole slot (both halves): half 1 may not have
// landed. The read's view was matched to sub-stage 0's load by its offsets
// alone (its sizes were not in the key), and the program was accepted.
!p2 = !kvpipe.pipeline<kv_stages = 3, qk_stages = 2, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring3 = memref<3x2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
!kt2 = memref<2x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @ring_qk2(%map: !map, %n: index, %q: !q, %q2: memref<2x64x64xbf16, #smem>) workgroup(%k: !ring3) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
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
        %kk = memref.subview %k[%slot, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring3 to !kt2
        kvpipe.consumer_wait %s stage 0 : !p2
        // expected-warning @+1 {{'kvpipe.warpgroup_mma' op cannot prove which sub-stage of the slot this wgmma reads, and not every sub-stage was waited for before it}}
        %a = kvpipe.warpgroup_mma %q2, %kk, %o : memref<2x64x64xbf16, #smem>, !kt2 -> vector<64xf32>
        %a2 = kvpipe.warpgroup_wait %a {pending = 0} : vector<64xf32>
        %s0 = kvpipe.consumer_release %s, %first stage 0 : !p2
        kvpipe.consumer_wait %s0 stage 1 : !p2
        %d = arith.addf %a2, %a2 : vector<64xf32>
        %s1 = kvpipe.consumer_release %s0, %first stage 1 : !p2
        scf.yield %s1, %d : !p2, vector<64xf32>
      }
    }
    gpu.return
  }
}

// -----

// WRONG (red-team pass, session 35): the halves' offsets are computed
// (%base = 0 + 0, %next = %base + 1) rather than constants; every such
// offset keyed as "?", so the read of half 1 after waiting sub-stage 0 only
// matched sub-stage 0's load of half 0 and was accepted. Offsets are now
// keyed as linear expressions (1 here).
!p2 = !kvpipe.pipeline<kv_stages = 3, qk_stages = 2, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring3 = memref<3x2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
!kt2 = memref<2x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @ring_qk2(%map: !map, %n: index, %q: !q) workgroup(%k: !ring3) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %base = arith.addi %c0, %c0 : index
    %next = arith.addi %base, %c1 : index
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
          %h0 = memref.subview %k[%slot, %base, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring3 to !half
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
        %k1 = memref.subview %k[%slot, %next, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring3 to !kt
        kvpipe.consumer_wait %s stage 0 : !p2
        // expected-error @+1 {{'kvpipe.warpgroup_mma' op reads a slot before its data landed: no consumer_wait of the slot at sub-stage 1 runs before it on every path}}
        %a = kvpipe.warpgroup_mma %q, %k1, %o : !q, !kt -> vector<64xf32>
        %a2 = kvpipe.warpgroup_wait %a {pending = 0} : vector<64xf32>
        %s0 = kvpipe.consumer_release %s, %first stage 0 : !p2
        kvpipe.consumer_wait %s0 stage 1 : !p2
        %d = arith.addf %a2, %a2 : vector<64xf32>
        %s1 = kvpipe.consumer_release %s0, %first stage 1 : !p2
        scf.yield %s1, %d : !p2, vector<64xf32>
      }
    }
    gpu.return
  }
}

// -----

// A plain load of half 1 (through the view sub-stage 1's TMA fills) after
// waiting only for sub-stage 0 (session 35's red-team pass, w07): half 1
// may not have landed. An error: an access through the view a sub-stage
// loads into needs that sub-stage held.
!p2 = !kvpipe.pipeline<kv_stages = 3, qk_stages = 2, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring3 = memref<3x2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
!kt2 = memref<2x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
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
      %lead = arith.cmpi eq, %tid, %c128 : index
      scf.if %lead {
      %first = arith.constant true
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p2, vector<64xf32>) {
        %slot = kvpipe.index %s : !p2
        %k1 = memref.subview %k[%slot, 1, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring3 to !half
        kvpipe.consumer_wait %s stage 0 : !p2
        // expected-error @below {{'vector.load' op accesses the part of the ring slot that sub-stage 1 loads (the view its TMA load fills) while it holds only sub-stage 0 of the slot: sub-stage 1's data may not have landed, or may be handed over}}
        %v = vector.load %k1[%c0, %c0] : !half, vector<64xbf16>
        %s0 = kvpipe.consumer_release %s, %first stage 0 : !p2
        kvpipe.consumer_wait %s0 stage 1 : !p2
        %s1 = kvpipe.consumer_release %s0, %first stage 1 : !p2
        %ve = arith.extf %v : vector<64xbf16> to vector<64xf32>
        %d = arith.addf %o, %ve : vector<64xf32>
        scf.yield %s1, %d : !p2, vector<64xf32>
      }
      }
    }
    gpu.return
  }
}

// -----

// The same load after the wait for sub-stage 1. Nothing to report.
!p2 = !kvpipe.pipeline<kv_stages = 3, qk_stages = 2, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring3 = memref<3x2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
!kt2 = memref<2x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
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
      %lead = arith.cmpi eq, %tid, %c128 : index
      scf.if %lead {
      %first = arith.constant true
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p2, vector<64xf32>) {
        %slot = kvpipe.index %s : !p2
        %k1 = memref.subview %k[%slot, 1, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring3 to !half
        kvpipe.consumer_wait %s stage 0 : !p2
        %s0 = kvpipe.consumer_release %s, %first stage 0 : !p2
        kvpipe.consumer_wait %s0 stage 1 : !p2
        %v = vector.load %k1[%c0, %c0] : !half, vector<64xbf16>
        %s1 = kvpipe.consumer_release %s0, %first stage 1 : !p2
        %ve = arith.extf %v : vector<64xbf16> to vector<64xf32>
        %d = arith.addf %o, %ve : vector<64xf32>
        scf.yield %s1, %d : !p2, vector<64xf32>
      }
      }
    }
    gpu.return
  }
}

// -----

// The halves' offsets written as index_casts of i32 constants (session 35's
// red-team pass, fa02; reported as overlapping tiles before integer casts
// of constants were folded). Each sub-stage loads its own half: nothing to
// report.
!p2 = !kvpipe.pipeline<kv_stages = 3, qk_stages = 2, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring3 = memref<3x2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
!kt2 = memref<2x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @ring_qk2(%map: !map, %n: index, %q: !q) workgroup(%k: !ring3) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %z32 = arith.constant 0 : i32
    %o32 = arith.constant 1 : i32
    %h0i = arith.index_cast %z32 : i32 to index
    %h1i = arith.index_cast %o32 : i32 to index
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
          %h0 = memref.subview %k[%slot, %h0i, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring3 to !half
          kvpipe.tma_load %map[%c0, %i, %c0], %h0, %b0 : !map, !half
          kvpipe.producer_commit %s stage 0 : !p2
          kvpipe.producer_acquire %s stage 1 : !p2
          %b1 = kvpipe.producer_mbar %s stage 1 : !p2
          %h1 = memref.subview %k[%slot, %h1i, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring3 to !half
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
        %k0 = memref.subview %k[%slot, %h0i, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring3 to !kt
        %k1 = memref.subview %k[%slot, %h1i, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !ring3 to !kt
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
