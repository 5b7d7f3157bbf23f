//===- ProtocolAnalysis.cpp - how pipeline states flow --------------------===//

#include "kvpipe/Dialect/KVPipe/Analysis/ProtocolAnalysis.h"
#include "kvpipe/Dialect/KVPipe/Analysis/ThreadCounts.h"
#include "kvpipe/Support/UseWalk.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace kvpipe;

static bool isState(Value value) {
  return value && isa<PipelineType>(value.getType());
}

/// The state a protocol op returns (`step`, `consumer_release`), or null.
static Value getResultState(Operation *op) {
  auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(op);
  return protocolOp ? protocolOp.getResultState() : Value();
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

    if (Value result = getResultState(op)) {
      // A state returned unadvanced (the release of a sub-stage before the
      // last) is the same slot.
      auto protocolOp = cast<PipelineProtocolOpInterface>(op);
      if (protocolOp.getSlotsAdvanced() != 0)
        unite(pipelineParents, protocolOp.getPipeline(), result);
      else
        uniteBoth(protocolOp.getPipeline(), result);
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
      // Merged once the states the branches yield are known to be of one
      // pipeline (below).
      for (OpResult result : op->getResults()) {
        SmallVector<Value> yields;
        if (!isState(result) ||
            !getBranchYields(op, result.getResultNumber(), yields))
          continue;
        merges.push_back(Merge{result, {yields.begin(), yields.end()}, true});
      }
    } else if (auto branch = dyn_cast<BranchOpInterface>(op)) {
      for (unsigned i = 0, e = op->getNumSuccessors(); i < e; ++i) {
        SuccessorOperands operands = branch.getSuccessorOperands(i);
        Block *successor = op->getSuccessor(i);
        unsigned produced = operands.getProducedOperandCount();
        for (auto [index, forwarded] :
             llvm::enumerate(operands.getForwardedOperands()))
          if (produced + index < successor->getNumArguments() &&
              isState(forwarded))
            blockIncoming[successor->getArgument(produced + index)].push_back(
                forwarded);
      }
    } else if (auto call = dyn_cast<CallOpInterface>(op)) {
      calls.push_back(call);
    }
  });

  for (auto &[argument, incoming] : blockIncoming)
    merges.push_back(Merge{argument, incoming, false});
  mergeStates();
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
  uniteLoopPassThroughs();

  mergeStates();
  // What is left merges states of different pipelines: which one the
  // merged state is depends on the path.
  for (const Merge &merge : merges)
    mixed.insert(merge.target);
  merges.clear();

  // Answers computed while the slots were still being linked may be stale.
  perIteration.clear();
  for (Value state : states) {
    slotMembers[find(slotParents, state)].push_back(state);
    pipelineMembers[find(pipelineParents, state)].push_back(state);
  }
}

void PipelineFlow::uniteLoopPassThroughs() {
  // A loop that does not advance the state it carries at a position (every
  // iteration yields its iter_arg unchanged) returns the state it was
  // given: the result is the same slot as the init, and using both is an
  // alias (as for an `scf.if` that yields the outer state).
  for (Operation *loop : loops) {
    if (auto forOp = dyn_cast<scf::ForOp>(loop)) {
      for (auto [position, init, result] :
           llvm::enumerate(forOp.getInitArgs(), forOp.getResults())) {
        if (!isState(result))
          continue;
        std::optional<int64_t> slots =
            getAdvancePerIteration(loop, position);
        if (slots && *slots == 0)
          unite(slotParents, init, result);
      }
      continue;
    }
    auto whileOp = dyn_cast<scf::WhileOp>(loop);
    scf::ConditionOp condition = whileOp ? whileOp.getConditionOp() : nullptr;
    if (!condition)
      continue;
    // Result i is the condition's operand i: a before-argument unadvanced,
    // of a position no iteration advances, is the init of that position.
    for (auto [forwarded, result] :
         llvm::zip(condition.getArgs(), whileOp.getResults())) {
      if (!isState(result))
        continue;
      std::optional<StateAdvance> before = traceAdvance(forwarded, whileOp);
      auto argument = before ? dyn_cast<BlockArgument>(before->base) : nullptr;
      if (!argument || before->slots != 0 ||
          argument.getOwner() != whileOp.getBeforeBody())
        continue;
      unsigned position = argument.getArgNumber();
      std::optional<int64_t> slots = getAdvancePerIteration(loop, position);
      if (slots && *slots == 0 && position < whileOp.getInits().size())
        unite(slotParents, whileOp.getInits()[position], result);
    }
  }
}

bool PipelineFlow::isUnmodelled(Value state) {
  // A state made by an op the analysis does not model (reported on its
  // own as unproven) decides nothing about the pipeline of a merge.
  auto result = dyn_cast<OpResult>(state);
  if (!result)
    return false;
  Operation *owner = result.getOwner();
  if (getResultState(owner) ||
      isa<CreateOp, scf::ForOp, scf::WhileOp, scf::IfOp, scf::IndexSwitchOp,
          scf::ExecuteRegionOp>(owner))
    return false;
  if (auto call = dyn_cast<CallOpInterface>(owner))
    return !getCallAdvance(call, result.getResultNumber());
  return true;
}

