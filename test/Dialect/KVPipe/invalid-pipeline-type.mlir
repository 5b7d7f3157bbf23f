// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// The pipeline type verifier: every parameter positive, a ring of at most 32
// slots, arrival counts that fit mbarrier's 20 bits.

// expected-error @+1 {{pipeline parameter 'kv_stages' must be a positive integer, got 0}}
func.func @kv_zero(%p: !kvpipe.pipeline<kv_stages = 0, qk_stages = 1, producers = 1, consumers = 1>)

// -----

// expected-error @+1 {{pipeline parameter 'kv_stages' must be a positive integer, got -2}}
func.func @kv_negative(%p: !kvpipe.pipeline<kv_stages = -2, qk_stages = 1, producers = 1, consumers = 1>)

// -----

// expected-error @+1 {{pipeline parameter 'qk_stages' must be a positive integer, got 0}}
func.func @qk_zero(%p: !kvpipe.pipeline<kv_stages = 2, qk_stages = 0, producers = 1, consumers = 1>)

// -----

// expected-error @+1 {{pipeline parameter 'qk_stages' must be a positive integer, got -1}}
func.func @qk_negative(%p: !kvpipe.pipeline<kv_stages = 2, qk_stages = -1, producers = 1, consumers = 1>)

// -----

// expected-error @+1 {{pipeline parameter 'producers' must be a positive integer, got 0}}
func.func @producers_zero(%p: !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 0, consumers = 1>)

// -----

// expected-error @+1 {{pipeline parameter 'consumers' must be a positive integer, got -128}}
func.func @consumers_negative(%p: !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = -128>)

// -----

// expected-error @+1 {{pipeline 'kv_stages' * 'qk_stages' must be at most 32, got 11 * 3}}
func.func @too_many_stages(%p: !kvpipe.pipeline<kv_stages = 11, qk_stages = 3, producers = 1, consumers = 1>)

// -----

// expected-error @+1 {{pipeline 'kv_stages' * 'qk_stages' must be at most 32, got 33 * 1}}
func.func @too_many_kv_stages(%p: !kvpipe.pipeline<kv_stages = 33, qk_stages = 1, producers = 1, consumers = 1>)

// -----

// The product of two huge factors must not overflow into a small number.
// expected-error @+1 {{pipeline 'kv_stages' * 'qk_stages' must be at most 32, got 4611686018427387904 * 4}}
func.func @overflowing_product(%p: !kvpipe.pipeline<kv_stages = 4611686018427387904, qk_stages = 4, producers = 1, consumers = 1>)

// -----

// expected-error @+1 {{pipeline parameter 'consumers' must be at most 1048575 (mbarrier arrival count), got 1048576}}
func.func @too_many_consumers(%p: !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1048576>)

// -----

// expected-error @+1 {{pipeline parameter 'producers' must be at most 1048575 (mbarrier arrival count), got 2000000}}
func.func @too_many_producers(%p: !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 2000000, consumers = 1>)
