//===- BarrierToNVVM.cpp - pipeline state and barriers to NVVM ------------===//
//
// The pipeline protocol: barrier allocation and initialisation, the waits
// with their parities, the arrivals, and the state arithmetic.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "kvpipe/Dialect/KVPipe/Analysis/Transactions.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "convert-kvpipe-to-nvvm"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::lowering;

namespace {

/// A short description of `op` for wait-timeout reports: its name and
/// source location.
std::string describe(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << op->getName().stripDialect() << " at " << op->getLoc();
  return text;
}

/// Whether `op` waits on, arrives on or names the consumers' ("empty")
/// barrier of its sub-stage rather than the producer's ("full") one.
bool onConsumerBarrier(PipelineProtocolOpInterface op) {
  return op.getBarrierSide() == PipelineSide::consumer;
}

/// The lowered state of a staged op's pipeline (`pipeline`, the op's
/// converted operand) and the address of the barrier of the current slot's
/// sub-stage that the op uses.
std::pair<LoweredState, Value> slotBarrier(PipelineProtocolOpInterface op,
                                           Value pipeline, OpBuilder &b) {
  Location loc = op.getLoc();
  LoweredState state = LoweredState::unpack(b, loc, pipeline);
  Value addr = barrierAddress(b, loc, state.barriers, state.index,
                              op.getPipelineType(), *op.getSubStage(),
                              onConsumerBarrier(op));
  return {state, addr};
}

/// `kvpipe.create`: one `llvm.mlir.global` of `2 * num_stages` i64
/// mbarriers in shared memory per op, and the state (barriers, 0, 0).
struct CreateOpLowering : ConvertOpToLLVMPattern<CreateOp> {
  CreateOpLowering(const LLVMTypeConverter &converter,
                   std::shared_ptr<SymbolNamer> namer)
      : ConvertOpToLLVMPattern(converter), namer(std::move(namer)) {}

  LogicalResult
  matchAndRewrite(CreateOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Operation *symbolTableOp = SymbolTable::getNearestSymbolTable(op);
    if (!symbolTableOp || symbolTableOp->getNumRegions() != 1 ||
        symbolTableOp->getRegion(0).empty())
      return rewriter.notifyMatchFailure(op, "no enclosing symbol table");
    auto type = cast<PipelineType>(op.getType());
    Location loc = op.getLoc();

    std::string name =
        namer->getUniqueName(symbolTableOp, "__kvpipe_mbarriers_");
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE << ": " << type << " at " << loc
                            << " gets barrier array " << name << "\n");
    auto arrayType =
        LLVM::LLVMArrayType::get(rewriter.getI64Type(), type.getNumBarriers());
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(&symbolTableOp->getRegion(0).front());
      // No initializer: barriers are initialised at run time by
      // kvpipe.init, and shared memory cannot hold one anyway.
      LLVM::GlobalOp::create(rewriter, loc, arrayType, /*isConstant=*/false,
                             LLVM::Linkage::Internal, name, Attribute(),
                             /*alignment=*/8, /*addrSpace=*/3);
    }
    Value barriers = LLVM::AddressOfOp::create(
        rewriter, loc, LLVM::LLVMPointerType::get(getContext(), 3), name);
    LoweredState state{barriers, i32Constant(rewriter, loc, 0),
                       i32Constant(rewriter, loc, 0)};
    rewriter.replaceOp(op, state.pack(rewriter, loc));
    return success();
  }

  std::shared_ptr<SymbolNamer> namer;
};

/// `kvpipe.init`: thread (0,0,0) initialises the producer barriers with
/// `producers` and the consumer barriers with `consumers` arrivals.
struct InitOpLowering : ConvertOpToLLVMPattern<InitOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(InitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<PipelineType>(op.getPipeline().getType());
    Location loc = op.getLoc();
    LoweredState state =
        LoweredState::unpack(rewriter, loc, adaptor.getPipeline());
    Type i32 = rewriter.getI32Type();
    Value zero = i32Constant(rewriter, loc, 0);
    Value tid = LLVM::OrOp::create(
        rewriter, loc,
        LLVM::OrOp::create(rewriter, loc, NVVM::ThreadIdXOp::create(rewriter, loc, i32),
                           NVVM::ThreadIdYOp::create(rewriter, loc, i32)),
        NVVM::ThreadIdZOp::create(rewriter, loc, i32));
    Value elected =
        LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::eq, tid, zero);
    Value producers = i32Constant(rewriter, loc, type.getProducers());
    Value consumers = i32Constant(rewriter, loc, type.getConsumers());
    for (int64_t i = 0; i < type.getNumBarriers(); ++i) {
      Value addr = LLVM::GEPOp::create(
          rewriter, loc, state.barriers.getType(), rewriter.getI64Type(),
          state.barriers, ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
      NVVM::MBarrierInitOp::create(
          rewriter, loc, addr, i < type.getNumStages() ? producers : consumers,
          elected);
    }
    // Make the initialisation visible to the async proxy (TMA completes on
    // these barriers) and then to every thread of the CTA before anyone
    // waits or arrives.
    NVVM::FenceMbarrierInitOp::create(rewriter, loc);
    NVVM::Barrier0Op::create(rewriter, loc);
    rewriter.eraseOp(op);
    return success();
  }
};

