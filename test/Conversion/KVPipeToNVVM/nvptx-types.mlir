// RUN: kvpipe-opt %s --kvpipe-check-nvptx-targets --convert-kvpipe-to-nvvm -split-input-file -verify-diagnostics
// RUN: kvpipe-opt %s --kvpipe-to-ptx -split-input-file -verify-diagnostics -o /dev/null

// Regressions (found by tools/fuzz/kvpipe_fuzz.py): --kvpipe-to-ptx handed
// NVPTX types it cannot compile, and NVPTX aborted or crashed instead of
// reporting: a scalable vector ("LLVM ERROR: Don't know how to legalize this
// scalable vector type"), x87's f80 ("LLVM ERROR: Cannot select" on an
// argument, "unsupported library call operation" on a load), a vector of
// 65536 elements (signal 11 in instruction selection) or of 2^62 x 2^16
// elements (the count overflowed and passed the check; "LLVM ERROR: Empty
// parameter types are not supported"); and the translation to LLVM IR
// crashed on an LLVM dialect type holding a builtin type it does not have
// (!llvm.array<4 x complex<f32>>, signal 11 in llvm::ArrayType::get).
// The lowering rejects them at the first op that uses one.

gpu.module @m {
  // expected-error @+1 {{'func.func' op uses 'vector<[64]xbf16>', a scalable vector (NVPTX has none): the gpu.module cannot be compiled to PTX}}
  func.func @scalable(%a: vector<[64]xbf16>) {
    return
  }
}

// -----

gpu.module @m {
  // expected-error @+1 {{'func.func' op uses 'f80', x87's 80-bit float (NVPTX has none)}}
  func.func @x87(%a: f80) -> f80 {
    return %a : f80
  }
}

// -----

gpu.module @m {
  func.func @x87_memory(%a: memref<4xf32>, %i: index) {
    // expected-error @+1 {{'memref.alloca' op uses 'memref<4xf80>', x87's 80-bit float (NVPTX has none)}}
    %m = memref.alloca() : memref<4xf80>
    return
  }
}

// -----

gpu.module @m {
  // expected-error @+1 {{'memref.global' op uses 'memref<2xf80>', x87's 80-bit float (NVPTX has none)}}
  memref.global "private" @g : memref<2xf80>
}

// -----

gpu.module @m {
  // expected-error @+1 {{'func.func' op uses 'vector<65536xf32>', a vector of more than 16384 elements (NVPTX cannot select it)}}
  func.func @huge(%a: vector<65536xf32>) {
    return
  }
}

// -----

gpu.module @m {
  // expected-error @+1 {{'llvm.mlir.global' op uses '!llvm.array<4 x complex<f32>>', an LLVM dialect type holding a type LLVM IR does not have}}
  llvm.mlir.global internal @h() {addr_space = 3 : i32} : !llvm.array<4 x complex<f32>>
}

// -----

// The element count of a multi-dimensional vector overflowed and passed.
gpu.module @m {
  // expected-error @+1 {{'func.func' op uses 'vector<4611686018427387904x65536xf32>', a vector of more than 16384 elements (NVPTX cannot select it)}}
  func.func @overflow(%a: vector<4611686018427387904x65536xf32>) {
    return
  }
}

// -----

// 16384 elements compile.
gpu.module @m {
  func.func @large(%a: vector<16384xf32>) -> vector<16384xf32> {
    return %a : vector<16384xf32>
  }
}

// -----

// A zero-width integer parameter aborted NVPTX's argument lowering (found by
// the long fuzz run); a zero-width value inside a function compiles.
gpu.module @m {
  // expected-error @+1 {{'func.func' op takes a parameter of type 'i0', a zero-width integer (NVPTX cannot pass it as a function parameter)}}
  func.func @host_visible(%x: i0) {
    return
  }
}

// -----

gpu.module @m {
  // expected-error @+1 {{'gpu.func' op takes a parameter of type '!llvm.struct<(i32, i0)>', a zero-width integer}}
  gpu.func @kernel(%x: !llvm.struct<(i32, i0)>) kernel {
    gpu.return
  }
}

// -----

gpu.module @m {
  func.func @zero() -> i32 {
    %c = arith.constant 0 : i0
    %d = arith.extui %c : i0 to i32
    return %d : i32
  }
}
