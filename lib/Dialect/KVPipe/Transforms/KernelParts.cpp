//===- KernelParts.cpp - building blocks of attention kernels -------------===//

#include "kvpipe/Dialect/KVPipe/Transforms/KernelParts.h"

#include "Fragment.h"

#include "kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace kvpipe;

static Value indexConstant(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantIndexOp::create(b, v);
}

static Value f32Constant(ImplicitLocOpBuilder &b, double v) {
  return arith::ConstantFloatOp::create(b, b.getF32Type(),
                                        APFloat(static_cast<float>(v)));
}

static Value toI32(ImplicitLocOpBuilder &b, Value v) {
  return arith::IndexCastOp::create(b, b.getI32Type(), v);
}

AlignedSharedMemory kvpipe::buildAlignedSharedMemory(ImplicitLocOpBuilder &b,
                                                     int64_t alignment) {
  auto index = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, v);
  };
  auto bytesType = MemRefType::get(
      {ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup));
  Value bytes = gpu::DynamicSharedMemoryOp::create(b, bytesType);
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, bytes);
  Value pad = arith::RemUIOp::create(
      b,
      arith::SubIOp::create(b, index(alignment),
                            arith::RemUIOp::create(b, base, index(alignment))),
      index(alignment));
  return {bytes, pad};
}

Value AlignedSharedMemory::view(ImplicitLocOpBuilder &b, int64_t offset,
                                MemRefType type) const {
  return view(b, arith::ConstantIndexOp::create(b, offset), type);
}

Value AlignedSharedMemory::view(ImplicitLocOpBuilder &b, Value offset,
                                MemRefType type) const {
  return memref::ViewOp::create(b, type, bytes,
                                arith::AddIOp::create(b, pad, offset),
                                ValueRange{});
}

Value kvpipe::buildTileView(ImplicitLocOpBuilder &b, Value ring,
                            ArrayRef<OpFoldResult> offsets,
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

Value kvpipe::buildSlotWait(ImplicitLocOpBuilder &b, Value ring, Value state,
                            ArrayRef<int64_t> tileShape) {
  ConsumerWaitOp::create(b, state, nullptr);
  SmallVector<OpFoldResult> offsets = {Value(IndexOp::create(b, state))};
  offsets.append(tileShape.size(), b.getIndexAttr(0));
  return buildTileView(b, ring, offsets, tileShape);
}

Value kvpipe::buildRetireAndRelease(ImplicitLocOpBuilder &b, Value &fragment,
                                    int64_t pending, Value state,
                                    Value elected) {
  fragment = WarpgroupWaitOp::create(b, TypeRange{fragment.getType()},
                                     ValueRange{fragment}, pending)
                 .getResult(0);
  // Only now: the wgmma that read the slot has retired.
  return ConsumerReleaseOp::create(b, state, elected, nullptr);
}

Value kvpipe::buildMaskedScores(ImplicitLocOpBuilder &b, Value s, Value needed,
                                function_ref<Value()> buildValid) {
  auto ifMask = scf::IfOp::create(b, TypeRange{s.getType()}, needed,
                                  /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifMask.elseBlock());
  scf::YieldOp::create(b, s);
  b.setInsertionPointToStart(ifMask.thenBlock());
  Value valid = buildValid();
  Value negInf = arith::ConstantFloatOp::create(
      b, b.getF32Type(), APFloat(static_cast<float>(-INFINITY)));
  scf::YieldOp::create(
      b, ValueRange{arith::SelectOp::create(
             b, valid, s, vector::BroadcastOp::create(b, s.getType(), negInf))});
  return ifMask.getResult(0);
}

OnlineSoftmaxStep kvpipe::buildOnlineSoftmaxStep(ImplicitLocOpBuilder &b,
                                                 Value s, Value scaleLog2,
                                                 const OnlineSoftmaxStats &stats,
                                                 Type pElementType,
                                                 int64_t emulatedExp2,
                                                 int64_t rescaleThreshold,
                                                 bool rowSums, Value rowShift0,
                                                 Value rowShift1,
                                                 bool staticMax) {
  auto f32 = [&](double v) -> Value {
    return arith::ConstantFloatOp::create(b, b.getF32Type(),
                                          APFloat(static_cast<float>(v)));
  };
  // Running max per row, across the row's 4 lanes.
  Value m[2] = {stats.m0, stats.m1}, l[2] = {stats.l0, stats.l1};
  Value mNew[2], scaledMax[2], alpha[2], expOffset[2];
  Value shift[2] = {rowShift0, rowShift1};
  for (int half : {0, 1}) {
    if (staticMax) {
      // m bounds every score from above and never moves: P = exp2(s c - m
      // c) directly, nothing to rescale.
      mNew[half] = m[half];
      scaledMax[half] = expOffset[half] =
          arith::MulFOp::create(b, m[half], scaleLog2);
      alpha[half] = f32(1.0);
      continue;
    }
    // (A shift is per thread: added before the quad's lanes combine.)
    Value rowMax =
        FragmentRowMaxOp::create(b, b.getF32Type(), s, half, shift[half]);
    mNew[half] = arith::MaxNumFOp::create(b, m[half], rowMax);
    if (rescaleThreshold > 0) {
      // FA4's conditional rescaling: keep the running maximum unless the
      // block's passes it by more than the threshold in the exponent (P
      // then stays at most 2^t). A row's first keys always move it (-inf + t
      // is -inf), a row without keys keeps -inf (the comparison is false).
      Value grows = arith::CmpFOp::create(
          b, arith::CmpFPredicate::OGT,
          arith::MulFOp::create(b, rowMax, scaleLog2),
          arith::AddFOp::create(b, arith::MulFOp::create(b, m[half], scaleLog2),
                                f32(static_cast<double>(rescaleThreshold))));
      mNew[half] = arith::SelectOp::create(b, grows, mNew[half], m[half]);
    }
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
                              scaledMax[half]),
        arith::FastMathFlags::afn);
    // P of the shifted scores: exp2((s + shift) c - m c) = exp2(s c - (m -
    // shift) c), one FMA per element of s still.
    expOffset[half] = scaledMax[half];
    if (shift[half])
      expOffset[half] = arith::SubFOp::create(
          b, scaledMax[half], arith::MulFOp::create(b, shift[half], scaleLog2));
    // Where the maximum did not move this is exp2(m c - m c) = exp2(0) = 1
    // exactly (the two products are the same rounded value: the PTX keeps
    // mul.rn / sub.rn, no contraction), which the rescale's skip_unit tests.
    // A select of 1 would not depend on that, but costs 8 instructions per
    // iteration of the D 64 loop (575 against 567), unmeasured.
  }
  // P = exp2(S * c - m * c): the scale folded into one FMA per element.
  Value p = FragmentExp2Op::create(b, s.getType(), s, scaleLog2,
                                   expOffset[0], expOffset[1], emulatedExp2);
  // Without rowSums the tensor cores sum P (tensor_row_sums) and l passes
  // through unchanged.
  Value lNew[2] = {l[0], l[1]};
  if (rowSums)
    for (int half : {0, 1}) {
      // Row sums stay per thread; the 4 lanes are combined once, at the end.
      Value rowSum = FragmentRowSumOp::create(b, b.getF32Type(), p, half);
      lNew[half] = math::FmaOp::create(b, l[half], alpha[half], rowSum);
    }
  auto sType = cast<VectorType>(s.getType());
  Value pNarrow = arith::TruncFOp::create(
      b, VectorType::get(sType.getShape(), pElementType), p);
  return {{mNew[0], mNew[1], lNew[0], lNew[1]}, alpha[0], alpha[1], pNarrow};
}

