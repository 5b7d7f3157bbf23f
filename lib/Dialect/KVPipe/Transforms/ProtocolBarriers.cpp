//===- ProtocolBarriers.cpp - init and arrival counts ---------------------===//
//
// Part of ProtocolChecker (ProtocolChecker.h).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecker.h"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::detail;

//===----------------------------------------------------------------------===//
// 6. Barriers: one kvpipe.init per kvpipe.create, by the whole CTA
//===----------------------------------------------------------------------===//

Operation *ProtocolChecker::findRepeatOrCondition(Operation *op) {
  for (Operation *parent = op->getParentOp();
       parent && !isa<FunctionOpInterface>(parent);
       parent = parent->getParentOp()) {
    if (isa<scf::ExecuteRegionOp>(parent))
      continue;
    // A condition every thread of the CTA evaluates alike (a tile without
    // work, all of whose threads leave at once) runs the create in every
    // thread or in none.
    if (auto ifOp = dyn_cast<scf::IfOp>(parent);
        ifOp && isUniform(ifOp.getCondition()))
      continue;
    return parent;
  }
  return nullptr;
}

bool ProtocolChecker::checkCreateRunsOnce(CreateOp create) {
  Operation *at = create;
  SmallPtrSet<Operation *, 4> functions;
  for (;;) {
    if (Operation *holder = findRepeatOrCondition(at)) {
      bool loop = isa<LoopLikeOpInterface, ForEachTileOp>(holder);
      InFlightDiagnostic diag =
          error(create)
          << (at == create.getOperation() ? "is " : "runs through a call ")
          << (loop ? "inside a loop: kvpipe.create and kvpipe.init run "
                     "once, by every thread of the CTA (one set of "
                     "barriers per create op: every iteration would "
                     "initialise them again while the previous one's "
                     "waits may be pending)"
                   : "under a condition: kvpipe.create and kvpipe.init "
                     "run once, by every thread of the CTA (the other "
                     "threads would use barriers nobody initialised, or "
                     "wait in the init's CTA barrier forever)")
          << where(create.getResult());
      if (at != create.getOperation())
        diag.attachNote(at->getLoc()) << "the call";
      diag.attachNote(holder->getLoc())
          << "the enclosing '" << holder->getName() << "'";
      return false;
    }
    Region *region = at->getParentRegion();
    if (!region->hasOneBlock() && at->getBlock() != &region->front()) {
      unproven(create) << "that the pipeline is created and initialised "
                          "once by every thread: "
                       << (at == create.getOperation() ? "it"
                                                       : "the call to its "
                                                         "function")
                       << " is not in the entry block of its region"
                       << where(create.getResult());
      return false;
    }
    auto function = at->getParentOfType<FunctionOpInterface>();
    if (!function || !functions.insert(function).second)
      return true; // recursion has its own callers
    SmallVector<CallOpInterface> callers;
    root->walk([&](CallOpInterface call) {
      if (flow.resolveCallee(call) == function)
        callers.push_back(call);
    });
    // A use of the function's symbol other than a call it resolves (a
    // func.constant called indirectly) may run it any number of times.
    if (std::optional<SymbolTable::UseRange> uses =
            SymbolTable::getSymbolUses(function, root))
      for (const SymbolTable::SymbolUse &use : *uses) {
        auto call = dyn_cast<CallOpInterface>(use.getUser());
        if (call && flow.resolveCallee(call) == function)
          continue;
        InFlightDiagnostic diag =
            unproven(create)
            << "that the pipeline is created and initialised once: @"
            << function.getName()
            << " is referenced other than by a direct call"
            << where(create.getResult());
        diag.attachNote(use.getUser()->getLoc()) << "the reference";
        return false;
      }
    if (callers.empty())
      return true; // the kernel: runs once per CTA
    if (callers.size() > 1) {
      InFlightDiagnostic diag =
          error(create)
          << "is in @" << function.getName() << ", called from "
          << callers.size()
          << " places: each call creates and initialises the same barriers "
             "again (one set per create op) while the previous call's "
             "waits may be pending"
          << where(create.getResult());
      for (CallOpInterface call : callers)
        diag.attachNote(call->getLoc()) << "a call";
      return false;
    }
    at = callers.front();
  }
}

