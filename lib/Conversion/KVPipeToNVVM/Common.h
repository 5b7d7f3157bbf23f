//===- Common.h - helpers shared by the kvpipe lowering patterns -*- C++ -*-===//

#ifndef KVPIPE_LIB_CONVERSION_KVPIPETONVVM_COMMON_H
#define KVPIPE_LIB_CONVERSION_KVPIPETONVVM_COMMON_H

#include "kvpipe/Conversion/KVPipeToNVVM/KVPipeToNVVM.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"

namespace kvpipe {
namespace lowering {

mlir::Value i32Constant(mlir::OpBuilder &b, mlir::Location loc, int64_t v);
mlir::Value i64Constant(mlir::OpBuilder &b, mlir::Location loc, int64_t v);

/// The lowered pipeline state: `!llvm.struct<(ptr<3>, i32, i32)>`.
struct LoweredState {
  mlir::Value barriers; ///< `!llvm.ptr<3>` to the barrier array.
  mlir::Value index;    ///< i32 ring index.
  mlir::Value phase;    ///< i32 phase bit (0 or 1).

  static mlir::Type getType(mlir::MLIRContext *ctx);
  static LoweredState unpack(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value state);
  mlir::Value pack(mlir::OpBuilder &b, mlir::Location loc) const;
  /// `step(state)`: index + 1, wrapping to 0 and flipping the phase at
  /// `kvStages`.
  LoweredState step(mlir::OpBuilder &b, mlir::Location loc,
                    int64_t kvStages) const;
};

/// Address of barrier `qkStages * slot + stage + (consumer ? numStages : 0)`.
mlir::Value barrierAddress(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value barriers, mlir::Value slot,
                           PipelineType type, int64_t stage, bool consumer);

/// Index of barrier `qkStages * slot + stage + (consumer ? numStages : 0)`
/// in the pipeline's barrier array, as an i32.
mlir::Value barrierIndex(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::Value slot, PipelineType type, int64_t stage,
                         bool consumer);

/// Waits until the phase of parity `parity` (i32) of the mbarrier at `addr`
/// has completed. With a timeout, the wait is a bounded loop that reports
/// `what` (the op and its location), the barrier (`barrierIndex` of `slot`,
/// `stage` and `consumer`) and the parity, and traps when the timeout
/// expires.
void emitParityWait(mlir::OpBuilder &b, mlir::Location loc, mlir::Value addr,
                    mlir::Value parity, const KVPipeToNVVMOptions &options,
                    llvm::StringRef what, mlir::Value slot, PipelineType type,
                    int64_t stage, bool consumer);

/// The address of the first element of the tile a memref descriptor
/// describes (its aligned pointer plus offset).
mlir::Value tileAddress(mlir::OpBuilder &b, mlir::Location loc,
                        const mlir::LLVMTypeConverter &converter,
                        mlir::MemRefType type, mlir::Value descriptor);

/// Whether `fn` is an NVVM kernel (`nvvm.kernel` or the PTX kernel calling
/// convention): only its parameters can be grid constants.
bool isNVVMKernel(mlir::LLVM::LLVMFuncOp fn);

/// `threadIdx.x` as an i32.
mlir::Value threadIdX(mlir::OpBuilder &b, mlir::Location loc);

/// Checks the gpu.modules in `root` before the lowering for what would make
/// NVPTX or the translation to LLVM IR abort or fail without a location: an
/// NVVM target whose explicit PTX version is older than its chip needs, an
/// op outside any function, a negative launch bound, a type NVPTX cannot
/// compile (scalable vectors, x87 floats, huge vectors), and kvpipe ops in a
/// module that does not target a chip NVPTX knows, sm_90 or later, with the
/// PTX ISA the ops need (8.0, or 8.6 for TMA loads without multicast).
/// Reports the first violation at the gpu.module or the op.
mlir::LogicalResult checkTargets(mlir::Operation *root);

} // namespace lowering

/// The pattern groups, one per op family (one file each).
void populateBarrierToNVVMPatterns(const mlir::LLVMTypeConverter &converter,
                                   mlir::RewritePatternSet &patterns,
                                   const KVPipeToNVVMOptions &options);
void populateTMAToNVVMPatterns(const mlir::LLVMTypeConverter &converter,
                               mlir::RewritePatternSet &patterns);
void populateWgmmaToNVVMPatterns(const mlir::LLVMTypeConverter &converter,
                                 mlir::RewritePatternSet &patterns);
void populateWarpSpecializationToNVVMPatterns(
    const mlir::LLVMTypeConverter &converter, mlir::RewritePatternSet &patterns);

} // namespace kvpipe

#endif // KVPIPE_LIB_CONVERSION_KVPIPETONVVM_COMMON_H