Value MaskBounds::lastKeyOf(ImplicitLocOpBuilder &b, Value row) const {
  auto index = [&](int64_t v) { return indexConstant(b, v); };
  Value key = diagonal ? arith::AddIOp::create(b, row, diagonal) : row;
  if (!causal)
    key = arith::AddIOp::create(b, key, windowRight);
  key = arith::MaxSIOp::create(
      b, arith::MinSIOp::create(b, key, arith::SubIOp::create(b, seqKV, index(1))),
      index(-1));
  if (causal)
    return key;
  // window_right < 0: no bound on the right.
  Value unbounded = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                          windowRight, index(0));
  return arith::SelectOp::create(
      b, unbounded, arith::SubIOp::create(b, seqKV, index(1)), key);
}

Value MaskBounds::firstKeyOf(ImplicitLocOpBuilder &b, Value row) const {
  auto index = [&](int64_t v) { return indexConstant(b, v); };
  Value key = diagonal ? arith::AddIOp::create(b, row, diagonal) : row;
  key = arith::SubIOp::create(b, key, windowLeft);
  key = arith::MinSIOp::create(b, arith::MaxSIOp::create(b, key, index(0)),
                               seqKV);
  // window_left < 0: no bound on the left.
  Value unbounded = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                          windowLeft, index(0));
  return arith::SelectOp::create(b, unbounded, index(0), key);
}

Value MaskBounds::firstQueryOf(ImplicitLocOpBuilder &b, Value key) const {
  // n <= m + d (+ window_right) <=> m >= n - d (- window_right).
  auto index = [&](int64_t v) { return indexConstant(b, v); };
  Value query = diagonal ? arith::SubIOp::create(b, key, diagonal) : key;
  if (!causal)
    query = arith::SubIOp::create(b, query, windowRight);
  query = arith::MinSIOp::create(b, arith::MaxSIOp::create(b, query, index(0)),
                                 seqQ);
  if (causal)
    return query;
  Value unbounded = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                          windowRight, index(0));
  return arith::SelectOp::create(b, unbounded, index(0), query);
}

