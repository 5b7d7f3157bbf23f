//===- VerifyProtocol.cpp - check the producer/consumer protocol ----------===//
//
// A pipeline that breaks its protocol does not fail on the GPU: it hangs, or
// it reads a slot the producer is overwriting. This pass finds, statically,
// the mistakes that cause either (Passes.td lists them) and reports each at
// the offending op, naming the pipeline and the sub-stage, with notes at the
// ops it conflicts with. It changes nothing.
//
// The rules, in the order they are checked:
//   1. linear use: a state is advanced at most once and not used after;
//   2. balance: the producer and consumer loops of a pipeline advance it by
//      the same number of slots;
//   3. pairing: wait/release and acquire/commit pairs in one block, in
//      sub-stage order, and branches that advance alike;
//   4. release after retire: no release of a slot a wgmma still reads;
//   5. transactions: expect_tx bytes match the loads, every load on a
//      producer barrier is expected by a commit;
//   6. barriers: one kvpipe.init per kvpipe.create, by the whole CTA, before
//      any other use;
//   7. flow: every state comes from and goes to ops the analysis models, no
//      state is passed twice, loops carry their own states;
//   8. totals: each side advances the pipeline by the same number of slots
//      from its creation, compared symbolically;
//   9. reads: a wgmma reads a slot only after a consumer_wait of it.
//
// What a rule cannot decide is reported as a warning that starts with
// "cannot prove" (an error with `strict`): silence means proven. The
// contract, and its assumptions, are in docs/protocol-checking.md.
//
//===----------------------------------------------------------------------===//

#include "kvpipe/Dialect/KVPipe/Analysis/BarrierOrigins.h"
#include "kvpipe/Dialect/KVPipe/Analysis/ChainGuards.h"
#include "kvpipe/Dialect/KVPipe/Analysis/ProtocolAnalysis.h"
#include "kvpipe/Dialect/KVPipe/Analysis/ThreadCounts.h"
#include "kvpipe/Dialect/KVPipe/Analysis/Transactions.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

#include <deque>
#include <map>

namespace kvpipe {
#define GEN_PASS_DEF_VERIFYPROTOCOL
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h.inc"
} // namespace kvpipe

using namespace mlir;
using namespace kvpipe;

/// The sub-stage an op names, if it names one.
static std::optional<int64_t> getStageOf(Operation *op) {
  if (auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(op))
    return protocolOp.getSubStage();
  return std::nullopt;
}

/// Whether `op` opens or closes a slot's sub-stage: a wait, a release, an
/// acquire or a commit.
static bool opensOrCloses(Operation *op) {
  auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(op);
  return protocolOp && (protocolOp.opensSlot() || protocolOp.closesSlot());
}

/// The op that opens a sub-stage on `side`, for diagnostics.
static StringRef getOpenerName(PipelineSide side) {
  return side == PipelineSide::consumer ? "consumer_wait" : "producer_acquire";
}

/// The static trip count of an `scf.for`, when it fits comfortably.
static std::optional<int64_t> getTripCount(Operation *loop) {
  auto forOp = dyn_cast<scf::ForOp>(loop);
  if (!forOp)
    return std::nullopt;
  std::optional<APInt> trips = forOp.getStaticTripCount();
  if (!trips || trips->getActiveBits() > 62)
    return std::nullopt;
  return static_cast<int64_t>(trips->getZExtValue());
}

/// The same SSA value or equal constants.
static bool isSameBound(Value a, Value b) {
  if (a == b)
    return true;
  std::optional<int64_t> ca = getConstantIntValue(a);
  std::optional<int64_t> cb = getConstantIntValue(b);
  return ca && cb && *ca == *cb;
}

/// Whether two `scf.for` loops run the same number of iterations because
/// their bounds and steps are the same.
static bool haveSameTripCount(Operation *a, Operation *b) {
  auto fa = dyn_cast<scf::ForOp>(a), fb = dyn_cast<scf::ForOp>(b);
  return fa && fb && isSameBound(fa.getLowerBound(), fb.getLowerBound()) &&
         isSameBound(fa.getUpperBound(), fb.getUpperBound()) &&
         isSameBound(fa.getStep(), fb.getStep());
}

namespace {

/// The wait (or acquire) of each sub-stage of one slot that is still open
/// in a block, and the last sub-stages seen, for the order check.
struct SlotPairing {
  SmallVector<Operation *> open;
  /// The first op of each kind in the block, and its sub-stage.
  Operation *firstOpen = nullptr;
  int64_t firstOpenStage = -1;
  Operation *firstClose = nullptr;
  int64_t firstCloseStage = -1;
  Operation *lastOpen = nullptr;
  int64_t lastOpenStage = -1;
  Operation *lastClose = nullptr;
  int64_t lastCloseStage = -1;
};

class ProtocolChecker {
public:
  ProtocolChecker(Operation *root, bool strict)
      : root(root), flow(root), arithmetic(flow), dominance(root),
        strict(strict) {}

  /// Runs every rule; false when any reported an error.
  bool run() {
    checkBarriers();
    checkFlow();
    checkLinearUse();
    checkBalance();
    checkBranches();
    checkTotals();
    root->walk([&](Block *block) {
      if (block->getParent()->hasOneBlock())
        checkBlock(*block);
    });
    root->walk([&](Operation *op) {
      for (Region &region : op->getRegions())
        if (!region.hasOneBlock() && !region.empty())
          checkCfPairing(region);
    });
    checkReads();
    checkTransactions();
    checkLoadSlots();
    checkReleaseArrivals();
    return !hasErrors;
  }

private:
  /// " (sub-stage N of pipeline created at ... : TYPE)".
  std::string where(Value state, std::optional<int64_t> stage = std::nullopt) {
    std::string text = " (";
    if (stage)
      text += "sub-stage " + std::to_string(*stage) + " of ";
    return text + flow.describe(state) + ")";
  }

  InFlightDiagnostic error(Operation *op) {
    hasErrors = true;
    return op->emitOpError();
  }

  /// A property the checker could not prove at `op`: a warning, or an error
  /// in strict mode. The message continues after "cannot prove ".
  InFlightDiagnostic unproven(Operation *op) {
    if (strict) {
      hasErrors = true;
      return op->emitOpError() << "cannot prove ";
    }
    return op->emitWarning() << "'" << op->getName() << "' op cannot prove ";
  }

  //===--------------------------------------------------------------------===//
  // 1. Linear use
  //===--------------------------------------------------------------------===//

  /// Whether `later` runs after `earlier` on some path through the
  /// structured control flow: after it in the innermost block holding both,
  /// or in a block that `earlier`'s block dominates. Ops in different
  /// branches of one op never run after each other.
  bool runsAfter(Operation *earlier, Operation *later) {
    for (Operation *ancestor = later; ancestor;
         ancestor = ancestor->getParentOp()) {
      Region *region = ancestor->getParentRegion();
      if (!region)
        return false;
      Operation *other = region->findAncestorOpInRegion(*earlier);
      if (!other)
        continue;
      if (other == ancestor)
        return false; // different regions of one op, or `later` holds it
      if (other->getBlock() == ancestor->getBlock())
        return other->isBeforeInBlock(ancestor);
      return dominance.properlyDominates(other->getBlock(),
                                         ancestor->getBlock());
    }
    return false;
  }

  /// How a note names an advancing op.
  static StringRef advancedBy(Operation *op) {
    if (isa<LoopLikeOpInterface>(op))
      return "advanced by this loop";
    if (isa<CallOpInterface>(op))
      return "advanced by this call";
    return "advanced here";
  }

  void checkLinearUse() {
    // The advancing uses of each slot, in walk order.
    llvm::MapVector<Value, SmallVector<OpOperand *>> advancing;
    for (Value state : flow.getStates())
      for (OpOperand &use : state.getUses())
        if (flow.advances(use))
          advancing[flow.getSlot(state)].push_back(&use);

    for (auto &[slot, uses] : advancing) {
      for (OpOperand *advance : uses) {
        Operation *advancer = advance->getOwner();
        Value state = advance->get();
        checkAdvanceInLoop(advancer, state);
        checkAdvanceInCfLoop(advancer, state);
        for (Value member : flow.getSlotStates(slot))
          for (OpOperand &use : member.getUses()) {
            Operation *user = use.getOwner();
            if (user == advancer || staleUsers.contains(user) ||
                !runsAfter(advancer, user))
              continue;
            staleUsers.insert(user);
            InFlightDiagnostic diag = error(user)
                                      << "state used after it was advanced"
                                      << where(member, getStageOf(user));
            diag.attachNote(advancer->getLoc()) << advancedBy(advancer);
          }
      }
    }
  }

  /// A state defined outside a loop and advanced inside it is advanced once
  /// per iteration: the second iteration uses it after it was advanced. A
  /// `kvpipe.for_each_tile` is such a loop: the persistent rewrite runs its
  /// region once per tile the CTA takes.
  void checkAdvanceInLoop(Operation *advancer, Value state) {
    Operation *definedIn = state.getParentRegion()->getParentOp();
    for (Operation *parent = advancer->getParentOp();
         parent && !parent->isAncestor(definedIn);
         parent = parent->getParentOp()) {
      if (isa<ForEachTileOp>(parent)) {
        InFlightDiagnostic diag =
            error(advancer)
            << "advances a state defined outside its 'kvpipe.for_each_tile', "
               "once per tile: carry it as an iter_arg of the tile loop"
            << where(state, getStageOf(advancer));
        diag.attachNote(parent->getLoc()) << "the tile loop";
        return;
      }
      if (!isa<LoopLikeOpInterface>(parent))
        continue;
      InFlightDiagnostic diag = error(advancer)
                                << "advances a state defined outside its loop, "
                                   "once per iteration: carry it as an iter_arg"
                                << where(state, getStageOf(advancer));
      diag.attachNote(parent->getLoc()) << "the loop";
      return;
    }
  }

  /// The same in a loop of unstructured control flow: an advance in a block
  /// that a path leads back to without passing the block that defines the
  /// state advances the same state on every trip around the cycle.
  void checkAdvanceInCfLoop(Operation *advancer, Value state) {
    for (Operation *at = advancer; at; at = at->getParentOp()) {
      Region *region = at->getParentRegion();
      if (!region)
        return;
      Block *block = at->getBlock();
      if (!region->hasOneBlock()) {
        // The block of the state's definition in this region, if any.
        Block *defining = region->findAncestorBlockInRegion(
            *state.getParentBlock());
        SmallVector<Block *> worklist(block->getSuccessors());
        DenseSet<Block *> seen;
        bool cycle = false;
        while (!worklist.empty() && !cycle) {
          Block *next = worklist.pop_back_val();
          if (next == defining || !seen.insert(next).second)
            continue;
          if (next == block) {
            cycle = true;
            break;
          }
          llvm::append_range(worklist, next->getSuccessors());
        }
        if (cycle) {
          InFlightDiagnostic diag =
              error(advancer)
              << "advances a state defined outside its loop, once per "
                 "iteration: a path of branches leads back to this block "
                 "without redefining the state; pass it as a block argument"
              << where(state, getStageOf(advancer));
          diag.attachNote(block->getTerminator()->getLoc())
              << "the branch that starts the cycle";
          return;
        }
      }
      // Above the region that defines the state, a repetition redefines it.
      if (region->isAncestor(state.getParentRegion()))
        return;
    }
  }

  //===--------------------------------------------------------------------===//
  // 2. Balance of producer and consumer loops
  //===--------------------------------------------------------------------===//

  struct LoopSide {
    Operation *loop;
    PipelineSide sides;
    std::optional<int64_t> perIteration;
  };

  /// Whether `loop` carries a state of `pipeline`.
  bool carries(Operation *loop, Value pipeline) {
    for (Value carried : PipelineFlow::getCarriedStates(loop))
      if (carried && flow.getPipeline(carried) == pipeline)
        return true;
    return false;
  }

  void checkBalance() {
    llvm::MapVector<Value, SmallVector<LoopSide>> loopsOf;
    for (Operation *loop : flow.getLoops()) {
      llvm::MapVector<Value, SmallVector<unsigned>> positions;
      for (auto [position, carried] :
           llvm::enumerate(PipelineFlow::getCarriedStates(loop)))
        if (carried)
          positions[flow.getPipeline(carried)].push_back(position);
      for (auto &[pipeline, carriedAt] : positions) {
        // Loops nested in a loop that carries the same pipeline run many
        // times: only the outermost ones are compared.
        bool nested = false;
        for (Operation *parent = loop->getParentOp(); parent && !nested;
             parent = parent->getParentOp())
          nested = isa<scf::ForOp, scf::WhileOp>(parent) &&
                   carries(parent, pipeline);
        if (nested)
          continue;
        std::optional<int64_t> perIteration;
        if (carriedAt.size() == 1)
          perIteration = flow.getAdvancePerIteration(loop, carriedAt.front());
        loopsOf[pipeline].push_back(
            {loop, flow.getSides(loop, pipeline), perIteration});
      }
    }

    for (auto &[pipeline, loops] : loopsOf)
      for (unsigned i = 0; i < loops.size(); ++i)
        for (unsigned j = i + 1; j < loops.size(); ++j) {
          const LoopSide &a = loops[i], &b = loops[j];
          if (bitEnumContainsAny(a.sides, PipelineSide::producer) &&
              bitEnumContainsAny(b.sides, PipelineSide::consumer))
            compareSides(pipeline, a, b);
          else if (bitEnumContainsAny(b.sides, PipelineSide::producer) &&
                   bitEnumContainsAny(a.sides, PipelineSide::consumer))
            compareSides(pipeline, b, a);
        }
  }

