//===- ThreadCounts.cpp - how many threads run an op ----------------------===//

#include "kvpipe/Dialect/KVPipe/Analysis/ThreadCounts.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace kvpipe;
using llvm::APInt;

/// The block size of a kernel launched with a known one-dimensional block:
/// `known_block_size` of a `gpu.func` (or `gpu.known_block_size` on another
/// function), else `nvvm.maxntid` (kvpipe's runtime launches the generated
/// kernels with exactly that many threads, their ABI's `threads`).
static std::optional<int64_t> getBlockThreads(FunctionOpInterface func) {
  DenseI32ArrayAttr dims;
  if (auto gpuFunc = dyn_cast<gpu::GPUFuncOp>(func.getOperation()))
    dims = gpuFunc.getKnownBlockSizeAttr();
  if (!dims)
    dims = func->getAttrOfType<DenseI32ArrayAttr>("gpu.known_block_size");
  if (!dims)
    dims = func->getAttrOfType<DenseI32ArrayAttr>("nvvm.maxntid");
  if (!dims || dims.empty() || dims[0] <= 0 ||
      llvm::any_of(dims.asArrayRef().drop_front(),
                   [](int32_t d) { return d != 1; }))
    return std::nullopt;
  return dims[0];
}

/// "N warpgroup" or "N <kind> warpgroups".
static std::string warpgroups(int64_t n, StringRef kind = "") {
  return std::to_string(n) + " " + kind.str() + "warpgroup" +
         (n == 1 ? "" : "s");
}

std::optional<ThreadScope> kvpipe::getThreadScope(Operation *op) {
  if (auto roles = op->getParentOfType<WarpRolesOp>()) {
    if (roles.getProducer().isAncestor(op->getParentRegion()))
      return ThreadScope{roles, &roles.getProducer(), 0, 128, nullptr,
                         " of the producer warpgroup"};
    int64_t consumers = roles.getConsumerWarpgroups();
    return ThreadScope{roles, &roles.getConsumer(), 128, 128 * consumers,
                       &roles.getConsumerBlock(),
                       " of the " + warpgroups(consumers, "consumer ")};
  }
  auto func = op->getParentOfType<FunctionOpInterface>();
  if (!func)
    return std::nullopt;
  std::optional<int64_t> threads = getBlockThreads(func);
  if (!threads)
    return std::nullopt;
  return ThreadScope{func, &func.getFunctionBody(), 0, *threads, nullptr,
                     " of the CTA's " + warpgroups((*threads + 127) / 128)};
}

std::optional<APInt> ThreadEvaluator::evaluate(Value value,
                                                   unsigned depth) {
  auto it = values.find(value);
  if (it != values.end())
    return it->second;
  auto fail = [&]() -> std::optional<APInt> {
    if (!unknown)
      unknown = value;
    return std::nullopt;
  };
  Type type = value.getType();
  unsigned width = type.isIndex() ? 64 : 0;
  if (auto integer = dyn_cast<IntegerType>(type))
    width = integer.getWidth();
  if (width == 0 || width > 64 || depth > 64)
    return fail();
  auto result = [&](APInt v) -> std::optional<APInt> {
    v = v.zextOrTrunc(width);
    values[value] = v;
    return v;
  };
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    if (consumerBlock && arg.getOwner() == consumerBlock &&
        arg.getArgNumber() == 0)
      return result(APInt(64, tid / 128 - 1));
    return fail();
  }
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)))
    return result(constant);
  Operation *def = value.getDefiningOp();
  if (auto id = dyn_cast<gpu::ThreadIdOp>(def)) {
    if (id.getDimension() != gpu::Dimension::x)
      return fail();
    return result(APInt(64, tid));
  }
  if (isa<gpu::LaneIdOp>(def))
    return result(APInt(64, tid % 32));
  if (isa<WarpgroupIdOp>(def))
    return result(APInt(64, tid / 128));
  StringRef name = def->getName().getStringRef();
  if (name == "nvvm.read.ptx.sreg.tid.x")
    return result(APInt(64, tid));
  if (name == "nvvm.read.ptx.sreg.laneid")
    return result(APInt(64, tid % 32));
  if (def->getNumRegions() != 0 || !isMemoryEffectFree(def))
    return fail();
  SmallVector<APInt> operands;
  for (Value operand : def->getOperands()) {
    std::optional<APInt> v = evaluate(operand, depth + 1);
    if (!v)
      return std::nullopt;
    operands.push_back(*v);
  }
  if (isa<arith::IndexCastOp, arith::ExtSIOp>(def))
    return result(operands[0].sextOrTrunc(width));
  if (isa<arith::IndexCastUIOp, arith::ExtUIOp, arith::TruncIOp>(def))
    return result(operands[0].zextOrTrunc(width));
  if (isa<arith::SelectOp>(def))
    return result(operands[0].isZero() ? operands[2] : operands[1]);
  if (operands.size() != 2 ||
      operands[0].getBitWidth() != operands[1].getBitWidth())
    return fail();
  const APInt &a = operands[0], &b = operands[1];
  if (isa<arith::AddIOp>(def))
    return result(a + b);
  if (isa<arith::SubIOp>(def))
    return result(a - b);
  if (isa<arith::MulIOp>(def))
    return result(a * b);
  if (isa<arith::AndIOp>(def))
    return result(a & b);
  if (isa<arith::OrIOp>(def))
    return result(a | b);
  if (isa<arith::XOrIOp>(def))
    return result(a ^ b);
  if (isa<arith::ShLIOp, arith::ShRUIOp, arith::ShRSIOp>(def)) {
    if (b.uge(a.getBitWidth()))
      return fail();
    unsigned shift = b.getZExtValue();
    if (isa<arith::ShLIOp>(def))
      return result(a.shl(shift));
    return result(isa<arith::ShRUIOp>(def) ? a.lshr(shift) : a.ashr(shift));
  }
  if (isa<arith::DivUIOp, arith::DivSIOp, arith::RemUIOp, arith::RemSIOp>(
          def)) {
    if (b.isZero())
      return fail();
    if (isa<arith::DivUIOp>(def))
      return result(a.udiv(b));
    if (isa<arith::RemUIOp>(def))
      return result(a.urem(b));
    if (a.isMinSignedValue() && b.isAllOnes())
      return fail();
    return result(isa<arith::DivSIOp>(def) ? a.sdiv(b) : a.srem(b));
  }
  if (auto cmp = dyn_cast<arith::CmpIOp>(def)) {
    bool holds = false;
    switch (cmp.getPredicate()) {
    case arith::CmpIPredicate::eq: holds = a.eq(b); break;
    case arith::CmpIPredicate::ne: holds = a.ne(b); break;
    case arith::CmpIPredicate::slt: holds = a.slt(b); break;
    case arith::CmpIPredicate::sle: holds = a.sle(b); break;
    case arith::CmpIPredicate::sgt: holds = a.sgt(b); break;
    case arith::CmpIPredicate::sge: holds = a.sge(b); break;
    case arith::CmpIPredicate::ult: holds = a.ult(b); break;
    case arith::CmpIPredicate::ule: holds = a.ule(b); break;
    case arith::CmpIPredicate::ugt: holds = a.ugt(b); break;
    case arith::CmpIPredicate::uge: holds = a.uge(b); break;
    }
    return result(APInt(1, holds));
  }
  return fail();
}

