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
// This file builds the kernel's skeleton (parameters, shared memory,
// pipelines, the roles as a kvpipe.warp_roles op, the tile of work as
// kvpipe.tile and each role's kvpipe.for_each_tile), the producer, and
// reports the ABI; the consumers are in AttentionConsumer.cpp. The schedule rewrites
// and the lowering of the kernel-structure ops follow (AttentionGenerator.h).
//
//===----------------------------------------------------------------------===//

#include "Fragment.h"
#include "KernelBuilder.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelParts.h"
#include "kvpipe/Dialect/KVPipe/Transforms/PagedKV.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::detail;

Value KernelBuilder::slot(Value ring, ArrayRef<OpFoldResult> offsets,
                          ArrayRef<int64_t> sizes) {
  return buildTileView(b, ring, offsets, sizes);
}

gpu::GPUFuncOp KernelBuilder::build(StringRef name) {
  Type i32Type = b.getI32Type();
  Type globalPointer = LLVM::LLVMPointerType::get(ctx, /*addressSpace=*/1);
  auto typeOf = [&](AttentionParam p) -> Type {
    switch (p) {
    case AttentionParam::QMap:
      if (c.packGQA)
        return packedMapType(c.qkSwizzleBytes());
      return tensorMapType(c.blockM(), c.qkSwizzleBytes());
    case AttentionParam::KMap:
      return tensorMapType(c.kvBoxRows(), c.qkSwizzleBytes());
    case AttentionParam::VMap:
      return tensorMapType(c.kvBoxRows(), c.vSwizzleBytes());
    case AttentionParam::OMap:
      if (c.packGQA)
        return packedMapType(c.vSwizzleBytes());
      return tensorMapType(64, c.vSwizzleBytes());
    case AttentionParam::ScaleLog2:
      return b.getF32Type();
    default:
      return isAttentionPointerParam(p) ? globalPointer : i32Type;
    }
  };
  SmallVector<AttentionParam> kernelParams = getAttentionParams(c);
  SmallVector<Type> paramTypes = llvm::map_to_vector(kernelParams, typeOf);
  // The modifiers' auxiliary tensors, after the others (docs/modifiers.md).
  paramTypes.append(c.auxTypes.size(), globalPointer);
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
  func->setAttr(kAttentionAbiAttrName,
                withTensorMapABI(getAttentionABI(ctx, name, c),
                                 func.getFunctionType()));

  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  params.assign(static_cast<unsigned>(AttentionParam::Count), Value());
  for (auto [p, arg] : llvm::zip(kernelParams, entry.getArguments()))
    params[static_cast<unsigned>(p)] = arg;
  for (BlockArgument arg : entry.getArguments().drop_front(kernelParams.size()))
    auxParams.push_back(arg);
  if (c.maskMod)
    maskShape.emplace(*c.maskMod);

  seqQ = toIndex(param(AttentionParam::SeqQ));
  seqKV = toIndex(param(AttentionParam::SeqKV));
  headsQ = toIndex(param(AttentionParam::HeadsQ));
  numQBlocks = arith::CeilDivUIOp::create(b, seqQ, index(c.queriesPerTile()));
  // Signed from here on: d = seq_kv - seq_q may be negative (more queries
  // than keys), and so may the bounds derived from it. With per-batch
  // lengths, d is the tile's (setTile).
  if (c.maskAlignment == MaskAlignment::BottomRight && !c.kvLengths &&
      !c.varlen)
    diagonal = arith::SubIOp::create(b, seqKV, seqQ);
  if (c.slidingWindow) {
    windowLeft = toIndex(param(AttentionParam::WindowLeft));
    windowRight = toIndex(param(AttentionParam::WindowRight));
  }
  buildTile();

  // Shared memory: Q, then the K ring, then the V ring, from a 1024-byte
  // aligned start (the 128-byte swizzle repeats every 8 rows of 128 bytes,
  // the 64-byte one every 512 bytes, and TMA and wgmma assume tiles start on
  // such an atom; every tile's size is a multiple of 1024 bytes).
  AlignedSharedMemory shared =
      buildAlignedSharedMemory(b, AttentionConfig::kAlignmentSlack);
  auto view = [&](int64_t offset, MemRefType type) {
    return shared.view(b, offset, type);
  };
  int64_t qkWidth = c.qkTileWidth(), vWidth = c.vTileWidth();
  // With q_stages > 1, Q is a ring as K and V are (slot first), and the
  // output has a staging tile of its own after the rings (the Q rows it is
  // staged in otherwise would be the next tiles' Q by then).
  if (c.qStages > 1) {
    sQ = view(0, sharedType({c.qStages, c.qkBlocks(), c.blockM(), qkWidth}));
    sO = view(c.oOffset(), sharedType({c.vBlocks(), c.blockM(), vWidth}));
  } else {
    sQ = view(0, sharedType({c.qkBlocks(), c.blockM(), qkWidth}));
  }
  sK = view(c.kOffset(),
            sharedType({c.kvStages, c.qkBlocks(), c.blockN, qkWidth}));
  sV = view(c.vOffset(),
            sharedType({c.kvStages, c.vSlotBlocks(), c.blockN, vWidth}));
  if (c.tensorRowSums) {
    // The ring is V's blocks of each slot; the ones blocks lie between them.
    sVWithOnes = sV;
    sV = buildTileView(b, sVWithOnes,
                       {b.getIndexAttr(0), b.getIndexAttr(0), b.getIndexAttr(0),
                        b.getIndexAttr(0)},
                       {c.kvStages, c.vBlocks(), c.blockN, vWidth});
    fillOnesBlocks();
  }
  if (c.keyOffsetsBytes()) {
    sKeyOffsets = view(c.keyOffsetsOffset(),
                       sharedType({1, c.blockN, AttentionConfig::kKeyOffsetsWidth}));
    fillKeyOffsets();
  }
  if (c.tensorRowSums || sKeyOffsets)
    fenceSharedWrites();

  pipeQ = CreateOp::create(b, pipelineType(c.qStages));
  pipeK = CreateOp::create(b, pipelineType(c.kvStages));
  pipeV = CreateOp::create(b, pipelineType(c.kvStages));
  for (Value pipe : {pipeQ, pipeK, pipeV})
    InitOp::create(b, pipe);

  // The roles and their register budgets (--kvpipe-lower-warp-roles).
  auto roles = WarpRolesOp::create(b, c.producerRegisters,
                                   c.consumerWarpgroups, c.consumerRegisters);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&roles.getProducerBlock());
    Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    Value leader =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tid, index(0));
    auto producer = scf::IfOp::create(b, leader, /*withElseRegion=*/false);
    b.setInsertionPointToStart(producer.thenBlock());
    buildProducer();

    b.setInsertionPointToStart(&roles.getConsumerBlock());
    consumerIndex = roles.getConsumerIndex();
    qRows = arith::MulIOp::create(b, consumerIndex, index(64));
    buildConsumer();
  }
  gpu::ReturnOp::create(b);
  return func;
}

