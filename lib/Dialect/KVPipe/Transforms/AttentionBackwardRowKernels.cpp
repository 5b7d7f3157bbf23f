//===- AttentionBackwardRowKernels.cpp - backward's row kernels -----------===//
//
// The backward family's two row-parallel kernels, around the main kernel
// (AttentionBackwardBuilder.cpp, docs/backward.md):
//
//   preprocess   delta = rowsum(dO * O), lse_log2 = lse * log2(e) (fp32,
//                padded to 64-row blocks), dq_accum = 0
//   postprocess  dQ = scale * dq_accum in the element type
//
// Each warp takes rows of the (B, H, S) grid at once, D/32 elements per lane;
// packed sequences (varlen) locate a row's sequence from cu_seqlens_q.
//
//===----------------------------------------------------------------------===//

#include "BackwardBuilder.h"
#include "Fragment.h"

#include "kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace kvpipe;

using kvpipe::detail::BackwardBuilder;


Value BackwardBuilder::paddedRowBase(Value headsQ, Value totalQ) {
  if (!c.varlen) {
    Value padded = arith::MulIOp::create(
        b, arith::CeilDivUIOp::create(b, seqQ, index(kBlockM)),
        index(kBlockM));
    return arith::MulIOp::create(
        b,
        arith::AddIOp::create(b, arith::MulIOp::create(b, batch, headsQ),
                              head),
        padded);
  }
  // One grid row (z) per sequence.
  Value batches = gpu::GridDimOp::create(b, gpu::Dimension::z);
  Value perHead = arith::MulIOp::create(
      b,
      arith::CeilDivUIOp::create(
          b,
          arith::AddIOp::create(
              b, totalQ, arith::MulIOp::create(b, batches, index(kBlockM))),
          index(kBlockM)),
      index(kBlockM));
  Value start = arith::MulIOp::create(
      b,
      arith::DivUIOp::create(
          b,
          arith::AddIOp::create(
              b, seqStartQ, arith::MulIOp::create(b, batch, index(kBlockM))),
          index(kBlockM)),
      index(kBlockM));
  return arith::AddIOp::create(b, arith::MulIOp::create(b, head, perHead),
                               start);
}

void BackwardBuilder::loadSequence(Value cuSeqlensQ, Value totalQ,
                                   Value cuSeqlensK, Value totalKV) {
  SequenceRows queries = loadSequenceRows(b, cuSeqlensQ, batch, totalQ);
  seqStartQ = queries.start;
  seqQ = queries.count;
  if (!cuSeqlensK)
    return;
  // Clamped to the packed K/V rows too: the main kernel stores dK and dV
  // at its sequence's key rows.
  SequenceRows keys = loadSequenceRows(b, cuSeqlensK, batch, totalKV);
  seqStartKV = keys.start;
  seqKV = keys.count;
}

BackwardBuilder::RowBlock BackwardBuilder::setUpRowBlock(Value maxSeqQ,
                                                         Value headsQ,
                                                         size_t varlenParams) {
  Value block = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  head = gpu::BlockIdOp::create(b, gpu::Dimension::y);
  batch = gpu::BlockIdOp::create(b, gpu::Dimension::z);
  seqQ = maxSeqQ;
  Value totalQ;
  if (c.varlen) {
    totalQ = toIndex(params[varlenParams + 1]);
    loadSequence(params[varlenParams], totalQ, Value(), Value());
  }
  rowBase = paddedRowBase(headsQ, totalQ);
  Value blockRow = arith::MulIOp::create(b, block, index(kBlockM));
  if (c.varlen) {
    // A packed sequence's blocks end at its own rows (the grid is sized by
    // the longest): past them, the padded rows are the next sequence's, or
    // past the buffers. Inside, seq_q >= 1.
    auto inside = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, blockRow, seqQ),
        /*withElseRegion=*/false);
    b.setInsertionPointToStart(inside.thenBlock());
  }
  return {blockRow, totalQ};
}

Value BackwardBuilder::rowChunkColumn(Value lane, int64_t chunk,
                                      int64_t width) {
  return arith::MulIOp::create(
      b, arith::AddIOp::create(b, lane, index(32 * chunk)), index(width));
}

