//===- Modifiers.cpp - score_mod / mask_mod in the generated softmax ------===//

#include "Modifiers.h"
#include "Fragment.h"

#include "kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"
#include "kvpipe/Support/UseWalk.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace kvpipe;

/// The block arguments of the regions: score_mod's are (score, b, h, q, kv),
/// mask_mod's (b, h, q, kv).
static unsigned firstIndexArgument(Region &region) {
  return region.getNumArguments() == 5 ? 1 : 0;
}

/// `v` (an integer) as `type`: sign-extended, truncated or as it is.
static Value castInteger(ImplicitLocOpBuilder &b, Value v, Type type,
                         bool isUnsigned) {
  unsigned from = v.getType().getIntOrFloatBitWidth();
  unsigned to = type.getIntOrFloatBitWidth();
  if (from == to)
    return v;
  if (from > to)
    return arith::TruncIOp::create(b, type, v);
  if (isUnsigned)
    return arith::ExtUIOp::create(b, type, v);
  return arith::ExtSIOp::create(b, type, v);
}

/// Integers of magnitude at most 2^24 are exact in f32.
constexpr int64_t kExactInF32 = int64_t(1) << 24;
/// The longest sequence a kernel with modifiers takes (its ABI: the runtime
/// refuses longer ones), so that the index arithmetic of the regions is
/// exact in f32 (exactFloat).
constexpr int64_t kMaxModifierSequence = int64_t(1) << 23;

namespace {
/// An integer value of the region computed in f32 instead: `base + offset`
/// (base null: the constant `offset`), whose every value lies in
/// [lo, hi]. The offset stays a constant until an op needs the sum, so that
/// `q - kv` with kv = first column + c is one subtraction per row (the
/// same for all the row's elements: CSE keeps one) and one addition of an
/// immediate per element.
struct ExactFloat {
  Value base;
  int64_t offset = 0;
  int64_t lo = 0, hi = 0;

  /// The value itself: base + offset, an f32.
  Value materialize(ImplicitLocOpBuilder &b) const {
    Value constant = offset != 0 || !base
                         ? Value(arith::ConstantFloatOp::create(
                               b, b.getF32Type(),
                               APFloat(static_cast<float>(offset))))
                         : Value();
    if (!base)
      return constant;
    return constant ? Value(arith::AddFOp::create(b, base, constant)) : base;
  }
};
} // namespace

/// The float form of the region's integer value `v` (an index expression),
/// if every intermediate value is an integer of magnitude at most 2^24 (so
/// that f32 arithmetic on it is exact, and the result is what the integer
/// ops and the conversion give). Leaves: constants and the index block
/// arguments, which the kernel ABI bounds (query and key indices below
/// 2^24: docs/modifiers.md; batch and head indices are grid indices, below
/// 2^16). `map` binds the region's values to the inlined ones; `floats`
/// memoises. Null when `v` is anything else (an aux read, a division, ...).
static std::optional<ExactFloat>
exactFloat(ImplicitLocOpBuilder &b, Value v, const IRMapping &map,
           unsigned firstIndex, DenseMap<Value, ExactFloat> &floats) {
  if (auto found = floats.find(v); found != floats.end())
    return found->second;
  Type f32 = b.getF32Type();
  auto constant = [&](int64_t k) -> Value {
    return arith::ConstantFloatOp::create(b, cast<FloatType>(f32),
                                          APFloat(static_cast<float>(k)));
  };
  auto exact = [](const ExactFloat &x) {
    return -kExactInF32 <= x.lo && x.hi <= kExactInF32 &&
           -kExactInF32 <= x.lo - x.offset && x.hi - x.offset <= kExactInF32;
  };
  std::optional<ExactFloat> result;
  APInt k;
  if (matchPattern(v, m_ConstantInt(&k))) {
    if (k.getSignificantBits() <= 32)
      result = ExactFloat{Value(), k.getSExtValue(), k.getSExtValue(),
                          k.getSExtValue()};
  } else if (auto arg = dyn_cast<BlockArgument>(v)) {
    unsigned number = arg.getArgNumber();
    if (number >= firstIndex) {
      // Batch and head, then query and key (below kMaxModifierSequence, and
      // in the padding of the last block up to 255 past it).
      int64_t hi = number < firstIndex + 2 ? (1 << 16) - 1
                                           : kMaxModifierSequence + 255;
      Value inlined = map.lookup(arg);
      int64_t offset = 0;
      // A key is the thread's first column plus a constant: keep the
      // constant apart.
      if (auto add = inlined.getDefiningOp<arith::AddIOp>())
        if (matchPattern(add.getRhs(), m_ConstantInt(&k))) {
          offset = k.getSExtValue();
          inlined = add.getLhs();
        }
      result = ExactFloat{arith::SIToFPOp::create(b, f32, inlined), offset, 0,
                          hi};
    }
  } else if (Operation *op = v.getDefiningOp()) {
    auto operand = [&](unsigned i) {
      return exactFloat(b, op->getOperand(i), map, firstIndex, floats);
    };
    if (isa<arith::IndexCastOp, arith::IndexCastUIOp>(op)) {
      result = operand(0);
    } else if (isa<arith::AddIOp, arith::SubIOp>(op)) {
      std::optional<ExactFloat> x = operand(0), y = operand(1);
      if (x && y) {
        bool add = isa<arith::AddIOp>(op);
        Value base;
        if (x->base && y->base)
          base = add ? Value(arith::AddFOp::create(b, x->base, y->base))
                     : Value(arith::SubFOp::create(b, x->base, y->base));
        else if (x->base)
          base = x->base;
        else if (y->base)
          base = add ? y->base : Value(arith::NegFOp::create(b, y->base));
        result = add ? ExactFloat{base, x->offset + y->offset, x->lo + y->lo,
                                  x->hi + y->hi}
                     : ExactFloat{base, x->offset - y->offset, x->lo - y->hi,
                                  x->hi - y->lo};
      }
    } else if (isa<arith::MulIOp>(op)) {
      std::optional<ExactFloat> x = operand(0), y = operand(1);
      if (x && y && !x->base)
        std::swap(x, y);
      if (x && y && !y->base && std::abs(y->offset) <= kExactInF32) {
        int64_t c = y->offset;
        Value base =
            x->base ? Value(arith::MulFOp::create(b, x->base, constant(c)))
                    : Value();
        result = ExactFloat{base, x->offset * c, std::min(x->lo * c, x->hi * c),
                            std::max(x->lo * c, x->hi * c)};
      }
    } else if (isa<arith::MaxSIOp, arith::MinSIOp>(op)) {
      // The larger (smaller) of two exact integers is exact either way: a
      // clamp min(max(d, lo), hi); the Python tracer's |d| is max(d, 0 - d),
      // taken as |.| (a free operand modifier in SASS).
      // Whether `minus` is 0 - `value`.
      auto negated = [](Value value, Value minus) {
        auto sub = minus.getDefiningOp<arith::SubIOp>();
        return sub && sub.getRhs() == value &&
               matchPattern(sub.getLhs(), m_Zero());
      };
      Value lhs = op->getOperand(0), rhs = op->getOperand(1);
      if (isa<arith::MaxSIOp>(op) && (negated(lhs, rhs) || negated(rhs, lhs))) {
        Value d = negated(lhs, rhs) ? lhs : rhs;
        if (std::optional<ExactFloat> x =
                exactFloat(b, d, map, firstIndex, floats);
            x && exact(*x)) {
          int64_t lo = x->lo >= 0 ? x->lo : (x->hi <= 0 ? -x->hi : 0);
          result = ExactFloat{math::AbsFOp::create(b, x->materialize(b)), 0,
                              lo, std::max(std::abs(x->lo), std::abs(x->hi))};
        }
      }
      std::optional<ExactFloat> x = result ? std::nullopt : operand(0);
      std::optional<ExactFloat> y = result ? std::nullopt : operand(1);
      if (x && y && exact(*x) && exact(*y)) {
        bool max = isa<arith::MaxSIOp>(op);
        Value base = max ? Value(arith::MaximumFOp::create(b, x->materialize(b),
                                                           y->materialize(b)))
                         : Value(arith::MinimumFOp::create(b, x->materialize(b),
                                                           y->materialize(b)));
        result = max ? ExactFloat{base, 0, std::max(x->lo, y->lo),
                                  std::max(x->hi, y->hi)}
                     : ExactFloat{base, 0, std::min(x->lo, y->lo),
                                  std::min(x->hi, y->hi)};
      }
    } else if (isa<math::AbsIOp>(op)) {
      if (std::optional<ExactFloat> x = operand(0); x && exact(*x)) {
        int64_t lo = x->lo >= 0 ? x->lo : (x->hi <= 0 ? -x->hi : 0);
        result = ExactFloat{math::AbsFOp::create(b, x->materialize(b)), 0, lo,
                            std::max(std::abs(x->lo), std::abs(x->hi))};
      }
    }
  }
  if (!result || !exact(*result))
    return std::nullopt;
  floats[v] = *result;
  return result;
}

