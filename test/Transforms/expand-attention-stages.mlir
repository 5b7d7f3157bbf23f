// The attention generator's three stages (AttentionGenerator.h): the
// skeleton in kernel-structure ops, the schedule rewrites, the lowering. The
// thin passes compose to exactly what --kvpipe-expand-attention produces.
//
// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=skeleton" | FileCheck %s --check-prefix=SKELETON
// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=scheduled" --canonicalize --cse | FileCheck %s --check-prefix=SCHEDULED
// RUN: kvpipe-opt %s --kvpipe-expand-attention | FileCheck %s --check-prefix=LOWERED \
// RUN:   --implicit-check-not=kvpipe.warp_roles --implicit-check-not=kvpipe.fragment_ \
// RUN:   --implicit-check-not=kvpipe.quad_sum --implicit-check-not=kvpipe.tile \
// RUN:   --implicit-check-not=kvpipe.for_each_tile
// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=skeleton" --kvpipe-verify-protocol -o /dev/null
// RUN: kvpipe-opt %s --kvpipe-expand-attention="stage=skeleton" \
// RUN:   --kvpipe-overlap-softmax --kvpipe-pingpong-schedule \
// RUN:   --kvpipe-lower-tiles --kvpipe-lower-fragment-ops --kvpipe-lower-warp-roles -o %t.passes.mlir
// RUN: kvpipe-opt %s --kvpipe-expand-attention -o %t.expanded.mlir
// RUN: diff %t.passes.mlir %t.expanded.mlir

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @fa {head_dim = 128 : i64, element_type = bf16, causal = true}
}

// The skeleton: roles with their budgets, each role's work for one tile
// (the kernel's kvpipe.tile, a kvpipe.for_each_tile per role), one K/V loop
// in the simple order (S, retire, release K, softmax, rescale, P V, retire,
// release V), the softmax as fragment ops, no turns between the consumers.
// SKELETON-LABEL: gpu.func @fa(
//       SKELETON:   kvpipe.tile in(
//       SKELETON:   kvpipe.warp_roles producer registers(24) {
//       SKELETON:     kvpipe.for_each_tile iter_args(
//       SKELETON:     kvpipe.tma_load
//       SKELETON:   } consumers(2) registers(240) {
//  SKELETON-NEXT:   ^bb0(%[[CONSUMER:.*]]: index):
//       SKELETON:     kvpipe.for_each_tile iter_args(
//       SKELETON:     scf.for
//       SKELETON:       kvpipe.consumer_wait
//       SKELETON:       kvpipe.warpgroup_mma
//  SKELETON-NEXT:       kvpipe.warpgroup_wait %{{.*}} {pending = 0 : i64}
//  SKELETON-NEXT:       kvpipe.consumer_release
//       SKELETON:       kvpipe.fragment_row_max %{{.*}}[0] : vector<64xf32>
//       SKELETON:       kvpipe.fragment_row_max %{{.*}}[1] : vector<64xf32>
//       SKELETON:       kvpipe.fragment_exp2
//       SKELETON:       kvpipe.fragment_row_sum %{{.*}}[0]
//       SKELETON:       kvpipe.fragment_row_sum %{{.*}}[1]
//       SKELETON:       arith.truncf %{{.*}} : vector<64xf32> to vector<64xbf16>
//  SKELETON-NEXT:       kvpipe.fragment_rescale
//  SKELETON-NEXT:       kvpipe.consumer_wait
//       SKELETON:       kvpipe.warpgroup_mma {{.*}} {transpose_b}
//  SKELETON-NEXT:       kvpipe.warpgroup_wait %{{.*}} {pending = 0 : i64}
//  SKELETON-NEXT:       kvpipe.consumer_release
//  SKELETON-NEXT:       scf.yield
//       SKELETON:     kvpipe.quad_sum
//       SKELETON:     kvpipe.quad_sum
//       SKELETON:     kvpipe.fragment_rescale
//       SKELETON:     kvpipe.store_fragment
//       SKELETON:     kvpipe.yield
//   SKELETON-NOT:   nvvm.barrier.arrive
//   SKELETON-NOT:   nvvm.setmaxregister

// Scheduled: overlapped (block 0 peeled, S_j retired with one group in
// flight) and in turns; still in kernel-structure ops.
// SCHEDULED-LABEL: gpu.func @fa(
//       SCHEDULED:   kvpipe.warp_roles producer registers(24) {
//       SCHEDULED:   } consumers(2) registers(240) {
//       SCHEDULED:     scf.if
//  SCHEDULED-NEXT:       nvvm.barrier.arrive
//       SCHEDULED:     scf.if
//       SCHEDULED:       kvpipe.warpgroup_mma
//       SCHEDULED:       kvpipe.warpgroup_wait %{{.*}} {pending = 0 : i64}
//       SCHEDULED:       kvpipe.fragment_row_max
//       SCHEDULED:       scf.for
//       SCHEDULED:         nvvm.barrier id
//       SCHEDULED:         kvpipe.warpgroup_mma
//       SCHEDULED:         kvpipe.warpgroup_mma {{.*}} {transpose_b}
//       SCHEDULED:         nvvm.barrier.arrive
//  SCHEDULED-NEXT:         kvpipe.warpgroup_wait %{{.*}} {pending = 1 : i64}
//       SCHEDULED:         kvpipe.fragment_exp2
//       SCHEDULED:         kvpipe.warpgroup_wait %{{.*}} {pending = 0 : i64}
//  SCHEDULED-NEXT:         kvpipe.consumer_release
//  SCHEDULED-NEXT:         kvpipe.fragment_rescale
//  SCHEDULED-NEXT:         scf.yield

// Lowered: no kernel-structure op is left.
// LOWERED-LABEL: gpu.func @fa(
//       LOWERED:   gpu.block_id  z
//       LOWERED:   nvvm.setmaxregister decrease 24
//       LOWERED:   nvvm.setmaxregister increase 240
//       LOWERED:   gpu.return
