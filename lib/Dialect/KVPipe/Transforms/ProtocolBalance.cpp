//===- ProtocolBalance.cpp - loops and totals -----------------------------===//
//
// Part of ProtocolChecker (ProtocolChecker.h).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecker.h"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::detail;

//===----------------------------------------------------------------------===//
// 2. Balance of producer and consumer loops
//===----------------------------------------------------------------------===//

bool ProtocolChecker::carries(Operation *loop, Value pipeline) {
  for (Value carried : PipelineFlow::getCarriedStates(loop))
    if (carried && flow.getPipeline(carried) == pipeline)
      return true;
  return false;
}

void ProtocolChecker::checkBalance() {
  llvm::MapVector<Value, SmallVector<LoopSide>> loopsOf;
  for (Operation *loop : flow.getLoops()) {
    llvm::MapVector<Value, SmallVector<unsigned>> positions;
    for (auto [position, carried] :
         llvm::enumerate(PipelineFlow::getCarriedStates(loop)))
      if (carried)
        positions[flow.getPipeline(carried)].push_back(position);
    for (auto &[pipeline, carriedAt] : positions) {
      // Loops nested in a loop that carries the same pipeline run many
      // times: only the outermost ones are compared.
      bool nested = false;
      for (Operation *parent = loop->getParentOp(); parent && !nested;
           parent = parent->getParentOp())
        nested =
            isa<scf::ForOp, scf::WhileOp>(parent) && carries(parent, pipeline);
      if (nested)
        continue;
      std::optional<int64_t> perIteration;
      bool wholeChain = false;
      if (carriedAt.size() == 1) {
        unsigned position = carriedAt.front();
        perIteration = flow.getAdvancePerIteration(loop, position);
        // (An scf.for's result at the position is the state it carries.)
        if (auto forOp = dyn_cast<scf::ForOp>(loop)) {
          std::optional<StateAdvance> start =
              flow.traceAdvance(forOp.getInitArgs()[position],
                                loop->getParentOfType<FunctionOpInterface>());
          wholeChain = start && start->slots == 0 &&
                       start->base.getDefiningOp<CreateOp>() &&
                       forOp.getResult(position).use_empty();
        }
      }
      loopsOf[pipeline].push_back(
          {loop, flow.getSides(loop, pipeline), perIteration, wholeChain});
    }
  }

  for (auto &[pipeline, loops] : loopsOf)
    for (unsigned i = 0; i < loops.size(); ++i)
      for (unsigned j = i + 1; j < loops.size(); ++j) {
        const LoopSide &a = loops[i], &b = loops[j];
        if (bitEnumContainsAny(a.sides, PipelineSide::producer) &&
            bitEnumContainsAny(b.sides, PipelineSide::consumer))
          compareSides(pipeline, a, b);
        else if (bitEnumContainsAny(b.sides, PipelineSide::producer) &&
                 bitEnumContainsAny(a.sides, PipelineSide::consumer))
          compareSides(pipeline, b, a);
      }
}

void ProtocolChecker::compareSides(Value pipeline, const LoopSide &producer,
                                   const LoopSide &consumer) {
  // Two loops are the two sides' whole advance only where neither side
  // advances the pipeline outside its loop (a producer's two filled slots
  // in a loop and a third after it against a consumer's loop of three are
  // balanced): else checkTotals compares the chains' totals.
  if (!producer.perIteration || !consumer.perIteration ||
      !producer.wholeChain || !consumer.wholeChain)
    return;
  int64_t perProducer = *producer.perIteration;
  int64_t perConsumer = *consumer.perIteration;
  std::optional<int64_t> producerTrips = getTripCount(producer.loop);
  std::optional<int64_t> consumerTrips = getTripCount(consumer.loop);
  int64_t producerTotal, consumerTotal;
  if (producerTrips && consumerTrips &&
      !llvm::MulOverflow(*producerTrips, perProducer, producerTotal) &&
      !llvm::MulOverflow(*consumerTrips, perConsumer, consumerTotal)) {
    if (producerTotal == consumerTotal)
      return;
    unbalanced.insert(pipeline);
    InFlightDiagnostic diag =
        error(consumer.loop)
        << "consumer side advances " << consumerTotal << " slot(s) in total ("
        << *consumerTrips << " iteration(s) of " << perConsumer
        << ") but the producer side advances " << producerTotal << " ("
        << *producerTrips << " of " << perProducer
        << "): their phases drift apart and the pipeline hangs"
        << where(pipeline);
    diag.attachNote(producer.loop->getLoc()) << "the producer-side loop";
    return;
  }
  if (perProducer == perConsumer ||
      !haveSameTripCount(producer.loop, consumer.loop))
    return;
  unbalanced.insert(pipeline);
  InFlightDiagnostic diag =
      error(consumer.loop)
      << "consumer side advances " << perConsumer
      << " slot(s) per iteration but the producer-side loop with the same "
         "trip count advances "
      << perProducer << ": their phases drift apart and the pipeline hangs"
      << where(pipeline);
  diag.attachNote(producer.loop->getLoc()) << "the producer-side loop";
}

