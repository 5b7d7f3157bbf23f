//===- Transactions.h - bytes a producer commit expects ---------*- C++ -*-===//
//
// A `kvpipe.producer_commit` arrives with `expect_tx` of the bytes the TMA
// loads of its slot deliver. Nobody writes that number by hand: it is summed
// here from the loads' boxes, for the lowering and for the protocol checker.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_ANALYSIS_TRANSACTIONS_H
#define KVPIPE_DIALECT_KVPIPE_ANALYSIS_TRANSACTIONS_H

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Support/LLVM.h"

namespace kvpipe {

/// The discardable attribute in which `annotateTransactionBytes` records the
/// derived byte count of each commit, for the lowering patterns.
inline constexpr llvm::StringLiteral kTransactionBytesAttrName =
    "kvpipe.transaction_bytes";

/// Largest transaction count an mbarrier phase tracks (PTX: 2^20 - 1).
inline constexpr int64_t kMaxTransactionBytes = (1 << 20) - 1;

/// The TMA loads (`tma_load`, `bulk_load`: AsyncSlotCopyOpInterface) that
/// complete on the producer barrier `commit` arrives on:
/// loads whose mbarrier is `kvpipe.producer_mbar` of the same state and
/// sub-stage, in the commit's block between the matching `producer_acquire`
/// and the state's next `step` (directly, or in `scf.for` loops of constant
/// trip count, each load counted once per iteration), and the loads of
/// helpers called there with that barrier as an argument, or with the state
/// as an argument when the helper takes its `producer_mbar` at that sub-stage
/// and does not commit it itself (through calls to callees in the module,
/// recursively, counted the same way).
struct SlotLoads {
  struct Load {
    /// A `tma_load` or `bulk_load` (both TMA copies).
    AsyncSlotCopyOpInterface load;
    int64_t count;
    /// The load itself, or the call in the commit's function through which
    /// it was reached.
    mlir::Operation *site;
  };
  llvm::SmallVector<Load> loads;
  int64_t bytes = 0;
};

/// Collects the loads of `commit`'s slot. Fails, with an error at the commit,
/// when a load completing on its barrier cannot be counted statically (under
/// a condition or in a loop of unknown trip count, or the barrier passed to
/// a callee that is not in the module, recursive, or branching), when the total
/// exceeds what an mbarrier phase can track, or when a TMA-filled slot's
/// pipeline has more than one producer (the elected thread arrives once).
mlir::FailureOr<SlotLoads> collectSlotLoads(ProducerCommitOp commit);

/// Computes the transaction bytes of every `producer_commit` under `root`
/// and records them in `kTransactionBytesAttrName`. Run it before lowering
/// the loads, which the analysis needs to see.
mlir::LogicalResult annotateTransactionBytes(mlir::Operation *root);

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_ANALYSIS_TRANSACTIONS_H
