//===- PersistentTiles.cpp - each CTA loops over its tiles ----------------===//
//
// The persistent schedule as a rewrite of a kernel's tiles
// (KVPipeKernelOps.td): the host launches at most one CTA per SM, and every
// `kvpipe.for_each_tile` becomes a loop over the tiles its CTA takes,
//
//   %grid = gpu.grid_dim x ; %cta = gpu.block_id x
//   scf.while (%round = 0, %states...) {
//     %pos  = %round odd ? %grid - 1 - %cta : %cta    // snake
//     %tile = %round * %grid + %pos
//     scf.condition(%tile < size_x * size_y * size_z) %round, %tile, ...
//   } do {
//     x = tile % size_x; y = (tile / size_x) % size_y; z = ... / size_y
//     <kvpipe.tile's region on (x, y, z): the tile's values>
//     <the kvpipe.for_each_tile region>
//     scf.yield %round + 1, <yielded>
//   }
//
// Round r gives CTA i the tile r * G + i, or r * G + (G - 1 - i) in odd
// rounds (G = gridDim.x): tiles are ordered x fastest (the forward kernel's
// Q block, longest first when causal), so this snake pairs a CTA's long
// tiles with short ones, and the CTAs working at one time share the K/V of
// a few heads in L2. Every role of the CTA runs the same rounds, so the
// pipelines stay balanced.
//
// With a `schedule` (a table the host computed for the grid it launches,
// docs/kernel-abi.md), round r's tile is instead the table's entry
// r * G + i, loaded in the round before (the first before the loop) so that
// its latency hides under a tile's work, and the loop runs while the entry
// is a tile (the host ends each CTA's column with -1). Every role loads the
// same entries of a read-only kernel parameter at the same CTA-uniform
// addresses, which the protocol checker recognises as equal (rule 5).
//
// The loop runs while the CTA's tile exists (only the last round can be
// partial) rather than for a trip count that divides by a runtime value,
// which ptxas computes in ordinary registers. Measured against the division
// form: no spills at head dim 128 (44 bytes before) and 4-7 % faster,
// though the wgmma descriptors still leave the uniform registers
// (docs/performance.md v5).
//
// A tile's output store outlives the tile. One tile per CTA, the epilogue
// waits for its bulk store right after committing it (shared memory must
// outlive the store's reads) and may stage the output in a buffer the
// pipelines no longer use (the forward kernel: Q's rows). In a loop, the
// wait moves to before the next tile's first write of the staging buffer,
// with the epilogue's barrier so that no thread writes before the waiting
// one saw the store finish, and once after the loop; a staging buffer that
// a TMA load also fills (the next tile's Q lands there while the epilogue
// runs) gets a buffer of its own after the kernel's other shared-memory
// views.
//
//===----------------------------------------------------------------------===//

#include "kvpipe/Dialect/KVPipe/IR/AttentionConfig.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/IR/SwizzledTile.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelTransforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kvpipe-persistent-tiles"

using namespace mlir;
using namespace kvpipe;