void ProtocolChecker::checkBarriers() {
  SmallVector<InitOp> inits;
  root->walk([&](InitOp init) { inits.push_back(init); });
  // An init of a pipeline its function receives (a helper's argument) is
  // not next to its create: where the caller initialised it, a second init
  // resets barriers the other role may already be waiting on or arriving
  // at (the sixth audit's helper called by one role).
  auto isReceived = [](Value pipeline) {
    auto argument = dyn_cast<BlockArgument>(pipeline);
    return argument && argument.getOwner()->isEntryBlock() &&
           isa<FunctionOpInterface>(argument.getOwner()->getParentOp());
  };
  for (InitOp init : inits)
    if (isReceived(flow.getPipeline(init.getPipeline())))
      error(init) << "initialises a pipeline it did not create: kvpipe.init "
                     "belongs in the block of the kvpipe.create, once; a "
                     "pipeline passed in was initialised where it was "
                     "created, and a second init resets barriers that may "
                     "already be in use"
                  << where(init.getPipeline());
  root->walk([&](CreateOp create) {
    if (!checkCreateRunsOnce(create))
      return;
    Value pipeline = flow.getPipeline(create.getResult());
    InitOp first;
    for (InitOp init : inits) {
      if (flow.getPipeline(init.getPipeline()) != pipeline)
        continue;
      if (first) {
        InFlightDiagnostic diag =
            error(init) << "initialises the barriers a second time: every "
                           "thread of the CTA executes kvpipe.init once per "
                           "kvpipe.create, and a second init resets barriers "
                           "that may already be in use"
                        << where(create.getResult());
        diag.attachNote(first.getLoc()) << "the first kvpipe.init";
        continue;
      }
      first = init;
      // CTA-wide: in the block of the create, so that every thread that
      // created the pipeline initialises it, once.
      Operation *holder =
          create->getBlock()->findAncestorOpInBlock(*init.getOperation());
      if (!holder) {
        error(init) << "is not in the block of the kvpipe.create or nested "
                       "in it: every thread of the CTA must execute it"
                    << where(create.getResult());
        continue;
      }
      if (holder != init.getOperation()) {
        InFlightDiagnostic diag =
            error(init)
            << (isa<LoopLikeOpInterface>(holder)
                    ? "is inside a loop: kvpipe.init is executed once by "
                      "every thread of the CTA, not once per iteration"
                    : "is under a condition: kvpipe.init is CTA-wide, every "
                      "thread of the CTA must execute it (the others would "
                      "use barriers nobody initialised, or wait in its CTA "
                      "barrier forever)")
            << where(create.getResult());
        diag.attachNote(holder->getLoc())
            << "the enclosing '" << holder->getName() << "'";
        continue;
      }
      // Nothing may use the pipeline before it (reported once, at the
      // first use).
      Operation *firstUse = nullptr;
      Value usedState;
      for (Value state : flow.getStates()) {
        if (flow.getPipeline(state) != pipeline)
          continue;
        for (Operation *user : state.getUsers()) {
          Operation *ancestor =
              create->getBlock()->findAncestorOpInBlock(*user);
          if (!ancestor || ancestor == init.getOperation() ||
              !ancestor->isBeforeInBlock(init))
            continue;
          if (!firstUse || user->isBeforeInBlock(firstUse) ||
              (user->getBlock() != firstUse->getBlock() &&
               dominance.properlyDominates(user, firstUse))) {
            firstUse = user;
            usedState = state;
          }
        }
      }
      if (firstUse) {
        InFlightDiagnostic diag = error(firstUse)
                                  << "uses the pipeline before its kvpipe.init"
                                  << where(usedState, getStageOf(firstUse));
        diag.attachNote(init.getLoc()) << "the kvpipe.init";
      }
    }
    if (!first)
      error(create) << "is never initialised: every thread of the CTA must "
                       "execute kvpipe.init on it before its first use"
                    << where(create.getResult());
  });
}

