//===- ProtocolChecker.h - the pipeline protocol checker -------*- C++ -*-===//
//
// The state and the rules of --kvpipe-verify-protocol (VerifyProtocol.cpp
// lists them and drives the checker; docs/protocol-checking.md is the
// contract). One ProtocolChecker checks one root op; its rules are defined
// by topic: ProtocolFlow.cpp (linear use, the flow of states),
// ProtocolBalance.cpp (loops and totals), ProtocolPairing.cpp (pairs in a
// block, branches), ProtocolTransactions.cpp (bytes and load slots),
// ProtocolBarriers.cpp (initialisation, arrival counts),
// ProtocolReads.cpp (wgmma reads against waits and releases) and
// ProtocolSlotAliases.cpp (slots reached around the view chain: aliases at
// constant offsets, addresses taken out of memrefs),
// ProtocolReleaseReaders.cpp (readers covered by a release's arrivals),
// ProtocolRings.cpp (rings apart) and ProtocolWaitCycles.cpp (no wait-for
// cycle across pipelines). Private to the Transforms library.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_PROTOCOLCHECKER_H
#define KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_PROTOCOLCHECKER_H

#include "kvpipe/Dialect/KVPipe/Analysis/BarrierOrigins.h"
#include "kvpipe/Dialect/KVPipe/Analysis/ChainGuards.h"
#include "kvpipe/Dialect/KVPipe/Analysis/ProtocolAnalysis.h"
#include "kvpipe/Dialect/KVPipe/Analysis/ThreadCounts.h"
#include "kvpipe/Dialect/KVPipe/Analysis/Transactions.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

#include <deque>
#include <map>

namespace kvpipe::detail {

using namespace mlir;

/// The sub-stage an op names, if it names one.
inline std::optional<int64_t> getStageOf(Operation *op) {
  if (auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(op))
    return protocolOp.getSubStage();
  return std::nullopt;
}

/// Whether `op` opens or closes a slot's sub-stage: a wait, a release, an
/// acquire or a commit.
inline bool opensOrCloses(Operation *op) {
  auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(op);
  return protocolOp && (protocolOp.opensSlot() || protocolOp.closesSlot());
}

/// The op that opens a sub-stage on `side`, for diagnostics.
inline StringRef getOpenerName(PipelineSide side) {
  return side == PipelineSide::consumer ? "consumer_wait" : "producer_acquire";
}

/// The static trip count of an `scf.for`, when it fits comfortably.
inline std::optional<int64_t> getTripCount(Operation *loop) {
  auto forOp = dyn_cast<scf::ForOp>(loop);
  if (!forOp)
    return std::nullopt;
  std::optional<APInt> trips = forOp.getStaticTripCount();
  if (!trips || trips->getActiveBits() > 62)
    return std::nullopt;
  return static_cast<int64_t>(trips->getZExtValue());
}

/// The same SSA value or equal constants.
inline bool isSameBound(Value a, Value b) {
  if (a == b)
    return true;
  std::optional<int64_t> ca = getConstantIntValue(a);
  std::optional<int64_t> cb = getConstantIntValue(b);
  return ca && cb && *ca == *cb;
}

/// Whether two `scf.for` loops run the same number of iterations because
/// their bounds and steps are the same.
inline bool haveSameTripCount(Operation *a, Operation *b) {
  auto fa = dyn_cast<scf::ForOp>(a), fb = dyn_cast<scf::ForOp>(b);
  return fa && fb && isSameBound(fa.getLowerBound(), fb.getLowerBound()) &&
         isSameBound(fa.getUpperBound(), fb.getUpperBound()) &&
         isSameBound(fa.getStep(), fb.getStep());
}

/// The wait (or acquire) of each sub-stage of one slot that is still open
/// in a block, and the last sub-stages seen, for the order check.
struct SlotPairing {
  SmallVector<Operation *> open;
  /// The first op of each kind in the block, and its sub-stage.
  Operation *firstOpen = nullptr;
  int64_t firstOpenStage = -1;
  Operation *firstClose = nullptr;
  int64_t firstCloseStage = -1;
  Operation *lastOpen = nullptr;
  int64_t lastOpenStage = -1;
  Operation *lastClose = nullptr;
  int64_t lastCloseStage = -1;
};

/// The bytes of one element of `type`, where a whole number.
inline std::optional<int64_t> getElementBytes(MemRefType type) {
  Type element = type.getElementType();
  if (!element.isIntOrFloat() || element.getIntOrFloatBitWidth() % 8 != 0)
    return std::nullopt;
  return element.getIntOrFloatBitWidth() / 8;
}

/// Whether `op` reads or writes the memory of its memref operand `operand`.
bool accessesMemRef(Operation *op, Value operand);

/// The index-typed operands of `op` after its memref operand at
/// `position`: the indices of an access (`vector.load %ring[%slot, ...]`).
inline SmallVector<Value> getIndexOperands(Operation *op, unsigned position) {
  SmallVector<Value> indices;
  for (Value index : op->getOperands().drop_front(position + 1))
    if (index.getType().isIndex())
      indices.push_back(index);
  return indices;
}

/// Whether `op` accesses a slot asynchronously, after the op itself has run:
/// a TMA store (which reads its source until its bulk group is waited for)
/// or a cp.async copy (which writes its destination until its group is).
bool isAsyncSlotAccess(Operation *op);

/// Whether `op` takes an address out of its memref operands: an op the view
/// walk does not follow that turns a memref into something else (an index,
/// a pointer, an LLVM descriptor), other than an access, a kvpipe op, a call,
/// a query of the shape (`memref.dim`, `memref.extract_strided_metadata`,
/// whose base buffer is followed as a view) or a flow of memrefs (a
/// terminator, `arith.select`, an op with regions).
bool takesAddressOut(Operation *op);

/// Whether the helper `callee` may read or write shared memory through its
/// arguments other than by wgmma (which checkReads follows into helpers):
/// an access of a memref, an address taken out of one (which the helper may
/// load or store through), or a call it makes. Unknown callees may.
bool mayAccessSharedMemory(FunctionOpInterface callee);

class ProtocolChecker {
public:
  ProtocolChecker(Operation *root, bool strict)
      : root(root), flow(root), arithmetic(flow), dominance(root),
        strict(strict) {}
  /// Runs every rule; false when any reported an error.
  bool run() {
    checkBarriers();
    checkCtaBarriers();
    checkFlow();
    checkLinearUse();
    checkBalance();
    checkBranches();
    checkTotals();
    root->walk([&](Block *block) {
      if (block->getParent()->hasOneBlock())
        checkBlock(*block);
    });
    root->walk([&](Operation *op) {
      for (Region &region : op->getRegions())
        if (!region.hasOneBlock() && !region.empty())
          checkCfPairing(region);
    });
    checkReads();
    checkReadSlots();
    checkSlotAccesses();
    checkSlotAliases();
    checkTransactions();
    checkLoadSlots();
    checkStageTiles();
    checkReleaseArrivals();
    checkReleaseReaders();
    checkWaitCycles();
    // Last: numbering the barriers' ids and counts before the rules above
    // changed which values the arithmetic took as CTA-uniform (a release
    // count of the skip_idle_warpgroups kernels became unproven).
    checkNamedBarriers();
    return !hasErrors;
  }

private:
  /// " (sub-stage N of pipeline created at ... : TYPE)".
  std::string where(Value state, std::optional<int64_t> stage = std::nullopt) {
    std::string text = " (";
    if (stage)
      text += "sub-stage " + std::to_string(*stage) + " of ";
    return text + flow.describe(state) + ")";
  }
  InFlightDiagnostic error(Operation *op) {
    hasErrors = true;
    return op->emitOpError();
  }
  /// A property the checker could not prove at `op`: a warning, or an error
  /// in strict mode. The message continues after "cannot prove ".
  InFlightDiagnostic unproven(Operation *op) {
    if (strict) {
      hasErrors = true;
      return op->emitOpError() << "cannot prove ";
    }
    return op->emitWarning() << "'" << op->getName() << "' op cannot prove ";
  }

