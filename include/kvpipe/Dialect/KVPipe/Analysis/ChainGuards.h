//===- ChainGuards.h - conditions a chain of states runs under -*- C++ -*-===//
//
// A chain of pipeline states that ends inside an `scf.if` (without being
// yielded out) only runs when the condition holds. The producer's and the
// consumer's chains are split by a role condition (the warpgroup id); any
// other condition on one side only leaves the other side waiting when it is
// false. This lists the conditions a chain's end is under, for the
// protocol checker to compare the two sides' (rule 5).
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_ANALYSIS_CHAINGUARDS_H
#define KVPIPE_DIALECT_KVPIPE_ANALYSIS_CHAINGUARDS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"

namespace kvpipe {

/// One region a chain's end is nested in: the branch `region` of the
/// `scf.if` or `scf.index_switch` `op`, taken when `condition` (the if's
/// condition, the switch's argument) selects it.
struct ChainGuard {
  mlir::Operation *op;
  unsigned region;
  mlir::Value condition;

  bool operator==(const ChainGuard &other) const {
    return op == other.op && region == other.region;
  }
};

/// The branches of `scf.if` / `scf.index_switch` that hold `value`'s
/// definition, outermost first, below `scope`.
llvm::SmallVector<ChainGuard> getChainGuards(mlir::Value value,
                                             mlir::Operation *scope);

/// Whether `condition` depends only on the identity of the thread (thread,
/// lane, warp and warpgroup ids, `nvvm.elect.sync`) and constants, through
/// pure ops: a condition that picks which threads play a role, not whether
/// the role runs in the CTA.
bool selectsThreads(mlir::Value condition);

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_ANALYSIS_CHAINGUARDS_H
