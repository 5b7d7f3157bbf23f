"""A drop-in for flash-attn 2.x's Python API, computed by kvpipe kernels.

An inference engine switches by changing its import::

    from kvpipe.flash_attn import flash_attn_func, flash_attn_with_kvcache

The functions take flash-attn's arguments, names, defaults and layouts
(``(batch, seqlen, nheads, headdim)``; ``flash_attn_varlen_func``'s packed
``(total, nheads, headdim)`` with ``cu_seqlens``) and keep its semantics: ``causal`` is
aligned bottom-right (query i of ``seqlen_q`` sees keys up to
``i + seqlen_k - seqlen_q``), ``window_size=(left, right)`` keeps the keys in
``[i + seqlen_k - seqlen_q - left, i + seqlen_k - seqlen_q + right]`` (-1:
unbounded), a query that sees no key gets zeros and a log-sum-exp of +inf,
and the log-sum-exp is fp32 ``(batch, nheads, seqlen_q)`` (varlen: ``(nheads, total_q)``).

What kvpipe does not compute yet raises ``NotImplementedError`` naming the
argument (dropout, rotary embeddings, ``cache_batch_idx``, ``cache_leftpad``,
soft-capping and ALiBi with a paged cache, and with variable-length batches on
inputs that require grad); ``softcap`` and ``alibi_slopes`` are score modifiers
(kvpipe.modifiers), differentiable with respect to q, k and v (the slopes
themselves get no gradient, as flash-attn's); a wrong
argument raises ``ValueError``/``TypeError`` naming it, before any launch.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

from kvpipe import _tensors, modifiers
from kvpipe.attention import attention, normalise_window
from kvpipe.launch import LaunchPlans, plan_key
from kvpipe.plans import MAX_SPLITS
from kvpipe.varlen import attention_varlen, check_varlen_inputs

__all__ = ["flash_attn_func", "flash_attn_with_kvcache", "flash_attn_varlen_func"]


def _unsupported(name: str, why: str) -> NotImplementedError:
    return NotImplementedError(f"kvpipe.flash_attn: {name} is not supported yet ({why})")


#: Why kvpipe does not compute an argument of flash-attn's, FA3's or vLLM's
#: interfaces, by name (``_refuse_unsupported``).
_UNSUPPORTED = {
    "qv": "MLA's extra query head dim", "q_v": "MLA's extra query head dim",
    "q_descale": "fp8 inputs", "k_descale": "fp8 inputs", "v_descale": "fp8 inputs",
    "rotary_cos": "apply rotary embeddings before the call",
    "rotary_sin": "apply rotary embeddings before the call",
    "rotary_seqlens": "apply rotary embeddings before the call",
    "cache_batch_idx": "index the cache before the call",
    "cache_leftpad": "left-padded caches", "seqused_q": "per-sequence query counts",
    "cu_seqlens_k_new": "new keys with packed queries",
    "cp_tot_seqused_k": "context parallelism"}


def _refuse_unsupported(**values: Any) -> None:
    """Raises ``_unsupported`` for the first of ``values`` that is not None
    (the drop-ins' arguments kvpipe does not compute, ``_UNSUPPORTED``)."""
    for name, value in values.items():
        if value is not None:
            raise _unsupported(name, _UNSUPPORTED[name])


def _check_common(dropout_p: float, softcap: float, alibi_slopes: Any,
                  window_size: Any, causal: bool) -> Tuple[int, int]:
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {causal!r}")
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)):
        raise TypeError(f"dropout_p must be a number, got {dropout_p!r}")
    if dropout_p != 0.0:
        raise _unsupported("dropout_p != 0", "kvpipe computes attention without dropout")
    if isinstance(softcap, bool) or not isinstance(softcap, (int, float)):
        raise TypeError(f"softcap must be a number, got {softcap!r}")
    if softcap < 0 or softcap != softcap or softcap == float("inf"):
        raise ValueError(f"softcap must be 0 (off) or a positive finite number, got {softcap!r}")
    return normalise_window(window_size, causal)


