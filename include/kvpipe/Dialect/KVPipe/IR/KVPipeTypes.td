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

def KVPipe_TensorMapType : KVPipe_Type<"TensorMap", "tensor_map"> {
  let summary = "`!kvpipe.tensor_map` (a TMA descriptor for tiled copies)";
  let description = [{
    ```mlir
    !kvpipe.tensor_map<box = [1, 1, 128, 64], element_type = bf16, swizzle = 128>
    ```

    A CUDA tensor map (`CUtensorMap`, 128 bytes) that the host encoded for
    tiled TMA copies; a kernel receives it by value as a grid-constant
    parameter. The type records what the kernel's code relies on: the box
    (the tile one copy moves, dimensions outermost first, as a memref
    shape), the element type, and the shared-memory swizzle in bytes
    (0 for none, 32, 64 or 128). The global shape and strides are the
    host's business. Rank 1 to 5; each box dimension at most 256; the
    innermost box row a multiple of 16 bytes and, when swizzled, at most the
    swizzle span.
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$box,
                        "::mlir::Type":$element_type, "int64_t":$swizzle);
  let assemblyFormat =
      "`<` `box` `=` `[` $box `]` `,` `element_type` `=` $element_type `,` "
      "`swizzle` `=` $swizzle `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Bytes one copy of the box moves (its transaction count).
    int64_t getBoxBytes() const;
    /// Size of one element in bytes.
    int64_t getElementBytes() const {
      return getElementType().getIntOrFloatBitWidth() / 8;
    }
  }];
}

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPETYPES_TD
