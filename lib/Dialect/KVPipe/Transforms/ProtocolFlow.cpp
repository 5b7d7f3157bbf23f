//===- ProtocolFlow.cpp - linear use, flow of states ----------------------===//
//
// Part of ProtocolChecker (ProtocolChecker.h).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecker.h"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::detail;

//===----------------------------------------------------------------------===//
// 1. Linear use
//===----------------------------------------------------------------------===//

bool ProtocolChecker::runsAfter(Operation *earlier, Operation *later) {
  for (Operation *ancestor = later; ancestor;
       ancestor = ancestor->getParentOp()) {
    Region *region = ancestor->getParentRegion();
    if (!region)
      return false;
    Operation *other = region->findAncestorOpInRegion(*earlier);
    if (!other)
      continue;
    if (other == ancestor)
      return false; // different regions of one op, or `later` holds it
    if (other->getBlock() == ancestor->getBlock())
      return other->isBeforeInBlock(ancestor);
    return dominance.properlyDominates(other->getBlock(), ancestor->getBlock());
  }
  return false;
}

StringRef ProtocolChecker::advancedBy(Operation *op) {
  if (isa<LoopLikeOpInterface>(op))
    return "advanced by this loop";
  if (isa<CallOpInterface>(op))
    return "advanced by this call";
  return "advanced here";
}

void ProtocolChecker::checkLinearUse() {
  // The advancing uses of each slot, in walk order.
  llvm::MapVector<Value, SmallVector<OpOperand *>> advancing;
  for (Value state : flow.getStates())
    for (OpOperand &use : state.getUses())
      if (flow.advances(use))
        advancing[flow.getSlot(state)].push_back(&use);

  for (auto &[slot, uses] : advancing) {
    for (OpOperand *advance : uses) {
      Operation *advancer = advance->getOwner();
      Value state = advance->get();
      checkAdvanceInLoop(advancer, state);
      checkAdvanceInCfLoop(advancer, state);
      for (Value member : flow.getSlotStates(slot))
        for (OpOperand &use : member.getUses()) {
          Operation *user = use.getOwner();
          if (user == advancer || staleUsers.contains(user) ||
              !runsAfter(advancer, user))
            continue;
          staleUsers.insert(user);
          InFlightDiagnostic diag = error(user)
                                    << "state used after it was advanced"
                                    << where(member, getStageOf(user));
          diag.attachNote(advancer->getLoc()) << advancedBy(advancer);
        }
    }
  }
}

void ProtocolChecker::checkAdvanceInLoop(Operation *advancer, Value state) {
  Operation *definedIn = state.getParentRegion()->getParentOp();
  for (Operation *parent = advancer->getParentOp();
       parent && !parent->isAncestor(definedIn);
       parent = parent->getParentOp()) {
    if (isa<ForEachTileOp>(parent)) {
      InFlightDiagnostic diag =
          error(advancer)
          << "advances a state defined outside its 'kvpipe.for_each_tile', "
             "once per tile: carry it as an iter_arg of the tile loop"
          << where(state, getStageOf(advancer));
      diag.attachNote(parent->getLoc()) << "the tile loop";
      return;
    }
    if (!isa<LoopLikeOpInterface>(parent))
      continue;
    InFlightDiagnostic diag = error(advancer)
                              << "advances a state defined outside its loop, "
                                 "once per iteration: carry it as an iter_arg"
                              << where(state, getStageOf(advancer));
    diag.attachNote(parent->getLoc()) << "the loop";
    return;
  }
}

void ProtocolChecker::checkAdvanceInCfLoop(Operation *advancer, Value state) {
  for (Operation *at = advancer; at; at = at->getParentOp()) {
    Region *region = at->getParentRegion();
    if (!region)
      return;
    Block *block = at->getBlock();
    if (!region->hasOneBlock()) {
      // The block of the state's definition in this region, if any.
      Block *defining =
          region->findAncestorBlockInRegion(*state.getParentBlock());
      SmallVector<Block *> worklist(block->getSuccessors());
      DenseSet<Block *> seen;
      bool cycle = false;
      while (!worklist.empty() && !cycle) {
        Block *next = worklist.pop_back_val();
        if (next == defining || !seen.insert(next).second)
          continue;
        if (next == block) {
          cycle = true;
          break;
        }
        llvm::append_range(worklist, next->getSuccessors());
      }
      if (cycle) {
        InFlightDiagnostic diag =
            error(advancer)
            << "advances a state defined outside its loop, once per "
               "iteration: a path of branches leads back to this block "
               "without redefining the state; pass it as a block argument"
            << where(state, getStageOf(advancer));
        diag.attachNote(block->getTerminator()->getLoc())
            << "the branch that starts the cycle";
        return;
      }
    }
    // Above the region that defines the state, a repetition redefines it.
    if (region->isAncestor(state.getParentRegion()))
      return;
  }
}