  void compareSides(Value pipeline, const LoopSide &producer,
                    const LoopSide &consumer) {
    if (!producer.perIteration || !consumer.perIteration)
      return;
    int64_t perProducer = *producer.perIteration;
    int64_t perConsumer = *consumer.perIteration;
    std::optional<int64_t> producerTrips = getTripCount(producer.loop);
    std::optional<int64_t> consumerTrips = getTripCount(consumer.loop);
    int64_t producerTotal, consumerTotal;
    if (producerTrips && consumerTrips &&
        !llvm::MulOverflow(*producerTrips, perProducer, producerTotal) &&
        !llvm::MulOverflow(*consumerTrips, perConsumer, consumerTotal)) {
      if (producerTotal == consumerTotal)
        return;
      unbalanced.insert(pipeline);
      InFlightDiagnostic diag =
          error(consumer.loop)
          << "consumer side advances " << consumerTotal << " slot(s) in total ("
          << *consumerTrips << " iteration(s) of " << perConsumer
          << ") but the producer side advances " << producerTotal << " ("
          << *producerTrips << " of " << perProducer
          << "): their phases drift apart and the pipeline hangs"
          << where(pipeline);
      diag.attachNote(producer.loop->getLoc()) << "the producer-side loop";
      return;
    }
    if (perProducer == perConsumer ||
        !haveSameTripCount(producer.loop, consumer.loop))
      return;
    unbalanced.insert(pipeline);
    InFlightDiagnostic diag =
        error(consumer.loop)
        << "consumer side advances " << perConsumer
        << " slot(s) per iteration but the producer-side loop with the same "
           "trip count advances "
        << perProducer << ": their phases drift apart and the pipeline hangs"
        << where(pipeline);
    diag.attachNote(producer.loop->getLoc()) << "the producer-side loop";
  }

  //===--------------------------------------------------------------------===//
  // 3. Pairing, block by block
  //===--------------------------------------------------------------------===//

  void openPair(DenseMap<std::pair<Value, PipelineSide>, SlotPairing> &pairs,
                SmallVectorImpl<std::pair<Value, PipelineSide>> &order,
                Operation *op, Value state, int64_t stage, PipelineSide side,
                StringRef name) {
    auto key = std::make_pair(flow.getSlot(state), side);
    auto [it, inserted] = pairs.try_emplace(key);
    if (inserted)
      order.push_back(key);
    SlotPairing &pairing = it->second;
    int64_t stages = cast<PipelineType>(state.getType()).getQkStages();
    if (pairing.open.size() < static_cast<size_t>(stages))
      pairing.open.resize(stages, nullptr);
    if (!pairing.firstOpen) {
      pairing.firstOpen = op;
      pairing.firstOpenStage = stage;
    }
    if (pairing.lastOpen && stage != pairing.lastOpenStage + 1) {
      InFlightDiagnostic diag =
          error(op) << "is out of qk_stage order: the previous " << name
                    << " of this slot in its block is sub-stage "
                    << pairing.lastOpenStage << where(state, stage);
      diag.attachNote(pairing.lastOpen->getLoc()) << "the previous " << name;
    } else {
      // After an out-of-order op the order continues from the previous one,
      // so that one misplaced op is reported once.
      pairing.lastOpen = op;
      pairing.lastOpenStage = stage;
    }
    if (stage >= 0 && stage < stages)
      pairing.open[stage] = op;
  }

  void closePair(DenseMap<std::pair<Value, PipelineSide>, SlotPairing> &pairs,
                 SmallVectorImpl<std::pair<Value, PipelineSide>> &order,
                 Operation *op, Value state, int64_t stage, PipelineSide side,
                 StringRef openName, StringRef name) {
    auto key = std::make_pair(flow.getSlot(state), side);
    auto [it, inserted] = pairs.try_emplace(key);
    if (inserted)
      order.push_back(key);
    SlotPairing &pairing = it->second;
    if (!pairing.firstClose) {
      pairing.firstClose = op;
      pairing.firstCloseStage = stage;
    }
    if (pairing.lastClose && stage != pairing.lastCloseStage + 1) {
      InFlightDiagnostic diag =
          error(op) << "is out of qk_stage order: the previous " << name
                    << " of this slot in its block is sub-stage "
                    << pairing.lastCloseStage << where(state, stage);
      diag.attachNote(pairing.lastClose->getLoc()) << "the previous " << name;
    } else {
      pairing.lastClose = op;
      pairing.lastCloseStage = stage;
    }
    if (stage >= 0 && static_cast<size_t>(stage) < pairing.open.size() &&
        pairing.open[stage]) {
      pairing.open[stage] = nullptr;
      return;
    }
    error(op) << "has no preceding " << openName
              << " of the same slot and sub-stage in its block"
              << where(state, stage);
  }

  void checkBlock(Block &block) {
    // 3. Pairing: wait/release on the consumer side, acquire/commit on the
    // producer side.
    DenseMap<std::pair<Value, PipelineSide>, SlotPairing> pairs;
    SmallVector<std::pair<Value, PipelineSide>> order;

    for (Operation &op : block) {
      // A stale state's ops were reported by rule 1; pairing them again
      // would only repeat that.
      if (staleUsers.contains(&op))
        continue;
      if (auto step = dyn_cast<StepOp>(op)) {
        checkStep(step, pairs);
        continue;
      }
      auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(op);
      if (!protocolOp)
        continue;
      StringRef name = op.getName().stripDialect();
      PipelineSide side = protocolOp.getSide();
      if (protocolOp.opensSlot())
        openPair(pairs, order, &op, protocolOp.getPipeline(),
                 *protocolOp.getSubStage(), side, name);
      else if (protocolOp.closesSlot())
        closePair(pairs, order, &op, protocolOp.getPipeline(),
                  *protocolOp.getSubStage(), side, getOpenerName(side), name);
    }

    for (const auto &key : order) {
      const SlotPairing &pairing = pairs[key];
      for (auto [stage, open] : llvm::enumerate(pairing.open)) {
        if (!open)
          continue;
        Value state = open->getOperand(0);
        error(open) << "has no "
                    << (key.second == PipelineSide::consumer
                            ? "consumer_release"
                            : "producer_commit")
                    << " of the same slot and sub-stage after it in its block"
                    << where(state, stage);
      }
      // The order starts at sub-stage 0.
      bool sawZero[2] = {false, false};
      for (Value state : flow.getSlotStates(key.first))
        for (Operation *user : state.getUsers()) {
          if (user->getBlock() != &block || staleUsers.contains(user))
            continue;
          auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(user);
          if (!protocolOp || protocolOp.getSide() != key.second ||
              protocolOp.getSubStage() != 0)
            continue;
          if (protocolOp.opensSlot())
            sawZero[0] = true;
          if (protocolOp.closesSlot())
            sawZero[1] = true;
        }
      for (auto [index, first, firstStage] :
           {std::tuple{0, pairing.firstOpen, pairing.firstOpenStage},
            std::tuple{1, pairing.firstClose, pairing.firstCloseStage}}) {
        if (!first || sawZero[index])
          continue;
        error(first) << "is out of qk_stage order: no "
                     << first->getName().stripDialect()
                     << " of sub-stage 0 of this slot in its block; the "
                        "sub-stages of a slot start at 0"
                     << where(first->getOperand(0), firstStage);
      }
      // Every sub-stage, or none: the others' barriers never complete.
      if (!pairing.lastClose)
        continue;
      int64_t stages = cast<PipelineType>(key.first.getType()).getQkStages();
      if (pairing.lastCloseStage != stages - 1)
        error(pairing.lastClose)
            << (key.second == PipelineSide::consumer ? "releases" : "commits")
            << " the slot up to sub-stage " << pairing.lastCloseStage
            << " but not sub-stage " << pairing.lastCloseStage + 1
            << " in its block: "
            << (key.second == PipelineSide::consumer
                    ? "the producer waits for that release"
                    : "the consumers wait for that data")
            << " forever"
            << where(pairing.lastClose->getOperand(0),
                     pairing.lastCloseStage + 1);
    }
  }

  /// Pairing in a region of several blocks (unstructured control flow):
  /// along every path, each wait (acquire) is closed by its release
  /// (commit) before the region is left, and each release (commit) closes
  /// an open wait (acquire). The sub-stage order is checked per block only
  /// in structured code: where a pipeline of several sub-stages is used
  /// across blocks, it is reported as unproven.
  void checkCfPairing(Region &region) {
    using Open = std::map<std::tuple<void *, int, int64_t>, Operation *>;
    auto keyOf = [&](Operation *op) {
      auto protocolOp = cast<PipelineProtocolOpInterface>(op);
      return std::make_tuple(
          flow.getSlot(protocolOp.getPipeline()).getAsOpaquePointer(),
          int(protocolOp.getSide()), *protocolOp.getSubStage());
    };
    DenseMap<Block *, Open> in;
    DenseSet<Block *> visited;
    DenseSet<Operation *> reported;
    bool disagree = false, multiStage = false;
    Operation *disagreeAt = nullptr;
    SmallVector<Block *> worklist = {&region.front()};
    in[&region.front()] = {};
    unsigned budget = 4096;
    while (!worklist.empty() && budget--) {
      Block *block = worklist.pop_back_val();
      Open open = in[block];
      for (Operation &op : *block) {
        if (auto step = dyn_cast<StepOp>(op)) {
          if (!visited.contains(block)) {
            DenseMap<std::pair<Value, PipelineSide>, SlotPairing> unused;
            checkStep(step, unused);
          }
          continue;
        }
        if (!opensOrCloses(&op) || staleUsers.contains(&op))
          continue;
        auto protocolOp = cast<PipelineProtocolOpInterface>(&op);
        Value state = protocolOp.getPipeline();
        if (cast<PipelineType>(state.getType()).getQkStages() > 1)
          multiStage = true;
        auto key = keyOf(&op);
        if (protocolOp.opensSlot()) {
          open[key] = &op;
          continue;
        }
        if (open.erase(key))
          continue;
        if (reported.insert(&op).second)
          error(&op) << "has no preceding "
                     << getOpenerName(protocolOp.getSide())
                     << " of the same slot and sub-stage on every path to it"
                     << where(state, protocolOp.getSubStage());
      }
      visited.insert(block);
      Operation *terminator = block->getTerminator();
      if (block->getNumSuccessors() == 0) {
        // Leaving the region: nothing may stay open.
        for (auto &[key, opener] : open)
          if (reported.insert(opener).second) {
            auto protocolOp = cast<PipelineProtocolOpInterface>(opener);
            InFlightDiagnostic diag =
                error(opener)
                << "has no "
                << (protocolOp.getSide() == PipelineSide::consumer
                        ? "consumer_release"
                        : "producer_commit")
                << " of the same slot and sub-stage on every path after it"
                << where(protocolOp.getPipeline(), protocolOp.getSubStage());
            diag.attachNote(terminator->getLoc())
                << "the path leaves here with it open";
          }
        continue;
      }
      for (Block *successor : block->getSuccessors()) {
        auto [it, inserted] = in.try_emplace(successor, open);
        if (inserted) {
          worklist.push_back(successor);
          continue;
        }
        if (it->second != open && !disagree) {
          disagree = true;
          disagreeAt = terminator;
        }
      }
    }
    if (disagree)
      unproven(disagreeAt)
          << "that the waits and acquires still open are the same on every "
             "path into a block: the paths of 'cf' branches into its "
             "successor hold different open sub-stages";
    else if (multiStage)
      unproven(region.front().getTerminator())
          << "the sub-stage order of a pipeline of several sub-stages across "
             "the blocks of unstructured control flow";
  }

