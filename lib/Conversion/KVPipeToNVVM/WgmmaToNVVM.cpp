//===- WgmmaToNVVM.cpp - warpgroup MMA to NVVM ----------------------------===//
//
// `kvpipe.warpgroup_mma` becomes wgmma.fence, K/16 wgmma.mma_async (SS via
// the NVVM op, RS via inline PTX: NVVM has no RS form) and commit_group;
// `kvpipe.warpgroup_wait` becomes wait_group plus register pins;
// `kvpipe.store_fragment` writes an accumulator-layout fragment into a
// swizzled tile.
//
// The shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
//   bits  0-13  start address >> 4
//   bits 16-29  leading-dimension byte offset (LBO) >> 4
//   bits 32-45  stride-dimension byte offset (SBO) >> 4
//   bits 62-63  swizzle: 1 = 128B, 2 = 64B, 3 = 32B
// For the canonical tile layout (SwizzledTile.h) with swizzle span S:
//   K-major operand: SBO = 8 rows * S (the next 8-row atom); LBO is unused
//     because one k-step (16 elements) never leaves a swizzle row. A k-step
//     at element k starts at block k/W, byte (k%W) * elem within the row.
//   MN-major operand (B with transpose_b, A with transpose_a): SBO =
//     8 rows * S (the next 8 K rows); LBO = the block stride (the next W
//     columns of N or M). A k-step starts 16 rows = 16 * S bytes further.
// Verified on the H200 for S = 128 (shared/docs/gpu-workflow.md).
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Dialect/KVPipe/IR/SwizzledTile.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "convert-kvpipe-to-nvvm"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::lowering;

namespace {

int64_t swizzleLayoutCode(int64_t swizzleBytes) {
  switch (swizzleBytes) {
  case 128:
    return 1;
  case 64:
    return 2;
  default:
    return 3;
  }
}

/// One shared-memory operand of a wgmma: its tile layout, its major-ness,
/// and the descriptor of its first k-step.
struct SmemOperand {
  SwizzledTile tile;
  bool kMajor;
  Value baseDescriptor;

  /// Byte offset of k-step `kk` from the tile's start.
  int64_t kStepOffset(int64_t kk) const {
    if (!kMajor)
      return kk * 16 * tile.swizzleBytes;
    int64_t k = 16 * kk;
    return (k / tile.width) * tile.blockStrideBytes() +
           (k % tile.width) * tile.elementBytes;
  }

  /// The descriptor of k-step `kk`: only the start-address field changes,
  /// and it cannot overflow since shared memory is below 256 KiB.
  Value descriptor(OpBuilder &b, Location loc, int64_t kk) const {
    int64_t offset = kStepOffset(kk);
    if (offset == 0)
      return baseDescriptor;
    return LLVM::AddOp::create(b, loc, baseDescriptor,
                               i64Constant(b, loc, offset >> 4));
  }
};

SmemOperand makeSmemOperand(OpBuilder &b, Location loc,
                            const LLVMTypeConverter &converter,
                            MemRefType type, Value descriptor,
                            int64_t swizzle, bool kMajor) {
  SwizzledTile tile =
      *getSwizzledTile(type, swizzle, [] { return InFlightDiagnostic(); },
                       "operand");
  int64_t lbo = kMajor ? 16 : tile.blockStrideBytes();
  int64_t sbo = 8 * tile.swizzleBytes;
  int64_t high = (((lbo >> 4) & 0x3FFF) << 16) |
                 (((sbo >> 4) & 0x3FFF) << 32) |
                 (swizzleLayoutCode(swizzle) << 62);
  Value ptr = tileAddress(b, loc, converter, type, descriptor);
  Value addr = LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), ptr);
  Value start = LLVM::AndOp::create(
      b, loc, LLVM::LShrOp::create(b, loc, addr, i64Constant(b, loc, 4)),
      i64Constant(b, loc, 0x3FFF));
  Value desc = LLVM::OrOp::create(b, loc, start, i64Constant(b, loc, high));
  // The descriptor is pinned where the wgmma is (a `mov` that LLVM may not
  // move): the k-steps' descriptors derived from it stay next to their
  // wgmmas. Otherwise, for a tile that does not change in a loop (the
  // backward's K and V rows), LLVM hoists every k-step's 64-bit descriptor
  // out of the loop and ptxas keeps them in ordinary registers across it,
  // spilling, and moves each to a uniform register (R2UR) before its wgmma
  // (backward D 128: 120 / 176 bytes of spills and 51 R2URs; pinned, 12 / 12
  // and 2; 2026-12-04). ptxas computes the pinned ones in uniform registers.
  auto pinned = LLVM::InlineAsmOp::create(
      b, loc, b.getI64Type(), ValueRange{desc}, "mov.b64 $0, $1;", "=l,l",
      /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
  return {tile, kMajor, pinned.getResult(0)};
}