//===----------------------------------------------------------------------===//
// 8. Totals: the slots each side advances from the pipeline's creation
//===----------------------------------------------------------------------===//

bool ProtocolChecker::isFunctionReturn(Operation *op) {
  return op->hasTrait<OpTrait::IsTerminator>() &&
         isa_and_nonnull<FunctionOpInterface>(op->getParentOp());
}

bool ProtocolChecker::forwards(OpOperand &use) {
  Operation *user = use.getOwner();
  return returnsState(user) ||
         isa<scf::ForOp, scf::WhileOp, scf::YieldOp, scf::ConditionOp,
             CallOpInterface, BranchOpInterface>(user) ||
         user->hasTrait<OpTrait::ReturnLike>() || isFunctionReturn(user);
}

bool ProtocolChecker::endsOnSomePath(Value state) {
  Region *region = state.getParentRegion();
  if (!region || region->hasOneBlock())
    return false;
  // Blocks that pass the state on (a step, a loop or call, a return of it)
  // on every path through them, and the branch edges that carry it.
  SmallPtrSet<Block *, 8> forwarding;
  DenseSet<std::pair<Block *, unsigned>> carried;
  for (OpOperand &use : state.getUses()) {
    if (!forwards(use))
      continue;
    Block *block = region->findAncestorBlockInRegion(*use.getOwner()->getBlock());
    if (!block)
      continue;
    auto branch = dyn_cast<BranchOpInterface>(use.getOwner());
    if (!branch || branch->getBlock() != block) {
      forwarding.insert(block);
      continue;
    }
    for (unsigned i = 0, e = branch->getNumSuccessors(); i < e; ++i) {
      SuccessorOperands operands = branch.getSuccessorOperands(i);
      for (unsigned j = 0, n = operands.size(); j < n; ++j)
        if (operands[j] == state)
          carried.insert({block, i});
    }
  }
  Block *home = isa<BlockArgument>(state)
                    ? cast<BlockArgument>(state).getOwner()
                    : state.getDefiningOp()->getBlock();
  home = region->findAncestorBlockInRegion(*home);
  if (!home)
    return false;
  SmallVector<Block *> work = {home};
  SmallPtrSet<Block *, 8> seen;
  while (!work.empty()) {
    Block *block = work.pop_back_val();
    if (!seen.insert(block).second || forwarding.contains(block))
      continue;
    if (block->getNumSuccessors() == 0)
      return true; // leaves the region with the state not passed on
    for (unsigned i = 0, e = block->getNumSuccessors(); i < e; ++i)
      if (!carried.contains({block, i}))
        work.push_back(block->getSuccessor(i));
  }
  return false;
}

bool ProtocolChecker::isSameCondition(Value a, Value b) {
  return arithmetic.getValueNumber(a) == arithmetic.getValueNumber(b) &&
         isUniform(a);
}

bool ProtocolChecker::splitsThreads(Value condition, unsigned depth) {
  if (selectsThreads(condition))
    return true;
  // A helper's argument: the caller's condition, at each call in the
  // module; where nothing in the module calls the helper, the caller's
  // role condition (an assumption: docs/protocol-checking.md).
  auto argument = dyn_cast<BlockArgument>(condition);
  if (!argument || depth > 8 || !argument.getOwner()->isEntryBlock())
    return false;
  auto function =
      dyn_cast_or_null<FunctionOpInterface>(argument.getOwner()->getParentOp());
  if (!function || isKernelFunction(function))
    return false;
  if (!callSites)
    callSites.emplace(root);
  for (Operation *call : callSites->getCalls(function)) {
    auto callOp = cast<CallOpInterface>(call);
    if (argument.getArgNumber() >= callOp.getArgOperands().size() ||
        !splitsThreads(callOp.getArgOperands()[argument.getArgNumber()],
                       depth + 1))
      return false;
  }
  return true;
}