//===----------------------------------------------------------------------===//
// CTA-wide barriers: reached by every thread of the CTA
//===----------------------------------------------------------------------===//

/// Whether the PTX in `text` has a `bar.sync` / `barrier.sync` (optionally
/// `.cta`, `.aligned`) without a thread count: the CTA-wide form (`bar.sync
/// 0;`), not a named barrier of some threads (`bar.sync 1, 256;`).
static bool hasCtaWideBarrierInstruction(StringRef text) {
  for (StringRef name : {"bar.sync", "barrier.sync", "bar.cta.sync",
                         "barrier.cta.sync"}) {
    for (size_t at = text.find(name); at != StringRef::npos;
         at = text.find(name, at + 1)) {
      // The operands up to the end of the instruction: one (the barrier)
      // for all threads, two (the barrier and a count) for some.
      StringRef operands = text.drop_front(at + name.size())
                               .take_until([](char c) { return c == ';'; });
      if (!operands.contains(','))
        return true;
    }
  }
  return false;
}

bool ProtocolChecker::isCtaWideBarrier(Operation *op) {
  if (isa<gpu::BarrierOp, NVVM::Barrier0Op>(op))
    return true;
  if (auto barrier = dyn_cast<NVVM::BarrierOp>(op))
    return !barrier.getNumberOfThreads();
  if (auto intrinsic = dyn_cast<LLVM::CallIntrinsicOp>(op)) {
    StringRef name = intrinsic.getIntrin();
    return name == "llvm.nvvm.barrier0" ||
           (name.starts_with("llvm.nvvm.barrier") && name.ends_with(".all"));
  }
  if (auto assembly = dyn_cast<LLVM::InlineAsmOp>(op))
    return hasCtaWideBarrierInstruction(assembly.getAsmString());
  return false;
}

std::optional<int64_t> ProtocolChecker::getCtaWideBarrierId(Operation *op) {
  if (auto all = dyn_cast<NVVM::BarrierOp>(op); all && all.getBarrierId())
    return getConstantIntValue(all.getBarrierId());
  return 0;
}

std::optional<ProtocolChecker::NamedBarrierOp>
ProtocolChecker::getNamedBarrierOp(Operation *op) {
  if (auto sync = dyn_cast<NVVM::BarrierOp>(op)) {
    if (sync.getNumberOfThreads())
      return NamedBarrierOp{op, sync.getBarrierId(), sync.getNumberOfThreads(),
                            /*waits=*/true};
  } else if (auto arrive = dyn_cast<NVVM::BarrierArriveOp>(op)) {
    return NamedBarrierOp{op, arrive.getBarrierId(),
                          arrive.getNumberOfThreads(), /*waits=*/false};
  }
  return std::nullopt;
}

void ProtocolChecker::checkCtaBarriers() {
  SmallVector<Operation *> barriers;
  root->walk([&](Operation *op) {
    if (isCtaWideBarrier(op))
      barriers.push_back(op);
  });
  if (barriers.empty())
    return;
  CallSites sites(root);
  for (Operation *barrier : barriers) {
    // The barrier, then each call that runs the function holding it (up the
    // callers in the module), must run on every thread the same number of
    // times.
    SmallVector<Operation *> worklist = {barrier};
    DenseSet<Operation *> seen;
    while (!worklist.empty()) {
      Operation *at = worklist.pop_back_val();
      if (!seen.insert(at).second)
        continue;
      if (!checkReachedByAll(barrier, at))
        break;
      auto function = at->getParentOfType<FunctionOpInterface>();
      if (!function)
        continue;
      for (Operation *call : sites.getCalls(function))
        worklist.push_back(call);
    }
  }
}

