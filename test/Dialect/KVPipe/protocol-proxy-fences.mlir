// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Writes into a ring slot in the generic proxy (plain stores,
// kvpipe.store_fragment) of a pipeline whose slots the async proxy accesses
// (a wgmma or a TMA store reads them, a TMA load refills them) are ordered
// before it only by a fence.proxy.async for shared memory by the writing
// threads: the checker looks for one after the write, before
// anything that may read the slot in the async proxy or hand it over (a
// wgmma, a TMA copy, a commit or release, a call), in the write's block and
// the blocks around it. Writes before the pipeline's init: rule 10
// (protocol-slot-initialisation.mlir). Found by a red-team pass (session 35):
// both wrong programs below were accepted.

// WRONG: the producer warpgroup fills each slot with plain stores and
// commits without a fence; the consumer reads the slot with a wgmma, which
// may see the slot's previous bytes.
!p1 = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 128, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @generic_fill(%n: index, %q: !q, %src: memref<?x128x64xbf16>) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %p = kvpipe.create : !p1
    kvpipe.init %p : !p1
    %wg = kvpipe.warpgroup_id : index
    %producer = arith.cmpi eq, %wg, %c0 : index
    scf.if %producer {
      %tid = gpu.thread_id x
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p1) {
        kvpipe.producer_acquire %s : !p1
        %slot = kvpipe.index %s : !p1
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
        %v = vector.load %src[%i, %tid, %c0] : memref<?x128x64xbf16>, vector<64xbf16>
        // expected-warning @+1 {{'vector.store' op cannot prove that the tensor cores and TMA see what this op writes into the ring slot: no fence.proxy.async for shared memory follows it before the slot is read by a wgmma, copied, or handed over}}
        vector.store %v, %tile[%tid, %c0] : !half, vector<64xbf16>
        kvpipe.producer_commit %s : !p1
        %t = kvpipe.step %s : !p1
        scf.yield %t : !p1
      }
    } else {
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
}

// -----

// Corrected: fence.proxy.async.shared::cta after the stores, before the
// commit.
!p1 = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 128, consumers = 1>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @generic_fill(%n: index, %q: !q, %src: memref<?x128x64xbf16>) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %p = kvpipe.create : !p1
    kvpipe.init %p : !p1
    %wg = kvpipe.warpgroup_id : index
    %producer = arith.cmpi eq, %wg, %c0 : index
    scf.if %producer {
      %tid = gpu.thread_id x
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p1) {
        kvpipe.producer_acquire %s : !p1
        %slot = kvpipe.index %s : !p1
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
        %v = vector.load %src[%i, %tid, %c0] : memref<?x128x64xbf16>, vector<64xbf16>
        vector.store %v, %tile[%tid, %c0] : !half, vector<64xbf16>
        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
        kvpipe.producer_commit %s : !p1
        %t = kvpipe.step %s : !p1
        scf.yield %t : !p1
      }
    } else {
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
}

// -----

// WRONG: the consumer rescales its rows of the K slot in place (plain
// stores), meets a named barrier with the other writers, and reads the slot
// with a wgmma: without a fence the tensor cores may read the unscaled rows.
!p1 = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
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
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %myrow = arith.subi %tid, %c128 : index
      %scale = arith.constant dense<0.5> : vector<64xbf16>
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p1, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p1
        %slot = kvpipe.index %s : !p1
        %rows = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
        %v = vector.load %rows[%myrow, %c0] : !half, vector<64xbf16>
        %w = arith.mulf %v, %scale : vector<64xbf16>
        // expected-warning @+1 {{'vector.store' op cannot prove that the tensor cores and TMA see what this op writes into the ring slot: no fence.proxy.async for shared memory follows it before the slot is read by a wgmma, copied, or handed over}}
        vector.store %w, %rows[%myrow, %c0] : !half, vector<64xbf16>
        %bid = arith.constant 1 : i32
        %bcount = arith.constant 128 : i32
        nvvm.barrier id = %bid number_of_threads = %bcount
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
        %t = kvpipe.consumer_release %s, %first : !p1
        scf.yield %t, %done : !p1, vector<64xf32>
      }
    }
    gpu.return
  }
}

// -----

