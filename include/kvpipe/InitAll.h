//===- InitAll.h - register kvpipe and what it needs ------------*- C++ -*-===//
//
// The entry points an embedding compiler calls to make kvpipe available:
// the dialects kvpipe's passes parse or produce, and its passes and
// pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_INITALL_H
#define KVPIPE_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace kvpipe {

/// Registers the kvpipe dialect and every dialect its passes parse or
/// produce (gpu, nvvm, nvgpu, llvm, arith, scf, memref, func, vector, math,
/// index, cf), plus the interfaces lowering them to LLVM and translating
/// them to PTX needs (convert-to-llvm, the NVVM target, LLVM IR translation).
void registerAllDialects(mlir::DialectRegistry &registry);

/// Registers kvpipe's passes and named pass pipelines (`--kvpipe-to-ptx`).
void registerAllPasses();

} // namespace kvpipe

#endif // KVPIPE_INITALL_H