  // 1. Linear use (ProtocolFlow.cpp)
  /// Whether `later` runs after `earlier` on some path through the
  /// structured control flow: after it in the innermost block holding both,
  /// or in a block that `earlier`'s block dominates. Ops in different
  /// branches of one op never run after each other.
  bool runsAfter(Operation *earlier, Operation *later);
  /// How a note names an advancing op.
  static StringRef advancedBy(Operation *op);
  void checkLinearUse();
  /// A state defined outside a loop and advanced inside it is advanced once
  /// per iteration: the second iteration uses it after it was advanced. A
  /// `kvpipe.for_each_tile` is such a loop: the persistent rewrite runs its
  /// region once per tile the CTA takes.
  void checkAdvanceInLoop(Operation *advancer, Value state);
  /// The same in a loop of unstructured control flow: an advance in a block
  /// that a path leads back to without passing the block that defines the
  /// state advances the same state on every trip around the cycle.
  void checkAdvanceInCfLoop(Operation *advancer, Value state);

  // 2. Balance of producer and consumer loops (ProtocolBalance.cpp)
  struct LoopSide {
    Operation *loop;
    PipelineSide sides;
    std::optional<int64_t> perIteration;
    /// The loop is the whole of its side's chain: it starts from the
    /// pipeline's kvpipe.create and its result is not advanced further (a
    /// peeled slot before or after it is counted by checkTotals only).
    bool wholeChain = false;
  };
  /// Whether `loop` carries a state of `pipeline`.
  bool carries(Operation *loop, Value pipeline);
  void checkBalance();
  void compareSides(Value pipeline, const LoopSide &producer,
                    const LoopSide &consumer);

