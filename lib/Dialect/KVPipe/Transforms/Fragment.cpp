//===- Fragment.cpp - wgmma accumulator fragments as vectors --------------===//

#include "Fragment.h"

#include "kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

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

/// The layout's positions agree with its column offsets: position p of a
/// row half is at column offset 8 (p / 2) + p % 2 and is element
/// elementAt(half, p), and positionsLeftOf(u)
/// counts the row half's elements left of u (what columnRangeBits computes).
static constexpr bool positionsMatchColumns() {
  for (int64_t groups = 1; groups <= 32; ++groups)
    for (int64_t u = 0; u <= AccumulatorLayout::kColumnGroupWidth * groups;
         ++u) {
      int64_t left = 0;
      for (int64_t i = 0; i < 4 * groups; ++i) {
        int64_t p = AccumulatorLayout::positionInRowHalf(i);
        if (AccumulatorLayout::columnOffset(i) != 8 * (p / 2) + p % 2 ||
            AccumulatorLayout::elementAt(AccumulatorLayout::rowHalf(i), p) != i)
          return false;
        if (AccumulatorLayout::rowHalf(i) == 0 &&
            AccumulatorLayout::columnOffset(i) < u)
          ++left;
      }
      if (left != AccumulatorLayout::positionsLeftOf(u))
        return false;
    }
  return true;
}
static_assert(positionsMatchColumns());

SmallVector<Value> Fragment::columnRangeBits(Value low, Value high) const {
  auto i32 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, v, 32);
  };
  int64_t positions = n / 2, groups = positions / 2;
  // AccumulatorLayout::positionsLeftOf(u) = 2 (u / 8) + min(u % 8, 2), with
  // u clamped to the fragment's columns [0, 8 groups].
  auto positionsLeftOf = [&](Value u) -> Value {
    u = arith::MinSIOp::create(b, arith::MaxSIOp::create(b, u, i32(0)),
                               i32(AccumulatorLayout::kColumnGroupWidth * groups));
    Value whole = arith::MulIOp::create(
        b, arith::DivUIOp::create(b, u, i32(AccumulatorLayout::kColumnGroupWidth)),
        i32(AccumulatorLayout::kColumnsPerLane));
    Value part = arith::MinUIOp::create(
        b, arith::RemUIOp::create(b, u, i32(AccumulatorLayout::kColumnGroupWidth)),
        i32(AccumulatorLayout::kColumnsPerLane));
    return arith::AddIOp::create(b, whole, part);
  };
  // The word of the first k (0 to 32) bits, without a shift by 32 (poison in
  // arith): ~0 >> (32 - k) for k >= 1, and 0 for k = 0.
  auto lowBits = [&](Value k) -> Value {
    Value shift = arith::SubIOp::create(
        b, i32(32), arith::MaxSIOp::create(b, k, i32(1)));
    Value bits = arith::ShRUIOp::create(b, i32(-1), shift);
    Value none = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, k, i32(0));
    return arith::SelectOp::create(b, none, i32(0), bits);
  };
  Value end = positionsLeftOf(high);
  Value begin = low ? positionsLeftOf(low) : Value();
  SmallVector<Value> words;
  for (int64_t word = 0; word * 32 < positions; ++word) {
    auto inWord = [&](Value count) -> Value {
      return arith::MinSIOp::create(
          b,
          arith::MaxSIOp::create(
              b, arith::SubIOp::create(b, count, i32(32 * word)), i32(0)),
          i32(32));
    };
    Value bits = lowBits(inWord(end));
    if (begin)
      bits = arith::AndIOp::create(
          b, bits,
          arith::XOrIOp::create(b, lowBits(inWord(begin)), i32(-1)));
    words.push_back(bits);
  }
  return words;
}

Value Fragment::selectByBits(ArrayRef<Value> half0, ArrayRef<Value> half1,
                             Value x, Value fill) const {
  // Scalar ops, a row half after the other and each word's bits in order
  // (FA4's order, in which ptxas tests 7 bits of a word with one R2P): a
  // vector form leaves the bit tests to LLVM's scheduling.
  SmallVector<Value> selected(n);
  Value zero = arith::ConstantIntOp::create(b, 0, 32);
  for (int half : {0, 1})
    for (int64_t position = 0; position < n / 2; ++position) {
      int64_t i = AccumulatorLayout::elementAt(half, position);
      Value word = (half ? half1 : half0)[position / 32];
      Value bit = arith::AndIOp::create(
          b, word,
          arith::ConstantIntOp::create(
              b, int64_t(int32_t(uint32_t(1) << (position % 32))), 32));
      Value kept =
          arith::CmpIOp::create(b, arith::CmpIPredicate::ne, bit, zero);
      Value element = vector::ExtractOp::create(b, x, ArrayRef<int64_t>{i});
      selected[i] = arith::SelectOp::create(b, kept, element, fill);
    }
  return vector::FromElementsOp::create(b, type(), selected);
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