//===----------------------------------------------------------------------===//
// 7. Flow: states through ops the analysis models, and no aliases
//===----------------------------------------------------------------------===//

bool ProtocolChecker::returnsState(Operation *op) {
  auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(op);
  return protocolOp && protocolOp.getResultState();
}

bool ProtocolChecker::producesKnownState(Operation *op, unsigned result) {
  if (returnsState(op) || isa<CreateOp, scf::ForOp, scf::WhileOp, scf::IfOp,
                              scf::IndexSwitchOp, scf::ExecuteRegionOp>(op))
    return true;
  if (auto call = dyn_cast<CallOpInterface>(op))
    return flow.getCallAdvance(call, result).has_value();
  return false;
}

bool ProtocolChecker::consumesKnownState(Operation *op) {
  if (op->getDialect() && isa<KVPipeDialect>(op->getDialect()))
    return true;
  if (isa<scf::ForOp, scf::WhileOp, scf::YieldOp, scf::ConditionOp>(op) ||
      op->hasTrait<OpTrait::ReturnLike>() || isa<BranchOpInterface>(op) ||
      isFunctionReturn(op))
    return true;
  if (auto call = dyn_cast<CallOpInterface>(op))
    return static_cast<bool>(flow.resolveCallee(call));
  return false;
}

