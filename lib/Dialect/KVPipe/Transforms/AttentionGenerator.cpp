//===- AttentionGenerator.cpp - the stages of generating a kernel ---------===//
//
// Skeleton (AttentionKernelBuilder.cpp, AttentionConsumer.cpp), schedule
// rewrites (PersistentTiles.cpp, OverlapSoftmax.cpp, PingPongSchedule.cpp)
// and the lowering of the kernel-structure ops (LowerTiles.cpp,
// LowerFragmentOps.cpp, LowerWarpRoles.cpp), in that order.
//
//===----------------------------------------------------------------------===//

#include "kvpipe/Dialect/KVPipe/Transforms/AttentionGenerator.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelTransforms.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kvpipe-attention-generator"

using namespace mlir;
using namespace kvpipe;

std::optional<AttentionStage> kvpipe::parseAttentionStage(StringRef name) {
  return llvm::StringSwitch<std::optional<AttentionStage>>(name)
      .Case("skeleton", AttentionStage::Skeleton)
      .Case("scheduled", AttentionStage::Scheduled)
      .Case("lowered", AttentionStage::Lowered)
      .Default(std::nullopt);
}

LogicalResult kvpipe::scheduleAttentionKernel(gpu::GPUFuncOp kernel,
                                              const AttentionConfig &config) {
  IRRewriter rewriter(kernel.getContext());
  // The tile loop first: the other rewrites work within a tile, and
  // ping-pong opens its cycle after the consumers' shared-memory views,
  // which include the output staging rows of a persistent kernel.
  if (config.persistent) {
    SmallVector<TileOp> tiles;
    kernel.walk([&](TileOp op) { tiles.push_back(op); });
    for (TileOp op : tiles) {
      LLVM_DEBUG(llvm::dbgs() << kernel.getName()
                              << ": persistent loop over tiles\n");
      if (failed(applyPersistentTiles(rewriter, op)))
        return failure();
    }
  }
  WalkResult result = kernel.walk([&](WarpRolesOp roles) {
    // The overlap first: ping-pong takes turns over the wgmma groups it
    // forms.
    if (config.overlapSoftmax) {
      LLVM_DEBUG(llvm::dbgs() << kernel.getName()
                              << ": softmax overlapped with the GEMMs\n");
      if (failed(applyOverlapSoftmax(rewriter, roles)))
        return WalkResult::interrupt();
    }
    if (config.pingpong) {
      LLVM_DEBUG(llvm::dbgs() << kernel.getName()
                              << ": ping-pong between consumer warpgroups\n");
      if (failed(applyPingPongSchedule(rewriter, roles,
                                       AttentionConfig::kScheduleBarriers)))
        return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

void kvpipe::lowerKernelStructure(Operation *root) {
  // Tiles (one per CTA, unless the persistent rewrite made loops of them),
  // then fragment ops: they nest in the roles' regions. Each pattern is
  // applied once per op, without folding, so that the lowered kernel is
  // exactly what the patterns emit.
  IRRewriter rewriter(root->getContext());
  applyIdleTileSkips(rewriter, root);
  RewritePatternSet tilePatterns(root->getContext());
  populateLowerTilesPatterns(tilePatterns);
  walkAndApplyPatterns(root, std::move(tilePatterns));
  RewritePatternSet fragmentPatterns(root->getContext());
  populateLowerFragmentOpsPatterns(fragmentPatterns);
  walkAndApplyPatterns(root, std::move(fragmentPatterns));
  RewritePatternSet rolePatterns(root->getContext());
  populateLowerWarpRolesPatterns(rolePatterns);
  walkAndApplyPatterns(root, std::move(rolePatterns));
}

FailureOr<gpu::GPUFuncOp>
kvpipe::generateAttentionKernel(OpBuilder &builder, Location loc,
                                StringRef name, const AttentionConfig &config,
                                AttentionStage stage) {
  gpu::GPUFuncOp kernel = buildAttentionSkeleton(builder, loc, name, config);
  if (stage == AttentionStage::Skeleton)
    return kernel;
  if (failed(scheduleAttentionKernel(kernel, config))) {
    kernel.emitOpError() << "cannot apply the schedule rewrites";
    return failure();
  }
  if (stage == AttentionStage::Scheduled)
    return kernel;
  lowerKernelStructure(kernel);
  return kernel;
}

FailureOr<SmallVector<gpu::GPUFuncOp>>
kvpipe::generateAttentionKernels(OpBuilder &builder, Location loc,
                                 StringRef name, const AttentionConfig &config,
                                 AttentionStage stage) {
  if (!config.backward) {
    FailureOr<gpu::GPUFuncOp> kernel =
        generateAttentionKernel(builder, loc, name, config, stage);
    if (failed(kernel))
      return failure();
    if (!config.splitKV)
      return SmallVector<gpu::GPUFuncOp>{*kernel};
    // The split family: the combine kernel after the main one (plain gpu,
    // scf and llvm ops: no stage but the first applies to it).
    return SmallVector<gpu::GPUFuncOp>{
        *kernel, buildAttentionCombineKernel(builder, loc, name, config)};
  }
  // No schedule rewrite applies to the backward yet: `scheduled` is the
  // skeleton.
  SmallVector<gpu::GPUFuncOp> kernels =
      buildAttentionBackwardSkeleton(builder, loc, name, config);
  if (stage == AttentionStage::Lowered)
    for (gpu::GPUFuncOp kernel : kernels)
      lowerKernelStructure(kernel);
  return kernels;
}