/// Lets a float op of the modifiers (the region's and the ones that feed it)
/// fuse with its neighbours into FMAs, as nvcc's default `--fmad=true`
/// does: without the flag NVPTX emits `mul.rn`/`add.rn`, which ptxas keeps
/// apart (ALiBi's `s * scale - slope * d` was three instructions, not two).
static void allowContraction(Operation *op) {
  if (auto fastmath = dyn_cast<arith::ArithFastMathInterface>(op))
    op->setAttr(fastmath.getFastMathAttrName(),
                arith::FastMathFlagsAttr::get(
                    op->getContext(), fastmath.getFastMathFlagsAttr().getValue() |
                                          arith::FastMathFlags::contract));
}

/// Forward-mode differentiation of one op of a score_mod region: the
/// tangents (d / d score) of `op`'s float result from its operands'
/// (`tangent`: by the region's values, null where zero), built on the
/// cloned values (`map`). Integer and i1 results (indices, comparisons,
/// casts) have none: the score only reaches them through comparisons and
/// conversions whose derivative is zero almost everywhere. The ops are
/// those isDifferentiableScoreModOp accepts (the verifier rejected others
/// that depend on the score).
static void differentiate(ImplicitLocOpBuilder &b, Operation &op,
                          const IRMapping &map,
                          DenseMap<Value, Value> &tangent) {
  if (op.getNumResults() != 1 || !isa<FloatType>(op.getResult(0).getType()))
    return;
  auto t = [&](unsigned i) { return tangent.lookup(op.getOperand(i)); };
  auto v = [&](unsigned i) { return map.lookup(op.getOperand(i)); };
  Value y = map.lookup(op.getResult(0));
  auto f32 = [&](double x) {
    return arith::ConstantFloatOp::create(b, b.getF32Type(),
                                          APFloat(static_cast<float>(x)));
  };
  auto mul = [&](Value x, Value z) -> Value {
    return x && z ? Value(arith::MulFOp::create(b, x, z)) : Value();
  };
  auto add = [&](Value x, Value z) -> Value {
    if (!x || !z)
      return x ? x : z;
    return arith::AddFOp::create(b, x, z);
  };
  auto neg = [&](Value x) -> Value {
    return x ? Value(arith::NegFOp::create(b, x)) : Value();
  };
  auto sub = [&](Value x, Value z) -> Value {
    if (!z)
      return x;
    if (!x)
      return neg(z);
    return arith::SubFOp::create(b, x, z);
  };
  auto orZero = [&](Value x) -> Value { return x ? x : f32(0.0); };
  bool any = llvm::any_of(op.getOperands(),
                          [&](Value operand) { return tangent.count(operand); });
  if (!any)
    return;
  Value result;
  if (isa<arith::AddFOp>(op))
    result = add(t(0), t(1));
  else if (isa<arith::SubFOp>(op))
    result = sub(t(0), t(1));
  else if (isa<arith::NegFOp>(op))
    result = neg(t(0));
  else if (isa<arith::MulFOp>(op))
    result = add(mul(t(0), v(1)), mul(v(0), t(1)));
  else if (isa<arith::DivFOp>(op))
    // d(a / c) = (da - (a / c) dc) / c.
    result = arith::DivFOp::create(b, orZero(sub(t(0), mul(y, t(1)))), v(1));
  else if (isa<math::FmaOp>(op))
    result = add(add(mul(t(0), v(1)), mul(v(0), t(1))), t(2));
  else if (isa<math::TanhOp>(op))
    // d tanh(a) = (1 - tanh(a)^2) da, from the value computed (the
    // approximate one where the region allows it, as FA3's soft-cap).
    result = mul(arith::SubFOp::create(b, f32(1.0), arith::MulFOp::create(b, y, y)),
                 t(0));
  else if (isa<math::ExpOp>(op))
    result = mul(y, t(0));
  else if (isa<math::Exp2Op>(op))
    result = mul(arith::MulFOp::create(b, y, f32(M_LN2)), t(0));
  else if (isa<math::LogOp>(op))
    result = arith::DivFOp::create(b, t(0), v(0));
  else if (isa<math::Log2Op>(op))
    result = arith::DivFOp::create(b, t(0),
                                   arith::MulFOp::create(b, v(0), f32(M_LN2)));
  else if (isa<math::SqrtOp>(op))
    result = arith::DivFOp::create(
        b, t(0), arith::MulFOp::create(b, y, f32(2.0)));
  else if (isa<math::AbsFOp>(op))
    result = arith::SelectOp::create(
        b,
        arith::CmpFOp::create(b, arith::CmpFPredicate::OLT, v(0), f32(0.0)),
        neg(t(0)), t(0));
  else if (isa<arith::SelectOp>(op))
    result = arith::SelectOp::create(b, v(0), orZero(t(1)), orZero(t(2)));
  else if (isa<arith::MaximumFOp, arith::MaxNumFOp, arith::MinimumFOp,
               arith::MinNumFOp>(op)) {
    // The derivative of the operand chosen (the first on ties).
    bool max = isa<arith::MaximumFOp, arith::MaxNumFOp>(op);
    Value first = arith::CmpFOp::create(
        b, max ? arith::CmpFPredicate::OGE : arith::CmpFPredicate::OLE, v(0),
        v(1));
    result = arith::SelectOp::create(b, first, orZero(t(0)), orZero(t(1)));
  } else
    llvm_unreachable("the verifier rejects score_mod ops it cannot "
                     "differentiate");
  if (result)
    tangent[op.getResult(0)] = result;
}

