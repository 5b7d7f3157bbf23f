//===- ExpandAttention.cpp - attention declarations to kernels ------------===//

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/AttentionGenerator.h"
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

namespace kvpipe {
#define GEN_PASS_DEF_EXPANDATTENTION
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h.inc"
} // namespace kvpipe

using namespace mlir;
using namespace kvpipe;

namespace {

/// The ABI attribute as JSON: integers, booleans, strings and their arrays
/// and dictionaries are all it holds.
llvm::json::Value toJSON(Attribute attr) {
  if (auto dict = dyn_cast<DictionaryAttr>(attr)) {
    llvm::json::Object object;
    for (NamedAttribute entry : dict)
      object[entry.getName().strref()] = toJSON(entry.getValue());
    return object;
  }
  if (auto array = dyn_cast<ArrayAttr>(attr)) {
    llvm::json::Array values;
    for (Attribute element : array)
      values.push_back(toJSON(element));
    return values;
  }
  if (auto boolean = dyn_cast<BoolAttr>(attr))
    return boolean.getValue();
  if (auto integer = dyn_cast<IntegerAttr>(attr))
    return integer.getInt();
  return cast<StringAttr>(attr).str();
}

struct ExpandAttention : kvpipe::impl::ExpandAttentionBase<ExpandAttention> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<AttentionKernelOp> decls;
    getOperation().walk([&](AttentionKernelOp op) { decls.push_back(op); });
    std::optional<AttentionStage> until = parseAttentionStage(stage);
    if (!until) {
      // Reported at the first declaration it would apply to.
      Operation *at = decls.empty() ? getOperation().getOperation()
                                    : decls.front().getOperation();
      at->emitError() << "'stage' must be skeleton, scheduled or lowered, "
                         "got '"
                      << stage << "'";
      return signalPassFailure();
    }
    llvm::json::Array kernels;
    for (AttentionKernelOp decl : decls) {
      FailureOr<AttentionConfig> config =
          AttentionConfig::get(decl, [&] { return decl.emitOpError(); });
      if (failed(config))
        return signalPassFailure();
      OpBuilder builder(decl);
      FailureOr<SmallVector<gpu::GPUFuncOp>> generated =
          generateAttentionKernels(builder, decl.getLoc(), decl.getSymName(),
                                   *config, *until);
      if (failed(generated))
        return signalPassFailure();
      for (gpu::GPUFuncOp kernel : *generated)
        kernels.push_back(toJSON(kernel->getAttr(kAttentionAbiAttrName)));
      decl.erase();
    }
    // gpu.module kernels are launched from a container module.
    if (!decls.empty())
      getOperation()->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                              UnitAttr::get(&getContext()));
    if (abiFile.empty())
      return;
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> out = openOutputFile(abiFile, &error);
    if (!out) {
      // About an option, not a place in the input: no location (and not on
      // the op, which would print the whole module after the message).
      emitError(UnknownLoc::get(&getContext()))
          << "kvpipe-to-ptx: abi-file=" << abiFile
          << ": cannot write the kernel ABI: " << error;
      return signalPassFailure();
    }
    out->os() << llvm::formatv("{0:2}", llvm::json::Value(std::move(kernels)))
              << "\n";
    out->keep();
  }
};

} // namespace