  // 3. Pairing, block by block (ProtocolPairing.cpp)
  void openPair(DenseMap<std::pair<Value, PipelineSide>, SlotPairing> &pairs,
                SmallVectorImpl<std::pair<Value, PipelineSide>> &order,
                Operation *op, Value state, int64_t stage, PipelineSide side,
                StringRef name);
  void closePair(DenseMap<std::pair<Value, PipelineSide>, SlotPairing> &pairs,
                 SmallVectorImpl<std::pair<Value, PipelineSide>> &order,
                 Operation *op, Value state, int64_t stage, PipelineSide side,
                 StringRef openName, StringRef name);
  void checkBlock(Block &block);
  /// Pairing in a region of several blocks (unstructured control flow):
  /// along every path, each wait (acquire) is closed by its release
  /// (commit) before the region is left, and each release (commit) closes
  /// an open wait (acquire). The sub-stage order is checked per block only
  /// in structured code: where a pipeline of several sub-stages is used
  /// across blocks, it is reported as unproven.
  void checkCfPairing(Region &region);
  /// Whether any wait, release, acquire or commit works on `pipeline`: a
  /// pipeline without any is state arithmetic only, which nothing waits on.
  bool hasProtocolOps(Value pipeline);
  DenseMap<Value, bool> protocolPipelines;
  /// A producer steps past a slot after committing every sub-stage of it
  /// in the same block; a consumer advances with consumer_release.
  void checkStep(StepOp step,
                 DenseMap<std::pair<Value, PipelineSide>, SlotPairing> &pairs);

  // 3. Branches that advance a state differently (ProtocolPairing.cpp)
  void checkBranches();
  /// A block argument of unstructured control flow whose predecessors pass
  /// one state advanced by different counts (the cf form of the branch
  /// rule). Values derived from the argument itself (a back edge) or from
  /// another block argument are not compared.
  void checkMerge(BlockArgument argument);

  // 5. Transaction bytes (ProtocolTransactions.cpp)
  /// The load of `loads` that comes first in the commit's block (the call
  /// that issues it, for a load in a helper).
  static Operation *getFirstLoad(ProducerCommitOp commit,
                                 const SlotLoads &loads);
  /// The value of `value` where the kvpipe.index of the states of `slot` is
  /// `index`: through constants, integer casts and pure integer arithmetic.
  std::optional<int64_t> evaluateAtIndex(Value value, Value slot, int64_t index,
                                         unsigned depth = 0);
  /// evaluateAtIndex without its check that the value fits its type.
  std::optional<int64_t> evaluateAtIndexUnchecked(Value value, Value slot,
                                                  int64_t index,
                                                  unsigned depth);
  /// A producer's TMA load fills the ring slot of the state whose barrier
  /// it completes on: the slot offset of its destination's view chain (a
  /// memref.subview offset computed from a kvpipe.index) is that state's
  /// kvpipe.index. Checked for each index the state can have (the one a
  /// constant advance from its create gives, else every slot).
  void checkLoadSlots();
  void checkTransactions();
  /// A consumer_release whose `elected` operand is constant false: no
  /// thread arrives on the consumer barrier, so the slot is never released.
  /// Otherwise the threads that arrive are counted (checkArrivals), for
  /// releases and commits alike, per pipeline and sub-stage. (A TMA load
  /// is issued by the threads that commit its slot:
  /// rule 5 counts only loads in the commit's block, outside any condition.)
  void checkReleaseArrivals();
  /// Whether the checker's arithmetic knows `condition` to be CTA-uniform.
  bool isUniform(Value condition);
  /// Rule 6, arrivals: the releases (commits) `ops` of one pipeline and
  /// sub-stage, with their `elected` operands, run on the threads that reach
  /// them (the branches of `scf.if`, `scf.index_switch` and
  /// `kvpipe.warp_roles` around them followed per thread) and whose
  /// `elected` is true; each such thread arrives once on every phase of the
  /// consumer (producer) barrier, which
  /// completes after the pipeline type's `consumers` (`producers`)
  /// arrivals. Any other count hangs the other side (too few) or completes
  /// the phase early, before the other threads of the side are done with
  /// the slot (too many). The threads are the kernel's when its block size
  /// is known, else those the outermost `kvpipe.warp_roles` names; elsewhere
  /// (a helper) the count is an assumption. A condition that is neither
  /// computed from the thread's identity and constants nor CTA-uniform
  /// makes the count unproven.
  void checkArrivals(ArrayRef<std::pair<Operation *, Value>> ops);
  /// With the group's threads counting `expected` together: each op that
  /// arrives fewer or more times alone must make up a phase with its thread
  /// alternatives (ops in other branches of a per-thread condition), else
  /// unproven (a peeled release, a CTA-uniform branch: separate phases).
  void checkArrivalsPerPhase(ArrayRef<std::pair<Operation *, Value>> ops,
                             const ThreadScope &scope, int64_t expected,
                             bool consumer);

