//===- FinalizeKernelABI.cpp - tensor maps as grid-constant params --------===//

#include "kvpipe/Conversion/KVPipeToNVVM/KVPipeToNVVM.h"

#include "Common.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace kvpipe {
#define GEN_PASS_DEF_FINALIZEKERNELABI
#include "kvpipe/Conversion/Passes.h.inc"
} // namespace kvpipe

using namespace mlir;
using namespace kvpipe;

namespace {

struct FinalizeKernelABI
    : kvpipe::impl::FinalizeKernelABIBase<FinalizeKernelABI> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    // Recompute how convert-gpu-to-nvvm expanded the kernel's signature
    // (memrefs become several arguments), with the same type converter.
    LowerToLLVMOptions options(ctx);
    options.useBarePtrCallConv = useBarePtrCallConv;
    LLVMTypeConverter converter(ctx, options);
    configureGpuToNVVMTypeConverter(converter);

    WalkResult result = getOperation()->walk([&](LLVM::LLVMFuncOp fn) {
      auto positions = fn->getAttrOfType<DenseI32ArrayAttr>(kTensorMapArgsAttrName);
      auto signature = fn->getAttrOfType<TypeAttr>(kKernelSignatureAttrName);
      if (!positions || !signature)
        return WalkResult::advance();
      auto fnType = dyn_cast<FunctionType>(signature.getValue());
      if (!fnType) {
        fn.emitOpError() << "'" << kKernelSignatureAttrName
                         << "' must be a function type";
        return WalkResult::interrupt();
      }
      TypeConverter::SignatureConversion mapping(fnType.getNumInputs());
      if (!converter.convertFunctionSignature(fnType, /*isVariadic=*/false,
                                              useBarePtrCallConv, mapping)) {
        fn.emitOpError() << "cannot map the recorded kernel signature "
                         << fnType << " onto the lowered arguments";
        return WalkResult::interrupt();
      }
      for (int32_t position : positions.asArrayRef()) {
        if (position < 0 ||
            static_cast<unsigned>(position) >= fnType.getNumInputs()) {
          fn.emitOpError() << "tensor-map argument " << position
                           << " is not an argument of the recorded kernel "
                              "signature "
                           << fnType;
          return WalkResult::interrupt();
        }
        auto input = mapping.getInputMapping(position);
        // The lowered signature, not the entry block: a declaration has no
        // body to hold arguments.
        ArrayRef<Type> params = fn.getFunctionType().getParams();
        if (!input || input->size != 1 || input->inputNo >= params.size() ||
            !isa<LLVM::LLVMPointerType>(params[input->inputNo])) {
          fn.emitOpError() << "tensor-map argument " << position
                           << " does not map onto one pointer argument";
          return WalkResult::interrupt();
        }
        // Only a kernel parameter can be a grid constant; a device function
        // (or a declaration) receives the map as a plain pointer to it.
        if (lowering::isNVVMKernel(fn))
          setTensorMapArgumentAttributes(fn, input->inputNo);
      }
      fn->removeAttr(kTensorMapArgsAttrName);
      fn->removeAttr(kKernelSignatureAttrName);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
