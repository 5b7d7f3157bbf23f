//===- AttentionBackwardBuilder.cpp - the attention backward family -------===//
//
// The FlashAttention backward pass in kvpipe terms (FA3's Hopper backward,
// docs/backward.md): three kernels generated from one declaration with
// `backward = true`.
//
//   preprocess   delta = rowsum(dO * O), lse_log2 = lse * log2(e) (fp32,
//                padded to 64-row blocks), dq_accum = 0
//   main         warpgroup 0, one thread    consumer warpgroups c = 1, 2
//                (64 K/V rows each)
//                ------------------------   --------------------------------
//                K, V -> sK, sV  (pipe kv)  wait kv
//                for i: Q_i -> sQ (pipe q)  for i: S^T = K_c Q_i^T,
//                       dO_i -> sdO (pipe do)       dP^T = V_c dO_i^T (SS);
//                                                   retire; mask;
//                                                   P^T, dS^T (registers);
//                                                   dV += P^T dO_i,
//                                                   dK += dS^T Q_i (RS);
//                                                   dS -> sdS_c;
//                                                   dQ_c = dS K_c (SS,
//                                                   transpose_a); retire;
//                                                   release q, do;
//                                                   dq_accum += dQ_c (atomics)
//                                           epilogue: dK, dV -> TMA stores;
//                                                   release kv
//   postprocess  dQ = scale * dq_accum in the element type
//
// This file builds the main kernel and the family; the row kernels
// (preprocess, postprocess) are in AttentionBackwardRowKernels.cpp.
//
// The main kernel is built from the parts the forward is built from
// (KernelParts.h: buildSlotWait, buildTileView; kvpipe.warp_roles,
// kvpipe.warpgroup_mma, kvpipe.store_fragment, kvpipe.fragment_rescale) and
// two of its own (buildColumnVector, buildFragmentAtomicAdd).
//
//===----------------------------------------------------------------------===//

#include "BackwardBuilder.h"
#include "Fragment.h"

#include "kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/AttentionGenerator.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelParts.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelTransforms.h"

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

using kvpipe::detail::BackwardBuilder;


gpu::GPUFuncOp BackwardBuilder::createKernel(StringRef name,
                                             ArrayRef<Type> types,
                                             int64_t threads,
                                             DictionaryAttr abi) {
  auto func = gpu::GPUFuncOp::create(b, name, b.getFunctionType(types, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
                b.getDenseI32ArrayAttr({static_cast<int32_t>(threads), 1, 1}));
  func->setAttr(kAttentionAbiAttrName,
                withTensorMapABI(abi, func.getFunctionType()));
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  params.assign(entry.getArguments().begin(), entry.getArguments().end());
  return func;
}

//===----------------------------------------------------------------------===//
// The main kernel.
//===----------------------------------------------------------------------===//

gpu::GPUFuncOp BackwardBuilder::buildMain() {
  Type i32Type = b.getI32Type(), f32Type = b.getF32Type();
  // The rows of a dK / dV store: a warpgroup's 64 keys, or with the head
  // dim split all the CTA's keys (a warpgroup's column blocks).
  int64_t gradientRows = c.backwardSplitsHeadDim() ? c.blockN : 64;
  // Packed sequences store dK and dV with predicated stores (a TMA store
  // would write past the sequence's keys into the next's): pointers to
  // contiguous (total_kv, heads_q, D) gradients instead of tensor maps.
  Type gradientType =
      c.varlen ? ptrType() : Type(tensorMapType(gradientRows));
  SmallVector<Type> types = {
      tensorMapType(kBlockM), tensorMapType(c.blockN), tensorMapType(c.blockN),
      tensorMapType(kBlockM), gradientType,           gradientType,
      ptrType(),              ptrType(),              ptrType(),
      i32Type,                i32Type,                i32Type,
      f32Type,                f32Type,                i32Type,
      i32Type};
  if (c.deterministic)
    types.push_back(ptrType());
  // Packed sequences: cu_seqlens_q, cu_seqlens_k, total_q, total_kv.
  size_t varlenParams = types.size();
  if (c.varlen)
    types.append({ptrType(), ptrType(), i32Type, i32Type});
  // The window bounds, then the modifiers' auxiliary tensors (as the
  // forward's: after every other parameter).
  size_t extra = types.size();
  if (c.slidingWindow)
    types.append({i32Type, i32Type});
  types.append(c.auxTypes.size() + c.auxGrads.size(), ptrType());
  gpu::GPUFuncOp func = createKernel(
      family, types, c.threads(),
      getAttentionBackwardABI(ctx, family, family, c,
                              AttentionBackwardRole::Main));
  // setmaxnreg needs a register cap at entry (as the forward).
  func->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                b.getI32IntegerAttr(1));

  seqQ = toIndex(param(BackwardParam::SeqQ));
  seqKV = toIndex(param(BackwardParam::SeqKV));
  headsQ = toIndex(param(BackwardParam::HeadsQ));
  // Packed: the CTA's sequence (grid z) and its lengths, which the masks,
  // the Q-block range and the modifiers read as seq_q and seq_kv.
  Value totalQ;
  if (c.varlen) {
    batch = gpu::BlockIdOp::create(b, gpu::Dimension::z);
    totalQ = toIndex(params[varlenParams + 2]);
    loadSequence(params[varlenParams], totalQ, params[varlenParams + 1],
                 toIndex(params[varlenParams + 3]));
  }
  if (c.maskMod)
    maskShape.emplace(*c.maskMod);
  ArrayRef<Value> extraParams = ArrayRef<Value>(params).drop_front(extra);
  Value windowLeft, windowRight;
  if (c.slidingWindow) {
    windowLeft = toIndex(extraParams[0]);
    windowRight = toIndex(extraParams[1]);
    extraParams = extraParams.drop_front(2);
  }
  auxParams.assign(extraParams.begin(),
                   extraParams.begin() + c.auxTypes.size());
  // The gradients' pointers, by tensor (null where none is asked for).
  auxGradients.assign(c.auxTypes.size(), Value());
  for (auto [i, tensor] : llvm::enumerate(c.auxGrads))
    auxGradients[tensor] = extraParams[c.auxTypes.size() + i];
  if (c.slidingWindow || (c.causal && c.maskAlignment == MaskAlignment::BottomRight))
    bounds = MaskBounds{c.causal,
                        c.maskAlignment == MaskAlignment::BottomRight
                            ? Value(arith::SubIOp::create(b, seqKV, seqQ))
                            : Value(),
                        windowLeft, windowRight, seqQ, seqKV};
  kvBlock = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  // Deterministic causal mode: a K/V block waits for the higher K/V blocks
  // that reach its Q blocks (the turns descend from the last one), so the
  // higher K/V blocks get the lower blockIdx.x. CTAs start in blockIdx
  // order: a CTA then only ever waits for CTAs started no later than itself.
  // In the other order, with more K/V blocks per head than resident CTAs
  // (causal, > 132 * 128 keys on the H200), every resident CTA could wait
  // for one not yet started: a deadlock.
  if (c.deterministic && c.causal)
    kvBlock = arith::SubIOp::create(
        b,
        arith::SubIOp::create(
            b, arith::CeilDivUIOp::create(b, seqKV, index(c.blockN)), index(1)),
        kvBlock);
  head = gpu::BlockIdOp::create(b, gpu::Dimension::y);
  if (!batch)
    batch = gpu::BlockIdOp::create(b, gpu::Dimension::z);
  kvHead = arith::DivUIOp::create(
      b, head, toIndex(param(BackwardParam::HeadsPerKVHead)));
  kvRow0 = arith::MulIOp::create(b, kvBlock, index(c.blockN));
  numQBlocks = arith::CeilDivUIOp::create(b, seqQ, index(kBlockM));
  // With the causal mask, the Q blocks before the block's first key see
  // none of its keys: skipped. Producer and consumers share these bounds.
  qBegin = c.causal && !bounds
               ? Value(arith::MinUIOp::create(
                     b, arith::DivUIOp::create(b, kvRow0, index(kBlockM)),
                     numQBlocks))
               : index(0);
  qEnd = numQBlocks;
  narrowQueryBlocks();
  // A packed sequence's K/V blocks end at its own keys (the grid is sized
  // by the longest): a block past them visits no Q block and stores
  // nothing, so its CTA leaves before it makes its barriers (the rest of
  // the kernel goes under the flag once built: most of an uneven batch's
  // grid).
  Value hasWork;
  if (c.varlen) {
    hasWork =
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, kvRow0, seqKV);
    qEnd = arith::SelectOp::create(b, hasWork, qEnd, qBegin);
  }
  Operation *lastBeforeWork = hasWork ? qEnd.getDefiningOp() : nullptr;
  rowBase = paddedRowBase(headsQ, totalQ);

  // Shared memory from a 1024-byte aligned start (the swizzle atom), as the
  // forward: K, V, the Q ring, the dO ring, the consumers' dS tiles.
  shared = buildAlignedSharedMemory(b, AttentionConfig::kAlignmentSlack);
  auto view = [&](int64_t offset, MemRefType type) {
    return shared.view(b, offset, type);
  };
  int64_t stages = AttentionConfig::kBackwardStages;
  int64_t doStages = c.backwardDOStages();
  int64_t buffers = AttentionConfig::kBackwardDSBuffers;
  sK = view(0, sharedType({c.qkBlocks(), c.blockN, kW}));
  sV = view(c.backwardVOffset(), sharedType({c.vBlocks(), c.blockN, kW}));
  sQ = view(c.backwardQOffset(),
            sharedType({stages, c.qkBlocks(), kBlockM, kW}));
  sDO = view(c.backwardDOOffset(),
             sharedType({doStages, c.vBlocks(), kBlockM, kW}));
  if (c.backwardSplitsHeadDim()) {
    // dS and P: [buffers][block_n / kW][64 queries][kW keys]; consumer c's
    // tile is column block c (its 32 keys), and a buffer is the K-major A of
    // dQ = dS K and the MN-major B of dV^T = dO^T P and dK^T = Q^T dS.
    auto type = sharedType({buffers, c.blockN / kW, kBlockM, kW});
    sDS = view(c.backwardDSOffset(), type);
    sP = view(c.backwardPOffset(), type);
  } else {
    // dS: [buffers][64 / kW][consumers x 64 keys][kW queries]; consumer c's
    // tile is keys [64 c, 64 c + 64), and a buffer is the [block_n][64]
    // MN-major A of dQ = dS K over all the CTA's keys.
    sDS = view(c.backwardDSOffset(),
               sharedType({buffers, kDSBlocks, c.blockN, kW}));
  }

  if (c.sharedStatistics) {
    sLSE = view(c.backwardLSEOffset(),
                sharedType(c.backwardLSERingShape(), b.getF32Type()));
    sDelta = view(c.backwardDeltaOffset(),
                  sharedType(c.backwardDeltaRingShape(), b.getF32Type()));
  }

  auto pipelineType = [&](int64_t slots) {
    return PipelineType::get(ctx, slots, /*qk_stages=*/1, /*producers=*/1,
                             /*consumers=*/c.consumerWarpgroups);
  };
  pipeKV = CreateOp::create(b, pipelineType(1));
  pipeQ = CreateOp::create(b, pipelineType(stages));
  pipeDO = CreateOp::create(b, pipelineType(doStages));
  for (Value pipe : {pipeKV, pipeQ, pipeDO})
    InitOp::create(b, pipe);

  auto roles = WarpRolesOp::create(b, c.producerRegisters,
                                   c.consumerWarpgroups, c.consumerRegisters);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&roles.getProducerBlock());
    Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    auto producer = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, tid, index(0)),
        /*withElseRegion=*/false);
    b.setInsertionPointToStart(producer.thenBlock());
    buildMainProducer();
    b.setInsertionPointToStart(&roles.getConsumerBlock());
    if (c.backwardSplitsHeadDim())
      buildSplitHeadConsumer(roles.getConsumerIndex());
    else
      buildMainConsumer(roles.getConsumerIndex());
  }
  gpu::ReturnOp::create(b);
  if (lastBeforeWork) {
    IRRewriter rewriter(ctx);
    runRestOfBlockUnder(rewriter, hasWork, lastBeforeWork->getNextNode());
  }
  return func;
}

