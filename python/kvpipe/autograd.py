"""Autograd for ``kvpipe.attention`` in eager mode.

``torch.autograd.Function`` whose forward launches the forward kernel with
the log-sum-exp and saves ``q, k, v, o, lse``, and whose backward launches
the backward family (``kvpipe.backward.attention_backward``) with the same
masks and modifiers (the callbacks are traced again there, and must give
the forward's regions over the same tensors, which the forward saves: the
kernels are cached by the traced regions, docs/modifiers.md). Under ``torch.compile``
the custom operator (``torch_ops.py``) carries the same backward through
``register_autograd`` (without modifiers, which it has no schema for).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import torch

from kvpipe import modifiers as _modifiers
from kvpipe.attention import attention_impl
from kvpipe.backward import attention_backward
from kvpipe.modifiers import check_same_modifiers
from kvpipe.sinks import sink_gradient, sink_gradient_packed
from kvpipe.varlen import attention_varlen, attention_varlen_backward


class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: Any, k: Any, v: Any, causal: bool, scale: Optional[float],
                layout: str, tuning: Tuple[Tuple[str, Any], ...],
                deterministic: Optional[bool], mask_alignment: str,
                window_size: Tuple[int, int], score_mod: Optional[Callable[..., Any]],
                mask_mod: Optional[Callable[..., Any]], traced: Any, sinks: Any,
                *aux_tensors: Any) -> Tuple[Any, Any]:
        traced = _modifiers.trace_unless_traced(traced, score_mod, mask_mod)
        # With sinks, o and lse include them (the kernel's epilogue), as the
        # backward takes them (kvpipe.sinks).
        o, lse = attention_impl(q, k, v, causal=causal, scale=scale, return_lse=True,
                                layout=layout, mask_alignment=mask_alignment,
                                window_size=window_size, score_mod=score_mod,
                                mask_mod=mask_mod, sinks=sinks, _traced=traced,
                                **dict(tuning))
        # The modifiers' tensors are saved too, so that autograd refuses a
        # backward after one of them was changed in place.
        aux = tuple(traced.aux_tensors) if traced is not None else ()
        ctx.has_sinks = sinks is not None
        ctx.save_for_backward(q, k, v, o, lse, *((sinks,) if sinks is not None else ()), *aux)
        ctx.traced_ir = traced.ir if traced is not None else None
        ctx.causal, ctx.scale, ctx.layout = causal, scale, layout
        ctx.deterministic = deterministic
        ctx.mask_alignment, ctx.window_size = mask_alignment, window_size
        ctx.score_mod, ctx.mask_mod = score_mod, mask_mod
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx: Any, do: Any, _dlse: Any) -> Tuple[Any, ...]:
        q, k, v, o, lse, *rest = ctx.saved_tensors
        sinks, aux = (rest[0], rest[1:]) if ctx.has_sinks else (None, rest)
        traced = check_same_modifiers(ctx.traced_ir, tuple(aux), ctx.score_mod, ctx.mask_mod)
        # The modifiers' tensors are the inputs after the 14 fixed ones.
        wants_aux = any(ctx.needs_input_grad[14:])
        grads = attention_backward(q, k, v, o, lse, do, causal=ctx.causal,
                                   scale=ctx.scale, layout=ctx.layout,
                                   deterministic=ctx.deterministic,
                                   mask_alignment=ctx.mask_alignment,
                                   window_size=ctx.window_size,
                                   score_mod=ctx.score_mod, mask_mod=ctx.mask_mod,
                                   _traced=traced, aux_grads=wants_aux)
        aux_grads = grads[3] if wants_aux else (None,) * len(aux)
        dsinks = (sink_gradient(o, do, lse, sinks, ctx.layout)
                  if sinks is not None and ctx.needs_input_grad[13] else None)
        return ((grads[0], grads[1], grads[2]) + (None,) * 10 + (dsinks,)
                + tuple(aux_grads))


def attention_with_grad(q: Any, k: Any, v: Any, causal: bool, scale: Optional[float],
                        layout: str, tuning: Dict[str, Any],
                        deterministic: Optional[bool] = None,
                        mask_alignment: str = "top_left",
                        window_size: Tuple[int, int] = (-1, -1),
                        score_mod: Optional[Callable[..., Any]] = None,
                        mask_mod: Optional[Callable[..., Any]] = None,
                        traced: Any = _modifiers.UNTRACED,
                        sinks: Any = None) -> Tuple[Any, Any]:
    """(o, lse) with a grad_fn for o. ``traced``: the callbacks' trace where
    the caller has it; ``sinks``: kvpipe.sinks' per-head logits (with a
    gradient where they require one)."""
    traced = _modifiers.trace_unless_traced(traced, score_mod, mask_mod)
    aux = tuple(traced.aux_tensors) if traced is not None else ()
    return AttentionFunction.apply(q, k, v, causal, scale, layout,
                                   tuple(sorted(tuning.items())), deterministic,
                                   mask_alignment, tuple(window_size), score_mod, mask_mod,
                                   traced, sinks, *aux)


class VarlenAttentionFunction(torch.autograd.Function):
    """``attention_varlen`` with a backward (``attention_varlen_backward``;
    with modifiers, the packed kernels, as for ``AttentionFunction``)."""

    @staticmethod
    def forward(ctx: Any, q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                max_seqlen_q: int, max_seqlen_k: int, causal: bool, scale: Optional[float],
                mask_alignment: str, window_size: Tuple[int, int],
                check_cu_seqlens: Optional[bool],
                tuning: Tuple[Tuple[str, Any], ...],
                deterministic: Optional[bool], score_mod: Optional[Callable[..., Any]],
                mask_mod: Optional[Callable[..., Any]], traced: Any, sinks: Any,
                *aux_tensors: Any) -> Tuple[Any, Any]:
        traced = _modifiers.trace_unless_traced(traced, score_mod, mask_mod)
        with torch.no_grad():
            o, lse = attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                      max_seqlen_k, causal=causal, scale=scale,
                                      return_lse=True, mask_alignment=mask_alignment,
                                      window_size=window_size,
                                      check_cu_seqlens=check_cu_seqlens,
                                      score_mod=score_mod, mask_mod=mask_mod, sinks=sinks,
                                      **dict(tuning))
        aux = tuple(traced.aux_tensors) if traced is not None else ()
        ctx.has_sinks = sinks is not None
        ctx.save_for_backward(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k,
                              *((sinks,) if sinks is not None else ()), *aux)
        ctx.traced_ir = traced.ir if traced is not None else None
        ctx.causal, ctx.scale = causal, scale
        ctx.mask_alignment, ctx.window_size = mask_alignment, window_size
        ctx.deterministic = deterministic
        ctx.max_seqlen = (max_seqlen_q, max_seqlen_k)
        ctx.score_mod, ctx.mask_mod = score_mod, mask_mod
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx: Any, dout: Any, _dlse: Any) -> Tuple[Any, ...]:
        q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, *rest = ctx.saved_tensors
        sinks, aux = (rest[0], rest[1:]) if ctx.has_sinks else (None, rest)
        traced = check_same_modifiers(ctx.traced_ir, tuple(aux), ctx.score_mod, ctx.mask_mod)
        dq, dk, dv = attention_varlen_backward(q, k, v, o, lse, dout.contiguous(),
                                               cu_seqlens_q, cu_seqlens_k, causal=ctx.causal,
                                               scale=ctx.scale,
                                               mask_alignment=ctx.mask_alignment,
                                               window_size=ctx.window_size,
                                               deterministic=ctx.deterministic,
                                               max_seqlen_q=ctx.max_seqlen[0],
                                               max_seqlen_k=ctx.max_seqlen[1],
                                               score_mod=ctx.score_mod, mask_mod=ctx.mask_mod,
                                               _traced=traced)
        dsinks = (sink_gradient_packed(o, dout, lse, sinks, cu_seqlens_q[-1])
                  if sinks is not None and ctx.needs_input_grad[17] else None)
        # The modifiers' tensors (after the 18 fixed inputs) get no gradient.
        return (dq, dk, dv) + (None,) * 14 + (dsinks,) + (None,) * len(aux)


def varlen_attention_with_grad(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                               max_seqlen_q: int, max_seqlen_k: int, causal: bool,
                               scale: Optional[float], mask_alignment: str,
                               window_size: Tuple[int, int], check_cu_seqlens: Optional[bool],
                               tuning: Dict[str, Any],
                               deterministic: Optional[bool] = None,
                               score_mod: Optional[Callable[..., Any]] = None,
                               mask_mod: Optional[Callable[..., Any]] = None,
                               traced: Any = _modifiers.UNTRACED,
                               sinks: Any = None) -> Tuple[Any, Any]:
    """(out, lse) of ``attention_varlen`` with a grad_fn for out (and for
    ``sinks``, kvpipe.sinks' per-head logits, where they require one)."""
    traced = _modifiers.trace_unless_traced(traced, score_mod, mask_mod)
    aux = tuple(traced.aux_tensors) if traced is not None else ()
    return VarlenAttentionFunction.apply(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                         max_seqlen_k, causal, scale, mask_alignment,
                                         tuple(window_size), check_cu_seqlens,
                                         tuple(sorted(tuning.items())), deterministic,
                                         score_mod, mask_mod, traced, sinks, *aux)