def _score_mod(softcap: float, alibi_slopes: Any, q: Any, seq_kv: Any) -> Any:
    """flash-attn's soft-cap and ALiBi as a kvpipe score_mod (kvpipe.modifiers),
    or None: ``softcap * tanh(s / softcap)`` of the scaled score ``s``, then
    ``- slope * |i + seqlen_k - seqlen_q - j|`` (flash-attn's order and
    formula; with ``causal`` flash-attn adds ``slope * (j - (i + seqlen_k -
    seqlen_q))``'s row-constant shift, the same softmax). ``seq_kv``: an int,
    or an int32 tensor ``(batch,)`` of per-sequence key counts."""
    mods = []
    if softcap:
        mods.append(modifiers.soft_cap(softcap))
    if alibi_slopes is not None:
        batch, seq_q, heads = tuple(q.shape)[:3]
        _tensors.check_tensor("alibi_slopes", alibi_slopes, rank=(1, 2), dtype="f32",
                              device="cuda", last_dim_contiguous=False,
                              stride_alignment_bytes=None)
        shape = tuple(alibi_slopes.shape)
        if shape not in ((heads,), (batch, heads)):
            raise ValueError(f"alibi_slopes must have shape ({heads},) or ({batch}, {heads}) "
                             f"(nheads or batch x nheads), got {shape}")
        # flash-attn's alibi_slopes takes no gradient (its backward returns
        # None for it): slopes that require grad (an nn.Parameter) are read
        # as constants there, and so here.
        if getattr(alibi_slopes, "requires_grad", False):
            alibi_slopes = alibi_slopes.detach()
        # The diagonal's shift: 0 for as many queries as keys (self-attention
        # in training and prefill), compiled in: no int tensor built and
        # copied to the device per call, no read of it in the kernel; other
        # shifts are read at run time, one kernel for all lengths.
        if isinstance(seq_kv, int) and seq_kv == seq_q:
            mods.append(modifiers.alibi(alibi_slopes, 0))
        else:
            if isinstance(seq_kv, int):
                shift, lengths = seq_kv - seq_q, {}
            else:  # per-sequence key counts: the kernel adds each one
                shift, lengths = -seq_q, {"kv_lengths": seq_kv}
            mods.append(modifiers.alibi(alibi_slopes, _shift_tensor(shift, q.device),
                                        **lengths))
    if not mods:
        return None
    return mods[0] if len(mods) == 1 else modifiers.compose_scores(*mods)


#: ALiBi's diagonal shifts as (1,) int32 device tensors, by (device, shift):
#: built once, since copying a host value to the device on every call (a
#: decode step's) waits for the stream (a pageable copy), which kept the host
#: from queueing ahead: 0.39 ms a call at B 8 x 8k (scripts/gpu/
#: decode-modifiers.py, session 33). The kernels only read them.
_SHIFTS: dict = {}


def _shift_tensor(shift: int, device: Any) -> Any:
    key = (str(device), shift)
    found = _SHIFTS.get(key)
    if found is None:
        import torch

        found = _SHIFTS[key] = torch.tensor([shift], dtype=torch.int32, device=device)
    return found


def _varlen_score_mod(softcap: float, alibi_slopes: Any, q: Any, cu_seqlens_q: Any,
                      cu_seqlens_k: Any, seqused_k: Any = None) -> Any:
    """``_score_mod`` for packed sequences: the regions' ``b`` is the
    sequence, and ALiBi's diagonal is each sequence's ``seqlen_k -
    seqlen_q``, read from an int32 tensor of the differences (the key
    counts from ``cu_seqlens_k`` or, where given, ``seqused_k``)."""
    mods = []
    if softcap:
        mods.append(modifiers.soft_cap(softcap))
    if alibi_slopes is not None:
        heads, batch = tuple(q.shape)[1], tuple(cu_seqlens_q.shape)[0] - 1
        _tensors.check_tensor("alibi_slopes", alibi_slopes, rank=(1, 2), dtype="f32",
                              device="cuda", last_dim_contiguous=False,
                              stride_alignment_bytes=None)
        shape = tuple(alibi_slopes.shape)
        if shape not in ((heads,), (batch, heads)):
            raise ValueError(f"alibi_slopes must have shape ({heads},) or ({batch}, {heads}) "
                             f"(nheads or batch x nheads), got {shape}")
        if getattr(alibi_slopes, "requires_grad", False):
            alibi_slopes = alibi_slopes.detach()  # as flash-attn: no gradient
        lengths_q = cu_seqlens_q[1:] - cu_seqlens_q[:-1]
        lengths_k = (seqused_k if seqused_k is not None
                     else cu_seqlens_k[1:] - cu_seqlens_k[:-1])
        mods.append(modifiers.alibi(alibi_slopes, 0, kv_lengths=lengths_k - lengths_q))
    return mods[0] if len(mods) == 1 else modifiers.compose_scores(*mods)


