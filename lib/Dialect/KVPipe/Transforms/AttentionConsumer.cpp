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
#include "mlir/Dialect/Vector/IR/VectorOps.h"
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
  if (c.qStages > 1) {
    // Q is a ring: the warpgroup's rows are taken from the tile's slot
    // (buildConsumerTile); the output has its staging tile.
    sOw = warpgroupRows(sO, c.vBlocks());
  } else {
    sQw = warpgroupRows(sQ, c.qkBlocks());
    // The output is staged in the warpgroup's own Q rows, which every QK
    // wgmma of the tile has read and no later tile loads (one tile per CTA;
    // the persistent rewrite gives the output rows of their own): their
    // first value_head_dim columns (V and O have at most head_dim columns,
    // in blocks as wide as Q's, AttentionConfig::get).
    sOw = c.vBlocks() == c.qkBlocks() ? sQw : warpgroupRows(sQ, c.vBlocks());
  }
  forEachTile({pipeQ, pipeK, pipeV}, [&](ValueRange states) {
    return buildConsumerTile(states[0], states[1], states[2]);
  });
}

void KernelBuilder::fillRowsByCTA(
    int64_t rows, int64_t width,
    function_ref<void(Value row, Value column)> storeChunk) {
  // 16 B (8 elements) a thread at a time, the CTA's threads in turn.
  Value thread = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  auto loop = scf::ForOp::create(b, thread, index(rows * width / 8),
                                 index(c.threads()));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value i = loop.getInductionVar();
  Value row = arith::DivUIOp::create(b, i, index(width / 8));
  Value col = arith::MulIOp::create(
      b, arith::RemUIOp::create(b, i, index(width / 8)), index(8));
  storeChunk(row, col);
}

void KernelBuilder::fillOnesBlocks() {
  // Every V slot's last block holds ones (tensor_row_sums): O += P [V | 1]
  // sums P in O's last 8 columns. No producer writes it: the whole CTA
  // writes it before the pipelines exist (so that no state holds its slots,
  // which the protocol checker requires of a write outside them), and the
  // fence (fenceSharedWrites) makes the writes visible to the wgmmas' async
  // proxy before the CTA's barrier after the mbarriers' initialisation.
  auto chunkType = VectorType::get({8}, c.elementType);
  Value ones = arith::ConstantOp::create(
      b, chunkType,
      DenseElementsAttr::get(chunkType,
                             b.getFloatAttr(c.elementType, 1.0).getValue()));
  for (int64_t stage = 0; stage < c.kvStages; ++stage)
    fillRowsByCTA(c.blockN, c.vTileWidth(), [&](Value row, Value col) {
      vector::StoreOp::create(
          b, ones, sVWithOnes,
          ValueRange{index(stage), index(c.vBlocks()), row, col});
    });
}

void KernelBuilder::fillKeyOffsets() {
  // Row n: n in all 16 columns, so that the swizzle (which moves a row's
  // 16-byte chunks) cannot matter; exact in bf16/f16 up to 256 keys.
  auto chunkType = VectorType::get({8}, c.elementType);
  fillRowsByCTA(c.blockN, AttentionConfig::kKeyOffsetsWidth,
                [&](Value row, Value col) {
                  Value offset = arith::TruncFOp::create(
                      b, c.elementType,
                      arith::UIToFPOp::create(b, b.getF32Type(), toI32(row)));
                  vector::StoreOp::create(
                      b, vector::BroadcastOp::create(b, chunkType, offset),
                      sKeyOffsets, ValueRange{index(0), row, col});
                });
}

