// RUN: kvpipe-opt %s --kvpipe-check-nvptx-targets --convert-kvpipe-to-nvvm -split-input-file -verify-diagnostics
// RUN: kvpipe-opt %s --kvpipe-to-ptx -split-input-file -verify-diagnostics -o /dev/null

// Regression (found by tools/fuzz/kvpipe_fuzz.py): a global in an address
// space PTX has no variables in (an llvm.mlir.global with addr_space = 32,
// a memref.global in memory space 2) made NVPTX abort ("LLVM ERROR: Bad
// address space found while emitting PTX: 32"). It is an error at the
// global.

gpu.module @m {
  // expected-error @+1 {{'llvm.mlir.global' op is in address space 32, where PTX has no variables (0 generic, 1 global, 3 shared, 4 constant, 5 local)}}
  llvm.mlir.global internal @h() {addr_space = 32 : i32} : !llvm.array<4 x i64>
  gpu.func @k() kernel {
    gpu.return
  }
}

// -----

gpu.module @m {
  // expected-error @+1 {{'memref.global' op is in address space 2, where PTX has no variables}}
  memref.global @g : memref<16xf32, 2>
  gpu.func @k(%f: f32, %i: index) kernel {
    %m = memref.get_global @g : memref<16xf32, 2>
    memref.store %f, %m[%i] : memref<16xf32, 2>
    gpu.return
  }
}

// -----

gpu.module @m {
  llvm.mlir.global internal @generic() : !llvm.array<4 x i64>
  llvm.mlir.global internal @global() {addr_space = 1 : i32} : !llvm.array<4 x i64>
  llvm.mlir.global internal @shared() {addr_space = 3 : i32} : !llvm.array<4 x i64>
  llvm.mlir.global internal @constant() {addr_space = 4 : i32} : !llvm.array<4 x i64>
  memref.global @workgroup : memref<16xf32, #gpu.address_space<workgroup>>
  gpu.func @k() kernel {
    gpu.return
  }
}
