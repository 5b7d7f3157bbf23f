//===- OverlapSoftmax.cpp - softmax of block j under the GEMMs of j-1 -----===//
//
// FA3's intra-warpgroup overlap as a rewrite of the K/V loop of a consumer.
// The skeleton's loop runs each block's steps in order, the tensor cores
// idle during the softmax:
//
//   for j:  QK:  wait K_j; S = Q K_j^T (+ bias_j)      (wgmma SS)
//           QK': retire S (pending 0); release K_j
//           SM:  mask, online softmax -> P_j, statistics, alpha_j
//           R:   O = rescale(O, alpha_j)
//           PV:  wait V_j; O += P_j V_j                (wgmma RS)
//           PV': retire O (pending 0); release V_j
//
// The rewrite peels block 0 and the last P V and issues, in the steady
// state, S_j together with O += P_{j-1} V_{j-1}; S_j retires first (pending
// 1) and its softmax runs while the tensor cores still compute
// P_{j-1} V_{j-1}. O is then rescaled after the P V that precedes the new
// maximum, which is the same sum: (O + P_{j-1} V_{j-1}) alpha_j.
//
//   if n > b:                                 (blocks b..n-1)
//     QK(b); QK'(b); SM(b)
//     for j in b+1..n:  QK(j); PV(j-1); QK'(j, pending 1); SM(j);
//                     PV'(j-1, pending 0); R(j)
//     PV(n-1); PV'(n-1)
//
// The protocol is unchanged: a slot is released only after the wgmma
// reading it retired. The segments are found by the ops that delimit them;
// a loop of another shape is left alone.
//
//===----------------------------------------------------------------------===//

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelTransforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kvpipe-overlap-softmax"

using namespace mlir;
using namespace kvpipe;

namespace {

/// The steps of one iteration of the skeleton's K/V loop.
struct KVLoopSteps {
  /// QK: from the body's start to the S wgmma, inclusive.
  WarpgroupMmaOp mmaQK;
  /// QK': S's retire and K's release.
  WarpgroupWaitOp retireQK;
  ConsumerReleaseOp releaseK;
  /// R: the rescale of the accumulator (an iteration argument).
  FragmentRescaleOp rescale;
  /// PV: from after R to the O wgmma, inclusive; PV': its retire and V's
  /// release.
  WarpgroupMmaOp mmaPV;
  WarpgroupWaitOp retirePV;
  ConsumerReleaseOp releaseV;
  /// Iteration arguments: K's and V's states and the accumulator.
  unsigned k, v, o;
};

/// The operation after `op` in its block, if any.
Operation *next(Operation *op) {
  return op == &op->getBlock()->back() ? nullptr : op->getNextNode();
}

/// Reads the steps of `loop`'s body, or says why it is not such a loop.
FailureOr<KVLoopSteps> matchKVLoop(scf::ForOp loop) {
  auto fail = [&](const char *why) -> FailureOr<KVLoopSteps> {
    LLVM_DEBUG(llvm::dbgs() << "not a K/V loop (" << why << "): "
                            << loop.getLoc() << "\n");
    return failure();
  };
  Block *body = loop.getBody();
  auto iterIndex = [&](Value v) -> std::optional<unsigned> {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != body || arg.getArgNumber() == 0)
      return std::nullopt;
    return arg.getArgNumber() - 1;
  };
  KVLoopSteps steps;
  auto firstWait = dyn_cast<ConsumerWaitOp>(&body->front());
  if (!firstWait)
    return fail("does not start with a consumer_wait");
  std::optional<unsigned> k = iterIndex(firstWait.getPipeline());
  if (!k)
    return fail("the first wait is not on an iteration argument");
  steps.k = *k;
  for (Operation &op : *body)
    if (auto mma = dyn_cast<WarpgroupMmaOp>(op)) {
      steps.mmaQK = mma;
      break;
    }
  if (!steps.mmaQK)
    return fail("no S = Q K^T wgmma");
  // S may be accumulated by more than one wgmma (separable_bias_mma's
  // key-term k-step, then Q K^T): the step ends at the last of the chain,
  // each of whose wgmmas accumulates onto the one before (the next wgmma
  // after it in the block).
  for (Operation *op = next(steps.mmaQK); op; op = next(op)) {
    auto mma = dyn_cast<WarpgroupMmaOp>(op);
    if (!mma)
      continue;
    if (mma.getAcc() != steps.mmaQK.getResult())
      break;
    steps.mmaQK = mma;
  }
  // S starts at zero or at a fragment the QK step computes (an additive
  // score_mod's bias, `bias_accumulator`), which moves with it.
  if (Value acc = steps.mmaQK.getAcc()) {
    Operation *def = acc.getDefiningOp();
    if (!def || def->getBlock() != body)
      return fail("S's initial accumulator is not computed in its step");
  }
  steps.retireQK = dyn_cast_or_null<WarpgroupWaitOp>(next(steps.mmaQK));
  if (!steps.retireQK || steps.retireQK.getFragments().size() != 1 ||
      steps.retireQK.getFragments()[0] != steps.mmaQK.getResult())
    return fail("S is not retired right after its wgmma");
  steps.releaseK = dyn_cast_or_null<ConsumerReleaseOp>(next(steps.retireQK));
  if (!steps.releaseK || steps.releaseK.getPipeline() != firstWait.getPipeline())
    return fail("K is not released right after S retired");
  for (Operation *op = next(steps.releaseK); op; op = next(op))
    if (auto rescale = dyn_cast<FragmentRescaleOp>(op))
      if (iterIndex(rescale.getFragment())) {
        steps.rescale = rescale;
        break;
      }
  if (!steps.rescale)
    return fail("no rescale of the accumulator");
  steps.o = *iterIndex(steps.rescale.getFragment());
  for (Operation *op = next(steps.rescale); op; op = next(op))
    if (auto mma = dyn_cast<WarpgroupMmaOp>(op)) {
      steps.mmaPV = mma;
      break;
    }
  if (!steps.mmaPV || steps.mmaPV.getAcc() != steps.rescale.getResult())
    return fail("no O += P V wgmma on the rescaled accumulator");
  steps.retirePV = dyn_cast_or_null<WarpgroupWaitOp>(next(steps.mmaPV));
  if (!steps.retirePV || steps.retirePV.getFragments().size() != 1 ||
      steps.retirePV.getFragments()[0] != steps.mmaPV.getResult())
    return fail("O is not retired right after its wgmma");
  steps.releaseV = dyn_cast_or_null<ConsumerReleaseOp>(next(steps.retirePV));
  std::optional<unsigned> v =
      steps.releaseV ? iterIndex(steps.releaseV.getPipeline()) : std::nullopt;
  if (!v)
    return fail("V is not released right after O retired");
  steps.v = *v;
  auto yield = dyn_cast_or_null<scf::YieldOp>(next(steps.releaseV));
  if (!yield)
    return fail("V's release is not the iteration's last step");
  if (yield.getOperand(steps.k) != steps.releaseK.getResult() ||
      yield.getOperand(steps.v) != steps.releaseV.getResult() ||
      yield.getOperand(steps.o) != steps.retirePV.getResult(0))
    return fail("the iteration does not carry K, V and O to the next");
  if (steps.k == steps.v || steps.k == steps.o || steps.v == steps.o)
    return fail("K, V and O are not distinct iteration arguments");
  return steps;
}

