//===- ProtocolPairing.cpp - pairs and branches ---------------------------===//
//
// Part of ProtocolChecker (ProtocolChecker.h).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecker.h"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::detail;

//===----------------------------------------------------------------------===//
// 3. Pairing, block by block
//===----------------------------------------------------------------------===//

void ProtocolChecker::openPair(
    DenseMap<std::pair<Value, PipelineSide>, SlotPairing> &pairs,
    SmallVectorImpl<std::pair<Value, PipelineSide>> &order, Operation *op,
    Value state, int64_t stage, PipelineSide side, StringRef name) {
  auto key = std::make_pair(flow.getSlot(state), side);
  auto [it, inserted] = pairs.try_emplace(key);
  if (inserted)
    order.push_back(key);
  SlotPairing &pairing = it->second;
  int64_t stages = cast<PipelineType>(state.getType()).getQkStages();
  if (pairing.open.size() < static_cast<size_t>(stages))
    pairing.open.resize(stages, nullptr);
  if (!pairing.firstOpen) {
    pairing.firstOpen = op;
    pairing.firstOpenStage = stage;
  }
  if (pairing.lastOpen && stage != pairing.lastOpenStage + 1) {
    InFlightDiagnostic diag =
        error(op) << "is out of qk_stage order: the previous " << name
                  << " of this slot in its block is sub-stage "
                  << pairing.lastOpenStage << where(state, stage);
    diag.attachNote(pairing.lastOpen->getLoc()) << "the previous " << name;
  } else {
    // After an out-of-order op the order continues from the previous one,
    // so that one misplaced op is reported once.
    pairing.lastOpen = op;
    pairing.lastOpenStage = stage;
  }
  if (stage >= 0 && stage < stages)
    pairing.open[stage] = op;
}

void ProtocolChecker::closePair(
    DenseMap<std::pair<Value, PipelineSide>, SlotPairing> &pairs,
    SmallVectorImpl<std::pair<Value, PipelineSide>> &order, Operation *op,
    Value state, int64_t stage, PipelineSide side, StringRef openName,
    StringRef name) {
  auto key = std::make_pair(flow.getSlot(state), side);
  auto [it, inserted] = pairs.try_emplace(key);
  if (inserted)
    order.push_back(key);
  SlotPairing &pairing = it->second;
  if (!pairing.firstClose) {
    pairing.firstClose = op;
    pairing.firstCloseStage = stage;
  }
  if (pairing.lastClose && stage != pairing.lastCloseStage + 1) {
    InFlightDiagnostic diag =
        error(op) << "is out of qk_stage order: the previous " << name
                  << " of this slot in its block is sub-stage "
                  << pairing.lastCloseStage << where(state, stage);
    diag.attachNote(pairing.lastClose->getLoc()) << "the previous " << name;
  } else {
    pairing.lastClose = op;
    pairing.lastCloseStage = stage;
  }
  if (stage >= 0 && static_cast<size_t>(stage) < pairing.open.size() &&
      pairing.open[stage]) {
    pairing.open[stage] = nullptr;
    return;
  }
  error(op) << "has no preceding " << openName
            << " of the same slot and sub-stage in its block"
            << where(state, stage);
}

