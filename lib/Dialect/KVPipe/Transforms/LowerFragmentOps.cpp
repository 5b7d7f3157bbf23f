//===- LowerFragmentOps.cpp - online-softmax fragment ops to vector ops ---===//
//
// The fragment ops of the online softmax (KVPipeKernelOps.td) become vector,
// gpu, arith and math ops on the accumulator layout (AccumulatorLayout.h),
// through the Fragment helpers:
//
//   fragment_row_max  shuffle out the row half, vector.reduction <maxnumf>,
//                     then gpu.shuffle xor 1 and 2 across the quad
//   fragment_row_sum  shuffle out the row half, vector.reduction <add>
//   quad_sum          gpu.shuffle xor 1 and 2, adds
//   fragment_rescale  x * select(second row half, factor1, factor0)
//   fragment_exp2     math.exp2(math.fma(x, scale, -select(..offsets..)))
//
//===----------------------------------------------------------------------===//

#include "Fragment.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelTransforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

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
    rewriter.replaceOp(op, frag.reduceRow(op.getFragment(), op.getRow(),
                                          vector::CombiningKind::MAXNUMF,
                                          /*acrossLanes=*/true));
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
    rewriter.replaceOp(
        op, arith::MulFOp::create(
                b, op.getFragment(),
                frag.perRow(op.getFactor0(), op.getFactor1())));
    return success();
  }
};

struct FragmentExp2OpLowering : OpRewritePattern<FragmentExp2Op> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(FragmentExp2Op op,
                                PatternRewriter &rewriter) const override {
    rewriter.setInsertionPoint(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Fragment frag(b, elementsOf(op.getFragment()));
    // One FMA per element: x * scale + (-offset of the row). The exp2 may
    // be approximate (afn): ex2.approx.ftz, one MUFU.EX2 (ApproxMathToNVVM).
    rewriter.replaceOp(
        op, math::Exp2Op::create(
                b,
                math::FmaOp::create(
                    b, op.getFragment(),
                    vector::BroadcastOp::create(b, frag.type(), op.getScale()),
                    arith::NegFOp::create(
                        b, frag.perRow(op.getOffset0(), op.getOffset1()))),
                arith::FastMathFlags::afn));
    return success();
  }
};

} // namespace

void kvpipe::populateLowerFragmentOpsPatterns(RewritePatternSet &patterns) {
  patterns.add<FragmentRowMaxOpLowering, FragmentRowSumOpLowering,
               QuadSumOpLowering, FragmentRescaleOpLowering,
               FragmentExp2OpLowering>(patterns.getContext());
}