/// `kvpipe.producer_mbar` / `kvpipe.consumer_mbar`: the barrier's address.
struct ProducerMBarOpLowering : ConvertOpToLLVMPattern<ProducerMBarOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(ProducerMBarOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op,
                       slotBarrier(op, adaptor.getPipeline(), rewriter).second);
    return success();
  }
};

struct ConsumerMBarOpLowering : ConvertOpToLLVMPattern<ConsumerMBarOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(ConsumerMBarOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    LoweredState state =
        LoweredState::unpack(rewriter, loc, adaptor.getPipeline());
    Value slot = state.index;
    if (Value index = adaptor.getIndex())
      slot = LLVM::TruncOp::create(rewriter, loc, rewriter.getI32Type(), index);
    rewriter.replaceOp(op, barrierAddress(rewriter, loc, state.barriers, slot,
                                          op.getPipelineType(), op.getStage(),
                                          onConsumerBarrier(op)));
    return success();
  }
};

/// The two waits of the protocol:
/// - `kvpipe.producer_acquire` waits on the consumer ("empty") barrier of
///   the current slot with parity `phase ^ 1`. A barrier in its first phase
///   counts the phase "before" it (parity 1) as complete, so the first
///   `kv_stages` acquires of a fresh pipeline pass at once.
/// - `kvpipe.consumer_wait` waits on the producer ("full") barrier with
///   parity `phase`.
/// The barrier each waits on is the interface's getBarrierSide.
template <typename OpTy>
struct WaitOpLowering : ConvertOpToLLVMPattern<OpTy> {
  WaitOpLowering(const LLVMTypeConverter &converter,
                 const KVPipeToNVVMOptions &options,
                 std::shared_ptr<SymbolNamer> namer)
      : ConvertOpToLLVMPattern<OpTy>(converter), options(options),
        namer(std::move(namer)) {}

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    // A bounded wait adds a helper function to the symbol table.
    Operation *symbolTableOp = SymbolTable::getNearestSymbolTable(op);
    if (options.waitTimeout != 0 &&
        (!symbolTableOp || symbolTableOp->getNumRegions() != 1 ||
         symbolTableOp->getRegion(0).empty()))
      return rewriter.notifyMatchFailure(
          op, "wait-timeout needs an enclosing symbol table");
    auto [state, addr] = slotBarrier(op, adaptor.getPipeline(), rewriter);
    bool consumerBarrier = onConsumerBarrier(op);
    Value parity = state.phase;
    if (consumerBarrier)
      parity = LLVM::XOrOp::create(rewriter, loc, parity,
                                   i32Constant(rewriter, loc, 1));
    emitParityWait(rewriter, loc, addr, parity, options, describe(op),
                   state.index, op.getPipelineType(), op.getStage(),
                   consumerBarrier, symbolTableOp, *namer);
    rewriter.eraseOp(op);
    return success();
  }

  KVPipeToNVVMOptions options;
  std::shared_ptr<SymbolNamer> namer;
};
using ProducerAcquireOpLowering = WaitOpLowering<ProducerAcquireOp>;
using ConsumerWaitOpLowering = WaitOpLowering<ConsumerWaitOp>;

/// `kvpipe.producer_commit`: with TMA loads in the slot, one
/// `mbarrier.arrive.expect_tx` with the bytes they deliver (the copies'
/// complete_tx may come before or after it: the phase cannot complete while
/// this arrival is pending); without, a plain arrive.
struct ProducerCommitOpLowering : ConvertOpToLLVMPattern<ProducerCommitOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(ProducerCommitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto bytes = op->getAttrOfType<IntegerAttr>(kTransactionBytesAttrName);
    if (!bytes)
      return rewriter.notifyMatchFailure(
          op, "transaction bytes not annotated (run annotateTransactionBytes "
              "before lowering)");
    Location loc = op.getLoc();
    auto [state, addr] = slotBarrier(op, adaptor.getPipeline(), rewriter);
    if (bytes.getInt() > 0)
      NVVM::MBarrierArriveExpectTxOp::create(
          rewriter, loc, /*res=*/Type(), addr,
          i32Constant(rewriter, loc, bytes.getInt()), NVVM::MemScopeKind::CTA,
          /*relaxed=*/false, /*predicate=*/Value());
    else
      NVVM::MBarrierArriveOp::create(rewriter, loc, /*res=*/Type(), addr,
                                     /*count=*/Value());
    rewriter.eraseOp(op);
    return success();
  }
};