Value BackwardBuilder::rowElements(Value base, Value strides[3], Value row,
                                   Value lane, int64_t dim) {
  int64_t width = rowChunkElements(dim), perLane = dim / 32;
  Value rowOffset = arith::AddIOp::create(
      b,
      arith::AddIOp::create(
          b, arith::MulIOp::create(b, toI64(mapBatch()), strides[0]),
          arith::MulIOp::create(b, toI64(head), strides[1])),
      arith::MulIOp::create(b, toI64(mapRow(seqStartQ, row)), strides[2]));
  auto chunkType = VectorType::get({width}, c.elementType);
  auto type = VectorType::get({perLane}, c.elementType);
  Value elements = arith::ConstantOp::create(
      b, type, DenseElementsAttr::get(type, b.getZeroAttr(c.elementType)));
  for (int64_t chunk = 0; chunk < perLane / width; ++chunk) {
    Value addr = element(
        c.elementType, base,
        arith::AddIOp::create(b, rowOffset,
                              toI64(rowChunkColumn(lane, chunk, width))));
    Value loaded =
        LLVM::LoadOp::create(b, chunkType, addr, width * c.elementBytes());
    if (width == perLane)
      return loaded;
    for (int64_t i = 0; i < width; ++i)
      elements = vector::InsertOp::create(
          b, vector::ExtractOp::create(b, loaded, i), elements,
          chunk * width + i);
  }
  return elements;
}