Value MaskBounds::lastQueryOf(ImplicitLocOpBuilder &b, Value key) const {
  // n >= m + d - window_left <=> m <= n - d + window_left.
  auto index = [&](int64_t v) { return indexConstant(b, v); };
  Value query = diagonal ? arith::SubIOp::create(b, key, diagonal) : key;
  query = arith::AddIOp::create(b, query, windowLeft);
  query = arith::MaxSIOp::create(
      b, arith::MinSIOp::create(b, query, arith::SubIOp::create(b, seqQ, index(1))),
      index(-1));
  Value unbounded = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                          windowLeft, index(0));
  return arith::SelectOp::create(
      b, unbounded, arith::SubIOp::create(b, seqQ, index(1)), query);
}

Value kvpipe::buildBlockMask(ImplicitLocOpBuilder &b, Value s, Value kvBlock,
                             const BlockMask &mask) {
  auto index = [&](int64_t v) { return indexConstant(b, v); };
  Fragment sFrag(b, mask.blockN / 2);
  auto i32Vec = VectorType::get({mask.blockN / 2}, b.getI32Type());
  Value kvRow = arith::MulIOp::create(b, kvBlock, index(mask.blockN));
  // Only a block that crosses seq_kv or a bound of one of this warpgroup's
  // rows (the diagonal when causal, the window's edges) needs masking: a
  // uniform branch skips it elsewhere. The first row has the lowest right
  // bound and the last row the highest left bound.
  Value blockEnd = arith::AddIOp::create(b, kvRow, index(mask.blockN));
  Value needed = arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, blockEnd,
                                       mask.seqKV);
  if (mask.firstRowLastKey)
    needed = arith::OrIOp::create(
        b, needed,
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::sgt, blockEnd,
            arith::AddIOp::create(b, mask.firstRowLastKey, index(1))));
  else if (mask.causal)
    needed = arith::OrIOp::create(
        b, needed,
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::ugt, blockEnd,
            arith::AddIOp::create(b, mask.firstRow, index(1))));
  if (mask.lastRowFirstKey)
    needed = arith::OrIOp::create(
        b, needed,
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, kvRow,
                              mask.lastRowFirstKey));
  auto ifMask = scf::IfOp::create(b, TypeRange{s.getType()}, needed,
                                  /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifMask.elseBlock());
  scf::YieldOp::create(b, s);
  b.setInsertionPointToStart(ifMask.thenBlock());
  // Keys past seq_kv and, when causal, keys after the query become -inf.
  Value firstCol = arith::AddIOp::create(
      b, kvRow,
      arith::MulIOp::create(b, arith::RemUIOp::create(b, mask.lane, index(4)),
                            index(2)));
  if (mask.bits) {
    // Each row half keeps the columns [first key, min(seq_kv, last key + 1))
    // right of the thread's first column: a bit mask of its elements.
    Value first32 = toI32(b, firstCol);
    Value seqEnd = toI32(b, mask.seqKV);
    SmallVector<Value> words[2];
    for (int half : {0, 1}) {
      Value end = seqEnd;
      if (mask.lastKey0 || mask.causal) {
        Value last = mask.lastKey0 ? (half ? mask.lastKey1 : mask.lastKey0)
                                   : (half ? mask.row1 : mask.row0);
        end = arith::MinSIOp::create(
            b, end,
            arith::AddIOp::create(b, toI32(b, last),
                                  arith::ConstantIntOp::create(b, 1, 32)));
      }
      Value begin;
      if (mask.firstKey0)
        begin = arith::SubIOp::create(
            b, toI32(b, half ? mask.firstKey1 : mask.firstKey0), first32);
      words[half] = sFrag.columnRangeBits(
          begin, arith::SubIOp::create(b, end, first32));
    }
    scf::YieldOp::create(b, ValueRange{sFrag.selectByBits(
                                words[0], words[1], s,
                                f32Constant(b, -INFINITY))});
    return ifMask.getResult(0);
  }
  Value cols = arith::AddIOp::create(
      b, vector::BroadcastOp::create(b, i32Vec, toI32(b, firstCol)),
      sFrag.columnOffsets());
  Value valid = arith::CmpIOp::create(
      b, arith::CmpIPredicate::slt, cols,
      vector::BroadcastOp::create(b, i32Vec, toI32(b, mask.seqKV)));
  // Keys after a row's last key (the diagonal, or the window's right edge)
  // and before its first key (the window's left edge) become -inf.
  if (mask.lastKey0 || mask.causal) {
    Value last = mask.lastKey0
                     ? sFrag.perRow(toI32(b, mask.lastKey0),
                                    toI32(b, mask.lastKey1))
                     : sFrag.perRow(toI32(b, mask.row0), toI32(b, mask.row1));
    valid = arith::AndIOp::create(
        b, valid,
        arith::CmpIOp::create(b, arith::CmpIPredicate::sle, cols, last));
  }
  if (mask.firstKey0) {
    Value first =
        sFrag.perRow(toI32(b, mask.firstKey0), toI32(b, mask.firstKey1));
    valid = arith::AndIOp::create(
        b, valid,
        arith::CmpIOp::create(b, arith::CmpIPredicate::sge, cols, first));
  }
  scf::YieldOp::create(
      b, ValueRange{arith::SelectOp::create(
             b, valid, s,
             vector::BroadcastOp::create(b, sFrag.type(),
                                         f32Constant(b, -INFINITY)))});
  return ifMask.getResult(0);
}

