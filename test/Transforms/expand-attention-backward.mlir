// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=skeleton" --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol="strict=true" -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-expand-attention=abi-file=%t.json -o /dev/null
// RUN: FileCheck %s --check-prefix=ABI < %t.json

// `backward = true` expands one declaration into the backward family
// (docs/backward.md): preprocess, main, postprocess, each with its ABI.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @bwd {head_dim = 128 : i64, element_type = bf16, causal = true, backward = true}
  kvpipe.attention_kernel @bwd64 {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true}
  kvpipe.attention_kernel @bwd_global_statistics {head_dim = 128 : i64, element_type = bf16, causal = true, backward = true, shared_statistics = false}
}

// The preprocess: each warp takes 16 rows, and their O and dO rows (4
// columns a lane at head dim 128; rows past seq_q load the last row) are all
// loaded before the first row is reduced; delta = rowsum(dO * O) across the
// warp (0 for a padding row) is stored by lane r for row r, every lane zeroes
// its part of the dQ accumulator's row, and lanes 0-15 write lse * log2(e) of
// the warp's rows.
// CHECK-LABEL: gpu.func @bwd_preprocess(
//  CHECK-SAME:   role = "preprocess"
//   CHECK-NOT:   scf.for
// CHECK-COUNT-32: llvm.load {{.*}} -> vector<4xbf16>
//   CHECK-NOT:   llvm.load
//       CHECK:   vector.reduction <add>
//  CHECK-NEXT:   arith.select
//  CHECK-NEXT:   gpu.shuffle  xor %{{.*}}, %c16_i32
//       CHECK:   gpu.shuffle  xor %{{.*}}, %c1_i32
//       CHECK:   llvm.store %{{.*}} : vector<4xf32>, !llvm.ptr<1>
//       CHECK:   scf.if
//       CHECK:     llvm.store %{{.*}} : f32, !llvm.ptr<1>
//       CHECK:   arith.cmpi ult, %{{.*}}, %c16 : index
//  CHECK-NEXT:   scf.if
//       CHECK:     llvm.load {{.*}} -> f32
//       CHECK:     arith.mulf %{{.*}}, %cst{{.*}} : f32
//       CHECK:     llvm.store %{{.*}} : f32, !llvm.ptr<1>
//       CHECK:   gpu.return