void BackwardBuilder::buildMainProducer() {
  for (BackwardParam map : {BackwardParam::QMap, BackwardParam::KMap,
                            BackwardParam::VMap, BackwardParam::DOMap})
    TMAPrefetchOp::create(b, param(map));
  // Loads every column block of `rows` rows at `row` into `tile` (a slot
  // view [blocks][rows][kW]: Q and K have head_dim columns, V and dO
  // value_head_dim), completing on `barrier`.
  auto loadRows = [&](Value map, Value tile, Value headIndex, Value row,
                      int64_t rows, Value barrier) {
    int64_t blocks = cast<MemRefType>(tile.getType()).getShape().front();
    for (int64_t col = 0; col < blocks; ++col) {
      Value block = buildTileView(
          b, tile, {b.getIndexAttr(col), b.getIndexAttr(0), b.getIndexAttr(0)},
          {rows, kW});
      TMALoadOp::create(b, map,
                        ValueRange{mapBatch(), headIndex, row, index(col * kW)},
                        block, barrier, Value());
    }
  };
  // The CTA's K and V blocks, once.
  ProducerAcquireOp::create(b, pipeKV, nullptr);
  Value kvBarrier = ProducerMBarOp::create(b, pipeKV, nullptr);
  Value kvRow = mapRow(seqStartKV, kvRow0);
  loadRows(param(BackwardParam::KMap), sK, kvHead, kvRow, c.blockN, kvBarrier);
  loadRows(param(BackwardParam::VMap), sV, kvHead, kvRow, c.blockN, kvBarrier);
  ProducerCommitOp::create(b, pipeKV, nullptr);
  StepOp::create(b, pipeKV);

  // Q_i and dO_i, block by block, through their rings.
  auto loop = scf::ForOp::create(b, qBegin, qEnd, index(1),
                                 ValueRange{pipeQ, pipeDO});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value qRow =
      arith::MulIOp::create(b, loop.getInductionVar(), index(kBlockM));
  SmallVector<Value> next;
  // Q with its log-sum-exp, dO with its delta.
  for (auto [ring, map, state, statistics, values] :
       {std::tuple{sQ, param(BackwardParam::QMap), loop.getRegionIterArg(0),
                   sLSE, param(BackwardParam::LseLog2)},
        std::tuple{sDO, param(BackwardParam::DOMap), loop.getRegionIterArg(1),
                   sDelta, param(BackwardParam::Delta)}}) {
    ProducerAcquireOp::create(b, state, nullptr);
    Value slotIndex = IndexOp::create(b, state);
    Value barrier = ProducerMBarOp::create(b, state, nullptr);
    ArrayRef<int64_t> slotShape =
        cast<MemRefType>(ring.getType()).getShape().drop_front();
    Value tile = buildTileView(
        b, ring,
        {slotIndex, b.getIndexAttr(0), b.getIndexAttr(0), b.getIndexAttr(0)},
        slotShape);
    loadRows(map, tile, head, mapRow(seqStartQ, qRow), kBlockM, barrier);
    // The block's 64 statistics: rows of the padded buffers (whole 64-row
    // blocks, so the copy stays in bounds; 256-byte aligned from the
    // buffer's start).
    if (statistics)
      BulkLoadOp::create(
          b,
          element(b.getF32Type(), values,
                  toI64(arith::AddIOp::create(b, rowBase, qRow))),
          buildTileView(b, statistics, {slotIndex, b.getIndexAttr(0)},
                        {kBlockM}),
          barrier);
    ProducerCommitOp::create(b, state, nullptr);
    next.push_back(StepOp::create(b, state));
  }
  scf::YieldOp::create(b, next);
}