void KernelBuilder::buildTile() {
  // The tile of work, (Q block, head, batch), and its values: on blockIdx
  // when each CTA does one (--kvpipe-lower-tiles), in each iteration of
  // each role's kvpipe.for_each_tile loop when --kvpipe-persistent-tiles
  // made the kernel persistent. The region is built first, its results
  // (what setTile computed) known after.
  Value batches = toIndex(param(AttentionParam::Batch));
  // With split_kv, x is (Q block, split), the split fastest; with pack_gqa,
  // y is the K/V head.
  Value tilesX = numQBlocks, tilesY = headsQ;
  if (c.splitKV) {
    numSplits = toIndex(param(AttentionParam::NumSplits));
    tilesX = arith::MulIOp::create(b, numQBlocks, numSplits);
  }
  if (c.packGQA)
    tilesY = arith::DivUIOp::create(b, headsQ, index(c.packGQA));
  Value schedule =
      c.tileTable ? param(AttentionParam::TileTable) : Value();
  auto building =
      TileOp::create(b, TypeRange{}, tilesX, tilesY, batches, schedule);
  Block &coordinates = building.getBodyBlock();
  Value seqQBefore = seqQ, seqKVBefore = seqKV, diagonalBefore = diagonal;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&coordinates);
    Value x = coordinates.getArgument(0);
    Value y = coordinates.getArgument(1), z = coordinates.getArgument(2);
    if (c.splitKV) {
      splitIndex = arith::RemUIOp::create(b, x, numSplits);
      x = arith::DivUIOp::create(b, x, numSplits);
    }
    if (c.lptTiles)
      std::tie(x, y, z) = lptTile(x, y, z, tilesX, tilesY, batches);
    setTile(x, y, z);
    if (c.splitKV)
      splitKVBlocks();
    if (c.biasOriginFirst)
      startAtBiasOrigin();
  }
  // seq_kv and d are the tile's with per-batch lengths; the first K/V block
  // exists with a left bound.
  SmallVector<Value *> values = {&qBlockRow, &head, &batch, &kvHead,
                                 &numKVBlocks};
  if (firstKVBlock)
    values.push_back(&firstKVBlock);
  if (splitIndex)
    values.push_back(&splitIndex);
  if (kvTurn)
    values.push_back(&kvTurn);
  if (seqKV != seqKVBefore)
    values.push_back(&seqKV);
  if (diagonal != diagonalBefore)
    values.push_back(&diagonal);
  if (seqQ != seqQBefore)
    values.push_back(&seqQ);
  if (seqStartQ)
    values.append({&seqStartQ, &seqStartKV});
  if (tileHasWork)
    values.insert(values.begin(), &tileHasWork);
  SmallVector<Value> yielded =
      llvm::map_to_vector(values, [](Value *v) { return *v; });
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(&coordinates);
    YieldOp::create(b, yielded);
  }
  auto tile = TileOp::create(b, ValueRange(yielded).getTypes(), tilesX,
                             tilesY, batches, schedule,
                             /*hasWork=*/bool(tileHasWork));
  tile.getBody().takeBody(building.getBody());
  building.erase();
  for (auto [value, result] : llvm::zip_equal(values, tile.getResults()))
    *value = result;
}

