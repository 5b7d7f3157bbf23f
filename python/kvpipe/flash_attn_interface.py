"""A drop-in for FlashAttention-3's Python interface (``flash_attn_interface``,
the Hopper build; SGLang's ``sgl_kernel.flash_attn`` follows it), computed by
kvpipe kernels.

FA3's serving call differs from flash-attn 2's: ``flash_attn_with_kvcache``
takes the paged cache's table as ``page_table`` and may take packed queries
(``cu_seqlens_q``, ``max_seqlen_q``: SGLang's extend and decode batches) with
``cache_seqlens`` as each sequence's key count; it returns ``(out,
softmax_lse, *rest)`` with ``return_softmax_lse``. ``flash_attn_varlen_func``
takes ``seqused_q``/``seqused_k`` beside the offsets. An engine switches by
pointing that import here::

    from kvpipe.flash_attn_interface import flash_attn_with_kvcache

The kernels are kvpipe.flash_attn's and kvpipe.paged's (flash-attn's
semantics: bottom-right causal, windows, soft-cap, sinks). What kvpipe does
not compute raises ``NotImplementedError`` naming the argument: fp8
descaling, ``qv``, ``attention_chunk``, rotary embeddings, ``cache_batch_idx``,
``cache_leftpad``, new keys with packed queries (``cu_seqlens_k_new``),
``seqused_q``, and pages of other sizes than ``kvpipe.kernels.PAGE_SIZES``
(SGLang's default page size 1 included: its table addresses single tokens).
FA3's scheduling options (``scheduler_metadata``, ``num_splits``,
``pack_gqa``, ``sm_margin``) are accepted; ``num_splits`` is passed on to a
batched call's decode launch (the packed one's varlen kernel does not split),
``pack_gqa`` is left to kvpipe's decode plan.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from kvpipe.flash_attn import _check_common, _refuse_unsupported, _unsupported

__all__ = ["flash_attn_with_kvcache", "flash_attn_varlen_func", "get_scheduler_metadata"]


def get_scheduler_metadata(*args: Any, **kwargs: Any) -> None:
    """FA3's precomputed split schedule: None here (kvpipe's launchers plan
    each call signature once themselves)."""
    return None


def _check_fa3_options(attention_chunk: Any, num_splits: Any, pack_gqa: Any,
                       sm_margin: Any) -> None:
    if isinstance(attention_chunk, bool) or not isinstance(attention_chunk, int):
        raise TypeError(f"attention_chunk must be an int, got {attention_chunk!r}")
    if attention_chunk != 0:
        raise _unsupported("attention_chunk != 0", "chunked attention (Llama 4's local "
                           "chunks); a mask_mod on kvpipe.attention expresses it")
    for name, value in (("num_splits", num_splits), ("sm_margin", sm_margin)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    if pack_gqa is not None and not isinstance(pack_gqa, bool):
        raise TypeError(f"pack_gqa must be None or a bool, got {pack_gqa!r}")


def flash_attn_with_kvcache(q: Any, k_cache: Any, v_cache: Any, k: Any = None, v: Any = None,
                            qv: Any = None, rotary_cos: Any = None, rotary_sin: Any = None,
                            cache_seqlens: Any = None, cache_batch_idx: Any = None,
                            cache_leftpad: Any = None, page_table: Any = None,
                            cu_seqlens_q: Any = None, cu_seqlens_k_new: Any = None,
                            max_seqlen_q: Optional[int] = None, rotary_seqlens: Any = None,
                            q_descale: Any = None, k_descale: Any = None,
                            v_descale: Any = None, softmax_scale: Optional[float] = None,
                            causal: bool = False, window_size: Tuple[int, int] = (-1, -1),
                            attention_chunk: int = 0, softcap: float = 0.0,
                            rotary_interleaved: bool = True, scheduler_metadata: Any = None,
                            num_splits: int = 0, pack_gqa: Optional[bool] = None,
                            sm_margin: int = 0, return_softmax_lse: bool = False,
                            sinks: Any = None) -> Any:
    """FA3's ``flash_attn_with_kvcache`` (and SGLang's, with ``sinks``).

    Args:
        q: ``(batch, seqlen_q, nheads, headdim)``, or with ``cu_seqlens_q``
            packed ``(total_q, nheads, headdim)`` (sequence b at rows
            ``[cu_seqlens_q[b], cu_seqlens_q[b+1])``, at most
            ``max_seqlen_q`` of them), which needs ``page_table``.
        k_cache, v_cache: ``(batch, seqlen_cache, nheads_k, headdim)``, or with
            ``page_table`` ``(num_blocks, page_block_size, nheads_k,
            headdim)``, page_block_size in ``kvpipe.kernels.PAGE_SIZES``.
        page_table: int32 ``(batch, max_num_blocks_per_seq)``.
        cache_seqlens: int or int32 ``(batch,)``: each sequence's keys
            before ``k``/``v`` are appended (FA3's and flash-attn 2's
            meaning); with packed queries an int32 tensor, the key counts
            (the kernel reads them as given).
        k, v: new keys and values appended at ``cache_seqlens`` (not with
            packed queries).
        causal, window_size, softcap, softmax_scale, sinks: as in
            kvpipe.flash_attn.flash_attn_with_kvcache (``sinks``: gpt-oss's,
            fp32 ``(nheads,)``).
        num_splits: the decode kernels' split (0: chosen), batched calls
            only; pack_gqa: accepted, chosen by kvpipe's decode plan.
        scheduler_metadata, sm_margin: accepted, not needed.

    Returns:
        ``out``, or ``(out, softmax_lse)`` with ``return_softmax_lse``
        (``(nheads, total_q)`` with packed queries, else ``(batch, nheads,
        seqlen_q)``).
    """
    _refuse_unsupported(qv=qv, q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
                        rotary_cos=rotary_cos, rotary_sin=rotary_sin,
                        rotary_seqlens=rotary_seqlens, cache_batch_idx=cache_batch_idx,
                        cache_leftpad=cache_leftpad)
    _check_fa3_options(attention_chunk, num_splits, pack_gqa, sm_margin)
    if not isinstance(return_softmax_lse, bool):
        raise TypeError(f"return_softmax_lse must be a bool, got {return_softmax_lse!r}")
    if cu_seqlens_q is None:
        if cu_seqlens_k_new is not None and k is None:
            cu_seqlens_k_new = None  # (FA3 reads it only with new keys)
        _refuse_unsupported(cu_seqlens_k_new=cu_seqlens_k_new)
        from kvpipe.flash_attn import flash_attn_with_kvcache as fa2_kvcache

        return fa2_kvcache(q, k_cache, v_cache, k=k, v=v, cache_seqlens=cache_seqlens,
                           block_table=page_table, softmax_scale=softmax_scale,
                           causal=causal, window_size=window_size, softcap=softcap,
                           rotary_interleaved=rotary_interleaved, num_splits=num_splits,
                           return_softmax_lse=return_softmax_lse, learnable_sink=sinks)
    # Packed queries (SGLang's extend and decode batches): the paged varlen
    # kernel, the key counts read from cache_seqlens as given.
    if k is not None or v is not None:
        raise _unsupported("k and v with cu_seqlens_q", "append the new keys before the call")
    if page_table is None:
        raise _unsupported("cu_seqlens_q without page_table",
                           "packed queries over a contiguous cache; use "
                           "flash_attn_varlen_func")
    if cache_seqlens is None or isinstance(cache_seqlens, int):
        raise ValueError("cache_seqlens must be an int32 tensor of key counts (batch,) with "
                         "cu_seqlens_q")
    if max_seqlen_q is None:
        raise ValueError("max_seqlen_q is required with cu_seqlens_q (the longest sequence's "
                         "queries)")
    from kvpipe.flash_attn import _varlen_paged

    window = _check_common(0.0, softcap, None, window_size, causal)
    capacity = tuple(page_table.shape)[1] * tuple(k_cache.shape)[1]
    result = _varlen_paged(q, k_cache, v_cache, cu_seqlens_q, None, cache_seqlens,
                           max_seqlen_q, capacity, softmax_scale, causal, window, softcap,
                           None, return_softmax_lse, page_table, sinks)
    return result[:2] if return_softmax_lse else result


def flash_attn_varlen_func(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                           max_seqlen_q: int, max_seqlen_k: int, seqused_q: Any = None,
                           seqused_k: Any = None, softmax_scale: Optional[float] = None,
                           causal: bool = False, qv: Any = None, q_descale: Any = None,
                           k_descale: Any = None, v_descale: Any = None,
                           window_size: Tuple[int, int] = (-1, -1), attention_chunk: int = 0,
                           softcap: float = 0.0, num_splits: int = 1,
                           pack_gqa: Optional[bool] = None, deterministic: bool = False,
                           sm_margin: int = 0, return_attn_probs: bool = False) -> Any:
    """FA3's ``flash_attn_varlen_func``: packed sequences over packed K/V
    (``cu_seqlens_k``), with grad through kvpipe's varlen backward.

    Returns:
        ``out``, or ``(out, softmax_lse)`` with ``return_attn_probs`` (FA3's
        convention; ``softmax_lse`` fp32 ``(nheads, total_q)``).
    """
    _refuse_unsupported(qv=qv, q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
                        seqused_q=seqused_q)
    _check_fa3_options(attention_chunk, num_splits, pack_gqa, sm_margin)
    if not isinstance(return_attn_probs, bool):
        raise TypeError(f"return_attn_probs must be a bool, got {return_attn_probs!r}")
    if seqused_k is not None:
        raise _unsupported("seqused_k over packed K/V",
                           "their key counts come from cu_seqlens_k; a paged cache's through "
                           "flash_attn_with_kvcache(page_table=)")
    from kvpipe.flash_attn import _varlen

    window = _check_common(0.0, softcap, None, window_size, causal)
    return _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                   softmax_scale, causal, window, softcap, None, deterministic,
                   return_attn_probs, None)