/// Clones `region`'s block with its arguments bound to `args`, an aux read
/// becoming an invariant global load of its tensor; returns the yielded
/// value. The region's `index` values become i32 (`args`' indices are
/// i32): 64-bit index arithmetic per score element costs registers the
/// softmax does not have (ALiBi spilled at head dim 128), and indices and
/// flat offsets into the auxiliary tensors fit in 31 bits. With `derivative`
/// (a score_mod), also the yield's derivative with respect to the score
/// (args[0]), built op by op next to the values (differentiate), or with
/// `withRespectTo` (an aux read of the region) to the value it reads.
static Value inlineRegion(ImplicitLocOpBuilder &b, Region &region,
                          ValueRange args, const ModifierIndices &at,
                          Value *derivative = nullptr,
                          IRMapping *inlined = nullptr,
                          Operation *withRespectTo = nullptr,
                          const IRMapping *given = nullptr) {
  Block &block = region.front();
  IRMapping map;
  map.map(block.getArguments(), args);
  // Values the caller computes itself (ScoreModScaling's input product):
  // their ops are not inlined.
  if (given)
    for (auto [value, replacement] : given->getValueMap())
      map.map(value, replacement);
  DenseMap<Value, Value> tangent;
  auto one = [&] {
    return arith::ConstantFloatOp::create(b, b.getF32Type(), APFloat(1.0f));
  };
  if (derivative && !withRespectTo)
    tangent[block.getArgument(0)] = one();
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), 1);
  Type i32 = b.getI32Type();
  auto narrow = [&](Type type) { return type.isIndex() ? i32 : type; };
  DenseMap<Value, ExactFloat> floats;
  for (Operation &op : block.without_terminator()) {
    if (given && op.getNumResults() == 1 && given->contains(op.getResult(0)))
      continue;
    // An index expression converted to f32 is computed in f32 where that is
    // exact: per score element, integer subtraction, |.|, clamping and the
    // conversion (ALiBi's distance) cost more issue slots than the softmax.
    if (isa<arith::SIToFPOp>(op) && op.getResult(0).getType().isF32())
      if (std::optional<ExactFloat> f =
              exactFloat(b, op.getOperand(0), map, firstIndexArgument(region),
                         floats)) {
        map.map(op.getResult(0), f->materialize(b));
        continue;
      }
    // (The conversion's operand is an integer: it has no tangent.)
    if (auto constant = dyn_cast<arith::ConstantIndexOp>(op)) {
      map.map(constant.getResult(),
              arith::ConstantIntOp::create(b, constant.value(), 32));
    } else if (isa<arith::IndexCastOp, arith::IndexCastUIOp>(op)) {
      map.map(op.getResult(0),
              castInteger(b, map.lookup(op.getOperand(0)),
                          narrow(op.getResult(0).getType()),
                          isa<arith::IndexCastUIOp>(op)));
    } else if (auto load = dyn_cast<AuxLoadOp>(op)) {
      Type type = at.auxTypes[load.getAux()];
      Value offset = arith::ExtSIOp::create(b, b.getI64Type(),
                                            map.lookup(load.getIndex()));
      Value address = LLVM::GEPOp::create(b, ptrType, type, at.aux[load.getAux()],
                                          ValueRange{offset});
      // The tensors are read-only for the kernel's lifetime: ld.global.nc.
      map.map(load.getResult(),
              LLVM::LoadOp::create(b, type, address, /*alignment=*/4,
                                   /*isVolatile=*/false, /*isNonTemporal=*/false,
                                   /*isInvariant=*/true));
    } else if (auto tanh = dyn_cast<math::TanhOp>(op);
               tanh && tanh.getType().isF32() &&
               arith::bitEnumContainsAll(tanh.getFastmath(),
                                         arith::FastMathFlags::afn)) {
      // An approximate tanh is allowed: the SFU's tanh.approx.f32 (one
      // instruction, max relative error 2^-10.99) instead of libdevice's
      // tanhf, as FA3's soft-cap.
      auto approx = LLVM::InlineAsmOp::create(
          b, b.getF32Type(), ValueRange{map.lookup(tanh.getOperand())},
          "tanh.approx.f32 $0, $1;", "=f,f", /*has_side_effects=*/false,
          /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
          /*asm_dialect=*/nullptr, /*operand_attrs=*/nullptr);
      map.map(tanh.getResult(), approx.getRes());
    } else {
      Operation *clone = b.clone(op, map);
      for (OpResult result : clone->getResults())
        result.setType(narrow(result.getType()));
      allowContraction(clone);
    }
    if (derivative)
      differentiate(b, op, map, tangent);
    if (derivative && &op == withRespectTo)
      tangent[op.getResult(0)] = one();
  }
  Value yielded = cast<YieldOp>(block.getTerminator()).getValues().front();
  if (derivative) {
    *derivative = tangent.lookup(yielded);
    // A score_mod that ignores the score: its derivative is 0.
    if (!*derivative)
      *derivative = arith::ConstantFloatOp::create(b, b.getF32Type(),
                                                   APFloat(0.0f));
  }
  if (inlined)
    *inlined = map;
  return map.lookup(yielded);
}

/// Whether the region's block argument `number` flows into the index of an
/// aux read (through any ops).
static bool reachesAuxIndex(Region &region, unsigned number) {
  return findUseTransitively(region.getArgument(number), [](OpOperand &use) {
    auto load = dyn_cast<AuxLoadOp>(use.getOwner());
    return load && use.get() == load.getIndex() ? UseStep::Stop
                                                : UseStep::Follow;
  });
}

/// Calls `body` with the (query, key) indices of each element of the
/// fragment, each clamped in range where the region reads auxiliary
/// tensors at an index computed from it. The fragment's rows are queries
/// and its columns keys, or the other way round when `at.transposed` (the
/// backward's S^T).
static SmallVector<Value>
forEachElement(ImplicitLocOpBuilder &b, Region &region,
               const ModifierIndices &at,
               function_ref<Value(int64_t, Value, Value)> body) {
  unsigned first = firstIndexArgument(region);
  bool clampQueries = reachesAuxIndex(region, first + 2);
  bool clampKeys = reachesAuxIndex(region, first + 3);
  bool clampRows = at.transposed ? clampKeys : clampQueries;
  bool clampColumns = at.transposed ? clampQueries : clampKeys;
  auto toI32 = [&](Value v) {
    return arith::IndexCastOp::create(b, b.getI32Type(), v);
  };
  auto i32 = [&](int64_t v) { return arith::ConstantIntOp::create(b, v, 32); };
  Value rows[2] = {toI32(at.row0), toI32(at.row1)};
  Value firstColumn = toI32(at.firstColumn);
  Value rowEnd = at.transposed ? at.seqKV : at.seqQ;
  Value columnEnd = at.transposed ? at.seqQ : at.seqKV;
  Value lastColumn;
  if (clampRows) {
    Value lastRow = arith::SubIOp::create(b, toI32(rowEnd), i32(1));
    for (Value &row : rows)
      row = arith::MinSIOp::create(b, row, lastRow);
  }
  if (clampColumns)
    lastColumn = arith::SubIOp::create(b, toI32(columnEnd), i32(1));
  SmallVector<Value> results;
  for (int64_t i = 0; i < at.numElements; ++i) {
    Value column = arith::AddIOp::create(
        b, firstColumn, i32(AccumulatorLayout::columnOffset(i)));
    if (clampColumns)
      column = arith::MinSIOp::create(b, column, lastColumn);
    Value row = rows[AccumulatorLayout::rowHalf(i)];
    results.push_back(at.transposed ? body(i, column, row)
                                    : body(i, row, column));
  }
  return results;
}

/// The query head of element `i` of the fragment: its row's, where the
/// rows are heads of their own (pack_gqa), else the tile's.
static Value elementHead(const ModifierIndices &at, int64_t i) {
  if (at.head1 && !at.transposed && AccumulatorLayout::rowHalf(i) == 1)
    return at.head1;
  return at.head;
}

