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
// pipelines, the roles as a kvpipe.warp_roles op), the producer and the walk
// over tiles (one per CTA, or a loop of them when persistent) and reports
// the ABI; the consumers are in AttentionConsumer.cpp. The schedule rewrites
// and the lowering of the kernel-structure ops follow (AttentionGenerator.h).
//
//===----------------------------------------------------------------------===//

#include "Fragment.h"
#include "KernelBuilder.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelParts.h"

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
  SmallVector<Type> paramTypes = {
      tensorMapType(c.blockM(), c.qkSwizzleBytes()),
      tensorMapType(c.blockN, c.qkSwizzleBytes()),
      tensorMapType(c.blockN, c.vSwizzleBytes()),
      tensorMapType(64, c.vSwizzleBytes()),
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
  // the 64-byte one every 512 bytes, and TMA and wgmma assume tiles start on
  // such an atom; every tile's size is a multiple of 1024 bytes).
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
  int64_t qkWidth = c.qkTileWidth(), vWidth = c.vTileWidth();
  sQ = view(0, sharedType({c.qkBlocks(), c.blockM(), qkWidth}));
  sK = view(c.kOffset(),
            sharedType({c.kvStages, c.qkBlocks(), c.blockN, qkWidth}));
  sV = view(c.vOffset(),
            sharedType({c.kvStages, c.vBlocks(), c.blockN, vWidth}));
  if (c.persistent)
    sO = view(c.oOffset(), sharedType({c.vBlocks(), c.blockM(), vWidth}));

  pipeQ = CreateOp::create(b, pipelineType(1));
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
  // partial) rather than for a trip count that divides by a runtime value,
  // which ptxas computes in ordinary registers. Measured
  // against the division form: no spills at head dim 128 (44 bytes before)
  // and 4-7 % faster, though the wgmma descriptors still leave the uniform
  // registers (docs/performance.md v5).
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
  // Q once per tile.
  ProducerAcquireOp::create(b, stateQ, nullptr);
  Value qBarrier = ProducerMBarOp::create(b, stateQ, nullptr);
  int64_t qkWidth = c.qkTileWidth();
  for (int64_t col = 0; col < c.qkBlocks(); ++col) {
    Value tile =
        slot(sQ, {b.getIndexAttr(col), b.getIndexAttr(0), b.getIndexAttr(0)},
             {c.blockM(), qkWidth});
    TMALoadOp::create(b, param(AttentionParam::QMap),
                      ValueRange{batch, head, qBlockRow, index(col * qkWidth)},
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
    Value kvRow =
        arith::MulIOp::create(b, loop.getInductionVar(), index(c.blockN));
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
        Value tile = slot(ring,
                          {slotIndex, b.getIndexAttr(col), b.getIndexAttr(0),
                           b.getIndexAttr(0)},
                          {c.blockN, width});
        TMALoadOp::create(b, map,
                          ValueRange{batch, kvHead, kvRow, index(col * width)},
                          tile, barrier, Value());
      }
      ProducerCommitOp::create(b, state, nullptr);
      next.push_back(StepOp::create(b, state));
    }
    scf::YieldOp::create(b, next);
  }
  return {nextQ, loop.getResult(0), loop.getResult(1)};
}

gpu::GPUFuncOp kvpipe::buildAttentionSkeleton(OpBuilder &builder, Location loc,
                                              StringRef name,
                                              const AttentionConfig &config) {
  ImplicitLocOpBuilder b(loc, builder);
  return KernelBuilder(b, config).build(name);
}

DictionaryAttr kvpipe::getAttentionABI(MLIRContext *ctx, StringRef name,
                                       const AttentionConfig &c) {
  Builder b(ctx);
  // Each map's box and swizzle, which the launcher encodes as given: the
  // tile layout is the compiler's choice (AttentionConfig::swizzleBytesFor).
  auto box = [&](int64_t rows, int64_t swizzleBytes) {
    int64_t width = swizzleBytes / c.elementBytes();
    return b.getDictionaryAttr(
        {b.getNamedAttr("box", b.getI64ArrayAttr({1, 1, rows, width})),
         b.getNamedAttr("swizzle", b.getI64IntegerAttr(swizzleBytes))});
  };
  std::string element = c.elementType.isBF16() ? "bf16" : "f16";
  return b.getDictionaryAttr({
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
      b.getNamedAttr("threads", b.getI64IntegerAttr(c.threads())),
      b.getNamedAttr("dynamic_shared_memory",
                     b.getI64IntegerAttr(c.dynamicSharedMemoryBytes())),
      b.getNamedAttr("params", b.getStrArrayAttr(
                                   {"q_map", "k_map", "v_map", "o_map", "lse",
                                    "seq_q", "seq_kv", "heads_per_kv_head",
                                    "scale_log2", "heads_q", "batch"})),
      b.getNamedAttr("q_map", box(c.blockM(), c.qkSwizzleBytes())),
      b.getNamedAttr("k_map", box(c.blockN, c.qkSwizzleBytes())),
      b.getNamedAttr("v_map", box(c.blockN, c.vSwizzleBytes())),
      b.getNamedAttr("o_map", box(64, c.vSwizzleBytes())),
  });
}
