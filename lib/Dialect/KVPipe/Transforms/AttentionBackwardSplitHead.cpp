//===- AttentionBackwardSplitHead.cpp - backward consumers, head dim > 128 -===//
//
// At head dims 192 and 256 a warpgroup cannot hold dK and dV of 64 keys
// (2 x 64 x 256 fp32 are 256 registers a thread). FA3's sm_90 backward
// (hopper/flash_bwd_launch_template.h: 3 warpgroups and 96 keys at 192, 2
// and 80 at 256, dKV_swapAB) splits the head dim instead, and so do these
// consumers (docs/backward.md, "Head dims 192 and 256"). Warpgroup c of W,
// per Q block i of 64 queries:
//
//   S = Q_i K_c^T, dP = dO_i V_c^T      its 32 keys (SS, N = 32)
//   P = exp2(S c - lse), dS = P (dP - delta)   rows queries, as the forward
//   P, dS -> buffer i % 2, column block c  (store_fragment; all meet)
//   dV^T_c += dO_i^T P, dK^T_c += Q_i^T dS  its D / W head-dim rows, all
//                                            block_n keys (SS, MN-major A, B)
//   dQ_i[:, its columns] = dS K            a column block (64, or kW where
//                                            64-column staging tiles do not
//                                            fit) at a time, staged and
//                                            bulk-reduced (with dq_atomics:
//                                            64 columns, added from
//                                            registers)
//
// and in the epilogue dK^T and dV^T are stored transposed (stmatrix .trans)
// into the K and V tiles as rows of keys, for the TMA stores of its column
// blocks. Every tile is in 64-byte swizzle spans (kW = 32), the width of a
// warpgroup's keys in P and dS, so that each wgmma reads both operands in
// one swizzle.
//
//===----------------------------------------------------------------------===//

#include "BackwardBuilder.h"
#include "Fragment.h"

#include "kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace kvpipe;
using kvpipe::detail::BackwardBuilder;

Value BackwardBuilder::splitHeadMaskNeeded(Value qRow, Value firstKey) {
  // Only a tile crossing seq_q, seq_kv or a bound of the Q block's rows
  // needs the mask (a uniform branch): the first row has the lowest right
  // bound, the last row the highest left bound.
  Value lastKey = arith::AddIOp::create(b, firstKey, index(kW - 1));
  Value needed = arith::OrIOp::create(
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::ugt,
                            arith::AddIOp::create(b, qRow, index(kBlockM)),
                            seqQ),
      arith::CmpIOp::create(b, arith::CmpIPredicate::uge, lastKey, seqKV));
  if (c.causal && !bounds)
    needed = arith::OrIOp::create(
        b, needed,
        arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, lastKey, qRow));
  if (bounds && c.masksRight())
    needed = arith::OrIOp::create(
        b, needed,
        arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, lastKey,
                              bounds->lastKeyOf(b, qRow)));
  if (bounds && c.masksLeft())
    needed = arith::OrIOp::create(
        b, needed,
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::slt, firstKey,
            bounds->firstKeyOf(
                b, arith::AddIOp::create(b, qRow, index(kBlockM - 1)))));
  return needed;
}

Value BackwardBuilder::splitHeadValid(Value qRow, Value firstKey) {
  int64_t n = kW / 2;
  Fragment frag(b, n);
  auto i32Vec = VectorType::get({n}, b.getI32Type());
  Value keys = arith::AddIOp::create(
      b,
      vector::BroadcastOp::create(
          b, i32Vec, toI32(arith::AddIOp::create(b, firstKey, threadColumn))),
      frag.columnOffsets());
  Value queries = frag.perRow(toI32(queryRow0), toI32(queryRow1));
  auto splat = [&](Value v) {
    return vector::BroadcastOp::create(b, i32Vec, toI32(v));
  };
  Value valid = arith::AndIOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::slt, queries, splat(seqQ)),
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, keys, splat(seqKV)));
  if (c.causal && !bounds)
    valid = arith::AndIOp::create(
        b, valid,
        arith::CmpIOp::create(b, arith::CmpIPredicate::sle, keys, queries));
  // The forward's predicate: firstKeyOf(m) <= n <= lastKeyOf(m).
  if (bounds && c.masksRight())
    valid = arith::AndIOp::create(
        b, valid,
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::sle, keys,
            frag.perRow(toI32(bounds->lastKeyOf(b, queryRow0)),
                        toI32(bounds->lastKeyOf(b, queryRow1)))));
  if (bounds && c.masksLeft())
    valid = arith::AndIOp::create(
        b, valid,
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::sge, keys,
            frag.perRow(toI32(bounds->firstKeyOf(b, queryRow0)),
                        toI32(bounds->firstKeyOf(b, queryRow1)))));
  return valid;
}

