//===- KVPipeTypes.td - kvpipe type definitions ------------*- tablegen -*-===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_KVPIPETYPES_TD
#define KVPIPE_DIALECT_KVPIPE_IR_KVPIPETYPES_TD

include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.td"

def KVPipe_PipelineType : KVPipe_Type<"Pipeline", "pipeline"> {
  let summary = "`!kvpipe.pipeline` state (barrier ring, index, phase)";
  let description = [{
    ```mlir
    !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>
    ```

    A value of this type is a pipeline *state*: where the
    `2 * kv_stages * qk_stages` barriers are, the current ring index
    (`0 <= index < kv_stages`) and the phase bit. It has value semantics.
    All four parameters are positive and `kv_stages * qk_stages <= 32`.
  }];
  let parameters = (ins "int64_t":$kv_stages, "int64_t":$qk_stages,
                        "int64_t":$producers, "int64_t":$consumers);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Number of ring slots: `kv_stages * qk_stages`.
    int64_t getNumStages() const { return getKvStages() * getQkStages(); }
    /// Number of mbarriers the pipeline reserves: two per slot.
    int64_t getNumBarriers() const { return 2 * getNumStages(); }
    /// Largest ring the hardware-friendly encoding admits.
    static constexpr int64_t kMaxStages = 32;
  }];
}

def KVPipe_MBarrierType : KVPipe_Type<"MBarrier", "mbarrier"> {
  let summary = "`!kvpipe.mbarrier` (one mbarrier of a pipeline)";
  let description = [{
    A single 8-byte mbarrier object in workgroup (shared) memory, obtained
    from a pipeline with `kvpipe.producer_mbar` or `kvpipe.consumer_mbar`.
    TMA loads complete on it.
  }];
}

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPETYPES_TD
