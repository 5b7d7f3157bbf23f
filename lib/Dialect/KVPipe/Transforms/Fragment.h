//===- Fragment.h - wgmma accumulator fragments as vectors ------*- C++ -*-===//
//
// A warpgroup's 64xN f32 wgmma accumulator lives in its 128 threads as
// `vector<N/2 x f32>`, in the layout kvpipe/Dialect/KVPipe/IR/
// AccumulatorLayout.h defines: each thread holds two rows ("row halves"),
// and a row is spread over the 4 lanes of a quad. These helpers build the
// row-wise operations of the online softmax on that layout; the fragment ops
// (KVPipeFragmentOps.td) lower through them.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_FRAGMENT_H
#define KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_FRAGMENT_H

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace kvpipe {

/// Combines a per-lane scalar with `kind` across the lanes that differ by
/// `xorOffsets` (shuffle-xor, one after the other): {1, 2} a quad, {1, 2,
/// 4, 8, 16} the warp.
mlir::Value reduceAcrossLanes(mlir::ImplicitLocOpBuilder &b, mlir::Value value,
                              mlir::vector::CombiningKind kind,
                              llvm::ArrayRef<int32_t> xorOffsets);

class Fragment {
public:
  /// Helpers for fragments of `numElements` f32 per thread (a 64 x
  /// 2*numElements tile).
  Fragment(mlir::ImplicitLocOpBuilder &b, int64_t numElements)
      : b(b), n(numElements) {}

  mlir::VectorType type() const;
  /// The column offset of each element from the thread's first column
  /// (`2*(l%4)`): 8*(i/4) + i%2, as a constant i32 vector.
  mlir::Value columnOffsets() const;
  /// True for the elements of row half 1 (the row 8 below), a constant.
  mlir::Value isSecondRow() const;
  /// A vector whose elements of row half 0 are `first` and of half 1
  /// `second` (scalars of the element type of the result).
  mlir::Value perRow(mlir::Value first, mlir::Value second) const;
  /// The elements of one row half whose column offset lies in [low, high)
  /// (i32 values, either may lie outside the fragment; a null `low` is 0),
  /// as bit masks of 32 positions each (AccumulatorLayout::
  /// positionInRowHalf; bit p of word w is position 32 w + p).
  llvm::SmallVector<mlir::Value> columnRangeBits(mlir::Value low,
                                                 mlir::Value high) const;
  /// `x` where the bit of its element's position in the words of its row
  /// half (columnRangeBits) is set, else `fill`: one bit test a element,
  /// which ptxas turns into R2P (7 predicates an instruction).
  mlir::Value selectByBits(llvm::ArrayRef<mlir::Value> half0,
                           llvm::ArrayRef<mlir::Value> half1, mlir::Value x,
                           mlir::Value fill) const;
  /// Reduces the thread's elements of one row half with `kind`, then across
  /// the 4 lanes of the row (shuffle-xor 1 and 2) when `acrossLanes`.
  mlir::Value reduceRow(mlir::Value fragment, int half,
                        mlir::vector::CombiningKind kind,
                        bool acrossLanes) const;
  /// Combines a scalar across the 4 lanes of a row (shuffle-xor 1 and 2).
  mlir::Value reduceAcrossLanes(mlir::Value value,
                                mlir::vector::CombiningKind kind) const;

private:
  mlir::ImplicitLocOpBuilder &b;
  int64_t n;
};

} // namespace kvpipe

#endif // KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_FRAGMENT_H
