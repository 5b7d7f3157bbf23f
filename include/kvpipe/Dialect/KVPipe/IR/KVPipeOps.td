//===- KVPipeOps.td - kvpipe pipeline ops ------------------*- tablegen -*-===//
//
// The core ops: the ring of barriers, its state, and the producer/consumer
// protocol on it. Data-path ops (TMA, wgmma) live in KVPipeDataOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_KVPIPEOPS_TD
#define KVPIPE_DIALECT_KVPIPE_IR_KVPIPEOPS_TD

include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.td"
include "kvpipe/Dialect/KVPipe/IR/KVPipeInterfaces.td"
include "kvpipe/Dialect/KVPipe/IR/KVPipeTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

/// The mbarriers of all pipelines. `create` allocates from it, so two
/// `create`s are never merged by CSE.
def KVPipe_BarrierResource : Resource<"::kvpipe::BarrierResource">;

/// Waits and arrivals order every memory access around them: a wait must not
/// be reordered with the shared-memory reads it protects, nor an arrival with
/// the reads or writes that precede it. They therefore read and write the
/// default resource, like a fence, and no pass may drop or move them.
defvar KVPipe_SyncEffects = MemoryEffects<[MemRead, MemWrite]>;

/// The optional sub-stage attribute; absent means `qk_stages - 1`.
defvar KVPipe_QKStageAttr = OptionalAttr<I32Attr>;

