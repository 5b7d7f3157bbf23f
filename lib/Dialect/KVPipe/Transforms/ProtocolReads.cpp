//===- ProtocolReads.cpp - wgmma reads ------------------------------------===//
//
// Part of ProtocolChecker (ProtocolChecker.h).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecker.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::detail;

//===----------------------------------------------------------------------===//
// 9. Reads: in-flight wgmma groups along every path, and reads before the
// data landed
//===----------------------------------------------------------------------===//

Value ProtocolChecker::mapState(Value state) {
  for (int level = callStack.size() - 1; level >= 0; --level) {
    CallOpInterface call = callStack[level];
    FunctionOpInterface callee = flow.resolveCallee(call);
    bool mapped = false;
    for (auto [index, argument] : llvm::enumerate(callee.getArguments()))
      if (isState(argument) && flow.getSlot(argument) == flow.getSlot(state)) {
        state = call.getArgOperands()[index];
        mapped = true;
        break;
      }
    if (!mapped)
      break;
  }
  return state;
}

std::string ProtocolChecker::tileKey(Value memref) {
  std::string key;
  Value current = memref;
  for (unsigned guard = 0; current && guard < 64; ++guard) {
    Operation *def = current.getDefiningOp();
    // An offset or size as a linear expression over structural atoms (the
    // producer's and the consumer's computation of one value are one atom):
    // two tiles' keys are equal only where their views are, so that a read
    // whose offsets or sizes differ from a load's (half 1 against half 0, or
    // both halves) is never taken for that load's sub-stage.
    auto valueKey = [&](OpFoldResult value) -> std::string {
      if (std::optional<int64_t> c = getConstantIntValue(value))
        return std::to_string(*c);
      Value v = cast<Value>(value);
      Operation *unknown = nullptr;
      if (!getSlotsOf(v, 0, unknown).empty())
        return "slot";
      LinearExpr linear = arithmetic.getLinear(v);
      std::string text = std::to_string(linear.constant);
      for (auto [atom, coefficient] : linear.terms)
        text += "+" + std::to_string(coefficient) + "*a" + std::to_string(atom);
      return text;
    };
    if (auto subview = dyn_cast_or_null<memref::SubViewOp>(def)) {
      key += "sv[";
      for (OpFoldResult offset : subview.getMixedOffsets())
        key += valueKey(offset) + ",";
      key += "][";
      for (OpFoldResult size : subview.getMixedSizes())
        key += valueKey(size) + ",";
      key += "]";
      current = subview.getSource();
    } else if (def &&
               isa<memref::ExpandShapeOp, memref::CollapseShapeOp,
                   memref::CastOp, memref::ReinterpretCastOp, memref::ViewOp>(
                   def)) {
      key += def->getName().getStringRef().str() + ";";
      current = def->getOperand(0);
    } else {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << current.getAsOpaquePointer();
      return key + "@" + text;
    }
  }
  return key;
}

void ProtocolChecker::collectStages() {
  if (stagesCollected)
    return;
  stagesCollected = true;
  root->walk([&](AsyncSlotCopyOpInterface load) {
    auto mbar = load.getMbarrier().getDefiningOp<ProducerMBarOp>();
    if (!mbar || mbar.getPipelineType().getQkStages() == 1)
      return;
    // A tile two sub-stages load into (checkStageTiles' error) is of
    // neither: a read of it needs every sub-stage waited for.
    auto [it, inserted] =
        stageOfTile.try_emplace(tileKey(load.getDest()), mbar.getStage());
    if (!inserted && it->second != mbar.getStage())
      it->second = -1;
  });
}

void ProtocolChecker::checkStageTiles() {
  // The loads of each pipeline of several sub-stages, in walk order.
  llvm::MapVector<Value, SmallVector<std::pair<AsyncSlotCopyOpInterface,
                                               int64_t>>>
      loadsOf;
  root->walk([&](AsyncSlotCopyOpInterface load) {
    auto mbar = load.getMbarrier().getDefiningOp<ProducerMBarOp>();
    if (!mbar || mbar.getPipelineType().getQkStages() == 1 ||
        flow.isMixed(mbar.getPipeline()))
      return;
    loadsOf[flow.getPipeline(mbar.getPipeline())].push_back(
        {load, mbar.getStage()});
  });
  for (auto &[pipeline, loads] : loadsOf) {
    for (size_t j = 1; j < loads.size(); ++j) {
      auto [later, laterStage] = loads[j];
      for (size_t i = 0; i < j; ++i) {
        auto [earlier, earlierStage] = loads[i];
        if (earlierStage == laterStage)
          continue;
        // A read of the tile is matched to one sub-stage by its view chain
        // (getStageRead): a tile both sub-stages load into is read once
        // one of them completed while the other's TMA may still write it.
        if (tileKey(earlier.getDest()) == tileKey(later.getDest())) {
          InFlightDiagnostic diag =
              error(later)
              << "loads sub-stage " << laterStage
              << " into the tile that a load of sub-stage " << earlierStage
              << " also fills: a consumer that waited for one sub-stage "
                 "reads the tile while the other's TMA may still be writing "
                 "it (each sub-stage loads its own part of the slot)"
              << where(pipeline, laterStage);
          diag.attachNote(earlier->getLoc())
              << "the load of sub-stage " << earlierStage;
          break;
        }
        // Other tiles: their bytes must be shown apart, else a read of one
        // after its sub-stage's wait may overlap the other's load.
        const void *bufferA = nullptr, *bufferB = nullptr;
        SmallVector<Footprint> a =
            getFootprints(earlier.getDest(), bufferA, false);
        SmallVector<Footprint> b =
            getFootprints(later.getDest(), bufferB, false);
        if (bufferA && bufferB && bufferA != bufferB)
          continue;
        if (bufferA && !a.empty() && !b.empty() &&
            isApart(a.front(), b.front(), PathFacts()))
          continue;
        InFlightDiagnostic diag =
            unproven(later)
            << "that the tiles the loads of sub-stages " << earlierStage
            << " and " << laterStage
            << " fill are apart: their bytes may overlap, and a consumer "
               "that waited for one sub-stage may read the other's tile "
               "while its TMA still writes it"
            << where(pipeline, laterStage);
        diag.attachNote(earlier->getLoc())
            << "the load of sub-stage " << earlierStage;
        break;
      }
    }
  }
}

/// Appends the slots of `more` that `slots` does not hold yet.
static void addSlots(SmallVectorImpl<Value> &slots, ArrayRef<Value> more) {
  for (Value slot : more)
    if (!llvm::is_contained(slots, slot))
      slots.push_back(slot);
}