Type f32Struct(MLIRContext *ctx, int64_t n) {
  return LLVM::LLVMStructType::getLiteral(
      ctx, SmallVector<Type>(n, Float32Type::get(ctx)));
}

SmallVector<Value> vectorElements(OpBuilder &b, Location loc, Value vector) {
  auto type = cast<VectorType>(vector.getType());
  SmallVector<Value> elements;
  for (int64_t i = 0; i < type.getNumElements(); ++i)
    elements.push_back(LLVM::ExtractElementOp::create(
        b, loc, vector, i32Constant(b, loc, i)));
  return elements;
}

Value buildVector(OpBuilder &b, Location loc, VectorType type,
                  ValueRange elements) {
  Value vector = LLVM::UndefOp::create(b, loc, type);
  for (auto [i, element] : llvm::enumerate(elements))
    vector = LLVM::InsertElementOp::create(b, loc, vector, element,
                                           i32Constant(b, loc, i));
  return vector;
}

Value buildStruct(OpBuilder &b, Location loc, ValueRange elements) {
  Value result =
      LLVM::UndefOp::create(b, loc, f32Struct(b.getContext(), elements.size()));
  for (auto [i, element] : llvm::enumerate(elements))
    result = LLVM::InsertValueOp::create(b, loc, result, element, i);
  return result;
}

SmallVector<Value> structElements(OpBuilder &b, Location loc, Value value,
                                  int64_t n) {
  SmallVector<Value> elements;
  for (int64_t i = 0; i < n; ++i)
    elements.push_back(LLVM::ExtractValueOp::create(b, loc, value, i));
  return elements;
}

/// An inline-asm statement: its text and its LLVM constraint string.
struct InlineAsm {
  std::string text;
  std::string constraints;
};

/// The constraints of `numTied` f32 outputs ($0..) whose inputs are tied
/// to them, around `inputs`, the constraints of the untied inputs that come
/// first: "=f,...,=f[,inputs],0,...,numTied-1".
std::string tiedF32Constraints(int64_t numTied, StringRef inputs) {
  std::string constraints;
  llvm::raw_string_ostream os(constraints);
  llvm::interleave(
      llvm::seq<int64_t>(0, numTied), os, [&](int64_t) { os << "=f"; }, ",");
  if (!inputs.empty())
    os << "," << inputs;
  for (int64_t i = 0; i < numTied; ++i)
    os << "," << i;
  return constraints;
}

/// The inline PTX of one m64nNk16 wgmma with A from registers (NVVM has no
/// RS form), for `numAcc` f32 accumulator registers per thread. Operands:
///   $0..$(numAcc-1): D, outputs tied to the last numAcc inputs;
///   $numAcc..+3: A (four b32 registers); $(numAcc+4): the B descriptor;
///   $(numAcc+5): scale-d (0: D = A*B, 1: D += A*B), as a predicate.
/// `transposeB`: B is MN-major (imm-trans-b = 1).
InlineAsm registerAWgmmaPtx(int64_t numAcc, Type elementType,
                            bool transposeB) {
  StringRef type = elementType.isBF16() ? "bf16" : "f16";
  auto reg = [&](int64_t i) { return "$" + std::to_string(numAcc + i); };
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "{\n.reg .pred p;\nsetp.ne.b32 p, " << reg(5)
     << ", 0;\nwgmma.mma_async.sync.aligned.m64n" << numAcc * 2 << "k16.f32."
     << type << "." << type << " {";
  llvm::interleave(
      llvm::seq<int64_t>(0, numAcc), os, [&](int64_t i) { os << "$" << i; },
      ", ");
  os << "}, {" << reg(0) << ", " << reg(1) << ", " << reg(2) << ", "
     << reg(3) << "}, " << reg(4) << ", p, 1, 1, " << (transposeB ? 1 : 0)
     << ";\n}\n";
  return {text, tiedF32Constraints(numAcc, "r,r,r,r,l,r")};
}