/// `kvpipe.consumer_release`: the threads with `%e` arrive on the consumer
/// barrier of the slot's sub-stage; the result is stepped at the last one.
/// The arrival is one predicated PTX instruction (`@%e mbarrier.arrive`),
/// not a branch: the release may sit in a single-block region, and a
/// structured `scf.if` per release made scf-to-cf split the block once per
/// release (quadratic in the releases of a block). Where `%e` is a constant
/// the arrival is the plain NVVM op, or nothing.
struct ConsumerReleaseOpLowering : ConvertOpToLLVMPattern<ConsumerReleaseOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(ConsumerReleaseOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto [state, addr] = slotBarrier(op, adaptor.getPipeline(), rewriter);
    // The arrival has release semantics: the consumer's reads of the slot
    // (retired wgmma reads included) are ordered before the producer's
    // acquire of it.
    Value elected = adaptor.getElected();
    if (matchPattern(elected, m_One())) {
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE << ": release at " << loc
                              << ": every thread arrives\n");
      NVVM::MBarrierArriveOp::create(rewriter, loc, /*res=*/Type(), addr,
                                     /*count=*/Value());
    } else if (matchPattern(elected, m_Zero())) {
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE << ": release at " << loc
                              << ": no thread arrives\n");
    } else {
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE << ": release at " << loc
                              << ": predicated arrival\n");
      // The same instruction as the NVVM op's (release.cta semantics by
      // default), with the state it returns discarded.
      NVVM::InlinePtxOp::create(rewriter, loc, /*writeOnlyArgs=*/TypeRange{},
                                /*readOnlyArgs=*/ValueRange{addr},
                                /*readWriteArgs=*/ValueRange{},
                                "mbarrier.arrive.shared.b64 _, [$0];",
                                /*predicate=*/elected);
    }
    if (op.advances())
      state = state.step(rewriter, loc, op.getPipelineType().getKvStages());
    rewriter.replaceOp(op, state.pack(rewriter, loc));
    return success();
  }
};

/// `kvpipe.step`: index + 1, wrapping and flipping the phase at kv_stages.
struct StepOpLowering : ConvertOpToLLVMPattern<StepOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(StepOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<PipelineType>(op.getType());
    LoweredState state =
        LoweredState::unpack(rewriter, loc, adaptor.getPipeline())
            .step(rewriter, loc, type.getKvStages());
    rewriter.replaceOp(op, state.pack(rewriter, loc));
    return success();
  }
};

struct IndexOpLowering : ConvertOpToLLVMPattern<IndexOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(IndexOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value index = LLVM::ExtractValueOp::create(rewriter, loc,
                                               adaptor.getPipeline(), 1);
    rewriter.replaceOp(op, LLVM::ZExtOp::create(rewriter, loc, getIndexType(),
                                                index));
    return success();
  }
};

struct PhaseOpLowering : ConvertOpToLLVMPattern<PhaseOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult
  matchAndRewrite(PhaseOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value phase = LLVM::ExtractValueOp::create(rewriter, loc,
                                               adaptor.getPipeline(), 2);
    rewriter.replaceOp(op, LLVM::TruncOp::create(rewriter, loc,
                                                 rewriter.getI1Type(), phase));
    return success();
  }
};

} // namespace

void kvpipe::populateBarrierToNVVMPatterns(
    const LLVMTypeConverter &converter, RewritePatternSet &patterns,
    const KVPipeToNVVMOptions &options, std::shared_ptr<SymbolNamer> namer) {
  patterns.add<InitOpLowering, ProducerMBarOpLowering, ConsumerMBarOpLowering,
               ProducerCommitOpLowering, ConsumerReleaseOpLowering,
               StepOpLowering, IndexOpLowering, PhaseOpLowering>(converter);
  patterns.add<CreateOpLowering>(converter, namer);
  patterns.add<ProducerAcquireOpLowering, ConsumerWaitOpLowering>(
      converter, options, namer);
}
