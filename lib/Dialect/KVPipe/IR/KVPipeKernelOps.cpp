//===- KVPipeKernelOps.cpp - the parts of a generated kernel --------------===//
//
// Builders and verifiers of the warp-role and fragment ops
// (KVPipeKernelOps.td).
//
//===----------------------------------------------------------------------===//

#include "kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

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
// TileOp, ForEachTileOp
//===----------------------------------------------------------------------===//

void TileOp::build(OpBuilder &builder, OperationState &state,
                   TypeRange valueTypes, Value sizeX, Value sizeY,
                   Value sizeZ, Value schedule, bool hasWork) {
  state.addOperands({sizeX, sizeY, sizeZ});
  if (schedule)
    state.addOperands(schedule);
  if (hasWork)
    state.addAttribute(getHasWorkAttrName(state.name),
                       builder.getUnitAttr());
  state.addTypes(valueTypes);
  Region *body = state.addRegion();
  body->push_back(new Block);
  for (int i = 0; i < 3; ++i)
    body->front().addArgument(builder.getIndexType(), state.location);
}

LogicalResult TileOp::verify() {
  // The tile belongs to the kernel: every role's kvpipe.for_each_tile works
  // on it, and the persistent rewrite recomputes it in each of them.
  Operation *role = (*this)->getParentOfType<WarpRolesOp>();
  Operation *tile = (*this)->getParentOfType<ForEachTileOp>();
  if (Operation *parent = role ? role : tile)
    return emitOpError() << "must be outside '" << parent->getName()
                         << "': the tile is the kernel's, shared by all of "
                            "its roles";
  Block &body = getBodyBlock();
  if (body.getNumArguments() != 3 ||
      llvm::any_of(body.getArgumentTypes(),
                   [](Type t) { return !t.isIndex(); }))
    return emitOpError() << "region must have three index arguments (the "
                            "tile's coordinates x, y, z)";
  auto yield = dyn_cast_or_null<YieldOp>(body.empty() ? nullptr : &body.back());
  if (!yield || yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "region must end with 'kvpipe.yield' of the "
                            "result types (the tile's values)";
  if (getHasWork() &&
      (getNumResults() == 0 || !getResult(0).getType().isInteger(1)))
    return emitOpError() << "with 'has_work' must have an i1 first value "
                            "(whether the tile has work)";
  // Computed again for every tile and role by the persistent rewrite:
  // reads (a per-batch length) may be repeated, writes may not.
  WalkResult writes = body.walk([&](Operation *op) {
    if (isMemoryEffectFree(op) || op->hasTrait<OpTrait::IsTerminator>())
      return WalkResult::advance();
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (effects && effects.onlyHasEffect<MemoryEffects::Read>())
      return WalkResult::advance();
    if (!effects && op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
      return WalkResult::advance();
    op->emitOpError() << "writes memory (or may), but computes a value of "
                         "the tile in 'kvpipe.tile' (which is computed again "
                         "for each role and tile)";
    return WalkResult::interrupt();
  });
  if (writes.wasInterrupted())
    return failure();
  for (OpOperand &use : getOperation()->getUses())
    if (!use.getOwner()->getParentOfType<ForEachTileOp>())
      return emitOpError()
             << "result #" << cast<OpResult>(use.get()).getResultNumber()
             << " is used outside 'kvpipe.for_each_tile' (by '"
             << use.getOwner()->getName()
             << "'): a tile's values belong to the tile's work";
  return success();
}

void ForEachTileOp::build(OpBuilder &builder, OperationState &state,
                          ValueRange inits) {
  state.addOperands(inits);
  state.addTypes(inits.getTypes());
  Region *body = state.addRegion();
  body->push_back(new Block);
  for (Value init : inits)
    body->front().addArgument(init.getType(), init.getLoc());
}

LogicalResult ForEachTileOp::verify() {
  if (Operation *outer = (*this)->getParentOfType<ForEachTileOp>())
    return emitOpError()
           << "must not be nested in another 'kvpipe.for_each_tile' (at "
           << outer->getLoc() << "): a tile's work does not contain tiles";
  Block &body = getBodyBlock();
  TypeRange types = getInits().getTypes();
  if (body.getArgumentTypes() != types)
    return emitOpError() << "region arguments must have the types of "
                            "'iter_args' ("
                         << types.size() << " values)";
  auto yield = dyn_cast_or_null<YieldOp>(
      body.empty() ? nullptr : &body.back());
  if (!yield)
    return emitOpError() << "region must end with 'kvpipe.yield'";
  if (yield.getValues().getTypes() != types)
    return emitOpError() << "'kvpipe.yield' must yield the types of "
                            "'iter_args' (the next tile's arguments)";
  if (getResultTypes() != types)
    return emitOpError() << "results must have the types of 'iter_args'";
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
  // The I64Attr's getter is unsigned: a negative value reads as a large one.
  auto emulated = static_cast<int64_t>(getEmulated());
  if (emulated < 0 || emulated > 8)
    return emitOpError() << "'emulated' counts elements of every 8, so it "
                            "must be in [0, 8], got "
                         << emulated;
  return verifyFragment(*this, getFragment());
}
