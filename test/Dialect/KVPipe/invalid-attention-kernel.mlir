// RUN: kvpipe-opt %s -split-input-file -verify-diagnostics

// Configurations the compiler cannot generate are verifier errors that name
// the attribute and what is supported.

gpu.module @m {
  // expected-error @+1 {{'head_dim' must be 64, 96, 128, 192 or 256, got 80}}
  kvpipe.attention_kernel @k {head_dim = 80 : i64, element_type = bf16, causal = false}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'head_dim' must be 64, 96, 128, 192 or 256, got 512}}
  kvpipe.attention_kernel @k {head_dim = 512 : i64, element_type = f16, causal = true}
}

// -----

// V's head dim may differ from Q/K's only as DeepSeek's (192, 128).
gpu.module @m {
  // expected-error @+1 {{'value_head_dim' must equal 'head_dim' (128) or be 128 with 'head_dim' = 192, got 64}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, value_head_dim = 64 : i64, element_type = bf16, causal = false}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'value_head_dim' must equal 'head_dim' (192) or be 128 with 'head_dim' = 192, got 256}}
  kvpipe.attention_kernel @k {head_dim = 192 : i64, value_head_dim = 256 : i64, element_type = bf16, causal = false}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'element_type' must be bf16 or f16, got 'f32'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = f32, causal = false}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'consumer_warpgroups' must be 1, 2 or 3, got 4}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 4 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'block_n' must be a multiple of 16 in [32, 256] (the wgmma N of S = Q K^T), got 100}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, block_n = 100 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'block_n' must be a multiple of 16 in [32, 256] (the wgmma N of S = Q K^T), got 512}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, block_n = 512 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'kv_stages' must be in [2, 8], got 1}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, kv_stages = 1 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'consumer_registers' must be a multiple of 8 in [24, 256], got 250}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, consumer_registers = 250 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'producer_registers' must be a multiple of 8 in [24, 256], got 16}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, producer_registers = 16 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'producer_registers' + 2 * 'consumer_registers' must fit the 64K registers of an SM for 128-thread warpgroups, got 68608 registers}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, producer_registers = 40 : i64, consumer_registers = 248 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{needs 295936 bytes of shared memory (Q 32768, K 4 x 32768, V 4 x 32768), more than the 232448 of sm_90: lower 'kv_stages' or 'block_n'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, kv_stages = 4 : i64}
}

// -----

// expected-error @+1 {{'kvpipe.attention_kernel' op must be declared inside a gpu.module}}
kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false}

// -----

gpu.module @m {
  // expected-error @+1 {{requires attribute 'causal'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'pingpong' needs 2 or 3 consumer warpgroups to take turns, got 'consumer_warpgroups' = 1}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64, pingpong = true}
}

// -----

// A persistent kernel stages its output in a tile of its own.
gpu.module @m {
  // expected-error @+1 {{needs 263168 bytes of shared memory (Q 32768, K 3 x 32768, V 3 x 32768, O 32768), more than the 232448 of sm_90: lower 'kv_stages' or 'block_n'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, kv_stages = 3 : i64, persistent = true}
}

// -----

// Head dim 256 fills the shared memory with its default 80-key blocks; the
// block of 128 keys that suits smaller head dims does not fit.
gpu.module @m {
  // expected-error @+1 {{needs 328704 bytes of shared memory (Q 65536, K 2 x 65536, V 2 x 65536), more than the 232448 of sm_90: lower 'kv_stages' or 'block_n'}}
  kvpipe.attention_kernel @k {head_dim = 256 : i64, element_type = bf16, causal = false, block_n = 128 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{needs 312320 bytes of shared memory (Q 65536, K 3 x 40960, V 3 x 40960), more than the 232448 of sm_90: lower 'kv_stages' or 'block_n'}}
  kvpipe.attention_kernel @k {head_dim = 256 : i64, element_type = bf16, causal = false, kv_stages = 3 : i64}
}

// -----

// (192, 128): V's tiles are smaller than K's.
gpu.module @m {
  // expected-error @+1 {{needs 254976 bytes of shared memory (Q 49152, K 2 x 61440, V 2 x 40960), more than the 232448 of sm_90: lower 'kv_stages' or 'block_n'}}
  kvpipe.attention_kernel @k {head_dim = 192 : i64, value_head_dim = 128 : i64, element_type = bf16, causal = false, block_n = 160 : i64}
}

// -----

// Three consumer warpgroups have 160 registers per thread: too few for the
// 128 of a 64 x 256 fp32 O accumulator and S.
gpu.module @m {
  // expected-error @+1 {{'consumer_registers' = 160 cannot hold the accumulators of a consumer thread: 128 for O ('value_head_dim' 256) and 40 for S ('block_n' 80); lower 'block_n' or 'consumer_warpgroups'}}
  kvpipe.attention_kernel @k {head_dim = 256 : i64, element_type = bf16, causal = false, consumer_warpgroups = 3 : i64}
}

// -----

