//===- AttentionVarlen.cpp - packed variable-length sequences -------------===//
//
// `varlen = true` (flash-attn's flash_attn_varlen_func): the batch's
// sequences are packed one after another in Q, K, V and O without padding,
// sequence b at the rows [cu_seqlens_q[b], cu_seqlens_q[b+1]) of Q and O and
// [cu_seqlens_k[b], cu_seqlens_k[b+1]) of K and V (with a paged cache and
// kv_lengths, kv_lengths[b] keys of its row of pages). The grid is sized by the
// longest sequences (seq_q, seq_kv); each tile reads its sequence's offsets,
// loads at offset + row, and masks with its sequence's lengths. Its output
// rows past the sequence's end belong to the next sequence, so they are not
// stored with TMA (which clips only at the tensor's end) but by predicated
// 16-byte stores from the staged tile.
//
//===----------------------------------------------------------------------===//

#include "Fragment.h"
#include "KernelBuilder.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelParts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::detail;

void KernelBuilder::setSequence() {
  // One load of each offset per tile, clamped: the query rows are
  // [start, end) with 0 <= start <= end <= total_q, so that no offsets,
  // however wrong, send a store outside the packed output. (K/V loads need
  // no upper clamp: TMA fills rows outside the tensor with zeros.)
  SequenceRows queries =
      loadSequenceRows(b, param(AttentionParam::CuSeqlensQ), batch,
                       toIndex(param(AttentionParam::TotalQ)));
  seqStartQ = queries.start;
  seqQ = queries.count;
  if (c.kvLengths) {
    // A paged cache's sequence: its key count is kv_lengths[b] (setTile,
    // clamped to seq_kv), its keys are its row of the block table.
    seqStartKV = index(0);
  } else {
    SequenceRows keys = loadSequenceRows(b, param(AttentionParam::CuSeqlensK),
                                         batch, /*total=*/Value());
    seqStartKV = keys.start;
    seqKV = keys.count;
  }
  if (c.maskAlignment == MaskAlignment::BottomRight)
    diagonal = arith::SubIOp::create(b, seqKV, seqQ);
}

void KernelBuilder::skipBlockPastSequence() {
  if (!c.varlen)
    return;
  // A Q block past its sequence's end (the grid is sized by the longest)
  // visits no K/V block and writes nothing: the tile has no work, and one
  // tile per CTA the CTA leaves at once (most of an uneven batch's grid).
  // The K/V count stays guarded for a lowering that runs the tile anyway.
  tileHasWork =
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, qBlockRow, seqQ);
  numKVBlocks =
      arith::SelectOp::create(b, tileHasWork, numKVBlocks, index(0));
}

void KernelBuilder::buildVarlenEpilogue(Value acc, const RowStats &state) {
  const SoftmaxSinks *sinks = tileSinks ? &*tileSinks : nullptr;
  NormalizedOutput out = buildNormalizedOutput(
      b, acc, {state.m0, state.m1, state.l0, state.l1}, c.elementType, sinks);
  auto i64 = [&](Value v) {
    return arith::IndexCastOp::create(b, b.getI64Type(), v);
  };
  // O is (total_q, heads_q, value_head_dim), contiguous: the warpgroup's
  // first row is packed row seqStartQ + firstRow.
  Value rowStride = arith::MulIOp::create(
      b, i64(headsQ), arith::ConstantIntOp::create(b, c.valueHeadDim, 64));
  Value firstRowOffset = arith::AddIOp::create(
      b,
      arith::MulIOp::create(
          b, i64(arith::AddIOp::create(b, seqStartQ, firstRow)), rowStride),
      arith::MulIOp::create(
          b, i64(head), arith::ConstantIntOp::create(b, c.valueHeadDim, 64)));
  Value thread = arith::AddIOp::create(
      b, arith::MulIOp::create(b, warp, index(32)), lane);
  buildPredicatedStore(
      b, out.o,
      {sOw, namedBarrier(AttentionConfig::kEpilogueBarriers, consumerIndex),
       thread, param(AttentionParam::Out), firstRowOffset, rowStride,
       arith::SubIOp::create(b, seqQ, firstRow), c.vSwizzleBytes()});
  // flash-attn's varlen log-sum-exp: (heads_q, total_q), at the packed row.
  // The softmax's scale (softmaxScaleLog2: with a score_mod, log2(e) on the
  // modified scaled scores, times a folded output factor), as the dense
  // epilogue's.
  LogSumExpStore lse{param(AttentionParam::Lse),
                     softmaxScaleLog2(),
                     state.m0,
                     state.m1,
                     out.sum0,
                     out.sum1,
                     row0,
                     row1,
                     lane,
                     index(0),
                     headsQ,
                     head,
                     toIndex(param(AttentionParam::TotalQ)),
                     /*infiniteWithoutKeys=*/true};
  lse.rowStart = seqStartQ;
  lse.rowCount = seqQ;
  lse.sinks = sinks;
  buildLogSumExpStore(b, lse);
}