ProtocolChecker::Together
ProtocolChecker::checkChainGuards(Value pipeline, Value producer,
                                  Value consumer, Operation *scope,
                                  Operation *&split) {
  SmallVector<ChainGuard> onProducer = getChainGuards(producer, scope);
  SmallVector<ChainGuard> onConsumer = getChainGuards(consumer, scope);
  size_t shared = 0;
  while (shared < onProducer.size() && shared < onConsumer.size() &&
         onProducer[shared] == onConsumer[shared])
    ++shared;
  ArrayRef<ChainGuard> producerOnly = ArrayRef(onProducer).drop_front(shared);
  ArrayRef<ChainGuard> consumerOnly = ArrayRef(onConsumer).drop_front(shared);
  // The role split: the two ends in different branches of one op. It
  // splits the roles only where its condition differs between the threads
  // of a CTA: a CTA-uniform one (a block id, a kernel argument) takes every
  // thread of the CTA into one branch, so the two ends never run together
  // (each needs a partner in its own branch: checkTotals).
  if (!producerOnly.empty() && !consumerOnly.empty() &&
      producerOnly.front().op == consumerOnly.front().op) {
    if (!splitsThreads(producerOnly.front().condition, 0)) {
      split = producerOnly.front().op;
      return Together::never;
    }
    producerOnly = producerOnly.drop_front();
    consumerOnly = consumerOnly.drop_front();
  }
  auto matches = [&](const ChainGuard &guard, ArrayRef<ChainGuard> others) {
    return llvm::any_of(others, [&](const ChainGuard &other) {
      return guard.op->getName() == other.op->getName() &&
             guard.region == other.region &&
             guard.op->getAttrDictionary() == other.op->getAttrDictionary() &&
             isSameCondition(guard.condition, other.condition);
    });
  };
  auto check = [&](ArrayRef<ChainGuard> mine, ArrayRef<ChainGuard> theirs,
                   bool isProducer, Value otherEnd) {
    for (const ChainGuard &guard : mine) {
      if (selectsThreads(guard.condition) || matches(guard, theirs))
        continue;
      Operation *otherAt = otherEnd.getDefiningOp()
                               ? otherEnd.getDefiningOp()
                               : otherEnd.getParentRegion()->getParentOp();
      InFlightDiagnostic diag =
          unproven(guard.op)
          << "that the " << (isProducer ? "producer" : "consumer")
          << " side runs whenever the "
          << (isProducer ? "consumer" : "producer")
          << " side does: its chain of states ends under this condition "
             "and the other side's is not under the same one; where it "
             "does not hold, the "
          << (isProducer ? "consumers wait for slots nobody fills"
                         : "producer waits for slots nobody releases")
          << where(pipeline);
      diag.attachNote(otherAt->getLoc())
          << "where the " << (isProducer ? "consumer" : "producer")
          << " side's chain ends";
      return false;
    }
    return true;
  };
  return check(producerOnly, consumerOnly, true, consumer) &&
                 check(consumerOnly, producerOnly, false, producer)
             ? Together::proven
             : Together::reported;
}

