// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// A buffer that overlaps a ring slot at an offset not computed from a
// kvpipe.index (a second memref.view of the same bytes, a subview of the
// ring at a constant slot) accesses the slots it overlaps: the access is
// checked against the waits and releases of the state that holds that slot
// where the checker knows it (a constant advance from the pipeline's
// kvpipe.create), else unproven; where it lies relative to the ring cannot
// be determined, unproven too. (The fourth audit's known gap: such accesses
// were not seen.)

// WRONG: a second memref.view of the ring's bytes at offset 0 (slot 0) read
// after the release: the producer may be refilling slot 0.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, #smem>
func.func @f(%p: !p, %e: i1, %buf: !bytes) -> (!p, vector<8xbf16>, vector<8xbf16>) {
  %c0 = arith.constant 0 : index
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  %other = memref.view %buf[%c0][] : !bytes to !tile
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
  %v0 = vector.load %ring[%slot, %c0, %c0] : !ring, vector<8xbf16>
  %t = kvpipe.consumer_release %p, %e : !p
  // expected-warning @+1 {{'vector.load' op cannot prove which ring slot the op accesses: its address overlaps ring slot 0 at an offset not computed from a kvpipe.index, and which state holds that slot when it runs is not known (pipeline argument #0 of @f}}
  %v = vector.load %other[%c0, %c0] : !tile, vector<8xbf16>
  return %t, %v0, %v : !p, vector<8xbf16>, vector<8xbf16>
}

// -----

// WRONG: the same at byte offset 20000, inside slot 1 (slots of 16384 bytes).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, #smem>
!ktile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>
func.func @f(%p: !p, %e: i1, %buf: !bytes, %h: vector<32xbf16>) -> !p {
  %c0 = arith.constant 0 : index
  %c20000 = arith.constant 20000 : index
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  %other = memref.view %buf[%c20000][] : !bytes to memref<64xbf16, #smem>
  kvpipe.producer_acquire %p : !p
  %slot = kvpipe.index %p : !p
  // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
  %t0 = memref.subview %ring[%slot, 0, 0] [1, 64, 64] [1, 1, 1] : !ring to !ktile
  kvpipe.store_fragment %h, %t0 : vector<32xbf16>, !ktile
  %v = vector.extract_strided_slice %h {offsets = [0], sizes = [8], strides = [1]} : vector<32xbf16> to vector<8xbf16>
  // expected-warning @+1 {{'vector.store' op cannot prove which ring slot the op accesses: its address overlaps ring slot 1 at an offset not computed from a kvpipe.index}}
  vector.store %v, %other[%c0] : memref<64xbf16, #smem>, vector<8xbf16>
  kvpipe.producer_commit %p {kvpipe.transaction_bytes = 0 : i64} : !p
  %t = kvpipe.step %p : !p
  return %t : !p
}

// -----

// WRONG: a view at byte offset 8192 spans the second half of slot 0 and the
// first half of slot 1.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, #smem>
func.func @f(%p: !p, %e: i1, %buf: !bytes) -> (!p, vector<8xbf16>, vector<8xbf16>) {
  %c0 = arith.constant 0 : index
  %c8192 = arith.constant 8192 : index
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  %other = memref.view %buf[%c8192][] : !bytes to !tile
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
  %v0 = vector.load %ring[%slot, %c0, %c0] : !ring, vector<8xbf16>
  // expected-warning @+1 {{'vector.load' op cannot prove which ring slot the op accesses: its address overlaps ring slots 0, 1 at an offset not computed from a kvpipe.index, and which state holds those slots when it runs is not known}}
  %v = vector.load %other[%c0, %c0] : !tile, vector<8xbf16>
  %t = kvpipe.consumer_release %p, %e : !p
  return %t, %v0, %v : !p, vector<8xbf16>, vector<8xbf16>
}

// -----

