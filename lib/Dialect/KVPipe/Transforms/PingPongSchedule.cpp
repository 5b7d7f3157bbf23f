//===- PingPongSchedule.cpp - consumer warpgroups take turns --------------===//
//
// FA3's inter-warpgroup schedule as a rewrite of a kernel's warp roles: the
// consumer warpgroups issue their wgmma groups in turn, so that while one
// runs its softmax the tensor cores work on another's GEMMs. The turn is a
// cycle of named barriers, one per consumer (firstBarrier + consumer), each
// counting 256 threads: the 128 of its owner, which waits (`bar.sync`),
// and the 128 of the previous consumer, which arrives (`bar.arrive`) when
// it has issued its group. Consumer 0 opens the cycle by arriving at its own
// barrier. Every consumer must take the same number of turns (the generated
// kernels give every block the same groups), or the last waits forever.
//
// Where a `kvpipe.turn_takers` precedes a group (in its block or an
// enclosing one), only the first `count` consumers take turns there: the
// last of them passes the turn back to consumer 0 (a tile whose last
// warpgroups have no rows, and issue no wgmma).
//
// The turn is taken after the group's first slot is full (its
// `consumer_wait`): a consumer that held the turn while waiting for data
// would stall the others' GEMMs. It is passed right after the group's last
// wgmma is issued, before the group is retired.
//
//===----------------------------------------------------------------------===//

#include "kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelTransforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kvpipe-pingpong-schedule"

using namespace mlir;
using namespace kvpipe;

namespace {

/// A run of wgmma issues of one block: from the op after which the turn is
/// taken (or before which, when no slot wait precedes the group) to the last
/// wgmma.
struct IssueGroup {
  Operation *firstMma;
  Operation *lastMma;
  /// The `consumer_wait` of the group's first slot, if any.
  Operation *slotWait;
};

/// Whether `op` ends a wgmma group: a retire, or control flow (the groups
/// of the generated kernels never span either).
bool endsGroup(Operation *op) {
  return isa<WarpgroupWaitOp, NVVM::WgmmaWaitGroupSyncOp>(op) ||
         op->getNumRegions() != 0;
}

SmallVector<IssueGroup> findIssueGroups(Region &region) {
  // Every block of the region, nested ones included.
  SmallVector<Block *> blocks;
  for (Block &block : region) {
    blocks.push_back(&block);
    block.walk([&](Operation *op) {
      for (Region &nested : op->getRegions())
        for (Block &inner : nested)
          blocks.push_back(&inner);
    });
  }
  SmallVector<IssueGroup> groups;
  for (Block *block : blocks) {
    std::optional<IssueGroup> open;
    // The last slot wait since the previous group ended.
    Operation *slotWait = nullptr;
    for (Operation &op : *block) {
      if (isa<WarpgroupMmaOp>(op)) {
        if (!open)
          open = IssueGroup{&op, &op, slotWait};
        open->lastMma = &op;
        continue;
      }
      if (isa<ConsumerWaitOp>(op) && !open)
        slotWait = &op;
      if (endsGroup(&op)) {
        if (open)
          groups.push_back(*open);
        open.reset();
        slotWait = nullptr;
      }
    }
    if (open)
      groups.push_back(*open);
  }
  return groups;
}

/// The count of the `kvpipe.turn_takers` that governs `op` in `region`: the
/// last one before it in its block or an enclosing one; null without one.
Value findTurnTakers(Operation *op, Region &region) {
  for (Operation *at = op; at && region.isAncestor(at->getParentRegion());
       at = at->getParentOp())
    for (Operation *before = at->getPrevNode(); before;
         before = before->getPrevNode())
      if (auto takers = dyn_cast<TurnTakersOp>(before))
        return takers.getCount();
  return Value();
}

/// Whether `op` is, or holds, a `consumer_wait`: the first such op of the
/// consumer region is where its pipelined work begins.
bool startsPipelinedWork(Operation &op) {
  return op.walk([](ConsumerWaitOp) { return WalkResult::interrupt(); })
      .wasInterrupted();
}

} // namespace

