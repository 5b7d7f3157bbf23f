//===- KVPipeOps.cpp - kvpipe operations and verifiers ----------*- C++ -*-===//

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace kvpipe;

/// Checks `0 <= qk_stage < qk_stages` for ops that name a sub-stage.
template <typename OpTy>
static LogicalResult verifyStage(OpTy op) {
  IntegerAttr stage = op.getQkStageAttr();
  if (!stage)
    return success();
  int64_t value = stage.getValue().getSExtValue();
  int64_t qkStages = op.getPipelineType().getQkStages();
  if (value < 0 || value >= qkStages)
    return op.emitOpError() << "'qk_stage' must be in [0, " << qkStages
                            << ") for a pipeline with qk_stages = "
                            << qkStages << ", got " << value;
  return success();
}

LogicalResult ProducerMBarOp::verify() { return verifyStage(*this); }
LogicalResult ConsumerMBarOp::verify() { return verifyStage(*this); }
LogicalResult ProducerAcquireOp::verify() { return verifyStage(*this); }
LogicalResult ProducerCommitOp::verify() { return verifyStage(*this); }
LogicalResult ConsumerWaitOp::verify() { return verifyStage(*this); }
LogicalResult ConsumerReleaseOp::verify() { return verifyStage(*this); }

//===----------------------------------------------------------------------===//
// PipelineProtocolOpInterface
//===----------------------------------------------------------------------===//

PipelineSide ProducerMBarOp::getSide() { return PipelineSide::producer; }
PipelineSide ConsumerMBarOp::getSide() { return PipelineSide::consumer; }

PipelineSide ProducerAcquireOp::getSide() { return PipelineSide::producer; }
bool ProducerAcquireOp::opensSlot() { return true; }

PipelineSide ProducerCommitOp::getSide() { return PipelineSide::producer; }
bool ProducerCommitOp::closesSlot() { return true; }

PipelineSide ConsumerWaitOp::getSide() { return PipelineSide::consumer; }
bool ConsumerWaitOp::opensSlot() { return true; }

PipelineSide ConsumerReleaseOp::getSide() { return PipelineSide::consumer; }
bool ConsumerReleaseOp::closesSlot() { return true; }
Value ConsumerReleaseOp::getResultState() { return getResult(); }
int64_t ConsumerReleaseOp::getSlotsAdvanced() { return advances() ? 1 : 0; }

// The producer steps past a slot after committing it; the consumers advance
// with consumer_release instead (the checker reports a step past a slot
// that was not committed).
PipelineSide StepOp::getSide() { return PipelineSide::producer; }
std::optional<int64_t> StepOp::getSubStage() { return std::nullopt; }
PipelineSide StepOp::getBarrierSide() { return PipelineSide::none; }
Value StepOp::getResultState() { return getResult(); }
int64_t StepOp::getSlotsAdvanced() { return 1; }

#define GET_OP_CLASSES
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.cpp.inc"