void PipelineFlow::mergeStates() {
  // A merged state (an scf.if result, a block argument) is of the pipeline
  // of what flows into it, when that is one pipeline; values already of
  // its class (a loop's back edge) do not decide.
  for (bool changed = true; changed;) {
    changed = false;
    for (unsigned i = 0; i < merges.size();) {
      Merge &merge = merges[i];
      Value own = find(pipelineParents, merge.target);
      Value other;
      bool one = true;
      for (Value incoming : merge.incoming) {
        Value cls = find(pipelineParents, incoming);
        if (cls == own || isUnmodelled(incoming))
          continue;
        if (other && cls != other)
          one = false;
        other = cls;
      }
      if (!one) {
        ++i;
        continue;
      }
      if (other)
        unite(pipelineParents, other, merge.target);
      {
        bool sameSlot = llvm::all_of(merge.incoming, [&](Value yielded) {
          return find(slotParents, yielded) ==
                 find(slotParents, merge.incoming.front());
        });
        if (sameSlot)
          unite(slotParents, merge.target, merge.incoming.front());
      }
      merges.erase(merges.begin() + i);
      changed = true;
    }
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
    if (!scope->isProperAncestor(def) || isa<CreateOp>(def)) {
      result.base = value;
      return result;
    }

    if (getResultState(def)) {
      auto protocolOp = cast<PipelineProtocolOpInterface>(def);
      if (!advanceBy(protocolOp.getSlotsAdvanced(), def))
        return std::nullopt;
      value = protocolOp.getPipeline();
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

ArrayRef<CallOpInterface>
PipelineFlow::getCallSites(FunctionOpInterface callee) {
  if (!callSites) {
    callSites.emplace();
    root->walk([&](CallOpInterface call) {
      if (FunctionOpInterface resolved = resolveCallee(call))
        (*callSites)[resolved].push_back(call);
    });
  }
  auto it = callSites->find(callee);
  if (it == callSites->end())
    return {};
  return it->second;
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
  if (auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(user))
    return protocolOp.getSlotsAdvanced() != 0 &&
           use.get() == protocolOp.getPipeline();
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

PipelineSide PipelineFlow::getSides(Operation *op, Value pipeline) {
  PipelineSide sides = PipelineSide::none;
  op->walk([&](Operation *inner) {
    if (inner == op)
      return;
    if (auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(inner)) {
      // A side works on a slot where it opens or closes it; barrier
      // accessors and steps do not count.
      if ((protocolOp.opensSlot() || protocolOp.closesSlot()) &&
          getPipeline(protocolOp.getPipeline()) == pipeline)
        sides |= protocolOp.getSide();
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
        PipelineSide calleeSide =
            isState(calleeArgument)
                ? getSides(callee, getPipeline(calleeArgument))
                : PipelineSide::none;
        sidesInProgress.erase(key);
        calleeSides[key] = calleeSide;
        sides |= calleeSide;
      }
    }
  });
  return sides;
}

//===----------------------------------------------------------------------===//
// Symbolic slot counts
//===----------------------------------------------------------------------===//

bool LinearExpr::add(const LinearExpr &other, int64_t factor) {
  int64_t scaled;
  if (llvm::MulOverflow(other.constant, factor, scaled) ||
      llvm::AddOverflow(constant, scaled, constant))
    return false;
  for (auto [atom, coef] : other.terms) {
    int64_t &mine = terms[atom];
    if (llvm::MulOverflow(coef, factor, scaled) ||
        llvm::AddOverflow(mine, scaled, mine))
      return false;
    if (mine == 0)
      terms.erase(atom);
  }
  return true;
}

bool LinearExpr::scale(int64_t factor) {
  if (factor == 0) {
    *this = LinearExpr();
    return true;
  }
  if (llvm::MulOverflow(constant, factor, constant))
    return false;
  for (auto &[atom, coef] : terms)
    if (llvm::MulOverflow(coef, factor, coef))
      return false;
  return true;
}

/// The kernel argument `pointer` is derived from through
/// `llvm.getelementptr`, if any.
static BlockArgument getKernelPointerArgument(Value pointer) {
  for (unsigned guard = 0; guard < 32 && pointer; ++guard) {
    if (auto argument = dyn_cast<BlockArgument>(pointer)) {
      auto function = dyn_cast_or_null<FunctionOpInterface>(
          argument.getOwner()->getParentOp());
      if (!function || !argument.getOwner()->isEntryBlock())
        return {};
      return isKernelFunction(function) ? argument : BlockArgument();
    }
    Operation *def = pointer.getDefiningOp();
    if (!def || def->getName().getStringRef() != "llvm.getelementptr" ||
        def->getNumOperands() == 0)
      return {};
    pointer = def->getOperand(0);
  }
  return {};
}

/// Whether every use of the kernel pointer argument `argument` (through
/// `llvm.getelementptr`) is a plain `llvm.load`: nothing in the kernel writes
/// through it or lets it escape.
static bool isOnlyRead(BlockArgument argument) {
  return !findUseTransitively(argument, [](OpOperand &use) {
    Operation *user = use.getOwner();
    StringRef name = user->getName().getStringRef();
    if (name == "llvm.getelementptr" && use.getOperandNumber() == 0)
      return UseStep::Follow;
    if (name == "llvm.load" && use.getOperandNumber() == 0 &&
        !user->hasAttr("volatile_"))
      return UseStep::Skip;
    return UseStep::Stop;
  });
}

std::optional<Value> SlotArithmetic::getReadOnlyKernelLoad(Operation *def) {
  if (!def || def->getName().getStringRef() != "llvm.load" ||
      def->getNumOperands() != 1 || def->hasAttr("volatile_"))
    return std::nullopt;
  if (Attribute ordering = def->getAttr("ordering")) {
    auto integer = dyn_cast<IntegerAttr>(ordering);
    std::string text = integer && integer.getInt() == 0 ? "not_atomic" : "";
    llvm::raw_string_ostream os(text);
    if (text.empty())
      os << ordering;
    if (text.find("not_atomic") == std::string::npos)
      return std::nullopt; // an atomic load
  }
  Value address = def->getOperand(0);
  auto type = dyn_cast<LLVM::LLVMPointerType>(address.getType());
  if (!type || type.getAddressSpace() != 1)
    return std::nullopt;
  BlockArgument argument = getKernelPointerArgument(address);
  if (!argument)
    return std::nullopt;
  auto [it, inserted] = readOnlyArguments.try_emplace(argument, false);
  if (inserted)
    it->second = isOnlyRead(argument);
  if (!it->second)
    return std::nullopt;
  return address;
}

unsigned SlotArithmetic::intern(const std::string &key, Value example,
                                Value nonUniform) {
  auto [it, inserted] = atoms.try_emplace(key, atomExamples.size());
  if (inserted) {
    atomExamples.push_back(example);
    atomKeys.push_back(key);
    atomNonUniform.push_back(nonUniform);
  }
  return it->second;
}

bool SlotArithmetic::isUniform(const LinearExpr &expr) {
  return !getNonUniformAtom(expr);
}

Value SlotArithmetic::getNonUniformAtom(const LinearExpr &expr) {
  for (auto [atom, coef] : expr.terms)
    if (atomNonUniform[atom])
      return atomNonUniform[atom];
  return {};
}

/// The bit width of an integer or index value (index counts as 64 bits).
static unsigned getWidth(Value value) {
  Type type = getElementTypeOrSelf(value.getType());
  if (type.isIndex())
    return 64;
  if (type.isIntOrFloat())
    return type.getIntOrFloatBitWidth();
  return 64;
}

/// Whether `max`, an unsigned upper bound of `value`, shows that `value` is
/// non-negative read as a signed integer of its width.
static bool isSignedNonNegative(Value value, std::optional<uint64_t> max) {
  unsigned width = getWidth(value);
  return max && width >= 1 && width <= 64 &&
         *max < (uint64_t(1) << (width - 1));
}

/// Whether what decides `whileOp`'s trip count (its condition, and the
/// values it carries other than states) is computed from one of the states
/// it carries.
static bool whileDependsOnStates(scf::WhileOp whileOp) {
  SmallVector<Value> worklist;
  scf::ConditionOp condition = whileOp.getConditionOp();
  if (!condition || !whileOp.getYieldOp())
    return true;
  worklist.push_back(condition.getCondition());
  for (Value value : condition.getArgs())
    if (!isState(value))
      worklist.push_back(value);
  for (Value value : whileOp.getYieldOp().getOperands())
    if (!isState(value))
      worklist.push_back(value);
  DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    if (auto argument = dyn_cast<BlockArgument>(value)) {
      Operation *owner = argument.getOwner()->getParentOp();
      if (owner == whileOp.getOperation()) {
        if (isState(argument))
          return true;
        // An "after" argument is the condition's; a "before" one, the
        // yield's (followed above) or the init (outside).
        if (argument.getOwner() == whileOp.getAfterBody() &&
            argument.getArgNumber() < condition.getArgs().size())
          worklist.push_back(condition.getArgs()[argument.getArgNumber()]);
        continue;
      }
      if (whileOp->isProperAncestor(owner))
        return true; // (an inner region's values: not followed)
      continue;
    }
    Operation *def = value.getDefiningOp();
    if (!def || !whileOp->isProperAncestor(def))
      continue;
    if (def->getNumRegions())
      return true;
    for (Value operand : def->getOperands())
      worklist.push_back(operand);
  }
  return false;
}

/// The upper bound of `forOp` without a clamp that does not change its
/// trip count: a signed loop from a constant to `maxsi(n, c)`, with c at
/// most that constant, runs as often as one to `n` (neither runs when n is
/// below it). Front ends clamp counts so.
static Value getUnclampedUpperBound(scf::ForOp forOp) {
  Value upper = forOp.getUpperBound();
  APInt lower, clamp;
  auto max = upper.getDefiningOp<arith::MaxSIOp>();
  if (!max || forOp.getUnsignedCmp() ||
      !matchPattern(forOp.getLowerBound(), m_ConstantInt(&lower)))
    return upper;
  for (unsigned i = 0; i < 2; ++i)
    if (matchPattern(max->getOperand(i), m_ConstantInt(&clamp)) &&
        clamp.getBitWidth() == lower.getBitWidth() && clamp.sle(lower))
      return max->getOperand(1 - i);
  return upper;
}

std::string SlotArithmetic::loopSignature(Operation *loop, unsigned depth) {
  auto keys = [&](ValueRange values, std::string &out) {
    for (Value value : values) {
      if (isState(value))
        continue;
      std::string key = keyOf(value, depth + 1);
      if (key.empty())
        return false;
      out += key + ",";
    }
    return true;
  };
  std::string sig;
  if (auto forOp = dyn_cast<scf::ForOp>(loop)) {
    sig = forOp.getUnsignedCmp() ? "foru(" : "for(";
    if (!keys({forOp.getLowerBound(), getUnclampedUpperBound(forOp),
               forOp.getStep()},
              sig))
      return "";
    return sig + ")";
  }
  auto whileOp = dyn_cast<scf::WhileOp>(loop);
  if (!whileOp || !whileOp.getConditionOp() || !whileOp.getYieldOp())
    return "";
  sig = "while(";
  if (!keys(whileOp.getInits(), sig))
    return "";
  // A condition computed from the loop's own states (`kvpipe.index`, the
  // phase) counts iterations from where the states start: two such loops
  // run alike only from the same slots. Their starts are then part of the
  // signature (their base value and the slots advanced from it).
  if (whileDependsOnStates(whileOp)) {
    auto function = loop->getParentOfType<FunctionOpInterface>();
    for (Value init : whileOp.getInits()) {
      if (!isState(init))
        continue;
      std::optional<StateAdvance> start =
          function ? flow.traceAdvance(init, function) : std::nullopt;
      if (!start)
        return "";
      sig += "st" +
             std::to_string(reinterpret_cast<uintptr_t>(
                 start->base.getAsOpaquePointer())) +
             "+" + std::to_string(start->slots) + ",";
    }
  }
  inProgress.push_back(loop);
  sig += "|";
  bool ok = keys(whileOp.getConditionOp().getCondition(), sig);
  sig += "|";
  ok = ok && keys(whileOp.getConditionOp().getArgs(), sig);
  sig += "|";
  ok = ok && keys(whileOp.getYieldOp().getOperands(), sig);
  inProgress.pop_back();
  return ok ? sig + ")" : "";
}

std::string SlotArithmetic::keyOf(Value value, unsigned depth) {
  if (depth > 48 || !value)
    return "";
  if (inProgress.empty()) {
    auto it = numbers.find(value);
    if (it != numbers.end())
      return atomKeys[it->second];
  }
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)))
    return "c" + std::to_string(constant.getSExtValue());

  if (auto argument = dyn_cast<BlockArgument>(value)) {
    Operation *owner = argument.getOwner()->getParentOp();
    if (!owner)
      return "";
    auto placeholder = [&](StringRef kind) -> std::optional<std::string> {
      auto found = llvm::find(inProgress, owner);
      if (found == inProgress.end())
        return std::nullopt;
      usedPlaceholder = true;
      return (kind + std::to_string(inProgress.end() - found) + ":" +
              std::to_string(argument.getArgNumber()))
          .str();
    };
    if (auto forOp = dyn_cast<scf::ForOp>(owner)) {
      if (argument == forOp.getInductionVar()) {
        std::string sig = loopSignature(owner, depth);
        return sig.empty() ? "" : "iv(" + sig + ")";
      }
      // Carried values other than states: numbered by the loop's bounds,
      // initial values and updates.
      if (std::optional<std::string> ph = placeholder("fph"))
        return *ph;
      std::string sig = loopSignature(owner, depth);
      if (sig.empty())
        return "";
      inProgress.push_back(owner);
      std::string update;
      unsigned position = argument.getArgNumber() - 1;
      std::string init = keyOf(forOp.getInitArgs()[position], depth + 1);
      for (Value yielded : forOp.getYieldedValues()) {
        std::string key = isState(yielded) ? "s" : keyOf(yielded, depth + 1);
        if (key.empty()) {
          update.clear();
          break;
        }
        update += key + ",";
      }
      inProgress.pop_back();
      if (init.empty() || update.empty())
        return "";
      return "fa" + std::to_string(position) + "(" + sig + init + "|" +
             update + ")";
    }
    if (auto whileOp = dyn_cast<scf::WhileOp>(owner)) {
      if (argument.getOwner() == whileOp.getAfterBody()) {
        scf::ConditionOp condition = whileOp.getConditionOp();
        if (!condition ||
            argument.getArgNumber() >= condition.getArgs().size())
          return "";
        return keyOf(condition.getArgs()[argument.getArgNumber()], depth + 1);
      }
      if (std::optional<std::string> ph = placeholder("wph"))
        return *ph;
      std::string sig = loopSignature(owner, depth);
      return sig.empty() ? ""
                         : "wa" + std::to_string(argument.getArgNumber()) +
                               "(" + sig + ")";
    }
    // Arguments of a kernel: the same for every thread of the CTA. An
    // argument of a helper is the one value every call under the root
    // passes, where they all pass the same CTA-uniform value (two calls
    // passing n and n + 1, one per role, make it a different number on
    // different threads: not uniform, as a per-thread value at one call);
    // a helper without calls there is assumed to be called with uniform
    // values (docs/protocol-checking.md).
    if (auto function = dyn_cast<FunctionOpInterface>(owner);
        function && argument.getOwner()->isEntryBlock()) {
      std::string passed;
      if (!isKernelFunction(function))
        for (CallOpInterface call : flow.getCallSites(function)) {
          std::string key = keyOf(
              call.getArgOperands()[argument.getArgNumber()], depth + 1);
          if (key.empty() || (!passed.empty() && key != passed))
            return "";
          passed = key;
        }
      return "arg" + std::to_string(reinterpret_cast<uintptr_t>(
                         argument.getAsOpaquePointer()));
    }
    return "";
  }

  Operation *def = value.getDefiningOp();
  // An undefined value (undef, poison, a freeze of one) is not a number
  // every thread computes alike: nothing computed from it is uniform
  // (getValueNumber gives undef and poison a new atom at every use).
  if (isIndeterminateOp(def))
    return "";
  // A load of a read-only kernel input at a CTA-uniform address.
  if (std::optional<Value> address = getReadOnlyKernelLoad(def)) {
    std::string inner = keyOf(*address, depth + 1);
    if (inner.empty())
      return "";
    std::string text;
    llvm::raw_string_ostream os(text);
    os << value.getType();
    return "ldro(" + inner + ")" + text;
  }
  if (isThreadDependentOp(def) || def->getNumRegions() != 0 ||
      !isMemoryEffectFree(def))
    return "";
  // A shuffle from lane 0 of a value every thread computed alike is that
  // value.
  if (auto shuffle = dyn_cast<gpu::ShuffleOp>(def)) {
    if (value != shuffle.getShuffleResult() ||
        shuffle.getMode() != gpu::ShuffleMode::IDX ||
        !matchPattern(shuffle.getOffset(), m_Zero()))
      return "";
    return keyOf(shuffle.getValue(), depth + 1);
  }
  std::string key = def->getName().getStringRef().str();
  key += "#" + std::to_string(cast<OpResult>(value).getResultNumber());
  std::string text;
  llvm::raw_string_ostream os(text);
  os << def->getAttrDictionary() << def->getResultTypes();
  key += text + "(";
  for (Value operand : def->getOperands()) {
    std::string inner = keyOf(operand, depth + 1);
    if (inner.empty())
      return "";
    key += inner + ",";
  }
  key += ")";
  // A narrowing cast back and forth is the value itself when it fits.
  if (auto widen = dyn_cast<arith::IndexCastOp>(def)) {
    if (auto narrow = widen.getIn().getDefiningOp<arith::IndexCastOp>()) {
      unsigned bits = narrow.getType().getIntOrFloatBitWidth();
      std::optional<uint64_t> max = getUnsignedMax(narrow.getIn());
      if (isa<IndexType>(widen.getType()) &&
          isa<IndexType>(narrow.getIn().getType()) && bits < 64 && max &&
          *max < (uint64_t(1) << (bits - 1)))
        return keyOf(narrow.getIn(), depth + 1);
    }
    if (auto shuffled = widen.getIn().getDefiningOp<gpu::ShuffleOp>())
      if (auto narrow =
              shuffled.getValue().getDefiningOp<arith::IndexCastOp>()) {
        unsigned bits = narrow.getType().getIntOrFloatBitWidth();
        std::optional<uint64_t> max = getUnsignedMax(narrow.getIn());
        std::string inner = keyOf(shuffled.getShuffleResult(), depth + 1);
        if (!inner.empty() && isa<IndexType>(narrow.getIn().getType()) &&
            bits < 64 && max && *max < (uint64_t(1) << (bits - 1)))
          return keyOf(narrow.getIn(), depth + 1);
      }
  }
  return key;
}