/// A side-effecting inline-asm statement that returns `numResults` f32
/// registers as a literal struct.
Value createF32InlineAsm(OpBuilder &b, Location loc, int64_t numResults,
                         ValueRange operands, const InlineAsm &statement) {
  auto asmOp = LLVM::InlineAsmOp::create(
      b, loc, f32Struct(b.getContext(), numResults), operands,
      b.getStringAttr(statement.text), b.getStringAttr(statement.constraints),
      b.getUnitAttr(), /*is_align_stack=*/nullptr,
      LLVM::TailCallKindAttr::get(b.getContext(),
                                  LLVM::tailcallkind::TailCallKind::None),
      /*asm_dialect=*/nullptr, /*operand_attrs=*/nullptr);
  return asmOp.getRes();
}

/// Pins f32 registers at this point of the program with an empty inline-asm
/// statement that reads and writes them (CUTLASS's
/// `warpgroup_fence_operand`): the compiler may not move their producers
/// below, nor their consumers above it. Around wgmma this keeps accumulator
/// reads after the wait that retires the group, and accumulator writes
/// before the fence that starts one.
SmallVector<Value> pinRegisters(OpBuilder &b, Location loc,
                                ArrayRef<Value> values) {
  int64_t n = values.size();
  Value pinned = createF32InlineAsm(b, loc, n, values,
                                    {"", tiedF32Constraints(n, "")});
  return structElements(b, loc, pinned, n);
}

NVVM::WGMMATypes wgmmaType(Type t) {
  return t.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
}