std::tuple<Value, Value, Value>
KernelBuilder::lptTile(Value x, Value y, Value z, Value tilesX, Value tilesY,
                       Value batches) {
  // FA3/FA4's LPT order: the (batch, head) pairs in groups whose K and V
  // fit in L2 together, and within a group the tiles Q block by Q block
  // (setTile turns block 0 into the longest when causal), the group's heads
  // fastest. The hardware starts CTAs in about the order of their linear
  // position, so every head's longest tiles start first and the short ones
  // fill the tail; the default order (x fastest) starts the last heads'
  // longest tiles last. A bijection of the grid: the ABI is unchanged.
  Value linear = arith::AddIOp::create(
      b, x,
      arith::MulIOp::create(
          b, tilesX,
          arith::AddIOp::create(b, y, arith::MulIOp::create(b, tilesY, z))));
  Value pairs = arith::MulIOp::create(b, tilesY, batches);
  // K and V bytes of one pair; the query heads of one K/V head share them.
  int64_t rowBytes = (c.headDim + c.valueHeadDim) * c.elementBytes();
  Value pairBytes = arith::MaxUIOp::create(
      b,
      arith::DivUIOp::create(
          b, arith::MulIOp::create(b, seqKV, index(rowBytes)),
          toIndex(param(AttentionParam::HeadsPerKVHead))),
      index(1));
  Value group = arith::MinUIOp::create(
      b,
      arith::MaxUIOp::create(
          b,
          arith::DivUIOp::create(b, index(AttentionConfig::kL2TileGroupBytes),
                                 pairBytes),
          index(1)),
      pairs);
  Value perGroup = arith::MulIOp::create(b, tilesX, group);
  Value groupIndex = arith::DivUIOp::create(b, linear, perGroup);
  Value first = arith::MulIOp::create(b, groupIndex, group);
  // The last group may hold fewer pairs.
  Value size = arith::MinUIOp::create(
      b, group, arith::SubIOp::create(b, pairs, first));
  Value rest = arith::SubIOp::create(
      b, linear, arith::MulIOp::create(b, groupIndex, perGroup));
  Value pair = arith::AddIOp::create(b, first,
                                     arith::RemUIOp::create(b, rest, size));
  return {arith::DivUIOp::create(b, rest, size),
          arith::RemUIOp::create(b, pair, tilesY),
          arith::DivUIOp::create(b, pair, tilesY)};
}