unsigned SlotArithmetic::getValueNumber(Value value) {
  auto it = numbers.find(value);
  if (it != numbers.end())
    return it->second;
  // undef and poison may be another value at each use, even on one
  // thread: a new atom, equal to nothing (not even itself), at every use.
  if (Operation *def = value.getDefiningOp();
      def && isIndeterminateOp(def) &&
      def->getName().getStringRef() != "llvm.freeze")
    return intern("undef" + std::to_string(atomExamples.size()), value,
                  value);
  usedPlaceholder = false;
  std::string key = keyOf(value, 0);
  // Values the analysis cannot number are their own atom, equal only to
  // themselves, and not CTA-uniform: a thread id, a load from memory, a
  // result of an op with regions may differ between the producer's and the
  // consumer's threads even where it is one SSA value
  // (getNonUniformAtom).
  bool uniform = !key.empty();
  if (key.empty())
    key = "opaque" + std::to_string(reinterpret_cast<uintptr_t>(
                         value.getAsOpaquePointer()));
  unsigned number = intern(key, value, uniform ? Value() : value);
  if (!usedPlaceholder)
    numbers[value] = number;
  return number;
}

LinearExpr SlotArithmetic::getLinear(Value value) {
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)) &&
      constant.getSignificantBits() <= 64)
    return LinearExpr::ofConstant(constant.getSExtValue());
  Operation *def = value.getDefiningOp();
  // An integer cast of a constant is the constant it makes (`index_cast` of
  // an i32 1 is the index 1): extended by the cast's signedness, or
  // truncated.
  if (def &&
      isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
          arith::ExtUIOp, arith::TruncIOp>(def) &&
      matchPattern(def->getOperand(0), m_ConstantInt(&constant))) {
    unsigned width = std::min(getWidth(value), 64u);
    bool zeroExtends = isa<arith::IndexCastUIOp, arith::ExtUIOp>(def);
    APInt cast = constant.getBitWidth() >= width ? constant.trunc(width)
                 : zeroExtends                   ? constant.zext(width)
                                                 : constant.sext(width);
    return LinearExpr::ofConstant(cast.getSExtValue());
  }
  // Only 64-bit arithmetic (index, i64), or arithmetic that is marked not
  // to wrap, is the mathematical sum or product: an i8 or i32 `n + 100`
  // wraps (docs/protocol-checking.md, "Assumptions").
  bool exact = false;
  if (def && isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(def)) {
    exact = getWidth(value) >= 64;
    if (auto flags = dyn_cast<arith::ArithIntegerOverflowFlagsInterface>(def))
      exact |= flags.hasNoSignedWrap();
  }
  if (exact) {
    if (isa<arith::AddIOp, arith::SubIOp>(def)) {
      LinearExpr sum = getLinear(def->getOperand(0));
      if (sum.add(getLinear(def->getOperand(1)),
                  isa<arith::AddIOp>(def) ? 1 : -1))
        return sum;
    } else if (isa<arith::MulIOp>(def)) {
      LinearExpr lhs = getLinear(def->getOperand(0));
      LinearExpr rhs = getLinear(def->getOperand(1));
      if (rhs.isConstant() && lhs.scale(rhs.constant))
        return lhs;
      if (lhs.isConstant() && rhs.scale(lhs.constant))
        return rhs;
    }
  }
  return LinearExpr::ofAtom(getValueNumber(value));
}