void ProtocolChecker::checkBlock(Block &block) {
  // 3. Pairing: wait/release on the consumer side, acquire/commit on the
  // producer side.
  DenseMap<std::pair<Value, PipelineSide>, SlotPairing> pairs;
  SmallVector<std::pair<Value, PipelineSide>> order;

  for (Operation &op : block) {
    // A stale state's ops were reported by rule 1; pairing them again
    // would only repeat that.
    if (staleUsers.contains(&op))
      continue;
    if (auto step = dyn_cast<StepOp>(op)) {
      checkStep(step, pairs);
      continue;
    }
    auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(op);
    if (!protocolOp)
      continue;
    StringRef name = op.getName().stripDialect();
    PipelineSide side = protocolOp.getSide();
    if (protocolOp.opensSlot())
      openPair(pairs, order, &op, protocolOp.getPipeline(),
               *protocolOp.getSubStage(), side, name);
    else if (protocolOp.closesSlot())
      closePair(pairs, order, &op, protocolOp.getPipeline(),
                *protocolOp.getSubStage(), side, getOpenerName(side), name);
  }

  for (const auto &key : order) {
    const SlotPairing &pairing = pairs[key];
    for (auto [stage, open] : llvm::enumerate(pairing.open)) {
      if (!open)
        continue;
      Value state = open->getOperand(0);
      error(open) << "has no "
                  << (key.second == PipelineSide::consumer ? "consumer_release"
                                                           : "producer_commit")
                  << " of the same slot and sub-stage after it in its block"
                  << where(state, stage);
    }
    // The order starts at sub-stage 0.
    bool sawZero[2] = {false, false};
    for (Value state : flow.getSlotStates(key.first))
      for (Operation *user : state.getUsers()) {
        if (user->getBlock() != &block || staleUsers.contains(user))
          continue;
        auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(user);
        if (!protocolOp || protocolOp.getSide() != key.second ||
            protocolOp.getSubStage() != 0)
          continue;
        if (protocolOp.opensSlot())
          sawZero[0] = true;
        if (protocolOp.closesSlot())
          sawZero[1] = true;
      }
    for (auto [index, first, firstStage] :
         {std::tuple{0, pairing.firstOpen, pairing.firstOpenStage},
          std::tuple{1, pairing.firstClose, pairing.firstCloseStage}}) {
      if (!first || sawZero[index])
        continue;
      error(first) << "is out of qk_stage order: no "
                   << first->getName().stripDialect()
                   << " of sub-stage 0 of this slot in its block; the "
                      "sub-stages of a slot start at 0"
                   << where(first->getOperand(0), firstStage);
    }
    // Every sub-stage, or none: the others' barriers never complete.
    if (!pairing.lastClose)
      continue;
    int64_t stages = cast<PipelineType>(key.first.getType()).getQkStages();
    if (pairing.lastCloseStage != stages - 1)
      error(pairing.lastClose)
          << (key.second == PipelineSide::consumer ? "releases" : "commits")
          << " the slot up to sub-stage " << pairing.lastCloseStage
          << " but not sub-stage " << pairing.lastCloseStage + 1
          << " in its block: "
          << (key.second == PipelineSide::consumer
                  ? "the producer waits for that release"
                  : "the consumers wait for that data")
          << " forever"
          << where(pairing.lastClose->getOperand(0),
                   pairing.lastCloseStage + 1);
  }
}

