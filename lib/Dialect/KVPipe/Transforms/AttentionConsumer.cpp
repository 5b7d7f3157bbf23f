//===- AttentionConsumer.cpp - the consumer side of an attention kernel ---===//
//
// The consumer warpgroups of the generated FlashAttention kernel's skeleton:
// per tile, S = Q K^T (wgmma SS), the online softmax in registers from the
// fragment ops (exp2 with the scale folded into one FMA, masks only on the
// blocks that need them), O += P V (wgmma RS), and the epilogue. The
// overlap of the softmax with the GEMMs (OverlapSoftmax.cpp) and the turns
// between consumer warpgroups (PingPongSchedule.cpp) are rewrites of this
// skeleton.
//
//===----------------------------------------------------------------------===//

#include "Fragment.h"
#include "KernelBuilder.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelParts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <cmath>

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::detail;

void KernelBuilder::buildConsumer() {
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value t = arith::RemUIOp::create(b, tid, index(128));
  warp = arith::DivUIOp::create(b, t, index(32));
  lane = arith::RemUIOp::create(b, t, index(32));
  elected = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, t, index(0));

  // This warpgroup's 64 rows of Q, and of the output staging tile.
  auto rowsOf = [&](Value tile, int64_t blocks) -> Value {
    ArrayRef<int64_t> shape = cast<MemRefType>(tile.getType()).getShape();
    return memref::SubViewOp::create(
        b, tile,
        ArrayRef<OpFoldResult>{b.getIndexAttr(0), qRows, b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(blocks), b.getIndexAttr(64),
                               b.getIndexAttr(shape[2])},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                               b.getIndexAttr(1)});
  };
  sQw = rowsOf(sQ, c.qkBlocks());
  // Without a staging tile of its own, the output goes to the warpgroup's
  // own Q rows: their first value_head_dim columns (V and O have at most
  // head_dim columns, in blocks as wide as Q's, AttentionConfig::get).
  if (c.persistent)
    sOw = rowsOf(sO, c.vBlocks());
  else if (c.vBlocks() == c.qkBlocks())
    sOw = sQw;
  else
    sOw = rowsOf(sQ, c.vBlocks());
  forEachTile({pipeQ, pipeK, pipeV}, [&](ValueRange states) {
    return buildConsumerTile(states[0], states[1], states[2]);
  });
  if (!c.persistent)
    return;
  // The last tile's output store must finish reading shared memory before
  // the CTA exits.
  auto last = scf::IfOp::create(b, elected, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(last.thenBlock());
  NVVM::CpAsyncBulkWaitGroupOp::create(b, b.getI32IntegerAttr(0),
                                       b.getUnitAttr());
}

SmallVector<Value> KernelBuilder::buildConsumerTile(Value stateQ, Value stateK,
                                                    Value stateV) {
  // A persistent causal tile's K/V block count comes from divisions of the
  // tile index. It used to be broadcast from lane 0 (as i32) in the hope of
  // keeping the K/V loop on the uniform datapath; the SASS showed no
  // difference (docs/performance.md v5), and the i32 round trip made the
  // consumer's trip count a value the protocol checker cannot prove equal to
  // the producer's (strict mode rejected these kernels).
  // The two rows of the fragments this thread holds.
  firstRow = arith::AddIOp::create(b, qBlockRow, qRows);
  row0 = arith::AddIOp::create(
      b, firstRow,
      arith::AddIOp::create(b, arith::MulIOp::create(b, warp, index(16)),
                            arith::DivUIOp::create(b, lane, index(4))));
  row1 = arith::AddIOp::create(b, row0, index(8));
  // The keys the masks leave to the rows, computed once per tile (the
  // top-left causal mask compares with the rows themselves).
  bool plainCausal = c.causal && !diagonal && !c.slidingWindow;
  if (c.masksRight() && !plainCausal) {
    lastKey0 = lastKeyOf(row0);
    lastKey1 = lastKeyOf(row1);
    firstRowLastKey = lastKeyOf(firstRow);
  }
  if (c.masksLeft()) {
    firstKey0 = firstKeyOf(row0);
    firstKey1 = firstKeyOf(row1);
    lastRowFirstKey =
        firstKeyOf(arith::AddIOp::create(b, firstRow, index(63)));
  }
  ConsumerWaitOp::create(b, stateQ, nullptr);

  Fragment oFrag(b, c.valueHeadDim / 2);
  Value negInf = f32(-INFINITY);
  Value zeroO = arith::ConstantOp::create(
      b, oFrag.type(), DenseElementsAttr::get(oFrag.type(), 0.0f));
  RowStats init{negInf, negInf, f32(0.0), f32(0.0)};
  // The loop in the skeleton's order; --kvpipe-overlap-softmax
  // (OverlapSoftmax.cpp) software-pipelines it when `overlap_softmax`.
  SmallVector<Value> results = buildKVLoop(stateK, stateV, zeroO, init);
  // Every QK wgmma of this warpgroup has retired: its Q rows are free (for
  // the next tile's Q, or for staging this tile's output).
  Value nextQ = ConsumerReleaseOp::create(b, stateQ, elected, nullptr);
  buildEpilogue(results[2], {results[3], results[4], results[5], results[6]});
  return {nextQ, results[0], results[1]};
}

