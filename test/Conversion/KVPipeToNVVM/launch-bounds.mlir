// RUN: kvpipe-opt %s --kvpipe-check-nvptx-targets --convert-kvpipe-to-nvvm -split-input-file -verify-diagnostics
// RUN: kvpipe-opt %s --kvpipe-to-ptx -split-input-file -verify-diagnostics -o /dev/null

// Regression (found by tools/fuzz/kvpipe_fuzz.py): a negative size in a
// kernel's launch bounds (known_block_size, which becomes nvvm.maxntid, or
// nvvm.maxntid, nvvm.reqntid, nvvm.cluster_dim) failed the translation to
// LLVM IR with an error without a location ("error: can't parse integer
// attribute -2147483648 in nvvm.maxntid"). It is an error at the function.

gpu.module @m {
  // expected-error @+1 {{'gpu.func' op 'known_block_size' must hold positive sizes, got [128, 1, -2147483648]}}
  gpu.func @k() kernel attributes {known_block_size = array<i32: 128, 1, -2147483648>} {
    gpu.return
  }
}

// -----

gpu.module @m {
  // expected-error @+1 {{'gpu.func' op 'nvvm.maxntid' must hold positive sizes, got [-1, 1, 1]}}
  gpu.func @k() kernel attributes {nvvm.maxntid = array<i32: -1, 1, 1>} {
    gpu.return
  }
}

// -----

gpu.module @m {
  // expected-error @+1 {{'llvm.func' op 'nvvm.reqntid' must hold positive sizes, got [32, 0, 1]}}
  llvm.func @k() attributes {nvvm.kernel, nvvm.reqntid = array<i32: 32, 0, 1>} {
    llvm.return
  }
}

// -----

gpu.module @m {
  // expected-error @+1 {{'gpu.func' op 'nvvm.cluster_dim' must hold positive sizes, got [-2, 1, 1]}}
  gpu.func @k() kernel attributes {nvvm.cluster_dim = array<i32: -2, 1, 1>} {
    gpu.return
  }
}

// -----

gpu.module @m {
  gpu.func @k() kernel attributes {known_block_size = array<i32: 384, 1, 1>, nvvm.cluster_dim = array<i32: 2, 1, 1>} {
    gpu.return
  }
}
