//===- AttentionDecode.cpp - split-KV and pack-GQA for decode -------------===//
//
// Decode (a few queries against a long KV cache) is bound by reading K and
// V. Two attributes of kvpipe.attention_kernel change the tile of work so
// that the reads are spread over the SMs and done once (FA3's `pack_gqa`
// and `num_splits`, hopper/flash_fwd_combine_kernel.h; docs/serving.md):
//
//   pack_gqa = G  the tile is (packed Q block, K/V head, batch): a consumer
//                 warpgroup's 64 rows are floor(64 / G) query positions
//                 times the G query heads of the K/V head (row s * G + g),
//                 loaded and stored by TMA through 5-D (B, H_kv, S, G, D)
//                 maps, so that each K/V block is read once per group.
//   split_kv      the tile's K/V blocks are split over `num_splits` CTAs
//                 (grid x = Q blocks * num_splits, the split fastest); each
//                 writes its normalised fp32 partial O and log-sum-exp
//                 (-inf without keys) to a workspace, and `<name>_combine`
//                 merges the splits of each row:
//                   lse = log sum_i exp(lse_i),
//                   O = sum_i exp(lse_i - lse) O_i
//                 (a row no split saw: O = 0, lse = +inf).
//
// The forward kernel's builder (AttentionKernelBuilder.cpp,
// AttentionConsumer.cpp) calls the parts here where the tile, the rows and
// the epilogue differ.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/Transforms/KernelParts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <cmath>

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::detail;

//===----------------------------------------------------------------------===//
// The split and packed tile (forward kernel)
//===----------------------------------------------------------------------===//

void KernelBuilder::splitKVBlocks() {
  // FA's split: ceil(blocks / num_splits) blocks per split, so that the
  // last splits of a short range may get none (they write a neutral
  // partial). The count is a min of non-negative spans, and at most the
  // tile's count (a ceildiv by a constant): the bound the protocol checker
  // needs to know it non-negative.
  Value total = numKVBlocks;
  Value first = firstKVBlock ? firstKVBlock : index(0);
  Value perSplit = arith::CeilDivUIOp::create(b, total, numSplits);
  Value begin = arith::MinUIOp::create(
      b, arith::MulIOp::create(b, splitIndex, perSplit), total);
  numKVBlocks = arith::MinUIOp::create(
      b, total,
      arith::MinUIOp::create(b, perSplit,
                             arith::SubIOp::create(b, total, begin)));
  firstKVBlock = arith::AddIOp::create(b, first, begin);
}

void KernelBuilder::setPackedRows() {
  // Row r of the warpgroup is query position r / G of its packedQueries()
  // and query head `head + r % G`; rows from usedRows() on hold nothing
  // (computed on whatever the Q tile has there, never stored).
  Value localRow0 =
      arith::AddIOp::create(b, arith::MulIOp::create(b, warp, index(16)),
                            arith::DivUIOp::create(b, lane, index(4)));
  Value localRow1 = arith::AddIOp::create(b, localRow0, index(8));
  firstRow = arith::AddIOp::create(
      b, qBlockRow,
      arith::MulIOp::create(b, consumerIndex, index(c.packedQueries())));
  Value group = index(c.packGQA);
  row0 = arith::AddIOp::create(b, firstRow,
                               arith::DivUIOp::create(b, localRow0, group));
  row1 = arith::AddIOp::create(b, firstRow,
                               arith::DivUIOp::create(b, localRow1, group));
  rowHead0 =
      arith::AddIOp::create(b, head, arith::RemUIOp::create(b, localRow0, group));
  rowHead1 =
      arith::AddIOp::create(b, head, arith::RemUIOp::create(b, localRow1, group));
  rowUsed0 = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, localRow0,
                                   index(c.usedRows()));
  rowUsed1 = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, localRow1,
                                   index(c.usedRows()));
}