void ProtocolChecker::checkNamedBarriers() {
  auto uniform = [&](Value v) { return isUniform(v); };
  root->walk([&](FunctionOpInterface function) {
    // The named barrier ops of the function (not of functions nested in it).
    SmallVector<NamedBarrierOp> barriers;
    function->walk([&](Operation *op) {
      if (op->getParentOfType<FunctionOpInterface>() != function)
        return;
      if (std::optional<NamedBarrierOp> barrier = getNamedBarrierOp(op))
        barriers.push_back(*barrier);
    });
    if (barriers.empty())
      return;
    // In a helper, or a kernel of unknown block size outside roles, the
    // threads that run it are not known here (the assumptions).
    std::optional<ThreadScope> scope = getThreadScope(barriers.front().op);
    if (!scope || !scope->unprovenReason.empty())
      return;
    // A count that is not whole warps, whoever runs the op.
    for (const NamedBarrierOp &barrier : barriers)
      if (std::optional<int64_t> count = getConstantIntValue(barrier.count);
          count && (*count <= 0 || *count % 32 != 0))
        error(barrier.op) << "gives a named barrier a count of " << *count
                          << " threads: a named barrier counts whole warps "
                             "(a positive multiple of 32)";
    // Per id: the threads that run its ops (`exact`: of the ops whose
    // threads are known; `most`: also every thread of the CTA for the ops
    // whose threads are not, whichever id they evaluate there), its ops,
    // the counts they give.
    struct IdUse {
      llvm::BitVector exact, most;
      SmallVector<Operation *> ops;
      SmallVector<std::pair<int64_t, Operation *>> counts;
      bool arrives = false;
      bool allKnown = true;
    };
    std::map<uint64_t, IdUse> ids;
    // An op whose id cannot be evaluated may be of any id.
    bool anyIdUnknown = false;
    for (const NamedBarrierOp &barrier : barriers) {
      ThreadCount why;
      std::pair<Operation *, Value> one = {barrier.op, Value()};
      std::optional<llvm::BitVector> threads =
          getThreads(ArrayRef(one), *scope, uniform, why);
      llvm::BitVector candidates(scope->numThreads);
      if (threads)
        candidates = *threads;
      else
        candidates.set();
      for (int tid = candidates.find_first(); tid >= 0;
           tid = candidates.find_next(tid)) {
        ThreadEvaluator eval(tid);
        std::optional<APInt> id =
            barrier.id ? eval.evaluate(barrier.id) : APInt(32, 0);
        std::optional<APInt> count = eval.evaluate(barrier.count);
        if (!id) {
          // An id computed from runtime values (the skip_idle_warpgroups
          // kernels pass the turn to a warpgroup computed from the
          // sequence length) may be any: the assumption.
          anyIdUnknown = true;
          break;
        }
        IdUse &use = ids[id->getZExtValue()];
        if (use.most.empty()) {
          use.exact.resize(scope->numThreads);
          use.most.resize(scope->numThreads);
        }
        use.most.set(tid);
        if (!threads) {
          use.allKnown = false;
          continue; // (a thread that may never run it)
        }
        use.exact.set(tid);
        if (!llvm::is_contained(use.ops, barrier.op))
          use.ops.push_back(barrier.op);
        use.arrives |= !barrier.waits;
        if (!count) {
          use.allKnown = false;
          continue;
        }
        int64_t value = count->getSExtValue();
        if (!llvm::any_of(use.counts,
                          [&](auto &entry) { return entry.first == value; }))
          use.counts.push_back({value, barrier.op});
      }
    }
    // The ids CTA-wide barriers use (barrier 0, or the id they name): every
    // thread arrives on them.
    DenseSet<uint64_t> ctaWide;
    function->walk([&](Operation *op) {
      if (!isCtaWideBarrier(op))
        return;
      if (std::optional<int64_t> id = getCtaWideBarrierId(op))
        ctaWide.insert(uint64_t(*id));
    });
    for (auto &[id, use] : ids) {
      if (use.counts.empty() || ctaWide.contains(id))
        continue;
      Operation *first = use.counts.front().second;
      int64_t count = use.counts.front().first;
      if (use.counts.size() > 1) {
        InFlightDiagnostic diag =
            error(use.counts[1].second)
            << "gives named barrier " << id << " a count of "
            << use.counts[1].first << " threads where another op gives it "
            << count << ": the ops that meet on one barrier must agree on "
            << "its count";
        diag.attachNote(first->getLoc()) << "the count " << count;
        continue;
      }
      if (count <= 0 || count % 32 != 0)
        continue; // (reported above)
      auto noteOthers = [&](InFlightDiagnostic &diag) {
        for (Operation *op : use.ops)
          if (op != first)
            diag.attachNote(op->getLoc())
                << "another op of named barrier " << id;
      };
      // Fewer threads than the count, even counting every thread that may
      // run an op whose threads are not known: a bar.sync never completes
      // (a thread blocked in it arrives once per phase).
      int64_t most = use.most.count();
      if (!anyIdUnknown && most < count && !use.arrives) {
        InFlightDiagnostic diag =
            error(first) << "is reached by " << most << " thread"
                         << (most == 1 ? "" : "s") << scope->description
                         << " on named barrier " << id << ", whose count is "
                         << count << ": its phase never completes (a hang)";
        noteOthers(diag);
        continue;
      }
      // Where the threads of every op of the id are known (else: the
      // assumption that a condition the checker cannot evaluate lets the
      // count through).
      int64_t reaching = use.exact.count();
      if (!use.allKnown || anyIdUnknown || reaching == count)
        continue;
      InFlightDiagnostic diag =
          reaching < count
              ? unproven(first)
                    << "that named barrier " << id << " (count " << count
                    << ") completes: " << reaching << " thread"
                    << (reaching == 1 ? "" : "s") << scope->description
                    << " reach it, and a thread that only arrives may "
                       "arrive more than once in a phase"
              : unproven(first)
                    << "that the " << reaching << " threads"
                    << scope->description << " that reach named barrier " << id
                    << " meet it in phases of its count " << count
                    << ": which of them share a phase is not checked";
      noteOthers(diag);
    }
  });
}

