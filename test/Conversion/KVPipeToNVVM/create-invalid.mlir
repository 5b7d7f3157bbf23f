// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(func.func(convert-kvpipe-to-nvvm),gpu.module(gpu.func(convert-kvpipe-to-nvvm)))'

// kvpipe.create adds its barrier array to the nearest symbol table. When the
// pass runs on functions, that table is their common parent, which passes
// running on the functions in parallel must not modify: an error, not a race.

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

func.func @on_function() -> !p {
  // expected-error @+1 {{'kvpipe.create' op needs an enclosing symbol table (a module or gpu.module) inside the op that convert-kvpipe-to-nvvm runs on, to hold its barriers: run the pass on the module}}
  %p = kvpipe.create : !p
  return %p : !p
}

func.func @another() -> !p {
  // expected-error @+1 {{'kvpipe.create' op needs an enclosing symbol table}}
  %p = kvpipe.create : !p
  return %p : !p
}

// -----

!p = !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 2>

gpu.module @kernels {
  gpu.func @on_gpu_func() kernel {
    // expected-error @+1 {{'kvpipe.create' op needs an enclosing symbol table}}
    %p = kvpipe.create : !p
    kvpipe.init %p : !p
    gpu.return
  }
}
