//===- ProtocolTransactions.cpp - bytes and load slots --------------------===//
//
// Part of ProtocolChecker (ProtocolChecker.h).
//
//===----------------------------------------------------------------------===//

#include "ProtocolChecker.h"

using namespace mlir;
using namespace kvpipe;
using namespace kvpipe::detail;

//===----------------------------------------------------------------------===//
// 5. Transaction bytes
//===----------------------------------------------------------------------===//

Operation *ProtocolChecker::getFirstLoad(ProducerCommitOp commit,
                                         const SlotLoads &loads) {
  Block *block = commit->getBlock();
  Operation *first = nullptr, *firstAncestor = nullptr;
  for (const SlotLoads::Load &entry : loads.loads) {
    Operation *ancestor = block->findAncestorOpInBlock(*entry.site);
    if (!ancestor)
      continue;
    if (!first || ancestor->isBeforeInBlock(firstAncestor)) {
      first = entry.site;
      firstAncestor = ancestor;
    }
  }
  return first;
}

std::optional<int64_t> ProtocolChecker::evaluateAtIndex(Value value, Value slot,
                                                        int64_t index,
                                                        unsigned depth) {
  if (depth > 32)
    return std::nullopt;
  // The value must fit its type as a non-negative signed integer: an i8
  // `index * 129` wraps, and its `remsi` is then not the mathematical one,
  // nor is an index_cast to a narrower type the value itself.
  if (!value.getType().isIntOrIndex())
    return std::nullopt;
  unsigned width = value.getType().isIndex()
                       ? 64
                       : value.getType().getIntOrFloatBitWidth();
  auto fits = [&](std::optional<int64_t> v) -> std::optional<int64_t> {
    if (v && *v >= 0 && (width >= 64 || *v < (int64_t(1) << (width - 1))))
      return v;
    return std::nullopt;
  };
  return fits(evaluateAtIndexUnchecked(value, slot, index, depth));
}

std::optional<int64_t>
ProtocolChecker::evaluateAtIndexUnchecked(Value value, Value slot,
                                          int64_t index, unsigned depth) {
  if (std::optional<int64_t> constant = getConstantIntValue(value))
    return *constant;
  Operation *def = value.getDefiningOp();
  if (!def)
    return std::nullopt;
  if (auto indexOp = dyn_cast<IndexOp>(def)) {
    if (flow.isMixed(indexOp.getPipeline()) ||
        flow.getSlot(indexOp.getPipeline()) != slot)
      return std::nullopt;
    return index;
  }
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
          arith::ExtUIOp>(def))
    return evaluateAtIndex(def->getOperand(0), slot, index, depth + 1);
  if (def->getNumOperands() != 2 ||
      !isa<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::RemUIOp,
           arith::RemSIOp, arith::DivUIOp, arith::DivSIOp>(def))
    return std::nullopt;
  std::optional<int64_t> a =
      evaluateAtIndex(def->getOperand(0), slot, index, depth + 1);
  std::optional<int64_t> b =
      evaluateAtIndex(def->getOperand(1), slot, index, depth + 1);
  // Small non-negative values only: no wrap-around to think about.
  auto small = [](std::optional<int64_t> v) {
    return v && *v >= 0 && *v < (int64_t(1) << 20);
  };
  if (!small(a) || !small(b))
    return std::nullopt;
  return llvm::TypeSwitch<Operation *, std::optional<int64_t>>(def)
      .Case<arith::AddIOp>([&](auto) { return *a + *b; })
      .Case<arith::SubIOp>([&](auto) -> std::optional<int64_t> {
        if (*a < *b)
          return std::nullopt;
        return *a - *b;
      })
      .Case<arith::MulIOp>([&](auto) { return *a * *b; })
      .Default([&](Operation *) -> std::optional<int64_t> {
        if (*b == 0)
          return std::nullopt;
        return isa<arith::RemUIOp, arith::RemSIOp>(def) ? *a % *b : *a / *b;
      });
}

