//===- KernelBuilder.h - the attention kernel generator ---------*- C++ -*-===//
//
// The state of generating one attention kernel (AttentionKernelBuilder.cpp:
// the kernel's skeleton, shared memory, producer and tile walk;
// AttentionConsumer.cpp: the consumer warpgroups' loops, softmax, ping-pong
// schedule and epilogue). Private to the Transforms library.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_KERNELBUILDER_H
#define KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_KERNELBUILDER_H

#include "Modifiers.h"

#include "kvpipe/Dialect/KVPipe/Transforms/AttentionGenerator.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelParts.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace kvpipe::detail {

using namespace mlir;

/// Constants and casts, for the kernel generators (forward: KernelBuilder;
/// backward: AttentionBackwardBuilder.cpp).
class ScalarBuilder {
protected:
  explicit ScalarBuilder(ImplicitLocOpBuilder &b) : b(b) {}

  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value i32(int64_t v) { return arith::ConstantIntOp::create(b, v, 32); }
  Value f32(double v) {
    return arith::ConstantFloatOp::create(b, b.getF32Type(),
                                          APFloat(static_cast<float>(v)));
  }
  Value toIndex(Value v) {
    return arith::IndexCastOp::create(b, b.getIndexType(), v);
  }
  Value toI32(Value v) {
    return arith::IndexCastOp::create(b, b.getI32Type(), v);
  }

  ImplicitLocOpBuilder &b;
};

/// The ABI entries of a split-KV or pack-GQA kernel (AttentionDecode.cpp):
/// its Q and O maps' boxes, `queries_per_tile`, and the family it belongs to.
void appendDecodeABI(Builder &b, StringRef name, const AttentionConfig &c,
                     SmallVectorImpl<NamedAttribute> &entries);

/// The score_mod's bias where the forward splits it off the diagonal
/// (`separable_bias`; Modifiers.h: SeparableBias): an additive score_mod of
/// one (batch, head) per tile (not pack_gqa's). The tunings that build on
/// it (`separable_bias_mma`, `bias_origin_first`) change nothing without it.
std::optional<SeparableBias>
getForwardSeparableBias(const AttentionConfig &c);

class KernelBuilder : ScalarBuilder {
public:
  KernelBuilder(ImplicitLocOpBuilder &b, const AttentionConfig &config)
      : ScalarBuilder(b), c(config), ctx(b.getContext()) {}

  gpu::GPUFuncOp build(StringRef name);

private:
  // Types.
  /// The map of a tensor whose boxes are `rows` rows of one column block
  /// of a tile swizzled by `swizzleBytes` (AttentionConfig::swizzleBytesFor).
  TensorMapType tensorMapType(int64_t rows, int64_t swizzleBytes) const {
    return TensorMapType::get(
        ctx, {1, 1, rows, swizzleBytes / c.elementBytes()}, c.elementType,
        swizzleBytes);
  }
  /// The 5-D (B, H_kv, S, G, D) map of a packed Q or O (pack_gqa): its box
  /// is a warpgroup's packedQueries() positions of all G heads.
  TensorMapType packedMapType(int64_t swizzleBytes) const {
    return TensorMapType::get(ctx,
                              {1, 1, c.packedQueries(), c.packGQA,
                               swizzleBytes / c.elementBytes()},
                              c.elementType, swizzleBytes);
  }
  Attribute workgroup() const {
    return gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  }
  MemRefType sharedType(ArrayRef<int64_t> shape) const {
    return MemRefType::get(shape, c.elementType, MemRefLayoutAttrInterface(),
                           workgroup());
  }
  PipelineType pipelineType(int64_t kvStages) const {
    return PipelineType::get(ctx, kvStages, /*qk_stages=*/1, /*producers=*/1,
                             /*consumers=*/c.consumerWarpgroups);
  }

  /// A rank-reduced view of one slot (and column block) of a tile ring.
  Value slot(Value ring, ArrayRef<OpFoldResult> offsets,
             ArrayRef<int64_t> sizes);

