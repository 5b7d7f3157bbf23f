// RUN: kvpipe-opt %s --kvpipe-expand-attention --canonicalize --cse | FileCheck %s
// RUN: kvpipe-opt %s --kvpipe-expand-attention --kvpipe-verify-protocol -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.ptx" -o /dev/null
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}
// The persistent loop is a rewrite of the skeleton (--kvpipe-persistent-tiles,
// test/Transforms/persistent-tiles.mlir): the thin passes in sequence give
// exactly the expansion.
// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=skeleton" --kvpipe-persistent-tiles \
// RUN:   --kvpipe-overlap-softmax --kvpipe-pingpong-schedule --kvpipe-lower-tiles \
// RUN:   --kvpipe-lower-fragment-ops --kvpipe-lower-warp-roles -o %t.passes.mlir
// RUN: kvpipe-opt %s --kvpipe-expand-attention -o %t.expanded.mlir
// RUN: diff %t.passes.mlir %t.expanded.mlir

// With `persistent`, each role of a CTA loops over the same rounds of tiles
// (round r: tile r * gridDim.x + blockIdx.x, mirrored in odd rounds, while
// that tile exists),
// carrying the Q, K and V pipeline states from tile to tile; the output is
// staged in a tile of its own, after the previous tile's store has read it.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @tiles {head_dim = 128 : i64, element_type = bf16, causal = true, persistent = true}
}

// CHECK-LABEL: gpu.func @tiles(
//  CHECK-SAME:   %{{.*}}: f32, %[[HEADS:.*]]: i32, %[[BATCH:.*]]: i32) kernel
//  CHECK-SAME:   abi_version = 2
//  CHECK-SAME:   dynamic_shared_memory = 197632
//  CHECK-SAME:   params = ["q_map", "k_map", "v_map", "o_map", "lse", "seq_q", "seq_kv", "heads_per_kv_head", "scale_log2", "heads_q", "batch"], persistent = true
// The O staging tile after the V ring.
//       CHECK:   memref.view {{.*}} to memref<2x128x64xbf16, #gpu.address_space<workgroup>>
//       CHECK:   memref.view {{.*}} to memref<2x2x128x64xbf16
//       CHECK:   memref.view {{.*}} to memref<2x2x128x64xbf16
//       CHECK:   %[[SO:.*]] = memref.view {{.*}} to memref<2x128x64xbf16, #gpu.address_space<workgroup>>
// Producer: a loop over its rounds while its tile exists (no division for a
// trip count, which ptxas would compute off the uniform datapath).
//       CHECK:   nvvm.setmaxregister decrease 24
//       CHECK:   %[[CTAS:.*]] = gpu.grid_dim x
//       CHECK:   %[[CTA:.*]] = gpu.block_id x
//       CHECK:   scf.while (%[[ROUND:.*]] = %c0, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}})
//       CHECK:     %[[MIRROR:.*]] = arith.subi %{{.*}}, %[[CTA]] : index
//       CHECK:     %[[POS:.*]] = arith.select %{{.*}}, %[[MIRROR]], %[[CTA]] : index
//       CHECK:     %[[BASE:.*]] = arith.muli %[[ROUND]], %[[CTAS]] : index
//       CHECK:     %[[TILE:.*]] = arith.addi %[[BASE]], %[[POS]] : index
//       CHECK:     %[[EXISTS:.*]] = arith.cmpi ult, %[[TILE]], %{{.*}} : index
//       CHECK:     scf.condition(%[[EXISTS]]) %[[ROUND]], %[[TILE]]
//       CHECK:   } do {
//       CHECK:   ^bb0(%{{.*}}: index, %{{.*}}: index, %[[Q:.*]]: !kvpipe.pipeline<kv_stages = 1{{.*}}>, %[[K:.*]]: !kvpipe.pipeline<{{.*}}>, %[[V:.*]]: !kvpipe.pipeline<{{.*}}>):
//       CHECK:     kvpipe.producer_acquire %[[Q]]
//       CHECK:     kvpipe.tma_load
//       CHECK:     kvpipe.producer_commit %[[Q]]
//       CHECK:     %[[NEXTQ:.*]] = kvpipe.step %[[Q]]
//       CHECK:     %[[KV:.*]]:2 = scf.for {{.*}} iter_args(%{{.*}} = %[[K]], %{{.*}} = %[[V]])
//       CHECK:     scf.yield %{{.*}}, %[[NEXTQ]], %[[KV]]#0, %[[KV]]#1
// Consumers: the same rounds; the causal tile's K/V block count is the
// producer's own index value (no lane-0 broadcast through i32, which the
// protocol checker could not prove equal).
//       CHECK:   nvvm.setmaxregister increase 240
//       CHECK:   scf.while
//       CHECK:   } do {
//       CHECK:   ^bb0(%{{.*}}: index, %{{.*}}: index, %[[CQ:.*]]: !kvpipe.pipeline<kv_stages = 1{{.*}}>, %{{.*}}: !kvpipe.pipeline<{{.*}}>, %{{.*}}: !kvpipe.pipeline<{{.*}}>):
//   CHECK-NOT:     gpu.shuffle idx
//       CHECK:     kvpipe.consumer_wait %[[CQ]]
//       CHECK:     kvpipe.warpgroup_mma
//       CHECK:     %[[RELEASED:.*]] = kvpipe.consumer_release %[[CQ]]
// Epilogue: wait until the previous store has read the staging rows.
//       CHECK:     nvvm.cp.async.bulk.wait_group 0 {read}
//       CHECK:     nvvm.barrier id
//       CHECK:     kvpipe.store_fragment
//       CHECK:     nvvm.barrier id
//       CHECK:     kvpipe.tma_store
//       CHECK:     nvvm.cp.async.bulk.commit.group
//   CHECK-NOT:     nvvm.cp.async.bulk.wait_group
//       CHECK:     scf.yield %{{.*}}, %[[RELEASED]]
// The last store is waited for once, before the CTA exits.
//       CHECK:   nvvm.cp.async.bulk.wait_group 0 {read}
//       CHECK:   gpu.return
