// RUN: kvpipe-opt %s -split-input-file --kvpipe-finalize-kernel-abi | FileCheck %s
// RUN: kvpipe-opt %s -split-input-file --kvpipe-to-ptx -o /dev/null

// Regression (found by tools/fuzz/kvpipe_fuzz.py): a function declaration
// with a tensor-map argument (`func.func private @f(!kvpipe.tensor_map<...>)`
// in a gpu.module) reaches kvpipe-finalize-kernel-abi as an llvm.func without
// a body; the pass read the argument's type from the entry block and crashed
// (signal 11). It reads the lowered signature instead. Only a kernel's
// parameter can be a grid constant (the NVVM verifier rejects the attribute
// elsewhere): a declaration or device function receives a plain pointer to
// the map.

// CHECK-LABEL: llvm.func @declaration
//  CHECK-SAME: (!llvm.ptr)
//   CHECK-NOT: grid_constant
//   CHECK-NOT: kvpipe.tensor_map_args
llvm.func @declaration(!llvm.ptr) attributes {kvpipe.kernel_signature = (!llvm.ptr) -> (), kvpipe.tensor_map_args = array<i32: 0>}

// -----

// CHECK-LABEL: llvm.func @kernel_declaration
//  CHECK-SAME: (!llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})
//   CHECK-NOT: kvpipe.tensor_map_args
llvm.func @kernel_declaration(!llvm.ptr) attributes {nvvm.kernel, kvpipe.kernel_signature = (!llvm.ptr) -> (), kvpipe.tensor_map_args = array<i32: 0>}

// -----

// The whole pipeline: the declaration and a device function that takes the
// map compile.
!map = !kvpipe.tensor_map<box = [64, 64], element_type = bf16, swizzle = 128>
gpu.module @m {
  func.func private @declared(!map)
  func.func @device(%map: !map) {
    kvpipe.tma_prefetch_descriptor %map : !map
    return
  }
}