void KernelBuilder::buildPartialEpilogue(Value acc, const RowStats &state) {
  // The split's output normalised by its own sum (0 for a row without
  // keys), in fp32, straight from the registers: a row of the workspace
  // o_partial[split][b][h][s][:] per (query, head); its log-sum-exp, -inf
  // without keys (the combine's neutral element), in
  // lse_partial[split][b][h][s].
  NormalizedOutput out = buildNormalizedOutput(
      b, acc, {state.m0, state.m1, state.l0, state.l1}, b.getF32Type());
  Value batches = toIndex(param(AttentionParam::Batch));
  Value splitRows = arith::MulIOp::create(b, splitIndex, batches);
  Value heads[2] = {rowHead0 ? rowHead0 : head, rowHead1 ? rowHead1 : head};
  Value rows[2] = {row0, row1}, used[2] = {rowUsed0, rowUsed1};
  Value offsets[2], valid[2];
  for (int half : {0, 1}) {
    Value rowIndex = arith::AddIOp::create(
        b,
        arith::MulIOp::create(
            b,
            arith::AddIOp::create(
                b, arith::MulIOp::create(
                       b, arith::AddIOp::create(b, splitRows, batch), headsQ),
                heads[half]),
            seqQ),
        rows[half]);
    offsets[half] = arith::IndexCastOp::create(
        b, b.getI64Type(),
        arith::MulIOp::create(b, rowIndex, index(c.valueHeadDim)));
    valid[half] = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                        rows[half], seqQ);
    if (used[half])
      valid[half] = arith::AndIOp::create(b, valid[half], used[half]);
  }
  Value threadColumn = arith::MulIOp::create(
      b, arith::RemUIOp::create(b, lane, index(4)), index(2));
  buildFragmentGlobalStore(b, out.o, param(AttentionParam::OPartial), offsets,
                           valid, threadColumn);
  Value splitBase = arith::IndexCastOp::create(
      b, b.getI64Type(),
      arith::MulIOp::create(
          b, arith::MulIOp::create(b, splitRows, headsQ), seqQ));
  Value lse = LLVM::GEPOp::create(
      b, LLVM::LLVMPointerType::get(ctx, 1), b.getF32Type(),
      param(AttentionParam::LsePartial), ValueRange{splitBase});
  // The exponent's scale (softmaxScaleLog2: with a score_mod that leaves
  // the scores scaled, log2(e) times its folded output factor), as the
  // other epilogues': the combine weighs the splits by these.
  buildLogSumExpStore(b, {lse, softmaxScaleLog2(), state.m0,
                          state.m1, out.sum0, out.sum1, row0, row1, lane,
                          batch, headsQ, heads[0], seqQ,
                          /*infiniteWithoutKeys=*/false, rowHead1, rowUsed0,
                          rowUsed1});
}

void kvpipe::detail::appendDecodeABI(Builder &b, StringRef name,
                                     const AttentionConfig &c,
                                     SmallVectorImpl<NamedAttribute> &entries) {
  if (c.packGQA) {
    entries.push_back(b.getNamedAttr("pack_gqa", b.getI64IntegerAttr(c.packGQA)));
    // Query positions per tile (the grid's Q blocks divide seq_q by it).
    entries.push_back(b.getNamedAttr("queries_per_tile",
                                     b.getI64IntegerAttr(c.queriesPerTile())));
  } else {
    entries.push_back(b.getNamedAttr("queries_per_tile",
                                     b.getI64IntegerAttr(c.blockM())));
  }
  if (c.splitKV) {
    entries.push_back(b.getNamedAttr("split_kv", b.getBoolAttr(true)));
    entries.push_back(b.getNamedAttr("role", b.getStringAttr("main")));
    entries.push_back(b.getNamedAttr("family", b.getStringAttr(name)));
  }
}

//===----------------------------------------------------------------------===//
// The combine kernel
//===----------------------------------------------------------------------===//

namespace {

/// `<family>_combine`: one warp per output row (b, h, s), 4 rows per CTA of
/// 128 threads, grid x = ceil(B * H_q * S_q / 4). The lanes reduce the
/// splits' log-sum-exps (max, then the sum of exponentials, each lane a
/// stride of splits, combined by shuffles), then each lane accumulates its
/// value_head_dim / 32 columns over the splits that saw keys.
class CombineBuilder : ScalarBuilder {
public:
  CombineBuilder(ImplicitLocOpBuilder &b, const AttentionConfig &config,
                 StringRef family)
      : ScalarBuilder(b), c(config), ctx(b.getContext()), family(family) {}

  gpu::GPUFuncOp build();

private:
  static constexpr int64_t kRowsPerCTA = 4;

