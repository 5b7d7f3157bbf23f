//===- Dialects.cpp - C API of kvpipe -------------------------------------===//
//
// The C entry points of include/kvpipe-c/Dialects.h. kvpipeCompileText is
// kvpipe-opt's parse / run / print in one call; it follows MlirOptMain
// (implicit module, verification after parsing, SourceMgr diagnostics,
// external resources passed through) so that its output and diagnostics are
// what kvpipe-opt prints.
//
//===----------------------------------------------------------------------===//

#include "kvpipe-c/Dialects.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.h"
#include "kvpipe/InitAll.h"
#include "kvpipe/Support/InputLimits.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "mlir/CAPI/Utils.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Tools/ParseUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <mutex>

#ifndef KVPIPE_VERSION
#error "KVPIPE_VERSION must be defined (the project version, lib/CAPI/CMakeLists.txt)"
#endif

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(KVPipe, kvpipe, kvpipe::KVPipeDialect)

/// Parses a textual pipeline ("builtin.module(kvpipe-to-ptx)") that can run
/// on a module: anchored on builtin.module or on any operation ("any(...)").
/// As in kvpipe-opt's --pass-pipeline, nesting is explicit: a pass restricted
/// to func.func is written "builtin.module(func.func(pass))".
static mlir::FailureOr<mlir::OpPassManager>
parseModulePipeline(llvm::StringRef text, llvm::raw_ostream &errors) {
  mlir::FailureOr<mlir::OpPassManager> parsed =
      mlir::parsePassPipeline(text, errors);
  if (mlir::failed(parsed))
    return mlir::failure();
  if (parsed->getOpAnchorName() != mlir::ModuleOp::getOperationName() &&
      parsed->getOpAnchorName() != mlir::OpPassManager::getAnyOpAnchorName()) {
    errors << "the pipeline must be anchored on builtin.module, got '"
           << parsed->getOpAnchorName() << "'";
    return mlir::failure();
  }
  return parsed;
}

/// Runs `passes` on `op` as the root of a pass run, not nested under another
/// module pass (which would only reach modules nested inside `op`).
static mlir::LogicalResult runPipeline(mlir::Operation *op,
                                       const mlir::OpPassManager &passes) {
  mlir::PassManager pm(op->getContext());
  static_cast<mlir::OpPassManager &>(pm) = passes;
  return pm.run(op);
}

/// The dialects kvpipe-opt registers, built once: every call of
/// kvpipeCompileText creates a context from it.
static const mlir::DialectRegistry &dialectRegistry() {
  static const mlir::DialectRegistry *registry = [] {
    auto *registry = new mlir::DialectRegistry;
    kvpipe::registerAllDialects(*registry);
    return registry;
  }();
  return *registry;
}

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
  mlir::FailureOr<mlir::OpPassManager> passes =
      parseModulePipeline(unwrap(pipeline), os);
  if (mlir::failed(passes)) {
    op.emitError() << "kvpipeRunPipeline: " << errors;
    return mlirLogicalResultFailure();
  }
  return wrap(runPipeline(op, *passes));
}

static void discard(MlirStringRef, void *) {}

MlirLogicalResult kvpipeCompileText(MlirStringRef ir, MlirStringRef sourceName,
                                    MlirStringRef pipeline,
                                    MlirStringCallback output,
                                    MlirStringCallback diagnostics,
                                    void *userData) {
  kvpipeRegisterAllPasses();

  // Unbuffered: each diagnostic reaches the caller as it is emitted, so what
  // was reported is not lost if the process dies later in the pipeline.
  mlir::detail::CallbackOstream diagnosticStream(
      diagnostics ? diagnostics : discard, userData);

  // The parser needs a NUL-terminated buffer; the caller's text need not be.
  auto sourceMgr = std::make_shared<llvm::SourceMgr>();
  llvm::StringRef name =
      sourceName.length ? unwrap(sourceName) : llvm::StringRef("<stdin>");
  unsigned bufferId = sourceMgr->AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(unwrap(ir), name), llvm::SMLoc());
  // A stack overflow in the parser would kill the embedding process.
  if (mlir::failed(kvpipe::checkInputNesting(
          sourceMgr->getMemoryBuffer(bufferId)->getMemBufferRef(),
          diagnosticStream)))
    return mlirLogicalResultFailure();

  // Declared in this order so that the IR dies before the handler and the
  // handler before the context.
  mlir::MLIRContext context(dialectRegistry());
  mlir::SourceMgrDiagnosticHandler handler(*sourceMgr, &context,
                                           diagnosticStream);

  // External resources that no registered dialect handles are kept and
  // printed back unchanged, as by kvpipe-opt.
  mlir::FallbackAsmResourceMap fallbackResources;
  mlir::ParserConfig config(&context, /*verifyAfterParse=*/true,
                            &fallbackResources);
  mlir::OwningOpRef<mlir::Operation *> op =
      mlir::parseSourceFileForTool(sourceMgr, config,
                                   /*insertImplicitModule=*/true);
  if (!op)
    return mlirLogicalResultFailure();

  if (pipeline.length) {
    std::string errors;
    llvm::raw_string_ostream os(errors);
    mlir::FailureOr<mlir::OpPassManager> passes =
        parseModulePipeline(unwrap(pipeline), os);
    if (mlir::failed(passes)) {
      mlir::emitError(mlir::UnknownLoc::get(&context)) << errors;
      return mlirLogicalResultFailure();
    }
    if (mlir::failed(runPipeline(op.get(), *passes)))
      return mlirLogicalResultFailure();
  }

  if (output) {
    // Buffered: printing makes many small writes, and each piece is a call
    // into the caller (a Python function, for the package).
    mlir::detail::CallbackOstream outputStream(output, userData);
    outputStream.SetBufferSize(1 << 16);
    mlir::AsmState state(op.get(), mlir::OpPrintingFlags(),
                         /*locationMap=*/nullptr, &fallbackResources);
    outputStream << mlir::OpWithState(op.get(), state) << '\n';
    outputStream.flush();
  }
  return mlirLogicalResultSuccess();
}

MlirStringRef kvpipeGetVersion(void) {
  return mlirStringRefCreate(KVPIPE_VERSION, sizeof(KVPIPE_VERSION) - 1);
}
