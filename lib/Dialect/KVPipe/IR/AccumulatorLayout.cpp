//===- AccumulatorLayout.cpp - the wgmma accumulator fragment layout ------===//

#include "kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h"

using namespace mlir;
using namespace kvpipe;

// The layout's invariants, checked where it is defined.
static_assert(AccumulatorLayout::threadRow(3, 31) +
                      AccumulatorLayout::rowOffset(2) ==
                  AccumulatorLayout::kRows - 1,
              "the last thread's second row half is the tile's last row");
static_assert(AccumulatorLayout::threadColumn(3) +
                      AccumulatorLayout::columnOffset(3) ==
                  AccumulatorLayout::kColumnGroupWidth - 1,
              "a group of four elements of a quad spans 8 columns");

LogicalResult
kvpipe::verifyAccumulatorFragment(Type type,
                                  function_ref<InFlightDiagnostic()> emitError,
                                  StringRef name, bool allowHalf) {
  auto vector = dyn_cast<VectorType>(type);
  if (!vector || vector.getRank() != 1 || vector.isScalable())
    return emitError() << name << " must be a 1-D vector (a thread's fragment), got "
                       << type;
  Type element = vector.getElementType();
  if (!element.isF32() && !(allowHalf && (element.isBF16() || element.isF16())))
    return emitError() << name << " must hold f32"
                       << (allowHalf ? ", bf16 or f16" : "")
                       << " elements, got " << element;
  int64_t n = vector.getNumElements();
  if (n <= 0 || n % 4 != 0)
    return emitError() << name
                       << " must have a positive multiple of 4 elements (the "
                          "fragment of a 64 x N accumulator, N a multiple of "
                          "8), got "
                       << n;
  return success();
}
