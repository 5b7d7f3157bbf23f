// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 12 of --kvpipe-verify-protocol, rings apart: the rings TMA loads (and
// bulk copies, cp.async) fill through a pipeline's slots share no bytes with
// another ring. Two pipelines whose kvpipe.index select slots of one buffer,
// or two rings whose byte ranges overlap, overwrite each other's slots: an
// error; ranges the checker cannot show apart are unproven. Each wrong
// program is next to its corrected form (the fifth audit's two first).

// Two pipelines' rings in one buffer: K's and V's TMAs write the same bytes.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %pa = kvpipe.create : !p
    kvpipe.init %pa : !p
    %pb = kvpipe.create : !p
    kvpipe.init %pb : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %ra, %rb = scf.for %i = %c0 to %n step %c1 iter_args(%s = %pa, %u = %pb) -> (!p, !p) {
          %row = arith.muli %i, %c128 : index
          kvpipe.producer_acquire %s : !p
          %slot = kvpipe.index %s : !p
          %b = kvpipe.producer_mbar %s : !p
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          // expected-error-re @below {{'kvpipe.tma_load' op fills a ring that shares bytes with the ring of another pipeline: both pipelines' kvpipe.index select slots of the same buffer, so one pipeline's copies overwrite slots the other's consumers may still read (pipeline created at {{.*}})}}
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !half
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          kvpipe.producer_acquire %u : !p
          %slot2 = kvpipe.index %u : !p
          %b2 = kvpipe.producer_mbar %u : !p
          // expected-note-re @below {{the other ring, whose slot a kvpipe.index selects here (pipeline created at {{.*}})}}
          %tile2 = memref.subview %k[%slot2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c1, %row, %c0], %tile2, %b2 : !map, !half
          kvpipe.producer_commit %u : !p
          %v = kvpipe.step %u : !p
          scf.yield %t, %v : !p, !p
        }
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r:3 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %pa, %u = %pb, %o = %o0) -> (!p, !p, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
        %t = kvpipe.consumer_release %s, %first : !p
        kvpipe.consumer_wait %u : !p
        %slot2 = kvpipe.index %u : !p
        %tile2 = memref.subview %k[%slot2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc2 = kvpipe.warpgroup_mma %q, %tile2, %done : !q, !kt -> vector<64xf32>
        %done2 = kvpipe.warpgroup_wait %acc2 {pending = 0} : vector<64xf32>
        %v = kvpipe.consumer_release %u, %first : !p
        scf.yield %t, %v, %done2 : !p, !p, vector<64xf32>
      }
    }
    gpu.return
  }
}

// -----

// Corrected: each pipeline's ring is its own buffer.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q) workgroup(%k: !ring, %vbuf: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %pa = kvpipe.create : !p
    kvpipe.init %pa : !p
    %pb = kvpipe.create : !p
    kvpipe.init %pb : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %ra, %rb = scf.for %i = %c0 to %n step %c1 iter_args(%s = %pa, %u = %pb) -> (!p, !p) {
          %row = arith.muli %i, %c128 : index
          kvpipe.producer_acquire %s : !p
          %slot = kvpipe.index %s : !p
          %b = kvpipe.producer_mbar %s : !p
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !half
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          kvpipe.producer_acquire %u : !p
          %slot2 = kvpipe.index %u : !p
          %b2 = kvpipe.producer_mbar %u : !p
          %tile2 = memref.subview %vbuf[%slot2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c1, %row, %c0], %tile2, %b2 : !map, !half
          kvpipe.producer_commit %u : !p
          %v = kvpipe.step %u : !p
          scf.yield %t, %v : !p, !p
        }
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r:3 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %pa, %u = %pb, %o = %o0) -> (!p, !p, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
        %t = kvpipe.consumer_release %s, %first : !p
        kvpipe.consumer_wait %u : !p
        %slot2 = kvpipe.index %u : !p
        %tile2 = memref.subview %vbuf[%slot2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc2 = kvpipe.warpgroup_mma %q, %tile2, %done : !q, !kt -> vector<64xf32>
        %done2 = kvpipe.warpgroup_wait %acc2 {pending = 0} : vector<64xf32>
        %v = kvpipe.consumer_release %u, %first : !p
        scf.yield %t, %v, %done2 : !p, !p, vector<64xf32>
      }
    }
    gpu.return
  }
}

// -----