def flash_attn_func(q: Any, k: Any, v: Any, dropout_p: float = 0.0,
                    softmax_scale: Optional[float] = None, causal: bool = False,
                    window_size: Tuple[int, int] = (-1, -1), softcap: float = 0.0,
                    alibi_slopes: Any = None, deterministic: bool = False,
                    return_attn_probs: bool = False, learnable_sink: Any = None) -> Any:
    """flash-attn's ``flash_attn_func``.

    Args:
        q: ``(batch, seqlen_q, nheads, headdim)``, bfloat16 or float16 on a
            CUDA device, headdim 64 or 128.
        k, v: ``(batch, seqlen_k, nheads_k, headdim)``; ``nheads_k`` divides
            ``nheads`` (MQA/GQA).
        dropout_p: must be 0.
        softmax_scale: default ``1 / sqrt(headdim)``.
        causal: bottom-right aligned causal mask.
        window_size: ``(left, right)`` sliding window, -1 for unbounded.
        softcap: > 0: ``softcap * tanh(s / softcap)`` of the scaled scores.
        alibi_slopes: fp32 ``(nheads,)`` or ``(batch, nheads)``: the scores
            get ``- slope * |i + seqlen_k - seqlen_q - j|``.
        deterministic: the backward's gradients are bit-identical run to run
            (the forward always is; docs/backward.md, "Deterministic mode").
        return_attn_probs: also return the log-sum-exp (and ``None`` for the
            attention probabilities, which flash-attn returns only with
            dropout).
        learnable_sink: gpt-oss's attention sinks, a float ``(nheads,)``
            tensor (FlashAttention-4's argument; kvpipe.sinks), with their
            gradient where they require one.

    Returns:
        ``out`` ``(batch, seqlen_q, nheads, headdim)``, or
        ``(out, softmax_lse, None)`` with ``softmax_lse`` fp32
        ``(batch, nheads, seqlen_q)``.
    """
    window = _check_common(dropout_p, softcap, alibi_slopes, window_size, causal)
    if not isinstance(deterministic, bool):
        raise TypeError(f"deterministic must be a bool, got {deterministic!r}")
    # With equal lengths both alignments are one mask: top-left, whose
    # kernels the other callers share.
    shape_q, shape_k = tuple(getattr(q, "shape", ())), tuple(getattr(k, "shape", ()))
    same_length = len(shape_q) == 4 and len(shape_k) == 4 and shape_q[1] == shape_k[1]
    score_mod = _score_mod(softcap, alibi_slopes, q, tuple(k.shape)[1]
                           if alibi_slopes is not None else 0)
    result = attention(q, k, v, causal=causal, scale=softmax_scale,
                       return_lse=return_attn_probs, layout="bshd",
                       mask_alignment="top_left" if same_length else "bottom_right",
                       window_size=window, deterministic=deterministic,
                       score_mod=score_mod, sinks=learnable_sink)
    if return_attn_probs:
        out, lse = result
        return out, lse, None
    return result


