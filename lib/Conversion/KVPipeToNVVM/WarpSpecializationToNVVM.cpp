//===- WarpSpecializationToNVVM.cpp - warpgroup roles to NVVM -------------===//

#include "Common.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::lowering;

namespace {

/// `threadIdx.x / 128`, taken from lane 0 with `shfl.sync.idx` so that the
/// value is visibly warp-uniform: role branches on it then compile to
/// uniform branches and `setmaxnreg`, which must be executed by whole
/// warpgroups, is not under a divergent condition.
struct WarpgroupIdOpLowering : ConvertOpToLLVMPattern<WarpgroupIdOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(WarpgroupIdOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i32 = rewriter.getI32Type();
    Value wg = LLVM::UDivOp::create(rewriter, loc, threadIdX(rewriter, loc),
                                    i32Constant(rewriter, loc, 128));
    Value uniform = NVVM::ShflOp::create(
        rewriter, loc, i32, i32Constant(rewriter, loc, -1), wg,
        i32Constant(rewriter, loc, 0), i32Constant(rewriter, loc, 31),
        NVVM::ShflKindAttr::get(getContext(), NVVM::ShflKind::idx),
        /*return_value_and_is_valid=*/nullptr);
    rewriter.replaceOp(
        op, LLVM::ZExtOp::create(rewriter, loc, getIndexType(), uniform));
    return success();
  }
};

} // namespace

void kvpipe::populateWarpSpecializationToNVVMPatterns(
    const LLVMTypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<WarpgroupIdOpLowering>(converter);
}
