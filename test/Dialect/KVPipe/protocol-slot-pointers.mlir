// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// An address taken out of a memref that may overlap a ring
// (memref.extract_aligned_pointer_as_index, the base buffer of
// memref.extract_strided_metadata, builtin.unrealized_conversion_cast) and
// loaded or stored through with llvm ops: accesses of a slot the checker
// does not see, unproven at the op that takes the address out. An address
// that only computes the offsets of views (the generated kernels align their
// buffers by the dynamic shared memory's address), or that is taken out of a
// buffer apart from every ring, is not. (The fourth audit's known gap: such
// accesses were accepted silently.)

// WRONG: the consumer takes the slot's address out of its view and loads
// through it with llvm.load after releasing the slot.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
func.func @f(%p: !p, %e: i1, %k: !ring) -> (!p, bf16) {
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
  %t0 = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !tile
  // expected-warning @+1 {{'memref.extract_aligned_pointer_as_index' op cannot prove that no ring slot is accessed through the address this op takes out of a memref: the memref may overlap a ring, and loads and stores through the address are not checked against the pipeline's waits and releases (pipeline argument #0 of @f}}
  %a = memref.extract_aligned_pointer_as_index %t0 : !tile -> index
  %t = kvpipe.consumer_release %p, %e : !p
  %i = arith.index_cast %a : index to i64
  // expected-note @+1 {{the address is used here ('llvm.inttoptr')}}
  %ptr = llvm.inttoptr %i : i64 to !llvm.ptr<3>
  %v = llvm.load %ptr : !llvm.ptr<3> -> bf16
  return %t, %v : !p, bf16
}

// -----

// WRONG: the producer takes the base buffer and offset of the slot's view
// with extract_strided_metadata and stores through the base's address.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
func.func @f(%p: !p, %k: !ring, %x: bf16) -> !p {
  kvpipe.producer_acquire %p : !p
  %slot = kvpipe.index %p : !p
  // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
  %t0 = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !tile
  %base, %off, %sizes:2, %strides:2 = memref.extract_strided_metadata %t0 : !tile -> memref<bf16, #smem>, index, index, index, index, index
  // expected-warning @+1 {{'memref.extract_aligned_pointer_as_index' op cannot prove that no ring slot is accessed through the address this op takes out of a memref}}
  %a = memref.extract_aligned_pointer_as_index %base : memref<bf16, #smem> -> index
  %i = arith.index_cast %a : index to i64
  // expected-note @+1 {{the address is used here ('llvm.inttoptr')}}
  %ptr = llvm.inttoptr %i : i64 to !llvm.ptr<3>
  %o = arith.index_cast %off : index to i64
  %q = llvm.getelementptr %ptr[%o] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, bf16
  llvm.store %x, %q : bf16, !llvm.ptr<3>
  kvpipe.producer_commit %p : !p
  %n = kvpipe.step %p : !p
  return %n : !p
}

// -----

// WRONG: the slot's view converted to an LLVM memref descriptor, its aligned
// pointer loaded from before the wait.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!desc = !llvm.struct<(ptr<3>, ptr<3>, i64, array<2 x i64>, array<2 x i64>)>
func.func @f(%p: !p, %e: i1, %k: !ring) -> (!p, bf16) {
  %slot = kvpipe.index %p : !p
  // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
  %t0 = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !tile
  // expected-warning @+1 {{'builtin.unrealized_conversion_cast' op cannot prove that no ring slot is accessed through the address this op takes out of a memref}}
  %d = builtin.unrealized_conversion_cast %t0 : !tile to !desc
  %ptr = llvm.extractvalue %d[1] : !desc
  %v = llvm.load %ptr : !llvm.ptr<3> -> bf16
  kvpipe.consumer_wait %p : !p
  %t = kvpipe.consumer_release %p, %e : !p
  return %t, %v : !p, bf16
}

// -----

// WRONG: the address of the whole dynamic shared memory, which holds the
// ring, offset to the ring's slot 1 and read with an llvm.load.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
gpu.module @kernels {
  func.func @f(%p: !p, %e: i1) -> (!p, vector<8xbf16>, bf16) {
    %c0 = arith.constant 0 : index
    %c16384 = arith.constant 16384 : index
    %smem = gpu.dynamic_shared_memory : memref<?xi8, #smem>
    %ring = memref.view %smem[%c0][] : memref<?xi8, #smem> to !ring
    kvpipe.consumer_wait %p : !p
    %slot = kvpipe.index %p : !p
    // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
    %v0 = vector.load %ring[%slot, %c0, %c0] : !ring, vector<8xbf16>
    // expected-warning @+1 {{'memref.extract_aligned_pointer_as_index' op cannot prove that no ring slot is accessed through the address this op takes out of a memref}}
    %a = memref.extract_aligned_pointer_as_index %smem : memref<?xi8, #smem> -> index
    %b = arith.addi %a, %c16384 : index
    %i = arith.index_cast %b : index to i64
    // expected-note @+1 {{the address is used here ('llvm.inttoptr')}}
    %ptr = llvm.inttoptr %i : i64 to !llvm.ptr<3>
    %v = llvm.load %ptr : !llvm.ptr<3> -> bf16
    %t = kvpipe.consumer_release %p, %e : !p
    return %t, %v0, %v : !p, vector<8xbf16>, bf16
  }
}

