//===- KVPipeAttentionOps.td - attention kernel declarations -*- tablegen -*-===//

#ifndef KVPIPE_DIALECT_KVPIPE_IR_KVPIPEATTENTIONOPS_TD
#define KVPIPE_DIALECT_KVPIPE_IR_KVPIPEATTENTIONOPS_TD

include "kvpipe/Dialect/KVPipe/IR/KVPipeDialect.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def KVPipe_MaskAlignment : I32EnumAttr<"MaskAlignment",
    "where the causal diagonal and the sliding window are anchored", [
      I32EnumAttrCase<"TopLeft", 0, "top_left">,
      I32EnumAttrCase<"BottomRight", 1, "bottom_right">]> {
  let cppNamespace = "::kvpipe";
  let genSpecializedAttr = 0;
}

def KVPipe_MaskAlignmentAttr
    : EnumAttr<KVPipe_Dialect, KVPipe_MaskAlignment, "mask_alignment"> {
  let assemblyFormat = "`<` $value `>`";
  let summary = "anchor of the causal mask and of sliding windows";
  let description = [{
    `#kvpipe.mask_alignment<top_left>`: query `i` is aligned with key `i`
    (torch's `is_causal`). `#kvpipe.mask_alignment<bottom_right>`: the last
    query is aligned with the last key, so query `i` of `seq_q` is aligned
    with key `i + seq_kv - seq_q` (flash-attn and serving engines: a chunk of
    new queries at the end of a KV cache).
  }];
}

def KVPipe_AttentionKernelOp : KVPipe_Op<"attention_kernel",
    [Symbol, IsolatedFromAbove]> {
  let summary = "declaration of a FlashAttention kernel (forward or backward) to generate";
  let description = [{
    Declares, inside a `gpu.module`, a FlashAttention forward kernel that
    `--kvpipe-expand-attention` replaces by the generated `gpu.func` of the
    same name, written with kvpipe pipelines, TMA, wgmma and upstream
    dialects:

    ```mlir
    gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
      kvpipe.attention_kernel @fa_fwd {head_dim = 128 : i64, element_type = bf16, causal = true}
    }
    ```

    It computes `O = softmax(scale * Q K^T [+ causal mask]) V` with fp32
    accumulation and the output in the input type, and optionally the fp32
    log-sum-exp of each row, for any `seq_q` and `seq_kv` (tails masked),
    batch and heads in the grid and grouped-query attention.

    Masks are relative to the diagonal of query `i` at key `i + d`, where
    `d = 0` with `mask_alignment = #kvpipe.mask_alignment<top_left>` (the
    default, torch's `is_causal`) and `d = seq_kv - seq_q` with
    `#kvpipe.mask_alignment<bottom_right>` (flash-attn's). `causal` keeps the
    keys `<= i + d`. `sliding_window = true` adds two runtime i32
    parameters, `window_left` and `window_right` (negative: unbounded), and
    keeps the keys in `[i + d - window_left, i + d + window_right]` (with
    `causal`, the right bound is 0 whatever `window_right` says):
    flash-attn's `window_size`. K/V blocks outside every row's range are
    never loaded, and only the blocks crossing a bound are masked element by
    element. With these masks a query row may see no key: it gets zeros and
    a log-sum-exp of +inf (flash-attn's convention, so that a backward pass
    reads P = 0 for it).

    `kv_lengths = true` adds a runtime parameter `kv_lengths`, a pointer to
    one i32 per batch: batch `b` attends to the first `kv_lengths[b]` keys
    of its K and V, whose tensor maps describe a cache of `seq_kv` keys (a
    padded KV cache, flash-attn's `cache_seqlens`); blocks past the length
    are never loaded. Not with `persistent`.

    `page_size` (16, 32, 64, 128 or 256; with `kv_lengths`) makes K and V a
    paged cache, as vLLM, SGLang and flash-attn's `block_table` address it:
    their tensor maps describe the whole cache, `(num_pages, page_size,
    heads_kv, head_dim)` seen as `(B, H, S, D)` with B the page and S the row
    in the page, and two runtime parameters follow `kv_lengths`:
    `block_table`, a pointer to i32 page indices, `max_pages_per_seq` per
    batch (its row stride), and `max_pages_per_seq` itself. Key `j` of batch
    `b` is row `j % page_size` of page `block_table[b * max_pages_per_seq +
    j / page_size]`. The producer fills each slot of `block_n` keys with
    `block_n / min(page_size, block_n)` TMA boxes of `min(page_size,
    block_n)` rows, each from its page (one i32 load of the block table per
    page; the logical page is clamped to the batch's last page, so the
    producer never reads past the table's row). `block_n` must be a multiple
    of `page_size` or divide it; by default it is the head dim's, lowered to
    the largest block size that is (head dims 96, 192 and 256). Masks are in
    logical key positions and work unchanged. A page index outside the cache
    reads zeros (TMA's out-of-bounds fill).

    `varlen = true` computes a batch of sequences packed without padding
    (flash-attn's `flash_attn_varlen_func`): it adds the runtime parameters
    `cu_seqlens_q` and `cu_seqlens_k` (pointers to `batch + 1` i32 prefix
    offsets: sequence `b` has the query rows `[cu_seqlens_q[b],
    cu_seqlens_q[b+1])` and the key rows `[cu_seqlens_k[b],
    cu_seqlens_k[b+1])`), `o` (a pointer to the packed output, `(total_q,
    heads_q, value_head_dim)` contiguous) and `total_q` (its rows). `seq_q`
    and `seq_kv` are the longest sequences (the grid); the Q, K and V maps
    describe the packed tensors as `(1, heads, total, head_dim)`. Each tile
    reads its sequence's offsets and lengths (one load each), loads at
    offset + row, masks the keys past its sequence's length, does no K/V
    work for a Q block past its sequence's end, and anchors the masks at the
    sequence's own lengths. The output is written with 16-byte stores
    predicated on the row being inside the sequence (a TMA store of the
    tile would write into the next sequence's rows); the log-sum-exp goes to
    `lse[head * total_q + row]` (flash-attn's `(nheads, total_q)`). Not with
    `persistent`. With `page_size` (a paged cache: sequence `b`'s keys are its
    row of the block table) `kv_lengths` may give the key counts
    (`kv_lengths[b]`, clamped to `seq_kv`; vLLM's `seqused_k`) in place of
    `cu_seqlens_k`, which the kernel then does not take; without a paged
    cache `kv_lengths` is refused (packed K/V rows need their offsets).

    `sinks = true` (forward) adds gpt-oss's attention sinks: a runtime
    parameter `sinks`, a pointer to one f32 logit per query head, which
    joins each row's softmax as one more key of value zero. The epilogue
    divides O by `l + exp2(sink log2(e) - m c)` instead of `l` (the running
    maximum m and the base-2 scale c of the online softmax) and writes the
    log-sum-exp with the sink in it, `log(exp(lse) + exp(sink))`, computed
    from the larger of the two so that neither overflows; a row that sees no
    key gets zeros and the sink as its log-sum-exp. With `split_kv` the
    combine kernel takes `sinks` (after `num_splits`) and merges the sink as
    one more split of output zero. The backward needs no sinks of its own:
    it reads the forward's log-sum-exp, which includes them.

    Required: `head_dim` (of Q and K: 64, 96, 128, 192 or 256),
    `element_type` (bf16 or f16), `causal`. Optional: `value_head_dim` (of V
    and the output; default `head_dim`, or 128 with `head_dim` = 192, as
    DeepSeek's attention). Optional tuning attributes, with defaults per
    head dim (docs/performance.md, "Head dims"):
    `block_n` (keys per pipeline slot: a multiple of 16 in [32, 256]; by
    default 128, 112 at head dims 96 and 192 but 128 for (192, 128), 80 at
    256), `kv_stages` (slots of
    the K and V rings, >= 2), `consumer_warpgroups` (1, 2 or 3; the Q block has
    64 rows per consumer warpgroup), `producer_registers` and
    `consumer_registers` (the `setmaxnreg` targets of the roles),
    `overlap_softmax` (issue `S_j = Q K_j^T` together with
    `O += P_{j-1} V_{j-1}` and compute the softmax of block j while the
    tensor cores work, FA3's intra-warpgroup pipelining; default true),
    `pingpong` (with two or three consumer warpgroups, named barriers order
    their wgmma issue in turn, so that one warpgroup's softmax runs while
    the tensor cores work on another's GEMMs, FA3's inter-warpgroup
    scheduling; default true with two or more consumer warpgroups),
    `persistent` (one CTA per SM loops over the (Q block, head, batch)
    tiles, so that the next tile's Q load and first K/V blocks overlap the
    current tile's epilogue; the output is staged in a buffer of its own).

    Decode and short queries against a long KV cache (docs/serving.md,
    "Decode"): `split_kv = true` splits each tile's K/V blocks over
    `num_splits` CTAs, a runtime i32 parameter (the tile space grows a split
    coordinate: grid x is `ceil(seq_q / rows) * num_splits`). Each CTA writes
    its normalised fp32 partial output and its log-sum-exp (-inf for a split
    without keys) to two workspace buffers, `o_partial` and `lse_partial`,
    instead of `o_map` and `lse`; the expansion adds a second kernel,
    `@<name>_combine`, that merges the splits of each row with their
    log-sum-exps into the output (element type) and the final log-sum-exp
    (+inf for a row without keys). `pack_gqa = G` (1 to 64) packs the `G`
    query heads of a K/V head into one tile: the tile is (packed Q block,
    K/V head, batch), and the 64 rows of a consumer warpgroup are
    `floor(64 / G)` query positions times `G` heads (row `s * G + g`), so
    that each K/V block is read once per group instead of once per query
    head; the Q and O tensor maps are 5-D `(B, H_kv, S, G, D)` whose boxes
    TMA gathers (the launcher must pass `heads_per_kv_head = G`). Neither
    with `persistent`; both together are the decode kernel:

    ```mlir
    kvpipe.attention_kernel @fa_decode {head_dim = 128 : i64, element_type = bf16, causal = false, split_kv = true, pack_gqa = 4 : i64, kv_lengths = true}
    ```

    `backward` (default false) asks for the backward pass of the forward
    kernel with the same `head_dim`, `element_type` and `causal`: the
    expansion generates a family of three kernels, `@<name>_preprocess`
    (`delta = rowsum(dO * O)`, the log-sum-exp in base 2, the fp32 dQ
    accumulator zeroed), `@<name>` (K/V blocks resident per CTA, Q and dO
    streamed through pipelines by a TMA producer warpgroup; dK and dV of the
    block, dQ accumulated with fp32 atomics) and `@<name>_postprocess` (dQ in
    the element type). Its tiles are fixed per head dim, so the forward's
    tuning attributes are rejected with `backward` (docs/backward.md). The
    masks of the forward are the backward's too: `mask_alignment`,
    `sliding_window` (the main kernel's `window_left` / `window_right`
    parameters), and the modifier regions below:

    ```mlir
    kvpipe.attention_kernel @fa_bwd {head_dim = 128 : i64, element_type = bf16, causal = true, backward = true}
    ```

    `deterministic` (with `backward` only; default false) makes the
    gradients bit-identical run to run: the contributions to a Q block's dQ
    are added in a fixed order (K/V block, then consumer warpgroup), each
    waiting on a per-(batch, head, Q block) counter in global memory that
    the previous contribution releases (FA3's deterministic mode). The
    preprocess and main kernels take one more parameter, `dq_semaphore`
    (one i32 per 64-row Q block, zeroed by the preprocess). It supports the
    top-left causal mask or none: a window, a bottom-right causal mask or a
    `mask_mod` with it is a verifier error.

    `dq_atomics` (with `backward` at head dims above 128, not with
    `deterministic`; default true there, false elsewhere) adds each
    warpgroup's dQ columns to the fp32 accumulator straight from registers
    (`red.global.add.v4.f32`, FA3's choice at head dim 256) instead of
    staging them in shared memory for bulk reductions: no staging tiles
    (their room holds a second dO slot), no waits for a previous
    reduction, no barriers between dQ's column blocks (docs/backward.md,
    "Head dims 192 and 256"). `dq_atomics = false` keeps the staged way.

    `exp2_emulation` (forward; 0 to 8, default 0) computes that many of
    every 8 exponentials of the softmax's P on the FMA pipe with a
    polynomial instead of the SFU's `ex2.approx` (FA4's exp2 emulation;
    `kvpipe.fragment_exp2`'s `emulated`): the SFU issues 16 a cycle per SM,
    which bounds the softmax at head dim 64 and with a score_mod that uses
    it too (a soft-cap's tanh).

    `rescale_threshold` (forward; -1 to 15, default 8) is when the online
    softmax moves a row's running maximum: with `t` >= 0, only when a block's
    maximum passes it by more than `t` in base-2 exponent units (FA4's
    conditional rescaling), so that P may reach `2^t` (which bf16 and f16
    hold, as the fp32 sums and O do) and, once the maximum has settled, `O`
    is not rescaled at all: the rescale is skipped for every warp whose
    rows' factors are all 1. `0` moves it on every increase (the exact
    maximum, skipping only when no row of the warp grew); `-1` rescales `O`
    in every iteration without testing (the skeleton's form).

    `tensor_row_sums` (forward, experimental, default false) computes the
    softmax's row sums on the tensor cores: each V slot holds one more
    column block, of ones, and `O += P V` runs with 8 more columns, whose
    accumulators are the sums of P (rescaled with O), instead of a FADD per
    element of P.

    `skip_idle_warpgroups` (forward, experimental, default false; 2 or 3
    consumer warpgroups; not with `varlen`, `split_kv` or `pack_gqa`): a
    consumer warpgroup whose 64 rows all lie past `seq_q` (the last tile of
    a sequence that is not a multiple of the tile's rows) only waits for
    and releases the tile's K/V slots, and the others take the ping-pong
    turns without it (`kvpipe.turn_takers`), so that the tensor cores do
    the tile's real rows only.

    `mask_bits` (forward, experimental, default false) masks a block that
    crosses `seq_kv` or a row's bounds through bit masks: a few integer ops
    per row half give the kept elements of each 32 as one word, and each
    element is one bit test and select (ptxas: R2P, seven predicates an
    instruction), instead of comparing every element's key with the bounds
    (FA4's form).

    `late_pv_retire` (forward, experimental, default false; with
    `overlap_softmax` and `rescale_threshold` >= 0) retires the previous
    block's P V in the arms of the rescale's branch, after its vote, and
    releases the V slot after it (`fragment_rescale`'s `late_retire`), so
    that the softmax of a block runs under the previous block's P V within
    the warpgroup: ptxas issues the wait it finds before the vote at the
    start of the softmax.

    `lpt_tiles` (forward, experimental, default false; not with `varlen`,
    `split_kv` or `pack_gqa`) orders the grid's tiles as FA3/FA4's LPT
    scheduler: the (batch, head) pairs in groups whose K and V fit in half
    of the L2 cache (`AttentionConfig::kL2TileGroupBytes`), each group's
    tiles taken Q block by Q block across its heads, longest first when
    causal, so that the longest tiles of every head start before the short
    ones of any (the default order is one head's tiles after another's, each
    head longest first: the last heads' long tiles start late and end
    alone). The grid and the ABI are unchanged; a persistent kernel walks
    the same order.

    `tile_table` (forward, experimental, default false; needs `persistent`,
    not with `lpt_tiles`) adds a runtime parameter `tile_table`, a pointer
    to i32 tile indices: a persistent CTA `i` takes in round `r` the tile
    at `tile_table[r * gridDim.x + i]` until it reads -1 (`kvpipe.tile`'s
    `schedule`). The host computes the table for the grid it launches
    (docs/kernel-abi.md, "Tile tables"): kvpipe's runtime assigns the tiles
    longest first, each to the CTA with the least work so far, with the
    heads in groups whose K and V fit in L2, which balances causal tiles
    where the closed-form order of a persistent grid cannot.

    `separable_bias` (forward, experimental, default false; with a
    `score_mod` only, where it changes nothing unless the region is a
    separable bias) splits an additive `uniform * |d|` bias (`d` linear in
    the query and key: ALiBi) off the diagonal: one FMA per element in the
    K/V blocks where `d` keeps one sign, the rest a shift of each row in the
    online softmax (docs/modifiers.md, "Separable biases off the
    diagonal").

    `separable_bias_mma` (forward, experimental, default false; with
    `separable_bias` only) adds the separable bias's key term in the K/V
    blocks where `d` keeps one sign by one more wgmma k-step before the QK
    wgmma instead of an FMA per element: S = G n + Q K^T, the key's offset
    `n` in the block from a constant shared-memory tile and the factor G
    (split into three bf16/f16 parts) from registers (docs/modifiers.md,
    "The key term on the tensor cores").

    `bias_origin_first` (forward, experimental, default false; with
    `separable_bias` only, where it changes nothing unless the region is a
    separable bias) visits the tile's K/V blocks from the one holding the
    separable bias's origin (`d` = 0, its largest value) for the tile's
    last row down to the first block, then from the block after it up to
    the last, instead of from the first up: the bias falls in each
    direction, so the online softmax's running maximum settles in the
    first blocks and O is rarely rescaled after them (ALiBi, whose maxima
    grow block by block towards the diagonal otherwise)
    (docs/modifiers.md, "The bias's origin first").

    `static_row_max` (forward, experimental, default false; with a
    `score_mod` only, where it changes nothing unless the compiler bounds
    the region's result: soft-capping's `cap * tanh(score / cap)`, a clamp)
    replaces the online softmax's running row maximum by a constant bound of
    the scores: no row maxima, no rescale of O, P at most 2^60 and at least
    2^-100 of its largest possible value (docs/modifiers.md, "Bounded
    scores").

    `prescaled_q` (forward, experimental, default false; with a `score_mod`
    only, where it changes nothing for an additive region or a separable
    bias) multiplies each consumer warpgroup's Q rows in shared memory by
    the softmax scale (times the region's leading constant factor, a
    soft-cap's 1 / cap) once per tile, rounded to Q's element type, instead
    of each score before the region: one multiplication per element fewer
    on the path from S to P (docs/modifiers.md, "Pre-scaled Q").

    `bias_accumulator` (forward, experimental, default false; with an
    additive `score_mod` only, where it changes nothing otherwise) computes
    each K/V block's bias before the block's QK wgmma, as its initial
    accumulator (S = bias + Q K^T), instead of adding
    it to the retired scores: the bias's arithmetic and reads leave the
    dependent path from S's retire to P and run while the warpgroup waits
    for K and its turn (docs/modifiers.md, "The bias as the accumulator").

    `q_stages` (forward, experimental, default 1; 2 only with `persistent`)
    gives Q a ring of two slots: the producer loads the next tile's Q rows
    while the consumers still read this tile's, instead of after their last
    Q K^T retired, so that a short tile starts on Q and its first K/V
    block already in shared memory. The output is staged in a tile of its
    own (as every persistent kernel's is). Costs one more Q tile of shared
    memory.

    `shared_statistics` (with `backward` only; default true there) has the
    producer copy each Q block's log-sum-exp and delta rows (64 fp32 values
    each) into shared memory with `kvpipe.bulk_load`, completing on the
    barriers of the Q and dO slots they belong to, so that the consumers
    read them from shared memory (FA4's sm_90 backward); the main kernel's
    `lse_log2` and `delta` parameters must then be 16-byte aligned. `false`
    reads them from global memory per thread, after an L1 prefetch.

    Modifiers (docs/modifiers.md; FlexAttention's `score_mod` and
    `mask_mod`): an optional `score_mod` region
    computes each score from the scaled score `s = scale * q . k` (the score
    FlexAttention's `score_mod` receives) and the batch, head, query and key
    indices of the element, and yields the new score; an optional `mask_mod`
    region computes from the indices whether the key is kept (`i1`, true:
    kept), on top of the built-in masks (causal, windows, sequence tails).
    Both are one block of `arith` and `math` ops ending in `kvpipe.yield`,
    evaluated per score element; the head index is the query head. They may
    read auxiliary tensors with `kvpipe.aux_load`: `aux_types` lists their
    element types (f32 or i32), and each adds a runtime parameter
    `aux<i>`, a pointer to the tensor (flat, read at the index the region
    computes). The score_mod is applied before any mask, so a masked score
    is -inf whatever the region yields. With `backward` the compiler
    differentiates the score_mod with respect to the score, op by op; an op
    the score reaches that it cannot differentiate (anything but
    `arith.addf`, `subf`, `mulf`, `divf`, `negf`, `select`, `maximumf`,
    `minimumf`, `maxnumf`, `minnumf` and `math.fma`, `tanh`, `exp`, `exp2`,
    `log`, `log2`, `sqrt`, `absf`) is a verifier error at that op.
    `aux_grads` (backward only) lists the f32 tensors the score_mod reads
    whose gradients the main kernel computes: each adds a parameter
    `aux<i>_grad`, an fp32 buffer of the tensor's elements (zeroed by the
    caller) into which the kernel adds, for every score and every read of
    the tensor, the score's gradient times the region's derivative with
    respect to the value read (learnable biases and slopes).

    ```mlir
    kvpipe.attention_kernel @softcap_window {head_dim = 128 : i64, element_type = bf16, causal = false, aux_types = [f32]}
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index):
      %slope = kvpipe.aux_load 0[%h] : f32
      ...
      kvpipe.yield %t : f32
    } mask_mod {
    ^bb0(%b: index, %h: index, %q: index, %kv: index):
      %d = arith.subi %q, %kv : index
      %c = arith.constant 256 : index
      %keep = arith.cmpi ult, %d, %c : index
      kvpipe.yield %keep : i1
    }
    ```

    The kernel ABI (parameters, grid, block, shared memory, tensor maps) is
    documented in docs/kernel-abi.md.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$head_dim,
                       TypeAttr:$element_type, BoolAttr:$causal,
                       OptionalAttr<I64Attr>:$value_head_dim,
                       OptionalAttr<I64Attr>:$block_n,
                       OptionalAttr<I64Attr>:$kv_stages,
                       OptionalAttr<I64Attr>:$q_stages,
                       OptionalAttr<I64Attr>:$consumer_warpgroups,
                       OptionalAttr<I64Attr>:$producer_registers,
                       OptionalAttr<I64Attr>:$consumer_registers,
                       OptionalAttr<BoolAttr>:$overlap_softmax,
                       OptionalAttr<I64Attr>:$exp2_emulation,
                       OptionalAttr<I64Attr>:$rescale_threshold,
                       OptionalAttr<BoolAttr>:$tensor_row_sums,
                       OptionalAttr<BoolAttr>:$skip_idle_warpgroups,
                       OptionalAttr<BoolAttr>:$mask_bits,
                       OptionalAttr<BoolAttr>:$late_pv_retire,
                       OptionalAttr<BoolAttr>:$lpt_tiles,
                       OptionalAttr<BoolAttr>:$tile_table,
                       OptionalAttr<BoolAttr>:$separable_bias,
                       OptionalAttr<BoolAttr>:$separable_bias_mma,
                       OptionalAttr<BoolAttr>:$bias_origin_first,
                       OptionalAttr<BoolAttr>:$static_row_max,
                       OptionalAttr<BoolAttr>:$prescaled_q,
                       OptionalAttr<BoolAttr>:$bias_accumulator,
                       OptionalAttr<BoolAttr>:$pingpong,
                       OptionalAttr<BoolAttr>:$persistent,
                       OptionalAttr<KVPipe_MaskAlignmentAttr>:$mask_alignment,
                       OptionalAttr<BoolAttr>:$sliding_window,
                       OptionalAttr<BoolAttr>:$kv_lengths,
                       OptionalAttr<BoolAttr>:$backward,
                       OptionalAttr<BoolAttr>:$deterministic,
                       OptionalAttr<BoolAttr>:$dq_atomics,
                       OptionalAttr<BoolAttr>:$shared_statistics,
                       OptionalAttr<BoolAttr>:$split_kv,
                       OptionalAttr<I64Attr>:$pack_gqa,
                       OptionalAttr<I64Attr>:$page_size,
                       OptionalAttr<TypeArrayAttr>:$aux_types,
                       OptionalAttr<BoolAttr>:$varlen,
                       OptionalAttr<BoolAttr>:$sinks,
                       OptionalAttr<DenseI64ArrayAttr>:$aux_grads);
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $sym_name attr-dict (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)?
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def KVPipe_AuxLoadOp : KVPipe_Op<"aux_load", [MemoryEffects<[MemRead]>]> {
  let summary = "reads an auxiliary tensor of an attention kernel's modifier";
  let description = [{
    In a `score_mod` or `mask_mod` region of `kvpipe.attention_kernel`:
    element `index` of the kernel's auxiliary tensor number `aux` (a flat
    array of the element type `aux_types[aux]` of the declaration, passed as
    the runtime parameter `aux<aux>`). The region computes the flat index
    (row-major strides of the tensor as the caller laid it out). Reading
    outside the tensor is undefined, as an out-of-bounds load is.

    ```mlir
    %slope = kvpipe.aux_load 0[%h] : f32
    ```
  }];
  let arguments = (ins I64Attr:$aux, Index:$index);
  let results = (outs AnyTypeOf<[F32, I32]>:$result);
  let assemblyFormat = "$aux `[` $index `]` attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // KVPIPE_DIALECT_KVPIPE_IR_KVPIPEATTENTIONOPS_TD