/// An op on a sub-stage of the current slot. Each one takes part in the
/// protocol: it lists KVPipe_PipelineProtocolOpInterface among its traits,
/// declaring the methods that say what it does there.
class KVPipe_StagedOp<string mnemonic, list<Trait> traits = []>
    : KVPipe_Op<mnemonic, traits> {
  code stagedDecl = [{
    /// The sub-stage this op refers to: `qk_stage` or, when absent,
    /// `qk_stages - 1` as in the seed.
    int64_t getStage() {
      if (std::optional<uint32_t> s = getQkStage())
        return static_cast<int32_t>(*s);
      return getPipelineType().getQkStages() - 1;
    }
    ::kvpipe::PipelineType getPipelineType() {
      return ::llvm::cast<::kvpipe::PipelineType>(getPipeline().getType());
    }
  }];
  let extraClassDeclaration = stagedDecl;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// State creation and initialisation
//===----------------------------------------------------------------------===//

def KVPipe_CreateOp : KVPipe_Op<"create",
    [MemoryEffects<[MemAlloc<KVPipe_BarrierResource>]>]> {
  let summary = "reserve the barriers of a pipeline; the initial state";
  let description = [{
    Reserves the `2 * kv_stages * qk_stages` mbarriers of the pipeline in
    shared memory (8 bytes each, 8-byte aligned, one allocation per op) and
    returns the initial state: index 0, phase 0. The barriers are not yet
    initialised; every thread of the CTA must then execute `kvpipe.init`.

    ```mlir
    %p = kvpipe.create : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1,
                                           producers = 1, consumers = 2>
    ```
  }];
  let results = (outs KVPipe_PipelineType:$pipeline);
  let assemblyFormat = "attr-dict `:` qualified(type($pipeline))";
}

def KVPipe_InitOp : KVPipe_Op<"init", [KVPipe_SyncEffects]> {
  let summary = "initialise the barriers of a pipeline (whole CTA)";
  let description = [{
    Executed by every thread of the CTA: one elected thread initialises the
    producer barriers `mbar[0 .. num_stages)` with arrival count `producers`
    and the consumer barriers `mbar[num_stages .. 2*num_stages)` with
    `consumers`, then `fence.mbarrier_init` makes the initialisation visible
    to the async proxy (TMA) and a CTA barrier to the other threads.

    ```mlir
    kvpipe.init %p : !kvpipe.pipeline<kv_stages = 2, qk_stages = 1,
                                       producers = 1, consumers = 2>
    ```
  }];
  let arguments = (ins KVPipe_PipelineType:$pipeline);
  let assemblyFormat = "$pipeline attr-dict `:` qualified(type($pipeline))";
}

//===----------------------------------------------------------------------===//
// Barrier accessors
//===----------------------------------------------------------------------===//

def KVPipe_ProducerMBarOp : KVPipe_StagedOp<"producer_mbar", [Pure,
    DeclareOpInterfaceMethods<KVPipe_PipelineProtocolOpInterface>]> {
  let summary = "the producer (full) barrier of the current slot";
  let description = [{
    `mbar[qk_stages * state.index + qk_stage]`: the barrier on which the
    producer's data for the current slot's sub-stage lands. TMA loads that
    fill the slot complete on it.

    ```mlir
    %b = kvpipe.producer_mbar %p stage 0 : !kvpipe.pipeline<...>
    ```
  }];
  let arguments = (ins KVPipe_PipelineType:$pipeline,
                       KVPipe_QKStageAttr:$qk_stage);
  let results = (outs KVPipe_MBarrierType:$mbarrier);
  let assemblyFormat =
      "$pipeline (`stage` $qk_stage^)? attr-dict `:` qualified(type($pipeline))";
}

def KVPipe_ConsumerMBarOp : KVPipe_StagedOp<"consumer_mbar", [Pure,
    DeclareOpInterfaceMethods<KVPipe_PipelineProtocolOpInterface>]> {
  let summary = "the consumer (empty) barrier of a slot";
  let description = [{
    `mbar[qk_stages * idx + qk_stage + num_stages]`: the barrier on which the
    consumers release slot `idx` (default: the state's current index).

    ```mlir
    %b = kvpipe.consumer_mbar %p [%i] stage 1 : !kvpipe.pipeline<...>
    ```
  }];
  let arguments = (ins KVPipe_PipelineType:$pipeline, Optional<Index>:$index,
                       KVPipe_QKStageAttr:$qk_stage);
  let results = (outs KVPipe_MBarrierType:$mbarrier);
  let assemblyFormat = "$pipeline (`[` $index^ `]`)? (`stage` $qk_stage^)? "
                       "attr-dict `:` qualified(type($pipeline))";
}

//===----------------------------------------------------------------------===//
// The protocol
//===----------------------------------------------------------------------===//

def KVPipe_ProducerAcquireOp
    : KVPipe_StagedOp<"producer_acquire", [KVPipe_SyncEffects,
        DeclareOpInterfaceMethods<KVPipe_PipelineProtocolOpInterface,
                                  ["opensSlot"]>]> {
  let summary = "wait until the consumers released the current slot";
  let description = [{
    Waits on the consumer barrier of the current slot's sub-stage with parity
    `phase ^ 1`. A fresh pipeline is at phase 0, and waiting for parity 1 on
    a barrier still in its first phase returns at once, so a producer passes
    its first `kv_stages` acquires on the empty ring (CUTLASS's
    producer-start state, built into the op).

    ```mlir
    kvpipe.producer_acquire %p stage 0 : !kvpipe.pipeline<...>
    ```
  }];
  let arguments = (ins KVPipe_PipelineType:$pipeline,
                       KVPipe_QKStageAttr:$qk_stage);
  let assemblyFormat =
      "$pipeline (`stage` $qk_stage^)? attr-dict `:` qualified(type($pipeline))";
}

def KVPipe_ProducerCommitOp
    : KVPipe_StagedOp<"producer_commit", [KVPipe_SyncEffects,
        DeclareOpInterfaceMethods<KVPipe_PipelineProtocolOpInterface,
                                  ["closesSlot"]>]> {
  let summary = "the producer's arrival on the current slot";
  let description = [{
    Arrives on the producer barrier of the current slot's sub-stage. Where TMA
    loads complete on that barrier (they take the result of
    `kvpipe.producer_mbar` with the same state and sub-stage between the
    matching `producer_acquire` and this op), the elected producer thread
    arrives once with `mbarrier.arrive.expect_tx` of the bytes those loads
    deliver, which the compiler sums from their box shapes; nobody writes a
    transaction count by hand. With no TMA loads it is a plain arrive by each
    of the `producers` threads (who filled the slot with ordinary stores and
    must `fence.proxy.async` first where the tensor cores read the slot).

    ```mlir
    kvpipe.producer_commit %p stage 0 : !kvpipe.pipeline<...>
    ```
  }];
  let arguments = (ins KVPipe_PipelineType:$pipeline,
                       KVPipe_QKStageAttr:$qk_stage);
  let assemblyFormat =
      "$pipeline (`stage` $qk_stage^)? attr-dict `:` qualified(type($pipeline))";
}

def KVPipe_ConsumerWaitOp
    : KVPipe_StagedOp<"consumer_wait", [KVPipe_SyncEffects,
        DeclareOpInterfaceMethods<KVPipe_PipelineProtocolOpInterface,
                                  ["opensSlot"]>]> {
  let summary = "wait until the producer's data for the slot has landed";
  let description = [{
    Waits on the producer barrier of the current slot's sub-stage with parity
    `phase`.

    ```mlir
    kvpipe.consumer_wait %p : !kvpipe.pipeline<...>
    ```
  }];
  let arguments = (ins KVPipe_PipelineType:$pipeline,
                       KVPipe_QKStageAttr:$qk_stage);
  let assemblyFormat =
      "$pipeline (`stage` $qk_stage^)? attr-dict `:` qualified(type($pipeline))";
}

def KVPipe_ConsumerReleaseOp : KVPipe_StagedOp<"consumer_release",
    [KVPipe_SyncEffects, AllTypesMatch<["pipeline", "result"]>,
     DeclareOpInterfaceMethods<KVPipe_PipelineProtocolOpInterface,
         ["closesSlot", "getResultState", "getSlotsAdvanced"]>]> {
  let summary = "release the slot's sub-stage; advance after the last one";
  let description = [{
    Arrives on the consumer barrier of the current slot's sub-stage; only
    threads whose `%e` is true arrive, so either one elected thread per
    consumer group or every consumer thread arrives, matching `consumers`.
    On sm_90a this is an `mbarrier.arrive`: the caller must have retired
    (`wgmma.wait_group`) the wgmma groups that read the slot before.

    When `qk_stage == qk_stages - 1` the result is the stepped state (see
    `kvpipe.step`), otherwise the same state.

    ```mlir
    %p1 = kvpipe.consumer_release %p, %elected : !kvpipe.pipeline<...>
    ```
  }];
  let arguments = (ins KVPipe_PipelineType:$pipeline, I1:$elected,
                       KVPipe_QKStageAttr:$qk_stage);
  let results = (outs KVPipe_PipelineType:$result);
  let assemblyFormat = "$pipeline `,` $elected (`stage` $qk_stage^)? "
                       "attr-dict `:` qualified(type($pipeline))";
  let extraClassDeclaration = stagedDecl # [{
    /// Whether this release ends the slot, so that its result is stepped.
    bool advances() { return getStage() == getPipelineType().getQkStages() - 1; }
  }];
}