  // 11. Readers covered by the arrivals of a release
  // (ProtocolReleaseReaders.cpp)
  /// A read of a ring slot: a wgmma (warpgroup-collective), a load or store,
  /// or a call that passes the slot to a helper (which may read it:
  /// `certain` false).
  struct SlotReader {
    Operation *op;
    Value slot;
    bool collective, certain;
  };
  SmallVector<SlotReader> slotReaders;
  void collectSlotReaders();
  /// The groups of threads that reach `barrier` and wait there for each
  /// other: every thread for a CTA-wide barrier; for a named barrier
  /// (`nvvm.barrier` with a constant id and count) the threads that reach
  /// it, exactly its count of them, where every other barrier of its id is
  /// run alike by the same threads and the ids of the others are known to
  /// differ; for `nvvm.bar.warp.sync` with a constant mask, the mask's
  /// lanes of each warp that reach it (every other warp barrier of the
  /// function alike). Nothing where the checker cannot tell (a loop around
  /// it whose trip count is not CTA-uniform, a barrier of an unknown id).
  std::optional<SmallVector<llvm::BitVector>>
  getBarrierGroups(Operation *barrier, const ThreadScope &scope);
  /// Rule 11, readers covered: every thread that reads (or writes) a slot
  /// between its consumer_wait and a consumer_release is covered by an
  /// arrival on that release: it arrives itself, or (a wgmma, which is
  /// warpgroup-collective) a thread of its warpgroup that ran the wgmma
  /// arrives (rule 8 proves that thread retired it first), or a barrier that
  /// it and an arriving thread reach lies between the read and the release.
  /// An uncovered reader is an error; readers or arrivals the checker cannot
  /// evaluate per thread are unproven.
  void checkReleaseReaders();

  // 6. Barriers: one kvpipe.init per kvpipe.create, by the whole CTA
  // (ProtocolBarriers.cpp)
  /// The op between `op` and its function that may run it more than once,
  /// or on some threads only: a loop, a tile loop, a condition, a role
  /// region. An `scf.execute_region` runs its region once.
  Operation *findRepeatOrCondition(Operation *op);
  /// Rule 2 for the create itself: it runs once, on every thread of the
  /// CTA. Not in a loop or under a condition in its function, and, where
  /// its function is called in the module, from one call site that runs
  /// once itself (a helper called per tile, or twice, initialises the same
  /// barriers again while the previous use's waits may be pending).
  /// False when reported.
  bool checkCreateRunsOnce(CreateOp create);
  void checkBarriers();
  /// A CTA-wide barrier: `gpu.barrier`, `nvvm.barrier0`, `nvvm.barrier`
  /// without a thread count, the intrinsics and inline `bar.sync` without a
  /// count. (Named barriers of some threads, with a count, are not.)
  static bool isCtaWideBarrier(Operation *op);
  /// The barrier a CTA-wide barrier `op` uses: 0, or the id an
  /// `nvvm.barrier` without a count names; none where that id is not a
  /// constant.
  static std::optional<int64_t> getCtaWideBarrierId(Operation *op);
  /// A named barrier of some threads: an `nvvm.barrier` with a thread count
  /// (`waits`: its threads wait for the phase) or an `nvvm.barrier.arrive`;
  /// its id (null: barrier 0) and count.
  struct NamedBarrierOp {
    Operation *op;
    Value id, count;
    bool waits;
  };
  static std::optional<NamedBarrierOp> getNamedBarrierOp(Operation *op);
  /// Whether no other barrier of `barrier`'s function may take part in the
  /// phases of its ids: every CTA-wide barrier names a known id that
  /// `isMine` rejects, there is no barrier the checker does not read (inline
  /// assembly, intrinsics), and `mayShare` accepts every other nvvm.barrier.
  static bool
  isAloneAmongBarriers(Operation *barrier,
                       llvm::function_ref<bool(int64_t)> isMine,
                       llvm::function_ref<bool(NVVM::BarrierOp)> mayShare);
  /// Every CTA-wide barrier runs on every thread of the CTA, the same
  /// number of times: not in one role, not under a condition on the
  /// thread, not in a loop whose trip count is not CTA-uniform (nor in a
  /// helper called so). A barrier some threads never reach is an error (the
  /// others wait in it forever: a consumer role's barrier while the producer
  /// waits for a release); one the checker cannot place, unproven.
  void checkCtaBarriers();
  /// checkCtaBarriers for `barrier`, at `at` (the barrier or a call that
  /// runs its function); false when reported.
  bool checkReachedByAll(Operation *barrier, Operation *at);
  /// Named barriers of some threads (`nvvm.barrier` with a count,
  /// `nvvm.barrier.arrive`): per barrier id a kernel's ops evaluate, one
  /// count that is a multiple of the warp size, and as many threads reaching
  /// the id as its count. Fewer (where every op is a `bar.sync`, which a
  /// thread cannot run twice in one phase) is a hang: an error, even
  /// counting every thread for an op whose threads are not known; more, or
  /// arrivals short of the count, unproven where every op's threads are
  /// known. Ids the checker cannot evaluate are an assumption.
  void checkNamedBarriers();

