// RUN: kvpipe-opt %s --kvpipe-expand-attention=stage=skeleton --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not=warning %}

// The backward at head dims above 128 (docs/backward.md, "Head dims 192 and
// 256"): the consumer warpgroups split the head dim. At 192, three
// warpgroups (160 registers each) and 96 keys per CTA: warpgroup c computes
// S = Q K_c^T and dP = dO V_c^T for its 32 keys (N = 32), writes P and dS
// into its column block of the [64 queries][96 keys] buffers, and after the
// 384-thread barrier accumulates dV^T and dK^T (its 64 head-dim rows x all 96
// keys, 48 fp32) from the dO and Q slots read MN-major (transpose_a) and the
// buffers (transpose_b), and dQ for its two 32-column blocks (dS K-major,
// K's column block MN-major), each staged and bulk-reduced (dq_atomics =
// false: the staged way, deterministic mode's). Every tile is in
// the 64-byte swizzle. The epilogue stores dK^T and dV^T transposed into the
// K and V tiles (rows: keys) for 96-row TMA stores. The staged 256
// declaration (two warpgroups, 64 keys) computes dQ 64 columns at a time,
// and goes
// through --kvpipe-to-ptx and ptxas too: the pinned wgmma descriptors keep
// the kernels free of spills. With V's head
// dim 128 at 192 (DeepSeek's), V's two 64-row blocks of dV^T go to
// warpgroups 0 and 1: the third issues and stores no dV (uniform branches).

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @bwd {head_dim = 192 : i64, element_type = bf16, causal = true, backward = true, dq_atomics = false}
  kvpipe.attention_kernel @bwd256 {head_dim = 256 : i64, element_type = f16, causal = false, backward = true, dq_atomics = false}
  kvpipe.attention_kernel @bwd192v128 {head_dim = 192 : i64, value_head_dim = 128 : i64, element_type = bf16, causal = true, backward = true}
  kvpipe.attention_kernel @bwd256atomics {head_dim = 256 : i64, element_type = bf16, causal = true, backward = true}
  kvpipe.attention_kernel @bwd192atomics {head_dim = 192 : i64, element_type = bf16, causal = false, backward = true, dq_atomics = true}
  kvpipe.attention_kernel @bwd256det {head_dim = 256 : i64, element_type = bf16, causal = true, backward = true, deterministic = true}
}