NormalizedOutput kvpipe::buildNormalizedOutput(ImplicitLocOpBuilder &b,
                                               Value acc,
                                               const OnlineSoftmaxStats &stats,
                                               Type elementType,
                                               const SoftmaxSinks *sinks) {
  auto f32 = [&](double v) { return f32Constant(b, v); };
  Value sums[2], inv[2], partialSums[2] = {stats.l0, stats.l1};
  Value maxes[2] = {stats.m0, stats.m1};
  for (int half : {0, 1}) {
    sums[half] = QuadSumOp::create(b, b.getF32Type(), partialSums[half]);
    Value denominator = sums[half];
    if (sinks) {
      // exp2(sink - m c) is +inf where the sink outweighs the keys past
      // f32's range (O is 0 then) and where m is -inf (no keys: 0 too);
      // NaN with a sink of -inf there, which the select below makes 0.
      Value logit = half ? sinks->logit1 : sinks->logit0;
      Value offset = arith::MulFOp::create(b, maxes[half], sinks->scaleLog2);
      denominator = arith::AddFOp::create(
          b, denominator,
          math::Exp2Op::create(b, arith::SubFOp::create(b, logit, offset)));
    }
    // A row without any key (seq_kv = 0) is all zeros, not NaN.
    Value positive = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT,
                                           denominator, f32(0.0));
    inv[half] = arith::SelectOp::create(
        b, positive, arith::DivFOp::create(b, f32(1.0), denominator),
        f32(0.0));
  }
  Value o = FragmentRescaleOp::create(b, acc.getType(), acc, inv[0], inv[1]);
  // fp32 partials (split_kv) stay as they are.
  if (elementType.isF32())
    return {o, sums[0], sums[1]};
  auto accType = cast<VectorType>(acc.getType());
  Value narrow = arith::TruncFOp::create(
      b, VectorType::get(accType.getShape(), elementType), o);
  return {narrow, sums[0], sums[1]};
}

void kvpipe::buildStagedStore(ImplicitLocOpBuilder &b, Value o,
                              const StagedStore &store) {
  MLIRContext *ctx = b.getContext();
  auto i32 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, v, 32);
  };
  // The generic-proxy writes must be visible to the async proxy (fence) and
  // complete in all 128 threads (the warpgroup's named barrier) before the
  // store reads them.
  StoreFragmentOp::create(b, o, store.rows, store.swizzle);
  NVVM::FenceProxyOp::create(
      b, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_shared),
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  NVVM::BarrierOp::create(b, Type(), store.barrierId, i32(128), nullptr,
                          Value());
  auto issue = scf::IfOp::create(b, store.elected, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(issue.thenBlock());
  auto rowsType = cast<MemRefType>(store.rows.getType());
  int64_t rows = rowsType.getDimSize(1), width = rowsType.getDimSize(2);
  if (store.packedGroup)
    rows = rows / store.packedGroup * store.packedGroup;
  for (int64_t col = 0; col < rowsType.getDimSize(0); ++col) {
    Value tile = buildTileView(
        b, store.rows,
        {b.getIndexAttr(col), b.getIndexAttr(0), b.getIndexAttr(0)},
        {rows, width});
    if (store.packedGroup)
      tile = buildPackedTileView(b, tile, store.packedGroup);
    SmallVector<Value> coordinates(store.coordinates);
    coordinates.push_back(indexConstant(b, col * width));
    TMAStoreOp::create(b, tile, store.tensorMap, coordinates);
  }
  NVVM::CpAsyncBulkCommitGroupOp::create(b);
  // The CTA's shared memory must outlive the store's reads.
  NVVM::CpAsyncBulkWaitGroupOp::create(b, b.getI32IntegerAttr(0),
                                       b.getUnitAttr());
}

void kvpipe::buildPredicatedStore(ImplicitLocOpBuilder &b, Value o,
                                  const PredicatedStore &store) {
  // The fragment's writes must be complete in all 128 threads before any
  // thread reads another's (generic proxy on both sides: no fence).
  StoreFragmentOp::create(b, o, store.rows, store.swizzle);
  NVVM::BarrierOp::create(b, Type(), store.barrierId,
                          arith::ConstantIntOp::create(b, 128, 32), nullptr,
                          Value());
  buildPredicatedCopy(b, store);
}

