//===- AttentionKernelBuilder.cpp - generate an attention kernel ----------===//
//
// The FlashAttention forward kernel in kvpipe terms (FA3's structure,
// shared/docs/attention-design.md):
//
//   warpgroup 0, one thread      consumer warpgroups 1..W (64 Q rows each)
//   ---------------------------  -------------------------------------------
//   Q -> sQ         (pipe q)     wait q
//   for j: acquire k; K_j -> sK  for j: wait k; S = Q K_j^T (wgmma SS);
//          commit k; step k             retire; release k;
//          acquire v; V_j -> sV         mask, online softmax (exp2, FMA);
//          commit v; step v             wait v; O += P V_j (wgmma RS);
//                                       retire; release v
//                                epilogue: O /= l -> sQ rows -> TMA store;
//                                          log-sum-exp
//
// A slot is released only after the wgmma that read it retired
// (`kvpipe.warpgroup_wait`), which is what the protocol checker demands.
//
//===----------------------------------------------------------------------===//

#include "AttentionKernelBuilder.h"
#include "Fragment.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

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

namespace {

class KernelBuilder {
public:
  KernelBuilder(ImplicitLocOpBuilder &b, const AttentionConfig &config)
      : b(b), c(config), ctx(b.getContext()) {}

  gpu::GPUFuncOp build(StringRef name);

private:
  // Types.
  TensorMapType tensorMapType(int64_t rows) const {
    return TensorMapType::get(ctx, {1, 1, rows, AttentionConfig::kTileWidth},
                              c.elementType, AttentionConfig::kSwizzleBytes);
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

  // Scalars.
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

  /// A rank-reduced view of one slot (and column block) of a tile ring.
  Value slot(Value ring, ArrayRef<OpFoldResult> offsets,
             ArrayRef<int64_t> sizes);

  /// Sets the tile's values (qBlockRow, head, batch, kvHead, numKVBlocks).
  void setTile(Value qBlock, Value headIndex, Value batchIndex);
  /// Builds `body` once per tile of this CTA, carrying `states` through:
  /// for the CTA's own tile, or, when persistent, in a loop over the tiles
  /// the CTA takes.
  SmallVector<Value>
  forEachTile(ValueRange states,
              function_ref<SmallVector<Value>(ValueRange)> body);
  void buildProducer();
  /// One tile's Q and K/V loads; returns the advanced (q, k, v) states.
  SmallVector<Value> buildProducerTile(Value stateQ, Value stateK,
                                       Value stateV);
  void buildConsumer();
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
  /// Waits for K's slot and issues S = Q K^T (not retired); with
  /// `takeTurn`, waits for this warpgroup's turn after the slot is full.
  Value issueQK(Value stateK, bool takeTurn = false);
  /// Waits for V's slot and issues O += P V (not retired).
  Value issuePV(Value p16, Value stateV, Value o, bool takeTurn = false);
  /// The ping-pong schedule (no-ops without `pingpong`): a warpgroup waits
  /// for its turn before issuing wgmmas and passes the turn on after.
  void startTurns();
  void waitForTurn();
  void passTurn();
  /// Retires wgmma groups until `pending` are left; returns the fragment.
  Value retire(Value fragment, int64_t pending);
  Value rescale(Value o, Value alpha0, Value alpha1);
  Value mask(Value s, Value kvBlock);
  Softmax softmax(Value s, Value kvBlock, const RowStats &stats);
  /// The K/V loops from the states `k` and `v`; both return (k state,
  /// v state, O, m0, m1, l0, l1).
  SmallVector<Value> buildSimpleLoop(Value k, Value v, Value o, RowStats stats);
  SmallVector<Value> buildOverlappedLoop(Value k, Value v, Value o,
                                         RowStats stats);
  void buildEpilogue(Value acc, const RowStats &stats);

  ImplicitLocOpBuilder &b;
  const AttentionConfig &c;
  MLIRContext *ctx;

  // Kernel-wide values.
  SmallVector<Value> params;
  Value seqQ, seqKV, headsQ, numQBlocks, numTiles;
  Value sQ, sK, sV, sO, pipeQ, pipeK, pipeV;
  // The current tile.
  Value batch, head, kvHead, qBlockRow, numKVBlocks;
  // Consumer values: per thread, and (firstRow, row0, row1) per tile.
  Value consumerIndex, sQw, sOw, elected, qRows, lane, warp;
  Value firstRow, row0, row1;
};

Value KernelBuilder::slot(Value ring, ArrayRef<OpFoldResult> offsets,
                          ArrayRef<int64_t> sizes) {
  auto ringType = cast<MemRefType>(ring.getType());
  SmallVector<OpFoldResult> fullSizes, strides;
  int64_t dropped = ringType.getRank() - sizes.size();
  for (int64_t i = 0; i < ringType.getRank(); ++i) {
    fullSizes.push_back(b.getIndexAttr(i < dropped ? 1 : sizes[i - dropped]));
    strides.push_back(b.getIndexAttr(1));
  }
  auto resultType = memref::SubViewOp::inferRankReducedResultType(
      sizes, ringType, offsets, fullSizes, strides);
  return memref::SubViewOp::create(b, cast<MemRefType>(resultType), ring,
                                   offsets, fullSizes, strides);
}

gpu::GPUFuncOp KernelBuilder::build(StringRef name) {
  Type i32Type = b.getI32Type();
  SmallVector<Type> paramTypes = {
      tensorMapType(c.blockM()),
      tensorMapType(c.blockN),
      tensorMapType(c.blockN),
      tensorMapType(64),
      LLVM::LLVMPointerType::get(ctx, /*addressSpace=*/1),
      i32Type,
      i32Type,
      i32Type,
      b.getF32Type(),
      i32Type,
      i32Type};
  auto func =
      gpu::GPUFuncOp::create(b, name, b.getFunctionType(paramTypes, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  // setmaxnreg is honoured only under a register cap at entry: declaring the
  // block size and one CTA per SM gives ptxas that cap.
  func->setAttr(
      NVVM::NVVMDialect::getMaxntidAttrName(),
      b.getDenseI32ArrayAttr({static_cast<int32_t>(c.threads()), 1, 1}));
  func->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                b.getI32IntegerAttr(1));
  func->setAttr("kvpipe.attention_abi", getAttentionABI(ctx, name, c));

  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  params.assign(entry.getArguments().begin(), entry.getArguments().end());
  auto param = [&](AttentionParam p) {
    return params[static_cast<unsigned>(p)];
  };

  seqQ = toIndex(param(AttentionParam::SeqQ));
  seqKV = toIndex(param(AttentionParam::SeqKV));
  headsQ = toIndex(param(AttentionParam::HeadsQ));
  numQBlocks = arith::CeilDivUIOp::create(b, seqQ, index(c.blockM()));
  if (c.persistent) {
    numTiles =
        arith::MulIOp::create(b, arith::MulIOp::create(b, numQBlocks, headsQ),
                              toIndex(param(AttentionParam::Batch)));
  } else {
    // One tile per CTA: (Q block, head, batch) = blockIdx.
    setTile(gpu::BlockIdOp::create(b, gpu::Dimension::x),
            gpu::BlockIdOp::create(b, gpu::Dimension::y),
            gpu::BlockIdOp::create(b, gpu::Dimension::z));
  }

  // Shared memory: Q, then the K ring, then the V ring, from a 1024-byte
  // aligned start (the 128-byte swizzle repeats every 8 rows of 128 bytes,
  // and TMA and wgmma assume tiles start on such an atom).
  auto bytes = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                               MemRefLayoutAttrInterface(), workgroup());
  Value dynamicShared = gpu::DynamicSharedMemoryOp::create(b, bytes);
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, dynamicShared);
  Value pad = arith::RemUIOp::create(
      b,
      arith::SubIOp::create(
          b, index(AttentionConfig::kAlignmentSlack),
          arith::RemUIOp::create(b, base,
                                 index(AttentionConfig::kAlignmentSlack))),
      index(AttentionConfig::kAlignmentSlack));
  auto view = [&](int64_t offset, MemRefType type) -> Value {
    return memref::ViewOp::create(b, type, dynamicShared,
                                  arith::AddIOp::create(b, pad, index(offset)),
                                  ValueRange{});
  };
  int64_t w = AttentionConfig::kTileWidth;
  sQ = view(0, sharedType({c.headBlocks(), c.blockM(), w}));
  sK = view(c.kOffset(), sharedType({c.kvStages, c.headBlocks(), c.blockN, w}));
  sV = view(c.vOffset(), sharedType({c.kvStages, c.headBlocks(), c.blockN, w}));
  if (c.persistent)
    sO = view(c.oOffset(), sharedType({c.headBlocks(), c.blockM(), w}));