void KernelBuilder::setTile(Value qBlock, Value headIndex, Value batchIndex) {
  // With the causal mask, later Q blocks have more keys to visit: take them
  // first (longest first) so that the short ones fill the tail.
  if (c.causal)
    qBlock = arith::SubIOp::create(
        b, arith::SubIOp::create(b, numQBlocks, index(1)), qBlock);
  batch = batchIndex;
  if (c.packGQA) {
    // The tile's y is the K/V head; `head` is its group's first query head.
    kvHead = headIndex;
    head = arith::MulIOp::create(b, headIndex, index(c.packGQA));
    qBlockRow = arith::MulIOp::create(b, qBlock, index(c.queriesPerTile()));
  } else {
    head = headIndex;
    qBlockRow = arith::MulIOp::create(b, qBlock, index(c.blockM()));
    kvHead = arith::DivUIOp::create(
        b, head, toIndex(param(AttentionParam::HeadsPerKVHead)));
  }
  if (c.kvLengths) {
    // Batch b uses the first kv_lengths[b] keys of its K/V (seq_kv is the
    // capacity the tensor maps describe): one load per tile, the same
    // address in every thread. Clamped to the capacity, so that a bad
    // length cannot send TMA past the tensor.
    Value offset = arith::IndexCastOp::create(b, b.getI64Type(), batch);
    Value address = LLVM::GEPOp::create(
        b, LLVM::LLVMPointerType::get(ctx, 1), b.getI32Type(),
        param(AttentionParam::KVLengths), ValueRange{offset});
    Value length = toIndex(LLVM::LoadOp::create(b, b.getI32Type(), address));
    seqKV = arith::MinSIOp::create(
        b, arith::MaxSIOp::create(b, length, index(0)),
        toIndex(param(AttentionParam::SeqKV)));
    if (c.maskAlignment == MaskAlignment::BottomRight)
      diagonal = arith::SubIOp::create(b, seqKV, seqQ);
  }
  if (c.varlen)
    setSequence();
  // The K/V blocks this Q block needs: all of them, or with the causal mask
  // those up to the block holding key min(last row, seq_kv - 1); with other
  // masks, those holding a key some row of the block sees.
  Value kvEnd = seqKV;
  Value rowsEnd =
      arith::AddIOp::create(b, qBlockRow, index(c.queriesPerTile()));
  if (c.causal && !diagonal && !c.slidingWindow)
    kvEnd = arith::MinUIOp::create(b, seqKV, rowsEnd);
  else if (c.masksRight())
    kvEnd = arith::AddIOp::create(
        b, lastKeyOf(arith::SubIOp::create(b, rowsEnd, index(1))), index(1));
  Value firstKey = c.masksLeft() ? firstKeyOf(qBlockRow) : Value();
  if (maskShape)
    narrowToMaskMod(firstKey, kvEnd);
  if (!firstKey) {
    numKVBlocks = arith::CeilDivUIOp::create(b, kvEnd, index(c.blockN));
    skipBlockPastSequence();
    return;
  }
  // From the block holding the first row's first key. The count is a
  // ceildiv of a span that cannot be negative (the first row's first key is
  // at most one past the last row's last key), which is what lets the
  // protocol checker prove it non-negative.
  firstKVBlock = arith::DivUIOp::create(b, firstKey, index(c.blockN));
  numKVBlocks = arith::CeilDivUIOp::create(
      b,
      arith::SubIOp::create(
          b, kvEnd, arith::MulIOp::create(b, firstKVBlock, index(c.blockN))),
      index(c.blockN));
  skipBlockPastSequence();
}

void KernelBuilder::startAtBiasOrigin() {
  std::optional<SeparableBias> bias = separableBias();
  if (!bias || bias->keyCoefficient == 0)
    return;
  // The bias -F |d| is largest where d(row, kv) = 0 and falls away from
  // there in both directions: from that block down to the first and then
  // up from the next, every block's bias is below those before it on the
  // same side, so a row's running maximum settles in the first blocks (up
  // to the tile's rows, all within a few blocks of the last row's origin).
  // d is linear: d(row, kv) = d(row, row) + beta (kv - row).
  Value rowsEnd = arith::MinSIOp::create(
      b, arith::AddIOp::create(b, qBlockRow, index(c.queriesPerTile())),
      seqQ);
  Value lastRow = arith::MaxSIOp::create(
      b, arith::SubIOp::create(b, rowsEnd, index(1)), qBlockRow);
  ModifierIndices at{1,     batch, head,      lastRow,   lastRow, Value(),
                     seqQ,  seqKV, auxParams, c.auxTypes};
  Value d = arith::IndexCastOp::create(
      b, b.getIndexType(),
      buildSeparableDistanceAt(b, *c.scoreMod, *bias, at, lastRow, lastRow));
  Value origin = arith::SubIOp::create(
      b, lastRow, arith::DivSIOp::create(b, d, index(bias->keyCoefficient)));
  Value block = arith::FloorDivSIOp::create(b, origin, index(c.blockN));
  if (firstKVBlock)
    block = arith::SubIOp::create(b, block, firstKVBlock);
  kvTurn = arith::MaxSIOp::create(
      b,
      arith::MinSIOp::create(
          b, block, arith::SubIOp::create(b, numKVBlocks, index(1))),
      index(0));
}