void kvpipe::buildPredicatedCopy(ImplicitLocOpBuilder &b,
                                 const PredicatedStore &store) {
  auto index = [&](int64_t v) { return indexConstant(b, v); };
  auto i64 = [&](Value v) {
    return arith::IndexCastOp::create(b, b.getI64Type(), v);
  };
  auto rowsType = cast<MemRefType>(store.rows.getType());
  int64_t rows = rowsType.getDimSize(1), width = rowsType.getDimSize(2);
  int64_t elementBytes = rowsType.getElementTypeBitWidth() / 8;
  int64_t chunkElements = 16 / elementBytes;
  int64_t chunksPerBlockRow = width / chunkElements;
  int64_t chunksPerRow = rowsType.getDimSize(0) * chunksPerBlockRow;
  int64_t chunks = rows * chunksPerRow;
  assert(chunks % 128 == 0 && "the warpgroup's threads share the chunks");
  auto chunkType = VectorType::get({chunkElements}, rowsType.getElementType());
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), 1);
  // The swizzle XORs the 16-byte chunk index with bits 7.. of the row's
  // byte offset in its block (SwizzledTile.h, kvpipe.store_fragment).
  int64_t swizzleMask = store.swizzle / 16 - 1;
  for (int64_t i = 0; i < chunks / 128; ++i) {
    Value chunk = arith::AddIOp::create(b, store.thread, index(128 * i));
    Value row = arith::DivUIOp::create(b, chunk, index(chunksPerRow));
    Value column = arith::RemUIOp::create(b, chunk, index(chunksPerRow));
    Value block = arith::DivUIOp::create(b, column, index(chunksPerBlockRow));
    Value chunkInBlock =
        arith::RemUIOp::create(b, column, index(chunksPerBlockRow));
    Value pattern = arith::AndIOp::create(
        b,
        arith::ShRUIOp::create(
            b, arith::MulIOp::create(b, row, index(store.swizzle)), index(7)),
        index(swizzleMask));
    Value swizzled = arith::MulIOp::create(
        b, arith::XOrIOp::create(b, chunkInBlock, pattern),
        index(chunkElements));
    Value value =
        vector::LoadOp::create(b, chunkType, store.rows,
                               ValueRange{block, row, swizzled},
                               /*nontemporal=*/false, llvm::MaybeAlign(16));
    Value inside = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, row,
                                         store.rowCount);
    auto ifRow = scf::IfOp::create(b, inside, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifRow.thenBlock());
    Value offset = arith::AddIOp::create(
        b, store.firstRowOffset,
        arith::AddIOp::create(
            b, arith::MulIOp::create(b, i64(row), store.rowStride),
            i64(arith::MulIOp::create(b, column, index(chunkElements)))));
    Value address = LLVM::GEPOp::create(b, ptrType, rowsType.getElementType(),
                                        store.output, ValueRange{offset});
    LLVM::StoreOp::create(b, value, address, /*alignment=*/16);
  }
}

SequenceRows kvpipe::loadSequenceRows(ImplicitLocOpBuilder &b,
                                      Value offsets, Value sequence,
                                      Value total) {
  auto load = [&](Value at) -> Value {
    Value address = LLVM::GEPOp::create(
        b, LLVM::LLVMPointerType::get(b.getContext(), 1), b.getI32Type(),
        offsets,
        ValueRange{arith::IndexCastOp::create(b, b.getI64Type(), at)});
    return arith::IndexCastOp::create(
        b, b.getIndexType(), LLVM::LoadOp::create(b, b.getI32Type(), address));
  };
  auto loadNext = [&]() {
    return load(arith::AddIOp::create(b, sequence, indexConstant(b, 1)));
  };
  Value zero = indexConstant(b, 0);
  if (!total) {
    Value start = arith::MaxSIOp::create(b, load(sequence), zero);
    return {start, arith::MaxSIOp::create(
                       b, arith::SubIOp::create(b, loadNext(), start), zero)};
  }
  auto clamp = [&](Value v, Value low, Value high) -> Value {
    return arith::MinSIOp::create(b, arith::MaxSIOp::create(b, v, low), high);
  };
  Value start = clamp(load(sequence), zero, total);
  Value end = clamp(loadNext(), start, total);
  return {start, arith::SubIOp::create(b, end, start)};
}