  // 7. Flow: states through ops the analysis models, and no aliases
  // (ProtocolFlow.cpp)
  /// Whether `op` is a protocol op that returns a state (`step`,
  /// `consumer_release`), which the analysis follows to its operand.
  static bool returnsState(Operation *op);
  /// Whether the analysis follows a state produced by `op`.
  bool producesKnownState(Operation *op, unsigned result);
  /// Whether the analysis follows a state used by `op`.
  bool consumesKnownState(Operation *op);
  void checkFlow();
  /// Rule 3 for barrier handles: every use of a `!kvpipe.mbarrier` is a
  /// kvpipe op (a TMA load completing on it) or a call of a helper in the
  /// module (whose argument is checked in turn); anything else (an external
  /// or indirect call, a cast, a yield, an llvm op) is unproven.
  void checkBarrierUses();
  static bool isState(Value value);
  /// An `scf.while` carries each state around its own cycle: the state
  /// yielded at position j comes (advanced or not) from the after-argument
  /// that the condition forwarded from before-argument j, not from another
  /// position's (the states would trade places) nor from outside the loop.
  void checkWhileCarries(scf::WhileOp whileOp);

  // 8. Totals: the slots each side advances from the pipeline's creation
  // (ProtocolBalance.cpp)
  /// A terminator that returns from a function (`gpu.return` is not
  /// ReturnLike).
  static bool isFunctionReturn(Operation *op);
  /// Whether `use` passes the state on (so that it is not where a chain
  /// ends).
  static bool forwards(OpOperand &use);
  /// Whether, in a region of several blocks, a path from where `state` is
  /// defined leaves the region without a use that passes it on (a `cf`
  /// loop's exit edge that drops the state): the chain ends there too.
  static bool endsOnSomePath(Value state);
  /// Whether two conditions have the same value on every thread of the CTA.
  bool isSameCondition(Value a, Value b);
  /// Whether `condition`, the branch between the producer's and the
  /// consumer's chains, splits the threads of a CTA into roles: it is
  /// computed from the thread's identity and constants (selectsThreads), or
  /// it is an argument of a helper (not a kernel) that each call in the
  /// module passes such a condition (assumed where nothing calls it).
  bool splitsThreads(Value condition, unsigned depth);
  /// Whether two chains' ends run together (checkChainGuards).
  enum class Together { proven, never, reported };
  /// Rule 5: the producer's chain ending at `producer` and the consumer's
  /// ending at `consumer` run under the same conditions, apart from the
  /// branch that splits the roles and conditions that pick threads of a
  /// role (a thread id compared with a constant). Reports the first other
  /// condition only one side is under (`reported`). Where the two ends are
  /// in different branches of a branch that does not split the threads
  /// (splitsThreads: a CTA-uniform condition), they never run together in a
  /// CTA: `never`, with `split` set to that branch.
  Together checkChainGuards(Value pipeline, Value producer, Value consumer,
                            Operation *scope, Operation *&split);
  void checkTotals();