// One pipeline, two rings from views of dynamic shared memory 16 KiB apart
// (a slot's size): V's slot 0 is K's slot 1.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c16384 = arith.constant 16384 : index
    %smem = gpu.dynamic_shared_memory : memref<?xi8, #smem>
    %kr = memref.view %smem[%c0][] : memref<?xi8, #smem> to !ring
    %vr = memref.view %smem[%c16384][] : memref<?xi8, #smem> to !ring
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
          %row = arith.muli %i, %c128 : index
          kvpipe.producer_acquire %s : !p
          %slot = kvpipe.index %s : !p
          %b = kvpipe.producer_mbar %s : !p
          %kt = memref.subview %kr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          // expected-error-re @below {{'kvpipe.tma_load' op fills a ring that shares bytes with another ring of its pipeline: its bytes [0, 32768) and the other ring's [16384, 49152) overlap (relative to this ring's start), so a copy into one ring overwrites a slot of the other that a consumer may still read (pipeline created at {{.*}})}}
          kvpipe.tma_load %map[%c0, %row, %c0], %kt, %b : !map, !half
          // expected-note-re @below {{the other ring, whose slot a kvpipe.index selects here (pipeline created at {{.*}})}}
          %vt = memref.subview %vr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c1, %row, %c0], %vt, %b : !map, !half
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
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %kt = memref.subview %kr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %vt = memref.subview %vr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %a = kvpipe.warpgroup_mma %q, %kt, %o : !q, !kt -> vector<64xf32>
        %b = kvpipe.warpgroup_mma %q, %vt, %a : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %b {pending = 0} : vector<64xf32>
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t, %done : !p, vector<64xf32>
      }
    }
    gpu.return
  }
}

// -----

// Corrected: V's ring starts where K's ends (32 KiB, two slots).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c32768 = arith.constant 32768 : index
    %smem = gpu.dynamic_shared_memory : memref<?xi8, #smem>
    %kr = memref.view %smem[%c0][] : memref<?xi8, #smem> to !ring
    %vr = memref.view %smem[%c32768][] : memref<?xi8, #smem> to !ring
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
          %row = arith.muli %i, %c128 : index
          kvpipe.producer_acquire %s : !p
          %slot = kvpipe.index %s : !p
          %b = kvpipe.producer_mbar %s : !p
          %kt = memref.subview %kr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c0, %row, %c0], %kt, %b : !map, !half
          %vt = memref.subview %vr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c1, %row, %c0], %vt, %b : !map, !half
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
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %kt = memref.subview %kr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %vt = memref.subview %vr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %a = kvpipe.warpgroup_mma %q, %kt, %o : !q, !kt -> vector<64xf32>
        %b = kvpipe.warpgroup_mma %q, %vt, %a : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %b {pending = 0} : vector<64xf32>
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t, %done : !p, vector<64xf32>
      }
    }
    gpu.return
  }
}

// -----

// Both rings past a runtime offset (a Q tile before them), V's one slot (16
// KiB) after K's instead of two: the distance is known, the overlap too.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q, %base: index) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c32768 = arith.constant 32768 : index
    %smem = gpu.dynamic_shared_memory : memref<?xi8, #smem>
    %c16384 = arith.constant 16384 : index
    %vbase = arith.addi %base, %c16384 : index
    %kr = memref.view %smem[%base][] : memref<?xi8, #smem> to !ring
    %vr = memref.view %smem[%vbase][] : memref<?xi8, #smem> to !ring
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
          %row = arith.muli %i, %c128 : index
          kvpipe.producer_acquire %s : !p
          %slot = kvpipe.index %s : !p
          %b = kvpipe.producer_mbar %s : !p
          %kt = memref.subview %kr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          // expected-error @below {{fills a ring that shares bytes with another ring of its pipeline: its bytes [0, 32768) and the other ring's [16384, 49152) overlap}}
          kvpipe.tma_load %map[%c0, %row, %c0], %kt, %b : !map, !half
          // expected-note @below {{the other ring}}
          %vt = memref.subview %vr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c1, %row, %c0], %vt, %b : !map, !half
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
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %kt = memref.subview %kr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %vt = memref.subview %vr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %a = kvpipe.warpgroup_mma %q, %kt, %o : !q, !kt -> vector<64xf32>
        %b = kvpipe.warpgroup_mma %q, %vt, %a : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %b {pending = 0} : vector<64xf32>
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t, %done : !p, vector<64xf32>
      }
    }
    gpu.return
  }
}

// -----

// V's ring at an offset passed in, unrelated to K's: the checker cannot
// show the rings apart.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q, %voff: index) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c32768 = arith.constant 32768 : index
    %smem = gpu.dynamic_shared_memory : memref<?xi8, #smem>
    %kr = memref.view %smem[%c0][] : memref<?xi8, #smem> to !ring
    %vr = memref.view %smem[%voff][] : memref<?xi8, #smem> to !ring
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
          %row = arith.muli %i, %c128 : index
          kvpipe.producer_acquire %s : !p
          %slot = kvpipe.index %s : !p
          %b = kvpipe.producer_mbar %s : !p
          %kt = memref.subview %kr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          // expected-warning-re @below {{'kvpipe.tma_load' op cannot prove that the ring this op fills is apart from the other rings in its buffer: the other ring starts at {{.*}} and this one at 0 in the buffer, which the checker cannot show far enough apart (pipeline created at {{.*}})}}
          kvpipe.tma_load %map[%c0, %row, %c0], %kt, %b : !map, !half
          // expected-note @below {{the other ring}}
          %vt = memref.subview %vr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c1, %row, %c0], %vt, %b : !map, !half
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
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %kt = memref.subview %kr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %vt = memref.subview %vr[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %a = kvpipe.warpgroup_mma %q, %kt, %o : !q, !kt -> vector<64xf32>
        %b = kvpipe.warpgroup_mma %q, %vt, %a : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %b {pending = 0} : vector<64xf32>
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t, %done : !p, vector<64xf32>
      }
    }
    gpu.return
  }
}

