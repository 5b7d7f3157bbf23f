//===- kvpipe-opt.cpp - kvpipe optimizer driver -----------------*- C++ -*-===//
//
// mlir-opt with the kvpipe dialect, its passes and pipelines, and the
// upstream dialects and passes a kernel written with kvpipe needs.
//
//===----------------------------------------------------------------------===//

#include "kvpipe/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  // The Python package's __version__ must match this (python/kvpipe).
  llvm::cl::AddExtraVersionPrinter(
      [](llvm::raw_ostream &os) { os << "kvpipe " KVPIPE_VERSION "\n"; });
  mlir::registerAllPasses();
  kvpipe::registerAllPasses();
  mlir::DialectRegistry registry;
  kvpipe::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "kvpipe optimizer driver\n", registry));
}
