//===- DumpPTX.cpp - write the PTX of gpu.binary ops to files -------------===//

#include "kvpipe/Pipelines/Pipelines.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

namespace kvpipe {
#define GEN_PASS_DEF_DUMPPTX
#include "kvpipe/Pipelines/Passes.h.inc"
} // namespace kvpipe

using namespace mlir;

namespace {

struct DumpPTX : kvpipe::impl::DumpPTXBase<DumpPTX> {
  using Base::Base;

  void runOnOperation() override {
    // Errors are reported at locations, not on ops: an op's diagnostic prints
    // the op after the message, here a whole module or binary.
    if (format != "isa" && format != "bin") {
      emitError(getOperation().getLoc())
          << "kvpipe-to-ptx: 'format' must be 'isa' (PTX) or 'bin' (cubin), "
             "got '"
          << format << "'";
      return signalPassFailure();
    }
    SmallVector<gpu::BinaryOp> binaries(getOperation().getOps<gpu::BinaryOp>());
    if (!file.empty() && binaries.empty()) {
      emitError(UnknownLoc::get(&getContext()))
          << "kvpipe-to-ptx: ptx-file=" << file
          << ": no PTX was produced, the input has no gpu.module to compile";
      return signalPassFailure();
    }
    for (gpu::BinaryOp binary : binaries) {
      // PTX that still declares libdevice functions cannot be loaded: the
      // NVVM target did not find libdevice to link.
      for (Attribute object : binary.getObjects()) {
        auto obj = dyn_cast<gpu::ObjectAttr>(object);
        if (!obj || obj.getFormat() != gpu::CompilationTarget::Assembly)
          continue;
        StringRef text = obj.getObject().getValue();
        size_t pos = text.find(".extern .func");
        if (pos != StringRef::npos && text.find("__nv_", pos) != StringRef::npos) {
          emitError(binary.getLoc())
              << "gpu.binary @" << binary.getName()
              << " calls libdevice functions that were not linked: give the "
                 "CUDA toolkit with toolkit=<path> (or CUDA_HOME)";
          return signalPassFailure();
        }
      }
    }
    if (file.empty())
      return;
    for (gpu::BinaryOp binary : binaries) {
      std::string path = file;
      if (binaries.size() > 1 && file != "-") {
        StringRef ext = llvm::sys::path::extension(file);
        path = (StringRef(file).drop_back(ext.size()) + "." +
                binary.getName() + ext)
                   .str();
      }
      StringRef ptx;
      for (Attribute object : binary.getObjects()) {
        auto obj = dyn_cast<gpu::ObjectAttr>(object);
        if (obj && obj.getFormat() == gpu::CompilationTarget::Assembly)
          ptx = obj.getObject().getValue();
      }
      if (ptx.empty()) {
        emitError(binary.getLoc())
            << "kvpipe-to-ptx: ptx-file=" << path << ": gpu.binary @"
            << binary.getName()
            << " holds no PTX (format=bin gives a cubin): compile with "
               "format=isa";
        return signalPassFailure();
      }
      std::string error;
      std::unique_ptr<llvm::ToolOutputFile> out = openOutputFile(path, &error);
      if (!out) {
        // About an option, not a place in the input: no location.
        emitError(UnknownLoc::get(&getContext()))
            << "kvpipe-to-ptx: ptx-file=" << file << ": cannot write the PTX: "
            << error;
        return signalPassFailure();
      }
      out->os() << ptx;
      out->keep();
    }
  }
};

} // namespace
