//===- ProtocolAnalysis.cpp - how pipeline states flow --------------------===//

#include "ProtocolAnalysis.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace kvpipe;

static bool isState(Value value) {
  return value && isa<PipelineType>(value.getType());
}

/// The yields of the branches of `op` (`scf.if`, `scf.index_switch`,
/// `scf.execute_region` of one block) at result `index`; false when `op` is
/// not such an op or a branch does not end in `scf.yield`.
static bool getBranchYields(Operation *op, unsigned index,
                            SmallVectorImpl<Value> &yields) {
  if (!isa<scf::IfOp, scf::IndexSwitchOp, scf::ExecuteRegionOp>(op))
    return false;
  for (Region &region : op->getRegions()) {
    if (!region.hasOneBlock())
      return false;
    auto yield = dyn_cast<scf::YieldOp>(region.front().getTerminator());
    if (!yield || index >= yield.getNumOperands())
      return false;
    yields.push_back(yield.getOperand(index));
  }
  return !yields.empty();
}

/// "FILE:LINE:COL" of the innermost file location in `loc`.
static void printLocation(llvm::raw_ostream &os, Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    os << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn();
    return;
  }
  if (auto name = dyn_cast<NameLoc>(loc))
    return printLocation(os, name.getChildLoc());
  if (auto site = dyn_cast<CallSiteLoc>(loc))
    return printLocation(os, site.getCallee());
  if (auto fused = dyn_cast<FusedLoc>(loc))
    if (!fused.getLocations().empty())
      return printLocation(os, fused.getLocations().front());
  os << loc;
}

//===----------------------------------------------------------------------===//
// Construction: pipelines and slots as union-find classes of states
//===----------------------------------------------------------------------===//

PipelineFlow::PipelineFlow(Operation *root) : root(root) { build(); }

Value PipelineFlow::find(DenseMap<Value, Value> &parents, Value value) {
  auto [it, inserted] = parents.try_emplace(value, value);
  if (inserted)
    return value;
  // Iteratively, with path compression: chains of states can be long.
  Value top = value;
  for (auto next = parents.find(top); next->second != top;
       next = parents.find(top))
    top = next->second;
  for (Value current = value; current != top;) {
    Value &parent = parents[current];
    current = parent;
    parent = top;
  }
  return top;
}

void PipelineFlow::unite(DenseMap<Value, Value> &parents, Value a, Value b) {
  if (!isState(a) || !isState(b))
    return;
  Value ra = find(parents, a), rb = find(parents, b);
  if (ra != rb)
    parents[rb] = ra;
}

