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
//      producer barrier is expected by a commit.
//
//===----------------------------------------------------------------------===//

#include "ProtocolAnalysis.h"

#include "kvpipe/Dialect/KVPipe/Analysis/Transactions.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/MathExtras.h"

#include <deque>

namespace kvpipe {
#define GEN_PASS_DEF_VERIFYPROTOCOL
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h.inc"
} // namespace kvpipe

using namespace mlir;
using namespace kvpipe;

/// The sub-stage an op names, if it names one.
static std::optional<int64_t> getStageOf(Operation *op) {
  if (auto wait = dyn_cast<ConsumerWaitOp>(op))
    return wait.getStage();
  if (auto release = dyn_cast<ConsumerReleaseOp>(op))
    return release.getStage();
  if (auto acquire = dyn_cast<ProducerAcquireOp>(op))
    return acquire.getStage();
  if (auto commit = dyn_cast<ProducerCommitOp>(op))
    return commit.getStage();
  if (auto mbar = dyn_cast<ProducerMBarOp>(op))
    return mbar.getStage();
  if (auto mbar = dyn_cast<ConsumerMBarOp>(op))
    return mbar.getStage();
  return std::nullopt;
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

/// A wgmma group in flight and the slots (and sub-stages, -1: any) it reads.
struct WgmmaGroup {
  Operation *op;
  SmallVector<std::pair<Value, int64_t>> reads;
};

/// The wait (or acquire) of each sub-stage of one slot that is still open
/// in a block, and the last sub-stages seen, for the order check.
struct SlotPairing {
  SmallVector<Operation *> open;
  Operation *lastOpen = nullptr;
  int64_t lastOpenStage = -1;
  Operation *lastClose = nullptr;
  int64_t lastCloseStage = -1;
};

class ProtocolChecker {
public:
  explicit ProtocolChecker(Operation *root)
      : root(root), flow(root), dominance(root) {}

  /// Runs every rule; false when any reported an error.
  bool run() {
    checkLinearUse();
    checkBalance();
    root->walk([&](Block *block) { checkBlock(*block); });
    checkBranches();
    checkTransactions();
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
  /// per iteration: the second iteration uses it after it was advanced.
  void checkAdvanceInLoop(Operation *advancer, Value state) {
    Operation *definedIn = state.getParentRegion()->getParentOp();
    for (Operation *parent = advancer->getParentOp();
         parent && !parent->isAncestor(definedIn);
         parent = parent->getParentOp()) {
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

  //===--------------------------------------------------------------------===//
  // 2. Balance of producer and consumer loops
  //===--------------------------------------------------------------------===//

  struct LoopSide {
    Operation *loop;
    unsigned sides;
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
          if ((a.sides & kProducerSide) && (b.sides & kConsumerSide))
            compareSides(pipeline, a, b);
          else if ((b.sides & kProducerSide) && (a.sides & kConsumerSide))
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
  // 3. Pairing and 4. release after retire, block by block
  //===--------------------------------------------------------------------===//

  /// The slots whose buffer `memref` addresses: those whose `kvpipe.index`
  /// the offsets of its view/subview chain are computed from.
  SmallVector<Value> getSlotsRead(Value memref) {
    SmallVector<Value> worklist;
    Value current = memref;
    for (unsigned guard = 0; current && guard < 64; ++guard) {
      Operation *def = current.getDefiningOp();
      if (auto subview = dyn_cast_or_null<memref::SubViewOp>(def)) {
        llvm::append_range(worklist, subview.getOffsets());
        current = subview.getSource();
      } else if (auto view = dyn_cast_or_null<memref::ViewOp>(def)) {
        worklist.push_back(view.getByteShift());
        current = view.getSource();
      } else if (auto cast = dyn_cast_or_null<memref::ReinterpretCastOp>(def)) {
        llvm::append_range(worklist, cast.getOffsets());
        current = cast.getSource();
      } else if (auto cast = dyn_cast_or_null<memref::CastOp>(def)) {
        current = cast.getSource();
      } else {
        break;
      }
    }
    // The index computations: through side-effect-free ops only.
    SmallVector<Value> slots;
    DenseSet<Value> visited;
    while (!worklist.empty() && visited.size() < 512) {
      Value value = worklist.pop_back_val();
      if (!visited.insert(value).second)
        continue;
      Operation *def = value.getDefiningOp();
      if (!def)
        continue;
      if (auto index = dyn_cast<IndexOp>(def)) {
        Value slot = flow.getSlot(index.getPipeline());
        if (!llvm::is_contained(slots, slot))
          slots.push_back(slot);
        continue;
      }
      if (def->getNumRegions() == 0 && isMemoryEffectFree(def))
        llvm::append_range(worklist, def->getOperands());
    }
    return slots;
  }

  void openPair(DenseMap<std::pair<Value, unsigned>, SlotPairing> &pairs,
                SmallVectorImpl<std::pair<Value, unsigned>> &order,
                Operation *op, Value state, int64_t stage, unsigned kind,
                StringRef name) {
    auto key = std::make_pair(flow.getSlot(state), kind);
    auto [it, inserted] = pairs.try_emplace(key);
    if (inserted)
      order.push_back(key);
    SlotPairing &pairing = it->second;
    int64_t stages = cast<PipelineType>(state.getType()).getQkStages();
    if (pairing.open.size() < static_cast<size_t>(stages))
      pairing.open.resize(stages, nullptr);
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

  void closePair(DenseMap<std::pair<Value, unsigned>, SlotPairing> &pairs,
                 SmallVectorImpl<std::pair<Value, unsigned>> &order,
                 Operation *op, Value state, int64_t stage, unsigned kind,
                 StringRef openName, StringRef name) {
    auto key = std::make_pair(flow.getSlot(state), kind);
    auto [it, inserted] = pairs.try_emplace(key);
    if (inserted)
      order.push_back(key);
    SlotPairing &pairing = it->second;
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
    // 3. Pairing: kind 0 is wait/release, kind 1 acquire/commit.
    DenseMap<std::pair<Value, unsigned>, SlotPairing> pairs;
    SmallVector<std::pair<Value, unsigned>> order;
    // 4. wgmma groups in flight, oldest first, and the sub-stage each slot
    // was last waited on in this block.
    std::deque<WgmmaGroup> inFlight;
    DenseMap<Value, int64_t> lastWaited;

    auto retireAllBut = [&](uint64_t pending) {
      while (inFlight.size() > pending)
        inFlight.pop_front();
    };

    for (Operation &op : block) {
      // A stale state's ops were reported by rule 1; pairing them again
      // would only repeat that.
      bool stale = staleUsers.contains(&op);
      if (stale && isa<ConsumerWaitOp, ConsumerReleaseOp, ProducerAcquireOp,
                       ProducerCommitOp>(op)) {
        if (auto release = dyn_cast<ConsumerReleaseOp>(op))
          checkReleaseRetired(release, inFlight);
        continue;
      }
      if (auto wait = dyn_cast<ConsumerWaitOp>(op)) {
        openPair(pairs, order, &op, wait.getPipeline(), wait.getStage(), 0,
                 "consumer_wait");
        lastWaited[flow.getSlot(wait.getPipeline())] = wait.getStage();
      } else if (auto release = dyn_cast<ConsumerReleaseOp>(op)) {
        checkReleaseRetired(release, inFlight);
        closePair(pairs, order, &op, release.getPipeline(), release.getStage(),
                  0, "consumer_wait", "consumer_release");
      } else if (auto acquire = dyn_cast<ProducerAcquireOp>(op)) {
        openPair(pairs, order, &op, acquire.getPipeline(), acquire.getStage(),
                 1, "producer_acquire");
      } else if (auto commit = dyn_cast<ProducerCommitOp>(op)) {
        closePair(pairs, order, &op, commit.getPipeline(), commit.getStage(), 1,
                  "producer_acquire", "producer_commit");
      } else if (auto mma = dyn_cast<WarpgroupMmaOp>(op)) {
        WgmmaGroup group{&op, {}};
        for (Value operand : {Value(mma.getA()), Value(mma.getB())}) {
          if (!isa<MemRefType>(operand.getType()))
            continue;
          for (Value slot : getSlotsRead(operand)) {
            auto it = lastWaited.find(slot);
            group.reads.push_back(
                {slot, it == lastWaited.end() ? int64_t(-1) : it->second});
          }
        }
        inFlight.push_back(std::move(group));
      } else if (isa<NVVM::WgmmaGroupSyncAlignedOp>(op)) {
        // A group committed by hand reads nothing this pass can see, but it
        // counts towards `pending`.
        inFlight.push_back({&op, {}});
      } else if (auto retire = dyn_cast<WarpgroupWaitOp>(op)) {
        retireAllBut(retire.getPending());
      } else if (auto retire = dyn_cast<NVVM::WgmmaWaitGroupSyncOp>(op)) {
        retireAllBut(retire.getGroup());
      }
    }

    for (const auto &key : order) {
      const SlotPairing &pairing = pairs[key];
      for (auto [stage, open] : llvm::enumerate(pairing.open)) {
        if (!open)
          continue;
        Value state = open->getOperand(0);
        error(open) << "has no "
                    << (key.second == 0 ? "consumer_release"
                                        : "producer_commit")
                    << " of the same slot and sub-stage after it in its block"
                    << where(state, stage);
      }
    }
  }

  void checkReleaseRetired(ConsumerReleaseOp release,
                           const std::deque<WgmmaGroup> &inFlight) {
    Value slot = flow.getSlot(release.getPipeline());
    int64_t stage = release.getStage();
    for (const WgmmaGroup &group : inFlight)
      for (auto [read, readStage] : group.reads) {
        if (read != slot || (readStage >= 0 && readStage != stage))
          continue;
        InFlightDiagnostic diag =
            error(release)
            << "releases a slot that a kvpipe.warpgroup_mma still in flight "
               "reads: retire it with kvpipe.warpgroup_wait first"
            << where(release.getPipeline(), stage);
        diag.attachNote(group.op->getLoc())
            << "the wgmma reading the slot, not retired before the release";
        return;
      }
  }

  //===--------------------------------------------------------------------===//
  // 3. Branches that advance a state differently
  //===--------------------------------------------------------------------===//

  void checkBranches() {
    root->walk([&](Operation *op) {
      if (!isa<scf::IfOp, scf::IndexSwitchOp>(op))
        return;
      for (OpResult result : op->getResults()) {
        if (!isa<PipelineType>(result.getType()))
          continue;
        SmallVector<std::optional<StateAdvance>> branches;
        for (Region &region : op->getRegions()) {
          auto yield =
              region.hasOneBlock()
                  ? dyn_cast<scf::YieldOp>(region.front().getTerminator())
                  : nullptr;
          if (!yield || result.getResultNumber() >= yield.getNumOperands())
            return;
          branches.push_back(flow.traceAdvance(
              yield.getOperand(result.getResultNumber()), op));
        }
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

  //===--------------------------------------------------------------------===//
  // 5. Transaction bytes
  //===--------------------------------------------------------------------===//

  /// The load of `loads` that comes first in the commit's block.
  static Operation *getFirstLoad(ProducerCommitOp commit,
                                 const SlotLoads &loads) {
    Block *block = commit->getBlock();
    Operation *first = nullptr, *firstAncestor = nullptr;
    for (const auto &entry : loads.loads) {
      Operation *load = entry.first;
      Operation *ancestor = block->findAncestorOpInBlock(*load);
      if (!ancestor)
        continue;
      if (!first || ancestor->isBeforeInBlock(firstAncestor)) {
        first = load;
        firstAncestor = ancestor;
      }
    }
    return first;
  }

  void checkTransactions() {
    DenseSet<Operation *> expected;
    DenseSet<std::pair<Value, int64_t>> uncounted;
    root->walk([&](ProducerCommitOp commit) {
      // collectSlotLoads reports its own failures at the commit.
      FailureOr<SlotLoads> loads = collectSlotLoads(commit);
      if (failed(loads)) {
        hasErrors = true;
        uncounted.insert({commit.getPipeline(), commit.getStage()});
        return;
      }
      for (auto &entry : loads->loads)
        expected.insert(entry.first);
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
    root->walk([&](TMALoadOp load) {
      auto mbar = load.getMbarrier().getDefiningOp<ProducerMBarOp>();
      if (!mbar || expected.contains(load) ||
          uncounted.contains({mbar.getPipeline(), mbar.getStage()}))
        return;
      InFlightDiagnostic diag =
          error(load) << "completes on a barrier that no producer_commit "
                         "expects: the producer barrier"
                      << where(mbar.getPipeline(), mbar.getStage());
      diag.attachNote(mbar.getLoc()) << "the barrier";
    });
  }

  Operation *root;
  PipelineFlow flow;
  DominanceInfo dominance;
  /// Ops reported for using a state after it was advanced.
  DenseSet<Operation *> staleUsers;
  bool hasErrors = false;
};

struct VerifyProtocol : kvpipe::impl::VerifyProtocolBase<VerifyProtocol> {
  using Base::Base;

  void runOnOperation() override {
    ProtocolChecker checker(getOperation());
    if (!checker.run())
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