void KernelBuilder::narrowToMaskMod(Value &firstKey, Value &kvEnd) {
  // The keys some row of the Q block keeps, as far as the mask's shape
  // bounds them: the blocks outside are never loaded. (A pack_gqa tile's
  // rows are its queries' heads: queriesPerTile() query positions.)
  Value lastRow = arith::SubIOp::create(
      b, arith::AddIOp::create(b, qBlockRow, index(c.queriesPerTile())),
      index(1));
  auto [lo, hi] = maskShape->buildKeyRange(b, qBlockRow, lastRow);
  if (hi)
    kvEnd = arith::MaxSIOp::create(
        b, arith::MinSIOp::create(b, kvEnd, arith::AddIOp::create(b, hi, index(1))),
        index(0));
  if (!lo)
    return;
  lo = arith::MaxSIOp::create(b, lo, index(0));
  if (firstKey)
    lo = arith::MaxSIOp::create(b, lo, firstKey);
  firstKey = arith::MinSIOp::create(b, lo, kvEnd);
}

Value KernelBuilder::lastKeyOf(Value row) {
  return maskBounds().lastKeyOf(b, row);
}

Value KernelBuilder::firstKeyOf(Value row) {
  return maskBounds().firstKeyOf(b, row);
}

SmallVector<Value>
KernelBuilder::forEachTile(ValueRange states,
                           function_ref<SmallVector<Value>(ValueRange)> body) {
  auto tiles = ForEachTileOp::create(b, states);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&tiles.getBodyBlock());
  YieldOp::create(b, body(tiles.getBodyBlock().getArguments()));
  return SmallVector<Value>(tiles.getResults());
}

void KernelBuilder::buildProducer() {
  for (AttentionParam map : {AttentionParam::QMap, AttentionParam::KMap,
                             AttentionParam::VMap, AttentionParam::OMap})
    if (param(map))
      TMAPrefetchOp::create(b, param(map));
  forEachTile({pipeQ, pipeK, pipeV}, [&](ValueRange states) {
    return buildProducerTile(states[0], states[1], states[2]);
  });
}