void ProtocolChecker::checkLoadSlots() {
  root->walk([&](AsyncSlotCopyOpInterface load) {
    auto mbar = load.getMbarrier().getDefiningOp<ProducerMBarOp>();
    if (!mbar)
      return; // a barrier passed in: not followed here
    int64_t stages = mbar.getPipelineType().getKvStages();
    if (stages == 1)
      return; // one slot: every fill is of slot 0
    Value state = mbar.getPipeline();
    if (flow.isMixed(state))
      return; // reported by rule 3
    Value slot = flow.getSlot(state);
    // The slot offsets of the destination, and whether it has views.
    ViewOffsets chain = getViewOffsets(load.getDest());
    bool viewed = chain.viewed;
    auto fromIndex = [&](Value offset) {
      Operation *unknown = nullptr;
      return !getSlotsOf(offset, 0, unknown).empty();
    };
    SmallVector<Value> offsets = llvm::filter_to_vector(chain.offsets, fromIndex);
    bool other = llvm::any_of(chain.linearOffsets, fromIndex);
    if (!viewed)
      return; // the destination is passed in: the caller's view
    // The indices the state can have.
    SmallVector<int64_t> indices;
    Operation *function = load->getParentOfType<FunctionOpInterface>();
    std::optional<StateAdvance> advance =
        function ? flow.traceAdvance(state, function) : std::nullopt;
    if (advance && advance->base.getDefiningOp<CreateOp>())
      indices.push_back(advance->slots % stages);
    else
      for (int64_t i = 0; i < stages; ++i)
        indices.push_back(i);
    // The slot offset must be the one position of the ring's slot
    // dimension (not two that add up, not under a shifted or reshaped view).
    if (!offsets.empty())
      if (std::optional<std::string> problem =
              getSlotAddressProblem(load.getDest(), {})) {
        InFlightDiagnostic diag =
            unproven(load)
            << "that the TMA load fills the ring slot of its barrier's state: "
            << *problem << where(state, mbar.getStage());
        diag.attachNote(mbar.getLoc()) << "the barrier";
        return;
      }
    if (offsets.empty()) {
      InFlightDiagnostic diag =
          unproven(load)
          << "that the TMA load fills the ring slot of its barrier's state: "
          << (other ? "its destination is addressed from a kvpipe.index "
                      "through a byte or linear offset, not a subview offset"
                    : "no offset of its destination is computed from the "
                      "state's kvpipe.index")
          << where(state, mbar.getStage());
      diag.attachNote(mbar.getLoc()) << "the barrier";
      return;
    }
    // A ring with fewer slots than the pipeline has stages: the slots past
    // its end are another buffer's bytes.
    for (auto view = load.getDest().getDefiningOp<memref::SubViewOp>(); view;
         view = view.getSource().getDefiningOp<memref::SubViewOp>()) {
      auto sourceType = view.getSource().getType();
      if (view.getMixedOffsets().empty() || sourceType.getRank() == 0)
        continue;
      auto first = dyn_cast<Value>(view.getMixedOffsets().front());
      if (!first || !llvm::is_contained(offsets, first) ||
          sourceType.isDynamicDim(0) || sourceType.getDimSize(0) >= stages)
        continue;
      InFlightDiagnostic diag =
          error(load) << "fills a ring of " << sourceType.getDimSize(0)
                      << " slot(s) at its state's slot, but the pipeline has "
                      << stages
                      << " (kv_stages): the slots past the ring's end are "
                         "other memory"
                      << where(state, mbar.getStage());
      diag.attachNote(mbar.getLoc()) << "the barrier";
      return;
    }
    for (Value v : offsets) {
      bool anyEqual = false, anyDifferent = false, unknown = false;
      int64_t example = -1, exampleIndex = -1;
      for (int64_t i : indices) {
        std::optional<int64_t> at = evaluateAtIndex(v, slot, i);
        if (!at) {
          unknown = true;
          break;
        }
        if (*at == i) {
          anyEqual = true;
        } else {
          anyDifferent = true;
          example = *at;
          exampleIndex = i;
        }
      }
      if (!unknown && !anyDifferent)
        continue;
      if (!unknown && !anyEqual) {
        InFlightDiagnostic diag =
            error(load)
            << "fills ring slot " << example
            << " while its barrier is of the state at slot " << exampleIndex
            << ": the consumers wait for a slot that never receives the "
               "data, and the load overwrites one they may still read"
            << where(state, mbar.getStage());
        diag.attachNote(mbar.getLoc()) << "the barrier";
        return;
      }
      InFlightDiagnostic diag =
          unproven(load)
          << "that the TMA load fills the ring slot of its barrier's state: "
          << (unknown ? "the destination's slot offset is not the "
                        "state's kvpipe.index"
                      : "the destination's slot offset differs from the "
                        "state's kvpipe.index at some slots")
          << where(state, mbar.getStage());
      diag.attachNote(mbar.getLoc()) << "the barrier";
      return;
    }
  });
}