bool ProtocolChecker::checkReachedByAll(Operation *barrier, Operation *at) {
  auto note = [&](InFlightDiagnostic &diag) {
    if (at != barrier)
      diag.attachNote(at->getLoc()) << "the call that runs it";
  };
  // Outside any function nothing executes (the verifier's business).
  if (!at->getParentOfType<FunctionOpInterface>())
    return true;
  // Loops and regions around it, below its function: a loop whose bounds
  // are not CTA-uniform runs it a different number of times on different
  // threads; a block other than the entry block of a region of several
  // blocks runs on the paths that reach it.
  for (Operation *child = at; !isa<FunctionOpInterface>(child->getParentOp());
       child = child->getParentOp()) {
    Operation *parent = child->getParentOp();
    Region *region = child->getParentRegion();
    if (!region->hasOneBlock() && child->getBlock() != &region->front()) {
      InFlightDiagnostic diag =
          unproven(barrier)
          << "that every thread of the CTA reaches this CTA-wide barrier: it "
             "runs in a block of unstructured control flow, on the paths "
             "that branch to it";
      note(diag);
      return false;
    }
    bool varies = false;
    if (auto forOp = dyn_cast<scf::ForOp>(parent)) {
      for (Value bound : {forOp.getLowerBound(), forOp.getUpperBound(),
                          forOp.getStep()})
        varies |= !isUniform(bound);
    } else if (auto whileOp = dyn_cast<scf::WhileOp>(parent)) {
      scf::ConditionOp condition = whileOp.getConditionOp();
      varies = !condition || !isUniform(condition.getCondition());
    } else if (!isa<scf::IfOp, scf::IndexSwitchOp, scf::ExecuteRegionOp,
                    WarpRolesOp, ForEachTileOp>(parent)) {
      InFlightDiagnostic diag =
          unproven(barrier)
          << "that every thread of the CTA reaches this CTA-wide barrier: it "
             "is nested in '"
          << parent->getName() << "', which the checker does not follow";
      note(diag);
      return false;
    }
    if (varies) {
      InFlightDiagnostic diag =
          unproven(barrier)
          << "that every thread of the CTA reaches this CTA-wide barrier "
             "equally often: the loop around it runs a number of times that "
             "is not known to be the same on every thread";
      diag.attachNote(parent->getLoc()) << "the loop";
      note(diag);
      return false;
    }
  }
  // The branches around it: evaluated per thread where the CTA's threads
  // are known, else each condition must be CTA-uniform.
  std::optional<ThreadScope> scope = getThreadScope(at);
  if (!scope) {
    for (Operation *parent = at->getParentOp();
         parent && !isa<FunctionOpInterface>(parent);
         parent = parent->getParentOp()) {
      Value condition;
      if (auto ifOp = dyn_cast<scf::IfOp>(parent))
        condition = ifOp.getCondition();
      else if (auto indexSwitch = dyn_cast<scf::IndexSwitchOp>(parent))
        condition = indexSwitch.getArg();
      if (!condition || isUniform(condition))
        continue;
      InFlightDiagnostic diag =
          selectsThreads(condition)
              ? error(barrier)
                    << "is a CTA-wide barrier under a condition on the "
                       "thread's identity: the threads that do not take the "
                       "branch never arrive, and the ones that do wait in it "
                       "forever"
              : unproven(barrier)
                    << "that every thread of the CTA reaches this CTA-wide "
                       "barrier: it is under a condition that is not known "
                       "to be the same on every thread";
      diag.attachNote(parent->getLoc()) << "the condition";
      note(diag);
      return false;
    }
    return true;
  }
  ThreadCount count =
      countThreads(at, Value(), *scope, [&](Value v) { return isUniform(v); });
  if (count.unprovenReason) {
    InFlightDiagnostic diag =
        unproven(barrier)
        << "that every thread of the CTA reaches this CTA-wide barrier: ";
    if (!count.unprovenReason->empty())
      diag << (at == barrier ? "it " : "the call that runs it ")
           << *count.unprovenReason;
    else
      diag << "the checker cannot evaluate, per thread" << scope->description
           << ", a condition around it";
    if (count.unknownValue)
      diag.attachNote(count.unknownValue.getLoc()) << "this value";
    note(diag);
    return false;
  }
  if (count.total == scope->numThreads)
    return true;
  std::string counts;
  for (auto [i, n] : llvm::enumerate(count.perWarpgroup))
    counts += (i ? ", " : "") + std::to_string(n);
  InFlightDiagnostic diag =
      error(barrier) << "is a CTA-wide barrier that " << count.total
                     << " of the " << scope->numThreads << " threads"
                     << scope->description << " reach (" << counts
                     << " per warpgroup): the others never arrive (a role "
                        "that does not run it, threads a condition leaves "
                        "out), and the threads that do wait in it forever";
  // The innermost role or condition around it.
  for (Operation *parent = at->getParentOp();
       parent && !isa<FunctionOpInterface>(parent);
       parent = parent->getParentOp())
    if (isa<WarpRolesOp, scf::IfOp, scf::IndexSwitchOp>(parent)) {
      diag.attachNote(parent->getLoc())
          << (isa<WarpRolesOp>(parent) ? "the warp roles" : "the condition");
      break;
    }
  note(diag);
  return false;
}

