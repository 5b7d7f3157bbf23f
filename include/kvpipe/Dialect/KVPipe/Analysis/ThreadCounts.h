//===- ThreadCounts.h - how many threads run an op --------------*- C++ -*-===//
//
// A barrier arrival runs on every thread that reaches it and whose predicate
// holds; that count is what the barrier's expected arrival count has to
// match. The threads are those of a role of `kvpipe.warp_roles` (the region
// that holds the op), or all threads of a kernel whose block size is known
// (the generated kernels, whose roles are already branches on the warpgroup
// id). This evaluates the conditions around the op and its predicate on each
// of those threads, through constants, the thread's identity and pure integer
// arithmetic, and counts the threads that run it, per warpgroup; or says
// which value it could not evaluate.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_ANALYSIS_THREADCOUNTS_H
#define KVPIPE_DIALECT_KVPIPE_ANALYSIS_THREADCOUNTS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/APInt.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <string>

namespace kvpipe {

/// The threads that may run an op: `numThreads` consecutive threads from
/// `threadIdx.x = firstThread`, all within the region of `scope` (a
/// `kvpipe.warp_roles` or a kernel function).
struct ThreadScope {
  mlir::Operation *scope;
  mlir::Region *region;
  int64_t firstThread;
  int64_t numThreads;
  /// The consumer region's block of a `kvpipe.warp_roles`, whose argument is
  /// the consumer's index (warpgroup - 1); null elsewhere.
  mlir::Block *consumerBlock;
  /// " of the producer warpgroup", " of the 2 consumer warpgroups",
  /// " of the CTA's 3 warpgroups".
  std::string description;
};

/// The innermost scope of `op` whose threads are known: the role of the
/// nearest `kvpipe.warp_roles`, or else the kernel (`gpu.func` with
/// `known_block_size`, or a function with `nvvm.maxntid`: the kernels are
/// launched with that many threads) with a one-dimensional block. Nothing in
/// a helper function or a kernel of unknown size.
std::optional<ThreadScope> getThreadScope(mlir::Operation *op);

/// Integer values on one thread: from its `threadIdx.x`, lane, warpgroup
/// and, in a consumer role, the role's argument.
class ThreadEvaluator {
public:
  ThreadEvaluator(mlir::Block *consumerBlock, int64_t tid)
      : consumerBlock(consumerBlock), tid(tid) {}

  /// `value` on this thread; nothing for a value that is not computed from
  /// constants, the thread's identity and pure integer arithmetic (the first
  /// such value is kept in `unknown`).
  std::optional<llvm::APInt> evaluate(mlir::Value value, unsigned depth = 0);

  mlir::Value unknown;

private:
  mlir::Block *consumerBlock;
  int64_t tid;
  llvm::DenseMap<mlir::Value, llvm::APInt> values;
};

/// How many threads of a scope run an op, per warpgroup of the scope.
struct ThreadCount {
  llvm::SmallVector<int64_t> perWarpgroup;
  int64_t total = 0;
  /// When the count is unknown: why (a phrase after "the op ..."), or empty
  /// when a value could not be evaluated per thread (then `unknownValue`).
  std::optional<std::string> unprovenReason;
  mlir::Value unknownValue;
};

/// The threads of `scope` that reach `op` (through the `scf.if` and
/// `scf.index_switch` branches around it) and for which `predicate`, when
/// given, holds. `isUniform` says whether a condition that cannot be
/// evaluated per thread is CTA-uniform (every thread takes it the same way).
ThreadCount countThreads(mlir::Operation *op, mlir::Value predicate,
                         const ThreadScope &scope,
                         llvm::function_ref<bool(mlir::Value)> isUniform);

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_ANALYSIS_THREADCOUNTS_H
