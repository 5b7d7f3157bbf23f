// Ring copy through a kvpipe pipeline (issue 3, GPU execution test a).
//
// What the kernels compute: a 2-D tensor X[R][C] (R = 64*TR, C = 64*TC) is cut
// into 64x64 tiles, numbered row-major (tile t is rows 64*(t/TC).., columns
// 64*(t%TC)..). CTA b streams tiles [b*T, (b+1)*T) through a ring of shared-
// memory slots guarded by a kvpipe pipeline: thread 0 of warpgroup 0 is the
// producer (producer_acquire, TMA loads completing on producer_mbar,
// producer_commit with the transaction bytes the compiler derives, step);
// warpgroup 1 (128 threads) consumes (consumer_wait, copy the slot back to
// OUT with plain global stores, undoing the TMA swizzle, consumer_release).
// T is larger than the ring, so the ring wraps and the phases flip many times.
// Block: 256 threads (the producer warpgroup and one consumer warpgroup).
//
//   ring_kv3_f16_sw0     kv_stages = 3, qk_stages = 1, consumers = 128 (every
//                        consumer thread arrives), f16, no swizzle, box 64x64
//   ring_kv2_bf16_sw128  kv_stages = 2, consumers = 128, bf16, 128B swizzle
//   ring_kv4_f16_sw64    kv_stages = 4, consumers = 4 (lane 0 of each consumer
//                        warp arrives after bar.warp.sync), f16, 64B swizzle:
//                        a 64x64 tile is two 64x32 boxes (two TMA loads on
//                        one barrier, 2 x 4096 expected bytes)
//   ring_kv2_qk2_bf16_sw128  kv_stages = 2, qk_stages = 2: each 64x64 slot is
//                        two 32x64 sub-stages, each with its own acquire /
//                        load / commit / wait / release (`stage 0|1`)
//
// How it is checked: runners/ring.py fills X with random finite 16-bit
// patterns, poisons OUT with 0xFF bytes, launches grids of 1 to 132 CTAs with
// T from 1 to 300 tiles per CTA (12 sizes per kernel), and compares OUT with
// X bit for bit, which also proves that every element was written.
//
// Kernel ABI (all four): (out: memref<?xT> = 5 params: ptr, ptr, offset,
// size, stride; map: 128-byte grid-constant tensor map over X; tiles per CTA
// T: i64; tile columns TC: i64; C: i64), grid (G), block (256).

// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o %t.mlir
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}
// RUN: %python %S/runners/ring.py --dry-run | FileCheck %s --check-prefix=PLAN
// RUN: %if gpu %{ %python %S/runners/ring.py %t.ptx | FileCheck %s %}

// PLAN: DRY-RUN OK ring (48 cases)

// CHECK-COUNT-12: PASS ring_kv3_f16_sw0/
// CHECK-COUNT-12: PASS ring_kv2_bf16_sw128/
// CHECK-COUNT-12: PASS ring_kv4_f16_sw64/
// CHECK-COUNT-12: PASS ring_kv2_qk2_bf16_sw128/
// CHECK: ALL PASS ring (48 cases)

#wg = #gpu.address_space<workgroup>

!p_kv3 = !kvpipe.pipeline<kv_stages = 3, qk_stages = 1, producers = 1, consumers = 128>
!p_kv2 = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 128>
!p_kv4 = !kvpipe.pipeline<kv_stages = 4, qk_stages = 1, producers = 1, consumers = 4>
!p_qk2 = !kvpipe.pipeline<kv_stages = 2, qk_stages = 2, producers = 1, consumers = 128>

!map_f16_sw0 = !kvpipe.tensor_map<box = [64, 64], element_type = f16, swizzle = 0>
!map_bf16_sw128 = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
!map_f16_sw64 = !kvpipe.tensor_map<box = [64, 32], element_type = f16, swizzle = 64>
!map_bf16_sw128_h = !kvpipe.tensor_map<box = [32, 64], element_type = bf16, swizzle = 128>

!slot_f16 = memref<64x64xf16, strided<[64, 1], offset: ?>, #wg>
!slot_bf16 = memref<64x64xbf16, strided<[64, 1], offset: ?>, #wg>
!blk_f16_sw64 = memref<64x32xf16, strided<[32, 1], offset: ?>, #wg>
!half_bf16 = memref<32x64xbf16, strided<[64, 1], offset: ?>, #wg>

