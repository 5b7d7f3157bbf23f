//===- ProtocolSlotAliases.cpp - slots reached around the view chain ------===//
//
// Part of ProtocolChecker (ProtocolChecker.h).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecker.h"

#include "kvpipe/Support/UseWalk.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::detail;

//===----------------------------------------------------------------------===//
// 10. Aliases of slots: buffers that overlap a ring's slot at an offset not
// computed from a kvpipe.index, and addresses taken out of memrefs
//===----------------------------------------------------------------------===//

bool kvpipe::detail::takesAddressOut(Operation *op) {
  if (!llvm::any_of(op->getOperandTypes(), llvm::IsaPred<MemRefType>))
    return false;
  if (isa<memref::ExtractAlignedPointerAsIndexOp>(op))
    return true;
  if (isa<ViewLikeOpInterface, memref::ExtractStridedMetadataOp,
          memref::DimOp, memref::RankOp, memref::DeallocOp, CallOpInterface,
          arith::SelectOp>(op) ||
      isa_and_nonnull<KVPipeDialect>(op->getDialect()) ||
      op->hasTrait<OpTrait::IsTerminator>() || op->getNumRegions() != 0)
    return false;
  return llvm::none_of(op->getOperands(), [&](Value operand) {
    return isa<MemRefType>(operand.getType()) && accessesMemRef(op, operand);
  });
}

/// The static strides of `type`'s layout, and its offset (possibly dynamic).
static std::optional<std::pair<SmallVector<int64_t>, int64_t>>
getLayout(MemRefType type) {
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return std::nullopt;
  return std::make_pair(strides, offset);
}

/// The elements of `type`, in bytes from its element (0, ..., 0), over its
/// dimensions `from` and up: [low, high); nothing where a size or a stride
/// is dynamic.
static std::optional<std::pair<int64_t, int64_t>>
getExtentBytes(MemRefType type, unsigned from = 0) {
  std::optional<int64_t> bytes = getElementBytes(type);
  auto layout = getLayout(type);
  if (!bytes || !layout)
    return std::nullopt;
  int64_t low = 0, high = 0;
  for (unsigned d = from, e = type.getRank(); d < e; ++d) {
    int64_t size = type.getDimSize(d), stride = layout->first[d];
    if (ShapedType::isDynamic(size) || ShapedType::isDynamic(stride))
      return std::nullopt;
    if (size == 0)
      return std::make_pair(int64_t(0), int64_t(0));
    int64_t span;
    int64_t &end = stride < 0 ? low : high;
    if (llvm::MulOverflow(size - 1, stride, span) ||
        llvm::AddOverflow(end, span, end))
      return std::nullopt;
  }
  if (llvm::AddOverflow(high, int64_t(1), high) ||
      llvm::MulOverflow(low, *bytes, low) ||
      llvm::MulOverflow(high, *bytes, high))
    return std::nullopt;
  return std::make_pair(low, high);
}

/// `sum + factor * term`, nothing on overflow.
static std::optional<LinearExpr> plus(std::optional<LinearExpr> sum,
                                      const LinearExpr &term,
                                      int64_t factor = 1) {
  if (!sum || !sum->add(term, factor))
    return std::nullopt;
  return sum;
}

/// The function `value` is defined in.
static Operation *getFunctionOf(Value value) {
  Operation *op = value.getParentRegion()->getParentOp();
  return isa<FunctionOpInterface>(op)
             ? op
             : op->getParentOfType<FunctionOpInterface>().getOperation();
}

