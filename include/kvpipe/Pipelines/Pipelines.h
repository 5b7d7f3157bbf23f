//===- Pipelines.h - kvpipe's named pass pipelines --------------*- C++ -*-===//

#ifndef KVPIPE_PIPELINES_PIPELINES_H
#define KVPIPE_PIPELINES_PIPELINES_H

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace kvpipe {

#define GEN_PASS_DECL
#include "kvpipe/Pipelines/Passes.h.inc"

/// Options of `--kvpipe-to-ptx`.
struct KVPipeToPTXOptions : public mlir::PassPipelineOptions<KVPipeToPTXOptions> {
  Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("Target chip of gpu.modules that declare no target "
                     "(default sm_90a); a module that declares one must "
                     "agree with it"),
      llvm::cl::init("")};
  Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features of gpu.modules that declare no target "
                     "(default +ptx86); a module that declares one must "
                     "agree with it"),
      llvm::cl::init("")};
  Option<unsigned> optLevel{*this, "opt-level",
                            llvm::cl::desc("LLVM optimisation level of the "
                                           "NVPTX compilation"),
                            llvm::cl::init(3)};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What gpu.binary holds: 'isa' (PTX text) or 'bin' "
                     "(a cubin assembled by ptxas)"),
      llvm::cl::init("isa")};
  Option<uint64_t> waitTimeout{
      *this, "wait-timeout",
      llvm::cl::desc("Debug: bound every mbarrier wait to this many cycles, "
                     "then report and trap (0: off)"),
      llvm::cl::init(0)};
  Option<bool> verifyProtocol{
      *this, "verify-protocol",
      llvm::cl::desc("Check the pipelines' protocol first "
                     "(--kvpipe-verify-protocol)"),
      llvm::cl::init(true)};
  Option<bool> strictProtocol{
      *this, "strict-protocol",
      llvm::cl::desc("What the protocol checker cannot prove is an error "
                     "(--kvpipe-verify-protocol=strict=true); false: a "
                     "warning"),
      llvm::cl::init(true)};
  Option<std::string> ptxFile{
      *this, "ptx-file",
      llvm::cl::desc("Also write the PTX to this file (format=isa)"),
      llvm::cl::init("")};
  Option<std::string> abiFile{
      *this, "abi-file",
      llvm::cl::desc("Write the ABI of the generated attention kernels to "
                     "this JSON file"),
      llvm::cl::init("")};
  Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit whose ptxas assembles format=bin (default: "
                     "found by MLIR's NVVM target)"),
      llvm::cl::init("")};
};

/// Checks the option values of `--kvpipe-to-ptx` that can be checked before
/// the pipeline runs (format, opt-level, toolkit, where the output files go);
/// reports the first bad one through `error`, naming the option.
mlir::LogicalResult validateKVPipeToPTXOptions(
    const KVPipeToPTXOptions &options,
    llvm::function_ref<void(const llvm::Twine &)> error);

/// Builds `--kvpipe-to-ptx`: from IR with kvpipe ops (and attention kernel
/// declarations) in `gpu.module`s to `gpu.binary` ops holding PTX or cubins.
void buildKVPipeToPTXPipeline(mlir::OpPassManager &pm,
                              const KVPipeToPTXOptions &options);

/// Registers `--kvpipe-to-ptx` and the passes it uses.
void registerKVPipePipelines();

} // namespace kvpipe

#endif // KVPIPE_PIPELINES_PIPELINES_H