  pipeQ = CreateOp::create(b, pipelineType(1));
  pipeK = CreateOp::create(b, pipelineType(c.kvStages));
  pipeV = CreateOp::create(b, pipelineType(c.kvStages));
  for (Value pipe : {pipeQ, pipeK, pipeV})
    InitOp::create(b, pipe);

  Value warpgroup = WarpgroupIdOp::create(b, b.getIndexType());
  Value isProducer =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, warpgroup, index(0));
  auto roles = scf::IfOp::create(b, isProducer, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(roles.thenBlock());
    NVVM::SetMaxRegisterOp::create(
        b, b.getI32IntegerAttr(c.producerRegisters),
        NVVM::SetMaxRegisterActionAttr::get(
            ctx, NVVM::SetMaxRegisterAction::decrease));
    Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    Value leader =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tid, index(0));
    auto producer = scf::IfOp::create(b, leader, /*withElseRegion=*/false);
    b.setInsertionPointToStart(producer.thenBlock());
    buildProducer();

    b.setInsertionPointToStart(roles.elseBlock());
    NVVM::SetMaxRegisterOp::create(
        b, b.getI32IntegerAttr(c.consumerRegisters),
        NVVM::SetMaxRegisterActionAttr::get(
            ctx, NVVM::SetMaxRegisterAction::increase));
    consumerIndex = arith::SubIOp::create(b, warpgroup, index(1));
    qRows = arith::MulIOp::create(b, consumerIndex, index(64));
    buildConsumer();
  }
  gpu::ReturnOp::create(b);
  return func;
}

