// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Ops other than wgmma that read or write a ring slot (loads and stores, TMA
// stores, store_fragment) run while their thread holds the slot: after a
// consumer_wait or producer_acquire of it, and not after its release or
// commit. (Held-out programs of the third checker audit.)

// WRONG: the consumer releases slot s and THEN reads the slot with a plain
// vector.load (e.g. a softmax/epilogue reading V): the producer may already be
// refilling the slot by TMA (race). Only kvpipe.warpgroup_mma reads are
// checked (rule 7/8); no documented assumption says other reads of a slot
// are out of scope.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
func.func @f(%p: !p, %e: i1, %k: !ring) -> (!p, vector<8xbf16>) {
  %c0 = arith.constant 0 : index
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  // expected-note @+1 {{the slot is handed over here}}
  %t = kvpipe.consumer_release %p, %e : !p
  // expected-error @+1 {{'vector.load' op accesses a ring slot after its 'consumer_release': the other side may already be refilling or reading it}}
  %v = vector.load %k[%slot, %c0, %c0] : !ring, vector<8xbf16>
  return %t, %v : !p, vector<8xbf16>
}

// -----

// WRONG: the consumer copies the K/V slot back to global memory with
// kvpipe.tma_store BEFORE its consumer_wait: the bulk copy reads the slot
// before the producer's TMA load landed in it (stale/garbage data).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x64x64xbf16, #smem>
!tile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>
func.func @f(%p: !p, %e: i1, %map: !map, %k: !ring, %i: index) -> !p {
  %c0 = arith.constant 0 : index
  %slot = kvpipe.index %p : !p
  %t0 = memref.subview %k[%slot, 0, 0] [1, 64, 64] [1, 1, 1] : !ring to !tile
  // expected-warning @+2 {{'kvpipe.tma_store' op cannot prove that this op accesses the ring slot while it holds it: no consumer_wait or producer_acquire of the slot runs before}}
  // expected-warning @+1 {{'kvpipe.tma_store' op cannot prove that the TMA store has read the ring slot before its 'consumer_release'}}
  kvpipe.tma_store %t0, %map[%c0, %i, %c0] : !tile, !map
  kvpipe.consumer_wait %p : !p
  // expected-note @+1 {{the slot is handed over here}}
  %t = kvpipe.consumer_release %p, %e : !p
  return %t : !p
}

// -----

// WRONG: after releasing slot s the consumer writes a fragment into the slot
// (reusing the K/V buffer as scratch): the producer may be refilling it by TMA
// at the same time (write/write race, corrupts the next block's data).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x64x64xbf16, #smem>
!tile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>
func.func @f(%p: !p, %e: i1, %k: !ring, %h: vector<32xbf16>) -> !p {
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %t0 = memref.subview %k[%slot, 0, 0] [1, 64, 64] [1, 1, 1] : !ring to !tile
  // expected-note @+1 {{the slot is handed over here}}
  %t = kvpipe.consumer_release %p, %e : !p
  // expected-error @+1 {{'kvpipe.store_fragment' op accesses a ring slot after its 'consumer_release': the other side may already be refilling or reading it}}
  kvpipe.store_fragment %h, %t0 : vector<32xbf16>, !tile
  return %t : !p
}


// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>

// Corrected: the read of the slot between its wait and its release.
func.func @load_between_wait_and_release(%p: !p, %e: i1, %k: !ring) -> (!p, vector<8xbf16>) {
  %c0 = arith.constant 0 : index
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %v = vector.load %k[%slot, %c0, %c0] : !ring, vector<8xbf16>
  %t = kvpipe.consumer_release %p, %e : !p
  return %t, %v : !p, vector<8xbf16>
}

// -----

// WRONG: between its wait and its release the consumer loads from the OTHER
// slot, (index + 1) mod 2, which nobody waited for (the producer may be
// filling it). The access's slot offset is evaluated slot by slot.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
func.func @f(%p: !p, %e: i1, %k: !ring) -> (!p, vector<8xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  kvpipe.consumer_wait %p : !p
  // expected-note @+1 {{the index}}
  %slot = kvpipe.index %p : !p
  %next = arith.addi %slot, %c1 : index
  %other = arith.remui %next, %c2 : index
  // expected-warning @+1 {{'vector.load' op cannot prove which ring slot the op accesses: the offset of its address computed from the state's kvpipe.index is 1 at slot 0}}
  %v = vector.load %k[%other, %c0, %c0] : !ring, vector<8xbf16>
  %t = kvpipe.consumer_release %p, %e : !p
  return %t, %v : !p, vector<8xbf16>
}

