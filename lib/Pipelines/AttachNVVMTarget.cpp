//===- AttachNVVMTarget.cpp - NVVM targets for gpu.modules ----------------===//

#include "kvpipe/Pipelines/Pipelines.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"

namespace kvpipe {
#define GEN_PASS_DEF_ATTACHNVVMTARGET
#include "kvpipe/Pipelines/Passes.h.inc"
} // namespace kvpipe

using namespace mlir;

namespace {

struct AttachNVVMTarget
    : kvpipe::impl::AttachNVVMTargetBase<AttachNVVMTarget> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    StringRef defaultChip = chip.empty() ? StringRef("sm_90a") : chip;
    StringRef defaultFeatures =
        features.empty() ? StringRef("+ptx86") : features;
    WalkResult result = getOperation().walk([&](gpu::GPUModuleOp module) {
      SmallVector<Attribute> targets;
      if (ArrayAttr existing = module.getTargetsAttr())
        targets.assign(existing.begin(), existing.end());
      if (targets.empty()) {
        targets.push_back(NVVM::NVVMTargetAttr::get(
            ctx, optLevel, "nvptx64-nvidia-cuda", defaultChip,
            defaultFeatures));
        module.setTargetsAttr(ArrayAttr::get(ctx, targets));
        return WalkResult::advance();
      }
      // A declared target keeps its chip and features; the pipeline's
      // optimisation level applies to every module.
      for (Attribute &target : targets) {
        auto nvvm = dyn_cast<NVVM::NVVMTargetAttr>(target);
        if (!nvvm)
          continue;
        if (failed(checkAgrees(module, "chip", chip, nvvm.getChip())) ||
            failed(checkAgrees(module, "features", features,
                               nvvm.getFeatures())))
          return WalkResult::interrupt();
        target = NVVM::NVVMTargetAttr::get(
            ctx, optLevel, nvvm.getTriple(), nvvm.getChip(),
            nvvm.getFeatures(), nvvm.getFlags(), nvvm.getLink(),
            nvvm.getVerifyTarget());
      }
      module.setTargetsAttr(ArrayAttr::get(ctx, targets));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  /// An option given explicitly must agree with the module's own target.
  /// Reported at the module's location, not on the op, which would print
  /// the whole module after the message.
  static LogicalResult checkAgrees(gpu::GPUModuleOp module, StringRef option,
                                   StringRef given, StringRef declared) {
    if (given.empty() || given == declared)
      return success();
    emitError(module.getLoc())
        << "kvpipe-to-ptx: " << option << "=" << given
        << " disagrees with the target that gpu.module @" << module.getName()
        << " declares (" << option << " = \"" << declared
        << "\"): drop the option or the module's #nvvm.target";
    return failure();
  }
};

} // namespace
