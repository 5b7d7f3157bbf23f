//===- TestProtocolInterface.cpp - report PipelineProtocolOpInterface -----===//
//
// --kvpipe-test-protocol-interface: a remark at each pipeline op with what
// it answers through PipelineProtocolOpInterface, so that a test pins down
// the protocol model the checker, the analyses and the lowering share.
//
//===----------------------------------------------------------------------===//

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h"

namespace kvpipe {
#define GEN_PASS_DEF_TESTPROTOCOLINTERFACE
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h.inc"
} // namespace kvpipe

using namespace mlir;
using namespace kvpipe;

namespace {

struct TestProtocolInterface
    : kvpipe::impl::TestProtocolInterfaceBase<TestProtocolInterface> {
  using Base::Base;

  void runOnOperation() override {
    getOperation()->walk([](PipelineProtocolOpInterface op) {
      InFlightDiagnostic remark = op->emitRemark();
      remark << "side " << stringifyPipelineSide(op.getSide());
      if (std::optional<int64_t> stage = op.getSubStage())
        remark << ", sub-stage " << *stage;
      if (op.opensSlot())
        remark << ", opens";
      if (op.closesSlot())
        remark << ", closes";
      remark << ", barrier " << stringifyPipelineSide(op.getBarrierSide());
      if (op.getResultState())
        remark << ", returns the state advanced by " << op.getSlotsAdvanced();
    });
  }
};

} // namespace
