//===- KernelParts.h - building blocks of attention kernels -----*- C++ -*-===//
//
// The steps every warp-specialised attention kernel is made of, as builder
// functions over kvpipe ops, so that a backward or decode generator composes
// them instead of copying the forward one (docs/architecture.md):
//
//   rings      buildTileView, buildSlotWait: a slot of a shared-memory tile
//              ring, once the pipeline says it is full
//   GEMM step  buildSlotWait -> kvpipe.warpgroup_mma -> buildRetireAndRelease
//              (a slot is released only after the wgmma reading it retired)
//   softmax    buildOnlineSoftmaxStep: one block of the online softmax on a
//              wgmma accumulator fragment, from the fragment ops
//
// The forward generator (AttentionConsumer.cpp) is built from these.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_TRANSFORMS_KERNELPARTS_H
#define KVPIPE_DIALECT_KVPIPE_TRANSFORMS_KERNELPARTS_H

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpDefinition.h"

namespace kvpipe {

/// A rank-reduced `memref.subview` of `ring` at `offsets` whose trailing
/// dimensions have `sizes` (the leading ones, size 1, are dropped).
mlir::Value buildTileView(mlir::ImplicitLocOpBuilder &b, mlir::Value ring,
                          llvm::ArrayRef<mlir::OpFoldResult> offsets,
                          llvm::ArrayRef<int64_t> sizes);

/// `kvpipe.consumer_wait` on `state`, then the view of its slot of `ring`
/// (`ring`'s leading dimension indexed by `kvpipe.index`), of shape
/// `tileShape` (`ring`'s other dimensions).
mlir::Value buildSlotWait(mlir::ImplicitLocOpBuilder &b, mlir::Value ring,
                          mlir::Value state,
                          llvm::ArrayRef<int64_t> tileShape);

/// Retires wgmma groups until `pending` are in flight
/// (`kvpipe.warpgroup_wait`), replacing `fragment` by the retired one, then
/// releases `state`'s slot (`kvpipe.consumer_release` by `elected`); returns
/// the advanced state.
mlir::Value buildRetireAndRelease(mlir::ImplicitLocOpBuilder &b,
                                  mlir::Value &fragment, int64_t pending,
                                  mlir::Value state, mlir::Value elected);

/// The running statistics of the two rows a thread holds: maxima and the
/// thread's parts of the sums.
struct OnlineSoftmaxStats {
  mlir::Value m0, m1, l0, l1;
};

/// One block of the online softmax.
struct OnlineSoftmaxStep {
  OnlineSoftmaxStats stats;
  /// exp2((m_old - m_new) c) per row: rescales what was accumulated.
  mlir::Value alpha0, alpha1;
  /// P = exp2(S c - m c), in `pElementType` (the A operand of O += P V).
  mlir::Value p;
};

/// The online-softmax update of the (masked) score fragment `s` with the
/// scale `scaleLog2` = scale * log2(e): row maxima across the quad, a row
/// without a valid key yet keeps -inf and gets P = 0 (not NaN), P with one
/// FMA per element, row sums per thread.
OnlineSoftmaxStep buildOnlineSoftmaxStep(mlir::ImplicitLocOpBuilder &b,
                                         mlir::Value s, mlir::Value scaleLog2,
                                         const OnlineSoftmaxStats &stats,
                                         mlir::Type pElementType);

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_TRANSFORMS_KERNELPARTS_H