std::optional<uint64_t> SlotArithmetic::getUnsignedMax(Value value,
                                                       unsigned depth,
                                                       bool threadIds) {
  if (depth > 16)
    return std::nullopt;
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)))
    return constant.getActiveBits() <= 64 ? std::optional<uint64_t>(
                                                constant.getZExtValue())
                                          : std::nullopt;
  Operation *def = value.getDefiningOp();
  if (!def)
    return std::nullopt;
  // A CTA has at most 1024 threads: 32 lanes of 32 warps, 8 warpgroups.
  if (threadIds && isa<WarpgroupIdOp, gpu::ThreadIdOp, gpu::LaneIdOp>(def))
    return isa<WarpgroupIdOp>(def) ? 7 : isa<gpu::LaneIdOp>(def) ? 31 : 1023;
  // A bound that does not fit the value's width wrapped: not a bound.
  unsigned width = getWidth(value);
  auto fits = [&](std::optional<uint64_t> bound) -> std::optional<uint64_t> {
    if (bound && width < 64 && *bound >= (uint64_t(1) << width))
      return std::nullopt;
    return bound;
  };
  auto max = [&](unsigned i) {
    return getUnsignedMax(def->getOperand(i), depth + 1, threadIds);
  };
  auto divisor = [&]() -> std::optional<uint64_t> {
    APInt d;
    if (matchPattern(def->getOperand(1), m_ConstantInt(&d)) &&
        d.getActiveBits() <= 64 && !d.isZero())
      return d.getZExtValue();
    return std::nullopt;
  };
  if (isa<arith::CeilDivUIOp, arith::DivUIOp>(def)) {
    std::optional<uint64_t> d = divisor();
    if (!d)
      return std::nullopt;
    uint64_t top = max(0).value_or(~uint64_t(0));
    return top / *d + (isa<arith::CeilDivUIOp>(def) && top % *d ? 1 : 0);
  }
  if (isa<arith::RemUIOp>(def)) {
    if (std::optional<uint64_t> d = divisor())
      return *d - 1;
    return std::nullopt;
  }
  if (isa<arith::MinUIOp>(def)) {
    std::optional<uint64_t> a = max(0), b = max(1);
    if (a && b)
      return std::min(*a, *b);
    return a ? a : b;
  }
  if (isa<arith::AndIOp>(def)) {
    std::optional<uint64_t> a = max(0), b = max(1);
    if (a && b)
      return std::min(*a, *b);
    return a ? a : b;
  }
  if (isa<arith::AddIOp, arith::MulIOp, arith::MaxUIOp, arith::SelectOp>(def)) {
    unsigned first = isa<arith::SelectOp>(def) ? 1 : 0;
    std::optional<uint64_t> a = max(first), b = max(first + 1);
    if (!a || !b)
      return std::nullopt;
    if (isa<arith::MaxUIOp, arith::SelectOp>(def))
      return std::max(*a, *b);
    return fits(isa<arith::AddIOp>(def) ? llvm::checkedAddUnsigned(*a, *b)
                                        : llvm::checkedMulUnsigned(*a, *b));
  }
  if (isa<arith::IndexCastUIOp, arith::ExtUIOp>(def)) {
    unsigned bits = getElementTypeOrSelf(def->getOperand(0).getType())
                        .getIntOrFloatBitWidth();
    if (bits < 64)
      return fits((uint64_t(1) << bits) - 1);
  }
  return std::nullopt;
}

