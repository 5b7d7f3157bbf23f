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
  if (options.verifyProtocol)
    pm.addPass(createVerifyProtocol());

  // Targets first, so that the lowering can check the chip.
  AttachNVVMTargetOptions targetOptions;
  targetOptions.chip = options.chip;
  targetOptions.features = options.features;
  targetOptions.optLevel = options.optLevel;
  pm.addPass(createAttachNVVMTarget(targetOptions));

  OpPassManager &gpuModule = pm.nest<gpu::GPUModuleOp>();
  ConvertKVPipeToNVVMOptions kvpipeOptions;
  kvpipeOptions.waitTimeout = options.waitTimeout;
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

void kvpipe::registerKVPipePipelines() {
  registerKVPipePipelinesPasses();
  PassPipelineRegistration<KVPipeToPTXOptions>(
      "kvpipe-to-ptx",
      "Lower kvpipe programs (pipelines, TMA, wgmma, attention kernels) in "
      "gpu.modules to gpu.binary ops holding PTX (format=isa) or cubins "
      "(format=bin) for sm_90a",
      buildKVPipeToPTXPipeline);
}
