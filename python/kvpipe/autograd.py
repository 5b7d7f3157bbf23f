"""Autograd for ``kvpipe.attention`` in eager mode.

``torch.autograd.Function`` whose forward launches the forward kernel with
the log-sum-exp and saves ``q, k, v, o, lse``, and whose backward launches
the backward family (``kvpipe.attention.attention_backward``). Under
``torch.compile`` the custom operator (``torch_ops.py``) carries the same
backward through ``register_autograd``.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch

from kvpipe.attention import attention_backward, attention_impl


class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: Any, k: Any, v: Any, causal: bool, scale: Optional[float],
                layout: str, tuning: Tuple[Tuple[str, Any], ...],
                deterministic: Optional[bool]) -> Tuple[Any, Any]:
        o, lse = attention_impl(q, k, v, causal=causal, scale=scale, return_lse=True,
                                layout=layout, **dict(tuning))
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.scale, ctx.layout = causal, scale, layout
        ctx.deterministic = deterministic
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx: Any, do: Any, _dlse: Any) -> Tuple[Any, ...]:
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = attention_backward(q, k, v, o, lse, do, causal=ctx.causal,
                                        scale=ctx.scale, layout=ctx.layout,
                                        deterministic=ctx.deterministic)
        return dq, dk, dv, None, None, None, None, None


def attention_with_grad(q: Any, k: Any, v: Any, causal: bool, scale: Optional[float],
                        layout: str, tuning: Dict[str, Any],
                        deterministic: Optional[bool] = None) -> Tuple[Any, Any]:
    """(o, lse) with a grad_fn for o."""
    return AttentionFunction.apply(q, k, v, causal, scale, layout,
                                   tuple(sorted(tuning.items())), deterministic)