  // 9. Reads: in-flight wgmma groups along every path, and reads before the
  // data landed (ProtocolReads.cpp)
  /// A wgmma group (a kvpipe.warpgroup_mma, a call issuing some, a hand
  /// committed nvvm group) and what it reads.
  struct Group {
    Operation *op;
    /// Slots (caller-level representatives) and sub-stages (-1: unknown).
    SmallVector<std::pair<Value, int64_t>> reads;
    /// For each read: whether its sub-stage is only the last one waited for
    /// before the wgmma (the tile matches no producer load).
    SmallVector<bool> guessed;
    /// Where a read could not be followed, if anywhere.
    Operation *unknownRead = nullptr;
  };
  using Queue = SmallVector<const Group *, 8>;
  /// The calls being simulated, outermost first.
  SmallVector<CallOpInterface> callStack;
  std::deque<Group> groups;
  /// The caller-level state for a state inside a simulated callee.
  Value mapState(Value state);
  /// The sub-stage the producer loads into the buffer `memref` addresses
  /// (by the view chain's constant offsets), if it can tell.
  std::map<std::string, int64_t> stageOfTile;
  bool stagesCollected = false;
  /// A key for the buffer `memref` addresses: its root and, through the
  /// view chain, the offsets (constants, "slot" for offsets computed from a
  /// kvpipe.index, "?" otherwise).
  std::string tileKey(Value memref);
  void collectStages();
  /// The loads of different sub-stages of one pipeline fill different
  /// tiles: two into the same tile (the same view chain) are an error, two
  /// whose bytes are not shown apart are unproven. A read is matched to
  /// the sub-stage of the load of its tile, which is sound only then.
  void checkStageTiles();
  /// The slots whose kvpipe.index `value` is computed from, through pure
  /// ops, the branches of `scf.if` / `scf.index_switch`, callees that return
  /// it (and through callees being simulated, back to their callers).
  /// `unknown` is set to the op where the chain could not be followed: a
  /// loop's carried value, a block argument, a call it cannot resolve.
  SmallVector<Value> getSlotsOf(Value value, unsigned depth,
                                Operation *&unknown, int start = -1);
  /// What a wgmma operand reads: the slots of the buffer it addresses,
  /// followed through view ops, casts, calls that return a view, and into
  /// the caller for a callee's argument. `unknown` is set to the op where
  /// the chain could not be followed.
  SmallVector<Value> getSlotsRead(Value memref, Operation *&unknown,
                                  unsigned depth = 0);
  /// One step down a memref's view chain, for the view ops the checker
  /// follows (subview, reinterpret_cast, view, cast, expand_shape,
  /// collapse_shape, transpose, memory_space_cast): the op's source, with a
  /// subview's dynamic offsets (positions in the source's dimensions, one of
  /// which may be the ring's slot) appended to `offsets`, and a
  /// reinterpret_cast's offsets or a view's byte shift (linear positions) to
  /// `linearOffsets`; null for any other op.
public:
  static Value stepView(Operation *def, SmallVectorImpl<Value> &offsets,
                        SmallVectorImpl<Value> &linearOffsets);
  /// Whether `op` is a fence.proxy.async that orders the CTA's shared
  /// memory writes before the async proxy's accesses (wgmma, TMA).
  static bool isAsyncProxyFence(Operation *op);
private:
  /// The offsets of `memref`'s view chain within its function (stepView
  /// down to the first op it does not follow); `viewed`: any view op.
  struct ViewOffsets {
    SmallVector<Value> offsets, linearOffsets;
    bool viewed = false;
  };
  static ViewOffsets getViewOffsets(Value memref);
  /// The sub-stage of the slot the buffer `memref` holds: the producer's
  /// sub-stage for the same tile, or -1.
  int64_t getStageRead(Value memref, Value slot);
  /// Whether a consumer_wait of `slot` at `stage` (any stage when -1: all
  /// of them) runs before `op` on every path.
  bool isWaited(Operation *op, Value slot, int64_t stage);
  /// Whether the function holding `op` is called in the module: a read of
  /// a slot it receives is then checked in each caller's context.
  bool hasCallers(Operation *op);
  std::optional<CallSites> callSites;
  /// Whether `slot` is a pipeline state the function receives: its waits
  /// are the caller's business.
  bool isFromCaller(Value slot);
  /// Builds the group `op` (a wgmma) issues, and checks its reads landed.
  const Group *issue(WarpgroupMmaOp mma);
  DenseSet<std::pair<Operation *, Value>> reportedReads;
  /// A wgmma reading a slot (at `stage`, -1: unknown) after a
  /// consumer_release of it on every path: the producer may already be
  /// overwriting it. The release may be in the function of the wgmma or in
  /// a caller being simulated before the call.
  void checkReadAfterRelease(WarpgroupMmaOp mma, Value slot, int64_t stage);
  DenseSet<std::pair<Operation *, Value>> reportedAfterRelease;
  DenseSet<Operation *> reportedReleases;
  void release(ConsumerReleaseOp op, ArrayRef<Queue> states);
  /// The highest sub-stage of `slot` whose consumer_wait runs before `op`
  /// on every path, or -1.
  int64_t getLastWaitedStage(Operation *op, Value slot);
  static void retireAllBut(SmallVectorImpl<Queue> &states, uint64_t pending);
  static void dedupe(SmallVectorImpl<Queue> &states);
  /// Runs the ops of `block` on every queue of groups in flight.
  void simulate(Block &block, SmallVector<Queue> &states);
  void simulateRegions(Operation &op, SmallVector<Queue> &states);
  /// Runs a region of several blocks from `entry`: each block starts with
  /// the groups its predecessors leave in flight (a cycle twice, like a
  /// loop); returns what the blocks that leave the region leave.
  SmallVector<Queue> simulateCfg(Region &region, ArrayRef<Queue> entry);
  void checkReads();
  /// The slot a wgmma reads is taken to be the one of the kvpipe.index its
  /// operand's offsets are computed from: each such offset must be the index
  /// itself at every slot (evaluated slot by slot, as for TMA loads'
  /// destinations), or the reads are unproven (a wgmma reading
  /// `(index + 1) mod stages` reads a slot nobody waited for).
  void checkReadSlots();
  /// The slot the memref operand `memref` of `op` addresses (its view
  /// chain's offsets, checkSlotOffset each; a linear offset computed from a
  /// kvpipe.index is not evaluated: unproven).
  void checkSlotOffsets(Operation *op, Value memref,
                        ArrayRef<Value> indices = {});
  /// Why the address of `memref` (indexed by the op's `indices`) may not be
  /// the slot its offset computed from a kvpipe.index says: several such
  /// offsets (they add up), one not in the first dimension of the buffer it
  /// indexes, or a view below it that shifts, strides or reshapes that
  /// dimension (a subview at a constant slot, a collapse_shape of slots and
  /// rows). Nothing when there is no such offset or the address is the
  /// slot's.
  std::optional<std::string> getSlotAddressProblem(Value memref,
                                                   ArrayRef<Value> indices);
  /// An offset (or index operand) of `op`'s address computed from a ring's
  /// kvpipe.index must be the index itself at every slot, else unproven.
  void checkSlotOffset(Operation *op, Value offset);
  /// Whether `result` of `call` is, at every return of its callee, the
  /// kvpipe.index of the pipeline state the call passes as the callee's
  /// argument (so the slot getSlotsOf finds through the call is the
  /// offset's value, not a function of it).
  bool returnsIndexOfArgument(CallOpInterface call, OpResult result);
  DenseSet<Operation *> reportedSlotOffsets;
  /// Ops other than wgmma that read or write a ring slot (vector and memref
  /// loads and stores, kvpipe.tma_store, kvpipe.store_fragment, ...) run
  /// while their thread holds the slot: after a consumer_wait or
  /// producer_acquire of it (else unproven: the checker does not know which
  /// side the op is on) and not after its release or commit (an error: the
  /// other side may be refilling or reading it).
  void checkSlotAccesses();
  /// Whether `op` is a plain store (the generic proxy's write, which the
  /// tensor cores and TMA see only after a fence.proxy.async).
  static bool writesInGenericProxy(Operation *op);
  /// Whether a fence.proxy.async for shared memory follows `op` before
  /// anything that may read a slot in the async proxy or hand it over.
  static bool isFencedBeforeAsyncUse(Operation *op);
  /// Whether the async proxy accesses slots of `pipeline` (or slots the
  /// checker cannot attribute): a wgmma or a TMA store reads them, or a TMA
  /// load or bulk copy fills them (a generic write into a slot the TMA
  /// refills is ordered before the refill only by a proxy fence).
  bool isAccessedInAsyncProxy(Value pipeline);
  std::optional<DenseSet<Value>> asyncPipelines;
  bool asyncAccessUnknown = false;
  void checkSlotAccess(Operation *op, Value slot);
  /// The waits, acquires, releases and commits of the states `ofState`
  /// accepts that dominate `op` in its function, in the order they run.
  SmallVector<PipelineProtocolOpInterface>
  getOpensAndClosesBefore(Operation *op,
                          llvm::function_ref<bool(Value)> ofState);
  /// A call that passes a slot's view or index to a helper that may access
  /// shared memory (other than by wgmma) accesses the slot where it runs:
  /// checkSlotAccess at the call, the view's offsets checked there, and an
  /// index passed in is unproven (the helper's offsets from it are not
  /// evaluated); a helper that may return with a TMA store in flight is
  /// checked like the store.
  void checkCallAccesses(CallOpInterface call);
  /// A TMA store reads its slot asynchronously, and a cp.async copy writes
  /// it asynchronously: before a release or commit of the slot that follows
  /// it, the issuing thread must have committed the group and waited for it
  /// (`cp.async.bulk.commit_group`, then `cp.async.bulk.wait_group 0`, for a
  /// store; `nvgpu.device_async_create_group` or `cp.async.commit_group`,
  /// then `nvgpu.device_async_wait` / `cp.async.wait_group` for every group,
  /// for a copy; after it in its block or in the blocks around it), else
  /// unproven.
  void checkStoreRetired(Operation *store, Value slot);
  DenseSet<std::pair<Operation *, Value>> reportedAccesses;