void KernelBuilder::fenceSharedWrites() {
  MLIRContext *ctx = b.getContext();
  NVVM::FenceProxyOp::create(
      b, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_shared),
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
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
  if (c.packGQA) {
    setPackedRows();
  } else {
    firstRow = arith::AddIOp::create(b, qBlockRow, qRows);
    row0 = arith::AddIOp::create(
        b, firstRow,
        arith::AddIOp::create(b, arith::MulIOp::create(b, warp, index(16)),
                              arith::DivUIOp::create(b, lane, index(4))));
    row1 = arith::AddIOp::create(b, row0, index(8));
  }
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
    lastRowFirstKey = firstKeyOf(
        arith::AddIOp::create(b, firstRow, index(c.packedQueries() - 1)));
  }
  if (c.qStages > 1) {
    // This tile's Q rows are in the slot stateQ points at.
    sQw = warpgroupRows(waitForSlot(sQ, stateQ), c.qkBlocks());
  } else {
    ConsumerWaitOp::create(b, stateQ, nullptr);
  }

  // An additive score_mod's bias goes to the raw scores times 1 / scale
  // (log2(e) over the kernel's scale * log2(e)): once per tile.
  inverseScale = c.scoreMod ? Value(arith::DivFOp::create(
                                  b, f32(M_LOG2E),
                                  param(AttentionParam::ScaleLog2)))
                            : Value();
  // A separable score bias's tile terms, once before the K/V loop.
  separableTile.reset();
  if (std::optional<SeparableBias> separable = separableBias())
    separableTile = buildSeparableTile(*separable);
  // Or the score_mod's multiplication by the scale, once on Q's rows.
  if (prescalesQuery())
    scaleQueryRows(queryScale());

  // The sinks' loads have the K/V loop to arrive in.
  tileSinks = loadRowSinks();

  Fragment oFrag(b, c.accumulatorColumns() / 2);
  Value negInf = f32(-INFINITY);
  Value zeroO = arith::ConstantOp::create(
      b, oFrag.type(), DenseElementsAttr::get(oFrag.type(), 0.0f));
  // With a constant row maximum the statistics start at it.
  Value initialMax = negInf;
  if (std::optional<double> max = staticRowMax())
    initialMax = f32(*max);
  RowStats init{initialMax, initialMax, f32(0.0), f32(0.0)};
  // The loop in the skeleton's order; --kvpipe-overlap-softmax
  // (OverlapSoftmax.cpp) software-pipelines it when `overlap_softmax`.
  SmallVector<Value> results =
      c.skipIdleWarpgroups ? buildKVLoopUnlessIdle(stateK, stateV, zeroO, init)
                           : buildKVLoop(stateK, stateV, zeroO, init);
  if (c.tensorRowSums) {
    // O's last 8 columns are the row sums (every column the same sum, in
    // every lane of the quad): elements D/2 (row half 0) and D/2 + 2 (row
    // half 1). The epilogues add the quad's 4 lanes: a quarter each, exact.
    int64_t d = c.valueHeadDim / 2;
    Value acc = results[2];
    auto quarter = [&](int64_t i) -> Value {
      Value sum = vector::ExtractOp::create(b, acc, ArrayRef<int64_t>{i});
      return arith::MulFOp::create(b, sum, f32(0.25));
    };
    results[5] = quarter(d);
    results[6] = quarter(d + 2);
    // O's columns (a shuffle: LLVM's shufflevector, which the conversion
    // to LLVM has, unlike a strided slice).
    results[2] = vector::ShuffleOp::create(
        b, acc, acc, llvm::to_vector(llvm::seq<int64_t>(0, d)));
  }
  // Every QK wgmma of this warpgroup has retired: its Q rows are free (for
  // the next tile's Q, or for staging this tile's output).
  Value nextQ = ConsumerReleaseOp::create(b, stateQ, elected, nullptr);
  if (separableTile) {
    // The statistics are of the scores shifted by the separable bias's row
    // terms R: the maxima of the unshifted ones are m - R.
    results[3] =
        arith::SubFOp::create(b, results[3], separableTile->rowTerm0);
    results[4] =
        arith::SubFOp::create(b, results[4], separableTile->rowTerm1);
  }
  if (c.splitKV)
    buildPartialEpilogue(results[2],
                         {results[3], results[4], results[5], results[6]});
  else
    buildEpilogue(results[2], {results[3], results[4], results[5], results[6]});
  return {nextQ, results[0], results[1]};
}

Value KernelBuilder::warpgroupRows(Value tile, int64_t blocks) {
  ArrayRef<int64_t> shape = cast<MemRefType>(tile.getType()).getShape();
  return memref::SubViewOp::create(
      b, tile,
      ArrayRef<OpFoldResult>{b.getIndexAttr(0), qRows, b.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(blocks), b.getIndexAttr(64),
                             b.getIndexAttr(shape[2])},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                             b.getIndexAttr(1)});
}

Value KernelBuilder::namedBarrier(int64_t first, Value consumer) {
  return toI32(arith::AddIOp::create(b, consumer, index(first)));
}

Value KernelBuilder::waitForSlot(Value ring, Value state) {
  // A slot is the ring's [blocks][block_n][W] without the stage dimension.
  return buildSlotWait(
      b, ring, state, cast<MemRefType>(ring.getType()).getShape().drop_front());
}

Value KernelBuilder::issueQK(Value kTile, Value init) {
  return WarpgroupMmaOp::create(
      b, VectorType::get({c.blockN / 2}, b.getF32Type()), sQw, kTile, init,
      c.qkSwizzleBytes(), /*transpose_b=*/false);
}

