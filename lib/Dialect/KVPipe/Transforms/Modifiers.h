//===- Modifiers.h - score_mod / mask_mod in the generated softmax -*- C++ -*-===//
//
// The modifier regions of kvpipe.attention_kernel (docs/modifiers.md) in the
// forward kernel: inlined per element of a wgmma score fragment (each
// thread knows the query row and key column of each element, from
// AccumulatorLayout.h), and the mask_mod's shape as far as the compiler can
// prove it (MaskModShape), which classifies (Q rows, K/V block) tiles as
// fully kept, fully masked or partial and bounds the keys a Q block needs.
// Private to the Transforms library.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_MODIFIERS_H
#define KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_MODIFIERS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Region.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace kvpipe {

/// The indices of a thread's elements of a 64 x 2*numElements score
/// fragment, which the modifier regions take as block arguments.
struct ModifierIndices {
  int64_t numElements;
  mlir::Value batch, head;
  /// The thread's two query rows and the key of its first column (index).
  mlir::Value row0, row1, firstColumn;
  /// Rows and keys at or past these are out of range: a region that reads
  /// auxiliary tensors sees indices clamped below them (their scores are
  /// masked or never stored anyway).
  mlir::Value seqQ, seqKV;
  /// The `aux<i>` pointer parameters and their element types.
  llvm::ArrayRef<mlir::Value> aux;
  llvm::ArrayRef<mlir::Type> auxTypes;
  /// The backward's transposed fragment (S^T): rows are keys and columns
  /// queries, so row0/row1 are the thread's two keys and firstColumn the
  /// query of its first column.
  bool transposed = false;
  /// The query head of row1 where the rows are heads of their own
  /// (pack_gqa: `head` is row0's); null: `head` for both.
  mlir::Value head1 = {};
};

/// The multiplications by constants at the ends of a score_mod that the
/// forward folds into its other multiplications (soft-capping's
/// `cap * tanh(score / cap)` as `tanh(raw * (scale / cap))` exponentiated
/// with `cap * log2(e)`): `input`, the score's only use, a product of the
/// score and a constant or a quotient of the score by one (the score times
/// `inputFactor`); `output`, the yielded value, a product of a positive
/// finite constant (`outputFactor`) and `outputOperand`. Null where the
/// region has no such end.
struct ScoreModScaling {
  mlir::Operation *input = nullptr;
  double inputFactor = 1.0;
  mlir::arith::MulFOp output;
  double outputFactor = 1.0;
  mlir::Value outputOperand;
};
ScoreModScaling getScoreModScaling(mlir::Region &region);

/// What multiplies a raw score to give the score_mod's folded input:
/// `scale` (the attention scale, natural units) times the region's input
/// factor where `scaling` folds one (buildScoreMod's multiplication per
/// score, or once per tile on Q's rows with `prescaled_q`).
mlir::Value buildScoreModInputScale(mlir::ImplicitLocOpBuilder &b,
                                    mlir::Value scale,
                                    const ScoreModScaling &scaling);

/// Bounds of what the score_mod `region` makes of any score, as the forward
/// holds it: the yielded value, or with `scaling.output` its operand (the
/// modified score over `outputFactor`). Interval arithmetic over constants,
/// `addf`, `subf`, `mulf`, `divf` by a constant, `negf`, `tanh`, `select`
/// and the min/max ops (a clamp); nothing where either bound is infinite
/// (the score itself, a value the arithmetic does not follow). A soft-cap's
/// fragment is within [-1, 1].
struct ScoreBounds {
  double low, high;
};
std::optional<ScoreBounds> getScoreModBounds(mlir::Region &region,
                                             const ScoreModScaling &scaling);

/// The score_mod `region` applied to every element of `s` (raw q.k scores)
/// multiplied by `scale`: the fragment of modified scaled scores. With
/// `scaling` (getScoreModScaling), its input product takes the raw score
/// times `scale * inputFactor` (one multiplication per element instead of
/// two) and the fragment holds the output product's operand, the modified
/// score divided by `outputFactor` (which the caller's exponent applies).
/// A null `scale`: `s` already holds the scaled scores (times the input
/// factor with `scaling`: Q's rows pre-scaled, `prescaled_q`).
mlir::Value buildScoreMod(mlir::ImplicitLocOpBuilder &b, mlir::Region &region,
                          mlir::Value s, mlir::Value scale,
                          const ModifierIndices &at,
                          const ScoreModScaling *scaling = nullptr);

