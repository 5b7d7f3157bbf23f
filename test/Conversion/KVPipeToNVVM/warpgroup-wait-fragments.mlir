// RUN: kvpipe-opt %s --kvpipe-check-nvptx-targets --convert-kvpipe-to-nvvm -split-input-file -verify-diagnostics

// Regressions (found by tools/fuzz/kvpipe_fuzz.py): kvpipe.warpgroup_wait
// admits any rank-1 f32 vector, and its lowering pins every register of each
// fragment with one inline-asm statement. A vector<65536xf32> made
// --kvpipe-to-ptx run for minutes (a hang to the fuzzer), a scalable
// vector<[4]xf32> made NVPTX abort ("LLVM ERROR: Don't know how to legalize
// this scalable vector type"). The fragments are wgmma accumulators: at most
// 128 f32 registers per thread (64 x 256 over 128 threads), fixed size.
// (In a gpu.module, vectors NVPTX cannot compile at all are rejected before,
// at the first op that uses them: nvptx-types.mlir.)

gpu.module @m {
  gpu.func @k(%v: vector<4096xf32>) kernel {
    // expected-error @+1 {{'kvpipe.warpgroup_wait' op fragments must be wgmma accumulators of at most 128 f32 registers per thread, got 'vector<4096xf32>'}}
    %r = kvpipe.warpgroup_wait %v {pending = 0} : vector<4096xf32>
    gpu.return
  }
}

// -----

func.func @k(%v: vector<[4]xf32>) {
  // expected-error @+1 {{'kvpipe.warpgroup_wait' op fragments must be wgmma accumulators of at most 128 f32 registers per thread, got 'vector<[4]xf32>'}}
  %r = kvpipe.warpgroup_wait %v {pending = 0} : vector<[4]xf32>
  return
}

// -----

gpu.module @m {
  gpu.func @k(%v: vector<65536xf32>) kernel {
    // expected-error @-1 {{'gpu.func' op uses 'vector<65536xf32>', a vector of more than 16384 elements (NVPTX cannot select it)}}
    %r = kvpipe.warpgroup_wait %v {pending = 0} : vector<65536xf32>
    gpu.return
  }
}

// -----

// The largest accumulator, m64n256, is 128 registers.
gpu.module @m {
  gpu.func @k(%v: vector<128xf32>) kernel {
    %r = kvpipe.warpgroup_wait %v {pending = 0} : vector<128xf32>
    gpu.return
  }
}