/// A region's block arguments for one element: the score (a score_mod's;
/// null for a mask_mod), the batch and `head` as i32, the query and the
/// key.
static SmallVector<Value, 5> regionArguments(ImplicitLocOpBuilder &b,
                                             const ModifierIndices &at,
                                             Value head, Value score,
                                             Value query, Value key) {
  SmallVector<Value, 5> args;
  if (score)
    args.push_back(score);
  args.append({arith::IndexCastOp::create(b, b.getI32Type(), at.batch),
               arith::IndexCastOp::create(b, b.getI32Type(), head), query,
               key});
  return args;
}

/// Which of the fragment's indices an aux read's index is computed from:
/// an index that only the batch and head determine is the same for the
/// whole fragment, one that only the row (column) determines for the
/// thread's row half (column), whatever the other index.
enum class ReadIndexScope { uniform, perRow, perColumn, perElement };

static ReadIndexScope getReadIndexScope(Region &region, AuxLoadOp read,
                                        bool transposed) {
  unsigned first = firstIndexArgument(region);
  bool query = false, key = false, score = false;
  SmallVector<Value> work = {read.getIndex()};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() != &region.front())
        return ReadIndexScope::perElement; // a nested region's argument
      unsigned n = arg.getArgNumber();
      query |= n == first + 2;
      key |= n == first + 3;
      score |= n < first;
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (!region.isAncestor(def->getParentRegion()))
      continue; // defined above the region: the same for every element
    if (def->getNumRegions() != 0)
      return ReadIndexScope::perElement;
    llvm::append_range(work, def->getOperands());
  }
  bool row = transposed ? key : query;
  bool column = transposed ? query : key;
  if (score || (row && column))
    return ReadIndexScope::perElement;
  if (row)
    return ReadIndexScope::perRow;
  return column ? ReadIndexScope::perColumn : ReadIndexScope::uniform;
}

void kvpipe::buildScoreModAuxGradients(ImplicitLocOpBuilder &b,
                                       Region &region, Value s, Value scale,
                                       const ModifierIndices &at, Value grad,
                                       ArrayRef<Value> gradients) {
  SmallVector<AuxLoadOp> reads;
  region.walk([&](AuxLoadOp load) {
    if (load.getAux() < gradients.size() && gradients[load.getAux()])
      reads.push_back(load);
  });
  if (reads.empty())
    return;
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), 1);
  SmallVector<ReadIndexScope> scopes;
  for (AuxLoadOp read : reads)
    scopes.push_back(getReadIndexScope(region, read, at.transposed));
  auto atomicAdd = [&](Value address, Value value) {
    LLVM::AtomicRMWOp::create(b, LLVM::AtomicBinOp::fadd, address, value,
                              LLVM::AtomicOrdering::monotonic);
  };
  // Per read and element: the contribution (the loss's gradient times the
  // region's derivative with respect to the value read) and the address of
  // the element read; added at once where every element has its own index
  // (keeping them for later would hold two registers per element).
  SmallVector<SmallVector<Value>> contributions(reads.size()),
      addresses(reads.size());
  forEachElement(b, region, at, [&](int64_t i, Value row, Value key) {
    Value scaled = arith::MulFOp::create(
        b, vector::ExtractOp::create(b, s, i), scale);
    Value g = vector::ExtractOp::create(b, grad, i);
    // The region once per read (forward-mode differentiation with respect
    // to that read's value): a region reading one tensor twice gets both
    // contributions.
    for (auto [r, read] : llvm::enumerate(reads)) {
      Value derivative;
      IRMapping inlined;
      inlineRegion(b, region, regionArguments(b, at, elementHead(at, i), scaled, row, key), at,
                   &derivative, &inlined, read);
      Value offset = arith::ExtSIOp::create(b, b.getI64Type(),
                                            inlined.lookup(read.getIndex()));
      Value address = LLVM::GEPOp::create(
          b, ptrType, b.getF32Type(), gradients[read.getAux()],
          ValueRange{offset});
      Value contribution = arith::MulFOp::create(b, g, derivative);
      if (scopes[r] == ReadIndexScope::perElement) {
        atomicAdd(address, contribution);
        continue;
      }
      addresses[r].push_back(address);
      contributions[r].push_back(contribution);
    }
    return Value();
  });

  // Elements that read the same element of a tensor are summed first, in
  // the thread and across the lanes that share the index (shuffles), and
  // one lane adds the sum: a per-head slope would otherwise take one atomic
  // per score, all on one address.
  auto i32 = [&](int64_t v) { return arith::ConstantIntOp::create(b, v, 32); };
  Value lane = arith::IndexCastOp::create(b, b.getI32Type(),
                                          gpu::LaneIdOp::create(b, nullptr));
  auto acrossLanes = [&](Value value, ArrayRef<int32_t> offsets) {
    return reduceAcrossLanes(b, value, vector::CombiningKind::ADD, offsets);
  };
  auto add = [&](Value address, Value value, Value onLane) {
    auto ifOp = scf::IfOp::create(b, onLane, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    atomicAdd(address, value);
  };
  // The lanes whose (lane & mask) is zero add their group's sum.
  auto firstLanes = [&](int32_t mask) {
    return arith::CmpIOp::create(
        b, arith::CmpIPredicate::eq,
        arith::AndIOp::create(b, lane, i32(mask)), i32(0));
  };
  int64_t n = at.numElements;
  for (auto r : llvm::seq(reads.size())) {
    ArrayRef<Value> parts = contributions[r];
    switch (scopes[r]) {
    case ReadIndexScope::perElement:
      break; // added above
    case ReadIndexScope::uniform: {
      Value sum = parts[0];
      for (int64_t i = 1; i < n; ++i)
        sum = arith::AddFOp::create(b, sum, parts[i]);
      sum = acrossLanes(sum, {1, 2, 4, 8, 16});
      add(addresses[r][0], sum, firstLanes(AccumulatorLayout::kWarpSize - 1));
      break;
    }
    case ReadIndexScope::perRow:
      for (int64_t half = 0; half < 2; ++half) {
        Value sum;
        int64_t representative = -1;
        for (int64_t i = 0; i < n; ++i) {
          if (AccumulatorLayout::rowHalf(i) != half)
            continue;
          sum = sum ? arith::AddFOp::create(b, sum, parts[i]) : parts[i];
          if (representative < 0)
            representative = i;
        }
        sum = acrossLanes(sum, AccumulatorLayout::kQuadXorOffsets);
        add(addresses[r][representative], sum,
            firstLanes(AccumulatorLayout::kLanesPerRow - 1));
      }
      break;
    case ReadIndexScope::perColumn:
      // Elements i and i + 2 (i % 4 < 2) share a column, one per row half.
      for (int64_t i = 0; i < n; ++i) {
        if (AccumulatorLayout::rowHalf(i) != 0)
          continue;
        Value sum = acrossLanes(arith::AddFOp::create(b, parts[i], parts[i + 2]),
                                AccumulatorLayout::kColumnXorOffsets);
        add(addresses[r][i], sum,
            firstLanes(AccumulatorLayout::kWarpSize -
                       AccumulatorLayout::kLanesPerRow));
      }
      break;
    }
  }
}

Value kvpipe::buildScoreModInputScale(ImplicitLocOpBuilder &b, Value scale,
                                      const ScoreModScaling &scaling) {
  if (!scaling.input)
    return scale;
  return arith::MulFOp::create(
      b, scale,
      arith::ConstantFloatOp::create(
          b, b.getF32Type(), APFloat(static_cast<float>(scaling.inputFactor))));
}