// WRONG: a subview of the ring at the constant slot 1, read between the
// wait and the release of a state whose slot is not known.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!ktile = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!kt1 = memref<128x64xbf16, strided<[64, 1], offset: 8192>, #smem>
func.func @f(%p: !p, %e: i1, %k: !ring) -> (!p, vector<8xbf16>, vector<8xbf16>) {
  %c0 = arith.constant 0 : index
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
  %t0 = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !ktile
  %v0 = vector.load %t0[%c0, %c0] : !ktile, vector<8xbf16>
  %t1 = memref.subview %k[1, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt1
  // expected-warning @+1 {{'vector.load' op cannot prove which ring slot the op accesses: its address overlaps ring slot 1 at an offset not computed from a kvpipe.index}}
  %v = vector.load %t1[%c0, %c0] : !kt1, vector<8xbf16>
  %t = kvpipe.consumer_release %p, %e : !p
  return %t, %v0, %v : !p, vector<8xbf16>, vector<8xbf16>
}

// -----

// WRONG: a wgmma reading the ring's slot 1 through a constant subview.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
!kt1 = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: 8192>, #smem>
func.func @f(%p: !p, %e: i1, %q: !q, %k: !ring) -> (!p, vector<64xf32>) {
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
  %t0 = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
  %a0 = kvpipe.warpgroup_mma %q, %t0 : !q, !kt -> vector<64xf32>
  %t1 = memref.subview %k[1, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt1
  // expected-warning @+1 {{'kvpipe.warpgroup_mma' op cannot prove which ring slot the wgmma reads: its address overlaps ring slot 1 at an offset not computed from a kvpipe.index}}
  %a1 = kvpipe.warpgroup_mma %q, %t1, %a0 : !q, !kt1 -> vector<64xf32>
  %d = kvpipe.warpgroup_wait %a1 {pending = 0} : vector<64xf32>
  %t = kvpipe.consumer_release %p, %e : !p
  return %t, %d : !p, vector<64xf32>
}

// -----

// WRONG: a view at a byte offset passed in: it lies somewhere in the bytes,
// which hold both slots.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, #smem>
func.func @f(%p: !p, %e: i1, %buf: !bytes, %at: index) -> (!p, vector<8xbf16>, vector<8xbf16>) {
  %c0 = arith.constant 0 : index
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  %other = memref.view %buf[%at][] : !bytes to !tile
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
  %v0 = vector.load %ring[%slot, %c0, %c0] : !ring, vector<8xbf16>
  %t = kvpipe.consumer_release %p, %e : !p
  // expected-warning @+1 {{'vector.load' op cannot prove that the op does not access a ring slot: its address may overlap ring slots 0, 1, and where it lies relative to the ring's slots is not known}}
  %v = vector.load %other[%c0, %c0] : !tile, vector<8xbf16>
  return %t, %v0, %v : !p, vector<8xbf16>, vector<8xbf16>
}

// -----

// WRONG: a helper loads from the tile it is passed, a view of the ring at
// constant slot 0, after the release.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!ktile = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!kt0 = memref<128x64xbf16, strided<[64, 1]>, #smem>
func.func private @h(%b: !kt0) -> vector<8xbf16> {
  %c0 = arith.constant 0 : index
  %v = vector.load %b[%c0, %c0] : !kt0, vector<8xbf16>
  return %v : vector<8xbf16>
}
func.func @f(%p: !p, %e: i1, %k: !ring) -> (!p, vector<8xbf16>, vector<8xbf16>) {
  %c0 = arith.constant 0 : index
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
  %v0 = vector.load %k[%slot, %c0, %c0] : !ring, vector<8xbf16>
  %t = kvpipe.consumer_release %p, %e : !p
  %t0 = memref.subview %k[0, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt0
  // expected-warning @+1 {{'func.call' op cannot prove which ring slot the op accesses: its address overlaps ring slot 0}}
  %v = func.call @h(%t0) : (!kt0) -> vector<8xbf16>
  return %t, %v0, %v : !p, vector<8xbf16>, vector<8xbf16>
}

// -----

// WRONG: the producer fills slot 0 of a fresh pipeline, commits it, acquires
// slot 1 and writes slot 0 again through a view of its bytes: the state at
// ring position 0 is known (the one kvpipe.create returns), and it was
// handed over.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 128, consumers = 128>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
!ktile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>
!row = memref<64xbf16, #smem>
func.func @f(%h: vector<32xbf16>, %x: vector<8xbf16>, %buf: !bytes) {
  %c0 = arith.constant 0 : index
  %true = arith.constant true
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  %row0 = memref.view %buf[%c0][] : !bytes to !row
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
    kvpipe.producer_acquire %p : !p
    %s0 = kvpipe.index %p : !p
    %t0 = memref.subview %ring[%s0, 0, 0] [1, 64, 64] [1, 1, 1] : !ring to !ktile
    kvpipe.store_fragment %h, %t0 : vector<32xbf16>, !ktile
    // expected-note @+1 {{the slot is handed over here}}
    kvpipe.producer_commit %p : !p
    %p1 = kvpipe.step %p : !p
    kvpipe.producer_acquire %p1 : !p
    // expected-error @+1 {{'vector.store' op accesses a ring slot after its 'producer_commit': the other side may already be refilling or reading it}}
    vector.store %x, %row0[%c0] : !row, vector<8xbf16>
    kvpipe.producer_commit %p1 : !p
    %p2 = kvpipe.step %p1 : !p
  } consumers(1) registers(240) {
  ^bb0(%wg: index):
    kvpipe.consumer_wait %p : !p
    %c1 = kvpipe.consumer_release %p, %true : !p
    kvpipe.consumer_wait %c1 : !p
    %c2 = kvpipe.consumer_release %c1, %true : !p
  }
  return
}

// -----

// Corrected: the same producer writes slot 0 through the view of its bytes
// between the acquire of the state at slot 0 and its commit.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 128, consumers = 128>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
!ktile = memref<64x64xbf16, strided<[64, 1], offset: ?>, #smem>
!row = memref<64xbf16, #smem>
func.func @slot_of_a_known_state(%h: vector<32xbf16>, %x: vector<8xbf16>, %buf: !bytes) {
  %c0 = arith.constant 0 : index
  %true = arith.constant true
  %ring = memref.view %buf[%c0][] : !bytes to !ring
  %row0 = memref.view %buf[%c0][] : !bytes to !row
  %p = kvpipe.create : !p
  kvpipe.init %p : !p
  kvpipe.warp_roles producer registers(24) {
    kvpipe.producer_acquire %p : !p
    %s0 = kvpipe.index %p : !p
    %t0 = memref.subview %ring[%s0, 0, 0] [1, 64, 64] [1, 1, 1] : !ring to !ktile
    kvpipe.store_fragment %h, %t0 : vector<32xbf16>, !ktile
    vector.store %x, %row0[%c0] : !row, vector<8xbf16>
    kvpipe.producer_commit %p : !p
    %p1 = kvpipe.step %p : !p
    kvpipe.producer_acquire %p1 : !p
    kvpipe.producer_commit %p1 : !p
    %p2 = kvpipe.step %p1 : !p
  } consumers(1) registers(240) {
  ^bb0(%wg: index):
    kvpipe.consumer_wait %p : !p
    %c1 = kvpipe.consumer_release %p, %true : !p
    kvpipe.consumer_wait %c1 : !p
    %c2 = kvpipe.consumer_release %c1, %true : !p
  }
  return
}

// -----

// Corrected: buffers next to the ring in the same bytes (a view past its
// end, a subview of the bytes before it) are not slots, whenever they are
// accessed.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!bytes = memref<65536xi8, #smem>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, #smem>
func.func @buffers_next_to_the_ring(%p: !p, %e: i1, %buf: !bytes) -> (!p, vector<8xbf16>, vector<8xbf16>, vector<16xi8>) {
  %c0 = arith.constant 0 : index
  %c16384 = arith.constant 16384 : index
  %c49152 = arith.constant 49152 : index
  %ring = memref.view %buf[%c16384][] : !bytes to !ring
  %past = memref.view %buf[%c49152][] : !bytes to !tile
  %before = memref.subview %buf[0] [16384] [1] : !bytes to memref<16384xi8, strided<[1]>, #smem>
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %v0 = vector.load %ring[%slot, %c0, %c0] : !ring, vector<8xbf16>
  %t = kvpipe.consumer_release %p, %e : !p
  %v = vector.load %past[%c0, %c0] : !tile, vector<8xbf16>
  %b = vector.load %before[%c0] : memref<16384xi8, strided<[1]>, #smem>, vector<16xi8>
  return %t, %v0, %v, %b : !p, vector<8xbf16>, vector<8xbf16>, vector<16xi8>
}

// -----

// Corrected: the generated kernels' layout. The dynamic shared memory
// aligned by its address, Q before the ring, a scratch buffer per consumer
// warpgroup right after it, at (warpgroup - 1) * 8192 past its end (in the
// consumers' branch, where the warpgroup is at least 1), each accessed at
// offsets not computed from a kvpipe.index.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
!qrows = memref<1x16x64xbf16, strided<[4096, 64, 1], offset: ?>, #smem>
gpu.module @kernels {
  func.func @generated_layout(%p: !p, %e: i1) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %c1024 = arith.constant 1024 : index
    %c8192 = arith.constant 8192 : index
    %c40960 = arith.constant 40960 : index
    %smem = gpu.dynamic_shared_memory : memref<?xi8, #smem>
    %address = memref.extract_aligned_pointer_as_index %smem : memref<?xi8, #smem> -> index
    %m = arith.remui %address, %c1024 : index
    %pad = arith.subi %c1024, %m : index
    %align = arith.remui %pad, %c1024 : index
    %q = memref.view %smem[%align][] : memref<?xi8, #smem> to !q
    %at = arith.addi %align, %c8192 : index
    %ring = memref.view %smem[%at][] : memref<?xi8, #smem> to !ring
    %wg = kvpipe.warpgroup_id : index
    %consumer = arith.cmpi ne, %wg, %c0 : index
    scf.if %consumer {
      %w = arith.subi %wg, %c1 : index
      %wq = arith.muli %w, %c16 : index
      %rows = memref.subview %q[0, %wq, 0] [1, 16, 64] [1, 1, 1] : !q to !qrows
      %x = vector.load %rows[%c0, %c0, %c0] : !qrows, vector<8xbf16>
      %ws = arith.muli %w, %c8192 : index
      %past = arith.addi %c40960, %ws : index
      %sat = arith.addi %align, %past : index
      %scratch = memref.view %smem[%sat][] : memref<?xi8, #smem> to memref<2048xf32, #smem>
      kvpipe.consumer_wait %p : !p
      %slot = kvpipe.index %p : !p
      %tile = memref.subview %ring[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
      %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
      %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
      %t = kvpipe.consumer_release %p, %e : !p
      %part = vector.extract_strided_slice %d {offsets = [0], sizes = [4], strides = [1]} : vector<64xf32> to vector<4xf32>
      vector.store %part, %scratch[%c0] : memref<2048xf32, #smem>, vector<4xf32>
      vector.store %x, %rows[%c0, %c1, %c0] : !qrows, vector<8xbf16>
    }
    return
  }
}

// -----

// A ring of 2^30 slots (the fuzzer's shape mutation of a generated kernel):
// the slots an access overlaps are computed from the stride, not scanned
// (the scan took minutes per access).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<1073741824x8xi32, #smem>
!other = memref<8xi32, strided<[1], offset: 8>, #smem>
func.func @huge_ring(%p: !p, %e: i1, %ring: !ring) -> (!p, vector<8xi32>) {
  %c0 = arith.constant 0 : index
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
  %v0 = vector.load %ring[%slot, %c0] : !ring, vector<8xi32>
  %t = kvpipe.consumer_release %p, %e : !p
  %one = memref.subview %ring[1, 0] [1, 8] [1, 1] : !ring to !other
  // expected-warning @+1 {{'vector.load' op cannot prove which ring slot the op accesses: its address overlaps ring slot 1 at an offset not computed from a kvpipe.index}}
  %v = vector.load %one[%c0] : !other, vector<8xi32>
  return %t, %v : !p, vector<8xi32>
}