// CHECK-LABEL: gpu.func @bwd(
//  CHECK-SAME:   !kvpipe.tensor_map<box = [1, 1, 64, 32], element_type = bf16, swizzle = 64>
//  CHECK-SAME:   !kvpipe.tensor_map<box = [1, 1, 96, 32], element_type = bf16, swizzle = 64>
//  CHECK-SAME:   block_n = 96
//  CHECK-SAME:   consumer_warpgroups = 3
//  CHECK-SAME:   dk_map = {box = [1, 1, 96, 32], swizzle = 64 : i64}
//  CHECK-SAME:   dynamic_shared_memory = 222976
//  CHECK-SAME:   threads = 512
// K and V; the Q ring (two slots), the dO ring (one); dS and P buffers.
//       CHECK:   memref<6x96x32xbf16, #gpu.address_space<workgroup>>
//       CHECK:   memref<6x96x32xbf16, #gpu.address_space<workgroup>>
//       CHECK:   memref<2x6x64x32xbf16, #gpu.address_space<workgroup>>
//       CHECK:   memref<1x6x64x32xbf16, #gpu.address_space<workgroup>>
//       CHECK:   memref<2x3x64x32xbf16, #gpu.address_space<workgroup>>
//       CHECK:   memref<2x3x64x32xbf16, #gpu.address_space<workgroup>>
//       CHECK:   %[[DO:.*]] = kvpipe.create : !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 3>
//       CHECK:   kvpipe.warp_roles producer registers(24) {
//       CHECK:   } consumers(3) registers(160) {
// The consumer: S and dP for its 32 keys.
//       CHECK:   kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64} : memref<6x64x32xbf16, {{.*}}>, memref<6x32x32xbf16, {{.*}}> -> vector<16xf32>
//       CHECK:   kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64} : memref<6x64x32xbf16, {{.*}}>, memref<6x32x32xbf16, {{.*}}> -> vector<16xf32>
//       CHECK:   kvpipe.warpgroup_wait %{{.*}} {pending = 1 : i64} : vector<16xf32>
//       CHECK:   kvpipe.warpgroup_wait %{{.*}} {pending = 0 : i64} : vector<16xf32>
// P and dS into its column block, then all three warpgroups meet.
//       CHECK:   kvpipe.store_fragment %{{.*}}, %{{.*}} {swizzle = 64 : i64} : vector<16xbf16>, memref<64x32xbf16
//       CHECK:   kvpipe.store_fragment %{{.*}}, %{{.*}} {swizzle = 64 : i64} : vector<16xbf16>, memref<64x32xbf16
//       CHECK:   nvvm.barrier id = %{{.*}} number_of_threads = %c384_i32
// dV^T, dK^T: 64 head-dim rows x 96 keys; then dQ's first column block.
//       CHECK:   %[[DV:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}}, %{{.*}} {swizzle = 64 : i64, transpose_a, transpose_b} : memref<2x64x32xbf16, {{.*}}>, memref<3x64x32xbf16, {{.*}}> -> vector<48xf32>
//       CHECK:   %[[DK:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}}, %{{.*}} {swizzle = 64 : i64, transpose_a, transpose_b} : memref<2x64x32xbf16, {{.*}}>, memref<3x64x32xbf16, {{.*}}> -> vector<48xf32>
//       CHECK:   %[[DQ0:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64, transpose_b} : memref<3x64x32xbf16, {{.*}}>, memref<1x96x32xbf16, {{.*}}> -> vector<16xf32>
// dO's one slot is released once dV^T retired, Q's once dK^T did.
//       CHECK:   kvpipe.warpgroup_wait %[[DV]] {pending = 2 : i64}
//       CHECK:   kvpipe.consumer_release
//       CHECK:   kvpipe.warpgroup_wait %[[DK]] {pending = 1 : i64}
//       CHECK:   kvpipe.consumer_release
// dQ: the second block issued before the first is staged (2048 fp32) and
// reduced (8 KiB).
//       CHECK:   %[[DQ1:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64, transpose_b} : memref<3x64x32xbf16, {{.*}}>, memref<1x96x32xbf16, {{.*}}> -> vector<16xf32>
//       CHECK:   kvpipe.warpgroup_wait %[[DQ0]] {pending = 1 : i64}
//       CHECK:   vector.store %{{.*}} : memref<2048xf32, #gpu.address_space<workgroup>>, vector<4xf32>
//       CHECK:   "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], $2;", "l,r,r,~{memory}" %{{.*}}, %{{.*}}, %c8192_i32
//       CHECK:   kvpipe.warpgroup_wait %[[DQ1]] {pending = 0 : i64}
//       CHECK:   "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32
// Epilogue: dK^T and dV^T transposed into [2 blocks][96 keys][32].
//       CHECK:   nvvm.barrier id = %{{.*}} number_of_threads = %c384_i32
//       CHECK:   kvpipe.store_fragment %{{.*}}, %{{.*}} {swizzle = 64 : i64, transpose} : vector<48xbf16>, memref<2x96x32xbf16
//       CHECK:   kvpipe.store_fragment %{{.*}}, %{{.*}} {swizzle = 64 : i64, transpose} : vector<48xbf16>, memref<2x96x32xbf16
// Its two column blocks of dK, then of dV, 96 rows each.
//   CHECK-COUNT-4:   kvpipe.tma_store %{{.*}} : memref<96x32xbf16, {{.*}}>, !kvpipe.tensor_map<box = [1, 1, 96, 32], element_type = bf16, swizzle = 64>
//   CHECK-NOT:   kvpipe.tma_store
//       CHECK:   gpu.return

// CHECK-LABEL: gpu.func @bwd256(
//  CHECK-SAME:   block_n = 64
//  CHECK-SAME:   consumer_warpgroups = 2
//  CHECK-SAME:   dynamic_shared_memory = 231168
//       CHECK:   } consumers(2) registers(240) {
// Two 64-row blocks of dV^T and of dK^T, 64 keys each (32 fp32).
//   CHECK-COUNT-4:   kvpipe.warpgroup_mma {{.*}}transpose_a, transpose_b{{.*}} -> vector<32xf32>
// dQ: the warpgroup's 128 columns in two blocks of 64 (N = 64: two column
// blocks of K), the 64 x 64 staging tiles fitting at 256 (225 KiB; not at
// 192), each staged (4096 fp32) and reduced (16 KiB).
//       CHECK:   %[[DQ0:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64, transpose_b} : memref<2x64x32xf16, {{.*}}>, memref<2x64x32xf16, {{.*}}> -> vector<32xf32>
//       CHECK:   %[[DQ1:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64, transpose_b} : memref<2x64x32xf16, {{.*}}>, memref<2x64x32xf16, {{.*}}> -> vector<32xf32>
//       CHECK:   kvpipe.warpgroup_wait %[[DQ0]] {pending = 1 : i64}
//       CHECK:   vector.store %{{.*}} : memref<4096xf32, #gpu.address_space<workgroup>>, vector<4xf32>
//       CHECK:   "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], $2;", "l,r,r,~{memory}" %{{.*}}, %{{.*}}, %c16384_i32
//       CHECK:   kvpipe.warpgroup_wait %[[DQ1]] {pending = 0 : i64}
//   CHECK-NOT:   kvpipe.warpgroup_mma
//       CHECK:   gpu.return