gpu::GPUFuncOp BackwardBuilder::buildPreprocess() {
  Type i32Type = b.getI32Type(), i64Type = b.getI64Type();
  SmallVector<Type> types = {ptrType(), ptrType(), ptrType(), ptrType(),
                             ptrType(), ptrType(), i64Type,   i64Type,
                             i64Type,   i64Type,   i64Type,   i64Type,
                             i32Type,   i32Type};
  if (c.deterministic)
    types.push_back(ptrType());
  // Packed sequences: cu_seqlens_q and total_q.
  size_t varlenParams = types.size();
  if (c.varlen)
    types.append({ptrType(), i32Type});
  std::string name = (family + "_preprocess").str();
  gpu::GPUFuncOp func = createKernel(
      name, types, 128,
      getAttentionBackwardABI(ctx, name, family, c,
                              AttentionBackwardRole::Preprocess));
  auto p = [&](PreprocessParam x) { return params[static_cast<unsigned>(x)]; };
  Value maxSeqQ = toIndex(p(PreprocessParam::SeqQ));
  Value headsQ = toIndex(p(PreprocessParam::HeadsQ));
  Value oStrides[3] = {p(PreprocessParam::OStrideB),
                       p(PreprocessParam::OStrideH),
                       p(PreprocessParam::OStrideS)};
  Value dOStrides[3] = {p(PreprocessParam::DOStrideB),
                        p(PreprocessParam::DOStrideH),
                        p(PreprocessParam::DOStrideS)};
  // O and dO rows: value_head_dim columns; dQ's: head_dim.
  int64_t perLane = c.valueHeadDim / 32;
  Block *entry = b.getInsertionBlock();
  auto [blockRow, totalQ] = setUpRowBlock(maxSeqQ, headsQ, varlenParams);
  // Each warp takes kRowsPerWarp consecutive rows of the block.
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value lane = arith::RemUIOp::create(b, tid, index(32));
  Value firstRow = arith::AddIOp::create(
      b, blockRow,
      arith::MulIOp::create(b, arith::DivUIOp::create(b, tid, index(32)),
                            index(kRowsPerWarp)));
  Value lastRow = arith::SubIOp::create(b, seqQ, index(1));
  // Every row's O and dO are loaded before any row is reduced: a row at a
  // time, each warp had one row's loads in flight and the kernel was 6 %
  // (head dim 128) to 20 % (64) slower than cuDNN's (H200, 2026-12-05).
  // Rows past seq_q load the last row and count 0 (no branch between the
  // loads).
  // Above 4 columns a lane (head dims 192, 256), 8 rows at a time: 16 rows
  // of O and dO are 128 registers a thread, and ptxas spilled.
  auto f32Vec = VectorType::get({perLane}, b.getF32Type());
  int64_t rowsAtOnce = perLane > 4 ? kRowsPerWarp / 2 : kRowsPerWarp;
  int64_t width = rowChunkElements(c.headDim);
  auto zeroChunk = VectorType::get({width}, b.getF32Type());
  Value zeros = arith::ConstantOp::create(
      b, zeroChunk, DenseElementsAttr::get(zeroChunk, 0.0f));
  for (int64_t group = 0; group < kRowsPerWarp; group += rowsAtOnce) {
    SmallVector<Value> rows, os, dOs;
    for (int64_t r = group; r < group + rowsAtOnce; ++r) {
      rows.push_back(arith::AddIOp::create(b, firstRow, index(r)));
      Value loaded = arith::MinUIOp::create(b, rows.back(), lastRow);
      os.push_back(rowElements(p(PreprocessParam::O), oStrides, loaded, lane,
                               c.valueHeadDim));
      dOs.push_back(rowElements(p(PreprocessParam::DO), dOStrides, loaded,
                                lane, c.valueHeadDim));
    }
    for (int64_t r = group; r < group + rowsAtOnce; ++r) {
      Value row = rows[r - group];
      Value valid =
          arith::CmpIOp::create(b, arith::CmpIPredicate::ult, row, seqQ);
      // rowsum(dO * O), the warp's lanes summed: 0 for a padding row.
      Value partial = vector::ReductionOp::create(
          b, vector::CombiningKind::ADD,
          arith::MulFOp::create(
              b, arith::ExtFOp::create(b, f32Vec, os[r - group]),
              arith::ExtFOp::create(b, f32Vec, dOs[r - group])));
      Value sum = reduceAcrossLanes(
          b, arith::SelectOp::create(b, valid, partial, f32(0.0)),
          vector::CombiningKind::ADD, {16, 8, 4, 2, 1});
      Value paddedOffset = toI64(arith::AddIOp::create(b, rowBase, row));
      // This lane's chunks of the dQ accumulator's row are zeroed.
      Value dqRow = arith::MulIOp::create(
          b, paddedOffset, arith::ConstantIntOp::create(b, c.headDim, 64));
      for (int64_t chunk = 0; chunk < c.headDim / 32 / width; ++chunk)
        LLVM::StoreOp::create(
            b, zeros,
            element(b.getF32Type(), p(PreprocessParam::DQAccum),
                    arith::AddIOp::create(
                        b, dqRow, toI64(rowChunkColumn(lane, chunk, width)))),
            width * 4);
      // Every lane holds the sum; lane r stores it.
      auto store = scf::IfOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, index(r)),
          /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(store.thenBlock());
      LLVM::StoreOp::create(b, sum,
                            element(b.getF32Type(), p(PreprocessParam::Delta),
                                    paddedOffset));
    }
  }
  // lse * log2(e) for the main kernel's exp2, lane r for row r; padding
  // rows 0 (their columns are masked there).
  {
    auto perRow = scf::IfOp::create(
        b,
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, lane,
                              index(kRowsPerWarp)),
        /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(perRow.thenBlock());
    Value row = arith::AddIOp::create(b, firstRow, lane);
    Value loaded = arith::MinUIOp::create(b, row, lastRow);
    // lse: (B, H, seq_q); packed, flash-attn's (H, total_q).
    Value unpadded = toI64(
        c.varlen
            ? arith::AddIOp::create(b, arith::MulIOp::create(b, head, totalQ),
                                    arith::AddIOp::create(b, seqStartQ, loaded))
            : arith::AddIOp::create(
                  b,
                  arith::MulIOp::create(
                      b,
                      arith::AddIOp::create(
                          b, arith::MulIOp::create(b, batch, headsQ), head),
                      seqQ),
                  loaded));
    Value lse = LLVM::LoadOp::create(
        b, b.getF32Type(),
        element(b.getF32Type(), p(PreprocessParam::Lse), unpadded));
    Value lseLog2 = arith::SelectOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, row, seqQ),
        arith::MulFOp::create(b, lse, f32(M_LOG2E)), f32(0.0));
    LLVM::StoreOp::create(
        b, lseLog2,
        element(b.getF32Type(), p(PreprocessParam::LseLog2),
                toI64(arith::AddIOp::create(b, rowBase, row))));
  }
  b.setInsertionPointToEnd(entry);
  if (c.deterministic) {
    // The CTA's Q block starts with no dQ contribution added: its counter
    // (one per 64-row block of the padded rows, rowBase / 64 + block) is 0.
    Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    auto first = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tid, index(0)),
        /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(first.thenBlock());
    Value block = arith::AddIOp::create(
        b, arith::DivUIOp::create(b, rowBase, index(kBlockM)),
        gpu::BlockIdOp::create(b, gpu::Dimension::x));
    LLVM::StoreOp::create(b, i32(0),
                          element(b.getI32Type(),
                                  p(PreprocessParam::DQSemaphore),
                                  toI64(block)));
  }
  gpu::ReturnOp::create(b);
  return func;
}