  // 10. Aliases of slots (ProtocolSlotAliases.cpp)
  /// Where a memref's elements lie in the buffer its view chain starts from
  /// (an allocation, a global, the dynamic shared memory, a function
  /// argument): byte addresses relative to that buffer's start.
  struct Place {
    /// The buffer; null where the chain ends in an op it does not follow.
    const void *buffer = nullptr;
    /// The memref's aligned pointer and its element (0, ..., 0), where known.
    std::optional<LinearExpr> base, first;
  };
  DenseMap<Value, Place> places;
  Place locate(Value memref, unsigned depth = 0);
  /// The buffer a `gpu.dynamic_shared_memory` in `function` is: the CTA's
  /// one dynamic shared memory, of the kernel every chain of calls to
  /// `function` starts from (the function itself where that is not one
  /// kernel: a helper several kernels call).
  Operation *getDynamicSharedMemoryOwner(Operation *function);
  /// A byte range [low, high) of a buffer.
  struct Footprint {
    LinearExpr low, high;
  };
  /// The byte ranges the elements of `memref` are known to lie in, tightest
  /// first: its own, then those of the views it was cut from (a view stays
  /// inside its source). `buffer` is set to the buffer, null when unknown.
  /// With `address`, for an address taken out of `memref`: the base buffer
  /// of `memref.extract_strided_metadata` stands for the memref it
  /// describes.
  SmallVector<Footprint> getFootprints(Value memref, const void *&buffer,
                                       bool address);
  /// Whether the byte ranges [a.low, a.high) and [b.low, b.high) are shown
  /// apart given `facts`: one ends before the other starts.
  bool isApart(const Footprint &a, const Footprint &b, const PathFacts &facts);
  /// A buffer whose first dimension a kvpipe.index selects the slot of.
  struct Ring {
    Value ring;
    const void *buffer;
    /// A slot of its pipeline (for diagnostics) and the pipeline.
    Value slot, pipeline;
    /// An op that indexes it by the slot.
    Operation *indexedAt;
  };
  SmallVector<Ring> rings;
  void collectRings();
  /// The slots of `ring` the byte ranges `footprints` (getFootprints)
  /// overlap: none where one of the ranges is disjoint from the ring (given
  /// `facts`), nothing where the overlap cannot be determined. `exact` is
  /// set where the slots are those of the memref's own range (not of a view
  /// it was cut from, which it may overlap only in part).
  std::optional<SmallVector<int64_t>>
  getOverlappedSlots(ArrayRef<Footprint> footprints, const Ring &ring,
                     const PathFacts &facts, bool *exact = nullptr);
  /// What holds on every path to `op`: the conditions of the `scf.if`
  /// branches around it.
  PathFacts getFactsAt(Operation *op);
  /// The slot (representative) of `pipeline` that is at ring position
  /// `position` when `op` runs: the state of the last wait, release, acquire
  /// or commit of the pipeline before `op` at that position, where every
  /// such state's position is known (a constant advance from its
  /// kvpipe.create); null otherwise.
  Value getSlotAtPosition(Operation *op, Value pipeline, int64_t position);
  /// Where `op` runs before `pipeline` exists: it lies (or is nested in an
  /// op, `ancestor`, that lies) before the pipeline's one kvpipe.init in the
  /// init's block, so that no state holds a slot yet and the init's CTA
  /// barrier orders it before every state's access. Returns that init (and
  /// sets `ancestor`), or null.
  InitOp getInitAfter(Operation *op, Value pipeline, Operation *&ancestor);
  /// Each pipeline's one kvpipe.init (null where it has none or several:
  /// rule 2's errors), found once.
  std::optional<DenseMap<Value, InitOp>> initOfPipeline;
  /// An op accessing `memref`, whose address is not computed from a
  /// kvpipe.index: where it overlaps a ring's slots, it accesses them.
  void checkAliasedAccess(Operation *op, Value memref);
  /// An op taking an address out of `memref` (takesAddressOut) where
  /// `memref` may overlap a ring: unproven, unless it is
  /// `memref.extract_aligned_pointer_as_index` whose address only computes
  /// offsets of views, indices and conditions.
  void checkAddressTaken(Operation *op, Value memref);
  /// Rule 10: accesses of a ring's slots around the view chain rules 7 to 9
  /// follow: through a buffer that overlaps a slot at an offset not
  /// computed from a kvpipe.index (a second memref.view of the same bytes,
  /// a subview at a constant slot), and through an address taken out of a
  /// memref that may overlap a ring.
  void checkSlotAliases();
  /// Rule 10: a view or an access at a ring's slot (its first offset or
  /// index a kvpipe.index) reaches no further along the slot dimension than
  /// the slot: a subview of size 2 there, a vector whose dimension walks
  /// it, is slot + 1 too, which the state does not hold.
  void checkSlotExtents();