void KernelBuilder::setTile(Value qBlock, Value headIndex, Value batchIndex) {
  // With the causal mask, later Q blocks have more keys to visit: take them
  // first (longest first) so that the short ones fill the tail.
  if (c.causal)
    qBlock = arith::SubIOp::create(
        b, arith::SubIOp::create(b, numQBlocks, index(1)), qBlock);
  head = headIndex;
  batch = batchIndex;
  qBlockRow = arith::MulIOp::create(b, qBlock, index(c.blockM()));
  kvHead = arith::DivUIOp::create(
      b, head,
      toIndex(params[static_cast<unsigned>(AttentionParam::HeadsPerKVHead)]));
  // The K/V blocks this Q block needs: all of them, or with the causal mask
  // those up to the block holding key min(last row, seq_kv - 1).
  Value kvEnd = seqKV;
  if (c.causal)
    kvEnd = arith::MinUIOp::create(
        b, seqKV, arith::AddIOp::create(b, qBlockRow, index(c.blockM())));
  numKVBlocks = arith::CeilDivUIOp::create(b, kvEnd, index(c.blockN));
}

SmallVector<Value>
KernelBuilder::forEachTile(ValueRange states,
                           function_ref<SmallVector<Value>(ValueRange)> body) {
  if (!c.persistent)
    return body(states);
  // Round r gives CTA i the tile r * G + i, or r * G + (G - 1 - i) in odd
  // rounds (G = gridDim.x): tiles are ordered Q block fastest, longest first
  // when causal, so this snake pairs a CTA's long tiles with short ones, and
  // the CTAs working at one time share the K/V of a few heads in L2. Every
  // role of the CTA runs the same rounds, so the pipelines stay balanced.
  //
  // The loop runs while the CTA's tile exists (only the last round can be
  // partial) rather than for a trip count computed by a division: ptxas
  // computes a division by a runtime value in ordinary registers, and a
  // loop whose bound is not uniform is divergent to it, which would move
  // every pipeline state the loop carries, and so the wgmma descriptors,
  // out of the uniform registers (an R2UR before each wgmma).
  Value ctas = gpu::GridDimOp::create(b, gpu::Dimension::x);
  Value cta = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  SmallVector<Value> inits = {index(0)};
  llvm::append_range(inits, states);
  SmallVector<Type> types = {b.getIndexType(), b.getIndexType()};
  llvm::append_range(types, ValueRange(states).getTypes());
  auto loop = scf::WhileOp::create(b, types, inits);
  // Before: the round's tile, and whether it exists.
  OpBuilder::InsertionGuard guard(b);
  SmallVector<Location> locs(inits.size(), b.getLoc());
  Block *before = b.createBlock(&loop.getBefore(), loop.getBefore().end(),
                                TypeRange(types).drop_front(), locs);
  Value round = before->getArgument(0);
  Value odd = arith::CmpIOp::create(b, arith::CmpIPredicate::ne,
                                    arith::AndIOp::create(b, round, index(1)),
                                    index(0));
  Value position = arith::SelectOp::create(
      b, odd,
      arith::SubIOp::create(b, arith::SubIOp::create(b, ctas, index(1)), cta),
      cta);
  Value tile =
      arith::AddIOp::create(b, arith::MulIOp::create(b, round, ctas), position);
  Value exists =
      arith::CmpIOp::create(b, arith::CmpIPredicate::ult, tile, numTiles);
  SmallVector<Value> forwarded = {round, tile};
  llvm::append_range(forwarded, before->getArguments().drop_front());
  scf::ConditionOp::create(b, exists, forwarded);
  // After: the tile's work.
  Block *after = b.createBlock(&loop.getAfter(), loop.getAfter().end(), types,
                               SmallVector<Location>(types.size(), b.getLoc()));
  Value headBatch =
      arith::DivUIOp::create(b, after->getArgument(1), numQBlocks);
  setTile(arith::RemUIOp::create(b, after->getArgument(1), numQBlocks),
          arith::RemUIOp::create(b, headBatch, headsQ),
          arith::DivUIOp::create(b, headBatch, headsQ));
  SmallVector<Value> next = {
      arith::AddIOp::create(b, after->getArgument(0), index(1))};
  llvm::append_range(next, body(after->getArguments().drop_front(2)));
  scf::YieldOp::create(b, next);
  return SmallVector<Value>(loop.getResults().drop_front(2));
}