void PipelineFlow::build() {
  SmallVector<CallOpInterface> calls;
  auto addState = [&](Value value) {
    if (!isState(value))
      return;
    states.push_back(value);
    find(pipelineParents, value);
    find(slotParents, value);
  };
  auto uniteBoth = [&](Value a, Value b) {
    unite(pipelineParents, a, b);
    unite(slotParents, a, b);
  };

  // Post-order: the ops of a region are linked before the op holding it, so
  // that the branches of an `scf.if` are known when its results are.
  root->walk<WalkOrder::PostOrder>([&](Operation *op) {
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument argument : block.getArguments())
          addState(argument);
    for (Value result : op->getResults())
      addState(result);

    if (auto step = dyn_cast<StepOp>(op)) {
      unite(pipelineParents, step.getPipeline(), step.getResult());
    } else if (auto release = dyn_cast<ConsumerReleaseOp>(op)) {
      // Before the last sub-stage the result is the same state: same slot.
      if (release.advances())
        unite(pipelineParents, release.getPipeline(), release.getResult());
      else
        uniteBoth(release.getPipeline(), release.getResult());
    } else if (auto forOp = dyn_cast<scf::ForOp>(op)) {
      loops.push_back(op);
      for (auto [init, arg, result, yielded] :
           llvm::zip(forOp.getInitArgs(), forOp.getRegionIterArgs(),
                     forOp.getResults(), forOp.getYieldedValues())) {
        unite(pipelineParents, init, arg);
        unite(pipelineParents, arg, result);
        unite(pipelineParents, arg, yielded);
      }
    } else if (auto whileOp = dyn_cast<scf::WhileOp>(op)) {
      loops.push_back(op);
      for (auto [init, arg] :
           llvm::zip(whileOp.getInits(), whileOp.getBeforeArguments()))
        unite(pipelineParents, init, arg);
      if (scf::YieldOp yield = whileOp.getYieldOp())
        for (auto [yielded, arg] :
             llvm::zip(yield.getOperands(), whileOp.getBeforeArguments()))
          unite(pipelineParents, yielded, arg);
      if (scf::ConditionOp condition = whileOp.getConditionOp())
        for (auto [forwarded, arg, result] :
             llvm::zip(condition.getArgs(), whileOp.getAfterArguments(),
                       whileOp.getResults())) {
          unite(pipelineParents, forwarded, arg);
          unite(pipelineParents, forwarded, result);
        }
    } else if (isa<scf::IfOp, scf::IndexSwitchOp, scf::ExecuteRegionOp>(op)) {
      for (OpResult result : op->getResults()) {
        SmallVector<Value> yields;
        if (!isState(result) ||
            !getBranchYields(op, result.getResultNumber(), yields))
          continue;
        bool sameSlot = true;
        for (Value yielded : yields) {
          unite(pipelineParents, result, yielded);
          sameSlot &=
              find(slotParents, yielded) == find(slotParents, yields.front());
        }
        if (sameSlot)
          unite(slotParents, result, yields.front());
      }
    } else if (auto branch = dyn_cast<BranchOpInterface>(op)) {
      for (unsigned i = 0, e = op->getNumSuccessors(); i < e; ++i) {
        SuccessorOperands operands = branch.getSuccessorOperands(i);
        Block *successor = op->getSuccessor(i);
        unsigned produced = operands.getProducedOperandCount();
        for (auto [index, forwarded] :
             llvm::enumerate(operands.getForwardedOperands()))
          if (produced + index < successor->getNumArguments())
            unite(pipelineParents, forwarded,
                  successor->getArgument(produced + index));
      }
    } else if (auto call = dyn_cast<CallOpInterface>(op)) {
      calls.push_back(call);
    }
  });

  // A call result is the argument its callee returns, advanced or not.
  for (CallOpInterface call : calls)
    for (OpResult result : call->getResults()) {
      if (!isState(result))
        continue;
      std::optional<CallAdvance> advance =
          getCallAdvance(call, result.getResultNumber());
      if (!advance)
        continue;
      Value argument = call.getArgOperands()[advance->argument];
      unite(pipelineParents, argument, result);
      if (advance->slots == 0)
        unite(slotParents, argument, result);
    }

  for (Value state : states) {
    slotMembers[find(slotParents, state)].push_back(state);
    pipelineMembers[find(pipelineParents, state)].push_back(state);
  }
}

Value PipelineFlow::getPipeline(Value state) {
  return find(pipelineParents, state);
}

Value PipelineFlow::getSlot(Value state) { return find(slotParents, state); }

ArrayRef<Value> PipelineFlow::getSlotStates(Value slot) {
  auto it = slotMembers.find(find(slotParents, slot));
  if (it == slotMembers.end())
    return {};
  return it->second;
}

std::string PipelineFlow::describe(Value state) {
  Value pipeline = getPipeline(state);
  auto it = names.find(pipeline);
  if (it != names.end())
    return it->second;

  // Name it by its kvpipe.create, else by the function argument it enters
  // through, else by where the state comes from.
  Value named;
  auto membersIt = pipelineMembers.find(pipeline);
  ArrayRef<Value> members;
  if (membersIt != pipelineMembers.end())
    members = membersIt->second;
  for (Value member : members)
    if (member.getDefiningOp<CreateOp>()) {
      named = member;
      break;
    }
  if (!named)
    for (Value member : members) {
      auto argument = dyn_cast<BlockArgument>(member);
      if (!argument || !argument.getOwner()->isEntryBlock())
        continue;
      if (isa_and_nonnull<FunctionOpInterface>(
              argument.getOwner()->getParentOp())) {
        named = member;
        break;
      }
    }

  std::string text;
  llvm::raw_string_ostream os(text);
  if (named && named.getDefiningOp()) {
    os << "pipeline created at ";
    printLocation(os, named.getLoc());
  } else if (named) {
    auto argument = cast<BlockArgument>(named);
    auto function =
        cast<FunctionOpInterface>(argument.getOwner()->getParentOp());
    os << "pipeline argument #" << argument.getArgNumber() << " of @"
       << function.getName();
  } else {
    named = members.empty() ? state : members.front();
    os << "pipeline state defined at ";
    printLocation(os, named.getLoc());
  }
  os << " : " << named.getType();
  names[pipeline] = text;
  return text;
}

