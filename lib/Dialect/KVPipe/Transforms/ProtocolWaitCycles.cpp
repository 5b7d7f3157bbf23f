//===- ProtocolWaitCycles.cpp - no wait-for cycle across pipelines --------===//
//
// Part of ProtocolChecker (ProtocolChecker.h).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecker.h"

#include <deque>

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::detail;

//===----------------------------------------------------------------------===//
// 13. No wait-for cycle: a commit or release that waits, through the ops its
// threads run before it, for itself
//===----------------------------------------------------------------------===//

namespace {
/// A protocol op that waits (consumer_wait, producer_acquire) or signals
/// (producer_commit, consumer_release), and the slot it works on: the
/// number of slots its state is advanced from the pipeline's kvpipe.create,
/// where that is a constant (ops outside loops). A call of a helper that
/// waits or signals on pipelines it is passed is two nodes, its waits and
/// its signals (`call`), of no single pipeline where it is passed several.
struct CycleNode {
  Operation *op;
  Value pipeline;
  int64_t stage;
  std::optional<int64_t> slot;
  bool waits;
  bool call = false;
  /// A named barrier of some threads: its arrival (a signal) and, for an
  /// `nvvm.barrier`, its wait for the phase's other arrivals.
  bool barrier = false;
  /// The state the op works on (for the diagnostics); none for a call or a
  /// barrier.
  Value state() const {
    if (auto protocol = dyn_cast<PipelineProtocolOpInterface>(op))
      return protocol.getPipeline();
    return Value();
  }
};
/// What a helper does to the pipelines it is passed, its callees' included.
struct CallSummary {
  bool waits = false;    // a consumer_wait
  bool commits = false;  // a producer_commit
  bool acquires = false; // a producer_acquire (waits for a release)
  bool releases = false; // a consumer_release (an acquire waits for it)
  bool any() const { return waits || commits || acquires || releases; }
  CallSummary &operator|=(const CallSummary &other) {
    waits |= other.waits;
    commits |= other.commits;
    acquires |= other.acquires;
    releases |= other.releases;
    return *this;
  }
};
/// `to` cannot complete before `from` has: `definite` where the slots are
/// known to match (the cycle is then a deadlock), not where they may.
struct CycleEdge {
  unsigned to;
  bool definite;
};
} // namespace

/// Whether `op` is nested in a loop (of its function), so that it works on
/// a different slot in each iteration.
static bool isInLoop(Operation *op) {
  for (Operation *at = op; at && !isa<FunctionOpInterface>(at);
       at = at->getParentOp()) {
    // A block of unstructured control flow: a cycle of branches may repeat it.
    if (!at->getParentRegion() || !at->getParentRegion()->hasOneBlock())
      return true;
    Operation *parent = at->getParentOp();
    if (isa_and_nonnull<LoopLikeOpInterface, ForEachTileOp>(parent))
      return true;
  }
  return false;
}

/// Which of the ops that wait or signal across the two sides `callee` (or
/// a helper it calls) runs: a call of it may wait for the other side (its
/// consumer_waits for commits, its producer_acquires for releases) and
/// signal to it (its commits to waits, its releases to acquires).
static CallSummary summarizeCallee(PipelineFlow &flow,
                                   FunctionOpInterface callee,
                                   DenseMap<Operation *, CallSummary> &memo) {
  // A helper in progress (a recursion) counts as doing everything.
  auto [it, inserted] = memo.try_emplace(callee.getOperation(),
                                         CallSummary{true, true, true, true});
  if (!inserted)
    return it->second;
  CallSummary summary;
  callee->walk([&](Operation *op) {
    if (isa<ConsumerWaitOp>(op))
      summary.waits = true;
    else if (isa<ProducerCommitOp>(op))
      summary.commits = true;
    else if (isa<ProducerAcquireOp>(op))
      summary.acquires = true;
    else if (isa<ConsumerReleaseOp>(op))
      summary.releases = true;
    else if (auto call = dyn_cast<CallOpInterface>(op))
      if (FunctionOpInterface inner = flow.resolveCallee(call))
        summary |= summarizeCallee(flow, inner, memo);
  });
  memo[callee.getOperation()] = summary;
  return summary;
}

/// The slot that `op`, using `state`, works on: the slots advanced from its
/// pipeline's kvpipe.create, where that is a constant (`op` outside loops,
/// one chain).
static std::optional<int64_t> getKnownSlot(PipelineFlow &flow, Operation *op,
                                           Value state) {
  if (isInLoop(op) || flow.isMixed(state))
    return std::nullopt;
  std::optional<StateAdvance> advance =
      flow.traceAdvance(state, op->getParentOfType<FunctionOpInterface>());
  if (!advance || !advance->base.getDefiningOp<CreateOp>())
    return std::nullopt;
  return advance->slots;
}

