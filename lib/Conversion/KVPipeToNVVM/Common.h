//===- Common.h - helpers shared by the kvpipe lowering patterns -*- C++ -*-===//

#ifndef KVPIPE_LIB_CONVERSION_KVPIPETONVVM_COMMON_H
#define KVPIPE_LIB_CONVERSION_KVPIPETONVVM_COMMON_H

#include "kvpipe/Conversion/KVPipeToNVVM/KVPipeToNVVM.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <memory>

namespace mlir::math {
class Exp2Op;
} // namespace mlir::math

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

/// Names for the symbols the lowering adds to a symbol table (barrier
/// arrays, wait-timeout helpers): `<prefix><n>` with the smallest `n` that
/// no symbol has. Each table's names are read once, when the first name in
/// it is asked for; after that a name costs O(1), where probing `n = 0, 1,
/// ...` with `SymbolTable::lookupSymbolIn` (a scan of the table) made N
/// pipelines cost O(N^3). The names it hands out count as taken. It assumes
/// that nothing else adds symbols with its prefixes while it is in use: one
/// instance per conversion.
class SymbolNamer {
public:
  std::string getUniqueName(mlir::Operation *symbolTableOp,
                            llvm::StringRef prefix);

private:
  struct Table {
    llvm::StringSet<> taken;
    llvm::StringMap<unsigned> next;
  };
  llvm::DenseMap<mlir::Operation *, Table> tables;
};

/// Waits until the phase of parity `parity` (i32) of the mbarrier at `addr`
/// has completed. With a timeout, the wait is a call of a helper function
/// (added to `symbolTableOp` under a name from `namer`) that loops on
/// try_wait and, when the timeout expires, reports `what` (the op and its
/// location), the barrier (`barrierIndex` of `slot`, `stage` and
/// `consumer`) and the parity, and traps.
void emitParityWait(mlir::OpBuilder &b, mlir::Location loc, mlir::Value addr,
                    mlir::Value parity, const KVPipeToNVVMOptions &options,
                    llvm::StringRef what, mlir::Value slot, PipelineType type,
                    int64_t stage, bool consumer,
                    mlir::Operation *symbolTableOp, SymbolNamer &namer);

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

/// The pattern groups, one per op family (one file each). The barrier
/// patterns name the symbols they add with `namer`, which must outlive the
/// conversion.
void populateBarrierToNVVMPatterns(const mlir::LLVMTypeConverter &converter,
                                   mlir::RewritePatternSet &patterns,
                                   const KVPipeToNVVMOptions &options,
                                   std::shared_ptr<lowering::SymbolNamer> namer);
void populateTMAToNVVMPatterns(const mlir::LLVMTypeConverter &converter,
                               mlir::RewritePatternSet &patterns);
void populateWgmmaToNVVMPatterns(const mlir::LLVMTypeConverter &converter,
                                 mlir::RewritePatternSet &patterns);
void populateWarpSpecializationToNVVMPatterns(
    const mlir::LLVMTypeConverter &converter, mlir::RewritePatternSet &patterns);
/// `math.exp2 fastmath<afn>` on f32 (scalars, 1-D vectors) to the SFU's
/// `ex2.approx.ftz.f32`; the ops `isApproximateExp2` accepts.
void populateApproxMathToNVVMPatterns(const mlir::LLVMTypeConverter &converter,
                                      mlir::RewritePatternSet &patterns);
bool isApproximateExp2(mlir::math::Exp2Op op);

} // namespace kvpipe

#endif // KVPIPE_LIB_CONVERSION_KVPIPETONVVM_COMMON_H