void ProtocolChecker::checkFlow() {
  checkBarrierUses();
  DenseSet<Operation *> &reported = unfollowed;
  // States merged from different pipelines by a branch: which pipeline a
  // wait, release or step on them works on depends on the path. Reading
  // only the ring index of either is harmless.
  for (Value state : flow.getStates()) {
    if (!flow.isMixed(state) ||
        llvm::all_of(state.getUsers(),
                     [](Operation *user) { return isa<IndexOp>(user); }))
      continue;
    Operation *at = state.getDefiningOp();
    if (!at) {
      Block *block = cast<BlockArgument>(state).getOwner();
      at = block->hasNoPredecessors() ? block->getParentOp()
                                      : (*block->pred_begin())->getTerminator();
    }
    if (!reported.insert(at).second)
      continue;
    unproven(at) << "which pipeline this state belongs to: "
                 << (isa<BlockArgument>(state)
                         ? "the branches to its block pass"
                         : "its branches yield")
                 << " states of different pipelines, so the slots waited "
                    "for, released or advanced through it are not counted "
                    "for either"
                 << where(state);
  }
  for (Value state : flow.getStates()) {
    if (auto result = dyn_cast<OpResult>(state)) {
      Operation *def = result.getOwner();
      if (!producesKnownState(def, result.getResultNumber()) &&
          reported.insert(def).second) {
        unproven(def)
            << "which pipeline state this op produces: the checker does not "
               "follow states through '"
            << def->getName()
            << "', so nothing about the states it makes is proven"
            << where(state);
      }
    } else {
      auto argument = cast<BlockArgument>(state);
      Operation *owner = argument.getOwner()->getParentOp();
      bool known =
          owner && (isa<scf::ForOp, scf::WhileOp, FunctionOpInterface>(owner) ||
                    !argument.getOwner()->isEntryBlock());
      if (!known && reported.insert(owner).second)
        unproven(owner) << "what the pipeline state of block argument #"
                        << argument.getArgNumber() << " of '"
                        << owner->getName() << "' is" << where(state);
    }
  }
  for (Value state : flow.getStates()) {
    for (OpOperand &use : state.getUses()) {
      Operation *user = use.getOwner();
      if (!consumesKnownState(user)) {
        if (reported.insert(user).second)
          unproven(user)
              << "what happens to the pipeline state passed to '"
              << user->getName()
              << "': the checker does not follow states into it (an "
                 "indirect or external call, a cast, a select), so the "
                 "slots it waits for, releases or advances are not counted"
              << where(state);
        continue;
      }
      // The same state twice to one successor of a branch.
      if (auto branch = dyn_cast<BranchOpInterface>(user)) {
        for (unsigned i = 0, e = user->getNumSuccessors(); i < e; ++i) {
          OperandRange forwarded =
              branch.getSuccessorOperands(i).getForwardedOperands();
          if (forwarded.empty())
            continue;
          unsigned begin = forwarded.getBeginOperandIndex();
          unsigned number = use.getOperandNumber();
          if (number < begin || number >= begin + forwarded.size())
            continue;
          for (unsigned j = begin; j < number; ++j)
            if (user->getOperand(j) == state) {
              error(user) << "passes the same state as operands #" << j
                          << " and #" << number
                          << " to one block: each "
                             "copy walks the ring on its own, so the slots "
                             "are waited for or filled twice"
                          << where(state);
              break;
            }
        }
      }
      // The same state twice in one loop, call or yield: two copies of one
      // slot, each advanced on its own.
      if (isa<scf::ForOp, scf::WhileOp, scf::YieldOp, scf::ConditionOp,
              CallOpInterface>(user)) {
        for (OpOperand &other : user->getOpOperands())
          if (&other != &use && other.get() == state &&
              other.getOperandNumber() < use.getOperandNumber()) {
            error(user) << "passes the same state as operands #"
                        << other.getOperandNumber() << " and #"
                        << use.getOperandNumber()
                        << ": each copy walks the ring on its own, so the "
                           "slots are waited for or filled twice"
                        << where(state);
            break;
          }
      }
    }
  }

  // Loops carry their own states.
  for (Operation *loop : flow.getLoops()) {
    auto forOp = dyn_cast<scf::ForOp>(loop);
    SmallVector<Value> carried = PipelineFlow::getCarriedStates(loop);
    if (forOp) {
      for (auto [position, arg] : llvm::enumerate(carried)) {
        if (!arg)
          continue;
        Value yielded = forOp.getYieldedValues()[position];
        Value base;
        PipelineSide sides = PipelineSide::none;
        Operation *why = nullptr;
        std::optional<LinearExpr> advance =
            arithmetic.traceAdvance(yielded, forOp, {}, base, sides, why);
        if (!advance || !base || base == arg)
          continue;
        auto other = dyn_cast<BlockArgument>(base);
        if (other && other.getOwner() == forOp.getBody()) {
          error(forOp.getBody()->getTerminator())
              << "yields at position #" << position
              << " the state carried at position #" << other.getArgNumber() - 1
              << ": the two states trade places every iteration" << where(arg);
        } else if (!forOp->isAncestor(base.getParentRegion()->getParentOp())) {
          error(forOp.getBody()->getTerminator())
              << "yields at position #" << position
              << " a state defined outside the loop instead of its "
                 "iter_arg advanced: every iteration restarts from the "
                 "same slot"
              << where(arg);
        }
      }
    }
    if (auto whileOp = dyn_cast<scf::WhileOp>(loop))
      checkWhileCarries(whileOp);
    // The body works on the iter_arg, not on the state it came from.
    DenseSet<Value> pipelines;
    for (Value arg : carried)
      if (arg)
        pipelines.insert(flow.getPipeline(arg));
    loop->walk([&](Operation *inner) {
      // The loop's own yield is the yield rule's.
      if (inner == loop || (inner->getParentOp() == loop &&
                            inner->hasTrait<OpTrait::IsTerminator>()))
        return;
      for (Value operand : inner->getOperands()) {
        if (!isState(operand) || !pipelines.contains(flow.getPipeline(operand)))
          continue;
        Region *defined = operand.getParentRegion();
        if (loop->isAncestor(defined->getParentOp()))
          continue;
        InFlightDiagnostic diag =
            error(inner)
            << "uses a state defined outside the loop that carries this "
               "pipeline: the loop never advances it, so every iteration "
               "sees the same slot; use the loop's iter_arg"
            << where(operand, getStageOf(inner));
        diag.attachNote(loop->getLoc()) << "the loop";
        staleUsers.insert(inner);
        break;
      }
    });
  }
}