ScoreModScaling kvpipe::getScoreModScaling(Region &region) {
  ScoreModScaling scaling;
  // A factor is folded in f32, into a product with the runtime scale (the
  // input) or with log2(e) (the output): it must be a normal f32 within a
  // range where those products neither overflow nor flush to 0 where the
  // region's own operations would not.
  auto foldable = [](double factor) {
    return std::isnormal(static_cast<float>(factor)) &&
           std::fabs(factor) <= 1e30 && std::fabs(factor) >= 1e-30;
  };
  auto constantOf = [&](Value v) -> std::optional<double> {
    auto constant = v.getDefiningOp<arith::ConstantFloatOp>();
    if (!constant || constant->getParentRegion() != &region)
      return std::nullopt;
    return constant.value().convertToDouble();
  };
  // The score's only use: `score * c`, `c * score` or `score / c` (the
  // tracer's soft-cap divides), c a finite nonzero constant.
  Value score = region.getArgument(0);
  if (score.hasOneUse()) {
    Operation *user = *score.getUsers().begin();
    std::optional<double> factor;
    if (auto product = dyn_cast<arith::MulFOp>(user))
      factor = constantOf(product.getLhs() == score ? product.getRhs()
                                                    : product.getLhs());
    else if (auto quotient = dyn_cast<arith::DivFOp>(user);
             quotient && quotient.getLhs() == score)
      if ((factor = constantOf(quotient.getRhs())))
        factor = 1.0 / *factor;
    // (1 / c for a division.)
    if (factor && foldable(*factor) &&
        llvm::count(user->getOperands(), score) == 1) {
      scaling.input = user;
      scaling.inputFactor = *factor;
    }
  }
  Block &block = region.front();
  Value yielded = cast<YieldOp>(block.getTerminator()).getValues().front();
  if (auto product = yielded.getDefiningOp<arith::MulFOp>())
    for (auto [factor, operand] : {std::pair{product.getRhs(), product.getLhs()},
                                   std::pair{product.getLhs(), product.getRhs()}})
      // Positive: the row maxima of the operand are the modified scores'
      // over the factor, and the masks' -inf stays -inf; foldable with its
      // exponent scale C log2(e).
      if (std::optional<double> c = constantOf(factor);
          c && *c > 0 && foldable(*c) && foldable(*c * M_LOG2E) &&
          operand != factor &&
          product.getOperation() != scaling.input) {
        scaling.output = product;
        scaling.outputFactor = *c;
        scaling.outputOperand = operand;
        break;
      }
  return scaling;
}

std::optional<ScoreBounds>
kvpipe::getScoreModBounds(Region &region, const ScoreModScaling &scaling) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const ScoreBounds unbounded{-inf, inf};
  DenseMap<Value, ScoreBounds> bounds;
  auto of = [&](Value v) -> ScoreBounds {
    if (auto constant = v.getDefiningOp<arith::ConstantFloatOp>()) {
      double c = constant.value().convertToDouble();
      return std::isfinite(c) ? ScoreBounds{c, c} : unbounded;
    }
    auto it = bounds.find(v);
    return it == bounds.end() ? unbounded : it->second;
  };
  // An endpoint's NaN (inf - inf, 0 * inf) is no bound.
  auto hull = [&](std::initializer_list<double> values) -> ScoreBounds {
    ScoreBounds r{inf, -inf};
    for (double v : values) {
      if (std::isnan(v))
        return unbounded;
      r.low = std::min(r.low, v);
      r.high = std::max(r.high, v);
    }
    return r;
  };
  for (Operation &op : region.front()) {
    if (op.getNumResults() != 1 || !isa<FloatType>(op.getResult(0).getType()))
      continue;
    ScoreBounds r = unbounded;
    auto operand = [&](unsigned i) { return of(op.getOperand(i)); };
    if (isa<arith::AddFOp>(op)) {
      ScoreBounds x = operand(0), y = operand(1);
      r = hull({x.low + y.low, x.high + y.high});
    } else if (isa<arith::SubFOp>(op)) {
      ScoreBounds x = operand(0), y = operand(1);
      r = hull({x.low - y.high, x.high - y.low});
    } else if (isa<arith::MulFOp>(op)) {
      ScoreBounds x = operand(0), y = operand(1);
      r = hull({x.low * y.low, x.low * y.high, x.high * y.low,
                x.high * y.high});
    } else if (isa<arith::DivFOp>(op)) {
      ScoreBounds x = operand(0), y = operand(1);
      if (y.low == y.high && y.low != 0.0)
        r = hull({x.low / y.low, x.high / y.low});
    } else if (isa<arith::NegFOp>(op)) {
      ScoreBounds x = operand(0);
      r = {-x.high, -x.low};
    } else if (isa<math::TanhOp>(op)) {
      ScoreBounds x = operand(0);
      r = {std::tanh(x.low), std::tanh(x.high)};
    } else if (isa<arith::MinimumFOp, arith::MinNumFOp>(op)) {
      ScoreBounds x = operand(0), y = operand(1);
      r = {std::min(x.low, y.low), std::min(x.high, y.high)};
    } else if (isa<arith::MaximumFOp, arith::MaxNumFOp>(op)) {
      ScoreBounds x = operand(0), y = operand(1);
      r = {std::max(x.low, y.low), std::max(x.high, y.high)};
    } else if (isa<arith::SelectOp>(op)) {
      ScoreBounds x = operand(1), y = operand(2);
      r = {std::min(x.low, y.low), std::max(x.high, y.high)};
    } else {
      continue;
    }
    bounds[op.getResult(0)] = r;
  }
  Value held = scaling.output
                   ? scaling.outputOperand
                   : cast<YieldOp>(region.front().getTerminator())
                         .getValues()
                         .front();
  ScoreBounds r = of(held);
  if (!std::isfinite(r.low) || !std::isfinite(r.high))
    return std::nullopt;
  return r;
}

Value kvpipe::buildScoreMod(ImplicitLocOpBuilder &b, Region &region, Value s,
                            Value scale, const ModifierIndices &at,
                            const ScoreModScaling *scaling) {
  bool foldInput = scaling && scaling->input;
  if (foldInput && scale)
    scale = buildScoreModInputScale(b, scale, *scaling);
  SmallVector<Value> scores = forEachElement(
      b, region, at, [&](int64_t i, Value row, Value key) {
        Value scaled = vector::ExtractOp::create(b, s, i);
        if (scale) {
          scaled = arith::MulFOp::create(b, scaled, scale);
          allowContraction(scaled.getDefiningOp());
        }
        SmallVector<Value, 5> args = regionArguments(b, at, elementHead(at, i), scaled, row, key);
        if (!scaling || (!scaling->input && !scaling->output))
          return inlineRegion(b, region, args, at);
        IRMapping given, inlined;
        if (foldInput)
          given.map(scaling->input->getResult(0), scaled);
        Value result =
            inlineRegion(b, region, args, at, /*derivative=*/nullptr, &inlined,
                         /*withRespectTo=*/nullptr, &given);
        return scaling->output ? inlined.lookup(scaling->outputOperand)
                               : result;
      });
  return vector::FromElementsOp::create(b, s.getType(), scores);
}

/// The values of `region`'s block that depend on any of `args` (through
/// its ops).
static DenseSet<Value> dependents(Region &region, ArrayRef<unsigned> args) {
  DenseSet<Value> set;
  for (unsigned a : args)
    set.insert(region.getArgument(a));
  for (Operation &op : region.front())
    if (llvm::any_of(op.getOperands(), [&](Value v) { return set.count(v); }))
      set.insert(op.result_begin(), op.result_end());
  return set;
}

