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
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/APInt.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <string>

namespace kvpipe {

/// Ops whose result differs between the threads of a CTA: the thread, lane,
/// warp and warpgroup ids, lane masks, `nvvm.elect.sync`, any
/// `nvvm.read.ptx.sreg.*` but the CTA-uniform ones (block and grid ids and
/// sizes, cluster ids), and inline assembly (which may read any of them).
bool isThreadDependentOp(mlir::Operation *op);

/// Ops whose result is not one value: `llvm.mlir.undef`, `llvm.mlir.poison`
/// and `ub.poison` (each use may see another value, on each thread) and
/// `llvm.freeze` (an arbitrary value, which may differ between threads).
/// Nothing computed from them is a constant, CTA-uniform or equal to
/// anything.
bool isIndeterminateOp(mlir::Operation *op);

/// Whether `func` is a kernel (its block size is a launch's): a `gpu.func`
/// kernel, or a function marked `gpu.kernel` / `nvvm.kernel`.
bool isKernelFunction(mlir::FunctionOpInterface func);

/// The threads that may run an op: the `numThreads` threads of the CTA
/// (`threadIdx.x` 0 .. numThreads - 1) of the kernel `scope`, of whose body
/// the op is part. Each `kvpipe.warp_roles` around the op is a condition on
/// the thread's warpgroup (0 for the producer region, 1 and above for the
/// consumer region, whose argument is the warpgroup - 1), as its lowering
/// makes it.
struct ThreadScope {
  mlir::Operation *scope;
  int64_t numThreads;
  /// " of the CTA's 3 warpgroups".
  std::string description;
  /// Why the threads cannot be enumerated (the op is counted as unproven),
  /// or empty.
  std::string unprovenReason;
};

/// The threads of the kernel that holds `op`: a kernel function (`gpu.func`
/// kernel, or a function marked `gpu.kernel` / `nvvm.kernel`) with a known
/// block size (`known_block_size`, `gpu.known_block_size`, or `nvvm.maxntid`:
/// the generated kernels are launched with exactly that many threads), or
/// else, inside a `kvpipe.warp_roles`, the warpgroups its outermost roles
/// name (the producer's and `consumer_warpgroups`). Nothing for an op of a
/// helper function or of a kernel of unknown size outside any roles.
std::optional<ThreadScope> getThreadScope(mlir::Operation *op);

/// Integer values on one thread: from its `threadIdx.x`, lane, warpgroup,
/// lane masks and the consumer index of a `kvpipe.warp_roles`.
class ThreadEvaluator {
public:
  explicit ThreadEvaluator(int64_t tid) : tid(tid) {}

  /// `value` on this thread; nothing for a value that is not computed from
  /// constants, the thread's identity and pure integer arithmetic (the first
  /// such value is kept in `unknown`).
  std::optional<llvm::APInt> evaluate(mlir::Value value, unsigned depth = 0);

  mlir::Value unknown;

private:
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

/// The threads of `scope` that reach `op` (through the `scf.if`,
/// `scf.index_switch` and `kvpipe.warp_roles` branches around it) and for
/// which `predicate`, when given, holds. `isUniform` says whether a
/// condition that cannot be evaluated per thread is CTA-uniform (every
/// thread takes it the same way).
ThreadCount countThreads(mlir::Operation *op, mlir::Value predicate,
                         const ThreadScope &scope,
                         llvm::function_ref<bool(mlir::Value)> isUniform);

/// The threads that run any of `ops` (the releases, or the commits, of one
/// pipeline's sub-stage, each with its predicate): each arrives once on
/// every phase of the barrier. (Ops one thread runs one after the other
/// arrive on different slots' phases: two on one state are the pairing
/// rule's error.)
ThreadCount countThreads(llvm::ArrayRef<std::pair<mlir::Operation *,
                                                  mlir::Value>> ops,
                         const ThreadScope &scope,
                         llvm::function_ref<bool(mlir::Value)> isUniform);

/// The threads of `scope` that run any of `ops` (as countThreads counts
/// them), one bit per thread (`threadIdx.x`); nothing when they are not
/// known, with `why` saying why as countThreads would.
std::optional<llvm::BitVector>
getThreads(llvm::ArrayRef<std::pair<mlir::Operation *, mlir::Value>> ops,
           const ThreadScope &scope,
           llvm::function_ref<bool(mlir::Value)> isUniform, ThreadCount &why);

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_ANALYSIS_THREADCOUNTS_H
