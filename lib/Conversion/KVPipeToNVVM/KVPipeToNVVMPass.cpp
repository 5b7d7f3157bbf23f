//===- KVPipeToNVVMPass.cpp - the kvpipe to NVVM conversion pass ----------===//

#include "kvpipe/Conversion/KVPipeToNVVM/KVPipeToNVVM.h"

#include "Common.h"
#include "kvpipe/Dialect/KVPipe/Analysis/Transactions.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/ControlFlow/Transforms/StructuralTypeConversions.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "convert-kvpipe-to-nvvm"

namespace kvpipe {
#define GEN_PASS_DEF_CONVERTKVPIPETONVVM
#include "kvpipe/Conversion/Passes.h.inc"
} // namespace kvpipe

using namespace mlir;
using namespace kvpipe;

void kvpipe::populateKVPipeToNVVMTypeConversions(LLVMTypeConverter &converter) {
  converter.addConversion([](PipelineType type) {
    return lowering::LoweredState::getType(type.getContext());
  });
  converter.addConversion([](MBarrierType type) {
    return LLVM::LLVMPointerType::get(type.getContext(), /*addressSpace=*/3);
  });
  converter.addConversion([](TensorMapType type) {
    return LLVM::LLVMPointerType::get(type.getContext());
  });
}

void kvpipe::populateKVPipeToNVVMConversionPatterns(
    const LLVMTypeConverter &converter, RewritePatternSet &patterns,
    const KVPipeToNVVMOptions &options) {
  populateBarrierToNVVMPatterns(converter, patterns, options,
                                std::make_shared<lowering::SymbolNamer>());
  populateTMAToNVVMPatterns(converter, patterns);
  populateWgmmaToNVVMPatterns(converter, patterns);
  populateWarpSpecializationToNVVMPatterns(converter, patterns);
  populateApproxMathToNVVMPatterns(converter, patterns);
}

void kvpipe::setTensorMapArgumentAttributes(Operation *funcOp,
                                            unsigned argIndex) {
  auto fn = cast<FunctionOpInterface>(funcOp);
  MLIRContext *ctx = funcOp->getContext();
  Builder b(ctx);
  // A CUtensorMap is 128 bytes, 64-byte aligned, and must stay in the
  // parameter space (grid constant): TMA reads it from there by address.
  fn.setArgAttr(argIndex, LLVM::LLVMDialect::getByValAttrName(),
                TypeAttr::get(LLVM::LLVMArrayType::get(b.getI8Type(), 128)));
  fn.setArgAttr(argIndex, LLVM::LLVMDialect::getAlignAttrName(),
                b.getI64IntegerAttr(64));
  fn.setArgAttr(argIndex, NVVM::NVVMDialect::getGridConstantAttrName(),
                b.getUnitAttr());
}

namespace {

bool isKVPipeType(Type type) {
  return isa<KVPipeDialect>(type.getDialect());
}

/// Whether `op` still mentions a kvpipe type anywhere the conversion has to
/// rewrite: operands, results, block arguments, or a function signature.
bool mentionsKVPipeType(Operation *op) {
  if (llvm::any_of(op->getOperandTypes(), isKVPipeType) ||
      llvm::any_of(op->getResultTypes(), isKVPipeType))
    return true;
  if (auto fn = dyn_cast<FunctionOpInterface>(op))
    if (llvm::any_of(fn.getArgumentTypes(), isKVPipeType) ||
        llvm::any_of(fn.getResultTypes(), isKVPipeType))
      return true;
  for (Region &region : op->getRegions())
    for (Block &block : region)
      if (llvm::any_of(block.getArgumentTypes(), isKVPipeType))
        return true;
  return false;
}

/// Converts the kvpipe types in the signature of a function-like op. Unlike
/// upstream's FunctionOpInterface pattern, it keeps the entry-block arguments
/// that follow the function's inputs: a `gpu.func` holds its workgroup and
/// private attributions there, and a kernel with tensor-map arguments must
/// not lose its shared-memory buffers.
struct FunctionSignatureConversion
    : OpInterfaceConversionPattern<FunctionOpInterface> {
  using OpInterfaceConversionPattern::OpInterfaceConversionPattern;

  LogicalResult
  matchAndRewrite(FunctionOpInterface fn, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = dyn_cast<FunctionType>(fn.getFunctionType());
    if (!type)
      return rewriter.notifyMatchFailure(fn, "not a builtin function type");
    Region &body = fn.getFunctionBody();
    unsigned numEntryArgs = body.empty() ? type.getNumInputs()
                                         : body.front().getNumArguments();
    TypeConverter::SignatureConversion conversion(numEntryArgs);
    SmallVector<Type> results;
    if (failed(getTypeConverter()->convertSignatureArgs(type.getInputs(),
                                                        conversion)) ||
        failed(getTypeConverter()->convertTypes(type.getResults(), results)))
      return rewriter.notifyMatchFailure(fn, "cannot convert the signature");
    size_t numInputs = conversion.getConvertedTypes().size();
    for (unsigned i = type.getNumInputs(); i < numEntryArgs; ++i)
      conversion.addInputs(i, body.front().getArgument(i).getType());
    auto newType = FunctionType::get(
        getContext(), conversion.getConvertedTypes().take_front(numInputs),
        results);
    if (!body.empty() &&
        failed(rewriter.convertRegionTypes(&body, *getTypeConverter(),
                                           &conversion)))
      return rewriter.notifyMatchFailure(fn, "cannot convert the body");
    rewriter.modifyOpInPlace(fn, [&] { fn.setType(newType); });
    return success();
  }
};

/// `gpu.return` carries the results of a `gpu.func` whose signature
/// FunctionSignatureConversion changed (upstream converts only `func.return`).
struct GPUReturnOpConversion : OpConversionPattern<gpu::ReturnOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(gpu::ReturnOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<gpu::ReturnOp>(op, adaptor.getOperands());
    return success();
  }
};