ThreadCount kvpipe::countThreads(Operation *op, Value predicate,
                                 const ThreadScope &scope,
                                 function_ref<bool(Value)> isUniform) {
  ThreadCount count;
  // The conditions on the way down from the role's region: the if's
  // condition or the switch's argument, and the branch that holds `op`.
  struct Guard {
    Operation *op;
    Value condition;
    unsigned region;
  };
  SmallVector<Guard> guards;
  for (Operation *at = op; at->getParentOp() != scope.scope;
       at = at->getParentOp()) {
    Region *region = at->getParentRegion();
    Operation *parent = region->getParentOp();
    if (!region->hasOneBlock()) {
      count.unprovenReason = "is in a region of several blocks, whose "
                             "branches the checker does not follow per thread";
      return count;
    }
    if (auto ifOp = dyn_cast<scf::IfOp>(parent)) {
      guards.push_back({parent, ifOp.getCondition(), region->getRegionNumber()});
    } else if (auto switchOp = dyn_cast<scf::IndexSwitchOp>(parent)) {
      guards.push_back({parent, switchOp.getArg(), region->getRegionNumber()});
    } else if (!isa<scf::ForOp, scf::WhileOp, scf::ExecuteRegionOp,
                    ForEachTileOp>(parent)) {
      count.unprovenReason = "is nested in '" +
                             parent->getName().getStringRef().str() +
                             "', which the checker does not follow per thread";
      return count;
    }
  }

  // Whether the thread of `eval` reaches `op`; nothing when a condition
  // cannot be evaluated (then `eval.unknown` says which).
  auto reaches = [&](ThreadEvaluator &eval) -> std::optional<bool> {
    for (const Guard &guard : guards) {
      std::optional<APInt> v = eval.evaluate(guard.condition);
      if (!v) {
        // A CTA-uniform condition takes every warpgroup the same way: `op`
        // runs in all of them or in none.
        if (isUniform(guard.condition)) {
          eval.unknown = nullptr;
          continue;
        }
        return std::nullopt;
      }
      if (isa<scf::IfOp>(guard.op)) {
        if (v->isZero() != (guard.region == 1))
          return false;
        continue;
      }
      ArrayRef<int64_t> cases = cast<scf::IndexSwitchOp>(guard.op).getCases();
      int64_t arg = v->getSExtValue();
      if (guard.region == 0) { // the default region
        if (llvm::is_contained(cases, arg))
          return false;
      } else if (cases[guard.region - 1] != arg) {
        return false;
      }
    }
    return true;
  };

  int64_t end = scope.firstThread + scope.numThreads;
  for (int64_t w = scope.firstThread; w < end; w += 128) {
    int64_t here = 0;
    for (int64_t tid = w; tid < std::min(w + 128, end); ++tid) {
      ThreadEvaluator eval(scope.consumerBlock, tid);
      std::optional<bool> runs = reaches(eval);
      std::optional<APInt> holds;
      if (runs && *runs)
        holds = predicate ? eval.evaluate(predicate) : APInt(1, 1);
      if (!runs || (*runs && !holds)) {
        count.unprovenReason = "";
        count.unknownValue = eval.unknown;
        return count;
      }
      if (*runs && !holds->isZero())
        ++here;
    }
    count.perWarpgroup.push_back(here);
    count.total += here;
  }
  return count;
}