void BackwardBuilder::narrowQueryBlocks() {
  // The queries that keep some key of the CTA's [kvRow0, kvRow0 + block_n):
  // from the first query of its first key (the diagonal or the window's
  // right edge) to the last query of its last key (the window's left
  // edge); the Q blocks outside are never loaded, in the producer and the
  // consumers alike (the forward's firstKVBlock / numKVBlocks turned around).
  Value lastKey = arith::AddIOp::create(b, kvRow0, index(c.blockN - 1));
  bool narrowed = false;
  if (bounds && c.masksRight())
    qBegin = arith::DivUIOp::create(b, bounds->firstQueryOf(b, kvRow0),
                                    index(kBlockM));
  if (bounds && c.masksLeft()) {
    Value end = arith::AddIOp::create(b, bounds->lastQueryOf(b, lastKey),
                                      index(1));
    qEnd = arith::MinUIOp::create(
        b, arith::CeilDivUIOp::create(b, end, index(kBlockM)), numQBlocks);
    narrowed = true;
  }
  if (maskShape) {
    auto [lo, hi] = maskShape->buildQueryRange(b, kvRow0, lastKey);
    if (hi) {
      Value end = arith::MaxSIOp::create(
          b, arith::AddIOp::create(b, hi, index(1)), index(0));
      qEnd = arith::MinUIOp::create(
          b, qEnd, arith::CeilDivUIOp::create(b, end, index(kBlockM)));
      narrowed = true;
    }
    if (lo)
      qBegin = arith::MaxUIOp::create(
          b, qBegin,
          arith::MinUIOp::create(
              b,
              arith::DivUIOp::create(
                  b, arith::MaxSIOp::create(b, lo, index(0)), index(kBlockM)),
              numQBlocks));
  }
  // An empty range (a K/V block no query keeps) is [qBegin, qBegin): dK and
  // dV are stored as zeros.
  if (narrowed)
    qEnd = arith::MaxUIOp::create(b, qEnd, qBegin);
}

Value BackwardBuilder::transposedMaskNeeded(Value qRow, Value tileKeyRow) {
  // S^T's rows are keys, its columns queries. Only a block crossing seq_q,
  // seq_kv or (causal) the diagonal needs the mask: a uniform branch.
  Value needed = arith::OrIOp::create(
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::ugt,
                            arith::AddIOp::create(b, qRow, index(kBlockM)),
                            seqQ),
      arith::CmpIOp::create(b, arith::CmpIPredicate::ugt,
                            arith::AddIOp::create(b, tileKeyRow, index(64)),
                            seqKV));
  if (c.causal && !bounds)
    needed = arith::OrIOp::create(
        b, needed,
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, qRow,
                              arith::AddIOp::create(b, tileKeyRow, index(64))));
  // Other masks: the tile crosses a bound when its first query is before
  // the highest first query of its keys, or its last query after the lowest
  // last query (MaskBounds is monotone in the key).
  if (tileFirstQuery)
    needed = arith::OrIOp::create(
        b, needed,
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, qRow,
                              tileFirstQuery));
  if (tileLastQuery)
    needed = arith::OrIOp::create(
        b, needed,
        arith::CmpIOp::create(b, arith::CmpIPredicate::sgt,
                              arith::AddIOp::create(b, qRow, index(kBlockM - 1)),
                              tileLastQuery));
  return needed;
}

Value BackwardBuilder::transposedValid(Value qRow) {
  Fragment frag(b, kBlockM / 2);
  auto i32Vec = VectorType::get({kBlockM / 2}, b.getI32Type());
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value lane = arith::RemUIOp::create(b, tid, index(32));
  Value firstCol = arith::AddIOp::create(
      b, qRow,
      arith::MulIOp::create(b, arith::RemUIOp::create(b, lane, index(4)),
                            index(2)));
  Value queries = arith::AddIOp::create(
      b, vector::BroadcastOp::create(b, i32Vec, toI32(firstCol)),
      frag.columnOffsets());
  Value keys = frag.perRow(toI32(keyRow0), toI32(keyRow1));
  Value valid = arith::AndIOp::create(
      b,
      arith::CmpIOp::create(
          b, arith::CmpIPredicate::slt, queries,
          vector::BroadcastOp::create(b, i32Vec, toI32(seqQ))),
      arith::CmpIOp::create(
          b, arith::CmpIPredicate::slt, keys,
          vector::BroadcastOp::create(b, i32Vec, toI32(seqKV))));
  if (c.causal && !bounds)
    valid = arith::AndIOp::create(
        b, valid,
        arith::CmpIOp::create(b, arith::CmpIPredicate::sge, queries, keys));
  // The forward's predicate (firstKeyOf(m) <= n <= lastKeyOf(m)) as the
  // key's query range.
  if (firstQuery0)
    valid = arith::AndIOp::create(
        b, valid,
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::sge, queries,
            frag.perRow(toI32(firstQuery0), toI32(firstQuery1))));
  if (lastQuery0)
    valid = arith::AndIOp::create(
        b, valid,
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::sle, queries,
            frag.perRow(toI32(lastQuery0), toI32(lastQuery1))));
  return valid;
}

Value BackwardBuilder::maskTransposed(Value sT, Value qRow, Value keyRow0,
                                      Value keyRow1, Value tileKeyRow) {
  return buildMaskedScores(b, sT, transposedMaskNeeded(qRow, tileKeyRow),
                           [&]() -> Value { return transposedValid(qRow); });
}

SmallVector<Value> BackwardBuilder::maskValues(
    ValueRange values, ArrayRef<Value> fills, Value needed,
    function_ref<Value()> valid, Value qRow, Value firstKey, int64_t keys,
    function_ref<ModifierIndices()> at) {
  // `keep` applied to every value, where `condition` does not hold (a
  // uniform branch).
  auto maskUnless = [&](ValueRange in, Value condition,
                        function_ref<Value()> keep) -> SmallVector<Value> {
    auto ifMask = scf::IfOp::create(b, in.getTypes(), condition,
                                    /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifMask.thenBlock());
    scf::YieldOp::create(b, in);
    b.setInsertionPointToStart(ifMask.elseBlock());
    Value kept = keep();
    SmallVector<Value> out;
    for (auto [value, fill] : llvm::zip_equal(in, fills))
      out.push_back(arith::SelectOp::create(b, kept, value, fill));
    scf::YieldOp::create(b, out);
    return SmallVector<Value>(ifMask.getResults());
  };
  SmallVector<Value> masked = maskUnless(
      values, arith::XOrIOp::create(b, needed, arith::ConstantIntOp::create(b, 1, 1)),
      valid);
  if (!c.maskMod)
    return masked;
  // The mask_mod per element where its shape does not prove every element
  // of the tile kept (a uniform branch), as the forward.
  Value allKept = maskShape->buildAllKept(
      b, qRow, arith::AddIOp::create(b, qRow, index(kBlockM - 1)), firstKey,
      arith::AddIOp::create(b, firstKey, index(keys - 1)));
  return maskUnless(masked, allKept,
                    [&] { return buildMaskModKeep(b, *c.maskMod, at()); });
}