LogicalResult kvpipe::applyPingPongSchedule(RewriterBase &rewriter,
                                            WarpRolesOp roles,
                                            int64_t firstBarrier) {
  int64_t consumers = roles.getConsumerWarpgroups();
  if (consumers < 2)
    return failure();
  OpBuilder::InsertionGuard guard(rewriter);
  Location loc = roles.getLoc();
  Value consumer = roles.getConsumerIndex();
  auto index = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, v);
  };
  auto i32 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(rewriter, loc, v, 32);
  };
  // The owner of the barrier and the consumer before it.
  int64_t threads = 2 * AccumulatorLayout::kThreads;
  auto barrierOf = [&](Value c) -> Value {
    return arith::IndexCastOp::create(
        rewriter, loc, rewriter.getI32Type(),
        arith::AddIOp::create(rewriter, loc, c, index(firstBarrier)));
  };

  SmallVector<IssueGroup> groups = findIssueGroups(roles.getConsumer());
  LLVM_DEBUG(llvm::dbgs() << "ping-pong over " << consumers << " consumers: "
                          << groups.size() << " wgmma groups\n");
  for (const IssueGroup &group : groups) {
    // Wait for this consumer's turn.
    if (group.slotWait)
      rewriter.setInsertionPointAfter(group.slotWait);
    else
      rewriter.setInsertionPoint(group.firstMma);
    NVVM::BarrierOp::create(rewriter, loc, Type(), barrierOf(consumer),
                            i32(threads), nullptr, Value());
    // Pass it on: consumer 0 -> 1 (-> 2) -> 0, or among the turn takers.
    rewriter.setInsertionPointAfter(group.lastMma);
    Value after = arith::AddIOp::create(rewriter, loc, consumer, index(1));
    Value next;
    if (Value takers = findTurnTakers(group.firstMma, roles.getConsumer()))
      next = arith::SelectOp::create(
          rewriter, loc,
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, after,
                                takers),
          index(0), after);
    else
      next = arith::RemUIOp::create(rewriter, loc, after, index(consumers));
    NVVM::BarrierArriveOp::create(rewriter, loc, barrierOf(next),
                                  i32(threads));
  }

  // Consumer 0 opens the cycle: it arrives at its own barrier, which its
  // first wait then completes; every other wait is completed by the
  // previous consumer's arrival. It does so once the consumer has set up its
  // views of shared memory: after the last memref.subview before the
  // consumer's pipelined work begins (its first op holding a
  // consumer_wait), or right before that work without one. (Anywhere before
  // the first turn is correct; this place keeps the kernels the generator
  // produced before the schedule was a rewrite.)
  Block &body = roles.getConsumerBlock();
  auto start = llvm::find_if(body, startsPipelinedWork);
  Operation *lastView = nullptr;
  for (Operation &op : llvm::make_range(body.begin(), start))
    if (isa<memref::SubViewOp>(op))
      lastView = &op;
  if (lastView)
    rewriter.setInsertionPointAfter(lastView);
  else
    rewriter.setInsertionPoint(&body, start);
  Value first = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                      consumer, index(0));
  auto ifFirst = scf::IfOp::create(rewriter, loc, first,
                                   /*withElseRegion=*/false);
  rewriter.setInsertionPointToStart(ifFirst.thenBlock());
  NVVM::BarrierArriveOp::create(rewriter, loc, i32(firstBarrier), i32(threads));
  // The turn takers are the schedule's: nothing else reads them.
  SmallVector<TurnTakersOp> takers;
  roles.getConsumer().walk([&](TurnTakersOp op) { takers.push_back(op); });
  for (TurnTakersOp op : takers)
    rewriter.eraseOp(op);
  return success();
}
