// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 7 of --kvpipe-verify-protocol: a kvpipe.warpgroup_mma reads a slot
// (its operand is addressed from the slot's kvpipe.index) only after a
// consumer_wait of that slot, at the sub-stage the producer loads into that
// tile, on every path. Each wrong program is followed by its corrected form.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// The wgmma is issued before the wait: it reads whatever the slot held.
func.func @mma_before_wait(%p: !p, %n: index, %e: i1, %q: !q, %k: !ring) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    %slot = kvpipe.index %s : !p
    %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
    // expected-error-re @below {{'kvpipe.warpgroup_mma' op reads a slot before its data landed: no consumer_wait of the slot runs before it on every path (pipeline argument #0 of @mma_before_wait : {{.*}})}}
    %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
    kvpipe.consumer_wait %s : !p
    %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
    %t = kvpipe.consumer_release %s, %e : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// Corrected: wait, then multiply.
func.func @mma_after_wait(%p: !p, %n: index, %e: i1, %q: !q, %k: !ring) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.consumer_wait %s : !p
    %slot = kvpipe.index %s : !p
    %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
    %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
    %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
    %t = kvpipe.consumer_release %s, %e : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// The first block's product is issued early, in a branch, before the wait.
func.func @mma_in_branch_before_wait(%p: !p, %n: index, %e: i1, %first: i1, %q: !q, %k: !ring) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    %slot = kvpipe.index %s : !p
    %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
    scf.if %first {
      // expected-error @below {{'kvpipe.warpgroup_mma' op reads a slot before its data landed}}
      %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
      %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
    }
    kvpipe.consumer_wait %s : !p
    %t = kvpipe.consumer_release %s, %e : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x2x64x64xbf16, #smem>
!half = memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>

