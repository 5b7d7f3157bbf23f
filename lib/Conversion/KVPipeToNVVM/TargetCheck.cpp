//===- TargetCheck.cpp - what NVPTX can compile, checked before lowering --===//
//
// kvpipe lowers to sm_90 instructions that need PTX ISA 8.0 (mbarrier
// transaction counts, fence.mbarrier_init, TMA, wgmma) or, for TMA loads into
// the CTA's own shared memory, 8.6. The NVPTX backend does not report what it
// cannot compile, it aborts: on an explicit PTX version older than the chip
// needs ("LLVM ERROR: PTX version ... does not support target"), on an
// instruction the chip or the PTX version lacks ("LLVM ERROR: Cannot
// select"), on types it has no registers for (scalable vectors, x87 floats,
// vectors of 2^16 elements). A chip name it does not know is ignored with a
// warning, and code is then selected for sm_20. The translation to LLVM IR
// crashes on an instruction outside any function and on an LLVM dialect type
// that holds a type LLVM IR does not have, NVPTX on a global in an address
// space PTX has no variables in, and the translation fails without a location
// on a negative launch bound, and the AsmPrinter on an inline-asm constraint
// it cannot print. The checks here turn each of those into a
// diagnostic at the gpu.module or the op, before anything reaches NVPTX.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.h"
#include "kvpipe/Dialect/KVPipe/IR/KVPipeOps.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kvpipe-check-nvptx-targets"

namespace kvpipe {
#define GEN_PASS_DEF_CHECKNVPTXTARGETS
#include "kvpipe/Conversion/Passes.h.inc"
} // namespace kvpipe

using namespace mlir;
using namespace kvpipe;