  // 12. Rings apart (ProtocolRings.cpp)
  /// Where a ring lies in its buffer: its bytes [low, high), the byte stride
  /// between its slots, and the bytes of one slot from its start.
  struct RingBytes {
    LinearExpr low, high;
    int64_t slotStride = 0, slotBytes = 0;
  };
  std::optional<RingBytes> getRingBytes(const Ring &ring);
  /// Whether pipelines `a` and `b` (representatives) are one: two creates
  /// are different; two a helper receives are what every call passes.
  enum class Sameness { same, different, unknown };
  Sameness comparePipelines(mlir::Value a, mlir::Value b, unsigned depth);
  /// The rings that TMA loads, bulk copies and cp.async fill through a
  /// pipeline's slots share no bytes with any other ring (of another
  /// pipeline, or another ring of the same pipeline unless it is the same
  /// slots seen through another view): one ring for two pipelines, or two
  /// rings whose ranges overlap, is an error; ranges the checker cannot
  /// show apart are unproven.
  void checkRingsApart();

  // 13. No wait-for cycle (ProtocolWaitCycles.cpp)
  /// The slots `state` lies past the state its iteration of the innermost
  /// loop carrying its pipeline starts from, where constant.
  std::optional<int64_t> getIterationOffset(mlir::Value state);
  /// A commit or release runs only after the waits and acquires its threads
  /// run before it; a wait returns only after the commit of its slot, an
  /// acquire of slot k >= kv_stages only after the release of k - kv_stages.
  /// A cycle of these dependencies is a deadlock: an error where every
  /// slot is known (ops outside loops, a constant advance from the
  /// kvpipe.create), unproven where the cycle runs through ops in loops whose
  /// slots may match. An acquire's dependency on a release is followed only
  /// where both are outside loops (a known gap).
  void checkWaitCycles();

  /// Ops reported as unfollowed by rule 7, and branch ops by rule 3.
  DenseSet<Operation *> unfollowed, reportedBranches;
  Operation *root;
  PipelineFlow flow;
  SlotArithmetic arithmetic;
  DominanceInfo dominance;
  bool strict;
  /// Pipelines (representatives) with an error from the balance rules.
  DenseSet<Value> unbalanced;
  /// Ops reported for using a state after it was advanced.
  DenseSet<Operation *> staleUsers;
  bool hasErrors = false;
};

} // namespace kvpipe::detail

#endif // KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_PROTOCOLCHECKER_H
