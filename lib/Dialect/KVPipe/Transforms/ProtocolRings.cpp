//===- ProtocolRings.cpp - rings apart from each other --------------------===//
//
// Part of ProtocolChecker (ProtocolChecker.h).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecker.h"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::detail;

//===----------------------------------------------------------------------===//
// 12. Rings apart: the buffers TMA and cp.async fill through a pipeline's
// slots share no bytes with another ring
//===----------------------------------------------------------------------===//

/// Whether `op` writes a ring slot asynchronously on behalf of a pipeline:
/// a TMA load or bulk copy (AsyncSlotCopyOpInterface) or a cp.async copy.
static bool fillsSlot(Operation *op) {
  return isa<AsyncSlotCopyOpInterface, nvgpu::DeviceAsyncCopyOp,
             NVVM::CpAsyncOp>(op);
}

/// The memref an async copy writes.
static Value getFilledMemRef(Operation *op) {
  if (auto load = dyn_cast<AsyncSlotCopyOpInterface>(op))
    return load.getDest();
  if (auto copy = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op))
    return copy.getDst();
  return Value(); // nvvm.cp.async takes a pointer: rule 10 reports it
}

std::optional<ProtocolChecker::RingBytes>
ProtocolChecker::getRingBytes(const Ring &ring) {
  auto type = cast<MemRefType>(ring.ring.getType());
  Place place = locate(ring.ring);
  std::optional<int64_t> bytes = getElementBytes(type);
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!place.first || !bytes || type.getRank() == 0 ||
      failed(type.getStridesAndOffset(strides, offset)))
    return std::nullopt;
  // [low, high) over all dimensions, and one slot's extent (dimensions 1
  // and up) from the slot's start.
  int64_t low = 0, high = 0, slotHigh = 0;
  for (unsigned d = 0, e = type.getRank(); d < e; ++d) {
    int64_t size = type.getDimSize(d), stride = strides[d];
    if (ShapedType::isDynamic(size) || ShapedType::isDynamic(stride) ||
        stride < 0 || size <= 0)
      return std::nullopt;
    int64_t span;
    if (llvm::MulOverflow(size - 1, stride, span) ||
        llvm::AddOverflow(high, span, high) ||
        (d > 0 && llvm::AddOverflow(slotHigh, span, slotHigh)))
      return std::nullopt;
  }
  RingBytes result;
  int64_t slotStride;
  if (llvm::AddOverflow(high, int64_t(1), high) ||
      llvm::AddOverflow(slotHigh, int64_t(1), slotHigh) ||
      llvm::MulOverflow(high, *bytes, high) ||
      llvm::MulOverflow(slotHigh, *bytes, slotHigh) ||
      llvm::MulOverflow(strides[0], *bytes, slotStride))
    return std::nullopt;
  result.low = *place.first;
  result.high = *place.first;
  if (!result.low.add(LinearExpr::ofConstant(low)) ||
      !result.high.add(LinearExpr::ofConstant(high)))
    return std::nullopt;
  result.slotStride = slotStride;
  result.slotBytes = slotHigh;
  return result;
}

/// The function-entry argument whose pipeline `pipeline` is, if any.
static BlockArgument getReceivedPipeline(PipelineFlow &flow, Value pipeline) {
  for (Value state : flow.getStates())
    if (auto argument = dyn_cast<BlockArgument>(state))
      if (argument.getOwner()->isEntryBlock() &&
          isa_and_nonnull<FunctionOpInterface>(
              argument.getOwner()->getParentOp()) &&
          flow.getPipeline(argument) == pipeline)
        return argument;
  return {};
}

ProtocolChecker::Sameness ProtocolChecker::comparePipelines(Value a, Value b,
                                                            unsigned depth) {
  if (a == b)
    return Sameness::same;
  bool createdA = static_cast<bool>(a.getDefiningOp<CreateOp>());
  bool createdB = static_cast<bool>(b.getDefiningOp<CreateOp>());
  if (createdA && createdB)
    return Sameness::different;
  BlockArgument argA = createdA ? BlockArgument() : getReceivedPipeline(flow, a);
  BlockArgument argB = createdB ? BlockArgument() : getReceivedPipeline(flow, b);
  // Two pipelines one helper receives: what each call passes.
  if (!argA || !argB || argA.getOwner() != argB.getOwner() || depth > 8)
    return Sameness::unknown;
  auto function = cast<FunctionOpInterface>(argA.getOwner()->getParentOp());
  std::optional<Sameness> result;
  for (CallOpInterface call : flow.getCallSites(function)) {
    Sameness atCall = comparePipelines(
        flow.getPipeline(call.getArgOperands()[argA.getArgNumber()]),
        flow.getPipeline(call.getArgOperands()[argB.getArgNumber()]),
        depth + 1);
    if (atCall == Sameness::unknown || (result && *result != atCall))
      return Sameness::unknown;
    result = atCall;
  }
  return result.value_or(Sameness::unknown);
}