// The main kernel: K and V resident (pipeline of one slot), Q and dO
// streamed (two slots each), two consumer warpgroups; with the causal mask
// the Q-block loops of producer and consumers start at the block's first key.
// CHECK-LABEL: gpu.func @bwd(
//  CHECK-SAME:   dynamic_shared_memory = 198656
//  CHECK-SAME:   role = "main"
//       CHECK:   %[[KVROW:.*]] = arith.muli %block_id_x, %c128 : index
//       CHECK:   %[[QBLOCKS:.*]] = arith.ceildivui %{{.*}}, %c64 : index
//       CHECK:   %[[FIRST:.*]] = arith.divui %[[KVROW]], %c64 : index
//       CHECK:   %[[BEGIN:.*]] = arith.minui %[[FIRST]], %[[QBLOCKS]] : index
//       CHECK:   memref.view {{.*}} to memref<2x128x64xbf16
//       CHECK:   memref.view {{.*}} to memref<2x128x64xbf16
//       CHECK:   memref.view {{.*}} to memref<2x2x64x64xbf16
//       CHECK:   memref.view {{.*}} to memref<2x2x64x64xbf16
// dS: two buffers of both consumers' tiles ([128 keys][64 queries] each).
//       CHECK:   memref.view {{.*}} to memref<2x1x128x64xbf16
// The log-sum-exp and delta rings: a slot of 64 fp32 per Q and dO slot.
//       CHECK:   %[[LSES:.*]] = memref.view {{.*}} to memref<2x64xf32
//       CHECK:   %[[DELTAS:.*]] = memref.view {{.*}} to memref<2x64xf32
//       CHECK:   %[[KV:.*]] = kvpipe.create : !kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 2>
//       CHECK:   %[[Q:.*]] = kvpipe.create : !kvpipe.pipeline<kv_stages = 2, {{.*}}consumers = 2>
//       CHECK:   %[[DO:.*]] = kvpipe.create : !kvpipe.pipeline<kv_stages = 2, {{.*}}consumers = 2>
//       CHECK:   kvpipe.warp_roles producer registers(24) {
//       CHECK:     kvpipe.producer_acquire %[[KV]]
//   CHECK-COUNT-4: kvpipe.tma_load {{.*}} !kvpipe.tensor_map<box = [1, 1, 128, 64]
//       CHECK:     kvpipe.producer_commit %[[KV]]
//       CHECK:     scf.for %{{.*}} = %[[BEGIN]] to %[[QBLOCKS]]
//       CHECK:       kvpipe.producer_acquire
//   CHECK-COUNT-2:   kvpipe.tma_load %arg0
// The Q block's log-sum-exp (lse_log2, %arg6) into the slot of the Q
// slot, on its barrier; its delta (%arg7) with dO.
//       CHECK:       memref.subview %[[LSES]]
//       CHECK:       kvpipe.bulk_load %{{.*}}, %{{.*}}, %{{.*}} : !llvm.ptr<1>, memref<64xf32
//       CHECK:       kvpipe.producer_commit
//       CHECK:       kvpipe.producer_acquire
//   CHECK-COUNT-2:   kvpipe.tma_load %arg3
//       CHECK:       memref.subview %[[DELTAS]]
//       CHECK:       kvpipe.bulk_load
//       CHECK:       kvpipe.producer_commit
//       CHECK:   } consumers(2) registers(240) {
// Each consumer's dQ staging tile: its 64 x 64 fp32 column block of dQ
// (fragment order).
//       CHECK:     %[[DQ:.*]] = memref.view {{.*}} to memref<4096xf32, #gpu.address_space<workgroup>>
//       CHECK:     kvpipe.consumer_wait %[[KV]]
//       CHECK:     scf.for %{{.*}} = %[[BEGIN]] to %[[QBLOCKS]]
//   CHECK-NOT:       nvvm.prefetch
// S^T = K_c Q^T and dP^T = V_c dO^T (SS); the per-column log-sum-exp (8
// pair loads for 32 elements, from the Q slot's statistics) while they run,
// ahead of the wait and the mask's branch; S^T retired first.
//       CHECK:       kvpipe.consumer_wait
//       CHECK:       %[[ST:.*]] = kvpipe.warpgroup_mma %{{.*}}, %[[QT:.*]] : memref<2x64x64xbf16, {{.*}} -> vector<32xf32>
//       CHECK:       kvpipe.consumer_wait
//       CHECK:       %[[DPT:.*]] = kvpipe.warpgroup_mma %{{.*}}, %[[DOT:.*]] : memref<2x64x64xbf16, {{.*}} -> vector<32xf32>
//       CHECK:       memref.subview %[[LSES]]
//   CHECK-COUNT-8:   vector.load {{.*}} {alignment = 8 : i64} : memref<64xf32, {{.*}}>, vector<2xf32>
//       CHECK:       %[[LSE:.*]] = vector.from_elements
//       CHECK:       kvpipe.warpgroup_wait %[[ST]] {pending = 1 : i64}
// The mask on the blocks that need it, rows keys and columns queries; P^T
// by exp2.
//       CHECK:       scf.if %{{.*}} -> (vector<32xf32>)
//       CHECK:         arith.cmpi sge, %{{.*}}, %{{.*}} : vector<32xi32>
//       CHECK:       arith.negf %[[LSE]]
//       CHECK:       math.fma
//       CHECK:       %[[P:.*]] = math.exp2 {{.*}} : vector<32xf32>
//       CHECK:       kvpipe.warpgroup_wait %[[DPT]] {pending = 0 : i64}
// dS^T = P^T (dP^T - delta), from the fp32 P^T.
//       CHECK:       memref.subview %[[DELTAS]]
//   CHECK-COUNT-8:   vector.load {{.*}} {alignment = 8 : i64} : memref<64xf32, {{.*}}>, vector<2xf32>
//       CHECK:       %[[DIFF:.*]] = arith.subf %{{.*}}, %{{.*}} : vector<32xf32>
//       CHECK:       arith.mulf %[[P]], %[[DIFF]] : vector<32xf32>
// dV += P^T dO (RS), dS through shared memory, dQ = dS K with A read
// MN-major, then dK += dS^T Q (RS): dQ retires while dK runs.
//       CHECK:       %[[DV:.*]] = kvpipe.warpgroup_mma %{{.*}}, %[[DOT]], %{{.*}} {transpose_b} : vector<32xbf16>
//   CHECK-NOT:       kvpipe.warpgroup_mma
// dS^T into this consumer's rows of the Q block's dS buffer (by parity).
//       CHECK:       kvpipe.store_fragment %{{.*}}, %{{.*}} : vector<32xbf16>, memref<1x64x64xbf16
//       CHECK:       nvvm.fence.proxy
// The previous Q block's bulk reduction has read the staging tile; both
// consumers' dS tiles are written (the consumers' barrier, 256 threads).
//       CHECK:       nvvm.cp.async.bulk.wait_group 0 {read}
//       CHECK:       nvvm.barrier id = %c4_i32 number_of_threads = %c256_i32
// This consumer's column block of dQ over all 128 keys: A the whole dS
// buffer read MN-major, B that column block of K.
//       CHECK:       %[[DQW:.*]] = kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {transpose_a, transpose_b} : memref<1x128x64xbf16, {{.*}}>, memref<1x128x64xbf16, {{.*}}> -> vector<32xf32>
// dV retired (dQ in flight): dO released; dK issued; dQ retired (dK in
// flight).
//       CHECK:       kvpipe.warpgroup_wait %[[DV]] {pending = 1 : i64} : vector<64xf32>
//       CHECK:       kvpipe.consumer_release
//       CHECK:       %[[DK:.*]] = kvpipe.warpgroup_mma %{{.*}}, %[[QT]], %{{.*}} {transpose_b} : vector<32xbf16>
//       CHECK:       kvpipe.warpgroup_wait %[[DQW]] {pending = 1 : i64} : vector<32xf32>
// Staged in fragment order, 16 bytes per store.
//   CHECK-COUNT-8:   vector.store %{{.*}}, %[[DQ]][%{{.*}}] {alignment = 16 : i64} : memref<4096xf32, {{.*}}>, vector<4xf32>
//   CHECK-NOT:       kvpipe.warpgroup_mma
// Then one bulk reduction of the 16 KiB tile into its half of dq_accum's
// block (a column block is contiguous in fragment order), by one thread.
//       CHECK:       nvvm.fence.proxy
//       CHECK:       nvvm.barrier
//       CHECK:       scf.if
//       CHECK:         llvm.inline_asm has_side_effects "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], $2;", "l,r,r,~{memory}" %{{.*}}, %{{.*}}, %c16384_i32
//       CHECK:         nvvm.cp.async.bulk.commit.group
//   CHECK-NOT:         nvvm.cp.async.bulk.wait_group
// dK retired, Q released.
//       CHECK:       kvpipe.warpgroup_wait %[[DK]] {pending = 0 : i64} : vector<64xf32>
//       CHECK:       kvpipe.consumer_release
//       CHECK:       scf.yield
// Epilogue: dK scaled, dK and dV staged in the warpgroup's K and V rows and
// stored with TMA, then the K/V slot released.
// The other consumer's last dQ wgmma read this one's K rows: both meet.
//       CHECK:     nvvm.barrier id = %c4_i32 number_of_threads = %c256_i32
//       CHECK:     kvpipe.fragment_rescale
//       CHECK:     kvpipe.store_fragment
//       CHECK:     kvpipe.store_fragment
//   CHECK-COUNT-4: kvpipe.tma_store
//       CHECK:     nvvm.cp.async.bulk.wait_group 0
//       CHECK:     kvpipe.consumer_release %[[KV]]

