//===- KernelParts.cpp - building blocks of attention kernels -------------===//

#include "kvpipe/Dialect/KVPipe/Transforms/KernelParts.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <cmath>

using namespace mlir;
using namespace kvpipe;

Value kvpipe::buildTileView(ImplicitLocOpBuilder &b, Value ring,
                            ArrayRef<OpFoldResult> offsets,
                            ArrayRef<int64_t> sizes) {
  auto ringType = cast<MemRefType>(ring.getType());
  SmallVector<OpFoldResult> fullSizes, strides;
  int64_t dropped = ringType.getRank() - sizes.size();
  for (int64_t i = 0; i < ringType.getRank(); ++i) {
    fullSizes.push_back(b.getIndexAttr(i < dropped ? 1 : sizes[i - dropped]));
    strides.push_back(b.getIndexAttr(1));
  }
  auto resultType = memref::SubViewOp::inferRankReducedResultType(
      sizes, ringType, offsets, fullSizes, strides);
  return memref::SubViewOp::create(b, cast<MemRefType>(resultType), ring,
                                   offsets, fullSizes, strides);
}

Value kvpipe::buildSlotWait(ImplicitLocOpBuilder &b, Value ring, Value state,
                            ArrayRef<int64_t> tileShape) {
  ConsumerWaitOp::create(b, state, nullptr);
  SmallVector<OpFoldResult> offsets = {Value(IndexOp::create(b, state))};
  offsets.append(tileShape.size(), b.getIndexAttr(0));
  return buildTileView(b, ring, offsets, tileShape);
}

Value kvpipe::buildRetireAndRelease(ImplicitLocOpBuilder &b, Value &fragment,
                                    int64_t pending, Value state,
                                    Value elected) {
  fragment = WarpgroupWaitOp::create(b, TypeRange{fragment.getType()},
                                     ValueRange{fragment}, pending)
                 .getResult(0);
  // Only now: the wgmma that read the slot has retired.
  return ConsumerReleaseOp::create(b, state, elected, nullptr);
}

OnlineSoftmaxStep kvpipe::buildOnlineSoftmaxStep(ImplicitLocOpBuilder &b,
                                                 Value s, Value scaleLog2,
                                                 const OnlineSoftmaxStats &stats,
                                                 Type pElementType) {
  auto f32 = [&](double v) -> Value {
    return arith::ConstantFloatOp::create(b, b.getF32Type(),
                                          APFloat(static_cast<float>(v)));
  };
  // Running max per row, across the row's 4 lanes.
  Value m[2] = {stats.m0, stats.m1}, l[2] = {stats.l0, stats.l1};
  Value mNew[2], scaledMax[2], alpha[2];
  for (int half : {0, 1}) {
    Value rowMax = FragmentRowMaxOp::create(b, b.getF32Type(), s, half);
    mNew[half] = arith::MaxNumFOp::create(b, m[half], rowMax);
    // A row with no valid key yet keeps max -inf; use 0 so that
    // exp2(-inf - 0) = 0 rather than NaN.
    Value isEmpty = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ,
                                          mNew[half], f32(-INFINITY));
    scaledMax[half] = arith::SelectOp::create(
        b, isEmpty, f32(0.0), arith::MulFOp::create(b, mNew[half], scaleLog2));
    // exp2((m_old - m_new) * c): rescales what was accumulated so far.
    alpha[half] = math::Exp2Op::create(
        b,
        arith::SubFOp::create(b, arith::MulFOp::create(b, m[half], scaleLog2),
                              scaledMax[half]));
  }
  // P = exp2(S * c - m * c): the scale folded into one FMA per element.
  Value p = FragmentExp2Op::create(b, s.getType(), s, scaleLog2,
                                   scaledMax[0], scaledMax[1]);
  Value lNew[2];
  for (int half : {0, 1}) {
    // Row sums stay per thread; the 4 lanes are combined once, at the end.
    Value rowSum = FragmentRowSumOp::create(b, b.getF32Type(), p, half);
    lNew[half] = math::FmaOp::create(b, l[half], alpha[half], rowSum);
  }
  auto sType = cast<VectorType>(s.getType());
  Value pNarrow = arith::TruncFOp::create(
      b, VectorType::get(sType.getShape(), pElementType), p);
  return {{mNew[0], mNew[1], lNew[0], lNew[1]}, alpha[0], alpha[1], pNarrow};
}
