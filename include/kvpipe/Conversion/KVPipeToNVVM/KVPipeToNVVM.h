//===- KVPipeToNVVM.h - kvpipe to NVVM conversion ---------------*- C++ -*-===//
//
// The conversion of the kvpipe dialect to the NVVM and LLVM dialects, as
// patterns an ML compiler can add to its own conversion, and as a pass.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_CONVERSION_KVPIPETONVVM_KVPIPETONVVM_H
#define KVPIPE_CONVERSION_KVPIPETONVVM_KVPIPETONVVM_H

#include "mlir/Pass/Pass.h"

#include <cstdint>

namespace mlir {
class LLVMTypeConverter;
class RewritePatternSet;
namespace gpu {
class GPUDialect;
} // namespace gpu
namespace LLVM {
class LLVMDialect;
} // namespace LLVM
namespace NVVM {
class NVVMDialect;
} // namespace NVVM
} // namespace mlir

namespace kvpipe {

#define GEN_PASS_DECL
#include "kvpipe/Conversion/Passes.h.inc"

/// Options of the lowering patterns.
struct KVPipeToNVVMOptions {
  /// When non-zero, every mbarrier wait gives up after this many clock
  /// cycles, prints where it hung and traps (a debugging aid; zero cost when
  /// zero).
  uint64_t waitTimeout = 0;
};

/// Adds the type conversions of kvpipe's types: a pipeline state becomes
/// `!llvm.struct<(ptr<3>, i32, i32)>` (barrier array, ring index, phase), an
/// mbarrier `!llvm.ptr<3>`, a tensor map a generic `!llvm.ptr` to the
/// by-value kernel parameter.
void populateKVPipeToNVVMTypeConversions(mlir::LLVMTypeConverter &converter);

/// Adds the patterns lowering every kvpipe op to NVVM and LLVM. The producer
/// commits must have been annotated by `kvpipe::annotateTransactionBytes`
/// (kvpipe/Dialect/KVPipe/Analysis/Transactions.h) while the TMA loads were
/// still kvpipe ops. The converter must include
/// `populateKVPipeToNVVMTypeConversions`. The patterns create no `scf` ops
/// and do not check the target (the `kvpipe-check-nvptx-targets` pass does).
/// They name the symbols they add (barrier arrays, wait-timeout helpers)
/// from names they read once per symbol table: use the pattern set for one
/// conversion, and populate a new one for the next.
void populateKVPipeToNVVMConversionPatterns(
    const mlir::LLVMTypeConverter &converter, mlir::RewritePatternSet &patterns,
    const KVPipeToNVVMOptions &options = {});

/// Sets the argument attributes that make an `!llvm.ptr` argument of an
/// `llvm.func` kernel a CUDA `__grid_constant__ const CUtensorMap` passed by
/// value (`llvm.byval`, `llvm.align = 64`, `nvvm.grid_constant`).
void setTensorMapArgumentAttributes(mlir::Operation *funcOp, unsigned argIndex);

/// Function attributes by which convert-kvpipe-to-nvvm tells
/// kvpipe-finalize-kernel-abi where a kernel's tensor maps are: their
/// positions, and the signature those positions refer to.
inline constexpr llvm::StringLiteral kTensorMapArgsAttrName =
    "kvpipe.tensor_map_args";
inline constexpr llvm::StringLiteral kKernelSignatureAttrName =
    "kvpipe.kernel_signature";

} // namespace kvpipe

#endif // KVPIPE_CONVERSION_KVPIPETONVVM_KVPIPETONVVM_H
