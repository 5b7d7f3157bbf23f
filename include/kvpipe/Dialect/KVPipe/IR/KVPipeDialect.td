//===- KVPipeDialect.td - kvpipe dialect definition --------*- tablegen -*-===//
//
// The kvpipe dialect models the K/V pipeline of a FlashAttention-style kernel
// on NVIDIA Hopper: a ring of stages guarded by mbarriers.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_KVPIPEDIALECT_TD
#define KVPIPE_DIALECT_KVPIPE_IR_KVPIPEDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def KVPipe_Dialect : Dialect {
  let name = "kvpipe";
  let cppNamespace = "::kvpipe";
  let summary = "Producer/consumer K/V pipelines for Hopper attention kernels";
  let description = [{
    The `kvpipe` dialect expresses the producer/consumer pipeline of a
    FlashAttention-style kernel as first-class IR, after Mojo's
    `KVPipelineGeneric[num_kv_stages, num_qk_stages, num_producer,
    num_consumer]`: a ring of `kv_stages` K/V tiles, each consumed in
    `qk_stages` pipelined sub-stages, so the ring has
    `num_stages = kv_stages * qk_stages` slots. Each slot is guarded by two
    mbarriers in shared memory:

    | barriers                          | role                                    | arrival count |
    | --------------------------------- | --------------------------------------- | ------------- |
    | `mbar[0 .. num_stages)`           | producer ("full"): the data has landed   | `producers`   |
    | `mbar[num_stages .. 2*num_stages)`| consumer ("empty"): the slot may be reused | `consumers` |

    A pipeline value is a *state*: the barrier array, the ring index and the
    phase bit. Ops that advance the state return a new value which loops
    carry as iter_args; no caller ever flips a phase by hand.

    The data-path ops (TMA copies completing on a `!kvpipe.mbarrier`, warpgroup
    MMAs on shared-memory tiles) and the `kvpipe.attention_kernel`
    declaration build complete attention kernels from the pipeline.
  }];
  // kvpipe.tile's schedule is an LLVM pointer, parsed without a type.
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerTypes();
    void registerAttributes();
  }];
}

class KVPipe_Op<string mnemonic, list<Trait> traits = []>
    : Op<KVPipe_Dialect, mnemonic, traits>;

class KVPipe_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<KVPipe_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

class KVPipe_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<KVPipe_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPEDIALECT_TD
