//===- Passes.td - kvpipe conversion passes ----------------*- tablegen -*-===//

#ifndef KVPIPE_CONVERSION_PASSES_TD
#define KVPIPE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertKVPipeToNVVM : Pass<"convert-kvpipe-to-nvvm"> {
  let summary = "Lower kvpipe pipelines, TMA and wgmma ops to NVVM and LLVM";
  let description = [{
    Lowers every kvpipe op to the NVVM and LLVM dialects: barriers to
    `mbarrier` ops on a shared-memory allocation per pipeline, pipeline
    states to `!llvm.struct<(ptr<3>, i32, i32)>` (barrier array, index,
    phase) carried through `scf`, `cf` and function boundaries by the type
    conversion, TMA copies to `cp.async.bulk.tensor`, warpgroup MMAs to
    `wgmma.mma_async` (SS) or inline PTX (RS). Tensor-map kernel arguments
    become by-value grid-constant parameters (`llvm.byval`, 64-byte aligned,
    `nvvm.grid_constant`). Other dialects are left to the upstream
    conversions, which `--kvpipe-to-ptx` runs next.
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::scf::SCFDialect",
  ];
  let options = [
    Option<"waitTimeout", "wait-timeout", "uint64_t", /*default=*/"0",
           "Debug: bound every mbarrier wait to this many clock cycles; on "
           "timeout print the block, thread, barrier, slot, stage and phase "
           "and trap (0: wait forever)">,
  ];
}

def FinalizeKernelABI : Pass<"kvpipe-finalize-kernel-abi"> {
  let summary = "Make tensor-map kernel arguments by-value grid constants";
  let description = [{
    Runs after `convert-gpu-to-nvvm`. `convert-kvpipe-to-nvvm` records on
    each kernel which of its arguments were `!kvpipe.tensor_map`s and the
    kernel's signature; this pass finds those arguments among the lowered
    `llvm.func`'s (where memref arguments have been expanded) and marks them
    `llvm.byval = !llvm.array<128 x i8>`, `llvm.align = 64` and
    `nvvm.grid_constant`, so that PTX receives each descriptor as a 128-byte
    `.param` that TMA reads in place (CUDA's `__grid_constant__ const
    CUtensorMap`). The upstream lowering drops such attributes on `gpu.func`.
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect",
  ];
  let options = [
    Option<"useBarePtrCallConv", "use-bare-ptr-memref-call-conv", "bool",
           /*default=*/"false",
           "Whether convert-gpu-to-nvvm lowered memref arguments to bare "
           "pointers (must match that pass's option)">,
  ];
}

#endif // KVPIPE_CONVERSION_PASSES_TD