std::optional<AdditiveScoreMod> kvpipe::getAdditiveScoreMod(Region &region) {
  Block &block = region.front();
  Value yielded = cast<YieldOp>(block.getTerminator()).getValues().front();
  Value score = region.getArgument(0);
  DenseSet<Value> onScore = dependents(region, {0});
  AdditiveScoreMod additive;
  if (auto add = yielded.getDefiningOp<arith::AddFOp>()) {
    additive.bias = add.getLhs() == score ? add.getRhs() : add.getLhs();
    if (add.getLhs() != score && add.getRhs() != score)
      return std::nullopt;
  } else if (auto subtract = yielded.getDefiningOp<arith::SubFOp>()) {
    if (subtract.getLhs() != score)
      return std::nullopt;
    additive.bias = subtract.getRhs();
    additive.subtracted = true;
  } else {
    return std::nullopt;
  }
  if (onScore.count(additive.bias) ||
      additive.bias.getParentRegion() != &region)
    return std::nullopt;
  // A factor of the bias that only the batch and head (and constants and
  // the tensors read at them) determine: the same for every element of a
  // warpgroup's tile.
  unsigned first = firstIndexArgument(region);
  DenseSet<Value> onPosition = dependents(region, {first + 2, first + 3});
  if (auto product = additive.bias.getDefiningOp<arith::MulFOp>())
    for (Value factor : {product.getLhs(), product.getRhs()})
      if (!onPosition.count(factor) && !onScore.count(factor)) {
        additive.uniformFactor = factor;
        additive.otherFactor = factor == product.getLhs() ? product.getRhs()
                                                          : product.getLhs();
        break;
      }
  return additive;
}

Value kvpipe::buildAdditiveScoreMod(ImplicitLocOpBuilder &b, Region &region,
                                    const AdditiveScoreMod &additive, Value s,
                                    Value inverseScale,
                                    const ModifierIndices &at) {
  SmallVector<Value> scores = forEachElement(
      b, region, at, [&](int64_t i, Value row, Value key) {
        Value raw = vector::ExtractOp::create(b, s, i);
        IRMapping inlined;
        // The region's own addition is dead in the result (DCE drops it).
        inlineRegion(b, region, regionArguments(b, at, elementHead(at, i), raw, row, key), at,
                     /*derivative=*/nullptr, &inlined);
        Value factor = inverseScale, other = inlined.lookup(additive.bias);
        if (additive.uniformFactor) {
          // uniform / scale once per tile (CSE merges the elements').
          factor = arith::MulFOp::create(
              b, inlined.lookup(additive.uniformFactor), inverseScale);
          other = inlined.lookup(additive.otherFactor);
        }
        if (additive.subtracted)
          factor = arith::NegFOp::create(b, factor);
        Value term = arith::MulFOp::create(b, other, factor);
        Value sum = arith::AddFOp::create(b, raw, term);
        allowContraction(term.getDefiningOp());
        allowContraction(sum.getDefiningOp());
        return sum;
      });
  return vector::FromElementsOp::create(b, s.getType(), scores);
}

/// `v`'s coefficients of the query and the key, if `v` is an index
/// expression `alpha * q + beta * kv + u` with constant alpha and beta and a
/// `u` that depends on neither (nor on the score).
static std::optional<std::pair<int64_t, int64_t>>
positionCoefficients(Region &region, Value v,
                     const DenseSet<Value> &onPosition) {
  if (!onPosition.count(v))
    return std::pair<int64_t, int64_t>{0, 0};
  unsigned first = firstIndexArgument(region);
  if (v == region.getArgument(first + 2))
    return std::pair<int64_t, int64_t>{1, 0};
  if (v == region.getArgument(first + 3))
    return std::pair<int64_t, int64_t>{0, 1};
  Operation *op = v.getDefiningOp();
  if (!op || op->getParentRegion() != &region)
    return std::nullopt;
  if (isa<arith::IndexCastOp>(op))
    return positionCoefficients(region, op->getOperand(0), onPosition);
  if (!isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(op)) {
    // Anything of uniform values is uniform (a read at `q - q`: the
    // region's way to index a tensor by a constant).
    if (op->getNumResults() == 1 &&
        (isMemoryEffectFree(op) || isa<AuxLoadOp>(op)) &&
        llvm::all_of(op->getOperands(), [&](Value operand) {
          auto c = positionCoefficients(region, operand, onPosition);
          return c && c->first == 0 && c->second == 0;
        }))
      return std::pair<int64_t, int64_t>{0, 0};
    return std::nullopt;
  }
  auto lhs = positionCoefficients(region, op->getOperand(0), onPosition);
  auto rhs = positionCoefficients(region, op->getOperand(1), onPosition);
  if (!lhs || !rhs)
    return std::nullopt;
  if (isa<arith::AddIOp>(op))
    return std::pair{lhs->first + rhs->first, lhs->second + rhs->second};
  if (isa<arith::SubIOp>(op))
    return std::pair{lhs->first - rhs->first, lhs->second - rhs->second};
  // A product: by a constant only.
  APInt k;
  Value other = op->getOperand(1);
  std::pair<int64_t, int64_t> scaled = *lhs;
  if (!matchPattern(other, m_ConstantInt(&k))) {
    other = op->getOperand(0);
    scaled = *rhs;
    if (!matchPattern(other, m_ConstantInt(&k)))
      return std::nullopt;
  }
  int64_t factor = k.getSExtValue();
  return std::pair{scaled.first * factor, scaled.second * factor};
}

std::optional<SeparableBias> kvpipe::getSeparableBias(Region &region) {
  std::optional<AdditiveScoreMod> additive = getAdditiveScoreMod(region);
  if (!additive || !additive->uniformFactor)
    return std::nullopt;
  // other = sitofp(|d|), |d| = math.absi(d) or max(d, 0 - d) (the
  // tracer's abs of an index), through integer casts.
  auto convert = additive->otherFactor.getDefiningOp<arith::SIToFPOp>();
  if (!convert)
    return std::nullopt;
  Value magnitude = convert.getIn();
  while (auto cast = magnitude.getDefiningOp<arith::IndexCastOp>())
    magnitude = cast.getIn();
  if (!magnitude.getType().isIndex())
    return std::nullopt;
  auto negationOf = [](Value negated, Value v) {
    auto subtract = negated.getDefiningOp<arith::SubIOp>();
    return subtract && subtract.getRhs() == v &&
           matchPattern(subtract.getLhs(), m_Zero());
  };
  Value d;
  if (auto abs = magnitude.getDefiningOp<math::AbsIOp>()) {
    d = abs.getOperand();
  } else if (auto max = magnitude.getDefiningOp<arith::MaxSIOp>()) {
    if (negationOf(max.getRhs(), max.getLhs()))
      d = max.getLhs();
    else if (negationOf(max.getLhs(), max.getRhs()))
      d = max.getRhs();
  }
  if (!d)
    return std::nullopt;
  unsigned first = firstIndexArgument(region);
  DenseSet<Value> onPosition = dependents(region, {0, first + 2, first + 3});
  std::optional<std::pair<int64_t, int64_t>> coefficients =
      positionCoefficients(region, d, onPosition);
  // (Without a key term the bias is per row: nothing to separate.)
  if (!coefficients || coefficients->second == 0)
    return std::nullopt;
  return SeparableBias{*additive, d, coefficients->first,
                       coefficients->second};
}

/// The region inlined at (`query`, `key`) (index values), its result dead
/// (DCE drops what only it needs): the mapping of its values.
static IRMapping inlineSeparableBiasAt(ImplicitLocOpBuilder &b, Region &region,
                                       const ModifierIndices &at, Value query,
                                       Value key) {
  IRMapping inlined;
  auto toI32 = [&](Value v) {
    return arith::IndexCastOp::create(b, b.getI32Type(), v);
  };
  Value zero = arith::ConstantFloatOp::create(b, b.getF32Type(),
                                              APFloat(0.0f));
  inlineRegion(b, region,
               regionArguments(b, at, at.head, zero, toI32(query), toI32(key)), at,
               /*derivative=*/nullptr, &inlined);
  return inlined;
}