void ProtocolChecker::checkTransactions() {
  // (load, site) pairs some commit counted.
  DenseSet<std::pair<Operation *, Operation *>> expected;
  DenseSet<std::pair<Value, int64_t>> uncounted;
  root->walk(
      [&](ProducerCommitOp commit) {
        // collectSlotLoads reports its own failures at the commit.
        FailureOr<SlotLoads> loads = collectSlotLoads(commit);
        if (failed(loads)) {
          hasErrors = true;
          uncounted.insert({commit.getPipeline(), commit.getStage()});
          return;
        }
        for (const SlotLoads::Load &entry : loads->loads)
          expected.insert({entry.load, entry.site});
        // A multicast copy lands in every CTA of its mask and completes on
        // each one's barrier at the same offset: this CTA's barrier receives
        // the bytes of its peers' multicast loads too, which depend on the
        // cluster rank and the masks, not on the loads of this slot.
        auto multicast = llvm::find_if(loads->loads, [](SlotLoads::Load entry) {
          return entry.load.isMulticast();
        });
        if (multicast != loads->loads.end()) {
          InFlightDiagnostic diag =
              unproven(commit)
              << "the bytes that complete on the producer barrier: a TMA load "
                 "of the slot is multicast, so the barrier of every CTA in its "
                 "mask also receives the copies its peers issue, which the "
                 "checker does not count (the commit expects only this CTA's "
                 "loads, "
              << loads->bytes << " bytes)"
              << where(commit.getPipeline(), commit.getStage());
          diag.attachNote(multicast->load.getLoc()) << "the multicast load";
          return;
        }
        Attribute recorded = commit->getAttr(kTransactionBytesAttrName);
        if (!recorded)
          return;
        auto bytes = dyn_cast<IntegerAttr>(recorded);
        if (!bytes) {
          error(commit) << "'" << kTransactionBytesAttrName
                        << "' must be an integer attribute, got " << recorded
                        << where(commit.getPipeline(), commit.getStage());
          return;
        }
        if (bytes.getValue().getSExtValue() == loads->bytes)
          return;
        InFlightDiagnostic diag =
            error(commit) << "expect_tx of " << bytes.getValue().getSExtValue()
                          << " bytes disagrees with the " << loads->bytes
                          << " bytes its TMA loads deliver"
                          << where(commit.getPipeline(), commit.getStage());
        if (Operation *first = getFirstLoad(commit, *loads))
          diag.attachNote(first->getLoc())
              << "the first of its " << loads->loads.size() << " TMA load(s)";
      });
  // Every load completes on a producer barrier that a commit counts it
  // on, at every call site of the helper that issues it.
  CallSites sites(root);
  root->walk([&](AsyncSlotCopyOpInterface load) {
    for (const BarrierOrigin &origin : getBarrierOrigins(load, sites)) {
      auto noteCalls = [&](InFlightDiagnostic &diag) {
        for (Operation *call : origin.calls)
          diag.attachNote(call->getLoc()) << "through this call";
      };
      if (origin.kind == BarrierOrigin::Kind::unknown) {
        InFlightDiagnostic diag =
            unproven(load) << "which barrier this TMA load completes on: "
                           << origin.reason
                           << " (a load is only proven on the producer "
                              "barrier of a slot, from "
                              "kvpipe.producer_mbar)";
        diag.attachNote(origin.lostAt->getLoc()) << "the barrier is lost here";
        noteCalls(diag);
        continue;
      }
      if (origin.kind == BarrierOrigin::Kind::consumer) {
        auto mbar = cast<ConsumerMBarOp>(origin.accessor);
        InFlightDiagnostic diag =
            error(load) << "completes on the consumer (empty) barrier: the "
                           "consumers never see the data land (they wait on "
                           "the producer barrier) and its bytes corrupt the "
                           "barrier the producer acquires the slot on"
                        << where(mbar.getPipeline(), mbar.getStage());
        diag.attachNote(mbar.getLoc()) << "the barrier";
        noteCalls(diag);
        continue;
      }
      auto mbar = cast<ProducerMBarOp>(origin.accessor);
      // The commit that counts the load is in the function of the load,
      // or of one of the calls that pass its barrier or its state down
      // (then the load is recorded at that function's call).
      if (expected.contains({load, load}) ||
          llvm::any_of(origin.calls,
                       [&](Operation *site) {
                         return expected.contains({load, site});
                       }) ||
          uncounted.contains({mbar.getPipeline(), mbar.getStage()}))
        continue;
      InFlightDiagnostic diag =
          error(load) << "completes on a barrier that no producer_commit "
                         "expects: the producer barrier"
                      << where(mbar.getPipeline(), mbar.getStage());
      diag.attachNote(mbar.getLoc()) << "the barrier";
      noteCalls(diag);
    }
  });
}
