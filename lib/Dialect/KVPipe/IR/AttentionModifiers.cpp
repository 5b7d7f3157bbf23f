//===- AttentionModifiers.cpp - score_mod / mask_mod regions ---------------===//
//
// The verifiers of the modifier regions of kvpipe.attention_kernel and of
// kvpipe.aux_load (docs/modifiers.md). A region is evaluated per score
// element inside the generated softmax, so it must be a function of its
// block arguments and of the auxiliary tensors alone: arith and math ops,
// aux reads, and the yield.
//
//===----------------------------------------------------------------------===//

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/IR/ScoreModDerivative.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace kvpipe;

/// Checks one modifier region: its block arguments (`argTypes`), its ops and
/// its yield (one value of `yieldType`).
static LogicalResult verifyModifierRegion(AttentionKernelOp op, Region &region,
                                          StringRef name,
                                          ArrayRef<Type> argTypes,
                                          StringRef argsMeaning,
                                          Type yieldType) {
  if (region.empty())
    return success();
  Block &block = region.front();
  if (block.getNumArguments() != argTypes.size())
    return op.emitOpError() << "'" << name << "' region must have "
                            << argTypes.size() << " block arguments ("
                            << argsMeaning << "), got "
                            << block.getNumArguments();
  for (auto [i, arg, type] : llvm::enumerate(block.getArguments(), argTypes))
    if (arg.getType() != type)
      return op.emitOpError()
             << "'" << name << "' region's block argument #" << i
             << " must be " << type << " (" << argsMeaning << "), got "
             << arg.getType();
  for (Operation &inner : block.without_terminator()) {
    Dialect *dialect = inner.getDialect();
    bool upstream = dialect && isa<arith::ArithDialect, math::MathDialect>(dialect);
    if (isa<AuxLoadOp>(inner) ||
        (upstream && inner.getNumRegions() == 0 && isMemoryEffectFree(&inner)))
      continue;
    return inner.emitOpError()
           << "is not allowed in the '" << name
           << "' region of kvpipe.attention_kernel: only side-effect free "
              "arith and math ops and kvpipe.aux_load";
  }
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return block.getTerminator()->emitOpError()
           << "must be kvpipe.yield to end the '" << name << "' region";
  if (yield.getValues().size() != 1 ||
      yield.getValues().front().getType() != yieldType)
    return yield.emitOpError() << "must yield one " << yieldType << " in the '"
                               << name << "' region, got "
                               << yield.getValues().size() << " values";
  return success();
}

bool kvpipe::isDifferentiableScoreModOp(Operation *op) {
  return isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
             arith::NegFOp, arith::SelectOp, arith::MaximumFOp,
             arith::MinimumFOp, arith::MaxNumFOp, arith::MinNumFOp,
             math::FmaOp, math::TanhOp, math::ExpOp, math::Exp2Op, math::LogOp,
             math::Log2Op, math::SqrtOp, math::AbsFOp,
             // An integer converted to a float (a comparison of the score,
             // as `s * (s > 0)` traces): derivative zero almost everywhere.
             arith::SIToFPOp, arith::UIToFPOp>(op);
}

/// The backward differentiates a score_mod with respect to the score: every
/// op with a float result that depends on the score must be one it can
/// differentiate (isDifferentiableScoreModOp).
static LogicalResult verifyDifferentiable(Region &region) {
  if (region.empty())
    return success();
  Block &block = region.front();
  llvm::DenseSet<Value> dependent = {block.getArgument(0)};
  for (Operation &op : block.without_terminator()) {
    if (llvm::none_of(op.getOperands(),
                      [&](Value v) { return dependent.contains(v); }))
      continue;
    for (Value result : op.getResults())
      dependent.insert(result);
    bool floatResult = llvm::any_of(op.getResultTypes(), [](Type type) {
      return isa<FloatType>(type);
    });
    if (floatResult && !isDifferentiableScoreModOp(&op))
      return op.emitOpError()
             << "cannot be differentiated in the 'score_mod' region of a "
                "'backward' kvpipe.attention_kernel: the score reaches it, "
                "and the backward differentiates only arith.addf, subf, "
                "mulf, divf, negf, select, maximumf, minimumf, maxnumf, "
                "minnumf, sitofp, uitofp and math.fma, tanh, exp, exp2, "
                "log, log2, sqrt, absf (index arithmetic, comparisons and "
                "integer casts have no derivative to take)";
  }
  return success();
}