BackwardBuilder::Probabilities BackwardBuilder::buildProbabilities(
    Value s, Value lse, function_ref<ModifierIndices()> at,
    function_ref<Value(Value)> maskScores,
    function_ref<SmallVector<Value>(ValueRange, ArrayRef<Value>)>
        maskElements) {
  auto sType = cast<VectorType>(s.getType());
  auto zeros = [&](Type element) -> Value {
    auto type = VectorType::get(sType.getShape(), element);
    return arith::ConstantOp::create(
        b, type,
        DenseElementsAttr::get(type, FloatAttr::get(element, 0.0).getValue()));
  };
  auto exp2 = [&](Value scores, Value factor) -> Value {
    return math::Exp2Op::create(
        b,
        math::FmaOp::create(b, scores,
                            vector::BroadcastOp::create(b, sType, factor),
                            arith::NegFOp::create(b, lse)),
        arith::FastMathFlags::afn);
  };
  Probabilities probs;
  if (!c.scoreMod && !c.maskMod) {
    // Without modifiers dS is computed from the fp32 P, which stays live
    // across the dP wait next to its element-type copy for the dV wgmma.
    // Extending the copy back instead (so that the fp32 P died early) cost
    // 64 integer ops per Q block and was 3-4.5 % slower at head dim 64 once
    // the dS^T store no longer held 16 addresses (stmatrix, 2026-12-04).
    probs.p = exp2(maskScores(s), param(BackwardParam::ScaleLog2));
    probs.p16 = probs.pd16 = packedTrunc(probs.p);
    return probs;
  }
  // With a score_mod, P is recomputed from the modified scaled score (the
  // forward's log-sum-exp is of those), and dS is the gradient of the scaled
  // score: P (dP - delta) d score_mod / d s, the derivative taken at the
  // scaled score (Modifiers.cpp); dK and dQ then take the scale as without
  // one (epilogue, postprocess). With modifiers each (modified) score
  // becomes P (and P d) at once, in the element type, which the masks then
  // set to 0 (an infinite P of a masked score included): the scores and
  // their derivatives are never live as fp32 fragments next to the mask's
  // work (at head dim 128 that halved the soft-cap's spills, 2026-12-04).
  Value p, dMod;
  std::optional<AdditiveScoreMod> additive =
      c.scoreMod ? getAdditiveScoreMod(*c.scoreMod) : std::nullopt;
  if (additive) {
    // score + bias has the derivative 1: exponentiated as the forward's,
    // (s + bias / scale) * scale in the raw domain, one multiplication per
    // element fewer than the scaled score plus the bias.
    Value inverseScale = arith::DivFOp::create(
        b, f32(1.0), param(BackwardParam::Scale));
    p = exp2(buildAdditiveScoreMod(b, *c.scoreMod, *additive, s, inverseScale,
                                   at()),
             param(BackwardParam::ScaleLog2));
  } else if (c.scoreMod) {
    Value modified;
    std::tie(modified, dMod) = buildScoreModWithDerivative(
        b, *c.scoreMod, s, param(BackwardParam::Scale), at());
    p = exp2(modified, f32(M_LOG2E));
  } else {
    p = exp2(s, param(BackwardParam::ScaleLog2));
  }
  Value zero = zeros(b.getF32Type()), zero16 = zeros(c.elementType);
  SmallVector<Value> toMask = {packedTrunc(p)}, fills = {zero16};
  if (dMod) {
    // Where P is 0 (underflowed) so is the product, whatever the derivative
    // at the raw score is (a region's log of a padding row's zero score has
    // an infinite one).
    Value vanishes =
        arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, p, zero);
    toMask.push_back(packedTrunc(arith::SelectOp::create(
        b, vanishes, zero, arith::MulFOp::create(b, p, dMod))));
    fills.push_back(zero16);
  }
  // The aux tensors' gradients sum P (dP - delta) d over the whole tile,
  // and such sums cancel (ALiBi's slope: each row of dS sums to zero, the
  // distances do not): P rounded to the element type was a relative error
  // of 0.03-0.1 in the slope's gradient at 517 x 300 (H200, 2026-12-05), so
  // they take the fp32 P.
  if (!c.auxGrads.empty()) {
    toMask.push_back(p);
    fills.push_back(zero);
  }
  SmallVector<Value> masked = maskElements(toMask, fills);
  probs.p16 = masked[0];
  probs.pd16 = dMod ? masked[1] : probs.p16;
  if (!c.auxGrads.empty())
    probs.pAux = masked.back();
  return probs;
}

Value BackwardBuilder::buildScoreGradient(const Probabilities &probs, Value s,
                                          Value dPMinusDelta,
                                          function_ref<ModifierIndices()> at) {
  Type sType = s.getType();
  Value dS = arith::MulFOp::create(
      b, probs.p ? probs.p : Value(arith::ExtFOp::create(b, sType, probs.pd16)),
      dPMinusDelta);
  // The auxiliary tensors' gradients: the modified score's gradient,
  // P (dP - delta) with the masks' zeros, times the region's derivatives
  // with respect to the values it reads.
  if (probs.pAux)
    buildScoreModAuxGradients(
        b, *c.scoreMod, s, param(BackwardParam::Scale), at(),
        arith::MulFOp::create(b, probs.pAux, dPMinusDelta), auxGradients);
  return dS;
}

Value BackwardBuilder::dqTurn(Value qBlock, Value consumer) {
  // The order of a warpgroup's dQ contributions: the K/V blocks that reach a
  // Q block are 0 .. m (causal: those whose first key is at most the block's
  // last query), so (K/V block, consumer) numbers them without gaps. Without
  // the mask every CTA starts at Q block 0 and they take their turns in K/V
  // block order. With it, K/V block n starts at Q block qBegin(n) =
  // n * block_n / 64, where it is the last block that reaches the Q block:
  // the turns go from the last K/V block down (m - n), so that each CTA's
  // first Q block is its own at once, instead of waiting for every CTA
  // before it to walk down to it.
  Value order = kvBlock;
  if (c.causal) {
    // m: the K/V block of the Q block's last query (block_n need not be a
    // multiple of 64: 96 at head dim 192).
    Value lastKVBlock = arith::MinUIOp::create(
        b,
        arith::DivUIOp::create(
            b,
            arith::AddIOp::create(
                b, arith::MulIOp::create(b, qBlock, index(kBlockM)),
                index(kBlockM - 1)),
            index(c.blockN)),
        arith::SubIOp::create(
            b, arith::CeilDivUIOp::create(b, seqKV, index(c.blockN)),
            index(1)));
    order = arith::SubIOp::create(b, lastKVBlock, kvBlock);
  }
  // With dQ's columns split each warpgroup adds its own columns (a turn
  // each, in warpgroup order); taking turns by Q block, one warpgroup of the
  // CTA adds: a turn per CTA.
  if (!c.backwardSplitsDQColumns())
    return toI32(order);
  return toI32(arith::AddIOp::create(
      b, arith::MulIOp::create(b, order, index(c.consumerWarpgroups)),
      consumer));
}

