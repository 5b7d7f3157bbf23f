//===- KernelTransforms.h - rewrites of kernel structure ops ----*- C++ -*-===//
//
// The patterns and rewrites behind the kernel-structure passes
// (Passes.td), exported so that a generator (AttentionGenerator.h) or an
// embedding compiler can apply them without running a pass, as upstream
// NVGPU's Transforms.h does:
//
//   kvpipe.warp_roles          -> populateLowerWarpRolesPatterns
//   kvpipe.tile / for_each_tile, one tile per CTA
//                              -> applyIdleTileSkips, populateLowerTilesPatterns
//   kvpipe.fragment_* / quad_* -> populateLowerFragmentOpsPatterns
//   a persistent loop over tiles -> applyPersistentTiles
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

class TileOp;
class WarpRolesOp;

/// `kvpipe.warp_roles` -> `scf.if` on `kvpipe.warpgroup_id` with
/// `nvvm.setmaxregister` at the start of each role.
void populateLowerWarpRolesPatterns(mlir::RewritePatternSet &patterns);

/// One tile of work per CTA: `kvpipe.tile` -> its region, once, on
/// `gpu.block_id x, y, z` (the grid is the tile space),
/// `kvpipe.for_each_tile` -> its region, once.
void populateLowerTilesPatterns(mlir::RewritePatternSet &patterns);

/// For every `kvpipe.tile` with `has_work` under `root`, to be lowered one
/// tile per CTA: the ops after it in its block (the kernel's work: its
/// barriers, roles and tile loops) go under `scf.if` on the tile's flag,
/// so that a CTA whose tile has no work leaves at once. The flag is the
/// tile's first value, computed alike by every thread. Skips a tile whose
/// block's terminator has operands.
void applyIdleTileSkips(mlir::RewriterBase &rewriter, mlir::Operation *root);

/// Moves the ops from `first` to its block's terminator under `scf.if
/// flag` (a kernel's work that a CTA without any skips: `flag` must be the
/// same in every thread, or the CTA's barriers are made by some threads
/// only). Returns false, changing nothing, where the terminator has
/// operands or `first` is the terminator.
bool runRestOfBlockUnder(mlir::RewriterBase &rewriter, mlir::Value flag,
                         mlir::Operation *first);

/// Makes every `kvpipe.for_each_tile` of the kernel of `tile` (its parent
/// op) a loop over the tiles its CTA takes, for a grid of at most one CTA per
/// SM: round r gives CTA i tile r * gridDim.x + i, mirrored in odd rounds
/// (a snake), while that tile exists; the tile's coordinates (x fastest)
/// and `tile`'s region on them are computed per iteration, and `tile` is
/// erased. A bulk store the tile waits for right after committing
/// it is waited for instead before the next tile's first write of the
/// staged buffer (under the store's thread, then the barrier that follows
/// that write) and once after the loop; a staged buffer that a TMA load also
/// fills gets its own, after the kernel's shared-memory views
/// (PersistentTiles.cpp). Emits an error at the op it cannot handle and
/// fails, changing nothing: a bulk store it cannot defer, staging rows it
/// cannot place, or no `kvpipe.for_each_tile` at all.
mlir::LogicalResult applyPersistentTiles(mlir::RewriterBase &rewriter,
                                         TileOp tile);

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
