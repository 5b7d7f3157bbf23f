/*===- kvpipe-c/Dialects.h - C API of kvpipe ----------------------*- C -*-===*\
|*                                                                            *|
|* The MLIR C API convention for out-of-tree dialects, plus entry points to  *|
|* register kvpipe's passes and run a pipeline, for compilers and languages  *|
|* that embed kvpipe through C (libKVPipeCAPI.so, which also exports MLIR's  *|
|* core C API: mlirContextCreate, mlirModuleCreateParse, ...).               *|
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
/// and runs it on `module`. Diagnostics go to the context's handlers.
MLIR_CAPI_EXPORTED MlirLogicalResult kvpipeRunPipeline(MlirModule module,
                                                       MlirStringRef pipeline);

#ifdef __cplusplus
}
#endif

#endif /* KVPIPE_C_DIALECTS_H */