void BackwardBuilder::buildSplitHeadConsumer(Value consumer) {
  const int64_t numWarpgroups = c.consumerWarpgroups;
  // This warpgroup's head-dim rows of dK^T and dV^T, in wgmma M blocks of 64
  // (kW columns of the tiles each 64 / kW column blocks), and its column
  // blocks of dQ. V's rows (value_head_dim) are split the same way when
  // their blocks divide among the warpgroups; otherwise (192/128: two
  // blocks, three warpgroups) warpgroup c < value_head_dim / 64 has block c
  // and the others none (`hasDV`, uniform in the warpgroup).
  const int64_t tilesPerRowBlock = 64 / kW;
  const int64_t kRowBlocks = c.headDim / numWarpgroups / 64;
  const int64_t vBlocksTotal = c.valueHeadDim / 64;
  const bool vSplitEvenly = vBlocksTotal % numWarpgroups == 0;
  const int64_t vRowBlocks = vSplitEvenly ? vBlocksTotal / numWarpgroups : 1;
  assert(c.headDim % (64 * numWarpgroups) == 0 &&
         (vSplitEvenly || vBlocksTotal < numWarpgroups) &&
         "AttentionConfig's head dims split into 64-row blocks per warpgroup");
  // dQ's column blocks: dqColumns wide (a multiple of kW, so that a block
  // is whole column blocks of the K tile), dqBlocks of them a warpgroup.
  const int64_t dqColumns = c.backwardSplitHeadDQColumns();
  const int64_t dqTilesPerBlock = dqColumns / kW;
  const int64_t dqBlocks = c.headDim / numWarpgroups / dqColumns;
  // S and dP: 64 queries x kW keys; dK^T, dV^T: 64 head-dim rows x block_n.
  auto sType = VectorType::get({kW / 2}, b.getF32Type());
  auto gradType = VectorType::get({c.blockN / 2}, b.getF32Type());
  auto dqType = VectorType::get(
      {AccumulatorLayout::elementsPerThread(dqColumns)}, b.getF32Type());

  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value t = arith::RemUIOp::create(b, tid, index(128));
  Value warp = arith::DivUIOp::create(b, t, index(32));
  Value lane = arith::RemUIOp::create(b, t, index(32));
  Value elected = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, t, index(0));
  Value barrierId = toI32(arith::AddIOp::create(
      b, consumer, index(AttentionConfig::kEpilogueBarriers)));
  Value consumersBarrier = i32(AttentionConfig::kBackwardConsumersBarrier);
  int64_t consumerThreads = 128 * numWarpgroups;
  Value turn;
  if (c.deterministic && !c.causal)
    turn = dqTurn(Value(), consumer);

  // This warpgroup's keys: rows [kW c, kW c + kW) of the K and V tiles.
  Value keyOffset = arith::MulIOp::create(b, consumer, index(kW));
  Value firstKey = arith::AddIOp::create(b, kvRow0, keyOffset);
  Value sKc = buildTileView(b, sK, {b.getIndexAttr(0), keyOffset, b.getIndexAttr(0)},
                            {c.qkBlocks(), kW, kW});
  Value sVc = buildTileView(b, sV, {b.getIndexAttr(0), keyOffset, b.getIndexAttr(0)},
                            {c.vBlocks(), kW, kW});
  Value hasDV = vSplitEvenly
                    ? Value()
                    : Value(arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                                  consumer, index(vBlocksTotal)));
  // `body` where this warpgroup has rows of dV^T (a uniform branch when
  // not every warpgroup has).
  auto withDV = [&](function_ref<void()> body) {
    if (!hasDV)
      return body();
    auto ifDV = scf::IfOp::create(b, hasDV, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifDV.thenBlock());
    body();
  };
  Value threadRow = arith::AddIOp::create(
      b, arith::MulIOp::create(b, warp, index(AccumulatorLayout::kRowsPerWarp)),
      arith::DivUIOp::create(b, lane, index(AccumulatorLayout::kLanesPerRow)));
  threadColumn = arith::MulIOp::create(
      b, arith::RemUIOp::create(b, lane, index(AccumulatorLayout::kLanesPerRow)),
      index(AccumulatorLayout::kColumnsPerLane));
  // The first of this warpgroup's tile column blocks in the head dims.
  Value firstKRowTile = arith::MulIOp::create(
      b, consumer, index(kRowBlocks * tilesPerRowBlock));
  Value firstVRowTile = arith::MulIOp::create(
      b, consumer, index(vRowBlocks * tilesPerRowBlock));
  Value firstDQTile = arith::MulIOp::create(
      b, consumer, index(dqBlocks * dqTilesPerBlock));
  // The dQ staging tile: one column block of 64 x dqColumns fp32 in
  // fragment order (none when dQ is reduced from registers).
  Value sDQc;
  if (!c.backwardDQFromRegisters())
    sDQc = shared.view(
        b,
        arith::AddIOp::create(
            b, index(c.backwardDQOffset()),
            arith::MulIOp::create(b, consumer,
                                  index(c.backwardDQTileBytes()))),
        MemRefType::get({kBlockM * dqColumns}, b.getF32Type(),
                        MemRefLayoutAttrInterface(),
                        gpu::AddressSpaceAttr::get(
                            ctx, gpu::AddressSpace::Workgroup)));

  ConsumerWaitOp::create(b, pipeKV, nullptr);
  Value zero = arith::ConstantOp::create(
      b, gradType, DenseElementsAttr::get(gradType, 0.0f));
  SmallVector<Value> inits = {pipeQ, pipeDO};
  inits.append(vRowBlocks + kRowBlocks, zero);

  auto loop = scf::ForOp::create(b, qBegin, qEnd, index(1), inits);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value stateQ = loop.getRegionIterArg(0), stateDO = loop.getRegionIterArg(1);
    SmallVector<Value> dVT(loop.getRegionIterArgs().slice(2, vRowBlocks));
    SmallVector<Value> dKT(
        loop.getRegionIterArgs().slice(2 + vRowBlocks, kRowBlocks));
    Value qBlock = loop.getInductionVar();
    Value qRow = arith::MulIOp::create(b, qBlock, index(kBlockM));
    queryRow0 = arith::AddIOp::create(b, qRow, threadRow);
    queryRow1 = arith::AddIOp::create(
        b, queryRow0, index(AccumulatorLayout::kRowHalfDistance));
    // S = Q_i K_c^T and dP = dO_i V_c^T.
    Value qTile = buildSlotWait(b, sQ, stateQ, {c.qkBlocks(), kBlockM, kW});
    Value s = WarpgroupMmaOp::create(b, sType, qTile, sKc, Value(), kSwizzle);
    Value doTile = buildSlotWait(b, sDO, stateDO, {c.vBlocks(), kBlockM, kW});
    Value dP = WarpgroupMmaOp::create(b, sType, doTile, sVc, Value(), kSwizzle);
    // The log-sum-exp and delta of the thread's two queries, loaded while
    // the GEMMs run (ptxas hoists loads above neither the waits nor the
    // mask's branch).
    Fragment frag(b, kW / 2);
    auto rowValues = [&](Value ring, Value state, BackwardParam values) {
      if (ring) {
        // From the statistics slot that came with the Q or dO slot.
        Value slot = statisticsSlot(ring, state);
        auto load = [&](int64_t rowHalf) -> Value {
          return memref::LoadOp::create(
              b, slot,
              ValueRange{arith::AddIOp::create(
                  b, threadRow,
                  index(rowHalf * AccumulatorLayout::kRowHalfDistance))});
        };
        return frag.perRow(load(0), load(1));
      }
      Value row0 = arith::AddIOp::create(b, rowBase, queryRow0);
      auto load = [&](Value row) -> Value {
        return LLVM::LoadOp::create(
            b, b.getF32Type(),
            element(b.getF32Type(), param(values), toI64(row)), 4);
      };
      return frag.perRow(
          load(row0),
          load(arith::AddIOp::create(
              b, row0, index(AccumulatorLayout::kRowHalfDistance))));
    };
    Value lse = rowValues(sLSE, stateQ, BackwardParam::LseLog2);
    Value delta = rowValues(sDelta, stateDO, BackwardParam::Delta);
    s = WarpgroupWaitOp::create(b, TypeRange{sType}, ValueRange{s}, 1)
            .getResult(0);
    // P = exp2(S c - lse_log2) and dS = P (dP - delta), as the keys-split
    // consumers compute P^T and dS^T (BackwardBuilder::buildProbabilities).
    auto at = [&] { return splitHeadIndices(qRow, firstKey); };
    Probabilities probs = buildProbabilities(
        s, lse, at,
        [&](Value scores) {
          return buildMaskedScores(
              b, scores, splitHeadMaskNeeded(qRow, firstKey),
              [&] { return splitHeadValid(qRow, firstKey); });
        },
        [&](ValueRange values, ArrayRef<Value> fills) {
          return maskValues(values, fills, splitHeadMaskNeeded(qRow, firstKey),
                            [&] { return splitHeadValid(qRow, firstKey); },
                            qRow, firstKey, kW, at);
        });
    Value p16 = probs.p16;
    dP = WarpgroupWaitOp::create(b, TypeRange{sType}, ValueRange{dP}, 0)
             .getResult(0);
    Value dS16 = packedTrunc(buildScoreGradient(
        probs, s, arith::SubFOp::create(b, dP, delta), at));

    // P and dS to this warpgroup's column block of buffer i % 2, visible to
    // the async proxy, and every warpgroup's written before any reads them.
    // A buffer is written again two Q blocks later, after every warpgroup
    // passed the barrier of the block between, by which it had retired the
    // wgmmas reading it (below: all retire within their Q block).
    OpFoldResult buffer = OpFoldResult(
        arith::RemUIOp::create(b, qBlock, index(2)));
    for (auto [value, tiles] : {std::pair{p16, sP}, std::pair{dS16, sDS}})
      StoreFragmentOp::create(
          b, value,
          buildTileView(b, tiles,
                        {buffer, OpFoldResult(consumer), b.getIndexAttr(0),
                         b.getIndexAttr(0)},
                        {kBlockM, kW}),
          kSwizzle);
    NVVM::FenceProxyOp::create(
        b, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_shared),
        NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
    NVVM::BarrierOp::create(b, Type(), consumersBarrier, i32(consumerThreads),
                            nullptr, Value());
    auto wholeBuffer = [&](Value tiles) {
      return buildTileView(b, tiles,
                           {buffer, b.getIndexAttr(0), b.getIndexAttr(0),
                            b.getIndexAttr(0)},
                           {c.blockN / kW, kBlockM, kW});
    };
    Value pBuffer = wholeBuffer(sP), dsBuffer = wholeBuffer(sDS);
    // dV^T += dO_i^T P and dK^T += Q_i^T dS over all block_n keys: A is
    // the slot's column blocks of this warpgroup's head-dim rows read
    // MN-major, B the buffer read MN-major. dV^T first: dO's single slot is
    // released as soon as they retire.
    auto rowsOfSlot = [&](Value slot, Value firstTile, int64_t m) {
      return buildTileView(
          b, slot,
          {OpFoldResult(arith::AddIOp::create(
               b, firstTile, index(m * tilesPerRowBlock))),
           b.getIndexAttr(0), b.getIndexAttr(0)},
          {tilesPerRowBlock, kBlockM, kW});
    };
    auto issueDV = [&](int64_t m) -> Value {
      return WarpgroupMmaOp::create(b, gradType,
                                    rowsOfSlot(doTile, firstVRowTile, m),
                                    pBuffer, dVT[m], kSwizzle,
                                    /*transpose_b=*/true,
                                    /*transpose_a=*/true);
    };
    if (!hasDV) {
      for (int64_t m = 0; m < vRowBlocks; ++m)
        dVT[m] = issueDV(m);
    } else {
      // One block or none: the wait below retires it or nothing.
      auto ifDV = scf::IfOp::create(b, TypeRange{gradType}, hasDV,
                                    /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifDV.thenBlock());
      scf::YieldOp::create(b, issueDV(0));
      b.setInsertionPointToStart(ifDV.elseBlock());
      scf::YieldOp::create(b, dVT[0]);
      dVT[0] = ifDV.getResult(0);
    }
    for (int64_t m = 0; m < kRowBlocks; ++m)
      dKT[m] = WarpgroupMmaOp::create(b, gradType,
                                      rowsOfSlot(qTile, firstKRowTile, m),
                                      dsBuffer, dKT[m], kSwizzle,
                                      /*transpose_b=*/true,
                                      /*transpose_a=*/true);
    // dQ's column blocks: dS (K-major A) times dqTilesPerBlock column
    // blocks of K (B, MN-major). The first is issued before dV^T and dK^T
    // are retired.
    auto issueDQ = [&](int64_t j) -> Value {
      Value kBlock = buildTileView(
          b, sK,
          {OpFoldResult(arith::AddIOp::create(
               b, firstDQTile, index(j * dqTilesPerBlock))),
           b.getIndexAttr(0), b.getIndexAttr(0)},
          {dqTilesPerBlock, c.blockN, kW});
      return WarpgroupMmaOp::create(b, dqType, dsBuffer, kBlock, Value(),
                                    kSwizzle, /*transpose_b=*/true);
    };
    Value dQ = issueDQ(0);
    // In flight: dV^T, dK^T, dQ_0. Retire dV^T, release dO_i; retire dK^T,
    // release Q_i (dQ reads neither).
    auto dvWait = WarpgroupWaitOp::create(b, TypeRange(ValueRange(dVT)), dVT,
                                          kRowBlocks + 1);
    for (int64_t m = 0; m < vRowBlocks; ++m)
      dVT[m] = dvWait.getResult(m);
    Value nextDO = ConsumerReleaseOp::create(b, stateDO, elected, nullptr);
    auto dkWait = WarpgroupWaitOp::create(b, TypeRange(ValueRange(dKT)), dKT, 1);
    for (int64_t m = 0; m < kRowBlocks; ++m)
      dKT[m] = dkWait.getResult(m);
    Value nextQ = ConsumerReleaseOp::create(b, stateQ, elected, nullptr);

    // Each column block: retired (the next one issued first), staged in
    // fragment order once the previous reduction has read the staging tile,
    // and added to its range of dq_accum by one bulk reduction. In
    // deterministic mode only in this warpgroup's turn, and the reductions
    // complete before the turn is passed on.
    Value semaphore;
    if (c.deterministic) {
      semaphore = element(
          b.getI32Type(), param(BackwardParam::DQSemaphore),
          toI64(arith::AddIOp::create(
              b, arith::DivUIOp::create(b, rowBase, index(kBlockM)), qBlock)));
      buildOrderedTurnWait(semaphore,
                           c.causal ? dqTurn(qBlock, consumer) : turn, elected,
                           barrierId);
    }
    Value rowStart = arith::MulIOp::create(
        b, arith::AddIOp::create(b, rowBase, qRow), index(c.headDim));
    for (int64_t j = 0; j < dqBlocks; ++j) {
      Value next = j + 1 < dqBlocks ? issueDQ(j + 1) : Value();
      dQ = WarpgroupWaitOp::create(b, TypeRange{dqType}, ValueRange{dQ},
                                   next ? 1 : 0)
               .getResult(0);
      // A column block (whole groups of 8 columns) is a contiguous range
      // of the 64-row block in fragment order (AccumulatorLayout.h).
      auto blockStart = [&]() -> Value {
        return element(
            b.getF32Type(), param(BackwardParam::DQAccum),
            toI64(arith::AddIOp::create(
                b, rowStart,
                arith::MulIOp::create(
                    b,
                    arith::AddIOp::create(b, firstDQTile,
                                          index(j * dqTilesPerBlock)),
                    index(kBlockM * kW)))));
      };
      if (c.backwardDQFromRegisters()) {
        buildFragmentOrderReduceAdd(b, dQ, blockStart(), t);
        dQ = next;
        continue;
      }
      waitBulkReads(elected);
      NVVM::BarrierOp::create(b, Type(), barrierId, i32(128), nullptr,
                              Value());
      buildFragmentOrderStore(b, dQ, sDQc, t, 0);
      NVVM::FenceProxyOp::create(
          b, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_shared),
          NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
      NVVM::BarrierOp::create(b, Type(), barrierId, i32(128), nullptr,
                              Value());
      {
        auto reduce = scf::IfOp::create(b, elected, /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(reduce.thenBlock());
        buildBulkReduceAddF32(b, blockStart(), sDQc, c.backwardDQTileBytes());
        NVVM::CpAsyncBulkCommitGroupOp::create(b);
        if (c.deterministic && j + 1 == dqBlocks)
          NVVM::CpAsyncBulkWaitGroupOp::create(b, b.getI32IntegerAttr(0),
                                               UnitAttr());
      }
      dQ = next;
    }
    if (c.deterministic)
      buildOrderedTurnEnd(semaphore, elected, barrierId);
    SmallVector<Value> yields = {nextQ, nextDO};
    yields.append(dVT);
    yields.append(dKT);
    scf::YieldOp::create(b, yields);
  }

  // Epilogue: dK = scale dS^T Q and dV, transposed into the K and V tiles
  // as rows of keys (every warpgroup's dQ has read K and its dP its V rows:
  // all meet first), then the TMA stores of this warpgroup's column blocks.
  NVVM::BarrierOp::create(b, Type(), consumersBarrier, i32(consumerThreads),
                          nullptr, Value());
  Value scale = param(BackwardParam::Scale);
  // Rows [64 m, 64 m + 64) of this warpgroup's part of dK^T or dV^T, stored
  // transposed into their column blocks of `tile`.
  auto storeTransposed = [&](Value grad, Value tile, Value firstTile,
                             int64_t m) {
    Value view = buildTileView(
        b, tile,
        {OpFoldResult(arith::AddIOp::create(b, firstTile,
                                            index(m * tilesPerRowBlock))),
         b.getIndexAttr(0), b.getIndexAttr(0)},
        {tilesPerRowBlock, c.blockN, kW});
    StoreFragmentOp::create(b, packedTrunc(grad), view, kSwizzle,
                            /*transpose=*/true);
  };
  for (int64_t m = 0; m < kRowBlocks; ++m)
    storeTransposed(
        FragmentRescaleOp::create(b, gradType,
                                  loop.getResult(2 + vRowBlocks + m), scale,
                                  scale),
        sK, firstKRowTile, m);
  withDV([&] {
    for (int64_t m = 0; m < vRowBlocks; ++m)
      storeTransposed(loop.getResult(2 + m), sV, firstVRowTile, m);
  });
  if (c.varlen) {
    // Packed: this warpgroup's column blocks, every row below the
    // sequence's keys, by predicated stores.
    NVVM::BarrierOp::create(b, Type(), barrierId, i32(128), nullptr, Value());
    auto copyBlocks = [&](Value tile, BackwardParam gradient, int64_t dim,
                          Value firstTile, int64_t blocks) {
      Value view = buildTileView(
          b, tile,
          {OpFoldResult(firstTile), b.getIndexAttr(0), b.getIndexAttr(0)},
          {blocks, c.blockN, kW});
      storePackedGradient(view, gradient, dim, kvRow0,
                          arith::MulIOp::create(b, firstTile, index(kW)), t);
    };
    copyBlocks(sK, BackwardParam::DKMap, c.headDim, firstKRowTile,
               kRowBlocks * tilesPerRowBlock);
    withDV([&] {
      copyBlocks(sV, BackwardParam::DVMap, c.valueHeadDim, firstVRowTile,
                 vRowBlocks * tilesPerRowBlock);
    });
    ConsumerReleaseOp::create(b, pipeKV, elected, nullptr);
    return;
  }
  NVVM::FenceProxyOp::create(
      b, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_shared),
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  NVVM::BarrierOp::create(b, Type(), barrierId, i32(128), nullptr, Value());
  auto store = scf::IfOp::create(b, elected, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(store.thenBlock());
    // The TMA stores of `blocks` column blocks of `tile` from `firstTile`.
    auto storeBlocks = [&](Value tile, Value map, Value firstTile,
                           int64_t blocks) {
      for (int64_t col = 0; col < blocks; ++col) {
        Value tileIndex = arith::AddIOp::create(b, firstTile, index(col));
        Value block = buildTileView(
            b, tile, {OpFoldResult(tileIndex), b.getIndexAttr(0), b.getIndexAttr(0)},
            {c.blockN, kW});
        TMAStoreOp::create(
            b, block, map,
            ValueRange{batch, head, kvRow0,
                       arith::MulIOp::create(b, tileIndex, index(kW))});
      }
    };
    storeBlocks(sK, param(BackwardParam::DKMap), firstKRowTile,
                kRowBlocks * tilesPerRowBlock);
    withDV([&] {
      storeBlocks(sV, param(BackwardParam::DVMap), firstVRowTile,
                  vRowBlocks * tilesPerRowBlock);
    });
    NVVM::CpAsyncBulkCommitGroupOp::create(b);
    // The stores read the K/V tiles: they must finish before the CTA exits.
    NVVM::CpAsyncBulkWaitGroupOp::create(b, b.getI32IntegerAttr(0),
                                         b.getUnitAttr());
  }
  ConsumerReleaseOp::create(b, pipeKV, elected, nullptr);
}
