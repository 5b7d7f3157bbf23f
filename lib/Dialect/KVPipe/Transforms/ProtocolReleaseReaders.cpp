//===- ProtocolReleaseReaders.cpp - readers covered by arrivals -----------===//
//
// Part of ProtocolChecker (ProtocolChecker.h).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecker.h"

#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::detail;

//===----------------------------------------------------------------------===//
// 11. Readers covered: every thread that reads a slot between its
// consumer_wait and its consumer_release is done reading before an arrival
// of the release completes the phase
//===----------------------------------------------------------------------===//

/// Whether `callee` issues a wgmma (directly or through helpers it calls):
/// a call that passes it a slot reads the slot warpgroup-collectively.
static bool issuesWgmma(FunctionOpInterface callee) {
  if (!callee || callee.isExternal())
    return false;
  return callee
      ->walk([](WarpgroupMmaOp) { return WalkResult::interrupt(); })
      .wasInterrupted();
}

void ProtocolChecker::collectSlotReaders() {
  auto add = [&](Operation *op, ArrayRef<Value> slots, bool collective,
                 bool certain) {
    for (Value slot : slots)
      slotReaders.push_back({op, slot, collective, certain});
  };
  root->walk([&](Operation *op) {
    if (auto mma = dyn_cast<WarpgroupMmaOp>(op)) {
      SmallVector<Value> slots;
      for (Value operand : {Value(mma.getA()), Value(mma.getB())}) {
        if (!isa<MemRefType>(operand.getType()))
          continue;
        Operation *unknown = nullptr;
        for (Value slot : getSlotsRead(operand, unknown))
          if (!llvm::is_contained(slots, slot))
            slots.push_back(slot);
      }
      add(op, slots, /*collective=*/true, /*certain=*/true);
      return;
    }
    if (auto call = dyn_cast<CallOpInterface>(op)) {
      SmallVector<Value> slots;
      for (Value operand : call.getArgOperands()) {
        Operation *unknown = nullptr;
        SmallVector<Value> here;
        if (isa<MemRefType>(operand.getType()))
          here = getSlotsRead(operand, unknown);
        else if (operand.getType().isIntOrIndex())
          here = getSlotsOf(operand, 0, unknown);
        for (Value slot : here)
          if (!llvm::is_contained(slots, slot))
            slots.push_back(slot);
      }
      if (slots.empty())
        return;
      FunctionOpInterface callee = flow.resolveCallee(call);
      if (mayAccessSharedMemory(callee))
        add(op, slots, /*collective=*/false, /*certain=*/false);
      else if (issuesWgmma(callee))
        add(op, slots, /*collective=*/true, /*certain=*/false);
      return;
    }
    if (isa<AsyncSlotCopyOpInterface, PipelineProtocolOpInterface,
            ViewLikeOpInterface>(op))
      return;
    SmallVector<Value> slots;
    for (auto [position, operand] : llvm::enumerate(op->getOperands())) {
      if (!isa<MemRefType>(operand.getType()) || !accessesMemRef(op, operand))
        continue;
      Operation *unknown = nullptr;
      SmallVector<Value> here = getSlotsRead(operand, unknown);
      for (Value index : getIndexOperands(op, position)) {
        SmallVector<Value> more = getSlotsOf(index, 0, unknown);
        here.append(more.begin(), more.end());
      }
      for (Value slot : here)
        if (!llvm::is_contained(slots, slot))
          slots.push_back(slot);
    }
    add(op, slots, /*collective=*/false, /*certain=*/true);
  });
}

/// Whether `barrier` is a named barrier (`nvvm.barrier` with a constant id
/// and thread count) and its id and count.
static std::optional<std::pair<int64_t, int64_t>>
getNamedBarrier(Operation *op) {
  auto barrier = dyn_cast<NVVM::BarrierOp>(op);
  if (!barrier || !barrier.getBarrierId() || !barrier.getNumberOfThreads())
    return std::nullopt;
  std::optional<int64_t> id = getConstantIntValue(barrier.getBarrierId());
  std::optional<int64_t> count =
      getConstantIntValue(barrier.getNumberOfThreads());
  if (!id || !count)
    return std::nullopt;
  return std::make_pair(*id, *count);
}