Value KernelBuilder::issuePV(Value p16, Value stateV, Value o) {
  Value vTile = waitForSlot(sV, stateV);
  if (c.tensorRowSums) // the slot with its ones block: O += P [V | 1]
    vTile = buildTileView(
        b, sVWithOnes,
        {Value(IndexOp::create(b, stateV)), b.getIndexAttr(0),
         b.getIndexAttr(0), b.getIndexAttr(0)},
        {c.vSlotBlocks(), c.blockN, c.vTileWidth()});
  return WarpgroupMmaOp::create(b, o.getType(), p16, vTile, o,
                                c.vSwizzleBytes(),
                                /*transpose_b=*/true);
}

Value KernelBuilder::retireAndRelease(Value &fragment, int64_t pending,
                                      Value state) {
  return buildRetireAndRelease(b, fragment, pending, state, elected);
}

Value KernelBuilder::rescale(Value o, Value alpha0, Value alpha1) {
  // alpha is exactly 1 for a row whose maximum did not move: with
  // `rescale_threshold` >= 0 most iterations of a long K/V loop skip the
  // multiplies (a warp-uniform branch).
  auto op = FragmentRescaleOp::create(b, o.getType(), o, alpha0, alpha1);
  op.setSkipUnit(c.rescaleThreshold >= 0);
  // Once --kvpipe-overlap-softmax made O the retire of the previous block's
  // P V, its lowering moves that retire behind the vote.
  op.setLateRetire(c.latePvRetire);
  return op;
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
  // The bias, where it is S's initial accumulator, after K's wait (with
  // which the QK step --kvpipe-overlap-softmax moves begins) and before the
  // wgmma.
  Value kTile = waitForSlot(sK, stateK);
  Value kvBlock = kvBlockAt(loop.getInductionVar());
  ScoreBias bias = scoreBias(kvBlock);
  Value s = issueQK(kTile, bias.init);
  Value nextK = retireAndRelease(s, 0, stateK);
  Softmax sm = softmax(s, kvBlock, current, bias);
  Value acc = rescale(loop.getRegionIterArg(2), sm.alpha0, sm.alpha1);
  acc = issuePV(sm.p16, stateV, acc);
  Value nextV = retireAndRelease(acc, 0, stateV);
  scf::YieldOp::create(b, ValueRange{nextK, nextV, acc, sm.stats.m0,
                                     sm.stats.m1, sm.stats.l0, sm.stats.l1});
  return SmallVector<Value>(loop.getResults());
}

