//===- UseWalk.h - following a value through the ops that use it -*- C++ -*-===//
//
// Several analyses ask where a value goes: whether an address taken out of a
// memref is ever dereferenced (the protocol checker), whether a kernel
// pointer argument is only read (the slot arithmetic), whether a modifier
// region's index argument reaches an auxiliary read (the modifier inliner).
// Each is the same walk over uses, transitively through the results of the
// ops a predicate chooses to follow; this is that walk, once.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_SUPPORT_USEWALK_H
#define KVPIPE_SUPPORT_USEWALK_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace kvpipe {

/// What a use-walk does at one use.
enum class UseStep {
  /// Walk on into the uses of the user's results.
  Follow,
  /// The use is harmless; do not look past it.
  Skip,
  /// The walk has found what it looks for: stop at this use.
  Stop,
};

/// Visits the uses of `root` and, transitively, those of the results of every
/// user that `visit` answers `Follow` for (each value once). Returns the first
/// use that `visit` answers `Stop` for, or null when there is none.
template <typename Visit>
mlir::OpOperand *findUseTransitively(mlir::Value root, Visit &&visit) {
  llvm::SmallVector<mlir::Value> worklist = {root};
  llvm::DenseSet<mlir::Value> seen;
  while (!worklist.empty()) {
    mlir::Value value = worklist.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    for (mlir::OpOperand &use : value.getUses()) {
      switch (visit(use)) {
      case UseStep::Follow:
        llvm::append_range(worklist, use.getOwner()->getResults());
        break;
      case UseStep::Skip:
        break;
      case UseStep::Stop:
        return &use;
      }
    }
  }
  return nullptr;
}

} // namespace kvpipe

#endif // KVPIPE_SUPPORT_USEWALK_H
