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
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace kvpipe;
using llvm::APInt;

/// A CTA has at most this many threads.
static constexpr int64_t kMaxBlockThreads = 1024;

bool kvpipe::isThreadDependentOp(Operation *op) {
  StringRef name = op->getName().getStringRef();
  if (isa<WarpgroupIdOp>(op) || name == "gpu.thread_id" ||
      name == "gpu.lane_id" || name == "gpu.subgroup_id" ||
      name == "gpu.global_id" || name == "nvvm.elect.sync" ||
      name == "llvm.inline_asm")
    return true;
  if (!name.consume_front("nvvm.read.ptx.sreg."))
    return false;
  // The special registers every thread of a CTA reads alike.
  return !(name.starts_with("ctaid") || name.starts_with("nctaid") ||
           name.starts_with("ntid") || name.starts_with("clusterid") ||
           name.starts_with("nclusterid") || name.starts_with("cluster.") ||
           name == "nwarpid" || name == "nsmid" || name == "gridid");
}

bool kvpipe::isIndeterminateOp(Operation *op) {
  StringRef name = op->getName().getStringRef();
  return name == "llvm.mlir.undef" || name == "llvm.mlir.poison" ||
         name == "ub.poison" || name == "llvm.freeze";
}

bool kvpipe::isKernelFunction(FunctionOpInterface func) {
  auto gpuFunc = dyn_cast<gpu::GPUFuncOp>(func.getOperation());
  return (gpuFunc && gpuFunc.isKernel()) || func->hasAttr("gpu.kernel") ||
         func->hasAttr("nvvm.kernel");
}

/// "N warpgroup" or "N warpgroups".
static std::string warpgroups(int64_t n) {
  return std::to_string(n) + " warpgroup" + (n == 1 ? "" : "s");
}

std::optional<ThreadScope> kvpipe::getThreadScope(Operation *op) {
  auto func = op->getParentOfType<FunctionOpInterface>();
  if (!func)
    return std::nullopt;
  DenseI32ArrayAttr dims;
  if (isKernelFunction(func)) {
    if (auto gpuFunc = dyn_cast<gpu::GPUFuncOp>(func.getOperation()))
      dims = gpuFunc.getKnownBlockSizeAttr();
    if (!dims)
      dims = func->getAttrOfType<DenseI32ArrayAttr>("gpu.known_block_size");
    // The exact block size a launch must have (the kernel fails to launch
    // with another), else the most it may have.
    if (!dims)
      dims = func->getAttrOfType<DenseI32ArrayAttr>("nvvm.reqntid");
    if (!dims)
      dims = func->getAttrOfType<DenseI32ArrayAttr>("nvvm.maxntid");
  }
  if (dims && !dims.empty()) {
    ThreadScope scope{func, dims[0], "", ""};
    if (llvm::any_of(dims.asArrayRef().drop_front(),
                     [](int32_t d) { return d != 1; }))
      scope.unprovenReason = "the kernel's block is not one-dimensional "
                             "(the checker enumerates threadIdx.x only)";
    else if (dims[0] <= 0 || dims[0] > kMaxBlockThreads)
      scope.unprovenReason = "the kernel's block of " +
                             std::to_string(dims[0]) +
                             " threads is not one a CTA can have";
    else
      scope.description =
          " of the CTA's " + warpgroups((dims[0] + 127) / 128);
    return scope;
  }
  // Without a known block size, the warpgroups the outermost roles name.
  WarpRolesOp outermost;
  for (auto roles = op->getParentOfType<WarpRolesOp>(); roles;
       roles = roles->getParentOfType<WarpRolesOp>())
    outermost = roles;
  if (!outermost)
    return std::nullopt;
  int64_t threads = 128 * (1 + outermost.getConsumerWarpgroups());
  return ThreadScope{func, threads,
                     " of the CTA's " + warpgroups(threads / 128), ""};
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
    // The consumer index of a kvpipe.warp_roles: warpgroup - 1.
    auto roles = dyn_cast_or_null<WarpRolesOp>(arg.getOwner()->getParentOp());
    if (roles && arg.getOwner() == &roles.getConsumerBlock() &&
        arg.getArgNumber() == 0)
      return result(APInt(64, tid / 128 - 1));
    return fail();
  }
  Operation *def = value.getDefiningOp();
  if (isIndeterminateOp(def))
    return fail();
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)))
    return result(constant);
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
  if (name.consume_front("nvvm.read.ptx.sreg.lanemask.")) {
    uint64_t bit = uint64_t(1) << (tid % 32);
    std::optional<uint64_t> mask =
        llvm::StringSwitch<std::optional<uint64_t>>(name)
            .Case("eq", bit)
            .Case("lt", bit - 1)
            .Case("le", (bit << 1) - 1)
            .Case("gt", ~((bit << 1) - 1) & 0xffffffffu)
            .Case("ge", ~(bit - 1) & 0xffffffffu)
            .Default(std::nullopt);
    if (!mask)
      return fail();
    return result(APInt(64, *mask));
  }
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