def flash_attn_with_kvcache(q: Any, k_cache: Any, v_cache: Any, k: Any = None, v: Any = None,
                            rotary_cos: Any = None, rotary_sin: Any = None,
                            cache_seqlens: Any = None, cache_batch_idx: Any = None,
                            cache_leftpad: Any = None, block_table: Any = None,
                            softmax_scale: Optional[float] = None, causal: bool = False,
                            window_size: Tuple[int, int] = (-1, -1), softcap: float = 0.0,
                            rotary_interleaved: bool = True, alibi_slopes: Any = None,
                            num_splits: int = 0, return_softmax_lse: bool = False,
                            learnable_sink: Any = None) -> Any:
    """flash-attn's ``flash_attn_with_kvcache`` (decode and chunked prefill
    against a KV cache).

    Args:
        q: ``(batch, seqlen_q, nheads, headdim)``.
        k_cache, v_cache: ``(batch, seqlen_cache, nheads_k, headdim)``, the
            padded per-sequence cache; or with ``block_table``
            ``(num_blocks, page_block_size, nheads_k, headdim)``, a paged
            cache (page_block_size 16, 32, 64, 128 or 256).
        block_table: optional int32 ``(batch, max_num_blocks_per_seq)`` on
            the cache's device: sequence b's key j is row
            ``j % page_block_size`` of page ``block_table[b, j //
            page_block_size]`` (kvpipe.paged). Page indices must be in
            ``[0, num_blocks)``: not checked (it would need a host
            synchronisation); the kernel reads a page outside the cache as
            zeros, never out of bounds. Without ``cache_seqlens`` every
            sequence has ``max_num_blocks_per_seq * page_block_size`` keys.
        k, v: optional ``(batch, seqlen_new, nheads_k, headdim)`` written into
            the cache at ``cache_seqlens`` (in place) before attending.
        cache_seqlens: None (every sequence fills the cache), an int, or an
            int32 tensor ``(batch,)``: each sequence's length before ``k``
            is appended. Sequence b attends to its first
            ``cache_seqlens[b] + seqlen_new`` keys.
        causal, window_size, softmax_scale: as in flash_attn_func.
        num_splits: how many CTAs split each sequence's keys (flash-attn's
            meaning): 0 chooses (enough CTAs to fill the SMs, a few K/V
            blocks each; docs/serving.md), 1 does not split, n > 1 splits
            in n (at most 128), partials merged by a combine kernel. The
            query heads of a K/V head share a tile (pack-GQA) when the
            queries are few (decode, short chunks).
        return_softmax_lse: also return the fp32 log-sum-exp.
        learnable_sink: as in flash_attn_func, with every cache (the
            split-KV combine kernel takes them).
        softcap, alibi_slopes: as in flash_attn_func (seqlen_k: each
            sequence's key count), with every cache (the decode kernels run
            them: split-KV, pack-GQA).
        rotary_cos, rotary_sin, cache_batch_idx, cache_leftpad: not
            supported yet (NotImplementedError).

    Returns:
        ``out``, or ``(out, softmax_lse)``.
    """
    host_seqlens = cache_seqlens is None or isinstance(cache_seqlens, int)
    key = plan_key((q, k_cache, v_cache, k, v, None if host_seqlens else cache_seqlens,
                    block_table, rotary_cos, rotary_sin, cache_batch_idx, cache_leftpad),
                   (softmax_scale, causal, softcap, rotary_interleaved, num_splits,
                    cache_seqlens if host_seqlens else None), window_size, {})
    call = _kvcache_calls.get(key)
    if call is None:
        call = _check_kvcache_call(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin,
                                   cache_seqlens, cache_batch_idx, cache_leftpad, block_table,
                                   causal, window_size, softcap, alibi_slopes,
                                   rotary_interleaved, num_splits)
        _kvcache_calls.remember(key, call)
    if block_table is not None:
        from kvpipe.paged import paged_kvcache_step

        return paged_kvcache_step(q, k_cache, v_cache, k, v, cache_seqlens, block_table,
                                  call.capacity, call.seqlen_new, softmax_scale, causal,
                                  call.window, return_softmax_lse, num_splits, learnable_sink,
                                  softcap, alibi_slopes)
    seqlen_new, used = call.seqlen_new, call.used
    lengths = None  # per-sequence key counts on the device, or None for all equal
    if used is None:
        # (Without new keys the lengths are read as given: no elementwise
        # kernel and allocation in a decode step.)
        lengths = cache_seqlens + seqlen_new if seqlen_new else cache_seqlens
    if k is not None:
        # Append in place at each sequence's length (no host synchronisation:
        # the positions are computed on the device).
        if lengths is None:
            start = used - seqlen_new
            k_cache[:, start:used] = k
            v_cache[:, start:used] = v
        else:
            import torch

            positions = (cache_seqlens.long()[:, None] +
                         torch.arange(seqlen_new, device=k_cache.device)[None, :])
            rows = torch.arange(tuple(k_cache.shape)[0],
                                device=k_cache.device)[:, None].expand_as(positions)
            k_cache[rows, positions] = k
            v_cache[rows, positions] = v

    score_mod = _score_mod(softcap, alibi_slopes, q, used if lengths is None else lengths)
    if lengths is None:
        keys, values = ((k_cache, v_cache) if used == call.capacity else
                        (k_cache[:, :used], v_cache[:, :used]))
        return attention(q, keys, values, causal=causal, scale=softmax_scale,
                         return_lse=return_softmax_lse, layout="bshd",
                         mask_alignment="bottom_right", window_size=call.window,
                         num_splits=num_splits, pack_gqa=None,
                         score_mod=score_mod, sinks=learnable_sink)
    return attention(q, k_cache, v_cache, causal=causal, scale=softmax_scale,
                     return_lse=return_softmax_lse, layout="bshd",
                     mask_alignment="bottom_right", window_size=call.window,
                     kv_lengths=lengths, num_splits=num_splits, pack_gqa=None,
                     score_mod=score_mod, sinks=learnable_sink)


