//===- Transactions.cpp - bytes a producer commit expects -----------------===//

#include "kvpipe/Dialect/KVPipe/Analysis/Transactions.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace kvpipe;

namespace {
/// The barrier of one slot's sub-stage, as seen in one function: the
/// `producer_mbar` of (`pipeline`, `stage`) in the commit's function, or the
/// arguments of a helper that its callers pass that barrier in.
struct SlotBarrier {
  Value pipeline;
  int64_t stage;
  /// Entry-block arguments of the callee being walked that are the barrier.
  llvm::SmallDenseSet<Value> arguments;
  /// Entry-block arguments of the callee being walked that are the state
  /// (the callee's `producer_mbar` of them, at `stage`, is the barrier).
  llvm::SmallDenseSet<Value> states;

  bool isState(Value value) const {
    return value == pipeline || states.contains(value);
  }
  bool isBarrier(Value mbarrier) const {
    if (arguments.contains(mbarrier))
      return true;
    auto mbar = mbarrier.getDefiningOp<ProducerMBarOp>();
    return mbar && isState(mbar.getPipeline()) && mbar.getStage() == stage;
  }
};

/// The walk of one commit's slot: the commit (where failures are reported),
/// the result and the helpers being walked (for recursion).
struct Collector {
  ProducerCommitOp commit;
  SlotLoads &result;
  SymbolTableCollection symbolTables;
  SmallVector<Operation *> callees;

  InFlightDiagnostic cannotDerive() {
    return commit.emitOpError() << "cannot derive its transaction bytes: ";
  }

  /// The number of times `inner` runs per execution of `outer` (an ancestor
  /// of `inner`; counted when `countOuter` and it is a loop), or failure
  /// (reported) when a region between them is not an `scf.for` of constant
  /// trip count.
  FailureOr<int64_t> timesRun(Operation *inner, Operation *outer,
                              bool countOuter, Operation *load) {
    int64_t count = 1;
    for (Operation *parent = inner->getParentOp(); inner != outer;
         parent = parent->getParentOp()) {
      if (parent == outer && !countOuter)
        break;
      auto loop = dyn_cast<scf::ForOp>(parent);
      std::optional<APInt> trips =
          loop ? loop.getStaticTripCount() : std::nullopt;
      if (!trips) {
        InFlightDiagnostic diag = cannotDerive()
                                  << "a TMA load completing on its barrier is "
                                     "under '"
                                  << parent->getName()
                                  << "' (only scf.for loops of constant trip "
                                     "count are counted)";
        diag.attachNote(load->getLoc()) << "the load";
        if (inner != load)
          diag.attachNote(inner->getLoc()) << "the call that issues it";
        return failure();
      }
      // Trip counts are unsigned and may be huge: a product that does not
      // fit is reported, not wrapped around.
      std::optional<int64_t> product =
          trips->isIntN(63)
              ? llvm::checkedMul<int64_t>(count, trips->getZExtValue())
              : std::nullopt;
      if (!product) {
        InFlightDiagnostic diag = cannotDerive()
                                  << "the loops around a TMA load completing "
                                     "on its barrier run more than 2^63 times";
        diag.attachNote(load->getLoc()) << "the load";
        return failure();
      }
      count = *product;
      if (parent == outer)
        break;
    }
    return count;
  }

  LogicalResult add(AsyncSlotCopyOpInterface load, int64_t count, Operation *site) {
    result.loads.push_back({load, count, site});
    std::optional<int64_t> bytes = llvm::checkedMulAdd<int64_t>(
        count, load.getTransactionBytes(), result.bytes);
    if (!bytes)
      return commit.emitOpError()
             << "its slot's TMA loads deliver more than 2^63 bytes, more than "
                "an mbarrier phase can track ("
             << kMaxTransactionBytes << ")";
    result.bytes = *bytes;
    return success();
  }

