//===- BarrierOrigins.cpp - which mbarrier a TMA load completes on --------===//

#include "kvpipe/Dialect/KVPipe/Analysis/BarrierOrigins.h"

#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace kvpipe;

CallSites::CallSites(Operation *root) {
  SymbolTableCollection symbolTables;
  root->walk([&](CallOpInterface call) {
    if (Operation *callee = call.resolveCallableInTable(&symbolTables))
      calls[callee].push_back(call);
  });
}

ArrayRef<Operation *> CallSites::getCalls(Operation *callee) const {
  auto it = calls.find(callee);
  if (it == calls.end())
    return {};
  return it->second;
}

namespace {
struct Tracer {
  const CallSites &sites;
  SmallVector<BarrierOrigin> origins;
  /// The calls being followed back, from the load's function outwards.
  SmallVector<Operation *> stack;

  void lost(Operation *at, std::string reason) {
    BarrierOrigin origin{
        BarrierOrigin::Kind::unknown, nullptr, at, std::move(reason), {}};
    origin.calls.assign(stack.rbegin(), stack.rend());
    origins.push_back(std::move(origin));
  }

  /// The producer barrier `accessor` takes of `state`: where the state is
  /// an argument of a function the module calls, the commit that counts
  /// the load may be in a caller, so the state is followed back to each
  /// call site (as the barrier is); the origin's calls end at the function
  /// where the state is not such an argument.
  void traceState(Value state, Operation *accessor) {
    auto argument = dyn_cast<BlockArgument>(state);
    auto function =
        argument ? dyn_cast<FunctionOpInterface>(
                       argument.getOwner()->getParentOp())
                 : FunctionOpInterface();
    ArrayRef<Operation *> calls;
    if (function && argument.getOwner()->isEntryBlock())
      calls = sites.getCalls(function);
    bool followed = false;
    for (Operation *call : calls) {
      auto operands = cast<CallOpInterface>(call).getArgOperands();
      if (llvm::is_contained(stack, call) ||
          argument.getArgNumber() >= operands.size())
        continue;
      followed = true;
      stack.push_back(call);
      traceState(operands[argument.getArgNumber()], accessor);
      stack.pop_back();
    }
    if (followed)
      return;
    BarrierOrigin origin{BarrierOrigin::Kind::producer, accessor, nullptr, "",
                         {}};
    origin.calls.assign(stack.rbegin(), stack.rend());
    origins.push_back(std::move(origin));
  }

  void trace(Value barrier) {
    if (Operation *def = barrier.getDefiningOp()) {
      BarrierOrigin::Kind kind;
      if (isa<ProducerMBarOp>(def))
        kind = BarrierOrigin::Kind::producer;
      else if (isa<ConsumerMBarOp>(def))
        kind = BarrierOrigin::Kind::consumer;
      else
        return lost(def, "it is the result of '" +
                             def->getName().getStringRef().str() +
                             "', which the checker does not follow");
      if (kind == BarrierOrigin::Kind::producer)
        return traceState(cast<ProducerMBarOp>(def).getPipeline(), def);
      BarrierOrigin origin{kind, def, nullptr, "", {}};
      origin.calls.assign(stack.rbegin(), stack.rend());
      origins.push_back(std::move(origin));
      return;
    }
    auto argument = cast<BlockArgument>(barrier);
    Operation *owner = argument.getOwner()->getParentOp();
    auto function = dyn_cast<FunctionOpInterface>(owner);
    if (!function || !argument.getOwner()->isEntryBlock())
      return lost(owner, "it is a block argument of '" +
                             owner->getName().getStringRef().str() +
                             "', which the checker does not follow");
    std::string name = SymbolTable::getSymbolName(function).str();
    ArrayRef<Operation *> calls = sites.getCalls(function);
    if (calls.empty())
      return lost(function,
                  "it is argument #" + std::to_string(argument.getArgNumber()) +
                      " of @" + name + ", which nothing in the module calls");
    for (Operation *call : calls) {
      if (llvm::is_contained(stack, call))
        continue; // a recursive call: its other callers give the origins
      auto operands = cast<CallOpInterface>(call).getArgOperands();
      if (argument.getArgNumber() >= operands.size()) {
        lost(call, "the call of @" + name + " does not pass argument #" +
                       std::to_string(argument.getArgNumber()));
        continue;
      }
      stack.push_back(call);
      trace(operands[argument.getArgNumber()]);
      stack.pop_back();
    }
  }
};
} // namespace

SmallVector<BarrierOrigin> kvpipe::getBarrierOrigins(AsyncSlotCopyOpInterface load,
                                                     const CallSites &sites) {
  Tracer tracer{sites, {}, {}};
  tracer.trace(load.getMbarrier());
  if (tracer.origins.empty())
    tracer.lost(load, "it is only passed around a cycle of recursive calls");
  return std::move(tracer.origins);
}
