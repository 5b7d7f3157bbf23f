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

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  kvpipe::registerAllPasses();
  mlir::DialectRegistry registry;
  kvpipe::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "kvpipe optimizer driver\n", registry));
}
