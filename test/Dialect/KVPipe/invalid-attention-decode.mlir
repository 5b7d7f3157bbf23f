// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// The decode attributes of kvpipe.attention_kernel (split_kv, pack_gqa):
// each rule of AttentionConfig::get that names them.

gpu.module @m {
  // expected-error @+1 {{'pack_gqa' (query heads per K/V head packed into a tile) must be in [1, 64] (a consumer warpgroup holds 64 rows), got 65}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, pack_gqa = 65 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'pack_gqa' (query heads per K/V head packed into a tile) must be in [1, 64] (a consumer warpgroup holds 64 rows), got 0}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, pack_gqa = 0 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'split_kv' is not supported with 'persistent'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, split_kv = true, persistent = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'pack_gqa' is not supported with 'persistent'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = f16, causal = true, pack_gqa = 4 : i64, persistent = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'split_kv' is not supported with 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = true, backward = true, split_kv = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'pack_gqa' is not supported with 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true, pack_gqa = 2 : i64}
}