ProtocolChecker::Place ProtocolChecker::locate(Value memref, unsigned depth) {
  auto found = places.find(memref);
  if (found != places.end())
    return found->second;
  Place place;
  auto type = dyn_cast<MemRefType>(memref.getType());
  std::optional<int64_t> bytes = type ? getElementBytes(type) : std::nullopt;
  auto linear = [&](OpFoldResult value) {
    if (std::optional<int64_t> c = getConstantIntValue(value))
      return LinearExpr::ofConstant(*c);
    return arithmetic.getLinear(cast<Value>(value));
  };
  // A buffer: its aligned pointer is where it starts; its element
  // (0, ..., 0) is its layout's offset from there (unknown where dynamic:
  // then positions are taken from that element).
  auto asBuffer = [&](const void *buffer) {
    place.buffer = buffer;
    auto layout = type ? getLayout(type) : std::nullopt;
    int64_t first;
    if (bytes && layout && !ShapedType::isDynamic(layout->second) &&
        !llvm::MulOverflow(layout->second, *bytes, first)) {
      place.base = LinearExpr();
      place.first = LinearExpr::ofConstant(first);
    } else {
      place.first = LinearExpr();
    }
  };
  Operation *def = memref.getDefiningOp();
  if (!type || depth > 64) {
    // Not a ranked memref, or a chain too long: unknown.
  } else if (auto argument = dyn_cast<BlockArgument>(memref)) {
    if (isa_and_nonnull<FunctionOpInterface>(
            argument.getOwner()->getParentOp()) &&
        argument.getOwner()->isEntryBlock())
      asBuffer(argument.getAsOpaquePointer());
  } else if (isa<memref::AllocOp, memref::AllocaOp>(def)) {
    asBuffer(def);
  } else if (auto global = dyn_cast<memref::GetGlobalOp>(def)) {
    asBuffer(global.getNameAttr().getAsOpaquePointer());
  } else if (isa<gpu::DynamicSharedMemoryOp>(def)) {
    // Every dynamic_shared_memory op of a kernel, and of the helpers it
    // calls, is the CTA's one buffer.
    Operation *function = def->getParentOfType<FunctionOpInterface>();
    asBuffer(function ? getDynamicSharedMemoryOwner(function) : def);
  } else if (auto view = dyn_cast<memref::ViewOp>(def)) {
    // The source is a contiguous byte buffer: its element 0 is its start.
    Place source = locate(view.getSource(), depth + 1);
    place.buffer = source.buffer;
    place.first = plus(source.first, arithmetic.getLinear(view.getByteShift()));
    place.base = place.first;
  } else if (auto subview = dyn_cast<memref::SubViewOp>(def)) {
    Place source = locate(subview.getSource(), depth + 1);
    place.buffer = source.buffer;
    place.base = source.base;
    place.first = source.first;
    auto layout = getLayout(subview.getSourceType());
    for (auto [d, offset] : llvm::enumerate(subview.getMixedOffsets())) {
      int64_t factor;
      if (!layout || !bytes || ShapedType::isDynamic(layout->first[d]) ||
          llvm::MulOverflow(layout->first[d], *bytes, factor)) {
        place.first = std::nullopt;
        break;
      }
      place.first = plus(place.first, linear(offset), factor);
    }
  } else if (auto reinterpret = dyn_cast<memref::ReinterpretCastOp>(def)) {
    Place source = locate(reinterpret.getSource(), depth + 1);
    place.buffer = source.buffer;
    place.base = source.base;
    if (bytes)
      place.first =
          plus(source.base, linear(reinterpret.getMixedOffsets()[0]), *bytes);
  } else if (isa<memref::CastOp, memref::MemorySpaceCastOp,
                 memref::ExpandShapeOp, memref::CollapseShapeOp,
                 memref::TransposeOp>(def)) {
    place = locate(def->getOperand(0), depth + 1);
  } else if (auto metadata = dyn_cast<memref::ExtractStridedMetadataOp>(def)) {
    // The base buffer: a memref of one element at the aligned pointer.
    Place source = locate(metadata.getSource(), depth + 1);
    place.buffer = source.buffer;
    place.base = source.base;
    place.first = source.base;
  }
  places[memref] = place;
  return place;
}

Operation *ProtocolChecker::getDynamicSharedMemoryOwner(Operation *function) {
  if (!callSites)
    callSites.emplace(root);
  // The roots of the chains of calls to `function`: kernels (or functions
  // nothing calls).
  Operation *owner = nullptr;
  SmallPtrSet<Operation *, 8> seen;
  SmallVector<Operation *> work = {function};
  while (!work.empty()) {
    Operation *current = work.pop_back_val();
    if (!seen.insert(current).second)
      continue;
    ArrayRef<Operation *> calls = callSites->getCalls(current);
    if (calls.empty()) {
      if (owner && owner != current)
        return function;
      owner = current;
    }
    for (Operation *call : calls)
      if (auto caller = call->getParentOfType<FunctionOpInterface>())
        work.push_back(caller);
  }
  return owner ? owner : function;
}