bool SlotArithmetic::isNonNegative(const LinearExpr &expr,
                                   const PathFacts &facts, bool threadIds) {
  int64_t low = expr.constant;
  for (auto [atom, coef] : expr.terms) {
    if (coef < 0)
      return false;
    int64_t atomLow;
    if (llvm::is_contained(facts, atom))
      atomLow = 1;
    else if (StringRef(atomKeys[atom]).starts_with("trip") ||
             StringRef(atomKeys[atom]).starts_with("sum"))
      atomLow = 0;
    else if (isSignedNonNegative(
                 atomExamples[atom],
                 getUnsignedMax(atomExamples[atom], 0, threadIds)))
      atomLow = 0;
    else
      return false;
    int64_t scaled;
    if (llvm::MulOverflow(coef, atomLow, scaled) ||
        llvm::AddOverflow(low, scaled, low))
      return false;
  }
  return low >= 0;
}

/// Serialises an expression for use in an atom key.
static std::string serialise(const LinearExpr &expr,
                             ArrayRef<std::string> keys) {
  std::string text = std::to_string(expr.constant);
  for (auto [atom, coef] : expr.terms)
    text += "+" + std::to_string(coef) + "*" + keys[atom];
  return text;
}

LinearExpr SlotArithmetic::getTripCount(Operation *loop,
                                        const PathFacts &facts) {
  if (auto forOp = dyn_cast<scf::ForOp>(loop)) {
    LinearExpr span = getLinear(getUnclampedUpperBound(forOp));
    LinearExpr step = getLinear(forOp.getStep());
    // An unsigned loop counts like a signed one where both bounds are
    // non-negative; otherwise (lb = -1, ub = 1 runs no iteration unsigned,
    // two signed) only like another unsigned loop of the same bounds.
    if (forOp.getUnsignedCmp() &&
        !llvm::all_of(ValueRange{forOp.getLowerBound(), forOp.getUpperBound()},
                      [&](Value bound) {
                        return isSignedNonNegative(bound,
                                                   getUnsignedMax(bound));
                      })) {
      LinearExpr lower = getLinear(forOp.getLowerBound());
      LinearExpr upper = getLinear(forOp.getUpperBound());
      return LinearExpr::ofAtom(intern(
          "tripu(" + serialise(lower, atomKeys) + "," +
              serialise(upper, atomKeys) + "," + serialise(step, atomKeys) +
              ")",
          loop->getResult(0),
          getNonUniformAtom(lower)   ? getNonUniformAtom(lower)
          : getNonUniformAtom(upper) ? getNonUniformAtom(upper)
                                     : getNonUniformAtom(step)));
    }
    if (span.add(getLinear(forOp.getLowerBound()), -1) && step.isConstant() &&
        step.constant > 0) {
      if (span.isConstant()) {
        int64_t trips =
            span.constant <= 0 ? 0 : (span.constant - 1) / step.constant + 1;
        return LinearExpr::ofConstant(trips);
      }
      if (step.constant == 1 && isNonNegative(span, facts))
        return span;
      // Otherwise max(0, ceil(span / step)): one atom per span and step,
      // so that shifted bounds with the same span are the same count.
      return LinearExpr::ofAtom(
          intern("trip(" + serialise(span, atomKeys) + ")/" +
                     std::to_string(step.constant),
                 loop->getResult(0), getNonUniformAtom(span)));
    }
  }
  std::string sig = loopSignature(loop, 0);
  if (sig.empty())
    sig = "opaque" + std::to_string(reinterpret_cast<uintptr_t>(loop));
  return LinearExpr::ofAtom(intern("trip" + sig, loop->getResult(0)));
}