namespace {

/// A chip the NVPTX backend of LLVM 22 knows (`llc -mtriple=nvptx64
/// -mcpu=help`), with the oldest PTX ISA version it accepts for that chip,
/// which is also the version it emits when the target names none (`llc
/// -mcpu=<chip>` on an empty module).
struct NVPTXChip {
  llvm::StringLiteral name;
  unsigned sm;
  unsigned minPTX;
};

constexpr NVPTXChip kNVPTXChips[] = {
    {"sm_20", 20, 32},    {"sm_21", 21, 32},    {"sm_30", 30, 32},
    {"sm_32", 32, 40},    {"sm_35", 35, 32},    {"sm_37", 37, 41},
    {"sm_50", 50, 40},    {"sm_52", 52, 41},    {"sm_53", 53, 42},
    {"sm_60", 60, 50},    {"sm_61", 61, 50},    {"sm_62", 62, 50},
    {"sm_70", 70, 60},    {"sm_72", 72, 61},    {"sm_75", 75, 63},
    {"sm_80", 80, 70},    {"sm_86", 86, 71},    {"sm_87", 87, 74},
    {"sm_88", 88, 90},    {"sm_89", 89, 78},    {"sm_90", 90, 78},
    {"sm_90a", 90, 80},   {"sm_100", 100, 86},  {"sm_100a", 100, 86},
    {"sm_100f", 100, 88}, {"sm_101", 101, 86},  {"sm_101a", 101, 86},
    {"sm_101f", 101, 88}, {"sm_103", 103, 88},  {"sm_103a", 103, 88},
    {"sm_103f", 103, 88}, {"sm_110", 110, 90},  {"sm_110a", 110, 90},
    {"sm_110f", 110, 90}, {"sm_120", 120, 87},  {"sm_120a", 120, 87},
    {"sm_120f", 120, 88}, {"sm_121", 121, 88},  {"sm_121a", 121, 88},
    {"sm_121f", 121, 88},
};

/// The PTX ISA versions LLVM 22's NVPTX has a `+ptx<version>` feature for;
/// it ignores any other (with a warning).
constexpr unsigned kPTXVersions[] = {32, 40, 41, 42, 43, 50, 60, 61, 62,
                                     63, 64, 65, 70, 71, 72, 73, 74, 75,
                                     76, 77, 78, 80, 81, 82, 83, 84, 85,
                                     86, 87, 88, 90};

/// The PTX ISA a kvpipe op's lowering needs, and what for: mbarrier
/// transaction counts, fence.mbarrier_init, TMA and wgmma are PTX ISA 8.0; a
/// TMA load into this CTA's shared memory (cp.async.bulk.tensor with a
/// .shared::cta destination, the form without multicast) and a bulk load
/// (cp.async.bulk, always that destination) are 8.6.
std::pair<unsigned, StringRef> requiredPTX(Operation *op) {
  if (auto load = dyn_cast<TMALoadOp>(op); load && !load.getMulticastMask())
    return {86, "cp.async.bulk.tensor into .shared::cta"};
  if (isa<BulkLoadOp>(op))
    return {86, "cp.async.bulk into .shared::cta"};
  return {80, "mbarrier transactions, fence.mbarrier_init, TMA, wgmma"};
}

const NVPTXChip *lookupChip(StringRef chip) {
  for (const NVPTXChip &known : kNVPTXChips)
    if (known.name == chip)
      return &known;
  return nullptr;
}

/// The PTX version the features ask for: the highest `+ptx<version>` NVPTX
/// knows (it keeps the highest of several), if any.
std::optional<unsigned> requestedPTX(StringRef features) {
  std::optional<unsigned> result;
  SmallVector<StringRef> entries;
  features.split(entries, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (StringRef entry : entries) {
    entry = entry.trim();
    unsigned version;
    if (!entry.consume_front("+ptx") || entry.getAsInteger(10, version) ||
        !llvm::is_contained(kPTXVersions, version))
      continue;
    result = std::max(result.value_or(0), version);
  }
  return result;
}

std::string ptxString(unsigned version) {
  return std::to_string(version / 10) + "." + std::to_string(version % 10);
}

/// Checks what NVPTX needs of every target: an explicit PTX version no
/// older than the chip accepts.
LogicalResult checkModuleTargets(gpu::GPUModuleOp module) {
  ArrayAttr targets = module.getTargetsAttr();
  if (!targets)
    return success();
  for (Attribute target : targets) {
    auto nvvm = dyn_cast<NVVM::NVVMTargetAttr>(target);
    if (!nvvm)
      continue;
    const NVPTXChip *chip = lookupChip(nvvm.getChip());
    std::optional<unsigned> ptx = requestedPTX(nvvm.getFeatures());
    if (chip && ptx && *ptx < chip->minPTX)
      return module.emitOpError()
             << "targets " << chip->name << " with PTX ISA "
             << ptxString(*ptx) << " (features \"" << nvvm.getFeatures()
             << "\"), but NVPTX needs PTX ISA " << ptxString(chip->minPTX)
             << " or later for " << chip->name << ": raise the '+ptx' "
             << "feature or leave it out";
  }
  return success();
}

/// Vectors longer than this are rejected: NVPTX's instruction selection
/// holds at most 2^16 operands per node and crashes on a vector of 65536
/// elements; a thread has at most 255 registers anyway.
constexpr int64_t kMaxVectorElements = 1 << 14;

/// Whether a shape has at most `limit` elements (its product may overflow:
/// vector<4611686018427387904x65536xf32>).
bool elementCountAtMost(ArrayRef<int64_t> shape, int64_t limit) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    std::optional<int64_t> product = llvm::checkedMul(count, dim);
    if (!product || *product > limit)
      return false;
    count = *product;
  }
  return true;
}

/// Why NVPTX cannot compile a value of `type` (it aborts or crashes instead
/// of reporting), or an empty string.
std::string unsupportedByNVPTX(Type type) {
  std::string why;
  type.walk([&](Type inner) {
    if (!why.empty())
      return WalkResult::interrupt();
    if (auto vector = dyn_cast<VectorType>(inner)) {
      if (vector.isScalable())
        why = "a scalable vector (NVPTX has none)";
      else if (!elementCountAtMost(vector.getShape(), kMaxVectorElements))
        why = "a vector of more than " + std::to_string(kMaxVectorElements) +
              " elements (NVPTX cannot select it)";
    } else if (isa<Float80Type>(inner)) {
      why = "x87's 80-bit float (NVPTX has none)";
    } else if (isa<LLVM::LLVMDialect>(inner.getDialect()) &&
               !LLVM::isCompatibleType(inner)) {
      // The LLVM dialect's verifier admits e.g. !llvm.array<4 x complex<f32>>;
      // translating it to LLVM IR crashes.
      why = "an LLVM dialect type holding a type LLVM IR does not have";
    }
    return why.empty() ? WalkResult::advance() : WalkResult::interrupt();
  });
  return why;
}