  /// Sets the tile's values (qBlockRow, head, batch, kvHead, and the K/V
  /// blocks the masks leave: numKVBlocks of them from firstKVBlock).
  void setTile(Value qBlock, Value headIndex, Value batchIndex);
  /// With split_kv: narrows the tile's K/V blocks (firstKVBlock,
  /// numKVBlocks) to those of split `splitIndex` (AttentionDecode.cpp).
  void splitKVBlocks();
  /// With pack_gqa: the thread's rows' query positions (row0, row1), query
  /// heads and whether they are used (AttentionDecode.cpp).
  void setPackedRows();
  /// With lpt_tiles: the grid coordinates (x, y, z) of the tile that the
  /// grid's linear position x + X (y + Y z) takes in LPT order.
  std::tuple<Value, Value, Value> lptTile(Value x, Value y, Value z,
                                          Value tilesX, Value tilesY,
                                          Value batches);
  /// The kvpipe.tile op whose region is setTile on the tile's coordinates;
  /// sets the tile's values to its results.
  void buildTile();
  /// Builds `body`, the work of one tile, in a kvpipe.for_each_tile carrying
  /// `states` from tile to tile; returns the states after the last tile.
  SmallVector<Value>
  forEachTile(ValueRange states,
              function_ref<SmallVector<Value>(ValueRange)> body);
  void buildProducer();
  /// One tile's Q and K/V loads; returns the advanced (q, k, v) states.
  SmallVector<Value> buildProducerTile(Value stateQ, Value stateK,
                                       Value stateV);
  /// With a paged cache: the (page, row in page) coordinates of the boxes
  /// filling a slot with the keys from logical row `kvRow` on.
  SmallVector<std::pair<Value, Value>> pagedBoxes(Value kvRow);
  void buildConsumer();
  /// Rows x width elements of a shared-memory tile written by the whole
  /// CTA, 8 at a time: `storeChunk(row, first column)`.
  void fillRowsByCTA(int64_t rows, int64_t width,
                     function_ref<void(Value row, Value column)> storeChunk);
  /// The ones blocks of the V slots (`tensor_row_sums`), written by the
  /// whole CTA before the pipelines are created.
  void fillOnesBlocks();
  /// The key offsets tile of `separable_bias_mma` (row n holds n in each
  /// of its 16 columns), written by the whole CTA before the pipelines are
  /// created, as the ones blocks are.
  void fillKeyOffsets();
  /// A fence for the async proxy after those writes (the wgmmas read
  /// them through it; the CTA barrier after the mbarriers' initialisation
  /// orders them before every consumer).
  void fenceSharedWrites();
  /// One tile's attention and epilogue; returns the advanced states.
  SmallVector<Value> buildConsumerTile(Value stateQ, Value stateK,
                                       Value stateV);

