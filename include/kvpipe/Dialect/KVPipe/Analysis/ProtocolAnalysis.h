//===- ProtocolAnalysis.h - how pipeline states flow ------------*- C++ -*-===//
//
// The protocol checker (--kvpipe-verify-protocol) reasons about pipeline
// states as SSA values. This analysis answers the questions it asks about
// them, for it and for any other pass that needs them; it learns what each
// op does with a state from PipelineProtocolOpInterface:
//
// - which pipeline a state belongs to: the states linked by `step`,
//   `consumer_release`, loop iter_args, branch yields, block arguments and
//   calls, named by their `kvpipe.create` or function argument;
// - which slot a state denotes: states equal up to the releases of the
//   sub-stages before the last one, which return the same state as a new
//   value;
// - how many slots a chain of ops advances a state: through `step`,
//   `consumer_release` at the last sub-stage, both branches of `scf.if` and
//   `scf.index_switch`, `scf.for` loops of constant trip count and calls
//   whose callee returns the advanced argument;
// - what a loop or a call does with a state: how many slots it advances per
//   iteration, whether it advances it at all, whether it produces into or
//   consumes from its pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_ANALYSIS_PROTOCOLANALYSIS_H
#define KVPIPE_DIALECT_KVPIPE_ANALYSIS_PROTOCOLANALYSIS_H

#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <map>
#include <optional>
#include <string>

namespace kvpipe {

/// The slots a chain of ops inside a scope advances a state by.
struct StateAdvance {
  /// Where the chain starts: a value defined outside the scope, or a block
  /// argument of the scope op itself (a loop's iter_arg, a function argument).
  mlir::Value base;
  /// Slots advanced from `base`.
  int64_t slots = 0;
  /// The last advancing op of the chain (for notes), if any.
  mlir::Operation *lastAdvance = nullptr;
};

/// The flow of pipeline states under one root op. Built once, read-only
/// afterwards except for memoised answers.
class PipelineFlow {
public:
  explicit PipelineFlow(mlir::Operation *root);

  /// Every pipeline-typed value under the root, in walk order.
  llvm::ArrayRef<mlir::Value> getStates() const { return states; }

  /// The representative state of the pipeline `state` belongs to.
  mlir::Value getPipeline(mlir::Value state);
  /// The representative state of the slot `state` denotes.
  mlir::Value getSlot(mlir::Value state);
  /// The states of the slot whose representative is `slot`.
  llvm::ArrayRef<mlir::Value> getSlotStates(mlir::Value slot);
  /// Whether `state` merges states of different pipelines (an `scf.if`,
  /// `scf.index_switch` or `scf.execute_region` result, a block argument):
  /// which pipeline it is depends on the path taken. Such a state is its
  /// own pipeline for the analysis.
  bool isMixed(mlir::Value state) const { return mixed.contains(state); }

  /// Every `scf.for` / `scf.while` under the root, in walk order.
  llvm::ArrayRef<mlir::Operation *> getLoops() const { return loops; }

  /// Names the pipeline of `state` for diagnostics: "pipeline created at
  /// FILE:LINE:COL : TYPE", "pipeline argument #N of @F : TYPE".
  std::string describe(mlir::Value state);

  /// Follows `state` back through advancing ops to a value defined outside
  /// `scope` (or a block argument of `scope`). Nothing when the chain leaves
  /// what can be counted statically: an unknown op, a loop of unknown trip
  /// count, branches that disagree, a call without a summary.
  std::optional<StateAdvance> traceAdvance(mlir::Value state,
                                           mlir::Operation *scope);

  /// The slots `loop` (`scf.for` or `scf.while`) advances the state carried
  /// at `position` by per iteration, when statically known.
  std::optional<int64_t> getAdvancePerIteration(mlir::Operation *loop,
                                                unsigned position);
  /// The carried position of `loop` whose loop-entry operand is `use`, if any.
  static std::optional<unsigned> getCarriedPosition(mlir::OpOperand &use);
  /// The states a loop carries, by position (null where not a pipeline).
  static llvm::SmallVector<mlir::Value> getCarriedStates(mlir::Operation *loop);

  /// Whether the user of `use` advances the state: `step`, the release of
  /// the last sub-stage, a loop that advances the iter_arg it feeds, a call
  /// whose callee advances the argument.
  bool advances(mlir::OpOperand &use);
  /// The ops under `op` (not `op` itself) that advance a state of
  /// `pipeline`: the first one found, or null.
  mlir::Operation *findAdvanceWithin(mlir::Operation *op, mlir::Value pipeline);
  /// The sides of `pipeline` that ops under `op` work on (through calls too):
  /// the sides of the ops that open or close its slots.
  PipelineSide getSides(mlir::Operation *op, mlir::Value pipeline);