class _KVCacheCall(NamedTuple):
    """What ``flash_attn_with_kvcache``'s checks of a call signature decide
    (``_check_kvcache_call``): a decode step repeats its signature every layer
    and step, and checking it again was a third of the call's host time."""

    window: Tuple[int, int]
    #: Keys per sequence a row of the cache (or of the block table) holds.
    capacity: int
    seqlen_new: int
    #: The keys every sequence uses where cache_seqlens is a host value
    #: (contiguous cache), else None.
    used: Optional[int]


#: Checked calls by signature (``launch.plan_key``; an int cache_seqlens by
#: value).
_kvcache_calls = LaunchPlans()


def _check_kvcache_call(q: Any, k_cache: Any, v_cache: Any, k: Any, v: Any, rotary_cos: Any,
                        rotary_sin: Any, cache_seqlens: Any, cache_batch_idx: Any,
                        cache_leftpad: Any, block_table: Any, causal: Any, window_size: Any,
                        softcap: Any, alibi_slopes: Any, rotary_interleaved: Any,
                        num_splits: Any) -> _KVCacheCall:
    """flash_attn_with_kvcache's checks, each raising with the argument's
    name, but those of the tensors kvpipe.attention checks (q's dtype and
    head dim, the sinks, the modifiers' tensors) per call."""
    window = _check_common(0.0, softcap, alibi_slopes, window_size, causal)
    _refuse_unsupported(rotary_cos=rotary_cos, rotary_sin=rotary_sin,
                        cache_batch_idx=cache_batch_idx, cache_leftpad=cache_leftpad)
    if isinstance(num_splits, bool) or not isinstance(num_splits, int):
        raise TypeError(f"num_splits must be an int (0: choose), got {num_splits!r}")
    if not 0 <= num_splits <= MAX_SPLITS:
        raise ValueError(f"num_splits must be in [0, {MAX_SPLITS}] (0: choose, 1: no split), "
                         f"got {num_splits}")
    if not isinstance(rotary_interleaved, bool):
        raise TypeError(f"rotary_interleaved must be a bool, got {rotary_interleaved!r}")
    if block_table is not None:
        from kvpipe.paged import check_paged_kvcache_call

        capacity, seqlen_new = check_paged_kvcache_call(q, k_cache, v_cache, k, v,
                                                        cache_seqlens, block_table)
        return _KVCacheCall(window, capacity, seqlen_new, None)
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        _tensors.check_tensor(name, t, rank=4, device="cuda", last_dim_contiguous=True)
    batch, capacity = tuple(k_cache.shape)[:2]
    if tuple(v_cache.shape) != tuple(k_cache.shape):
        raise ValueError(f"v_cache must have k_cache's shape {tuple(k_cache.shape)}, got "
                         f"{tuple(v_cache.shape)}")
    if tuple(q.shape)[0] != batch:
        raise ValueError(f"q's batch ({tuple(q.shape)[0]}) must equal k_cache's ({batch})")
    if (k is None) != (v is None):
        raise ValueError("k and v must be given together (new keys and values to append)")
    seqlen_new = 0
    if k is not None:
        for name, t in (("k", k), ("v", v)):
            _tensors.check_tensor(name, t, rank=4, device="cuda", last_dim_contiguous=True)
            shape = tuple(t.shape)
            if (shape[0] != batch or shape[2:] != tuple(k_cache.shape)[2:]
                    or shape != tuple(k.shape)):
                raise ValueError(f"{name} must be (batch, seqlen_new, nheads_k, headdim) = "
                                 f"({batch}, seqlen_new, {', '.join(map(str, tuple(k_cache.shape)[2:]))}), "
                                 f"got {shape}")
        seqlen_new = tuple(k.shape)[1]
        if cache_seqlens is None:
            raise ValueError("cache_seqlens is required with k and v (where to append them)")

    import torch

    if cache_seqlens is None:
        used = capacity
    elif isinstance(cache_seqlens, int) and not isinstance(cache_seqlens, bool):
        if not 0 <= cache_seqlens <= capacity - seqlen_new:
            raise ValueError(f"cache_seqlens ({cache_seqlens}) + seqlen_new ({seqlen_new}) must "
                             f"fit the cache ({capacity})")
        used = cache_seqlens + seqlen_new
    elif isinstance(cache_seqlens, torch.Tensor):
        if (cache_seqlens.dtype != torch.int32 or tuple(cache_seqlens.shape) != (batch,)
                or cache_seqlens.device != k_cache.device):
            raise ValueError(f"cache_seqlens must be an int32 tensor of shape ({batch},) on "
                             f"{k_cache.device}, got {cache_seqlens.dtype} "
                             f"{tuple(cache_seqlens.shape)} on {cache_seqlens.device}")
        used = None
    else:
        raise TypeError(f"cache_seqlens must be None, an int or an int32 tensor, got "
                        f"{type(cache_seqlens).__name__}")
    return _KVCacheCall(window, capacity, seqlen_new, used)