  /// Running statistics of the thread's two rows: max and (partial) sum.
  struct RowStats {
    Value m0, m1, l0, l1;
  };
  /// One block's online-softmax update: the new statistics, the factors
  /// rescaling what was accumulated under the old maxima, and P.
  struct Softmax {
    RowStats stats;
    Value alpha0, alpha1;
    Value p16;
  };
  /// The i32 id of consumer warpgroup `consumer`'s named barrier among those
  /// from `first` on (AttentionConfig::k*Barriers).
  Value namedBarrier(int64_t first, Value consumer);
  /// This consumer warpgroup's 64 rows (from qRows) of the first `blocks`
  /// column blocks of a [blocks][rows][W] tile (its Q rows, its output
  /// staging rows).
  Value warpgroupRows(Value tile, int64_t blocks);
  /// Waits until `state`'s slot of `ring` is full; returns the slot's
  /// [blocks][block_n][W] tiles.
  Value waitForSlot(Value ring, Value state);
  /// Issues S = Q K^T (not retired) of the K tile `kTile` (waitForSlot's),
  /// from `init` (null: zero).
  Value issueQK(Value kTile, Value init = Value());
  /// Waits for V's slot and issues O += P V (not retired).
  Value issuePV(Value p16, Value stateV, Value o);
  /// Retires wgmma groups until `pending` are left, so that `fragment`
  /// (updated in place) is complete and the slot of `state` it read may be
  /// released; releases it and returns the advanced state.
  Value retireAndRelease(Value &fragment, int64_t pending, Value state);
  Value rescale(Value o, Value alpha0, Value alpha1);
  /// The K/V block of iteration `j` of a K/V loop (loops run from 0 to
  /// numKVBlocks, so that every loop's trip count is the same value): from
  /// firstKVBlock up, or with kvTurn (`bias_origin_first`) iterations 0 to
  /// kvTurn from firstKVBlock + kvTurn down to firstKVBlock, the rest up
  /// from firstKVBlock + kvTurn + 1.
  Value kvBlockAt(Value j) {
    Value offset = j;
    if (kvTurn) {
      Value down =
          arith::CmpIOp::create(b, arith::CmpIPredicate::ule, j, kvTurn);
      offset = arith::SelectOp::create(
          b, down, arith::SubIOp::create(b, kvTurn, j), j);
    }
    return firstKVBlock ? arith::AddIOp::create(b, firstKVBlock, offset)
                        : offset;
  }
  /// `bias_origin_first`: sets kvTurn to the offset from firstKVBlock of
  /// the block holding the separable bias's origin for the tile's last row,
  /// clamped to the tile's blocks. Nothing without a separable bias.
  void startAtBiasOrigin();
  /// The last key row `row` sees (row + d + right, clamped to
  /// [-1, seq_kv]), with masksRight().
  Value lastKeyOf(Value row);
  /// The first key row `row` sees (row + d - left, clamped to
  /// [0, seq_kv]), with masksLeft().
  Value firstKeyOf(Value row);
  /// The tile's built-in mask bounds (KernelParts.h), which the backward
  /// shares.
  MaskBounds maskBounds() const {
    return {c.causal, diagonal, windowLeft, windowRight, seqQ, seqKV};
  }
  /// An additive score_mod's bias of one K/V block as S's initial
  /// accumulator (`bias_accumulator`, scoreBias): the fragment (raw domain,
  /// as modifiedScores adds it) and, with a separable bias, the row halves'
  /// shifts.
  struct ScoreBias {
    Value init, rowShift0, rowShift1;
    /// With `separable_bias_mma`: the block's sign tests (i1, uniform), which
    /// chose the k-step's factor; `init` then holds the key term only where
    /// `oneSign`, and the separable path still applies.
    Value oneSign, below;
  };
  Value mask(Value s, Value kvBlock);
  /// The modifier regions (Modifiers.h) on block `kvBlock`'s scores `s`:
  /// the score_mod on the scaled scores (then the softmax's scale is
  /// softmaxScaleLog2(), returned in `scaleLog2`) and the built-in masks, then the
  /// mask_mod on the blocks the mask's shape does not prove fully kept.
  /// With a separable bias (separableBias()), the scores are returned
  /// with their key term only and `rowShift0`/`rowShift1` are the row
  /// halves' terms (buildOnlineSoftmaxStep's shifts).
  Value modifiedScores(Value s, Value kvBlock, Value &scaleLog2,
                       Value &rowShift0, Value &rowShift1,
                       const ScoreBias &bias);
  /// The indices of block `kvRow`'s (its first key) fragment for the
  /// regions: the thread's rows and first column.
  ModifierIndices modifierIndices(Value kvRow);
  /// getForwardSeparableBias of this kernel.
  std::optional<SeparableBias> separableBias() {
    return getForwardSeparableBias(c);
  }
  /// With `prescaled_q`, where the score_mod takes each score times the
  /// scale (not an additive region, which a separable bias is too): Q's
  /// rows are multiplied by it once per tile (scaleQueryRows) and the
  /// scores reach the region without a multiplication.
  bool prescalesQuery();
  /// The attention scale in natural units (the `scale_log2` parameter over
  /// log2(e)): what a score_mod's scores are multiplied by.
  Value attentionScale();
  /// The factor prescalesQuery's Q rows are multiplied by: the scale times
  /// the region's folded input factor (buildScoreModInputScale).
  Value queryScale();
  /// This warpgroup's Q rows (sQw) times `scale`, in place, rounded to Q's
  /// element type, then a fence for the async proxy (the wgmmas read them
  /// through it) and the warpgroup's barrier: before its first QK wgmma.
  void scaleQueryRows(Value scale);
  /// The separable bias's terms on this warpgroup's tile, computed once
  /// before its K/V loop (the region's reads, such as ALiBi's slope, out of
  /// the loop): the factor F, d at (first row, first row) (i32), and per
  /// row half the row term R = -F d(row, first row), which the softmax's
  /// statistics include (the log-sum-exp subtracts it).
  /// With `separable_bias_mma`, also the A fragments of the key term's
  /// k-step for G = +F beta and -F beta (keyTermFactors).
  struct SeparableTile {
    SeparableBias bias;
    /// F, d(firstRow, firstRow), the row terms R of the thread's two rows,
    /// and the key term's factor G = F beta (its sign per block).
    Value factor, origin, rowTerm0, rowTerm1, keyFactor;
    Value keyTermA, keyTermANegated;
  };
  SeparableTile buildSeparableTile(const SeparableBias &bias);
  /// Whether d keeps one sign over the warpgroup's rows and block `kvRow`'s
  /// keys, and whether that sign is + (d >= 0): (oneSign, below).
  std::pair<Value, Value> separableSigns(Value kvRow);
  /// The A fragment (64 x 16, Q's element type) whose product with the key
  /// offsets tile is G n in every row: G's three parts (round to nearest,
  /// then the remainders) in columns 0-2, zeros elsewhere.
  Value keyTermFactors(Value g);
  /// The scores of block `kvBlock` with the tile's separable bias: (scores,
  /// row shift 0, row shift 1). `bias` (separable_bias_mma) carries the
  /// block's signs, and the key term is in `s` already where one holds.
  std::tuple<Value, Value, Value> separableScores(Value s, Value kvRow,
                                                  const ModifierIndices &at,
                                                  const ScoreBias &bias = {});
  /// The scale of exp2 in the softmax and the log-sum-exp: scale * log2(e),
  /// or log2(e) when a score_mod already scaled the scores, times the
  /// region's output factor when it is folded (ScoreModScaling).
  Value softmaxScaleLog2();
  /// The constant row maximum of `static_row_max`, where the score_mod's
  /// result is bounded (getScoreModBounds) within a range P's element type
  /// holds: the bound minus what keeps P at most 2^60 and the smallest
  /// score's P at least 2^-100 of it (bf16; f16: 2^15 and 2^-14).
  std::optional<double> staticRowMax();
  /// Narrows [firstKey, kvEnd) (firstKey null: 0) to the keys the
  /// mask_mod's shape leaves to some row of the tile.
  void narrowToMaskMod(Value &firstKey, Value &kvEnd);
  /// The bias of block `kvBlock` with `bias_accumulator` and an additive
  /// score_mod; empty otherwise.
  ScoreBias scoreBias(Value kvBlock);
  Softmax softmax(Value s, Value kvBlock, const RowStats &stats,
                  const ScoreBias &bias);
  /// The K/V loop from the states `k` and `v`, in the skeleton's order;
  /// returns (k state, v state, O, m0, m1, l0, l1).
  SmallVector<Value> buildKVLoop(Value k, Value v, Value o, RowStats stats);
  /// skip_idle_warpgroups: buildKVLoop where this warpgroup has rows in the
  /// tile, else a loop that only waits for and releases the K/V slots (the
  /// same results, O and the statistics as given).
  SmallVector<Value> buildKVLoopUnlessIdle(Value k, Value v, Value o,
                                           RowStats stats);
  void buildEpilogue(Value acc, const RowStats &stats);
  /// With `sinks` (not split: the combine kernel has them): the sinks of
  /// the heads of the thread's two rows, for buildNormalizedOutput and
  /// buildLogSumExpStore; none otherwise.
  std::optional<SoftmaxSinks> loadRowSinks();
  /// With split_kv: the epilogue writes the normalised fp32 partial output
  /// and the log-sum-exp to the workspace (AttentionDecode.cpp).
  void buildPartialEpilogue(Value acc, const RowStats &stats);
  /// With `varlen`: reads the tile's sequence from cu_seqlens (its first
  /// query and key rows in the packed tensors, and its lengths as seqQ and
  /// seqKV).
  void setSequence();
  /// With `varlen`: no K/V blocks for a Q block past its sequence's end,
  /// and tileHasWork says whether the block is inside it.
  void skipBlockPastSequence();
  /// With `varlen`: the epilogue's predicated stores of O, and the
  /// log-sum-exp at (head, packed row).
  void buildVarlenEpilogue(Value acc, const RowStats &stats);
  /// The batch coordinate of the tensor maps (0 for the packed tensors of
  /// `varlen`) and the row of the map at the tile's row `row` of the
  /// sequence starting at `start` (null: not packed).
  Value mapBatch() { return c.varlen ? index(0) : batch; }
  Value mapRow(Value start, Value row) {
    return start ? arith::AddIOp::create(b, start, row) : row;
  }