/// Whether a producer_acquire that `call` runs in its helper may refill a
/// slot (one kv_stages or more past the pipeline's kvpipe.create), so that
/// it waits for a release. Not where each acquire is at a constant advance
/// from a state argument that the call passes at a known slot, and the
/// sum stays below kv_stages: a helper filling a ring's first slots.
static bool callMayRefill(PipelineFlow &flow, CallOpInterface call,
                          FunctionOpInterface callee) {
  if (isInLoop(call))
    return true;
  bool mayRefill = false;
  callee->walk([&](Operation *op) {
    if (mayRefill)
      return;
    if (isa<CallOpInterface>(op)) {
      // Acquires a level deeper: not followed.
      mayRefill = true;
      return;
    }
    auto acquire = dyn_cast<ProducerAcquireOp>(op);
    if (!acquire)
      return;
    Value state = acquire.getPipeline();
    std::optional<StateAdvance> advance;
    if (!isInLoop(acquire) && !flow.isMixed(state))
      advance = flow.traceAdvance(state, callee);
    auto argument =
        advance ? dyn_cast<BlockArgument>(advance->base) : BlockArgument();
    if (!argument || argument.getOwner() != &callee.getFunctionBody().front() ||
        argument.getArgNumber() >= call.getArgOperands().size()) {
      mayRefill = true;
      return;
    }
    std::optional<int64_t> slot = getKnownSlot(
        flow, call, call.getArgOperands()[argument.getArgNumber()]);
    int64_t stages = cast<PipelineType>(state.getType()).getKvStages();
    if (!slot || *slot + advance->slots >= stages)
      mayRefill = true;
  });
  return mayRefill;
}

namespace {
/// The dependency graph of one function's protocol ops.
struct CycleGraph {
  /// Program order: the signals each wait's threads run after it (in the
  /// same iteration of the loops around both), as bits over the nodes; and
  /// those of them whose slots and threads are known (`definite`).
  SmallVector<llvm::BitVector> after, definiteAfter;
  /// Commits to the waits of their slot, releases to the acquires of the
  /// slot kv_stages later.
  SmallVector<SmallVector<CycleEdge>> cross;

  /// Calls `f(to, definite)` for each edge out of `n`.
  template <typename F> void forEachEdge(unsigned n, F f) const {
    for (int to = after[n].find_first(); to >= 0; to = after[n].find_next(to))
      f(unsigned(to), bool(definiteAfter[n][to]));
    for (const CycleEdge &edge : cross[n])
      f(edge.to, edge.definite);
  }
};
} // namespace