  Type ptrType() const { return LLVM::LLVMPointerType::get(ctx, 1); }
  Value param(CombineParam p) { return params[static_cast<unsigned>(p)]; }
  Value toI64(Value v) {
    return arith::IndexCastOp::create(b, b.getI64Type(), v);
  }
  Value i64Constant(int64_t v) { return arith::ConstantIntOp::create(b, v, 64); }
  Value f32At(Value base, Value offset) {
    return LLVM::GEPOp::create(b, ptrType(), b.getF32Type(), base,
                               ValueRange{offset});
  }
  /// Combines `value` over the warp's lanes with `combine`.
  Value warpReduce(Value value, function_ref<Value(Value, Value)> combine);
  void buildRow(Value row, Value lane, Value rows);

  const AttentionConfig &c;
  MLIRContext *ctx;
  StringRef family;
  SmallVector<Value> params;
};

Value CombineBuilder::warpReduce(Value value,
                                 function_ref<Value(Value, Value)> combine) {
  for (int32_t offset : {16, 8, 4, 2, 1})
    value = combine(value, gpu::ShuffleOp::create(b, value, i32(offset),
                                                  i32(32),
                                                  gpu::ShuffleMode::XOR)
                               .getShuffleResult());
  return value;
}

gpu::GPUFuncOp CombineBuilder::build() {
  Type i32Type = b.getI32Type(), i64Type = b.getI64Type();
  SmallVector<Type> types = {ptrType(), ptrType(), ptrType(), ptrType(),
                             i64Type,   i64Type,   i64Type,   i32Type,
                             i32Type,   i32Type,   i32Type};
  if (c.sinks)
    types.push_back(ptrType());
  assert(types.size() == static_cast<size_t>(CombineParam::Count) -
                             (c.sinks ? 0 : 1));
  std::string name = (family + "_combine").str();
  auto func = gpu::GPUFuncOp::create(b, name, b.getFunctionType(types, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
                b.getDenseI32ArrayAttr({32 * kRowsPerCTA, 1, 1}));
  func->setAttr(kAttentionAbiAttrName,
                getAttentionCombineABI(ctx, name, family, c));
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  params.assign(entry.getArguments().begin(), entry.getArguments().end());
  params.resize(static_cast<unsigned>(CombineParam::Count));

  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value warp = arith::DivUIOp::create(b, tid, index(32));
  Value lane = arith::RemUIOp::create(b, tid, index(32));
  Value block = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value rows = arith::MulIOp::create(
      b,
      arith::MulIOp::create(b, toIndex(param(CombineParam::Batch)),
                            toIndex(param(CombineParam::HeadsQ))),
      toIndex(param(CombineParam::SeqQ)));
  Value row = arith::AddIOp::create(
      b, arith::MulIOp::create(b, block, index(kRowsPerCTA)), warp);
  auto ifRow = scf::IfOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, row, rows),
      /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifRow.thenBlock());
    buildRow(row, lane, rows);
  }
  gpu::ReturnOp::create(b);
  return func;
}