/// The fragments a `kvpipe.warpgroup_wait` retires are wgmma accumulators,
/// at most 128 f32 registers per thread (64 x 256 over 128 threads); the
/// lowering pins each register with inline asm. Its ODS constraint admits
/// any rank-1 f32 vector, so bound them here rather than emit (or hang on)
/// an inline-asm statement with a million operands or a scalable vector
/// NVPTX cannot legalise.
LogicalResult checkWarpgroupWaits(Operation *root) {
  constexpr int64_t kMaxAccumulatorRegisters = 128;
  WalkResult result = root->walk([&](WarpgroupWaitOp wait) {
    for (Type type : wait.getFragments().getTypes()) {
      auto vector = cast<VectorType>(type);
      if (!vector.isScalable() &&
          vector.getNumElements() <= kMaxAccumulatorRegisters)
        continue;
      wait.emitOpError() << "fragments must be wgmma accumulators of at most "
                         << kMaxAccumulatorRegisters
                         << " f32 registers per thread, got " << type;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

/// Upstream gives a gpu.func's workgroup buffers only their element's
/// alignment, but TMA boxes and wgmma operands in the swizzled layout must
/// start on a 1024-byte swizzle atom, and the verifiers cannot see that the
/// buffer behind a static offset 0 is misaligned. Kernels that use kvpipe's
/// data path get every workgroup buffer aligned to 1024 bytes (a buffer that
/// asks for more keeps it).
void alignSwizzledWorkgroupBuffers(Operation *root) {
  constexpr int64_t kAtomBytes = 1024;
  root->walk([&](gpu::GPUFuncOp fn) {
    auto isDataPath = [](Operation *op) {
      return isa<AsyncSlotCopyOpInterface, TMAStoreOp, WarpgroupMmaOp,
                     StoreFragmentOp>(op)
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    };
    if (!fn.walk(isDataPath).wasInterrupted())
      return;
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE << ": " << fn.getName()
                            << " uses the data path: workgroup buffers "
                               "aligned to "
                            << kAtomBytes << " bytes\n");
    Builder b(fn.getContext());
    StringRef name = LLVM::LLVMDialect::getAlignAttrName();
    for (unsigned i = 0, e = fn.getNumWorkgroupAttributions(); i < e; ++i) {
      auto align = dyn_cast_or_null<IntegerAttr>(
          fn.getWorkgroupAttributionAttr(i, name));
      if (!align || align.getInt() < kAtomBytes)
        fn.setWorkgroupAttributionAttr(i, name,
                                       b.getI64IntegerAttr(kAtomBytes));
    }
  });
}

struct ConvertKVPipeToNVVM
    : kvpipe::impl::ConvertKVPipeToNVVMBase<ConvertKVPipeToNVVM> {
  using Base::Base;

  void runOnOperation() override {
    Operation *root = getOperation();
    MLIRContext *ctx = &getContext();
    // `kvpipe.create` adds a global, and a wait with a timeout a helper
    // function, to its nearest symbol table. That table must be the op this
    // pass runs on or inside it: a pass running on functions in parallel
    // must not insert into their common module. (The targets are checked
    // by kvpipe-check-nvptx-targets, which --kvpipe-to-ptx runs first.)
    WalkResult placement = root->walk([&](Operation *op) {
      auto protocolOp = dyn_cast<PipelineProtocolOpInterface>(op);
      bool waits = protocolOp && protocolOp.opensSlot();
      bool addsSymbol = isa<CreateOp>(op) || (waitTimeout != 0 && waits);
      if (!addsSymbol)
        return WalkResult::advance();
      Operation *table = SymbolTable::getNearestSymbolTable(op);
      if (table && root->isAncestor(table))
        return WalkResult::advance();
      op->emitOpError()
          << "needs an enclosing symbol table (a module or gpu.module) inside "
             "the op that convert-kvpipe-to-nvvm runs on, to hold its "
          << (isa<CreateOp>(op) ? "barriers" : "bounded wait")
          << ": run the pass on the module";
      return WalkResult::interrupt();
    });
    if (placement.wasInterrupted())
      return signalPassFailure();

    if (failed(checkWarpgroupWaits(root)))
      return signalPassFailure();

    // The commits' byte counts are read off the TMA loads, which the
    // conversion replaces: derive them first.
    if (failed(annotateTransactionBytes(root)))
      return signalPassFailure();
    alignSwizzledWorkgroupBuffers(root);

    SmallVector<std::pair<FunctionOpInterface, SmallVector<int32_t>>>
        tensorMapArgs;
    root->walk([&](FunctionOpInterface fn) {
      SmallVector<int32_t> positions;
      for (auto [i, type] : llvm::enumerate(fn.getArgumentTypes()))
        if (isa<TensorMapType>(type))
          positions.push_back(i);
      if (positions.empty())
        return;
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE << ": " << fn.getName() << " has "
                              << positions.size()
                              << " tensor-map arguments (grid constants)\n");
      tensorMapArgs.push_back({fn, positions});
    });

    // The same configuration as convert-gpu-to-nvvm (address spaces of
    // gpu memory spaces), so that the memref descriptors the kvpipe patterns
    // read match the ones that pass produces.
    LLVMTypeConverter converter(ctx);
    configureGpuToNVVMTypeConverter(converter);
    populateKVPipeToNVVMTypeConversions(converter);
    // Structural ops (functions, scf, cf) only change the kvpipe types they
    // carry; everything else is left to the upstream conversions.
    TypeConverter structural;
    structural.addConversion([](Type type) { return type; });
    structural.addConversion([&](Type type) -> std::optional<Type> {
      if (isKVPipeType(type))
        return converter.convertType(type);
      return std::nullopt;
    });

    RewritePatternSet patterns(ctx);
    ConversionTarget target(*ctx);
    target.addIllegalDialect<KVPipeDialect>();
    target.markUnknownOpDynamicallyLegal(
        [](Operation *op) { return !mentionsKVPipeType(op); });
    target.addDynamicallyLegalOp<math::Exp2Op>(
        [](math::Exp2Op op) { return !isApproximateExp2(op); });
    populateKVPipeToNVVMConversionPatterns(converter, patterns,
                                           {/*waitTimeout=*/waitTimeout});
    patterns.add<FunctionSignatureConversion, GPUReturnOpConversion>(
        structural, ctx);
    populateCallOpTypeConversionPattern(patterns, structural);
    populateReturnOpTypeConversionPattern(patterns, structural);
    scf::populateSCFStructuralTypeConversions(structural, patterns);
    cf::populateCFStructuralTypeConversions(structural, patterns);
    if (failed(applyPartialConversion(root, target, std::move(patterns))))
      return signalPassFailure();

    // The upstream gpu.func lowering drops the by-value attributes of
    // arguments: record where the tensor maps are, for
    // kvpipe-finalize-kernel-abi to mark them on the llvm.func.
    Builder b(ctx);
    for (auto &[fn, positions] : tensorMapArgs) {
      if (auto llvmFn = dyn_cast<LLVM::LLVMFuncOp>(fn.getOperation())) {
        if (lowering::isNVVMKernel(llvmFn))
          for (int32_t i : positions)
            setTensorMapArgumentAttributes(fn, i);
        continue;
      }
      fn->setAttr(kTensorMapArgsAttrName, b.getDenseI32ArrayAttr(positions));
      fn->setAttr(kKernelSignatureAttrName,
                  TypeAttr::get(fn.getFunctionType()));
    }
  }
};

} // namespace
