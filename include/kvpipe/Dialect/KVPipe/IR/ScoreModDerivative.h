//===- ScoreModDerivative.h - which score_mod ops are differentiable -*- C++ -*-===//
//
// The backward through a score_mod (docs/modifiers.md) differentiates the
// region op by op (forward mode, lib/Dialect/KVPipe/Transforms/Modifiers.cpp).
// This is the list of ops it can differentiate, shared by the verifier,
// which rejects the others where they depend on the score, and the
// generator.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_SCOREMODDERIVATIVE_H
#define KVPIPE_DIALECT_KVPIPE_IR_SCOREMODDERIVATIVE_H

#include "mlir/IR/Operation.h"

namespace kvpipe {

/// Whether the backward can differentiate `op` with respect to its float
/// operands: arith.addf, subf, mulf, divf, negf, select, maximumf, minimumf,
/// maxnumf, minnumf and math.fma, tanh, exp, exp2, log, log2, sqrt, absf.
/// Ops with integer or i1 results (index arithmetic, comparisons, casts)
/// need no derivative and are not asked about.
bool isDifferentiableScoreModOp(mlir::Operation *op);

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_IR_SCOREMODDERIVATIVE_H
