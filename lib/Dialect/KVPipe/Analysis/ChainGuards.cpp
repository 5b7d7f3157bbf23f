//===- ChainGuards.cpp - the conditions a chain of states runs under ------===//

#include "kvpipe/Dialect/KVPipe/Analysis/ChainGuards.h"
#include "kvpipe/Dialect/KVPipe/Analysis/ThreadCounts.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace kvpipe;

SmallVector<ChainGuard> kvpipe::getChainGuards(Value value, Operation *scope) {
  SmallVector<ChainGuard> guards;
  for (Region *region = value.getParentRegion();
       region && region->getParentOp() != scope;
       region = region->getParentOp()->getParentRegion()) {
    Operation *op = region->getParentOp();
    if (!op)
      break;
    if (auto ifOp = dyn_cast<scf::IfOp>(op))
      guards.push_back({op, region->getRegionNumber(), ifOp.getCondition()});
    else if (auto switchOp = dyn_cast<scf::IndexSwitchOp>(op))
      guards.push_back({op, region->getRegionNumber(), switchOp.getArg()});
  }
  std::reverse(guards.begin(), guards.end());
  return guards;
}

bool kvpipe::selectsThreads(Value condition) {
  SmallVector<Value> worklist = {condition};
  DenseSet<Value> visited;
  bool identity = false;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    if (!visited.insert(value).second)
      continue;
    if (visited.size() > 64)
      return false;
    Operation *def = value.getDefiningOp();
    if (!def)
      return false; // an argument: uniform, or not followed
    // An undefined value is no constant: what it picks is not known.
    if (isIndeterminateOp(def))
      return false;
    if (isThreadDependentOp(def)) {
      identity = true;
      continue;
    }
    if (matchPattern(value, m_Constant()))
      continue;
    if (def->getNumRegions() != 0 || !isMemoryEffectFree(def))
      return false;
    llvm::append_range(worklist, def->getOperands());
  }
  return identity;
}