struct WarpgroupMmaOpLowering : ConvertOpToLLVMPattern<WarpgroupMmaOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(WarpgroupMmaOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = getContext();
    int64_t n = op.getN(), k = op.getK(), numAcc = n / 2;
    bool kMajorB = !op.getTransposeB();
    SmemOperand b =
        makeSmemOperand(rewriter, loc, *getTypeConverter(),
                        op.getB().getType(), adaptor.getB(), op.getSwizzle(),
                        kMajorB);

    // The accumulator's producers must finish before the fence that starts
    // the group; without an accumulator the first step zero-initialises D.
    bool zeroInit = !adaptor.getAcc();
    SmallVector<Value> acc;
    if (zeroInit) {
      Value undef = LLVM::UndefOp::create(rewriter, loc, rewriter.getF32Type());
      acc.assign(numAcc, undef);
    } else {
      acc = pinRegisters(rewriter, loc,
                         vectorElements(rewriter, loc, adaptor.getAcc()));
    }

    LLVM_DEBUG(llvm::dbgs()
               << DEBUG_TYPE << ": wgmma m64n" << n << "k" << k << " at "
               << loc << ": A from "
               << (op.isRegisterA() ? "registers (inline PTX)"
                                    : "shared memory (nvvm.wgmma.mma_async)")
               << ", B " << (kMajorB ? "K" : "MN") << "-major"
               << (zeroInit ? ", D zero-initialised" : "") << "\n");
    std::optional<SmemOperand> a;
    SmallVector<Value> aRegs;
    if (op.isRegisterA()) {
      // Pairs of 16-bit elements are the b32 registers of the A fragment.
      auto fragType = cast<VectorType>(op.getA().getType());
      Value asI32 = LLVM::BitcastOp::create(
          rewriter, loc,
          VectorType::get({fragType.getNumElements() / 2},
                          rewriter.getI32Type()),
          adaptor.getA());
      aRegs = vectorElements(rewriter, loc, asI32);
    } else {
      a = makeSmemOperand(rewriter, loc, *getTypeConverter(),
                          cast<MemRefType>(op.getA().getType()),
                          adaptor.getA(), op.getSwizzle(),
                          /*kMajor=*/!op.getTransposeA());
    }

    NVVM::WgmmaFenceAlignedOp::create(rewriter, loc);
    Type structType = f32Struct(ctx, numAcc);
    Value d = buildStruct(rewriter, loc, acc);
    NVVM::WGMMATypes elementType = wgmmaType(op.getElementType());
    for (int64_t kk = 0; kk < k / 16; ++kk) {
      bool scaleZero = zeroInit && kk == 0;
      Value descB = b.descriptor(rewriter, loc, kk);
      if (a) {
        d = NVVM::WgmmaMmaAsyncOp::create(
            rewriter, loc, structType, d, a->descriptor(rewriter, loc, kk),
            descB, NVVM::MMAShapeAttr::get(ctx, 64, n, 16),
            NVVM::WGMMATypesAttr::get(ctx, elementType),
            NVVM::WGMMATypesAttr::get(ctx, elementType),
            NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::f32),
            NVVM::WGMMAScaleOutAttr::get(ctx, scaleZero
                                                  ? NVVM::WGMMAScaleOut::zero
                                                  : NVVM::WGMMAScaleOut::one),
            NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
            NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
            NVVM::MMALayoutAttr::get(ctx, op.getTransposeA()
                                              ? NVVM::MMALayout::col
                                              : NVVM::MMALayout::row),
            NVVM::MMALayoutAttr::get(ctx, kMajorB ? NVVM::MMALayout::col
                                                  : NVVM::MMALayout::row),
            /*satfinite=*/nullptr);
      } else {
        d = emitRegisterA(rewriter, loc, d, numAcc,
                          ArrayRef<Value>(aRegs).slice(4 * kk, 4), descB,
                          scaleZero, kMajorB, op.getElementType());
      }
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(rewriter, loc);
    rewriter.replaceOp(
        op, buildVector(rewriter, loc, cast<VectorType>(op.getType()),
                        structElements(rewriter, loc, d, numAcc)));
    return success();
  }

  /// One m64nNk16 wgmma with A from registers (registerAWgmmaPtx).
  static Value emitRegisterA(OpBuilder &b, Location loc, Value d,
                             int64_t numAcc, ArrayRef<Value> aRegs,
                             Value descB, bool scaleZero, bool kMajorB,
                             Type elementType) {
    SmallVector<Value> operands(aRegs.begin(), aRegs.end());
    operands.push_back(descB);
    operands.push_back(i32Constant(b, loc, scaleZero ? 0 : 1));
    llvm::append_range(operands, structElements(b, loc, d, numAcc));
    return createF32InlineAsm(
        b, loc, numAcc, operands,
        registerAWgmmaPtx(numAcc, elementType, /*transposeB=*/!kMajorB));
  }
};

