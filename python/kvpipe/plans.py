"""Which kernels a launch runs: the prefill plan (``prefill_plan``: the
tuning of forward launches, as measured: ``PREFILL_PLAN`` for plain ones by
head dim and sequence length, ``BOTTOM_RIGHT_PLAN`` for a causal diagonal at
the end of longer keys (chunked prefill), ``WINDOW_PLAN`` for sliding windows
and ``MODIFIER_PLAN`` for score/mask modifiers by head dim), the varlen plan
(``varlen_plan``: ``VARLEN_PLAN`` for packed sequences) and the decode plan
(``decode_plan``: split-KV
and pack-GQA, FA3's heuristics ``num_splits_heuristic`` and
``should_pack_gqa``).

Functions of a launch's shapes (and of the device's SM count), shared by the
launchers (kvpipe.attention, kvpipe.paged) and by the commands that list or
compile the kernels those will launch (check, bench, compile --for-check).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Dict, List, Optional, Tuple

from kvpipe import kernels
from kvpipe.launch import _multiprocessors


#: K/V rows per pipeline slot of the default kernels, per (Q/K, V) head dim
#: (docs/kernel-abi.md; the split heuristic counts K/V blocks with it).
_DEFAULT_BLOCK_N = {(64, 64): 128, (96, 96): 112, (128, 128): 128, (192, 128): 128,
                    (192, 192): 112, (256, 256): 80}
#: The most splits of a K/V range (FA3's limit), and the fewest K/V blocks
#: a split should read (fewer and the combine's traffic is not worth it).
MAX_SPLITS = 128
MIN_BLOCKS_PER_SPLIT = 4


@functools.lru_cache(maxsize=4096)
def num_splits_heuristic(tiles: int, multiprocessors: int, kv_blocks: int,
                         max_splits: int = MAX_SPLITS,
                         min_blocks_per_split: int = MIN_BLOCKS_PER_SPLIT) -> int:
    """How many CTAs to split each tile's K/V range over (FA3's
    ``num_splits_heuristic``, hopper/heuristics.h): none when the tiles
    nearly fill the SMs (80 %); otherwise the fewest splits whose last wave
    is at least 85 % as full as the best count's, each split keeping at
    least ``min_blocks_per_split`` K/V blocks, skipping counts that leave
    the blocks per split unchanged. Memoised: it loops over up to 128
    counts, which cost a decode call tens of microseconds of host time."""
    if tiles >= 0.8 * multiprocessors:
        return 1
    limit = min(max_splits, multiprocessors, max(1, kv_blocks // min_blocks_per_split))
    if limit <= 1:
        return 1
    efficiency = []
    for splits in range(1, limit + 1):
        waves = tiles * splits / multiprocessors
        efficiency.append(waves / math.ceil(waves))
    best = max(efficiency)
    for splits in range(1, limit + 1):
        if splits > 1 and (-(-kv_blocks // splits)) == (-(-kv_blocks // (splits - 1))):
            continue
        if efficiency[splits - 1] >= 0.85 * best:
            return splits
    return 1


def should_pack_gqa(seq_q: int, group: int) -> bool:
    """Whether packing the ``group`` query heads of a K/V head into a tile
    fills the consumer warpgroups' 64 rows better (FA3's ``should_pack_gqa``:
    packed when the unpacked rows are used less than 90 % as well): decode
    and short chunks of queries."""
    if group <= 1 or group > kernels.MAX_PACK_GQA:
        return False
    per_warpgroup = 64 // group
    unpacked = seq_q / (-(-seq_q // 64) * 64)
    packed = seq_q * group / (-(-seq_q // per_warpgroup) * 64)
    return unpacked < 0.9 * packed


def launch_decode_plan(batch: int, heads_q: int, heads_kv: int, seq_q: int, seq_kv: int,
                       head_dim: int, value_head_dim: int, num_splits: int,
                       pack_gqa: Optional[bool], device_index: int,
                       tuning: Dict[str, Any]) -> Tuple[int, int, Dict[str, Any]]:
    """``decode_plan`` for a launch on ``device_index`` (whose SM count is
    read only when the split count is chosen); ``(1, 0, tuning)`` unchanged
    when no decode kernel is asked for."""
    if num_splits == 1 and pack_gqa is False:
        return 1, 0, tuning
    return decode_plan(batch, heads_q, heads_kv, seq_q, seq_kv, head_dim, value_head_dim,
                       num_splits, pack_gqa,
                       _multiprocessors(device_index) if num_splits == 0 else 0, tuning)


#: The prefill plan: the tuning of the plain kernels (top-left mask, no
#: window, no KV lengths, no modifiers, V's head dim Q's), by (head dim,
#: causal): entries ``(longest, tuning)`` in order, the first whose
#: ``longest`` is at least the longer of the two sequences (``None``: any
#: length) wins; lengths past every entry keep the head dim's defaults.
#:
#: Short sequences (measured on the H200: results/gpu-results.md, "Forward:
#: persistent kernels for short causal sequences" and "Persistent kernels
#: for short non-causal sequences"): a persistent grid starts each SM's next
#: tile while the last one's epilogue drains, which pays where the tiles are
#: short; at head dim 64 two consumer warpgroups (128 query rows) also halve
#: the masked work on the diagonal. Causal: D 64 1k +26 %, 2k +5 %, 4k +3 %;
#: D 96 1k +12 % (2k even); D 128 1k +5 %, 2k +6 %, 4k +3 %; from 8k on they
#: are slower (the grid's order no longer balances the causal work).
#: Non-causal: D 128 1k +4-5 % (2k on within noise); D 64 even and D 96 6-8 %
#: slower at 1k. Head dims 192 and 256 have no persistent kernel that fits in
#: shared memory with their 112- and 80-key blocks; at 192 one with 64 or 80
#: keys fits and pays for causal sequences up to 2k (H100, session 18,
#: interleaved against the default tiles: 1k +12 % and +11 % with 64 keys
#: (calls 8 and 10), 2k +6 % and +2 % with 80, 4k +4 % and -1 %); at 256 the
#: 48-key one is slower everywhere.
#:
#: Longer sequences at head dim 128 (H100, session 18: docs/performance.md
#: v14): three consumer warpgroups of 64 rows on 80-key blocks (192 x 80
#: tiles; 160 registers hold O's 64 and S's 40 accumulators without spills)
#: against two on 128 x 128, interleaved A/B (scripts/gpu/ab.py, 7 rounds,
#: both without rescale_threshold's skip): +7 % non-causal and +1 % causal
#: at 8k-16k, +4-5 % non-causal at 2k-4k; with the skip (which the 192 x 80
#: kernel gains from and 128 x 128 does not) +11-13 % and +7-8 % at 8k-16k.
#: Slower than the persistent kernel at 1k non-causal and 2k-4k causal.
#: Keyed like the rest by the longer sequence: a short query block over a
#: long cache (seq_q 100, seq_kv 9000) gets these tiles too (checked, not
#: timed).
#:
#: The softmax levers of v15/v16 (docs/performance.md v17; H100, session 21,
#: scripts/gpu/ab.py, 5 shuffled rounds, ratio to the plan without them):
#: the row sums on the tensor cores, R2P masks and the late P V retire
#: together (``_SOFTMAX_LEVERS``) gain 1.00-1.10 at head dim 128 (every
#: length, causal and not) and 1.04-1.10 at head dim 64 causal up to 4k; at
#: head dim 64 non-causal the row sums cost 5 % (the loop nearest the tensor
#: bound pays their 12.5 % more P V work), past 4k causal they are within
#: 1 %, and at head dim 96 the row sums' wider P V accumulator spills (0.6x).
#:
#: Session 22 (H100, scripts/gpu/ab.py 7-9 rounds against the plan's kernel
#: of the point in the same rounds; docs/performance.md v19): at head dim 64
#: non-causal the idle warpgroups of the last Q block skipped (1024 = 5 x
#: 192 + 64) with R2P masks and the late retire, +7.7 % at 1k, +2-3 % at
#: 2k-4k (-1-2 % at 8k-16k); head dim 96 causal 1k R2P masks and the late
#: retire +6 %; head dim 192 both on the persistent 80-key kernel, +7 % at
#: non-causal 1k and causal 2k, and on the default tiles +1-7 % beyond.
#: `q_stages = 2` (Q a ring of two slots: the next tile's Q loads while this
#: one's is read) on every persistent kernel that fits it in shared memory:
#: D 64 causal +8.8 / +3.9 / +2.9 % at 1k / 2k / 4k, D 96 causal 1k +6.7 %,
#: D 96 non-causal 1k +10 % (the persistent kernel without it was 6-8 %
#: slower than one tile per CTA in session 17), D 64 non-causal 1k +3.6 % and
#: 2k +3.2 % (persistent, over the one-tile
#: kernel that skips the idle warpgroups), 8k / 16k +5.0 / +2.2 % with the
#: row sums (call 9; causal the persistent grid's static order loses 9-20 %
#: past 4k, and the LPT order spills there: one tile per CTA); at D 128
#: the second Q tile leaves no room for the row sums' ones, and the
#: persistent kernel with Q's ring and without the row sums beats the plan's
#: with them by 7.4 / 4.6 / 2.4 % causal (1k / 2k / 4k), 5.5 % non-causal 1k.
#:
#: Session 23: `tile_table` (the host's balanced longest-first table of
#: tiles, kvpipe.schedule) makes the persistent kernel pay at D 64 causal
#: past 4k, where the closed-form order lost 9-20 %: with Q's ring and the
#: mask levers +9.7 / +4.6 % over the one-tile kernel at 8k / 16k (call 4),
#: +6.6 / +4.0 % in a second run (call 5), even with FA4 (1.04 / 1.01 and
#: 1.00 / 0.99). No gain on the persistent entries up to 4k (0.98-1.02: the
#: closed-form order is within 3 % of balanced there) nor at D 128 past 4k.
_SOFTMAX_LEVERS = {"tensor_row_sums": True, "mask_bits": True, "late_pv_retire": True}
#: R2P masks and the late P V retire without the row sums (which do not pay
#: at head dim 64 non-causal, spill at 96 and leave no room for Q's ring at
#: 128).
_MASK_LEVERS = {"mask_bits": True, "late_pv_retire": True}
PREFILL_PLAN: Dict[Tuple[int, bool], Tuple[Tuple[Optional[int], Dict[str, Any]], ...]] = {
    (64, True): ((2048, {"consumer_warpgroups": 2, "persistent": True, "q_stages": 2,
                         **_SOFTMAX_LEVERS}),
                 (4096, {"persistent": True, "q_stages": 2, **_SOFTMAX_LEVERS}),
                 (None, {"persistent": True, "q_stages": 2, "tile_table": True,
                         **_MASK_LEVERS})),
    (64, False): ((4096, {"persistent": True, "q_stages": 2, "skip_idle_warpgroups": True,
                          **_MASK_LEVERS}),
                  (None, {"persistent": True, "q_stages": 2, **_SOFTMAX_LEVERS})),
    (96, True): ((1024, {"consumer_warpgroups": 2, "persistent": True, "q_stages": 2,
                         **_MASK_LEVERS}),),
    (96, False): ((1024, {"persistent": True, "q_stages": 2, **_MASK_LEVERS}),),
    (192, True): ((1024, {"persistent": True, "block_n": 64}),
                  (2048, {"persistent": True, "block_n": 80, **_MASK_LEVERS}),
                  (None, _MASK_LEVERS)),
    (192, False): ((1024, {"persistent": True, "block_n": 80, **_MASK_LEVERS}),
                   (None, _MASK_LEVERS)),
    (128, True): ((4096, {"persistent": True, "q_stages": 2, **_MASK_LEVERS}),
                  (None, {"consumer_warpgroups": 3, "block_n": 80, **_SOFTMAX_LEVERS})),
    (128, False): ((1024, {"persistent": True, "q_stages": 2, **_MASK_LEVERS}),
                   (None, {"consumer_warpgroups": 3, "block_n": 80, **_SOFTMAX_LEVERS})),
}


#: The tuning of sliding-window launches (no KV lengths, no modifiers, V's
#: head dim Q's), by head dim, at any length and alignment: the softmax
#: levers, whose R2P masks pay most where every tile has masked blocks at
#: both edges of its window (H100, session 21 call 10, scripts/gpu/ab.py
#: --window 1024, causal, 2k-16k, 7 rounds: D 64 +13-15 %, D 128 +7-11 %;
#: the window cases of `check --tune ... --on-plan` passed, call 2).
#: At 96, 192 and 256 the R2P masks and the late retire without the row sums
#: (they spill at 96): H100, session 31 (`bench --mods --head-dim 96` and
#: `192 256`, 8k, the plain window kernel with them against the defaults in
#: the same run): +8.4 / +4.4 / +2.8 %.
WINDOW_PLAN: Dict[int, Dict[str, Any]] = {64: _SOFTMAX_LEVERS, 128: _SOFTMAX_LEVERS,
                                          96: _MASK_LEVERS, 192: _MASK_LEVERS,
                                          256: _MASK_LEVERS}

#: The tuning of launches with a score_mod or mask_mod (no KV lengths, V's
#: head dim Q's), by head dim, at any length, mask and window. With regions
#: the op's default is two consumer warpgroups; at 128 the plan takes the
#: plain kernels' 192 x 80 tiles (three warpgroups: only regions that gather
#: per score, document masks, spill there, and plans.spill_fallback launches
#: those on two) with the softmax levers, the separable bias (ALiBi) and the
#: static row maximum (a soft-cap's bounded scores). H100, session 26 call 1
#: (`bench --mods`, D 128 8k, one run, against the previous plan, two
#: warpgroups + levers): soft-cap + window 375.6 -> 397.9 TFLOP/s (+6 %),
#: ALiBi 579.4 -> 639.8 (+10 %), ALiBi causal 533.6 -> 556.0 (+4 %);
#: `check --mods` 136/136 with it (call 3), `check --mods --backward`
#: 290/290 (call 2). At 128 also the separable bias's key term by a wgmma
#: k-step (`separable_bias_mma`): H100, session 28, two runs against the
#: plan without it, ALiBi 0 / +2.6 %, ALiBi causal +2.6 % (the run's noise
#: is 2-3 %), `check --mods` 136/136 with it. At 64 the separable bias
#: (`check --mods --tune separable_bias=true` 132/132, session 25) and its
#: k-step (H100, session 29 call 1: +5.8 % ALiBi, +4.8 % ALiBi causal over
#: the separable bias alone). At both, the K/V loop from the bias's origin
#: (`bias_origin_first`: ALiBi's row maxima settle in the first blocks
#: instead of rescaling O in nearly every block before the diagonal): D 128
#: ALiBi +7.9 %, ALiBi causal +4.6 % (session 29 call 1, against the plan
#: without it), 0.970x and 1.002x their plain kernels; D 64 within noise.
#: `check --mods` 136/136 with both (call 1). At 64 also the softmax levers
#: (H100, session 30: ALiBi +7.7 %, ALiBi causal +7.6 % over the plan
#: without them, same run; `check --mods` 136/136 with them). Not taken:
#: `prescaled_q` (+4.4-6.6 % on soft-cap + window at 128 in session 30, but
#: the bf16 rounding of Q times the scale triples the soft-cap rows' lse
#: error, docs/modifiers.md).
_MODIFIER_LEVERS = {**_SOFTMAX_LEVERS, "separable_bias": True, "separable_bias_mma": True,
                    "bias_origin_first": True}
#: At the other head dims (H100, session 31, `bench --mods --head-dim 96`
#: and `192 256` at 8k, one run each, against the head dim's defaults): the
#: mask levers (no row sums: they spill at 96), the separable bias from its
#: origin, the static row maximum, and at 96 the bias's k-step (at 192 and
#: 256 its key offsets tile does not fit beside the K/V ring): soft-cap +
#: window +4 / +10 / +8 %, ALiBi +13 / +4 / +6 %, ALiBi causal +10 / +15 /
#: +7 % at 96 / 192 / 256.
_OTHER_DIMS_MODIFIER_LEVERS = {**_MASK_LEVERS, "separable_bias": True,
                               "bias_origin_first": True, "static_row_max": True}
MODIFIER_PLAN: Dict[int, Dict[str, Any]] = {
    64: _MODIFIER_LEVERS,
    128: {"consumer_warpgroups": 3, "block_n": 80, **_MODIFIER_LEVERS, "static_row_max": True},
    96: {**_OTHER_DIMS_MODIFIER_LEVERS, "separable_bias_mma": True},
    192: _OTHER_DIMS_MODIFIER_LEVERS,
    256: _OTHER_DIMS_MODIFIER_LEVERS,
}
#: What a causal (top-left, no window) launch with modifiers adds to
#: MODIFIER_PLAN's tuning, by head dim: a persistent grid over the host's
#: balanced tile table (v20's lever for plain causal kernels; Q's ring does
#: not fit beside the 192 x 80 tiles). H100, session 27 (`bench --mods`, D
#: 128 8k, one run): ALiBi causal 543.6 -> 590.2 TFLOP/s (+8.6 %); the
#: persistent grid without the table loses (469.5), as it does for the
#: non-causal rows (not taken there). With it in the plan: `check --mods`
#: 136/136, ALiBi causal 588.8 = 0.917x its plain kernel (was 0.81-0.85x).
MODIFIER_CAUSAL_PLAN: Dict[int, Dict[str, Any]] = {
    128: {"persistent": True, "tile_table": True},
}


#: The tuning of causal launches with fewer queries than keys and the
#: diagonal at the end (mask_alignment "bottom_right": chunked prefill
#: against a longer K/V; equal lengths are top-left, launched_mask), by head
#: dim: (longest S_kv or None, tuning) as PREFILL_PLAN's. H100, session 23
#: call 19 (scripts/gpu/ab.py --seq-q 2048, 8k and 16k keys, 7 rounds, FA4
#: in the same rounds): D 64 persistent with Q's ring, the tile table and the
#: mask levers +15 / +10 % over the defaults (1.01 / 0.97x FA4, the defaults
#: 0.89x); D 128 the mask levers +9-10 % (1.00-1.01x FA4, the defaults 0.92x).
BOTTOM_RIGHT_PLAN: Dict[int, Tuple[Tuple[Optional[int], Dict[str, Any]], ...]] = {
    64: ((4096, {}),
         (None, {"persistent": True, "q_stages": 2, "tile_table": True, **_MASK_LEVERS})),
    128: ((None, _MASK_LEVERS),),
}


#: The tuning of packed variable-length launches (kvpipe.varlen; no
#: window, no modifiers, V's head dim Q's), by (head dim, causal), at any
#: lengths: the levers that need no persistent grid (the varlen kernels have
#: none). H100, session 23 call 14 (scripts/gpu/ab.py --varlen, 7 rounds, 8 x
#: 2k, 4 x 8k and an uneven batch of 1-8k, H 16): at head dim 128 the
#: 192 x 80 tiles with the softmax levers +8-18 % non-causal and +1-15 %
#: causal over the defaults; at head dim 64 causal the R2P masks and the
#: late retire +6-8 % (non-causal: within 2 % either way, kept default).
VARLEN_PLAN: Dict[Tuple[int, bool], Dict[str, Any]] = {
    (64, True): _MASK_LEVERS,
    (128, True): {"consumer_warpgroups": 3, "block_n": 80, **_SOFTMAX_LEVERS},
    (128, False): {"consumer_warpgroups": 3, "block_n": 80, **_SOFTMAX_LEVERS},
}


def varlen_plan(head_dim: int, value_head_dim: int, causal: bool, sliding_window: bool,
                modifiers: bool, tuning: Dict[str, Any]) -> Dict[str, Any]:
    """The tuning of a varlen forward launch: ``tuning`` as given when it is
    not empty (the caller chose); else VARLEN_PLAN's for plain launches;
    else none (the head dim's defaults)."""
    if tuning or sliding_window or modifiers or value_head_dim != head_dim:
        return tuning
    return dict(VARLEN_PLAN.get((head_dim, causal), tuning))


def spill_fallback(tuning: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The tuning to launch instead of a planned ``tuning`` whose kernel
    keeps registers in local memory (the launcher asks the loaded kernel:
    launch._kernel_for): three consumer warpgroups leave each thread 128
    registers, which a region with heavy per-element work can overflow (a
    document mask's two gathers per score spill 40-170 B at head dim 128),
    and the head dim's two-warpgroup tile, with the rest of the tuning, keeps
    it in registers. None where nothing smaller is planned."""
    if tuning.get("consumer_warpgroups") != 3:
        return None
    # The key offsets tile of separable_bias_mma does not fit beside two
    # warpgroups' persistent 128 x 128 tiles (the causal plan's ALiBi
    # kernel, three warpgroups over the tile table, spills and falls back
    # to this: docs/performance.md v26).
    return {name: value for name, value in tuning.items()
            if name not in ("consumer_warpgroups", "block_n", "separable_bias_mma")}


def with_spill_fallback(planned: Dict[str, Any]) -> Tuple[Dict[str, Any], ...]:
    """A planned tuning and its spill_fallback (where it has one): the
    kernels a launch of the plan may load, for the lists of kernels to
    compile for a machine without the compiler (compile --for-check)."""
    fallback = spill_fallback(planned)
    return (planned,) if fallback is None else (planned, fallback)


def prefill_kernel_configs(head_dim: int, value_head_dim: Optional[int], dtype: str,
                           causal: bool, mask_alignment: str, sliding_window: bool,
                           traced: Any, seq_q: int, seq_kv: int,
                           tuning: Optional[Dict[str, Any]] = None,
                           **attributes: Any) -> List[Dict[str, Any]]:
    """The compile_attention arguments of the forward kernels a launch of
    kvpipe.attention at these shapes may load, for the lists of kernels to
    compile (compile --for-check, the GPU scripts' --compile): the prefill
    plan's tuning, or ``tuning`` where given; with modifiers (``traced``,
    kvpipe.modifiers.trace's result, or None) and no tuning, the plan's
    spill fallback too (the plain plans' kernels keep their registers).
    ``attributes``: more compile_attention arguments (``sinks``, ...)."""
    planned = prefill_plan(head_dim, value_head_dim or head_dim, causal, mask_alignment,
                           sliding_window, False, traced is not None, seq_q, seq_kv,
                           dict(tuning or {}))
    regions = dict(modifiers=traced.ir, aux_types=traced.aux_types) if traced else {}
    chosen = with_spill_fallback(planned) if traced and not tuning else (planned,)
    return [dict(head_dim=head_dim, dtype=dtype, causal=causal,
                 value_head_dim=None if value_head_dim in (None, head_dim) else value_head_dim,
                 mask_alignment=mask_alignment, sliding_window=sliding_window,
                 kv_lengths=False, **regions, **c, **attributes) for c in chosen]


def prefill_plan(head_dim: int, value_head_dim: int, causal: bool, mask_alignment: str,
                 sliding_window: bool, kv_lengths: bool, modifiers: bool, seq_q: int,
                 seq_kv: int, tuning: Dict[str, Any]) -> Dict[str, Any]:
    """The tuning of a forward launch: ``tuning`` as given when it is not
    empty (the caller chose); else, with modifiers, MODIFIER_PLAN's for the
    head dim (and MODIFIER_CAUSAL_PLAN's for a causal top-left launch
    without a window); with a sliding window, WINDOW_PLAN's; for the plain
    kernels PREFILL_PLAN's choice for the sequences' length
    (BOTTOM_RIGHT_PLAN's for a causal mask at the end of the keys); else
    none (the head dim's defaults)."""
    if tuning or kv_lengths or value_head_dim != head_dim:
        return tuning
    if modifiers:
        planned = dict(MODIFIER_PLAN.get(head_dim, tuning))
        if causal and mask_alignment == "top_left" and not sliding_window:
            planned.update(MODIFIER_CAUSAL_PLAN.get(head_dim, {}))
        return planned
    if sliding_window:
        return dict(WINDOW_PLAN.get(head_dim, tuning))
    entries = PREFILL_PLAN.get((head_dim, causal), ())
    if causal and mask_alignment != "top_left":
        entries = BOTTOM_RIGHT_PLAN.get(head_dim, ())
    for longest, planned in entries:
        if longest is None or max(seq_q, seq_kv) <= longest:
            return dict(planned)
    return tuning


def _check_decode_args(num_splits: Any, pack_gqa: Any) -> None:
    if isinstance(num_splits, bool) or not isinstance(num_splits, int):
        raise TypeError(f"num_splits must be an int (0: choose, 1: no split), got "
                        f"{num_splits!r}")
    if not 0 <= num_splits <= MAX_SPLITS:
        raise ValueError(f"num_splits must be in [0, {MAX_SPLITS}] (0: choose, 1: no split), "
                         f"got {num_splits}")
    if pack_gqa is not None and not isinstance(pack_gqa, bool):
        raise TypeError(f"pack_gqa must be a bool or None (choose), got {pack_gqa!r}")


def decode_plan(batch: int, heads_q: int, heads_kv: int, seq_q: int, seq_kv: int,
                head_dim: int, value_head_dim: int, num_splits: int, pack_gqa: Optional[bool],
                multiprocessors: int, tuning: Dict[str, Any]) -> Tuple[int, int, Dict[str, Any]]:
    """The decode attributes of a launch: ``(num_splits, pack_gqa, tuning)``
    (pack_gqa: the G of the kernel, 0 for none; ``tuning`` with one consumer
    warpgroup where a packed or split tile's rows fit in 64). ``num_splits``
    0 and ``pack_gqa`` None are chosen (``should_pack_gqa``,
    ``num_splits_heuristic``); ``multiprocessors`` is only read then.

    Raises:
        ValueError: pack_gqa=True with more than 64 query heads per K/V head.
    """
    group = heads_q // heads_kv
    if pack_gqa is None:
        pack_gqa = should_pack_gqa(seq_q, group)
    elif pack_gqa and group > kernels.MAX_PACK_GQA:
        raise ValueError(f"pack_gqa=True needs at most {kernels.MAX_PACK_GQA} query heads per "
                         f"K/V head, got {heads_q} // {heads_kv} = {group}")
    pack = group if pack_gqa and group > 1 else 0
    # One consumer warpgroup when its 64 rows hold a whole decode tile: a
    # second would only multiply unused rows.
    one_warpgroup = (seq_q * (pack or 1) <= 64 and "consumer_warpgroups" not in tuning
                     and "pingpong" not in tuning)
    if num_splits == 0:
        warpgroups = tuning.get("consumer_warpgroups",
                                1 if one_warpgroup else 3 if head_dim in (64, 96) else 2)
        queries = (64 // pack if pack else 64) * warpgroups
        tiles = -(-seq_q // queries) * (heads_kv if pack else heads_q) * batch
        block_n = tuning.get("block_n", _DEFAULT_BLOCK_N.get((head_dim, value_head_dim), 128))
        num_splits = num_splits_heuristic(tiles, multiprocessors, -(-seq_kv // block_n))
    chosen = dict(tuning)
    if one_warpgroup and (pack or num_splits > 1):
        chosen["consumer_warpgroups"] = 1
    return num_splits, pack, chosen