SmallVector<Value> KernelBuilder::buildProducerTile(Value stateQ, Value stateK,
                                                    Value stateV) {
  // Q once per tile.
  ProducerAcquireOp::create(b, stateQ, nullptr);
  Value qBarrier = ProducerMBarOp::create(b, stateQ, nullptr);
  int64_t qkWidth = c.qkTileWidth();
  if (c.packGQA) {
    // One box per consumer warpgroup and column block: its query positions
    // times the group's heads, gathered by TMA into rows s * G + g.
    for (int64_t w = 0; w < c.consumerWarpgroups; ++w)
      for (int64_t col = 0; col < c.qkBlocks(); ++col) {
        Value rows = slot(sQ,
                          {b.getIndexAttr(col), b.getIndexAttr(w * 64),
                           b.getIndexAttr(0)},
                          {c.usedRows(), qkWidth});
        Value position = arith::AddIOp::create(
            b, qBlockRow, index(w * c.packedQueries()));
        TMALoadOp::create(b, param(AttentionParam::QMap),
                          ValueRange{batch, kvHead, position, index(0),
                                     index(col * qkWidth)},
                          buildPackedTileView(b, rows, c.packGQA), qBarrier,
                          Value());
      }
  }
  Value qSlot = c.qStages > 1 ? Value(IndexOp::create(b, stateQ)) : Value();
  for (int64_t col = 0; col < c.qkBlocks() && !c.packGQA; ++col) {
    SmallVector<OpFoldResult> at = {b.getIndexAttr(col), b.getIndexAttr(0),
                                    b.getIndexAttr(0)};
    if (qSlot)
      at.insert(at.begin(), qSlot);
    Value tile = slot(sQ, at, {c.blockM(), qkWidth});
    TMALoadOp::create(b, param(AttentionParam::QMap),
                      ValueRange{mapBatch(), head, mapRow(seqStartQ, qBlockRow),
                                 index(col * qkWidth)},
                      tile, qBarrier, Value());
  }
  ProducerCommitOp::create(b, stateQ, nullptr);
  Value nextQ = StepOp::create(b, stateQ);

  // K and V, block by block, through their rings.
  auto loop = scf::ForOp::create(b, index(0), numKVBlocks, index(1),
                                 ValueRange{stateK, stateV});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kvRow = arith::MulIOp::create(
        b, kvBlockAt(loop.getInductionVar()), index(c.blockN));
    // The (B, S) coordinates of the slot's boxes: one box of the batch's
    // rows, or with a paged cache one per page (or one in a page larger
    // than the block), landing at row l * kvBoxRows() of the slot. K and V
    // share the pages.
    SmallVector<std::pair<Value, Value>> boxes = {
        {mapBatch(), mapRow(seqStartKV, kvRow)}};
    if (c.pageSize)
      boxes = pagedBoxes(kvRow);
    int64_t boxRows = c.kvBoxRows();
    SmallVector<Value> next;
    for (auto [ring, map, state, blocks, width] :
         {std::tuple{sK, param(AttentionParam::KMap), loop.getRegionIterArg(0),
                     c.qkBlocks(), c.qkTileWidth()},
          std::tuple{sV, param(AttentionParam::VMap), loop.getRegionIterArg(1),
                     c.vBlocks(), c.vTileWidth()}}) {
      ProducerAcquireOp::create(b, state, nullptr);
      Value slotIndex = IndexOp::create(b, state);
      Value barrier = ProducerMBarOp::create(b, state, nullptr);
      for (int64_t col = 0; col < blocks; ++col) {
        for (auto [l, box] : llvm::enumerate(boxes)) {
          Value tile = slot(ring,
                            {slotIndex, b.getIndexAttr(col),
                             b.getIndexAttr(l * boxRows), b.getIndexAttr(0)},
                            {boxRows, width});
          TMALoadOp::create(
              b, map, ValueRange{box.first, kvHead, box.second, index(col * width)},
              tile, barrier, Value());
        }
      }
      ProducerCommitOp::create(b, state, nullptr);
      next.push_back(StepOp::create(b, state));
    }
    scf::YieldOp::create(b, next);
  }
  return {nextQ, loop.getResult(0), loop.getResult(1)};
}

SmallVector<std::pair<Value, Value>> KernelBuilder::pagedBoxes(Value kvRow) {
  // block_n / kvBoxRows() boxes, each at its page: every offset is a
  // multiple of 16 rows, whole swizzle atoms (8 rows of 128 bytes, or of 64
  // bytes at head dim 96), so each box lands where a single box of the
  // block would have put its rows, and the boxes together deliver the bytes
  // the slot's commit expects.
  PagedKVTable table{param(AttentionParam::BlockTable),
                     param(AttentionParam::MaxPagesPerSeq), c.pageSize};
  SmallVector<std::pair<Value, Value>> boxes;
  for (int64_t l = 0; l < c.blockN / c.kvBoxRows(); ++l) {
    Value row = l ? Value(arith::AddIOp::create(b, kvRow,
                                                index(l * c.kvBoxRows())))
                  : kvRow;
    PagedKVAddress at = buildPagedKVAddress(b, table, batch, row, seqKV);
    boxes.emplace_back(at.page, at.rowInPage);
  }
  return boxes;
}

gpu::GPUFuncOp kvpipe::buildAttentionSkeleton(OpBuilder &builder, Location loc,
                                              StringRef name,
                                              const AttentionConfig &config) {
  ImplicitLocOpBuilder b(loc, builder);
  // separable_bias_mma changes nothing where the score_mod is not a
  // separable bias (getForwardSeparableBias): no key offsets tile.
  AttentionConfig c = config;
  if (c.separableBiasMma && !getForwardSeparableBias(c))
    c.separableBiasMma = false;
  return KernelBuilder(b, c).build(name);
}

