// RUN: kvpipe-opt %s --kvpipe-check-nvptx-targets --convert-kvpipe-to-nvvm -split-input-file -verify-diagnostics
// RUN: kvpipe-opt %s --kvpipe-to-ptx -split-input-file -verify-diagnostics -o /dev/null

// Regression (found by tools/fuzz/kvpipe_fuzz.py): an op at the top level of
// a gpu.module, outside any function, passed verification; once lowered to
// an instruction with side effects (kvpipe.warpgroup_id's shuffle, a
// barrier) the translation to LLVM IR crashed (signal 11 in
// createIntrinsicCall: no block to put the instruction in). Only symbols
// (functions, globals, kernel declarations) may be there.

gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // expected-error @+1 {{'kvpipe.warpgroup_id' op is at the top level of a gpu.module, where nothing executes: it must be inside a function}}
  %unused = kvpipe.warpgroup_id : index
  kvpipe.attention_kernel @fa {head_dim = 64 : i64, element_type = bf16, causal = false}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'gpu.barrier' op is at the top level of a gpu.module, where nothing executes: it must be inside a function}}
  gpu.barrier
  func.func @f() {
    return
  }
}

// -----

// Functions, globals and declarations are fine.
gpu.module @m {
  memref.global "private" @g : memref<4xf32, #gpu.address_space<workgroup>>
  llvm.mlir.global internal @h() {addr_space = 3 : i32} : !llvm.array<4 x i64>
  func.func private @declared()
  gpu.func @k() kernel {
    gpu.return
  }
}