  /// The callee of `call`, when it is a function with a body under the root.
  mlir::FunctionOpInterface resolveCallee(mlir::CallOpInterface call);

  /// The calls under the root whose callee (resolveCallee) is `callee`.
  llvm::ArrayRef<mlir::CallOpInterface>
  getCallSites(mlir::FunctionOpInterface callee);

  struct CallAdvance {
    unsigned argument;
    int64_t slots;
  };
  /// The argument that result `result` of `call` returns, and by how many
  /// slots the callee advances it, when statically known.
  std::optional<CallAdvance> getCallAdvance(mlir::CallOpInterface call,
                                            unsigned result);

private:
  /// For each result of `callee`: the argument it returns advanced, if the
  /// advance is statically known on every return.
  llvm::SmallVector<std::optional<CallAdvance>>
  getReturnAdvances(mlir::FunctionOpInterface callee);
  /// The index among `call`'s arguments of `use`, if it is one.
  static std::optional<unsigned> getArgumentIndex(mlir::CallOpInterface call,
                                                  mlir::OpOperand &use);

  /// Links the result of a loop that carries a state through unadvanced to
  /// the slot of its init.
  void uniteLoopPassThroughs();
  mlir::Value find(llvm::DenseMap<mlir::Value, mlir::Value> &parents,
                   mlir::Value value);
  void unite(llvm::DenseMap<mlir::Value, mlir::Value> &parents, mlir::Value a,
             mlir::Value b);
  void build();
  void mergeStates();
  bool isUnmodelled(mlir::Value state);

  /// A state that merges others: the result of a branching op or a block
  /// argument, with what flows into it.
  struct Merge {
    mlir::Value target;
    llvm::SmallVector<mlir::Value, 2> incoming;
    bool branches;
  };
  llvm::SmallVector<Merge> merges;
  llvm::MapVector<mlir::Value, llvm::SmallVector<mlir::Value, 2>>
      blockIncoming;
  llvm::DenseSet<mlir::Value> mixed;

  mlir::Operation *root;
  mlir::SymbolTableCollection symbolTables;
  llvm::SmallVector<mlir::Value> states;
  llvm::SmallVector<mlir::Operation *> loops;
  llvm::DenseMap<mlir::Value, mlir::Value> pipelineParents;
  llvm::DenseMap<mlir::Value, mlir::Value> slotParents;
  llvm::DenseMap<mlir::Value, llvm::SmallVector<mlir::Value>> slotMembers;
  llvm::DenseMap<mlir::Value, llvm::SmallVector<mlir::Value>> pipelineMembers;
  llvm::DenseMap<mlir::Value, std::string> names;
  llvm::DenseMap<std::pair<mlir::Operation *, unsigned>, std::optional<int64_t>>
      perIteration;
  llvm::DenseMap<mlir::Operation *,
                 llvm::SmallVector<std::optional<CallAdvance>>>
      returnAdvances;
  /// Call sites by callee (getCallSites), collected on first use.
  std::optional<
      llvm::DenseMap<mlir::Operation *,
                     llvm::SmallVector<mlir::CallOpInterface, 2>>>
      callSites;
  llvm::DenseMap<std::pair<mlir::Operation *, unsigned>, PipelineSide>
      calleeSides;
  llvm::DenseMap<std::pair<mlir::Operation *, unsigned>, bool> calleeAdvances;
  /// Callees being summarised, to cut recursion.
  llvm::DenseSet<mlir::Operation *> returnsInProgress;
  llvm::DenseSet<std::pair<mlir::Operation *, unsigned>> sidesInProgress;
  llvm::DenseSet<std::pair<mlir::Operation *, unsigned>> advancesInProgress;
};

/// A linear expression over "atoms", each an integer-valued program quantity
/// the analysis could not break down further (a function argument, a trip
/// count it cannot express linearly, ...): `constant + sum(coef * atom)`.
/// Atoms are structural: two computations of the same pure, CTA-uniform
/// expression (in the producer's and in the consumer's branch) are one atom.
struct LinearExpr {
  int64_t constant = 0;
  /// Atom number -> coefficient, without zero coefficients.
  std::map<unsigned, int64_t> terms;