SmallVector<AttentionParam>
kvpipe::getAttentionParams(const AttentionConfig &config) {
  SmallVector<AttentionParam> params;
  for (unsigned p = 0; p <= static_cast<unsigned>(AttentionParam::Batch); ++p) {
    auto param = static_cast<AttentionParam>(p);
    // A split kernel writes the workspace; the combine kernel the output.
    if (config.splitKV &&
        (param == AttentionParam::OMap || param == AttentionParam::Lse))
      continue;
    params.push_back(param);
  }
  if (config.slidingWindow)
    params.append({AttentionParam::WindowLeft, AttentionParam::WindowRight});
  if (config.kvLengths)
    params.push_back(AttentionParam::KVLengths);
  if (config.splitKV)
    params.append({AttentionParam::NumSplits, AttentionParam::OPartial,
                   AttentionParam::LsePartial});
  if (config.pageSize)
    params.append({AttentionParam::BlockTable, AttentionParam::MaxPagesPerSeq});
  if (config.varlen) {
    params.push_back(AttentionParam::CuSeqlensQ);
    // (With kv_lengths, a paged cache's key counts are kv_lengths[b].)
    if (!config.kvLengths)
      params.push_back(AttentionParam::CuSeqlensK);
    params.append({AttentionParam::Out, AttentionParam::TotalQ});
  }
  if (config.tileTable)
    params.push_back(AttentionParam::TileTable);
  if (config.sinks && !config.splitKV)
    params.push_back(AttentionParam::Sinks);
  return params;
}

StringRef kvpipe::getAttentionParamName(AttentionParam param) {
  static constexpr StringLiteral names[] = {
      "q_map",       "k_map",       "v_map",      "o_map",
      "lse",         "seq_q",       "seq_kv",     "heads_per_kv_head",
      "scale_log2",  "heads_q",     "batch",      "window_left",
      "window_right", "kv_lengths",  "num_splits", "o_partial",
      "lse_partial",  "block_table", "max_pages_per_seq", "cu_seqlens_q",
      "cu_seqlens_k", "o",           "total_q",     "tile_table",
      "sinks"};
  static_assert(std::size(names) ==
                static_cast<size_t>(AttentionParam::Count));
  return names[static_cast<unsigned>(param)];
}

bool kvpipe::isAttentionPointerParam(AttentionParam p) {
  switch (p) {
  case AttentionParam::Lse:
  case AttentionParam::KVLengths:
  case AttentionParam::OPartial:
  case AttentionParam::LsePartial:
  case AttentionParam::BlockTable:
  case AttentionParam::CuSeqlensQ:
  case AttentionParam::CuSeqlensK:
  case AttentionParam::Out:
  case AttentionParam::TileTable:
  case AttentionParam::Sinks:
    return true;
  default:
    return false;
  }
}

DictionaryAttr kvpipe::withTensorMapABI(DictionaryAttr abi,
                                        FunctionType kernelType) {
  auto params = abi.getAs<ArrayAttr>("params");
  // A generator bug, not bad input: the ABI and the kernel would disagree.
  if (!params || params.size() != kernelType.getNumInputs())
    llvm::report_fatal_error("kvpipe: a kernel's ABI does not name each of its "
                             "parameters once, in order");
  Builder b(abi.getContext());
  NamedAttrList entries(abi);
  for (auto [name, type] : llvm::zip(params.getAsValueRange<StringAttr>(),
                                     kernelType.getInputs())) {
    auto map = dyn_cast<TensorMapType>(type);
    if (!map)
      continue;
    entries.set(name, b.getDictionaryAttr(
                          {b.getNamedAttr("box", b.getI64ArrayAttr(map.getBox())),
                           b.getNamedAttr("swizzle", b.getI64IntegerAttr(
                                                         map.getSwizzle()))}));
  }
  return entries.getDictionary(abi.getContext());
}