std::pair<Value, Value>
kvpipe::buildSeparableBiasAt(ImplicitLocOpBuilder &b, Region &region,
                             const SeparableBias &bias, Value inverseScale,
                             const ModifierIndices &at, Value query,
                             Value key) {
  IRMapping inlined = inlineSeparableBiasAt(b, region, at, query, key);
  Value factor = arith::MulFOp::create(
      b, inlined.lookup(bias.additive.uniformFactor), inverseScale);
  if (bias.additive.subtracted)
    factor = arith::NegFOp::create(b, factor);
  return {factor, inlined.lookup(bias.distance)};
}

Value kvpipe::buildSeparableDistanceAt(ImplicitLocOpBuilder &b, Region &region,
                                       const SeparableBias &bias,
                                       const ModifierIndices &at, Value query,
                                       Value key) {
  return inlineSeparableBiasAt(b, region, at, query, key)
      .lookup(bias.distance);
}

Value kvpipe::buildColumnOffsetTerm(ImplicitLocOpBuilder &b, Value s,
                                    Value factor) {
  auto type = cast<VectorType>(s.getType());
  SmallVector<Value> sums;
  for (int64_t i = 0; i < type.getNumElements(); ++i) {
    Value element = vector::ExtractOp::create(b, s, i);
    int64_t column = AccumulatorLayout::columnOffset(i);
    if (column == 0) {
      sums.push_back(element);
      continue;
    }
    Value term = arith::MulFOp::create(
        b, factor,
        arith::ConstantFloatOp::create(b, b.getF32Type(),
                                       APFloat(static_cast<float>(column))));
    Value sum = arith::AddFOp::create(b, element, term);
    allowContraction(term.getDefiningOp());
    allowContraction(sum.getDefiningOp());
    sums.push_back(sum);
  }
  return vector::FromElementsOp::create(b, type, sums);
}

std::pair<Value, Value>
kvpipe::buildScoreModWithDerivative(ImplicitLocOpBuilder &b, Region &region,
                                    Value s, Value scale,
                                    const ModifierIndices &at) {
  SmallVector<Value> derivatives;
  SmallVector<Value> scores = forEachElement(
      b, region, at, [&](int64_t i, Value row, Value key) {
        Value scaled = arith::MulFOp::create(
            b, vector::ExtractOp::create(b, s, i), scale);
        allowContraction(scaled.getDefiningOp());
        Value derivative;
        Value value = inlineRegion(
            b, region, regionArguments(b, at, elementHead(at, i), scaled, row, key), at, &derivative);
        derivatives.push_back(derivative);
        return value;
      });
  Value values = vector::FromElementsOp::create(b, s.getType(), scores);
  // A score_mod that adds to the score (ALiBi, biases) has the derivative
  // 1 everywhere: no fragment of ones to multiply by.
  if (llvm::all_of(derivatives, [](Value d) {
        return matchPattern(d, m_OneFloat());
      }))
    return {values, Value()};
  return {values, vector::FromElementsOp::create(b, s.getType(), derivatives)};
}

Value kvpipe::buildMaskModKeep(ImplicitLocOpBuilder &b, Region &region,
                               const ModifierIndices &at) {
  SmallVector<Value> kept = forEachElement(
      b, region, at, [&](int64_t i, Value row, Value key) {
        return inlineRegion(b, region,
                            regionArguments(b, at, elementHead(at, i), Value(), row, key), at);
      });
  return vector::FromElementsOp::create(
      b, VectorType::get({at.numElements}, b.getI1Type()), kept);
}

Value kvpipe::buildMaskMod(ImplicitLocOpBuilder &b, Region &region, Value s,
                           const ModifierIndices &at) {
  Value keep = buildMaskModKeep(b, region, at);
  Value negInf = arith::ConstantFloatOp::create(
      b, b.getF32Type(), APFloat(static_cast<float>(-INFINITY)));
  return arith::SelectOp::create(
      b, keep, s, vector::BroadcastOp::create(b, s.getType(), negInf));
}

//===----------------------------------------------------------------------===//
// MaskModShape
//===----------------------------------------------------------------------===//

MaskModShape::MaskModShape(Region &region) : block(&region.front()) {
  root = formula(cast<YieldOp>(block->getTerminator()).getValues().front());
}

StringRef MaskModShape::summary() const {
  if (nodes[root].kind == Kind::Unknown)
    return "unknown";
  return unknownOps.empty() ? "proven" : "partial";
}

unsigned MaskModShape::add(Node node) {
  nodes.push_back(std::move(node));
  return nodes.size() - 1;
}

std::optional<MaskModShape::Linear> MaskModShape::linear(Value v) const {
  unsigned first = firstIndexArgument(*block->getParent());
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (arg.getOwner() != block)
      return std::nullopt;
    if (arg.getArgNumber() == first + 2)
      return Linear{1, 0, 0};
    if (arg.getArgNumber() == first + 3)
      return Linear{0, 1, 0};
    return std::nullopt; // batch or head
  }
  APInt constant;
  if (matchPattern(v, m_ConstantInt(&constant)))
    return Linear{0, 0, constant.getSExtValue()};
  Operation *op = v.getDefiningOp();
  if (!op || op->getNumOperands() != 2)
    return std::nullopt;
  std::optional<Linear> lhs = linear(op->getOperand(0));
  std::optional<Linear> rhs = linear(op->getOperand(1));
  if (!lhs || !rhs)
    return std::nullopt;
  if (isa<arith::AddIOp>(op))
    return Linear{lhs->q + rhs->q, lhs->kv + rhs->kv,
                  lhs->constant + rhs->constant};
  if (isa<arith::SubIOp>(op))
    return Linear{lhs->q - rhs->q, lhs->kv - rhs->kv,
                  lhs->constant - rhs->constant};
  if (isa<arith::MulIOp>(op)) {
    // One side must be a constant.
    if (lhs->q == 0 && lhs->kv == 0)
      std::swap(lhs, rhs);
    if (rhs->q != 0 || rhs->kv != 0)
      return std::nullopt;
    int64_t k = rhs->constant;
    return Linear{lhs->q * k, lhs->kv * k, lhs->constant * k};
  }
  return std::nullopt;
}

