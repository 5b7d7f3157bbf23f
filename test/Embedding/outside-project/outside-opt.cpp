// The smallest embedding: an opt tool of another compiler that knows kvpipe
// through its CMake package and nothing else.
#include "kvpipe/InitAll.h"
#include "kvpipe/Pipelines/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  kvpipe::registerAllPasses();
  mlir::DialectRegistry registry;
  kvpipe::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "outside compiler\n", registry));
}
