//===- Common.cpp - helpers shared by the kvpipe lowering patterns --------===//

#include "Common.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "convert-kvpipe-to-nvvm"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::lowering;

Value lowering::i32Constant(OpBuilder &b, Location loc, int64_t v) {
  return LLVM::ConstantOp::create(b, loc, b.getI32Type(),
                                  b.getI32IntegerAttr(v));
}

Value lowering::i64Constant(OpBuilder &b, Location loc, int64_t v) {
  return LLVM::ConstantOp::create(b, loc, b.getI64Type(),
                                  b.getI64IntegerAttr(v));
}

Type LoweredState::getType(MLIRContext *ctx) {
  auto i32 = IntegerType::get(ctx, 32);
  return LLVM::LLVMStructType::getLiteral(
      ctx, {LLVM::LLVMPointerType::get(ctx, /*addressSpace=*/3), i32, i32});
}

LoweredState LoweredState::unpack(OpBuilder &b, Location loc, Value state) {
  return {LLVM::ExtractValueOp::create(b, loc, state, ArrayRef<int64_t>{0}),
          LLVM::ExtractValueOp::create(b, loc, state, ArrayRef<int64_t>{1}),
          LLVM::ExtractValueOp::create(b, loc, state, ArrayRef<int64_t>{2})};
}

Value LoweredState::pack(OpBuilder &b, Location loc) const {
  Value state = LLVM::UndefOp::create(b, loc, getType(b.getContext()));
  state = LLVM::InsertValueOp::create(b, loc, state, barriers, ArrayRef<int64_t>{0});
  state = LLVM::InsertValueOp::create(b, loc, state, index, ArrayRef<int64_t>{1});
  return LLVM::InsertValueOp::create(b, loc, state, phase, ArrayRef<int64_t>{2});
}

LoweredState LoweredState::step(OpBuilder &b, Location loc,
                                int64_t kvStages) const {
  Value next = LLVM::AddOp::create(b, loc, index, i32Constant(b, loc, 1));
  Value wraps = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, next,
                                     i32Constant(b, loc, kvStages));
  Value flipped =
      LLVM::XOrOp::create(b, loc, phase, i32Constant(b, loc, 1));
  return {barriers,
          LLVM::SelectOp::create(b, loc, wraps, i32Constant(b, loc, 0), next),
          LLVM::SelectOp::create(b, loc, wraps, flipped, phase)};
}

Value lowering::barrierIndex(OpBuilder &b, Location loc, Value slot,
                             PipelineType type, int64_t stage, bool consumer) {
  // qk_stages * slot + stage (+ num_stages for the consumer side).
  Value offset = LLVM::MulOp::create(b, loc, slot,
                                     i32Constant(b, loc, type.getQkStages()));
  int64_t constant = stage + (consumer ? type.getNumStages() : 0);
  if (constant != 0)
    offset = LLVM::AddOp::create(b, loc, offset, i32Constant(b, loc, constant));
  return offset;
}

Value lowering::barrierAddress(OpBuilder &b, Location loc, Value barriers,
                             Value slot, PipelineType type, int64_t stage,
                             bool consumer) {
  Value offset = barrierIndex(b, loc, slot, type, stage, consumer);
  return LLVM::GEPOp::create(b, loc, barriers.getType(), b.getI64Type(),
                             barriers, ValueRange{offset});
}

Value lowering::tileAddress(OpBuilder &b, Location loc,
                          const LLVMTypeConverter &converter, MemRefType type,
                          Value descriptor) {
  Value zero = LLVM::ConstantOp::create(b, loc, converter.getIndexType(),
                                        b.getIndexAttr(0));
  SmallVector<Value> zeros(type.getRank(), zero);
  return LLVM::getStridedElementPtr(b, loc, converter, type, descriptor, zeros);
}

bool lowering::isNVVMKernel(LLVM::LLVMFuncOp fn) {
  return fn->hasAttr(NVVM::NVVMDialect::getKernelFuncAttrName()) ||
         fn.getCConv() == LLVM::CConv::PTX_Kernel;
}

Value lowering::threadIdX(OpBuilder &b, Location loc) {
  return NVVM::ThreadIdXOp::create(b, loc, b.getI32Type());
}

/// Escapes `%` so that `text` prints verbatim through printf.
static std::string escapePercent(StringRef text) {
  std::string out;
  for (char c : text) {
    out.push_back(c);
    if (c == '%')
      out.push_back('%');
  }
  return out;
}

std::string SymbolNamer::getUniqueName(Operation *symbolTableOp,
                                       StringRef prefix) {
  auto [it, inserted] = tables.try_emplace(symbolTableOp);
  Table &table = it->second;
  if (inserted) {
    for (Block &block : symbolTableOp->getRegion(0))
      for (Operation &op : block)
        if (auto name = op.getAttrOfType<StringAttr>(
                SymbolTable::getSymbolAttrName()))
          table.taken.insert(name.getValue());
  }
  unsigned &next = table.next[prefix];
  std::string name;
  do
    name = (prefix + Twine(next++)).str();
  while (!table.taken.insert(name).second);
  return name;
}