SmallVector<Value> KernelBuilder::buildKVLoopUnlessIdle(Value k, Value v,
                                                        Value o,
                                                        RowStats stats) {
  // The tile's rows past seq_q fill the last warpgroups of its last Q block
  // (1024 rows in 192-row tiles: the sixth has 64). Those warpgroups only
  // drain the K/V slots, each of which every consumer releases; the others
  // take the ping-pong turns among themselves.
  if (c.pingpong) {
    Value rows = arith::SubIOp::create(b, seqQ, qBlockRow);
    Value withRows = arith::CeilDivUIOp::create(b, rows, index(64));
    TurnTakersOp::create(
        b, arith::MinUIOp::create(b, withRows, index(c.consumerWarpgroups)));
  }
  Value idle =
      arith::CmpIOp::create(b, arith::CmpIPredicate::uge, firstRow, seqQ);
  auto ifIdle = scf::IfOp::create(
      b, ValueRange{k, v, o, stats.m0, stats.m1, stats.l0, stats.l1}.getTypes(),
      idle, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  // Idle: each block's K and V slots waited for and released, nothing
  // computed; O stays 0 and the epilogue stores no row (all past seq_q).
  b.setInsertionPointToStart(ifIdle.thenBlock());
  auto drain =
      scf::ForOp::create(b, index(0), numKVBlocks, index(1), ValueRange{k, v});
  {
    OpBuilder::InsertionGuard inLoop(b);
    b.setInsertionPointToStart(drain.getBody());
    SmallVector<Value> next;
    for (Value state : drain.getRegionIterArgs()) {
      ConsumerWaitOp::create(b, state, nullptr);
      next.push_back(ConsumerReleaseOp::create(b, state, elected, nullptr));
    }
    scf::YieldOp::create(b, next);
  }
  scf::YieldOp::create(b, ValueRange{drain.getResult(0), drain.getResult(1), o,
                                     stats.m0, stats.m1, stats.l0, stats.l1});
  b.setInsertionPointToStart(ifIdle.elseBlock());
  scf::YieldOp::create(b, buildKVLoop(k, v, o, stats));
  return SmallVector<Value>(ifIdle.getResults());
}

Value KernelBuilder::mask(Value s, Value kvBlock) {
  return buildBlockMask(b, s, kvBlock,
                        {c.blockN, seqKV, c.causal, firstRow, row0, row1, lane,
                         firstRowLastKey, lastRowFirstKey, lastKey0, lastKey1,
                         firstKey0, firstKey1, c.maskBits});
}

KernelBuilder::ScoreBias KernelBuilder::scoreBias(Value kvBlock) {
  if (c.separableBiasMma && separableTile) {
    // The key term G n (n: the key's offset in the block) by one k-step
    // where d keeps one sign, zero where it changes (the region per
    // element there); Q K^T accumulates onto it.
    Value kvRow = arith::MulIOp::create(b, kvBlock, index(c.blockN));
    auto [oneSign, below] = separableSigns(kvRow);
    Type aType = separableTile->keyTermA.getType();
    Value a = arith::SelectOp::create(
        b, oneSign,
        arith::SelectOp::create(b, below, separableTile->keyTermA,
                                separableTile->keyTermANegated),
        arith::ConstantOp::create(b, aType,
                                  b.getZeroAttr(cast<ShapedType>(aType))));
    Value init = WarpgroupMmaOp::create(
        b, VectorType::get({c.blockN / 2}, b.getF32Type()), a, sKeyOffsets,
        Value(), AttentionConfig::kKeyOffsetsSwizzleBytes,
        /*transpose_b=*/false);
    return {init, Value(), Value(), oneSign, below};
  }
  std::optional<AdditiveScoreMod> additive =
      c.biasAccumulator && c.scoreMod ? getAdditiveScoreMod(*c.scoreMod)
                                      : std::nullopt;
  if (!additive)
    return {};
  // What modifiedScores adds to the scores, added to -0 (x + -0 = x, which
  // folds): the wgmma then accumulates Q K^T onto it.
  Value kvRow = arith::MulIOp::create(b, kvBlock, index(c.blockN));
  ModifierIndices at = modifierIndices(kvRow);
  auto fragType = VectorType::get({c.blockN / 2}, b.getF32Type());
  Value zero = vector::BroadcastOp::create(b, fragType, f32(-0.0));
  if (separableTile) {
    auto [init, shift0, shift1] = separableScores(zero, kvRow, at);
    return {init, shift0, shift1};
  }
  return {buildAdditiveScoreMod(b, *c.scoreMod, *additive, zero, inverseScale,
                                at),
          Value(), Value()};
}

KernelBuilder::Softmax KernelBuilder::softmax(Value s, Value kvBlock,
                                              const RowStats &stats,
                                              const ScoreBias &bias) {
  Value scaleLog2 = param(AttentionParam::ScaleLog2);
  Value rowShift0, rowShift1;
  if (c.scoreMod || c.maskMod)
    s = modifiedScores(s, kvBlock, scaleLog2, rowShift0, rowShift1, bias);
  else
    s = mask(s, kvBlock);

  OnlineSoftmaxStep step = buildOnlineSoftmaxStep(
      b, s, scaleLog2, {stats.m0, stats.m1, stats.l0, stats.l1}, c.elementType,
      c.exp2Emulation, c.rescaleThreshold, /*rowSums=*/!c.tensorRowSums,
      rowShift0, rowShift1, /*staticMax=*/staticRowMax().has_value());
  return {{step.stats.m0, step.stats.m1, step.stats.l0, step.stats.l1},
          step.alpha0,
          step.alpha1,
          step.p};
}

Value KernelBuilder::softmaxScaleLog2() {
  // An additive score_mod leaves the scores in the raw domain (plus bias /
  // scale): the plain kernel's scale applies. Another leaves them scaled,
  // divided by the constant its result is multiplied by, if any
  // (ScoreModScaling: the soft-cap), which the exponent multiplies back.
  if (!c.scoreMod || getAdditiveScoreMod(*c.scoreMod))
    return param(AttentionParam::ScaleLog2);
  return f32(M_LOG2E * getScoreModScaling(*c.scoreMod).outputFactor);
}

std::optional<double> KernelBuilder::staticRowMax() {
  // Only the scaled domain's scores (not an additive score_mod's raw ones,
  // which the runtime scale exponentiates) are what the region yields.
  if (!c.staticRowMax || !c.scoreMod || getAdditiveScoreMod(*c.scoreMod))
    return std::nullopt;
  ScoreModScaling scaling = getScoreModScaling(*c.scoreMod);
  std::optional<ScoreBounds> bounds = getScoreModBounds(*c.scoreMod, scaling);
  if (!bounds)
    return std::nullopt;
  // In the exponent (base 2): the scores span `range`. The largest P is
  // 2^top, the smallest 2^(top - range), and P goes to the P V wgmma in the
  // element type. With bf16 (f32's exponents): at most 2^60 (the f32 sums
  // of 2^24 keys and P V stay finite) and at least 2^-100 (normal, not
  // flushed by ex2.approx.ftz), so a range of at most 160. With f16: at
  // most 2^15 (65504 is its largest) and at least 2^-14 (its smallest
  // normal), so at most 29: a row whose scores all sit at the bound's low
  // end must keep its P, which a soft-cap's bound (cap log2(e) on either
  // side of 0) does only for caps up to 10; above, the running maximum.
  bool f16 = c.elementType.isF16();
  double largest = f16 ? 15.0 : 60.0, smallest = f16 ? 14.0 : 100.0;
  double exponentScale = M_LOG2E * scaling.outputFactor;
  double range = (bounds->high - bounds->low) * exponentScale;
  if (range > largest + smallest)
    return std::nullopt;
  double top = std::max(0.0, range - smallest);
  return bounds->high - top / exponentScale;
}

bool KernelBuilder::prescalesQuery() {
  return c.prescaledQ && c.scoreMod && !getAdditiveScoreMod(*c.scoreMod);
}

Value KernelBuilder::attentionScale() {
  return arith::MulFOp::create(b, param(AttentionParam::ScaleLog2),
                               f32(1.0 / M_LOG2E));
}

Value KernelBuilder::queryScale() {
  // As modifiedScores multiplies each score (buildScoreMod).
  return buildScoreModInputScale(b, attentionScale(),
                                 getScoreModScaling(*c.scoreMod));
}

void KernelBuilder::scaleQueryRows(Value scale) {
  // 16 B (8 elements) a thread at a time over the rows' blocks; the
  // elementwise product does not depend on the swizzle.
  ArrayRef<int64_t> shape = cast<MemRefType>(sQw.getType()).getShape();
  int64_t chunksPerRow = shape[2] / 8, chunksPerBlock = shape[1] * chunksPerRow;
  int64_t chunks = shape[0] * chunksPerBlock;
  // 64 rows of at least 16 elements: every thread takes the same count.
  assert(chunks % 128 == 0 && "a warpgroup's Q rows in whole rounds");
  auto chunkType = VectorType::get({8}, c.elementType);
  auto wideType = VectorType::get({8}, b.getF32Type());
  Value factor = vector::BroadcastOp::create(b, wideType, scale);
  Value thread = arith::AddIOp::create(
      b, arith::MulIOp::create(b, warp, index(32)), lane);
  for (int64_t first = 0; first < chunks; first += 128) {
    Value chunk = arith::AddIOp::create(b, thread, index(first));
    SmallVector<Value, 3> at = {
        arith::DivUIOp::create(b, chunk, index(chunksPerBlock)),
        arith::RemUIOp::create(
            b, arith::DivUIOp::create(b, chunk, index(chunksPerRow)),
            index(shape[1])),
        arith::MulIOp::create(
            b, arith::RemUIOp::create(b, chunk, index(chunksPerRow)),
            index(8))};
    Value q = vector::LoadOp::create(b, chunkType, sQw, at);
    Value scaled = arith::MulFOp::create(
        b, arith::ExtFOp::create(b, wideType, q), factor);
    vector::StoreOp::create(
        b, arith::TruncFOp::create(b, chunkType, scaled), sQw, at);
  }
  MLIRContext *ctx = b.getContext();
  NVVM::FenceProxyOp::create(
      b, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_shared),
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  NVVM::BarrierOp::create(
      b, Type(), namedBarrier(AttentionConfig::kEpilogueBarriers, consumerIndex),
      i32(128), nullptr, Value());
}

std::optional<SeparableBias>
kvpipe::detail::getForwardSeparableBias(const AttentionConfig &c) {
  if (!c.separableBias || !c.scoreMod || c.packGQA)
    return std::nullopt;
  return getSeparableBias(*c.scoreMod);
}

KernelBuilder::SeparableTile
KernelBuilder::buildSeparableTile(const SeparableBias &bias) {
  // The row term's origin is the warpgroup's first row, so that the
  // shifted scores near the diagonal stay small: d(row, firstRow) is a few
  // rows' distance (up to 2^23 keys, F kv would round the largest scores).
  // d is linear: one evaluation of the region gives it everywhere,
  // d(q, kv) = d(firstRow, firstRow) + alpha (q - firstRow) + beta (kv -
  // firstRow).
  ModifierIndices at{c.blockN / 2, batch, head, row0, row1, Value(),
                     seqQ,          seqKV, auxParams, c.auxTypes};
  SeparableTile tile{bias,    Value(), Value(), Value(), Value(),
                     Value(), Value(), Value()};
  std::tie(tile.factor, tile.origin) = buildSeparableBiasAt(
      b, *c.scoreMod, bias, inverseScale, at, firstRow, firstRow);
  tile.keyFactor = arith::MulFOp::create(b, tile.factor,
                                         f32(double(bias.keyCoefficient)));
  auto rowTerm = [&](Value row) {
    Value d = arith::AddIOp::create(
        b, tile.origin,
        arith::MulIOp::create(
            b, toI32(arith::SubIOp::create(b, row, firstRow)),
            arith::ConstantIntOp::create(b, bias.queryCoefficient, 32)));
    Value f = arith::SIToFPOp::create(b, b.getF32Type(), d);
    return arith::NegFOp::create(b, arith::MulFOp::create(b, tile.factor, f));
  };
  tile.rowTerm0 = rowTerm(row0);
  tile.rowTerm1 = rowTerm(row1);
  if (c.separableBiasMma) {
    tile.keyTermA = keyTermFactors(tile.keyFactor);
    tile.keyTermANegated =
        keyTermFactors(arith::NegFOp::create(b, tile.keyFactor));
  }
  return tile;
}

Value KernelBuilder::keyTermFactors(Value g) {
  // g = hi + mid + lo to 2^-24 relative (three roundings to 8 or 11 bits):
  // the products with n (exact) sum in the wgmma's f32 accumulator. In the
  // A fragment's layout (KVPipeDataOps.td, warpgroup_mma), element i of
  // thread t is column 8 (i / 4) + 2 (t % 4) + i % 2 of rows r and r + 8:
  // columns 0 and 1 are elements 0-3 of the quad's lane 0, column 2
  // elements 0 and 2 of its lane 1.
  Type f32Type = b.getF32Type();
  auto part = [&](Value x) { return arith::TruncFOp::create(b, c.elementType, x); };
  auto rest = [&](Value x, Value p) {
    return arith::SubFOp::create(b, x, arith::ExtFOp::create(b, f32Type, p));
  };
  Value hi = part(g);
  Value r = rest(g, hi);
  Value mid = part(r);
  Value lo = part(rest(r, mid));
  Value zero = arith::ConstantOp::create(b, c.elementType,
                                         b.getZeroAttr(c.elementType));
  Value quadLane = arith::RemUIOp::create(b, lane, index(4));
  Value first = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, quadLane,
                                      index(0));
  Value second = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, quadLane,
                                       index(1));
  Value even = arith::SelectOp::create(
      b, first, hi, arith::SelectOp::create(b, second, lo, zero));
  Value odd = arith::SelectOp::create(b, first, mid, zero);
  return vector::FromElementsOp::create(
      b, VectorType::get({8}, c.elementType),
      ValueRange{even, odd, even, odd, zero, zero, zero, zero});
}

