//===- LowerWarpRoles.cpp - warp roles to a branch per role ---------------===//
//
// `kvpipe.warp_roles` becomes
//
//   %wg = kvpipe.warpgroup_id : index
//   scf.if %wg == 0 {
//     nvvm.setmaxregister decrease <producer_registers>
//     <producer region>
//   } else {
//     nvvm.setmaxregister increase <consumer_registers>
//     <consumer region, with %consumer = %wg - 1>
//   }
//
// `kvpipe.warpgroup_id` is warp-uniform, so the branch does not diverge
// within a warp; setmaxnreg must be executed by whole warpgroups, which each
// role is.
//
//===----------------------------------------------------------------------===//

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelTransforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kvpipe-lower-warp-roles"

using namespace mlir;
using namespace kvpipe;

namespace {

struct WarpRolesOpLowering : OpRewritePattern<WarpRolesOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(WarpRolesOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    LLVM_DEBUG(llvm::dbgs() << "lowering warp roles: producer "
                            << op.getProducerRegisters() << " registers, "
                            << op.getConsumerWarpgroups() << " consumers x "
                            << op.getConsumerRegisters() << " registers\n");
    rewriter.setInsertionPoint(op);
    Value warpgroup =
        WarpgroupIdOp::create(rewriter, loc, rewriter.getIndexType());
    Value isProducer = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::eq, warpgroup,
        arith::ConstantIndexOp::create(rewriter, loc, 0));
    auto roles =
        scf::IfOp::create(rewriter, loc, isProducer, /*withElseRegion=*/true);

    rewriter.setInsertionPointToStart(roles.thenBlock());
    NVVM::SetMaxRegisterOp::create(
        rewriter, loc, rewriter.getI32IntegerAttr(op.getProducerRegisters()),
        NVVM::SetMaxRegisterActionAttr::get(
            ctx, NVVM::SetMaxRegisterAction::decrease));
    rewriter.inlineBlockBefore(&op.getProducerBlock(),
                               roles.thenBlock()->getTerminator());

    rewriter.setInsertionPointToStart(roles.elseBlock());
    NVVM::SetMaxRegisterOp::create(
        rewriter, loc, rewriter.getI32IntegerAttr(op.getConsumerRegisters()),
        NVVM::SetMaxRegisterActionAttr::get(
            ctx, NVVM::SetMaxRegisterAction::increase));
    Value consumer = arith::SubIOp::create(
        rewriter, loc, warpgroup,
        arith::ConstantIndexOp::create(rewriter, loc, 1));
    rewriter.inlineBlockBefore(&op.getConsumerBlock(),
                               roles.elseBlock()->getTerminator(),
                               ValueRange(consumer));
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void kvpipe::populateLowerWarpRolesPatterns(RewritePatternSet &patterns) {
  patterns.add<WarpRolesOpLowering>(patterns.getContext());
}