// The mask's anchor is one of two.
gpu.module @m {
  // expected-error @+2 {{expected ::kvpipe::MaskAlignment to be one of: top_left, bottom_right}}
  // expected-error @+1 {{failed to parse KVPipe_MaskAlignmentAttr parameter 'value'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = true, mask_alignment = #kvpipe.mask_alignment<diagonal>}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'kvpipe.attention_kernel' op attribute 'sliding_window' failed to satisfy constraint: bool attribute}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, sliding_window = 4096 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'kv_lengths' is not supported with 'persistent' (each tile's length would be read by each role)}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, kv_lengths = true, persistent = true}
}

// -----

// The backward's tiles are fixed per head dim (docs/backward.md): the
// forward's tuning and mask attributes are named when given with `backward`.
gpu.module @m {
  // expected-error @+1 {{'pingpong' is not supported with 'backward' (the backward kernels' tiles and softmax are fixed per head dim, docs/backward.md)}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, backward = true, pingpong = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'block_n' is not supported with 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = f16, causal = true, backward = true, block_n = 64 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'persistent' is not supported with 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = true, backward = true, persistent = false}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'kv_lengths' is not supported with 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = true, backward = true, kv_lengths = true}
}

// -----

// The backward takes the forward's windows and bottom-right alignment, but
// its deterministic dQ turns assume the top-left causal mask or none.
gpu.module @m {
  // expected-error @+1 {{'sliding_window' is not supported with 'deterministic' in the backward}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = true, backward = true, deterministic = true, sliding_window = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'mask_alignment' = bottom_right is not supported with 'deterministic' and 'causal' in the backward}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = true, backward = true, deterministic = true, mask_alignment = #kvpipe.mask_alignment<bottom_right>}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'element_type' must be bf16 or f16, got 'f32'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = f32, causal = false, backward = true}
}

// -----

// `dq_atomics` is a choice of the backward consumers that split the head dim
// (above 128); not the forward's, not at 128, not with the ordered dQ turns.
gpu.module @m {
  // expected-error @+1 {{'dq_atomics' applies to the backward at head dims above 128 (the consumers that split the head dim), got no 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 256 : i64, element_type = bf16, causal = false, dq_atomics = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'dq_atomics' applies to the backward at head dims above 128 (the consumers that split the head dim), got head_dim = 128}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, backward = true, dq_atomics = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'dq_atomics' is not supported with 'deterministic' (the ordered dQ additions wait for staged bulk reductions)}}
  kvpipe.attention_kernel @k {head_dim = 192 : i64, element_type = bf16, causal = true, backward = true, deterministic = true, dq_atomics = true}
}

// -----

// `exp2_emulation` counts exponentials of every 8, and is the forward's
// (the backward's tiles and softmax are fixed).
gpu.module @m {
  // expected-error @+1 {{'exp2_emulation' counts the exp2s of every 8 computed on the FMA pipe, so it must be in [0, 8], got 12}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, exp2_emulation = 12 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'exp2_emulation' is not supported with 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true, exp2_emulation = 2 : i64}
}

// -----

// `rescale_threshold`: P may reach 2^threshold in the element type (f16's
// largest finite value is below 2^16); -1 rescales in every iteration.
gpu.module @m {
  // expected-error @+1 {{'rescale_threshold' must be in [-1, 15] (P may reach 2^threshold in the element type; -1: rescale in every iteration), got 16}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = f16, causal = false, rescale_threshold = 16 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'rescale_threshold' must be in [-1, 15] (P may reach 2^threshold in the element type; -1: rescale in every iteration), got -2}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = true, rescale_threshold = -2 : i64}
}

// -----

// `late_pv_retire` moves the overlapped loop's retire of P V behind the
// rescale's vote: both must exist.
gpu.module @m {
  // expected-error @+1 {{'late_pv_retire' moves the retire of the previous block's P V behind the rescale's vote: it needs 'overlap_softmax' and a 'rescale_threshold' of 0 or more}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, overlap_softmax = false, late_pv_retire = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'late_pv_retire' moves the retire of the previous block's P V behind the rescale's vote}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = true, rescale_threshold = -1 : i64, late_pv_retire = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'late_pv_retire' is not supported with 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true, late_pv_retire = true}
}

// -----

// `skip_idle_warpgroups`: one consumer warpgroup has rows in every tile; the
// decode and varlen tiles' rows are not a sequence's queries from the tile's
// first row.
gpu.module @m {
  // expected-error @+1 {{'skip_idle_warpgroups' needs 2 or 3 consumer warpgroups (one has rows in every tile), got 'consumer_warpgroups' = 1}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, consumer_warpgroups = 1 : i64, skip_idle_warpgroups = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'skip_idle_warpgroups' is not supported with 'varlen'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = true, varlen = true, skip_idle_warpgroups = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'skip_idle_warpgroups' is not supported with 'split_kv'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, split_kv = true, skip_idle_warpgroups = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'skip_idle_warpgroups' is not supported with 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true, skip_idle_warpgroups = true}
}

// -----

// `q_stages`: Q's ring of one or two slots; a second slot is only filled by
// a persistent CTA's next tile, and takes one more Q tile of shared memory.
gpu.module @m {
  // expected-error @+1 {{'q_stages' must be 1 or 2, got 3}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = true, persistent = true, q_stages = 3 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'q_stages' = 2 needs 'persistent' = true (a CTA of one tile loads Q once)}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = true, q_stages = 2 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'q_stages' is not supported with 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = true, backward = true, q_stages = 2 : i64}
}

