//===- PagedKV.cpp - addressing a paged K/V cache -------------------------===//

#include "kvpipe/Dialect/KVPipe/Transforms/PagedKV.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace kvpipe;

PagedKVAddress kvpipe::buildPagedKVAddress(ImplicitLocOpBuilder &b,
                                           const PagedKVTable &table,
                                           Value batch, Value keyRow,
                                           Value seqKV) {
  auto index = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, v);
  };
  Value pageSize = index(table.pageSize);
  Value rowStride = arith::IndexCastOp::create(b, b.getIndexType(),
                                               table.maxPagesPerSeq);
  // The last page the sequence uses, and the last of the table's row (an
  // empty sequence or row still names page 0 of its row: never read past
  // it, whatever the loop asks).
  Value lastKey = arith::SubIOp::create(
      b, arith::MaxSIOp::create(b, seqKV, index(1)), index(1));
  Value lastPage = arith::MinSIOp::create(
      b, arith::DivUIOp::create(b, lastKey, pageSize),
      arith::MaxSIOp::create(
          b, arith::SubIOp::create(b, rowStride, index(1)), index(0)));
  Value logicalPage = arith::MinSIOp::create(
      b, arith::DivUIOp::create(b, keyRow, pageSize), lastPage);
  Value entry = arith::AddIOp::create(
      b, arith::MulIOp::create(b, batch, rowStride), logicalPage);
  Value address = LLVM::GEPOp::create(
      b, table.blockTable.getType(), b.getI32Type(), table.blockTable,
      ValueRange{arith::IndexCastOp::create(b, b.getI64Type(), entry)});
  Value page = LLVM::LoadOp::create(b, b.getI32Type(), address);
  return {arith::IndexCastOp::create(b, b.getIndexType(), page),
          arith::RemUIOp::create(b, keyRow, pageSize)};
}
