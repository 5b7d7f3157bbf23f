// RUN: kvpipe-opt %s --kvpipe-finalize-kernel-abi -split-input-file -verify-diagnostics

// Malformed records of tensor-map arguments are errors at the function.

// expected-error @+1 {{'llvm.func' op 'kvpipe.kernel_signature' must be a function type}}
llvm.func @not_a_function_type(%arg0: !llvm.ptr) attributes {kvpipe.kernel_signature = i32, kvpipe.tensor_map_args = array<i32: 0>} {
  llvm.return
}

// -----

// expected-error @+1 {{'llvm.func' op tensor-map argument 5 is not an argument of the recorded kernel signature '(!llvm.ptr) -> ()'}}
llvm.func @out_of_range(%arg0: !llvm.ptr) attributes {kvpipe.kernel_signature = (!llvm.ptr) -> (), kvpipe.tensor_map_args = array<i32: 5>} {
  llvm.return
}

// -----

// expected-error @+1 {{'llvm.func' op tensor-map argument -1 is not an argument of the recorded kernel signature '(!llvm.ptr) -> ()'}}
llvm.func @negative(%arg0: !llvm.ptr) attributes {kvpipe.kernel_signature = (!llvm.ptr) -> (), kvpipe.tensor_map_args = array<i32: -1>} {
  llvm.return
}

// -----

// expected-error @+1 {{'llvm.func' op tensor-map argument 0 does not map onto one pointer argument}}
llvm.func @not_a_pointer(%arg0: i32) attributes {kvpipe.kernel_signature = (i32) -> (), kvpipe.tensor_map_args = array<i32: 0>} {
  llvm.return
}

// -----

// The signature maps a memref onto several arguments, but the function has
// fewer.
// expected-error @+1 {{'llvm.func' op tensor-map argument 1 does not map onto one pointer argument}}
llvm.func @too_few_arguments(%arg0: !llvm.ptr) attributes {kvpipe.kernel_signature = (memref<?xf32>, !llvm.ptr) -> (), kvpipe.tensor_map_args = array<i32: 1>} {
  llvm.return
}

// -----

// A type the LLVM type converter does not know.
// expected-error @+1 {{'llvm.func' op cannot map the recorded kernel signature '(!kvpipe.mbarrier, !llvm.ptr) -> ()' onto the lowered arguments}}
llvm.func @unconvertible(%arg0: !llvm.ptr) attributes {kvpipe.kernel_signature = (!kvpipe.mbarrier, !llvm.ptr) -> (), kvpipe.tensor_map_args = array<i32: 1>} {
  llvm.return
}
