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
  std::string errors;
  llvm::raw_string_ostream os(errors);
  // The textual pipeline names its anchor ("builtin.module(...)"); run it as
  // written on the module rather than nested under another module pass.
  mlir::FailureOr<mlir::OpPassManager> parsed =
      mlir::parsePassPipeline(unwrap(pipeline), os);
  if (mlir::failed(parsed)) {
    op.emitError() << "kvpipeRunPipeline: " << errors;
    return mlirLogicalResultFailure();
  }
  if (parsed->getOpAnchorName() != mlir::ModuleOp::getOperationName() &&
      parsed->getOpAnchorName() != mlir::OpPassManager::getAnyOpAnchorName()) {
    op.emitError() << "kvpipeRunPipeline: the pipeline must be anchored on "
                      "builtin.module, got '"
                   << parsed->getOpAnchorName() << "'";
    return mlirLogicalResultFailure();
  }
  mlir::PassManager pm(op->getContext());
  static_cast<mlir::OpPassManager &>(pm) = *parsed;
  return wrap(pm.run(op));
}
