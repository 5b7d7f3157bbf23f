//===- KernelStructurePasses.cpp - thin passes over kernel rewrites -------===//
//
// --kvpipe-lower-warp-roles, --kvpipe-lower-tiles, --kvpipe-lower-fragment-ops,
// --kvpipe-persistent-tiles, --kvpipe-overlap-softmax and
// --kvpipe-pingpong-schedule: each runs one of the rewrites that
// KernelTransforms.h exports (implemented in the generator library), so
// that each is testable on its own.
//
//===----------------------------------------------------------------------===//

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelTransforms.h"
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace kvpipe {
#define GEN_PASS_DEF_LOWERWARPROLES
#define GEN_PASS_DEF_LOWERFRAGMENTOPS
#define GEN_PASS_DEF_LOWERTILES
#define GEN_PASS_DEF_PERSISTENTTILES
#define GEN_PASS_DEF_OVERLAPSOFTMAX
#define GEN_PASS_DEF_PINGPONGSCHEDULE
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h.inc"
} // namespace kvpipe

using namespace mlir;
using namespace kvpipe;

namespace {

struct LowerWarpRoles : kvpipe::impl::LowerWarpRolesBase<LowerWarpRoles> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateLowerWarpRolesPatterns(patterns);
    // One application per op, no folding: the kernel stays as generated.
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

struct LowerFragmentOps
    : kvpipe::impl::LowerFragmentOpsBase<LowerFragmentOps> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateLowerFragmentOpsPatterns(patterns);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

struct LowerTiles : kvpipe::impl::LowerTilesBase<LowerTiles> {
  using Base::Base;

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    applyIdleTileSkips(rewriter, getOperation());
    RewritePatternSet patterns(&getContext());
    populateLowerTilesPatterns(patterns);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

struct PersistentTiles : kvpipe::impl::PersistentTilesBase<PersistentTiles> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<TileOp> tiles;
    getOperation()->walk([&](TileOp op) { tiles.push_back(op); });
    IRRewriter rewriter(&getContext());
    // applyPersistentTiles reports what it cannot rewrite at the op.
    for (TileOp op : tiles)
      if (failed(applyPersistentTiles(rewriter, op)))
        return signalPassFailure();
  }
};

struct OverlapSoftmax : kvpipe::impl::OverlapSoftmaxBase<OverlapSoftmax> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<WarpRolesOp> roles;
    getOperation()->walk([&](WarpRolesOp op) { roles.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (WarpRolesOp op : roles)
      if (failed(applyOverlapSoftmax(rewriter, op))) {
        op.emitOpError() << "has no consumer K/V loop whose softmax can be "
                            "overlapped (QK, retire, release, softmax, "
                            "rescale, PV, retire, release)";
        return signalPassFailure();
      }
  }
};

struct PingPongSchedule
    : kvpipe::impl::PingPongScheduleBase<PingPongSchedule> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<WarpRolesOp> roles;
    getOperation()->walk([&](WarpRolesOp op) { roles.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (WarpRolesOp op : roles)
      if (failed(applyPingPongSchedule(rewriter, op, firstBarrier))) {
        op.emitOpError() << "ping-pong needs 2 or more consumer warpgroups, "
                            "got "
                         << op.getConsumerWarpgroups();
        return signalPassFailure();
      }
  }
};

} // namespace
