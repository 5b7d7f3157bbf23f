//===- BackwardBuilder.h - the attention backward family --------*- C++ -*-===//
//
// The state of generating the backward's three kernels
// (AttentionBackwardBuilder.cpp: the preprocess, the postprocess and the main
// kernel with the consumers that split the K/V block's keys, head dims up to
// 128; AttentionBackwardSplitHead.cpp: the consumers that split the head dim,
// 192 and 256). Private to the Transforms library.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_BACKWARDBUILDER_H
#define KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_BACKWARDBUILDER_H

#include "KernelBuilder.h"
#include "Modifiers.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/AttentionGenerator.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelParts.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace kvpipe::detail {

using namespace mlir;

class BackwardBuilder : kvpipe::detail::ScalarBuilder {
public:
  BackwardBuilder(ImplicitLocOpBuilder &b, const AttentionConfig &config,
                  StringRef family)
      : ScalarBuilder(b), c(config), ctx(b.getContext()), family(family) {}

  gpu::GPUFuncOp buildPreprocess();
  gpu::GPUFuncOp buildMain();
  gpu::GPUFuncOp buildPostprocess();

private:
  static constexpr int64_t kBlockM = AttentionConfig::kBackwardBlockM;
  // Every shared-memory tile (K, V, the Q and dO rings, dS, P) uses the
  // head dim's layout (AttentionConfig::qkSwizzleBytes): column blocks of kW
  // elements, kSwizzle bytes a row -- 64 and 128 at head dims 64 and 128,
  // 32 and 64 at 96, 192 and 256 -- so that every wgmma reads its two
  // operands in one swizzle. dS (keys x kBlockM queries) then has
  // kBlockM / kW blocks (with the head dim split: queries x block_n keys,
  // block_n / kW).
  // (kW, kSwizzle, kDSBlocks: members below.)

