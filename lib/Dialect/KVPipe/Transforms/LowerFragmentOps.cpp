//===- LowerFragmentOps.cpp - online-softmax fragment ops to vector ops ---===//
//
// The fragment ops of the online softmax (KVPipeKernelOps.td) become vector,
// gpu, arith and math ops on the accumulator layout (AccumulatorLayout.h),
// through the Fragment helpers:
//
//   fragment_row_max  shuffle out the row half, vector.reduction <maxnumf>,
//                     (+ offset), then gpu.shuffle xor 1 and 2 across the quad
//   fragment_row_sum  shuffle out the row half, vector.reduction <add>
//   quad_sum          gpu.shuffle xor 1 and 2, adds
//   fragment_rescale  x * select(second row half, factor1, factor0); with
//                     skip_unit inside scf.if (nvvm.vote.sync any: some
//                     lane's factor is not 1)
//   fragment_exp2     math.exp2(math.fma(x, scale, -select(..offsets..)))
//
//===----------------------------------------------------------------------===//

#include "Fragment.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelTransforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace kvpipe;

namespace {

int64_t elementsOf(Value fragment) {
  return cast<VectorType>(fragment.getType()).getNumElements();
}

struct FragmentRowMaxOpLowering : OpRewritePattern<FragmentRowMaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(FragmentRowMaxOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Fragment frag(b, elementsOf(op.getFragment()));
    if (!op.getOffset()) {
      rewriter.replaceOp(op, frag.reduceRow(op.getFragment(), op.getRow(),
                                            vector::CombiningKind::MAXNUMF,
                                            /*acrossLanes=*/true));
      return success();
    }
    Value own = frag.reduceRow(op.getFragment(), op.getRow(),
                               vector::CombiningKind::MAXNUMF,
                               /*acrossLanes=*/false);
    own = arith::AddFOp::create(b, own, op.getOffset());
    rewriter.replaceOp(
        op, frag.reduceAcrossLanes(own, vector::CombiningKind::MAXNUMF));
    return success();
  }
};

struct FragmentRowSumOpLowering : OpRewritePattern<FragmentRowSumOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(FragmentRowSumOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Fragment frag(b, elementsOf(op.getFragment()));
    rewriter.replaceOp(op, frag.reduceRow(op.getFragment(), op.getRow(),
                                          vector::CombiningKind::ADD,
                                          /*acrossLanes=*/false));
    return success();
  }
};

struct QuadSumOpLowering : OpRewritePattern<QuadSumOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(QuadSumOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    // The fragment size does not matter for a scalar across the quad.
    Fragment frag(b, /*numElements=*/4);
    rewriter.replaceOp(op, frag.reduceAcrossLanes(op.getValue(),
                                                  vector::CombiningKind::ADD));
    return success();
  }
};

struct FragmentRescaleOpLowering : OpRewritePattern<FragmentRescaleOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(FragmentRescaleOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Fragment frag(b, elementsOf(op.getFragment()));
    auto multiply = [&](Value fragment) -> Value {
      return arith::MulFOp::create(
          b, fragment, frag.perRow(op.getFactor0(), op.getFactor1()));
    };
    if (!op.getSkipUnit()) {
      rewriter.replaceOp(op, multiply(op.getFragment()));
      return success();
    }
    // late_retire: the wgmma wait that produced the fragment moves into the
    // branch's arms (below the vote, above which ptxas does not hoist it);
    // the releases between the two move after the branch, so none of their
    // users may come before it.
    WarpgroupWaitOp retire;
    SmallVector<Operation *> releases;
    if (op.getLateRetire())
      if (auto wait = op.getFragment().getDefiningOp<WarpgroupWaitOp>();
          wait && wait.getPending() == 0 && wait->getNumResults() == 1 &&
          wait->hasOneUse() && wait->getBlock() == op->getBlock()) {
        retire = wait;
        for (Operation *at = wait->getNextNode(); at != op.getOperation();
             at = at->getNextNode())
          if (isa<ConsumerReleaseOp>(at)) {
            releases.push_back(at);
            for (Operation *user : at->getUsers())
              if (user->getBlock() == op->getBlock() &&
                  user->isBeforeInBlock(op))
                retire = WarpgroupWaitOp();
          }
      }
    auto retired = [&]() -> Value {
      if (!retire)
        return op.getFragment();
      return b.clone(*retire)->getResult(0);
    };
    // Multiply only if some lane of the warp has a factor other than 1: the
    // vote makes the branch warp-uniform.
    Value one = arith::ConstantFloatOp::create(b, b.getF32Type(),
                                               APFloat(1.0f));
    auto notOne = [&](Value factor) {
      return arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, factor, one);
    };
    Value mine = arith::OrIOp::create(b, notOne(op.getFactor0()),
                                      notOne(op.getFactor1()));
    Value fullWarp = arith::ConstantIntOp::create(b, b.getI32Type(), -1);
    Value any = NVVM::VoteSyncOp::create(b, b.getI1Type(), fullWarp, mine,
                                         NVVM::VoteSyncKind::any);
    auto ifAny = scf::IfOp::create(b, op.getType(), any,
                                   /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifAny.thenBlock());
      scf::YieldOp::create(b, multiply(retired()));
      b.setInsertionPointToStart(ifAny.elseBlock());
      scf::YieldOp::create(b, retired());
    }
    if (retire) {
      // A slot is released only after the wgmma reading it retired.
      Operation *after = ifAny;
      for (Operation *release : releases) {
        rewriter.moveOpAfter(release, after);
        after = release;
      }
    }
    rewriter.replaceOp(op, ifAny.getResult(0));
    if (retire)
      rewriter.eraseOp(retire);
    return success();
  }
};