void kvpipe::buildLogSumExpStore(ImplicitLocOpBuilder &b,
                                 const LogSumExpStore &store) {
  auto index = [&](int64_t v) { return indexConstant(b, v); };
  // Log-sum-exp, natural log: ln 2 * (m * c + log2 l), one lane per row.
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), 1);
  Value null = LLVM::ZeroOp::create(b, ptrType);
  Value wanted = arith::AndIOp::create(
      b, LLVM::ICmpOp::create(b, LLVM::ICmpPredicate::ne, store.lse, null),
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                            arith::RemUIOp::create(b, store.lane, index(4)),
                            index(0)));
  auto write = scf::IfOp::create(b, wanted, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(write.thenBlock());
  auto rowBaseOf = [&](Value head) -> Value {
    Value base = arith::MulIOp::create(
        b,
        arith::AddIOp::create(
            b, arith::MulIOp::create(b, store.batch, store.heads), head),
        store.seqQ);
    return store.rowStart ? arith::AddIOp::create(b, base, store.rowStart)
                          : base;
  };
  Value rowBase = rowBaseOf(store.head);
  Value rowBases[2] = {rowBase, store.head1 ? rowBaseOf(store.head1) : rowBase};
  Value used[2] = {store.used0, store.used1};
  Value rowCount = store.rowCount ? store.rowCount : store.seqQ;
  Value maxes[2] = {store.max0, store.max1}, rows[2] = {store.row0, store.row1};
  Value sums[2] = {store.sum0, store.sum1};
  for (int half : {0, 1}) {
    Value inRange = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                          rows[half], rowCount);
    if (used[half])
      inRange = arith::AndIOp::create(b, inRange, used[half]);
    auto ifRow = scf::IfOp::create(b, inRange, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard rowGuard(b);
    b.setInsertionPointToStart(ifRow.thenBlock());
    Value value;
    if (store.sinks) {
      // The row's exponent offset m c (P = exp2(S c - m c)).
      Value offset = arith::MulFOp::create(b, maxes[half], store.scaleLog2);
      // log2(l 2^(m c) + 2^sink) = hi + log2(l 2^(m c - hi) + 2^(sink - hi))
      // with hi the larger exponent: both powers at most 1, one of them 1.
      Value logit = half ? store.sinks->logit1 : store.sinks->logit0;
      Value hi = arith::MaxNumFOp::create(b, offset, logit);
      Value total = arith::AddFOp::create(
          b,
          arith::MulFOp::create(
              b, sums[half],
              math::Exp2Op::create(b, arith::SubFOp::create(b, offset, hi))),
          math::Exp2Op::create(b, arith::SubFOp::create(b, logit, hi)));
      value = arith::MulFOp::create(
          b, arith::AddFOp::create(b, hi, math::Log2Op::create(b, total)),
          f32Constant(b, M_LN2));
      // Without keys and with a sink of -inf, no term at all: +inf, as
      // without sinks.
      Value anyTerm = arith::OrIOp::create(
          b,
          arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, sums[half],
                                f32Constant(b, 0.0)),
          arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, logit,
                                f32Constant(b, -INFINITY)));
      value = arith::SelectOp::create(b, anyTerm, value,
                                      f32Constant(b, INFINITY));
    } else {
      value = arith::MulFOp::create(
          b,
          arith::AddFOp::create(
              b, arith::MulFOp::create(b, maxes[half], store.scaleLog2),
              math::Log2Op::create(b, sums[half])),
          f32Constant(b, M_LN2));
    }
    if (store.infiniteWithoutKeys && !store.sinks) {
      Value seen = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT,
                                         sums[half], f32Constant(b, 0.0));
      value = arith::SelectOp::create(b, seen, value,
                                      f32Constant(b, INFINITY));
    }
    Value element = arith::IndexCastOp::create(
        b, b.getI64Type(), arith::AddIOp::create(b, rowBases[half], rows[half]));
    Value addr = LLVM::GEPOp::create(b, ptrType, b.getF32Type(), store.lse,
                                     ValueRange{element});
    LLVM::StoreOp::create(b, value, addr);
  }
}

/// The address of element `offset` (i64) of an fp32 array in global memory.
static Value f32Element(ImplicitLocOpBuilder &b, Value base, Value offset) {
  return LLVM::GEPOp::create(b, base.getType(), b.getF32Type(), base,
                             ValueRange{offset});
}

/// The column fragment of buildColumnVector, each pair of adjacent columns
/// (its first at `columnOffset(i)` from the thread's first) read by
/// `loadPair` as a vector<2xf32>.
static Value buildColumnPairs(ImplicitLocOpBuilder &b, int64_t numElements,
                              function_ref<Value(int64_t)> loadPair) {
  // Elements 4 k and 4 k + 1 are two adjacent columns (the first even: an
  // 8-byte aligned pair); elements 4 k + 2 and 4 k + 3, in the other row
  // half, are the same columns. One 8-byte load per pair.
  static_assert(AccumulatorLayout::columnOffset(1) ==
                    AccumulatorLayout::columnOffset(0) + 1 &&
                AccumulatorLayout::rowHalf(2) == 1);
  SmallVector<Value> elements(numElements);
  for (int64_t i = 0; i < numElements; i += 4) {
    Value pair = loadPair(AccumulatorLayout::columnOffset(i));
    for (int64_t k = 0; k < 2; ++k) {
      elements[i + k] = vector::ExtractOp::create(b, pair, k);
      if (i + 2 + k < numElements)
        elements[i + 2 + k] = elements[i + k];
    }
  }
  return vector::FromElementsOp::create(
      b, VectorType::get({numElements}, b.getF32Type()), elements);
}

