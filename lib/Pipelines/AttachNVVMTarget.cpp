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
    getOperation().walk([&](gpu::GPUModuleOp module) {
      SmallVector<Attribute> targets;
      if (ArrayAttr existing = module.getTargetsAttr())
        targets.assign(existing.begin(), existing.end());
      if (targets.empty()) {
        targets.push_back(NVVM::NVVMTargetAttr::get(
            ctx, optLevel, "nvptx64-nvidia-cuda", chip, features));
      } else {
        // A declared target keeps its chip and features; the pipeline's
        // optimisation level applies to every module.
        for (Attribute &target : targets)
          if (auto nvvm = dyn_cast<NVVM::NVVMTargetAttr>(target))
            target = NVVM::NVVMTargetAttr::get(
                ctx, optLevel, nvvm.getTriple(), nvvm.getChip(),
                nvvm.getFeatures(), nvvm.getFlags(), nvvm.getLink(),
                nvvm.getVerifyTarget());
      }
      module.setTargetsAttr(ArrayAttr::get(ctx, targets));
    });
  }
};

} // namespace
