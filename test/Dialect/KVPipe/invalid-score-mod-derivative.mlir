// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// The backward differentiates a score_mod op by op (docs/modifiers.md): an op
// the score reaches and that it cannot differentiate is an error at the op.

gpu.module @kernels {
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %two = arith.constant 2.0 : f32
    // expected-error @+1 {{'math.powf' op cannot be differentiated in the 'score_mod' region of a 'backward' kvpipe.attention_kernel: the score reaches it}}
    %p = math.powf %s, %two : f32
    kvpipe.yield %p : f32
  }
}

// -----

// Through integer ops too: the remainder of a float is not differentiated.
gpu.module @kernels {
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = true, backward = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %t = math.tanh %s : f32
    %c = arith.constant 3.0 : f32
    // expected-error @+1 {{'arith.remf' op cannot be differentiated}}
    %r = arith.remf %t, %c : f32
    kvpipe.yield %r : f32
  }
}

// -----

// The same region is fine for a forward kernel (nothing differentiates it).
gpu.module @kernels {
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %two = arith.constant 2.0 : f32
    %p = math.powf %s, %two : f32
    kvpipe.yield %p : f32
  }
}

// -----

// Ops the score does not reach need no derivative (ALiBi's bias: an integer
// distance converted to float), and comparisons of the score have none.
gpu.module @kernels {
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %d = arith.subi %q, %kv : index
    %di = arith.index_cast %d : index to i32
    %df = arith.sitofp %di : i32 to f32
    %two = arith.constant 2.0 : f32
    %pw = math.powf %df, %two : f32
    %zero = arith.constant 0.0 : f32
    %neg = arith.cmpf olt, %s, %zero : f32
    %r0 = arith.subf %s, %pw : f32
    %r = arith.select %neg, %zero, %r0 : f32
    kvpipe.yield %r : f32
  }
}
