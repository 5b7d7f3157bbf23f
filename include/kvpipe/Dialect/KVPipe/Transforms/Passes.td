//===- Passes.td - kvpipe dialect passes -------------------*- tablegen -*-===//

#ifndef KVPIPE_DIALECT_KVPIPE_TRANSFORMS_PASSES_TD
#define KVPIPE_DIALECT_KVPIPE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExpandAttention : Pass<"kvpipe-expand-attention", "::mlir::ModuleOp"> {
  let summary = "Generate the gpu.func of each kvpipe.attention_kernel";
  let description = [{
    Replaces every `kvpipe.attention_kernel` declaration by a warp-specialised
    FlashAttention forward kernel (FA3's structure) written with kvpipe
    pipelines, TMA, wgmma and upstream dialects: warpgroup 0 produces (one
    thread loads Q once and streams K and V through two kvpipe rings of
    `kv_stages` slots), the consumer warpgroups compute `S = Q K^T` (wgmma
    SS), the online softmax in registers (exp2 with the scale folded into one
    FMA, running max and sum), `O += P V` (wgmma RS), and the epilogue
    (normalise, cast, TMA store, log-sum-exp); `setmaxnreg` moves registers
    from the producer to the consumers. The kernel ABI is attached to the
    function as `kvpipe.attention_abi` and, with `abi-file`, written as
    JSON (docs/kernel-abi.md).
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
  let options = [
    Option<"abiFile", "abi-file", "std::string", /*default=*/"\"\"",
           "Write the ABI of the generated kernels to this JSON file">,
  ];
}

def VerifyProtocol : Pass<"kvpipe-verify-protocol"> {
  let summary = "Check the producer/consumer protocol of every kvpipe pipeline";
  let description = [{
    Follows the pipeline states of each pipeline through `scf.for`,
    `scf.if`, `scf.while` and calls, and reports at the offending op, naming
    the pipeline (where it was created, its type) and the sub-stage:
    - a state used after it was advanced (every state is consumed at most
      once by an advancing op: `kvpipe.step`, or `kvpipe.consumer_release`
      at the last sub-stage);
    - producer and consumer sides of one pipeline whose loops advance a
      different number of slots per iteration (with the same trip count), or
      a different total where trip counts are constant: the classic phase
      mismatch that hangs;
    - a `consumer_wait` without its `consumer_release` in the same block
      (loop iteration) or the reverse, a `producer_acquire` without its
      `producer_commit`, sub-stages out of `qk_stage` order, and a state
      advanced in only one branch of an `scf.if`;
    - a `consumer_release` of a slot that a `kvpipe.warpgroup_mma` reads
      while no `kvpipe.warpgroup_wait` (or `nvvm.wgmma.wait.group`) between
      them has retired that wgmma;
    - a TMA load completing on a producer barrier that no `producer_commit`
      counts, or a commit whose recorded transaction bytes disagree with its
      loads.
    `--kvpipe-to-ptx` runs it first (its `verify-protocol=false` skips it).
  }];
}

#endif // KVPIPE_DIALECT_KVPIPE_TRANSFORMS_PASSES_TD
