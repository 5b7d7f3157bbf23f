//===- KVPipeInterfaces.td - kvpipe op interfaces ----------*- tablegen -*-===//
//
// What an op does in the producer/consumer protocol of a pipeline, asked of
// the op instead of spelled out as a chain of casts in each place that needs
// it: the protocol checker, the transaction analysis and the lowering.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_KVPIPEINTERFACES_TD
#define KVPIPE_DIALECT_KVPIPE_IR_KVPIPEINTERFACES_TD

include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"

/// The sides of a pipeline, as a bit set: an analysis collects the sides a
/// loop or a call works on as their union.
def KVPipe_PipelineSide : I32BitEnum<"PipelineSide",
    "the producer or the consumer side of a pipeline", [
      I32BitEnumCaseNone<"none">,
      I32BitEnumCaseBit<"producer", 0>,
      I32BitEnumCaseBit<"consumer", 1>
    ]> {
  let cppNamespace = "::kvpipe";
}

def KVPipe_PipelineProtocolOpInterface
    : OpInterface<"PipelineProtocolOpInterface"> {
  let cppNamespace = "::kvpipe";
  let description = [{
    An op that takes part in the producer/consumer protocol of a pipeline
    state: the waits (`producer_acquire`, `consumer_wait`), the arrivals
    (`producer_commit`, `consumer_release`), the barrier accessors
    (`producer_mbar`, `consumer_mbar`) and `step`. It says which state it
    works on, at which sub-stage, on which side, whether it opens or closes
    the slot's sub-stage, which of the slot's two barriers it uses, and the
    state it returns. The protocol checker, the transaction analysis and the
    lowering ask these questions of the interface, so that a new protocol op
    is followed by all of them once it implements it.

    A slot's sub-stage is opened by a wait and closed by the arrival of the
    same side: `producer_acquire` ... `producer_commit` on the producer side,
    `consumer_wait` ... `consumer_release` on the consumer side. A wait waits
    on the other side's barrier (the acquire on the consumers' "empty"
    barrier, the wait on the producer's "full" one), an arrival arrives on its
    own side's barrier.
  }];

  let methods = [
    InterfaceMethod<[{
        The pipeline state the op works on (its `pipeline` operand).
      }], "::mlir::Value", "getPipeline", (ins), [{
        return $_op.getPipeline();
      }]>,
    InterfaceMethod<[{
        The type of the pipeline state: its stages, producers and consumers.
      }], "::kvpipe::PipelineType", "getPipelineType", (ins), [{
        return ::llvm::cast<::kvpipe::PipelineType>(
            $_op.getPipeline().getType());
      }]>,
    InterfaceMethod<[{
        The sub-stage of the current slot the op refers to: its `qk_stage`
        or, when absent, `qk_stages - 1`. Nothing for an op that works on the
        whole slot (`step`).
      }], "std::optional<int64_t>", "getSubStage", (ins), [{}], [{
        return $_op.getStage();
      }]>,
    InterfaceMethod<[{
        The side of the pipeline the op belongs to: `producer` for
        `producer_acquire`, `producer_commit`, `producer_mbar` (the barrier
        the producer arrives on) and `step` (the producer advances with it;
        the consumers advance with `consumer_release`); `consumer` for
        `consumer_wait`, `consumer_release` and `consumer_mbar`.
      }], "::kvpipe::PipelineSide", "getSide">,
    InterfaceMethod<[{
        Whether the op opens the sub-stage of the slot on its side: it waits
        until the other side has finished with it (`producer_acquire`,
        `consumer_wait`).
      }], "bool", "opensSlot", (ins), [{}], [{ return false; }]>,
    InterfaceMethod<[{
        Whether the op closes the sub-stage of the slot on its side: it
        arrives on its side's barrier, handing the sub-stage to the other
        side (`producer_commit`, `consumer_release`).
      }], "bool", "closesSlot", (ins), [{}], [{ return false; }]>,
    InterfaceMethod<[{
        The side whose barrier of the slot's sub-stage the op waits on,
        arrives on or returns: an op that opens the sub-stage waits on the
        other side's barrier, any other on its own side's. `none` for `step`,
        which uses no barrier.
      }], "::kvpipe::PipelineSide", "getBarrierSide", (ins), [{}], [{
        ::kvpipe::PipelineSide side = $_op.getSide();
        if (!$_op.opensSlot())
          return side;
        return side == ::kvpipe::PipelineSide::producer
                   ? ::kvpipe::PipelineSide::consumer
                   : ::kvpipe::PipelineSide::producer;
      }]>,
    InterfaceMethod<[{
        The state the op returns (`step`, `consumer_release`), or null when
        it returns none.
      }], "::mlir::Value", "getResultState", (ins), [{}], [{
        return ::mlir::Value();
      }]>,
    InterfaceMethod<[{
        How many slots the returned state is ahead of the operand: 1 for
        `step` and for the `consumer_release` of the last sub-stage (which
        ends the slot), 0 otherwise (the release of an earlier sub-stage
        returns the same state as a new value).
      }], "int64_t", "getSlotsAdvanced", (ins), [{}], [{ return 0; }]>,
  ];
}

def KVPipe_AsyncSlotCopyOpInterface : OpInterface<"AsyncSlotCopyOpInterface"> {
  let cppNamespace = "::kvpipe";
  let description = [{
    An asynchronous copy from global into shared memory that completes on an
    mbarrier with `complete_tx` of the bytes it delivers: the producer's
    way of filling a pipeline slot (`tma_load`, `bulk_load`). The
    transaction analysis sums the bytes of the copies completing on a slot's
    barrier, and the protocol checker proves each copy's destination is the
    slot whose producer barrier it completes on (and exempts the copy from
    the read and write rules of the other shared-memory accesses); both ask
    these questions of the interface, so that a new copy op is followed by
    all of them once it implements it.
  }];

  let methods = [
    InterfaceMethod<[{
        The shared-memory destination (its `dest` operand).
      }], "::mlir::Value", "getDest", (ins), [{
        return $_op.getDest();
      }]>,
    InterfaceMethod<[{
        The destination operand, for analyses that follow operands.
      }], "::mlir::OpOperand &", "getDestMutable", (ins), [{
        return $_op.getDestMutable();
      }]>,
    InterfaceMethod<[{
        The mbarrier the copy completes on (its `mbarrier` operand).
      }], "::mlir::Value", "getMbarrier", (ins), [{
        return $_op.getMbarrier();
      }]>,
    InterfaceMethod<[{
        The bytes the copy delivers to its mbarrier: what the commit of the
        slot must expect for it.
      }], "int64_t", "getTransactionBytes">,
    InterfaceMethod<[{
        Whether the copy is multicast to other CTAs of the cluster (whose
        barriers then receive bytes this CTA's commit does not count).
      }], "bool", "isMulticast">,
  ];
}

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPEINTERFACES_TD