Value KernelBuilder::namedBarrier(int64_t first, Value consumer) {
  return toI32(arith::AddIOp::create(b, consumer, index(first)));
}

Value KernelBuilder::waitForSlot(Value ring, Value state) {
  // A slot is the ring's [blocks][block_n][W] without the stage dimension.
  return buildSlotWait(
      b, ring, state, cast<MemRefType>(ring.getType()).getShape().drop_front());
}

Value KernelBuilder::issueQK(Value stateK) {
  Value kTile = waitForSlot(sK, stateK);
  return WarpgroupMmaOp::create(
      b, VectorType::get({c.blockN / 2}, b.getF32Type()), sQw, kTile, Value(),
      c.qkSwizzleBytes(), /*transpose_b=*/false);
}

Value KernelBuilder::issuePV(Value p16, Value stateV, Value o) {
  Value vTile = waitForSlot(sV, stateV);
  return WarpgroupMmaOp::create(b, o.getType(), p16, vTile, o,
                                c.vSwizzleBytes(),
                                /*transpose_b=*/true);
}

Value KernelBuilder::retireAndRelease(Value &fragment, int64_t pending,
                                      Value state) {
  return buildRetireAndRelease(b, fragment, pending, state, elected);
}

Value KernelBuilder::rescale(Value o, Value alpha0, Value alpha1) {
  return FragmentRescaleOp::create(b, o.getType(), o, alpha0, alpha1);
}

SmallVector<Value> KernelBuilder::buildKVLoop(Value k, Value v, Value o,
                                              RowStats stats) {
  // for j: S = Q K_j; retire; release K; softmax; O = O*alpha + P V_j;
  // retire; release V. Tensor cores idle during the softmax, until
  // --kvpipe-overlap-softmax rewrites the loop (the rewrite finds these steps
  // by the ops that delimit them: keep them in this order).
  auto loop = scf::ForOp::create(
      b, index(0), numKVBlocks, index(1),
      ValueRange{k, v, o, stats.m0, stats.m1, stats.l0, stats.l1});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value stateK = loop.getRegionIterArg(0), stateV = loop.getRegionIterArg(1);
  RowStats current{loop.getRegionIterArg(3), loop.getRegionIterArg(4),
                   loop.getRegionIterArg(5), loop.getRegionIterArg(6)};
  Value s = issueQK(stateK);
  Value nextK = retireAndRelease(s, 0, stateK);
  Softmax sm = softmax(s, kvBlockAt(loop.getInductionVar()), current);
  Value acc = rescale(loop.getRegionIterArg(2), sm.alpha0, sm.alpha1);
  acc = issuePV(sm.p16, stateV, acc);
  Value nextV = retireAndRelease(acc, 0, stateV);
  scf::YieldOp::create(b, ValueRange{nextK, nextV, acc, sm.stats.m0,
                                     sm.stats.m1, sm.stats.l0, sm.stats.l1});
  return SmallVector<Value>(loop.getResults());
}