/// A score_mod of the form `score + bias` or `score - bias`, `bias` not
/// depending on the score (ALiBi, bias tables): the softmax can then work
/// on the raw scores plus bias / scale, as the plain kernel does on the raw
/// scores (one FMA per element instead of the scale's multiply and the
/// bias's addition), and a bias `uniform * other` whose `uniform` only the
/// batch and head determine (ALiBi's slope) absorbs 1 / scale once per tile.
struct AdditiveScoreMod {
  mlir::Value bias;
  bool subtracted = false;
  mlir::Value uniformFactor, otherFactor;
};
std::optional<AdditiveScoreMod> getAdditiveScoreMod(mlir::Region &region);

/// For an additive score_mod: every element of `s` (raw q.k scores) plus
/// (or minus) its bias times `inverseScale`: the modified scaled scores
/// divided by the scale.
mlir::Value buildAdditiveScoreMod(mlir::ImplicitLocOpBuilder &b,
                                  mlir::Region &region,
                                  const AdditiveScoreMod &additive,
                                  mlir::Value s, mlir::Value inverseScale,
                                  const ModifierIndices &at);

/// An additive score_mod whose bias is `uniform * |d|`, `d` an index
/// expression `alpha * q + beta * kv + u` (constant alpha, beta; u the same
/// for every element of a tile: constants, the batch, the head, reads at
/// them): ALiBi's `-slope * |q - kv + shift|`. In a block of scores where d
/// keeps one sign the bias is linear in q and kv, so the forward splits it
/// into a key term per element (one FMA by a constant column offset) and a
/// row term per row, which the online softmax takes as a shift of the row
/// (buildOnlineSoftmaxStep's rowShift): the per-element |.| and conversion
/// are left to the blocks d crosses 0 in.
struct SeparableBias {
  AdditiveScoreMod additive;
  /// d, in the region.
  mlir::Value distance;
  int64_t queryCoefficient = 0, keyCoefficient = 0;
};
std::optional<SeparableBias> getSeparableBias(mlir::Region &region);

/// The separable bias's factor F (f32: the bias of the raw-score domain is
/// F * |d|, as buildAdditiveScoreMod's `uniform * inverseScale`, negated
/// when subtracted) and d at (`query`, `key`) (index values; i32), for the
/// tile `at` names (batch and head).
std::pair<mlir::Value, mlir::Value>
buildSeparableBiasAt(mlir::ImplicitLocOpBuilder &b, mlir::Region &region,
                     const SeparableBias &bias, mlir::Value inverseScale,
                     const ModifierIndices &at, mlir::Value query,
                     mlir::Value key);

/// The separable bias's d alone at (`query`, `key`) (index values; i32),
/// for the tile `at` names.
mlir::Value buildSeparableDistanceAt(mlir::ImplicitLocOpBuilder &b,
                                     mlir::Region &region,
                                     const SeparableBias &bias,
                                     const ModifierIndices &at,
                                     mlir::Value query, mlir::Value key);

/// `s` (a fragment) plus `factor` times each element's key offset from the
/// thread's first column (AccumulatorLayout::columnOffset): one FMA per
/// element, none at offset 0. The key term of a separable bias.
mlir::Value buildColumnOffsetTerm(mlir::ImplicitLocOpBuilder &b, mlir::Value s,
                                  mlir::Value factor);

/// The score_mod `region` and its derivative with respect to the score,
/// for every element of `s` (raw q.k scores) multiplied by `scale`: the
/// fragment of modified scaled scores and the fragment of d region / d s at
/// each scaled score (forward-mode differentiation of the region's ops, in
/// the same instruction stream: see isDifferentiableScoreModOp for the ops).
/// The verifier has rejected regions it cannot differentiate. The
/// derivative is null where it is the constant 1 everywhere (a region that
/// adds to the score).
std::pair<mlir::Value, mlir::Value>
buildScoreModWithDerivative(mlir::ImplicitLocOpBuilder &b, mlir::Region &region,
                            mlir::Value s, mlir::Value scale,
                            const ModifierIndices &at);