/// Why NVPTX cannot pass a function argument of `type`, or an empty string.
/// A zero-width integer lowers to an empty parameter, on which its argument
/// lowering aborts ("Empty parameter types are not supported").
std::string unsupportedParameter(Type type) {
  bool zeroWidth = false;
  type.walk([&](IntegerType integer) {
    if (integer.getWidth() == 0)
      zeroWidth = true;
  });
  return zeroWidth ? "a zero-width integer (NVPTX cannot pass it as a "
                     "function parameter)"
                   : "";
}

/// Checks that every type in `module` is one NVPTX compiles: the operands,
/// results and block arguments of its ops, function signatures (declarations
/// have no block arguments) and type attributes (globals).
LogicalResult checkModuleTypes(gpu::GPUModuleOp module) {
  WalkResult result = module.walk<WalkOrder::PreOrder>([&](Operation *op) {
    SmallVector<Type> types(op->getResultTypes());
    llvm::append_range(types, op->getOperandTypes());
    for (Region &region : op->getRegions())
      for (Block &block : region)
        llvm::append_range(types, block.getArgumentTypes());
    if (auto fn = dyn_cast<FunctionOpInterface>(op))
      types.push_back(fn.getFunctionType());
    for (NamedAttribute attr : op->getAttrs())
      if (auto typeAttr = dyn_cast<TypeAttr>(attr.getValue()))
        types.push_back(typeAttr.getValue());
    for (Type type : types) {
      std::string why = unsupportedByNVPTX(type);
      if (why.empty())
        continue;
      op->emitOpError() << "uses " << type << ", " << why
                        << ": the gpu.module cannot be compiled to PTX";
      return WalkResult::interrupt();
    }
    if (auto fn = dyn_cast<FunctionOpInterface>(op)) {
      for (Type type : fn.getArgumentTypes()) {
        std::string why = unsupportedParameter(type);
        if (why.empty())
          continue;
        op->emitOpError() << "takes a parameter of type " << type << ", "
                          << why << ": the gpu.module cannot be compiled to PTX";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

/// Checks that the ops at the top level of `module` are what LLVM IR can have
/// at global scope: symbols (functions, globals, kernel declarations) and
/// the LLVM dialect's module-level records. Anything else never executes
/// (functions are isolated from above: nothing can use its results), and
/// once lowered to an instruction with side effects (a barrier, a shuffle,
/// what kvpipe.warpgroup_id becomes) it crashes the translation to LLVM IR,
/// which has no block to put it in.
LogicalResult checkModuleTopLevel(gpu::GPUModuleOp module) {
  for (Operation &op : module.getBody()->getOperations()) {
    if (isa<SymbolOpInterface>(op) || op.hasTrait<OpTrait::IsTerminator>() ||
        isa<LLVM::GlobalCtorsOp, LLVM::GlobalDtorsOp, LLVM::ModuleFlagsOp,
            LLVM::LinkerOptionsOp>(op))
      continue;
    return op.emitOpError()
           << "is at the top level of a gpu.module, where nothing executes: "
              "it must be inside a function";
  }
  return success();
}

/// Checks that the globals of `module` are in an address space PTX has
/// variables in: generic (emitted as global), global, shared, constant or
/// local. NVPTX aborts on any other ("LLVM ERROR: Bad address space found
/// while emitting PTX"). A memref.global's integer memory space becomes its
/// address space.
LogicalResult checkGlobalAddressSpaces(gpu::GPUModuleOp module) {
  auto supported = [](int64_t space) {
    return space == 0 || space == 1 || space == 3 || space == 4 || space == 5;
  };
  WalkResult result = module.walk([&](Operation *op) {
    std::optional<int64_t> space;
    if (auto global = dyn_cast<LLVM::GlobalOp>(op))
      space = global.getAddrSpace();
    else if (auto global = dyn_cast<memref::GlobalOp>(op))
      if (auto integer = dyn_cast_or_null<IntegerAttr>(
              global.getType().getMemorySpace()))
        space = integer.getInt();
    if (!space || supported(*space))
      return WalkResult::advance();
    op->emitOpError() << "is in address space " << *space
                      << ", where PTX has no variables (0 generic, 1 global, "
                         "3 shared, 4 constant, 5 local)";
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

/// Why one operand constraint of an `llvm.inline_asm` is not one NVPTX can
/// emit, or "" (LLVM's constraint syntax: `=` for an output, `&` early
/// clobber, then codes; `~{name}` a clobber). NVPTX's register classes are
/// b c h r l f d q N; i n m X are generic; digits tie to an output, `{...}`
/// names a register. Anything else reaches the AsmPrinter as an operand it
/// cannot print ("invalid operand in inline asm", without a location).
std::string badAsmConstraint(StringRef code) {
  if (code.starts_with("~")) {
    StringRef name = code.drop_front();
    if (name.size() < 3 || !name.starts_with("{") || !name.ends_with("}"))
      return "a clobber must be '~{name}'";
    return "";
  }
  code.consume_front("=");
  code.consume_front("&");
  if (code.empty())
    return "it names no operand kind";
  if (code.starts_with("{"))
    return code.size() > 2 && code.ends_with("}") ? ""
                                                  : "a register must be '{name}'";
  if (llvm::all_of(code, llvm::isDigit))
    return "";
  for (char c : code)
    if (!StringRef("bchlrfdqNinmX").contains(c))
      return (Twine("'") + Twine(c) +
              "' is no NVPTX constraint (b c h r l f d q N, i n m X, a digit "
              "or '{reg}')")
          .str();
  return "";
}

/// The operand numbers an inline-asm string refers to (`$N`, `${N}`,
/// `${N:modifier}`; `$$` is a dollar sign).
SmallVector<unsigned> asmOperandReferences(StringRef text) {
  SmallVector<unsigned> refs;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] != '$')
      continue;
    if (text[i + 1] == '$') {
      ++i;
      continue;
    }
    size_t at = i + 1 + (text[i + 1] == '{');
    size_t end = at;
    while (end < text.size() && llvm::isDigit(text[end]))
      ++end;
    unsigned number;
    if (end > at && !text.slice(at, end).getAsInteger(10, number))
      refs.push_back(number);
    i = end - 1;
  }
  return refs;
}

/// Checks the `llvm.inline_asm` ops in `module`: each comma-separated
/// constraint well formed (badAsmConstraint), one input constraint per
/// operand, ties to outputs that exist, and `$N` in the string naming an
/// operand (NVPTX crashes on the others).
LogicalResult checkInlineAsm(gpu::GPUModuleOp module) {
  WalkResult result = module.walk([&](LLVM::InlineAsmOp op) {
    SmallVector<StringRef> codes;
    StringRef constraints = op.getConstraints();
    if (!constraints.empty())
      constraints.split(codes, ',');
    unsigned inputs = 0, outputs = 0;
    for (StringRef code : codes) {
      std::string why = badAsmConstraint(code);
      if (!why.empty()) {
        op.emitOpError() << "has the constraint '" << code
                         << "', which NVPTX cannot emit: " << why;
        return WalkResult::interrupt();
      }
      outputs += code.starts_with("=");
      inputs += !code.starts_with("=") && !code.starts_with("~");
    }
    if (inputs != op.getNumOperands()) {
      op.emitOpError() << "has " << inputs
                       << " input constraint(s) for its "
                       << op.getNumOperands() << " operand(s)";
      return WalkResult::interrupt();
    }
    for (StringRef code : codes) {
      unsigned tied;
      if (!code.starts_with("=") && !code.getAsInteger(10, tied) &&
          tied >= outputs) {
        op.emitOpError() << "has the constraint '" << code
                         << "', which ties to an output it does not have ("
                         << outputs << " output(s))";
        return WalkResult::interrupt();
      }
    }
    for (unsigned ref : asmOperandReferences(op.getAsmString()))
      if (ref >= outputs + inputs) {
        op.emitOpError() << "refers to operand $" << ref << ", but has "
                         << outputs + inputs << " (outputs, then inputs)";
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

/// Checks the launch-bound attributes of the functions in `module` that the
/// translation to LLVM IR reads as unsigned thread and cluster counts: a
/// negative one is an error there without a location ("can't parse integer
/// attribute -1 in nvvm.maxntid"). `known_block_size` becomes
/// `nvvm.maxntid`.
LogicalResult checkLaunchBounds(gpu::GPUModuleOp module) {
  static constexpr StringLiteral kNames[] = {
      "known_block_size", "nvvm.maxntid", "nvvm.reqntid", "nvvm.cluster_dim"};
  WalkResult result = module.walk([&](FunctionOpInterface fn) {
    for (StringRef name : kNames) {
      auto sizes = fn->getAttrOfType<DenseI32ArrayAttr>(name);
      if (!sizes || llvm::all_of(sizes.asArrayRef(),
                                 [](int32_t size) { return size > 0; }))
        continue;
      fn->emitOpError() << "'" << name << "' must hold positive sizes, got ["
                        << sizes.asArrayRef() << "]";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

/// Checks that the targets of the gpu.module around the kvpipe op `op` have
/// the instructions the lowering emits.
LogicalResult checkKVPipeOpTargets(Operation *op) {
  auto module = op->getParentOfType<gpu::GPUModuleOp>();
  if (!module || !module.getTargetsAttr())
    return success();
  for (Attribute target : module.getTargetsAttr()) {
    auto nvvm = dyn_cast<NVVM::NVVMTargetAttr>(target);
    if (!nvvm)
      return op->emitOpError()
             << "lowers to NVVM, but its gpu.module targets " << target;
    StringRef name = nvvm.getChip();
    const NVPTXChip *chip = lookupChip(name);
    // A chip that is no "sm_<version>" NVPTX knows is as unusable as an
    // old one: NVPTX would select for sm_20 and fail the same way.
    if (!chip || chip->sm < 90) {
      InFlightDiagnostic diag =
          op->emitOpError() << "needs sm_90 or later (mbarrier transactions, "
                               "TMA, wgmma), but its gpu.module targets "
                            << name;
      if (!chip)
        diag << ", a chip NVPTX does not know";
      return diag;
    }
    unsigned ptx = requestedPTX(nvvm.getFeatures()).value_or(chip->minPTX);
    auto [required, what] = requiredPTX(op);
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE << ": " << op->getName() << " on "
                            << name << ": PTX ISA " << ptxString(ptx)
                            << ", needs " << ptxString(required) << "\n");
    if (ptx < required)
      return op->emitOpError()
             << "needs PTX ISA " << ptxString(required) << " or later ("
             << what << "), but its gpu.module targets " << name
             << " with PTX ISA " << ptxString(ptx) << ": add features = \"+ptx"
             << required << "\" (or later) to the target";
  }
  return success();
}

} // namespace

LogicalResult lowering::checkTargets(Operation *root) {
  WalkResult modules = root->walk([&](gpu::GPUModuleOp module) {
    return failed(checkModuleTargets(module)) ||
                   failed(checkModuleTopLevel(module)) ||
                   failed(checkLaunchBounds(module)) ||
                   failed(checkGlobalAddressSpaces(module)) ||
                   failed(checkInlineAsm(module)) ||
                   failed(checkModuleTypes(module))
               ? WalkResult::interrupt()
               : WalkResult::advance();
  });
  if (modules.wasInterrupted())
    return failure();
  WalkResult ops = root->walk([&](Operation *op) {
    if (!isa_and_nonnull<KVPipeDialect>(op->getDialect()))
      return WalkResult::advance();
    return failed(checkKVPipeOpTargets(op)) ? WalkResult::interrupt()
                                            : WalkResult::advance();
  });
  return failure(ops.wasInterrupted());
}

namespace {

struct CheckNVPTXTargets
    : kvpipe::impl::CheckNVPTXTargetsBase<CheckNVPTXTargets> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(lowering::checkTargets(getOperation())))
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