//===----------------------------------------------------------------------===//
// State arithmetic
//===----------------------------------------------------------------------===//

def KVPipe_StepOp : KVPipe_Op<"step",
    [Pure, AllTypesMatch<["pipeline", "result"]>,
     DeclareOpInterfaceMethods<KVPipe_PipelineProtocolOpInterface,
         ["getSubStage", "getBarrierSide", "getResultState",
          "getSlotsAdvanced"]>]> {
  let summary = "advance the state by one slot";
  let description = [{
    `index += 1`; when `index == kv_stages`: `index = 0` and `phase ^= 1`.
    The producer side calls it after filling a slot; the consumer side
    advances through `consumer_release` at the last sub-stage.

    ```mlir
    %p1 = kvpipe.step %p : !kvpipe.pipeline<...>
    ```
  }];
  let arguments = (ins KVPipe_PipelineType:$pipeline);
  let results = (outs KVPipe_PipelineType:$result);
  let assemblyFormat = "$pipeline attr-dict `:` qualified(type($pipeline))";
}

def KVPipe_IndexOp : KVPipe_Op<"index", [Pure]> {
  let summary = "the current ring index of a state";
  let description = [{
    Returns `state.index`, `0 <= index < kv_stages`, e.g. to address the
    slot's shared-memory buffer.

    ```mlir
    %i = kvpipe.index %p : !kvpipe.pipeline<...>
    ```
  }];
  let arguments = (ins KVPipe_PipelineType:$pipeline);
  let results = (outs Index:$index);
  let assemblyFormat = "$pipeline attr-dict `:` qualified(type($pipeline))";
}

def KVPipe_PhaseOp : KVPipe_Op<"phase", [Pure]> {
  let summary = "the current phase bit of a state";
  let description = [{
    ```mlir
    %ph = kvpipe.phase %p : !kvpipe.pipeline<...>
    ```
  }];
  let arguments = (ins KVPipe_PipelineType:$pipeline);
  let results = (outs I1:$phase);
  let assemblyFormat = "$pipeline attr-dict `:` qualified(type($pipeline))";
}

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPEOPS_TD