namespace {
/// A branch around an op: the `scf.if` / `scf.index_switch` /
/// `kvpipe.warp_roles` `op` and the region of it that holds the op.
struct Guard {
  Operation *op;
  unsigned region;
};
} // namespace

/// The branches around `op` below `scope`, innermost first; a reason when
/// an op around it is one the checker does not follow per thread.
static std::optional<std::string> collectGuards(Operation *op,
                                                Operation *scope,
                                                SmallVectorImpl<Guard> &guards) {
  for (Operation *at = op; at->getParentOp() != scope; at = at->getParentOp()) {
    Region *region = at->getParentRegion();
    Operation *parent = region->getParentOp();
    if (!region->hasOneBlock())
      return std::string("is in a region of several blocks, whose branches "
                         "the checker does not follow per thread");
    if (isa<scf::IfOp, scf::IndexSwitchOp, WarpRolesOp>(parent))
      guards.push_back({parent, region->getRegionNumber()});
    else if (!isa<scf::ForOp, scf::WhileOp, scf::ExecuteRegionOp,
                  ForEachTileOp>(parent))
      return "is nested in '" + parent->getName().getStringRef().str() +
             "', which the checker does not follow per thread";
  }
  return std::nullopt;
}

/// Whether the thread of `eval` takes every branch of `guards`; nothing
/// when a condition cannot be evaluated (then `eval.unknown` says which).
static std::optional<bool> takes(ArrayRef<Guard> guards,
                                 ThreadEvaluator &eval, int64_t tid,
                                 function_ref<bool(Value)> isUniform) {
  for (const Guard &guard : guards) {
    if (isa<WarpRolesOp>(guard.op)) {
      // Region 0, the producer: warpgroup 0; region 1: the others.
      if ((tid / 128 == 0) != (guard.region == 0))
        return false;
      continue;
    }
    Value condition;
    if (auto ifOp = dyn_cast<scf::IfOp>(guard.op))
      condition = ifOp.getCondition();
    else
      condition = cast<scf::IndexSwitchOp>(guard.op).getArg();
    std::optional<APInt> v = eval.evaluate(condition);
    if (!v) {
      // A CTA-uniform condition takes every thread the same way: the op
      // runs in all of them or in none.
      if (isUniform(condition)) {
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
}

ThreadCount kvpipe::countThreads(Operation *op, Value predicate,
                                 const ThreadScope &scope,
                                 function_ref<bool(Value)> isUniform) {
  std::pair<Operation *, Value> one = {op, predicate};
  return countThreads(ArrayRef(one), scope, isUniform);
}

ThreadCount
kvpipe::countThreads(ArrayRef<std::pair<Operation *, Value>> ops,
                     const ThreadScope &scope,
                     function_ref<bool(Value)> isUniform) {
  ThreadCount count;
  std::optional<llvm::BitVector> threads =
      getThreads(ops, scope, isUniform, count);
  if (!threads)
    return count;
  for (int64_t w = 0; w < scope.numThreads; w += 128) {
    int64_t here = 0;
    for (int64_t tid = w; tid < std::min(w + 128, scope.numThreads); ++tid)
      here += (*threads)[tid];
    count.perWarpgroup.push_back(here);
    count.total += here;
  }
  return count;
}

std::optional<llvm::BitVector>
kvpipe::getThreads(ArrayRef<std::pair<Operation *, Value>> ops,
                   const ThreadScope &scope,
                   function_ref<bool(Value)> isUniform, ThreadCount &why) {
  if (!scope.unprovenReason.empty()) {
    why.unprovenReason = "runs in a kernel whose threads the checker cannot "
                         "enumerate: " +
                         scope.unprovenReason;
    return std::nullopt;
  }
  SmallVector<SmallVector<Guard>> guards(ops.size());
  for (auto [i, entry] : llvm::enumerate(ops))
    if (std::optional<std::string> reason =
            collectGuards(entry.first, scope.scope, guards[i])) {
      why.unprovenReason = *reason;
      return std::nullopt;
    }
  llvm::BitVector threads(scope.numThreads);
  for (int64_t tid = 0; tid < scope.numThreads; ++tid) {
    ThreadEvaluator eval(tid);
    for (auto [i, entry] : llvm::enumerate(ops)) {
      std::optional<bool> reached = takes(guards[i], eval, tid, isUniform);
      std::optional<APInt> holds;
      if (reached && *reached)
        holds = entry.second ? eval.evaluate(entry.second) : APInt(1, 1);
      if (!reached || (*reached && !holds)) {
        why.unprovenReason = "";
        why.unknownValue = eval.unknown;
        return std::nullopt;
      }
      if (*reached && !holds->isZero())
        threads.set(tid);
    }
  }
  return threads;
}