/// 2^x on the FMA pipe, element by element (FragmentExp2Op's `emulated`,
/// FA4's exp2 emulation): x = j + f with j = round(x) (adding 1.5 x 2^23
/// leaves j in the low mantissa bits of t = x + 1.5 x 2^23), 2^f by a
/// degree-3 minimax polynomial on [-0.5, 0.5] (relative error 7.5e-5), j
/// added to its exponent field (t's bits shifted by 23: the constant's own
/// bits shift out). Below -125 (where 126 + j underflows the exponent) the
/// result is 0, which also covers -inf and the NaN f it gives.
static Value buildPolynomialExp2(ImplicitLocOpBuilder &b, Value x) {
  auto type = cast<VectorType>(x.getType());
  auto intType = VectorType::get(type.getShape(), b.getI32Type());
  auto splat = [&](float v) -> Value {
    return arith::ConstantOp::create(b, type,
                                     DenseElementsAttr::get(type, v));
  };
  Value magic = splat(12582912.0f); // 1.5 x 2^23
  Value t = arith::AddFOp::create(b, x, magic);
  Value f = arith::SubFOp::create(b, x, arith::SubFOp::create(b, t, magic));
  // Horner, highest degree first (coefficients fitted for relative error).
  Value p = splat(0.0551709346f);
  for (float c : {0.242609322f, 0.693260968f, 0.999928176f})
    p = math::FmaOp::create(b, p, f, splat(c));
  Value exponent = arith::ShLIOp::create(
      b, arith::BitcastOp::create(b, intType, t),
      arith::ConstantOp::create(b, intType,
                                DenseElementsAttr::get(intType, int32_t(23))));
  Value scaled = arith::BitcastOp::create(
      b, type,
      arith::AddIOp::create(b, arith::BitcastOp::create(b, intType, p),
                            exponent));
  Value inRange =
      arith::CmpFOp::create(b, arith::CmpFPredicate::OGE, x, splat(-125.0f));
  return arith::SelectOp::create(b, inRange, scaled, splat(0.0f));
}

struct FragmentExp2OpLowering : OpRewritePattern<FragmentExp2Op> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(FragmentExp2Op op,
                                PatternRewriter &rewriter) const override {
    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Fragment frag(b, elementsOf(op.getFragment()));
    // One FMA per element: x * scale + (-offset of the row). The exp2 may
    // be approximate (afn): ex2.approx.ftz, one MUFU.EX2 (ApproxMathToNVVM).
    Value x = math::FmaOp::create(
        b, op.getFragment(),
        vector::BroadcastOp::create(b, frag.type(), op.getScale()),
        arith::NegFOp::create(b,
                              frag.perRow(op.getOffset0(), op.getOffset1())));
    auto sfu = [&](Value v) -> Value {
      return math::Exp2Op::create(b, v, arith::FastMathFlags::afn);
    };
    int64_t emulated = op.getEmulated();
    int64_t n = frag.type().getNumElements();
    if (emulated == 0 || emulated == 8) {
      rewriter.replaceOp(op, emulated ? buildPolynomialExp2(b, x) : sfu(x));
      return success();
    }
    // Elements i with i mod 8 < emulated on the FMA pipe, the others on
    // the SFU: two shuffled halves, then back in order.
    SmallVector<int64_t> onFma, onSfu, order(n);
    for (int64_t i = 0; i < n; ++i)
      (i % 8 < emulated ? onFma : onSfu).push_back(i);
    for (auto [k, i] : llvm::enumerate(onSfu))
      order[i] = k;
    for (auto [k, i] : llvm::enumerate(onFma))
      order[i] = onSfu.size() + k;
    Value sfuPart = sfu(vector::ShuffleOp::create(b, x, x, onSfu));
    Value fmaPart =
        buildPolynomialExp2(b, vector::ShuffleOp::create(b, x, x, onFma));
    rewriter.replaceOp(op, vector::ShuffleOp::create(b, sfuPart, fmaPart, order));
    return success();
  }
};

} // namespace

void kvpipe::populateLowerFragmentOpsPatterns(RewritePatternSet &patterns) {
  patterns.add<FragmentRowMaxOpLowering, FragmentRowSumOpLowering,
               QuadSumOpLowering, FragmentRescaleOpLowering,
               FragmentExp2OpLowering>(patterns.getContext());
}