gpu::GPUFuncOp BackwardBuilder::buildPostprocess() {
  Type i32Type = b.getI32Type(), i64Type = b.getI64Type();
  SmallVector<Type> types = {ptrType(), ptrType(), i64Type,        i64Type,
                             i64Type,   i32Type,   i32Type,        b.getF32Type()};
  // Packed sequences: cu_seqlens_q and total_q.
  size_t varlenParams = types.size();
  if (c.varlen)
    types.append({ptrType(), i32Type});
  std::string name = (family + "_postprocess").str();
  gpu::GPUFuncOp func = createKernel(
      name, types, 128,
      getAttentionBackwardABI(ctx, name, family, c,
                              AttentionBackwardRole::Postprocess));
  auto p = [&](PostprocessParam x) {
    return params[static_cast<unsigned>(x)];
  };
  Value headsQ = toIndex(p(PostprocessParam::HeadsQ));
  Value strides[3] = {p(PostprocessParam::DQStrideB),
                      p(PostprocessParam::DQStrideH),
                      p(PostprocessParam::DQStrideS)};
  // One CTA per 64-row block, one thread per fragment thread: dq_accum
  // holds the block in fragment order (AccumulatorLayout.h), so each thread
  // loads its D/2 elements with coalesced 16-byte loads and writes them to
  // their rows and columns of dQ (below: 16 bytes a store where dQ allows).
  Value t = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value warp = arith::DivUIOp::create(b, t, index(32));
  Value lane = arith::RemUIOp::create(b, t, index(32));
  Block *entry = b.getInsertionBlock();
  Value blockRow =
      setUpRowBlock(toIndex(p(PostprocessParam::SeqQ)), headsQ, varlenParams)
          .blockRow;
  Value accBlock = element(
      b.getF32Type(), p(PostprocessParam::DQAccum),
      toI64(arith::MulIOp::create(b, arith::AddIOp::create(b, rowBase, blockRow),
                                  index(c.headDim))));
  int64_t numElements = AccumulatorLayout::elementsPerThread(c.headDim);
  Value acc = buildFragmentOrderLoad(b, accBlock, t, numElements);
  auto f32Vec = VectorType::get({numElements}, b.getF32Type());
  Value narrow = arith::TruncFOp::create(
      b, VectorType::get({numElements}, c.elementType),
      arith::MulFOp::create(
          b, acc,
          vector::BroadcastOp::create(b, f32Vec, p(PostprocessParam::Scale))));
  Value firstRow = arith::AddIOp::create(
      b, blockRow,
      arith::AddIOp::create(
          b, arith::MulIOp::create(b, warp, index(AccumulatorLayout::kRowsPerWarp)),
          arith::DivUIOp::create(b, lane, index(AccumulatorLayout::kLanesPerRow))));
  Value threadColumn = toI64(arith::MulIOp::create(
      b, arith::RemUIOp::create(b, lane, index(AccumulatorLayout::kLanesPerRow)),
      index(AccumulatorLayout::kColumnsPerLane)));
  // Packed: the sequence's rows from its first (batch 0 of the view).
  Value headOffset = arith::AddIOp::create(
      b, arith::MulIOp::create(b, toI64(mapBatch()), strides[0]),
      arith::MulIOp::create(b, toI64(head), strides[1]));
  if (seqStartQ)
    headOffset = arith::AddIOp::create(
        b, headOffset, arith::MulIOp::create(b, toI64(seqStartQ), strides[2]));
  // Row half `half` of the thread's fragment, where its row is below seq_q:
  // `stores(rowStart)` with the element offset of the row's column 0. A
  // quad's four lanes share the row.
  auto forEachRowHalf = [&](function_ref<void(Value rowStart, int64_t half)>
                                stores) {
    for (int64_t half : {0, 1}) {
      Value row = arith::AddIOp::create(
          b, firstRow, index(half * AccumulatorLayout::kRowHalfDistance));
      auto ifValid = scf::IfOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, row, seqQ),
          /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifValid.thenBlock());
      stores(arith::AddIOp::create(
                 b, headOffset,
                 arith::MulIOp::create(b, toI64(row), strides[2])),
             half);
    }
  };
  // Elements i and i + 1 (adjacent columns of a row) as one 32-bit pair.
  auto pairOf = [&](int64_t i) -> Value {
    return vector::FromElementsOp::create(
        b, VectorType::get({2}, c.elementType),
        ValueRange{vector::ExtractOp::create(b, narrow, i),
                   vector::ExtractOp::create(b, narrow, i + 1)});
  };
  // 16-byte stores where dQ's address and strides are multiples of 16
  // bytes (a uniform branch): each quad transposes its 4 x 4 blocks of
  // column pairs, so that lane q holds the 8 columns of group 4 m + q of
  // its rows -- two shfl.xor rounds of selects (FA3 writes dQ through
  // shared memory instead). Otherwise 4-byte stores of the fragment's pairs.
  Value addressBits = LLVM::PtrToIntOp::create(b, b.getI64Type(),
                                               p(PostprocessParam::DQ));
  for (Value stride : strides)
    addressBits = arith::OrIOp::create(
        b, addressBits,
        arith::MulIOp::create(
            b, stride, arith::ConstantIntOp::create(b, c.elementBytes(), 64)));
  Value wide = arith::CmpIOp::create(
      b, arith::CmpIPredicate::eq,
      arith::AndIOp::create(b, addressBits,
                            arith::ConstantIntOp::create(b, 15, 64)),
      arith::ConstantIntOp::create(b, 0, 64));
  auto ifWide = scf::IfOp::create(b, wide, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifWide.thenBlock());
    Value quadLane =
        arith::RemUIOp::create(b, lane, index(AccumulatorLayout::kLanesPerRow));
    int64_t groups = c.headDim / AccumulatorLayout::kColumnGroupWidth;
    // One round: lanes whose bit `mask` is clear keep slots k with that bit
    // clear and take the partner's slot k ^ mask into k ^ mask's place;
    // one shuffle per such pair of slots.
    auto round = [&](SmallVector<Value> &slots, int32_t mask) {
      Value low = arith::CmpIOp::create(
          b, arith::CmpIPredicate::eq,
          arith::AndIOp::create(b, quadLane, index(mask)), index(0));
      for (int64_t k = 0; k < 4; ++k) {
        if (k & mask)
          continue;
        Value mine = slots[k], theirs = slots[k ^ mask];
        Value sent = arith::SelectOp::create(b, low, theirs, mine);
        Value received =
            gpu::ShuffleOp::create(b, sent, i32(mask), i32(32),
                                   gpu::ShuffleMode::XOR)
                .getShuffleResult();
        slots[k] = arith::SelectOp::create(b, low, mine, received);
        slots[k ^ mask] = arith::SelectOp::create(b, low, received, theirs);
      }
    };
    // Every shuffle before the row branches (the quads of rows past seq_q
    // take part).
    SmallVector<Value> chunks[2];
    for (int64_t half : {0, 1})
      for (int64_t m = 0; m < groups / 4; ++m) {
        SmallVector<Value> slots;
        for (int64_t k = 0; k < 4; ++k)
          slots.push_back(LLVM::BitcastOp::create(
              b, b.getI32Type(), pairOf(4 * (4 * m + k) + 2 * half)));
        round(slots, 2);
        round(slots, 1);
        chunks[half].push_back(vector::FromElementsOp::create(
            b, VectorType::get({4}, b.getI32Type()), slots));
      }
    Value quadColumn = toI64(arith::MulIOp::create(
        b, quadLane, index(AccumulatorLayout::kColumnGroupWidth)));
    forEachRowHalf([&](Value rowStart, int64_t half) {
      for (auto [m, chunk] : llvm::enumerate(chunks[half]))
        LLVM::StoreOp::create(
            b, chunk,
            element(c.elementType, p(PostprocessParam::DQ),
                    arith::AddIOp::create(
                        b, rowStart,
                        arith::AddIOp::create(
                            b, quadColumn,
                            arith::ConstantIntOp::create(
                                b, 4 * AccumulatorLayout::kColumnGroupWidth * m,
                                64)))),
            16);
    });
    b.setInsertionPointToStart(ifWide.elseBlock());
    forEachRowHalf([&](Value rowStart, int64_t half) {
      Value first = element(c.elementType, p(PostprocessParam::DQ),
                            arith::AddIOp::create(b, rowStart, threadColumn));
      for (int64_t i = 0; i < numElements; i += 2) {
        if (AccumulatorLayout::rowHalf(i) != half)
          continue;
        LLVM::StoreOp::create(
            b, pairOf(i),
            element(c.elementType, first,
                    arith::ConstantIntOp::create(
                        b, AccumulatorLayout::columnOffset(i), 64)),
            2 * c.elementBytes());
      }
    });
  }
  b.setInsertionPointToEnd(entry);
  gpu::ReturnOp::create(b);
  return func;
}