module attributes {gpu.container_module} {
gpu.module @ring {

  //===--------------------------------------------------------------------===//
  // kv_stages = 3, f16, no swizzle, every consumer thread arrives.
  //===--------------------------------------------------------------------===//
  gpu.func @ring_kv3_f16_sw0(%out: memref<?xf16>, %map: !map_f16_sw0,
                             %ntiles: index, %tcols: index, %cols: index)
      workgroup(%buf : memref<3x64x64xf16, #wg> {llvm.align = 1024 : i64})
      kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %p = kvpipe.create : !p_kv3
    kvpipe.init %p : !p_kv3
    %wg = kvpipe.warpgroup_id : index
    %tid = gpu.thread_id x
    %bid = gpu.block_id x
    %first = arith.muli %bid, %ntiles : index
    %is_prod = arith.cmpi eq, %wg, %c0 : index
    %is_cons = arith.cmpi eq, %wg, %c1 : index
    scf.if %is_prod {
      %t0 = arith.cmpi eq, %tid, %c0 : index
      scf.if %t0 {
        kvpipe.tma_prefetch_descriptor %map : !map_f16_sw0
        %end = scf.for %i = %c0 to %ntiles step %c1 iter_args(%s = %p) -> (!p_kv3) {
          %t = arith.addi %first, %i : index
          %tr = arith.divui %t, %tcols : index
          %tc = arith.remui %t, %tcols : index
          %row = arith.muli %tr, %c64 : index
          %col = arith.muli %tc, %c64 : index
          kvpipe.producer_acquire %s : !p_kv3
          %bar = kvpipe.producer_mbar %s : !p_kv3
          %slot = kvpipe.index %s : !p_kv3
          %dst = memref.subview %buf[%slot, 0, 0] [1, 64, 64] [1, 1, 1]
              : memref<3x64x64xf16, #wg> to !slot_f16
          kvpipe.tma_load %map[%row, %col], %dst, %bar : !map_f16_sw0, !slot_f16
          kvpipe.producer_commit %s : !p_kv3
          %next = kvpipe.step %s : !p_kv3
          scf.yield %next : !p_kv3
        }
      }
    } else {
      scf.if %is_cons {
        %ct = arith.subi %tid, %c128 : index
        %end = scf.for %i = %c0 to %ntiles step %c1 iter_args(%s = %p) -> (!p_kv3) {
          %t = arith.addi %first, %i : index
          %tr = arith.divui %t, %tcols : index
          %tc = arith.remui %t, %tcols : index
          %row = arith.muli %tr, %c64 : index
          %col = arith.muli %tc, %c64 : index
          kvpipe.consumer_wait %s : !p_kv3
          %slot = kvpipe.index %s : !p_kv3
          // 4096 elements, 32 per thread; consecutive threads take
          // consecutive columns.
          scf.for %k = %c0 to %c32 step %c1 {
            %k128 = arith.muli %k, %c128 : index
            %lin = arith.addi %k128, %ct : index
            %r = arith.divui %lin, %c64 : index
            %c = arith.remui %lin, %c64 : index
            %v = memref.load %buf[%slot, %r, %c] : memref<3x64x64xf16, #wg>
            %gr = arith.addi %row, %r : index
            %gc = arith.addi %col, %c : index
            %grc = arith.muli %gr, %cols : index
            %gi = arith.addi %grc, %gc : index
            memref.store %v, %out[%gi] : memref<?xf16>
          }
          %next = kvpipe.consumer_release %s, %true : !p_kv3
          scf.yield %next : !p_kv3
        }
      }
    }
    gpu.return
  }

  //===--------------------------------------------------------------------===//
  // kv_stages = 2, bf16, 128B swizzle: logical (r, c) of a slot lies at
  // column ((c / 8) ^ (r % 8)) * 8 + c % 8 of row r.
  //===--------------------------------------------------------------------===//
  gpu.func @ring_kv2_bf16_sw128(%out: memref<?xbf16>, %map: !map_bf16_sw128,
                                %ntiles: index, %tcols: index, %cols: index)
      workgroup(%buf : memref<2x64x64xbf16, #wg> {llvm.align = 1024 : i64})
      kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c32 = arith.constant 32 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %p = kvpipe.create : !p_kv2
    kvpipe.init %p : !p_kv2
    %wg = kvpipe.warpgroup_id : index
    %tid = gpu.thread_id x
    %bid = gpu.block_id x
    %first = arith.muli %bid, %ntiles : index
    %is_prod = arith.cmpi eq, %wg, %c0 : index
    %is_cons = arith.cmpi eq, %wg, %c1 : index
    scf.if %is_prod {
      %t0 = arith.cmpi eq, %tid, %c0 : index
      scf.if %t0 {
        kvpipe.tma_prefetch_descriptor %map : !map_bf16_sw128
        %end = scf.for %i = %c0 to %ntiles step %c1 iter_args(%s = %p) -> (!p_kv2) {
          %t = arith.addi %first, %i : index
          %tr = arith.divui %t, %tcols : index
          %tc = arith.remui %t, %tcols : index
          %row = arith.muli %tr, %c64 : index
          %col = arith.muli %tc, %c64 : index
          kvpipe.producer_acquire %s : !p_kv2
          %bar = kvpipe.producer_mbar %s : !p_kv2
          %slot = kvpipe.index %s : !p_kv2
          %dst = memref.subview %buf[%slot, 0, 0] [1, 64, 64] [1, 1, 1]
              : memref<2x64x64xbf16, #wg> to !slot_bf16
          kvpipe.tma_load %map[%row, %col], %dst, %bar : !map_bf16_sw128, !slot_bf16
          kvpipe.producer_commit %s : !p_kv2
          %next = kvpipe.step %s : !p_kv2
          scf.yield %next : !p_kv2
        }
      }
    } else {
      scf.if %is_cons {
        %ct = arith.subi %tid, %c128 : index
        %end = scf.for %i = %c0 to %ntiles step %c1 iter_args(%s = %p) -> (!p_kv2) {
          %t = arith.addi %first, %i : index
          %tr = arith.divui %t, %tcols : index
          %tc = arith.remui %t, %tcols : index
          %row = arith.muli %tr, %c64 : index
          %col = arith.muli %tc, %c64 : index
          kvpipe.consumer_wait %s : !p_kv2
          %slot = kvpipe.index %s : !p_kv2
          scf.for %k = %c0 to %c32 step %c1 {
            %k128 = arith.muli %k, %c128 : index
            %lin = arith.addi %k128, %ct : index
            %r = arith.divui %lin, %c64 : index
            %c = arith.remui %lin, %c64 : index
            %r8 = arith.remui %r, %c8 : index
            %chunk = arith.divui %c, %c8 : index
            %within = arith.remui %c, %c8 : index
            %pchunk = arith.xori %chunk, %r8 : index
            %pc0 = arith.muli %pchunk, %c8 : index
            %pc = arith.addi %pc0, %within : index
            %v = memref.load %buf[%slot, %r, %pc] : memref<2x64x64xbf16, #wg>
            %gr = arith.addi %row, %r : index
            %gc = arith.addi %col, %c : index
            %grc = arith.muli %gr, %cols : index
            %gi = arith.addi %grc, %gc : index
            memref.store %v, %out[%gi] : memref<?xbf16>
          }
          %next = kvpipe.consumer_release %s, %true : !p_kv2
          scf.yield %next : !p_kv2
        }
      }
    }
    gpu.return
  }

  //===--------------------------------------------------------------------===//
  // kv_stages = 4, f16, 64B swizzle, one arrival per consumer warp. A slot is
  // [2 blocks][64 rows][32 columns]; logical (r, c) lies in block c / 32 at
  // column ((cc / 8) ^ ((r / 2) % 4)) * 8 + cc % 8 (cc = c % 32) of row r.
  //===--------------------------------------------------------------------===//
  gpu.func @ring_kv4_f16_sw64(%out: memref<?xf16>, %map: !map_f16_sw64,
                              %ntiles: index, %tcols: index, %cols: index)
      workgroup(%buf : memref<4x2x64x32xf16, #wg> {llvm.align = 1024 : i64})
      kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c32 = arith.constant 32 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %all_lanes = arith.constant -1 : i32
    %p = kvpipe.create : !p_kv4
    kvpipe.init %p : !p_kv4
    %wg = kvpipe.warpgroup_id : index
    %tid = gpu.thread_id x
    %bid = gpu.block_id x
    %first = arith.muli %bid, %ntiles : index
    %is_prod = arith.cmpi eq, %wg, %c0 : index
    %is_cons = arith.cmpi eq, %wg, %c1 : index
    scf.if %is_prod {
      %t0 = arith.cmpi eq, %tid, %c0 : index
      scf.if %t0 {
        kvpipe.tma_prefetch_descriptor %map : !map_f16_sw64
        %end = scf.for %i = %c0 to %ntiles step %c1 iter_args(%s = %p) -> (!p_kv4) {
          %t = arith.addi %first, %i : index
          %tr = arith.divui %t, %tcols : index
          %tc = arith.remui %t, %tcols : index
          %row = arith.muli %tr, %c64 : index
          %col = arith.muli %tc, %c64 : index
          kvpipe.producer_acquire %s : !p_kv4
          %bar = kvpipe.producer_mbar %s : !p_kv4
          %slot = kvpipe.index %s : !p_kv4
          // Two 64x32 boxes on the same barrier: the commit expects both.
          scf.for %j = %c0 to %c2 step %c1 {
            %dst = memref.subview %buf[%slot, %j, 0, 0] [1, 1, 64, 32] [1, 1, 1, 1]
                : memref<4x2x64x32xf16, #wg> to !blk_f16_sw64
            %j32 = arith.muli %j, %c32 : index
            %bcol = arith.addi %col, %j32 : index
            kvpipe.tma_load %map[%row, %bcol], %dst, %bar : !map_f16_sw64, !blk_f16_sw64
          }
          kvpipe.producer_commit %s : !p_kv4
          %next = kvpipe.step %s : !p_kv4
          scf.yield %next : !p_kv4
        }
      }
    } else {
      scf.if %is_cons {
        %ct = arith.subi %tid, %c128 : index
        %lane = arith.remui %ct, %c32 : index
        %elected = arith.cmpi eq, %lane, %c0 : index
        %end = scf.for %i = %c0 to %ntiles step %c1 iter_args(%s = %p) -> (!p_kv4) {
          %t = arith.addi %first, %i : index
          %tr = arith.divui %t, %tcols : index
          %tc = arith.remui %t, %tcols : index
          %row = arith.muli %tr, %c64 : index
          %col = arith.muli %tc, %c64 : index
          kvpipe.consumer_wait %s : !p_kv4
          %slot = kvpipe.index %s : !p_kv4
          scf.for %k = %c0 to %c32 step %c1 {
            %k128 = arith.muli %k, %c128 : index
            %lin = arith.addi %k128, %ct : index
            %r = arith.divui %lin, %c64 : index
            %c = arith.remui %lin, %c64 : index
            %blk = arith.divui %c, %c32 : index
            %cc = arith.remui %c, %c32 : index
            %r2 = arith.divui %r, %c2 : index
            %rx = arith.remui %r2, %c4 : index
            %chunk = arith.divui %cc, %c8 : index
            %within = arith.remui %cc, %c8 : index
            %pchunk = arith.xori %chunk, %rx : index
            %pc0 = arith.muli %pchunk, %c8 : index
            %pc = arith.addi %pc0, %within : index
            %v = memref.load %buf[%slot, %blk, %r, %pc] : memref<4x2x64x32xf16, #wg>
            %gr = arith.addi %row, %r : index
            %gc = arith.addi %col, %c : index
            %grc = arith.muli %gr, %cols : index
            %gi = arith.addi %grc, %gc : index
            memref.store %v, %out[%gi] : memref<?xf16>
          }
          // The warp's reads are ordered before lane 0's arrival.
          nvvm.bar.warp.sync %all_lanes : i32
          %next = kvpipe.consumer_release %s, %elected : !p_kv4
          scf.yield %next : !p_kv4
        }
      }
    }
    gpu.return
  }

  //===--------------------------------------------------------------------===//
  // kv_stages = 2, qk_stages = 2, bf16, 128B swizzle: sub-stage q of a slot
  // is rows [32q, 32q + 32), loaded by its own 32x64 box.
  //===--------------------------------------------------------------------===//
  gpu.func @ring_kv2_qk2_bf16_sw128(%out: memref<?xbf16>, %map: !map_bf16_sw128_h,
                                    %ntiles: index, %tcols: index, %cols: index)
      workgroup(%buf : memref<2x64x64xbf16, #wg> {llvm.align = 1024 : i64})
      kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %true = arith.constant true
    %p = kvpipe.create : !p_qk2
    kvpipe.init %p : !p_qk2
    %wg = kvpipe.warpgroup_id : index
    %tid = gpu.thread_id x
    %bid = gpu.block_id x
    %first = arith.muli %bid, %ntiles : index
    %is_prod = arith.cmpi eq, %wg, %c0 : index
    %is_cons = arith.cmpi eq, %wg, %c1 : index
    scf.if %is_prod {
      %t0 = arith.cmpi eq, %tid, %c0 : index
      scf.if %t0 {
        kvpipe.tma_prefetch_descriptor %map : !map_bf16_sw128_h
        %end = scf.for %i = %c0 to %ntiles step %c1 iter_args(%s = %p) -> (!p_qk2) {
          %t = arith.addi %first, %i : index
          %tr = arith.divui %t, %tcols : index
          %tc = arith.remui %t, %tcols : index
          %row = arith.muli %tr, %c64 : index
          %col = arith.muli %tc, %c64 : index
          %row1 = arith.addi %row, %c32 : index
          %slot = kvpipe.index %s : !p_qk2
          // Sub-stage 0: rows [0, 32) of the slot.
          kvpipe.producer_acquire %s stage 0 : !p_qk2
          %bar0 = kvpipe.producer_mbar %s stage 0 : !p_qk2
          %dst0 = memref.subview %buf[%slot, 0, 0] [1, 32, 64] [1, 1, 1]
              : memref<2x64x64xbf16, #wg> to !half_bf16
          kvpipe.tma_load %map[%row, %col], %dst0, %bar0 : !map_bf16_sw128_h, !half_bf16
          kvpipe.producer_commit %s stage 0 : !p_qk2
          // Sub-stage 1: rows [32, 64).
          kvpipe.producer_acquire %s stage 1 : !p_qk2
          %bar1 = kvpipe.producer_mbar %s stage 1 : !p_qk2
          %dst1 = memref.subview %buf[%slot, 32, 0] [1, 32, 64] [1, 1, 1]
              : memref<2x64x64xbf16, #wg> to !half_bf16
          kvpipe.tma_load %map[%row1, %col], %dst1, %bar1 : !map_bf16_sw128_h, !half_bf16
          kvpipe.producer_commit %s stage 1 : !p_qk2
          %next = kvpipe.step %s : !p_qk2
          scf.yield %next : !p_qk2
        }
      }
    } else {
      scf.if %is_cons {
        %ct = arith.subi %tid, %c128 : index
        %end = scf.for %i = %c0 to %ntiles step %c1 iter_args(%s = %p) -> (!p_qk2) {
          %t = arith.addi %first, %i : index
          %tr = arith.divui %t, %tcols : index
          %tc = arith.remui %t, %tcols : index
          %row = arith.muli %tr, %c64 : index
          %col = arith.muli %tc, %c64 : index
          %slot = kvpipe.index %s : !p_qk2
          // Sub-stage 0, then sub-stage 1 (which advances the state); each
          // half is 2048 elements, 16 per thread.
          kvpipe.consumer_wait %s stage 0 : !p_qk2
          scf.for %k = %c0 to %c16 step %c1 {
            %k128 = arith.muli %k, %c128 : index
            %lin = arith.addi %k128, %ct : index
            %r = arith.divui %lin, %c64 : index
            %c = arith.remui %lin, %c64 : index
            %r8 = arith.remui %r, %c8 : index
            %chunk = arith.divui %c, %c8 : index
            %within = arith.remui %c, %c8 : index
            %pchunk = arith.xori %chunk, %r8 : index
            %pc0 = arith.muli %pchunk, %c8 : index
            %pc = arith.addi %pc0, %within : index
            %v = memref.load %buf[%slot, %r, %pc] : memref<2x64x64xbf16, #wg>
            %gr = arith.addi %row, %r : index
            %gc = arith.addi %col, %c : index
            %grc = arith.muli %gr, %cols : index
            %gi = arith.addi %grc, %gc : index
            memref.store %v, %out[%gi] : memref<?xbf16>
          }
          %s0 = kvpipe.consumer_release %s, %true stage 0 : !p_qk2
          kvpipe.consumer_wait %s0 stage 1 : !p_qk2
          scf.for %k = %c0 to %c16 step %c1 {
            %k128 = arith.muli %k, %c128 : index
            %lin = arith.addi %k128, %ct : index
            %rh = arith.divui %lin, %c64 : index
            %r = arith.addi %rh, %c32 : index
            %c = arith.remui %lin, %c64 : index
            %r8 = arith.remui %r, %c8 : index
            %chunk = arith.divui %c, %c8 : index
            %within = arith.remui %c, %c8 : index
            %pchunk = arith.xori %chunk, %r8 : index
            %pc0 = arith.muli %pchunk, %c8 : index
            %pc = arith.addi %pc0, %within : index
            %v = memref.load %buf[%slot, %r, %pc] : memref<2x64x64xbf16, #wg>
            %gr = arith.addi %row, %r : index
            %gc = arith.addi %col, %c : index
            %grc = arith.muli %gr, %cols : index
            %gi = arith.addi %grc, %gc : index
            memref.store %v, %out[%gi] : memref<?xbf16>
          }
          %next = kvpipe.consumer_release %s0, %true stage 1 : !p_qk2
          scf.yield %next : !p_qk2
        }
      }
    }
    gpu.return
  }
}
}
