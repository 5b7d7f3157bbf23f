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

#endif // KVPIPE_DIALECT_KVPIPE_TRANSFORMS_PASSES_TD
