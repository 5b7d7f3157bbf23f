//===- Passes.td - passes of the kvpipe pipelines ----------*- tablegen -*-===//

#ifndef KVPIPE_PIPELINES_PASSES_TD
#define KVPIPE_PIPELINES_PASSES_TD

include "mlir/Pass/PassBase.td"

def AttachNVVMTarget : Pass<"kvpipe-attach-nvvm-target", "::mlir::ModuleOp"> {
  let summary = "Give every gpu.module an NVVM target and optimisation level";
  let description = [{
    A `gpu.module` without a target gets
    `#nvvm.target<chip = $chip, features = $features, O = $opt-level>`
    (`sm_90a` and `+ptx86` where not given); a module that declares its own
    `#nvvm.target` keeps its chip and features and gets `O = $opt-level`.
    A `chip` or `features` given explicitly that disagrees with a module's
    own target is an error: it is neither applied nor silently ignored.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"\"",
           "Target chip of modules without a target (default sm_90a); "
           "modules that declare one must agree">,
    Option<"features", "features", "std::string", /*default=*/"\"\"",
           "PTX features of modules without a target (default +ptx86); "
           "modules that declare one must agree">,
    Option<"optLevel", "O", "unsigned", /*default=*/"3",
           "LLVM optimisation level of the NVPTX compilation">,
  ];
  let dependentDialects = ["::mlir::NVVM::NVVMDialect"];
}

def DumpPTX : Pass<"kvpipe-dump-ptx", "::mlir::ModuleOp"> {
  let summary = "Check the PTX of every gpu.binary and write it to a file";
  let description = [{
    After `gpu-module-to-binary{format=isa}`, reports PTX that calls libdevice
    functions which were not linked (no CUDA toolkit was found), and, with
    `file`, writes the PTX of each
    `gpu.binary` to `file`; with several binaries, the binary's name is
    inserted before the extension (`out.ptx` -> `out.<name>.ptx`).
  }];
  let options = [
    Option<"file", "file", "std::string", /*default=*/"\"\"",
           "Where to write the PTX ('-' for standard output)">,
    Option<"format", "format", "std::string", /*default=*/"\"isa\"",
           "The format gpu-module-to-binary was asked for: 'isa' or 'bin' "
           "(anything else is reported)">,
  ];
}

#endif // KVPIPE_PIPELINES_PASSES_TD