  Type ptrType() const { return LLVM::LLVMPointerType::get(ctx, 1); }
  TensorMapType tensorMapType(int64_t rows) const {
    return TensorMapType::get(ctx, {1, 1, rows, kW}, c.elementType,
                              kSwizzle);
  }
  MemRefType sharedType(ArrayRef<int64_t> shape, Type element = {}) const {
    return MemRefType::get(
        shape, element ? element : c.elementType, MemRefLayoutAttrInterface(),
        gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  }
  Value toI64(Value v) {
    return arith::IndexCastOp::create(b, b.getI64Type(), v);
  }
  Value param(BackwardParam p) {
    return params[static_cast<unsigned>(p)];
  }

  /// A kernel with `types` parameters, `threads` per CTA and its ABI.
  gpu::GPUFuncOp createKernel(StringRef name, ArrayRef<Type> types,
                              int64_t threads, DictionaryAttr abi);
  /// The address of element `offset` (i64) of `T` at `base`.
  Value element(Type t, Value base, Value offset) {
    return LLVM::GEPOp::create(b, ptrType(), t, base, ValueRange{offset});
  }
  /// For the row-wise kernels (one CTA per 64-row Q block): sets `batch`,
  /// `head`, `seqQ` (`maxSeqQ`, or with `varlen` the sequence's, with
  /// `seqStartQ`, read from cu_seqlens_q and total_q, the kernel parameters
  /// at `varlenParams`) and `rowBase`; with `varlen` leaves the insertion
  /// point in a branch that a block past the sequence's rows skips (seq_q
  /// >= 1 inside). Returns the block's first row and total_q (null without
  /// `varlen`).
  struct RowBlock {
    Value blockRow, totalQ;
  };
  RowBlock setUpRowBlock(Value maxSeqQ, Value headsQ, size_t varlenParams);
  /// The preprocess's rows per warp (consecutive rows of the block).
  static constexpr int64_t kRowsPerWarp = kBlockM / 4;
  /// The padded row of (batch, head)'s query row 0 in the fp32 row buffers
  /// (lse_log2, delta; dq_accum has head_dim elements a row): the one place
  /// their layout is decided. Rows are padded to whole 64-row Q blocks:
  /// dense, (batch * heads_q + head) * round_up(seq_q, 64); with `varlen`,
  /// head * varlenPaddedRows + the sequence's padded start
  /// floor((cu_seqlens_q[b] + 64 b) / 64) * 64 (FA3's), which keeps every
  /// sequence's padded blocks apart and inside round_up(total_q + 64 batch,
  /// 64) rows a head (docs/backward.md, "Packed sequences").
  Value paddedRowBase(Value headsQ, Value totalQ);
  /// With `varlen`: reads the CTA's sequence (`batch`) from the offsets,
  /// setting seqStartQ / seqQ (and with `cuSeqlensK`, seqStartKV / seqKV).
  void loadSequence(Value cuSeqlensQ, Value totalQ, Value cuSeqlensK,
                    Value totalKV);
  /// The batch coordinate of the tensor maps and strided tensors: packed
  /// sequences are all batch 0 of a (1, total, H, D) view.
  Value mapBatch() { return c.varlen ? index(0) : batch; }
  /// Row `row` of the sequence in its tensor (packed: from its first row).
  Value mapRow(Value start, Value row) {
    return start ? Value(arith::AddIOp::create(b, start, row)) : row;
  }
  /// `v` (f32) rounded to the element type two at a time (cvt.rn.bf16x2 /
  /// f16x2, one F2FP): P^T is both the dV wgmma's A operand (packed) and
  /// extended back for dS, and from a plain truncf LLVM emits one scalar
  /// cvt per element (F2F, on the same pipe as the exp2s) plus the packing.
  Value packedTrunc(Value v) {
    auto type = cast<VectorType>(v.getType());
    auto pairType = VectorType::get({2}, c.elementType);
    auto rn = NVVM::FPRoundingMode::RN;
    SmallVector<Value> elements;
    for (int64_t i = 0; i < type.getNumElements(); i += 2) {
      Value lo = vector::ExtractOp::create(b, v, i);
      Value hi = vector::ExtractOp::create(b, v, i + 1);
      Value pair =
          c.elementType.isBF16()
              ? Value(NVVM::ConvertF32x2ToBF16x2Op::create(
                    b, pairType, hi, lo, Value(), rn,
                    NVVM::SaturationMode::NONE, false))
              : Value(NVVM::ConvertF32x2ToF16x2Op::create(
                    b, pairType, hi, lo, Value(), rn,
                    NVVM::SaturationMode::NONE, false));
      for (int64_t j : {0, 1})
        elements.push_back(vector::ExtractOp::create(b, pair, j));
    }
    return vector::FromElementsOp::create(
        b, VectorType::get(type.getShape(), c.elementType), elements);
  }
  /// The row-wise kernels' split of a row of `dim` columns among a warp's
  /// lanes: each lane owns dim/32 columns, in chunks of
  /// rowChunkElements(dim) -- the largest power of two dividing dim/32, so
  /// that a chunk is one aligned vector access (2 at 64, 4 at 128; at 96,
  /// three single columns, where one vector of 3 at lane * 6 bytes would be
  /// misaligned) -- chunk j at column rowChunkColumn(lane, j, width) =
  /// (32 j + lane) * width.
  int64_t rowChunkElements(int64_t dim) const {
    int64_t perLane = dim / 32;
    return perLane & -perLane;
  }
  Value rowChunkColumn(Value lane, int64_t chunk, int64_t width);
  /// The lane's dim/32 elements (its chunks, in order) of row `row` of the
  /// (B, H, S, dim) tensor at `base` with element strides (batch, head,
  /// row).
  Value rowElements(Value base, Value strides[3], Value row, Value lane,
                    int64_t dim);

  // Main kernel.
  void buildMainProducer();
  void buildMainConsumer(Value consumer);
  Value maskTransposed(Value sT, Value qRow, Value keyRow0, Value keyRow1,
                       Value tileKeyRow);
  /// With modifiers: each of `values` (score-shaped fragments) set to its
  /// `fills` element where the built-in masks drop it (`needed`: whether the
  /// tile crosses a bound, uniform; `valid`: the per-element verdict, built
  /// in the branch) or the mask_mod does (on the tile of the Q block at
  /// `qRow` and the `keys` keys from `firstKey`, where its shape does not
  /// prove every element kept; `at`: the fragment's indices).
  SmallVector<Value> maskValues(ValueRange values, ArrayRef<Value> fills,
                                Value needed, function_ref<Value()> valid,
                                Value qRow, Value firstKey, int64_t keys,
                                function_ref<ModifierIndices()> at);
  /// P = exp2(S c - lse_log2) of a consumer's fragment of scores `s` (either
  /// family's orientation: `at` gives its indices), and the copies the
  /// backward's wgmmas and gradients read.
  struct Probabilities {
    Value p;    ///< without modifiers: the fp32 P, masked (dS's factor)
    Value p16;  ///< P in the element type, masked (dV's operand)
    Value pd16; ///< with modifiers: P d score_mod / d s, element type, masked
    Value pAux; ///< with aux_grads: the fp32 P, masked
  };
  /// `maskScores(s)`: the masked scores set to -inf (without modifiers);
  /// `maskElements(values, fills)`: each value set to its fill where masked
  /// (with modifiers: maskValues on the family's tile).
  Probabilities buildProbabilities(
      Value s, Value lse, function_ref<ModifierIndices()> at,
      function_ref<Value(Value)> maskScores,
      function_ref<SmallVector<Value>(ValueRange, ArrayRef<Value>)>
          maskElements);
  /// dS = P (dP - delta) in fp32 (P d (dP - delta) with a score_mod: the
  /// scaled score's gradient), after adding the aux tensors' gradients.
  Value buildScoreGradient(const Probabilities &probs, Value s,
                           Value dPMinusDelta,
                           function_ref<ModifierIndices()> at);
  /// Whether the S^T tile of Q block row `qRow` crosses a built-in mask's
  /// bound (a uniform i1), and the per-element verdict inside (built in the
  /// branch).
  Value transposedMaskNeeded(Value qRow, Value tileKeyRow);
  Value transposedValid(Value qRow);
  /// The consumers that split the head dim (head dims 192 and 256,
  /// AttentionBackwardSplitHead.cpp): warpgroup `consumer`'s 32 keys of S
  /// and dP, its head-dim rows of dK^T and dV^T, its columns of dQ.
  void buildSplitHeadConsumer(Value consumer);
  /// Their masks: S's rows are queries, its columns keys (`firstKey` the
  /// warpgroup's first), as the forward's.
  Value splitHeadMaskNeeded(Value qRow, Value firstKey);
  Value splitHeadValid(Value qRow, Value firstKey);
  ModifierIndices splitHeadIndices(Value qRow, Value firstKey) {
    return {kW / 2,   batch,    head,      queryRow0, queryRow1,
            arith::AddIOp::create(b, firstKey, threadColumn),
            seqQ,        seqKV,    auxParams, c.auxTypes, /*transposed=*/false};
  }
  /// Packed sequences' dK / dV epilogue: `tile` ([blocks][keys][kW], staged
  /// and visible to the warpgroup's threads; `thread` 0..127) holds rows
  /// from key `firstKey` of the CTA's sequence and columns from
  /// `firstColumn` of the (total_kv, heads_q, dim) gradient `gradient`:
  /// copied by 16-byte stores, the rows at or past the sequence's keys not.
  void storePackedGradient(Value tile, BackwardParam gradient, int64_t dim,
                           Value firstKey, Value firstColumn, Value thread);
  /// Deterministic mode: the turn of consumer warpgroup `consumer` to add
  /// to dQ of Q block `qBlock` (null without the causal mask, where it does
  /// not depend on the block).
  Value dqTurn(Value qBlock, Value consumer);
  /// The K/V block's Q-block range [qBegin, qEnd) from the masks (the
  /// forward's block skipping turned around: MaskBounds, MaskModShape).
  void narrowQueryBlocks();
  /// The modifiers' view of the consumer's S^T fragment for Q block row
  /// `qRow` (rows keys, columns queries).
  ModifierIndices transposedIndices(Value qRow) {
    return {kBlockM / 2, batch,    head,      keyRow0,    keyRow1,
            arith::AddIOp::create(b, qRow, threadColumn),
            seqQ,        seqKV,    auxParams, c.auxTypes, /*transposed=*/true};
  }
  /// Deterministic mode: the `elected` thread waits until the i32 counter at
  /// `semaphore` reaches `turn` (acquire, GPU scope), then the warpgroup
  /// meets at `barrierId`.
  void buildOrderedTurnWait(Value semaphore, Value turn, Value elected,
                            Value barrierId);
  /// ... and after its additions, meets again and the `elected` thread
  /// passes the turn on (counter + 1, release, GPU scope).
  void buildOrderedTurnEnd(Value semaphore, Value elected, Value barrierId);
  /// The `elected` thread waits until its bulk groups have read their
  /// shared-memory sources.
  void waitBulkReads(Value elected) {
    auto wait = scf::IfOp::create(b, elected, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(wait.thenBlock());
    NVVM::CpAsyncBulkWaitGroupOp::create(b, b.getI32IntegerAttr(0),
                                         b.getUnitAttr());
  }

  const AttentionConfig &c;
  // The head dim's tile layout (see above); after `c`, which they read.
  const int64_t kW = c.qkTileWidth();
  const int64_t kSwizzle = c.qkSwizzleBytes();
  const int64_t kDSBlocks = kBlockM / kW;
  MLIRContext *ctx;
  StringRef family;
  SmallVector<Value> params;

  // Main kernel values.
  /// The CTA's K/V block (blockIdx.x, reversed in deterministic causal mode).
  Value kvBlock;
  Value seqQ, seqKV, headsQ, batch, head, kvHead, kvRow0, qBegin, numQBlocks,
      rowBase;
  /// With `varlen`: the sequence's first rows in the packed Q / dO / O and
  /// K / V tensors (null otherwise).
  Value seqStartQ, seqStartKV;
  /// The Q blocks past the last one the masks let see a key of the CTA
  /// (numQBlocks without a left bound).
  Value qEnd;
  /// The masks other than none and top-left causal (bottom-right alignment,
  /// windows): the same bounds as the forward's (KernelParts.h).
  std::optional<MaskBounds> bounds;
  std::optional<MaskModShape> maskShape;
  SmallVector<Value> auxParams;
  /// By auxiliary tensor: its gradient's pointer parameter, or null.
  SmallVector<Value> auxGradients;
  /// Consumer: its thread's two keys (S^T rows) and first query column
  /// offset; with `bounds`, the queries each key keeps and the tile's
  /// uniform limits (the highest first query, the lowest last query).
  Value keyRow0, keyRow1, threadColumn;
  /// Split-head consumer: its thread's two query rows of the Q block.
  Value queryRow0, queryRow1;
  Value firstQuery0, firstQuery1, lastQuery0, lastQuery1, tileFirstQuery,
      tileLastQuery;
  Value sK, sV, sQ, sDO, sDS, sP, pipeKV, pipeQ, pipeDO;
  /// With `shared_statistics`: the rings of the Q blocks' log-sum-exp (a
  /// slot per Q slot) and delta (per dO slot), [slots][64] fp32; null
  /// otherwise.
  Value sLSE, sDelta;
  /// The 64 statistics of the Q block in `state`'s slot of `ring` (sLSE
  /// with a Q state, sDelta with a dO state).
  Value statisticsSlot(Value ring, Value state) {
    return buildTileView(b, ring,
                         {Value(IndexOp::create(b, state)), b.getIndexAttr(0)},
                         {kBlockM});
  }
  AlignedSharedMemory shared;
};

} // namespace kvpipe::detail

#endif // KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_BACKWARDBUILDER_H