// The postprocess: dQ = scale * dq_accum in the element type, one thread
// per fragment thread of the 64-row block: 16 coalesced 16-byte loads of
// the fragment-ordered accumulator, then two adjacent columns per store,
// each row half only where it is below seq_q.
// CHECK-LABEL: gpu.func @bwd_postprocess(
//  CHECK-SAME:   role = "postprocess"
//  CHECK-COUNT-16: llvm.load {{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
//       CHECK:   arith.mulf {{.*}} : vector<64xf32>
//       CHECK:   arith.truncf {{.*}} to vector<64xbf16>
//       CHECK:   scf.if
//  CHECK-COUNT-16: llvm.store {{.*}} {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<1>
//       CHECK:   scf.if
//  CHECK-COUNT-16: llvm.store {{.*}} {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<1>

// Head dim 64 (one column block): the consumers take turns by Q block.
// Q_i and dO_i are released first (dQ reads neither); the consumer whose
// turn it is computes all of dQ over the 128 keys and reduces it (16 KiB).
// CHECK-LABEL: gpu.func @bwd64(
//  CHECK-SAME:   dynamic_shared_memory = 133120
//       CHECK:   } consumers(2) registers(240) {
//       CHECK:     %[[DQ64:.*]] = memref.view {{.*}} to memref<4096xf32, #gpu.address_space<workgroup>>
//       CHECK:       nvvm.barrier id = %c4_i32 number_of_threads = %c256_i32
//       CHECK:       kvpipe.warpgroup_wait %{{.*}}, %{{.*}} {pending = 0 : i64} : vector<32xf32>, vector<32xf32>
//       CHECK:       kvpipe.consumer_release
//       CHECK:       kvpipe.consumer_release
// (the Q block's parity, shared with the dS buffer's after CSE)
//       CHECK:       %[[MINE:.*]] = arith.cmpi eq, %{{.*}}, %{{.*}} : index
//  CHECK-NEXT:       scf.if %[[MINE]] {
//       CHECK:         kvpipe.warpgroup_mma %{{.*}}, %{{.*}} {transpose_a, transpose_b} : memref<1x128x64xbf16, {{.*}}>, memref<1x128x64xbf16, {{.*}}> -> vector<32xf32>
//   CHECK-COUNT-8:     vector.store %{{.*}}, %[[DQ64]][%{{.*}}] {alignment = 16 : i64}
//       CHECK:         llvm.inline_asm has_side_effects "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 {{.*}} %c16384_i32
//       CHECK:       scf.yield
// CHECK-LABEL: gpu.func @bwd64_postprocess(