SmallVector<ProtocolChecker::Footprint>
ProtocolChecker::getFootprints(Value memref, const void *&buffer,
                               bool address) {
  SmallVector<Footprint> footprints;
  buffer = locate(memref).buffer;
  Value current = memref;
  for (unsigned guard = 0; current && guard < 64; ++guard) {
    Place place = locate(current);
    auto type = cast<MemRefType>(current.getType());
    if (auto extent = getExtentBytes(type); extent && place.first) {
      std::optional<LinearExpr> low = plus(place.first,
                                           LinearExpr::ofConstant(extent->first));
      std::optional<LinearExpr> high = plus(
          place.first, LinearExpr::ofConstant(extent->second));
      if (low && high)
        footprints.push_back({*low, *high});
    }
    // A view lies inside the memref it is cut from (a reinterpret_cast
    // may address anything in its buffer). An address taken out of the
    // base buffer of extract_strided_metadata addresses the elements of
    // the memref it describes.
    Operation *def = current.getDefiningOp();
    if (isa_and_nonnull<memref::SubViewOp, memref::ViewOp, memref::CastOp,
                        memref::MemorySpaceCastOp, memref::ExpandShapeOp,
                        memref::CollapseShapeOp, memref::TransposeOp>(def) ||
        (address && isa_and_nonnull<memref::ExtractStridedMetadataOp>(def)))
      current = def->getOperand(0);
    else
      break;
  }
  return footprints;
}

void ProtocolChecker::collectRings() {
  auto add = [&](Value ring, Value offset, Operation *op) {
    const void *buffer = locate(ring).buffer;
    if (!buffer)
      return;
    Operation *unknown = nullptr;
    for (Value slot : getSlotsOf(offset, 0, unknown)) {
      Value pipeline = flow.getPipeline(slot);
      if (llvm::none_of(rings, [&](const Ring &known) {
            return known.ring == ring && known.pipeline == pipeline;
          }))
        rings.push_back({ring, buffer, slot, pipeline, op});
    }
  };
  root->walk([&](Operation *op) {
    if (auto subview = dyn_cast<memref::SubViewOp>(op)) {
      if (!subview.getMixedOffsets().empty())
        if (auto offset = dyn_cast<Value>(subview.getMixedOffsets().front()))
          add(subview.getSource(), offset, op);
      return;
    }
    // The ring indexed by the op's own indices (vector.load %ring[%slot, ...]).
    for (auto [position, operand] : llvm::enumerate(op->getOperands())) {
      if (!isa<MemRefType>(operand.getType()) || !accessesMemRef(op, operand))
        continue;
      SmallVector<Value> indices = getIndexOperands(op, position);
      if (!indices.empty())
        add(operand, indices.front(), op);
    }
  });
}

bool ProtocolChecker::isApart(const Footprint &a, const Footprint &b,
                              const PathFacts &facts) {
  for (auto [first, second] : {std::pair(&a, &b), std::pair(&b, &a)}) {
    // `second` starts at or after `first` ends.
    std::optional<LinearExpr> gap = plus(second->low, first->high, -1);
    if (gap && arithmetic.isNonNegative(*gap, facts, true))
      return true;
  }
  return false;
}

std::optional<SmallVector<int64_t>>
ProtocolChecker::getOverlappedSlots(ArrayRef<Footprint> footprints,
                                    const Ring &ring, const PathFacts &facts,
                                    bool *exact) {
  auto type = cast<MemRefType>(ring.ring.getType());
  Place place = locate(ring.ring);
  auto whole = getExtentBytes(type), slot = getExtentBytes(type, 1);
  auto layout = getLayout(type);
  std::optional<int64_t> bytes = getElementBytes(type);
  if (!place.first || !whole || !slot || !layout || !bytes ||
      type.getRank() == 0 || ShapedType::isDynamic(layout->first[0]))
    return std::nullopt;
  std::optional<LinearExpr> ringLow =
      plus(place.first, LinearExpr::ofConstant(whole->first));
  std::optional<LinearExpr> ringHigh =
      plus(place.first, LinearExpr::ofConstant(whole->second));
  if (!ringLow || !ringHigh)
    return std::nullopt;
  // Below the ring or above it.
  for (const Footprint &footprint : footprints)
    if (isApart(Footprint{*ringLow, *ringHigh}, footprint, facts))
      return SmallVector<int64_t>();
  // The slots the tightest range at a known distance from the ring overlaps
  // (exactly where that range is the memref's own).
  for (const Footprint &footprint : footprints) {
    if (exact)
      *exact = &footprint == &footprints.front();
    std::optional<LinearExpr> low = plus(footprint.low, *place.first, -1);
    std::optional<LinearExpr> high = plus(footprint.high, *place.first, -1);
    if (!low || !high || !low->isConstant() || !high->isConstant())
      continue;
    // Slot i spans [i s + slot.first, i s + slot.second) for the stride s:
    // it overlaps [low, high) for i in (low - slot.second, high - slot.first)
    // / s, computed rather than scanned (a ring may have 2^31 slots), and at
    // most kMaxNamedSlots of them listed (the diagnostics name them).
    static constexpr int64_t kMaxNamedSlots = 64;
    int64_t stride, below, above;
    if (llvm::MulOverflow(layout->first[0], *bytes, stride) || stride <= 0 ||
        llvm::SubOverflow(low->constant, slot->second, below) ||
        llvm::SubOverflow(high->constant, slot->first, above))
      return std::nullopt;
    int64_t first = std::max<int64_t>(llvm::divideFloorSigned(below, stride) + 1, 0);
    int64_t last = std::min<int64_t>(llvm::divideCeilSigned(above, stride) - 1,
                                     type.getDimSize(0) - 1);
    SmallVector<int64_t> slots;
    for (int64_t i = first; i <= last && int64_t(slots.size()) < kMaxNamedSlots;
         ++i)
      slots.push_back(i);
    return slots;
  }
  return std::nullopt;
}

