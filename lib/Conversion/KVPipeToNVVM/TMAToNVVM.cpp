//===- TMAToNVVM.cpp - TMA copies to NVVM ---------------------------------===//

#include "Common.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::lowering;

namespace {

/// TMA coordinates are i32 and innermost-first; kvpipe's are `index` and
/// outermost-first, as memref indices.
SmallVector<Value> tmaCoordinates(OpBuilder &b, Location loc,
                                  ValueRange coordinates) {
  SmallVector<Value> result;
  for (Value c : llvm::reverse(coordinates))
    result.push_back(LLVM::TruncOp::create(b, loc, b.getI32Type(), c));
  return result;
}

struct TMALoadOpLowering : ConvertOpToLLVMPattern<TMALoadOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(TMALoadOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value dest = tileAddress(rewriter, loc, *getTypeConverter(),
                             op.getDest().getType(), adaptor.getDest());
    Value mask = adaptor.getMulticastMask();
    // Without multicast the copy stays in this CTA (.shared::cta form); a
    // multicast copy addresses the cluster's shared window.
    if (mask)
      dest = LLVM::AddrSpaceCastOp::create(
          rewriter, loc, LLVM::LLVMPointerType::get(getContext(), 7), dest);
    NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
        rewriter, loc, dest, adaptor.getTensorMap(),
        tmaCoordinates(rewriter, loc, adaptor.getCoordinates()),
        adaptor.getMbarrier(), /*im2colOffsets=*/ValueRange{}, mask,
        /*l2CacheHint=*/Value(),
        NVVM::TMALoadModeAttr::get(getContext(), NVVM::TMALoadMode::TILE),
        rewriter.getBoolAttr(!mask), /*group=*/nullptr,
        /*predicate=*/Value());
    rewriter.eraseOp(op);
    return success();
  }
};

struct BulkLoadOpLowering : ConvertOpToLLVMPattern<BulkLoadOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(BulkLoadOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value dest = tileAddress(rewriter, loc, *getTypeConverter(),
                             op.getDest().getType(), adaptor.getDest());
    // cp.async.bulk reads the global window: a generic pointer (kernel
    // parameters are) is converted, a global one taken as is.
    Value source = adaptor.getSource();
    auto global = LLVM::LLVMPointerType::get(getContext(), 1);
    if (source.getType() != global)
      source = LLVM::AddrSpaceCastOp::create(rewriter, loc, global, source);
    Value bytes = LLVM::ConstantOp::create(
        rewriter, loc, rewriter.getI32Type(),
        rewriter.getI32IntegerAttr(op.getTransactionBytes()));
    // A .shared::cta destination (the CTA's own window, as the TMA loads
    // without multicast).
    NVVM::CpAsyncBulkGlobalToSharedClusterOp::create(
        rewriter, loc, dest, source, adaptor.getMbarrier(), bytes,
        /*multicastMask=*/Value(), /*l2CacheHint=*/Value());
    rewriter.eraseOp(op);
    return success();
  }
};

struct TMAStoreOpLowering : ConvertOpToLLVMPattern<TMAStoreOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(TMAStoreOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value source = tileAddress(rewriter, loc, *getTypeConverter(),
                               op.getSource().getType(), adaptor.getSource());
    NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
        rewriter, loc, adaptor.getTensorMap(), source,
        tmaCoordinates(rewriter, loc, adaptor.getCoordinates()),
        /*l2CacheHint=*/Value(),
        NVVM::TMAStoreModeAttr::get(getContext(), NVVM::TMAStoreMode::TILE),
        /*predicate=*/Value());
    rewriter.eraseOp(op);
    return success();
  }
};

struct TMAPrefetchOpLowering : ConvertOpToLLVMPattern<TMAPrefetchOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(TMAPrefetchOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    NVVM::PrefetchOp::create(rewriter, op.getLoc(), /*cacheLevel=*/nullptr,
                             /*evictPriority=*/nullptr, adaptor.getTensorMap(),
                             /*predicate=*/Value(), rewriter.getUnitAttr());
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void kvpipe::populateTMAToNVVMPatterns(const LLVMTypeConverter &converter,
                                       RewritePatternSet &patterns) {
  patterns.add<TMALoadOpLowering, BulkLoadOpLowering, TMAStoreOpLowering,
               TMAPrefetchOpLowering>(
      converter);
}
