//===- KernelParts.h - building blocks of attention kernels -----*- C++ -*-===//
//
// The steps every warp-specialised attention kernel is made of, as builder
// functions over kvpipe ops, so that a backward or decode generator composes
// them instead of copying the forward one (docs/architecture.md):
//
//   memory     AlignedSharedMemory: the dynamic shared memory from its first
//              swizzle-atom aligned byte, and typed views of it
//   rings      buildTileView, buildSlotWait: a slot of a shared-memory tile
//              ring, once the pipeline says it is full
//   GEMM step  buildSlotWait -> kvpipe.warpgroup_mma -> buildRetireAndRelease
//              (a slot is released only after the wgmma reading it retired)
//   mask       buildBlockMask: keys past the sequence and, when causal,
//              after the query, on the blocks that need it
//   softmax    buildOnlineSoftmaxStep: one block of the online softmax on a
//              wgmma accumulator fragment, from the fragment ops
//   epilogue   buildNormalizedOutput (O / l, narrowed), buildStagedStore
//              (through shared memory to a TMA store), buildLogSumExpStore
//
// The forward generator (AttentionConsumer.cpp) is built from these. Each
// builds one tile's work (one tile per CTA); the persistent loop over tiles
// is a rewrite of the kernel (KernelTransforms.h: applyPersistentTiles),
// which also moves the staged store's wait.
//   global     buildColumnVector: per-column values of a fragment from fp32
//              in global memory; buildFragmentOrderStore/Load and
//              buildBulkReduceAddF32: fragments moved as flat tiles and
//              added into fp32 global memory (the backward's dQ)
//
// The forward generator (AttentionConsumer.cpp) and the backward one
// (AttentionBackwardBuilder.cpp) are built from these.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_TRANSFORMS_KERNELPARTS_H
#define KVPIPE_DIALECT_KVPIPE_TRANSFORMS_KERNELPARTS_H

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpDefinition.h"

#include "llvm/ADT/SmallVector.h"

namespace kvpipe {

/// The kernel's dynamic shared memory from its first `alignment`-byte
/// aligned address (TMA and wgmma want tiles on a swizzle atom; the launch
/// asks for `alignment` bytes of slack).
struct AlignedSharedMemory {
  mlir::Value bytes, pad;
  /// A view of type `type` at byte `offset` from the aligned start.
  mlir::Value view(mlir::ImplicitLocOpBuilder &b, int64_t offset,
                   mlir::MemRefType type) const;
  /// ... at a byte offset computed at run time (index).
  mlir::Value view(mlir::ImplicitLocOpBuilder &b, mlir::Value offset,
                   mlir::MemRefType type) const;
};
AlignedSharedMemory buildAlignedSharedMemory(mlir::ImplicitLocOpBuilder &b,
                                             int64_t alignment);

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

/// `s` with the elements for which `buildValid` (an i1 vector of `s`'s
/// shape, built inside the branch) is false set to -inf, on the blocks where
/// `needed` holds; a uniform branch skips the mask elsewhere. The masks of
/// the forward (rows queries) and the backward (S^T: rows keys) both.
mlir::Value buildMaskedScores(mlir::ImplicitLocOpBuilder &b, mlir::Value s,
                              mlir::Value needed,
                              llvm::function_ref<mlir::Value()> buildValid);

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
/// FMA per element, row sums per thread. `emulatedExp2`: of every 8
/// elements of P, how many exp2s run on the FMA pipe (fragment_exp2's
/// `emulated`). `rescaleThreshold` (AttentionConfig): with t > 0 a row's
/// maximum moves only when the block's passes it by more than t in the
/// exponent (P <= 2^t); 0 and -1 on every increase. The factor of a row
/// whose maximum did not move is exp2(0) = 1 exactly (what fragment_rescale's
/// skip_unit tests). Without `rowSums` the step leaves l as it was (the
/// forward's tensor_row_sums sums P in O's accumulator).
///
/// With `rowShift0`/`rowShift1` (f32, one per row half, null: 0), the
/// scores are `s` plus the row half's shift: the maxima and the statistics
/// are the shifted scores', and P is still one FMA per element of `s` (the
/// shift goes into the subtracted maximum). A separable bias (ALiBi off the
/// diagonal) puts its key term into `s` and its block's row term here.
///
/// With `staticMax` the stats' maxima are a constant bound of the scores
/// (the score_mod's, getScoreModBounds), not running maxima: they stay,
/// alpha is 1 and no row maximum is taken (no shifts then).
OnlineSoftmaxStep buildOnlineSoftmaxStep(mlir::ImplicitLocOpBuilder &b,
                                         mlir::Value s, mlir::Value scaleLog2,
                                         const OnlineSoftmaxStats &stats,
                                         mlir::Type pElementType,
                                         int64_t emulatedExp2 = 0,
                                         int64_t rescaleThreshold = 0,
                                         bool rowSums = true,
                                         mlir::Value rowShift0 = {},
                                         mlir::Value rowShift1 = {},
                                         bool staticMax = false);

/// The built-in masks' bounds (the causal diagonal and the sliding window,
/// anchored top-left or bottom-right), one predicate for both directions:
/// query m keeps key n when n < seq_kv, m < seq_q and
/// firstKeyOf(m) <= n <= lastKeyOf(m), equivalently
/// firstQueryOf(n) <= m <= lastQueryOf(n). The forward skips the K/V blocks
/// outside a Q block's keys and masks rows by the keys; the backward skips
/// the Q blocks outside a K/V block's queries and masks its S^T rows (keys)
/// by the queries.
struct MaskBounds {
  /// Query m is aligned with key m + d (the right edge when causal).
  bool causal;
  /// d (null: 0, top-left).
  mlir::Value diagonal;
  /// The window's bounds (null without a window; negative: unbounded on
  /// that side; with `causal` the right bound is the diagonal).
  mlir::Value windowLeft, windowRight;
  mlir::Value seqQ, seqKV;

