//===- AttentionGenerator.h - generate attention kernels --------*- C++ -*-===//
//
// The attention kernel generator as a library (KVPipe::KVPipeAttentionGenerator):
// what `--kvpipe-expand-attention` runs, callable by an embedding compiler
// without a pass manager. A kernel is generated in three stages, each of
// which can be stopped after and inspected (the pass's `stage` option):
//
//   1. skeleton   buildAttentionSkeleton: the gpu.func in kvpipe ops, with
//                 the kernel's parts named (kvpipe.warp_roles, one tile of
//                 work as kvpipe.tile and kvpipe.for_each_tile, the
//                 softmax's fragment ops) and no schedule rewrites applied;
//   2. scheduled  scheduleAttentionKernel: the rewrites the configuration
//                 asks for (the persistent loop over tiles, the softmax
//                 under the GEMMs, ping-pong between consumer warpgroups);
//   3. lowered    lowerKernelStructure: the kernel-structure ops lowered to
//                 gpu/nvvm/scf/vector/arith, ready for --kvpipe-to-ptx's
//                 conversion.
//
// docs/architecture.md walks through the stages with the forward kernel.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_TRANSFORMS_ATTENTIONGENERATOR_H
#define KVPIPE_DIALECT_KVPIPE_TRANSFORMS_ATTENTIONGENERATOR_H

#include "kvpipe/Dialect/KVPipe/IR/AttentionConfig.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace kvpipe {

/// The kernel parameters, in this order (docs/kernel-abi.md); those after
/// `Batch` exist only in the kernels that ask for them
/// (getAttentionParams).
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
  /// With `sliding_window`.
  WindowLeft,
  WindowRight,
  /// With `kv_lengths`.
  KVLengths,
  /// With `split_kv` (which has no `o_map` and `lse`): the split count and
  /// the workspace of the partial outputs and log-sum-exps.
  NumSplits,
  OPartial,
  LsePartial,
  /// With `page_size`: the i32 page indices, `max_pages_per_seq` per batch.
  BlockTable,
  MaxPagesPerSeq,
  /// With `varlen`: the sequences' prefix offsets, the packed output's
  /// address and its rows.
  CuSeqlensQ,
  CuSeqlensK,
  Out,
  TotalQ,
  /// With `tile_table`: the persistent CTAs' tiles, i32 per CTA and round.
  TileTable,
  /// With `sinks` (not with `split_kv`, whose combine kernel takes them):
  /// one f32 logit per query head.
  Sinks,
  Count
};

/// The parameters of a split-KV family's `<name>_combine` kernel, in order
/// (docs/kernel-abi.md, "Split-KV").
enum class CombineParam : unsigned {
  OPartial,
  LsePartial,
  O,
  Lse,
  OStrideB,
  OStrideH,
  OStrideS,
  SeqQ,
  HeadsQ,
  Batch,
  NumSplits,
  /// Only with `sinks`.
  Sinks,
  Count
};

/// The parameters of the kernel `config` describes, in order: the one place
/// the kernel's signature, its ABI report and the generator read them from.
llvm::SmallVector<AttentionParam>
getAttentionParams(const AttentionConfig &config);

/// The ABI name of a parameter ("q_map", ..., "kv_lengths").
llvm::StringRef getAttentionParamName(AttentionParam param);

/// Whether a parameter is a pointer to global memory (the others are
/// tensor maps, `scale_log2`'s f32 and i32 scalars).
bool isAttentionPointerParam(AttentionParam param);
/// The backward family's kernels (docs/backward.md).
enum class AttentionBackwardRole { Preprocess, Main, Postprocess };

/// The parameters of the backward's main kernel, in order
/// (docs/kernel-abi.md, "Backward kernels").
enum class BackwardParam : unsigned {
  QMap,
  KMap,
  VMap,
  DOMap,
  /// dK and dV's tensor maps; with `varlen`, pointers to contiguous
  /// (total_kv, heads_q, D) gradients (predicated stores).
  DKMap,
  DVMap,
  LseLog2,
  Delta,
  DQAccum,
  SeqQ,
  SeqKV,
  HeadsPerKVHead,
  ScaleLog2,
  Scale,
  HeadsQ,
  Batch,
  /// Only with `deterministic`.
  DQSemaphore,
  // With `varlen` (never with `deterministic`), after the others:
  // cu_seqlens_q, cu_seqlens_k, total_q, total_kv (see the ABI report).
  Count
};

/// The parameters of the backward's preprocess kernel, in order.
enum class PreprocessParam : unsigned {
  O,
  DO,
  Lse,
  Delta,
  LseLog2,
  DQAccum,
  OStrideB,
  OStrideH,
  OStrideS,
  DOStrideB,
  DOStrideH,
  DOStrideS,
  SeqQ,
  HeadsQ,
  /// Only with `deterministic`.
  DQSemaphore,
  // With `varlen` (never with `deterministic`), after the others:
  // cu_seqlens_q, total_q.
  Count
};