void SlotArithmetic::addBranchFacts(Region *region, PathFacts &facts,
                                    bool threadIds) {
  auto ifOp = dyn_cast_or_null<scf::IfOp>(region->getParentOp());
  if (!ifOp)
    return;
  auto cmp = ifOp.getCondition().getDefiningOp<arith::CmpIOp>();
  if (!cmp)
    return;
  bool inThen = region == &ifOp.getThenRegion();
  using P = arith::CmpIPredicate;
  P pred = cmp.getPredicate();
  Value x = cmp.getLhs();
  if (matchPattern(cmp.getLhs(), m_Zero())) {
    x = cmp.getRhs();
    // 0 < x is x > 0, and so on.
    switch (pred) {
    case P::slt: pred = P::sgt; break;
    case P::sgt: pred = P::slt; break;
    case P::ult: pred = P::ugt; break;
    case P::ugt: pred = P::ult; break;
    case P::sle: pred = P::sge; break;
    case P::sge: pred = P::sle; break;
    case P::ule: pred = P::uge; break;
    case P::uge: pred = P::ule; break;
    default: break;
    }
  } else if (!matchPattern(cmp.getRhs(), m_Zero())) {
    return;
  }
  // Normalise to "x > 0 holds in this region".
  bool positive = false;
  bool nonNegative = isSignedNonNegative(x, getUnsignedMax(x, 0, threadIds));
  if (inThen)
    // Only for a non-negative x, so that "x <= 0" in the else branch is
    // "x == 0" (the peeled-iteration merge relies on it).
    positive = nonNegative && (pred == P::sgt || pred == P::ugt || pred == P::ne);
  else
    positive = pred == P::sle ? false
                              : (nonNegative && (pred == P::eq || pred == P::ule));
  if (!positive)
    return;
  LinearExpr lin = getLinear(x);
  if (lin.constant == 0 && lin.terms.size() == 1 &&
      lin.terms.begin()->second == 1)
    facts.push_back(lin.terms.begin()->first);
}

