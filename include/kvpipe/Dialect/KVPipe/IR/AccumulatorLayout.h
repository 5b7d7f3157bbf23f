//===- AccumulatorLayout.h - the wgmma accumulator fragment layout -*- C++ -*-===//
//
// kvpipe's data-path ops exchange register tiles in one layout: the one
// wgmma gives its accumulator. A warpgroup's 64 x N f32 accumulator lives in
// its 128 threads as `vector<N/2 x f32>`; element i of thread t (warp
// w = t / 32 within the warpgroup, lane l = t % 32) is at
//
//   row    16 w + l / 4 + 8 ((i % 4) / 2)
//   column 2 (l % 4) + 8 (i / 4) + i % 2
//
// So each thread holds two rows ("row halves" 0 and 1: i % 4 < 2 and
// i % 4 >= 2, eight rows apart), and a row is spread over the 4 lanes with
// equal l / 4 ("a quad"). The same layout, with 16-bit elements, is the A
// fragment of an RS wgmma and what `kvpipe.store_fragment` writes: P of the
// online softmax feeds `O += P V` without moving.
//
// This file is the one place the layout is written down: the fragment ops'
// verifiers and lowerings (Transforms), `kvpipe.store_fragment`'s lowering
// (Conversion/KVPipeToNVVM/WgmmaToNVVM.cpp) and, by a comment pointing here,
// the GPU test generator (test/Integration/GPU/gen_kernels.py) read it.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_ACCUMULATORLAYOUT_H
#define KVPIPE_DIALECT_KVPIPE_IR_ACCUMULATORLAYOUT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LLVM.h"

namespace kvpipe {

/// The wgmma accumulator layout (see the file comment). Thread-dependent
/// parts are split into the thread's base (`threadRow`, `threadColumn`:
/// computed at run time from warp and lane) and each element's constant
/// offset from it (`rowOffset`, `columnOffset`).
struct AccumulatorLayout {
  /// Rows of the tile a warpgroup holds (wgmma's M).
  static constexpr int64_t kRows = 64;
  /// Threads of the warpgroup sharing the tile.
  static constexpr int64_t kThreads = 128;
  static constexpr int64_t kWarpSize = 32;
  /// Rows each warp holds (kRows / 4 warps).
  static constexpr int64_t kRowsPerWarp = 16;
  /// Lanes sharing one row (a quad: lanes with equal l / 4).
  static constexpr int64_t kLanesPerRow = 4;
  /// Adjacent columns a lane holds per group of four elements.
  static constexpr int64_t kColumnsPerLane = 2;
  /// Rows between a thread's two row halves.
  static constexpr int64_t kRowHalfDistance = 8;
  /// Columns between consecutive groups of four elements of a thread.
  static constexpr int64_t kColumnGroupWidth = 8;
  /// The lane offsets (shuffle-xor) that combine a row across its quad.
  static constexpr int32_t kQuadXorOffsets[2] = {1, 2};
  /// The lane offsets (shuffle-xor) that combine a column across the warp's
  /// eight quads (lanes with equal l % 4).
  static constexpr int32_t kColumnXorOffsets[3] = {4, 8, 16};

  /// Elements per thread of a 64 x `columns` tile.
  static constexpr int64_t elementsPerThread(int64_t columns) {
    return columns / 2;
  }
  /// Columns of the tile whose fragments have `elements` per thread.
  static constexpr int64_t columnsOf(int64_t elements) { return 2 * elements; }

  /// The row half (0 or 1) element `i` belongs to.
  static constexpr int64_t rowHalf(int64_t i) { return (i % 4) / 2; }
  /// The row of element `i` below the thread's first row: 0 or 8.
  static constexpr int64_t rowOffset(int64_t i) {
    return kRowHalfDistance * rowHalf(i);
  }
  /// The column of element `i` right of the thread's first column.
  static constexpr int64_t columnOffset(int64_t i) {
    return kColumnGroupWidth * (i / 4) + i % 2;
  }
  /// The position of element `i` among the elements of its row half, in
  /// column order: 2 (i / 4) + i % 2 (columnOffset = 8 (p / 2) + p % 2).
  static constexpr int64_t positionInRowHalf(int64_t i) {
    return 2 * (i / 4) + i % 2;
  }
  /// The element at position `p` of row half `half` (positionInRowHalf's
  /// and rowHalf's inverse).
  static constexpr int64_t elementAt(int64_t half, int64_t p) {
    return 4 * (p / 2) + 2 * half + p % 2;
  }
  /// How many elements of a row half lie left of column offset `u` (0 <= u):
  /// those at positions below 2 (u / 8) + min(u % 8, 2).
  static constexpr int64_t positionsLeftOf(int64_t u) {
    return kColumnsPerLane * (u / kColumnGroupWidth) +
           (u % kColumnGroupWidth < kColumnsPerLane ? u % kColumnGroupWidth
                                                    : kColumnsPerLane);
  }
  /// The thread's first row: 16 w + l / 4.
  static constexpr int64_t threadRow(int64_t warp, int64_t lane) {
    return kRowsPerWarp * warp + lane / kLanesPerRow;
  }
  /// The thread's first column: 2 (l % 4).
  static constexpr int64_t threadColumn(int64_t lane) {
    return kColumnsPerLane * (lane % kLanesPerRow);
  }

  /// Fragment order: a 64 x N f32 tile stored as its fragments, in vectors
  /// of four elements, thread after thread: element i of thread t is at
  ///
  ///   (i / 4) * 4 * kThreads + 4 t + i % 4
  ///
  /// so each thread moves its elements with 16-byte loads and stores that
  /// are contiguous across the warp (no shared-memory bank conflicts,
  /// coalesced in global memory), and a whole tile is one flat range of
  /// 64 N floats (one bulk copy or reduction). The backward's fp32 dQ
  /// accumulator holds each 64-row block in this order (docs/backward.md).
  static constexpr int64_t kFragmentOrderVector = 4;
  /// The offset of element `i` from the thread's first element (at 4 t).
  static constexpr int64_t fragmentOrderOffset(int64_t i) {
    return (i / kFragmentOrderVector) * kFragmentOrderVector * kThreads +
           i % kFragmentOrderVector;
  }
};

/// Checks that `type` is the per-thread fragment of a 64 x N accumulator
/// tile: a 1-D vector of f32 (or, with `allowHalf`, bf16/f16) whose element
/// count is a positive multiple of 4 (N a multiple of 8, as wgmma's N).
/// Reports through `emitError`, naming the operand `name`.
mlir::LogicalResult
verifyAccumulatorFragment(mlir::Type type,
                          llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                          llvm::StringRef name, bool allowHalf = false);

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_IR_ACCUMULATORLAYOUT_H