/// Whether the loops around `op` (in its function) run alike on every
/// thread, so that each thread's k-th run of `op` is the same iteration.
static bool runsAlikeOnEveryThread(Operation *op,
                                   function_ref<bool(Value)> isUniform) {
  for (Operation *at = op; !isa<FunctionOpInterface>(at->getParentOp());
       at = at->getParentOp()) {
    Operation *parent = at->getParentOp();
    if (!at->getParentRegion()->hasOneBlock())
      return false;
    if (auto forOp = dyn_cast<scf::ForOp>(parent)) {
      for (Value bound :
           {forOp.getLowerBound(), forOp.getUpperBound(), forOp.getStep()})
        if (!isUniform(bound))
          return false;
    } else if (auto whileOp = dyn_cast<scf::WhileOp>(parent)) {
      scf::ConditionOp condition = whileOp.getConditionOp();
      if (!condition || !isUniform(condition.getCondition()))
        return false;
    } else if (!isa<scf::IfOp, scf::IndexSwitchOp, scf::ExecuteRegionOp,
                    WarpRolesOp, ForEachTileOp>(parent)) {
      return false;
    }
  }
  return true;
}

/// Whether `op` may be a barrier of some threads whose id the checker does
/// not know: inline assembly or an intrinsic call that names a barrier.
static bool isOtherBarrier(Operation *op) {
  if (auto assembly = dyn_cast<LLVM::InlineAsmOp>(op)) {
    StringRef text = assembly.getAsmString();
    return text.contains("bar.") || text.contains("barrier.");
  }
  if (auto intrinsic = dyn_cast<LLVM::CallIntrinsicOp>(op))
    return intrinsic.getIntrin().starts_with("llvm.nvvm.barrier") ||
           intrinsic.getIntrin().starts_with("llvm.nvvm.bar.");
  return false;
}

/// The threads of `threads` (of `numThreads`) grouped by the id of
/// `barrier` each of them evaluates; nothing where one cannot be evaluated.
static std::optional<llvm::MapVector<uint64_t, llvm::BitVector>>
groupByBarrierId(NVVM::BarrierOp barrier, const llvm::BitVector &threads,
                 int64_t numThreads) {
  llvm::MapVector<uint64_t, llvm::BitVector> groups;
  for (int tid = threads.find_first(); tid >= 0; tid = threads.find_next(tid)) {
    ThreadEvaluator eval(tid);
    std::optional<APInt> id = eval.evaluate(barrier.getBarrierId());
    if (!id)
      return std::nullopt;
    llvm::BitVector &group = groups[id->getZExtValue()];
    group.resize(numThreads);
    group.set(tid);
  }
  return groups;
}

bool ProtocolChecker::isAloneAmongBarriers(
    Operation *barrier, function_ref<bool(int64_t)> isMine,
    function_ref<bool(NVVM::BarrierOp)> mayShare) {
  bool alone = true;
  barrier->getParentOfType<FunctionOpInterface>()->walk([&](Operation *op) {
    if (op == barrier || !alone)
      return;
    if (isCtaWideBarrier(op)) {
      std::optional<int64_t> id = getCtaWideBarrierId(op);
      alone = id && !isMine(*id);
      return;
    }
    if (isOtherBarrier(op)) {
      alone = false;
      return;
    }
    if (auto other = dyn_cast<NVVM::BarrierOp>(op))
      alone = mayShare(other);
  });
  return alone;
}

