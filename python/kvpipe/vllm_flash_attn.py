"""A drop-in for vLLM's ``vllm.vllm_flash_attn`` (the FlashAttention backend's
interface), computed by kvpipe kernels.

vLLM's backend calls ``flash_attn_varlen_func`` once per layer and step, with
its own argument order (``max_seqlen_q`` before ``cu_seqlens_q``), the key
counts as ``seqused_k`` with a ``block_table`` over the paged cache, the
output buffer as ``out=``, gpt-oss's sinks as ``s_aux`` and the FA3 options
(``scheduler_metadata``, ``num_splits``, ``fa_version``). An engine switches
by pointing that import here::

    from kvpipe.vllm_flash_attn import (flash_attn_varlen_func,
                                        get_scheduler_metadata)

What the call computes is kvpipe.flash_attn's (flash-attn's semantics:
bottom-right causal, windows, soft-cap, ALiBi, sinks; the paged varlen kernel
reads ``seqused_k`` as given, docs/serving.md "Mixed batches over a paged
cache"). What kvpipe does not compute raises ``NotImplementedError`` naming
the argument: fp8 descaling (``q_descale``, ...), ``q_v`` (MLA's extra query
part), context parallelism (``cp_world_size`` > 1), ``seqused_k`` over packed
(not paged) K/V. The FA3 scheduling options are accepted and left to kvpipe's
own plan: ``scheduler_metadata`` is not read (``get_scheduler_metadata``
returns None), ``num_splits`` is a hint the varlen kernels do not take (their
grid covers the longest sequence's queries).
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from kvpipe.flash_attn import _check_common, _refuse_unsupported, _unsupported
# FA3's schedule, which vLLM asks for the same way: None (kvpipe plans its calls).
from kvpipe.flash_attn_interface import get_scheduler_metadata  # noqa: F401

__all__ = ["flash_attn_varlen_func", "get_scheduler_metadata", "is_fa_version_supported",
           "fa_version_unsupported_reason"]

#: The ``fa_version`` values vLLM selects between on Hopper (2: FA2's
#: interface, 3: FA3's); both are computed by the same kernels here.
FA_VERSIONS = (2, 3)


def is_fa_version_supported(fa_version: int, device: Any = None) -> bool:
    """vLLM's capability query: kvpipe serves FA2's and FA3's interface."""
    return fa_version in FA_VERSIONS


def fa_version_unsupported_reason(fa_version: int, device: Any = None) -> Optional[str]:
    if fa_version in FA_VERSIONS:
        return None
    return f"kvpipe serves fa_version {FA_VERSIONS}, not {fa_version}"


def flash_attn_varlen_func(q: Any, k: Any, v: Any, max_seqlen_q: int, cu_seqlens_q: Any,
                           max_seqlen_k: int, cu_seqlens_k: Any = None, seqused_k: Any = None,
                           q_v: Any = None, dropout_p: float = 0.0,
                           softmax_scale: Optional[float] = None, causal: bool = False,
                           window_size: Optional[List[int]] = None, softcap: float = 0.0,
                           alibi_slopes: Any = None, deterministic: bool = False,
                           return_attn_probs: bool = False, block_table: Any = None,
                           return_softmax_lse: bool = False, out: Any = None,
                           scheduler_metadata: Any = None, q_descale: Any = None,
                           k_descale: Any = None, v_descale: Any = None, num_splits: int = 0,
                           fa_version: int = 2, s_aux: Any = None, cp_world_size: int = 1,
                           cp_rank: int = 0, cp_tot_seqused_k: Any = None) -> Any:
    """vLLM's ``flash_attn_varlen_func``: packed queries over packed K/V
    (``cu_seqlens_k``) or over a paged cache (``block_table`` with
    ``seqused_k``, the backend's call).

    Args:
        q: ``(total_q, nheads, headdim)``; k, v: ``(total_k, nheads_k,
            headdim)``, or with ``block_table`` the paged caches
            ``(num_blocks, block_size, nheads_k, headdim)``.
        max_seqlen_q, cu_seqlens_q, max_seqlen_k: as in flash-attn.
        cu_seqlens_k: int32 ``(batch + 1,)`` key offsets (packed K/V, or a
            paged cache's counts as their differences); or None with
            ``seqused_k``.
        seqused_k: int32 ``(batch,)`` key counts of a paged cache (with
            ``block_table``).
        out: an optional ``(total_q, nheads, headdim_v)`` output, written in
            place and returned.
        s_aux: gpt-oss's attention sinks, fp32 ``(nheads,)``.
        return_softmax_lse: also return the fp32 ``(nheads, total_q)``
            log-sum-exp.
        softmax_scale, causal, window_size (None: unbounded), softcap,
            alibi_slopes, deterministic, dropout_p (must be 0): as in
            kvpipe.flash_attn.flash_attn_varlen_func.
        return_attn_probs: accepted (vLLM's is for testing); nothing more is
            returned for it.
        scheduler_metadata, num_splits, fa_version: FA3's scheduling and the
            version selector: accepted (fa_version 2 or 3), not needed.

    Returns:
        ``out``, or ``(out, softmax_lse)`` with ``return_softmax_lse``.
    """
    _refuse_unsupported(q_v=q_v, q_descale=q_descale, k_descale=k_descale,
                        v_descale=v_descale, cp_tot_seqused_k=cp_tot_seqused_k)
    for name, value, default in (("cp_world_size", cp_world_size, 1), ("cp_rank", cp_rank, 0)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if value != default:
            raise _unsupported(f"{name} != {default}", "context parallelism")
    if fa_version not in FA_VERSIONS or isinstance(fa_version, bool):
        raise ValueError(f"fa_version must be one of {FA_VERSIONS}, got {fa_version!r}")
    if isinstance(num_splits, bool) or not isinstance(num_splits, int) or num_splits < 0:
        raise ValueError(f"num_splits must be a non-negative int (0: choose), got "
                         f"{num_splits!r}")
    for name, value in (("return_attn_probs", return_attn_probs),
                        ("return_softmax_lse", return_softmax_lse)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {value!r}")
    window = _check_common(dropout_p, softcap, alibi_slopes, _vllm_window(window_size), causal)
    if block_table is not None:
        from kvpipe.flash_attn import _varlen_paged

        result = _varlen_paged(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q,
                               max_seqlen_k, softmax_scale, causal, window, softcap,
                               alibi_slopes, return_softmax_lse, block_table, s_aux, out=out)
        return result[:2] if return_softmax_lse else result
    if seqused_k is not None:
        raise _unsupported("seqused_k without block_table",
                           "packed K/V take their key counts from cu_seqlens_k")
    if cu_seqlens_k is None:
        raise ValueError("cu_seqlens_k or seqused_k (with block_table) must be given: the "
                         "sequences' key counts")
    from kvpipe.flash_attn import _varlen

    return _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                   softmax_scale, causal, window, softcap, alibi_slopes, deterministic,
                   return_softmax_lse, s_aux, out=out)


def _vllm_window(window_size: Any) -> Tuple[Any, Any]:
    """vLLM's ``window_size``: None (unbounded) or a pair, as a list or a
    tuple (its custom ops take lists)."""
    if window_size is None:
        return (-1, -1)
    if not isinstance(window_size, (list, tuple)) or len(window_size) != 2:
        raise ValueError(f"window_size must be None or (left, right), got {window_size!r}")
    return (window_size[0], window_size[1])