// A producer warpgroup that fills each slot with plain stores and commits
// without a fence.proxy.async, for a consumer that copies the slot out with
// a TMA store (async proxy): the bulk copy may read the slot's old bytes
// (session 36's red-team pass; the rule covered only slots a wgmma reads).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 128, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %omap: !map, %n: index, %q: !q, %src: memref<?x128x64xbf16>) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.warp_roles producer registers(24) {

      %tid = gpu.thread_id x
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
        %v = vector.load %src[%i, %tid, %c0] : memref<?x128x64xbf16>, vector<64xbf16>
        // expected-warning @below {{'vector.store' op cannot prove that the tensor cores and TMA see what this op writes into the ring slot: no fence.proxy.async for shared memory follows it before the slot is read by a wgmma, copied, or handed over (the async proxy reads or refills this pipeline's slots)}}
        vector.store %v, %tile[%tid, %c0] : !half, vector<64xbf16>

        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      scf.if %first {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
          kvpipe.consumer_wait %s : !p
          %slot = kvpipe.index %s : !p
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_store %tile, %omap[%c0, %i, %c0] : !half, !map
          nvvm.cp.async.bulk.commit.group
          nvvm.cp.async.bulk.wait_group 0 {read}
          %t = kvpipe.consumer_release %s, %true : !p
          scf.yield %t : !p
        }
      }
    }
    gpu.return
  }
}

// -----

// The same with a fence.proxy.async after the stores. Nothing to report.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 128, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %omap: !map, %n: index, %q: !q, %src: memref<?x128x64xbf16>) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.warp_roles producer registers(24) {

      %tid = gpu.thread_id x
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.producer_acquire %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
        %v = vector.load %src[%i, %tid, %c0] : memref<?x128x64xbf16>, vector<64xbf16>
        vector.store %v, %tile[%tid, %c0] : !half, vector<64xbf16>
        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
        kvpipe.producer_commit %s : !p
        %t = kvpipe.step %s : !p
        scf.yield %t : !p
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      scf.if %first {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
          kvpipe.consumer_wait %s : !p
          %slot = kvpipe.index %s : !p
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_store %tile, %omap[%c0, %i, %c0] : !half, !map
          nvvm.cp.async.bulk.commit.group
          nvvm.cp.async.bulk.wait_group 0 {read}
          %t = kvpipe.consumer_release %s, %true : !p
          scf.yield %t : !p
        }
      }
    }
    gpu.return
  }
}

// -----

// A consumer warpgroup that rewrites its slot in place with plain stores
// and releases it without a fence.proxy.async; the producer refills the
// slot by TMA (async proxy), which is not ordered after the generic writes.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q, %dst: memref<?x128x64xbf16>) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
          kvpipe.producer_acquire %s : !p
          %slot = kvpipe.index %s : !p
          %b = kvpipe.producer_mbar %s : !p
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c0, %c0, %c0], %tile, %b : !map, !half
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %ct = arith.subi %tid, %c128 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
        %v = vector.load %tile[%ct, %c0] : !half, vector<64xbf16>
        %w = arith.addf %v, %v : vector<64xbf16>
        // expected-warning @below {{'vector.store' op cannot prove that the tensor cores and TMA see what this op writes into the ring slot: no fence.proxy.async for shared memory follows it before the slot is read by a wgmma, copied, or handed over (the async proxy reads or refills this pipeline's slots)}}
        vector.store %w, %tile[%ct, %c0] : !half, vector<64xbf16>
        vector.store %w, %dst[%i, %ct, %c0] : memref<?x128x64xbf16>, vector<64xbf16>

        %c1i = arith.constant 1 : i32
        %c128i = arith.constant 128 : i32
        nvvm.barrier id = %c1i number_of_threads = %c128i
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}

// -----

// The same with a fence.proxy.async after the in-place writes. Nothing
// to report.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q, %dst: memref<?x128x64xbf16>) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
          kvpipe.producer_acquire %s : !p
          %slot = kvpipe.index %s : !p
          %b = kvpipe.producer_mbar %s : !p
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c0, %c0, %c0], %tile, %b : !map, !half
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %ct = arith.subi %tid, %c128 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
        %v = vector.load %tile[%ct, %c0] : !half, vector<64xbf16>
        %w = arith.addf %v, %v : vector<64xbf16>
        vector.store %w, %tile[%ct, %c0] : !half, vector<64xbf16>
        vector.store %w, %dst[%i, %ct, %c0] : memref<?x128x64xbf16>, vector<64xbf16>
        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
        %c1i = arith.constant 1 : i32
        %c128i = arith.constant 128 : i32
        nvvm.barrier id = %c1i number_of_threads = %c128i
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}