  const AttentionConfig &c;
  MLIRContext *ctx;

  /// The kernel parameter `p` (which the configuration must have).
  Value param(AttentionParam p) {
    return params[static_cast<unsigned>(p)];
  }

  // Kernel-wide values.
  /// Indexed by AttentionParam; null for parameters this kernel lacks.
  SmallVector<Value> params;
  /// The `aux<i>` pointers of the modifiers' auxiliary tensors.
  SmallVector<Value> auxParams;
  /// What the compiler proves of the mask_mod (with one).
  std::optional<MaskModShape> maskShape;
  /// seq_kv is per tile with `kv_lengths` (the batch's own); both are per
  /// tile with `varlen` (the sequence's lengths).
  Value seqQ, seqKV, headsQ, numQBlocks;
  /// The mask's diagonal offset d (query i is aligned with key i + d; null
  /// when top-left, d = 0) and the window's bounds (negative: unbounded).
  Value diagonal, windowLeft, windowRight;
  Value sQ, sK, sV, pipeQ, pipeK, pipeV;
  /// With tensor_row_sums: the V ring's memory with each slot's ones block
  /// (sV is its view without them: the ring the producer fills).
  Value sVWithOnes;
  /// With `separable_bias_mma`: the key offsets tile (fillKeyOffsets).
  Value sKeyOffsets;
  /// The output staging tile of a kernel whose Q is a ring (q_stages > 1).
  Value sO;
  // The current tile.
  Value batch, head, kvHead, qBlockRow, numKVBlocks;
  /// Null when every tile starts at K/V block 0 (no left bound) and the
  /// K/V range is not split.
  Value firstKVBlock;
  /// With `bias_origin_first`: the iteration the K/V loops turn at
  /// (kvBlockAt); null: they walk up.
  Value kvTurn;
  /// With split_kv: the tile's split, and the number of splits.
  Value splitIndex, numSplits;
  /// With pack_gqa: the query head of the thread's two rows, and whether
  /// each is one of the warpgroup's usedRows() (i1).
  Value rowHead0, rowHead1, rowUsed0, rowUsed1;
  /// The tile's row sinks (loadRowSinks), loaded before the K/V loop so that
  /// the epilogue does not wait for them.
  std::optional<SoftmaxSinks> tileSinks;
  /// With a separable score bias: its terms on this warpgroup's tile.
  std::optional<SeparableTile> separableTile;
  /// With a score_mod: 1 / scale (log2(e) over the kernel's scale *
  /// log2(e)), which takes an additive region's bias to the raw scores;
  /// once per tile.
  Value inverseScale;
  /// With `varlen`: the tile's sequence's first query and key rows in the
  /// packed tensors (null otherwise).
  Value seqStartQ, seqStartKV;
  /// Whether the tile has any work (i1; null: every tile has): the
  /// kvpipe.tile's `has_work` flag.
  Value tileHasWork;
  // Consumer values: per thread, and (firstRow, row0, row1) per tile.
  Value consumerIndex, sQw, sOw, elected, qRows, lane, warp;
  Value firstRow, row0, row1;
  /// Per tile, with the masks that need them: the last key of the thread's
  /// rows and of the warpgroup's first row; the first key of the thread's
  /// rows and of the warpgroup's last row.
  Value lastKey0, lastKey1, firstRowLastKey, firstKey0, firstKey1,
      lastRowFirstKey;
};

} // namespace kvpipe::detail

#endif // KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_KERNELBUILDER_H
