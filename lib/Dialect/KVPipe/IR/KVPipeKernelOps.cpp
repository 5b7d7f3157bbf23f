//===- KVPipeKernelOps.cpp - the parts of a generated kernel --------------===//
//
// Builders and verifiers of the warp-role and fragment ops
// (KVPipeKernelOps.td).
//
//===----------------------------------------------------------------------===//

#include "kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace kvpipe;

//===----------------------------------------------------------------------===//
// WarpRolesOp
//===----------------------------------------------------------------------===//

void WarpRolesOp::build(OpBuilder &builder, OperationState &state,
                        int64_t producerRegisters, int64_t consumerWarpgroups,
                        int64_t consumerRegisters) {
  Properties &properties = state.getOrAddProperties<Properties>();
  properties.producer_registers = builder.getI64IntegerAttr(producerRegisters);
  properties.consumer_warpgroups =
      builder.getI64IntegerAttr(consumerWarpgroups);
  properties.consumer_registers = builder.getI64IntegerAttr(consumerRegisters);
  Region *producer = state.addRegion();
  producer->push_back(new Block);
  Region *consumer = state.addRegion();
  consumer->push_back(new Block);
  consumer->front().addArgument(builder.getIndexType(), state.location);
}

LogicalResult WarpRolesOp::verify() {
  for (auto [name, value] :
       {std::pair<StringRef, int64_t>{"producer_registers",
                                      getProducerRegisters()},
        {"consumer_registers", getConsumerRegisters()}})
    if (value < 24 || value > 256 || value % 8 != 0)
      return emitOpError() << "'" << name
                           << "' must be a multiple of 8 in [24, 256] "
                              "(setmaxnreg), got "
                           << value;
  int64_t consumers = getConsumerWarpgroups();
  // A CTA has at most 1024 threads: 8 warpgroups, one of them the producer.
  if (consumers < 1 || consumers > 7)
    return emitOpError() << "'consumer_warpgroups' must be in [1, 7], got "
                         << consumers;
  int64_t registers = AccumulatorLayout::kThreads *
                      (getProducerRegisters() + consumers * getConsumerRegisters());
  if (registers > 65536)
    return emitOpError() << "needs " << registers
                         << " registers (128 threads x (producer_registers + "
                         << consumers
                         << " x consumer_registers)), more than the 64K of an SM";
  if (getProducerBlock().getNumArguments() != 0)
    return emitOpError() << "'producer' region must have no arguments";
  Block &consumer = getConsumerBlock();
  if (consumer.getNumArguments() != 1 ||
      !consumer.getArgument(0).getType().isIndex())
    return emitOpError() << "'consumer' region must have one index argument "
                            "(the consumer's index)";
  return success();
}

//===----------------------------------------------------------------------===//
// Fragment ops
//===----------------------------------------------------------------------===//

static LogicalResult verifyRowHalf(Operation *op, int64_t row) {
  if (row != 0 && row != 1)
    return op->emitOpError()
           << "'row' must be 0 or 1 (a thread holds two rows of the "
              "accumulator), got "
           << row;
  return success();
}

static LogicalResult verifyFragment(Operation *op, Value fragment) {
  return verifyAccumulatorFragment(
      fragment.getType(), [op] { return op->emitOpError(); }, "fragment");
}

LogicalResult FragmentRowMaxOp::verify() {
  if (failed(verifyFragment(*this, getFragment())))
    return failure();
  return verifyRowHalf(*this, getRow());
}

LogicalResult FragmentRowSumOp::verify() {
  if (failed(verifyFragment(*this, getFragment())))
    return failure();
  return verifyRowHalf(*this, getRow());
}

LogicalResult FragmentRescaleOp::verify() {
  return verifyFragment(*this, getFragment());
}

LogicalResult FragmentExp2Op::verify() {
  return verifyFragment(*this, getFragment());
}