//===----------------------------------------------------------------------===//
// Arrival counts: the threads that run each release and commit
//===----------------------------------------------------------------------===//

void ProtocolChecker::checkReleaseArrivals() {
  // The releases (commits) of one pipeline and sub-stage arrive on the
  // phases of one barrier: one group, whose threads are counted together
  // (the ops may be in branches on the thread, or in loops of chains that
  // different threads run, each with its own threads).
  llvm::MapVector<std::tuple<Value, int64_t, int>,
                  SmallVector<std::pair<Operation *, Value>>>
      groups;
  root->walk([&](Operation *op) {
    auto release = dyn_cast<ConsumerReleaseOp>(op);
    if (release && matchPattern(release.getElected(), m_Zero())) {
      error(release) << "releases the slot with no thread: its elected "
                        "operand is constant false, so nobody arrives on the "
                        "consumer barrier and the producer's next acquire of "
                        "the slot waits forever"
                     << where(release.getPipeline(), release.getStage());
      return;
    }
    if (!isa<ConsumerReleaseOp, ProducerCommitOp>(op))
      return;
    auto protocol = cast<PipelineProtocolOpInterface>(op);
    groups[{flow.getPipeline(protocol.getPipeline()), *protocol.getSubStage(),
            release ? 0 : 1}]
        .push_back(
        {op, release ? release.getElected() : Value()});
  });
  for (auto &[key, ops] : groups)
    checkArrivals(ops);
}

