// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// The modifier regions of kvpipe.attention_kernel: one rule per case.

gpu.module @kernels {
  // expected-error @+1 {{'score_mod' region must have 5 block arguments (f32 scaled score, index batch, head, query, key), got 1}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false}
  score_mod {
  ^bb0(%s: f32):
    kvpipe.yield %s : f32
  }
}

// -----

gpu.module @kernels {
  // expected-error @+1 {{'score_mod' region's block argument #2 must be 'index' (f32 scaled score, index batch, head, query, key), got 'i32'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: i32, %q: index, %kv: index):
    kvpipe.yield %s : f32
  }
}

// -----

gpu.module @kernels {
  // expected-error @+1 {{'mask_mod' region must have 4 block arguments (index batch, head, query, key), got 5}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false}
  mask_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %t = arith.constant true
    kvpipe.yield %t : i1
  }
}

// -----

gpu.module @kernels {
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false}
  mask_mod {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    // expected-error @+1 {{must yield one 'i1' in the 'mask_mod' region, got 1 values}}
    kvpipe.yield %q : index
  }
}

// -----

gpu.module @kernels {
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    // expected-error @+1 {{must yield one 'f32' in the 'score_mod' region, got 2 values}}
    kvpipe.yield %s, %s : f32, f32
  }
}

// -----

gpu.module @kernels {
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    // A region is evaluated per score element: no side effects.
    // expected-error @+1 {{'gpu.printf' op is not allowed in the 'score_mod' region of kvpipe.attention_kernel: only side-effect free arith and math ops and kvpipe.aux_load}}
    gpu.printf "%f", %s : f32
    kvpipe.yield %s : f32
  }
}

// -----

gpu.module @kernels {
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    // Not arith or math, even without side effects.
    // expected-error @+1 {{'gpu.thread_id' op is not allowed in the 'score_mod' region of kvpipe.attention_kernel}}
    %t = gpu.thread_id x
    kvpipe.yield %s : f32
  }
}

// -----

gpu.module @kernels {
  // expected-error @+1 {{'mask_mod' is not supported with 'deterministic'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, backward = true, deterministic = true}
  mask_mod {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %keep = arith.cmpi sle, %kv, %q : index
    kvpipe.yield %keep : i1
  }
}

// -----

gpu.module @kernels {
  // A pack-GQA tile's rows are heads of their own: the separable bias's
  // terms are evaluated at one head per tile.
  // expected-error @+1 {{'separable_bias' is not supported with 'pack_gqa' (its terms are the tile's one head's)}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, kv_lengths = true, pack_gqa = 4 : i64, consumer_warpgroups = 1 : i64, separable_bias = true, aux_types = [f32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0 [%h] : f32
    %d = arith.subi %q, %kv : index
    %i = arith.index_cast %d : index to i32
    %f = arith.sitofp %i : i32 to f32
    %a = math.absf %f : f32
    %bias = arith.mulf %slope, %a : f32
    %r = arith.subf %s, %bias : f32
    kvpipe.yield %r : f32
  }
}

// -----

gpu.module @kernels {
  // expected-error @+1 {{'aux_types' element #1 must be f32 or i32, got 'f16'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, aux_types = [f32, f16]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    kvpipe.yield %s : f32
  }
}

// -----

gpu.module @kernels {
  // expected-error @+1 {{'aux_types' needs a 'score_mod' or 'mask_mod' region to read the tensors}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, aux_types = [f32]}
}

// -----

gpu.module @kernels {
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, aux_types = [f32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    // expected-error @+1 {{reads auxiliary tensor #1 but the kernel declares 1 in 'aux_types'}}
    %x = kvpipe.aux_load 1[%h] : f32
    kvpipe.yield %x : f32
  }
}

// -----

gpu.module @kernels {
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, aux_types = [f32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    // expected-error @+1 {{reads auxiliary tensor #-1 but the kernel declares 1 in 'aux_types'}}
    %x = kvpipe.aux_load -1[%h] : f32
    kvpipe.yield %x : f32
  }
}

// -----

gpu.module @kernels {
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, aux_types = [i32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    // expected-error @+1 {{result type 'f32' must be the element type of auxiliary tensor #0 ('i32')}}
    %x = kvpipe.aux_load 0[%h] : f32
    kvpipe.yield %x : f32
  }
}

// -----

func.func @outside(%i: index) -> f32 {
  // expected-error @+1 {{must be in a 'score_mod' or 'mask_mod' region of kvpipe.attention_kernel}}
  %x = kvpipe.aux_load 0[%i] : f32
  return %x : f32
}

// -----

gpu.module @kernels {
  // expected-error @+1 {{'aux_grads' needs 'backward' and a 'score_mod' region (the gradients of the tensors it reads)}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, aux_types = [f32], aux_grads = array<i64: 0>}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %x = kvpipe.aux_load 0[%h] : f32
    %r = arith.addf %s, %x : f32
    kvpipe.yield %r : f32
  }
}

// -----

gpu.module @kernels {
  // expected-error @+1 {{'aux_grads' element 1 is not an auxiliary tensor (there are 1)}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true, aux_types = [f32], aux_grads = array<i64: 1>}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %x = kvpipe.aux_load 0[%h] : f32
    %r = arith.addf %s, %x : f32
    kvpipe.yield %r : f32
  }
}

// -----

gpu.module @kernels {
  // expected-error @+1 {{'aux_grads' element 0 must name an f32 tensor (an i32 tensor has no gradient)}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true, aux_types = [i32], aux_grads = array<i64: 0>}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %x = kvpipe.aux_load 0[%h] : i32
    %f = arith.sitofp %x : i32 to f32
    %r = arith.addf %s, %f : f32
    kvpipe.yield %r : f32
  }
}

// -----

gpu.module @kernels {
  // expected-error @+1 {{'aux_grads' names tensor 0 twice}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true, aux_types = [f32], aux_grads = array<i64: 0, 0>}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %x = kvpipe.aux_load 0[%h] : f32
    %r = arith.addf %s, %x : f32
    kvpipe.yield %r : f32
  }
}