void KernelBuilder::buildProducer() {
  auto param = [&](AttentionParam p) {
    return params[static_cast<unsigned>(p)];
  };
  for (AttentionParam map : {AttentionParam::QMap, AttentionParam::KMap,
                             AttentionParam::VMap, AttentionParam::OMap})
    TMAPrefetchOp::create(b, param(map));
  forEachTile({pipeQ, pipeK, pipeV}, [&](ValueRange states) {
    return buildProducerTile(states[0], states[1], states[2]);
  });
}

SmallVector<Value> KernelBuilder::buildProducerTile(Value stateQ, Value stateK,
                                                    Value stateV) {
  auto param = [&](AttentionParam p) {
    return params[static_cast<unsigned>(p)];
  };
  int64_t w = AttentionConfig::kTileWidth;
  // Q once per tile.
  ProducerAcquireOp::create(b, stateQ, nullptr);
  Value qBarrier = ProducerMBarOp::create(b, stateQ, nullptr);
  for (int64_t col = 0; col < c.headBlocks(); ++col) {
    Value tile =
        slot(sQ, {b.getIndexAttr(col), b.getIndexAttr(0), b.getIndexAttr(0)},
             {c.blockM(), w});
    TMALoadOp::create(b, param(AttentionParam::QMap),
                      ValueRange{batch, head, qBlockRow, index(col * w)}, tile,
                      qBarrier, Value());
  }
  ProducerCommitOp::create(b, stateQ, nullptr);
  Value nextQ = StepOp::create(b, stateQ);

  // K and V, block by block, through their rings.
  auto loop = scf::ForOp::create(b, index(0), numKVBlocks, index(1),
                                 ValueRange{stateK, stateV});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kvRow =
        arith::MulIOp::create(b, loop.getInductionVar(), index(c.blockN));
    SmallVector<Value> next;
    for (auto [ring, map, state] :
         {std::tuple{sK, param(AttentionParam::KMap), loop.getRegionIterArg(0)},
          std::tuple{sV, param(AttentionParam::VMap),
                     loop.getRegionIterArg(1)}}) {
      ProducerAcquireOp::create(b, state, nullptr);
      Value slotIndex = IndexOp::create(b, state);
      Value barrier = ProducerMBarOp::create(b, state, nullptr);
      for (int64_t col = 0; col < c.headBlocks(); ++col) {
        Value tile = slot(ring,
                          {slotIndex, b.getIndexAttr(col), b.getIndexAttr(0),
                           b.getIndexAttr(0)},
                          {c.blockN, w});
        TMALoadOp::create(b, map,
                          ValueRange{batch, kvHead, kvRow, index(col * w)},
                          tile, barrier, Value());
      }
      ProducerCommitOp::create(b, state, nullptr);
      next.push_back(StepOp::create(b, state));
    }
    scf::YieldOp::create(b, next);
  }
  return {nextQ, loop.getResult(0), loop.getResult(1)};
}