unsigned MaskModShape::formula(Value v) {
  auto unknown = [&]() {
    if (Operation *op = v.getDefiningOp())
      unknownOps.push_back(op);
    return add({Kind::Unknown, {}, {}});
  };
  APInt constant;
  if (matchPattern(v, m_ConstantInt(&constant)))
    return add({constant.isZero() ? Kind::False : Kind::True, {}, {}});
  Operation *op = v.getDefiningOp();
  if (!op)
    return unknown();
  if (isa<arith::AndIOp, arith::OrIOp>(op)) {
    unsigned lhs = formula(op->getOperand(0)), rhs = formula(op->getOperand(1));
    return add({isa<arith::AndIOp>(op) ? Kind::And : Kind::Or, {}, {lhs, rhs}});
  }
  if (isa<arith::XOrIOp>(op)) {
    for (int side : {0, 1})
      if (matchPattern(op->getOperand(side), m_One()))
        return add({Kind::Not, {}, {formula(op->getOperand(1 - side))}});
    return unknown();
  }
  auto cmp = dyn_cast<arith::CmpIOp>(op);
  if (!cmp)
    return unknown();
  std::optional<Linear> a = linear(cmp.getLhs()), c = linear(cmp.getRhs());
  if (!a || !c)
    return unknown();
  auto diff = [](Linear x, Linear y, int64_t plus) {
    return Linear{x.q - y.q, x.kv - y.kv, x.constant - y.constant + plus};
  };
  using P = arith::CmpIPredicate;
  P pred = cmp.getPredicate();
  // Indices are non-negative: a comparison of forms with non-negative
  // coefficients and constants is the same signed or unsigned.
  auto nonNegative = [](Linear x) {
    return x.q >= 0 && x.kv >= 0 && x.constant >= 0;
  };
  if (nonNegative(*a) && nonNegative(*c)) {
    switch (pred) {
    case P::ult: pred = P::slt; break;
    case P::ule: pred = P::sle; break;
    case P::ugt: pred = P::sgt; break;
    case P::uge: pred = P::sge; break;
    default: break;
    }
  }
  // a <u C with a constant C >= 0 (the window idiom `q - kv <u w`):
  // 0 <= a < C.
  auto unsignedBelow = [&](Linear x, Linear bound, int64_t plus) {
    Linear zero;
    return add({Kind::And,
                {},
                {atom(diff(zero, x, 0)), atom(diff(x, bound, plus))}});
  };
  bool cConstant = c->q == 0 && c->kv == 0 && c->constant >= 0;
  bool aConstant = a->q == 0 && a->kv == 0 && a->constant >= 0;
  switch (pred) {
  case P::sle: return atom(diff(*a, *c, 0));
  case P::slt: return atom(diff(*a, *c, 1));
  case P::sge: return atom(diff(*c, *a, 0));
  case P::sgt: return atom(diff(*c, *a, 1));
  case P::eq:
    return add({Kind::And, {}, {atom(diff(*a, *c, 0)), atom(diff(*c, *a, 0))}});
  case P::ne:
    return add({Kind::Or, {}, {atom(diff(*a, *c, 1)), atom(diff(*c, *a, 1))}});
  case P::ult:
    if (cConstant)
      return unsignedBelow(*a, *c, 1);
    return unknown();
  case P::ule:
    if (cConstant)
      return unsignedBelow(*a, *c, 0);
    return unknown();
  case P::ugt:
    if (aConstant)
      return unsignedBelow(*c, *a, 1);
    return unknown();
  case P::uge:
    if (aConstant)
      return unsignedBelow(*c, *a, 0);
    return unknown();
  }
  return unknown();
}

namespace {
/// Signed index arithmetic on possibly-absent values for the runtime bounds.
struct IndexMath {
  ImplicitLocOpBuilder &b;
  Value constant(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value affine(int64_t k, Value x, Value acc) {
    if (k == 0)
      return acc;
    Value term = k == 1 ? x : arith::MulIOp::create(b, x, constant(k));
    return arith::AddIOp::create(b, acc, term);
  }
  Value boolean(bool v) { return arith::ConstantIntOp::create(b, v, 1); }
};
} // namespace

std::pair<Value, Value>
MaskModShape::buildKeptMasked(ImplicitLocOpBuilder &b, unsigned index,
                              Value q0, Value q1, Value k0, Value k1) const {
  IndexMath m{b};
  const Node &node = nodes[index];
  switch (node.kind) {
  case Kind::True:
    return {m.boolean(true), m.boolean(false)};
  case Kind::False:
    return {m.boolean(false), m.boolean(true)};
  case Kind::Unknown:
    return {m.boolean(false), m.boolean(false)};
  case Kind::Atom: {
    // form <= 0 everywhere: its maximum over the box is <= 0; nowhere: its
    // minimum is > 0.
    const Linear &f = node.form;
    Value max = m.affine(f.q, f.q > 0 ? q1 : q0,
                         m.affine(f.kv, f.kv > 0 ? k1 : k0, m.constant(f.constant)));
    Value min = m.affine(f.q, f.q > 0 ? q0 : q1,
                         m.affine(f.kv, f.kv > 0 ? k0 : k1, m.constant(f.constant)));
    return {arith::CmpIOp::create(b, arith::CmpIPredicate::sle, max, m.constant(0)),
            arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, min, m.constant(0))};
  }
  case Kind::Not: {
    auto [kept, masked] = buildKeptMasked(b, node.ops[0], q0, q1, k0, k1);
    return {masked, kept};
  }
  case Kind::And:
  case Kind::Or: {
    auto [kept0, masked0] = buildKeptMasked(b, node.ops[0], q0, q1, k0, k1);
    auto [kept1, masked1] = buildKeptMasked(b, node.ops[1], q0, q1, k0, k1);
    if (node.kind == Kind::And)
      return {arith::AndIOp::create(b, kept0, kept1),
              arith::OrIOp::create(b, masked0, masked1)};
    return {arith::OrIOp::create(b, kept0, kept1),
            arith::AndIOp::create(b, masked0, masked1)};
  }
  }
  llvm_unreachable("covered switch");
}

Value MaskModShape::buildAllKept(ImplicitLocOpBuilder &b, Value q0, Value q1,
                                 Value k0, Value k1) const {
  return buildKeptMasked(b, root, q0, q1, k0, k1).first;
}

std::pair<Value, Value> MaskModShape::buildRange(ImplicitLocOpBuilder &b,
                                                 unsigned index, Value x0,
                                                 Value x1,
                                                 bool ofQueries) const {
  IndexMath m{b};
  const Node &node = nodes[index];
  switch (node.kind) {
  case Kind::Atom: {
    // t y + o x + k <= 0, y the index bounded and x the other one, in
    // [x0, x1]: with t = 1, y <= -(o x + k), at most -k - o * (the x making
    // o x smallest); with t = -1, y >= o x + k, at least k + o * (the x
    // making o x smallest).
    const Linear &f = node.form;
    int64_t t = ofQueries ? f.q : f.kv, o = ofQueries ? f.kv : f.q;
    Value smallest = o > 0 ? x0 : x1;
    if (t == 1)
      return {Value(), m.affine(-o, smallest, m.constant(-f.constant))};
    if (t == -1)
      return {m.affine(o, smallest, m.constant(f.constant)), Value()};
    return {Value(), Value()};
  }
  case Kind::And:
  case Kind::Or: {
    auto [lo0, hi0] = buildRange(b, node.ops[0], x0, x1, ofQueries);
    auto [lo1, hi1] = buildRange(b, node.ops[1], x0, x1, ofQueries);
    if (node.kind == Kind::And) {
      // Both hold: the tighter bound of either.
      Value lo = !lo0 ? lo1 : !lo1 ? lo0 : arith::MaxSIOp::create(b, lo0, lo1);
      Value hi = !hi0 ? hi1 : !hi1 ? hi0 : arith::MinSIOp::create(b, hi0, hi1);
      return {lo, hi};
    }
    // Either holds: bounded only where both are.
    Value lo = lo0 && lo1 ? arith::MinSIOp::create(b, lo0, lo1) : Value();
    Value hi = hi0 && hi1 ? arith::MaxSIOp::create(b, hi0, hi1) : Value();
    return {lo, hi};
  }
  default:
    return {Value(), Value()};
  }
}

std::pair<Value, Value>
MaskModShape::buildKeyRange(ImplicitLocOpBuilder &b, Value q0, Value q1) const {
  return buildRange(b, root, q0, q1, /*ofQueries=*/false);
}

std::pair<Value, Value>
MaskModShape::buildQueryRange(ImplicitLocOpBuilder &b, Value k0,
                              Value k1) const {
  return buildRange(b, root, k0, k1, /*ofQueries=*/true);
}
