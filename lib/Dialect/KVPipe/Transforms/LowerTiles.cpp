//===- LowerTiles.cpp - one tile of work per CTA --------------------------===//
//
// The default lowering of a kernel's tiles (KVPipeKernelOps.td): the grid is
// the tile space and each CTA does the tile it is given,
//
//   kvpipe.tile in (...) {^bb0(%x, %y, %z): ...} -> the region, once, on
//                                                 gpu.block_id x, y, z
//   kvpipe.for_each_tile iter_args(%a) {...}  -> the region, once, on %a
//
// so that the tile's values are computed where the generator put them, once
// for all roles. The persistent loop over tiles is a rewrite
// applied before this one (PersistentTiles.cpp).
//
// Before the patterns, a tile that can say it has no work (`has_work`) puts
// the rest of the kernel under its flag (applyIdleTileSkips): an empty CTA
// costs its launch and the reads its flag is computed from.
//
//===----------------------------------------------------------------------===//

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelTransforms.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/RegionUtils.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kvpipe-lower-tiles"

using namespace mlir;
using namespace kvpipe;

namespace {

/// Replaces `op` by its single-block region, run once on `arguments`: the
/// results are what its `kvpipe.yield` yields (read after inlining, as it
/// may yield the region's arguments).
void inlineRegionBefore(PatternRewriter &rewriter, Operation *op,
                        ValueRange arguments) {
  Block &body = op->getRegion(0).front();
  auto yield = cast<YieldOp>(body.getTerminator());
  rewriter.inlineBlockBefore(&body, op, arguments);
  SmallVector<Value> values(yield.getValues());
  rewriter.eraseOp(yield);
  rewriter.replaceOp(op, values);
}

struct TileOpLowering : OpRewritePattern<TileOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TileOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    // z, y, x: the order the generator emitted the block ids in before the
    // tile was an op (the kernels stay byte-identical).
    Value z = gpu::BlockIdOp::create(rewriter, loc, gpu::Dimension::z);
    Value y = gpu::BlockIdOp::create(rewriter, loc, gpu::Dimension::y);
    Value x = gpu::BlockIdOp::create(rewriter, loc, gpu::Dimension::x);
    llvm::SetVector<Operation *> sizes;
    for (Value size : op->getOperands())
      if (Operation *def = size.getDefiningOp())
        sizes.insert(def);
    inlineRegionBefore(rewriter, op, ValueRange{x, y, z});
    // The sizes only bound a loop over tiles; the grid is the host's. Values
    // computed for them alone are dropped.
    for (Operation *def : sizes)
      if (isOpTriviallyDead(def))
        rewriter.eraseOp(def);
    return success();
  }
};

struct ForEachTileOpLowering : OpRewritePattern<ForEachTileOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ForEachTileOp op,
                                PatternRewriter &rewriter) const override {
    LLVM_DEBUG(llvm::dbgs() << "one tile per CTA: " << op.getLoc() << "\n");
    inlineRegionBefore(rewriter, op, op.getInits());
    return success();
  }
};

} // namespace

bool kvpipe::runRestOfBlockUnder(RewriterBase &rewriter, Value flag,
                                 Operation *first) {
  Block *block = first->getBlock();
  Operation *terminator = block->getTerminator();
  if (first == terminator || terminator->getNumOperands())
    return false;
  SmallVector<Operation *> work;
  for (Operation *op = first; op != terminator; op = op->getNextNode())
    work.push_back(op);
  rewriter.setInsertionPoint(first);
  auto ifOp = scf::IfOp::create(rewriter, first->getLoc(), flag,
                                /*withElse=*/false);
  Operation *thenYield = ifOp.thenBlock()->getTerminator();
  for (Operation *op : work)
    rewriter.moveOpBefore(op, thenYield);
  return true;
}

void kvpipe::applyIdleTileSkips(RewriterBase &rewriter, Operation *root) {
  SmallVector<TileOp> tiles;
  root->walk([&](TileOp tile) {
    if (tile.getHasWork())
      tiles.push_back(tile);
  });
  // The kernel's work after the tile, to the block's terminator.
  for (TileOp tile : tiles)
    if (Operation *first = tile->getNextNode())
      runRestOfBlockUnder(rewriter, tile.getResult(0), first);
}

void kvpipe::populateLowerTilesPatterns(RewritePatternSet &patterns) {
  patterns.add<TileOpLowering, ForEachTileOpLowering>(
      patterns.getContext());
}
