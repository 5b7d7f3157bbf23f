//===- TargetCheck.cpp - NVVM targets the lowering can compile for --------===//
//
// kvpipe lowers to sm_90 instructions that need PTX ISA 8.0 (mbarrier
// transaction counts, fence.mbarrier_init, TMA, wgmma). The NVPTX backend
// does not report a target it cannot serve, it aborts: on an explicit PTX
// version older than the chip needs ("LLVM ERROR: PTX version ... does not
// support target"), and on an instruction the chip or the PTX version lacks
// ("LLVM ERROR: Cannot select"). A chip name it does not know is ignored
// with a warning, and code is then selected for sm_20. The checks here turn
// each of those into a diagnostic before anything reaches NVPTX.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

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

/// The PTX ISA that mbarrier transaction counts, fence.mbarrier_init, TMA
/// and wgmma need.
constexpr unsigned kKVPipePTX = 80;

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
    if (ptx < kKVPipePTX)
      return op->emitOpError()
             << "needs PTX ISA " << ptxString(kKVPipePTX)
             << " or later (mbarrier transactions, fence.mbarrier_init, TMA, "
                "wgmma), but its gpu.module targets "
             << name << " with PTX ISA " << ptxString(ptx)
             << ": add features = \"+ptx" << kKVPipePTX
             << "\" (or later) to the target";
  }
  return success();
}

} // namespace

LogicalResult lowering::checkTargets(Operation *root) {
  WalkResult modules = root->walk([&](gpu::GPUModuleOp module) {
    return failed(checkModuleTargets(module)) ? WalkResult::interrupt()
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
