//===- Dialects.cpp - C API of kvpipe -------------------------------------===//

#include "kvpipe-c/Dialects.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.h"
#include "kvpipe/InitAll.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(KVPipe, kvpipe, kvpipe::KVPipeDialect)

void kvpipeRegisterAllDialects(MlirDialectRegistry registry) {
  kvpipe::registerAllDialects(*unwrap(registry));
}

void kvpipeRegisterAllPasses(void) {
  // Pass registration is global and must happen once.
  static std::once_flag once;
  std::call_once(once, [] {
    mlir::registerAllPasses();
    kvpipe::registerAllPasses();
  });
}

MlirLogicalResult kvpipeRunPipeline(MlirModule module, MlirStringRef pipeline) {
  mlir::ModuleOp op = unwrap(module);
  mlir::PassManager pm(op->getContext());
  std::string errors;
  llvm::raw_string_ostream os(errors);
  if (mlir::failed(mlir::parsePassPipeline(unwrap(pipeline), pm, os))) {
    op.emitError() << "kvpipeRunPipeline: " << errors;
    return mlirLogicalResultFailure();
  }
  return wrap(pm.run(op));
}