void KernelBuilder::buildConsumer() {
  int64_t w = AttentionConfig::kTileWidth;
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value t = arith::RemUIOp::create(b, tid, index(128));
  warp = arith::DivUIOp::create(b, t, index(32));
  lane = arith::RemUIOp::create(b, t, index(32));
  elected = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, t, index(0));

  // This warpgroup's 64 rows of Q, and of the output staging tile.
  auto rowsOf = [&](Value tile) -> Value {
    return memref::SubViewOp::create(
        b, tile,
        ArrayRef<OpFoldResult>{b.getIndexAttr(0), qRows, b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(c.headBlocks()),
                               b.getIndexAttr(64), b.getIndexAttr(w)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                               b.getIndexAttr(1)});
  };
  sQw = rowsOf(sQ);
  sOw = c.persistent ? rowsOf(sO) : sQw;
  startTurns();
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
  if (c.persistent && c.causal) {
    // The tile's K/V block count comes from divisions of the tile index,
    // which ptxas does not know to be uniform: broadcast it from lane 0 so
    // that the K/V loop, and the pipeline states and wgmma descriptors it
    // carries, stay on the uniform datapath.
    Value count = toI32(numKVBlocks);
    numKVBlocks = toIndex(
        gpu::ShuffleOp::create(b, count, i32(0), i32(32), gpu::ShuffleMode::IDX)
            .getShuffleResult());
  }
  // The two rows of the fragments this thread holds.
  firstRow = arith::AddIOp::create(b, qBlockRow, qRows);
  row0 = arith::AddIOp::create(
      b, firstRow,
      arith::AddIOp::create(b, arith::MulIOp::create(b, warp, index(16)),
                            arith::DivUIOp::create(b, lane, index(4))));
  row1 = arith::AddIOp::create(b, row0, index(8));
  ConsumerWaitOp::create(b, stateQ, nullptr);

  Fragment oFrag(b, c.headDim / 2);
  Value negInf = f32(-INFINITY);
  Value zeroO = arith::ConstantOp::create(
      b, oFrag.type(), DenseElementsAttr::get(oFrag.type(), 0.0f));
  RowStats init{negInf, negInf, f32(0.0), f32(0.0)};
  SmallVector<Value> results =
      c.overlapSoftmax ? buildOverlappedLoop(stateK, stateV, zeroO, init)
                       : buildSimpleLoop(stateK, stateV, zeroO, init);
  // Every QK wgmma of this warpgroup has retired: its Q rows are free (for
  // the next tile's Q, or for staging this tile's output).
  Value nextQ = ConsumerReleaseOp::create(b, stateQ, elected, nullptr);
  buildEpilogue(results[2], {results[3], results[4], results[5], results[6]});
  return {nextQ, results[0], results[1]};
}

void KernelBuilder::startTurns() {
  if (!c.pingpong)
    return;
  // Consumer 0 goes first: it arrives at its own barrier, which its first
  // wait then completes. Every other wait is completed by the previous
  // consumer's arrival; all consumers take the same number of turns.
  Value first = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                      consumerIndex, index(0));
  auto ifFirst = scf::IfOp::create(b, first, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifFirst.thenBlock());
  NVVM::BarrierArriveOp::create(b, i32(AttentionConfig::scheduleBarrier(0)),
                                i32(2 * 128));
}

void KernelBuilder::waitForTurn() {
  if (!c.pingpong)
    return;
  Value id = toI32(arith::AddIOp::create(
      b, consumerIndex, index(AttentionConfig::scheduleBarrier(0))));
  NVVM::BarrierOp::create(b, Type(), id, i32(2 * 128), nullptr, Value());
}

void KernelBuilder::passTurn() {
  if (!c.pingpong)
    return;
  // The next consumer in the cycle 0 -> 1 (-> 2) -> 0.
  Value next = arith::RemUIOp::create(
      b, arith::AddIOp::create(b, consumerIndex, index(1)),
      index(c.consumerWarpgroups));
  Value id = toI32(arith::AddIOp::create(
      b, next, index(AttentionConfig::scheduleBarrier(0))));
  NVVM::BarrierArriveOp::create(b, id, i32(2 * 128));
}

Value KernelBuilder::issueQK(Value stateK, bool takeTurn) {
  int64_t w = AttentionConfig::kTileWidth;
  ConsumerWaitOp::create(b, stateK, nullptr);
  if (takeTurn)
    waitForTurn();
  Value kTile = slot(sK,
                     {Value(IndexOp::create(b, stateK)), b.getIndexAttr(0),
                      b.getIndexAttr(0), b.getIndexAttr(0)},
                     {c.headBlocks(), c.blockN, w});
  return WarpgroupMmaOp::create(
      b, VectorType::get({c.blockN / 2}, b.getF32Type()), sQw, kTile, Value(),
      AttentionConfig::kSwizzleBytes, /*transpose_b=*/false);
}

Value KernelBuilder::issuePV(Value p16, Value stateV, Value o, bool takeTurn) {
  int64_t w = AttentionConfig::kTileWidth;
  ConsumerWaitOp::create(b, stateV, nullptr);
  if (takeTurn)
    waitForTurn();
  Value vTile = slot(sV,
                     {Value(IndexOp::create(b, stateV)), b.getIndexAttr(0),
                      b.getIndexAttr(0), b.getIndexAttr(0)},
                     {c.headBlocks(), c.blockN, w});
  return WarpgroupMmaOp::create(b, o.getType(), p16, vTile, o,
                                AttentionConfig::kSwizzleBytes,
                                /*transpose_b=*/true);
}

Value KernelBuilder::retire(Value fragment, int64_t pending) {
  return WarpgroupWaitOp::create(b, TypeRange{fragment.getType()},
                                 ValueRange{fragment}, pending)
      .getResult(0);
}

Value KernelBuilder::rescale(Value o, Value alpha0, Value alpha1) {
  Fragment oFrag(b, c.headDim / 2);
  return arith::MulFOp::create(b, o, oFrag.perRow(alpha0, alpha1));
}