def flash_attn_varlen_func(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                           max_seqlen_q: int, max_seqlen_k: int, dropout_p: float = 0.0,
                           softmax_scale: Optional[float] = None, causal: bool = False,
                           window_size: Tuple[int, int] = (-1, -1), softcap: float = 0.0,
                           alibi_slopes: Any = None, deterministic: bool = False,
                           return_attn_probs: bool = False, block_table: Any = None,
                           learnable_sink: Any = None, seqused_k: Any = None) -> Any:
    """flash-attn's ``flash_attn_varlen_func``: a batch of sequences packed
    without padding.

    Args:
        q: ``(total_q, nheads, headdim)``, sequence b at rows
            ``[cu_seqlens_q[b], cu_seqlens_q[b+1])``; bfloat16 or float16 on
            a CUDA device.
        k, v: ``(total_k, nheads_k, headdim)``; ``nheads_k`` divides
            ``nheads`` (MQA/GQA).
        cu_seqlens_q, cu_seqlens_k: int32 ``(batch + 1,)`` prefix offsets on
            q's device.
        max_seqlen_q, max_seqlen_k: the longest sequences. Their values
            against cu_seqlens are not checked (that needs a device read)
            unless ``KVPIPE_CHECK_CU_SEQLENS=1``: query rows of a sequence
            longer than ``max_seqlen_q`` are not computed.
        causal: bottom-right aligned per sequence (query i of a sequence of
            ``n_q`` queries and ``n_k`` keys sees keys up to ``i + n_k - n_q``).
        window_size: ``(left, right)``, anchored the same way; -1 unbounded.
        softmax_scale: default ``1 / sqrt(headdim)``.
        softcap: > 0: ``softcap * tanh(s / softcap)`` of the scaled scores.
        alibi_slopes: fp32 ``(nheads,)`` or ``(batch, nheads)``: the scores
            get ``- slope * |i + seqlen_k - seqlen_q - j|``, each sequence's
            own lengths.
        block_table: int32 ``(batch, max_num_blocks_per_seq)``: k and v
            are then paged caches ``(num_blocks, page_block_size, nheads_k,
            headdim)`` and sequence b has ``cu_seqlens_k[b+1] -
            cu_seqlens_k[b]`` keys in its row of pages (flash-attn 2's
            convention; a serving engine's mixed batch of decodes and
            prefill chunks in one launch). Forward only.
        seqused_k: vLLM's alternative to ``cu_seqlens_k`` with a block
            table: int32 ``(batch,)`` key counts (``cu_seqlens_k`` then
            None).
        dropout_p: must be 0.
        deterministic: the backward's (inputs requiring grad: per sequence,
            the dense backward family; not with softcap or alibi_slopes, which
            the packed backward runs); the forward is deterministic.
        return_attn_probs: also return the log-sum-exp (and ``None``).
        learnable_sink: as in flash_attn_func (the packed backward gives
            them their gradient).

    Returns:
        ``out`` ``(total_q, nheads, headdim)``, or ``(out, softmax_lse, None)``
        with ``softmax_lse`` fp32 ``(nheads, total_q)``.
    """
    window = _check_common(dropout_p, softcap, alibi_slopes, window_size, causal)
    if block_table is not None or seqused_k is not None:
        return _varlen_paged(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q,
                             max_seqlen_k, softmax_scale, causal, window, softcap,
                             alibi_slopes, return_attn_probs, block_table, learnable_sink)
    if not isinstance(return_attn_probs, bool):
        raise TypeError(f"return_attn_probs must be a bool, got {return_attn_probs!r}")
    result = _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     softmax_scale, causal, window, softcap, alibi_slopes, deterministic,
                     return_attn_probs, learnable_sink)
    if return_attn_probs:
        out, lse = result
        return out, lse, None
    return result