/// Clones the ops of [first, last] (a range of one block) with `mapping`.
void cloneRange(RewriterBase &rewriter, Operation *first, Operation *last,
                IRMapping &mapping) {
  for (Operation *op = first;; op = op->getNextNode()) {
    rewriter.clone(*op, mapping);
    if (op == last)
      return;
  }
}

} // namespace

LogicalResult kvpipe::overlapSoftmaxLoop(RewriterBase &rewriter,
                                         scf::ForOp loop) {
  FailureOr<KVLoopSteps> matched = matchKVLoop(loop);
  if (failed(matched))
    return failure();
  KVLoopSteps st = *matched;
  OpBuilder::InsertionGuard guard(rewriter);
  Location loc = loop.getLoc();
  Block *body = loop.getBody();
  Value iv = loop.getInductionVar();
  ValueRange iterArgs = loop.getRegionIterArgs();
  ValueRange inits = loop.getInitArgs();
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  Value p16 = st.mmaPV.getA();
  unsigned numIter = iterArgs.size();

  // Segments of the body, as [first, last].
  Operation *qkFirst = &body->front(), *qkLast = st.mmaQK;
  Operation *smFirst = next(st.releaseK), *smLast = st.rescale->getPrevNode();
  Operation *pvFirst = next(st.rescale), *pvLast = st.mmaPV;
  auto cloneQK = [&](IRMapping &m) { cloneRange(rewriter, qkFirst, qkLast, m); };
  auto cloneRetire = [&](IRMapping &m, WarpgroupWaitOp retire,
                         ConsumerReleaseOp release, int64_t pending) {
    auto clone = cast<WarpgroupWaitOp>(rewriter.clone(*retire, m));
    clone.setPending(pending);
    rewriter.clone(*release, m);
  };
  auto cloneSoftmax = [&](IRMapping &m) {
    if (smFirst != st.rescale.getOperation())
      cloneRange(rewriter, smFirst, smLast, m);
  };
  auto clonePV = [&](IRMapping &m) { cloneRange(rewriter, pvFirst, pvLast, m); };

  rewriter.setInsertionPoint(loop);
  // The loop may start past block 0 (a window's first block) and run no
  // iteration at all (a tile whose rows see no key).
  Value lowerBound = loop.getLowerBound();
  Value any = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ugt,
                                    loop.getUpperBound(), lowerBound);
  auto ifAny = scf::IfOp::create(rewriter, loc, loop.getResultTypes(), any,
                                 /*withElseRegion=*/true);
  rewriter.setInsertionPointToStart(ifAny.elseBlock());
  scf::YieldOp::create(rewriter, loc, inits);

  // Block 0: S_0 and its softmax; O is still the initial one.
  rewriter.setInsertionPointToStart(ifAny.thenBlock());
  IRMapping first;
  first.map(iterArgs, inits);
  first.map(iv, lowerBound);
  cloneQK(first);
  cloneRetire(first, st.retireQK, st.releaseK, /*pending=*/0);
  cloneSoftmax(first);
  SmallVector<Value> loopInits;
  for (unsigned i = 0; i < numIter; ++i)
    loopInits.push_back(i == st.k   ? first.lookup(st.releaseK.getResult())
                        : i == st.v ? inits[i]
                        : i == st.o ? inits[i]
                                    : first.lookupOrDefault(yield.getOperand(i)));
  loopInits.push_back(first.lookup(p16));

  // Steady state: S_j with P_{j-1} V_{j-1} in flight.
  auto steady = scf::ForOp::create(
      rewriter, loc,
      arith::AddIOp::create(rewriter, loc, lowerBound, loop.getStep()),
      loop.getUpperBound(), loop.getStep(), loopInits);
  {
    OpBuilder::InsertionGuard inner(rewriter);
    Block *steadyBody = steady.getBody();
    // The builder of scf.for adds an empty yield when there are no results;
    // with results the body is empty.
    if (!steadyBody->empty())
      rewriter.eraseOp(steadyBody->getTerminator());
    rewriter.setInsertionPointToStart(steadyBody);
    ValueRange newIter = steady.getRegionIterArgs();
    IRMapping m;
    m.map(iv, steady.getInductionVar());
    m.map(iterArgs, newIter.take_front(numIter));
    cloneQK(m);
    // P_{j-1} V_{j-1} on the accumulator as carried (not yet rescaled).
    m.map(p16, newIter.back());
    m.map(st.rescale.getResult(), newIter[st.o]);
    clonePV(m);
    cloneRetire(m, st.retireQK, st.releaseK, /*pending=*/1);
    cloneSoftmax(m);
    cloneRetire(m, st.retirePV, st.releaseV, /*pending=*/0);
    // R after the P V it now follows.
    m.map(iterArgs[st.o], m.lookup(st.retirePV.getResult(0)));
    Value rescaled = rewriter.clone(*st.rescale, m)->getResult(0);
    SmallVector<Value> yields;
    for (unsigned i = 0; i < numIter; ++i)
      yields.push_back(i == st.o ? rescaled
                                 : m.lookupOrDefault(yield.getOperand(i)));
    yields.push_back(m.lookup(p16));
    scf::YieldOp::create(rewriter, loc, yields);
  }

  // The last P V.
  IRMapping last;
  ValueRange results = steady.getResults();
  last.map(iterArgs, results.take_front(numIter));
  last.map(p16, results.back());
  last.map(st.rescale.getResult(), results[st.o]);
  clonePV(last);
  cloneRetire(last, st.retirePV, st.releaseV, /*pending=*/0);
  SmallVector<Value> ifYields;
  for (unsigned i = 0; i < numIter; ++i)
    ifYields.push_back(i == st.v   ? last.lookup(st.releaseV.getResult())
                       : i == st.o ? last.lookup(st.retirePV.getResult(0))
                                   : results[i]);
  scf::YieldOp::create(rewriter, loc, ifYields);

  LLVM_DEBUG(llvm::dbgs() << "overlapped the softmax of the K/V loop at "
                          << loc << "\n");
  rewriter.replaceOp(loop, ifAny.getResults());
  return success();
}

LogicalResult kvpipe::applyOverlapSoftmax(RewriterBase &rewriter,
                                          WarpRolesOp roles) {
  SmallVector<scf::ForOp> loops;
  roles.getConsumer().walk([&](scf::ForOp loop) {
    if (succeeded(matchKVLoop(loop)))
      loops.push_back(loop);
  });
  for (scf::ForOp loop : loops)
    if (failed(overlapSoftmaxLoop(rewriter, loop)))
      return failure();
  return success(!loops.empty());
}
