//===- KVPipeTypes.cpp - kvpipe types and attributes ------------*- C++ -*-===//

#include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.h"
#include "kvpipe/Dialect/KVPipe/IR/AttentionConfig.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kvpipe;

#include "kvpipe/Dialect/KVPipe/IR/KVPipeEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "kvpipe/Dialect/KVPipe/IR/KVPipeAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.cpp.inc"

void KVPipeDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.cpp.inc"
      >();
}

void KVPipeDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "kvpipe/Dialect/KVPipe/IR/KVPipeAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// PipelineType
//===----------------------------------------------------------------------===//

LogicalResult
PipelineType::verify(function_ref<InFlightDiagnostic()> emitError,
                     int64_t kvStages, int64_t qkStages, int64_t producers,
                     int64_t consumers) {
  auto positive = [&](StringRef name, int64_t value) -> LogicalResult {
    if (value > 0)
      return success();
    return emitError() << "pipeline parameter '" << name
                       << "' must be a positive integer, got " << value;
  };
  if (failed(positive("kv_stages", kvStages)) ||
      failed(positive("qk_stages", qkStages)) ||
      failed(positive("producers", producers)) ||
      failed(positive("consumers", consumers)))
    return failure();
  // Checked on the factors first so that the product cannot overflow.
  if (kvStages > kMaxStages || qkStages > kMaxStages ||
      kvStages * qkStages > kMaxStages)
    return emitError() << "pipeline 'kv_stages' * 'qk_stages' must be at most "
                       << kMaxStages << ", got " << kvStages << " * "
                       << qkStages;
  // mbarrier arrival counts are 20-bit (PTX ISA, mbarrier.init).
  constexpr int64_t kMaxArrivals = (1 << 20) - 1;
  if (producers > kMaxArrivals)
    return emitError() << "pipeline parameter 'producers' must be at most "
                       << kMaxArrivals << " (mbarrier arrival count), got "
                       << producers;
  if (consumers > kMaxArrivals)
    return emitError() << "pipeline parameter 'consumers' must be at most "
                       << kMaxArrivals << " (mbarrier arrival count), got "
                       << consumers;
  return success();
}

//===----------------------------------------------------------------------===//
// TensorMapType
//===----------------------------------------------------------------------===//

LogicalResult
TensorMapType::verify(function_ref<InFlightDiagnostic()> emitError,
                      ArrayRef<int64_t> box, Type elementType,
                      int64_t swizzle) {
  if (box.empty() || box.size() > 5)
    return emitError() << "tensor map box must have rank 1 to 5, got rank "
                       << box.size();
  for (auto [i, dim] : llvm::enumerate(box))
    if (dim < 1 || dim > 256)
      return emitError() << "tensor map box dimension " << i
                         << " must be in [1, 256], got " << dim;
  // TMA element sizes are 1, 2, 4 or 8 bytes; i24 or i48 are not.
  unsigned bits = elementType.isIntOrFloat()
                      ? elementType.getIntOrFloatBitWidth()
                      : 0;
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64)
    return emitError() << "tensor map element type must be an integer or "
                          "float of 1, 2, 4 or 8 bytes, got "
                       << elementType;
  if (swizzle != 0 && swizzle != 32 && swizzle != 64 && swizzle != 128)
    return emitError() << "tensor map swizzle must be 0, 32, 64 or 128 "
                          "bytes, got "
                       << swizzle;
  int64_t innerBytes = box.back() * elementType.getIntOrFloatBitWidth() / 8;
  if (innerBytes % 16 != 0)
    return emitError() << "tensor map innermost box dimension must span a "
                          "multiple of 16 bytes, got "
                       << innerBytes << " bytes";
  if (swizzle != 0 && innerBytes > swizzle)
    return emitError() << "tensor map innermost box dimension spans "
                       << innerBytes << " bytes, more than the " << swizzle
                       << "-byte swizzle";
  // Every copy of the box lands in (or leaves) one CTA's shared memory.
  // Each dimension is at most 256 and the rank at most 5: no overflow.
  int64_t bytes = bits / 8;
  for (int64_t dim : box)
    bytes *= dim;
  if (bytes > AttentionConfig::kMaxSharedMemoryBytes)
    return emitError() << "tensor map box of " << bytes
                       << " bytes does not fit the "
                       << AttentionConfig::kMaxSharedMemoryBytes
                       << " bytes (227 KiB) of shared memory of an sm_90 CTA";
  return success();
}

int64_t TensorMapType::getBoxBytes() const {
  int64_t elements = 1;
  for (int64_t dim : getBox())
    elements *= dim;
  return elements * getElementBytes();
}