PathFacts ProtocolChecker::getFactsAt(Operation *op) {
  PathFacts facts;
  for (Region *region = op->getParentRegion(); region;
       region = region->getParentRegion()) {
    arithmetic.addBranchFacts(region, facts, /*threadIds=*/true);
    if (isa<FunctionOpInterface>(region->getParentOp()))
      break;
  }
  return facts;
}

Value ProtocolChecker::getSlotAtPosition(Operation *op, Value pipeline,
                                         int64_t position) {
  auto function = op->getParentOfType<FunctionOpInterface>();
  if (!function)
    return Value();
  Value found;
  for (PipelineProtocolOpInterface protocol : getOpensAndClosesBefore(
           op, [&](Value state) { return flow.getPipeline(state) == pipeline; })) {
    Value state = protocol.getPipeline();
    int64_t stages = cast<PipelineType>(state.getType()).getKvStages();
    std::optional<StateAdvance> advance =
        flow.isMixed(state) ? std::nullopt
                            : flow.traceAdvance(state, function);
    if (stages != 1 && !(advance && advance->base.getDefiningOp<CreateOp>()))
      return Value();
    if ((stages == 1 ? 0 : advance->slots % stages) == position)
      found = flow.getSlot(state);
  }
  return found;
}

InitOp ProtocolChecker::getInitAfter(Operation *op, Value pipeline,
                                     Operation *&ancestor) {
  if (!initOfPipeline) {
    initOfPipeline.emplace();
    root->walk([&](InitOp init) {
      auto [at, first] =
          initOfPipeline->try_emplace(flow.getPipeline(init.getPipeline()), init);
      if (!first)
        at->second = InitOp(); // several: rule 2's error
    });
  }
  InitOp found = initOfPipeline->lookup(pipeline);
  if (!found)
    return InitOp();
  ancestor = found->getBlock()->findAncestorOpInBlock(*op);
  if (!ancestor || ancestor == found.getOperation() ||
      !ancestor->isBeforeInBlock(found))
    return InitOp();
  return found;
}

/// Whether `op` (or the op `ancestor` it is nested in) is followed by a
/// `fence.proxy.async` for shared memory before `init`, in the init's block:
/// then the tensor cores and TMA, which access the slots in the async
/// proxy, see its writes once the init's CTA barrier has passed.
static bool isFencedForAsyncProxy(Operation *ancestor, InitOp init) {
  for (Operation *next = ancestor->getNextNode(); next && next != init;
       next = next->getNextNode())
    if (ProtocolChecker::isAsyncProxyFence(next))
      return true;
  return false;
}

bool ProtocolChecker::isAsyncProxyFence(Operation *op) {
  auto fence = dyn_cast<NVVM::FenceProxyOp>(op);
  if (!fence)
    return false;
  NVVM::ProxyKind kind = fence.getKind();
  std::optional<NVVM::SharedSpace> space = fence.getSpace();
  return kind == NVVM::ProxyKind::async ||
         (kind == NVVM::ProxyKind::async_shared &&
          (!space || *space == NVVM::SharedSpace::shared_cta));
}

