// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 8 of --kvpipe-verify-protocol, the ways a tile reaches a wgmma: view
// ops (memref.expand_shape, chains of subviews, casts), helpers that compute
// the slot's view or issue the wgmma, and wgmmas in an scf.if. A release
// while a wgmma reading the slot may still be in flight is an error however
// the tile got there. Each wrong program is followed by its corrected form.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!flat = memref<2x8192xbf16, #smem>
!row = memref<8192xbf16, strided<[1], offset: ?>, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// The ring is flat; the slot's row is expanded to a tile.
func.func @through_expand_shape(%p: !p, %e: i1, %q: !q, %k: !flat) -> !p {
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %row = memref.subview %k[%slot, 0] [1, 8192] [1, 1] : !flat to !row
  %tile = memref.expand_shape %row [[0, 1, 2]] output_shape [1, 128, 64] : !row into !kt
  // expected-note @below {{the wgmma reading the slot, not retired before the release}}
  %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
  // expected-error @below {{'kvpipe.consumer_release' op releases a slot that a kvpipe.warpgroup_mma still in flight reads}}
  %t = kvpipe.consumer_release %p, %e : !p
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!flat = memref<2x8192xbf16, #smem>
!row = memref<8192xbf16, strided<[1], offset: ?>, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// Corrected: retire, then release.
func.func @through_expand_shape_retired(%p: !p, %e: i1, %q: !q, %k: !flat) -> !p {
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %row = memref.subview %k[%slot, 0] [1, 8192] [1, 1] : !flat to !row
  %tile = memref.expand_shape %row [[0, 1, 2]] output_shape [1, 128, 64] : !row into !kt
  %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  %t = kvpipe.consumer_release %p, %e : !p
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x2x128x64xbf16, #smem>
!slot = memref<1x2x128x64xbf16, strided<[16384, 8192, 64, 1], offset: ?>, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
!any = memref<1x128x64xbf16, strided<[?, ?, ?], offset: ?>, #smem>

// A subview of the slot, then a column block of it, then a cast.
func.func @through_subview_chain_and_cast(%p: !p, %e: i1, %q: !q, %k: !ring) -> !p {
  %c1 = arith.constant 1 : index
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %s = memref.subview %k[%slot, 0, 0, 0] [1, 2, 128, 64] [1, 1, 1, 1] : !ring to !slot
  %b = memref.subview %s[0, %c1, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : !slot to !kt
  %any = memref.cast %b : !kt to !any
  %tile = memref.cast %any : !any to !kt
  // expected-note @below {{the wgmma reading the slot}}
  %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
  // expected-error @below {{'kvpipe.consumer_release' op releases a slot that a kvpipe.warpgroup_mma still in flight reads}}
  %t = kvpipe.consumer_release %p, %e : !p
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// The slot's view is computed in a helper, index and all.
func.func private @slot_tile(%k: !ring, %s: !p) -> !kt {
  %slot = kvpipe.index %s : !p
  %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
  return %tile : !kt
}

func.func @slot_index_in_helper(%p: !p, %e: i1, %q: !q, %k: !ring) -> !p {
  kvpipe.consumer_wait %p : !p
  %tile = func.call @slot_tile(%k, %p) : (!ring, !p) -> !kt
  // expected-note @below {{the wgmma reading the slot}}
  %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
  // expected-error @below {{'kvpipe.consumer_release' op releases a slot that a kvpipe.warpgroup_mma still in flight reads}}
  %t = kvpipe.consumer_release %p, %e : !p
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// Corrected: the helper's view, retired before the release.
func.func private @slot_tile(%k: !ring, %s: !p) -> !kt {
  %slot = kvpipe.index %s : !p
  %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
  return %tile : !kt
}

func.func @slot_index_in_helper_retired(%p: !p, %e: i1, %q: !q, %k: !ring) -> !p {
  kvpipe.consumer_wait %p : !p
  %tile = func.call @slot_tile(%k, %p) : (!ring, !p) -> !kt
  %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  %t = kvpipe.consumer_release %p, %e : !p
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// The helper issues the wgmma and returns without retiring it.
func.func private @issue_qk(%q: !q, %tile: !kt) -> vector<64xf32> {
  // expected-note @below {{the wgmma reading the slot}}
  %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
  return %acc : vector<64xf32>
}

func.func @mma_in_helper(%p: !p, %e: i1, %q: !q, %k: !ring) -> !p {
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
  %acc = func.call @issue_qk(%q, %tile) : (!q, !kt) -> vector<64xf32>
  // expected-error @below {{'kvpipe.consumer_release' op releases a slot that a kvpipe.warpgroup_mma still in flight reads}}
  %t = kvpipe.consumer_release %p, %e : !p
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// Corrected: the helper retires what it issued.
func.func private @qk_retired(%q: !q, %tile: !kt) -> vector<64xf32> {
  %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  return %d : vector<64xf32>
}

func.func @mma_in_helper_retired(%p: !p, %e: i1, %q: !q, %k: !ring) -> !p {
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
  %acc = func.call @qk_retired(%q, %tile) : (!q, !kt) -> vector<64xf32>
  %t = kvpipe.consumer_release %p, %e : !p
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// The wgmma is issued in a branch (the masked blocks take another path) and
// only the other branch retires.
func.func @mma_in_if(%p: !p, %e: i1, %masked: i1, %q: !q, %k: !ring, %o: vector<64xf32>) -> !p {
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
  %r = scf.if %masked -> vector<64xf32> {
    // expected-note @below {{the wgmma reading the slot}}
    %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
    scf.yield %acc : vector<64xf32>
  } else {
    %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
    %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
    scf.yield %d : vector<64xf32>
  }
  // expected-error @below {{'kvpipe.consumer_release' op releases a slot that a kvpipe.warpgroup_mma still in flight reads}}
  %t = kvpipe.consumer_release %p, %e : !p
  %d = kvpipe.warpgroup_wait %r {pending = 0} : vector<64xf32>
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// Corrected: retire after the branch, before the release.
func.func @mma_in_if_retired(%p: !p, %e: i1, %masked: i1, %q: !q, %k: !ring, %o: vector<64xf32>) -> !p {
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
  %r = scf.if %masked -> vector<64xf32> {
    %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
    scf.yield %acc : vector<64xf32>
  } else {
    %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
    scf.yield %acc : vector<64xf32>
  }
  %d = kvpipe.warpgroup_wait %r {pending = 0} : vector<64xf32>
  %t = kvpipe.consumer_release %p, %e : !p
  return %t : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!q = memref<1x64x64xbf16, #smem>
!ring = memref<2x128x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>

// The tile is chosen by a branch the checker does not follow to a buffer:
// it cannot prove the wgmma does not read the released slot.
func.func @tile_from_branch(%p: !p, %e: i1, %c: i1, %q: !q, %k: !ring, %other: !kt) -> !p {
  kvpipe.consumer_wait %p : !p
  %slot = kvpipe.index %p : !p
  %tile = scf.if %c -> !kt {
    %v = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
    scf.yield %v : !kt
  } else {
    scf.yield %other : !kt
  }
  // expected-note @below {{the wgmma}}
  %acc = kvpipe.warpgroup_mma %q, %tile : !q, !kt -> vector<64xf32>
  // expected-warning @below {{'kvpipe.consumer_release' op cannot prove that no wgmma in flight reads the released slot: the operand of a wgmma still in flight comes from 'scf.if', which the checker does not follow}}
  %t = kvpipe.consumer_release %p, %e : !p
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  return %t : !p
}
