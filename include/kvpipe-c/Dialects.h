/*===- kvpipe-c/Dialects.h - C API of kvpipe ----------------------*- C -*-===*\
|*                                                                            *|
|* The MLIR C API convention for out-of-tree dialects, entry points to        *|
|* register kvpipe's passes and run a pipeline, and a self-contained compile  *|
|* of IR text, for compilers and languages that embed kvpipe through C.       *|
|*                                                                            *|
|* libKVPipeCAPI.so defines the functions declared here, and only these are   *|
|* its C API (it also exports kvpipe's C++ symbols, which are no interface).  *|
|* MLIR's core C API that they take and return (mlirContextCreate,            *|
|* mlirModuleCreateParse, ...) is not in it: it is in libKVPipeMLIRCAPI.so,   *|
|* which a C program links as well. CMake's KVPipe::KVPipeCAPI brings both    *|
|* libraries and MLIR's C headers; without CMake,                             *|
|* -lKVPipeCAPI -lKVPipeMLIRCAPI and MLIR's include directory.                *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KVPIPE_C_DIALECTS_H
#define KVPIPE_C_DIALECTS_H

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/// mlirGetDialectHandle__kvpipe__(): the kvpipe dialect alone.
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(KVPipe, kvpipe);

/// Inserts kvpipe and every dialect and interface its passes parse or
/// produce (gpu, nvvm, nvgpu, llvm, arith, scf, memref, func, vector, math,
/// index, cf; convert-to-llvm, the NVVM target, LLVM IR translation).
MLIR_CAPI_EXPORTED void kvpipeRegisterAllDialects(MlirDialectRegistry registry);

/// Registers kvpipe's passes and pipelines (--kvpipe-to-ptx, ...) and
/// MLIR's upstream passes, so that textual pipelines can name them. Safe to
/// call more than once.
MLIR_CAPI_EXPORTED void kvpipeRegisterAllPasses(void);

/// Parses `pipeline` (e.g. "builtin.module(kvpipe-to-ptx{ptx-file=k.ptx})")
/// and runs it on `module`. The pipeline must be anchored on builtin.module
/// (or be op-agnostic, "any(...)"); as in kvpipe-opt's --pass-pipeline,
/// nesting is explicit ("builtin.module(func.func(cse))"). Diagnostics go to
/// the context's handlers.
MLIR_CAPI_EXPORTED MlirLogicalResult kvpipeRunPipeline(MlirModule module,
                                                       MlirStringRef pipeline);

/// Compiles IR text the way `kvpipe-opt --pass-pipeline=PIPELINE -` does, in
/// one call that needs no MLIR object from the caller: the entry point for
/// C programs that only have text, and for languages that load this library
/// without bindings (the Python package, through ctypes).
///
/// Each call has its own MLIRContext with the dialects kvpipe-opt registers
/// (kvpipeRegisterAllDialects) and registers the passes once
/// (kvpipeRegisterAllPasses), so calls are independent of each other.
///
/// - `ir`: the MLIR text; it need not be NUL-terminated. Top-level
///   operations other than one builtin.module are wrapped in one.
/// - `sourceName`: the name locations in `ir` report ("<stdin>" when
///   empty, as kvpipe-opt reading standard input).
/// - `pipeline`: a textual pipeline anchored on builtin.module, e.g.
///   "builtin.module(kvpipe-to-ptx{ptx-file=k.ptx abi-file=k.json})", see
///   kvpipeRunPipeline; empty: no passes (parse, verify and print).
/// - `output`: receives the resulting IR, printed as kvpipe-opt prints it,
///   in consecutive pieces, only on success. May be NULL when only the
///   pipeline's side effects are wanted (ptx-file=, abi-file=).
/// - `diagnostics`: receives every diagnostic as kvpipe-opt prints them
///   ("<stdin>:3:8: error: ..." with the source line and notes), in
///   consecutive pieces, as they are emitted. May be NULL to drop them.
/// - `userData`: passed to both callbacks.
///
/// Returns failure when the IR does not parse or verify, the pipeline does
/// not parse, or a pass fails; a diagnostic then says why.
MLIR_CAPI_EXPORTED MlirLogicalResult kvpipeCompileText(
    MlirStringRef ir, MlirStringRef sourceName, MlirStringRef pipeline,
    MlirStringCallback output, MlirStringCallback diagnostics, void *userData);

/// The kvpipe release this library was built as ("0.1.0"): the same string
/// `kvpipe-opt --version` prints after "kvpipe ", so that a caller can
/// check that the library matches its own release. Static storage,
/// NUL-terminated.
MLIR_CAPI_EXPORTED MlirStringRef kvpipeGetVersion(void);

#ifdef __cplusplus
}
#endif

#endif /* KVPIPE_C_DIALECTS_H */