LogicalResult AttentionKernelOp::verifyRegions() {
  Builder b(getContext());
  Type index = b.getIndexType();
  bool hasModifiers = !getScoreMod().empty() || !getMaskMod().empty();
  // The backward's dQ turns assume the K/V blocks that reach a Q block are
  // 0 .. m (docs/backward.md); a mask_mod may leave any set.
  if (!getMaskMod().empty() && getDeterministic().value_or(false))
    return emitOpError() << "'mask_mod' is not supported with "
                            "'deterministic' (the ordered dQ additions assume "
                            "the top-left causal mask or none)";
  if (std::optional<ArrayAttr> aux = getAuxTypes()) {
    for (auto [i, attr] : llvm::enumerate(*aux)) {
      Type type = cast<TypeAttr>(attr).getValue();
      if (!type.isF32() && !type.isInteger(32))
        return emitOpError() << "'aux_types' element #" << i
                             << " must be f32 or i32, got " << type;
    }
    if (!hasModifiers && !aux->empty())
      return emitOpError() << "'aux_types' needs a 'score_mod' or 'mask_mod' "
                              "region to read the tensors";
  }
  // Gradients of auxiliary tensors: the backward adds, for each score_mod
  // read of one, the score's gradient times the region's derivative with
  // respect to the value read (docs/modifiers.md).
  if (std::optional<ArrayRef<int64_t>> grads = getAuxGrads()) {
    if (!getBackward().value_or(false) || getScoreMod().empty())
      return emitOpError() << "'aux_grads' needs 'backward' and a 'score_mod' "
                              "region (the gradients of the tensors it reads)";
    size_t count = getAuxTypes() ? getAuxTypes()->size() : 0;
    llvm::SmallDenseSet<int64_t> seen;
    for (int64_t i : *grads) {
      if (i < 0 || static_cast<size_t>(i) >= count)
        return emitOpError() << "'aux_grads' element " << i
                             << " is not an auxiliary tensor (there are "
                             << count << ")";
      if (!cast<TypeAttr>((*getAuxTypes())[i]).getValue().isF32())
        return emitOpError() << "'aux_grads' element " << i
                             << " must name an f32 tensor (an i32 tensor has "
                                "no gradient)";
      if (!seen.insert(i).second)
        return emitOpError() << "'aux_grads' names tensor " << i << " twice";
    }
  }
  if (failed(verifyModifierRegion(
          *this, getScoreMod(), "score_mod",
          {b.getF32Type(), index, index, index, index},
          "f32 scaled score, index batch, head, query, key", b.getF32Type())))
    return failure();
  if (getBackward().value_or(false) &&
      failed(verifyDifferentiable(getScoreMod())))
    return failure();
  return verifyModifierRegion(*this, getMaskMod(), "mask_mod",
                              {index, index, index, index},
                              "index batch, head, query, key", b.getI1Type());
}

LogicalResult AuxLoadOp::verify() {
  auto kernel = (*this)->getParentOfType<AttentionKernelOp>();
  if (!kernel)
    return emitOpError() << "must be in a 'score_mod' or 'mask_mod' region of "
                            "kvpipe.attention_kernel";
  std::optional<ArrayAttr> aux = kernel.getAuxTypes();
  int64_t count = aux ? aux->size() : 0;
  // I64Attr reads back unsigned: a negative index is a huge one.
  int64_t index = static_cast<int64_t>(getAux());
  if (index < 0 || index >= count)
    return emitOpError() << "reads auxiliary tensor #" << index
                         << " but the kernel declares " << count
                         << " in 'aux_types'";
  Type declared = cast<TypeAttr>((*aux)[index]).getValue();
  if (declared != getType())
    return emitOpError() << "result type " << getType()
                         << " must be the element type of auxiliary tensor #"
                         << getAux() << " (" << declared << ")";
  return success();
}