  /// A producer steps past a slot after committing every sub-stage of it
  /// in the same block; a consumer advances with consumer_release.
  /// Whether any wait, release, acquire or commit works on `pipeline`: a
  /// pipeline without any is state arithmetic only, which nothing waits on.
  bool hasProtocolOps(Value pipeline) {
    auto it = protocolPipelines.find(pipeline);
    if (it != protocolPipelines.end())
      return it->second;
    bool found = false;
    root->walk([&](Operation *op) {
      if (opensOrCloses(op) &&
          flow.getPipeline(cast<PipelineProtocolOpInterface>(op)
                               .getPipeline()) == pipeline) {
        found = true;
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    protocolPipelines[pipeline] = found;
    return found;
  }
  DenseMap<Value, bool> protocolPipelines;

  void checkStep(StepOp step,
                 DenseMap<std::pair<Value, PipelineSide>, SlotPairing> &pairs) {
    if (!hasProtocolOps(flow.getPipeline(step.getPipeline())))
      return;
    // Every sub-stage of the slot committed on every path to the step.
    Value slot = flow.getSlot(step.getPipeline());
    int64_t stages = cast<PipelineType>(step.getPipeline().getType())
                         .getQkStages();
    SmallVector<bool> committed(stages, false);
    for (Value state : flow.getSlotStates(slot))
      for (Operation *user : state.getUsers())
        if (auto commit = dyn_cast<ProducerCommitOp>(user))
          if (commit.getStage() < stages &&
              dominance.properlyDominates(user, step.getOperation()))
            committed[commit.getStage()] = true;
    int64_t missing = llvm::find(committed, false) - committed.begin();
    if (missing == stages)
      return;
    if (llvm::none_of(committed, [](bool c) { return c; })) {
      error(step) << "steps past a slot it did not fill: no producer_commit "
                     "of the slot runs before it on every path (a consumer "
                     "advances with consumer_release; a producer that skips "
                     "a slot leaves the consumers waiting for it)"
                  << where(step.getPipeline());
      return;
    }
    error(step) << "steps past a slot whose sub-stage " << missing
                << " it did not commit on every path: the consumers wait for "
                   "that data forever"
                << where(step.getPipeline(), missing);
  }

  //===--------------------------------------------------------------------===//
  // 3. Branches that advance a state differently
  //===--------------------------------------------------------------------===//

  void checkBranches() {
    root->walk([&](Operation *op) {
      // A block of unstructured control flow merges the states its
      // predecessors pass.
      for (Region &region : op->getRegions())
        if (!region.hasOneBlock())
          for (Block &block : llvm::drop_begin(region))
            for (BlockArgument argument : block.getArguments())
              if (isState(argument))
                checkMerge(argument);
      if (!isa<scf::IfOp, scf::IndexSwitchOp, scf::ExecuteRegionOp>(op))
        return;
      for (OpResult result : op->getResults()) {
        if (!isa<PipelineType>(result.getType()))
          continue;
        SmallVector<std::optional<StateAdvance>> branches;
        bool known = true;
        for (Region &region : op->getRegions()) {
          // Each path out of the region: a single block, or each block of
          // an scf.execute_region that yields.
          for (Block &block : region) {
            auto yield = dyn_cast<scf::YieldOp>(block.getTerminator());
            if (!yield && region.hasOneBlock())
              known = false;
            if (!yield)
              continue;
            if (result.getResultNumber() >= yield.getNumOperands()) {
              known = false;
              continue;
            }
            branches.push_back(flow.traceAdvance(
                yield.getOperand(result.getResultNumber()), op));
          }
        }
        if (!known)
          return;
        if (branches.empty() || !llvm::all_of(branches, [](auto &branch) {
              return branch.has_value();
            }))
          continue;
        const std::optional<StateAdvance> *most = &branches.front();
        const std::optional<StateAdvance> *least = &branches.front();
        bool sameBase = true;
        for (const std::optional<StateAdvance> &branch : branches) {
          sameBase &= flow.getSlot(branch->base) ==
                      flow.getSlot(branches.front()->base);
          if (branch->slots > (*most)->slots)
            most = &branch;
          if (branch->slots < (*least)->slots)
            least = &branch;
        }
        if (!sameBase || (*most)->slots == (*least)->slots)
          continue;
        reportedBranches.insert(op);
        InFlightDiagnostic diag = error(op);
        if ((*least)->slots == 0)
          diag << "yields a state advanced in one branch but not in the other";
        else
          diag << "yields a state advanced by " << (*most)->slots
               << " slot(s) in one branch but " << (*least)->slots
               << " in another";
        diag << where(result);
        if ((*most)->lastAdvance)
          diag.attachNote((*most)->lastAdvance->getLoc())
              << advancedBy((*most)->lastAdvance);
      }
    });
  }

  /// A block argument of unstructured control flow whose predecessors pass
  /// one state advanced by different counts (the cf form of the branch
  /// rule). Values derived from the argument itself (a back edge) or from
  /// another block argument are not compared.
  void checkMerge(BlockArgument argument) {
    Block *block = argument.getOwner();
    Operation *scope = block->getParentOp();
    struct Incoming {
      StateAdvance advance;
      Operation *branch;
    };
    SmallVector<Incoming> incoming;
    for (auto it = block->pred_begin(); it != block->pred_end(); ++it) {
      auto branch = dyn_cast<BranchOpInterface>((*it)->getTerminator());
      if (!branch)
        return;
      for (unsigned i = 0, e = branch->getNumSuccessors(); i < e; ++i) {
        if (branch->getSuccessor(i) != block)
          continue;
        Value forwarded =
            branch.getSuccessorOperands(i)[argument.getArgNumber()];
        if (!forwarded)
          return;
        std::optional<StateAdvance> advance =
            flow.traceAdvance(forwarded, scope);
        if (!advance)
          return;
        incoming.push_back({*advance, branch});
      }
    }
    for (const Incoming &a : incoming)
      for (const Incoming &b : incoming) {
        if (a.advance.slots <= b.advance.slots ||
            flow.getSlot(a.advance.base) != flow.getSlot(b.advance.base) ||
            a.advance.base == Value(argument))
          continue;
        InFlightDiagnostic diag =
            error(a.branch)
            << "passes to a block a state advanced by " << a.advance.slots
            << " slot(s) from its base, where another branch passes it "
               "advanced by "
            << b.advance.slots << where(argument);
        diag.attachNote(b.branch->getLoc()) << "the other branch";
        reportedBranches.insert(a.branch);
        return;
      }
  }

  //===--------------------------------------------------------------------===//
  // 5. Transaction bytes
  //===--------------------------------------------------------------------===//

  /// The load of `loads` that comes first in the commit's block (the call
  /// that issues it, for a load in a helper).
  static Operation *getFirstLoad(ProducerCommitOp commit,
                                 const SlotLoads &loads) {
    Block *block = commit->getBlock();
    Operation *first = nullptr, *firstAncestor = nullptr;
    for (const SlotLoads::Load &entry : loads.loads) {
      Operation *ancestor = block->findAncestorOpInBlock(*entry.site);
      if (!ancestor)
        continue;
      if (!first || ancestor->isBeforeInBlock(firstAncestor)) {
        first = entry.site;
        firstAncestor = ancestor;
      }
    }
    return first;
  }

  /// The value of `value` where the kvpipe.index of the states of `slot` is
  /// `index`: through constants, integer casts and pure integer arithmetic.
  std::optional<int64_t> evaluateAtIndex(Value value, Value slot,
                                         int64_t index, unsigned depth = 0) {
    if (depth > 32)
      return std::nullopt;
    if (std::optional<int64_t> constant = getConstantIntValue(value))
      return *constant;
    Operation *def = value.getDefiningOp();
    if (!def)
      return std::nullopt;
    if (auto indexOp = dyn_cast<IndexOp>(def)) {
      if (flow.isMixed(indexOp.getPipeline()) ||
          flow.getSlot(indexOp.getPipeline()) != slot)
        return std::nullopt;
      return index;
    }
    if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
            arith::ExtUIOp>(def))
      return evaluateAtIndex(def->getOperand(0), slot, index, depth + 1);
    if (def->getNumOperands() != 2 ||
        !isa<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::RemUIOp,
             arith::RemSIOp, arith::DivUIOp, arith::DivSIOp>(def))
      return std::nullopt;
    std::optional<int64_t> a =
        evaluateAtIndex(def->getOperand(0), slot, index, depth + 1);
    std::optional<int64_t> b =
        evaluateAtIndex(def->getOperand(1), slot, index, depth + 1);
    // Small non-negative values only: no wrap-around to think about.
    auto small = [](std::optional<int64_t> v) {
      return v && *v >= 0 && *v < (int64_t(1) << 20);
    };
    if (!small(a) || !small(b))
      return std::nullopt;
    return llvm::TypeSwitch<Operation *, std::optional<int64_t>>(def)
        .Case<arith::AddIOp>([&](auto) { return *a + *b; })
        .Case<arith::SubIOp>([&](auto) -> std::optional<int64_t> {
          if (*a < *b)
            return std::nullopt;
          return *a - *b;
        })
        .Case<arith::MulIOp>([&](auto) { return *a * *b; })
        .Default([&](Operation *) -> std::optional<int64_t> {
          if (*b == 0)
            return std::nullopt;
          return isa<arith::RemUIOp, arith::RemSIOp>(def) ? *a % *b
                                                          : *a / *b;
        });
  }

  /// A producer's TMA load fills the ring slot of the state whose barrier
  /// it completes on: the slot offset of its destination's view chain (a
  /// memref.subview offset computed from a kvpipe.index) is that state's
  /// kvpipe.index. Checked for each index the state can have (the one a
  /// constant advance from its create gives, else every slot).
  void checkLoadSlots() {
    root->walk([&](TMALoadOp load) {
      auto mbar = load.getMbarrier().getDefiningOp<ProducerMBarOp>();
      if (!mbar)
        return; // a barrier passed in: not followed here
      int64_t stages = mbar.getPipelineType().getKvStages();
      if (stages == 1)
        return; // one slot: every fill is of slot 0
      Value state = mbar.getPipeline();
      if (flow.isMixed(state))
        return; // reported by rule 3
      Value slot = flow.getSlot(state);
      // The slot offsets of the destination, and whether it has views.
      SmallVector<OpFoldResult> offsets;
      bool viewed = false, other = false;
      Value current = load.getDest();
      for (unsigned guard = 0; current && guard < 64; ++guard) {
        Operation *def = current.getDefiningOp();
        if (auto subview = dyn_cast_or_null<memref::SubViewOp>(def)) {
          viewed = true;
          for (OpFoldResult offset : subview.getMixedOffsets()) {
            Value v = dyn_cast<Value>(offset);
            Operation *unknown = nullptr;
            if (v && !getSlotsOf(v, 0, unknown).empty())
              offsets.push_back(offset);
          }
          current = subview.getSource();
        } else if (def && isa<memref::ViewOp, memref::ReinterpretCastOp>(def)) {
          viewed = true;
          for (Value operand : def->getOperands().drop_front()) {
            Operation *unknown = nullptr;
            if (!getSlotsOf(operand, 0, unknown).empty())
              other = true;
          }
          current = def->getOperand(0);
        } else if (def && isa<memref::CastOp, memref::ExpandShapeOp,
                              memref::CollapseShapeOp>(def)) {
          current = def->getOperand(0);
        } else {
          break;
        }
      }
      if (!viewed)
        return; // the destination is passed in: the caller's view
      // The indices the state can have.
      SmallVector<int64_t> indices;
      Operation *function = load->getParentOfType<FunctionOpInterface>();
      std::optional<StateAdvance> advance =
          function ? flow.traceAdvance(state, function) : std::nullopt;
      if (advance && advance->base.getDefiningOp<CreateOp>())
        indices.push_back(advance->slots % stages);
      else
        for (int64_t i = 0; i < stages; ++i)
          indices.push_back(i);
      if (offsets.empty()) {
        InFlightDiagnostic diag =
            unproven(load)
            << "that the TMA load fills the ring slot of its barrier's state: "
            << (other ? "its destination is addressed from a kvpipe.index "
                        "through a byte or linear offset, not a subview offset"
                      : "no offset of its destination is computed from the "
                        "state's kvpipe.index")
            << where(state, mbar.getStage());
        diag.attachNote(mbar.getLoc()) << "the barrier";
        return;
      }
      for (OpFoldResult offset : offsets) {
        Value v = cast<Value>(offset);
        bool anyEqual = false, anyDifferent = false, unknown = false;
        int64_t example = -1, exampleIndex = -1;
        for (int64_t i : indices) {
          std::optional<int64_t> at = evaluateAtIndex(v, slot, i);
          if (!at) {
            unknown = true;
            break;
          }
          if (*at == i) {
            anyEqual = true;
          } else {
            anyDifferent = true;
            example = *at;
            exampleIndex = i;
          }
        }
        if (!unknown && !anyDifferent)
          continue;
        if (!unknown && !anyEqual) {
          InFlightDiagnostic diag =
              error(load)
              << "fills ring slot " << example
              << " while its barrier is of the state at slot "
              << exampleIndex
              << ": the consumers wait for a slot that never receives the "
                 "data, and the load overwrites one they may still read"
              << where(state, mbar.getStage());
          diag.attachNote(mbar.getLoc()) << "the barrier";
          return;
        }
        InFlightDiagnostic diag =
            unproven(load)
            << "that the TMA load fills the ring slot of its barrier's state: "
            << (unknown ? "the destination's slot offset is not the "
                          "state's kvpipe.index"
                        : "the destination's slot offset differs from the "
                          "state's kvpipe.index at some slots")
            << where(state, mbar.getStage());
        diag.attachNote(mbar.getLoc()) << "the barrier";
        return;
      }
    });
  }

  void checkTransactions() {
    // (load, site) pairs some commit counted.
    DenseSet<std::pair<Operation *, Operation *>> expected;
    DenseSet<std::pair<Value, int64_t>> uncounted;
    root->walk([&](ProducerCommitOp commit) {
      // collectSlotLoads reports its own failures at the commit.
      FailureOr<SlotLoads> loads = collectSlotLoads(commit);
      if (failed(loads)) {
        hasErrors = true;
        uncounted.insert({commit.getPipeline(), commit.getStage()});
        return;
      }
      for (const SlotLoads::Load &entry : loads->loads)
        expected.insert({entry.load, entry.site});
      // A multicast copy lands in every CTA of its mask and completes on
      // each one's barrier at the same offset: this CTA's barrier receives
      // the bytes of its peers' multicast loads too, which depend on the
      // cluster rank and the masks, not on the loads of this slot.
      auto multicast = llvm::find_if(loads->loads, [](SlotLoads::Load entry) {
        return entry.load.getMulticastMask() != nullptr;
      });
      if (multicast != loads->loads.end()) {
        InFlightDiagnostic diag =
            unproven(commit)
            << "the bytes that complete on the producer barrier: a TMA load "
               "of the slot is multicast, so the barrier of every CTA in its "
               "mask also receives the copies its peers issue, which the "
               "checker does not count (the commit expects only this CTA's "
               "loads, "
            << loads->bytes << " bytes)"
            << where(commit.getPipeline(), commit.getStage());
        diag.attachNote(multicast->load.getLoc()) << "the multicast load";
        return;
      }
      Attribute recorded = commit->getAttr(kTransactionBytesAttrName);
      if (!recorded)
        return;
      auto bytes = dyn_cast<IntegerAttr>(recorded);
      if (!bytes) {
        error(commit) << "'" << kTransactionBytesAttrName
                      << "' must be an integer attribute, got " << recorded
                      << where(commit.getPipeline(), commit.getStage());
        return;
      }
      if (bytes.getValue().getSExtValue() == loads->bytes)
        return;
      InFlightDiagnostic diag =
          error(commit) << "expect_tx of " << bytes.getValue().getSExtValue()
                        << " bytes disagrees with the " << loads->bytes
                        << " bytes its TMA loads deliver"
                        << where(commit.getPipeline(), commit.getStage());
      if (Operation *first = getFirstLoad(commit, *loads))
        diag.attachNote(first->getLoc())
            << "the first of its " << loads->loads.size() << " TMA load(s)";
    });
    // Every load completes on a producer barrier that a commit counts it
    // on, at every call site of the helper that issues it.
    CallSites sites(root);
    root->walk([&](TMALoadOp load) {
      for (const BarrierOrigin &origin : getBarrierOrigins(load, sites)) {
        auto noteCalls = [&](InFlightDiagnostic &diag) {
          for (Operation *call : origin.calls)
            diag.attachNote(call->getLoc()) << "through this call";
        };
        if (origin.kind == BarrierOrigin::Kind::unknown) {
          InFlightDiagnostic diag =
              unproven(load)
              << "which barrier this TMA load completes on: " << origin.reason
              << " (a load is only proven on the producer "
                 "barrier of a slot, from "
                 "kvpipe.producer_mbar)";
          diag.attachNote(origin.lostAt->getLoc())
              << "the barrier is lost here";
          noteCalls(diag);
          continue;
        }
        if (origin.kind == BarrierOrigin::Kind::consumer) {
          auto mbar = cast<ConsumerMBarOp>(origin.accessor);
          InFlightDiagnostic diag =
              error(load) << "completes on the consumer (empty) barrier: the "
                             "consumers never see the data land (they wait on "
                             "the producer barrier) and its bytes corrupt the "
                             "barrier the producer acquires the slot on"
                          << where(mbar.getPipeline(), mbar.getStage());
          diag.attachNote(mbar.getLoc()) << "the barrier";
          noteCalls(diag);
          continue;
        }
        auto mbar = cast<ProducerMBarOp>(origin.accessor);
        // The commit that counts the load is in the function of the load,
        // or of one of the calls that pass its barrier or its state down
        // (then the load is recorded at that function's call).
        if (expected.contains({load, load}) ||
            llvm::any_of(origin.calls,
                         [&](Operation *site) {
                           return expected.contains({load, site});
                         }) ||
            uncounted.contains({mbar.getPipeline(), mbar.getStage()}))
          continue;
        InFlightDiagnostic diag =
            error(load) << "completes on a barrier that no producer_commit "
                           "expects: the producer barrier"
                        << where(mbar.getPipeline(), mbar.getStage());
        diag.attachNote(mbar.getLoc()) << "the barrier";
        noteCalls(diag);
      }
    });
  }

  /// A consumer_release whose `elected` operand is constant false: no
  /// thread arrives on the consumer barrier, so the slot is never released.
  /// Inside a role of a `kvpipe.warp_roles`, the threads that arrive are
  /// counted (checkRoleArrivals), for releases and commits alike. (A TMA load
  /// is issued by the threads that commit its slot: rule 5 counts only loads
  /// in the commit's block, outside any condition.)
  void checkReleaseArrivals() {
    root->walk([&](ConsumerReleaseOp release) {
      if (!matchPattern(release.getElected(), m_Zero())) {
        checkRoleArrivals(release, release.getElected(),
                          release.getPipelineType().getConsumers(),
                          PipelineSide::consumer);
        return;
      }
      error(release) << "releases the slot with no thread: its elected "
                        "operand is constant false, so nobody arrives on the "
                        "consumer barrier and the producer's next acquire of "
                        "the slot waits forever"
                     << where(release.getPipeline(), release.getStage());
    });
    root->walk([&](ProducerCommitOp commit) {
      checkRoleArrivals(commit, Value(),
                        commit.getPipelineType().getProducers(),
                        PipelineSide::producer);
    });
  }

  /// Whether the checker's arithmetic knows `condition` to be CTA-uniform.
  bool isUniform(Value condition) {
    unsigned number = arithmetic.getValueNumber(condition);
    return !arithmetic.getNonUniformAtom(LinearExpr::ofAtom(number));
  }

  /// Rule 6, arrivals: a `consumer_release` (`producer_commit`) runs on the
  /// threads that reach it (the branches of `scf.if` / `scf.index_switch`
  /// around it are followed per thread) and whose `elected` is true; each
  /// arrives once on the consumer (producer) barrier, which completes its
  /// phase after the pipeline type's `consumers` (`producers`) arrivals. Any
  /// other count hangs the other side (too few) or completes the phase
  /// early, before the other threads of the side are done with the slot
  /// (too many). The threads are those of the op's role in a
  /// `kvpipe.warp_roles`, or of the kernel when its block size is known (the
  /// generated kernels, whose roles are branches on the warpgroup id by
  /// now); elsewhere (a helper) the count is an assumption. A condition that
  /// is neither computed from the thread's identity and constants nor
  /// CTA-uniform makes the count unproven.
  void checkRoleArrivals(Operation *op, Value elected, int64_t expected,
                         PipelineSide side) {
    std::optional<ThreadScope> scope = getThreadScope(op);
    if (!scope)
      return;
    auto protocol = cast<PipelineProtocolOpInterface>(op);
    Value pipeline = protocol.getPipeline();
    std::optional<int64_t> stage = protocol.getSubStage();
    bool consumer = side == PipelineSide::consumer;
    StringRef barrier = consumer ? "consumer barrier" : "producer barrier";
    StringRef opName = consumer ? "release" : "commit";
    ThreadCount count = countThreads(op, elected, *scope,
                                     [&](Value v) { return isUniform(v); });
    if (count.unprovenReason) {
      if (!count.unprovenReason->empty()) {
        unproven(op) << "how many threads arrive on the " << barrier
                     << ": the " << opName << " " << *count.unprovenReason
                     << where(pipeline, stage);
        return;
      }
      InFlightDiagnostic diag =
          unproven(op) << "how many threads arrive on the " << barrier
                       << " (the pipeline expects " << expected
                       << "): the checker cannot evaluate, per thread"
                       << scope->description << ", a value "
                       << (consumer ? "the release's elected operand or "
                                    : "")
                       << "a condition around it is computed from"
                       << where(pipeline, stage);
      if (count.unknownValue)
        diag.attachNote(count.unknownValue.getLoc()) << "this value";
      return;
    }
    if (count.total == expected)
      return;
    std::string counts;
    for (auto [i, n] : llvm::enumerate(count.perWarpgroup))
      counts += (i ? ", " : "") + std::to_string(n);
    InFlightDiagnostic diag = error(op);
    diag << count.total << " thread" << (count.total == 1 ? "" : "s")
         << scope->description << " arrive on the " << barrier << " per "
         << opName;
    if (count.perWarpgroup.size() > 1 || scope->consumerBlock)
      diag << " (" << counts << " per warpgroup)";
    diag << ", but the pipeline expects "
         << (consumer ? "consumers" : "producers") << " = " << expected;
    if (consumer)
      diag << (count.total < expected
                   ? ": the phase never completes and the producer's next "
                     "acquire of the slot waits forever"
                   : ": the phase completes early, and the producer refills "
                     "the slot while a consumer warpgroup may still read it");
    else
      diag << (count.total < expected
                   ? ": the phase never completes and the consumers' wait "
                     "for the slot never returns"
                   : ": the phase completes early (the extra arrivals fall "
                     "into the slot's next phase), and the consumers read "
                     "the slot before every producer thread filled it");
    diag << where(pipeline, stage);
    diag.attachNote(scope->scope->getLoc())
        << (isa<WarpRolesOp>(scope->scope) ? "the warp roles" : "the kernel");
  }

  //===--------------------------------------------------------------------===//
  // 6. Barriers: one kvpipe.init per kvpipe.create, by the whole CTA
  //===--------------------------------------------------------------------===//

  /// The op between `op` and its function that may run it more than once,
  /// or on some threads only: a loop, a tile loop, a condition, a role
  /// region. An `scf.execute_region` runs its region once.
  static Operation *findRepeatOrCondition(Operation *op) {
    for (Operation *parent = op->getParentOp();
         parent && !isa<FunctionOpInterface>(parent);
         parent = parent->getParentOp())
      if (!isa<scf::ExecuteRegionOp>(parent))
        return parent;
    return nullptr;
  }

  /// Rule 2 for the create itself: it runs once, on every thread of the
  /// CTA. Not in a loop or under a condition in its function, and, where
  /// its function is called in the module, from one call site that runs
  /// once itself (a helper called per tile, or twice, initialises the same
  /// barriers again while the previous use's waits may be pending).
  /// False when reported.
  bool checkCreateRunsOnce(CreateOp create) {
    Operation *at = create;
    SmallPtrSet<Operation *, 4> functions;
    for (;;) {
      if (Operation *holder = findRepeatOrCondition(at)) {
        bool loop =
            isa<LoopLikeOpInterface, ForEachTileOp>(holder);
        InFlightDiagnostic diag =
            error(create)
            << (at == create.getOperation() ? "is " : "runs through a call ")
            << (loop ? "inside a loop: kvpipe.create and kvpipe.init run "
                       "once, by every thread of the CTA (one set of "
                       "barriers per create op: every iteration would "
                       "initialise them again while the previous one's "
                       "waits may be pending)"
                     : "under a condition: kvpipe.create and kvpipe.init "
                       "run once, by every thread of the CTA (the other "
                       "threads would use barriers nobody initialised, or "
                       "wait in the init's CTA barrier forever)")
            << where(create.getResult());
        if (at != create.getOperation())
          diag.attachNote(at->getLoc()) << "the call";
        diag.attachNote(holder->getLoc())
            << "the enclosing '" << holder->getName() << "'";
        return false;
      }
      Region *region = at->getParentRegion();
      if (!region->hasOneBlock() && at->getBlock() != &region->front()) {
        unproven(create) << "that the pipeline is created and initialised "
                            "once by every thread: "
                         << (at == create.getOperation() ? "it"
                                                         : "the call to its "
                                                           "function")
                         << " is not in the entry block of its region"
                         << where(create.getResult());
        return false;
      }
      auto function = at->getParentOfType<FunctionOpInterface>();
      if (!function || !functions.insert(function).second)
        return true; // recursion has its own callers
      SmallVector<CallOpInterface> callers;
      root->walk([&](CallOpInterface call) {
        if (flow.resolveCallee(call) == function)
          callers.push_back(call);
      });
      // A use of the function's symbol other than a call it resolves (a
      // func.constant called indirectly) may run it any number of times.
      if (std::optional<SymbolTable::UseRange> uses =
              SymbolTable::getSymbolUses(function, root))
        for (const SymbolTable::SymbolUse &use : *uses) {
          auto call = dyn_cast<CallOpInterface>(use.getUser());
          if (call && flow.resolveCallee(call) == function)
            continue;
          InFlightDiagnostic diag =
              unproven(create)
              << "that the pipeline is created and initialised once: @"
              << function.getName()
              << " is referenced other than by a direct call"
              << where(create.getResult());
          diag.attachNote(use.getUser()->getLoc()) << "the reference";
          return false;
        }
      if (callers.empty())
        return true; // the kernel: runs once per CTA
      if (callers.size() > 1) {
        InFlightDiagnostic diag =
            error(create)
            << "is in @" << function.getName() << ", called from "
            << callers.size()
            << " places: each call creates and initialises the same barriers "
               "again (one set per create op) while the previous call's "
               "waits may be pending"
            << where(create.getResult());
        for (CallOpInterface call : callers)
          diag.attachNote(call->getLoc()) << "a call";
        return false;
      }
      at = callers.front();
    }
  }

  void checkBarriers() {
    SmallVector<InitOp> inits;
    root->walk([&](InitOp init) { inits.push_back(init); });
    root->walk([&](CreateOp create) {
      if (!checkCreateRunsOnce(create))
        return;
      Value pipeline = flow.getPipeline(create.getResult());
      InitOp first;
      for (InitOp init : inits) {
        if (flow.getPipeline(init.getPipeline()) != pipeline)
          continue;
        if (first) {
          InFlightDiagnostic diag =
              error(init) << "initialises the barriers a second time: every "
                             "thread of the CTA executes kvpipe.init once per "
                             "kvpipe.create, and a second init resets barriers "
                             "that may already be in use"
                          << where(create.getResult());
          diag.attachNote(first.getLoc()) << "the first kvpipe.init";
          continue;
        }
        first = init;
        // CTA-wide: in the block of the create, so that every thread that
        // created the pipeline initialises it, once.
        Operation *holder =
            create->getBlock()->findAncestorOpInBlock(*init.getOperation());
        if (!holder) {
          error(init) << "is not in the block of the kvpipe.create or nested "
                         "in it: every thread of the CTA must execute it"
                      << where(create.getResult());
          continue;
        }
        if (holder != init.getOperation()) {
          InFlightDiagnostic diag =
              error(init)
              << (isa<LoopLikeOpInterface>(holder)
                      ? "is inside a loop: kvpipe.init is executed once by "
                        "every thread of the CTA, not once per iteration"
                      : "is under a condition: kvpipe.init is CTA-wide, every "
                        "thread of the CTA must execute it (the others would "
                        "use barriers nobody initialised, or wait in its CTA "
                        "barrier forever)")
              << where(create.getResult());
          diag.attachNote(holder->getLoc()) << "the enclosing '"
                                            << holder->getName() << "'";
          continue;
        }
        // Nothing may use the pipeline before it (reported once, at the
        // first use).
        Operation *firstUse = nullptr;
        Value usedState;
        for (Value state : flow.getStates()) {
          if (flow.getPipeline(state) != pipeline)
            continue;
          for (Operation *user : state.getUsers()) {
            Operation *ancestor =
                create->getBlock()->findAncestorOpInBlock(*user);
            if (!ancestor || ancestor == init.getOperation() ||
                !ancestor->isBeforeInBlock(init))
              continue;
            if (!firstUse || user->isBeforeInBlock(firstUse) ||
                (user->getBlock() != firstUse->getBlock() &&
                 dominance.properlyDominates(user, firstUse))) {
              firstUse = user;
              usedState = state;
            }
          }
        }
        if (firstUse) {
          InFlightDiagnostic diag =
              error(firstUse) << "uses the pipeline before its kvpipe.init"
                              << where(usedState, getStageOf(firstUse));
          diag.attachNote(init.getLoc()) << "the kvpipe.init";
        }
      }
      if (!first)
        error(create) << "is never initialised: every thread of the CTA must "
                         "execute kvpipe.init on it before its first use"
                      << where(create.getResult());
    });
  }

  //===--------------------------------------------------------------------===//
  // 7. Flow: states through ops the analysis models, and no aliases
  //===--------------------------------------------------------------------===//

  /// Whether `op` is a protocol op that returns a state (`step`,
  /// `consumer_release`), which the analysis follows to its operand.
  static bool returnsState(Operation *op) {
    auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(op);
    return protocolOp && protocolOp.getResultState();
  }

  /// Whether the analysis follows a state produced by `op`.
  bool producesKnownState(Operation *op, unsigned result) {
    if (returnsState(op) ||
        isa<CreateOp, scf::ForOp, scf::WhileOp, scf::IfOp, scf::IndexSwitchOp,
            scf::ExecuteRegionOp>(op))
      return true;
    if (auto call = dyn_cast<CallOpInterface>(op))
      return flow.getCallAdvance(call, result).has_value();
    return false;
  }

  /// Whether the analysis follows a state used by `op`.
  bool consumesKnownState(Operation *op) {
    if (op->getDialect() && isa<KVPipeDialect>(op->getDialect()))
      return true;
    if (isa<scf::ForOp, scf::WhileOp, scf::YieldOp, scf::ConditionOp>(op) ||
        op->hasTrait<OpTrait::ReturnLike>() || isa<BranchOpInterface>(op) ||
        isFunctionReturn(op))
      return true;
    if (auto call = dyn_cast<CallOpInterface>(op))
      return static_cast<bool>(flow.resolveCallee(call));
    return false;
  }

  void checkFlow() {
    DenseSet<Operation *> &reported = unfollowed;
    // States merged from different pipelines by a branch: which pipeline a
    // wait, release or step on them works on depends on the path. Reading
    // only the ring index of either is harmless.
    for (Value state : flow.getStates()) {
      if (!flow.isMixed(state) ||
          llvm::all_of(state.getUsers(),
                       [](Operation *user) { return isa<IndexOp>(user); }))
        continue;
      Operation *at = state.getDefiningOp();
      if (!at) {
        Block *block = cast<BlockArgument>(state).getOwner();
        at = block->hasNoPredecessors() ? block->getParentOp()
                                 : (*block->pred_begin())->getTerminator();
      }
      if (!reported.insert(at).second)
        continue;
      unproven(at) << "which pipeline this state belongs to: "
                   << (isa<BlockArgument>(state)
                           ? "the branches to its block pass"
                           : "its branches yield")
                   << " states of different pipelines, so the slots waited "
                      "for, released or advanced through it are not counted "
                      "for either"
                   << where(state);
    }
    for (Value state : flow.getStates()) {
      if (auto result = dyn_cast<OpResult>(state)) {
        Operation *def = result.getOwner();
        if (!producesKnownState(def, result.getResultNumber()) &&
            reported.insert(def).second) {
          unproven(def)
              << "which pipeline state this op produces: the checker does not "
                 "follow states through '"
              << def->getName()
              << "', so nothing about the states it makes is proven"
              << where(state);
        }
      } else {
        auto argument = cast<BlockArgument>(state);
        Operation *owner = argument.getOwner()->getParentOp();
        bool known =
            owner && (isa<scf::ForOp, scf::WhileOp, FunctionOpInterface>(owner) ||
                      !argument.getOwner()->isEntryBlock());
        if (!known && reported.insert(owner).second)
          unproven(owner) << "what the pipeline state of block argument #"
                          << argument.getArgNumber() << " of '"
                          << owner->getName() << "' is" << where(state);
      }
    }
    for (Value state : flow.getStates()) {
      for (OpOperand &use : state.getUses()) {
        Operation *user = use.getOwner();
        if (!consumesKnownState(user)) {
          if (reported.insert(user).second)
            unproven(user)
                << "what happens to the pipeline state passed to '"
                << user->getName()
                << "': the checker does not follow states into it (an "
                   "indirect or external call, a cast, a select), so the "
                   "slots it waits for, releases or advances are not counted"
                << where(state);
          continue;
        }
        // The same state twice to one successor of a branch.
        if (auto branch = dyn_cast<BranchOpInterface>(user)) {
          for (unsigned i = 0, e = user->getNumSuccessors(); i < e; ++i) {
            OperandRange forwarded =
                branch.getSuccessorOperands(i).getForwardedOperands();
            if (forwarded.empty())
              continue;
            unsigned begin = forwarded.getBeginOperandIndex();
            unsigned number = use.getOperandNumber();
            if (number < begin ||
                number >= begin + forwarded.size())
              continue;
            for (unsigned j = begin; j < number; ++j)
              if (user->getOperand(j) == state) {
                error(user) << "passes the same state as operands #" << j
                            << " and #" << number << " to one block: each "
                               "copy walks the ring on its own, so the slots "
                               "are waited for or filled twice"
                            << where(state);
                break;
              }
          }
        }
        // The same state twice in one loop, call or yield: two copies of one
        // slot, each advanced on its own.
        if (isa<scf::ForOp, scf::WhileOp, scf::YieldOp, scf::ConditionOp,
                CallOpInterface>(user)) {
          for (OpOperand &other : user->getOpOperands())
            if (&other != &use && other.get() == state &&
                other.getOperandNumber() < use.getOperandNumber()) {
              error(user) << "passes the same state as operands #"
                          << other.getOperandNumber() << " and #"
                          << use.getOperandNumber()
                          << ": each copy walks the ring on its own, so the "
                             "slots are waited for or filled twice"
                          << where(state);
              break;
            }
        }
      }
    }

    // Loops carry their own states.
    for (Operation *loop : flow.getLoops()) {
      auto forOp = dyn_cast<scf::ForOp>(loop);
      SmallVector<Value> carried = PipelineFlow::getCarriedStates(loop);
      if (forOp) {
        for (auto [position, arg] : llvm::enumerate(carried)) {
          if (!arg)
            continue;
          Value yielded = forOp.getYieldedValues()[position];
          Value base;
          PipelineSide sides = PipelineSide::none;
          Operation *why = nullptr;
          std::optional<LinearExpr> advance = arithmetic.traceAdvance(
              yielded, forOp, {}, base, sides, why);
          if (!advance || !base || base == arg)
            continue;
          auto other = dyn_cast<BlockArgument>(base);
          if (other && other.getOwner() == forOp.getBody()) {
            error(forOp.getBody()->getTerminator())
                << "yields at position #" << position
                << " the state carried at position #"
                << other.getArgNumber() - 1
                << ": the two states trade places every iteration"
                << where(arg);
          } else if (!forOp->isAncestor(base.getParentRegion()->getParentOp())) {
            error(forOp.getBody()->getTerminator())
                << "yields at position #" << position
                << " a state defined outside the loop instead of its "
                   "iter_arg advanced: every iteration restarts from the "
                   "same slot"
                << where(arg);
          }
        }
      }
      if (auto whileOp = dyn_cast<scf::WhileOp>(loop))
        checkWhileCarries(whileOp);
      // The body works on the iter_arg, not on the state it came from.
      DenseSet<Value> pipelines;
      for (Value arg : carried)
        if (arg)
          pipelines.insert(flow.getPipeline(arg));
      loop->walk([&](Operation *inner) {
        // The loop's own yield is the yield rule's.
        if (inner == loop || (inner->getParentOp() == loop &&
                              inner->hasTrait<OpTrait::IsTerminator>()))
          return;
        for (Value operand : inner->getOperands()) {
          if (!isState(operand) ||
              !pipelines.contains(flow.getPipeline(operand)))
            continue;
          Region *defined = operand.getParentRegion();
          if (loop->isAncestor(defined->getParentOp()))
            continue;
          InFlightDiagnostic diag =
              error(inner)
              << "uses a state defined outside the loop that carries this "
                 "pipeline: the loop never advances it, so every iteration "
                 "sees the same slot; use the loop's iter_arg"
              << where(operand, getStageOf(inner));
          diag.attachNote(loop->getLoc()) << "the loop";
          staleUsers.insert(inner);
          break;
        }
      });
    }
  }

  static bool isState(Value value) {
    return value && isa<PipelineType>(value.getType());
  }

  /// An `scf.while` carries each state around its own cycle: the state
  /// yielded at position j comes (advanced or not) from the after-argument
  /// that the condition forwarded from before-argument j, not from another
  /// position's (the states would trade places) nor from outside the loop.
  void checkWhileCarries(scf::WhileOp whileOp) {
    scf::ConditionOp condition = whileOp.getConditionOp();
    scf::YieldOp yield = whileOp.getYieldOp();
    if (!condition || !yield)
      return;
    auto trace = [&](Value value) -> Value {
      Value base;
      PipelineSide sides = PipelineSide::none;
      Operation *why = nullptr;
      std::optional<LinearExpr> advance =
          arithmetic.traceAdvance(value, whileOp, {}, base, sides, why);
      return advance ? base : Value();
    };
    Block *before = whileOp.getBeforeBody(), *after = whileOp.getAfterBody();
    for (auto [position, yielded] : llvm::enumerate(yield.getOperands())) {
      if (!isState(yielded) || position >= before->getNumArguments())
        continue;
      Value base = trace(yielded);
      if (!base)
        continue;
      auto afterArg = dyn_cast<BlockArgument>(base);
      if (!afterArg || afterArg.getOwner() != after) {
        if (!whileOp->isAncestor(base.getParentRegion()->getParentOp()))
          error(yield) << "yields at position #" << position
                       << " a state defined outside the loop instead of its "
                          "argument advanced: every iteration restarts from "
                          "the same slot"
                       << where(yielded);
        continue;
      }
      if (afterArg.getArgNumber() >= condition.getArgs().size())
        continue;
      Value forwarded = condition.getArgs()[afterArg.getArgNumber()];
      Value origin = trace(forwarded);
      auto beforeArg = dyn_cast_or_null<BlockArgument>(origin);
      if (!origin)
        continue;
      if (beforeArg && beforeArg.getOwner() == before) {
        if (beforeArg.getArgNumber() != position)
          error(yield) << "yields at position #" << position
                       << " the state that the condition forwarded from "
                          "position #"
                       << beforeArg.getArgNumber()
                       << ": the states trade places every iteration"
                       << where(yielded);
        continue;
      }
      if (!whileOp->isAncestor(origin.getParentRegion()->getParentOp()))
        error(condition) << "forwards at position #"
                         << afterArg.getArgNumber()
                         << " a state defined outside the loop instead of "
                            "its argument: every iteration restarts from the "
                            "same slot"
                         << where(forwarded);
    }
  }

  //===--------------------------------------------------------------------===//
  // 8. Totals: the slots each side advances from the pipeline's creation
  //===--------------------------------------------------------------------===//

  /// A terminator that returns from a function (`gpu.return` is not
  /// ReturnLike).
  static bool isFunctionReturn(Operation *op) {
    return op->hasTrait<OpTrait::IsTerminator>() &&
           isa_and_nonnull<FunctionOpInterface>(op->getParentOp());
  }

  /// Whether `use` passes the state on (so that it is not where a chain
  /// ends).
  static bool forwards(OpOperand &use) {
    Operation *user = use.getOwner();
    return returnsState(user) ||
           isa<scf::ForOp, scf::WhileOp, scf::YieldOp, scf::ConditionOp,
               CallOpInterface, BranchOpInterface>(user) ||
           user->hasTrait<OpTrait::ReturnLike>() || isFunctionReturn(user);
  }

  /// Whether two conditions have the same value on every thread of the CTA.
  bool isSameCondition(Value a, Value b) {
    unsigned number = arithmetic.getValueNumber(a);
    return number == arithmetic.getValueNumber(b) &&
           !arithmetic.getNonUniformAtom(LinearExpr::ofAtom(number));
  }

  /// Rule 5: the producer's chain ending at `producer` and the consumer's
  /// ending at `consumer` run under the same conditions, apart from the
  /// branch that splits the roles and conditions that pick threads of a
  /// role (a thread id compared with a constant). Reports the first other
  /// condition only one side is under; false when it did.
  bool checkChainGuards(Value pipeline, Value producer, Value consumer,
                        Operation *scope) {
    SmallVector<ChainGuard> onProducer = getChainGuards(producer, scope);
    SmallVector<ChainGuard> onConsumer = getChainGuards(consumer, scope);
    size_t shared = 0;
    while (shared < onProducer.size() && shared < onConsumer.size() &&
           onProducer[shared] == onConsumer[shared])
      ++shared;
    ArrayRef<ChainGuard> producerOnly = ArrayRef(onProducer).drop_front(shared);
    ArrayRef<ChainGuard> consumerOnly = ArrayRef(onConsumer).drop_front(shared);
    // The role split: the two ends in different branches of one op.
    if (!producerOnly.empty() && !consumerOnly.empty() &&
        producerOnly.front().op == consumerOnly.front().op) {
      producerOnly = producerOnly.drop_front();
      consumerOnly = consumerOnly.drop_front();
    }
    auto matches = [&](const ChainGuard &guard, ArrayRef<ChainGuard> others) {
      return llvm::any_of(others, [&](const ChainGuard &other) {
        return guard.op->getName() == other.op->getName() &&
               guard.region == other.region &&
               guard.op->getAttrDictionary() == other.op->getAttrDictionary() &&
               isSameCondition(guard.condition, other.condition);
      });
    };
    auto check = [&](ArrayRef<ChainGuard> mine, ArrayRef<ChainGuard> theirs,
                     bool isProducer, Value otherEnd) {
      for (const ChainGuard &guard : mine) {
        if (selectsThreads(guard.condition) || matches(guard, theirs))
          continue;
        Operation *otherAt = otherEnd.getDefiningOp()
                                 ? otherEnd.getDefiningOp()
                                 : otherEnd.getParentRegion()->getParentOp();
        InFlightDiagnostic diag =
            unproven(guard.op)
            << "that the " << (isProducer ? "producer" : "consumer")
            << " side runs whenever the "
            << (isProducer ? "consumer" : "producer")
            << " side does: its chain of states ends under this condition "
               "and the other side's is not under the same one; where it "
               "does not hold, the "
            << (isProducer ? "consumers wait for slots nobody fills"
                           : "producer waits for slots nobody releases")
            << where(pipeline);
        diag.attachNote(otherAt->getLoc())
            << "where the " << (isProducer ? "consumer" : "producer")
            << " side's chain ends";
        return false;
      }
      return true;
    };
    return check(producerOnly, consumerOnly, true, consumer) &&
           check(consumerOnly, producerOnly, false, producer);
  }

  void checkTotals() {
    struct End {
      Value state;
      std::optional<LinearExpr> total;
      Operation *why = nullptr;
      /// The chain ends in unstructured control flow, whose paths are not
      /// counted.
      bool unstructured = false;
      /// The function the chain is counted in.
      Operation *scope = nullptr;
    };
    llvm::MapVector<Value, SmallVector<End>> producers, consumers;
    DenseMap<Value, Value> created;
    for (Value state : flow.getStates()) {
      if (llvm::any_of(state.getUses(),
                       [](OpOperand &use) { return forwards(use); }))
        continue;
      // A state merged from several pipelines only to read a ring index:
      // no chain of the protocol (checkFlow reports any other use).
      if (flow.isMixed(state) &&
          llvm::all_of(state.getUsers(),
                       [](Operation *user) { return isa<IndexOp>(user); }))
        continue;
      Operation *scope = state.getParentRegion()->getParentOp();
      while (scope && !isa<FunctionOpInterface>(scope) && scope != root)
        scope = scope->getParentOp();
      if (!scope)
        continue;
      PathFacts facts;
      for (Region *region = state.getParentRegion();
           region && region->getParentOp() != scope;
           region = region->getParentOp()->getParentRegion())
        arithmetic.addBranchFacts(region, facts);
      Value base;
      PipelineSide sides = PipelineSide::none;
      Operation *why = nullptr;
      std::optional<LinearExpr> total =
          arithmetic.traceAdvance(state, scope, facts, base, sides, why);
      // Under unstructured control flow (a region of several blocks) the
      // chain runs on some paths only: which ones is not counted.
      bool unstructured = false;
      for (Region *region = state.getParentRegion(); region;
           region = region->getParentOp()->getParentRegion()) {
        if (!region->hasOneBlock()) {
          unstructured = true;
          total = std::nullopt;
          why = region->front().getTerminator();
          break;
        }
        if (region->getParentOp() == scope)
          break;
      }
      // A chain that ends inside a loop body without being carried out is
      // a state the loop drops: linear use (an old state yielded), the yield
      // rules (another state or an outer one yielded) report it.
      if (!total && why && isa<LoopLikeOpInterface>(why) &&
          why->isAncestor(state.getParentRegion()->getParentOp()))
        continue;
      Value pipeline = flow.getPipeline(state);
      if (base && base.getDefiningOp<CreateOp>())
        created[pipeline] = base;
      if (sides == PipelineSide::producer)
        producers[pipeline].push_back({state, total, why, unstructured, scope});
      else if (sides == PipelineSide::consumer)
        consumers[pipeline].push_back({state, total, why, unstructured, scope});
      else if (sides == PipelineSide::none && !total && why)
        producers[pipeline].push_back({state, total, why, unstructured, scope});
    }

    auto describeEnd = [&](End end) {
      if (Operation *def = end.state.getDefiningOp())
        return def;
      return end.state.getParentRegion()->getParentOp();
    };
    for (auto &[pipeline, ends] : producers) {
      if (unbalanced.contains(pipeline))
        continue;
      auto consumerIt = consumers.find(pipeline);
      SmallVector<End> all(ends);
      if (consumerIt != consumers.end())
        llvm::append_range(all, consumerIt->second);
      // What cannot be counted.
      const End *unknown = nullptr;
      for (const End &end : all)
        if (!end.total) {
          unknown = &end;
          break;
        }
      if (unknown) {
        Operation *at = unknown->why ? unknown->why : describeEnd(*unknown);
        if (unfollowed.contains(at) || reportedBranches.contains(at))
          continue;
        if (unknown->unstructured) {
          InFlightDiagnostic diag =
              unproven(at)
              << "that the producer and consumer sides advance the same "
                 "number of slots through unstructured control flow: the "
                 "checker does not count the paths of 'cf' branches"
              << where(pipeline);
          diag.attachNote(describeEnd(*unknown)->getLoc())
              << "a chain of the pipeline's states ends here";
          continue;
        }
        unproven(at) << "that the producer and consumer sides advance the "
                        "same number of slots: the checker cannot count the "
                        "slots through this op"
                     << where(pipeline);
        continue;
      }
      if (consumerIt == consumers.end())
        continue; // one side only: the other is a caller's or callee's
      const End &first = ends.front();
      bool allEqual = true;
      for (const End &end : all) {
        if (*end.total == *first.total)
          continue;
        allEqual = false;
        bool consumer = llvm::is_contained(
            llvm::map_range(consumerIt->second,
                            [](const End &e) { return e.state; }),
            end.state);
        if (first.total->isConstant() && end.total->isConstant()) {
          InFlightDiagnostic diag =
              error(describeEnd(end))
              << (consumer ? "consumer" : "producer") << " side advances "
              << end.total->constant << " slot(s) in total but the producer "
              << "side advances " << first.total->constant
              << ": their phases drift apart and the pipeline hangs"
              << where(pipeline);
          diag.attachNote(describeEnd(first)->getLoc())
              << "where the producer side ends";
        } else {
          InFlightDiagnostic diag =
              unproven(describeEnd(end))
              << "that the producer and consumer loops advance the same "
                 "number of slots: the "
              << (consumer ? "consumer" : "producer") << " side advances "
              << arithmetic.print(*end.total) << " and the producer side "
              << arithmetic.print(*first.total) << where(pipeline);
          diag.attachNote(describeEnd(first)->getLoc())
              << "where the producer side ends";
        }
        break;
      }
      // Equal totals are equal counts only where each atom is the same on
      // every thread: the producer's and the consumer's threads evaluate
      // the bounds on their own.
      if (!allEqual)
        continue;
      if (Value atom = arithmetic.getNonUniformAtom(*first.total)) {
        const End &end = consumerIt->second.front();
        std::string name;
        llvm::raw_string_ostream os(name);
        atom.printAsOperand(os, OpPrintingFlags());
        InFlightDiagnostic diag =
            unproven(describeEnd(end))
            << "that the producer and consumer loops advance the same "
               "number of slots: both sides advance "
            << arithmetic.print(*first.total) << ", but " << name
            << " is not known to be the same on every thread of the CTA (a "
               "thread, lane or warpgroup id, a value loaded from memory, or "
               "one the checker cannot follow), and the producer's and the "
               "consumer's threads each compute it"
            << where(pipeline);
        diag.attachNote(atom.getLoc()) << "the value";
        diag.attachNote(describeEnd(first)->getLoc())
            << "where the producer side ends";
        continue;
      }
      // Equal counts, but each side runs its chain only under the
      // conditions its end is nested in.
      for (const End &producer : ends) {
        bool reported = false;
        for (const End &consumer : consumerIt->second)
          if (producer.scope == consumer.scope &&
              !checkChainGuards(pipeline, producer.state, consumer.state,
                                producer.scope)) {
            reported = true;
            break;
          }
        if (reported)
          break;
      }
    }
    // A consumer side without a producer in a function that creates the
    // pipeline waits forever.
    for (auto &[pipeline, ends] : consumers) {
      if (producers.count(pipeline) || !created.count(pipeline) ||
          unbalanced.contains(pipeline))
        continue;
      unproven(describeEnd(ends.front()))
          << "that the consumed slots are ever filled: the pipeline has no "
             "producer side"
          << where(pipeline);
    }
    // The mirror: a producer side without a consumer in a function that
    // creates the pipeline. Past the ring's kv_stages slots, the producer
    // waits for a release that never comes; within them, nothing reads
    // what it filled (or a consumer elsewhere does: not in this module).
    for (auto &[pipeline, ends] : producers) {
      if (consumers.count(pipeline) || !created.count(pipeline) ||
          unbalanced.contains(pipeline))
        continue;
      // A chain that cannot be counted is reported above.
      if (llvm::any_of(ends, [](const End &end) { return !end.total; }))
        continue;
      auto type = cast<PipelineType>(pipeline.getType());
      const End *over = nullptr;
      for (const End &end : ends)
        if (end.total && end.total->isConstant() &&
            end.total->constant > type.getKvStages()) {
          over = &end;
          break;
        }
      if (over) {
        error(describeEnd(*over))
            << "fills " << over->total->constant
            << " slots but the pipeline has no consumer side: the ring has "
            << type.getKvStages()
            << " slots, so the producer waits forever for a release of the "
               "slot it refills"
            << where(pipeline);
        continue;
      }
      unproven(describeEnd(ends.front()))
          << "that the filled slots are ever consumed: the pipeline has no "
             "consumer side"
          << where(pipeline);
    }
  }

  //===--------------------------------------------------------------------===//
  // 9. Reads: in-flight wgmma groups along every path, and reads before the
  // data landed
  //===--------------------------------------------------------------------===//

  /// A wgmma group (a kvpipe.warpgroup_mma, a call issuing some, a hand
  /// committed nvvm group) and what it reads.
  struct Group {
    Operation *op;
    /// Slots (caller-level representatives) and sub-stages (-1: unknown).
    SmallVector<std::pair<Value, int64_t>> reads;
    /// For each read: whether its sub-stage is only the last one waited for
    /// before the wgmma (the tile matches no producer load).
    SmallVector<bool> guessed;
    /// Where a read could not be followed, if anywhere.
    Operation *unknownRead = nullptr;
  };
  using Queue = SmallVector<const Group *, 8>;
  /// The calls being simulated, outermost first.
  SmallVector<CallOpInterface> callStack;
  std::deque<Group> groups;

  /// The caller-level state for a state inside a simulated callee.
  Value mapState(Value state) {
    for (int level = callStack.size() - 1; level >= 0; --level) {
      CallOpInterface call = callStack[level];
      FunctionOpInterface callee = flow.resolveCallee(call);
      bool mapped = false;
      for (auto [index, argument] : llvm::enumerate(callee.getArguments()))
        if (isState(argument) &&
            flow.getSlot(argument) == flow.getSlot(state)) {
          state = call.getArgOperands()[index];
          mapped = true;
          break;
        }
      if (!mapped)
        break;
    }
    return state;
  }

  /// The sub-stage the producer loads into the buffer `memref` addresses
  /// (by the view chain's constant offsets), if it can tell.
  std::map<std::string, int64_t> stageOfTile;
  bool stagesCollected = false;

  /// A key for the buffer `memref` addresses: its root and, through the
  /// view chain, the offsets (constants, "slot" for offsets computed from a
  /// kvpipe.index, "?" otherwise).
  std::string tileKey(Value memref) {
    std::string key;
    Value current = memref;
    for (unsigned guard = 0; current && guard < 64; ++guard) {
      Operation *def = current.getDefiningOp();
      auto offsetKey = [&](OpFoldResult offset) -> std::string {
        if (std::optional<int64_t> c = getConstantIntValue(offset))
          return std::to_string(*c);
        Value v = cast<Value>(offset);
        Operation *unknown = nullptr;
        return getSlotsOf(v, 0, unknown).empty() ? "?" : "slot";
      };
      if (auto subview = dyn_cast_or_null<memref::SubViewOp>(def)) {
        key += "sv[";
        for (OpFoldResult offset : subview.getMixedOffsets())
          key += offsetKey(offset) + ",";
        key += "]";
        current = subview.getSource();
      } else if (def && isa<memref::ExpandShapeOp, memref::CollapseShapeOp,
                            memref::CastOp, memref::ReinterpretCastOp,
                            memref::ViewOp>(def)) {
        key += def->getName().getStringRef().str() + ";";
        current = def->getOperand(0);
      } else {
        std::string text;
        llvm::raw_string_ostream os(text);
        os << current.getAsOpaquePointer();
        return key + "@" + text;
      }
    }
    return key;
  }

  void collectStages() {
    if (stagesCollected)
      return;
    stagesCollected = true;
    root->walk([&](TMALoadOp load) {
      auto mbar = load.getMbarrier().getDefiningOp<ProducerMBarOp>();
      if (!mbar || mbar.getPipelineType().getQkStages() == 1)
        return;
      stageOfTile[tileKey(load.getDest())] = mbar.getStage();
    });
  }

  /// The slots whose kvpipe.index `value` is computed from, through pure
  /// ops, the branches of `scf.if` / `scf.index_switch`, callees that return
  /// it (and through callees being simulated, back to their callers).
  /// `unknown` is set to the op where the chain could not be followed: a
  /// loop's carried value, a block argument, a call it cannot resolve.
  SmallVector<Value> getSlotsOf(Value value, unsigned depth,
                                Operation *&unknown, int start = -1) {
    SmallVector<Value> slots;
    auto addAll = [&](ArrayRef<Value> more) {
      for (Value slot : more)
        if (!llvm::is_contained(slots, slot))
          slots.push_back(slot);
    };
    if (depth > 8) {
      unknown = value.getDefiningOp() ? value.getDefiningOp()
                                      : value.getParentBlock()->getParentOp();
      return slots;
    }
    // (value, call-stack level it lives at)
    SmallVector<std::pair<Value, int>> worklist = {
        {value, start < 0 ? int(callStack.size()) : start}};
    DenseSet<std::pair<Value, int>> visited;
    while (!worklist.empty() && visited.size() < 512) {
      auto [v, level] = worklist.pop_back_val();
      if (!visited.insert({v, level}).second)
        continue;
      if (auto argument = dyn_cast<BlockArgument>(v)) {
        Operation *owner = argument.getOwner()->getParentOp();
        // A simulated callee's argument: the caller's operand.
        if (level > 0 &&
            owner == flow.resolveCallee(callStack[level - 1]).getOperation() &&
            argument.getOwner()->isEntryBlock()) {
          worklist.push_back(
              {callStack[level - 1].getArgOperands()[argument.getArgNumber()],
               level - 1});
          continue;
        }
        // A function's own argument: no slot index of its pipelines here.
        if (isa_and_nonnull<FunctionOpInterface>(owner) &&
            argument.getOwner()->isEntryBlock())
          continue;
        // A loop's induction variable runs from its bounds; a carried value
        // is its initial value or one a previous iteration yielded; a block
        // argument is what some predecessor forwards.
        if (auto forOp = dyn_cast_or_null<scf::ForOp>(owner)) {
          if (argument == forOp.getInductionVar()) {
            for (Value bound : {forOp.getLowerBound(), forOp.getUpperBound(),
                                forOp.getStep()})
              worklist.push_back({bound, level});
          } else {
            unsigned position = argument.getArgNumber() - 1;
            worklist.push_back({forOp.getInitArgs()[position], level});
            worklist.push_back({forOp.getYieldedValues()[position], level});
          }
          continue;
        }
        if (auto whileOp = dyn_cast_or_null<scf::WhileOp>(owner)) {
          unsigned position = argument.getArgNumber();
          if (argument.getOwner() == whileOp.getBeforeBody()) {
            worklist.push_back({whileOp.getInits()[position], level});
            if (scf::YieldOp yield = whileOp.getYieldOp())
              worklist.push_back({yield.getOperand(position), level});
            else
              unknown = owner;
          } else if (scf::ConditionOp condition = whileOp.getConditionOp()) {
            worklist.push_back({condition.getArgs()[position], level});
          } else {
            unknown = owner;
          }
          continue;
        }
        if (!argument.getOwner()->isEntryBlock()) {
          Block *block = argument.getOwner();
          for (auto it = block->pred_begin(); it != block->pred_end(); ++it) {
            auto branch = dyn_cast<BranchOpInterface>((*it)->getTerminator());
            if (!branch) {
              unknown = (*it)->getTerminator();
              continue;
            }
            for (unsigned i = 0, e = branch->getNumSuccessors(); i < e; ++i) {
              if (branch->getSuccessor(i) != block)
                continue;
              SuccessorOperands operands = branch.getSuccessorOperands(i);
              Value forwarded = operands[argument.getArgNumber()];
              if (forwarded)
                worklist.push_back({forwarded, level});
              else
                unknown = branch;
            }
          }
          continue;
        }
        unknown = owner;
        continue;
      }
      Operation *def = v.getDefiningOp();
      if (auto index = dyn_cast<IndexOp>(def)) {
        if (flow.isMixed(index.getPipeline())) {
          unknown = def; // the index of one of several pipelines
          continue;
        }
        // Map the state at the level the index op lives at.
        SmallVector<CallOpInterface> saved(callStack);
        callStack.resize(level);
        Value slot = flow.getSlot(mapState(index.getPipeline()));
        callStack = std::move(saved);
        if (!llvm::is_contained(slots, slot))
          slots.push_back(slot);
        continue;
      }
      unsigned result = cast<OpResult>(v).getResultNumber();
      if (isa<scf::IfOp, scf::IndexSwitchOp>(def)) {
        // Any branch's value: the union of what they yield.
        for (Region &region : def->getRegions()) {
          auto yield = region.hasOneBlock()
                           ? dyn_cast<scf::YieldOp>(region.front().getTerminator())
                           : nullptr;
          if (!yield || result >= yield.getNumOperands()) {
            unknown = def;
            break;
          }
          worklist.push_back({yield.getOperand(result), level});
        }
        continue;
      }
      if (auto call = dyn_cast<CallOpInterface>(def)) {
        FunctionOpInterface callee = flow.resolveCallee(call);
        if (!callee || llvm::is_contained(callStack, call) ||
            callStack.size() > 4) {
          unknown = def;
          continue;
        }
        // What the helper returns, in its terms.
        SmallVector<CallOpInterface> saved(callStack);
        callStack.resize(level);
        callStack.push_back(call);
        for (Block &block : callee.getFunctionBody())
          if (block.mightHaveTerminator() &&
              block.getTerminator()->hasTrait<OpTrait::ReturnLike>() &&
              result < block.getTerminator()->getNumOperands())
            addAll(getSlotsOf(block.getTerminator()->getOperand(result),
                              depth + 1, unknown));
        callStack = std::move(saved);
        continue;
      }
      if (auto forOp = dyn_cast<scf::ForOp>(def)) {
        worklist.push_back({forOp.getInitArgs()[result], level});
        worklist.push_back({forOp.getYieldedValues()[result], level});
        continue;
      }
      if (auto whileOp = dyn_cast<scf::WhileOp>(def)) {
        if (scf::ConditionOp condition = whileOp.getConditionOp())
          worklist.push_back({condition.getArgs()[result], level});
        else
          unknown = def;
        continue;
      }
      if (isa<scf::ExecuteRegionOp>(def)) {
        for (Block &block : def->getRegion(0)) {
          auto yield = dyn_cast<scf::YieldOp>(block.getTerminator());
          if (yield && result < yield.getNumOperands())
            worklist.push_back({yield.getOperand(result), level});
        }
        continue;
      }
      if (def->getNumRegions() != 0) {
        // Another op with regions: what it returns is not followed.
        unknown = def;
        continue;
      }
      if (isMemoryEffectFree(def))
        for (Value operand : def->getOperands())
          worklist.push_back({operand, level});
    }
    return slots;
  }

  /// What a wgmma operand reads: the slots of the buffer it addresses,
  /// followed through view ops, casts, calls that return a view, and into
  /// the caller for a callee's argument. `unknown` is set to the op where
  /// the chain could not be followed.
  SmallVector<Value> getSlotsRead(Value memref, Operation *&unknown,
                                  unsigned depth = 0) {
    SmallVector<Value> slots;
    auto addAll = [&](ArrayRef<Value> more) {
      for (Value slot : more)
        if (!llvm::is_contained(slots, slot))
          slots.push_back(slot);
    };
    Value current = memref;
    int level = callStack.size();
    for (unsigned guard = 0; current && guard < 64 && depth < 8; ++guard) {
      if (auto argument = dyn_cast<BlockArgument>(current)) {
        Operation *owner = argument.getOwner()->getParentOp();
        // A callee's argument: continue in the caller being simulated.
        if (level > 0 && owner == flow.resolveCallee(callStack[level - 1])
                                      .getOperation()) {
          current = callStack[level - 1].getArgOperands()[argument.getArgNumber()];
          --level;
          continue;
        }
        // A function's own argument or a workgroup attribution: a buffer
        // that no slot index addresses here.
        if (isa_and_nonnull<FunctionOpInterface>(owner))
          break;
        unknown = owner;
        break;
      }
      Operation *def = current.getDefiningOp();
      if (auto subview = dyn_cast<memref::SubViewOp>(def)) {
        for (Value offset : subview.getOffsets())
          addAll(getSlotsOf(offset, depth, unknown, level));
        current = subview.getSource();
      } else if (auto view = dyn_cast<memref::ViewOp>(def)) {
        addAll(getSlotsOf(view.getByteShift(), depth, unknown, level));
        current = view.getSource();
      } else if (auto reinterpret = dyn_cast<memref::ReinterpretCastOp>(def)) {
        for (Value offset : reinterpret.getOffsets())
          addAll(getSlotsOf(offset, depth, unknown, level));
        current = reinterpret.getSource();
      } else if (isa<memref::CastOp, memref::ExpandShapeOp,
                     memref::CollapseShapeOp, memref::TransposeOp,
                     memref::MemorySpaceCastOp>(def)) {
        current = def->getOperand(0);
      } else if (auto call = dyn_cast<CallOpInterface>(def)) {
        // A helper that returns a view: what it returns, in its terms.
        FunctionOpInterface callee = flow.resolveCallee(call);
        if (!callee || llvm::is_contained(callStack, call) ||
            callStack.size() > 4) {
          unknown = def;
          break;
        }
        unsigned result = cast<OpResult>(current).getResultNumber();
        callStack.push_back(call);
        for (Block &block : callee.getFunctionBody())
          if (block.mightHaveTerminator() &&
              block.getTerminator()->hasTrait<OpTrait::ReturnLike>() &&
              result < block.getTerminator()->getNumOperands())
            addAll(getSlotsRead(block.getTerminator()->getOperand(result),
                                unknown, depth + 1));
        callStack.pop_back();
        break;
      } else if (def && (isa<memref::AllocOp, memref::AllocaOp,
                             memref::GetGlobalOp, gpu::DynamicSharedMemoryOp>(
                            def))) {
        break;
      } else {
        unknown = def;
        break;
      }
    }
    return slots;
  }

  /// The sub-stage of the slot the buffer `memref` holds: the producer's
  /// sub-stage for the same tile, or -1.
  int64_t getStageRead(Value memref, Value slot) {
    auto type = cast<PipelineType>(slot.getType());
    if (type.getQkStages() == 1)
      return 0;
    collectStages();
    auto it = stageOfTile.find(tileKey(memref));
    return it == stageOfTile.end() ? -1 : it->second;
  }

  /// Whether a consumer_wait of `slot` at `stage` (any stage when -1: all
  /// of them) runs before `op` on every path.
  bool isWaited(Operation *op, Value slot, int64_t stage) {
    auto type = cast<PipelineType>(slot.getType());
    SmallVector<bool> waited(type.getQkStages(), false);
    // In the innermost function first, then at each call being simulated.
    SmallVector<Operation *> anchors = {op};
    for (int level = callStack.size() - 1; level >= 0; --level)
      anchors.push_back(callStack[level]);
    for (Operation *anchor : anchors) {
      auto function = anchor->getParentOfType<FunctionOpInterface>();
      Operation *scope = function ? function.getOperation() : root;
      scope->walk([&](ConsumerWaitOp wait) {
        if (flow.getSlot(mapState(wait.getPipeline())) != slot ||
            !dominance.properlyDominates(wait.getOperation(), anchor))
          return;
        if (wait.getStage() < static_cast<int64_t>(waited.size()))
          waited[wait.getStage()] = true;
      });
    }
    if (stage >= 0)
      return stage < static_cast<int64_t>(waited.size()) && waited[stage];
    return llvm::all_of(waited, [](bool w) { return w; });
  }

  /// Whether the function holding `op` is called in the module: a read of
  /// a slot it receives is then checked in each caller's context.
  bool hasCallers(Operation *op) {
    auto function = op->getParentOfType<FunctionOpInterface>();
    if (!function)
      return false;
    if (!callSites)
      callSites.emplace(root);
    return !callSites->getCalls(function).empty();
  }
  std::optional<CallSites> callSites;

  /// Whether `slot` is a pipeline state the function receives: its waits
  /// are the caller's business.
  bool isFromCaller(Value slot) {
    for (Value state : flow.getSlotStates(slot))
      if (auto argument = dyn_cast<BlockArgument>(state))
        if (argument.getOwner()->isEntryBlock() &&
            isa_and_nonnull<FunctionOpInterface>(
                argument.getOwner()->getParentOp()))
          return true;
    return false;
  }

  /// Builds the group `op` (a wgmma) issues, and checks its reads landed.
  const Group *issue(WarpgroupMmaOp mma) {
    Group group{mma, {}, {}, nullptr};
    for (Value operand : {Value(mma.getA()), Value(mma.getB())}) {
      if (!isa<MemRefType>(operand.getType()))
        continue;
      Operation *unknown = nullptr;
      for (Value slot : getSlotsRead(operand, unknown)) {
        int64_t stage = getStageRead(operand, slot);
        bool guess = false;
        if (stage < 0) {
          // No producer load of this tile: the sub-stage last waited for
          // before the wgmma, and releases of the others are unproven.
          stage = getLastWaitedStage(mma, slot);
          guess = stage >= 0;
        }
        group.reads.push_back({slot, stage});
        group.guessed.push_back(guess);
        checkReadAfterRelease(mma, slot, stage);
        bool fromCaller = callStack.empty() && isFromCaller(slot);
        if (isWaited(mma, slot, stage) || (fromCaller && hasCallers(mma)) ||
            !reportedReads.insert({mma, slot}).second)
          continue;
        Operation *at = callStack.empty() ? mma.getOperation()
                                          : callStack.front().getOperation();
        auto type = cast<PipelineType>(slot.getType());
        // The state comes from a caller outside the module, whose waits the
        // checker does not see.
        if (fromCaller) {
          unproven(at) << "that the slot this wgmma reads was waited for: its "
                          "pipeline state is an argument of a function "
                          "nothing in the module calls, and no consumer_wait "
                          "of the slot in the function runs before it"
                       << where(slot, stage >= 0 && type.getQkStages() > 1
                                          ? std::optional<int64_t>(stage)
                                          : std::nullopt);
          continue;
        }
        if (stage < 0 && type.getQkStages() > 1 && isWaited(mma, slot, 0)) {
          unproven(at) << "which sub-stage of the slot this wgmma reads, and "
                          "not every sub-stage was waited for before it"
                       << where(slot);
          continue;
        }
        InFlightDiagnostic diag =
            error(at) << "reads a slot before its data landed: no "
                         "consumer_wait of the slot"
                      << (stage >= 0 && type.getQkStages() > 1
                              ? " at sub-stage " + std::to_string(stage)
                              : std::string())
                      << " runs before it on every path"
                      << where(slot, stage >= 0 && type.getQkStages() > 1
                                         ? std::optional<int64_t>(stage)
                                         : std::nullopt);
        if (at != mma.getOperation())
          diag.attachNote(mma.getLoc()) << "the wgmma, in the callee";
      }
      if (unknown)
        group.unknownRead = unknown;
    }
    groups.push_back(std::move(group));
    return &groups.back();
  }
  DenseSet<std::pair<Operation *, Value>> reportedReads;

  /// A wgmma reading a slot (at `stage`, -1: unknown) after a
  /// consumer_release of it on every path: the producer may already be
  /// overwriting it. The release may be in the function of the wgmma or in
  /// a caller being simulated before the call.
  void checkReadAfterRelease(WarpgroupMmaOp mma, Value slot, int64_t stage) {
    SmallVector<Operation *> anchors = {mma};
    for (int level = callStack.size() - 1; level >= 0; --level)
      anchors.push_back(callStack[level]);
    Operation *at = callStack.empty() ? mma.getOperation()
                                      : callStack.front().getOperation();
    if (reportedAfterRelease.contains({at, slot}))
      return;
    auto type = cast<PipelineType>(slot.getType());
    for (Operation *anchor : anchors) {
      auto function = anchor->getParentOfType<FunctionOpInterface>();
      Operation *scope = function ? function.getOperation() : root;
      ConsumerReleaseOp found;
      scope->walk([&](ConsumerReleaseOp rel) {
        if (found || flow.getSlot(mapState(rel.getPipeline())) != slot ||
            !dominance.properlyDominates(rel.getOperation(), anchor))
          return;
        if (stage >= 0 && type.getQkStages() > 1 && rel.getStage() != stage)
          return;
        found = rel;
      });
      if (!found)
        continue;
      reportedAfterRelease.insert({at, slot});
      if (stage < 0 && type.getQkStages() > 1) {
        InFlightDiagnostic diag =
            unproven(at) << "that this wgmma does not read a sub-stage of the "
                            "slot after its consumer_release: it reads the slot "
                            "and the checker cannot tell which sub-stage"
                         << where(found.getPipeline(), found.getStage());
        diag.attachNote(found.getLoc()) << "the release";
        return;
      }
      InFlightDiagnostic diag =
          error(at) << "reads a slot after its consumer_release: the producer "
                       "may already be overwriting it (issue the wgmma before "
                       "the release, and retire it before releasing)"
                    << where(found.getPipeline(), found.getStage());
      diag.attachNote(found.getLoc()) << "the release";
      if (at != mma.getOperation())
        diag.attachNote(mma.getLoc()) << "the wgmma, in the callee";
      return;
    }
  }
  DenseSet<std::pair<Operation *, Value>> reportedAfterRelease;
  DenseSet<Operation *> reportedReleases;

  void release(ConsumerReleaseOp op, ArrayRef<Queue> states) {
    Value slot = flow.getSlot(mapState(op.getPipeline()));
    int64_t stage = op.getStage();
    Operation *at = callStack.empty() ? op.getOperation()
                                      : callStack.front().getOperation();
    if (reportedReleases.contains(at))
      return;
    const Group *guessedOther = nullptr;
    for (const Queue &queue : states)
      for (const Group *group : queue) {
        for (auto [read, guess] : llvm::zip(group->reads, group->guessed)) {
          auto [readSlot, readStage] = read;
          if (readSlot != slot)
            continue;
          if (readStage >= 0 && readStage != stage) {
            if (guess && !guessedOther)
              guessedOther = group;
            continue;
          }
          reportedReleases.insert(at);
          InFlightDiagnostic diag =
              error(at)
              << "releases a slot that a kvpipe.warpgroup_mma still in flight "
                 "reads: retire it with kvpipe.warpgroup_wait first"
              << where(op.getPipeline(), stage);
          diag.attachNote(group->op->getLoc())
              << "the wgmma reading the slot, not retired before the release";
          return;
        }
        if (group->unknownRead) {
          reportedReleases.insert(at);
          InFlightDiagnostic diag =
              unproven(at) << "that no wgmma in flight reads the released "
                              "slot: the operand of a wgmma still in flight "
                              "comes from '"
                           << group->unknownRead->getName()
                           << "', which the checker does not follow"
                           << where(op.getPipeline(), stage);
          diag.attachNote(group->op->getLoc()) << "the wgmma";
          return;
        }
      }
    if (guessedOther) {
      reportedReleases.insert(at);
      InFlightDiagnostic diag =
          unproven(at) << "that the wgmma still in flight does not read this "
                          "sub-stage: its tile matches no producer load, so "
                          "the checker cannot tell which sub-stages of the "
                          "slot it reads"
                       << where(op.getPipeline(), stage);
      diag.attachNote(guessedOther->op->getLoc()) << "the wgmma";
    }
  }

  /// The highest sub-stage of `slot` whose consumer_wait runs before `op`
  /// on every path, or -1.
  int64_t getLastWaitedStage(Operation *op, Value slot) {
    int64_t last = -1;
    auto function = op->getParentOfType<FunctionOpInterface>();
    Operation *scope = function ? function.getOperation() : root;
    scope->walk([&](ConsumerWaitOp wait) {
      if (flow.getSlot(mapState(wait.getPipeline())) == slot &&
          dominance.properlyDominates(wait.getOperation(), op))
        last = std::max(last, wait.getStage());
    });
    return last;
  }

  static void retireAllBut(SmallVectorImpl<Queue> &states, uint64_t pending) {
    for (Queue &queue : states)
      if (queue.size() > pending)
        queue.erase(queue.begin(), queue.end() - pending);
  }

  static void dedupe(SmallVectorImpl<Queue> &states) {
    SmallVector<Queue> unique;
    for (Queue &queue : states)
      if (!llvm::is_contained(unique, queue))
        unique.push_back(queue);
    // Too many paths: keep the longest ones' groups (a superset in flight
    // is conservative for releases only if no later wait counts them out;
    // a wait with pending > 0 then retires nothing for sure).
    if (unique.size() > 16) {
      Queue merged;
      for (Queue &queue : unique)
        for (const Group *group : queue)
          if (!llvm::is_contained(merged, group))
            merged.push_back(group);
      unique.assign(1, merged);
    }
    states.swap(unique);
  }

  /// Runs the ops of `block` on every queue of groups in flight.
  void simulate(Block &block, SmallVector<Queue> &states) {
    for (Operation &op : block) {
      if (auto mma = dyn_cast<WarpgroupMmaOp>(op)) {
        const Group *group = issue(mma);
        for (Queue &queue : states)
          queue.push_back(group);
      } else if (isa<NVVM::WgmmaGroupSyncAlignedOp>(op)) {
        groups.push_back({&op, {}, {}, nullptr});
        for (Queue &queue : states)
          queue.push_back(&groups.back());
      } else if (auto retire = dyn_cast<WarpgroupWaitOp>(op)) {
        retireAllBut(states, retire.getPending());
      } else if (auto retire = dyn_cast<NVVM::WgmmaWaitGroupSyncOp>(op)) {
        retireAllBut(states, retire.getGroup());
      } else if (auto rel = dyn_cast<ConsumerReleaseOp>(op)) {
        release(rel, states);
      } else if (auto call = dyn_cast<CallOpInterface>(op)) {
        FunctionOpInterface callee = flow.resolveCallee(call);
        if (callee && !llvm::is_contained(callStack, call) &&
            callStack.size() < 4 && !callee.getFunctionBody().empty()) {
          callStack.push_back(call);
          SmallVector<Queue> result;
          Region &body = callee.getFunctionBody();
          if (body.hasOneBlock()) {
            SmallVector<Queue> copy(states);
            simulate(body.front(), copy);
            result = std::move(copy);
          } else {
            result = simulateCfg(body, states);
          }
          callStack.pop_back();
          if (!result.empty())
            states.swap(result);
          dedupe(states);
        } else if (!callee && llvm::any_of(op.getOperandTypes(), [](Type t) {
                     return isa<MemRefType>(t);
                   })) {
          // It may issue wgmma groups reading its buffers.
          groups.push_back({&op, {}, {}, &op});
          for (Queue &queue : states)
            queue.push_back(&groups.back());
        }
      } else if (op.getNumRegions() != 0) {
        simulateRegions(op, states);
      }
    }
  }

  void simulateRegions(Operation &op, SmallVector<Queue> &states) {
    if (isa<LoopLikeOpInterface>(op)) {
      // Zero, one or two iterations: the groups one iteration leaves in
      // flight are the ones the next starts with.
      SmallVector<Queue> all(states), current(states);
      for (unsigned iteration = 0; iteration < 2; ++iteration) {
        for (Region &region : op.getRegions())
          for (Block &block : region)
            simulate(block, current);
        llvm::append_range(all, current);
        dedupe(current);
      }
      states.swap(all);
      dedupe(states);
      return;
    }
    // Branches: each region is a possible path; an scf.if without else
    // may run neither.
    SmallVector<Queue> all;
    bool mayRunNone = isa<scf::IfOp>(op) && cast<scf::IfOp>(op).getElseRegion().empty();
    if (mayRunNone || !isa<RegionBranchOpInterface>(op))
      llvm::append_range(all, states);
    for (Region &region : op.getRegions()) {
      SmallVector<Queue> copy(states);
      if (region.hasOneBlock()) {
        simulate(region.front(), copy);
      } else if (!region.empty()) {
        copy = simulateCfg(region, copy);
      }
      llvm::append_range(all, copy);
    }
    states.swap(all);
    dedupe(states);
  }

  /// Runs a region of several blocks from `entry`: each block starts with
  /// the groups its predecessors leave in flight (a cycle twice, like a
  /// loop); returns what the blocks that leave the region leave.
  SmallVector<Queue> simulateCfg(Region &region, ArrayRef<Queue> entry) {
    DenseMap<Block *, SmallVector<Queue>> in;
    in[&region.front()].assign(entry.begin(), entry.end());
    SmallVector<Queue> exits;
    for (unsigned round = 0; round < 2; ++round) {
      for (Block &block : region) {
        auto it = in.find(&block);
        if (it == in.end())
          continue;
        SmallVector<Queue> current(it->second);
        simulate(block, current);
        if (block.getNumSuccessors() == 0) {
          llvm::append_range(exits, current);
          continue;
        }
        for (Block *successor : block.getSuccessors()) {
          SmallVector<Queue> &target = in[successor];
          llvm::append_range(target, current);
          dedupe(target);
        }
      }
    }
    dedupe(exits);
    return exits;
  }

  void checkReads() {
    auto run = [&](Region &body) {
      SmallVector<Queue> states(1);
      if (body.hasOneBlock())
        simulate(body.front(), states);
      else
        simulateCfg(body, states);
    };
    if (auto function = dyn_cast<FunctionOpInterface>(root)) {
      if (!function.isExternal())
        run(function.getFunctionBody());
      return;
    }
    root->walk([&](FunctionOpInterface function) {
      if (!function.isExternal())
        run(function.getFunctionBody());
    });
  }

  /// Ops reported as unfollowed by rule 7, and branch ops by rule 3.
  DenseSet<Operation *> unfollowed, reportedBranches;

  Operation *root;
  PipelineFlow flow;
  SlotArithmetic arithmetic;
  DominanceInfo dominance;
  bool strict;
  /// Pipelines (representatives) with an error from the balance rules.
  DenseSet<Value> unbalanced;
  /// Ops reported for using a state after it was advanced.
  DenseSet<Operation *> staleUsers;
  bool hasErrors = false;
};

struct VerifyProtocol : kvpipe::impl::VerifyProtocolBase<VerifyProtocol> {
  using Base::Base;

  void runOnOperation() override {
    ProtocolChecker checker(getOperation(), strict);
    if (!checker.run())
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
