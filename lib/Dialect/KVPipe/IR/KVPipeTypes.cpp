//===- KVPipeTypes.cpp - kvpipe types and attributes ------------*- C++ -*-===//

#include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
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