void ProtocolChecker::checkCfPairing(Region &region) {
  using Open = std::map<std::tuple<void *, int, int64_t>, Operation *>;
  auto keyOf = [&](Operation *op) {
    auto protocolOp = cast<PipelineProtocolOpInterface>(op);
    return std::make_tuple(
        flow.getSlot(protocolOp.getPipeline()).getAsOpaquePointer(),
        int(protocolOp.getSide()), *protocolOp.getSubStage());
  };
  DenseMap<Block *, Open> in;
  DenseSet<Block *> visited;
  DenseSet<Operation *> reported;
  bool disagree = false, multiStage = false;
  Operation *disagreeAt = nullptr;
  SmallVector<Block *> worklist = {&region.front()};
  in[&region.front()] = {};
  unsigned budget = 4096;
  while (!worklist.empty() && budget--) {
    Block *block = worklist.pop_back_val();
    Open open = in[block];
    for (Operation &op : *block) {
      if (auto step = dyn_cast<StepOp>(op)) {
        if (!visited.contains(block)) {
          DenseMap<std::pair<Value, PipelineSide>, SlotPairing> unused;
          checkStep(step, unused);
        }
        continue;
      }
      if (!opensOrCloses(&op) || staleUsers.contains(&op))
        continue;
      auto protocolOp = cast<PipelineProtocolOpInterface>(&op);
      Value state = protocolOp.getPipeline();
      if (cast<PipelineType>(state.getType()).getQkStages() > 1)
        multiStage = true;
      auto key = keyOf(&op);
      if (protocolOp.opensSlot()) {
        open[key] = &op;
        continue;
      }
      if (open.erase(key))
        continue;
      if (reported.insert(&op).second)
        error(&op) << "has no preceding " << getOpenerName(protocolOp.getSide())
                   << " of the same slot and sub-stage on every path to it"
                   << where(state, protocolOp.getSubStage());
    }
    visited.insert(block);
    Operation *terminator = block->getTerminator();
    if (block->getNumSuccessors() == 0) {
      // Leaving the region: nothing may stay open.
      for (auto &[key, opener] : open)
        if (reported.insert(opener).second) {
          auto protocolOp = cast<PipelineProtocolOpInterface>(opener);
          InFlightDiagnostic diag =
              error(opener)
              << "has no "
              << (protocolOp.getSide() == PipelineSide::consumer
                      ? "consumer_release"
                      : "producer_commit")
              << " of the same slot and sub-stage on every path after it"
              << where(protocolOp.getPipeline(), protocolOp.getSubStage());
          diag.attachNote(terminator->getLoc())
              << "the path leaves here with it open";
        }
      continue;
    }
    for (Block *successor : block->getSuccessors()) {
      auto [it, inserted] = in.try_emplace(successor, open);
      if (inserted) {
        worklist.push_back(successor);
        continue;
      }
      if (it->second != open && !disagree) {
        disagree = true;
        disagreeAt = terminator;
      }
    }
  }
  if (disagree)
    unproven(disagreeAt)
        << "that the waits and acquires still open are the same on every "
           "path into a block: the paths of 'cf' branches into its "
           "successor hold different open sub-stages";
  else if (multiStage)
    unproven(region.front().getTerminator())
        << "the sub-stage order of a pipeline of several sub-stages across "
           "the blocks of unstructured control flow";
}