void CombineBuilder::buildRow(Value row, Value lane, Value rows) {
  Type f32Type = b.getF32Type();
  Value seqQ = toIndex(param(CombineParam::SeqQ));
  Value headsQ = toIndex(param(CombineParam::HeadsQ));
  // A sink is one more split whose output is zero and whose log-sum-exp is
  // the logit of the row's head (the row is (b, h, s) of the (B, H_q, S_q)
  // rows): it joins the maximum and the sum, and through the final
  // log-sum-exp it weighs the splits down.
  Value sink;
  if (c.sinks) {
    Value head = arith::RemUIOp::create(
        b, arith::DivUIOp::create(b, row, seqQ), headsQ);
    sink = LLVM::LoadOp::create(
        b, f32Type, f32At(param(CombineParam::Sinks), toI64(head)));
  }
  Value numSplits = toIndex(param(CombineParam::NumSplits));
  Value lsePartial = param(CombineParam::LsePartial);
  Value splitStride = toI64(rows);
  auto lseOf = [&](Value split) -> Value {
    Value offset = arith::AddIOp::create(
        b, arith::MulIOp::create(b, toI64(split), splitStride), toI64(row));
    return LLVM::LoadOp::create(b, f32Type, f32At(lsePartial, offset));
  };
  auto forSplits = [&](Value lower, Value step, Value init,
                       function_ref<Value(Value, Value)> body) -> Value {
    auto loop = scf::ForOp::create(b, lower, numSplits, step, ValueRange{init});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    scf::YieldOp::create(
        b, body(loop.getInductionVar(), loop.getRegionIterArg(0)));
    return loop.getResult(0);
  };
  // The largest log-sum-exp, and the sum of exp(lse_i - max) (0 for -inf).
  Value max = forSplits(lane, index(32), f32(-INFINITY),
                        [&](Value split, Value m) -> Value {
                          return arith::MaxNumFOp::create(b, m, lseOf(split));
                        });
  max = warpReduce(max, [&](Value x, Value y) -> Value {
    return arith::MaxNumFOp::create(b, x, y);
  });
  if (sink)
    max = arith::MaxNumFOp::create(b, max, sink);
  // (With a finite sink, every row has a term: one without keys gets the
  // sink's log-sum-exp and zeros.)
  Value anyKeys = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, max,
                                        f32(-INFINITY));
  // exp(x) = exp2(x log2 e); a max of -inf is taken as 0 (no NaN).
  Value maxLog2 = arith::SelectOp::create(
      b, anyKeys, arith::MulFOp::create(b, max, f32(M_LOG2E)), f32(0.0));
  Value sum = forSplits(lane, index(32), f32(0.0),
                        [&](Value split, Value partialSum) -> Value {
                          Value e = math::Exp2Op::create(
                              b, arith::SubFOp::create(
                                     b,
                                     arith::MulFOp::create(b, lseOf(split),
                                                           f32(M_LOG2E)),
                                     maxLog2));
                          return arith::AddFOp::create(b, partialSum, e);
                        });
  sum = warpReduce(sum, [&](Value x, Value y) -> Value {
    return arith::AddFOp::create(b, x, y);
  });
  if (sink)
    sum = arith::AddFOp::create(
        b, sum,
        math::Exp2Op::create(
            b, arith::SubFOp::create(
                   b, arith::MulFOp::create(b, sink, f32(M_LOG2E)), maxLog2)));
  // lse = max + ln(sum) in base 2: log2(sum) + max log2 e.
  Value lseLog2 =
      arith::AddFOp::create(b, math::Log2Op::create(b, sum), maxLog2);

  // O = sum_i exp(lse_i - lse) O_i over the splits that saw keys; each lane
  // its value_head_dim / 32 adjacent columns.
  int64_t perLane = c.valueHeadDim / 32;
  auto f32Vec = VectorType::get({perLane}, f32Type);
  Value rowColumns = arith::AddIOp::create(
      b, arith::MulIOp::create(b, toI64(row), i64Constant(c.valueHeadDim)),
      toI64(arith::MulIOp::create(b, lane, index(perLane))));
  Value splitColumns =
      arith::MulIOp::create(b, splitStride, i64Constant(c.valueHeadDim));
  int64_t alignment = 4 * (perLane & -perLane);
  Value zero =
      arith::ConstantOp::create(b, f32Vec, DenseElementsAttr::get(f32Vec, 0.0f));
  Value acc = forSplits(index(0), index(1), zero, [&](Value split,
                                                     Value o) -> Value {
    Value lseLog2I = arith::MulFOp::create(b, lseOf(split), f32(M_LOG2E));
    Value seen = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, lseLog2I,
                                       f32(-INFINITY));
    auto ifSeen = scf::IfOp::create(b, f32Vec, seen, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifSeen.elseBlock());
    scf::YieldOp::create(b, o);
    b.setInsertionPointToStart(ifSeen.thenBlock());
    Value weight = math::Exp2Op::create(
        b, arith::SubFOp::create(b, lseLog2I, lseLog2));
    Value offset = arith::AddIOp::create(
        b, arith::MulIOp::create(b, toI64(split), splitColumns), rowColumns);
    Value partial = LLVM::LoadOp::create(
        b, f32Vec, f32At(param(CombineParam::OPartial), offset), alignment);
    scf::YieldOp::create(
        b, ValueRange{arith::AddFOp::create(
               b, o,
               arith::MulFOp::create(
                   b, vector::BroadcastOp::create(b, f32Vec, weight), partial))});
    return ifSeen.getResult(0);
  });

  // The output row (b, h, s) at the output's strides, in the element type.
  Value s = arith::RemUIOp::create(b, row, seqQ);
  Value bh = arith::DivUIOp::create(b, row, seqQ);
  Value h = arith::RemUIOp::create(b, bh, headsQ);
  Value batch = arith::DivUIOp::create(b, bh, headsQ);
  Value outOffset = arith::AddIOp::create(
      b,
      arith::AddIOp::create(
          b,
          arith::MulIOp::create(b, toI64(batch), param(CombineParam::OStrideB)),
          arith::MulIOp::create(b, toI64(h), param(CombineParam::OStrideH))),
      arith::AddIOp::create(
          b, arith::MulIOp::create(b, toI64(s), param(CombineParam::OStrideS)),
          toI64(arith::MulIOp::create(b, lane, index(perLane)))));
  Value out = LLVM::GEPOp::create(b, ptrType(), c.elementType,
                                  param(CombineParam::O), ValueRange{outOffset});
  LLVM::StoreOp::create(
      b,
      arith::TruncFOp::create(b, VectorType::get({perLane}, c.elementType),
                              acc),
      out, c.elementBytes() * (perLane & -perLane));

  // The final log-sum-exp (natural), +inf for a row no split saw (flash-attn's
  // convention, docs/kernel-abi.md), from lane 0; none when lse is null.
  Value lsePointer = param(CombineParam::Lse);
  Value wanted = arith::AndIOp::create(
      b,
      LLVM::ICmpOp::create(b, LLVM::ICmpPredicate::ne, lsePointer,
                           LLVM::ZeroOp::create(b, ptrType())),
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, index(0)));
  auto write = scf::IfOp::create(b, wanted, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(write.thenBlock());
  Value lse = arith::SelectOp::create(
      b, anyKeys, arith::MulFOp::create(b, lseLog2, f32(M_LN2)),
      f32(INFINITY));
  Value lseRow = toI64(arith::AddIOp::create(
      b,
      arith::MulIOp::create(
          b, arith::AddIOp::create(b, arith::MulIOp::create(b, batch, headsQ), h),
          seqQ),
      s));
  LLVM::StoreOp::create(b, lse, f32At(lsePointer, lseRow));
}

} // namespace