// -----

// WRONG: the same through a subview whose offset is index xor 1.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x64x64xbf16, #smem>
!tile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>
func.func @f(%p: !p, %e: i1, %k: !ring, %h: vector<32xbf16>) -> !p {
  %c1 = arith.constant 1 : index
  kvpipe.consumer_wait %p : !p
  // expected-note @+1 {{the index}}
  %slot = kvpipe.index %p : !p
  %other = arith.xori %slot, %c1 : index
  %t0 = memref.subview %k[%other, 0, 0] [1, 64, 64] [1, 1, 1] : !ring to !tile
  // expected-warning @+1 {{'kvpipe.store_fragment' op cannot prove which ring slot the op accesses: the offset of its address computed from the state's kvpipe.index is not evaluated at slot 0}}
  kvpipe.store_fragment %h, %t0 : vector<32xbf16>, !tile
  %t = kvpipe.consumer_release %p, %e : !p
  return %t : !p
}

// -----

// WRONG: a vector.load from a memref.view of the ring's bytes at index * 16384:
// the byte offset is not evaluated.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<32768xi8, #smem>
!tile = memref<128x64xbf16, #smem>
func.func @f(%p: !p, %e: i1, %k: !bytes) -> (!p, vector<8xbf16>) {
  %c0 = arith.constant 0 : index
  %c16384 = arith.constant 16384 : index
  kvpipe.consumer_wait %p : !p
  // expected-note @+1 {{the index}}
  %slot = kvpipe.index %p : !p
  %shift = arith.muli %slot, %c16384 : index
  %tile = memref.view %k[%shift][] : !bytes to !tile
  // expected-warning @+1 {{'vector.load' op cannot prove which ring slot the op addresses: a byte or linear offset of its address}}
  %v = vector.load %tile[%c0, %c0] : !tile, vector<8xbf16>
  %t = kvpipe.consumer_release %p, %e : !p
  return %t, %v : !p, vector<8xbf16>
}

// -----

// A TMA store reads its slot asynchronously. WRONG: the consumer stores the
// slot back to global memory and releases it at once: the bulk copy may still
// be reading it while the producer refills it.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x64x64xbf16, #smem>
!tile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>
func.func @f(%p: !p, %e: i1, %map: !map, %k: !ring, %i: index) -> !p {
  %c0 = arith.constant 0 : index
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %t0 = memref.subview %k[%slot, 0, 0] [1, 64, 64] [1, 1, 1] : !ring to !tile
  // expected-warning @+1 {{'kvpipe.tma_store' op cannot prove that the TMA store has read the ring slot before its 'consumer_release': no cp.async.bulk.commit_group followed by cp.async.bulk.wait_group 0 runs between them after the store}}
  kvpipe.tma_store %t0, %map[%c0, %i, %c0] : !tile, !map
  nvvm.cp.async.bulk.commit.group
  // A wait that leaves one group in flight: the store's may be that one.
  nvvm.cp.async.bulk.wait_group 1 {read}
  // expected-note @+1 {{the slot is handed over here}}
  %t = kvpipe.consumer_release %p, %e : !p
  return %t : !p
}

// -----

// Corrected: the elected thread stores, commits and waits for the group's
// reads in its branch (as the backward's dK/dV epilogue), then the slot is
// released.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 64, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x64x64xbf16, #smem>
!tile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>
func.func @store_retired_in_branch(%p: !p, %e: i1, %map: !map, %k: !ring, %i: index) -> !p {
  %c0 = arith.constant 0 : index
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %t0 = memref.subview %k[%slot, 0, 0] [1, 64, 64] [1, 1, 1] : !ring to !tile
  scf.if %e {
    kvpipe.tma_store %t0, %map[%c0, %i, %c0] : !tile, !map
    nvvm.cp.async.bulk.commit.group
    nvvm.cp.async.bulk.wait_group 0 {read}
  }
  %t = kvpipe.consumer_release %p, %e : !p
  return %t : !p
}