void BackwardBuilder::buildMainConsumer(Value consumer) {
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value t = arith::RemUIOp::create(b, tid, index(128));
  Value warp = arith::DivUIOp::create(b, t, index(32));
  Value lane = arith::RemUIOp::create(b, t, index(32));
  Value elected = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, t, index(0));
  Value barrierId = toI32(
      arith::AddIOp::create(b, consumer, index(AttentionConfig::kEpilogueBarriers)));
  // This warpgroup's dQ turn (deterministic mode, dqTurn).
  Value turn;
  // dQ's split (AttentionConfig::backwardSplitsDQColumns): warpgroup c
  // computes column blocks [c n, c n + n) of dQ over all block_n keys;
  // otherwise (one column block, head dim 64) the warpgroups take turns by
  // Q block, each computing the whole of dQ over all keys on every
  // consumerWarpgroups-th block. Either way each dQ element is added once
  // per CTA.
  bool split = c.backwardSplitsDQColumns();
  int64_t ownBlocks = split ? c.qkBlocks() / c.consumerWarpgroups : c.qkBlocks();
  if (c.deterministic && !c.causal)
    turn = dqTurn(Value(), consumer);

  // This warpgroup's 64 K and V rows, and its dS tile.
  Value tileRow = arith::MulIOp::create(b, consumer, index(64));
  auto rowsOf = [&](Value tile) -> Value {
    return memref::SubViewOp::create(
        b, tile,
        ArrayRef<OpFoldResult>{b.getIndexAttr(0), tileRow, b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(c.qkBlocks()),
                               b.getIndexAttr(64), b.getIndexAttr(kW)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                               b.getIndexAttr(1)});
  };
  Value sKc = rowsOf(sK), sVc = rowsOf(sV);
  Value consumersBarrier =
      i32(AttentionConfig::kBackwardConsumersBarrier);
  int64_t consumerThreads = 128 * c.consumerWarpgroups;
  // This warpgroup's dQ staging tile: its 64-row part of dQ in fragment
  // order, added to dq_accum's block (the same order: a column block is a
  // contiguous part of the 64-row block) by one bulk reduction.
  int64_t dqElements = kBlockM * kW * ownBlocks;
  Value sDQc = shared.view(
      b,
      arith::AddIOp::create(
          b, index(c.backwardDQOffset()),
          arith::MulIOp::create(b, consumer, index(c.backwardDQTileBytes()))),
      MemRefType::get({dqElements}, b.getF32Type(), MemRefLayoutAttrInterface(),
                      gpu::AddressSpaceAttr::get(ctx,
                                                 gpu::AddressSpace::Workgroup)));
  // The keys of the thread's two rows of S^T.
  Value tileKeyRow = arith::AddIOp::create(b, kvRow0, tileRow);
  Value threadRow = arith::AddIOp::create(
      b, arith::MulIOp::create(b, warp, index(16)),
      arith::DivUIOp::create(b, lane, index(4)));
  threadColumn =
      arith::MulIOp::create(b, arith::RemUIOp::create(b, lane, index(4)),
                            index(2));
  keyRow0 = arith::AddIOp::create(b, tileKeyRow, threadRow);
  keyRow1 = arith::AddIOp::create(b, keyRow0, index(8));
  // The queries the thread's keys keep, once: the keys are the same for
  // every Q block.
  if (bounds && c.masksRight()) {
    firstQuery0 = bounds->firstQueryOf(b, keyRow0);
    firstQuery1 = bounds->firstQueryOf(b, keyRow1);
    tileFirstQuery = bounds->firstQueryOf(
        b, arith::AddIOp::create(b, tileKeyRow, index(63)));
  }
  if (bounds && c.masksLeft()) {
    lastQuery0 = bounds->lastQueryOf(b, keyRow0);
    lastQuery1 = bounds->lastQueryOf(b, keyRow1);
    tileLastQuery = bounds->lastQueryOf(b, tileKeyRow);
  }

  ConsumerWaitOp::create(b, pipeKV, nullptr);
  Fragment accFrag(b, c.headDim / 2);
  Value zero = arith::ConstantOp::create(
      b, accFrag.type(), DenseElementsAttr::get(accFrag.type(), 0.0f));
  auto sType = VectorType::get({kBlockM / 2}, b.getF32Type());
  auto halfType = VectorType::get({kBlockM / 2}, c.elementType);

  auto loop = scf::ForOp::create(b, qBegin, qEnd, index(1),
                                 ValueRange{pipeQ, pipeDO, zero, zero});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value stateQ = loop.getRegionIterArg(0), stateDO = loop.getRegionIterArg(1);
    Value dK = loop.getRegionIterArg(2), dV = loop.getRegionIterArg(3);
    Value qRow =
        arith::MulIOp::create(b, loop.getInductionVar(), index(kBlockM));
    SmallVector<int64_t, 3> slotShape = {c.qkBlocks(), kBlockM, kW};
    // The log-sum-exp and delta of the queries (S^T's columns): from the
    // statistics slots that came with Q and dO (shared_statistics), or
    // else prefetched into L1 first, so that their global-memory latency
    // overlaps the slot
    // waits and the S^T and dP^T wgmmas. The log-sum-exp is then loaded
    // while the GEMMs run (below); delta after dP^T's wait, where it is used
    // (ptxas sinks its loads there anyway).
    Value firstColumn;
    if (!c.sharedStatistics) {
      firstColumn = arith::AddIOp::create(
          b, arith::AddIOp::create(b, rowBase, qRow), threadColumn);
      for (BackwardParam values :
           {BackwardParam::LseLog2, BackwardParam::Delta})
        buildColumnPrefetch(b, param(values), firstColumn, kBlockM / 2);
    }
    // The thread's columns of a statistic: from its slot in shared memory
    // (after the wait of the Q or dO slot it came with), or from global
    // memory.
    auto columnStatistic = [&](Value ring, Value state, BackwardParam values) {
      if (ring)
        return buildSharedColumnVector(b, statisticsSlot(ring, state),
                                       threadColumn, kBlockM / 2);
      return buildColumnVector(b, param(values), firstColumn, kBlockM / 2);
    };
    // S^T = K_c Q_i^T and dP^T = V_c dO_i^T.
    Value qTile = buildSlotWait(b, sQ, stateQ, slotShape);
    Value sT = WarpgroupMmaOp::create(b, sType, sKc, qTile, Value(),
                                      kSwizzle);
    Value dOTile = buildSlotWait(b, sDO, stateDO, slotShape);
    Value dPT = WarpgroupMmaOp::create(b, sType, sVc, dOTile, Value(),
                                       kSwizzle);
    // The log-sum-exp columns are loaded while the GEMMs run, ahead of the
    // wait and of the mask's branch: ptxas does not hoist loads above
    // either, and below them the loads' latency sat between S^T and the
    // exp2s (with the dS^T store's addresses gone from the registers, the
    // causal D 128 kernel ran 13 % slower that way, 2026-12-04).
    Value lse = columnStatistic(sLSE, stateQ, BackwardParam::LseLog2);
    // S^T first (pending = 1: dP^T may still be in flight), then P^T, then
    // dP^T and dS^T: the log-sum-exp and delta columns are never live at
    // once (at head dim 128, dK, dV, S^T, dP^T and both would exceed the
    // consumers' 240 registers).
    sT = WarpgroupWaitOp::create(b, TypeRange{sType}, ValueRange{sT}, 1)
             .getResult(0);
    // P^T = exp2(S^T c - lse_log2) and dS^T = P^T (dP^T - delta).
    auto at = [&] { return transposedIndices(qRow); };
    Probabilities probs = buildProbabilities(
        sT, lse, at,
        [&](Value scores) {
          return maskTransposed(scores, qRow, keyRow0, keyRow1, tileKeyRow);
        },
        [&](ValueRange values, ArrayRef<Value> fills) {
          return maskValues(values, fills,
                            transposedMaskNeeded(qRow, tileKeyRow),
                            [&] { return transposedValid(qRow); }, qRow,
                            tileKeyRow, 64, at);
        });
    Value pT16 = probs.p16;
    dPT = WarpgroupWaitOp::create(b, TypeRange{sType}, ValueRange{dPT}, 0)
              .getResult(0);
    Value delta = columnStatistic(sDelta, stateDO, BackwardParam::Delta);
    Value dST = buildScoreGradient(probs, sT,
                                   arith::SubFOp::create(b, dPT, delta), at);
    Value dST16 = arith::TruncFOp::create(b, halfType, dST);
    // dV += P^T dO_i, dK += dS^T Q_i (A from registers, as P in O += P V).
    // With dQ's column split, dK is issued after dQ (FA3's order): dQ then
    // retires while dK runs, and its staging overlaps the dK wgmma.
    dV = WarpgroupMmaOp::create(b, dV.getType(), pT16, dOTile, dV,
                                kSwizzle,
                                /*transpose_b=*/true);
    auto issueDK = [&]() {
      dK = WarpgroupMmaOp::create(b, dK.getType(), dST16, qTile, dK,
                                  kSwizzle,
                                  /*transpose_b=*/true);
    };
    if (!split)
      issueDK();
    // dS to shared memory, for dQ = dS K_c: the tile holds dS^T's rows
    // (keys), so the wgmma reads it MN-major (transpose_a). The generic
    // writes must be visible to the async proxy and complete in the
    // warpgroup's 128 threads before the wgmma reads them.
    // dQ reads both warpgroups' tiles: double buffered by
    // the Q block's parity, a tile is written again two Q blocks later,
    // after the other warpgroup passed the consumers' barrier of the Q
    // block between (so its dQ wgmmas reading it had retired).
    OpFoldResult dsBuffer = OpFoldResult(
        arith::RemUIOp::create(b, loop.getInductionVar(), index(2)));
    Value sDSc = buildTileView(b, sDS,
                               {dsBuffer, b.getIndexAttr(0), tileRow,
                                b.getIndexAttr(0)},
                               {kDSBlocks, kBlockM, kW});
    StoreFragmentOp::create(b, dST16, sDSc, kSwizzle);
    NVVM::FenceProxyOp::create(
        b, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_shared),
        NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
    // The previous Q block's bulk reduction must have read the dQ staging
    // tile before it is written again: its issuing thread waits, and the
    // barrier that publishes dS also releases the other threads. (It was
    // issued a whole Q block ago: the wait is normally free.)
    waitBulkReads(elected);
    NVVM::BarrierOp::create(b, Type(), consumersBarrier, i32(consumerThreads),
                            nullptr, Value());
    // dQ's A operand: the whole buffer, every key of the CTA.
    Value dsOperand = buildTileView(
        b, sDS,
        {dsBuffer, b.getIndexAttr(0), b.getIndexAttr(0), b.getIndexAttr(0)},
        {kDSBlocks, c.consumerWarpgroups * kBlockM, kW});
    Value nextQ, nextDO;
    // Retires the wgmmas reading Q_i and dO_i (dV, dK) and releases both
    // slots.
    auto retireAndRelease = [&]() {
      auto all = WarpgroupWaitOp::create(b, TypeRange{dV.getType(), dK.getType()},
                                         ValueRange{dV, dK}, 0);
      dV = all.getResult(0);
      dK = all.getResult(1);
      nextQ = ConsumerReleaseOp::create(b, stateQ, elected, nullptr);
      nextDO = ConsumerReleaseOp::create(b, stateDO, elected, nullptr);
    };
    // This warpgroup's dQ columns of Q block i over all the CTA's keys:
    // computed a 64-column block at a time (32 registers, not D/2), staged,
    // and added to dq_accum by one bulk reduction. In deterministic mode
    // only in its turn (after every earlier contribution to the Q block),
    // and the reduction completes (its writes, not only its read) before
    // the turn is passed on. `beforeDK` (the split): the first block's dQ
    // is issued before dK, retires dV (releasing dO_i) while it runs, then
    // dK is issued and dQ retired with dK in flight; dK is retired and Q_i
    // released after the reduction is issued.
    auto addDQ = [&](bool beforeDK) {
      Value semaphore;
      if (c.deterministic) {
        semaphore = element(
            b.getI32Type(), param(BackwardParam::DQSemaphore),
            toI64(arith::AddIOp::create(
                b, arith::DivUIOp::create(b, rowBase, index(kBlockM)),
                loop.getInductionVar())));
        buildOrderedTurnWait(semaphore,
                             c.causal ? dqTurn(loop.getInductionVar(), consumer) : turn,
                             elected, barrierId);
      }
      Value firstBlock = arith::MulIOp::create(
          b, split ? consumer : index(0), index(ownBlocks));
      for (int64_t col = 0; col < ownBlocks; ++col) {
        Value kBlock = buildTileView(
            b, sK,
            {OpFoldResult(arith::AddIOp::create(b, firstBlock, index(col))),
             b.getIndexAttr(0), b.getIndexAttr(0)},
            {1, c.blockN, kW});
        // One column block of dQ: 64 x kW, kW / 2 fp32 per thread.
        auto dqType = VectorType::get({kW / 2}, b.getF32Type());
        Value dQ = WarpgroupMmaOp::create(b, dqType, dsOperand, kBlock, Value(),
                                          kSwizzle,
                                          /*transpose_b=*/true,
                                          /*transpose_a=*/true);
        int64_t pending = 0;
        if (col == 0 && beforeDK) {
          // In flight: dV, dQ. Retire dV, release dO_i, issue dK.
          dV = WarpgroupWaitOp::create(b, TypeRange{dV.getType()},
                                       ValueRange{dV}, 1)
                   .getResult(0);
          nextDO = ConsumerReleaseOp::create(b, stateDO, elected, nullptr);
          issueDK();
          pending = 1; // dK
        }
        dQ = WarpgroupWaitOp::create(b, TypeRange{dqType}, ValueRange{dQ},
                                     pending)
                 .getResult(0);
        buildFragmentOrderStore(
            b, dQ, sDQc, t, col * AccumulatorLayout::elementsPerThread(kW));
      }
      // The staged tile, complete in the warpgroup and visible to the async
      // proxy, goes to its columns of the Q block's range of dq_accum.
      NVVM::FenceProxyOp::create(
          b, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_shared),
          NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
      NVVM::BarrierOp::create(b, Type(), barrierId, i32(128), nullptr,
                              Value());
      {
        auto reduce = scf::IfOp::create(b, elected, /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(reduce.thenBlock());
        Value blockStart = arith::AddIOp::create(
            b,
            arith::MulIOp::create(b, arith::AddIOp::create(b, rowBase, qRow),
                                  index(c.headDim)),
            arith::MulIOp::create(b, firstBlock, index(kBlockM * kW)));
        Value block = element(b.getF32Type(), param(BackwardParam::DQAccum),
                              toI64(blockStart));
        buildBulkReduceAddF32(b, block, sDQc, c.backwardDQTileBytes());
        NVVM::CpAsyncBulkCommitGroupOp::create(b);
        if (c.deterministic)
          NVVM::CpAsyncBulkWaitGroupOp::create(b, b.getI32IntegerAttr(0),
                                               UnitAttr());
      }
      if (c.deterministic)
        buildOrderedTurnEnd(semaphore, elected, barrierId);
    };
    if (split) {
      addDQ(/*beforeDK=*/true);
      dK = WarpgroupWaitOp::create(b, TypeRange{dK.getType()}, ValueRange{dK},
                                   0)
               .getResult(0);
      nextQ = ConsumerReleaseOp::create(b, stateQ, elected, nullptr);
    } else {
      // dQ reads neither Q_i nor dO_i: release them first, then the
      // warpgroup whose turn it is computes and adds the whole of dQ.
      retireAndRelease();
      auto mine = scf::IfOp::create(
          b,
          arith::CmpIOp::create(
              b, arith::CmpIPredicate::eq,
              arith::RemUIOp::create(b, loop.getInductionVar(),
                                     index(c.consumerWarpgroups)),
              consumer),
          /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(mine.thenBlock());
      addDQ(/*beforeDK=*/false);
    }
    scf::YieldOp::create(b, ValueRange{nextQ, nextDO, dK, dV});
  }

  // Epilogue: dK = scale dS^T Q, dV, through this warpgroup's rows of the K
  // and V tiles (no wgmma reads them any more) to TMA stores. The other
  // warpgroup's last dQ wgmmas read these K rows: both meet first.
  NVVM::BarrierOp::create(b, Type(), consumersBarrier, i32(consumerThreads),
                          nullptr, Value());
  Value scale = param(BackwardParam::Scale);
  Value dK = FragmentRescaleOp::create(b, accFrag.type(), loop.getResult(2),
                                       scale, scale);
  Value dV = loop.getResult(3);
  auto narrow = VectorType::get({c.headDim / 2}, c.elementType);
  StoreFragmentOp::create(b, arith::TruncFOp::create(b, narrow, dK), sKc,
                          kSwizzle);
  StoreFragmentOp::create(b, arith::TruncFOp::create(b, narrow, dV), sVc,
                          kSwizzle);
  if (c.varlen) {
    NVVM::BarrierOp::create(b, Type(), barrierId, i32(128), nullptr, Value());
    storePackedGradient(sKc, BackwardParam::DKMap, c.headDim, tileKeyRow,
                        index(0), t);
    storePackedGradient(sVc, BackwardParam::DVMap, c.valueHeadDim, tileKeyRow,
                        index(0), t);
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
    for (auto [tile, map] : {std::pair{sKc, param(BackwardParam::DKMap)},
                             std::pair{sVc, param(BackwardParam::DVMap)}}) {
      for (int64_t col = 0; col < c.qkBlocks(); ++col) {
        Value block = buildTileView(
            b, tile, {b.getIndexAttr(col), b.getIndexAttr(0), b.getIndexAttr(0)},
            {64, kW});
        TMAStoreOp::create(b, block, map,
                           ValueRange{batch, head, tileKeyRow, index(col * kW)});
      }
    }
    NVVM::CpAsyncBulkCommitGroupOp::create(b);
    // The stores read the K/V tiles: they must finish before the CTA exits.
    NVVM::CpAsyncBulkWaitGroupOp::create(b, b.getI32IntegerAttr(0),
                                         b.getUnitAttr());
  }
  ConsumerReleaseOp::create(b, pipeKV, elected, nullptr);
}