def _varlen(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, max_seqlen_q: int,
            max_seqlen_k: int, softmax_scale: Optional[float], causal: bool,
            window: Tuple[int, int], softcap: float, alibi_slopes: Any, deterministic: bool,
            return_lse: bool, sinks: Any, out: Any = None) -> Any:
    """flash_attn_varlen_func over packed K/V (``_check_common`` checked the
    options): ``out``, or ``(out, lse)``; ``out`` written where given."""
    if not isinstance(deterministic, bool):
        raise TypeError(f"deterministic must be a bool, got {deterministic!r}")
    score_mod = None
    if softcap or alibi_slopes is not None:
        check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
        score_mod = _varlen_score_mod(softcap, alibi_slopes, q, cu_seqlens_q, cu_seqlens_k)
    return attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            causal=causal, scale=softmax_scale, return_lse=return_lse,
                            mask_alignment="bottom_right", window_size=window,
                            score_mod=score_mod, deterministic=deterministic, sinks=sinks,
                            out=out)


def _varlen_paged(q: Any, k_cache: Any, v_cache: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                  seqused_k: Any, max_seqlen_q: int, max_seqlen_k: int,
                  softmax_scale: Optional[float], causal: bool, window: Tuple[int, int],
                  softcap: float, alibi_slopes: Any, return_attn_probs: bool,
                  block_table: Any, learnable_sink: Any, out: Any = None) -> Any:
    """flash_attn_varlen_func over a paged cache (``block_table``), the key
    counts from ``cu_seqlens_k`` or vLLM's ``seqused_k``; ``out`` written
    where given."""
    from kvpipe.paged import _check_seqlens, attention_varlen_paged

    if block_table is None:
        raise ValueError("seqused_k goes with block_table (the paged caches' key counts)")
    if any(getattr(t, "requires_grad", False) for t in (q, k_cache, v_cache)):
        raise _unsupported("block_table with inputs that require grad",
                           "the paged varlen kernel is forward only")
    score_mod = None
    if softcap or alibi_slopes is not None:
        _check_seqlens(cu_seqlens_q, cu_seqlens_k, seqused_k, q)
        score_mod = _varlen_score_mod(softcap, alibi_slopes, q, cu_seqlens_q, cu_seqlens_k,
                                      seqused_k)
    # (The kernel reads seqused_k as given: no offsets computed per call.)
    result = attention_varlen_paged(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k,
                                    max_seqlen_q, max_seqlen_k, block_table, causal=causal,
                                    scale=softmax_scale, return_lse=return_attn_probs,
                                    mask_alignment="bottom_right", window_size=window,
                                    score_mod=score_mod, sinks=learnable_sink,
                                    seqused_k=seqused_k, out=out)
    if return_attn_probs:
        out, lse = result
        return out, lse, None
    return result