Value KernelBuilder::mask(Value s, Value kvBlock) {
  Fragment sFrag(b, c.blockN / 2);
  auto i32Vec = VectorType::get({c.blockN / 2}, b.getI32Type());
  Value kvRow = arith::MulIOp::create(b, kvBlock, index(c.blockN));
  // Only a block that crosses seq_kv or a bound of one of this warpgroup's
  // rows (the diagonal when causal, the window's edges) needs masking: a
  // uniform branch skips it elsewhere. The first row has the lowest right
  // bound and the last row the highest left bound.
  Value blockEnd = arith::AddIOp::create(b, kvRow, index(c.blockN));
  Value needed =
      arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, blockEnd, seqKV);
  if (firstRowLastKey)
    needed = arith::OrIOp::create(
        b, needed,
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::sgt, blockEnd,
            arith::AddIOp::create(b, firstRowLastKey, index(1))));
  else if (c.causal)
    needed = arith::OrIOp::create(
        b, needed,
        arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, blockEnd,
                              arith::AddIOp::create(b, firstRow, index(1))));
  if (lastRowFirstKey)
    needed = arith::OrIOp::create(
        b, needed,
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, kvRow,
                              lastRowFirstKey));
  auto ifMask = scf::IfOp::create(b, TypeRange{s.getType()}, needed,
                                  /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifMask.elseBlock());
  scf::YieldOp::create(b, s);
  b.setInsertionPointToStart(ifMask.thenBlock());
  // Keys past seq_kv and, when causal, keys after the query become -inf.
  Value firstCol = arith::AddIOp::create(
      b, kvRow,
      arith::MulIOp::create(b, arith::RemUIOp::create(b, lane, index(4)),
                            index(2)));
  Value cols = arith::AddIOp::create(
      b, vector::BroadcastOp::create(b, i32Vec, toI32(firstCol)),
      sFrag.columnOffsets());
  Value valid = arith::CmpIOp::create(
      b, arith::CmpIPredicate::slt, cols,
      vector::BroadcastOp::create(b, i32Vec, toI32(seqKV)));
  // Keys after a row's last key (the diagonal, or the window's right edge)
  // and before its first key (the window's left edge) become -inf.
  if (lastKey0 || c.causal) {
    Value last = lastKey0 ? sFrag.perRow(toI32(lastKey0), toI32(lastKey1))
                          : sFrag.perRow(toI32(row0), toI32(row1));
    valid = arith::AndIOp::create(
        b, valid,
        arith::CmpIOp::create(b, arith::CmpIPredicate::sle, cols, last));
  }
  if (firstKey0) {
    Value first = sFrag.perRow(toI32(firstKey0), toI32(firstKey1));
    valid = arith::AndIOp::create(
        b, valid,
        arith::CmpIOp::create(b, arith::CmpIPredicate::sge, cols, first));
  }
  scf::YieldOp::create(
      b, ValueRange{arith::SelectOp::create(
             b, valid, s,
             vector::BroadcastOp::create(b, sFrag.type(), f32(-INFINITY)))});
  return ifMask.getResult(0);
}

KernelBuilder::Softmax KernelBuilder::softmax(Value s, Value kvBlock,
                                              const RowStats &stats) {
  Value scaleLog2 = param(AttentionParam::ScaleLog2);
  s = mask(s, kvBlock);

  OnlineSoftmaxStep step = buildOnlineSoftmaxStep(
      b, s, scaleLog2, {stats.m0, stats.m1, stats.l0, stats.l1}, c.elementType);
  return {{step.stats.m0, step.stats.m1, step.stats.l0, step.stats.l1},
          step.alpha0,
          step.alpha1,
          step.p};
}