void ProtocolChecker::checkAliasedAccess(Operation *op, Value memref) {
  const void *buffer = nullptr;
  SmallVector<Footprint> footprints = getFootprints(memref, buffer, false);
  if (!buffer)
    return; // a view the walk does not follow: checkSlotAccesses
  std::optional<PathFacts> facts;
  for (const Ring &ring : rings) {
    if (ring.buffer != buffer)
      continue;
    // A TMA load into its own pipeline's ring: rule 7 (checkLoadSlots).
    if (auto load = dyn_cast<AsyncSlotCopyOpInterface>(op)) {
      auto mbar = load.getMbarrier().getDefiningOp<ProducerMBarOp>();
      if (mbar && flow.getPipeline(mbar.getPipeline()) == ring.pipeline)
        continue;
    }
    if (!facts)
      facts = getFactsAt(op);
    bool exact = false;
    std::optional<SmallVector<int64_t>> slots =
        getOverlappedSlots(footprints, ring, *facts, &exact);
    if (slots && slots->empty())
      continue;
    // Before the pipeline exists (the ones blocks of the forward's
    // tensor_row_sums, written between its V slots' blocks): no state holds
    // a slot, and the init's CTA barrier orders the access before the
    // states' accesses, in the async proxy once a fence follows a write.
    // Only plain loads and stores, which are complete when the init's
    // barrier passes (a TMA copy, cp.async, a wgmma or a helper may still be
    // in flight), and not in a kvpipe.tile region, which the persistent
    // rewrite runs again in every role's tile loop, after the init.
    bool synchronous =
        isa<memref::LoadOp, memref::StoreOp, vector::LoadOp, vector::StoreOp,
            vector::MaskedLoadOp, vector::MaskedStoreOp,
            vector::TransferReadOp, vector::TransferWriteOp>(op) &&
        !op->getParentOfType<TileOp>();
    Operation *ancestor = nullptr;
    if (InitOp init = synchronous ? getInitAfter(op, ring.pipeline, ancestor)
                                  : InitOp()) {
      bool writes = !cast<MemoryEffectOpInterface>(op)
                         .onlyHasEffect<MemoryEffects::Read>();
      if (!writes || isFencedForAsyncProxy(ancestor, init))
        continue;
      if (!reportedSlotOffsets.insert(op).second)
        return;
      InFlightDiagnostic diag =
          unproven(op)
          << "that the tensor cores and TMA see what the op writes into "
             "ring slots before the pipeline's kvpipe.init: no "
             "fence.proxy.async for shared memory follows it before the init"
          << where(ring.slot);
      diag.attachNote(init.getLoc()) << "the kvpipe.init";
      return;
    }
    // One slot, which the last state of the pipeline at that position holds:
    // an access of that state's slot.
    if (slots && exact && slots->size() == 1 &&
        !isa<WarpgroupMmaOp, AsyncSlotCopyOpInterface>(op))
      if (Value slot = getSlotAtPosition(op, ring.pipeline, slots->front())) {
        checkSlotAccess(op, slot);
        if (isAsyncSlotAccess(op))
          checkStoreRetired(op, slot);
        continue;
      }
    if (!reportedSlotOffsets.insert(op).second)
      return;
    bool mma = isa<WarpgroupMmaOp>(op);
    InFlightDiagnostic diag = unproven(op);
    auto nameSlots = [&]() {
      diag << "ring slot" << (slots->size() == 1 ? " " : "s ");
      llvm::interleaveComma(*slots, diag);
    };
    if (slots && exact) {
      diag << "which ring slot " << (mma ? "the wgmma reads" : "the op accesses")
           << ": its address overlaps ";
      nameSlots();
      diag << " at an offset not computed from a kvpipe.index, and which "
              "state holds "
           << (slots->size() == 1 ? "that slot" : "those slots")
           << " when it runs is not known";
    } else {
      diag << "that " << (mma ? "the wgmma" : "the op")
           << " does not access a ring slot: its address may overlap ";
      if (slots)
        nameSlots();
      else
        diag << "a ring";
      diag << ", and where it lies relative to the ring's slots is not known";
    }
    diag << where(ring.slot);
    diag.attachNote(ring.indexedAt->getLoc())
        << "the ring, whose slot a kvpipe.index selects here";
    return;
  }
}