SmallVector<Value> KernelBuilder::buildSimpleLoop(Value k, Value v, Value o,
                                                  RowStats stats) {
  // for j: S = Q K_j; retire; release K; softmax; O = O*alpha + P V_j;
  // retire; release V. Tensor cores idle during the softmax.
  auto loop = scf::ForOp::create(
      b, index(0), numKVBlocks, index(1),
      ValueRange{k, v, o, stats.m0, stats.m1, stats.l0, stats.l1});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value stateK = loop.getRegionIterArg(0), stateV = loop.getRegionIterArg(1);
  RowStats current{loop.getRegionIterArg(3), loop.getRegionIterArg(4),
                   loop.getRegionIterArg(5), loop.getRegionIterArg(6)};
  Value s = issueQK(stateK, /*takeTurn=*/true);
  passTurn();
  s = retire(s, 0);
  Value nextK = ConsumerReleaseOp::create(b, stateK, elected, nullptr);
  Softmax sm = softmax(s, loop.getInductionVar(), current);
  Value acc = rescale(loop.getRegionIterArg(2), sm.alpha0, sm.alpha1);
  acc = issuePV(sm.p16, stateV, acc, /*takeTurn=*/true);
  passTurn();
  acc = retire(acc, 0);
  Value nextV = ConsumerReleaseOp::create(b, stateV, elected, nullptr);
  scf::YieldOp::create(b, ValueRange{nextK, nextV, acc, sm.stats.m0,
                                     sm.stats.m1, sm.stats.l0, sm.stats.l1});
  return SmallVector<Value>(loop.getResults());
}

SmallVector<Value> KernelBuilder::buildOverlappedLoop(Value k, Value v, Value o,
                                                      RowStats stats) {
  // FA3's intra-warpgroup overlap: S_j = Q K_j and O += P_{j-1} V_{j-1} are
  // issued together; S_j is retired first (wait_group 1) and its softmax
  // runs while the tensor cores still compute P_{j-1} V_{j-1}.
  Fragment oFrag(b, c.headDim / 2);
  Value any = arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, numKVBlocks,
                                    index(0));
  SmallVector<Type> types = {k.getType(),    v.getType(),    o.getType(),
                             b.getF32Type(), b.getF32Type(), b.getF32Type(),
                             b.getF32Type()};
  auto ifAny = scf::IfOp::create(b, types, any, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifAny.elseBlock());
  scf::YieldOp::create(
      b, ValueRange{k, v, o, stats.m0, stats.m1, stats.l0, stats.l1});

  b.setInsertionPointToStart(ifAny.thenBlock());
  // Block 0: S_0 and its softmax; O is still zero.
  Value s = issueQK(k, /*takeTurn=*/true);
  passTurn();
  s = retire(s, 0);
  Value stateK = ConsumerReleaseOp::create(b, k, elected, nullptr);
  Softmax first = softmax(s, index(0), stats);

  auto loop = scf::ForOp::create(b, index(1), numKVBlocks, index(1),
                                 ValueRange{stateK, v, o, first.stats.m0,
                                            first.stats.m1, first.stats.l0,
                                            first.stats.l1, first.p16});
  {
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kj = loop.getRegionIterArg(0), vj = loop.getRegionIterArg(1);
    RowStats current{loop.getRegionIterArg(3), loop.getRegionIterArg(4),
                     loop.getRegionIterArg(5), loop.getRegionIterArg(6)};
    Value sj = issueQK(kj, /*takeTurn=*/true);
    Value acc = issuePV(loop.getRegionIterArg(7), vj, loop.getRegionIterArg(2));
    // The other warpgroups' GEMMs queue behind these while this one runs
    // its softmax.
    passTurn();
    // S_j's group was issued first: with one group left in flight it has
    // retired, and K_j's slot may be released.
    sj = retire(sj, 1);
    Value nextK = ConsumerReleaseOp::create(b, kj, elected, nullptr);
    Softmax sm = softmax(sj, loop.getInductionVar(), current);
    acc = retire(acc, 0);
    Value nextV = ConsumerReleaseOp::create(b, vj, elected, nullptr);
    acc = rescale(acc, sm.alpha0, sm.alpha1);
    scf::YieldOp::create(b,
                         ValueRange{nextK, nextV, acc, sm.stats.m0, sm.stats.m1,
                                    sm.stats.l0, sm.stats.l1, sm.p16});
  }
  // The last P V.
  Value lastV = loop.getResult(1);
  Value acc =
      issuePV(loop.getResult(7), lastV, loop.getResult(2), /*takeTurn=*/true);
  passTurn();
  acc = retire(acc, 0);
  Value endV = ConsumerReleaseOp::create(b, lastV, elected, nullptr);
  scf::YieldOp::create(b, ValueRange{loop.getResult(0), endV, acc,
                                     loop.getResult(3), loop.getResult(4),
                                     loop.getResult(5), loop.getResult(6)});
  (void)oFrag;
  return SmallVector<Value>(ifAny.getResults());
}