std::pair<Value, Value> KernelBuilder::separableSigns(Value kvRow) {
  const SeparableTile &terms = *separableTile;
  int64_t alpha = terms.bias.queryCoefficient, beta = terms.bias.keyCoefficient;
  auto i32 = [&](int64_t v) { return arith::ConstantIntOp::create(b, v, 32); };
  // d over the warpgroup's rows and the block's keys: linear, so its
  // extremes are at the corners; d(firstRow, kvRow) from the tile's origin.
  Value corner = arith::AddIOp::create(
      b, terms.origin,
      arith::MulIOp::create(
          b, toI32(arith::SubIOp::create(b, kvRow, firstRow)), i32(beta)));
  int64_t rowSpan = alpha * 63, keySpan = beta * (c.blockN - 1);
  Value low = arith::AddIOp::create(
      b, corner, i32(std::min<int64_t>(0, rowSpan) +
                     std::min<int64_t>(0, keySpan)));
  Value high = arith::AddIOp::create(
      b, corner, i32(std::max<int64_t>(0, rowSpan) +
                     std::max<int64_t>(0, keySpan)));
  if (c.causal && alpha == -beta && alpha != 0) {
    // The causal mask keeps the keys kv <= q + diagonal, where d = origin +
    // alpha (q - kv) is at least origin - alpha diagonal (alpha > 0; at
    // most, alpha < 0). The scores of the keys it removes do not matter
    // (it sets them to -inf after the bias), so a block whose kept keys
    // give d one sign takes the one-sign path: the diagonal's blocks too
    // when d is the distance to the mask's diagonal (ALiBi).
    Value bound = arith::SubIOp::create(
        b, terms.origin,
        arith::MulIOp::create(b, diagonal ? toI32(diagonal) : i32(0),
                              i32(alpha)));
    if (alpha > 0)
      low = arith::MaxSIOp::create(b, low, bound);
    else
      high = arith::MinSIOp::create(b, high, bound);
  }
  Value below = arith::CmpIOp::create(b, arith::CmpIPredicate::sge, low,
                                      i32(0));
  Value above = arith::CmpIOp::create(b, arith::CmpIPredicate::sle, high,
                                      i32(0));
  return {arith::OrIOp::create(b, below, above), below};
}