// -----

// The seventh audit: K's and V's pipelines, created by the kernel, fill one
// ring in a helper that receives both; every call passes two different
// creates, so the helper's two pipelines are two (slot i of one is slot i
// of the other: V's copy overwrites the K tile a consumer still reads).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  func.func private @body(%pa: !p, %pb: !p, %map: !map, %n: index, %q: !q, %k: !ring) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %ra, %rb = scf.for %i = %c0 to %n step %c1 iter_args(%s = %pa, %u = %pb) -> (!p, !p) {
          %row = arith.muli %i, %c128 : index
          kvpipe.producer_acquire %s : !p
          %slot = kvpipe.index %s : !p
          %b = kvpipe.producer_mbar %s : !p
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          // expected-error @+1 {{fills a ring that shares bytes with the ring of another pipeline}}
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !half
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          kvpipe.producer_acquire %u : !p
          %slot2 = kvpipe.index %u : !p
          %b2 = kvpipe.producer_mbar %u : !p
          // expected-note @+1 {{the other ring, whose slot a kvpipe.index selects here}}
          %tile2 = memref.subview %k[%slot2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c1, %row, %c0], %tile2, %b2 : !map, !half
          kvpipe.producer_commit %u : !p
          %v = kvpipe.step %u : !p
          scf.yield %t, %v : !p, !p
        }
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r:3 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %pa, %u = %pb, %o = %o0) -> (!p, !p, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
        %t = kvpipe.consumer_release %s, %first : !p
        kvpipe.consumer_wait %u : !p
        %slot2 = kvpipe.index %u : !p
        %tile2 = memref.subview %k[%slot2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc2 = kvpipe.warpgroup_mma %q, %tile2, %done : !q, !kt -> vector<64xf32>
        %done2 = kvpipe.warpgroup_wait %acc2 {pending = 0} : vector<64xf32>
        %v = kvpipe.consumer_release %u, %first : !p
        scf.yield %t, %v, %done2 : !p, !p, vector<64xf32>
      }
    }
    return
  }
  gpu.func @k(%map: !map, %n: index, %q: !q) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %pa = kvpipe.create : !p
    kvpipe.init %pa : !p
    %pb = kvpipe.create : !p
    kvpipe.init %pb : !p
    func.call @body(%pa, %pb, %map, %n, %q, %k) : (!p, !p, !map, index, !q, !ring) -> ()
    gpu.return
  }
}

// -----

// Corrected: each pipeline's ring its own buffer.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  func.func private @body(%pa: !p, %pb: !p, %map: !map, %n: index, %q: !q, %k: !ring, %v: !ring) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    kvpipe.warp_roles producer registers(24) {
      %tid = gpu.thread_id x
      %elected = arith.cmpi eq, %tid, %c0 : index
      scf.if %elected {
        %ra, %rb = scf.for %i = %c0 to %n step %c1 iter_args(%s = %pa, %u = %pb) -> (!p, !p) {
          %row = arith.muli %i, %c128 : index
          kvpipe.producer_acquire %s : !p
          %slot = kvpipe.index %s : !p
          %b = kvpipe.producer_mbar %s : !p
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !half
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          kvpipe.producer_acquire %u : !p
          %slot2 = kvpipe.index %u : !p
          %b2 = kvpipe.producer_mbar %u : !p
          %tile2 = memref.subview %v[%slot2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !half
          kvpipe.tma_load %map[%c1, %row, %c0], %tile2, %b2 : !map, !half
          kvpipe.producer_commit %u : !p
          %vs = kvpipe.step %u : !p
          scf.yield %t, %vs : !p, !p
        }
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r:3 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %pa, %u = %pb, %o = %o0) -> (!p, !p, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
        %t = kvpipe.consumer_release %s, %first : !p
        kvpipe.consumer_wait %u : !p
        %slot2 = kvpipe.index %u : !p
        %tile2 = memref.subview %v[%slot2, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc2 = kvpipe.warpgroup_mma %q, %tile2, %done : !q, !kt -> vector<64xf32>
        %done2 = kvpipe.warpgroup_wait %acc2 {pending = 0} : vector<64xf32>
        %vs = kvpipe.consumer_release %u, %first : !p
        scf.yield %t, %vs, %done2 : !p, !p, vector<64xf32>
      }
    }
    return
  }
  gpu.func @k(%map: !map, %n: index, %q: !q) workgroup(%k: !ring, %v: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %pa = kvpipe.create : !p
    kvpipe.init %pa : !p
    %pb = kvpipe.create : !p
    kvpipe.init %pb : !p
    func.call @body(%pa, %pb, %map, %n, %q, %k, %v) : (!p, !p, !map, index, !q, !ring, !ring) -> ()
    gpu.return
  }
}
