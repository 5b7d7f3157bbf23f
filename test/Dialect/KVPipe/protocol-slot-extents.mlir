// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// A view or an access at a ring's slot reaches no further along the slot
// dimension than the slot (rule 10, checkSlotExtents): the state holds its
// slot, not slot + 1, which the other role may be filling or reading. From
// the sixth audit (session 25), whose programs were accepted.

// WRONG: a TMA box of two tiles into a view of two slots from the slot.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [2, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!two = memref<2x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
func.func @produce(%s: !p, %k: !ring, %map: !map) -> !p {
  %c0 = arith.constant 0 : index
  kvpipe.producer_acquire %s : !p
  %slot = kvpipe.index %s : !p
  %b = kvpipe.producer_mbar %s : !p
  // expected-error @+1 {{'memref.subview' op takes a view of size 2 along the slot dimension of a ring, from the slot of a kvpipe.index: it reaches slot + 1, which the state does not hold}}
  %tile = memref.subview %k[%slot, 0, 0] [2, 128, 64] [1, 1, 1] : !ring to !two
  kvpipe.tma_load %map[%c0, %c0, %c0], %tile, %b : !map, !two
  kvpipe.producer_commit %s {kvpipe.transaction_bytes = 32768 : i64} : !p
  %t = kvpipe.step %s : !p
  return %t : !p
}

// -----

// WRONG: a wgmma's B operand of 64 rows of the slot and 64 of the next.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!a = memref<2x64x64xbf16, #smem>
!two = memref<2x64x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
func.func @consume(%s: !p, %k: !ring, %a: !a, %e: i1) -> (!p, vector<32xf32>) {
  %o0 = arith.constant dense<0.0> : vector<32xf32>
  kvpipe.consumer_wait %s : !p
  %slot = kvpipe.index %s : !p
  // expected-error @+1 {{takes a view of size 2 along the slot dimension of a ring}}
  %tile = memref.subview %k[%slot, 0, 0] [2, 64, 64] [1, 1, 1] : !ring to !two
  %acc = kvpipe.warpgroup_mma %a, %tile, %o0 : !a, !two -> vector<32xf32>
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<32xf32>
  %t = kvpipe.consumer_release %s, %e : !p
  return %t, %d : !p, vector<32xf32>
}

// -----

// WRONG: a transfer whose vector's first dimension walks the slot dimension
// (row 0 of the slot and of slot + 1).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
func.func @consume(%s: !p, %k: !ring, %e: i1) -> (!p, vector<2x8xbf16>) {
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : bf16
  kvpipe.consumer_wait %s : !p
  %slot = kvpipe.index %s : !p
  // expected-error @+1 {{'vector.transfer_read' op accesses 2 along the slot dimension of a ring, from the slot of a kvpipe.index: it reaches slot + 1}}
  %v = vector.transfer_read %k[%slot, %c0, %c0], %pad {in_bounds = [false, true], permutation_map = affine_map<(d0, d1, d2) -> (d0, d2)>} : !ring, vector<2x8xbf16>
  %t = kvpipe.consumer_release %s, %e : !p
  return %t, %v : !p, vector<2x8xbf16>
}

// -----

// WRONG: a 2-D vector.load of a ring indexed at the slot by the load itself.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x64xbf16, #smem>
func.func @consume(%s: !p, %k: !ring, %e: i1) -> (!p, vector<2x8xbf16>) {
  %c0 = arith.constant 0 : index
  kvpipe.consumer_wait %s : !p
  %slot = kvpipe.index %s : !p
  // expected-error @+1 {{'vector.load' op accesses 2 along the slot dimension of a ring}}
  %v = vector.load %k[%slot, %c0] : !ring, vector<2x8xbf16>
  %t = kvpipe.consumer_release %s, %e : !p
  return %t, %v : !p, vector<2x8xbf16>
}

// -----

// Corrected: the slot's own views and accesses, and a vector along the
// slot's rows.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!a = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
func.func @consume(%s: !p, %k: !ring, %a: !a, %e: i1)
    -> (!p, vector<64xf32>, vector<2x8xbf16>) {
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : bf16
  %o0 = arith.constant dense<0.0> : vector<64xf32>
  kvpipe.consumer_wait %s : !p
  %slot = kvpipe.index %s : !p
  %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
  %acc = kvpipe.warpgroup_mma %a, %tile, %o0 : !a, !kt -> vector<64xf32>
  %d = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
  %v = vector.transfer_read %k[%slot, %c0, %c0], %pad {in_bounds = [true, true], permutation_map = affine_map<(d0, d1, d2) -> (d1, d2)>} : !ring, vector<2x8xbf16>
  %t = kvpipe.consumer_release %s, %e : !p
  return %t, %d, %v : !p, vector<64xf32>, vector<2x8xbf16>
}