std::optional<LinearExpr>
SlotArithmetic::traceAdvance(Value state, Operation *scope,
                             const PathFacts &facts, Value &base,
                             PipelineSide &sides, Operation *&why) {
  LinearExpr total;
  Value value = state;
  auto fail = [&](Operation *op) -> std::optional<LinearExpr> {
    if (!why)
      why = op;
    return std::nullopt;
  };
  for (unsigned guard = 0; guard < 100000; ++guard) {
    if (!isState(value))
      return fail(scope);
    Operation *def = value.getDefiningOp();
    if (!def) {
      Operation *owner = cast<BlockArgument>(value).getOwner()->getParentOp();
      if (owner == scope || !owner || !scope->isProperAncestor(owner)) {
        base = value;
        return total;
      }
      return fail(owner);
    }
    if (!scope->isProperAncestor(def) || isa<CreateOp>(def)) {
      base = value;
      return total;
    }
    if (getResultState(def)) {
      auto protocolOp = cast<PipelineProtocolOpInterface>(def);
      sides |= protocolOp.getSide();
      if (!total.add(
              LinearExpr::ofConstant(protocolOp.getSlotsAdvanced())))
        return fail(def);
      value = protocolOp.getPipeline();
      continue;
    }
    unsigned index = cast<OpResult>(value).getResultNumber();
    if (auto forOp = dyn_cast<scf::ForOp>(def)) {
      Value inner;
      std::optional<LinearExpr> per =
          traceAdvance(forOp.getYieldedValues()[index], forOp, facts, inner,
                       sides, why);
      if (!per || inner != forOp.getRegionIterArgs()[index])
        return fail(def);
      LinearExpr trips = getTripCount(forOp, facts);
      LinearExpr loopTotal;
      if (per->isConstant()) {
        loopTotal = trips;
        if (!loopTotal.scale(per->constant))
          return fail(def);
      } else {
        std::string sig = loopSignature(forOp, 0);
        if (sig.empty())
          return fail(def);
        loopTotal = LinearExpr::ofAtom(
            intern("sum" + sig + "|" + serialise(*per, atomKeys), value,
                   getNonUniformAtom(*per)));
      }
      if (!total.add(loopTotal))
        return fail(def);
      value = forOp.getInitArgs()[index];
      continue;
    }
    if (auto whileOp = dyn_cast<scf::WhileOp>(def)) {
      scf::ConditionOp condition = whileOp.getConditionOp();
      scf::YieldOp yield = whileOp.getYieldOp();
      if (!condition || !yield || index >= condition.getArgs().size())
        return fail(def);
      // The result is the state forwarded by the last (failing) condition:
      // before-arg j advanced by the before region, after each iteration's
      // before and after regions.
      Value beforeArg;
      std::optional<LinearExpr> last = traceAdvance(
          condition.getArgs()[index], whileOp, facts, beforeArg, sides, why);
      auto before = dyn_cast_or_null<BlockArgument>(beforeArg);
      if (!last || !before || before.getOwner() != whileOp.getBeforeBody())
        return fail(def);
      unsigned j = before.getArgNumber();
      Value afterArg;
      std::optional<LinearExpr> afterPart = traceAdvance(
          yield.getOperand(j), whileOp, facts, afterArg, sides, why);
      if (!afterPart || afterArg != whileOp.getAfterArguments()[index])
        return fail(def);
      LinearExpr per = *last;
      if (!per.add(*afterPart))
        return fail(def);
      LinearExpr loopTotal;
      if (per.isConstant()) {
        loopTotal = getTripCount(whileOp, facts);
        if (!loopTotal.scale(per.constant))
          return fail(def);
      } else {
        std::string sig = loopSignature(whileOp, 0);
        if (sig.empty())
          return fail(def);
        loopTotal = LinearExpr::ofAtom(
            intern("sum" + sig + "|" + serialise(per, atomKeys), value,
                   getNonUniformAtom(per)));
      }
      if (!total.add(loopTotal) || !total.add(*last))
        return fail(def);
      value = whileOp.getInits()[j];
      continue;
    }
    SmallVector<Value> yields;
    if (getBranchYields(def, index, yields)) {
      SmallVector<LinearExpr> branches;
      Value common;
      for (auto [region, yielded] : llvm::zip(def->getRegions(), yields)) {
        PathFacts inner(facts.begin(), facts.end());
        addBranchFacts(&region, inner);
        Value branchBase;
        std::optional<LinearExpr> branch =
            traceAdvance(yielded, def, inner, branchBase, sides, why);
        if (!branch)
          return fail(def);
        if (common && flow.getSlot(common) != flow.getSlot(branchBase))
          return fail(def);
        common = branchBase;
        branches.push_back(*branch);
      }
      LinearExpr merged = branches.front();
      for (const LinearExpr &branch : ArrayRef(branches).drop_front()) {
        if (branch == merged)
          continue;
        // if (x > 0) {... n(x) ...} else {... n(0) ...}: the else branch
        // is the then branch's count at x = 0.
        auto ifOp = dyn_cast<scf::IfOp>(def);
        if (!ifOp || branches.size() != 2)
          return fail(def);
        PathFacts thenFacts;
        addBranchFacts(&ifOp.getThenRegion(), thenFacts);
        PathFacts elseFacts;
        addBranchFacts(&ifOp.getElseRegion(), elseFacts);
        bool substituted = false;
        if (thenFacts.size() == 1 && elseFacts.empty()) {
          LinearExpr atZero = merged;
          atZero.terms.erase(thenFacts.front());
          substituted = atZero == branch;
        }
        if (!substituted)
          return fail(def);
      }
      if (!total.add(merged))
        return fail(def);
      value = common;
      continue;
    }
    if (auto call = dyn_cast<CallOpInterface>(def)) {
      std::optional<PipelineFlow::CallAdvance> advance =
          flow.getCallAdvance(call, index);
      FunctionOpInterface callee = flow.resolveCallee(call);
      if (!advance || !callee ||
          !total.add(LinearExpr::ofConstant(advance->slots)))
        return fail(def);
      Value argument = callee.getArgument(advance->argument);
      if (isState(argument))
        sides |= flow.getSides(callee, flow.getPipeline(argument));
      value = call.getArgOperands()[advance->argument];
      continue;
    }
    return fail(def);
  }
  return fail(scope);
}

std::string SlotArithmetic::print(const LinearExpr &expr) {
  std::string text;
  llvm::raw_string_ostream os(text);
  bool first = true;
  for (auto [atom, coef] : expr.terms) {
    if (!first)
      os << (coef < 0 ? " - " : " + ");
    else if (coef < 0)
      os << "-";
    first = false;
    if (coef != 1 && coef != -1)
      os << (coef < 0 ? -coef : coef) << " * ";
    StringRef key = atomKeys[atom];
    Value example = atomExamples[atom];
    if (key.starts_with("trip"))
      os << "trips(loop at ";
    else if (key.starts_with("sum"))
      os << "sum over the iterations of the loop at ";
    if (key.starts_with("trip") || key.starts_with("sum")) {
      printLocation(os, example.getLoc());
      if (key.starts_with("trip"))
        os << ")";
      continue;
    }
    OpPrintingFlags flags;
    example.printAsOperand(os, flags);
  }
  if (expr.constant != 0 || first) {
    if (!first)
      os << (expr.constant < 0 ? " - " : " + ")
         << (expr.constant < 0 ? -expr.constant : expr.constant);
    else
      os << expr.constant;
  }
  return text;
}