Value KernelBuilder::mask(Value s, Value kvBlock) {
  Fragment sFrag(b, c.blockN / 2);
  auto i32Vec = VectorType::get({c.blockN / 2}, b.getI32Type());
  Value kvRow = arith::MulIOp::create(b, kvBlock, index(c.blockN));
  // Only a block that crosses seq_kv or, when causal, the diagonal of this
  // warpgroup's rows needs masking: a uniform branch skips it elsewhere.
  Value blockEnd = arith::AddIOp::create(b, kvRow, index(c.blockN));
  Value needed =
      arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, blockEnd, seqKV);
  if (c.causal)
    needed = arith::OrIOp::create(
        b, needed,
        arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, blockEnd,
                              arith::AddIOp::create(b, firstRow, index(1))));
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
  if (c.causal) {
    Value rows = sFrag.perRow(toI32(row0), toI32(row1));
    valid = arith::AndIOp::create(
        b, valid,
        arith::CmpIOp::create(b, arith::CmpIPredicate::sle, cols, rows));
  }
  scf::YieldOp::create(
      b, ValueRange{arith::SelectOp::create(
             b, valid, s,
             vector::BroadcastOp::create(b, sFrag.type(), f32(-INFINITY)))});
  return ifMask.getResult(0);
}

KernelBuilder::Softmax KernelBuilder::softmax(Value s, Value kvBlock,
                                              const RowStats &stats) {
  Fragment sFrag(b, c.blockN / 2);
  Value scaleLog2 = params[static_cast<unsigned>(AttentionParam::ScaleLog2)];
  s = mask(s, kvBlock);

  // Running max per row, across the row's 4 lanes.
  Value m[2] = {stats.m0, stats.m1}, l[2] = {stats.l0, stats.l1};
  Value mNew[2], scaledMax[2], alpha[2];
  for (int half : {0, 1}) {
    Value rowMax = sFrag.reduceRow(s, half, vector::CombiningKind::MAXNUMF,
                                   /*acrossLanes=*/true);
    mNew[half] = arith::MaxNumFOp::create(b, m[half], rowMax);
    // A row with no valid key yet keeps max -inf; use 0 so that
    // exp2(-inf - 0) = 0 rather than NaN.
    Value isEmpty = arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ,
                                          mNew[half], f32(-INFINITY));
    scaledMax[half] = arith::SelectOp::create(
        b, isEmpty, f32(0.0), arith::MulFOp::create(b, mNew[half], scaleLog2));
    // exp2((m_old - m_new) * c): rescales what was accumulated so far.
    alpha[half] = math::Exp2Op::create(
        b,
        arith::SubFOp::create(b, arith::MulFOp::create(b, m[half], scaleLog2),
                              scaledMax[half]));
  }
  // P = exp2(S * c - m * c): the scale folded into one FMA per element.
  Value p = math::Exp2Op::create(
      b,
      math::FmaOp::create(
          b, s, vector::BroadcastOp::create(b, sFrag.type(), scaleLog2),
          arith::NegFOp::create(b, sFrag.perRow(scaledMax[0], scaledMax[1]))));
  Value lNew[2];
  for (int half : {0, 1}) {
    // Row sums stay per thread; the 4 lanes are combined once, at the end.
    Value rowSum = sFrag.reduceRow(p, half, vector::CombiningKind::ADD,
                                   /*acrossLanes=*/false);
    lNew[half] = math::FmaOp::create(b, l[half], alpha[half], rowSum);
  }
  Value p16 = arith::TruncFOp::create(
      b, VectorType::get({c.blockN / 2}, c.elementType), p);
  return {{mNew[0], mNew[1], lNew[0], lNew[1]}, alpha[0], alpha[1], p16};
}

