"""Attention over a paged K/V cache read through a block table, as vLLM,
SGLang and flash-attn's ``flash_attn_with_kvcache(..., block_table=...)``
address it.

The cache is ``k_cache``/``v_cache`` of shape ``(num_pages, page_size,
heads_kv, head_dim)``; ``block_table`` is an int32 ``(batch, n)`` tensor of
page indices: key j of sequence b is row ``j % page_size`` of page
``block_table[b, j // page_size]``. Each sequence has its own length
(``kv_lengths``, flash-attn's ``cache_seqlens``), at most ``n * page_size``.

The kernel is the forward kernel with ``page_size`` (docs/kernel-abi.md): its
K/V tensor maps describe the whole cache (a page per B coordinate) and its
producer loads each page's index from the block table. Page indices must lie
in ``[0, num_pages)``; that is not checked on the host (it would need a
synchronisation): the kernel reads a page outside the cache as zeros (TMA's
out-of-bounds fill), so a bad index never faults but gives that sequence
keys and values of zero. Lengths beyond ``n * page_size`` are clamped to it
by the kernel (checked on the host where they are host values). Rows of a
sequence's last page past its length are read and masked: they must hold
finite values (a freshly zeroed or previously used cache does), as in the
contiguous ``kv_lengths`` kernel.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

from kvpipe import _tensors, kernels
from kvpipe.launch import _LOG2E, LaunchPlans, aligned_16, plan_key

__all__ = ["paged_attention", "append_to_paged_cache", "check_paged_cache"]


def check_paged_cache(k_cache: Any, v_cache: Any, block_table: Any,
                      batch: int) -> Tuple[int, int, int]:
    """Checks a paged cache and its block table for ``batch`` sequences;
    returns ``(num_pages, page_size, pages_per_sequence)``.

    Raises:
        TypeError: a non-tensor, or ``block_table`` not int32.
        ValueError: wrong ranks, shapes, devices or page size; the message
            names the argument.
    """
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        _tensors.check_tensor(name, t, rank=4, device="cuda", last_dim_contiguous=True,
                              stride_alignment_bytes=16)
    num_pages, page_size, heads_kv, head_dim = tuple(k_cache.shape)
    if tuple(v_cache.shape)[:3] != (num_pages, page_size, heads_kv):
        raise ValueError(f"v_cache must have k_cache's pages, page size and heads "
                         f"{(num_pages, page_size, heads_kv)}, got {tuple(v_cache.shape)}")
    if str(v_cache.dtype) != str(k_cache.dtype) or str(v_cache.device) != str(k_cache.device):
        raise ValueError(f"v_cache must have k_cache's dtype and device ({k_cache.dtype} on "
                         f"{k_cache.device}), got {v_cache.dtype} on {v_cache.device}")
    if page_size not in kernels.PAGE_SIZES:
        raise ValueError(f"k_cache's page size (its dim 1, (num_pages, page_size, heads, "
                         f"head_dim)) must be one of {kernels.PAGE_SIZES}, got {page_size}")
    if num_pages < 1:
        raise ValueError("k_cache must have at least one page")
    _tensors.check_tensor("block_table", block_table, rank=2, dtype="i32", device="cuda",
                          last_dim_contiguous=False, stride_alignment_bytes=None)
    rows, pages_per_sequence = tuple(block_table.shape)
    if rows != batch:
        raise ValueError(f"block_table must have shape (batch, max_num_blocks_per_seq) with "
                         f"batch = {batch}, got {tuple(block_table.shape)}")
    if pages_per_sequence < 1:
        raise ValueError("block_table must have at least one page per sequence, got shape "
                         f"{tuple(block_table.shape)}")
    if str(block_table.device) != str(k_cache.device):
        raise ValueError(f"block_table must be on k_cache's device {k_cache.device}, got "
                         f"{block_table.device}")
    if pages_per_sequence * page_size > 2**31 - 1:
        raise ValueError(f"block_table's rows address {pages_per_sequence} pages of "
                         f"{page_size} keys, more than 2**31 - 1 keys per sequence")
    return num_pages, page_size, pages_per_sequence


def kernel_scalars(q_shape: Tuple[int, ...], k_cache_shape: Tuple[int, ...],
                   pages_per_sequence: int, scale: float, window: Tuple[int, int],
                   layout: str) -> Dict[str, Any]:
    """The paged kernel's scalar arguments by name: what a call's shapes and
    options decide (its plan's part of ``kernel_values``)."""
    b, sq, hq = (q_shape[0], q_shape[1], q_shape[2]) if layout == "bshd" else (
        q_shape[0], q_shape[2], q_shape[1])
    page_size, heads_kv = k_cache_shape[1], k_cache_shape[2]
    return {"seq_q": sq, "seq_kv": pages_per_sequence * page_size,
            "heads_per_kv_head": hq // heads_kv, "scale_log2": scale * _LOG2E,
            "heads_q": hq, "batch": b, "window_left": window[0], "window_right": window[1],
            "max_pages_per_seq": pages_per_sequence}


def kernel_values(q: Any, k_cache: Any, v_cache: Any, out: Any,
                  lse_address: int, block_table: Any, kv_lengths: Any, scale: float,
                  window: Tuple[int, int], layout: str) -> Dict[str, Any]:
    """The paged kernel's arguments by name (``launch.kernel_arguments``
    orders them as the ABI says): the K/V maps on the whole cache, seen as
    (B, H, S, D) = (page, head, row in page, dim), and the block table with
    its row stride, which must be its row length (contiguous rows)."""
    return {**kernel_scalars(tuple(q.shape), tuple(k_cache.shape),
                             tuple(block_table.shape)[1], scale, window, layout),
            **_kernel_tensors(q, k_cache, v_cache, block_table, kv_lengths, layout),
            "o_map": ("out", out, layout), "lse": lse_address}


def _kernel_tensors(q: Any, k_cache: Any, v_cache: Any, block_table: Any, kv_lengths: Any,
                    layout: str) -> Dict[str, Any]:
    """The paged kernel's tensor arguments but the outputs': what a planned
    call binds."""
    return {"q_map": ("q", q, layout), "k_map": ("k_cache", k_cache, "bshd"),
            "v_map": ("v_cache", v_cache, "bshd"), "kv_lengths": kv_lengths.data_ptr(),
            "block_table": block_table.data_ptr()}


def _check_query(q: Any, k_cache: Any, v_cache: Any, layout: str) -> Tuple[int, ...]:
    """(batch, heads_q, seq_q, head_dim, value_head_dim) of q against the cache."""
    from kvpipe.attention import LAYOUTS

    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    _tensors.check_tensor("q", q, rank=4, device="cuda", last_dim_contiguous=True,
                          stride_alignment_bytes=16)
    shape = tuple(q.shape)
    b, sq, hq, d = shape if layout == "bshd" else (shape[0], shape[2], shape[1], shape[3])
    kernels.dtype_name(q.dtype)
    if str(q.dtype) != str(k_cache.dtype):
        raise TypeError(f"q, k_cache and v_cache must have the same dtype, got {q.dtype} and "
                        f"{k_cache.dtype}")
    if str(q.device) != str(k_cache.device):
        raise ValueError(f"q, k_cache and v_cache must be on the same device, got {q.device} "
                         f"and {k_cache.device}")
    heads_kv, kd, vd = tuple(k_cache.shape)[2], tuple(k_cache.shape)[3], tuple(v_cache.shape)[3]
    if kd != d:
        raise ValueError(f"k_cache's head dim must equal q's ({d}), got {kd}")
    if (d, vd) not in kernels.HEAD_DIM_PAIRS:
        raise ValueError(f"q's and v_cache's head dims ({d}, {vd}) must be one of "
                         f"{kernels.HEAD_DIM_PAIRS}")
    if hq % heads_kv != 0:
        raise ValueError(f"q's heads ({hq}) must be a multiple of k_cache's heads ({heads_kv}) "
                         "(grouped-query attention)")
    if sq < 1:
        raise ValueError(f"q's sequence length must be at least 1, got {sq}")
    if hq > 65535 or b > 65535:
        raise ValueError(f"q's heads ({hq}) and batch ({b}) must each be at most 65535")
    return b, hq, sq, d, vd


def paged_attention(q: Any, k_cache: Any, v_cache: Any, block_table: Any, kv_lengths: Any,
                    causal: bool = False, scale: Optional[float] = None,
                    return_lse: bool = False, layout: str = "bshd", out: Any = None,
                    mask_alignment: str = "bottom_right",
                    window_size: Tuple[int, int] = (-1, -1), num_splits: int = 1,
                    pack_gqa: Optional[bool] = False, sinks: Any = None,
                    score_mod: Any = None, mask_mod: Any = None, **tuning: int) -> Any:
    """Attention of ``q`` over a paged K/V cache.

    Args:
        q: ``(B, S_q, H_q, D)`` (``layout="bshd"``, flash-attn's) or
            ``(B, H_q, S_q, D)`` (``"bhsd"``).
        k_cache, v_cache: ``(num_pages, page_size, H_kv, D)`` (V's head dim
            may be 128 with D 192), page_size in ``kernels.PAGE_SIZES``.
        block_table: int32 ``(B, n)`` page indices, in ``[0, num_pages)``.
        kv_lengths: int32 ``(B,)`` on the device: sequence b's key count
            (clamped by the kernel to ``[0, n * page_size]``).
        causal, mask_alignment, window_size, scale, return_lse, out: as in
            ``kvpipe.attention`` (the alignment defaults to flash-attn's
            bottom-right here: the queries are the last of each sequence).
        num_splits, pack_gqa: the decode kernels, as in ``kvpipe.attention``
            (split-KV over ``num_splits`` CTAs, 0: chosen; the query heads
            of a K/V head packed into a tile, None: chosen), on the pages.
        sinks: gpt-oss's attention sinks, a float tensor ``(H_q,)`` (as in
            ``kvpipe.attention``; kvpipe.sinks), with every kernel here: in
            the epilogue (split-KV: the combine kernel).
        score_mod, mask_mod: FlexAttention-style modifiers (as in
            ``kvpipe.attention``, kvpipe.modifiers), with every kernel here:
            ``q_idx`` counts the queries of ``q``, ``kv_idx`` the keys of the
            sequence's pages in order (with the bottom-right alignment, query
            i of S_q sits at key ``i + kv_lengths[b] - S_q``: the library's
            alibi takes ``kv_lengths=``).
        **tuning: tuning attributes of the kernel.

    Returns:
        ``o`` (q's layout and shape, V's head dim), or ``(o, lse)``.
    """
    from kvpipe import modifiers
    from kvpipe.attention import _device_keyed

    traced = modifiers.trace(score_mod, mask_mod)
    key = _device_keyed(plan_key(
        (q, k_cache, v_cache, block_table, kv_lengths, out, sinks),
        (causal, scale, return_lse, layout, mask_alignment, num_splits, pack_gqa),
        window_size, tuning, (traced.ir, traced.aux_types) if traced is not None else None), q)
    plan = _launches.get(key)
    if plan is None or not aligned_16(q, k_cache, v_cache, out):
        plan = _plan_paged(q, k_cache, v_cache, block_table, kv_lengths, causal, scale,
                           return_lse, layout, out, mask_alignment, window_size, num_splits,
                           pack_gqa, sinks, traced, tuning)
        _launches.remember(key, plan)
    return _launch_paged(plan, q, k_cache, v_cache, block_table, kv_lengths, out, sinks,
                         traced, layout, return_lse)


class _PagedLaunch(NamedTuple):
    """What a paged call's signature decides (``_plan_paged``): the checks
    passed, the decode plan, the kernel and its scalar arguments; a call of
    a planned signature binds its tensors (``_launch_paged``)."""

    out_shape: Tuple[int, ...]
    lse_shape: Tuple[int, int, int]
    device_index: int
    scalars: Dict[str, Any]
    #: Without a split: the loaded kernel, its ABI and its grid.
    kernel: Any
    abi: Optional[Dict[str, Any]]
    grid: Optional[Tuple[int, int, int]]
    #: With a split: the family's launches.
    split: Any
    #: Whether the block table's rows and the lengths are dense as the
    #: kernel reads them (else each call passes contiguous copies).
    block_table_dense: bool
    kv_lengths_dense: bool


#: Planned paged calls by signature (``launch.plan_key``).
_launches = LaunchPlans()


def _plan_paged(q: Any, k_cache: Any, v_cache: Any, block_table: Any, kv_lengths: Any,
                causal: Any, scale: Any, return_lse: Any, layout: Any, out: Any,
                mask_alignment: Any, window_size: Any, num_splits: Any, pack_gqa: Any,
                sinks: Any, traced: Any, tuning: Dict[str, Any]) -> _PagedLaunch:
    """paged_attention's checks (each raising with the argument's name) and
    plan: everything but what depends on the tensors' addresses."""
    from kvpipe.attention import (_check_modifier_lengths, _device_index,
                                  check_scale_and_out, launched_mask, normalise_window,
                                  plan_split)
    from kvpipe.launch import (_kernel_for, _multiprocessors, forward_config_args,
                               launch_grid)
    from kvpipe.sinks import check_sinks
    from kvpipe.plans import _check_decode_args, launch_decode_plan

    _tensors.check_tensor("q", q, rank=4, device="cuda", last_dim_contiguous=True,
                          stride_alignment_bytes=16)
    _, page_size, pages_per_sequence = check_paged_cache(k_cache, v_cache, block_table,
                                                         tuple(q.shape)[0])
    b, hq, sq, d, vd = _check_query(q, k_cache, v_cache, layout)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {causal!r}")
    if mask_alignment not in kernels.MASK_ALIGNMENTS:
        raise ValueError(f"mask_alignment must be one of {kernels.MASK_ALIGNMENTS}, "
                         f"got {mask_alignment!r}")
    window = normalise_window(window_size, causal)
    sliding_window = window[0] >= 0 or window[1] >= 0
    _tensors.check_tensor("kv_lengths", kv_lengths, rank=1, dtype="i32", device="cuda",
                          stride_alignment_bytes=None)
    if tuple(kv_lengths.shape) != (b,) or str(kv_lengths.device) != str(q.device):
        raise ValueError(f"kv_lengths must have shape ({b},) (one length per sequence) on "
                         f"{q.device}, got {tuple(kv_lengths.shape)} on {kv_lengths.device}")
    out_shape = tuple(q.shape[:-1]) + (vd,)
    scale = check_scale_and_out(scale, d, out, out_shape, q)
    _check_decode_args(num_splits, pack_gqa)
    if sinks is not None:
        check_sinks(sinks, q, hq)
    capacity = pages_per_sequence * page_size
    _check_modifier_lengths(traced, sq, capacity)
    regions = (traced.ir, traced.aux_types) if traced is not None else ("", ())
    device_index = _device_index(q)
    causal, mask_alignment = launched_mask(causal, mask_alignment, sliding_window, sq,
                                           capacity, True)
    num_splits, pack, tuning = launch_decode_plan(
        b, hq, tuple(k_cache.shape)[2], sq, capacity, d, vd, num_splits, pack_gqa,
        device_index, tuning)
    config_args = forward_config_args(d, kernels.dtype_name(q.dtype), causal,
                                      vd if vd != d else None, mask_alignment, sliding_window,
                                      True, num_splits > 1, pack, page_size, sinks is not None)
    kernel = abi = grid = split = None
    if num_splits > 1:
        split = plan_split(config_args, device_index, tuning, regions, sq, hq, b, num_splits)
    else:
        kernel, abi = _kernel_for(config_args, device_index, tuple(sorted(tuning.items())),
                                  regions)
        grid = launch_grid(abi, sq, hq, b,
                           _multiprocessors(device_index) if abi.get("persistent") else 0)
    return _PagedLaunch(
        out_shape, (b, hq, sq), device_index,
        kernel_scalars(tuple(q.shape), tuple(k_cache.shape), pages_per_sequence, scale,
                       window, layout),
        kernel, abi, grid, split,
        tuple(block_table.stride()) == (pages_per_sequence, 1),
        tuple(kv_lengths.stride()) == (1,))


def _launch_paged(plan: _PagedLaunch, q: Any, k_cache: Any, v_cache: Any, block_table: Any,
                  kv_lengths: Any, out: Any, sinks: Any, traced: Any, layout: str,
                  return_lse: bool) -> Any:
    """A planned paged call's launch with this call's tensors."""
    from kvpipe.attention import _aux_arguments, forward_outputs, launch_planned
    from kvpipe.sinks import kernel_sinks

    # The kernel reads the table with rows of max_pages_per_seq entries and
    # the lengths densely.
    if not plan.block_table_dense:
        block_table = block_table.contiguous()
    if not plan.kv_lengths_dense:
        kv_lengths = kv_lengths.contiguous()
    # Held until the launch: the kernel reads these (float32 / int32 copies
    # where the tensors were not).
    aux_values = _aux_arguments(traced, q) if traced is not None else {}
    sink_values = kernel_sinks(sinks) if sinks is not None else None
    out, lse, _ = forward_outputs(q, out, plan.out_shape, plan.lse_shape, return_lse)
    values = {**plan.scalars,
              **_kernel_tensors(q, k_cache, v_cache, block_table, kv_lengths, layout),
              "sinks": sink_values.data_ptr() if sink_values is not None else 0,
              **{name: t.data_ptr() for name, t in aux_values.items()}}
    return launch_planned(plan, q, out, lse, layout, values, return_lse)


def append_to_paged_cache(k_cache: Any, v_cache: Any, block_table: Any, cache_seqlens: Any,
                          k: Any, v: Any) -> None:
    """Writes ``k``/``v`` ``(B, S_new, H_kv, D)`` into the paged cache after
    each sequence's first ``cache_seqlens[b]`` keys (an int32 ``(B,)``
    tensor), in place, by torch ops on the device (no synchronisation):
    token t of sequence b goes to row ``(len_b + t) % page_size`` of page
    ``block_table[b, (len_b + t) // page_size]``. The caller makes sure
    ``len_b + S_new <= n * page_size``: a position past the table's row
    fails torch's device-side index check."""
    import torch

    page_size = k_cache.shape[1]
    seqlen_new = k.shape[1]
    positions = (cache_seqlens.to(torch.long)[:, None] +
                 torch.arange(seqlen_new, device=k_cache.device)[None, :])
    pages = block_table.to(torch.long).gather(1, torch.div(positions, page_size,
                                                           rounding_mode="floor"))
    rows = positions % page_size
    k_cache[pages, rows] = k
    v_cache[pages, rows] = v


def check_paged_kvcache_call(q: Any, k_cache: Any, v_cache: Any, k: Any, v: Any,
                             cache_seqlens: Any, block_table: Any) -> Tuple[int, int]:
    """``flash_attn_with_kvcache``'s checks of a paged cache, its block
    table, the new keys and ``cache_seqlens`` (kvpipe.flash_attn calls it
    once the arguments every cache shares are checked, once per call
    signature); returns the capacity of a table row in keys and the new keys'
    count."""
    _tensors.check_tensor("q", q, rank=4, device="cuda", last_dim_contiguous=True)
    batch = tuple(q.shape)[0]
    _, page_size, pages_per_sequence = check_paged_cache(k_cache, v_cache, block_table, batch)
    capacity = pages_per_sequence * page_size
    if (k is None) != (v is None):
        raise ValueError("k and v must be given together (new keys and values to append)")
    seqlen_new = 0
    if k is not None:
        heads_kv = tuple(k_cache.shape)[2]
        for name, t, cache in (("k", k, k_cache), ("v", v, v_cache)):
            _tensors.check_tensor(name, t, rank=4, device="cuda", last_dim_contiguous=True,
                                  stride_alignment_bytes=None)
            shape = tuple(t.shape)
            want = (batch, tuple(k.shape)[1], heads_kv, tuple(cache.shape)[3])
            if shape != want or str(t.dtype) != str(cache.dtype):
                raise ValueError(f"{name} must be (batch, seqlen_new, nheads_k, headdim) = "
                                 f"{want} of {cache.dtype}, got {shape} of {t.dtype}")
        seqlen_new = tuple(k.shape)[1]
        if cache_seqlens is None:
            raise ValueError("cache_seqlens is required with k and v (where to append them)")
    longest = None  # the longest sequence after the append, where known on the host
    if cache_seqlens is None:
        longest = capacity  # flash-attn: every sequence fills its row of the table
    elif isinstance(cache_seqlens, int) and not isinstance(cache_seqlens, bool):
        if cache_seqlens < 0:
            raise ValueError(f"cache_seqlens must be non-negative, got {cache_seqlens}")
        longest = cache_seqlens + seqlen_new
    else:
        try:
            _tensors.check_tensor("cache_seqlens", cache_seqlens, rank=1, dtype="i32",
                                  device="cuda", last_dim_contiguous=False,
                                  stride_alignment_bytes=None)
        except TypeError as exc:
            raise TypeError(f"cache_seqlens must be None, an int or an int32 tensor: {exc}") \
                from None
        if (tuple(cache_seqlens.shape) != (batch,)
                or str(cache_seqlens.device) != str(k_cache.device)):
            raise ValueError(f"cache_seqlens must be an int32 tensor of shape ({batch},) on "
                             f"{k_cache.device}, got {tuple(cache_seqlens.shape)} on "
                             f"{cache_seqlens.device}")
    if longest is not None and longest > capacity:
        raise ValueError(f"block_table's rows hold {pages_per_sequence} pages of {page_size} "
                         f"keys ({capacity}), fewer than cache_seqlens + seqlen_new = {longest}")
    return capacity, seqlen_new


def paged_kvcache_step(q: Any, k_cache: Any, v_cache: Any, k: Any, v: Any,
                       cache_seqlens: Any, block_table: Any, capacity: int, seqlen_new: int,
                       softmax_scale: Optional[float], causal: bool,
                       window: Tuple[int, int], return_softmax_lse: bool,
                       num_splits: int = 0, sinks: Any = None,
                       softcap: float = 0.0, alibi_slopes: Any = None) -> Any:
    """``flash_attn_with_kvcache`` with a ``block_table``, its arguments
    checked (``check_paged_kvcache_call``): appends the new keys, then
    attends over each sequence's pages; ``softcap`` and ``alibi_slopes`` as
    there (ALiBi's diagonal each sequence's length)."""
    import torch

    batch = tuple(q.shape)[0]
    if cache_seqlens is None:
        lengths = _lengths_tensor(batch, capacity, k_cache.device)
    elif isinstance(cache_seqlens, int):
        before = _lengths_tensor(batch, cache_seqlens, k_cache.device)
        lengths = _lengths_tensor(batch, cache_seqlens + seqlen_new, k_cache.device)
        cache_seqlens = before
    else:
        lengths = cache_seqlens + seqlen_new if seqlen_new else cache_seqlens
    from kvpipe.flash_attn import _score_mod

    score_mod = _score_mod(softcap, alibi_slopes, q, lengths)
    if k is not None:
        append_to_paged_cache(k_cache, v_cache, block_table, cache_seqlens, k, v)
    return paged_attention(q, k_cache, v_cache, block_table, lengths, causal=causal,
                           scale=softmax_scale, return_lse=return_softmax_lse, layout="bshd",
                           mask_alignment="bottom_right", window_size=window,
                           num_splits=num_splits, pack_gqa=None, sinks=sinks,
                           score_mod=score_mod)


#: Host-given lengths (``cache_seqlens`` None or an int) as (B,) int32 device
#: tensors, by (device, batch, length): filled once, as ALiBi's shifts
#: (kvpipe.flash_attn), where a decode step would fill a new one every call.
#: The kernels only read them.
_LENGTHS: Dict[Tuple[str, int, int], Any] = {}
_MAX_LENGTHS = 4096


def _lengths_tensor(batch: int, length: int, device: Any) -> Any:
    key = (str(device), batch, length)
    found = _LENGTHS.get(key)
    if found is None:
        import torch

        found = torch.full((batch,), length, dtype=torch.int32, device=device)
        # One filled while a CUDA graph is captured is filled only when the
        # graph replays: not for other calls.
        if not (device.type == "cuda" and torch.cuda.is_current_stream_capturing()):
            if len(_LENGTHS) >= _MAX_LENGTHS:
                _LENGTHS.pop(next(iter(_LENGTHS)))
            _LENGTHS[key] = found
    return found


def attention_varlen_paged(q: Any, k_cache: Any, v_cache: Any, cu_seqlens_q: Any,
                           cu_seqlens_k: Any, max_seqlen_q: int, max_seqlen_k: int,
                           block_table: Any, causal: bool = False,
                           scale: Optional[float] = None, return_lse: bool = False,
                           mask_alignment: str = "bottom_right",
                           window_size: Tuple[int, int] = (-1, -1), out: Any = None,
                           score_mod: Any = None, mask_mod: Any = None, sinks: Any = None,
                           seqused_k: Any = None, **tuning: int) -> Any:
    """Packed variable-length queries over a paged K/V cache: a serving
    engine's mixed batch (decodes and prefill chunks in one launch, vLLM's
    ``flash_attn_varlen_func(..., block_table=)``), forward only.

    Args:
        q: ``(total_q, H_q, D)``, sequence b at rows ``[cu_seqlens_q[b],
            cu_seqlens_q[b+1])``.
        k_cache, v_cache: ``(num_pages, page_size, H_kv, D)`` as for
            :func:`paged_attention`.
        cu_seqlens_q: int32 ``(batch + 1,)`` query offsets.
        cu_seqlens_k: int32 ``(batch + 1,)``: sequence b has
            ``cu_seqlens_k[b+1] - cu_seqlens_k[b]`` keys, in its row of
            ``block_table`` (flash-attn 2's convention with a block table);
            or None with ``seqused_k``.
        seqused_k: int32 ``(batch,)``: sequence b has ``seqused_k[b]`` keys
            (vLLM's convention; the kernel reads them, clamped to
            ``[0, max_seqlen_k]``), in place of ``cu_seqlens_k``.
        max_seqlen_q, max_seqlen_k: the longest sequences (the grid covers
            ``max_seqlen_q`` rows per sequence); ``max_seqlen_k`` at most
            the table's row of keys.
        block_table: int32 ``(batch, n)`` page indices.
        causal, mask_alignment, window_size, scale, return_lse, score_mod,
            mask_mod, sinks: as in :func:`paged_attention` (bottom-right by
            default: a sequence's queries are its last).
        out: an optional ``(total_q, H_q, D_v)`` contiguous output.

    Returns:
        ``out``, or ``(out, lse)`` with the fp32 ``(H_q, total_q)``
        log-sum-exp. Rows after ``cu_seqlens_q[-1]`` are not written.

    Raises:
        ValueError / TypeError: a bad argument, named.
    """
    from kvpipe import modifiers
    from kvpipe.attention import _device_keyed

    traced = modifiers.trace(score_mod, mask_mod)
    key = _device_keyed(plan_key(
        (q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, out, sinks),
        (max_seqlen_q, max_seqlen_k, causal, scale, return_lse, mask_alignment),
        window_size, tuning, (traced.ir, traced.aux_types) if traced is not None else None), q)
    plan = _varlen_launches.get(key)
    if plan is None or not aligned_16(q, k_cache, v_cache, out):
        plan = _plan_varlen_paged(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, seqused_k,
                                  max_seqlen_q, max_seqlen_k, block_table, causal, scale,
                                  mask_alignment, window_size, out, sinks, traced, tuning)
        _varlen_launches.remember(key, plan)
    return _launch_varlen_paged(plan, q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k,
                                seqused_k, block_table, out, sinks, traced, return_lse)


class _VarlenPagedLaunch(NamedTuple):
    """What a paged varlen call's signature decides (``_plan_varlen_paged``):
    the checks passed, the kernel, its grid and its scalar arguments."""

    out_shape: Tuple[int, int, int]
    lse_shape: Tuple[int, int]
    device_index: int
    #: None: no query rows (max_seqlen_q 0), nothing to launch.
    kernel: Any
    abi: Optional[Dict[str, Any]]
    grid: Optional[Tuple[int, int, int]]
    max_seqlen_q: int
    max_seqlen_k: int
    scale: float
    window: Tuple[int, int]
    block_table_dense: bool


#: Planned paged varlen calls by signature (``launch.plan_key``).
_varlen_launches = LaunchPlans()


def _check_seqlens(cu_seqlens_q: Any, cu_seqlens_k: Any, seqused_k: Any, q: Any) -> int:
    """The key counts' arguments: ``cu_seqlens_k`` or ``seqused_k``, not
    both (``check_cu_seqlens_args`` checks the offsets); returns the batch."""
    from kvpipe.varlen import check_cu_seqlens_args

    if (cu_seqlens_k is None) == (seqused_k is None):
        raise ValueError("with block_table, give cu_seqlens_k or seqused_k (the sequences' "
                         "key counts), not both")
    if cu_seqlens_k is not None:
        return check_cu_seqlens_args(cu_seqlens_q, cu_seqlens_k, q)
    batch = check_cu_seqlens_args(cu_seqlens_q, cu_seqlens_q, q)
    _tensors.check_tensor("seqused_k", seqused_k, rank=1, dtype="i32", device="cuda",
                          last_dim_contiguous=False, stride_alignment_bytes=None)
    if tuple(seqused_k.shape) != (batch,) or str(seqused_k.device) != str(q.device):
        raise ValueError(f"seqused_k must have shape ({batch},) (one key count per sequence) "
                         f"on q's device {q.device}, got {tuple(seqused_k.shape)} on "
                         f"{seqused_k.device}")
    return batch


def _plan_varlen_paged(q: Any, k_cache: Any, v_cache: Any, cu_seqlens_q: Any,
                       cu_seqlens_k: Any, seqused_k: Any, max_seqlen_q: Any,
                       max_seqlen_k: Any, block_table: Any, causal: Any, scale: Any,
                       mask_alignment: Any, window_size: Any, out: Any, sinks: Any,
                       traced: Any, tuning: Dict[str, Any]) -> _VarlenPagedLaunch:
    """attention_varlen_paged's checks (each raising with the argument's
    name) and plan: everything but what depends on the tensors' addresses."""
    from kvpipe.attention import (_check_masks, _check_modifier_lengths, _device_index,
                                  checked_scale, launched_mask)
    from kvpipe.launch import _kernel_for, forward_config_args, launch_grid
    from kvpipe.sinks import check_sinks
    from kvpipe.varlen import check_maxima, check_packed_outputs

    _tensors.check_tensor("q", q, rank=3, device="cuda", last_dim_contiguous=True,
                          stride_alignment_bytes=16)
    batch = _check_seqlens(cu_seqlens_q, cu_seqlens_k, seqused_k, q)
    _, page_size, pages_per_sequence = check_paged_cache(k_cache, v_cache, block_table, batch)
    total_q, hq, d = tuple(q.shape)
    _, _, hkv, dk = tuple(k_cache.shape)
    dv = tuple(v_cache.shape)[3]
    if str(q.dtype) != str(k_cache.dtype) or str(q.device) != str(k_cache.device):
        raise ValueError(f"q must have k_cache's dtype and device ({k_cache.dtype} on "
                         f"{k_cache.device}), got {q.dtype} on {q.device}")
    kernels.dtype_name(q.dtype)  # raises TypeError for other dtypes
    if dk != d or (d, dv) not in kernels.HEAD_DIM_PAIRS:
        raise ValueError(f"q's head dim ({d}) must equal k_cache's ({dk}), and (q, v_cache) "
                         f"head dims be one of {kernels.HEAD_DIM_PAIRS}, got ({d}, {dv})")
    if hq % hkv != 0 or hq > 65535:
        raise ValueError(f"q's heads ({hq}) must be a multiple of k_cache's ({hkv}) and at "
                         "most 65535")
    max_seqlen_q, max_seqlen_k = check_maxima(max_seqlen_q, max_seqlen_k)
    max_seqlen_q = min(max_seqlen_q, total_q)
    if max_seqlen_k > pages_per_sequence * page_size:
        raise ValueError(f"max_seqlen_k ({max_seqlen_k}) must be at most block_table's row of "
                         f"keys ({pages_per_sequence} pages of {page_size})")
    window_left, window_right, sliding_window = _check_masks(causal, mask_alignment,
                                                             window_size)
    scale = checked_scale(scale, d)
    _check_modifier_lengths(traced, max_seqlen_q, max_seqlen_k)
    if sinks is not None:
        check_sinks(sinks, q, hq)
    check_packed_outputs(q, out, None, total_q, hq, dv)
    device_index = _device_index(q)
    kernel = abi = grid = None
    if max_seqlen_q > 0:
        causal, mask_alignment = launched_mask(causal, mask_alignment, sliding_window,
                                               max_seqlen_q, max_seqlen_k, True)
        # The paged kernels' own block sizes (a multiple of the page or
        # within one): the dense varlen plan's 80-key blocks fit 16-key
        # pages only.
        kernel, abi = _kernel_for(
            forward_config_args(d, kernels.dtype_name(q.dtype), causal,
                                dv if dv != d else None, mask_alignment, sliding_window,
                                seqused_k is not None, page_size=page_size,
                                sinks=sinks is not None),
            device_index, tuple(sorted(tuning.items())),
            (traced.ir, traced.aux_types) if traced else ("", ()), varlen=True)
        grid = launch_grid(abi, max_seqlen_q, hq, batch, 0)
    return _VarlenPagedLaunch(
        (total_q, hq, dv), (hq, total_q), device_index, kernel, abi, grid, max_seqlen_q,
        max_seqlen_k, scale, (window_left, window_right),
        tuple(block_table.stride()) == (pages_per_sequence, 1))


def _launch_varlen_paged(plan: _VarlenPagedLaunch, q: Any, k_cache: Any, v_cache: Any,
                         cu_seqlens_q: Any, cu_seqlens_k: Any, seqused_k: Any,
                         block_table: Any, out: Any, sinks: Any, traced: Any,
                         return_lse: bool) -> Any:
    """A planned paged varlen call's launch with this call's tensors."""
    import torch

    from kvpipe.attention import _aux_arguments
    from kvpipe.launch import device_launch
    from kvpipe.sinks import kernel_sinks
    from kvpipe.varlen import varlen_kernel_arguments

    # Held until the launch (the kernel reads them).
    aux_values = _aux_arguments(traced, q) if traced is not None else {}
    if out is None:
        out = torch.empty(plan.out_shape, dtype=q.dtype, device=q.device)
    lse = (torch.empty(plan.lse_shape, dtype=torch.float32, device=q.device) if return_lse
           else None)
    if plan.kernel is None:
        return (out, lse) if return_lse else out
    if not plan.block_table_dense:
        block_table = block_table.contiguous()
    cu_seqlens_q = cu_seqlens_q.contiguous()
    lengths = seqused_k.contiguous() if seqused_k is not None else cu_seqlens_k.contiguous()
    sink_values = kernel_sinks(sinks) if sinks is not None else None
    abi = plan.abi
    args = varlen_kernel_arguments(abi, q, k_cache, v_cache, out, lse, cu_seqlens_q,
                                   lengths, plan.max_seqlen_q, plan.max_seqlen_k, plan.scale,
                                   plan.window, aux_values,
                                   sink_values.data_ptr() if sink_values is not None else 0,
                                   block_table=block_table,
                                   kv_lengths=seqused_k is not None)
    guard, stream = device_launch(plan.device_index)
    with guard:
        plan.kernel.launch(plan.grid, (abi["threads"], 1, 1), args,
                           shared_mem=abi["dynamic_shared_memory"], stream=stream)
    return (out, lse) if return_lse else out