/// A cycle of `graph` (node numbers, in order), among its definite edges
/// only or among all; with `twoPipelines`, one through ops of two pipelines
/// at least (the cycles of one pipeline's own ring are the ring working).
static SmallVector<unsigned> findCycle(const CycleGraph &graph,
                                       ArrayRef<CycleNode> nodes,
                                       bool definiteOnly) {
  unsigned size = nodes.size();
  // Tarjan's strongly connected components, iteratively.
  SmallVector<int> index(size, -1), low(size, 0), component(size, -1);
  SmallVector<bool> onStack(size, false);
  SmallVector<unsigned> stack;
  int counter = 0, components = 0;
  struct Frame {
    unsigned node;
    SmallVector<unsigned> next;
    unsigned position = 0;
  };
  auto successors = [&](unsigned n) {
    SmallVector<unsigned> out;
    graph.forEachEdge(n, [&](unsigned to, bool definite) {
      if (definite || !definiteOnly)
        out.push_back(to);
    });
    return out;
  };
  for (unsigned root = 0; root < size; ++root) {
    if (index[root] >= 0)
      continue;
    SmallVector<Frame> frames;
    auto enter = [&](unsigned n) {
      index[n] = low[n] = counter++;
      stack.push_back(n);
      onStack[n] = true;
      frames.push_back({n, successors(n), 0});
    };
    enter(root);
    while (!frames.empty()) {
      Frame &frame = frames.back();
      if (frame.position < frame.next.size()) {
        unsigned to = frame.next[frame.position++];
        if (index[to] < 0)
          enter(to);
        else if (onStack[to])
          low[frame.node] = std::min(low[frame.node], index[to]);
        continue;
      }
      unsigned n = frame.node;
      frames.pop_back();
      if (!frames.empty())
        low[frames.back().node] = std::min(low[frames.back().node], low[n]);
      if (low[n] != index[n])
        continue;
      for (;;) {
        unsigned member = stack.pop_back_val();
        onStack[member] = false;
        component[member] = components;
        if (member == n)
          break;
      }
      ++components;
    }
  }
  // The shortest path from `from` to `to` inside one component.
  auto path = [&](unsigned from, unsigned to, SmallVectorImpl<unsigned> &out) {
    SmallVector<int> parent(size, -1);
    std::deque<unsigned> queue = {from};
    parent[from] = from;
    while (!queue.empty() && parent[to] < 0) {
      unsigned n = queue.front();
      queue.pop_front();
      graph.forEachEdge(n, [&](unsigned next, bool definite) {
        if ((definite || !definiteOnly) && parent[next] < 0 &&
            component[next] == component[from]) {
          parent[next] = n;
          queue.push_back(next);
        }
      });
    }
    if (parent[to] < 0)
      return false;
    SmallVector<unsigned> reversed;
    for (unsigned n = to; n != from; n = parent[n])
      reversed.push_back(n);
    out.append(reversed.rbegin(), reversed.rend());
    return true;
  };
  // A component with a wait and an op of another pipeline (for a definite
  // cycle, any component with an edge inside it). A call passed several
  // pipelines (no single one) may be of another pipeline than any op; its
  // own two nodes (its waits, then its commits) make no cycle alone: the
  // order inside the helper is checked in the helper.
  for (unsigned u = 0; u < size; ++u) {
    if (!nodes[u].waits)
      continue;
    for (unsigned v = 0; v < size; ++v) {
      if (v == u || component[v] != component[u] ||
          nodes[v].op == nodes[u].op ||
          (!definiteOnly && nodes[v].pipeline &&
           nodes[v].pipeline == nodes[u].pipeline))
        continue;
      SmallVector<unsigned> cycle = {u};
      if (path(u, v, cycle) && path(v, u, cycle)) {
        cycle.pop_back(); // u again
        // The two paths may cross: cut the loops between a node's two
        // visits where what remains still crosses pipelines.
        auto crosses = [&](ArrayRef<unsigned> ops) {
          return definiteOnly || llvm::any_of(ops, [&](unsigned n) {
                   return !nodes[n].pipeline ||
                          nodes[n].pipeline != nodes[u].pipeline;
                 });
        };
        for (bool cut = true; cut;) {
          cut = false;
          for (unsigned i = 0; i < cycle.size() && !cut; ++i)
            for (unsigned j = cycle.size() - 1; j > i && !cut; --j) {
              if (cycle[i] != cycle[j])
                continue;
              SmallVector<unsigned> shorter(cycle.begin(), cycle.begin() + i);
              shorter.append(cycle.begin() + j, cycle.end());
              if (crosses(shorter)) {
                cycle = std::move(shorter);
                cut = true;
              }
            }
        }
        return cycle;
      }
    }
  }
  return {};
}

std::optional<int64_t> ProtocolChecker::getIterationOffset(Value state) {
  // The innermost loop around the state's op that carries its pipeline.
  Value pipeline = flow.getPipeline(state);
  Operation *at = state.getDefiningOp();
  Operation *loop = nullptr;
  for (Operation *parent = at ? at->getParentOp()
                              : state.getParentRegion()->getParentOp();
       parent; parent = parent->getParentOp()) {
    if (isa<FunctionOpInterface>(parent))
      break;
    if (isa<scf::ForOp, scf::WhileOp>(parent) && carries(parent, pipeline)) {
      loop = parent;
      break;
    }
  }
  if (!loop)
    return std::nullopt;
  // As the overfill test reads an acquire's own carried state.
  std::optional<StateAdvance> advance = flow.traceAdvance(state, loop);
  auto argument =
      advance ? dyn_cast<BlockArgument>(advance->base) : BlockArgument();
  if (!argument || argument.getOwner()->getParentOp() != loop)
    return std::nullopt;
  return advance->slots;
}