  bool isConstant() const { return terms.empty(); }
  bool operator==(const LinearExpr &other) const {
    return constant == other.constant && terms == other.terms;
  }
  bool operator!=(const LinearExpr &other) const { return !(*this == other); }
  /// `*this += factor * other`; false on overflow.
  bool add(const LinearExpr &other, int64_t factor = 1);
  /// `*this *= factor`; false on overflow.
  bool scale(int64_t factor);
  static LinearExpr ofConstant(int64_t c) {
    LinearExpr e;
    e.constant = c;
    return e;
  }
  static LinearExpr ofAtom(unsigned atom) {
    LinearExpr e;
    e.terms[atom] = 1;
    return e;
  }
};

/// Facts that hold on a path: atoms known to be at least one there.
using PathFacts = llvm::SmallVector<unsigned, 4>;

/// Counts, symbolically, how many slots a chain of pipeline states advances
/// and how many times loops run, so that the producer's and the consumer's
/// totals can be compared where neither is a constant.
class SlotArithmetic {
public:
  explicit SlotArithmetic(PipelineFlow &flow) : flow(flow) {}

  /// A structural number for an integer value: equal numbers mean equal
  /// values on every thread of the CTA.
  unsigned getValueNumber(mlir::Value value);
  /// `value` as a linear expression (through constants, addi, subi, muli by
  /// constants).
  LinearExpr getLinear(mlir::Value value);
  /// The number of iterations of an `scf.for` or `scf.while` on `facts`.
  LinearExpr getTripCount(mlir::Operation *loop, const PathFacts &facts);

  /// The slots `state` is advanced by from the value it is traced back to
  /// (which is stored in `base`) through advancing ops in `scope`, on a path
  /// where `facts` hold. `sides` collects the sides of the advancing ops.
  /// Nothing, with `why` set to the op it could not count
  /// through, when the count is not known.
  std::optional<LinearExpr> traceAdvance(mlir::Value state,
                                         mlir::Operation *scope,
                                         const PathFacts &facts,
                                         mlir::Value &base,
                                         PipelineSide &sides,
                                         mlir::Operation *&why);

  /// Whether `expr >= 0` holds given `facts`.
  /// With `threadIds`, the bounds of thread, lane and warpgroup ids count
  /// (getUnsignedMax).
  bool isNonNegative(const LinearExpr &expr, const PathFacts &facts,
                     bool threadIds = false);
  /// An upper bound of `value` read as an unsigned integer, if known.
  /// With `threadIds`, a thread, lane or warpgroup id is bounded by the
  /// CTA's 1024 threads (the rules that compare the producer's and the
  /// consumer's counts do not take these bounds).
  std::optional<uint64_t> getUnsignedMax(mlir::Value value, unsigned depth = 0,
                                         bool threadIds = false);

  /// Adds the facts that hold inside `region` of the `scf.if` holding it
  /// (`threadIds`: as for getUnsignedMax).
  void addBranchFacts(mlir::Region *region, PathFacts &facts,
                      bool threadIds = false);

  /// Prints `expr` for a diagnostic, naming atoms by their values.
  std::string print(const LinearExpr &expr);

  /// An atom of `expr` that is not known to be CTA-uniform (a value from a
  /// thread id, a warpgroup id, memory, or anything the analysis cannot
  /// number), named by an example value; null when every atom is uniform.
  /// Two totals equal only through such an atom are not proven equal: the
  /// producer's and the consumer's threads may see different values.
  mlir::Value getNonUniformAtom(const LinearExpr &expr);

private:
  /// `nonUniform`: the value that makes the atom differ between threads,
  /// if it may.
  unsigned intern(const std::string &key, mlir::Value example,
                  mlir::Value nonUniform = {});
  bool isUniform(const LinearExpr &expr);
  /// The address of `def` when it is a plain `llvm.load` from global memory
  /// through a pointer argument of a kernel that the kernel only reads (a
  /// read-only kernel input: docs/protocol-checking.md, "Assumptions").
  std::optional<mlir::Value> getReadOnlyKernelLoad(mlir::Operation *def);
  llvm::DenseMap<mlir::Value, bool> readOnlyArguments;
  std::string keyOf(mlir::Value value, unsigned depth);
  std::string loopSignature(mlir::Operation *loop, unsigned depth);
  PipelineFlow &flow;
  std::map<std::string, unsigned> atoms;
  llvm::SmallVector<mlir::Value> atomExamples;
  llvm::SmallVector<std::string> atomKeys;
  /// For each atom that may differ between the threads of the CTA, the
  /// value that makes it differ (null for CTA-uniform atoms).
  llvm::SmallVector<mlir::Value> atomNonUniform;
  llvm::DenseMap<mlir::Value, unsigned> numbers;
  /// Loops whose carried values are being numbered, innermost last.
  llvm::SmallVector<mlir::Operation *> inProgress;
  bool usedPlaceholder = false;
};

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_ANALYSIS_PROTOCOLANALYSIS_H