bool ProtocolChecker::isUniform(Value condition) {
  unsigned number = arithmetic.getValueNumber(condition);
  return !arithmetic.getNonUniformAtom(LinearExpr::ofAtom(number));
}

void ProtocolChecker::checkArrivals(
    ArrayRef<std::pair<Operation *, Value>> ops) {
  Operation *op = ops.front().first;
  std::optional<ThreadScope> scope = getThreadScope(op);
  if (!scope)
    return;
  // Ops of the group in other kernels or scopes are counted on their own.
  SmallVector<std::pair<Operation *, Value>> counted;
  for (auto entry : ops) {
    std::optional<ThreadScope> other = getThreadScope(entry.first);
    if (other && other->scope == scope->scope)
      counted.push_back(entry);
  }
  auto protocol = cast<PipelineProtocolOpInterface>(op);
  Value pipeline = protocol.getPipeline();
  std::optional<int64_t> stage = protocol.getSubStage();
  bool consumer = isa<ConsumerReleaseOp>(op);
  int64_t expected = consumer ? protocol.getPipelineType().getConsumers()
                              : protocol.getPipelineType().getProducers();
  StringRef barrier = consumer ? "consumer barrier" : "producer barrier";
  StringRef opName = consumer ? "release" : "commit";
  ThreadCount count = countThreads(counted, *scope,
                                   [&](Value v) { return isUniform(v); });
  auto noteOthers = [&](InFlightDiagnostic &diag) {
    for (auto entry : ArrayRef(counted).drop_front())
      diag.attachNote(entry.first->getLoc())
          << "another " << opName << " of the sub-stage, which arrives on the "
          << "same barrier";
  };
  if (count.unprovenReason) {
    if (!count.unprovenReason->empty()) {
      unproven(op) << "how many threads arrive on the " << barrier << ": the "
                   << opName << " " << *count.unprovenReason
                   << where(pipeline, stage);
      return;
    }
    InFlightDiagnostic diag =
        unproven(op) << "how many threads arrive on the " << barrier
                     << " (the pipeline expects " << expected
                     << "): the checker cannot evaluate, per thread"
                     << scope->description << ", a value "
                     << (consumer ? "the release's elected operand or " : "")
                     << "a condition around it is computed from"
                     << where(pipeline, stage);
    if (count.unknownValue)
      diag.attachNote(count.unknownValue.getLoc()) << "this value";
    return;
  }
  if (count.total == expected) {
    checkArrivalsPerPhase(counted, *scope, expected, consumer);
    return;
  }
  std::string counts;
  for (auto [i, n] : llvm::enumerate(count.perWarpgroup))
    counts += (i ? ", " : "") + std::to_string(n);
  InFlightDiagnostic diag = error(op);
  diag << count.total << " thread" << (count.total == 1 ? "" : "s")
       << scope->description << " arrive on the " << barrier << " per "
       << opName << " (" << counts << " per warpgroup)"
       << ", but the pipeline expects "
       << (consumer ? "consumers" : "producers") << " = " << expected;
  if (consumer)
    diag << (count.total < expected
                 ? ": the phase never completes and the producer's next "
                   "acquire of the slot waits forever"
                 : ": the phase completes early, and the producer refills "
                   "the slot while a consumer warpgroup may still read it");
  else
    diag << (count.total < expected
                 ? ": the phase never completes and the consumers' wait for "
                   "the slot never returns"
                 : ": the phase completes early (the extra arrivals fall "
                   "into the slot's next phase), and the consumers read the "
                   "slot before every producer thread filled it");
  diag << where(pipeline, stage);
  noteOthers(diag);
  if (auto roles = op->getParentOfType<WarpRolesOp>())
    diag.attachNote(roles.getLoc()) << "the warp roles";
  else
    diag.attachNote(scope->scope->getLoc()) << "the kernel";
}

