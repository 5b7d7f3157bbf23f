// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics --kvpipe-verify-protocol

// Rule 11 of --kvpipe-verify-protocol, readers covered: every thread that
// reads a slot between its consumer_wait and a consumer_release is done
// reading before the release's phase completes: it arrives on the release
// itself, or a thread ordered after its reads does (a thread of its
// warpgroup after the wgmma it issued with the warpgroup is retired; a
// thread past a barrier that the readers and it reach after the reads).
// Counting the arrivals (rule 6) is not enough: the right number may come
// from the wrong threads. Each wrong program is next to its corrected form
// (the fifth audit's two first).

// A second consumer warpgroup waits for and reads the slot (wgmma), but both
// arrivals of its release come from the first warpgroup (threads 128, 129):
// the producer may refill the slot while warpgroup 2 still reads it.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c129 = arith.constant 129 : index
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
          %row = arith.muli %i, %c128 : index
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !half
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(2) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %a = arith.cmpi eq, %tid, %c128 : index
      %b = arith.cmpi eq, %tid, %c129 : index
      %first = arith.ori %a, %b : i1
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        // expected-note @below {{the read}}
        %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
        // expected-error-re @below {{'kvpipe.consumer_release' op 128 threads of the CTA's 3 warpgroups (0, 0, 128 per warpgroup; the first is thread 256) read the slot without arriving on this release, and no arriving thread is ordered after their reads (no thread of their warpgroup arrives after retiring the wgmma): the phase may complete, and the producer refill the slot, while they still read it (sub-stage 0 of pipeline created at {{.*}})}}
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t, %done : !p, vector<64xf32>
      }
    }
    gpu.return
  }
}

// -----

// Corrected: one thread of each consumer warpgroup arrives (128 and 256),
// after the warpgroup retired its wgmma.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
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
          %row = arith.muli %i, %c128 : index
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !half
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(2) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %inwg = arith.remui %tid, %c128 : index
      %first = arith.cmpi eq, %inwg, %c0 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t, %done : !p, vector<64xf32>
      }
    }
    gpu.return
  }
}

// -----

// Every consumer thread loads its own row of the slot; only thread 128
// releases it (consumers = 1): rows may be overwritten before they are read.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %out: memref<128xbf16>) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
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
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !tile
          %row = arith.muli %i, %c128 : index
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !tile
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %row = arith.subi %tid, %c128 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        // expected-note @below {{the read}}
        %v = vector.load %k[%slot, %row, %c0] : !ring, vector<8xbf16>
        %e = vector.extract %v[0] : bf16 from vector<8xbf16>
        memref.store %e, %out[%row] : memref<128xbf16>
        // expected-error-re @below {{'kvpipe.consumer_release' op 127 threads of the CTA's 2 warpgroups (0, 127 per warpgroup; the first is thread 129) read the slot without arriving on this release, and no arriving thread is ordered after their reads (no barrier that they and an arriving thread reach lies between the read and the release): the phase may complete, and the producer refill the slot, while they still read it (sub-stage 0 of pipeline created at {{.*}})}}
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}

// -----

// Corrected: a named barrier over the 128 consumer threads between their
// loads and thread 128's release.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %out: memref<128xbf16>) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %id = arith.constant 1 : i32
    %count = arith.constant 128 : i32
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
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !tile
          %row = arith.muli %i, %c128 : index
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !tile
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %row = arith.subi %tid, %c128 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %v = vector.load %k[%slot, %row, %c0] : !ring, vector<8xbf16>
        %e = vector.extract %v[0] : bf16 from vector<8xbf16>
        memref.store %e, %out[%row] : memref<128xbf16>
        nvvm.barrier id = %id number_of_threads = %count
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}

// -----

// Corrected too: every consumer thread arrives (consumers = 128).
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 128>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %out: memref<128xbf16>) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
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
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !tile
          %row = arith.muli %i, %c128 : index
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !tile
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %row = arith.subi %tid, %c128 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %v = vector.load %k[%slot, %row, %c0] : !ring, vector<8xbf16>
        %e = vector.extract %v[0] : bf16 from vector<8xbf16>
        memref.store %e, %out[%row] : memref<128xbf16>
        %t = kvpipe.consumer_release %s, %true : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}

// -----

// The barrier before the loads, not between them and the release: it orders
// nothing the release needs.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %out: memref<128xbf16>) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %id = arith.constant 1 : i32
    %count = arith.constant 128 : i32
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
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !tile
          %row = arith.muli %i, %c128 : index
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !tile
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %row = arith.subi %tid, %c128 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        nvvm.barrier id = %id number_of_threads = %count
        %slot = kvpipe.index %s : !p
        // expected-note @below {{the read}}
        %v = vector.load %k[%slot, %row, %c0] : !ring, vector<8xbf16>
        %e = vector.extract %v[0] : bf16 from vector<8xbf16>
        memref.store %e, %out[%row] : memref<128xbf16>
        // expected-error @below {{127 threads of the CTA's 2 warpgroups (0, 127 per warpgroup; the first is thread 129) read the slot without arriving on this release}}
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}

// -----

// After the wgmma, each warp's lane 0 reads a scale factor stored in the
// slot with plain loads; the release elects one thread of the warpgroup,
// which the wgmma's retirement covers but not the other warps' loads.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q, %out: memref<256xbf16>) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %c128 = arith.constant 128 : index
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
          %row = arith.muli %i, %c128 : index
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !half
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(1) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %lane = gpu.lane_id
      %first = arith.cmpi eq, %tid, %c128 : index
      %leader = arith.cmpi eq, %lane, %c0 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
        scf.if %leader {
          // expected-note @below {{the read}}
          %scale = memref.load %k[%slot, %c0, %c0] : !ring
          memref.store %scale, %out[%tid] : memref<256xbf16>
        }
        // expected-error @below {{3 threads of the CTA's 2 warpgroups (0, 3 per warpgroup; the first is thread 160) read the slot without arriving on this release}}
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t, %done : !p, vector<64xf32>
      }
    }
    gpu.return
  }
}

