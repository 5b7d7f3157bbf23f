//===- BarrierOrigins.h - the mbarrier a TMA load completes on -*- C++ -*-===//
//
// A `kvpipe.tma_load` completes (`complete_tx`) on the `!kvpipe.mbarrier`
// it is given. The protocol checker needs to know which pipeline barrier
// that is: the producer (full) barrier of a slot's sub-stage, which a
// `producer_commit` must expect the bytes on, or anything else, which is an
// error (the consumer barrier) or cannot be proven (a barrier chosen by an
// `arith.select`, a branch, a loop, an unknown caller). This follows the
// barrier back through the arguments of helpers to each of their call sites
// in the module.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_ANALYSIS_BARRIERORIGINS_H
#define KVPIPE_DIALECT_KVPIPE_ANALYSIS_BARRIERORIGINS_H

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/IR/SymbolTable.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/DenseMap.h"

namespace kvpipe {

/// One place a TMA load's barrier comes from.
struct BarrierOrigin {
  enum class Kind {
    /// `kvpipe.producer_mbar`: `accessor`.
    producer,
    /// `kvpipe.consumer_mbar`: `accessor`.
    consumer,
    /// Not followed: `lostAt` is the op (or the function of the argument)
    /// where the chain stops, `reason` says why.
    unknown,
  };
  Kind kind;
  mlir::Operation *accessor = nullptr;
  mlir::Operation *lostAt = nullptr;
  std::string reason;
  /// The calls from the accessor's function down to the load's function,
  /// outermost first (empty when the load is in the accessor's function).
  llvm::SmallVector<mlir::Operation *> calls;
};

/// The calls of each function under a root, for following arguments back.
class CallSites {
public:
  explicit CallSites(mlir::Operation *root);
  /// The calls of `callee` in the root (resolved through symbol tables).
  llvm::ArrayRef<mlir::Operation *> getCalls(mlir::Operation *callee) const;

private:
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Operation *>> calls;
};

/// Every origin of `load`'s barrier: the accessor that defines it, or, for
/// an argument of a function, the origins of the operand of each call of
/// that function (a function nothing calls, a block argument of a loop or a
/// branch, an op result other than an accessor are `unknown`). A
/// `producer_mbar` of a state that is an argument of a function the module
/// calls gives one origin per call site the state is followed back to (its
/// `calls` end where the state is not such an argument).
llvm::SmallVector<BarrierOrigin> getBarrierOrigins(AsyncSlotCopyOpInterface load,
                                                   const CallSites &sites);

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_ANALYSIS_BARRIERORIGINS_H