// -----

// WRONG: the slot's address handed to inline assembly (a bulk copy to global
// memory) after the release.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
func.func @f(%p: !p, %e: i1, %k: !ring, %g: !llvm.ptr<1>) -> !p {
  %c16384 = arith.constant 16384 : i32
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  // expected-note @+1 {{the ring, whose slot a kvpipe.index selects here}}
  %t0 = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !tile
  // expected-warning @+1 {{'memref.extract_aligned_pointer_as_index' op cannot prove that no ring slot is accessed through the address this op takes out of a memref}}
  %a = memref.extract_aligned_pointer_as_index %t0 : !tile -> index
  %t = kvpipe.consumer_release %p, %e : !p
  %i = arith.index_cast %a : index to i32
  // expected-note @+1 {{the address is used here ('llvm.inline_asm')}}
  llvm.inline_asm has_side_effects "cp.async.bulk.global.shared::cta.bulk_group [$0], [$1], $2;", "l,r,r,~{memory}" %g, %i, %c16384 : (!llvm.ptr<1>, i32, i32) -> ()
  return %t : !p
}

// -----

// WRONG: a helper takes the address of the tile it is passed and loads
// through it; the call, after the release, accesses the slot.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
func.func private @h(%b: !tile) -> bf16 {
  %a = memref.extract_aligned_pointer_as_index %b : !tile -> index
  %i = arith.index_cast %a : index to i64
  %ptr = llvm.inttoptr %i : i64 to !llvm.ptr<3>
  %v = llvm.load %ptr : !llvm.ptr<3> -> bf16
  return %v : bf16
}
func.func @f(%p: !p, %e: i1, %k: !ring) -> (!p, bf16) {
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %t0 = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !tile
  // expected-note @+1 {{the slot is handed over here}}
  %t = kvpipe.consumer_release %p, %e : !p
  // expected-error @+1 {{'func.call' op accesses a ring slot after its 'consumer_release': the other side may already be refilling or reading it}}
  %v = func.call @h(%t0) : (!tile) -> bf16
  return %t, %v : !p, bf16
}

// -----

// Corrected: the slot read through its view between the wait and the
// release (the checker sees it); the dynamic shared memory's address only
// aligns the ring's view, as the generated kernels do.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
gpu.module @kernels {
  func.func @aligned_by_address(%p: !p, %e: i1) -> (!p, vector<8xbf16>) {
    %c0 = arith.constant 0 : index
    %c1024 = arith.constant 1024 : index
    %smem = gpu.dynamic_shared_memory : memref<?xi8, #smem>
    %address = memref.extract_aligned_pointer_as_index %smem : memref<?xi8, #smem> -> index
    %m = arith.remui %address, %c1024 : index
    %pad = arith.subi %c1024, %m : index
    %align = arith.remui %pad, %c1024 : index
    %ring = memref.view %smem[%align][] : memref<?xi8, #smem> to !ring
    kvpipe.consumer_wait %p : !p
    %slot = kvpipe.index %p : !p
    %t0 = memref.subview %ring[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !tile
    %v = vector.load %t0[%c0, %c0] : !tile, vector<8xbf16>
    %t = kvpipe.consumer_release %p, %e : !p
    return %t, %v : !p, vector<8xbf16>
  }
}

// -----

// Corrected: the address of a scratch buffer past the ring, in the same
// dynamic shared memory, handed to a bulk reduction (as the backward's dQ
// accumulation does): it does not overlap the ring.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
gpu.module @kernels {
  func.func @scratch_past_the_ring(%p: !p, %e: i1, %g: !llvm.ptr<1>) -> (!p, vector<8xbf16>) {
    %c0 = arith.constant 0 : index
    %c32768 = arith.constant 32768 : index
    %c8192 = arith.constant 8192 : i32
    %smem = gpu.dynamic_shared_memory : memref<?xi8, #smem>
    %ring = memref.view %smem[%c0][] : memref<?xi8, #smem> to !ring
    %scratch = memref.view %smem[%c32768][] : memref<?xi8, #smem> to memref<2048xf32, #smem>
    kvpipe.consumer_wait %p : !p
    %slot = kvpipe.index %p : !p
    %v = vector.load %ring[%slot, %c0, %c0] : !ring, vector<8xbf16>
    %t = kvpipe.consumer_release %p, %e : !p
    %a = memref.extract_aligned_pointer_as_index %scratch : memref<2048xf32, #smem> -> index
    %i = arith.index_cast %a : index to i32
    llvm.inline_asm has_side_effects "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], $2;", "l,r,r,~{memory}" %g, %i, %c8192 : (!llvm.ptr<1>, i32, i32) -> ()
    return %t, %v : !p, vector<8xbf16>
  }
}