void KernelBuilder::buildEpilogue(Value acc, const RowStats &state) {
  int64_t w = AttentionConfig::kTileWidth;
  Fragment oFrag(b, c.headDim / 2);
  Value sums[2], inv[2], partialSums[2] = {state.l0, state.l1};
  for (int half : {0, 1}) {
    sums[half] =
        oFrag.reduceAcrossLanes(partialSums[half], vector::CombiningKind::ADD);
    // A row without any key (seq_kv = 0) is all zeros, not NaN.
    Value positive = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT,
                                           sums[half], f32(0.0));
    inv[half] = arith::SelectOp::create(
        b, positive, arith::DivFOp::create(b, f32(1.0), sums[half]), f32(0.0));
  }
  Value o = arith::MulFOp::create(b, acc, oFrag.perRow(inv[0], inv[1]));
  Value o16 = arith::TruncFOp::create(
      b, VectorType::get({c.headDim / 2}, c.elementType), o);

  // Stage O in this warpgroup's rows of the staging tile (Q's, or its own
  // when persistent), then one thread stores it with TMA (which clips the
  // rows past seq_q). The generic-proxy writes must be visible to the async
  // proxy (fence) and complete in all 128 threads (the warpgroup's named
  // barrier) before the store reads them.
  Value barrierId = toI32(arith::AddIOp::create(
      b, consumerIndex, index(AttentionConfig::epilogueBarrier(0))));
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
  StoreFragmentOp::create(b, o16, sOw, AttentionConfig::kSwizzleBytes);
  NVVM::FenceProxyOp::create(
      b, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_shared),
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  NVVM::BarrierOp::create(b, Type(), barrierId, i32(128), nullptr, Value());
  auto store = scf::IfOp::create(b, elected, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(store.thenBlock());
    Value oMap = params[static_cast<unsigned>(AttentionParam::OMap)];
    for (int64_t col = 0; col < c.headBlocks(); ++col) {
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
  Value lse = params[static_cast<unsigned>(AttentionParam::Lse)];
  Value scaleLog2 = params[static_cast<unsigned>(AttentionParam::ScaleLog2)];
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
    Value offset = arith::IndexCastOp::create(
        b, b.getI64Type(), arith::AddIOp::create(b, rowBase, rows[half]));
    Value addr = LLVM::GEPOp::create(b, ptrType, b.getF32Type(), lse,
                                     ValueRange{offset});
    LLVM::StoreOp::create(b, value, addr);
  }
}

} // namespace

gpu::GPUFuncOp kvpipe::buildAttentionKernel(OpBuilder &builder, Location loc,
                                            StringRef name,
                                            const AttentionConfig &config) {
  ImplicitLocOpBuilder b(loc, builder);
  return KernelBuilder(b, config).build(name);
}

DictionaryAttr kvpipe::getAttentionABI(MLIRContext *ctx, StringRef name,
                                       const AttentionConfig &c) {
  Builder b(ctx);
  auto box = [&](int64_t rows) {
    return b.getDictionaryAttr(
        {b.getNamedAttr("box", b.getI64ArrayAttr({1, 1, rows, 64})),
         b.getNamedAttr("swizzle", b.getI64IntegerAttr(128))});
  };
  std::string element = c.elementType.isBF16() ? "bf16" : "f16";
  return b.getDictionaryAttr({
      b.getNamedAttr("kernel", b.getStringAttr(name)),
      b.getNamedAttr("abi_version", b.getI64IntegerAttr(2)),
      b.getNamedAttr("head_dim", b.getI64IntegerAttr(c.headDim)),
      b.getNamedAttr("element_type", b.getStringAttr(element)),
      b.getNamedAttr("causal", b.getBoolAttr(c.causal)),
      b.getNamedAttr("block_m", b.getI64IntegerAttr(c.blockM())),
      b.getNamedAttr("block_n", b.getI64IntegerAttr(c.blockN)),
      b.getNamedAttr("kv_stages", b.getI64IntegerAttr(c.kvStages)),
      b.getNamedAttr("consumer_warpgroups",
                     b.getI64IntegerAttr(c.consumerWarpgroups)),
      b.getNamedAttr("producer_registers",
                     b.getI64IntegerAttr(c.producerRegisters)),
      b.getNamedAttr("consumer_registers",
                     b.getI64IntegerAttr(c.consumerRegisters)),
      b.getNamedAttr("overlap_softmax", b.getBoolAttr(c.overlapSoftmax)),
      b.getNamedAttr("pingpong", b.getBoolAttr(c.pingpong)),
      b.getNamedAttr("persistent", b.getBoolAttr(c.persistent)),
      b.getNamedAttr("threads", b.getI64IntegerAttr(c.threads())),
      b.getNamedAttr("dynamic_shared_memory",
                     b.getI64IntegerAttr(c.dynamicSharedMemoryBytes())),
      b.getNamedAttr("params", b.getStrArrayAttr(
                                   {"q_map", "k_map", "v_map", "o_map", "lse",
                                    "seq_q", "seq_kv", "heads_per_kv_head",
                                    "scale_log2", "heads_q", "batch"})),
      b.getNamedAttr("q_map", box(c.blockM())),
      b.getNamedAttr("k_map", box(c.blockN)),
      b.getNamedAttr("v_map", box(c.blockN)),
      b.getNamedAttr("o_map", box(64)),
  });
}
