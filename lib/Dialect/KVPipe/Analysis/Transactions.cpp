//===- Transactions.cpp - bytes a producer commit expects -----------------===//

#include "kvpipe/Dialect/KVPipe/Analysis/Transactions.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace kvpipe;

/// Whether `load` completes on the producer barrier of (`pipeline`, `stage`).
static bool completesOn(TMALoadOp load, Value pipeline, int64_t stage) {
  auto mbar = load.getMbarrier().getDefiningOp<ProducerMBarOp>();
  return mbar && mbar.getPipeline() == pipeline && mbar.getStage() == stage;
}

/// `op` as a producer-side protocol op on `pipeline`, or null.
static PipelineProtocolOpInterface getProducerOpOn(Operation *op,
                                                   Value pipeline) {
  auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(op);
  if (!protocolOp || protocolOp.getSide() != PipelineSide::producer ||
      protocolOp.getPipeline() != pipeline)
    return nullptr;
  return protocolOp;
}

/// Adds the loads on (`pipeline`, `stage`) inside `op` (or `op` itself) to
/// `result`, each counted once per iteration of the constant-trip-count
/// loops around it below `op`.
static LogicalResult collectIn(Operation *op, Value pipeline, int64_t stage,
                               ProducerCommitOp commit, SlotLoads &result) {
  WalkResult walk = op->walk([&](TMALoadOp load) {
    if (!completesOn(load, pipeline, stage))
      return WalkResult::advance();
    int64_t count = 1;
    // Every op between the load and `op` (inclusive) must be a loop whose
    // trip count is known; anything else makes the count unknowable.
    for (Operation *parent = load->getParentOp(); load != op;
         parent = parent->getParentOp()) {
      auto loop = dyn_cast<scf::ForOp>(parent);
      std::optional<APInt> trips =
          loop ? loop.getStaticTripCount() : std::nullopt;
      if (!trips) {
        InFlightDiagnostic diag = commit.emitOpError()
                                  << "cannot derive its transaction bytes: a "
                                     "TMA load completing on its barrier is "
                                     "under '"
                                  << parent->getName()
                                  << "' (only scf.for loops of constant trip "
                                     "count are counted)";
        diag.attachNote(load.getLoc()) << "the load";
        return WalkResult::interrupt();
      }
      // Trip counts are unsigned and may be huge: a product that does not
      // fit is reported, not wrapped around.
      std::optional<int64_t> product =
          trips->isIntN(63)
              ? llvm::checkedMul<int64_t>(count, trips->getZExtValue())
              : std::nullopt;
      if (!product) {
        InFlightDiagnostic diag = commit.emitOpError()
                                  << "cannot derive its transaction bytes: "
                                     "the loops around a TMA load completing "
                                     "on its barrier run more than 2^63 times";
        diag.attachNote(load.getLoc()) << "the load";
        return WalkResult::interrupt();
      }
      count = *product;
      if (parent == op)
        break;
    }
    result.loads.push_back({load, count});
    std::optional<int64_t> bytes = llvm::checkedMulAdd<int64_t>(
        count, load.getTransactionBytes(), result.bytes);
    if (!bytes) {
      commit.emitOpError() << "its slot's TMA loads deliver more than 2^63 "
                              "bytes, more than an mbarrier phase can track ("
                           << kMaxTransactionBytes << ")";
      return WalkResult::interrupt();
    }
    result.bytes = *bytes;
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

FailureOr<SlotLoads> kvpipe::collectSlotLoads(ProducerCommitOp commit) {
  Value pipeline = commit.getPipeline();
  int64_t stage = commit.getStage();
  SlotLoads result;
  // Backwards to the acquire that opened this slot's sub-stage.
  for (Operation *op = commit->getPrevNode(); op; op = op->getPrevNode()) {
    if (auto producerOp = getProducerOpOn(op, pipeline))
      if (producerOp.opensSlot() && producerOp.getSubStage() == stage)
        break;
    if (failed(collectIn(op, pipeline, stage, commit, result)))
      return failure();
  }
  // Forwards to the producer's next acquire, commit or step of the state:
  // expect_tx may precede the copies.
  for (Operation *op = commit->getNextNode(); op; op = op->getNextNode()) {
    if (auto producerOp = getProducerOpOn(op, pipeline))
      if (producerOp.opensSlot() || producerOp.closesSlot() ||
          producerOp.getSlotsAdvanced() != 0)
        break;
    if (failed(collectIn(op, pipeline, stage, commit, result)))
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
