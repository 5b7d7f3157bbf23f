// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// Every verifier message of !kvpipe.tensor_map (KVPipeTypes.cpp) and its
// syntax errors.

// expected-error @+1 {{tensor map box must have rank 1 to 5, got rank 6}}
func.func private @rank6(!kvpipe.tensor_map<box = [1, 1, 1, 1, 1, 16], element_type = i8, swizzle = 0>)

// -----

// expected-error @+2 {{expected integer value}}
// expected-error @+1 {{failed to parse KVPipe_TensorMapType parameter 'box'}}
func.func private @rank0(!kvpipe.tensor_map<box = [], element_type = i8, swizzle = 0>)

// -----

// expected-error @+1 {{tensor map box dimension 0 must be in [1, 256], got 0}}
func.func private @dim_zero(!kvpipe.tensor_map<box = [0, 16], element_type = i8, swizzle = 0>)

// -----

// expected-error @+1 {{tensor map box dimension 1 must be in [1, 256], got 257}}
func.func private @dim_large(!kvpipe.tensor_map<box = [2, 257, 16], element_type = i8, swizzle = 0>)

// -----

// expected-error @+1 {{tensor map box dimension 0 must be in [1, 256], got -4}}
func.func private @dim_negative(!kvpipe.tensor_map<box = [-4, 16], element_type = i8, swizzle = 0>)

// -----

// expected-error @+1 {{tensor map element type must be an integer or float of 1, 2, 4 or 8 bytes, got 'index'}}
func.func private @index_elements(!kvpipe.tensor_map<box = [64], element_type = index, swizzle = 0>)

// -----

// expected-error @+1 {{tensor map element type must be an integer or float of 1, 2, 4 or 8 bytes, got 'i1'}}
func.func private @i1_elements(!kvpipe.tensor_map<box = [64], element_type = i1, swizzle = 0>)

// -----

// Three bytes is a multiple of 8 bits but no TMA element size.
// expected-error @+1 {{tensor map element type must be an integer or float of 1, 2, 4 or 8 bytes, got 'i24'}}
func.func private @i24_elements(!kvpipe.tensor_map<box = [64], element_type = i24, swizzle = 0>)

// -----

// expected-error @+1 {{tensor map element type must be an integer or float of 1, 2, 4 or 8 bytes, got 'i128'}}
func.func private @i128_elements(!kvpipe.tensor_map<box = [64], element_type = i128, swizzle = 0>)

// -----

// expected-error @+1 {{tensor map element type must be an integer or float of 1, 2, 4 or 8 bytes, got 'f80'}}
func.func private @f80_elements(!kvpipe.tensor_map<box = [64], element_type = f80, swizzle = 0>)

// -----

// expected-error @+1 {{tensor map element type must be an integer or float of 1, 2, 4 or 8 bytes, got 'vector<2xf32>'}}
func.func private @vector_elements(!kvpipe.tensor_map<box = [64], element_type = vector<2xf32>, swizzle = 0>)

// -----

// expected-error @+1 {{tensor map swizzle must be 0, 32, 64 or 128 bytes, got 16}}
func.func private @swizzle16(!kvpipe.tensor_map<box = [8, 8], element_type = bf16, swizzle = 16>)

// -----

// expected-error @+1 {{tensor map swizzle must be 0, 32, 64 or 128 bytes, got 256}}
func.func private @swizzle256(!kvpipe.tensor_map<box = [8, 8], element_type = bf16, swizzle = 256>)

// -----

// expected-error @+1 {{tensor map innermost box dimension must span a multiple of 16 bytes, got 8 bytes}}
func.func private @inner8(!kvpipe.tensor_map<box = [64, 4], element_type = bf16, swizzle = 0>)

// -----

// expected-error @+1 {{tensor map innermost box dimension must span a multiple of 16 bytes, got 24 bytes}}
func.func private @inner24(!kvpipe.tensor_map<box = [64, 6], element_type = f32, swizzle = 32>)

// -----

// expected-error @+1 {{tensor map innermost box dimension spans 256 bytes, more than the 128-byte swizzle}}
func.func private @inner_wider_than_swizzle(!kvpipe.tensor_map<box = [64, 128], element_type = bf16, swizzle = 128>)

// -----

// expected-error @+1 {{tensor map innermost box dimension spans 64 bytes, more than the 32-byte swizzle}}
func.func private @inner_wider_than_32b(!kvpipe.tensor_map<box = [64, 32], element_type = f16, swizzle = 32>)

// -----

// expected-error @+1 {{expected 'element_type'}}
func.func private @missing_element_type(!kvpipe.tensor_map<box = [64, 64], swizzle = 0>)

// -----

// expected-error @+1 {{expected ','}}
func.func private @missing_swizzle(!kvpipe.tensor_map<box = [64, 64], element_type = bf16>)

// -----

// expected-error @+2 {{integer value too large}}
// expected-error @+1 {{failed to parse KVPipe_TensorMapType parameter 'box'}}
func.func private @dim_overflow(!kvpipe.tensor_map<box = [99999999999999999999, 16], element_type = i8, swizzle = 0>)