// -----

// The seventh audit: two consumer warpgroups multiply the slot, thread 128
// arrives after a named barrier of both, but warpgroup 2 retires its wgmma
// only after the barrier (a wgmma reads asynchronously): the phase may
// complete while its tensor cores still read the slot.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %id = arith.constant 1 : i32
    %count = arith.constant 256 : i32
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
          %row = arith.muli %i, %c128 : index
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !half
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(2) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        // expected-note @+1 {{the read}}
        %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
        nvvm.barrier id = %id number_of_threads = %count
        %done = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
        // expected-error @+1 {{128 threads of the CTA's 3 warpgroups (0, 0, 128 per warpgroup; the first is thread 256) read the slot without arriving on this release}}
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t, %done : !p, vector<64xf32>
      }
    }
    gpu.return
  }
}

// -----

// Corrected: each warpgroup retires its wgmma before the barrier.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!half = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
!q = memref<1x64x64xbf16, #smem>
!kt = memref<1x128x64xbf16, strided<[8192, 64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %q: !q) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %id = arith.constant 1 : i32
    %count = arith.constant 256 : i32
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
          %row = arith.muli %i, %c128 : index
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !half
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(2) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %first = arith.cmpi eq, %tid, %c128 : index
      %o0 = arith.constant dense<0.0> : vector<64xf32>
      %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p, %o = %o0) -> (!p, vector<64xf32>) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !kt
        %acc = kvpipe.warpgroup_mma %q, %tile, %o : !q, !kt -> vector<64xf32>
        %done = kvpipe.warpgroup_wait %acc {pending = 0} : vector<64xf32>
        nvvm.barrier id = %id number_of_threads = %count
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t, %done : !p, vector<64xf32>
      }
    }
    gpu.return
  }
}

// -----

// Two consumer warpgroups read the slot with plain loads, then meet their
// warpgroup's own named barrier (its id computed per thread, as the
// generated kernels' epilogue barriers: 1 + the warpgroup's index) before
// their first thread arrives: every read is ordered before an arrival.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %out: memref<256xbf16>) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %count = arith.constant 128 : i32
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
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !tile
          %row = arith.muli %i, %c128 : index
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !tile
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(2) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %row = arith.remui %tid, %c128 : index
      %first = arith.cmpi eq, %row, %c0 : index
      %id0 = arith.addi %ci, %c1 : index
      %id = arith.index_cast %id0 : index to i32
      %out_row = arith.subi %tid, %c128 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        %v = vector.load %k[%slot, %row, %c0] : !ring, vector<8xbf16>
        %e = vector.extract %v[0] : bf16 from vector<8xbf16>
        memref.store %e, %out[%out_row] : memref<256xbf16>
        nvvm.barrier id = %id number_of_threads = %count
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}

// -----

// The same barrier counting 256 threads: each id is reached by one
// warpgroup's 128, so it never completes as written (rule 14's error) and
// orders nothing the checker can use.
!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
!map = !kvpipe.tensor_map<box = [1, 128, 64], element_type = bf16, swizzle = 128>
#smem = #gpu.address_space<workgroup>
!ring = memref<2x128x64xbf16, #smem>
!tile = memref<128x64xbf16, strided<[64, 1], offset: ?>, #smem>
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k(%map: !map, %n: index, %out: memref<256xbf16>) workgroup(%k: !ring) kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %count = arith.constant 256 : i32
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
          %tile = memref.subview %k[%slot, 0, 0] [1, 128, 64] [1, 1, 1] : !ring to !tile
          %row = arith.muli %i, %c128 : index
          kvpipe.tma_load %map[%c0, %row, %c0], %tile, %b : !map, !tile
          kvpipe.producer_commit %s : !p
          %t = kvpipe.step %s : !p
          scf.yield %t : !p
        }
      }
    } consumers(2) registers(240) {
    ^bb0(%ci: index):
      %tid = gpu.thread_id x
      %row = arith.remui %tid, %c128 : index
      %first = arith.cmpi eq, %row, %c0 : index
      %id0 = arith.addi %ci, %c1 : index
      %id = arith.index_cast %id0 : index to i32
      %out_row = arith.subi %tid, %c128 : index
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%s = %p) -> (!p) {
        kvpipe.consumer_wait %s : !p
        %slot = kvpipe.index %s : !p
        // expected-note @below {{the read}}
        %v = vector.load %k[%slot, %row, %c0] : !ring, vector<8xbf16>
        %e = vector.extract %v[0] : bf16 from vector<8xbf16>
        memref.store %e, %out[%out_row] : memref<256xbf16>
        // expected-error @+2 {{'nvvm.barrier' op is reached by 128 threads of the CTA's 3 warpgroups on named barrier 1, whose count is 256: its phase never completes (a hang)}}
        // expected-error @+1 {{'nvvm.barrier' op is reached by 128 threads of the CTA's 3 warpgroups on named barrier 2, whose count is 256: its phase never completes (a hang)}}
        nvvm.barrier id = %id number_of_threads = %count
        // expected-error @below {{254 threads of the CTA's 3 warpgroups (0, 127, 127 per warpgroup; the first is thread 129) read the slot without arriving on this release}}
        %t = kvpipe.consumer_release %s, %first : !p
        scf.yield %t : !p
      }
    }
    gpu.return
  }
}
