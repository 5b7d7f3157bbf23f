// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// Malformed pipeline and mbarrier types are parser errors with a location.

// expected-error @+1 {{expected '<'}}
func.func @no_params(%p: !kvpipe.pipeline)

// -----

// expected-error @+1 {{expected ','}}
func.func @missing_param(%p: !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1>)

// -----

// expected-error @+1 {{duplicate or unknown struct parameter name: stages}}
func.func @misnamed_param(%p: !kvpipe.pipeline<stages = 2, qk_stages = 1, producers = 1, consumers = 1>)

// -----

// expected-error @+2 {{integer value too large}}
// expected-error @+1 {{failed to parse KVPipe_PipelineType parameter 'kv_stages' which is to be a `int64_t`}}
func.func @huge_param(%p: !kvpipe.pipeline<kv_stages = 99999999999999999999, qk_stages = 1, producers = 1, consumers = 1>)

// -----

// expected-error @+2 {{expected integer value}}
// expected-error @+1 {{failed to parse KVPipe_PipelineType parameter 'kv_stages' which is to be a `int64_t`}}
func.func @non_integer_param(%p: !kvpipe.pipeline<kv_stages = two, qk_stages = 1, producers = 1, consumers = 1>)

// -----

// expected-error @+1 {{unknown  type `pipelin` in dialect `kvpipe`}}
func.func @unknown_type(%p: !kvpipe.pipelin<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1>)

// -----

// expected-error @+1 {{expected '>'}}
func.func @extra_param(%p: !kvpipe.pipeline<kv_stages = 2, qk_stages = 1, producers = 1, consumers = 1, extra = 3>)
