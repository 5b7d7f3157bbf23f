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

#define GET_OP_CLASSES
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.cpp.inc"
