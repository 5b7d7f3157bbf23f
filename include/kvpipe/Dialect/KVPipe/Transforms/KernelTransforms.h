//===- KernelTransforms.h - rewrites of kernel structure ops ----*- C++ -*-===//
//
// The patterns and rewrites behind the kernel-structure passes
// (Passes.td), exported so that a generator (AttentionGenerator.h) or an
// embedding compiler can apply them without running a pass, as upstream
// NVGPU's Transforms.h does:
//
//   kvpipe.warp_roles          -> populateLowerWarpRolesPatterns
//   kvpipe.fragment_* / quad_* -> populateLowerFragmentOpsPatterns
//   softmax under the GEMMs (FA3 intra-warpgroup) -> applyOverlapSoftmax
//   ping-pong between consumer warpgroups -> applyPingPongSchedule
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_TRANSFORMS_KERNELTRANSFORMS_H
#define KVPIPE_DIALECT_KVPIPE_TRANSFORMS_KERNELTRANSFORMS_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::scf {
class ForOp;
} // namespace mlir::scf

namespace kvpipe {

class WarpRolesOp;

/// `kvpipe.warp_roles` -> `scf.if` on `kvpipe.warpgroup_id` with
/// `nvvm.setmaxregister` at the start of each role.
void populateLowerWarpRolesPatterns(mlir::RewritePatternSet &patterns);

/// The fragment ops of the online softmax (`kvpipe.fragment_row_max`,
/// `fragment_row_sum`, `fragment_rescale`, `fragment_exp2`, `quad_sum`) ->
/// vector, gpu (shuffles), arith and math ops on the accumulator layout.
void populateLowerFragmentOpsPatterns(mlir::RewritePatternSet &patterns);

/// Software-pipelines one consumer K/V loop of the skeleton's shape (S = Q
/// K^T; retire; release K; softmax; O = rescale(O); O += P V; retire;
/// release V) into FA3's intra-warpgroup overlap: block 0 peeled, then S_j
/// issued together with P_{j-1} V_{j-1} and retired first (pending 1), so
/// that S_j's softmax runs under P_{j-1} V_{j-1}; the last P V peeled.
/// Fails, changing nothing, on a loop of another shape
/// (OverlapSoftmax.cpp says which ops delimit the steps).
mlir::LogicalResult overlapSoftmaxLoop(mlir::RewriterBase &rewriter,
                                       mlir::scf::ForOp loop);

/// overlapSoftmaxLoop on every K/V loop in the consumer region of `roles`;
/// fails if there is none.
mlir::LogicalResult applyOverlapSoftmax(mlir::RewriterBase &rewriter,
                                        WarpRolesOp roles);

/// Makes the consumer warpgroups of `roles` take turns issuing their wgmma
/// groups (FA3's inter-warpgroup ping-pong), with named barriers
/// `firstBarrier + consumer`, 256 threads each (the waiting warpgroup and
/// the one before it). A wgmma group is a maximal run of
/// `kvpipe.warpgroup_mma` ops of a block with no `kvpipe.warpgroup_wait`
/// between them: a consumer waits for its turn after the `consumer_wait` of
/// the group's first slot (so that it holds the turn only while it can
/// issue) and passes the turn to the next consumer after the group's last
/// wgmma, before it retires the group. Consumer 0 opens the cycle. Fails
/// (and changes nothing) with fewer than two consumer warpgroups.
mlir::LogicalResult applyPingPongSchedule(mlir::RewriterBase &rewriter,
                                          WarpRolesOp roles,
                                          int64_t firstBarrier);

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_TRANSFORMS_KERNELTRANSFORMS_H