// ABI: "kernel": "bwd_preprocess"
// ABI: "role": "preprocess"
// ABI: "kernel": "bwd"
// ABI: "role": "main"
// ABI: "kernel": "bwd_postprocess"
// ABI: "role": "postprocess"

// `shared_statistics = false`: no statistics rings; each consumer thread
// prefetches its log-sum-exp and delta columns into L1 (two 128-byte lines
// each) before the slot waits and loads them from global memory.
// CHECK-LABEL: gpu.func @bwd_global_statistics(
//  CHECK-SAME:   dynamic_shared_memory = 197632
//   CHECK-NOT:   memref<2x64xf32
//   CHECK-NOT:   kvpipe.bulk_load
//       CHECK:   } consumers(2) registers(240) {
//       CHECK:     scf.for
//   CHECK-COUNT-4:   nvvm.prefetch level = L1
//       CHECK:       kvpipe.warpgroup_mma
//   CHECK-COUNT-8:   llvm.load {{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> vector<2xf32>
//       CHECK:       kvpipe.warpgroup_wait %{{.*}} {pending = 0 : i64}
//   CHECK-COUNT-8:   llvm.load {{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> vector<2xf32>
//   CHECK-NOT:   vector.load {{.*}} memref<64xf32
//       CHECK:   gpu.return