Value kvpipe::buildColumnVector(ImplicitLocOpBuilder &b, Value values,
                                Value firstColumn, int64_t numElements) {
  // One pointer per call, and constant offsets from it: each load addresses
  // [pointer + immediate]. Offsets computed per element let LLVM's loop
  // strength reduction keep one 64-bit pointer per element alive across the
  // loop around this (at head dim 128 that spilled).
  Value row = f32Element(
      b, values, arith::IndexCastOp::create(b, b.getI64Type(), firstColumn));
  auto pairType = VectorType::get({2}, b.getF32Type());
  return buildColumnPairs(b, numElements, [&](int64_t offset) -> Value {
    return LLVM::LoadOp::create(
        b, pairType,
        f32Element(b, row, arith::ConstantIntOp::create(b, offset, 64)),
        /*alignment=*/8);
  });
}

Value kvpipe::buildSharedColumnVector(ImplicitLocOpBuilder &b, Value row,
                                      Value firstColumn, int64_t numElements) {
  auto pairType = VectorType::get({2}, b.getF32Type());
  return buildColumnPairs(b, numElements, [&](int64_t offset) -> Value {
    Value at = arith::AddIOp::create(
        b, firstColumn, arith::ConstantIndexOp::create(b, offset));
    return vector::LoadOp::create(b, pairType, row, ValueRange{at},
                                  /*nontemporal=*/false, llvm::MaybeAlign(8));
  });
}

void kvpipe::buildColumnPrefetch(ImplicitLocOpBuilder &b, Value values,
                                  Value firstColumn, int64_t numElements) {
  // The thread's columns span columnOffset(numElements - 1) + 1 floats from
  // its first: one prefetch per 128-byte line (32 floats) of the span.
  constexpr int64_t kLineFloats = 128 / 4;
  Value first = f32Element(
      b, values, arith::IndexCastOp::create(b, b.getI64Type(), firstColumn));
  for (int64_t offset = 0;
       offset <= AccumulatorLayout::columnOffset(numElements - 1);
       offset += kLineFloats)
    NVVM::PrefetchOp::create(
        b, NVVM::PrefetchCacheLevelAttr::get(b.getContext(),
                                             NVVM::PrefetchCacheLevel::L1),
        /*evictPriority=*/nullptr,
        f32Element(b, first, arith::ConstantIntOp::create(b, offset, 64)),
        /*predicate=*/Value());
}

void kvpipe::buildFragmentOrderStore(ImplicitLocOpBuilder &b, Value fragment,
                                     Value tile, Value thread,
                                     int64_t firstElement) {
  constexpr int64_t vec = AccumulatorLayout::kFragmentOrderVector;
  Value first = arith::MulIOp::create(b, thread,
                                      arith::ConstantIndexOp::create(b, vec));
  int64_t n = cast<VectorType>(fragment.getType()).getNumElements();
  for (int64_t i = 0; i < n; i += vec) {
    // Element extracts (the lowering has no strided-slice patterns); LLVM
    // folds them back into one vector store.
    SmallVector<Value, vec> elements;
    for (int64_t k = 0; k < vec; ++k)
      elements.push_back(vector::ExtractOp::create(b, fragment, i + k));
    Value part = vector::FromElementsOp::create(
        b, VectorType::get({vec}, b.getF32Type()), elements);
    Value at = arith::AddIOp::create(
        b, first,
        arith::ConstantIndexOp::create(
            b, AccumulatorLayout::fragmentOrderOffset(firstElement + i)));
    vector::StoreOp::create(b, part, tile, ValueRange{at},
                            /*nontemporal=*/false,
                            llvm::MaybeAlign(vec * sizeof(float)));
  }
}

/// The address of the thread's first element (its vector of 4 at 4 t) of a
/// fragment-ordered fp32 tile in global memory at `base`; its other
/// elements are at constant offsets from it (fragmentOrderOffset).
static Value fragmentOrderThreadStart(ImplicitLocOpBuilder &b, Value base,
                                      Value thread) {
  return f32Element(
      b, base,
      arith::IndexCastOp::create(
          b, b.getI64Type(),
          arith::MulIOp::create(
              b, thread,
              arith::ConstantIndexOp::create(
                  b, AccumulatorLayout::kFragmentOrderVector))));
}