// qk_stages = 2: the second half is read after waiting only for the first.
func.func @substage_one_after_waiting_zero(%n: index, %e: i1, %producer: i1, %map: !map, %q: !q, %k: !ring) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      %slot = kvpipe.index %s : !p
      kvpipe.producer_acquire %s stage 0 : !p
      %b0 = kvpipe.producer_mbar %s stage 0 : !p
      %h0 = memref.subview %k[%slot, 0, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : !ring to !half
      kvpipe.tma_load %map[%c0, %i, %c0], %h0, %b0 : !map, !half
      kvpipe.producer_commit %s stage 0 : !p
      kvpipe.producer_acquire %s stage 1 : !p
      %b1 = kvpipe.producer_mbar %s stage 1 : !p
      %h1 = memref.subview %k[%slot, 1, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : !ring to !half
      kvpipe.tma_load %map[%c0, %i, %c0], %h1, %b1 : !map, !half
      kvpipe.producer_commit %s stage 1 : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } else {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      %slot = kvpipe.index %s : !p
      %h0 = memref.subview %k[%slot, 0, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : !ring to !half
      %h1 = memref.subview %k[%slot, 1, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : !ring to !half
      kvpipe.consumer_wait %s stage 0 : !p
      %a = kvpipe.warpgroup_mma %q, %h0 : !q, !half -> vector<32xf32>
      // expected-error @below {{'kvpipe.warpgroup_mma' op reads a slot before its data landed: no consumer_wait of the slot at sub-stage 1 runs before it on every path (sub-stage 1 of pipeline}}
      %b = kvpipe.warpgroup_mma %q, %h1, %a : !q, !half -> vector<32xf32>
      kvpipe.consumer_wait %s stage 1 : !p
      %d = kvpipe.warpgroup_wait %b {pending = 0} : vector<32xf32>
      %s0 = kvpipe.consumer_release %s, %e stage 0 : !p
      %s1 = kvpipe.consumer_release %s0, %e stage 1 : !p
      scf.yield %s1 : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x2x64x64xbf16, #smem>
!half = memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>

// Corrected: each half after its own wait.
func.func @substage_each_waited(%n: index, %e: i1, %producer: i1, %map: !map, %q: !q, %k: !ring) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      %slot = kvpipe.index %s : !p
      kvpipe.producer_acquire %s stage 0 : !p
      %b0 = kvpipe.producer_mbar %s stage 0 : !p
      %h0 = memref.subview %k[%slot, 0, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : !ring to !half
      kvpipe.tma_load %map[%c0, %i, %c0], %h0, %b0 : !map, !half
      kvpipe.producer_commit %s stage 0 : !p
      kvpipe.producer_acquire %s stage 1 : !p
      %b1 = kvpipe.producer_mbar %s stage 1 : !p
      %h1 = memref.subview %k[%slot, 1, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : !ring to !half
      kvpipe.tma_load %map[%c0, %i, %c0], %h1, %b1 : !map, !half
      kvpipe.producer_commit %s stage 1 : !p
      %t = kvpipe.step %s : !p
      scf.yield %t : !p
    }
  } else {
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
      %slot = kvpipe.index %s : !p
      %h0 = memref.subview %k[%slot, 0, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : !ring to !half
      %h1 = memref.subview %k[%slot, 1, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : !ring to !half
      kvpipe.consumer_wait %s stage 0 : !p
      %a = kvpipe.warpgroup_mma %q, %h0 : !q, !half -> vector<32xf32>
      kvpipe.consumer_wait %s stage 1 : !p
      %b = kvpipe.warpgroup_mma %q, %h1, %a : !q, !half -> vector<32xf32>
      %d = kvpipe.warpgroup_wait %b {pending = 0} : vector<32xf32>
      %s0 = kvpipe.consumer_release %s, %e stage 0 : !p
      %s1 = kvpipe.consumer_release %s0, %e stage 1 : !p
      scf.yield %s1 : !p
    }
  }
  return
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// A helper multiplies the slot's tile; the caller calls it before waiting.
func.func private @qk(%q: !q, %k: !ring, %s: !p) -> vector<64xf32> {
  %slot = kvpipe.index %s : !p
  %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
  // expected-note @below {{the wgmma, in the callee}}
  %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  return %d : vector<64xf32>
}

func.func @helper_before_wait(%p: !p, %n: index, %e: i1, %q: !q, %k: !ring) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    // expected-error @below {{'func.call' op reads a slot before its data landed}}
    %d = func.call @qk(%q, %k, %s) : (!q, !ring, !p) -> vector<64xf32>
    kvpipe.consumer_wait %s : !p
    %t = kvpipe.consumer_release %s, %e : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// Copy-paste from the K block: the V tile is multiplied after waiting for K,
// not for V.
func.func @waited_the_other_pipeline(%pk: !p, %pv: !p, %n: index, %e: i1, %q: !q, %k: !ring, %v: !ring) -> (!p, !p) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%sk = %pk, %sv = %pv) -> (!p, !p) {
    kvpipe.consumer_wait %sk : !p
    %slot = kvpipe.index %sk : !p
    %kt = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
    %s = kvpipe.warpgroup_mma %q, %kt : !q, !kt -> vector<64xf32>
    %sd = kvpipe.warpgroup_wait %s {pending = 0} : vector<64xf32>
    %vslot = kvpipe.index %sv : !p
    %vt = memref.subview %v[%vslot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
    // expected-error @below {{'kvpipe.warpgroup_mma' op reads a slot before its data landed}}
    %o = kvpipe.warpgroup_mma %q, %vt : !q, !kt -> vector<64xf32>
    %od = kvpipe.warpgroup_wait %o {pending = 0} : vector<64xf32>
    %k1 = kvpipe.consumer_release %sk, %e : !p
    kvpipe.consumer_wait %sv : !p
    %v1 = kvpipe.consumer_release %sv, %e : !p
    scf.yield %k1, %v1 : !p, !p
  }
  return %r#0, %r#1 : !p, !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

func.func private @slot_of(%s: !p) -> index {
  %i = kvpipe.index %s : !p
  return %i : index
}

// The wgmma runs before the wait, on the slot of a state the function
// receives (its index computed in a helper), and nothing in the module
// calls the function: no caller's wait can be shown to cover the read.
func.func @argument_read_before_wait(%p: !p, %e: i1, %q: !q, %k: !ring) -> (!p, vector<64xf32>) {
  %slot = func.call @slot_of(%p) : (!p) -> index
  %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
  // expected-warning-re @below {{'kvpipe.warpgroup_mma' op cannot prove that the slot this wgmma reads was waited for: its pipeline state is an argument of a function nothing in the module calls, and no consumer_wait of the slot in the function runs before it (pipeline argument #0 of @argument_read_before_wait : {{.*}})}}
  %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  kvpipe.consumer_wait %p : !p
  %t = kvpipe.consumer_release %p, %e : !p
  return %t, %d : !p, vector<64xf32>
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

func.func private @slot_of(%s: !p) -> index {
  %i = kvpipe.index %s : !p
  return %i : index
}

// Correct: the function waits for the slot of the state it receives before
// reading it; the helper reading a received state's slot is checked at its
// call, after the caller's wait.
func.func @argument_waited(%p: !p, %e: i1, %q: !q, %k: !ring) -> (!p, vector<64xf32>) {
  kvpipe.consumer_wait %p : !p
  %slot = func.call @slot_of(%p) : (!p) -> index
  %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
  %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  %d2 = func.call @reads(%q, %k, %p) : (!q, !ring, !p) -> vector<64xf32>
  %t = kvpipe.consumer_release %p, %e : !p
  return %t, %d : !p, vector<64xf32>
}
func.func private @reads(%q: !q, %k: !ring, %s: !p) -> vector<64xf32> {
  %slot = kvpipe.index %s : !p
  %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
  %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  return %d : vector<64xf32>
}

// -----

// The slot a wgmma reads is the kvpipe.index its operand is offset by, slot
// by slot: reading the next slot, or index xor 1, is not that (third
// checker audit).

// WRONG: the consumer waits for slot i = index(s) but its wgmma reads slot
// (i + 1) mod 2 -- the NEXT slot, whose data the producer may not have loaded
// yet (or is loading right now): a read before the data landed. The read is
// "addressed from the slot's kvpipe.index", so it is matched to the wait of s.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
func.func @f(%p: !p, %n: index, %e: i1, %q: !q, %k: !ring) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.consumer_wait %s : !p
    // expected-note @+1 {{the index}}
    %slot = kvpipe.index %s : !p
    %nx = arith.addi %slot, %c1 : index
    %other = arith.remui %nx, %c2 : index
    %tile = memref.subview %k[%other, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
    // expected-warning @+1 {{'kvpipe.warpgroup_mma' op cannot prove which ring slot the wgmma reads: the offset of its address computed from the state's kvpipe.index is 1 at slot }}
    %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
    %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
    %t = kvpipe.consumer_release %s, %e : !p
    scf.yield %t : !p
  }
  return %r : !p
}

// -----

// WRONG: as r01 with the other slot written index xor 1: the consumer waits for
// slot i but its wgmma reads slot i ^ 1, not waited (read before data landed).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
func.func @f(%p: !p, %n: index, %e: i1, %q: !q, %k: !ring) -> !p {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
    kvpipe.consumer_wait %s : !p
    // expected-note @+1 {{the index}}
    %slot = kvpipe.index %s : !p
    %other = arith.xori %slot, %c1 : index
    %tile = memref.subview %k[%other, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
    // expected-warning @+1 {{'kvpipe.warpgroup_mma' op cannot prove which ring slot the wgmma reads: the offset of its address computed from the state's kvpipe.index is not evalua}}
    %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
    %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
    %t = kvpipe.consumer_release %s, %e : !p
    scf.yield %t : !p
  }
  return %r : !p
}


// -----

// The third audit's r07: the wgmma's tile is a memref.view of the ring's bytes
// at index * 16384 (the slot's size): a byte offset the checker does not
// evaluate, so which slot the wgmma reads is not proven (it used to pass).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!bytes = memref<32768xi8, #smem>
!kt = memref<1x128x64xbf16, #smem>
func.func @f(%p: !p, %e: i1, %q: !q, %k: !bytes) -> !p {
  %c16384 = arith.constant 16384 : index
  kvpipe.consumer_wait %p : !p
  // expected-note @+1 {{the index}}
  %slot = kvpipe.index %p : !p
  %shift = arith.muli %slot, %c16384 : index
  %tile = memref.view %k[%shift][] : !bytes to !kt
  // expected-warning @+1 {{'kvpipe.warpgroup_mma' op cannot prove which ring slot the op addresses: a byte or linear offset of its address (memref.view, memref.reinterpret_cast) is computed from the state's kvpipe.index, and such offsets are not evaluated}}
  %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  %t = kvpipe.consumer_release %p, %e : !p
  return %t : !p
}