SmallVector<Value> ProtocolChecker::getSlotsOf(Value value, unsigned depth,
                                               Operation *&unknown, int start) {
  SmallVector<Value> slots;
  if (depth > 8) {
    unknown = value.getDefiningOp() ? value.getDefiningOp()
                                    : value.getParentBlock()->getParentOp();
    return slots;
  }
  // (value, call-stack level it lives at)
  SmallVector<std::pair<Value, int>> worklist = {
      {value, start < 0 ? int(callStack.size()) : start}};
  DenseSet<std::pair<Value, int>> visited;
  while (!worklist.empty() && visited.size() < 512) {
    auto [v, level] = worklist.pop_back_val();
    if (!visited.insert({v, level}).second)
      continue;
    if (auto argument = dyn_cast<BlockArgument>(v)) {
      Operation *owner = argument.getOwner()->getParentOp();
      // A simulated callee's argument: the caller's operand.
      if (level > 0 &&
          owner == flow.resolveCallee(callStack[level - 1]).getOperation() &&
          argument.getOwner()->isEntryBlock()) {
        worklist.push_back(
            {callStack[level - 1].getArgOperands()[argument.getArgNumber()],
             level - 1});
        continue;
      }
      // A function's own argument: no slot index of its pipelines here.
      if (isa_and_nonnull<FunctionOpInterface>(owner) &&
          argument.getOwner()->isEntryBlock())
        continue;
      // A loop's induction variable runs from its bounds; a carried value
      // is its initial value or one a previous iteration yielded; a block
      // argument is what some predecessor forwards.
      if (auto forOp = dyn_cast_or_null<scf::ForOp>(owner)) {
        if (argument == forOp.getInductionVar()) {
          for (Value bound :
               {forOp.getLowerBound(), forOp.getUpperBound(), forOp.getStep()})
            worklist.push_back({bound, level});
        } else {
          unsigned position = argument.getArgNumber() - 1;
          worklist.push_back({forOp.getInitArgs()[position], level});
          worklist.push_back({forOp.getYieldedValues()[position], level});
        }
        continue;
      }
      if (auto whileOp = dyn_cast_or_null<scf::WhileOp>(owner)) {
        unsigned position = argument.getArgNumber();
        if (argument.getOwner() == whileOp.getBeforeBody()) {
          worklist.push_back({whileOp.getInits()[position], level});
          if (scf::YieldOp yield = whileOp.getYieldOp())
            worklist.push_back({yield.getOperand(position), level});
          else
            unknown = owner;
        } else if (scf::ConditionOp condition = whileOp.getConditionOp()) {
          worklist.push_back({condition.getArgs()[position], level});
        } else {
          unknown = owner;
        }
        continue;
      }
      if (!argument.getOwner()->isEntryBlock()) {
        Block *block = argument.getOwner();
        for (auto it = block->pred_begin(); it != block->pred_end(); ++it) {
          auto branch = dyn_cast<BranchOpInterface>((*it)->getTerminator());
          if (!branch) {
            unknown = (*it)->getTerminator();
            continue;
          }
          for (unsigned i = 0, e = branch->getNumSuccessors(); i < e; ++i) {
            if (branch->getSuccessor(i) != block)
              continue;
            SuccessorOperands operands = branch.getSuccessorOperands(i);
            Value forwarded = operands[argument.getArgNumber()];
            if (forwarded)
              worklist.push_back({forwarded, level});
            else
              unknown = branch;
          }
        }
        continue;
      }
      unknown = owner;
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (auto index = dyn_cast<IndexOp>(def)) {
      if (flow.isMixed(index.getPipeline())) {
        unknown = def; // the index of one of several pipelines
        continue;
      }
      // Map the state at the level the index op lives at.
      SmallVector<CallOpInterface> saved(callStack);
      callStack.resize(level);
      Value slot = flow.getSlot(mapState(index.getPipeline()));
      callStack = std::move(saved);
      addSlots(slots, slot);
      continue;
    }
    unsigned result = cast<OpResult>(v).getResultNumber();
    if (isa<scf::IfOp, scf::IndexSwitchOp>(def)) {
      // Any branch's value: the union of what they yield.
      for (Region &region : def->getRegions()) {
        auto yield =
            region.hasOneBlock()
                ? dyn_cast<scf::YieldOp>(region.front().getTerminator())
                : nullptr;
        if (!yield || result >= yield.getNumOperands()) {
          unknown = def;
          break;
        }
        worklist.push_back({yield.getOperand(result), level});
      }
      continue;
    }
    if (auto call = dyn_cast<CallOpInterface>(def)) {
      FunctionOpInterface callee = flow.resolveCallee(call);
      if (!callee || llvm::is_contained(callStack, call) ||
          callStack.size() > 4) {
        unknown = def;
        continue;
      }
      // What the helper returns, in its terms.
      SmallVector<CallOpInterface> saved(callStack);
      callStack.resize(level);
      callStack.push_back(call);
      for (Block &block : callee.getFunctionBody())
        if (block.mightHaveTerminator() &&
            block.getTerminator()->hasTrait<OpTrait::ReturnLike>() &&
            result < block.getTerminator()->getNumOperands())
          addSlots(slots,
                   getSlotsOf(block.getTerminator()->getOperand(result),
                              depth + 1, unknown));
      callStack = std::move(saved);
      continue;
    }
    if (auto forOp = dyn_cast<scf::ForOp>(def)) {
      worklist.push_back({forOp.getInitArgs()[result], level});
      worklist.push_back({forOp.getYieldedValues()[result], level});
      continue;
    }
    if (auto whileOp = dyn_cast<scf::WhileOp>(def)) {
      if (scf::ConditionOp condition = whileOp.getConditionOp())
        worklist.push_back({condition.getArgs()[result], level});
      else
        unknown = def;
      continue;
    }
    if (isa<scf::ExecuteRegionOp>(def)) {
      for (Block &block : def->getRegion(0)) {
        auto yield = dyn_cast<scf::YieldOp>(block.getTerminator());
        if (yield && result < yield.getNumOperands())
          worklist.push_back({yield.getOperand(result), level});
      }
      continue;
    }
    if (def->getNumRegions() != 0) {
      // Another op with regions: what it returns is not followed.
      unknown = def;
      continue;
    }
    if (isMemoryEffectFree(def))
      for (Value operand : def->getOperands())
        worklist.push_back({operand, level});
  }
  return slots;
}

Value ProtocolChecker::stepView(Operation *def,
                               SmallVectorImpl<Value> &offsets,
                               SmallVectorImpl<Value> &linearOffsets) {
  if (auto subview = dyn_cast_or_null<memref::SubViewOp>(def)) {
    llvm::append_range(offsets, subview.getOffsets());
    return subview.getSource();
  }
  if (auto view = dyn_cast_or_null<memref::ViewOp>(def)) {
    linearOffsets.push_back(view.getByteShift());
    return view.getSource();
  }
  if (auto reinterpret = dyn_cast_or_null<memref::ReinterpretCastOp>(def)) {
    llvm::append_range(linearOffsets, reinterpret.getOffsets());
    return reinterpret.getSource();
  }
  if (isa_and_nonnull<memref::CastOp, memref::ExpandShapeOp,
                      memref::CollapseShapeOp, memref::TransposeOp,
                      memref::MemorySpaceCastOp>(def))
    return def->getOperand(0);
  return Value();
}

ProtocolChecker::ViewOffsets ProtocolChecker::getViewOffsets(Value memref) {
  ViewOffsets chain;
  Value current = memref;
  for (unsigned guard = 0; current && guard < 64; ++guard) {
    current = stepView(current.getDefiningOp(), chain.offsets,
                       chain.linearOffsets);
    chain.viewed |= bool(current);
  }
  return chain;
}

SmallVector<Value> ProtocolChecker::getSlotsRead(Value memref,
                                                 Operation *&unknown,
                                                 unsigned depth) {
  SmallVector<Value> slots;
  Value current = memref;
  int level = callStack.size();
  for (unsigned guard = 0; current && guard < 64 && depth < 8; ++guard) {
    if (auto argument = dyn_cast<BlockArgument>(current)) {
      Operation *owner = argument.getOwner()->getParentOp();
      // A callee's argument: continue in the caller being simulated.
      if (level > 0 &&
          owner == flow.resolveCallee(callStack[level - 1]).getOperation()) {
        current =
            callStack[level - 1].getArgOperands()[argument.getArgNumber()];
        --level;
        continue;
      }
      // A function's own argument or a workgroup attribution: a buffer
      // that no slot index addresses here. (The argument of another block
      // is what its predecessors pass: not followed.)
      if (isa_and_nonnull<FunctionOpInterface>(owner) &&
          argument.getOwner()->isEntryBlock())
        break;
      unknown = owner;
      break;
    }
    Operation *def = current.getDefiningOp();
    SmallVector<Value> offsets;
    if (Value source = stepView(def, offsets, offsets)) {
      for (Value offset : offsets)
        addSlots(slots, getSlotsOf(offset, depth, unknown, level));
      current = source;
    } else if (auto call = dyn_cast<CallOpInterface>(def)) {
      // A helper that returns a view: what it returns, in its terms.
      FunctionOpInterface callee = flow.resolveCallee(call);
      if (!callee || llvm::is_contained(callStack, call) ||
          callStack.size() > 4) {
        unknown = def;
        break;
      }
      unsigned result = cast<OpResult>(current).getResultNumber();
      callStack.push_back(call);
      for (Block &block : callee.getFunctionBody())
        if (block.mightHaveTerminator() &&
            block.getTerminator()->hasTrait<OpTrait::ReturnLike>() &&
            result < block.getTerminator()->getNumOperands())
          addSlots(slots,
                   getSlotsRead(block.getTerminator()->getOperand(result),
                                unknown, depth + 1));
      callStack.pop_back();
      break;
    } else if (def &&
               (isa<memref::AllocOp, memref::AllocaOp, memref::GetGlobalOp,
                    gpu::DynamicSharedMemoryOp>(def))) {
      break;
    } else {
      unknown = def;
      break;
    }
  }
  return slots;
}

int64_t ProtocolChecker::getStageRead(Value memref, Value slot) {
  auto type = cast<PipelineType>(slot.getType());
  if (type.getQkStages() == 1)
    return 0;
  collectStages();
  auto it = stageOfTile.find(tileKey(memref));
  return it == stageOfTile.end() ? -1 : it->second; // -1: several
}

bool ProtocolChecker::isWaited(Operation *op, Value slot, int64_t stage) {
  auto type = cast<PipelineType>(slot.getType());
  SmallVector<bool> waited(type.getQkStages(), false);
  // In the innermost function first, then at each call being simulated.
  SmallVector<Operation *> anchors = {op};
  for (int level = callStack.size() - 1; level >= 0; --level)
    anchors.push_back(callStack[level]);
  for (Operation *anchor : anchors) {
    auto function = anchor->getParentOfType<FunctionOpInterface>();
    Operation *scope = function ? function.getOperation() : root;
    scope->walk([&](ConsumerWaitOp wait) {
      if (flow.getSlot(mapState(wait.getPipeline())) != slot ||
          !dominance.properlyDominates(wait.getOperation(), anchor))
        return;
      if (wait.getStage() < static_cast<int64_t>(waited.size()))
        waited[wait.getStage()] = true;
    });
  }
  if (stage >= 0)
    return stage < static_cast<int64_t>(waited.size()) && waited[stage];
  return llvm::all_of(waited, [](bool w) { return w; });
}

bool ProtocolChecker::hasCallers(Operation *op) {
  auto function = op->getParentOfType<FunctionOpInterface>();
  if (!function)
    return false;
  if (!callSites)
    callSites.emplace(root);
  return !callSites->getCalls(function).empty();
}

bool ProtocolChecker::isFromCaller(Value slot) {
  for (Value state : flow.getSlotStates(slot))
    if (auto argument = dyn_cast<BlockArgument>(state))
      if (argument.getOwner()->isEntryBlock() &&
          isa_and_nonnull<FunctionOpInterface>(
              argument.getOwner()->getParentOp()))
        return true;
  return false;
}

const ProtocolChecker::Group *ProtocolChecker::issue(WarpgroupMmaOp mma) {
  Group group{mma, {}, {}, nullptr};
  for (Value operand : {Value(mma.getA()), Value(mma.getB())}) {
    if (!isa<MemRefType>(operand.getType()))
      continue;
    Operation *unknown = nullptr;
    for (Value slot : getSlotsRead(operand, unknown)) {
      int64_t stage = getStageRead(operand, slot);
      bool guess = false;
      if (stage < 0) {
        // No producer load of this tile: the sub-stage last waited for
        // before the wgmma, and releases of the others are unproven.
        stage = getLastWaitedStage(mma, slot);
        guess = stage >= 0;
      }
      group.reads.push_back({slot, stage});
      group.guessed.push_back(guess);
      checkReadAfterRelease(mma, slot, stage);
      bool fromCaller = callStack.empty() && isFromCaller(slot);
      // A guessed sub-stage is not known to be the one the wgmma reads:
      // every sub-stage must have been waited for (docs, rule 7).
      int64_t waitedStage = guess ? -1 : stage;
      if (isWaited(mma, slot, waitedStage) || (fromCaller && hasCallers(mma)) ||
          !reportedReads.insert({mma, slot}).second)
        continue;
      Operation *at = callStack.empty() ? mma.getOperation()
                                        : callStack.front().getOperation();
      auto type = cast<PipelineType>(slot.getType());
      if (waitedStage < 0 && type.getQkStages() > 1 &&
          isWaited(mma, slot, 0)) {
        unproven(at) << "which sub-stage of the slot this wgmma reads, and "
                        "not every sub-stage was waited for before it"
                     << where(slot);
        continue;
      }
      // The state comes from a caller outside the module, whose waits the
      // checker does not see.
      if (fromCaller) {
        unproven(at) << "that the slot this wgmma reads was waited for: its "
                        "pipeline state is an argument of a function "
                        "nothing in the module calls, and no consumer_wait "
                        "of the slot in the function runs before it"
                     << where(slot, stage >= 0 && type.getQkStages() > 1
                                        ? std::optional<int64_t>(stage)
                                        : std::nullopt);
        continue;
      }
      InFlightDiagnostic diag =
          error(at) << "reads a slot before its data landed: no "
                       "consumer_wait of the slot"
                    << (stage >= 0 && type.getQkStages() > 1
                            ? " at sub-stage " + std::to_string(stage)
                            : std::string())
                    << " runs before it on every path"
                    << where(slot, stage >= 0 && type.getQkStages() > 1
                                       ? std::optional<int64_t>(stage)
                                       : std::nullopt);
      if (at != mma.getOperation())
        diag.attachNote(mma.getLoc()) << "the wgmma, in the callee";
    }
    if (unknown)
      group.unknownRead = unknown;
  }
  groups.push_back(std::move(group));
  return &groups.back();
}

void ProtocolChecker::checkReadAfterRelease(WarpgroupMmaOp mma, Value slot,
                                            int64_t stage) {
  SmallVector<Operation *> anchors = {mma};
  for (int level = callStack.size() - 1; level >= 0; --level)
    anchors.push_back(callStack[level]);
  Operation *at =
      callStack.empty() ? mma.getOperation() : callStack.front().getOperation();
  if (reportedAfterRelease.contains({at, slot}))
    return;
  auto type = cast<PipelineType>(slot.getType());
  for (Operation *anchor : anchors) {
    auto function = anchor->getParentOfType<FunctionOpInterface>();
    Operation *scope = function ? function.getOperation() : root;
    ConsumerReleaseOp found;
    scope->walk([&](ConsumerReleaseOp rel) {
      if (found || flow.getSlot(mapState(rel.getPipeline())) != slot ||
          !dominance.properlyDominates(rel.getOperation(), anchor))
        return;
      if (stage >= 0 && type.getQkStages() > 1 && rel.getStage() != stage)
        return;
      found = rel;
    });
    if (!found)
      continue;
    reportedAfterRelease.insert({at, slot});
    if (stage < 0 && type.getQkStages() > 1) {
      InFlightDiagnostic diag =
          unproven(at) << "that this wgmma does not read a sub-stage of the "
                          "slot after its consumer_release: it reads the slot "
                          "and the checker cannot tell which sub-stage"
                       << where(found.getPipeline(), found.getStage());
      diag.attachNote(found.getLoc()) << "the release";
      return;
    }
    InFlightDiagnostic diag =
        error(at) << "reads a slot after its consumer_release: the producer "
                     "may already be overwriting it (issue the wgmma before "
                     "the release, and retire it before releasing)"
                  << where(found.getPipeline(), found.getStage());
    diag.attachNote(found.getLoc()) << "the release";
    if (at != mma.getOperation())
      diag.attachNote(mma.getLoc()) << "the wgmma, in the callee";
    return;
  }
}

void ProtocolChecker::release(ConsumerReleaseOp op, ArrayRef<Queue> states) {
  Value slot = flow.getSlot(mapState(op.getPipeline()));
  int64_t stage = op.getStage();
  Operation *at =
      callStack.empty() ? op.getOperation() : callStack.front().getOperation();
  if (reportedReleases.contains(at))
    return;
  const Group *guessedOther = nullptr;
  for (const Queue &queue : states)
    for (const Group *group : queue) {
      for (auto [read, guess] : llvm::zip(group->reads, group->guessed)) {
        auto [readSlot, readStage] = read;
        if (readSlot != slot)
          continue;
        if (readStage >= 0 && readStage != stage) {
          if (guess && !guessedOther)
            guessedOther = group;
          continue;
        }
        reportedReleases.insert(at);
        InFlightDiagnostic diag =
            error(at)
            << "releases a slot that a kvpipe.warpgroup_mma still in flight "
               "reads: retire it with kvpipe.warpgroup_wait first"
            << where(op.getPipeline(), stage);
        diag.attachNote(group->op->getLoc())
            << "the wgmma reading the slot, not retired before the release";
        return;
      }
      if (group->unknownRead) {
        reportedReleases.insert(at);
        InFlightDiagnostic diag =
            unproven(at) << "that no wgmma in flight reads the released "
                            "slot: the operand of a wgmma still in flight "
                            "comes from '"
                         << group->unknownRead->getName()
                         << "', which the checker does not follow"
                         << where(op.getPipeline(), stage);
        diag.attachNote(group->op->getLoc()) << "the wgmma";
        return;
      }
    }
  if (guessedOther) {
    reportedReleases.insert(at);
    InFlightDiagnostic diag =
        unproven(at) << "that the wgmma still in flight does not read this "
                        "sub-stage: its tile matches no producer load, so "
                        "the checker cannot tell which sub-stages of the "
                        "slot it reads"
                     << where(op.getPipeline(), stage);
    diag.attachNote(guessedOther->op->getLoc()) << "the wgmma";
  }
}

int64_t ProtocolChecker::getLastWaitedStage(Operation *op, Value slot) {
  int64_t last = -1;
  auto function = op->getParentOfType<FunctionOpInterface>();
  Operation *scope = function ? function.getOperation() : root;
  scope->walk([&](ConsumerWaitOp wait) {
    if (flow.getSlot(mapState(wait.getPipeline())) == slot &&
        dominance.properlyDominates(wait.getOperation(), op))
      last = std::max(last, wait.getStage());
  });
  return last;
}

void ProtocolChecker::retireAllBut(SmallVectorImpl<Queue> &states,
                                   uint64_t pending) {
  for (Queue &queue : states)
    if (queue.size() > pending)
      queue.erase(queue.begin(), queue.end() - pending);
}

void ProtocolChecker::dedupe(SmallVectorImpl<Queue> &states) {
  SmallVector<Queue> unique;
  for (Queue &queue : states)
    if (!llvm::is_contained(unique, queue))
      unique.push_back(queue);
  // Too many paths: keep the longest ones' groups (a superset in flight
  // is conservative for releases only if no later wait counts them out;
  // a wait with pending > 0 then retires nothing for sure).
  if (unique.size() > 16) {
    Queue merged;
    for (Queue &queue : unique)
      for (const Group *group : queue)
        if (!llvm::is_contained(merged, group))
          merged.push_back(group);
    unique.assign(1, merged);
  }
  states.swap(unique);
}

void ProtocolChecker::simulate(Block &block, SmallVector<Queue> &states) {
  for (Operation &op : block) {
    if (auto mma = dyn_cast<WarpgroupMmaOp>(op)) {
      const Group *group = issue(mma);
      for (Queue &queue : states)
        queue.push_back(group);
    } else if (isa<NVVM::WgmmaGroupSyncAlignedOp>(op)) {
      groups.push_back({&op, {}, {}, nullptr});
      for (Queue &queue : states)
        queue.push_back(&groups.back());
    } else if (auto retire = dyn_cast<WarpgroupWaitOp>(op)) {
      retireAllBut(states, retire.getPending());
    } else if (auto retire = dyn_cast<NVVM::WgmmaWaitGroupSyncOp>(op)) {
      retireAllBut(states, retire.getGroup());
    } else if (auto rel = dyn_cast<ConsumerReleaseOp>(op)) {
      release(rel, states);
    } else if (auto call = dyn_cast<CallOpInterface>(op)) {
      FunctionOpInterface callee = flow.resolveCallee(call);
      if (callee && !llvm::is_contained(callStack, call) &&
          callStack.size() < 4 && !callee.getFunctionBody().empty()) {
        callStack.push_back(call);
        SmallVector<Queue> result;
        Region &body = callee.getFunctionBody();
        if (body.hasOneBlock()) {
          SmallVector<Queue> copy(states);
          simulate(body.front(), copy);
          result = std::move(copy);
        } else {
          result = simulateCfg(body, states);
        }
        callStack.pop_back();
        if (!result.empty())
          states.swap(result);
        dedupe(states);
      } else if (!callee && llvm::any_of(op.getOperandTypes(), [](Type t) {
                   return isa<MemRefType>(t);
                 })) {
        // It may issue wgmma groups reading its buffers.
        groups.push_back({&op, {}, {}, &op});
        for (Queue &queue : states)
          queue.push_back(&groups.back());
      }
    } else if (op.getNumRegions() != 0) {
      simulateRegions(op, states);
    }
  }
}

void ProtocolChecker::simulateRegions(Operation &op,
                                      SmallVector<Queue> &states) {
  if (auto whileOp = dyn_cast<scf::WhileOp>(op)) {
    // The loop leaves after its "before" region (once at least), never
    // after its "after" region: one or two iterations, the groups in flight
    // at each scf.condition.
    SmallVector<Queue> exits, current(states);
    for (unsigned iteration = 0; iteration < 2; ++iteration) {
      for (Block &block : whileOp.getBefore())
        simulate(block, current);
      llvm::append_range(exits, current);
      for (Block &block : whileOp.getAfter())
        simulate(block, current);
      dedupe(current);
    }
    states.swap(exits);
    dedupe(states);
    return;
  }
  if (isa<LoopLikeOpInterface>(op)) {
    // Zero, one or two iterations: the groups one iteration leaves in
    // flight are the ones the next starts with.
    SmallVector<Queue> all(states), current(states);
    for (unsigned iteration = 0; iteration < 2; ++iteration) {
      for (Region &region : op.getRegions())
        for (Block &block : region)
          simulate(block, current);
      llvm::append_range(all, current);
      dedupe(current);
    }
    states.swap(all);
    dedupe(states);
    return;
  }
  // Branches: each region is a possible path; an scf.if without else
  // may run neither.
  SmallVector<Queue> all;
  bool mayRunNone =
      isa<scf::IfOp>(op) && cast<scf::IfOp>(op).getElseRegion().empty();
  if (mayRunNone || !isa<RegionBranchOpInterface>(op))
    llvm::append_range(all, states);
  for (Region &region : op.getRegions()) {
    SmallVector<Queue> copy(states);
    if (region.hasOneBlock()) {
      simulate(region.front(), copy);
    } else if (!region.empty()) {
      copy = simulateCfg(region, copy);
    }
    llvm::append_range(all, copy);
  }
  states.swap(all);
  dedupe(states);
}

SmallVector<ProtocolChecker::Queue>
ProtocolChecker::simulateCfg(Region &region, ArrayRef<Queue> entry) {
  DenseMap<Block *, SmallVector<Queue>> in;
  in[&region.front()].assign(entry.begin(), entry.end());
  SmallVector<Queue> exits;
  for (unsigned round = 0; round < 2; ++round) {
    for (Block &block : region) {
      auto it = in.find(&block);
      if (it == in.end())
        continue;
      SmallVector<Queue> current(it->second);
      simulate(block, current);
      if (block.getNumSuccessors() == 0) {
        llvm::append_range(exits, current);
        continue;
      }
      for (Block *successor : block.getSuccessors()) {
        SmallVector<Queue> &target = in[successor];
        llvm::append_range(target, current);
        dedupe(target);
      }
    }
  }
  dedupe(exits);
  return exits;
}

void ProtocolChecker::checkReads() {
  auto run = [&](Region &body) {
    SmallVector<Queue> states(1);
    if (body.hasOneBlock())
      simulate(body.front(), states);
    else
      simulateCfg(body, states);
  };
  if (auto function = dyn_cast<FunctionOpInterface>(root)) {
    if (!function.isExternal())
      run(function.getFunctionBody());
    return;
  }
  root->walk([&](FunctionOpInterface function) {
    if (!function.isExternal())
      run(function.getFunctionBody());
  });
}

void ProtocolChecker::checkReadSlots() {
  root->walk([&](WarpgroupMmaOp mma) {
    for (Value operand : {Value(mma.getA()), Value(mma.getB())})
      if (isa<MemRefType>(operand.getType()))
        checkSlotOffsets(mma, operand);
  });
}

/// The kvpipe.index ops `value` is computed from, through pure ops.
static SmallVector<IndexOp> getIndicesOf(Value value) {
  SmallVector<IndexOp> indices;
  SmallVector<Value> worklist = {value};
  DenseSet<Value> seen;
  while (!worklist.empty() && seen.size() < 256) {
    Value v = worklist.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    Operation *def = v.getDefiningOp();
    if (auto index = dyn_cast_or_null<IndexOp>(def)) {
      indices.push_back(index);
      continue;
    }
    if (def && def->getNumRegions() == 0 && isMemoryEffectFree(def))
      llvm::append_range(worklist, def->getOperands());
  }
  return indices;
}

/// The ring's slot count of `index`'s pipeline when it has several and the
/// flow knows its slot; 0 otherwise (nothing to evaluate).
static int64_t getEvaluatedStages(IndexOp index, const PipelineFlow &flow) {
  int64_t stages =
      cast<PipelineType>(index.getPipeline().getType()).getKvStages();
  return stages == 1 || flow.isMixed(index.getPipeline()) ? 0 : stages;
}

void ProtocolChecker::checkSlotOffsets(Operation *op, Value memref,
                                       ArrayRef<Value> indices) {
  if (std::optional<std::string> problem =
          getSlotAddressProblem(memref, indices)) {
    if (reportedSlotOffsets.insert(op).second)
      unproven(op) << "which ring slot the "
                   << (isa<WarpgroupMmaOp>(op) ? "wgmma reads" : "op accesses")
                   << ": " << *problem;
    return;
  }
  ViewOffsets chain = getViewOffsets(memref);
  for (Value offset : chain.offsets)
    checkSlotOffset(op, offset);
  for (Value offset : indices)
    checkSlotOffset(op, offset);
  for (Value offset : chain.linearOffsets)
    for (IndexOp index : getIndicesOf(offset)) {
      if (!getEvaluatedStages(index, flow) ||
          !reportedSlotOffsets.insert(op).second)
        continue;
      InFlightDiagnostic diag =
          unproven(op)
          << "which ring slot the op addresses: a byte or linear offset of "
             "its address (memref.view, memref.reinterpret_cast) is computed "
             "from the state's kvpipe.index, and such offsets are not "
             "evaluated"
          << where(index.getPipeline());
      diag.attachNote(index.getLoc()) << "the index";
      return;
    }
}

std::optional<std::string>
ProtocolChecker::getSlotAddressProblem(Value memref, ArrayRef<Value> indices) {
  auto fromIndex = [&](Value v) {
    Operation *unknown = nullptr;
    return !getSlotsOf(v, 0, unknown).empty();
  };
  // The positions computed from a kvpipe.index: the op's own indices, then
  // the subview offsets down the view chain. `ring` is the buffer whose
  // dimension the (last found) one indexes.
  int found = 0;
  bool inFirst = true;
  Value ring;
  for (auto [i, v] : llvm::enumerate(indices))
    if (fromIndex(v)) {
      ++found;
      inFirst &= i == 0;
      ring = memref;
    }
  Value current = memref;
  for (unsigned guard = 0; current && guard < 64; ++guard) {
    Operation *def = current.getDefiningOp();
    SmallVector<Value> offsets, linearOffsets;
    Value source = stepView(def, offsets, linearOffsets);
    if (!source)
      break;
    if (auto subview = dyn_cast<memref::SubViewOp>(def))
      for (auto [d, offset] : llvm::enumerate(subview.getMixedOffsets()))
        if (auto v = dyn_cast<Value>(offset); v && fromIndex(v)) {
          ++found;
          inFirst &= d == 0;
          ring = source;
        }
    current = source;
  }
  if (found == 0)
    return std::nullopt;
  // Two offsets computed from the index add up (a subview at the slot of a
  // subview at the slot reads slot 2 * index), whatever each one is.
  if (found > 1)
    return std::string("several offsets of its address are computed from a "
                       "kvpipe.index, and they add up");
  // The slot is the position in the ring's first dimension.
  if (!inFirst)
    return std::string("its offset computed from a kvpipe.index is not in the "
                       "first dimension of the buffer it indexes, so it "
                       "selects rows or columns, not a slot");
  // Below the slot's offset, only views that keep that dimension as the
  // ring's: a shift (subview at 1), a stride or a reshape (collapse_shape
  // of slots and rows) makes the position another slot, or part of two.
  for (unsigned guard = 0; ring && guard < 64; ++guard) {
    Operation *def = ring.getDefiningOp();
    if (!def)
      break;
    if (isa<memref::CastOp, memref::MemorySpaceCastOp, memref::ViewOp>(def)) {
      ring = def->getOperand(0);
      continue;
    }
    if (auto subview = dyn_cast<memref::SubViewOp>(def)) {
      if (isConstantIntValue(subview.getMixedOffsets()[0], 0) &&
          isConstantIntValue(subview.getMixedStrides()[0], 1) &&
          subview.getSourceType().getRank() == subview.getType().getRank()) {
        ring = subview.getSource();
        continue;
      }
    }
    SmallVector<Value> offsets, linearOffsets;
    if (stepView(def, offsets, linearOffsets))
      return "the '" + def->getName().getStringRef().str() +
             "' below its offset computed from a kvpipe.index shifts, "
             "strides or reshapes the dimension that offset indexes";
    break;
  }
  return std::nullopt;
}

bool ProtocolChecker::returnsIndexOfArgument(CallOpInterface call,
                                             OpResult result) {
  FunctionOpInterface callee = flow.resolveCallee(call);
  if (!callee || callee.isExternal())
    return false;
  bool found = false;
  for (Block &block : callee.getFunctionBody()) {
    Operation *terminator = block.getTerminator();
    if (!terminator || !terminator->hasTrait<OpTrait::ReturnLike>())
      continue;
    auto index =
        terminator->getOperand(result.getResultNumber()).getDefiningOp<IndexOp>();
    auto argument =
        index ? dyn_cast<BlockArgument>(index.getPipeline()) : BlockArgument();
    // The state is an argument of the callee's entry block, passed by the
    // call as that operand.
    if (!argument || !argument.getOwner()->isEntryBlock() ||
        argument.getOwner()->getParentOp() != callee.getOperation() ||
        argument.getArgNumber() >= call.getArgOperands().size())
      return false;
    found = true;
  }
  return found;
}

void ProtocolChecker::checkSlotOffset(Operation *op, Value offset) {
  SmallVector<IndexOp> indices = getIndicesOf(offset);
  if (indices.empty()) {
    // Computed from an index through ops evaluateAtIndex does not follow
    // (an scf.if result, a loop's carried value, a helper's result): the
    // slots it can be are the union getSlotsOf finds, but which one it is
    // at each slot is not evaluated.
    // A helper's result is the slot only where every return of the callee
    // returns the kvpipe.index of the state the call passes
    // (`call @slot_of(%state)`); anything else it computes is not
    // evaluated.
    if (auto call = offset.getDefiningOp<CallOpInterface>();
        call && returnsIndexOfArgument(call, cast<OpResult>(offset)))
      return;
    Operation *unknown = nullptr;
    SmallVector<Value> slots = getSlotsOf(offset, 0, unknown);
    if (slots.empty() || !reportedSlotOffsets.insert(op).second)
      return;
    unproven(op) << "which ring slot the "
                 << (isa<WarpgroupMmaOp>(op) ? "wgmma reads" : "op accesses")
                 << ": the offset of its address is computed from a "
                    "kvpipe.index through ops the slot evaluation does not "
                    "follow (branches, loops, calls)"
                 << where(slots.front());
    return;
  }
  for (IndexOp index : indices) {
    int64_t stages = getEvaluatedStages(index, flow);
    Value slot = stages ? flow.getSlot(index.getPipeline()) : Value();
    for (int64_t i = 0; i < stages; ++i) {
      std::optional<int64_t> at = evaluateAtIndex(offset, slot, i);
      if (at && *at == i)
        continue;
      if (!reportedSlotOffsets.insert(op).second)
        return;
      InFlightDiagnostic diag =
          unproven(op)
          << "which ring slot the "
          << (isa<WarpgroupMmaOp>(op) ? "wgmma reads" : "op accesses")
          << ": the offset of its address computed from the state's "
             "kvpipe.index is "
          << (at ? std::to_string(*at) : std::string("not evaluated"))
          << " at slot " << i
          << ", and its accesses are checked against the waits and releases "
             "of the index's slot"
          << where(index.getPipeline());
      diag.attachNote(index.getLoc()) << "the index";
      return;
    }
  }
}

/// Whether `type` is in shared memory, where ring slots are.
static bool isShared(MemRefType type) {
  if (auto space = dyn_cast_or_null<gpu::AddressSpaceAttr>(type.getMemorySpace()))
    return space.getValue() == gpu::AddressSpace::Workgroup;
  if (auto space = dyn_cast_or_null<IntegerAttr>(type.getMemorySpace()))
    return space.getInt() == 3;
  return false;
}

bool kvpipe::detail::accessesMemRef(Operation *op, Value operand) {
  if (isa<TMAStoreOp, StoreFragmentOp>(op))
    return true;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return false;
  SmallVector<MemoryEffects::EffectInstance> instances;
  effects.getEffectsOnValue(operand, instances);
  return llvm::any_of(instances, [](const MemoryEffects::EffectInstance &e) {
    return isa<MemoryEffects::Read, MemoryEffects::Write>(e.getEffect());
  });
}

/// Whether `op` is a cp.async copy (global to shared memory, per thread),
/// which writes its destination asynchronously: the data lands only once the
/// thread waits for the copy's group.
static bool isCpAsyncCopy(Operation *op) {
  return isa<nvgpu::DeviceAsyncCopyOp, NVVM::CpAsyncOp>(op);
}

bool kvpipe::detail::isAsyncSlotAccess(Operation *op) {
  return isa<TMAStoreOp>(op) || isCpAsyncCopy(op);
}

/// Whether, walking forward from `access` (the rest of its block, then the
/// rest of each enclosing block) up to `handover` (to the end of the function
/// when null), the asynchronous group holding the access is committed and
/// then waited for to the last group: for a TMA store (or a call that may
/// leave one in flight), `cp.async.bulk.commit_group` then
/// `cp.async.bulk.wait_group 0`; for a cp.async copy, a commit of its group
/// (`nvgpu.device_async_create_group`, `cp.async.commit_group`, each of
/// which commits every copy the thread issued before it) then a wait for
/// every group (`nvgpu.device_async_wait` without `numGroups` or with 0,
/// `cp.async.wait_group 0`). A block of a region of several blocks is not
/// left: what follows its region op does not run before the region's other
/// blocks.
static bool isAsyncAccessRetiredBefore(Operation *access,
                                       Operation *handover) {
  bool copy = isCpAsyncCopy(access);
  auto commits = [&](Operation *op) {
    return copy ? isa<nvgpu::DeviceAsyncCreateGroupOp,
                      NVVM::CpAsyncCommitGroupOp>(op)
                : isa<NVVM::CpAsyncBulkCommitGroupOp>(op);
  };
  auto waitsForAll = [&](Operation *op) {
    if (!copy) {
      auto wait = dyn_cast<NVVM::CpAsyncBulkWaitGroupOp>(op);
      return wait && wait.getGroup() == 0;
    }
    if (auto wait = dyn_cast<nvgpu::DeviceAsyncWaitOp>(op))
      return !wait.getNumGroups() || *wait.getNumGroups() == 0;
    auto wait = dyn_cast<NVVM::CpAsyncWaitGroupOp>(op);
    return wait && wait.getN() == 0;
  };
  // Steps past `op`: whether the group is now committed and waited for.
  bool committed = false;
  auto retires = [&](Operation *op) {
    if (commits(op))
      committed = true;
    else if (committed && waitsForAll(op))
      return true;
    return false;
  };
  // The branches of the scf.if ops the walk has left: a later scf.if on the
  // same condition runs the same branch on the threads that issued the
  // access (`scf.if %first {store}` then `scf.if %first {commit; wait}`).
  SmallVector<std::pair<Value, bool>> branches;
  for (Operation *from = access; from && !isa<FunctionOpInterface>(from);
       from = from->getParentOp()) {
    for (Operation *next = from->getNextNode(); next;
         next = next->getNextNode()) {
      if (handover && next == handover)
        return false;
      if (auto ifOp = dyn_cast<scf::IfOp>(next)) {
        auto taken = llvm::find_if(branches, [&](auto &branch) {
          return branch.first == ifOp.getCondition();
        });
        if (taken != branches.end()) {
          Region &region =
              taken->second ? ifOp.getThenRegion() : ifOp.getElseRegion();
          if (!region.empty())
            for (Operation &inner : region.front()) {
              if (handover && inner.isAncestor(handover))
                return false;
              if (retires(&inner))
                return true;
            }
          if (handover && next->isAncestor(handover))
            return false;
          continue;
        }
      }
      if (handover && next->isAncestor(handover))
        return false;
      if (retires(next))
        return true;
    }
    if (!from->getParentRegion()->hasOneBlock())
      return false;
    if (auto ifOp = dyn_cast<scf::IfOp>(from->getParentOp()))
      branches.push_back({ifOp.getCondition(),
                          from->getParentRegion() == &ifOp.getThenRegion()});
  }
  return false;
}

/// Whether `to` can be reached from `from` along the branches of their
/// region.
static bool isReachable(Block *from, Block *to) {
  SmallVector<Block *> worklist = {from};
  DenseSet<Block *> seen;
  while (!worklist.empty()) {
    Block *block = worklist.pop_back_val();
    if (!seen.insert(block).second)
      continue;
    for (Block *successor : block->getSuccessors()) {
      if (successor == to)
        return true;
      worklist.push_back(successor);
    }
  }
  return false;
}

/// Whether `op` is one checkSlotAccesses leaves to other rules: wgmma reads
/// are simulated (checkReads), TMA loads fill slots on the producer's barrier
/// (checkLoadSlots), views only compute addresses.
static bool isAccessCheckedElsewhere(Operation *op) {
  return isa<WarpgroupMmaOp, AsyncSlotCopyOpInterface,
             PipelineProtocolOpInterface>(op) ||
         isa<ViewLikeOpInterface>(op);
}

/// The function a call in a helper calls, where it resolves to one.
static FunctionOpInterface getNestedCallee(CallOpInterface call) {
  return dyn_cast_or_null<FunctionOpInterface>(call.resolveCallable());
}

/// mayAccessSharedMemory through nested calls; a callee already being
/// walked is decided by that walk (recursion adds no access).
static bool mayAccessSharedMemoryIn(FunctionOpInterface callee,
                                    SmallPtrSetImpl<Operation *> &walking) {
  if (!callee || callee.isExternal())
    return true;
  if (!walking.insert(callee).second)
    return false;
  WalkResult result = callee->walk([&](Operation *op) {
    if (isAccessCheckedElsewhere(op))
      return WalkResult::advance();
    if (auto call = dyn_cast<CallOpInterface>(op))
      return mayAccessSharedMemoryIn(getNestedCallee(call), walking)
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    if (takesAddressOut(op))
      return WalkResult::interrupt();
    for (Value operand : op->getOperands())
      if (isa<MemRefType>(operand.getType()) && accessesMemRef(op, operand))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return result.wasInterrupted();
}

bool kvpipe::detail::mayAccessSharedMemory(FunctionOpInterface callee) {
  SmallPtrSet<Operation *, 4> walking;
  return mayAccessSharedMemoryIn(callee, walking);
}

/// Whether the helper `callee` may leave a TMA store or a cp.async copy in
/// flight when it returns: it issues one (or calls a helper that may, or is
/// unknown) without committing its group and waiting for it to the last
/// group after it.
static bool mayReturnWithStoreInFlight(FunctionOpInterface callee,
                                       SmallPtrSetImpl<Operation *> &walking) {
  if (!callee || callee.isExternal())
    return true;
  if (!walking.insert(callee).second)
    return false;
  WalkResult result = callee->walk([&](Operation *op) {
    if (auto call = dyn_cast<CallOpInterface>(op))
      return mayReturnWithStoreInFlight(getNestedCallee(call), walking)
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    if (isAsyncSlotAccess(op) && !isAsyncAccessRetiredBefore(op, nullptr))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return result.wasInterrupted();
}

static bool mayReturnWithStoreInFlight(FunctionOpInterface callee) {
  SmallPtrSet<Operation *, 4> walking;
  return mayReturnWithStoreInFlight(callee, walking);
}

/// Where the view chain of `memref` ends in a value the slot walk does not
/// follow (an arith.select or scf.if of views, a loop's carried view, a
/// block argument of unstructured control flow): that op; null when it ends
/// in a buffer (an allocation, a global, dynamic shared memory, a function
/// argument) or a call (followed into the callee).
static Operation *getUnfollowedSource(Value memref) {
  Value current = memref;
  for (unsigned guard = 0; guard < 64; ++guard) {
    if (auto argument = dyn_cast<BlockArgument>(current)) {
      Operation *owner = argument.getOwner()->getParentOp();
      if (isa_and_nonnull<FunctionOpInterface>(owner) &&
          argument.getOwner()->isEntryBlock())
        return nullptr;
      return owner;
    }
    Operation *def = current.getDefiningOp();
    SmallVector<Value> offsets;
    if (Value source = ProtocolChecker::stepView(def, offsets, offsets)) {
      current = source;
      continue;
    }
    if (isa<memref::AllocOp, memref::AllocaOp, memref::GetGlobalOp,
            gpu::DynamicSharedMemoryOp, CallOpInterface>(def))
      return nullptr;
    return def;
  }
  return nullptr;
}

void ProtocolChecker::checkSlotAccesses() {
  root->walk([&](Operation *op) {
    if (isAccessCheckedElsewhere(op))
      return;
    // A call that hands a helper a slot's view or index: the helper's
    // accesses of it run where the call runs. (Inside the helper the
    // buffer is an argument, whose slot it cannot see.)
    if (auto call = dyn_cast<CallOpInterface>(op)) {
      checkCallAccesses(call);
      return;
    }
    SmallVector<Value> slots;
    bool accesses = false;
    for (auto [position, operand] : llvm::enumerate(op->getOperands())) {
      auto type = dyn_cast<MemRefType>(operand.getType());
      if (!type || !accessesMemRef(op, operand))
        continue;
      Operation *unknown = nullptr;
      SmallVector<Value> here = getSlotsRead(operand, unknown);
      // A slot reached through a memory_space_cast to the generic space is
      // still the slot: the view chain's buffers are in shared memory.
      bool shared = isShared(type);
      for (Value v = operand; v && !shared;) {
        SmallVector<Value> offsets;
        v = stepView(v.getDefiningOp(), offsets, offsets);
        shared = v && isShared(cast<MemRefType>(v.getType()));
      }
      if (!shared)
        continue;
      accesses = true;
      addSlots(slots, here);
      // An address the view walk cannot follow (an arith.select or scf.if of
      // views, a loop's carried view) may be a slot's.
      if (Operation *source = getUnfollowedSource(operand);
          source && reportedSlotOffsets.insert(op).second)
        unproven(op) << "which ring slot the op accesses: its address comes "
                        "from '"
                     << source->getName()
                     << "', which the checker does not follow";
      // The ring addressed by the op's own indices (vector.load
      // %ring[%slot, ...]): the index operands after the memref.
      SmallVector<Value> indices = getIndexOperands(op, position);
      for (Value index : indices) {
        Operation *unknownIndex = nullptr;
        addSlots(slots, getSlotsOf(index, 0, unknownIndex));
      }
      checkSlotOffsets(op, operand, indices);
    }
    if (!accesses)
      return;
    for (Value slot : slots) {
      checkSlotAccess(op, slot);
      if (isAsyncSlotAccess(op))
        checkStoreRetired(op, slot);
    }
  });
}

void ProtocolChecker::checkCallAccesses(CallOpInterface call) {
  SmallVector<Value> slots;
  SmallVector<Value> slotIndices, slotViews;
  for (Value operand : call.getArgOperands()) {
    Operation *unknown = nullptr;
    SmallVector<Value> here;
    if (isa<MemRefType>(operand.getType())) {
      here = getSlotsRead(operand, unknown);
      if (!here.empty())
        slotViews.push_back(operand);
    } else if (operand.getType().isIntOrIndex()) {
      here = getSlotsOf(operand, 0, unknown);
      if (!here.empty())
        slotIndices.push_back(operand);
    }
    addSlots(slots, here);
  }
  if (slots.empty())
    return;
  FunctionOpInterface callee = flow.resolveCallee(call);
  if (!mayAccessSharedMemory(callee))
    return;
  Operation *op = call.getOperation();
  // The offsets the helper adds to an index it receives are not evaluated
  // against the slot (a view it receives is the slot's tile).
  if (!slotIndices.empty() && reportedSlotOffsets.insert(op).second)
    unproven(op) << "which ring slot the callee accesses: the call passes a "
                    "value computed from a kvpipe.index to a helper that "
                    "accesses shared memory, and the addresses the helper "
                    "computes from it are not evaluated"
                 << where(slots.front());
  for (Value view : slotViews)
    checkSlotOffsets(op, view);
  for (Value slot : slots) {
    checkSlotAccess(op, slot);
    if (mayReturnWithStoreInFlight(callee))
      checkStoreRetired(op, slot);
  }
}

void ProtocolChecker::checkStoreRetired(Operation *store, Value slot) {
  auto function = store->getParentOfType<FunctionOpInterface>();
  if (!function)
    return;
  function->walk([&](PipelineProtocolOpInterface protocol) {
    if (!protocol.closesSlot() || flow.getSlot(protocol.getPipeline()) != slot)
      return WalkResult::advance();
    // A handover that runs after the store in program order: in the block
    // of the handover (or of the op around it) that holds the store, the
    // store's ancestor comes first; or, in a region of several blocks, the
    // handover's block is reachable from the store's.
    Operation *handover = protocol.getOperation();
    bool after = false;
    for (Operation *at = handover; at && !after && at != function;
         at = at->getParentOp()) {
      if (Operation *storeAt = at->getBlock()->findAncestorOpInBlock(*store)) {
        after = storeAt != at && storeAt->isBeforeInBlock(at);
        break;
      }
      Block *storeBlock =
          at->getParentRegion()->findAncestorBlockInRegion(*store->getBlock());
      if (storeBlock) {
        after = isReachable(storeBlock, at->getBlock());
        break;
      }
    }
    if (!after || isAsyncAccessRetiredBefore(store, handover))
      return WalkResult::advance();
    InFlightDiagnostic diag = unproven(store);
    if (isCpAsyncCopy(store))
      diag << "that the cp.async copy has written the ring slot before its '"
           << handover->getName().stripDialect()
           << "': no commit of its group (nvgpu.device_async_create_group, "
              "cp.async.commit_group) followed by a wait for every group "
              "(nvgpu.device_async_wait with numGroups 0, "
              "cp.async.wait_group 0) runs between them after the copy, so "
              "the other side may read the slot before the copy lands";
    else
      diag << "that the TMA store has read the ring slot before its '"
           << handover->getName().stripDialect()
           << "': no cp.async.bulk.commit_group followed by "
              "cp.async.bulk.wait_group 0 runs between them after the store";
    diag << (isa<CallOpInterface>(store)
                 ? " (the store, or a cp.async copy, is in the callee, which does not "
                   "retire it)"
                 : "")
         << where(protocol.getPipeline());
    diag.attachNote(handover->getLoc()) << "the slot is handed over here";
    return WalkResult::interrupt();
  });
}

SmallVector<PipelineProtocolOpInterface>
ProtocolChecker::getOpensAndClosesBefore(
    Operation *op, llvm::function_ref<bool(Value)> ofState) {
  auto function = op->getParentOfType<FunctionOpInterface>();
  Operation *scope = function ? function.getOperation() : root;
  SmallVector<PipelineProtocolOpInterface> before;
  scope->walk([&](PipelineProtocolOpInterface protocol) {
    if ((protocol.opensSlot() || protocol.closesSlot()) &&
        ofState(protocol.getPipeline()) &&
        dominance.properlyDominates(protocol.getOperation(), op))
      before.push_back(protocol);
  });
  llvm::sort(before, [&](PipelineProtocolOpInterface a,
                         PipelineProtocolOpInterface b) {
    return dominance.properlyDominates(a.getOperation(), b.getOperation());
  });
  return before;
}

bool ProtocolChecker::isAccessedInAsyncProxy(Value pipeline) {
  if (!asyncPipelines) {
    asyncPipelines.emplace();
    auto add = [&](Value memref) {
      if (!isa<MemRefType>(memref.getType()))
        return;
      Operation *unknown = nullptr;
      for (Value slot : getSlotsRead(memref, unknown))
        asyncPipelines->insert(flow.getPipeline(slot));
      asyncAccessUnknown |= unknown != nullptr;
    };
    root->walk([&](Operation *op) {
      if (auto mma = dyn_cast<WarpgroupMmaOp>(op)) {
        add(mma.getA());
        add(mma.getB());
      } else if (auto store = dyn_cast<TMAStoreOp>(op)) {
        add(store.getSource());
      } else if (auto copy = dyn_cast<AsyncSlotCopyOpInterface>(op)) {
        add(copy.getDest());
      }
    });
  }
  return asyncAccessUnknown || asyncPipelines->contains(pipeline);
}

bool ProtocolChecker::writesInGenericProxy(Operation *op) {
  return isa<memref::StoreOp, vector::StoreOp, vector::MaskedStoreOp,
             vector::TransferWriteOp, StoreFragmentOp>(op);
}

bool ProtocolChecker::isFencedBeforeAsyncUse(Operation *op) {
  // The straight-line continuation of `op`, out through its enclosing ops
  // up to its function: a fence.proxy.async (for shared memory) must come
  // before anything that may read the slot in the async proxy or hand it
  // over (a wgmma, a TMA copy, a commit or release, a call), or the end.
  auto usesAsync = [](Operation *candidate) {
    WalkResult found = candidate->walk([](Operation *inner) {
      return isa<WarpgroupMmaOp, AsyncSlotCopyOpInterface, TMAStoreOp,
                 ProducerCommitOp, ConsumerReleaseOp, CallOpInterface>(inner)
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    });
    return found.wasInterrupted();
  };
  for (Operation *at = op; at && !isa<FunctionOpInterface>(at);
       at = at->getParentOp()) {
    for (Operation *next = at->getNextNode(); next; next = next->getNextNode()) {
      if (isAsyncProxyFence(next))
        return true;
      if (usesAsync(next))
        return false;
    }
    // A loop's body runs again: its next iteration's accesses follow.
    if (isa<LoopLikeOpInterface>(at->getParentOp()))
      return false;
  }
  return false;
}

void ProtocolChecker::checkSlotAccess(Operation *op, Value slot) {
  if (!reportedAccesses.insert({op, slot}).second)
    return;
  // The sub-stages of the slot open when `op` runs.
  SmallVector<PipelineProtocolOpInterface> before = getOpensAndClosesBefore(
      op, [&](Value state) { return flow.getSlot(state) == slot; });
  DenseSet<int64_t> open;
  Operation *closed = nullptr;
  for (PipelineProtocolOpInterface protocol : before) {
    int64_t stage = protocol.getSubStage().value_or(0);
    if (protocol.opensSlot()) {
      open.insert(stage);
    } else {
      open.erase(stage);
      closed = protocol.getOperation();
    }
  }
  if (!open.empty() && writesInGenericProxy(op) &&
      isAccessedInAsyncProxy(flow.getPipeline(slot)) &&
      !isFencedBeforeAsyncUse(op))
    unproven(op) << "that the tensor cores and TMA see what this op writes "
                    "into the ring slot: no fence.proxy.async for shared "
                    "memory follows it before the slot is read by a wgmma, "
                    "copied, or handed over (the async proxy reads or "
                    "refills this pipeline's slots)"
                 << where(slot);
  // With sub-stages, an access through the very view that a sub-stage's
  // TMA loads into (the tile keys of wgmma reads) is an access of that
  // part: its sub-stage must be held. Any other view of the slot is taken
  // as an access of a part held while any sub-stage is: plain accesses are
  // not matched to parts by their index ranges (a known gap:
  // docs/protocol-checking.md, rule 7).
  if (!open.empty() && cast<PipelineType>(slot.getType()).getQkStages() > 1) {
    for (Value operand : op->getOperands()) {
      if (!isa<MemRefType>(operand.getType()))
        continue;
      int64_t stage = getStageRead(operand, slot);
      if (stage < 0 || open.contains(stage))
        continue;
      SmallVector<int64_t> held(open.begin(), open.end());
      llvm::sort(held);
      InFlightDiagnostic diag =
          error(op) << "accesses the part of the ring slot that sub-stage "
                    << stage << " loads (the view its TMA load fills) while "
                    << "it holds only sub-stage" << (held.size() > 1 ? "s" : "")
                    << " ";
      llvm::interleaveComma(held, diag);
      diag << " of the slot: sub-stage " << stage
           << "'s data may not have landed, or may be handed over"
           << where(slot, stage);
      return;
    }
  }
  if (!open.empty())
    return;
  if (closed) {
    InFlightDiagnostic diag =
        error(op) << "accesses a ring slot after its '"
                  << closed->getName().stripDialect()
                  << "': the other side may already be refilling or reading "
                     "it"
                  << where(cast<PipelineProtocolOpInterface>(closed)
                               .getPipeline());
    diag.attachNote(closed->getLoc()) << "the slot is handed over here";
    return;
  }
  unproven(op) << "that this op accesses the ring slot while it holds it: no "
                  "consumer_wait or producer_acquire of the slot runs before "
                  "it on every path"
               << where(slot);
}
