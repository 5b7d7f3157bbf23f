//===- Fragment.cpp - wgmma accumulator fragments as vectors --------------===//

#include "Fragment.h"

#include "kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;
using namespace kvpipe;

VectorType Fragment::type() const { return VectorType::get({n}, b.getF32Type()); }

Value Fragment::columnOffsets() const {
  SmallVector<int32_t> offsets;
  for (int64_t i = 0; i < n; ++i)
    offsets.push_back(AccumulatorLayout::columnOffset(i));
  auto type = VectorType::get({n}, b.getI32Type());
  return arith::ConstantOp::create(b, type,
                                   DenseElementsAttr::get(type, ArrayRef(offsets)));
}

Value Fragment::isSecondRow() const {
  SmallVector<bool> second;
  for (int64_t i = 0; i < n; ++i)
    second.push_back(AccumulatorLayout::rowHalf(i) == 1);
  auto type = VectorType::get({n}, b.getI1Type());
  return arith::ConstantOp::create(b, type,
                                   DenseElementsAttr::get(type, ArrayRef(second)));
}

Value Fragment::perRow(Value first, Value second) const {
  auto type = VectorType::get({n}, first.getType());
  return arith::SelectOp::create(b, isSecondRow(),
                                 vector::BroadcastOp::create(b, type, second),
                                 vector::BroadcastOp::create(b, type, first));
}

Value kvpipe::reduceAcrossLanes(ImplicitLocOpBuilder &b, Value value,
                               vector::CombiningKind kind,
                               ArrayRef<int32_t> xorOffsets) {
  Value width =
      arith::ConstantIntOp::create(b, AccumulatorLayout::kWarpSize, 32);
  for (int32_t offset : xorOffsets) {
    Value other =
        gpu::ShuffleOp::create(b, value,
                               arith::ConstantIntOp::create(b, offset, 32),
                               width, gpu::ShuffleMode::XOR)
            .getShuffleResult();
    value = vector::makeArithReduction(b, b.getLoc(), kind, value, other);
  }
  return value;
}

Value Fragment::reduceAcrossLanes(Value value,
                                  vector::CombiningKind kind) const {
  return kvpipe::reduceAcrossLanes(b, value, kind,
                                   AccumulatorLayout::kQuadXorOffsets);
}

Value Fragment::reduceRow(Value fragment, int half, vector::CombiningKind kind,
                          bool acrossLanes) const {
  SmallVector<int64_t> indices;
  for (int64_t i = 0; i < n; ++i)
    if (AccumulatorLayout::rowHalf(i) == half)
      indices.push_back(i);
  Value row = vector::ShuffleOp::create(b, fragment, fragment, indices);
  Value partial = vector::ReductionOp::create(b, kind, row);
  return acrossLanes ? reduceAcrossLanes(partial, kind) : partial;
}