std::optional<SmallVector<llvm::BitVector>>
ProtocolChecker::getBarrierGroups(Operation *barrier,
                                  const ThreadScope &scope) {
  auto uniform = [&](Value v) { return isUniform(v); };
  auto reaching = [&](Operation *op) -> std::optional<llvm::BitVector> {
    ThreadCount why;
    std::pair<Operation *, Value> one = {op, Value()};
    return getThreads(ArrayRef(one), scope, uniform, why);
  };
  if (!runsAlikeOnEveryThread(barrier, uniform))
    return std::nullopt;
  if (isCtaWideBarrier(barrier)) {
    // checkCtaBarriers proves (or reports) that every thread reaches it.
    llvm::BitVector all(scope.numThreads);
    all.set();
    return SmallVector<llvm::BitVector>{all};
  }
  auto function = barrier->getParentOfType<FunctionOpInterface>();
  std::optional<llvm::BitVector> threads = reaching(barrier);
  if (!threads)
    return std::nullopt;
  // Another barrier op that the same threads run the same number of times:
  // each thread's k-th arrival on either is the same phase.
  auto sameSequence = [&](Operation *other) {
    std::optional<llvm::BitVector> others = reaching(other);
    return others && *others == *threads &&
           runsAlikeOnEveryThread(other, uniform);
  };
  if (std::optional<std::pair<int64_t, int64_t>> named =
          getNamedBarrier(barrier)) {
    // Exactly its count of threads reach it, and no other barrier may take
    // part in its phases: every other one of its id is run by the same
    // threads alike, and the id of any other is known not to be its.
    if (int64_t(threads->count()) != named->second)
      return std::nullopt;
    auto mayShare = [&](NVVM::BarrierOp other) {
      if (std::optional<std::pair<int64_t, int64_t>> id =
              getNamedBarrier(other))
        return id->first != named->first ||
               (id->second == named->second && sameSequence(other));
      // An id computed per thread (one per warpgroup): evaluated on each
      // thread that runs it.
      std::optional<llvm::BitVector> others = reaching(other);
      if (!others || !other.getBarrierId())
        return false;
      auto groups = groupByBarrierId(other, *others, scope.numThreads);
      return groups && !groups->count(uint64_t(named->first));
    };
    if (!isAloneAmongBarriers(
            barrier, [&](int64_t id) { return id == named->first; }, mayShare))
      return std::nullopt;
    return SmallVector<llvm::BitVector>{*threads};
  }
  if (auto named = dyn_cast<NVVM::BarrierOp>(barrier);
      named && named.getBarrierId() && named.getNumberOfThreads()) {
    // An id each thread computes (one per warpgroup: the generated kernels'
    // epilogue barriers): the threads grouped by the id they evaluate, each
    // group whole warps (a warp arrives as one) and exactly the count, and
    // each id alone as a constant one must be: any other barrier a thread
    // may run with that id is run alike by the same threads.
    std::optional<int64_t> count =
        getConstantIntValue(named.getNumberOfThreads());
    if (!count)
      return std::nullopt;
    std::optional<llvm::MapVector<uint64_t, llvm::BitVector>> groups =
        groupByBarrierId(named, *threads, scope.numThreads);
    if (!groups)
      return std::nullopt;
    for (auto &[id, group] : *groups) {
      if (int64_t(group.count()) != *count)
        return std::nullopt;
      for (int tid = group.find_first(); tid >= 0; tid = group.find_next(tid))
        for (int64_t lane = tid / 32 * 32;
             lane < std::min<int64_t>(tid / 32 * 32 + 32, scope.numThreads);
             ++lane)
          if ((*threads)[lane] && !group[lane])
            return std::nullopt;
    }
    auto mayShare = [&](NVVM::BarrierOp other) {
      std::optional<llvm::BitVector> others = reaching(other);
      if (!others || !other.getBarrierId())
        return false;
      auto otherGroups = groupByBarrierId(other, *others, scope.numThreads);
      if (!otherGroups)
        return false;
      for (auto &[id, group] : *otherGroups) {
        auto mine = groups->find(id);
        if (mine != groups->end() &&
            !(mine->second == group && other.getNumberOfThreads() &&
              getConstantIntValue(other.getNumberOfThreads()) == count &&
              runsAlikeOnEveryThread(other, uniform)))
          return false;
      }
      return true;
    };
    if (!isAloneAmongBarriers(
            barrier, [&](int64_t id) { return groups->count(uint64_t(id)); },
            mayShare))
      return std::nullopt;
    SmallVector<llvm::BitVector> result;
    for (auto &entry : *groups)
      result.push_back(entry.second);
    return result;
  }
  if (auto warp = dyn_cast<NVVM::SyncWarpOp>(barrier)) {
    // The lanes of its mask in each warp, where every other warp barrier of
    // the function has the same mask and threads.
    std::optional<int64_t> mask = getConstantIntValue(warp.getMask());
    if (!mask)
      return std::nullopt;
    bool alone = true;
    function->walk([&](NVVM::SyncWarpOp other) {
      if (other != warp && alone)
        alone = getConstantIntValue(other.getMask()) == mask &&
                sameSequence(other);
    });
    if (!alone)
      return std::nullopt;
    SmallVector<llvm::BitVector> groups;
    for (int64_t w = 0; w < scope.numThreads; w += 32) {
      llvm::BitVector group(scope.numThreads);
      for (int64_t tid = w; tid < std::min(w + 32, scope.numThreads); ++tid)
        if ((*threads)[tid] && ((uint64_t(*mask) >> (tid % 32)) & 1))
          group.set(tid);
      if (group.any())
        groups.push_back(group);
    }
    return groups;
  }
  return std::nullopt;
}

