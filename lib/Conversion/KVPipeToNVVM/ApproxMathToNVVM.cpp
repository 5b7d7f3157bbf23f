//===- ApproxMathToNVVM.cpp - approximate math.exp2 to ex2.approx.ftz ------===//
//
// `math.exp2` on f32 with `fastmath<afn>` (the generated softmax's, or a
// modifier region's that allows an approximation) becomes the SFU's
// `ex2.approx.ftz.f32`, one MUFU.EX2. The upstream lowering calls
// libdevice's `__nv_exp2f`, whose non-flushing `ex2.approx.f32` ptxas
// expands to a compare, two predicated multiplies and the MUFU (a third of
// the forward's inner loop at head dim 64: docs/performance.md, v8).
// Flushing subnormals costs attention nothing: a result below 2^-126 is
// added to a row sum of at least 1, and a subnormal argument gives 1 either
// way. Vectors are unrolled element by element.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace kvpipe;

bool kvpipe::isApproximateExp2(math::Exp2Op op) {
  return getElementTypeOrSelf(op.getType()).isF32() &&
         arith::bitEnumContainsAll(op.getFastmath(), arith::FastMathFlags::afn);
}

namespace {

struct ApproxExp2Lowering : ConvertOpToLLVMPattern<math::Exp2Op> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(math::Exp2Op op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isApproximateExp2(op))
      return rewriter.notifyMatchFailure(op, "not an approximate f32 exp2");
    Location loc = op.getLoc();
    Type f32 = rewriter.getF32Type();
    auto ex2 = [&](Value x) -> Value {
      return LLVM::InlineAsmOp::create(
                 rewriter, loc, f32, ValueRange{x},
                 "ex2.approx.ftz.f32 $0, $1;", "=f,f",
                 /*has_side_effects=*/false, /*is_align_stack=*/false,
                 LLVM::tailcallkind::TailCallKind::None,
                 /*asm_dialect=*/nullptr, /*operand_attrs=*/nullptr)
          .getRes();
    };
    Value operand = adaptor.getOperand();
    auto vectorType = dyn_cast<VectorType>(operand.getType());
    if (!vectorType) {
      rewriter.replaceOp(op, ex2(operand));
      return success();
    }
    if (vectorType.getRank() != 1 || vectorType.isScalable())
      return rewriter.notifyMatchFailure(op, "not a 1-D fixed vector");
    Value result = LLVM::PoisonOp::create(rewriter, loc, vectorType);
    for (int64_t i = 0, e = vectorType.getNumElements(); i < e; ++i) {
      Value index = LLVM::ConstantOp::create(rewriter, loc,
                                             rewriter.getI32IntegerAttr(i));
      Value element =
          LLVM::ExtractElementOp::create(rewriter, loc, operand, index);
      result = LLVM::InsertElementOp::create(rewriter, loc, result,
                                             ex2(element), index);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void kvpipe::populateApproxMathToNVVMPatterns(
    const LLVMTypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<ApproxExp2Lowering>(converter);
}