Value kvpipe::buildFragmentOrderLoad(ImplicitLocOpBuilder &b, Value base,
                                     Value thread, int64_t numElements) {
  constexpr int64_t vec = AccumulatorLayout::kFragmentOrderVector;
  auto vecType = VectorType::get({vec}, b.getF32Type());
  Value first = fragmentOrderThreadStart(b, base, thread);
  SmallVector<Value> elements;
  for (int64_t i = 0; i < numElements; i += vec) {
    Value part = LLVM::LoadOp::create(
        b, vecType,
        f32Element(b, first,
                   arith::ConstantIntOp::create(
                       b, AccumulatorLayout::fragmentOrderOffset(i), 64)),
        vec * sizeof(float));
    for (int64_t k = 0; k < vec; ++k)
      elements.push_back(vector::ExtractOp::create(b, part, k));
  }
  return vector::FromElementsOp::create(
      b, VectorType::get({numElements}, b.getF32Type()), elements);
}

void kvpipe::buildPtxStatement(ImplicitLocOpBuilder &b, StringRef ptx,
                               StringRef constraints, ValueRange operands) {
  LLVM::InlineAsmOp::create(
      b, TypeRange{}, operands, b.getStringAttr(ptx),
      b.getStringAttr(constraints), /*has_side_effects=*/b.getUnitAttr(),
      /*is_align_stack=*/nullptr,
      LLVM::TailCallKindAttr::get(b.getContext(),
                                  LLVM::tailcallkind::TailCallKind::None),
      /*asm_dialect=*/nullptr, /*operand_attrs=*/nullptr);
}

void kvpipe::buildBulkReduceAddF32(ImplicitLocOpBuilder &b, Value global,
                                   Value tile, int64_t bytes) {
  // MLIR 22's NVVM dialect has the tensor form of the bulk reduction only;
  // the flat form needs no tensor map. The shared address is the 32-bit
  // offset in the CTA's window.
  Value shared = arith::IndexCastOp::create(
      b, b.getI32Type(), memref::ExtractAlignedPointerAsIndexOp::create(b, tile));
  buildPtxStatement(b,
                    "cp.reduce.async.bulk.global.shared::cta.bulk_group."
                    "add.f32 [$0], [$1], $2;",
                    "l,r,r,~{memory}",
                    {global, shared, arith::ConstantIntOp::create(b, bytes, 32)});
}

void kvpipe::buildFragmentOrderReduceAdd(ImplicitLocOpBuilder &b,
                                         Value fragment, Value base,
                                         Value thread) {
  constexpr int64_t vec = AccumulatorLayout::kFragmentOrderVector;
  Value first = fragmentOrderThreadStart(b, base, thread);
  int64_t n = cast<VectorType>(fragment.getType()).getNumElements();
  for (int64_t i = 0; i < n; i += vec) {
    SmallVector<Value, 1 + vec> operands = {f32Element(
        b, first,
        arith::ConstantIntOp::create(
            b, AccumulatorLayout::fragmentOrderOffset(i), 64))};
    for (int64_t k = 0; k < vec; ++k)
      operands.push_back(vector::ExtractOp::create(b, fragment, i + k));
    // NVVM has no vector reduction op; LLVM's atomicrmw on <4 x float>
    // becomes a compare-and-swap loop.
    buildPtxStatement(b, "red.global.add.v4.f32 [$0], {$1, $2, $3, $4};",
                      "l,f,f,f,f,~{memory}", operands);
  }
}

Value kvpipe::buildPackedTileView(ImplicitLocOpBuilder &b, Value rows,
                                  int64_t group) {
  auto type = cast<MemRefType>(rows.getType());
  int64_t positions = type.getDimSize(0) / group;
  return memref::ExpandShapeOp::create(
      b, ArrayRef<int64_t>{positions, group, type.getDimSize(1)}, rows,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}});
}

void kvpipe::buildFragmentGlobalStore(ImplicitLocOpBuilder &b, Value fragment,
                                      Value base, Value rowOffset[2],
                                      Value valid[2], Value threadColumn) {
  int64_t n = cast<VectorType>(fragment.getType()).getNumElements();
  auto pairType = VectorType::get({2}, b.getF32Type());
  Value column = arith::IndexCastOp::create(b, b.getI64Type(), threadColumn);
  for (int64_t half : {0, 1}) {
    auto ifValid = scf::IfOp::create(b, valid[half], /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifValid.thenBlock());
    // The thread's first element of the row, then constant offsets.
    Value first = f32Element(b, base,
                             arith::AddIOp::create(b, rowOffset[half], column));
    for (int64_t i = 0; i < n; i += 2) {
      if (AccumulatorLayout::rowHalf(i) != half)
        continue;
      // Elements i and i + 1 are adjacent columns of the same row.
      Value pair = vector::FromElementsOp::create(
          b, pairType,
          ValueRange{vector::ExtractOp::create(b, fragment, i),
                     vector::ExtractOp::create(b, fragment, i + 1)});
      Value address = f32Element(
          b, first,
          arith::ConstantIntOp::create(b, AccumulatorLayout::columnOffset(i),
                                       64));
      LLVM::StoreOp::create(b, pair, address, /*alignment=*/8);
    }
  }
}