/// Whether `a` and `b` run on different threads: in different regions of
/// their innermost common ancestor, a branch the checker evaluates per
/// thread (an scf.if or scf.index_switch on a condition that is not
/// CTA-uniform, or the roles of kvpipe.warp_roles).
static bool areThreadAlternatives(Operation *a, Operation *b,
                                  function_ref<bool(Value)> isUniform) {
  Operation *common = a->getParentOp();
  while (common && !common->isAncestor(b))
    common = common->getParentOp();
  if (!common || !isa<scf::IfOp, scf::IndexSwitchOp, WarpRolesOp>(common))
    return false;
  if (auto ifOp = dyn_cast<scf::IfOp>(common); ifOp && isUniform(ifOp.getCondition()))
    return false;
  if (auto indexSwitch = dyn_cast<scf::IndexSwitchOp>(common);
      indexSwitch && isUniform(indexSwitch.getArg()))
    return false;
  for (Region &region : common->getRegions())
    if (region.isAncestor(a->getParentRegion()))
      return !region.isAncestor(b->getParentRegion());
  return false;
}

void ProtocolChecker::checkArrivalsPerPhase(
    ArrayRef<std::pair<Operation *, Value>> ops, const ThreadScope &scope,
    int64_t expected, bool consumer) {
  // The count above unites the threads of every op of the sub-stage, which
  // is each phase's only where the ops are alternatives: one phase's
  // arrivals from ops on different threads' paths. Ops that one thread may
  // run one after the other (a peeled first release and the loop's), or the
  // branches of a CTA-uniform condition, arrive on separate phases, each of
  // which must get every arrival alone.
  auto uniform = [&](Value v) { return isUniform(v); };
  for (auto [i, entry] : llvm::enumerate(ops)) {
    ThreadCount alone = countThreads(ArrayRef(entry), scope, uniform);
    if (alone.unprovenReason || alone.total == expected)
      continue;
    // Its phase's other arrivals come from its thread alternatives, which
    // must be alternatives of each other too.
    SmallVector<std::pair<Operation *, Value>> phase = {entry};
    for (auto [j, other] : llvm::enumerate(ops))
      if (j != i && areThreadAlternatives(entry.first, other.first, uniform))
        phase.push_back(other);
    bool exclusive = true;
    for (size_t x = 1; x < phase.size(); ++x)
      for (size_t y = x + 1; y < phase.size(); ++y)
        exclusive &=
            areThreadAlternatives(phase[x].first, phase[y].first, uniform);
    ThreadCount together = countThreads(phase, scope, uniform);
    if (exclusive && !together.unprovenReason && together.total == expected)
      continue;
    InFlightDiagnostic diag =
        unproven(entry.first)
        << "how many threads arrive on each phase of the "
        << (consumer ? "consumer barrier" : "producer barrier") << ": this "
        << (consumer ? "release" : "commit") << " alone arrives "
        << alone.total << " time" << (alone.total == 1 ? "" : "s")
        << " (the pipeline expects " << expected
        << "), and the other ops of the sub-stage whose threads make up the "
           "count may run as separate phases (one after the other, or in the "
           "branches of a CTA-uniform condition), not on other threads' "
           "paths of the same phase"
        << where(cast<PipelineProtocolOpInterface>(entry.first).getPipeline(),
                 cast<PipelineProtocolOpInterface>(entry.first).getSubStage());
    for (auto other : ops)
      if (other.first != entry.first)
        diag.attachNote(other.first->getLoc())
            << "another " << (consumer ? "release" : "commit")
            << " of the sub-stage";
    return;
  }
}