//===----------------------------------------------------------------------===//
// Advances along a chain of states
//===----------------------------------------------------------------------===//

/// `a += b` unless it overflows.
static bool addSlots(int64_t &a, int64_t b) {
  int64_t sum;
  if (llvm::AddOverflow(a, b, sum))
    return false;
  a = sum;
  return true;
}

std::optional<StateAdvance> PipelineFlow::traceAdvance(Value state,
                                                       Operation *scope) {
  StateAdvance result;
  auto advanceBy = [&](int64_t slots, Operation *op) {
    if (slots != 0 && !result.lastAdvance)
      result.lastAdvance = op;
    return addSlots(result.slots, slots);
  };
  Value value = state;
  // SSA chains are acyclic except in graph regions: bound the walk.
  for (unsigned guard = 0; guard < 100000; ++guard) {
    if (!isState(value))
      return std::nullopt;
    Operation *def = value.getDefiningOp();
    if (!def) {
      Operation *owner = cast<BlockArgument>(value).getOwner()->getParentOp();
      if (owner == scope || !owner || !scope->isProperAncestor(owner)) {
        result.base = value;
        return result;
      }
      return std::nullopt;
    }
    if (!scope->isProperAncestor(def)) {
      result.base = value;
      return result;
    }

    if (auto step = dyn_cast<StepOp>(def)) {
      if (!advanceBy(1, def))
        return std::nullopt;
      value = step.getPipeline();
      continue;
    }
    if (auto release = dyn_cast<ConsumerReleaseOp>(def)) {
      if (!advanceBy(release.advances() ? 1 : 0, def))
        return std::nullopt;
      value = release.getPipeline();
      continue;
    }
    unsigned index = cast<OpResult>(value).getResultNumber();
    if (auto forOp = dyn_cast<scf::ForOp>(def)) {
      std::optional<APInt> trips = forOp.getStaticTripCount();
      std::optional<int64_t> perIteration =
          getAdvancePerIteration(forOp, index);
      if (!trips || !perIteration || trips->getActiveBits() > 62)
        return std::nullopt;
      int64_t slots;
      if (llvm::MulOverflow(static_cast<int64_t>(trips->getZExtValue()),
                            *perIteration, slots) ||
          !advanceBy(slots, def))
        return std::nullopt;
      value = forOp.getInitArgs()[index];
      continue;
    }
    SmallVector<Value> yields;
    if (getBranchYields(def, index, yields)) {
      // Every branch must advance the same state by the same count; where
      // they disagree the checker reports the branch op itself.
      std::optional<StateAdvance> first;
      for (Value yielded : yields) {
        std::optional<StateAdvance> branch = traceAdvance(yielded, def);
        if (!branch)
          return std::nullopt;
        if (!first) {
          first = branch;
          continue;
        }
        if (branch->slots != first->slots ||
            getSlot(branch->base) != getSlot(first->base))
          return std::nullopt;
        if (!first->lastAdvance)
          first->lastAdvance = branch->lastAdvance;
      }
      if (!advanceBy(first->slots, first->lastAdvance))
        return std::nullopt;
      value = first->base;
      continue;
    }
    if (auto call = dyn_cast<CallOpInterface>(def)) {
      std::optional<CallAdvance> advance = getCallAdvance(call, index);
      if (!advance || !advanceBy(advance->slots, def))
        return std::nullopt;
      value = call.getArgOperands()[advance->argument];
      continue;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<unsigned> PipelineFlow::getCarriedPosition(OpOperand &use) {
  Operation *user = use.getOwner();
  if (auto forOp = dyn_cast<scf::ForOp>(user)) {
    unsigned number = use.getOperandNumber();
    if (number < forOp.getNumControlOperands())
      return std::nullopt;
    return number - forOp.getNumControlOperands();
  }
  if (isa<scf::WhileOp>(user))
    return use.getOperandNumber();
  return std::nullopt;
}

SmallVector<Value> PipelineFlow::getCarriedStates(Operation *loop) {
  SmallVector<Value> carried;
  Block::BlockArgListType arguments;
  if (auto forOp = dyn_cast<scf::ForOp>(loop))
    arguments = forOp.getRegionIterArgs();
  else if (auto whileOp = dyn_cast<scf::WhileOp>(loop))
    arguments = whileOp.getBeforeArguments();
  for (BlockArgument argument : arguments)
    carried.push_back(isState(argument) ? Value(argument) : Value());
  return carried;
}

std::optional<int64_t> PipelineFlow::getAdvancePerIteration(Operation *loop,
                                                            unsigned position) {
  auto key = std::make_pair(loop, position);
  auto it = perIteration.find(key);
  if (it != perIteration.end())
    return it->second;

  std::optional<int64_t> slots;
  if (auto forOp = dyn_cast<scf::ForOp>(loop)) {
    if (position < forOp.getNumRegionIterArgs()) {
      std::optional<StateAdvance> advance =
          traceAdvance(forOp.getYieldedValues()[position], forOp);
      if (advance && advance->base == forOp.getRegionIterArgs()[position])
        slots = advance->slots;
    }
  } else if (auto whileOp = dyn_cast<scf::WhileOp>(loop)) {
    // before-arg -> condition -> after-arg -> yield -> before-arg.
    scf::YieldOp yield = whileOp.getYieldOp();
    scf::ConditionOp condition = whileOp.getConditionOp();
    if (yield && condition && position < yield.getNumOperands() &&
        position < whileOp.getBeforeArguments().size()) {
      std::optional<StateAdvance> after =
          traceAdvance(yield.getOperand(position), whileOp);
      auto afterArg = after ? dyn_cast<BlockArgument>(after->base) : nullptr;
      if (afterArg && afterArg.getOwner() == whileOp.getAfterBody() &&
          afterArg.getArgNumber() < condition.getArgs().size()) {
        std::optional<StateAdvance> before =
            traceAdvance(condition.getArgs()[afterArg.getArgNumber()], whileOp);
        if (before && before->base == whileOp.getBeforeArguments()[position]) {
          int64_t total = before->slots;
          if (addSlots(total, after->slots))
            slots = total;
        }
      }
    }
  }
  perIteration[key] = slots;
  return slots;
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

FunctionOpInterface PipelineFlow::resolveCallee(CallOpInterface call) {
  // Only look callees up in a symbol table under the root: the pass may run
  // on one function while others are being transformed.
  Operation *table = SymbolTable::getNearestSymbolTable(call);
  if (!table || !root->isAncestor(table))
    return {};
  auto callee = dyn_cast_or_null<FunctionOpInterface>(
      call.resolveCallableInTable(&symbolTables));
  if (!callee || callee.isExternal() || !root->isAncestor(callee))
    return {};
  if (callee.getNumArguments() != call.getArgOperands().size() ||
      callee.getNumResults() != call->getNumResults())
    return {};
  return callee;
}

std::optional<unsigned> PipelineFlow::getArgumentIndex(CallOpInterface call,
                                                       OpOperand &use) {
  MutableOperandRange arguments = call.getArgOperandsMutable();
  for (unsigned i = 0, e = arguments.size(); i < e; ++i)
    if (&arguments[i] == &use)
      return i;
  return std::nullopt;
}

SmallVector<std::optional<PipelineFlow::CallAdvance>>
PipelineFlow::getReturnAdvances(FunctionOpInterface callee) {
  Operation *op = callee;
  auto it = returnAdvances.find(op);
  if (it != returnAdvances.end())
    return it->second;
  SmallVector<std::optional<CallAdvance>> advances(callee.getNumResults());
  if (!returnsInProgress.insert(op).second)
    return advances; // recursion: unknown
  Region &body = callee.getFunctionBody();
  for (unsigned index = 0, e = advances.size(); index < e; ++index) {
    if (!isa<PipelineType>(callee.getResultTypes()[index]))
      continue;
    std::optional<CallAdvance> common;
    bool known = true;
    for (Block &block : body) {
      Operation *terminator = block.empty() ? nullptr : &block.back();
      if (!terminator || !terminator->hasTrait<OpTrait::ReturnLike>())
        continue;
      if (index >= terminator->getNumOperands()) {
        known = false;
        break;
      }
      std::optional<StateAdvance> advance =
          traceAdvance(terminator->getOperand(index), op);
      auto argument =
          advance ? dyn_cast<BlockArgument>(advance->base) : nullptr;
      if (!argument || argument.getOwner() != &body.front()) {
        known = false;
        break;
      }
      CallAdvance here{argument.getArgNumber(), advance->slots};
      if (common &&
          (common->argument != here.argument || common->slots != here.slots)) {
        known = false;
        break;
      }
      common = here;
    }
    if (known)
      advances[index] = common;
  }
  returnsInProgress.erase(op);
  returnAdvances[op] = advances;
  return advances;
}

std::optional<PipelineFlow::CallAdvance>
PipelineFlow::getCallAdvance(CallOpInterface call, unsigned result) {
  FunctionOpInterface callee = resolveCallee(call);
  if (!callee)
    return std::nullopt;
  SmallVector<std::optional<CallAdvance>> advances = getReturnAdvances(callee);
  if (result >= advances.size())
    return std::nullopt;
  return advances[result];
}

//===----------------------------------------------------------------------===//
// What an op does with a state
//===----------------------------------------------------------------------===//

bool PipelineFlow::advances(OpOperand &use) {
  if (!isState(use.get()))
    return false;
  Operation *user = use.getOwner();
  if (isa<StepOp>(user))
    return true;
  if (auto release = dyn_cast<ConsumerReleaseOp>(user))
    return release.advances() && &use == &release.getPipelineMutable();
  if (std::optional<unsigned> position = getCarriedPosition(use)) {
    if (std::optional<int64_t> slots = getAdvancePerIteration(user, *position))
      return *slots != 0;
    return findAdvanceWithin(user, getPipeline(use.get())) != nullptr;
  }
  if (auto call = dyn_cast<CallOpInterface>(user)) {
    FunctionOpInterface callee = resolveCallee(call);
    std::optional<unsigned> index = getArgumentIndex(call, use);
    if (!callee || !index)
      return false;
    auto key = std::make_pair(callee.getOperation(), *index);
    auto it = calleeAdvances.find(key);
    if (it != calleeAdvances.end())
      return it->second;
    if (!advancesInProgress.insert(key).second)
      return false; // recursion: what is not seen does not advance
    Value argument = callee.getArgument(*index);
    bool result = isState(argument) &&
                  findAdvanceWithin(callee, getPipeline(argument)) != nullptr;
    advancesInProgress.erase(key);
    calleeAdvances[key] = result;
    return result;
  }
  return false;
}

Operation *PipelineFlow::findAdvanceWithin(Operation *op, Value pipeline) {
  Operation *found = nullptr;
  op->walk([&](Operation *inner) {
    if (inner == op)
      return WalkResult::advance();
    for (OpOperand &use : inner->getOpOperands())
      if (isState(use.get()) && getPipeline(use.get()) == pipeline &&
          advances(use)) {
        found = inner;
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return found;
}

unsigned PipelineFlow::getSides(Operation *op, Value pipeline) {
  unsigned sides = kNoSide;
  op->walk([&](Operation *inner) {
    if (inner == op)
      return;
    if (auto acquire = dyn_cast<ProducerAcquireOp>(inner)) {
      if (getPipeline(acquire.getPipeline()) == pipeline)
        sides |= kProducerSide;
    } else if (auto commit = dyn_cast<ProducerCommitOp>(inner)) {
      if (getPipeline(commit.getPipeline()) == pipeline)
        sides |= kProducerSide;
    } else if (auto wait = dyn_cast<ConsumerWaitOp>(inner)) {
      if (getPipeline(wait.getPipeline()) == pipeline)
        sides |= kConsumerSide;
    } else if (auto release = dyn_cast<ConsumerReleaseOp>(inner)) {
      if (getPipeline(release.getPipeline()) == pipeline)
        sides |= kConsumerSide;
    } else if (auto call = dyn_cast<CallOpInterface>(inner)) {
      FunctionOpInterface callee = resolveCallee(call);
      if (!callee)
        return;
      for (auto [index, argument] : llvm::enumerate(call.getArgOperands())) {
        if (!isState(argument) || getPipeline(argument) != pipeline)
          continue;
        auto key = std::make_pair(callee.getOperation(), unsigned(index));
        auto it = calleeSides.find(key);
        if (it != calleeSides.end()) {
          sides |= it->second;
          continue;
        }
        if (!sidesInProgress.insert(key).second)
          continue;
        Value calleeArgument = callee.getArgument(index);
        unsigned calleeSide =
            isState(calleeArgument)
                ? getSides(callee, getPipeline(calleeArgument))
                : kNoSide;
        sidesInProgress.erase(key);
        calleeSides[key] = calleeSide;
        sides |= calleeSide;
      }
    }
  });
  return sides;
}