// -----

gpu.module @m {
  // expected-error @+1 {{needs 263168 bytes of shared memory (Q 2 x 32768, K 2 x 32768, V 2 x 49152, O 32768), more than the 232448 of sm_90: lower 'kv_stages', 'q_stages' or 'block_n'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = true, persistent = true, tensor_row_sums = true, q_stages = 2 : i64}
}

// -----

// `lpt_tiles` renumbers the grid of (Q block, head, batch) tiles; the varlen
// and decode tiles are numbered by their own rules, and the backward's grid
// is of K/V blocks.
gpu.module @m {
  // expected-error @+1 {{'lpt_tiles' is not supported with 'varlen' (their tiles are numbered by their own rules)}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = true, varlen = true, lpt_tiles = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'lpt_tiles' is not supported with 'split_kv'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, split_kv = true, lpt_tiles = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'lpt_tiles' is not supported with 'pack_gqa'}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = true, pack_gqa = 4 : i64, lpt_tiles = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'lpt_tiles' is not supported with 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = true, backward = true, lpt_tiles = true}
}

// -----

// `tensor_row_sums`: O += P [V | 1] is one wgmma of N = value_head_dim + 8.
gpu.module @m {
  // expected-error @+1 {{'tensor_row_sums' needs 'value_head_dim' + 8 <= 256 (O += P [V | 1] is one wgmma, whose N is at most 256), got 'value_head_dim' = 256}}
  kvpipe.attention_kernel @k {head_dim = 256 : i64, element_type = bf16, causal = false, tensor_row_sums = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'tensor_row_sums' is not supported with 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true, tensor_row_sums = true}
}

// -----

// The ones block is a fourth block in each V slot: at D 192 two stages of
// 128 keys no longer fit.
gpu.module @m {
  // expected-error @+1 {{needs 250880 bytes of shared memory (Q 49152, K 2 x 43008, V 2 x 57344), more than the 232448 of sm_90}}
  kvpipe.attention_kernel @k {head_dim = 192 : i64, element_type = bf16, causal = true, tensor_row_sums = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'rescale_threshold' is not supported with 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = false, backward = true, rescale_threshold = 8 : i64}
}

// -----

// `shared_statistics` is the backward's (the forward has no per-query
// statistics to load).
gpu.module @m {
  // expected-error @+1 {{'shared_statistics' applies to the backward pass only: it needs 'backward' = true}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, shared_statistics = true}
}

// -----

// `deterministic` orders the backward's dQ additions; the forward has none.
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  // expected-error @+1 {{'deterministic' applies to the backward pass only (the forward is deterministic): it needs 'backward' = true}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = true, deterministic = true}
}

// -----

// `tile_table`: the persistent CTAs' order, from the host; one tile per CTA
// has none to give, and lpt_tiles would renumber the table's tiles.
gpu.module @m {
  // expected-error @+1 {{'tile_table' needs 'persistent' = true (one tile per CTA takes its tile from the grid)}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = true, tile_table = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'tile_table' and 'lpt_tiles' both order the tiles: the table's order is the host's}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = true, persistent = true, lpt_tiles = true, tile_table = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'tile_table' is not supported with 'backward'}}
  kvpipe.attention_kernel @k {head_dim = 64 : i64, element_type = bf16, causal = true, backward = true, tile_table = true}
}

// -----

// `separable_bias_mma` adds the key term of `separable_bias`, and gives S
// its initial accumulator, as `bias_accumulator` does.
gpu.module @m {
  // expected-error @+1 {{'separable_bias_mma' adds the key term of 'separable_bias': it needs 'separable_bias' = true}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, separable_bias_mma = true}
}

// -----

// `bias_origin_first` starts the K/V loop at the separable bias's origin.
gpu.module @m {
  // expected-error @+1 {{'bias_origin_first' starts the K/V loop at the origin of 'separable_bias': it needs 'separable_bias' = true}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, bias_origin_first = true}
}

// -----

gpu.module @m {
  // expected-error @+1 {{'separable_bias_mma' and 'bias_accumulator' both give S's initial accumulator: choose one}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = false, separable_bias = true, separable_bias_mma = true, bias_accumulator = true}
}

// -----

// The key offsets tile does not fit beside two warpgroups' persistent
// 128 x 128 tiles with the ones blocks.
gpu.module @m {
  // expected-error @+1 {{needs 234496 bytes of shared memory (Q 32768, K 2 x 32768, V 2 x 49152, key offsets 4096, O 32768), more than the 232448 of sm_90}}
  kvpipe.attention_kernel @k {head_dim = 128 : i64, element_type = bf16, causal = true, persistent = true, tensor_row_sums = true, separable_bias = true, separable_bias_mma = true, aux_types = [f32]}
  score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
    %slope = kvpipe.aux_load 0[%h] : f32
    %r = arith.subf %s, %slope : f32
    kvpipe.yield %r : f32
  }
}