void BackwardBuilder::storePackedGradient(Value tile, BackwardParam gradient,
                                          int64_t dim, Value firstKey,
                                          Value firstColumn, Value thread) {
  // The gradient is (total_kv, heads_q, dim), contiguous: dK and dV per
  // query head (the Python side sums a GQA group's heads).
  Value rowStride =
      arith::MulIOp::create(b, toI64(headsQ),
                            arith::ConstantIntOp::create(b, dim, 64));
  Value firstRowOffset = arith::AddIOp::create(
      b,
      arith::MulIOp::create(
          b, toI64(arith::AddIOp::create(b, seqStartKV, firstKey)), rowStride),
      toI64(arith::AddIOp::create(
          b, arith::MulIOp::create(b, head, index(dim)), firstColumn)));
  buildPredicatedCopy(
      b, PredicatedStore{tile, /*barrierId=*/Value(), thread, param(gradient),
                         firstRowOffset, rowStride,
                         arith::SubIOp::create(b, seqKV, firstKey), kSwizzle});
}

void BackwardBuilder::buildOrderedTurnWait(Value semaphore, Value turn,
                                           Value elected, Value barrierId) {
  auto spin = scf::IfOp::create(b, elected, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(spin.thenBlock());
    auto loop = scf::WhileOp::create(b, TypeRange{}, ValueRange{});
    b.createBlock(&loop.getBefore());
    auto current = LLVM::LoadOp::create(
        b, b.getI32Type(), semaphore, /*alignment=*/4, /*isVolatile=*/false,
        /*isNonTemporal=*/false, /*isInvariant=*/false,
        /*isInvariantGroup=*/false, LLVM::AtomicOrdering::acquire,
        /*syncscope=*/"device");
    scf::ConditionOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::ne, current, turn),
        ValueRange{});
    Block *after = b.createBlock(&loop.getAfter());
    b.setInsertionPointToStart(after);
    scf::YieldOp::create(b, ValueRange{});
  }
  NVVM::BarrierOp::create(b, Type(), barrierId, i32(128), nullptr, Value());
}

