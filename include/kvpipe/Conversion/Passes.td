//===- Passes.td - kvpipe conversion passes ----------------*- tablegen -*-===//

#ifndef KVPIPE_CONVERSION_PASSES_TD
#define KVPIPE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def CheckNVPTXTargets : Pass<"kvpipe-check-nvptx-targets"> {
  let summary = "Check that NVPTX can compile each gpu.module for its target";
  let description = [{
    Reports, at the gpu.module or the op, what would make NVPTX or the
    translation to LLVM IR abort, crash or fail without a location: an NVVM
    target whose explicit PTX version is older than its chip accepts, an op
    outside any function, a negative launch bound, a global in an address
    space PTX has no variables in, a type NVPTX cannot compile (scalable or
    huge vectors, x87 floats, zero-width parameters), and kvpipe ops in a
    module whose target is not a chip NVPTX knows of sm_90 or later, or whose
    PTX ISA is older than the ops need (8.0; 8.6 for TMA loads without
    multicast). Changes nothing. Runs before `convert-kvpipe-to-nvvm` (it
    reads the kvpipe ops); `--kvpipe-to-ptx` runs it on each gpu.module.
  }];
}

def ConvertKVPipeToNVVM : Pass<"convert-kvpipe-to-nvvm"> {
  let summary = "Lower kvpipe pipelines, TMA and wgmma ops to NVVM and LLVM";
  let description = [{
    Lowers every kvpipe op to the NVVM and LLVM dialects: barriers to
    `mbarrier` ops on a shared-memory allocation per pipeline, pipeline
    states to `!llvm.struct<(ptr<3>, i32, i32)>` (barrier array, index,
    phase) carried through `scf`, `cf` and function boundaries by the type
    conversion, TMA copies to `cp.async.bulk.tensor`, warpgroup MMAs to
    `wgmma.mma_async` (SS) or inline PTX (RS). The patterns create no `scf`
    ops: an elected arrival is predicated PTX, a bounded wait (wait-timeout)
    a call of a helper function. The targets are not checked here: run
    `kvpipe-check-nvptx-targets` first. Tensor-map kernel arguments
    become by-value grid-constant parameters (`llvm.byval`, 64-byte aligned,
    `nvvm.grid_constant`). Other dialects are left to the upstream
    conversions, which `--kvpipe-to-ptx` runs next.
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::gpu::GPUDialect",
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