// CHECK-LABEL: gpu.func @bwd192v128(
//  CHECK-SAME:   block_n = 96
//  CHECK-SAME:   value_head_dim = 128
// V: [4 blocks][96 keys][32]; the dO ring's two slots (dQ from registers
// by default leaves room for the second): [2][4][64][32].
//       CHECK:   memref<4x96x32xbf16, #gpu.address_space<workgroup>>
//       CHECK:   memref<2x4x64x32xbf16, #gpu.address_space<workgroup>>
//       CHECK:   %[[HASDV:.*]] = arith.cmpi ult, %{{.*}}, %c2 : index
// dP = dO V_c^T over V's 128 columns.
//       CHECK:   kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64} : memref<4x64x32xbf16, {{.*}}>, memref<4x32x32xbf16, {{.*}}> -> vector<16xf32>
// dV^T only where the warpgroup has rows of it; the wait retires it or
// nothing, and dO is released either way.
//       CHECK:   %[[DV:.*]] = scf.if %[[HASDV]] -> (vector<48xf32>) {
//  CHECK-NEXT:     %{{.*}} = memref.subview
//  CHECK-NEXT:     %[[MMA:.*]] = kvpipe.warpgroup_mma {{.*}}transpose_a, transpose_b{{.*}} -> vector<48xf32>
//  CHECK-NEXT:     scf.yield %[[MMA]]
//       CHECK:   kvpipe.warpgroup_mma {{.*}}transpose_a, transpose_b{{.*}} -> vector<48xf32>
//       CHECK:   kvpipe.warpgroup_wait %[[DV]] {pending = 2 : i64}
//  CHECK-NEXT:   kvpipe.consumer_release
// The epilogue's dV store, and its TMA stores, under the same condition.
//       CHECK:   scf.if %[[HASDV]] {
//  CHECK-NEXT:     memref.subview
//       CHECK:     kvpipe.store_fragment %{{.*}}, %{{.*}} {swizzle = 64 : i64, transpose} : vector<48xbf16>, memref<2x96x32xbf16
//       CHECK:   scf.if %[[HASDV]] {
//  CHECK-NEXT:     memref.subview
//  CHECK-NEXT:     kvpipe.tma_store %{{.*}}, %arg5

// With dq_atomics (the default above head dim 128, outside deterministic
// mode), dQ goes from registers to dq_accum: no staging tiles, and their room
// holds a second dO slot (256: 230400 - 2 x 16 KiB + 32 KiB; 192: 222208 -
// 3 x 8 KiB + 24 KiB), 64-column blocks at both head dims (nothing to fit),
// each thread's 32 fp32 as eight 16-byte vector reductions in fragment
// order; no bulk reduction, no barrier between the blocks.
// CHECK-LABEL: gpu.func @bwd256atomics(
//  CHECK-SAME:   dynamic_shared_memory = 231424
// The Q ring, then the dO ring: two slots each.
//       CHECK:   memref<2x8x64x32xbf16, #gpu.address_space<workgroup>>
//       CHECK:   memref<2x8x64x32xbf16, #gpu.address_space<workgroup>>
//       CHECK:   kvpipe.create : !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 2>
//  CHECK-NEXT:   kvpipe.create : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
//  CHECK-NEXT:   kvpipe.create : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
//       CHECK:   %[[DQ0:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64, transpose_b} : memref<2x64x32xbf16, {{.*}}>, memref<2x64x32xbf16, {{.*}}> -> vector<32xf32>
//       CHECK:   %[[DQ1:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64, transpose_b} : memref<2x64x32xbf16, {{.*}}>, memref<2x64x32xbf16, {{.*}}> -> vector<32xf32>
//       CHECK:   kvpipe.warpgroup_wait %[[DQ0]] {pending = 1 : i64}
//   CHECK-NOT:   nvvm.barrier
//   CHECK-COUNT-8:   "red.global.add.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f,~{memory}"
//       CHECK:   kvpipe.warpgroup_wait %[[DQ1]] {pending = 0 : i64}
//   CHECK-NOT:   nvvm.barrier
//   CHECK-COUNT-8:   "red.global.add.v4.f32
//   CHECK-NOT:   cp.reduce.async.bulk
//       CHECK:   gpu.return

// CHECK-LABEL: gpu.func @bwd192atomics(
//  CHECK-SAME:   dynamic_shared_memory = 223232
//       CHECK:   %[[DQ:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {swizzle = 64 : i64, transpose_b} : memref<3x64x32xbf16, {{.*}}>, memref<2x96x32xbf16, {{.*}}> -> vector<32xf32>
//       CHECK:   kvpipe.warpgroup_wait %[[DQ]] {pending = 0 : i64}
//   CHECK-COUNT-8:   "red.global.add.v4.f32
//   CHECK-NOT:   cp.reduce.async.bulk
//       CHECK:   gpu.return

// Deterministic mode keeps the staged dQ (its ordered additions wait for the
// bulk reductions; 32-column blocks) and so one dO slot.
// CHECK-LABEL: gpu.func @bwd256det(
//  CHECK-SAME:   dynamic_shared_memory = 214784
//       CHECK:   kvpipe.create : !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 2>
//  CHECK-NEXT:   kvpipe.create : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
//  CHECK-NEXT:   kvpipe.create : !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 2>
//       CHECK:   cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32
//   CHECK-NOT:   red.global.add
//       CHECK:   gpu.return

// PTXAS: Compiling entry function 'bwd192atomics'
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: Compiling entry function 'bwd256atomics'
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: Compiling entry function 'bwd192v128'
// PTXAS: bytes spill stores
// PTXAS: Compiling entry function 'bwd256'
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: Compiling entry function 'bwd'
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
