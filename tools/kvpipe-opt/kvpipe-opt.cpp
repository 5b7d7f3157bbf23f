//===- kvpipe-opt.cpp - kvpipe optimizer driver -----------------*- C++ -*-===//
//
// mlir-opt with the kvpipe dialect, its passes and pipelines, and the
// upstream dialects and passes a kernel written with kvpipe needs.
//
// It reads the input itself, rather than leave that to MlirOptMain, to
// refuse input nested deeper than the parser's stack can take
// (kvpipe/Support/InputLimits.h) with an error instead of a crash.
//
//===----------------------------------------------------------------------===//

#include "kvpipe/InitAll.h"
#include "kvpipe/Support/InputLimits.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // The Python package's __version__ must match this (python/kvpipe).
  llvm::cl::AddExtraVersionPrinter(
      [](llvm::raw_ostream &os) { os << "kvpipe " KVPIPE_VERSION "\n"; });
  mlir::registerAllPasses();
  kvpipe::registerAllPasses();
  mlir::DialectRegistry registry;
  kvpipe::registerAllDialects(registry);

  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "kvpipe optimizer driver\n", registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  // These read no input: MlirOptMain handles them as mlir-opt does.
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, inputFile, outputFile, registry));

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(kvpipe::checkInputNesting(*input, llvm::errs())))
    return 1;
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
