//===- KVPipeToPTX.cpp - the --kvpipe-to-ptx pipeline ---------------------===//
//
// From kvpipe programs to PTX. The kvpipe ops are lowered first, inside each
// gpu.module, while the surrounding upstream IR is still structured; the
// upstream conversions (as in gpu-lower-to-nvvm-pipeline) take the rest to
// LLVM; then each module is translated to PTX or a cubin.
//
//===----------------------------------------------------------------------===//

#include "kvpipe/Pipelines/Pipelines.h"

#include "kvpipe/Conversion/Passes.h"
#include "kvpipe/Dialect/KVPipe/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdlib>

namespace kvpipe {
#define GEN_PASS_REGISTRATION
#include "kvpipe/Pipelines/Passes.h.inc"
} // namespace kvpipe

using namespace mlir;

/// The CUDA toolkit whose libdevice gets linked (math ops lower to its
/// functions) and whose ptxas assembles cubins: $CUDA_HOME, $CUDA_PATH, or
/// /usr/local/cuda. Without one, PTX would call unresolved libdevice
/// functions, which kvpipe-dump-ptx reports.
static std::string defaultCUDAToolkit() {
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *value = std::getenv(var); value && *value)
      return value;
  if (llvm::sys::fs::is_directory("/usr/local/cuda"))
    return "/usr/local/cuda";
  return "";
}

void kvpipe::buildKVPipeToPTXPipeline(OpPassManager &pm,
                                      const KVPipeToPTXOptions &options) {
  ExpandAttentionOptions expandOptions;
  expandOptions.abiFile = options.abiFile;
  pm.addPass(createExpandAttention(expandOptions));
  if (options.verifyProtocol) {
    // Accepted means proven: what the checker cannot prove stops the
    // compilation unless strict-protocol=false.
    VerifyProtocolOptions protocolOptions;
    protocolOptions.strict = options.strictProtocol;
    pm.addPass(createVerifyProtocol(protocolOptions));
  }

  // Targets first, so that the lowering can check the chip.
  AttachNVVMTargetOptions targetOptions;
  targetOptions.chip = options.chip;
  targetOptions.features = options.features;
  targetOptions.optLevel = options.optLevel;
  pm.addPass(createAttachNVVMTarget(targetOptions));

  OpPassManager &gpuModule = pm.nest<gpu::GPUModuleOp>();
  ConvertKVPipeToNVVMOptions kvpipeOptions;
  kvpipeOptions.waitTimeout = options.waitTimeout;
  gpuModule.addPass(createCheckNVPTXTargets());
  gpuModule.addPass(createConvertKVPipeToNVVM(kvpipeOptions));
  gpuModule.addPass(memref::createExpandStridedMetadataPass());
  gpuModule.addPass(createLowerAffinePass());
  gpuModule.addPass(createSCFToControlFlowPass());
  gpuModule.addPass(createConvertGpuOpsToNVVMOps());
  gpuModule.addPass(createFinalizeKernelABI());
  gpuModule.addPass(createConvertNVVMToLLVMPass());
  gpuModule.addPass(createReconcileUnrealizedCastsPass());
  gpuModule.addPass(createCanonicalizerPass());
  gpuModule.addPass(createCSEPass());

  GpuModuleToBinaryPassOptions binaryOptions;
  binaryOptions.compilationTarget = options.format;
  binaryOptions.toolkitPath = options.toolkit.empty()
                                  ? defaultCUDAToolkit()
                                  : std::string(options.toolkit);
  // An unknown format is reported by kvpipe-dump-ptx (upstream only warns).
  if (options.format == "isa" || options.format == "bin")
    pm.addPass(createGpuModuleToBinaryPass(binaryOptions));
  DumpPTXOptions dumpOptions;
  dumpOptions.file = options.ptxFile;
  dumpOptions.format = options.format;
  pm.addPass(createDumpPTX(dumpOptions));
}

/// Checks that `path` (an output file option) can be created: its directory
/// exists. Whether the file itself can be written is known only when the
/// pass writes it (and reports it then).
static LogicalResult
checkOutputFile(StringRef option, StringRef path,
                llvm::function_ref<void(const llvm::Twine &)> error) {
  if (path.empty() || path == "-")
    return success();
  StringRef dir = llvm::sys::path::parent_path(path);
  if (dir.empty())
    dir = ".";
  if (llvm::sys::fs::is_directory(dir))
    return success();
  error("kvpipe-to-ptx: " + option + "='" + path + "': the directory '" + dir +
        "' does not exist");
  return failure();
}

LogicalResult kvpipe::validateKVPipeToPTXOptions(
    const KVPipeToPTXOptions &options,
    llvm::function_ref<void(const llvm::Twine &)> error) {
  if (options.format != "isa" && options.format != "bin") {
    error("kvpipe-to-ptx: format='" + options.format +
          "' is not a format: use 'isa' (PTX) or 'bin' (a cubin)");
    return failure();
  }
  if (options.optLevel > 3) {
    error("kvpipe-to-ptx: opt-level=" + llvm::Twine(options.optLevel) +
          " is not an optimisation level: use 0, 1, 2 or 3");
    return failure();
  }
  if (!options.toolkit.empty()) {
    if (!llvm::sys::fs::is_directory(options.toolkit)) {
      error("kvpipe-to-ptx: toolkit='" + options.toolkit +
            "' is not a directory (a CUDA toolkit, e.g. /usr/local/cuda)");
      return failure();
    }
    // The NVVM target links libdevice from there; without it, the failure
    // comes late and prints the whole module.
    SmallString<128> libdevice(options.toolkit);
    llvm::sys::path::append(libdevice, "nvvm", "libdevice", "libdevice.10.bc");
    if (!llvm::sys::fs::is_regular_file(libdevice)) {
      error("kvpipe-to-ptx: toolkit='" + options.toolkit + "' has no " +
            libdevice.str().drop_front(options.toolkit.size()) +
            ": not a CUDA toolkit");
      return failure();
    }
  }
  if (failed(checkOutputFile("ptx-file", options.ptxFile, error)) ||
      failed(checkOutputFile("abi-file", options.abiFile, error)))
    return failure();
  return success();
}

void kvpipe::registerKVPipePipelines() {
  registerKVPipePipelinesPasses();
  // PassPipelineRegistration<Options> cannot reject option values; this is
  // what it does, plus validateKVPipeToPTXOptions, so that a bad value is one
  // line naming the option instead of a pipeline failure that prints the
  // whole module.
  registerPassPipeline(
      "kvpipe-to-ptx",
      "Lower kvpipe programs (pipelines, TMA, wgmma, attention kernels) in "
      "gpu.modules to gpu.binary ops holding PTX (format=isa) or cubins "
      "(format=bin) for sm_90a",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        KVPipeToPTXOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        bool valid = succeeded(validateKVPipeToPTXOptions(
            options, [&](const Twine &message) { (void)errorHandler(message); }));
        if (!valid)
          return failure();
        buildKVPipeToPTXPipeline(pm, options);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> optHandler) {
        optHandler(KVPipeToPTXOptions());
      });
}