std::tuple<Value, Value, Value>
KernelBuilder::separableScores(Value s, Value kvRow,
                               const ModifierIndices &at,
                               const ScoreBias &mmaBias) {
  const SeparableTile &terms = *separableTile;
  const SeparableBias &bias = terms.bias;
  // The scores are kept shifted by R(row) = -F d(row, firstRow) throughout
  // the tile (a softmax is the same on rows shifted by a constant; the
  // log-sum-exp subtracts it): with d = alpha q + beta kv + u, the shifted
  // score raw + F |d| + R is, in a block where d keeps one sign sigma,
  //   raw + G (kv - firstRow) + (sigma < 0 ? 2 R : 0),  G = sigma F beta:
  // a key term (one FMA per element: kv is the thread's first column plus
  // a constant) and a row term; elsewhere the region's bias per element
  // plus R.
  // With the key term from the wgmma (scoreBias), its signs; else here.
  auto [oneSign, below] = mmaBias.oneSign
                              ? std::pair{mmaBias.oneSign, mmaBias.below}
                              : separableSigns(kvRow);
  Type f32Type = b.getF32Type();
  auto ifSign = scf::IfOp::create(
      b, TypeRange{s.getType(), f32Type, f32Type}, oneSign,
      /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifSign.thenBlock());
  {
    Value g = arith::SelectOp::create(
        b, below, terms.keyFactor, arith::NegFOp::create(b, terms.keyFactor));
    // G times the key's offset from the lane's first column per element,
    // or (separable_bias_mma) from the block's first key, in S already.
    Value scores = s, firstKey = kvRow;
    if (!mmaBias.oneSign) {
      scores = buildColumnOffsetTerm(b, s, g);
      firstKey = at.firstColumn;
    }
    Value keyOffset = arith::SIToFPOp::create(
        b, f32Type, toI32(arith::SubIOp::create(b, firstKey, firstRow)));
    Value keyShift = arith::MulFOp::create(b, g, keyOffset);
    SmallVector<Value, 3> yielded = {scores};
    for (Value rowTerm : {terms.rowTerm0, terms.rowTerm1}) {
      Value twice = arith::AddFOp::create(b, rowTerm, rowTerm);
      yielded.push_back(arith::AddFOp::create(
          b, keyShift, arith::SelectOp::create(b, below, f32(0.0), twice)));
    }
    scf::YieldOp::create(b, yielded);
  }
  b.setInsertionPointToStart(ifSign.elseBlock());
  scf::YieldOp::create(
      b, ValueRange{buildAdditiveScoreMod(b, *c.scoreMod, bias.additive, s,
                                          inverseScale, at),
                    terms.rowTerm0, terms.rowTerm1});
  return {ifSign.getResult(0), ifSign.getResult(1), ifSign.getResult(2)};
}