namespace {

/// The `memref.view` a staging buffer is a subview of (through subviews).
memref::ViewOp rootView(Value buffer) {
  while (auto subview = buffer.getDefiningOp<memref::SubViewOp>())
    buffer = subview.getSource();
  return buffer.getDefiningOp<memref::ViewOp>();
}

/// Where a new shared-memory buffer goes: after every `memref.view` of the
/// same memory, whose byte shifts must all be constants or one base (the
/// generator's alignment pad) plus constants.
struct ViewPlacement {
  memref::ViewOp last;
  Value base;
  int64_t offset;
  /// The new buffer's type.
  MemRefType type;
};

/// The type of a buffer of its own for `staged`, `root` or a subview of it:
/// `root`'s shape, each dimension the subview takes from offset 0 cut to
/// the subview's size (the forward kernel stages value_head_dim columns of
/// Q's head_dim). Fails if the subview of the new buffer would have another
/// type than `staged`.
FailureOr<MemRefType> ownRowsType(memref::ViewOp root, Value staged) {
  MemRefType rootType = root.getType();
  auto subview = staged.getDefiningOp<memref::SubViewOp>();
  if (!subview)
    return rootType;
  if (subview.getSource() != root.getResult())
    return failure();
  SmallVector<int64_t> shape(rootType.getShape());
  for (auto [i, offset, size] : llvm::enumerate(subview.getMixedOffsets(),
                                                subview.getStaticSizes()))
    if (isConstantIntValue(offset, 0) && !ShapedType::isDynamic(size))
      shape[i] = size;
  auto type = MemRefType::get(shape, rootType.getElementType(),
                              MemRefLayoutAttrInterface(),
                              rootType.getMemorySpace());
  MemRefType rows = memref::SubViewOp::inferResultType(
      type, subview.getMixedOffsets(), subview.getMixedSizes(),
      subview.getMixedStrides());
  if (rows != subview.getType())
    return failure();
  return type;
}

FailureOr<ViewPlacement> placeAfterViews(memref::ViewOp like) {
  ViewPlacement placement{nullptr, nullptr, 0, like.getType()};
  for (Operation *user : like.getSource().getUsers()) {
    auto view = dyn_cast<memref::ViewOp>(user);
    if (!view)
      continue;
    Value pad;
    std::optional<int64_t> offset;
    if (auto add = view.getByteShift().getDefiningOp<arith::AddIOp>()) {
      pad = add.getLhs();
      offset = getConstantIntValue(add.getRhs());
    } else {
      offset = getConstantIntValue(view.getByteShift());
    }
    MemRefType type = view.getType();
    if (!offset || (placement.last && pad != placement.base) ||
        !type.hasStaticShape() || view->getBlock() != like->getBlock())
      return like.emitOpError()
             << "holds staging rows the persistent loop must move, but the "
                "views of its shared memory are not at one base plus "
                "constant offsets in one block";
    placement.base = pad;
    placement.offset =
        std::max(placement.offset,
                 *offset + getBufferBytes(type));
    if (!placement.last || placement.last->isBeforeInBlock(view))
      placement.last = view;
  }
  // A swizzle atom (8 rows of 128 bytes) is the alignment TMA and wgmma
  // assume of a tile.
  placement.offset = llvm::alignTo(placement.offset, 1024);
  return placement;
}

/// Clones `op` at the rewriter's insertion point, with the pure operands
/// defined after it in its block cloned first.
Operation *cloneWithLocalOperands(RewriterBase &rewriter, Operation *op) {
  IRMapping mapping;
  Operation *point = &*rewriter.getInsertionPoint();
  for (Value operand : op->getOperands()) {
    Operation *def = operand.getDefiningOp();
    if (def && def->getBlock() == point->getBlock() &&
        !def->isBeforeInBlock(point) && isPure(def))
      mapping.map(operand, cloneWithLocalOperands(rewriter, def)->getResult(
                               cast<OpResult>(operand).getResultNumber()));
  }
  return rewriter.clone(*op, mapping);
}

/// A bulk store a tile waits for right after committing it (one tile per
/// CTA), and what deferring the wait involves.
struct StagedStoreWait {
  NVVM::CpAsyncBulkWaitGroupOp wait;
  /// The thread that issued the store (the condition of its scf.if).
  Value elected;
  /// The rows the stores read, their first write in the tile and the
  /// barrier after it that orders all threads' writes before the store.
  Value staged;
  StoreFragmentOp firstWrite;
  NVVM::BarrierOp barrier;
  /// Where rows of their own go, when a TMA load also fills `staged`.
  std::optional<ViewPlacement> ownRows;
};

/// Finds the stores of `loop` to defer, or says at the wait why one cannot
/// be.
FailureOr<SmallVector<StagedStoreWait>>
findStagedStoreWaits(ForEachTileOp loop, ArrayRef<Operation *> tmaLoads) {
  SmallVector<NVVM::CpAsyncBulkWaitGroupOp> waits;
  loop.getBody().walk([&](NVVM::CpAsyncBulkWaitGroupOp wait) {
    if (isa_and_nonnull<NVVM::CpAsyncBulkCommitGroupOp>(wait->getPrevNode()))
      waits.push_back(wait);
  });
  SmallVector<StagedStoreWait> found;
  for (NVVM::CpAsyncBulkWaitGroupOp wait : waits) {
    auto fail = [&](const Twine &why) {
      return wait.emitOpError()
             << "ends a bulk store the persistent loop cannot defer: " << why;
    };
    StagedStoreWait store{wait, nullptr, nullptr, nullptr, nullptr,
                          std::nullopt};
    auto issuer = dyn_cast<scf::IfOp>(wait->getParentOp());
    if (!issuer || issuer->getBlock()->getParentOp() != loop)
      return fail("it must be in an scf.if (the issuing thread) directly in "
                  "the tile's region");
    store.elected = issuer.getCondition();
    if (!store.elected.getParentRegion()->isProperAncestor(&loop.getBody()))
      return fail("the issuing thread's condition must be defined outside "
                  "the tile's work");
    for (Operation &op : *wait->getBlock())
      if (auto tmaStore = dyn_cast<TMAStoreOp>(op))
        if (auto tile =
                tmaStore.getSource().getDefiningOp<memref::SubViewOp>())
          store.staged = tile.getSource();
    if (!store.staged ||
        !store.staged.getParentRegion()->isProperAncestor(&loop.getBody()))
      return fail("its kvpipe.tma_store ops must read subviews of one buffer "
                  "defined outside the tile's work");
    for (Operation &op : loop.getBodyBlock())
      if (auto write = dyn_cast<StoreFragmentOp>(op);
          write && write.getDest() == store.staged) {
        store.firstWrite = write;
        break;
      }
    for (Operation *op = store.firstWrite ? store.firstWrite->getNextNode()
                                          : nullptr;
         op && !store.barrier; op = op->getNextNode())
      store.barrier = dyn_cast<NVVM::BarrierOp>(op);
    if (!store.barrier)
      return fail("the staged buffer must be written by kvpipe.store_fragment "
                  "in the tile's region, followed by an nvvm.barrier");
    memref::ViewOp root = rootView(store.staged);
    if (!root)
      return fail("the staged buffer must be a view of shared memory");
    if (llvm::any_of(tmaLoads, [&](Operation *load) {
          return rootView(cast<AsyncSlotCopyOpInterface>(load).getDest()) ==
                 root;
        })) {
      FailureOr<ViewPlacement> placement = placeAfterViews(root);
      if (failed(placement))
        return failure();
      FailureOr<MemRefType> type = ownRowsType(root, store.staged);
      if (failed(type))
        return fail("the staged rows must be the shared-memory view a TMA "
                    "load fills, or one subview of it that a buffer of its "
                    "own can take");
      placement->type = *type;
      // The rows must lie in the shared memory the kernel declares (the
      // generator reserves them last: AttentionConfig::oOffset), the
      // alignment pad's slack included where the views start at one.
      auto func = root->getParentOfType<FunctionOpInterface>();
      auto abi = func ? func->getAttrOfType<DictionaryAttr>(kAttentionAbiAttrName)
                      : DictionaryAttr();
      auto declared = abi ? abi.getAs<IntegerAttr>(kDynamicSharedMemoryKey)
                          : IntegerAttr();
      int64_t end = placement->offset + getBufferBytes(*type) +
                    (placement->base ? AttentionConfig::kAlignmentSlack : 0);
      if (declared && end > declared.getInt())
        return fail("the output's own staging rows end at byte " +
                    std::to_string(end) + ", past the kernel's " +
                    std::to_string(declared.getInt()) +
                    " bytes of dynamic shared memory");
      store.ownRows = *placement;
    }
    found.push_back(store);
  }
  return found;
}

/// Moves `store`'s wait to before the next tile's first write of its rows
/// (the file comment), and gives the tile rows of its own if it must.
void deferStoreWait(RewriterBase &rewriter, ForEachTileOp loop,
                    StagedStoreWait store) {
  // The previous tile's store must have read the staging rows before they
  // are overwritten; only the thread that issued it can wait for it, and the
  // others wait for that thread at the barrier.
  rewriter.setInsertionPoint(store.firstWrite);
  auto previous = scf::IfOp::create(rewriter, store.wait.getLoc(),
                                    store.elected, /*withElseRegion=*/false);
  rewriter.moveOpBefore(store.wait, previous.thenBlock()->getTerminator());
  rewriter.setInsertionPoint(store.firstWrite);
  cloneWithLocalOperands(rewriter, store.barrier);
  if (!store.ownRows)
    return;

  // A TMA load fills the staging rows too: the next tile's load would
  // overwrite the output being stored. They get their own.
  const ViewPlacement &placement = *store.ownRows;
  memref::ViewOp root = rootView(store.staged);
  Location loc = root.getLoc();
  LLVM_DEBUG(llvm::dbgs() << "output staging rows at byte "
                          << placement.offset << "\n");
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointAfter(placement.last);
  Value shift = arith::ConstantIndexOp::create(rewriter, loc, placement.offset);
  if (placement.base)
    shift = arith::AddIOp::create(rewriter, loc, placement.base, shift);
  Value rows = memref::ViewOp::create(rewriter, loc, placement.type,
                                      root.getSource(), shift, ValueRange{});
  if (auto subview = store.staged.getDefiningOp<memref::SubViewOp>()) {
    rewriter.setInsertionPointAfter(subview);
    IRMapping mapping;
    mapping.map(subview.getSource(), rows);
    rows = rewriter.clone(*subview, mapping)->getResult(0);
  }
  // From its first write on, the buffer is the tile's output.
  rewriter.replaceUsesWithIf(store.staged, rows, [&](OpOperand &use) {
    Operation *user =
        loop.getBodyBlock().findAncestorOpInBlock(*use.getOwner());
    return user && !user->isBeforeInBlock(store.firstWrite);
  });
}

/// `loop` as an scf.while over the CTA's tiles (the file comment).
void loopOverTiles(RewriterBase &rewriter, ForEachTileOp loop, TileOp tile,
                   Value numTiles) {
  Location loc = loop.getLoc();
  auto index = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, v);
  };
  rewriter.setInsertionPoint(loop);
  Value ctas = gpu::GridDimOp::create(rewriter, loc, gpu::Dimension::x);
  Value cta = gpu::BlockIdOp::create(rewriter, loc, gpu::Dimension::x);
  Value schedule = tile.getSchedule();
  // The table's entry of round `r` for this CTA, as an index (-1, the end
  // of the column, becomes the largest: no tile).
  auto scheduled = [&](Value r) -> Value {
    Value position = arith::IndexCastOp::create(
        rewriter, loc, rewriter.getI64Type(),
        arith::AddIOp::create(rewriter, loc,
                              arith::MulIOp::create(rewriter, loc, r, ctas),
                              cta));
    Value address = LLVM::GEPOp::create(rewriter, loc, schedule.getType(),
                                        rewriter.getI32Type(), schedule,
                                        ValueRange{position});
    return arith::IndexCastOp::create(
        rewriter, loc, rewriter.getIndexType(),
        LLVM::LoadOp::create(rewriter, loc, rewriter.getI32Type(), address));
  };
  SmallVector<Value> inits = {index(0)};
  if (schedule)
    inits.push_back(scheduled(inits.front()));
  llvm::append_range(inits, loop.getInits());
  Type indexType = rewriter.getIndexType();
  SmallVector<Type> types = {indexType, indexType};
  llvm::append_range(types, loop.getInits().getTypes());
  auto whileOp = scf::WhileOp::create(rewriter, loc, types, inits);

  // Before: the round's tile, and whether it exists.
  SmallVector<Location> locs(types.size(), loc);
  unsigned carried = schedule ? 2 : 1;
  Block *before = rewriter.createBlock(
      &whileOp.getBefore(), whileOp.getBefore().end(),
      TypeRange(types).drop_front(2 - carried),
      ArrayRef(locs).drop_front(2 - carried));
  Value round = before->getArgument(0);
  Value linear;
  if (schedule) {
    linear = before->getArgument(1);
  } else {
    Value odd = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ne,
        arith::AndIOp::create(rewriter, loc, round, index(1)), index(0));
    Value position = arith::SelectOp::create(
        rewriter, loc, odd,
        arith::SubIOp::create(
            rewriter, loc,
            arith::SubIOp::create(rewriter, loc, ctas, index(1)), cta),
        cta);
    linear = arith::AddIOp::create(
        rewriter, loc, arith::MulIOp::create(rewriter, loc, round, ctas),
        position);
  }
  Value exists = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult,
                                       linear, numTiles);
  SmallVector<Value> forwarded = {round, linear};
  llvm::append_range(forwarded, before->getArguments().drop_front(carried));
  scf::ConditionOp::create(rewriter, loc, exists, forwarded);

  // After: the tile's coordinates, x fastest (right to left: the order the
  // generator emitted them in before the loop was a rewrite), its values,
  // then the region.
  Block *after = rewriter.createBlock(
      &whileOp.getAfter(), whileOp.getAfter().end(), types, locs);
  Value sizeX = tile.getSizeX(), sizeY = tile.getSizeY();
  Value current = after->getArgument(1);
  Value nextRound =
      arith::AddIOp::create(rewriter, loc, after->getArgument(0), index(1));
  // The next round's entry, loaded before this tile's work.
  Value next = schedule ? scheduled(nextRound) : Value();
  Value yz = arith::DivUIOp::create(rewriter, loc, current, sizeX);
  Value z = arith::DivUIOp::create(rewriter, loc, yz, sizeY);
  Value y = arith::RemUIOp::create(rewriter, loc, yz, sizeY);
  Value x = arith::RemUIOp::create(rewriter, loc, current, sizeX);
  IRMapping mapping;
  mapping.map(tile.getBodyBlock().getArguments(), ValueRange{x, y, z});
  for (Operation &op : tile.getBodyBlock().without_terminator())
    rewriter.clone(op, mapping);
  SmallVector<Value> values = llvm::map_to_vector(
      cast<YieldOp>(tile.getBodyBlock().getTerminator()).getValues(),
      [&](Value v) { return mapping.lookupOrDefault(v); });

  // The region's yield is read after the merge: it may yield the region's
  // arguments, which the merge replaces.
  Block &body = loop.getBodyBlock();
  auto yield = cast<YieldOp>(body.getTerminator());
  rewriter.mergeBlocks(&body, after, after->getArguments().drop_front(2));
  SmallVector<Value> yielded = {nextRound};
  if (next)
    yielded.push_back(next);
  llvm::append_range(yielded, yield.getValues());
  rewriter.setInsertionPoint(yield);
  scf::YieldOp::create(rewriter, loc, yielded);
  rewriter.eraseOp(yield);
  for (auto [result, value] : llvm::zip_equal(tile.getResults(), values))
    rewriter.replaceUsesWithIf(result, value, [&](OpOperand &use) {
      return whileOp->isProperAncestor(use.getOwner());
    });
  rewriter.replaceOp(loop, whileOp.getResults().drop_front(2));
}

} // namespace