void ProtocolChecker::checkReleaseReaders() {
  collectSlotReaders();
  auto uniform = [&](Value v) { return isUniform(v); };
  DenseSet<Operation *> reported;
  for (const SlotReader &reader : slotReaders) {
    Operation *op = reader.op;
    auto function = op->getParentOfType<FunctionOpInterface>();
    if (!function)
      continue;
    // Between a consumer_wait of the slot and its release: the last open
    // or close of the slot before the read is a wait.
    SmallVector<PipelineProtocolOpInterface> before =
        getOpensAndClosesBefore(op, [&](Value state) {
          return flow.getSlot(state) == reader.slot;
        });
    if (before.empty() || !isa<ConsumerWaitOp>(before.back().getOperation()))
      continue;
    // The releases of the slot that run after the read.
    SmallVector<ConsumerReleaseOp> releases;
    function->walk([&](ConsumerReleaseOp release) {
      if (flow.getSlot(release.getPipeline()) == reader.slot &&
          runsAfter(op, release))
        releases.push_back(release);
    });
    for (ConsumerReleaseOp release : releases) {
      if (reported.contains(release))
        continue;
      std::optional<ThreadScope> scope = getThreadScope(release);
      if (!scope)
        continue; // a helper: the assumption on its arrivals
      ThreadCount why;
      std::pair<Operation *, Value> readAt = {op, Value()};
      std::pair<Operation *, Value> arriveAt = {release, release.getElected()};
      std::optional<llvm::BitVector> readers =
          getThreads(ArrayRef(readAt), *scope, uniform, why);
      std::optional<llvm::BitVector> arrivers;
      if (readers)
        arrivers = getThreads(ArrayRef(arriveAt), *scope, uniform, why);
      if (!readers || !arrivers) {
        reported.insert(release);
        InFlightDiagnostic diag =
            unproven(release)
            << "that every thread that reads the slot arrives on its "
               "release, or is done reading before a thread that does: ";
        if (why.unprovenReason && !why.unprovenReason->empty())
          diag << "the " << (readers ? "release " : "read ")
               << *why.unprovenReason;
        else
          diag << "the checker cannot evaluate, per thread"
               << scope->description << ", which threads "
               << (readers ? "arrive on the release" : "read the slot");
        diag << where(release.getPipeline(), release.getStage());
        diag.attachNote(op->getLoc()) << "the read";
        if (why.unknownValue)
          diag.attachNote(why.unknownValue.getLoc()) << "this value";
        continue;
      }
      // Threads that read and do not arrive themselves.
      llvm::BitVector uncovered = *readers;
      uncovered.reset(*arrivers);
      if (uncovered.none())
        continue;
      // A wgmma is warpgroup-collective: once a thread of the warpgroup has
      // retired it (rule 8 proves a release retires the wgmma groups reading
      // its slot), the whole warpgroup's read of the slot is complete.
      if (reader.collective) {
        for (int tid = uncovered.find_first(); tid >= 0;
             tid = uncovered.find_next(tid)) {
          int64_t from = tid / 128 * 128;
          int64_t to = std::min<int64_t>(from + 128, scope->numThreads);
          for (int64_t other = from; other < to; ++other)
            if ((*arrivers)[other] && (*readers)[other]) {
              uncovered.reset(from, to);
              break;
            }
        }
      }
      // A barrier between the read and the release, on the path to the
      // release, that the uncovered threads and an arriving thread all
      // reach: their reads are done before the arrival. A wgmma reads
      // asynchronously: its warpgroup is done reading at the barrier only
      // where a warpgroup_wait {pending = 0} runs between the two.
      SmallVector<WarpgroupWaitOp> retiresAfterRead;
      if (reader.collective && uncovered.any())
        function->walk([&](WarpgroupWaitOp wait) {
          if (wait.getPending() == 0 && runsAfter(op, wait))
            retiresAfterRead.push_back(wait);
        });
      auto retiredBefore = [&](Operation *barrier) {
        return !reader.collective ||
               llvm::any_of(retiresAfterRead, [&](WarpgroupWaitOp wait) {
                 return runsAfter(wait, barrier);
               });
      };
      if (uncovered.any()) {
        for (Operation *at = release; at && at != function.getOperation();
             at = at->getParentOp()) {
          for (Operation *barrier = at->getPrevNode();
               barrier && uncovered.any(); barrier = barrier->getPrevNode()) {
            if (!isCtaWideBarrier(barrier) &&
                !isa<NVVM::BarrierOp, NVVM::SyncWarpOp>(barrier))
              continue;
            if (!runsAfter(op, barrier) || !retiredBefore(barrier))
              continue;
            std::optional<SmallVector<llvm::BitVector>> groups =
                getBarrierGroups(barrier, *scope);
            if (!groups)
              continue;
            // The threads of a group that an arriving thread of the group
            // waits for in the barrier.
            for (const llvm::BitVector &group : *groups)
              if (arrivers->anyCommon(group))
                uncovered.reset(group);
          }
          if (uncovered.none())
            break;
        }
      }
      if (uncovered.none())
        continue;
      reported.insert(release);
      int first = uncovered.find_first();
      std::string counts;
      for (int64_t w = 0; w < scope->numThreads; w += 128) {
        int64_t here = 0;
        for (int64_t tid = w; tid < std::min(w + 128, scope->numThreads); ++tid)
          here += uncovered[tid];
        counts += (w ? ", " : "") + std::to_string(here);
      }
      InFlightDiagnostic diag =
          reader.certain ? error(release) : unproven(release);
      if (!reader.certain)
        diag << "that the threads that may read the slot in a helper are "
                "done before an arrival on this release: ";
      diag << uncovered.count() << " thread"
           << (uncovered.count() == 1 ? "" : "s") << scope->description
           << " (" << counts << " per warpgroup; the first is thread " << first
           << ") read the slot without arriving on this release, and no "
              "arriving thread is ordered after their reads ("
           << (reader.collective
                   ? "no thread of their warpgroup arrives after retiring the "
                     "wgmma"
                   : "no barrier that they and an arriving thread reach lies "
                     "between the read and the release")
           << "): the phase may complete, and the producer refill the slot, "
              "while they still read it"
           << where(release.getPipeline(), release.getStage());
      diag.attachNote(op->getLoc()) << "the read";
    }
  }
}