ModifierIndices KernelBuilder::modifierIndices(Value kvRow) {
  // With pack_gqa each row is a query head of its own (setPackedRows).
  ModifierIndices at{c.blockN / 2, batch, rowHead0 ? rowHead0 : head, row0, row1,
                     arith::AddIOp::create(
                         b, kvRow,
                         arith::MulIOp::create(
                             b, arith::RemUIOp::create(b, lane, index(4)),
                             index(2))),
                     seqQ, seqKV, auxParams, c.auxTypes};
  at.head1 = rowHead1;
  return at;
}

Value KernelBuilder::modifiedScores(Value s, Value kvBlock, Value &scaleLog2,
                                    Value &rowShift0, Value &rowShift1,
                                    const ScoreBias &bias) {
  Value kvRow = arith::MulIOp::create(b, kvBlock, index(c.blockN));
  ModifierIndices at = modifierIndices(kvRow);
  if (bias.oneSign) {
    // The key term is in S where d keeps one sign (separable_bias_mma).
    std::tie(s, rowShift0, rowShift1) = separableScores(s, kvRow, at, bias);
  } else if (bias.init) {
    // The bias is in S already (scoreBias); a separable one's row terms
    // still go to the softmax.
    rowShift0 = bias.rowShift0;
    rowShift1 = bias.rowShift1;
  } else if (separableTile) {
    // Off the diagonal, the bias's key term per element and its row term
    // in the softmax's shifts (separableScores).
    std::tie(s, rowShift0, rowShift1) = separableScores(s, kvRow, at);
  } else if (std::optional<AdditiveScoreMod> additive =
                 c.scoreMod ? getAdditiveScoreMod(*c.scoreMod)
                            : std::nullopt) {
    // score + bias, exponentiated as (s + bias / scale) * scale: the raw
    // domain of the plain kernel, scaleLog2 unchanged.
    s = buildAdditiveScoreMod(b, *c.scoreMod, *additive, s, inverseScale, at);
  } else if (c.scoreMod) {
    // FlexAttention's score_mod sees the scaled score; the softmax then
    // exponentiates in base 2 what is already scaled. Constant factors at
    // the region's ends fold into the scale's multiplication and the
    // exponent's (softmaxScaleLog2): soft-capping's two multiplications.
    // With Q's rows pre-scaled (queryScale) the scores are the region's
    // input as they are.
    Value scale = prescalesQuery() ? Value() : attentionScale();
    ScoreModScaling scaling = getScoreModScaling(*c.scoreMod);
    s = buildScoreMod(b, *c.scoreMod, s, scale, at, &scaling);
    scaleLog2 = softmaxScaleLog2();
  }
  // The built-in masks after the score_mod, so that a masked score is -inf
  // whatever the region makes of it.
  s = mask(s, kvBlock);
  if (!c.maskMod)
    return s;
  // Per element only where the shape does not prove every key of the block
  // kept for the warpgroup's rows (a uniform branch): 64 queries, or with
  // pack_gqa the query positions its rows pack.
  Value lastRow =
      arith::AddIOp::create(b, firstRow, index(c.packedQueries() - 1));
  Value lastKey = arith::AddIOp::create(b, kvRow, index(c.blockN - 1));
  Value allKept =
      maskShape->buildAllKept(b, firstRow, lastRow, kvRow, lastKey);
  auto ifMask = scf::IfOp::create(b, TypeRange{s.getType()}, allKept,
                                  /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifMask.thenBlock());
  scf::YieldOp::create(b, s);
  b.setInsertionPointToStart(ifMask.elseBlock());
  scf::YieldOp::create(b, buildMaskMod(b, *c.maskMod, s, at));
  return ifMask.getResult(0);
}

