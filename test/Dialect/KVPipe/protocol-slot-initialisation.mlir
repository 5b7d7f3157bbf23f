// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 10, before the pipeline exists: an access of a ring's slots before
// the pipeline's kvpipe.init, in the init's block, is no state's (nothing
// holds a slot yet), and the init's CTA barrier orders it before every
// state's access. A write there must be followed, before the init, by a
// `fence.proxy.async` for shared memory, so that the tensor cores and TMA
// (the async proxy) see it. The forward's `tensor_row_sums` fills the
// block of ones of each V slot this way (expand-attention-tensor-row-sums).

// RIGHT: every slot's last rows written before the init, then fenced.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
func.func @filled_before_init(%e: i1, %producer: i1, %buf: !bytes, %out: memref<8xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c120 = arith.constant 120 : index
  %ones = arith.constant dense<1.0> : vector<8xbf16>
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  vector.store %ones, %ring[%c0, %c120, %c0] : !ring, vector<8xbf16>
  vector.store %ones, %ring[%c1, %c120, %c0] : !ring, vector<8xbf16>
  nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %q = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %slot = kvpipe.index %p : !p
    %v = vector.load %ring[%slot, %c120, %c0] : !ring, vector<8xbf16>
    vector.store %v, %out[%c0] : memref<8xbf16>, vector<8xbf16>
    %t = kvpipe.consumer_release %p, %e : !p
  }
  return
}

// -----

// RIGHT: a fill in a loop over the slots, before the create; a read before
// the init needs no fence.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
func.func @loop_fill(%e: i1, %producer: i1, %buf: !bytes, %tid: index, %out: memref<8xbf16>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %ones = arith.constant dense<1.0> : vector<8xbf16>
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  scf.for %s = %c0 to %c2 step %c1 {
    vector.store %ones, %ring[%s, %tid, %c0] : !ring, vector<8xbf16>
  }
  %before = vector.load %ring[%c0, %c0, %c0] : !ring, vector<8xbf16>
  vector.store %before, %out[%c0] : memref<8xbf16>, vector<8xbf16>
  nvvm.fence.proxy {kind = #nvvm.proxy_kind<async>}
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %q = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %slot = kvpipe.index %p : !p
    %v = vector.load %ring[%slot, %c0, %c0] : !ring, vector<8xbf16>
    vector.store %v, %out[%c0] : memref<8xbf16>, vector<8xbf16>
    %t = kvpipe.consumer_release %p, %e : !p
  }
  return
}

// -----

// WRONG: no proxy fence between the fill and the init: a wgmma or TMA may
// not see the generic-proxy writes.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
func.func @unfenced_fill(%e: i1, %producer: i1, %buf: !bytes, %out: memref<8xbf16>) {
  %c0 = arith.constant 0 : index
  %c120 = arith.constant 120 : index
  %ones = arith.constant dense<1.0> : vector<8xbf16>
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  // expected-warning @+1 {{'vector.store' op cannot prove that the tensor cores and TMA see what the op writes into ring slots before the pipeline's kvpipe.init: no fence.proxy.async for shared memory follows it before the init}}
  vector.store %ones, %ring[%c0, %c120, %c0] : !ring, vector<8xbf16>
  %p = kvpipe.create : !p
  // expected-note @+1 {{the kvpipe.init}}
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %q = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %slot = kvpipe.index %p : !p
    %v = vector.load %ring[%slot, %c120, %c0] : !ring, vector<8xbf16>
    vector.store %v, %out[%c0] : memref<8xbf16>, vector<8xbf16>
    %t = kvpipe.consumer_release %p, %e : !p
  }
  return
}

// -----

// WRONG: a proxy fence for global memory does not order the shared-memory
// writes before the async proxy's reads.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
func.func @wrong_fence(%e: i1, %producer: i1, %buf: !bytes, %out: memref<8xbf16>) {
  %c0 = arith.constant 0 : index
  %ones = arith.constant dense<1.0> : vector<8xbf16>
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  // expected-warning @+1 {{no fence.proxy.async for shared memory follows it before the init}}
  vector.store %ones, %ring[%c0, %c0, %c0] : !ring, vector<8xbf16>
  nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.global>}
  %p = kvpipe.create : !p
  // expected-note @+1 {{the kvpipe.init}}
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %q = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %slot = kvpipe.index %p : !p
    %v = vector.load %ring[%slot, %c0, %c0] : !ring, vector<8xbf16>
    vector.store %v, %out[%c0] : memref<8xbf16>, vector<8xbf16>
    %t = kvpipe.consumer_release %p, %e : !p
  }
  return
}

// -----

// WRONG: the same fill after the init: another thread may already hold the
// slot (which state holds it is not known there).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
func.func @filled_after_init(%e: i1, %producer: i1, %buf: !bytes, %out: memref<8xbf16>) {
  %c0 = arith.constant 0 : index
  %c120 = arith.constant 120 : index
  %ones = arith.constant dense<1.0> : vector<8xbf16>
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  // expected-warning @+1 {{'vector.store' op cannot prove which ring slot the op accesses: its address overlaps ring slots 0, 1 at an offset not computed from a kvpipe.index, and which state holds those slots when it runs is not known}}
  vector.store %ones, %ring[%c0, %c120, %c0] : !ring, vector<8xbf16>
  nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %q = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %slot = kvpipe.index %p : !p
    // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
    %v = vector.load %ring[%slot, %c120, %c0] : !ring, vector<8xbf16>
    vector.store %v, %out[%c0] : memref<8xbf16>, vector<8xbf16>
    %t = kvpipe.consumer_release %p, %e : !p
  }
  return
}