void lowering::emitParityWait(OpBuilder &b, Location loc, Value addr,
                              Value parity, const KVPipeToNVVMOptions &options,
                              StringRef what, Value slot, PipelineType type,
                              int64_t stage, bool consumer,
                              Operation *symbolTableOp, SymbolNamer &namer) {
  if (options.waitTimeout == 0) {
    // The NVVM op loops on try_wait.parity until the phase completes; the
    // suspend-time hint (ns) lets the thread sleep instead of spinning.
    NVVM::MBarrierTryWaitParityOp::create(b, loc, addr, parity,
                                          i32Constant(b, loc, 0x989680));
    return;
  }
  // Bounded wait: try_wait until done or `waitTimeout` cycles have passed,
  // then say which wait hung and trap, so a hang becomes an error. The loop
  // is a helper function of its own, always inlined, called here: the wait
  // may sit in a single-block region (scf.for, scf.if), where no branch can
  // go, and building it as scf.while/scf.if would leave one more structured
  // op per wait for scf-to-cf to split the block at.
  MLIRContext *ctx = b.getContext();
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  Type ptrType = addr.getType();
  std::string name =
      namer.getUniqueName(symbolTableOp, "__kvpipe_wait_timeout_");
  LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE << ": bounded wait " << name
                          << " for " << what << "\n");
  {
    OpBuilder::InsertionGuard guard(b);
    // Right before the function (or other top-level op) holding the wait.
    Block &tableBody = symbolTableOp->getRegion(0).front();
    if (Operation *top = tableBody.findAncestorOpInBlock(
            *b.getInsertionBlock()->getParentOp()))
      b.setInsertionPoint(top);
    else
      b.setInsertionPointToStart(&tableBody);
    auto fn = LLVM::LLVMFuncOp::create(
        b, loc, name,
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                    {ptrType, i32, i32}),
        LLVM::Linkage::Internal);
    fn.setAlwaysInline(true);
    Region &body = fn.getBody();
    Block *entry = b.createBlock(&body, body.end(), {ptrType, i32, i32},
                                 {loc, loc, loc});
    Block *loop = b.createBlock(&body, body.end());
    Block *check = b.createBlock(&body, body.end());
    Block *report = b.createBlock(&body, body.end());
    Block *done = b.createBlock(&body, body.end());
    Value barrier = entry->getArgument(0);
    Value phase = entry->getArgument(1);
    Value index = entry->getArgument(2);

    b.setInsertionPointToEnd(entry);
    Value start = NVVM::Clock64Op::create(b, loc, i64);
    LLVM::BrOp::create(b, loc, ValueRange{}, loop);

    b.setInsertionPointToEnd(loop);
    Value completed = NVVM::MBarrierTryWaitOp::create(
        b, loc, b.getI1Type(), barrier, phase, /*ticks=*/Value(),
        NVVM::MemScopeKindAttr::get(ctx, NVVM::MemScopeKind::CTA));
    LLVM::CondBrOp::create(b, loc, completed, done, check);

    b.setInsertionPointToEnd(check);
    Value now = NVVM::Clock64Op::create(b, loc, i64);
    Value elapsed = LLVM::SubOp::create(b, loc, now, start);
    Value expired = LLVM::ICmpOp::create(
        b, loc, LLVM::ICmpPredicate::ugt, elapsed,
        i64Constant(b, loc, static_cast<int64_t>(options.waitTimeout)));
    LLVM::CondBrOp::create(b, loc, expired, report, loop);

    // Only the cold path computes the barrier's index for the report.
    b.setInsertionPointToEnd(report);
    std::string format =
        "kvpipe: " + escapePercent(what) + ": no arrival after " +
        std::to_string(options.waitTimeout) +
        " cycles in block (%u,%u,%u) thread %u: " +
        (consumer ? "consumer" : "producer") + " barrier %d (slot %d stage " +
        std::to_string(stage) + ") parity %d\n";
    gpu::PrintfOp::create(
        b, loc, b.getStringAttr(format),
        ValueRange{NVVM::BlockIdXOp::create(b, loc, i32),
                   NVVM::BlockIdYOp::create(b, loc, i32),
                   NVVM::BlockIdZOp::create(b, loc, i32), threadIdX(b, loc),
                   barrierIndex(b, loc, index, type, stage, consumer), index,
                   phase});
    LLVM::Trap::create(b, loc);
    LLVM::UnreachableOp::create(b, loc);

    b.setInsertionPointToEnd(done);
    LLVM::ReturnOp::create(b, loc, ValueRange{});
  }
  LLVM::CallOp::create(b, loc, TypeRange{}, name,
                       ValueRange{addr, parity, slot});
}