std::optional<SoftmaxSinks> KernelBuilder::loadRowSinks() {
  if (!c.sinks || c.splitKV)
    return std::nullopt;
  // One f32 per query head; the rows of a packed tile have heads of their
  // own (pack_gqa), the others share the tile's.
  auto logitOf = [&](Value rowHead) -> Value {
    Value address = LLVM::GEPOp::create(
        b, LLVM::LLVMPointerType::get(ctx, 1), b.getF32Type(),
        param(AttentionParam::Sinks),
        ValueRange{arith::IndexCastOp::create(b, b.getI64Type(), rowHead)});
    return arith::MulFOp::create(
        b, LLVM::LoadOp::create(b, b.getF32Type(), address),
        f32(M_LOG2E));
  };
  Value logit0 = logitOf(rowHead0 ? rowHead0 : head);
  Value logit1 = rowHead1 ? logitOf(rowHead1) : logit0;
  return SoftmaxSinks{softmaxScaleLog2(), logit0, logit1};
}

void KernelBuilder::buildEpilogue(Value acc, const RowStats &state) {
  if (c.varlen)
    return buildVarlenEpilogue(acc, state);
  const SoftmaxSinks *sinks = tileSinks ? &*tileSinks : nullptr;
  NormalizedOutput out = buildNormalizedOutput(
      b, acc, {state.m0, state.m1, state.l0, state.l1}, c.elementType, sinks);
  // Stage O in this warpgroup's staging rows (sOw: its Q rows, see
  // buildConsumer), then one thread stores it with TMA (which clips the rows
  // past seq_q).
  Value barrierId =
      namedBarrier(AttentionConfig::kEpilogueBarriers, consumerIndex);
  if (c.packGQA)
    buildStagedStore(b, out.o,
                     {sOw, barrierId, elected, param(AttentionParam::OMap),
                      {batch, kvHead, firstRow, index(0)}, c.vSwizzleBytes(),
                      c.packGQA});
  else
    buildStagedStore(b, out.o,
                     {sOw, barrierId, elected, param(AttentionParam::OMap),
                      {batch, head, firstRow}, c.vSwizzleBytes()});
  // A row that saw no key gets lse = +inf (flash-attn's convention, which a
  // backward pass relies on); only masks anchored elsewhere than top-left,
  // windows and per-batch lengths leave rows without keys when seq_kv > 0.
  buildLogSumExpStore(
      b, {param(AttentionParam::Lse), softmaxScaleLog2(),
          state.m0, state.m1, out.sum0, out.sum1, row0, row1, lane, batch,
          headsQ, rowHead0 ? rowHead0 : head, seqQ,
          /*infiniteWithoutKeys=*/static_cast<bool>(diagonal) ||
              c.slidingWindow || c.kvLengths || c.maskMod,
          rowHead1, rowUsed0, rowUsed1, /*rowStart=*/nullptr,
          /*rowCount=*/nullptr, sinks});
}
