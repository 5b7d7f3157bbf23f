//===- AttentionKernelBuilder.h - generate an attention kernel --*- C++ -*-===//

#ifndef KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_ATTENTIONKERNELBUILDER_H
#define KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_ATTENTIONKERNELBUILDER_H

#include "kvpipe/Dialect/KVPipe/IR/AttentionConfig.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace kvpipe {

/// The kernel parameters, in order (docs/kernel-abi.md).
enum class AttentionParam : unsigned {
  QMap,
  KMap,
  VMap,
  OMap,
  Lse,
  SeqQ,
  SeqKV,
  HeadsPerKVHead,
  ScaleLog2,
  HeadsQ,
  Batch,
  Count
};

/// Builds the gpu.func of an attention kernel at the builder's insertion
/// point (inside a gpu.module).
mlir::gpu::GPUFuncOp buildAttentionKernel(mlir::OpBuilder &builder,
                                          mlir::Location loc,
                                          llvm::StringRef name,
                                          const AttentionConfig &config);

/// The kernel's ABI as an attribute (docs/kernel-abi.md).
mlir::DictionaryAttr getAttentionABI(mlir::MLIRContext *ctx,
                                     llvm::StringRef name,
                                     const AttentionConfig &config);

} // namespace kvpipe

#endif // KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_ATTENTIONKERNELBUILDER_H