struct WarpgroupWaitOpLowering : ConvertOpToLLVMPattern<WarpgroupWaitOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(WarpgroupWaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NVVM::WgmmaWaitGroupSyncOp::create(rewriter, loc, op.getPending());
    // Only now are the retired groups' registers written: pin them so that
    // no read of them is scheduled above the wait.
    SmallVector<Value> results;
    for (Value fragment : adaptor.getFragments()) {
      auto type = cast<VectorType>(fragment.getType());
      results.push_back(buildVector(
          rewriter, loc, type,
          pinRegisters(rewriter, loc,
                       vectorElements(rewriter, loc, fragment))));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// Each warp stores its 16 x N part of the fragment with `stmatrix.x4`
/// (four 8x8 b16 matrices per instruction). The accumulator layout is
/// stmatrix's register layout (AccumulatorLayout.h: in each 8x8 matrix,
/// thread l holds row l/4, columns 2(l%4) and +1 as one 32-bit pair), so
/// pairs 4m .. 4m+3 -- rows +0/+8 of the 8-column groups 2m and 2m+1 -- are
/// instruction m's four registers, and lane l gives the address of row l%8
/// of matrix l/8. That row segment is one 16-byte chunk of the swizzled tile
/// (a tile row is at least 32 bytes), and the swizzle XORs the chunk index
/// (address bits 4..) with the row within the 8-row atom (bits 7..), which
/// depends only on the lane's row. One instruction and one address per 8
/// elements instead of four 32-bit stores with four addresses: the addresses
/// are what a kernel keeps live across its loop (the backward's dS^T store
/// spilled them).
struct StoreFragmentOpLowering : ConvertOpToLLVMPattern<StoreFragmentOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  /// Pairs per stmatrix.x4 and the columns one instruction covers.
  static constexpr int64_t kPairsPerStore = 4;
  static constexpr int64_t kColumnsPerStore =
      2 * AccumulatorLayout::kColumnGroupWidth;

  LogicalResult
  matchAndRewrite(StoreFragmentOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MemRefType type = op.getDest().getType();
    SwizzledTile tile = *getSwizzledTile(
        type, op.getSwizzle(), [] { return InFlightDiagnostic(); }, "dest");
    auto cst = [&](int64_t v) { return i32Constant(rewriter, loc, v); };
    using Layout = AccumulatorLayout;
    // Pair 4m + k (elements 8m + 2k, +1) is matrix k of instruction m:
    // rows 8 (k % 2) + [0, 8), columns 16 m + 8 (k / 2) + [0, 8).
    static_assert(Layout::rowOffset(0) == 0 && Layout::rowOffset(2) == 8 &&
                      Layout::rowOffset(4) == 0 && Layout::rowOffset(6) == 8,
                  "pairs 4m+k: k%2 selects the row half");
    static_assert(Layout::columnOffset(0) == 0 &&
                      Layout::columnOffset(4) == Layout::kColumnGroupWidth &&
                      Layout::columnOffset(8) == 2 * Layout::kColumnGroupWidth,
                  "pairs 4m+k: k/2 selects the column group");
    // 16-bit elements and swizzles of 32 bytes or more (the verifier).
    assert(tile.width % kColumnsPerStore == 0 && "a row holds 16 columns");

    Value t = LLVM::URemOp::create(rewriter, loc, threadIdX(rewriter, loc),
                                   cst(Layout::kThreads));
    Value warp = LLVM::UDivOp::create(rewriter, loc, t, cst(Layout::kWarpSize));
    Value lane = LLVM::URemOp::create(rewriter, loc, t, cst(Layout::kWarpSize));
    // The matrix this lane addresses (lane / 8) and its row in it.
    Value matrix = LLVM::UDivOp::create(rewriter, loc, lane, cst(8));
    Value rowInMatrix = LLVM::URemOp::create(rewriter, loc, lane, cst(8));
    // Matrix k of instruction m holds the fragment's rows 16 warp + 8 (k % 2)
    // + [0, 8) and columns 16 m + 8 (k / 2) + [0, 8).
    Value fragmentRow = LLVM::AddOp::create(
        rewriter, loc,
        LLVM::MulOp::create(rewriter, loc, warp, cst(Layout::kRowsPerWarp)),
        LLVM::MulOp::create(rewriter, loc,
                            LLVM::URemOp::create(rewriter, loc, matrix, cst(2)),
                            cst(Layout::kRowHalfDistance)));
    Value fragmentColumn = LLVM::MulOp::create(
        rewriter, loc, LLVM::UDivOp::create(rewriter, loc, matrix, cst(2)),
        cst(Layout::kColumnGroupWidth));
    // The tile row this lane addresses in instruction 0 and the first column
    // of its 8: the fragment's row (+ the lane's row of the matrix) and
    // column, or with `transpose` (stmatrix .trans: the lane addresses a row
    // of the transposed matrix) the column (+ the lane's row) and row.
    bool transpose = op.getTranspose();
    Value row = LLVM::AddOp::create(
        rewriter, loc, transpose ? fragmentColumn : fragmentRow, rowInMatrix);
    Value column = transpose ? fragmentRow : fragmentColumn;
    // Instruction m moves 16 columns on, or with `transpose` 16 rows down,
    // which keeps the swizzle's XOR (the pattern repeats every 8 rows).
    auto blockAndColumnBytes = [&](Value column) {
      Value block = LLVM::UDivOp::create(rewriter, loc, column,
                                         cst(tile.width));
      Value inBlock = LLVM::MulOp::create(
          rewriter, loc,
          LLVM::URemOp::create(rewriter, loc, column, cst(tile.width)),
          cst(tile.elementBytes));
      return std::pair{LLVM::MulOp::create(rewriter, loc, block,
                                           cst(tile.blockStrideBytes())),
                       inBlock};
    };
    Value rowBytes =
        LLVM::MulOp::create(rewriter, loc, row, cst(tile.swizzleBytes));
    // The swizzle's XOR: the row within the atom, at the chunk bits.
    Value chunkXor = LLVM::ShlOp::create(
        rewriter, loc,
        LLVM::AndOp::create(rewriter, loc,
                            LLVM::LShrOp::create(rewriter, loc, rowBytes,
                                                 cst(7)),
                            cst(tile.swizzleBytes / 16 - 1)),
        cst(4));
    Value base = tileAddress(rewriter, loc, *getTypeConverter(), type,
                             adaptor.getDest());
    auto fragType = cast<VectorType>(op.getFragment().getType());
    int64_t numPairs = fragType.getNumElements() / 2;
    Value pairs = LLVM::BitcastOp::create(
        rewriter, loc, VectorType::get({numPairs}, rewriter.getI32Type()),
        adaptor.getFragment());
    auto shape = NVVM::LdStMatrixShapeAttr::get(rewriter.getContext(), 8, 8);
    // With `transpose` the lane's column (so its block and chunk) is the
    // same in every instruction.
    Value fixedOffset;
    if (transpose) {
      auto [blockBytes, columnBytes] = blockAndColumnBytes(column);
      fixedOffset = LLVM::AddOp::create(
          rewriter, loc, LLVM::AddOp::create(rewriter, loc, rowBytes, blockBytes),
          LLVM::XOrOp::create(rewriter, loc, columnBytes, chunkXor));
    }
    for (int64_t m = 0; m < numPairs / kPairsPerStore; ++m) {
      Value bytes;
      if (transpose) {
        bytes = LLVM::AddOp::create(
            rewriter, loc, fixedOffset,
            cst(m * kColumnsPerStore * tile.swizzleBytes));
      } else {
        int64_t col = m * kColumnsPerStore;
        int64_t block = col / tile.width, colInBlock = col % tile.width;
        Value columnBytes = LLVM::MulOp::create(
            rewriter, loc,
            LLVM::AddOp::create(rewriter, loc, column, cst(colInBlock)),
            cst(tile.elementBytes));
        bytes = LLVM::AddOp::create(
            rewriter, loc,
            LLVM::AddOp::create(
                rewriter, loc, rowBytes,
                LLVM::XOrOp::create(rewriter, loc, columnBytes, chunkXor)),
            cst(block * tile.blockStrideBytes()));
      }
      Value addr = LLVM::GEPOp::create(rewriter, loc, base.getType(),
                                       rewriter.getI8Type(), base,
                                       ValueRange{bytes});
      SmallVector<Value, kPairsPerStore> sources;
      for (int64_t k = 0; k < kPairsPerStore; ++k)
        sources.push_back(LLVM::ExtractElementOp::create(
            rewriter, loc, pairs, cst(kPairsPerStore * m + k)));
      NVVM::StMatrixOp::create(
          rewriter, loc, addr, sources,
          transpose ? NVVM::MMALayout::col : NVVM::MMALayout::row, shape,
          NVVM::LdStMatrixEltType::B16);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void kvpipe::populateWgmmaToNVVMPatterns(const LLVMTypeConverter &converter,
                                         RewritePatternSet &patterns) {
  patterns.add<WarpgroupMmaOpLowering, WarpgroupWaitOpLowering,
               StoreFragmentOpLowering>(converter);
}