void BackwardBuilder::buildOrderedTurnEnd(Value semaphore, Value elected,
                                          Value barrierId) {
  // The barrier orders every thread's additions before the elected
  // thread's release (PTX's causality order is transitive through it), as
  // CUTLASS's semaphore does.
  NVVM::BarrierOp::create(b, Type(), barrierId, i32(128), nullptr, Value());
  auto pass = scf::IfOp::create(b, elected, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(pass.thenBlock());
  // Written as PTX: NVPTX (LLVM 22) selects a plain relaxed `atom` for an
  // `atomicrmw release syncscope("device")`, without the release.
  buildPtxStatement(b, "red.release.gpu.global.add.s32 [$0], $1;",
                    "l,r,~{memory}", {semaphore, i32(1)});
}

SmallVector<gpu::GPUFuncOp>
kvpipe::buildAttentionBackwardSkeleton(OpBuilder &builder, Location loc,
                                       StringRef name,
                                       const AttentionConfig &config) {
  ImplicitLocOpBuilder b(loc, builder);
  SmallVector<gpu::GPUFuncOp> kernels;
  for (auto role : {AttentionBackwardRole::Preprocess, AttentionBackwardRole::Main,
                    AttentionBackwardRole::Postprocess}) {
    OpBuilder::InsertionGuard guard(b);
    BackwardBuilder builder(b, config, name);
    switch (role) {
    case AttentionBackwardRole::Preprocess:
      kernels.push_back(builder.buildPreprocess());
      break;
    case AttentionBackwardRole::Main:
      kernels.push_back(builder.buildMain());
      break;
    case AttentionBackwardRole::Postprocess:
      kernels.push_back(builder.buildPostprocess());
      break;
    }
  }
  return kernels;
}

DictionaryAttr kvpipe::getAttentionBackwardABI(MLIRContext *ctx,
                                               StringRef name, StringRef family,
                                               const AttentionConfig &c,
                                               AttentionBackwardRole role) {
  Builder b(ctx);
  std::string element = c.elementType.isBF16() ? "bf16" : "f16";
  SmallVector<NamedAttribute> entries = {
      b.getNamedAttr("kernel", b.getStringAttr(name)),
      b.getNamedAttr("family", b.getStringAttr(family)),
      b.getNamedAttr("abi_version", b.getI64IntegerAttr(2)),
      b.getNamedAttr("head_dim", b.getI64IntegerAttr(c.headDim)),
      b.getNamedAttr("element_type", b.getStringAttr(element)),
      b.getNamedAttr("causal", b.getBoolAttr(c.causal)),
      b.getNamedAttr("backward", b.getBoolAttr(true)),
      b.getNamedAttr("deterministic", b.getBoolAttr(c.deterministic)),
      b.getNamedAttr("block_m",
                     b.getI64IntegerAttr(AttentionConfig::kBackwardBlockM)),
  };
  // V's head dim where it differs (192/128): dO, O and dV have its columns.
  if (c.valueHeadDim != c.headDim)
    entries.push_back(b.getNamedAttr("value_head_dim",
                                     b.getI64IntegerAttr(c.valueHeadDim)));
  // Packed sequences (flash_attn_varlen_func's layout): only these kernels
  // say so and take the offsets.
  if (c.varlen)
    entries.push_back(b.getNamedAttr("varlen", b.getBoolAttr(true)));
  // Only kernels with other masks than top-left causal or modifiers name
  // them: the others' ABI is unchanged.
  if (c.maskAlignment != MaskAlignment::TopLeft || c.slidingWindow) {
    entries.push_back(b.getNamedAttr(
        "mask_alignment",
        b.getStringAttr(stringifyMaskAlignment(c.maskAlignment))));
    entries.push_back(
        b.getNamedAttr("sliding_window", b.getBoolAttr(c.slidingWindow)));
  }
  // The parameters in order; deterministic mode appends the dQ counters.
  SmallVector<std::string> auxNames;
  for (size_t i = 0; i < c.auxTypes.size(); ++i)
    auxNames.push_back("aux" + std::to_string(i));
  SmallVector<std::string> auxGradNames;
  for (int64_t i : c.auxGrads)
    auxGradNames.push_back("aux" + std::to_string(i) + "_grad");
  // The packed sequences' parameters of the role (after the others and
  // the dQ counters, before the window bounds).
  SmallVector<std::pair<StringRef, StringRef>> varlenList;
  if (c.varlen) {
    varlenList.push_back({"cu_seqlens_q", "pointer"});
    if (role == AttentionBackwardRole::Main)
      varlenList.push_back({"cu_seqlens_k", "pointer"});
    varlenList.push_back({"total_q", "i32"});
    if (role == AttentionBackwardRole::Main)
      varlenList.push_back({"total_kv", "i32"});
  }
  auto kinds = [&](ArrayRef<std::pair<StringRef, StringRef>> list,
                   bool withSemaphore = false, bool withMasks = false) {
    SmallVector<StringRef> names;
    SmallVector<NamedAttribute> kindEntries;
    SmallVector<std::pair<StringRef, StringRef>> all(list);
    if (withSemaphore)
      all.push_back({"dq_semaphore", "pointer"});
    all.append(varlenList.begin(), varlenList.end());
    // The main kernel's window bounds and auxiliary tensors.
    if (withMasks && c.slidingWindow)
      all.append({{"window_left", "i32"}, {"window_right", "i32"}});
    if (withMasks)
      for (const std::string &aux : auxNames)
        all.push_back({aux, "pointer"});
    if (withMasks)
      for (const std::string &grad : auxGradNames)
        all.push_back({grad, "pointer"});
    for (auto [paramName, kind] : all) {
      names.push_back(paramName);
      kindEntries.push_back(b.getNamedAttr(paramName, b.getStringAttr(kind)));
    }
    entries.push_back(b.getNamedAttr("params", b.getStrArrayAttr(names)));
    entries.push_back(
        b.getNamedAttr("param_kinds", b.getDictionaryAttr(kindEntries)));
  };
  switch (role) {
  case AttentionBackwardRole::Preprocess:
    entries.push_back(b.getNamedAttr("role", b.getStringAttr("preprocess")));
    entries.push_back(b.getNamedAttr("threads", b.getI64IntegerAttr(128)));
    entries.push_back(
        b.getNamedAttr(kDynamicSharedMemoryKey, b.getI64IntegerAttr(0)));
    kinds({{"o", "pointer"},
           {"do", "pointer"},
           {"lse", "pointer"},
           {"delta", "pointer"},
           {"lse_log2", "pointer"},
           {"dq_accum", "pointer"},
           {"o_stride_b", "i64"},
           {"o_stride_h", "i64"},
           {"o_stride_s", "i64"},
           {"do_stride_b", "i64"},
           {"do_stride_h", "i64"},
           {"do_stride_s", "i64"},
           {"seq_q", "i32"},
           {"heads_q", "i32"}},
          /*deterministic=*/c.deterministic);
    break;
  case AttentionBackwardRole::Main:
    entries.push_back(b.getNamedAttr("role", b.getStringAttr("main")));
    entries.push_back(b.getNamedAttr("block_n", b.getI64IntegerAttr(c.blockN)));
    entries.push_back(
        b.getNamedAttr("threads", b.getI64IntegerAttr(c.threads())));
    entries.push_back(b.getNamedAttr(
        kDynamicSharedMemoryKey,
        b.getI64IntegerAttr(c.backwardSharedMemoryBytes())));
    entries.push_back(b.getNamedAttr(
        "consumer_warpgroups", b.getI64IntegerAttr(c.consumerWarpgroups)));
    kinds({{"q_map", "tensor_map"},
           {"k_map", "tensor_map"},
           {"v_map", "tensor_map"},
           {"do_map", "tensor_map"},
           // Packed: contiguous (total_kv, heads_q, D) gradients.
           c.varlen ? std::pair<StringRef, StringRef>{"dk", "pointer"}
                    : std::pair<StringRef, StringRef>{"dk_map", "tensor_map"},
           c.varlen ? std::pair<StringRef, StringRef>{"dv", "pointer"}
                    : std::pair<StringRef, StringRef>{"dv_map", "tensor_map"},
           {"lse_log2", "pointer"},
           {"delta", "pointer"},
           {"dq_accum", "pointer"},
           {"seq_q", "i32"},
           {"seq_kv", "i32"},
           {"heads_per_kv_head", "i32"},
           {"scale_log2", "f32"},
           {"scale", "f32"},
           {"heads_q", "i32"},
           {"batch", "i32"}},
          /*deterministic=*/c.deterministic, /*withMasks=*/true);
    entries.append(getModifierABI(b, c));
    break;
  case AttentionBackwardRole::Postprocess:
    entries.push_back(b.getNamedAttr("role", b.getStringAttr("postprocess")));
    entries.push_back(b.getNamedAttr("threads", b.getI64IntegerAttr(128)));
    entries.push_back(
        b.getNamedAttr(kDynamicSharedMemoryKey, b.getI64IntegerAttr(0)));
    kinds({{"dq_accum", "pointer"},
           {"dq", "pointer"},
           {"dq_stride_b", "i64"},
           {"dq_stride_h", "i64"},
           {"dq_stride_s", "i64"},
           {"seq_q", "i32"},
           {"heads_q", "i32"},
           {"scale", "f32"}});
    break;
  }
  return b.getDictionaryAttr(entries);
}