gpu::GPUFuncOp kvpipe::buildAttentionCombineKernel(OpBuilder &builder,
                                                   Location loc,
                                                   StringRef family,
                                                   const AttentionConfig &config) {
  ImplicitLocOpBuilder b(loc, builder);
  return CombineBuilder(b, config, family).build();
}

DictionaryAttr kvpipe::getAttentionCombineABI(MLIRContext *ctx, StringRef name,
                                              StringRef family,
                                              const AttentionConfig &c) {
  Builder b(ctx);
  std::pair<StringRef, StringRef> list[] = {
      {"o_partial", "pointer"}, {"lse_partial", "pointer"},
      {"o", "pointer"},         {"lse", "pointer"},
      {"o_stride_b", "i64"},    {"o_stride_h", "i64"},
      {"o_stride_s", "i64"},    {"seq_q", "i32"},
      {"heads_q", "i32"},       {"batch", "i32"},
      {"num_splits", "i32"}, {"sinks", "pointer"}};
  static_assert(std::size(list) == static_cast<size_t>(CombineParam::Count));
  SmallVector<StringRef> names;
  SmallVector<NamedAttribute> kinds;
  for (auto [paramName, kind] :
       ArrayRef(list).drop_back(c.sinks ? 0 : 1)) {
    names.push_back(paramName);
    kinds.push_back(b.getNamedAttr(paramName, b.getStringAttr(kind)));
  }
  return b.getDictionaryAttr({
      b.getNamedAttr("kernel", b.getStringAttr(name)),
      b.getNamedAttr("family", b.getStringAttr(family)),
      b.getNamedAttr("role", b.getStringAttr("combine")),
      b.getNamedAttr("abi_version", b.getI64IntegerAttr(2)),
      b.getNamedAttr("head_dim", b.getI64IntegerAttr(c.headDim)),
      b.getNamedAttr("value_head_dim", b.getI64IntegerAttr(c.valueHeadDim)),
      b.getNamedAttr("element_type",
                     b.getStringAttr(c.elementType.isBF16() ? "bf16" : "f16")),
      b.getNamedAttr("threads", b.getI64IntegerAttr(128)),
      b.getNamedAttr("rows_per_cta", b.getI64IntegerAttr(4)),
      b.getNamedAttr(kDynamicSharedMemoryKey, b.getI64IntegerAttr(0)),
      b.getNamedAttr("params", b.getStrArrayAttr(names)),
      b.getNamedAttr("param_kinds", b.getDictionaryAttr(kinds)),
  });
}