/// The parameters of the backward's postprocess kernel, in order.
enum class PostprocessParam : unsigned {
  DQAccum,
  DQ,
  DQStrideB,
  DQStrideH,
  DQStrideS,
  SeqQ,
  HeadsQ,
  Scale,
  // With `varlen`, after the others: cu_seqlens_q, total_q.
  Count
};

/// Where generation stops.
enum class AttentionStage { Skeleton, Scheduled, Lowered };

/// Parses "skeleton", "scheduled" or "lowered".
std::optional<AttentionStage> parseAttentionStage(llvm::StringRef name);

/// Stage 1: builds the kernel's gpu.func, in kernel-structure ops, at the
/// builder's insertion point (inside a gpu.module).
mlir::gpu::GPUFuncOp buildAttentionSkeleton(mlir::OpBuilder &builder,
                                            mlir::Location loc,
                                            llvm::StringRef name,
                                            const AttentionConfig &config);

/// Stage 2: applies to `kernel` the schedule rewrites `config` asks for.
mlir::LogicalResult scheduleAttentionKernel(mlir::gpu::GPUFuncOp kernel,
                                            const AttentionConfig &config);

/// Stage 3: lowers the kernel-structure ops nested in `root`
/// (kvpipe.warp_roles, the tiles left one per CTA, and the fragment ops).
/// Applies to any kernel built from them, not only attention.
void lowerKernelStructure(mlir::Operation *root);

/// The three stages, up to `stage`.
mlir::FailureOr<mlir::gpu::GPUFuncOp>
generateAttentionKernel(mlir::OpBuilder &builder, mlir::Location loc,
                        llvm::StringRef name, const AttentionConfig &config,
                        AttentionStage stage = AttentionStage::Lowered);

/// Stage 1 of a backward declaration (`config.backward`): its preprocess,
/// main and postprocess kernels, in that order, at the builder's insertion
/// point (docs/backward.md). Only the main kernel has kernel-structure ops.
llvm::SmallVector<mlir::gpu::GPUFuncOp>
buildAttentionBackwardSkeleton(mlir::OpBuilder &builder, mlir::Location loc,
                               llvm::StringRef name,
                               const AttentionConfig &config);

/// The kernels of a declaration, up to `stage`: the forward kernel, or the
/// backward family when `config.backward`.
mlir::FailureOr<llvm::SmallVector<mlir::gpu::GPUFuncOp>>
generateAttentionKernels(mlir::OpBuilder &builder, mlir::Location loc,
                         llvm::StringRef name, const AttentionConfig &config,
                         AttentionStage stage = AttentionStage::Lowered);

/// Stage 1 of a split-KV declaration's `<name>_combine` kernel (no
/// kernel-structure ops), at the builder's insertion point.
mlir::gpu::GPUFuncOp buildAttentionCombineKernel(mlir::OpBuilder &builder,
                                                 mlir::Location loc,
                                                 llvm::StringRef family,
                                                 const AttentionConfig &config);

/// The ABI of a split-KV family's `<family>_combine` kernel `name`.
mlir::DictionaryAttr getAttentionCombineABI(mlir::MLIRContext *ctx,
                                            llvm::StringRef name,
                                            llvm::StringRef family,
                                            const AttentionConfig &config);

/// The ABI of one kernel of the backward family `family` (the
/// declaration's name), as the `kvpipe.attention_abi` attribute it carries.
mlir::DictionaryAttr getAttentionBackwardABI(mlir::MLIRContext *ctx,
                                             llvm::StringRef name,
                                             llvm::StringRef family,
                                             const AttentionConfig &config,
                                             AttentionBackwardRole role);

/// The ABI entries of a forward kernel's modifiers (docs/modifiers.md):
/// none without modifiers; else whether it has a score_mod and a mask_mod,
/// its auxiliary tensors' element types, and what the compiler proved of the
/// mask_mod's shape.
llvm::SmallVector<mlir::NamedAttribute>
getModifierABI(mlir::Builder &b, const AttentionConfig &config);

/// `abi` with each tensor-map parameter's box and swizzle (`<name>:
/// {box, swizzle}`), read from the kernel's parameter types: what the
/// launcher encodes is what the generated code was built for, by
/// construction. `abi`'s `params` names the kernel's parameters in order.
mlir::DictionaryAttr withTensorMapABI(mlir::DictionaryAttr abi,
                                      mlir::FunctionType kernelType);

/// The kernel's ABI as an attribute (docs/kernel-abi.md); the generated
/// function carries it as `kvpipe.attention_abi`.
mlir::DictionaryAttr getAttentionABI(mlir::MLIRContext *ctx,
                                     llvm::StringRef name,
                                     const AttentionConfig &config);

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_TRANSFORMS_ATTENTIONGENERATOR_H