  /// Adds the loads on `barrier` inside `op` (or `op` itself), each counted
  /// `factor` times per iteration of the constant-trip-count loops around
  /// it below `outer` (and `outer` itself when `countOuter`). Loads in
  /// helpers that `op` calls with the barrier as an argument are counted,
  /// attributed to `site` (the call in the commit's function), or to the
  /// call itself where `site` is null.
  LogicalResult collectIn(Operation *op, const SlotBarrier &barrier,
                          int64_t factor, Operation *outer, bool countOuter,
                          Operation *site) {
    WalkResult walk = op->walk([&](Operation *inner) {
      if (auto load = dyn_cast<AsyncSlotCopyOpInterface>(inner)) {
        if (!barrier.isBarrier(load.getMbarrier()))
          return WalkResult::advance();
        FailureOr<int64_t> count = timesRun(load, outer, countOuter, load);
        std::optional<int64_t> total =
            succeeded(count) ? llvm::checkedMul<int64_t>(*count, factor)
                             : std::nullopt;
        if (succeeded(count) && !total) {
          InFlightDiagnostic diag = cannotDerive()
                                    << "the loops around a TMA load "
                                       "completing on its barrier run more "
                                       "than 2^63 times";
          diag.attachNote(load->getLoc()) << "the load";
        }
        if (!total || failed(add(load, *total, site ? site : load)))
          return WalkResult::interrupt();
        return WalkResult::advance();
      }
      auto call = dyn_cast<CallOpInterface>(inner);
      if (!call)
        return WalkResult::advance();
      SmallVector<unsigned> positions, statePositions;
      for (auto [i, operand] : llvm::enumerate(call.getArgOperands())) {
        if (barrier.isBarrier(operand))
          positions.push_back(i);
        else if (barrier.isState(operand))
          statePositions.push_back(i);
      }
      statePositions = getLoadingStates(call, statePositions, barrier.stage);
      if (positions.empty() && statePositions.empty())
        return WalkResult::advance();
      return failed(collectInCall(call, positions, statePositions, barrier,
                                  factor, outer, countOuter,
                                  site ? site : inner))
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  /// Of the arguments at `positions` that `call` passes the state in, those
  /// the callee may take the slot's producer barrier of (a `producer_mbar`
  /// of the argument at `stage`, or a call it passes the argument on to)
  /// without committing the slot itself (then the loads are its commit's).
  /// A callee not in the module is not looked into: a state passed to it is
  /// unproven already (rule 3 of the checker).
  SmallVector<unsigned> getLoadingStates(CallOpInterface call,
                                         ArrayRef<unsigned> positions,
                                         int64_t stage) {
    SmallVector<unsigned> loading;
    if (positions.empty())
      return loading;
    auto callee = dyn_cast_or_null<FunctionOpInterface>(
        call.resolveCallableInTable(&symbolTables));
    if (!callee || callee.isExternal() ||
        callee.getNumArguments() != call.getArgOperands().size())
      return loading;
    for (unsigned position : positions) {
      Value argument = callee.getFunctionBody().getArgument(position);
      bool mbar = false, commits = false;
      for (OpOperand &use : argument.getUses()) {
        Operation *user = use.getOwner();
        if (auto accessor = dyn_cast<ProducerMBarOp>(user))
          mbar |= accessor.getStage() == stage;
        else if (auto commit = dyn_cast<ProducerCommitOp>(user))
          commits |= commit.getStage() == stage;
        else if (isa<CallOpInterface>(user))
          mbar = true;
      }
      if (mbar && !commits)
        loading.push_back(position);
    }
    return loading;
  }

  /// Counts the loads of a helper that `call` passes the barrier to, at
  /// argument `positions`, or the state, at `statePositions`.
  LogicalResult collectInCall(CallOpInterface call,
                              ArrayRef<unsigned> positions,
                              ArrayRef<unsigned> statePositions,
                              const SlotBarrier &barrier, int64_t factor,
                              Operation *outer, bool countOuter,
                              Operation *site) {
    auto callee = dyn_cast_or_null<FunctionOpInterface>(
        call.resolveCallableInTable(&symbolTables));
    if (!callee || callee.isExternal() ||
        callee.getNumArguments() != call.getArgOperands().size()) {
      InFlightDiagnostic diag =
          cannotDerive()
          << "its barrier is passed to a call whose callee is not in the "
             "module, which may complete TMA loads on it";
      diag.attachNote(call.getLoc()) << "the call";
      return failure();
    }
    if (llvm::is_contained(callees, callee.getOperation())) {
      InFlightDiagnostic diag =
          cannotDerive() << (positions.empty() ? "its state" : "its barrier")
                         << " is passed to a recursive call of @"
                         << SymbolTable::getSymbolName(callee).getValue();
      diag.attachNote(call.getLoc()) << "the call";
      return failure();
    }
    FailureOr<int64_t> count = timesRun(call, outer, countOuter, call);
    std::optional<int64_t> total =
        succeeded(count) ? llvm::checkedMul<int64_t>(*count, factor)
                         : std::nullopt;
    if (!total)
      return failure(); // reported by timesRun (an overflow is an op there)
    Region &body = callee.getFunctionBody();
    SlotBarrier inCallee{barrier.pipeline, barrier.stage, {}, {}};
    for (unsigned position : positions)
      inCallee.arguments.insert(body.getArgument(position));
    for (unsigned position : statePositions)
      inCallee.states.insert(body.getArgument(position));
    if (!body.hasOneBlock()) {
      InFlightDiagnostic diag = cannotDerive()
                                << (positions.empty() ? "its state"
                                                      : "its barrier")
                                << " is passed to @"
                                << SymbolTable::getSymbolName(callee).getValue()
                                << ", whose body branches (cf): its TMA loads "
                                   "on the barrier are not counted";
      diag.attachNote(call.getLoc()) << "the call";
      return failure();
    }
    callees.push_back(callee);
    LogicalResult counted = success();
    for (Operation &op : body.front())
      if (failed(collectIn(&op, inCallee, *total, &op, /*countOuter=*/true,
                           site))) {
        counted = failure();
        break;
      }
    callees.pop_back();
    return counted;
  }
};
} // namespace

/// `op` as a producer-side protocol op on `pipeline`, or null.
static PipelineProtocolOpInterface getProducerOpOn(Operation *op,
                                                   Value pipeline) {
  auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(op);
  if (!protocolOp || protocolOp.getSide() != PipelineSide::producer ||
      protocolOp.getPipeline() != pipeline)
    return nullptr;
  return protocolOp;
}

FailureOr<SlotLoads> kvpipe::collectSlotLoads(ProducerCommitOp commit) {
  Value pipeline = commit.getPipeline();
  int64_t stage = commit.getStage();
  SlotLoads result;
  Collector collector{commit, result, {}, {}};
  SlotBarrier barrier{pipeline, stage, {}, {}};
  auto collectIn = [&](Operation *op) {
    return collector.collectIn(op, barrier, 1, op, /*countOuter=*/true,
                               /*site=*/nullptr);
  };
  // Backwards to the acquire that opened this slot's sub-stage.
  for (Operation *op = commit->getPrevNode(); op; op = op->getPrevNode()) {
    if (auto producerOp = getProducerOpOn(op, pipeline))
      if (producerOp.opensSlot() && producerOp.getSubStage() == stage)
        break;
    if (failed(collectIn(op)))
      return failure();
  }
  // Forwards to the producer's next acquire, commit or step of the state:
  // expect_tx may precede the copies.
  for (Operation *op = commit->getNextNode(); op; op = op->getNextNode()) {
    if (auto producerOp = getProducerOpOn(op, pipeline))
      if (producerOp.opensSlot() || producerOp.closesSlot() ||
          producerOp.getSlotsAdvanced() != 0)
        break;
    if (failed(collectIn(op)))
      return failure();
  }
  if (result.bytes == 0)
    return result;
  if (result.bytes > kMaxTransactionBytes)
    return commit.emitOpError()
           << "its slot's TMA loads deliver " << result.bytes
           << " bytes, more than an mbarrier phase can track ("
           << kMaxTransactionBytes << ")";
  int64_t producers = commit.getPipelineType().getProducers();
  if (producers != 1)
    return commit.emitOpError()
           << "commits a slot filled by TMA, which one elected thread "
              "arrives on once: the pipeline must have producers = 1, got "
           << producers;
  return result;
}

LogicalResult kvpipe::annotateTransactionBytes(Operation *root) {
  bool failed = false;
  root->walk([&](ProducerCommitOp commit) {
    FailureOr<SlotLoads> loads = collectSlotLoads(commit);
    if (mlir::failed(loads)) {
      failed = true;
      return;
    }
    commit->setAttr(kTransactionBytesAttrName,
                    Builder(commit).getI64IntegerAttr(loads->bytes));
  });
  return mlir::failure(failed);
}