/// The gradients of the auxiliary tensors the score_mod `region` reads: for
/// every element of `s` (raw q.k scores, multiplied by `scale` as for
/// buildScoreModWithDerivative) and every read of a tensor `i` with a
/// non-null `gradients[i]` (an fp32 `!llvm.ptr<1>` of the tensor's
/// elements), atomically adds `grad` (the loss's gradient with respect to
/// the modified score, the fragment's element) times the region's
/// derivative with respect to the value read, at the element read.
void buildScoreModAuxGradients(mlir::ImplicitLocOpBuilder &b,
                               mlir::Region &region, mlir::Value s,
                               mlir::Value scale, const ModifierIndices &at,
                               mlir::Value grad,
                               llvm::ArrayRef<mlir::Value> gradients);

/// The mask_mod `region`'s verdict for every element of a fragment of
/// `at.numElements` elements: an i1 vector, true where the key is kept.
mlir::Value buildMaskModKeep(mlir::ImplicitLocOpBuilder &b, mlir::Region &region,
                             const ModifierIndices &at);

/// `s` with the elements for which the mask_mod `region` yields false set
/// to -inf.
mlir::Value buildMaskMod(mlir::ImplicitLocOpBuilder &b, mlir::Region &region,
                         mlir::Value s, const ModifierIndices &at);

/// What the compiler proves of a mask_mod region: its yield as a boolean
/// formula of comparisons `a*q + c*kv + k <= 0` (integer a, c, k) combined
/// by and/or/not; anything else (the batch or head index, auxiliary reads,
/// other ops) is an unknown leaf, which is never fully kept or fully masked.
class MaskModShape {
public:
  explicit MaskModShape(mlir::Region &region);

  /// Runtime i1: every key of [k0, k1] is kept for every query of [q0, q1]
  /// (index values). False when unknown.
  mlir::Value buildAllKept(mlir::ImplicitLocOpBuilder &b, mlir::Value q0,
                           mlir::Value q1, mlir::Value k0, mlir::Value k1) const;
  /// The keys some query of [q0, q1] may keep: [lo, hi] as index values
  /// (inclusive), each null when the shape does not bound it.
  std::pair<mlir::Value, mlir::Value>
  buildKeyRange(mlir::ImplicitLocOpBuilder &b, mlir::Value q0,
                mlir::Value q1) const;
  /// The backward's turn: the queries that may keep some key of [k0, k1]:
  /// [lo, hi] (inclusive), each null when the shape does not bound it.
  std::pair<mlir::Value, mlir::Value>
  buildQueryRange(mlir::ImplicitLocOpBuilder &b, mlir::Value k0,
                  mlir::Value k1) const;
  /// The ops whose results the analysis could not express (empty: the whole
  /// region is proven).
  llvm::ArrayRef<mlir::Operation *> unproven() const { return unknownOps; }
  /// A one-word summary for the ABI report: "proven", "partial" (some
  /// parts unknown) or "unknown" (the yield itself).
  llvm::StringRef summary() const;

private:
  struct Linear {
    int64_t q = 0, kv = 0, constant = 0;
  };
  enum class Kind { Atom, And, Or, Not, True, False, Unknown };
  struct Node {
    Kind kind;
    Linear form;                     // Atom: form <= 0
    llvm::SmallVector<unsigned> ops; // And, Or, Not
  };
  std::optional<Linear> linear(mlir::Value v) const;
  unsigned formula(mlir::Value v);
  unsigned add(Node node);
  unsigned atom(Linear form) { return add({Kind::Atom, form, {}}); }
  std::pair<mlir::Value, mlir::Value>
  buildKeptMasked(mlir::ImplicitLocOpBuilder &b, unsigned node, mlir::Value q0,
                  mlir::Value q1, mlir::Value k0, mlir::Value k1) const;
  /// The range of the key (`ofQueries` false) or of the query (true) that
  /// the formula at `node` allows for some value of the other index in
  /// [x0, x1].
  std::pair<mlir::Value, mlir::Value>
  buildRange(mlir::ImplicitLocOpBuilder &b, unsigned node, mlir::Value x0,
             mlir::Value x1, bool ofQueries) const;

  mlir::Block *block;
  llvm::SmallVector<Node> nodes;
  unsigned root;
  llvm::SmallVector<mlir::Operation *> unknownOps;
};

} // namespace kvpipe

#endif // KVPIPE_LIB_DIALECT_KVPIPE_TRANSFORMS_MODIFIERS_H