void ProtocolChecker::checkRingsApart() {
  // The rings async copies fill: a ring value on the view chain of a copy's
  // destination, and the first such copy (reported at).
  llvm::MapVector<unsigned, Operation *> filled;
  root->walk([&](Operation *op) {
    if (!fillsSlot(op))
      return;
    Value current = getFilledMemRef(op);
    for (unsigned guard = 0; current && guard < 64; ++guard) {
      for (auto [i, ring] : llvm::enumerate(rings))
        if (ring.ring == current)
          filled.insert({unsigned(i), op});
      SmallVector<Value> offsets;
      current = stepView(current.getDefiningOp(), offsets, offsets);
    }
  });
  PathFacts facts;
  DenseSet<std::pair<unsigned, unsigned>> compared;
  for (auto [i, fill] : filled) {
    const Ring &mine = rings[i];
    for (auto [j, other] : llvm::enumerate(rings)) {
      // Rings of different pipelines are compared where both pipelines are
      // kvpipe.create ops, or two pipelines a helper receives that every
      // call passes different creates for (two a helper receives may be
      // one pipeline: where the calls do not tell, unproven).
      if (j == i || other.buffer != mine.buffer ||
          !compared.insert({std::min<unsigned>(i, j), std::max<unsigned>(i, j)})
               .second)
        continue;
      auto report = [&](bool proven) {
        InFlightDiagnostic diag = proven ? error(fill) : unproven(fill);
        if (!proven)
          diag << "that the ring this op fills is apart from the other rings "
                  "in its buffer: ";
        else
          diag << "fills a ring that shares bytes with ";
        return std::move(diag);
      };
      auto noteOther = [&](InFlightDiagnostic &diag) {
        diag.attachNote(other.indexedAt->getLoc())
            << "the other ring, whose slot a kvpipe.index selects here ("
            << flow.describe(other.slot) << ")";
      };
      // A state the flow rules cannot follow (a merge of pipelines) is
      // reported there.
      auto followed = [&](Value pipeline) {
        return pipeline.getDefiningOp<CreateOp>() ||
               getReceivedPipeline(flow, pipeline);
      };
      if (mine.pipeline != other.pipeline &&
          (!followed(mine.pipeline) || !followed(other.pipeline)))
        continue;
      Sameness sameness =
          comparePipelines(mine.pipeline, other.pipeline, /*depth=*/0);
      bool onePipeline = sameness == Sameness::same;
      if (sameness == Sameness::unknown) {
        InFlightDiagnostic diag = report(false);
        diag << "the other ring, in the same buffer, is of a pipeline that "
                "may or may not be this one (pipelines a helper receives, "
                "which its calls do not tell apart)"
             << where(mine.slot);
        noteOther(diag);
        continue;
      }
      // One buffer, two pipelines: each pipeline's slot i is the same bytes.
      if (!onePipeline && mine.ring == other.ring) {
        InFlightDiagnostic diag = report(true);
        diag << "the ring of another pipeline: both pipelines' kvpipe.index "
                "select slots of the same buffer, so one pipeline's copies "
                "overwrite slots the other's consumers may still read"
             << where(mine.slot);
        noteOther(diag);
        continue;
      }
      std::optional<RingBytes> a = getRingBytes(mine), b = getRingBytes(other);
      if (!a || !b) {
        InFlightDiagnostic diag = report(false);
        diag << "where " << (a ? "the other ring" : "this ring")
             << " lies in the buffer is not known (a dynamic size, stride or "
                "offset the checker does not evaluate)"
             << where(mine.slot);
        noteOther(diag);
        continue;
      }
      if (isApart(Footprint{a->low, a->high}, Footprint{b->low, b->high},
                  facts))
        continue;
      LinearExpr distance = b->low;
      bool constant = distance.add(a->low, -1) && distance.isConstant();
      // The same ring seen twice for one pipeline (two views of it, or views
      // of parts of each slot, K's and V's tiles of one slot): the same slot
      // stride, and slot i of both lies within one stride's window, so that
      // slot i of one overlaps no other slot of the other.
      if (constant && onePipeline && a->slotStride == b->slotStride &&
          a->slotStride > 0) {
        int64_t d = distance.constant;
        int64_t from = std::min<int64_t>(0, d);
        int64_t to = std::max<int64_t>(a->slotBytes, d + b->slotBytes);
        if (to - from <= a->slotStride)
          continue;
      }
      InFlightDiagnostic diag = report(constant);
      if (constant) {
        diag << (onePipeline ? "another ring of its pipeline"
                     : "the ring of another pipeline")
             << ": its bytes [0, " << a->high.constant - a->low.constant
             << ") and the other ring's [" << distance.constant << ", "
             << distance.constant + b->high.constant - b->low.constant
             << ") overlap (relative to this ring's start), so a copy into "
                "one ring overwrites a slot of the other that a consumer "
                "may still read";
      } else {
        diag << "the other ring starts at " << arithmetic.print(b->low)
             << " and this one at " << arithmetic.print(a->low)
             << " in the buffer, which the checker cannot show far enough "
                "apart";
      }
      diag << where(mine.slot);
      noteOther(diag);
    }
  }
}