void ProtocolChecker::checkBarrierUses() {
  // Only the kvpipe ops move a pipeline's barriers (docs: "Ops between
  // protocol ops do not synchronise the pipeline"): a barrier handle
  // (`kvpipe.producer_mbar`, `kvpipe.consumer_mbar`, a helper's argument or
  // result) that reaches code the checker does not model may be arrived on,
  // waited on or re-initialised there, outside every count it proves.
  SmallVector<Value> barriers;
  root->walk([&](Operation *op) {
    for (Value result : op->getResults())
      if (isa<MBarrierType>(result.getType()))
        barriers.push_back(result);
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument argument : block.getArguments())
          if (isa<MBarrierType>(argument.getType()))
            barriers.push_back(argument);
  });
  DenseSet<Operation *> reported;
  for (Value barrier : barriers) {
    for (OpOperand &use : barrier.getUses()) {
      Operation *user = use.getOwner();
      // The kvpipe ops that take a barrier (the TMA loads that complete on
      // it) are what the transaction rule counts; a helper in the module is
      // followed through its argument, whose uses are checked here too.
      if (isa_and_nonnull<KVPipeDialect>(user->getDialect()))
        continue;
      if (auto call = dyn_cast<CallOpInterface>(user)) {
        FunctionOpInterface callee = flow.resolveCallee(call);
        if (callee && !callee.isExternal() &&
            llvm::is_contained(call.getArgOperands(), barrier))
          continue;
      }
      // Ops that only pass the barrier on, into a value of the barrier type
      // that is checked in turn (a select's result, a loop's or a branch's
      // block argument, a region's result): which barrier it is then is the
      // transaction rule's question, not what is done with it.
      if ((isa<arith::SelectOp, RegionBranchTerminatorOpInterface,
               BranchOpInterface, RegionBranchOpInterface>(user) &&
           !isFunctionReturn(user)))
        continue;
      if (!reported.insert(user).second)
        continue;
      InFlightDiagnostic diag =
          unproven(user)
          << "what happens to the pipeline barrier passed to '"
          << user->getName()
          << "': the checker does not follow barriers into it (an external "
             "or indirect call, a cast, a branch, an op it does not model), "
             "which may arrive on it or wait on it outside the pipeline's "
             "protocol";
      if (auto accessor = barrier.getDefiningOp<PipelineProtocolOpInterface>())
        diag << where(accessor.getPipeline(), accessor.getSubStage());
      if (Operation *def = barrier.getDefiningOp())
        diag.attachNote(def->getLoc()) << "the barrier";
    }
  }
}

bool ProtocolChecker::isState(Value value) {
  return value && isa<PipelineType>(value.getType());
}

void ProtocolChecker::checkWhileCarries(scf::WhileOp whileOp) {
  scf::ConditionOp condition = whileOp.getConditionOp();
  scf::YieldOp yield = whileOp.getYieldOp();
  if (!condition || !yield)
    return;
  auto trace = [&](Value value) -> Value {
    Value base;
    PipelineSide sides = PipelineSide::none;
    Operation *why = nullptr;
    std::optional<LinearExpr> advance =
        arithmetic.traceAdvance(value, whileOp, {}, base, sides, why);
    return advance ? base : Value();
  };
  Block *before = whileOp.getBeforeBody(), *after = whileOp.getAfterBody();
  for (auto [position, yielded] : llvm::enumerate(yield.getOperands())) {
    if (!isState(yielded) || position >= before->getNumArguments())
      continue;
    Value base = trace(yielded);
    if (!base)
      continue;
    auto afterArg = dyn_cast<BlockArgument>(base);
    if (!afterArg || afterArg.getOwner() != after) {
      if (!whileOp->isAncestor(base.getParentRegion()->getParentOp()))
        error(yield) << "yields at position #" << position
                     << " a state defined outside the loop instead of its "
                        "argument advanced: every iteration restarts from "
                        "the same slot"
                     << where(yielded);
      continue;
    }
    if (afterArg.getArgNumber() >= condition.getArgs().size())
      continue;
    Value forwarded = condition.getArgs()[afterArg.getArgNumber()];
    Value origin = trace(forwarded);
    auto beforeArg = dyn_cast_or_null<BlockArgument>(origin);
    if (!origin)
      continue;
    if (beforeArg && beforeArg.getOwner() == before) {
      if (beforeArg.getArgNumber() != position)
        error(yield) << "yields at position #" << position
                     << " the state that the condition forwarded from "
                        "position #"
                     << beforeArg.getArgNumber()
                     << ": the states trade places every iteration"
                     << where(yielded);
      continue;
    }
    if (!whileOp->isAncestor(origin.getParentRegion()->getParentOp()))
      error(condition) << "forwards at position #" << afterArg.getArgNumber()
                       << " a state defined outside the loop instead of "
                          "its argument: every iteration restarts from the "
                          "same slot"
                       << where(forwarded);
  }
}