void ProtocolChecker::checkWaitCycles() {
  // A note at one op of a wait-for path: what the previous op waits for, or
  // what runs after it.
  auto attachPathNote = [&](InFlightDiagnostic &diag, const CycleNode &node) {
    if (node.barrier)
      diag.attachNote(node.op->getLoc())
          << (node.waits ? "which this named barrier waits for (the phase "
                           "completes when every thread it counts arrives)"
                         : "then this arrival on a named barrier runs after "
                           "it on the same threads");
    else if (node.call)
      diag.attachNote(node.op->getLoc())
          << (node.waits ? "which this call waits for: its helper waits on "
                           "(or acquires) a pipeline it is passed"
                         : "then this call, whose helper commits to (or "
                           "releases) a pipeline it is passed");
    else if (node.waits)
      diag.attachNote(node.op->getLoc())
          << "which this '" << node.op->getName().stripDialect() << "' of "
          << flow.describe(node.state()) << " waits for";
    else
      diag.attachNote(node.op->getLoc())
          << "then this '" << node.op->getName().stripDialect() << "' of "
          << flow.describe(node.state())
          << " runs after it on the same threads";
  };
  // The loop whose iterations advance `pipeline` around `op` (the innermost
  // scf.for or scf.while carrying one of its states), if any.
  auto ringLoopOf = [&](Operation *op, Value pipeline) -> Operation * {
    for (Operation *at = op->getParentOp(); at && !isa<FunctionOpInterface>(at);
         at = at->getParentOp())
      if (isa<scf::ForOp, scf::WhileOp>(at) && carries(at, pipeline))
        return at;
    return nullptr;
  };
  // In a loop, the acquire of iteration i >= kv_stages waits for the
  // release of iteration i - kv_stages, whose slot the checker does not
  // match; a cycle through such an edge with every other edge in the same
  // iteration is the ring working (the release of an earlier slot never
  // waits for a later acquire). One that leaves the acquire's loop through
  // program order does not: an op after the loop runs after *every*
  // iteration's acquire, so if a release of the ring waits (through other
  // pipelines) for such an op, the acquire of a refilled slot waits for
  // itself once the loop fills more than kv_stages slots (the producer fills
  // A n times, then B; the consumer takes B, then A). A deadlock (an error)
  // where the loop is an scf.for from the ring's first slot whose static
  // trip count fills more than kv_stages slots and the path's edges are
  // definite (known threads, known slots outside loops); unproven where the
  // trip count is not known.
  auto reportLoopOverfill = [&](const CycleGraph &graph,
                                ArrayRef<CycleNode> nodes,
                                const llvm::BitVector &threadsKnown) -> bool {
    unsigned size = nodes.size();
    // The path from acquire `a` to a release of its ring reached after
    // leaving `loop` (without `a`, last node first), or none; with
    // `definiteOnly`, through definite edges only.
    auto searchPath = [&](unsigned a, Operation *loop,
                          bool definiteOnly) -> SmallVector<unsigned> {
      const CycleNode &acquire = nodes[a];
      SmallVector<llvm::BitVector> seen(2, llvm::BitVector(size));
      SmallVector<std::pair<unsigned, bool>> queue = {{a, false}};
      SmallVector<std::pair<unsigned, bool>> parent(2 * size, {~0u, false});
      seen[0].set(a);
      std::optional<unsigned> found;
      for (unsigned head = 0; head < queue.size() && !found; ++head) {
        auto [n, left] = queue[head];
        auto push = [&](unsigned to, bool leaves) {
          if (seen[leaves][to])
            return;
          seen[leaves].set(to);
          parent[to * 2 + leaves] = {n, left};
          queue.push_back({to, leaves});
          const CycleNode &node = nodes[to];
          if (leaves && !node.call && isa<ConsumerReleaseOp>(node.op) &&
              node.pipeline == acquire.pipeline && node.stage == acquire.stage)
            found = to;
        };
        for (int to = graph.after[n].find_first(); to >= 0 && !found;
             to = graph.after[n].find_next(to))
          if (!definiteOnly || (threadsKnown[n] && threadsKnown[to]))
            push(unsigned(to), left || (loop->isProperAncestor(nodes[n].op) &&
                                        !loop->isProperAncestor(nodes[to].op)));
        for (const CycleEdge &edge : graph.cross[n])
          if (!found && (!definiteOnly || edge.definite))
            push(edge.to, left);
      }
      SmallVector<unsigned> path;
      if (!found)
        return path;
      for (std::pair<unsigned, bool> at = {*found, true};
           at.first != a || at.second; at = parent[at.first * 2 + at.second])
        path.push_back(at.first);
      return path;
    };
    for (unsigned a = 0; a < size; ++a) {
      const CycleNode &acquire = nodes[a];
      if (acquire.call || !isa<ProducerAcquireOp>(acquire.op))
        continue;
      Operation *loop = ringLoopOf(acquire.op, acquire.pipeline);
      if (!loop)
        continue;
      int64_t stages =
          cast<PipelineType>(acquire.state().getType()).getKvStages();
      // Whether a loop from the ring's first slot passes kv_stages slots:
      // one that cannot never refills a slot.
      std::optional<bool> overfills;
      if (std::optional<int64_t> trips = getTripCount(loop)) {
        // The acquire's own carried state (the iter_arg its state advances
        // from: a loop may carry two states of one pipeline): its advance
        // per iteration, and whether its init is the ring's first slot.
        // Another carried state's counts say nothing about this acquire.
        std::optional<int64_t> perIteration;
        bool fromFirst = false;
        auto forOp = cast<scf::ForOp>(loop);
        auto function = forOp->getParentOfType<FunctionOpInterface>();
        std::optional<StateAdvance> own =
            flow.traceAdvance(acquire.state(), forOp);
        auto carriedArg =
            own ? dyn_cast<BlockArgument>(own->base) : BlockArgument();
        if (carriedArg && carriedArg.getOwner() == forOp.getBody() &&
            carriedArg.getArgNumber() > 0) {
          unsigned position = carriedArg.getArgNumber() - 1;
          perIteration = flow.getAdvancePerIteration(loop, position);
          if (std::optional<StateAdvance> advance =
                  flow.traceAdvance(forOp.getInitArgs()[position], function))
            fromFirst = advance->base.getDefiningOp<CreateOp>() &&
                        advance->slots == 0;
        }
        if (fromFirst && perIteration)
          overfills = *trips * *perIteration > stages;
      }
      if (overfills == false)
        continue;
      SmallVector<unsigned> path;
      bool definite = overfills && threadsKnown[a];
      if (definite)
        path = searchPath(a, loop, /*definiteOnly=*/true);
      if (path.empty()) {
        definite = false;
        path = searchPath(a, loop, /*definiteOnly=*/false);
      }
      if (path.empty())
        continue;
      InFlightDiagnostic diag =
          definite ? error(acquire.op) : unproven(acquire.op);
      if (definite)
        diag << "fills more than 'kv_stages' = " << stages
             << " slots in its loop before the signals after it (a "
                "deadlock): the acquire of a refilled slot waits for the "
                "release of the slot "
             << stages << " before it, which runs only after an op that "
             << "runs after the whole loop";
      else
        diag << "that the loop fills at most 'kv_stages' = " << stages
             << " slots before the signals after it: the acquire of a "
                "refilled slot waits for the release of the slot "
             << stages << " before it, which runs only after an op that "
             << "runs after the whole loop";
      diag << where(acquire.state(), acquire.stage);
      for (unsigned n : llvm::reverse(path))
        attachPathNote(diag, nodes[n]);
      return true;
    }
    return false;
  };
  auto uniform = [&](Value v) { return isUniform(v); };
  DenseMap<Operation *, CallSummary> summaries;
  root->walk([&](FunctionOpInterface function) {
    SmallVector<CycleNode> nodes;
    DenseMap<Operation *, unsigned> numbers;
    function->walk([&](PipelineProtocolOpInterface protocol) {
      if (!protocol.opensSlot() && !protocol.closesSlot())
        return;
      if (protocol->getParentOfType<FunctionOpInterface>() != function)
        return;
      Value state = protocol.getPipeline();
      CycleNode node{protocol, flow.getPipeline(state),
                     protocol.getSubStage().value_or(0),
                     getKnownSlot(flow, protocol, state), protocol.opensSlot()};
      numbers[protocol] = nodes.size();
      nodes.push_back(node);
    });
    // Calls of helpers that wait or signal on pipelines they are passed: a
    // node for the waits and acquires and one for the commits and releases,
    // of the pipeline passed or, passed several, of none (a cycle through
    // them crosses pipelines).
    struct CallNodes {
      unsigned waits, signals;
      SmallVector<Value> pipelines;
      CallSummary summary;
      /// Whether its acquires may refill a slot (callMayRefill).
      bool mayRefill;
    };
    SmallVector<CallNodes> calls;
    DenseMap<Operation *, unsigned> callSignal;
    function->walk([&](CallOpInterface call) {
      if (call->getParentOfType<FunctionOpInterface>() != function)
        return;
      FunctionOpInterface callee = flow.resolveCallee(call);
      if (!callee)
        return; // unproven by rule 3 where it takes a state
      CallSummary summary = summarizeCallee(flow, callee, summaries);
      if (!summary.any())
        return;
      SmallVector<Value> pipelines;
      for (Value operand : call->getOperands())
        if (isa<PipelineType>(operand.getType()))
          if (Value pipeline = flow.getPipeline(operand);
              !llvm::is_contained(pipelines, pipeline))
            pipelines.push_back(pipeline);
      if (pipelines.empty())
        return;
      Value single = pipelines.size() == 1 ? pipelines.front() : Value();
      CallNodes entry{unsigned(nodes.size()), unsigned(nodes.size() + 1),
                      pipelines, summary,
                      summary.acquires && callMayRefill(flow, call, callee)};
      nodes.push_back({call, single, 0, std::nullopt, true, true});
      nodes.push_back({call, single, 0, std::nullopt, false, true});
      numbers[call] = entry.waits;
      callSignal[call] = entry.signals;
      calls.push_back(entry);
    });
    // Named barriers outside loops whose ids are known per thread: an
    // arrival node (a signal, where the op runs) and, for an nvvm.barrier, a
    // wait node for the other arrivals of its phase (matched below).
    DenseMap<Operation *, unsigned> barrierArrival;
    SmallVector<NamedBarrierOp> namedBarriers;
    function->walk([&](Operation *op) {
      if (op->getParentOfType<FunctionOpInterface>() != function)
        return;
      std::optional<NamedBarrierOp> barrier = getNamedBarrierOp(op);
      if (!barrier)
        return;
      namedBarriers.push_back(*barrier);
      if (barrier->waits) {
        numbers[op] = nodes.size();
        nodes.push_back({op, Value(), 0, std::nullopt, true, false, true});
      }
      barrierArrival[op] = nodes.size();
      if (!barrier->waits)
        numbers[op] = nodes.size();
      nodes.push_back({op, Value(), 0, std::nullopt, false, false, true});
    });
    unsigned size = nodes.size();
    if (size < 2)
      return;
    std::optional<ThreadScope> scope;
    if (std::optional<ThreadScope> found = getThreadScope(nodes.front().op);
        found && found->unprovenReason.empty())
      scope = found;
    // The threads that run each op (and, for a release, arrive), nothing
    // where not known; ops of one block with one predicate run on the same
    // threads. Then, for each set of threads, the ops that share one.
    DenseMap<std::pair<Block *, Value>, unsigned> threadSetOf;
    SmallVector<std::optional<llvm::BitVector>> threadSets;
    SmallVector<int> threadSet(size, -1);
    for (auto [n, node] : llvm::enumerate(nodes)) {
      if (!scope)
        break;
      Value predicate;
      if (auto release = dyn_cast<ConsumerReleaseOp>(node.op))
        predicate = release.getElected();
      auto [it, inserted] = threadSetOf.try_emplace(
          {node.op->getBlock(), predicate}, threadSets.size());
      if (inserted) {
        ThreadCount why;
        std::pair<Operation *, Value> one = {node.op, predicate};
        threadSets.push_back(getThreads(ArrayRef(one), *scope, uniform, why));
      }
      threadSet[n] = it->second;
    }
    SmallVector<llvm::BitVector> overlapping;
    for (const std::optional<llvm::BitVector> &set : threadSets) {
      llvm::BitVector mask(size);
      for (unsigned n = 0; n < size; ++n) {
        const std::optional<llvm::BitVector> &other = threadSets[threadSet[n]];
        if (!set || !other || set->anyCommon(*other))
          mask.set(n);
      }
      overlapping.push_back(mask);
    }
    // Ops whose slot and threads are known, for definite edges.
    llvm::BitVector known(size);
    for (unsigned n = 0; n < size; ++n)
      if (!isInLoop(nodes[n].op) && threadSet[n] >= 0 &&
          threadSets[threadSet[n]])
        known.set(n);
    // The signals nested in each op with regions, then, walking each block
    // backwards with the signals that run after its end, the signals after
    // each wait.
    CycleGraph graph;
    graph.after.assign(size, llvm::BitVector(size));
    graph.definiteAfter.assign(size, llvm::BitVector(size));
    graph.cross.resize(size);
    DenseMap<Operation *, llvm::BitVector> nested;
    std::function<llvm::BitVector(Operation *)> signalsIn =
        [&](Operation *op) -> llvm::BitVector {
      auto found = nested.find(op);
      if (found != nested.end())
        return found->second;
      llvm::BitVector bits(size);
      if (auto it = numbers.find(op);
          it != numbers.end() && !nodes[it->second].waits)
        bits.set(it->second);
      if (auto it = callSignal.find(op); it != callSignal.end())
        bits.set(it->second);
      if (auto it = barrierArrival.find(op); it != barrierArrival.end())
        bits.set(it->second);
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (Operation &inner : block)
            if (inner.getNumRegions() || numbers.count(&inner))
              bits |= signalsIn(&inner);
      nested[op] = bits;
      return bits;
    };
    std::function<void(Block &, const llvm::BitVector &)> visit =
        [&](Block &block, const llvm::BitVector &afterBlock) {
          llvm::BitVector acc = afterBlock;
          // In a region of several blocks, any of its blocks may follow.
          Region *region = block.getParent();
          if (!region->hasOneBlock())
            for (Block &other : *region)
              for (Operation &op : other)
                if (op.getNumRegions() || numbers.count(&op))
                  acc |= signalsIn(&op);
          for (Operation &op : llvm::reverse(block)) {
            if (auto it = numbers.find(&op);
                it != numbers.end() && nodes[it->second].waits) {
              unsigned n = it->second;
              graph.after[n] = acc;
              if (threadSet[n] >= 0)
                graph.after[n] &= overlapping[threadSet[n]];
              if (known[n]) {
                graph.definiteAfter[n] = graph.after[n];
                graph.definiteAfter[n] &= known;
              }
            }
            if (auto it = callSignal.find(&op); it != callSignal.end()) {
              // The helper's commits may follow its own waits.
              graph.after[numbers[&op]].set(it->second);
              acc.set(it->second);
              continue;
            }
            if (auto it = barrierArrival.find(&op);
                it != barrierArrival.end()) {
              // A thread arrives on the barrier before it waits there.
              acc.set(it->second);
              continue;
            }
            if (op.getNumRegions() == 0) {
              if (auto it = numbers.find(&op);
                  it != numbers.end() && !nodes[it->second].waits)
                acc.set(it->second);
              continue;
            }
            for (Region &inner : op.getRegions())
              for (Block &innerBlock : inner)
                visit(innerBlock, acc);
            acc |= signalsIn(&op);
          }
        };
    for (Block &block : function.getFunctionBody())
      visit(block, llvm::BitVector(size));
    // Cross edges, within each pipeline and sub-stage.
    llvm::MapVector<std::pair<Value, int64_t>, SmallVector<unsigned>> groups;
    for (auto [n, node] : llvm::enumerate(nodes))
      if (!node.call)
        groups[{node.pipeline, node.stage}].push_back(n);
    for (auto &[key, members] : groups) {
      for (unsigned i : members) {
        const CycleNode &from = nodes[i];
        bool commit = isa<ProducerCommitOp>(from.op);
        bool release = isa<ConsumerReleaseOp>(from.op);
        if (!commit && !release)
          continue;
        int64_t stages =
            cast<PipelineType>(from.state().getType()).getKvStages();
        for (unsigned j : members) {
          const CycleNode &to = nodes[j];
          if (commit && isa<ConsumerWaitOp>(to.op)) {
            // The consumers' wait of slot k returns after the commit of k.
            if (from.slot && to.slot) {
              if (*from.slot == *to.slot)
                graph.cross[i].push_back({j, true});
            } else {
              graph.cross[i].push_back({j, false});
            }
          } else if (release && isa<ProducerAcquireOp>(to.op)) {
            // The producer's acquire of slot k (k >= kv_stages) returns
            // after the release of k - kv_stages; the first kv_stages are
            // free. Only where both slots are known, outside loops (docs:
            // known gaps).
            if (from.slot && to.slot && *to.slot >= stages &&
                *from.slot == *to.slot - stages)
              graph.cross[i].push_back({j, true});
            // An acquire outside loops that may refill a slot (past the
            // first kv_stages, or at a slot not known: after a loop) waits
            // for a release whose slot is not known (in a loop, or after
            // one) that may be the one it needs: not definite.
            else if (!from.slot && !isInLoop(to.op) &&
                     (!to.slot || *to.slot >= stages))
              graph.cross[i].push_back({j, false});
            // In a loop: an acquire `kv_stages` slots or more past the
            // state its iteration starts from refills a slot filled in the
            // same iteration, so it waits for a release of the pipeline in
            // the consumers' iteration (which one is not matched: not
            // definite). Iterations that advance a ring by at most its
            // slots get no such edge: the generated kernels' cycles through
            // the ring stay benign.
            else if (!to.slot && isa<ProducerAcquireOp>(to.op)) {
              std::optional<int64_t> offset = getIterationOffset(to.state());
              if (offset && *offset >= stages)
                graph.cross[i].push_back({j, false});
            }
          }
        }
      }
    }
    // Named barriers: each thread's k-th op of a barrier id (in program
    // order) is its arrival in the id's phase k, and an nvvm.barrier in
    // phase k returns after every arrival of phase k. Matched only where
    // every named barrier op of the function is outside loops, with known
    // threads and an id known on each (definite edges); else none, as the
    // assumptions say (a cycle through a named barrier in a loop).
    if (scope && !namedBarriers.empty()) {
      // Per id, per thread, its ops of the id in program order.
      std::map<uint64_t, DenseMap<int64_t, SmallVector<Operation *>>> phases;
      bool matched = true;
      for (const NamedBarrierOp &barrier : namedBarriers) {
        Operation *op = barrier.op;
        const std::optional<llvm::BitVector> &threads =
            threadSets[threadSet[barrierArrival[op]]];
        Value id = barrier.id;
        if (!threads || isInLoop(op)) {
          matched = false;
          break;
        }
        for (int tid = threads->find_first(); tid >= 0 && matched;
             tid = threads->find_next(tid)) {
          ThreadEvaluator eval(tid);
          std::optional<APInt> value = id ? eval.evaluate(id) : APInt(32, 0);
          if (!value)
            matched = false;
          else
            phases[value->getZExtValue()][tid].push_back(op);
        }
        if (!matched)
          break;
      }
      for (auto &[id, perThread] : phases) {
        if (!matched)
          break;
        size_t length = perThread.begin()->second.size();
        if (llvm::any_of(perThread, [&](auto &entry) {
              return entry.second.size() != length;
            }))
          continue; // (threads that meet it unequally often: rule 14's)
        for (size_t k = 0; k < length; ++k) {
          SetVector<Operation *> phase;
          for (auto &entry : perThread)
            phase.insert(entry.second[k]);
          for (Operation *waiting : phase) {
            auto it = numbers.find(waiting);
            if (it == numbers.end() || !nodes[it->second].waits)
              continue;
            for (Operation *arriving : phase)
              if (arriving != waiting)
                graph.cross[barrierArrival[arriving]].push_back(
                    {it->second, true});
          }
        }
      }
    }
    // A helper's waits may return only after a commit of a pipeline it is
    // passed, and its acquires that may refill a slot only after a release
    // of one; the consumer waits of those pipelines only after its commits,
    // and their acquires that may refill a slot only after its releases
    // (slots unknown: never definite). An acquire that cannot refill (one
    // of the first kv_stages slots, or in a loop less than kv_stages past
    // its iteration's first state) waits for no release, as above.
    auto touches = [](const CallNodes &call, Value pipeline) {
      return llvm::is_contained(call.pipelines, pipeline);
    };
    auto mayRefill = [&](const CycleNode &acquire) {
      int64_t stages =
          cast<PipelineType>(acquire.state().getType()).getKvStages();
      if (acquire.slot)
        return *acquire.slot >= stages;
      std::optional<int64_t> offset = getIterationOffset(acquire.state());
      return !offset || *offset >= stages;
    };
    // Whether call `signals` may release or commit what call `waits` waits
    // for.
    auto feeds = [](const CallNodes &signals, const CallNodes &waits) {
      return (signals.summary.commits && waits.summary.waits) ||
             (signals.summary.releases && waits.mayRefill);
    };
    for (const CallNodes &call : calls) {
      for (auto [n, node] : llvm::enumerate(nodes)) {
        if (node.call || !touches(call, node.pipeline))
          continue;
        if ((call.summary.waits && isa<ProducerCommitOp>(node.op)) ||
            (call.mayRefill && isa<ConsumerReleaseOp>(node.op)))
          graph.cross[n].push_back({call.waits, false});
        if ((call.summary.commits && isa<ConsumerWaitOp>(node.op)) ||
            (call.summary.releases && isa<ProducerAcquireOp>(node.op) &&
             mayRefill(node)))
          graph.cross[call.signals].push_back({unsigned(n), false});
      }
      for (const CallNodes &other : calls)
        if (feeds(call, other) &&
            llvm::any_of(call.pipelines, [&](Value pipeline) {
              return touches(other, pipeline);
            }))
          graph.cross[call.signals].push_back({other.waits, false});
    }
    llvm::BitVector threadsKnown(size);
    for (unsigned n = 0; n < size; ++n)
      if (threadSet[n] >= 0 && threadSets[threadSet[n]])
        threadsKnown.set(n);
    if (reportLoopOverfill(graph, nodes, threadsKnown))
      return;
    SmallVector<unsigned> cycle = findCycle(graph, nodes, /*definiteOnly=*/true);
    bool definite = !cycle.empty();
    if (!definite)
      cycle = findCycle(graph, nodes, /*definiteOnly=*/false);
    if (cycle.empty())
      return;
    const CycleNode &start = nodes[cycle.front()];
    InFlightDiagnostic diag = definite ? error(start.op) : unproven(start.op);
    bool throughCall = llvm::any_of(
        cycle, [&](unsigned n) { return nodes[n].call; });
    bool barriersOnly =
        llvm::all_of(cycle, [&](unsigned n) { return nodes[n].barrier; });
    if (definite && barriersOnly)
      diag << "waits in a cycle of named barriers (a deadlock): the arrival "
              "its phase waits for runs, on the threads that run it, only "
              "after another barrier of the cycle completes, and so on back "
              "to this one";
    else if (definite)
      diag << "waits in a cycle across pipelines (a deadlock): the commit, "
              "release or barrier arrival it waits for runs, on the threads "
              "that run it, only after another wait of the cycle returns, and "
              "so on back to this one";
    else if (throughCall)
      diag << "that the waits across pipelines form no cycle: through the "
              "waits and signals of a helper, whose slots the checker does "
              "not match with the caller's, this wait may wait for itself";
    else
      diag << "that the waits across pipelines form no cycle: through the "
              "ops in loops, whose slots the checker does not match, this "
              "wait may wait for itself";
    if (Value state = start.state())
      diag << where(state, cast<PipelineProtocolOpInterface>(start.op)
                               .getSubStage());
    for (unsigned k = 1; k < cycle.size(); ++k) {
      const CycleNode &node = nodes[cycle[k]];
      // A call's waits and then its commits: one note for both.
      const CycleNode &before = nodes[cycle[k - 1]];
      if (node.call && !node.waits && before.call && before.op == node.op)
        continue;
      attachPathNote(diag, node);
    }
  });
}