void KernelBuilder::buildEpilogue(Value acc, const RowStats &state) {
  int64_t w = c.vTileWidth();
  Value sums[2], inv[2], partialSums[2] = {state.l0, state.l1};
  for (int half : {0, 1}) {
    sums[half] = QuadSumOp::create(b, b.getF32Type(), partialSums[half]);
    // A row without any key (seq_kv = 0) is all zeros, not NaN.
    Value positive = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT,
                                           sums[half], f32(0.0));
    inv[half] = arith::SelectOp::create(
        b, positive, arith::DivFOp::create(b, f32(1.0), sums[half]), f32(0.0));
  }
  Value o = FragmentRescaleOp::create(b, acc.getType(), acc, inv[0], inv[1]);
  Value o16 = arith::TruncFOp::create(
      b, VectorType::get({c.valueHeadDim / 2}, c.elementType), o);

  // Stage O in this warpgroup's rows of the staging tile (Q's, or its own
  // when persistent), then one thread stores it with TMA (which clips the
  // rows past seq_q). The generic-proxy writes must be visible to the async
  // proxy (fence) and complete in all 128 threads (the warpgroup's named
  // barrier) before the store reads them.
  Value barrierId =
      namedBarrier(AttentionConfig::kEpilogueBarriers, consumerIndex);
  if (c.persistent) {
    // The previous tile's store must have read the staging rows before they
    // are overwritten; only the thread that issued it can wait for it.
    auto previous = scf::IfOp::create(b, elected, /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(previous.thenBlock());
      NVVM::CpAsyncBulkWaitGroupOp::create(b, b.getI32IntegerAttr(0),
                                           b.getUnitAttr());
    }
    NVVM::BarrierOp::create(b, Type(), barrierId, i32(128), nullptr, Value());
  }
  StoreFragmentOp::create(b, o16, sOw, c.vSwizzleBytes());
  NVVM::FenceProxyOp::create(
      b, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_shared),
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  NVVM::BarrierOp::create(b, Type(), barrierId, i32(128), nullptr, Value());
  auto store = scf::IfOp::create(b, elected, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(store.thenBlock());
    Value oMap = param(AttentionParam::OMap);
    for (int64_t col = 0; col < c.vBlocks(); ++col) {
      Value tile =
          slot(sOw, {b.getIndexAttr(col), b.getIndexAttr(0), b.getIndexAttr(0)},
               {64, w});
      TMAStoreOp::create(b, tile, oMap,
                         ValueRange{batch, head, firstRow, index(col * w)});
    }
    NVVM::CpAsyncBulkCommitGroupOp::create(b);
    // The CTA's shared memory must outlive the store's reads (a persistent
    // CTA waits before reusing the rows, and once at its end).
    if (!c.persistent)
      NVVM::CpAsyncBulkWaitGroupOp::create(b, b.getI32IntegerAttr(0),
                                           b.getUnitAttr());
  }

  // Log-sum-exp, natural log: ln 2 * (m * c + log2 l), one lane per row.
  Value lse = param(AttentionParam::Lse);
  Value scaleLog2 = param(AttentionParam::ScaleLog2);
  auto ptrType = LLVM::LLVMPointerType::get(ctx, 1);
  Value null = LLVM::ZeroOp::create(b, ptrType);
  Value wanted = arith::AndIOp::create(
      b, LLVM::ICmpOp::create(b, LLVM::ICmpPredicate::ne, lse, null),
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                            arith::RemUIOp::create(b, lane, index(4)),
                            index(0)));
  auto write = scf::IfOp::create(b, wanted, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(write.thenBlock());
  Value rowBase = arith::MulIOp::create(
      b,
      arith::AddIOp::create(b, arith::MulIOp::create(b, batch, headsQ), head),
      seqQ);
  Value maxes[2] = {state.m0, state.m1}, rows[2] = {row0, row1};
  for (int half : {0, 1}) {
    Value inRange =
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, rows[half], seqQ);
    auto ifRow = scf::IfOp::create(b, inRange, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard rowGuard(b);
    b.setInsertionPointToStart(ifRow.thenBlock());
    Value value = arith::MulFOp::create(
        b,
        arith::AddFOp::create(b,
                              arith::MulFOp::create(b, maxes[half], scaleLog2),
                              math::Log2Op::create(b, sums[half])),
        f32(M_LN2));
    // A row that saw no key: +inf, so that exp(s - lse) is 0 (flash-attn's
    // convention, which a backward pass relies on), not -inf - -inf = NaN.
    // Only masks anchored elsewhere than top-left, windows and per-batch
    // lengths leave rows without keys when seq_kv > 0.
    if (diagonal || c.slidingWindow || c.kvLengths) {
      Value seen = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT,
                                         sums[half], f32(0.0));
      value = arith::SelectOp::create(b, seen, value, f32(INFINITY));
    }
    Value offset = arith::IndexCastOp::create(
        b, b.getI64Type(), arith::AddIOp::create(b, rowBase, rows[half]));
    Value addr = LLVM::GEPOp::create(b, ptrType, b.getF32Type(), lse,
                                     ValueRange{offset});
    LLVM::StoreOp::create(b, value, addr);
  }
}