void ProtocolChecker::checkTotals() {
  struct End {
    Value state;
    std::optional<LinearExpr> total;
    Operation *why = nullptr;
    /// The chain ends in unstructured control flow, whose paths are not
    /// counted.
    bool unstructured = false;
    /// The function the chain is counted in.
    Operation *scope = nullptr;
  };
  llvm::MapVector<Value, SmallVector<End>> producers, consumers;
  // Chains that advance on both sides: one thread fills slots and consumes
  // them.
  SmallVector<End> bothSides;
  DenseMap<Value, Value> created;
  // Pipelines whose chains start at a function's argument (a helper's).
  DenseMap<Value, BlockArgument> received;
  for (Value state : flow.getStates()) {
    if (llvm::any_of(state.getUses(),
                     [](OpOperand &use) { return forwards(use); }) &&
        !endsOnSomePath(state))
      continue;
    // A state merged from several pipelines only to read a ring index:
    // no chain of the protocol (checkFlow reports any other use).
    if (flow.isMixed(state) &&
        llvm::all_of(state.getUsers(),
                     [](Operation *user) { return isa<IndexOp>(user); }))
      continue;
    Operation *scope = state.getParentRegion()->getParentOp();
    while (scope && !isa<FunctionOpInterface>(scope) && scope != root)
      scope = scope->getParentOp();
    if (!scope)
      continue;
    PathFacts facts;
    for (Region *region = state.getParentRegion();
         region && region->getParentOp() != scope;
         region = region->getParentOp()->getParentRegion())
      arithmetic.addBranchFacts(region, facts);
    Value base;
    PipelineSide sides = PipelineSide::none;
    Operation *why = nullptr;
    std::optional<LinearExpr> total =
        arithmetic.traceAdvance(state, scope, facts, base, sides, why);
    // Under unstructured control flow (a region of several blocks) the
    // chain runs on some paths only: which ones is not counted.
    bool unstructured = false;
    for (Region *region = state.getParentRegion(); region;
         region = region->getParentOp()->getParentRegion()) {
      if (!region->hasOneBlock()) {
        unstructured = true;
        total = std::nullopt;
        why = region->front().getTerminator();
        break;
      }
      if (region->getParentOp() == scope)
        break;
    }
    // A chain that ends inside a loop body without being carried out is
    // a state the loop drops: linear use (an old state yielded), the yield
    // rules (another state or an outer one yielded) report it.
    if (!total && why && isa<LoopLikeOpInterface>(why) &&
        why->isAncestor(state.getParentRegion()->getParentOp()))
      continue;
    Value pipeline = flow.getPipeline(state);
    if (base && base.getDefiningOp<CreateOp>())
      created[pipeline] = base;
    if (auto argument = dyn_cast_or_null<BlockArgument>(base);
        argument && argument.getOwner()->isEntryBlock() &&
        isa_and_nonnull<FunctionOpInterface>(
            argument.getOwner()->getParentOp()))
      received[pipeline] = argument;
    if (sides == PipelineSide::producer)
      producers[pipeline].push_back({state, total, why, unstructured, scope});
    else if (sides == PipelineSide::consumer)
      consumers[pipeline].push_back({state, total, why, unstructured, scope});
    else if (sides == PipelineSide::none && !total && why)
      producers[pipeline].push_back({state, total, why, unstructured, scope});
    else if (sides == (PipelineSide::producer | PipelineSide::consumer))
      bothSides.push_back({state, total, why, unstructured, scope});
  }

  auto describeEnd = [&](End end) {
    if (Operation *def = end.state.getDefiningOp())
      return def;
    // A block's argument (a cf loop's state): the block's first op.
    Block *block = cast<BlockArgument>(end.state).getOwner();
    if (!block->isEntryBlock() && !block->empty())
      return &block->front();
    return end.state.getParentRegion()->getParentOp();
  };
  // (A function nothing in the module calls is a library's entry: its
  // callers, elsewhere, hold the other side; docs/protocol-checking.md.)
  auto reportHelperOnlySide = [&](const End &end, Value pipeline,
                                  bool producer) {
    auto function = dyn_cast_or_null<FunctionOpInterface>(end.scope);
    if (!function || flow.getCallSites(function).empty())
      return;
    unproven(describeEnd(end))
        << "that the " << (producer ? "consumer" : "producer")
        << " side advances this pipeline by as many slots as this "
        << (producer ? "producer" : "consumer")
        << " chain: the chain ends in a function that receives the "
           "pipeline, where it has no "
        << (producer ? "consumer" : "producer")
        << " side, and totals are compared only between chains that end in "
           "one function (return the state to the caller, or run both "
           "sides in the helper)"
        << where(pipeline);
  };
  for (auto &[pipeline, ends] : producers) {
    if (unbalanced.contains(pipeline))
      continue;
    auto consumerIt = consumers.find(pipeline);
    SmallVector<End> all(ends);
    if (consumerIt != consumers.end())
      llvm::append_range(all, consumerIt->second);
    // What cannot be counted.
    const End *unknown = nullptr;
    for (const End &end : all)
      if (!end.total) {
        unknown = &end;
        break;
      }
    if (unknown) {
      Operation *at = unknown->why ? unknown->why : describeEnd(*unknown);
      if (unfollowed.contains(at) || reportedBranches.contains(at))
        continue;
      if (unknown->unstructured) {
        InFlightDiagnostic diag =
            unproven(at)
            << "that the producer and consumer sides advance the same "
               "number of slots through unstructured control flow: the "
               "checker does not count the paths of 'cf' branches"
            << where(pipeline);
        diag.attachNote(describeEnd(*unknown)->getLoc())
            << "a chain of the pipeline's states ends here";
        continue;
      }
      unproven(at) << "that the producer and consumer sides advance the "
                      "same number of slots: the checker cannot count the "
                      "slots through this op"
                   << where(pipeline);
      continue;
    }
    if (consumerIt == consumers.end()) {
      // One side only: the other is a caller's or callee's. Totals are
      // compared between chains that end in one function; a helper's chain
      // that ends there (it does not return the state) is compared with
      // nothing.
      if (received.count(pipeline))
        reportHelperOnlySide(ends.front(), pipeline, /*producer=*/true);
      continue;
    }
    const End &first = ends.front();
    bool allEqual = true;
    for (const End &end : all) {
      if (*end.total == *first.total)
        continue;
      allEqual = false;
      bool consumer = llvm::is_contained(
          llvm::map_range(consumerIt->second,
                          [](const End &e) { return e.state; }),
          end.state);
      if (first.total->isConstant() && end.total->isConstant()) {
        InFlightDiagnostic diag =
            error(describeEnd(end))
            << (consumer ? "consumer" : "producer") << " side advances "
            << end.total->constant << " slot(s) in total but the producer "
            << "side advances " << first.total->constant
            << ": their phases drift apart and the pipeline hangs"
            << where(pipeline);
        diag.attachNote(describeEnd(first)->getLoc())
            << "where the producer side ends";
      } else {
        InFlightDiagnostic diag =
            unproven(describeEnd(end))
            << "that the producer and consumer loops advance the same "
               "number of slots: the "
            << (consumer ? "consumer" : "producer") << " side advances "
            << arithmetic.print(*end.total) << " and the producer side "
            << arithmetic.print(*first.total) << where(pipeline);
        diag.attachNote(describeEnd(first)->getLoc())
            << "where the producer side ends";
      }
      break;
    }
    // Equal totals are equal counts only where each atom is the same on
    // every thread: the producer's and the consumer's threads evaluate
    // the bounds on their own.
    if (!allEqual)
      continue;
    if (Value atom = arithmetic.getNonUniformAtom(*first.total)) {
      const End &end = consumerIt->second.front();
      std::string name;
      llvm::raw_string_ostream os(name);
      atom.printAsOperand(os, OpPrintingFlags());
      InFlightDiagnostic diag =
          unproven(describeEnd(end))
          << "that the producer and consumer loops advance the same "
             "number of slots: both sides advance "
          << arithmetic.print(*first.total) << ", but " << name
          << " is not known to be the same on every thread of the CTA (a "
             "thread, lane or warpgroup id, a value loaded from memory, an "
             "undefined value (undef, poison, freeze), or one the checker "
             "cannot follow), and the producer's and the "
             "consumer's threads each compute it"
          << where(pipeline);
      diag.attachNote(atom.getLoc()) << "the value";
      diag.attachNote(describeEnd(first)->getLoc())
          << "where the producer side ends";
      continue;
    }
    // Equal counts, but each side runs its chain only under the
    // conditions its end is nested in. Ends in the branches of a branch
    // that does not split the threads (a CTA-uniform condition) never run
    // together: each end needs a partner that runs with it.
    auto sameScope = [](const End &a, const End &b) {
      return a.scope == b.scope;
    };
    bool reported = false;
    DenseSet<Value> partnered;
    Operation *split = nullptr;
    const End *alone = nullptr, *other = nullptr;
    for (const End &producer : ends) {
      bool found = false;
      for (const End &consumer : consumerIt->second) {
        if (!sameScope(producer, consumer))
          continue;
        Operation *at = nullptr;
        Together together = checkChainGuards(pipeline, producer.state,
                                             consumer.state, producer.scope, at);
        if (together == Together::reported) {
          reported = true;
          break;
        }
        if (together == Together::proven) {
          found = true;
          partnered.insert(consumer.state);
        } else if (!split) {
          split = at;
          other = &consumer;
        }
      }
      if (reported)
        break;
      if (!found && split && !alone)
        alone = &producer;
    }
    if (reported || !split)
      continue;
    if (!alone)
      for (const End &consumer : consumerIt->second)
        if (!partnered.contains(consumer.state) &&
            llvm::any_of(ends, [&](const End &producer) {
              return sameScope(producer, consumer);
            })) {
          alone = &consumer;
          break;
        }
    if (!alone)
      continue;
    bool producerAlone = llvm::any_of(
        ends, [&](const End &end) { return &end == alone; });
    InFlightDiagnostic diag =
        unproven(split)
        << "that the producer and the consumer sides both run: this branch "
           "splits them, but its condition is not computed from the "
           "thread's identity (thread, lane, warp or warpgroup id), so it "
           "may take every thread of the CTA the same way (a block id, a "
           "kernel argument), and then the "
        << (producerAlone ? "producer" : "consumer")
        << " side runs without the other, which it may wait for forever"
        << where(pipeline);
    diag.attachNote(describeEnd(*alone)->getLoc())
        << "where the " << (producerAlone ? "producer" : "consumer")
        << " side's chain ends";
    if (other && producerAlone)
      diag.attachNote(describeEnd(*other)->getLoc())
          << "where the consumer side's chain ends, in another branch";
  }
  // The totals compare a producer's chain with a consumer's; a chain on
  // which one thread does both (fills a slot, steps, waits on the next) is
  // not compared with itself: whether each of its waits follows a fill of
  // the same slot is not proven.
  for (const End &end : bothSides) {
    Value pipeline = flow.getPipeline(end.state);
    if (unbalanced.contains(pipeline))
      continue;
    unproven(describeEnd(end))
        << "that the slots this chain of states waits on are filled: it "
           "advances on both the producer and the consumer side (one thread "
           "fills slots and consumes them), and a chain's fills are compared "
           "with another chain's waits, not with its own"
        << where(pipeline);
  }
  // The mirror of the producers' check above: a helper's consumer chains
  // with no producer side there.
  for (auto &[pipeline, ends] : consumers)
    if (!producers.count(pipeline) && received.count(pipeline) &&
        !unbalanced.contains(pipeline) &&
        llvm::all_of(ends, [](const End &end) { return end.total; }))
      reportHelperOnlySide(ends.front(), pipeline, /*producer=*/false);
  // A consumer side without a producer in a function that creates the
  // pipeline waits forever.
  for (auto &[pipeline, ends] : consumers) {
    if (producers.count(pipeline) || !created.count(pipeline) ||
        unbalanced.contains(pipeline))
      continue;
    unproven(describeEnd(ends.front()))
        << "that the consumed slots are ever filled: the pipeline has no "
           "producer side"
        << where(pipeline);
  }
  // The mirror: a producer side without a consumer in a function that
  // creates the pipeline. Past the ring's kv_stages slots, the producer
  // waits for a release that never comes; within them, nothing reads
  // what it filled (or a consumer elsewhere does: not in this module).
  for (auto &[pipeline, ends] : producers) {
    if (consumers.count(pipeline) || !created.count(pipeline) ||
        unbalanced.contains(pipeline))
      continue;
    // A chain that cannot be counted is reported above.
    if (llvm::any_of(ends, [](const End &end) { return !end.total; }))
      continue;
    auto type = cast<PipelineType>(pipeline.getType());
    const End *over = nullptr;
    for (const End &end : ends)
      if (end.total && end.total->isConstant() &&
          end.total->constant > type.getKvStages()) {
        over = &end;
        break;
      }
    if (over) {
      error(describeEnd(*over))
          << "fills " << over->total->constant
          << " slots but the pipeline has no consumer side: the ring has "
          << type.getKvStages()
          << " slots, so the producer waits forever for a release of the "
             "slot it refills"
          << where(pipeline);
      continue;
    }
    unproven(describeEnd(ends.front()))
        << "that the filled slots are ever consumed: the pipeline has no "
           "consumer side"
        << where(pipeline);
  }
}