// -----

// WRONG (unproven): a helper called before the init may issue an
// asynchronous copy (TMA, wgmma) into the slots that is still in flight when
// the init's barrier passes; only synchronous loads and stores are taken
// as accesses before the pipeline exists.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
func.func private @fill(%ring: !ring) {
  %c0 = arith.constant 0 : index
  %ones = arith.constant dense<1.0> : vector<8xbf16>
  vector.store %ones, %ring[%c0, %c0, %c0] : !ring, vector<8xbf16>
  return
}
func.func @fill_in_helper(%e: i1, %producer: i1, %buf: !bytes, %out: memref<8xbf16>) {
  %c0 = arith.constant 0 : index
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  // expected-warning @+1 {{cannot prove which ring slot the op accesses}}
  func.call @fill(%ring) : (!ring) -> ()
  nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %q = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %slot = kvpipe.index %p : !p
    // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
    %v = vector.load %ring[%slot, %c0, %c0] : !ring, vector<8xbf16>
    vector.store %v, %out[%c0] : memref<8xbf16>, vector<8xbf16>
    %t = kvpipe.consumer_release %p, %e : !p
  }
  return
}

// -----

// WRONG (unproven): a wgmma reading a slot before the init: its group may
// still read when the init's barrier passes and the producer refills it.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, strided<[64, 1]>, #smem>
func.func @wgmma_before_init(%e: i1, %producer: i1, %buf: !bytes, %a: vector<64xbf16>,
                             %out: memref<8xbf16>) -> vector<32xf32> {
  %c0 = arith.constant 0 : index
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  %first = memref.subview %ring[0, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !tile
  // expected-warning @+1 {{cannot prove which ring slot the wgmma reads}}
  %d = kvpipe.warpgroup_mma %a, %first {transpose_b} : vector<64xbf16>, !tile -> vector<32xf32>
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %q = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %slot = kvpipe.index %p : !p
    // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
    %v = vector.load %ring[%slot, %c0, %c0] : !ring, vector<8xbf16>
    vector.store %v, %out[%c0] : memref<8xbf16>, vector<8xbf16>
    %t = kvpipe.consumer_release %p, %e : !p
  }
  %w = kvpipe.warpgroup_wait %d {pending = 0} : vector<32xf32>
  return %w : vector<32xf32>
}

// -----

// WRONG (unproven): a cp.async into a slot before the init, never waited:
// it may land after the producer's TMA refilled the slot. Only plain loads
// and stores count as accesses before the pipeline exists.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
func.func @cp_async_before_init(%e: i1, %producer: i1, %buf: !bytes, %g: memref<128x64xbf16>,
                                %out: memref<8xbf16>) {
  %c0 = arith.constant 0 : index
  %c120 = arith.constant 120 : index
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  // expected-warning @+1 {{'nvgpu.device_async_copy' op cannot prove which ring slot the op accesses}}
  %tok = nvgpu.device_async_copy %g[%c0, %c0], %ring[%c0, %c120, %c0], 8 : memref<128x64xbf16> to !ring
  nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %q = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %slot = kvpipe.index %p : !p
    // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
    %v = vector.load %ring[%slot, %c120, %c0] : !ring, vector<8xbf16>
    vector.store %v, %out[%c0] : memref<8xbf16>, vector<8xbf16>
    %t = kvpipe.consumer_release %p, %e : !p
  }
  return
}

// -----

// WRONG (unproven): a read in a kvpipe.tile region before the init: the
// persistent rewrite computes the region again in every role's tile loop,
// after the init, where it would read the slot without a wait.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xi32, #smem>
func.func @tile_reads_slot(%e: i1, %producer: i1, %buf: !bytes, %n: index, %out: memref<8xi32>,
                           %res: memref<?xindex>) {
  %c0 = arith.constant 0 : index
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  %v0 = kvpipe.tile in(%n, %n, %n) {
  ^bb0(%x: index, %y: index, %z: index):
    // expected-warning @+1 {{'memref.load' op cannot prove which ring slot the op accesses}}
    %w = memref.load %ring[%c0, %c0, %c0] : !ring
    %wi = arith.index_cast %w : i32 to index
    %r = arith.addi %x, %wi : index
    kvpipe.yield %r : index
  } -> index
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  scf.if %producer {
    kvpipe.producer_acquire %p : !p
    kvpipe.producer_commit %p : !p
    %q = kvpipe.step %p : !p
  } else {
    kvpipe.consumer_wait %p : !p
    %slot = kvpipe.index %p : !p
    // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
    %v = vector.load %ring[%slot, %c0, %c0] : !ring, vector<8xi32>
    vector.store %v, %out[%c0] : memref<8xi32>, vector<8xi32>
    %t = kvpipe.consumer_release %p, %e : !p
  }
  kvpipe.for_each_tile {
    memref.store %v0, %res[%c0] : memref<?xindex>
    kvpipe.yield
  }
  return
}
