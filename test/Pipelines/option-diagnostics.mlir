// A bad value of a --kvpipe-to-ptx option is one line that names the option,
// and exit code 1 -- not a pipeline failure that prints the whole module
// after "see current operation" (55 KB to 2.8 MB for an attention kernel).

// RUN: not kvpipe-opt %s --kvpipe-to-ptx="format=elf" -o /dev/null 2>%t.format
// RUN: FileCheck %s --check-prefix=FORMAT < %t.format
// RUN: count 1 < %t.format
// FORMAT: kvpipe-to-ptx: format='elf' is not a format: use 'isa' (PTX) or 'bin' (a cubin)

// RUN: not kvpipe-opt %s --kvpipe-to-ptx="opt-level=9" -o /dev/null 2>%t.opt
// RUN: FileCheck %s --check-prefix=OPT < %t.opt
// RUN: count 1 < %t.opt
// OPT: kvpipe-to-ptx: opt-level=9 is not an optimisation level: use 0, 1, 2 or 3

// RUN: not kvpipe-opt %s --kvpipe-to-ptx="toolkit=/nonexistent" -o /dev/null 2>%t.toolkit
// RUN: FileCheck %s --check-prefix=TOOLKIT < %t.toolkit
// RUN: count 1 < %t.toolkit
// TOOLKIT: kvpipe-to-ptx: toolkit='/nonexistent' is not a directory

// A directory that is not a CUDA toolkit (no libdevice) used to fail only in
// gpu-module-to-binary, printing the whole module (1.4 MB here).
// RUN: rm -rf %t.tk && mkdir -p %t.tk
// RUN: not kvpipe-opt %s --kvpipe-to-ptx="toolkit=%t.tk" -o /dev/null 2>%t.notk
// RUN: FileCheck %s --check-prefix=NOTK < %t.notk
// RUN: count 1 < %t.notk
// NOTK: kvpipe-to-ptx: toolkit='{{.*}}.tk' has no /nvvm/libdevice/libdevice.10.bc: not a CUDA toolkit

// An output file in a directory that does not exist (here: below a file).
// RUN: echo > %t.file
// RUN: not kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.file/k.ptx" -o /dev/null 2>%t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: count 1 < %t.ptx
// PTX: kvpipe-to-ptx: ptx-file='{{.*}}.file/k.ptx': the directory '{{.*}}.file' does not exist
// RUN: not kvpipe-opt %s --kvpipe-to-ptx="abi-file=%t.file/k.json" -o /dev/null 2>%t.abi
// RUN: FileCheck %s --check-prefix=ABI < %t.abi
// RUN: count 1 < %t.abi
// ABI: kvpipe-to-ptx: abi-file='{{.*}}.file/k.json': the directory '{{.*}}.file' does not exist

// An output file that cannot be written although its directory exists (a
// directory of that name): reported by the pass that writes it, on one line.
// RUN: rm -rf %t.dir && mkdir -p %t.dir/k.json %t.dir/k.ptx
// RUN: not kvpipe-opt %s --kvpipe-to-ptx="abi-file=%t.dir/k.json" -o /dev/null 2>%t.abiw
// RUN: FileCheck %s --check-prefix=ABIW < %t.abiw
// RUN: count 1 < %t.abiw
// ABIW: error: kvpipe-to-ptx: abi-file={{.*}}k.json: cannot write the kernel ABI
// RUN: not kvpipe-opt %s --kvpipe-to-ptx="ptx-file=%t.dir/k.ptx" -o /dev/null 2>%t.ptxw
// RUN: FileCheck %s --check-prefix=PTXW < %t.ptxw
// RUN: count 1 < %t.ptxw
// PTXW: error: kvpipe-to-ptx: ptx-file={{.*}}k.ptx: cannot write the PTX

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @fa {head_dim = 64 : i64, element_type = bf16, causal = false}
}