/// Whether operand `number` of `user` is an index of a memref it accesses
/// (it comes after that memref: `vector.load %buffer[%i]`).
static bool isIndexOfAccess(Operation *user, unsigned number) {
  if (!user->getOperand(number).getType().isIndex())
    return false;
  for (unsigned i = 0; i < number; ++i)
    if (isa<MemRefType>(user->getOperand(i).getType()) &&
        accessesMemRef(user, user->getOperand(i)))
      return true;
  return false;
}

/// The first use of `address` (an address taken out of a memref) that may
/// load or store through it: anything but integer arithmetic on it, the
/// offsets and sizes of views, the indices of accesses and the conditions of
/// `scf.if`. Null where there is none (the generated kernels align their
/// buffers in the dynamic shared memory by its address).
static Operation *findAddressUse(Value address) {
  OpOperand *use = findUseTransitively(address, [](OpOperand &use) {
    Operation *user = use.getOwner();
    unsigned number = use.getOperandNumber();
    if (isa<ViewLikeOpInterface>(user) || isIndexOfAccess(user, number) ||
        (isa<scf::IfOp>(user) && number == 0))
      return UseStep::Skip;
    if (user->getNumRegions() == 0 && isMemoryEffectFree(user) &&
        llvm::all_of(user->getResultTypes(),
                     [](Type type) { return type.isIntOrIndex(); }))
      return UseStep::Follow;
    return UseStep::Stop;
  });
  return use ? use->getOwner() : nullptr;
}

void ProtocolChecker::checkAddressTaken(Operation *op, Value memref) {
  if (reportedSlotOffsets.contains(op))
    return;
  const void *buffer = nullptr;
  SmallVector<Footprint> footprints = getFootprints(memref, buffer, true);
  Operation *function = getFunctionOf(memref);
  std::optional<PathFacts> facts;
  // A ring its memref may overlap: one of its buffer it is not shown apart
  // from; where its buffer is not known, any ring of the function.
  const Ring *overlapped = nullptr;
  for (const Ring &ring : rings) {
    if (buffer ? ring.buffer != buffer : getFunctionOf(ring.ring) != function)
      continue;
    if (!facts)
      facts = getFactsAt(op);
    std::optional<SmallVector<int64_t>> slots =
        buffer ? getOverlappedSlots(footprints, ring, *facts) : std::nullopt;
    if (slots && slots->empty())
      continue;
    overlapped = &ring;
    break;
  }
  if (!overlapped)
    return;
  Operation *use = nullptr;
  if (isa<memref::ExtractAlignedPointerAsIndexOp>(op)) {
    use = findAddressUse(op->getResult(0));
    if (!use)
      return;
  }
  reportedSlotOffsets.insert(op);
  InFlightDiagnostic diag =
      unproven(op) << "that no ring slot is accessed through the address "
                      "this op takes out of a memref: the memref may overlap "
                      "a ring, and loads and stores through the address are "
                      "not checked against the pipeline's waits and releases"
                   << where(overlapped->slot);
  if (use)
    diag.attachNote(use->getLoc())
        << "the address is used here ('" << use->getName() << "')";
  diag.attachNote(overlapped->indexedAt->getLoc())
      << "the ring, whose slot a kvpipe.index selects here";
}

/// Whether `offset` is a kvpipe.index (through integer casts): the offset
/// of a ring's slot, whose extent along the slot dimension is 1.
static bool isSlotIndex(Value offset) {
  for (unsigned guard = 0; offset && guard < 16; ++guard) {
    Operation *def = offset.getDefiningOp();
    if (isa_and_nonnull<IndexOp>(def))
      return true;
    if (!isa_and_nonnull<arith::IndexCastOp, arith::IndexCastUIOp,
                         arith::ExtUIOp, arith::ExtSIOp>(def))
      return false;
    offset = def->getOperand(0);
  }
  return false;
}