  /// The last key query `row` keeps (in [-1, seq_kv - 1]); needs `causal`
  /// or a window.
  mlir::Value lastKeyOf(mlir::ImplicitLocOpBuilder &b, mlir::Value row) const;
  /// The first key query `row` keeps (in [0, seq_kv]); needs a window.
  mlir::Value firstKeyOf(mlir::ImplicitLocOpBuilder &b, mlir::Value row) const;
  /// The first query that keeps `key` (in [0, seq_q]); needs `causal` or a
  /// window.
  mlir::Value firstQueryOf(mlir::ImplicitLocOpBuilder &b,
                           mlir::Value key) const;
  /// The last query that keeps `key` (in [-1, seq_q - 1]); needs a window.
  mlir::Value lastQueryOf(mlir::ImplicitLocOpBuilder &b, mlir::Value key) const;
};

/// The keys a block of scores may see, for the thread's two rows.
struct BlockMask {
  /// Keys per block (the score fragment holds 64 x blockN).
  int64_t blockN;
  /// The number of keys: keys at or past it are masked (-inf).
  mlir::Value seqKV;
  /// Keys after the query are masked too (top-left aligned: query row r
  /// sees keys 0..r).
  bool causal;
  /// The first query row of the warpgroup's 64 (the uniform test of whether
  /// a block needs masking), and the thread's two rows.
  mlir::Value firstRow, row0, row1;
  /// The thread's lane (its columns: 2 * (lane % 4) + 8 i + {0, 1}).
  mlir::Value lane;
  /// With other masks than top-left causal (null otherwise): the last key
  /// the warpgroup's first row sees and the first key its last row sees
  /// (the uniform test), and the last and first keys of the thread's rows.
  mlir::Value firstRowLastKey, lastRowFirstKey;
  mlir::Value lastKey0, lastKey1, firstKey0, firstKey1;
  /// The kept keys as bit masks of a row half's 32 elements (a few integer
  /// ops a row half, then one bit test and select an element: FA4's R2P
  /// form) instead of comparing each element's key with the bounds.
  bool bits = false;
};

/// `s` (the scores of K/V block `kvBlock`) with the keys `mask` hides set to
/// -inf. Only a block that crosses seq_kv or a bound of one of the
/// warpgroup's rows (the diagonal when causal, a window's edges) needs
/// masking: a branch uniform across the warpgroup skips the others.
mlir::Value buildBlockMask(mlir::ImplicitLocOpBuilder &b, mlir::Value s,
                           mlir::Value kvBlock, const BlockMask &mask);

/// The normalised output of a tile and its row sums.
struct NormalizedOutput {
  /// O / l in the output element type.
  mlir::Value o;
  /// The whole rows' sums l (across the quad), for the log-sum-exp.
  mlir::Value sum0, sum1;
};

/// gpt-oss's attention sinks in a tile's epilogue: one more key per row, of
/// value zero, whose logit in the base-2 units of the log-sum-exp is
/// `logit0` / `logit1` (the row's head's sink times log2 e); `scaleLog2` is
/// the online softmax's c (P = exp2(S c - m c)).
struct SoftmaxSinks {
  mlir::Value scaleLog2;
  mlir::Value logit0, logit1;
};

/// O / l from the accumulator `acc` and the thread's partial row sums
/// (`stats.l0`, `stats.l1`, combined across the row's quad first), narrowed
/// to `elementType`. A row without any key (l = 0) is all zeros, not NaN.
/// With `sinks`, O / (l + exp2(sink - m c)): the sink's share of the row's
/// softmax in the units of l (an overflow is the sink taking all of it).
/// The sums returned are the keys' alone.
NormalizedOutput buildNormalizedOutput(mlir::ImplicitLocOpBuilder &b,
                                       mlir::Value acc,
                                       const OnlineSoftmaxStats &stats,
                                       mlir::Type elementType,
                                       const SoftmaxSinks *sinks = nullptr);

/// A warpgroup's output tile stored with TMA through shared memory.
struct StagedStore {
  /// The warpgroup's [D/64][rows][64] staging rows (swizzled tiles).
  mlir::Value rows;
  /// The i32 id of a named barrier of the warpgroup's 128 threads.
  mlir::Value barrierId;
  /// The one thread that issues (and waits for) the store.
  mlir::Value elected;
  /// The output's tensor map and the coordinates of the tile's first
  /// column, outermost first, but for the innermost (the column, added per
  /// 64-wide block).
  mlir::Value tensorMap;
  llvm::SmallVector<mlir::Value> coordinates;
  /// The rows' (and the tensor map's) swizzle, in bytes.
  int64_t swizzle = 128;
  /// With pack_gqa: the G of the 5-D (B, H_kv, S, G, D) map; the first
  /// (64 / G) * G rows are stored as a (64 / G, G) box (`coordinates` then
  /// end with the G coordinate, 0). 0: a 4-D map.
  int64_t packedGroup = 0;
};

/// Writes the fragment `o` into `store.rows` (kvpipe.store_fragment), makes
/// the writes visible to the async proxy and complete in all 128 threads,
/// then `store.elected` issues one TMA store per column block (TMA clips
/// rows out of bounds), commits them, and waits until they read shared
/// memory: one tile per CTA, the CTA's shared memory must outlive the
/// store. (The persistent rewrite moves that wait to before the next
/// tile's first write of the rows, and to the end of the CTA.)
void buildStagedStore(mlir::ImplicitLocOpBuilder &b, mlir::Value o,
                      const StagedStore &store);

/// A warpgroup's output tile stored through shared memory with 16-byte
/// global stores, only for the rows below a count: the epilogue of packed
/// sequences (`varlen`), where a TMA store of the tile would write into the
/// next sequence's rows.
struct PredicatedStore {
  /// The warpgroup's [D/W][64][W] staging rows (swizzled tiles).
  mlir::Value rows;
  /// The i32 id of a named barrier of the warpgroup's 128 threads.
  mlir::Value barrierId;
  /// The thread's index in the warpgroup (0..127).
  mlir::Value thread;
  /// The output in global memory (`!llvm.ptr<1>`), the element offset of
  /// the tile's first row (i64) and the elements between rows (i64).
  mlir::Value output, firstRowOffset, rowStride;
  /// Rows of the tile at or past it are not written (index, signed: may be
  /// negative or above 64).
  mlir::Value rowCount;
  /// The rows' swizzle, in bytes.
  int64_t swizzle = 128;
};

/// Writes the fragment `o` into `store.rows` (kvpipe.store_fragment), waits
/// for the warpgroup's 128 threads, then each thread copies 16-byte chunks
/// of the rows (consecutive threads, consecutive chunks of a row, undoing
/// the swizzle) to the output, each store predicated on its row being below
/// `store.rowCount`.
void buildPredicatedStore(mlir::ImplicitLocOpBuilder &b, mlir::Value o,
                          const PredicatedStore &store);
/// Its second half, for rows already staged and visible to every thread of
/// the warpgroup: the 16-byte copies of `store.rows` (any [blocks][rows][W]
/// view: the backward's dK / dV tiles) below `store.rowCount`.
void buildPredicatedCopy(mlir::ImplicitLocOpBuilder &b,
                         const PredicatedStore &store);

/// Sequence `sequence`'s rows [start, start + count) of a batch packed
/// without padding (`varlen`), from the i32 prefix offsets at `offsets`
/// (`!llvm.ptr<1>`, one load of each bound, the same address in every
/// thread). Clamped so that no offsets, however wrong, send an access
/// outside the packed rows: 0 <= start <= start + count <= total (without
/// `total`, only start >= 0 and count >= 0).
struct SequenceRows {
  mlir::Value start, count;
};
SequenceRows loadSequenceRows(mlir::ImplicitLocOpBuilder &b,
                              mlir::Value offsets, mlir::Value sequence,
                              mlir::Value total);

/// Writes `lse[(batch * heads + head) * seqQ + row]` = ln 2 (m c + log2 l)
/// (natural log of the row's sum of exp(S scale)) for the thread's two
/// rows below seqQ, from lane 0 of each quad; nothing when `lse` is null.
/// `max*` are the rows' running maxima, `sum*` their whole sums. With
/// `infiniteWithoutKeys`, a row that saw no key (sum 0) gets +inf, so that
/// exp(s - lse) is 0 rather than NaN.
struct LogSumExpStore {
  mlir::Value lse, scaleLog2;
  mlir::Value max0, max1, sum0, sum1;
  mlir::Value row0, row1, lane;
  mlir::Value batch, heads, head, seqQ;
  bool infiniteWithoutKeys = false;
  /// With pack_gqa: the query head of row 1 (`head` is row 0's) and
  /// whether each row is used (i1); null: one head, all rows used.
  mlir::Value head1, used0, used1;
  /// Packed sequences (`varlen`): `rowStart` is added to the row's index
  /// and only rows below `rowCount` are written (null: 0 and seqQ).
  mlir::Value rowStart = nullptr, rowCount = nullptr;
  /// With sinks: the log-sum-exp of the keys and the sink, log(exp(lse) +
  /// exp(sink)), from the larger of the two (neither overflows); a row
  /// without keys gets the sink (+inf only where the sink is -inf too).
  const SoftmaxSinks *sinks = nullptr;
};
void buildLogSumExpStore(mlir::ImplicitLocOpBuilder &b,
                         const LogSumExpStore &store);
/// The fragment (`numElements` f32 per thread, accumulator layout) whose
/// element i holds `values[firstColumn + columnOffset(i)]`, `values` an fp32
/// array in global memory (`!llvm.ptr<1>`) and `firstColumn` (index) the
/// thread's first column in it: per-column values of a 64 x N tile, as the
/// backward's log-sum-exp and delta of the queries its S^T columns are. One
/// 8-byte load per pair of columns the thread holds (its two row halves
/// share them).
mlir::Value buildColumnVector(mlir::ImplicitLocOpBuilder &b,
                              mlir::Value values, mlir::Value firstColumn,
                              int64_t numElements);
/// The same fragment from `row`, a 1-D fp32 memref (the backward's
/// statistics slot in shared memory, 8-byte aligned): `ld.shared.v2`s.
mlir::Value buildSharedColumnVector(mlir::ImplicitLocOpBuilder &b,
                                    mlir::Value row, mlir::Value firstColumn,
                                    int64_t numElements);
/// Prefetches into L1 the lines of `values` that buildColumnVector with the
/// same arguments loads: issued well before the load, it takes the
/// global-memory latency off the load without holding registers meanwhile.
void buildColumnPrefetch(mlir::ImplicitLocOpBuilder &b, mlir::Value values,
                         mlir::Value firstColumn, int64_t numElements);

/// A [rows][W] tile seen as [rows / group][group][W] (rows s * group + g),
/// the shared-memory side of a packed (pack_gqa) TMA box.
mlir::Value buildPackedTileView(mlir::ImplicitLocOpBuilder &b, mlir::Value rows,
                                int64_t group);

/// Stores the f32 fragment `fragment` (accumulator layout, 64 x N) to global
/// memory at `base` (`!llvm.ptr<1>` to fp32): the thread's row half h goes
/// to the N elements from `rowOffset[h]` (i64, in elements) on, column
/// `threadColumn + columnOffset(i)`, when `valid[h]` (i1). Two adjacent
/// columns per 8-byte store.
void buildFragmentGlobalStore(mlir::ImplicitLocOpBuilder &b,
                              mlir::Value fragment, mlir::Value base,
                              mlir::Value rowOffset[2], mlir::Value valid[2],
                              mlir::Value threadColumn);

/// Stores the f32 fragment `fragment` (accumulator layout, a multiple of 4
/// elements) into `tile`, a 1-D f32 memref in shared memory, in fragment
/// order (AccumulatorLayout.h): its element i is element `firstElement + i`
/// of the tile's fragments (`firstElement` a multiple of 4, to store a
/// 64 x D tile in pieces of 64 columns), `thread` the thread's index in its
/// warpgroup (index). One 16-byte store per four elements.
void buildFragmentOrderStore(mlir::ImplicitLocOpBuilder &b,
                             mlir::Value fragment, mlir::Value tile,
                             mlir::Value thread, int64_t firstElement);

/// Loads the thread's `numElements` f32 elements (a multiple of 4) of a
/// fragment-ordered tile at `base` (`!llvm.ptr<1>` to fp32) as a fragment.
mlir::Value buildFragmentOrderLoad(mlir::ImplicitLocOpBuilder &b,
                                   mlir::Value base, mlir::Value thread,
                                   int64_t numElements);

/// One PTX statement with side effects and no results, as inline assembly
/// (`constraints` in LLVM's syntax, `~{memory}` where it touches memory):
/// for the instructions NVVM (MLIR 22) has no op for.
void buildPtxStatement(mlir::ImplicitLocOpBuilder &b, llvm::StringRef ptx,
                       llvm::StringRef constraints, mlir::ValueRange operands);

/// Adds the f32 values of `tile` (a shared-memory memref with the identity
/// layout, `bytes` of it, a multiple of 16) element-wise into global memory
/// at `global` (`!llvm.ptr<1>`, 16-byte aligned), as one asynchronous bulk
/// reduction (`cp.reduce.async.bulk ... .add.f32`) in the calling thread's
/// current bulk group: the caller commits the group and waits for it
/// (`.read` before `tile` is written again). Reductions of several CTAs
/// into the same range need no order.
void buildBulkReduceAddF32(mlir::ImplicitLocOpBuilder &b, mlir::Value global,
                           mlir::Value tile, int64_t bytes);

/// Adds the f32 fragment `fragment` (accumulator layout, a multiple of 4
/// elements) element-wise into a fragment-ordered tile in global memory at
/// `base` (`!llvm.ptr<1>` to fp32, 16-byte aligned), `thread` the thread's
/// index in its warpgroup: one `red.global.add.v4.f32` per four elements,
/// straight from registers (FA3's dQ at head dim 256), contiguous across
/// the warp. Relaxed reductions: their order among CTAs is not defined.
void buildFragmentOrderReduceAdd(mlir::ImplicitLocOpBuilder &b,
                                 mlir::Value fragment, mlir::Value base,
                                 mlir::Value thread);

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_TRANSFORMS_KERNELPARTS_H