LogicalResult kvpipe::applyPersistentTiles(RewriterBase &rewriter,
                                           TileOp tile) {
  Operation *kernel = tile->getParentOp();
  SmallVector<ForEachTileOp> loops;
  SmallVector<Operation *> tmaLoads;
  kernel->walk([&](Operation *op) {
    if (auto loop = dyn_cast<ForEachTileOp>(op))
      loops.push_back(loop);
    else if (isa<AsyncSlotCopyOpInterface>(op))
      tmaLoads.push_back(op);
  });
  if (loops.empty())
    return tile.emitOpError()
           << "has no 'kvpipe.for_each_tile' to make persistent";
  LLVM_DEBUG(llvm::dbgs() << "persistent tiles: " << loops.size()
                          << " loops\n");

  // Everything is checked before anything changes.
  SmallVector<SmallVector<StagedStoreWait>> stores;
  for (ForEachTileOp loop : loops) {
    FailureOr<SmallVector<StagedStoreWait>> found =
        findStagedStoreWaits(loop, tmaLoads);
    if (failed(found))
      return failure();
    stores.push_back(std::move(*found));
  }

  OpBuilder::InsertionGuard guard(rewriter);
  for (auto [loop, loopStores] : llvm::zip_equal(loops, stores))
    for (const StagedStoreWait &store : loopStores)
      deferStoreWait(rewriter, loop, store);
  // The tile count, where the tile was.
  rewriter.setInsertionPoint(tile);
  Value numTiles = arith::MulIOp::create(
      rewriter, tile.getLoc(),
      arith::MulIOp::create(rewriter, tile.getLoc(), tile.getSizeX(),
                            tile.getSizeY()),
      tile.getSizeZ());
  for (auto [loop, loopStores] : llvm::zip_equal(loops, stores)) {
    // The last tile's output store must finish reading shared memory before
    // the CTA exits.
    rewriter.setInsertionPointAfter(loop);
    for (const StagedStoreWait &store : loopStores) {
      auto last = scf::IfOp::create(rewriter, loop.getLoc(), store.elected,
                                    /*withElseRegion=*/false);
      rewriter.setInsertionPointToStart(last.thenBlock());
      NVVM::CpAsyncBulkWaitGroupOp::create(rewriter, loop.getLoc(),
                                           rewriter.getI32IntegerAttr(0),
                                           rewriter.getUnitAttr());
      rewriter.setInsertionPointAfter(last);
    }
    loopOverTiles(rewriter, loop, tile, numTiles);
  }
  rewriter.eraseOp(tile);
  return success();
}