DictionaryAttr kvpipe::getAttentionABI(MLIRContext *ctx, StringRef name,
                                       const AttentionConfig &c) {
  Builder b(ctx);
  std::string element = c.elementType.isBF16() ? "bf16" : "f16";
  // Names and kinds of the parameters, in order.
  SmallVector<StringRef> params;
  SmallVector<NamedAttribute> kinds;
  for (AttentionParam p : getAttentionParams(c)) {
    StringRef name = getAttentionParamName(p);
    bool pointer = isAttentionPointerParam(p);
    StringRef kind = name.ends_with("_map")           ? "tensor_map"
                     : pointer                        ? "pointer"
                     : p == AttentionParam::ScaleLog2 ? "f32"
                                                      : "i32";
    params.push_back(name);
    kinds.push_back(b.getNamedAttr(name, b.getStringAttr(kind)));
  }
  // The modifiers' auxiliary tensors (docs/modifiers.md).
  SmallVector<std::string> auxNames;
  for (size_t i = 0; i < c.auxTypes.size(); ++i)
    auxNames.push_back("aux" + std::to_string(i));
  for (const std::string &name : auxNames) {
    params.push_back(name);
    kinds.push_back(b.getNamedAttr(name, b.getStringAttr("pointer")));
  }
  SmallVector<NamedAttribute> modifiers = getModifierABI(b, c);
  SmallVector<NamedAttribute> entries = {
      b.getNamedAttr("kernel", b.getStringAttr(name)),
      b.getNamedAttr("abi_version", b.getI64IntegerAttr(2)),
      b.getNamedAttr("head_dim", b.getI64IntegerAttr(c.headDim)),
      b.getNamedAttr("value_head_dim", b.getI64IntegerAttr(c.valueHeadDim)),
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
      b.getNamedAttr("tile_table", b.getBoolAttr(c.tileTable)),
      b.getNamedAttr("mask_alignment",
                     b.getStringAttr(stringifyMaskAlignment(c.maskAlignment))),
      b.getNamedAttr("sliding_window", b.getBoolAttr(c.slidingWindow)),
      b.getNamedAttr("kv_lengths", b.getBoolAttr(c.kvLengths)),
      b.getNamedAttr("varlen", b.getBoolAttr(c.varlen)),
      b.getNamedAttr("threads", b.getI64IntegerAttr(c.threads())),
      b.getNamedAttr(kDynamicSharedMemoryKey,
                     b.getI64IntegerAttr(c.dynamicSharedMemoryBytes())),
      b.getNamedAttr("params", b.getStrArrayAttr(params)),
      b.getNamedAttr("param_kinds", b.getDictionaryAttr(kinds)),
  };
  // Only paged kernels name their page size (the K/V maps then describe
  // the whole cache, one page per B coordinate).
  if (c.pageSize)
    entries.push_back(
        b.getNamedAttr("page_size", b.getI64IntegerAttr(c.pageSize)));
  if (c.sinks)
    entries.push_back(b.getNamedAttr("sinks", b.getBoolAttr(true)));
  if (!c.splitKV && !c.packGQA) {
    entries.append(modifiers);
    return b.getDictionaryAttr(entries);
  }
  appendDecodeABI(b, name, c, entries);
  return b.getDictionaryAttr(entries);
}

SmallVector<NamedAttribute> kvpipe::getModifierABI(Builder &b,
                                                   const AttentionConfig &c) {
  // Only kernels with modifiers report them: the others' ABI is unchanged.
  SmallVector<NamedAttribute> entries;
  if (!c.scoreMod && !c.maskMod)
    return entries;
  entries.push_back(b.getNamedAttr("score_mod", b.getBoolAttr(c.scoreMod)));
  entries.push_back(b.getNamedAttr("mask_mod", b.getBoolAttr(c.maskMod)));
  SmallVector<StringRef> aux;
  for (Type type : c.auxTypes)
    aux.push_back(type.isF32() ? "f32" : "i32");
  entries.push_back(b.getNamedAttr("aux_types", b.getStrArrayAttr(aux)));
  if (c.maskMod) {
    // What block skipping the compiler derived from the mask_mod, and the
    // ops it could not reason about (docs/modifiers.md).
    MaskModShape shape(*c.maskMod);
    SmallVector<std::string> unproven;
    for (Operation *op : shape.unproven()) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << op->getName() << " at " << op->getLoc();
      unproven.push_back(text);
    }
    entries.push_back(
        b.getNamedAttr("mask_mod_shape", b.getStringAttr(shape.summary())));
    entries.push_back(b.getNamedAttr(
        "mask_mod_unproven",
        b.getStrArrayAttr(SmallVector<StringRef>(unproven.begin(), unproven.end()))));
  }
  return entries;
}