/// How far `op`'s access of its memref operand at `position` reaches along
/// the memref's dimension `dim` from its index there: the vector's extent
/// where a dimension of the vector walks it (the trailing dimensions of a
/// vector.load or store, the permutation map's of a transfer), else 1.
static int64_t getAccessExtent(Operation *op, unsigned position, unsigned dim) {
  auto memref = cast<MemRefType>(op->getOperand(position).getType());
  if (auto transfer = dyn_cast<VectorTransferOpInterface>(op)) {
    for (auto [index, result] :
         llvm::enumerate(transfer.getPermutationMap().getResults()))
      if (auto d = dyn_cast<AffineDimExpr>(result); d && d.getPosition() == dim)
        return transfer.getVectorType().getDimSize(index);
    return 1;
  }
  VectorType vector;
  for (Type type : llvm::concat<Type>(op->getResultTypes(), op->getOperandTypes()))
    if ((vector = dyn_cast<VectorType>(type)))
      break;
  if (!vector || isa<vector::GatherOp, vector::ScatterOp>(op))
    return 1;
  int64_t first = memref.getRank() - vector.getRank();
  if (int64_t(dim) < first || vector.isScalable())
    return 1;
  return vector.getDimSize(dim - first);
}

void ProtocolChecker::checkSlotExtents() {
  auto report = [&](Operation *op, Value offset, int64_t extent,
                    StringRef what) {
    Operation *unknown = nullptr;
    SmallVector<Value> slots = getSlotsOf(offset, 0, unknown);
    if (slots.empty())
      return;
    error(op) << what << " " << extent
              << " along the slot dimension of a ring, from the slot of a "
                 "kvpipe.index: it reaches slot + 1, which the state does "
                 "not hold"
              << where(slots.front());
  };
  root->walk([&](Operation *op) {
    if (auto subview = dyn_cast<memref::SubViewOp>(op)) {
      if (subview.getMixedOffsets().empty())
        return;
      auto offset = dyn_cast<Value>(subview.getMixedOffsets().front());
      if (!offset || !isSlotIndex(offset))
        return;
      std::optional<int64_t> size =
          getConstantIntValue(subview.getMixedSizes().front());
      if (!size) {
        Operation *unknown = nullptr;
        SmallVector<Value> slots = getSlotsOf(offset, 0, unknown);
        if (!slots.empty())
          unproven(op) << "that the view stays in its slot: its size along "
                          "the slot dimension of a ring is not a constant"
                       << where(slots.front());
        return;
      }
      if (*size > 1)
        report(op, offset, *size, "takes a view of size");
      return;
    }
    for (auto [position, operand] : llvm::enumerate(op->getOperands())) {
      if (!isa<MemRefType>(operand.getType()) || !accessesMemRef(op, operand))
        continue;
      SmallVector<Value> indices = getIndexOperands(op, position);
      if (indices.empty() || !isSlotIndex(indices.front()))
        continue;
      int64_t extent = getAccessExtent(op, position, 0);
      if (extent > 1)
        report(op, indices.front(), extent, "accesses");
    }
  });
}

void ProtocolChecker::checkSlotAliases() {
  collectRings();
  checkSlotExtents();
  if (rings.empty())
    return;
  checkRingsApart();
  root->walk([&](Operation *op) {
    if (isa<ViewLikeOpInterface>(op))
      return;
    // Whether the address of the memref operand at `position` is computed
    // from a kvpipe.index (rules 7 to 9 check it).
    auto indexed = [&](unsigned position) {
      Operation *unknown = nullptr;
      if (!getSlotsRead(op->getOperand(position), unknown).empty())
        return true;
      return llvm::any_of(getIndexOperands(op, position), [&](Value index) {
        return !getSlotsOf(index, 0, unknown).empty();
      });
    };
    auto check = [&](OpOperand &operand) {
      if (isa<MemRefType>(operand.get().getType()) &&
          !indexed(operand.getOperandNumber()))
        checkAliasedAccess(op, operand.get());
    };
    if (auto mma = dyn_cast<WarpgroupMmaOp>(op)) {
      check(mma.getAMutable());
      check(mma.getBMutable());
      return;
    }
    if (auto load = dyn_cast<AsyncSlotCopyOpInterface>(op)) {
      check(load.getDestMutable());
      return;
    }
    if (auto call = dyn_cast<CallOpInterface>(op)) {
      std::optional<bool> accesses;
      for (OpOperand &operand : call.getArgOperandsMutable()) {
        if (!isa<MemRefType>(operand.get().getType()))
          continue;
        if (!accesses)
          accesses = mayAccessSharedMemory(flow.resolveCallee(call));
        if (*accesses)
          check(operand);
      }
      return;
    }
    for (OpOperand &operand : op->getOpOperands()) {
      if (!isa<MemRefType>(operand.get().getType()))
        continue;
      if (accessesMemRef(op, operand.get()))
        check(operand);
      else if (takesAddressOut(op))
        checkAddressTaken(op, operand.get());
    }
  });
}