bool ProtocolChecker::hasProtocolOps(Value pipeline) {
  auto it = protocolPipelines.find(pipeline);
  if (it != protocolPipelines.end())
    return it->second;
  bool found = false;
  root->walk([&](Operation *op) {
    if (opensOrCloses(op) &&
        flow.getPipeline(cast<PipelineProtocolOpInterface>(op).getPipeline()) ==
            pipeline) {
      found = true;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  protocolPipelines[pipeline] = found;
  return found;
}

void ProtocolChecker::checkStep(
    StepOp step, DenseMap<std::pair<Value, PipelineSide>, SlotPairing> &pairs) {
  if (!hasProtocolOps(flow.getPipeline(step.getPipeline())))
    return;
  // Every sub-stage of the slot committed on every path to the step.
  Value slot = flow.getSlot(step.getPipeline());
  int64_t stages =
      cast<PipelineType>(step.getPipeline().getType()).getQkStages();
  SmallVector<bool> committed(stages, false);
  for (Value state : flow.getSlotStates(slot))
    for (Operation *user : state.getUsers())
      if (auto commit = dyn_cast<ProducerCommitOp>(user))
        if (commit.getStage() < stages &&
            dominance.properlyDominates(user, step.getOperation()))
          committed[commit.getStage()] = true;
  int64_t missing = llvm::find(committed, false) - committed.begin();
  if (missing == stages)
    return;
  if (llvm::none_of(committed, [](bool c) { return c; })) {
    error(step) << "steps past a slot it did not fill: no producer_commit "
                   "of the slot runs before it on every path (a consumer "
                   "advances with consumer_release; a producer that skips "
                   "a slot leaves the consumers waiting for it)"
                << where(step.getPipeline());
    return;
  }
  error(step) << "steps past a slot whose sub-stage " << missing
              << " it did not commit on every path: the consumers wait for "
                 "that data forever"
              << where(step.getPipeline(), missing);
}

//===----------------------------------------------------------------------===//
// 3. Branches that advance a state differently
//===----------------------------------------------------------------------===//

void ProtocolChecker::checkBranches() {
  root->walk([&](Operation *op) {
    // A block of unstructured control flow merges the states its
    // predecessors pass.
    for (Region &region : op->getRegions())
      if (!region.hasOneBlock())
        for (Block &block : llvm::drop_begin(region))
          for (BlockArgument argument : block.getArguments())
            if (isState(argument))
              checkMerge(argument);
    if (!isa<scf::IfOp, scf::IndexSwitchOp, scf::ExecuteRegionOp>(op))
      return;
    for (OpResult result : op->getResults()) {
      if (!isa<PipelineType>(result.getType()))
        continue;
      SmallVector<std::optional<StateAdvance>> branches;
      bool known = true;
      for (Region &region : op->getRegions()) {
        // Each path out of the region: a single block, or each block of
        // an scf.execute_region that yields.
        for (Block &block : region) {
          auto yield = dyn_cast<scf::YieldOp>(block.getTerminator());
          if (!yield && region.hasOneBlock())
            known = false;
          if (!yield)
            continue;
          if (result.getResultNumber() >= yield.getNumOperands()) {
            known = false;
            continue;
          }
          branches.push_back(flow.traceAdvance(
              yield.getOperand(result.getResultNumber()), op));
        }
      }
      if (!known)
        return;
      if (branches.empty() || !llvm::all_of(branches, [](auto &branch) {
            return branch.has_value();
          }))
        continue;
      const std::optional<StateAdvance> *most = &branches.front();
      const std::optional<StateAdvance> *least = &branches.front();
      bool sameBase = true;
      for (const std::optional<StateAdvance> &branch : branches) {
        sameBase &=
            flow.getSlot(branch->base) == flow.getSlot(branches.front()->base);
        if (branch->slots > (*most)->slots)
          most = &branch;
        if (branch->slots < (*least)->slots)
          least = &branch;
      }
      if (!sameBase || (*most)->slots == (*least)->slots)
        continue;
      reportedBranches.insert(op);
      InFlightDiagnostic diag = error(op);
      if ((*least)->slots == 0)
        diag << "yields a state advanced in one branch but not in the other";
      else
        diag << "yields a state advanced by " << (*most)->slots
             << " slot(s) in one branch but " << (*least)->slots
             << " in another";
      diag << where(result);
      if ((*most)->lastAdvance)
        diag.attachNote((*most)->lastAdvance->getLoc())
            << advancedBy((*most)->lastAdvance);
    }
  });
}

void ProtocolChecker::checkMerge(BlockArgument argument) {
  Block *block = argument.getOwner();
  Operation *scope = block->getParentOp();
  struct Incoming {
    StateAdvance advance;
    Operation *branch;
  };
  SmallVector<Incoming> incoming;
  for (auto it = block->pred_begin(); it != block->pred_end(); ++it) {
    auto branch = dyn_cast<BranchOpInterface>((*it)->getTerminator());
    if (!branch)
      return;
    for (unsigned i = 0, e = branch->getNumSuccessors(); i < e; ++i) {
      if (branch->getSuccessor(i) != block)
        continue;
      Value forwarded = branch.getSuccessorOperands(i)[argument.getArgNumber()];
      if (!forwarded)
        return;
      std::optional<StateAdvance> advance = flow.traceAdvance(forwarded, scope);
      if (!advance)
        return;
      incoming.push_back({*advance, branch});
    }
  }
  for (const Incoming &a : incoming)
    for (const Incoming &b : incoming) {
      if (a.advance.slots <= b.advance.slots ||
          flow.getSlot(a.advance.base) != flow.getSlot(b.advance.base) ||
          a.advance.base == Value(argument))
        continue;
      InFlightDiagnostic diag =
          error(a.branch)
          << "passes to a block a state advanced by " << a.advance.slots
          << " slot(s) from its base, where another branch passes it "
             "advanced by "
          << b.advance.slots << where(argument);
      diag.attachNote(b.branch->getLoc()) << "the other branch";
      reportedBranches.insert(a.branch);
      return;
    }
}
