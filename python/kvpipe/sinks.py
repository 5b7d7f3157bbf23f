"""Attention sinks as gpt-oss has them: a learnable logit per query head that
joins every row's softmax as one more key whose value is zero.

    o_i = sum_j exp(s_ij - L'_i) v_j,   L'_i = log(exp(L_i) + exp(sink_h))

where L is the log-sum-exp of the row's scores. A sink is not a score_mod
(it adds a column instead of changing one) nor a mask_mod, so it is the
``sinks=`` argument of ``kvpipe.attention``: the kernel's own output and
log-sum-exp are rescaled by exp(L - L') (``apply_sinks``). The backward is
the kernels' with L' in place of L (the sink's zero value adds nothing to
dQ, dK, dV once its share is in L') and, for the sinks,

    d sink_h = -sum over the head's rows of exp(sink_h - L'_i) D_i,
    D_i = sum_d dO_id O'_id

(``sink_gradient``). A row that sees no key (L = +inf by the kernels'
convention) attends to the sink alone: o' = 0, L' = sink.
"""

from __future__ import annotations

from typing import Any, Tuple


def check_sinks(sinks: Any, q: Any, heads_q: int) -> None:
    """Refuses sinks that are not a float tensor of shape ``(H_q,)`` on q's
    device, naming the argument."""
    from kvpipe import _tensors

    _tensors.check_tensor("sinks", sinks, rank=1, dtype=("float32", "bfloat16", "float16"),
                          device="cuda", last_dim_contiguous=False,
                          stride_alignment_bytes=None)
    if tuple(sinks.shape) != (heads_q,):
        raise ValueError(f"sinks must have shape (H_q,) = ({heads_q},), got "
                         f"{tuple(sinks.shape)}")
    if str(sinks.device) != str(q.device):
        raise ValueError(f"sinks must be on q's device ({q.device}), got {sinks.device}")


def _per_row(values: Any, layout: str) -> Any:
    """A (B, H, S) tensor broadcast against an output of ``layout``."""
    return values[..., None] if layout == "bhsd" else values.transpose(1, 2)[..., None]


def _with_sink(lse: Any, sink: Any) -> Tuple[Any, Any]:
    """(exp(L - L'), L') for the kernels' log-sum-exp L and a sink logit
    broadcast against it: sigmoid(L - sink), 1 where L is +inf (a row
    without keys, whose O is 0), and L' = logaddexp(L, sink), the sink where
    L is +inf."""
    import torch

    return (torch.sigmoid(lse - sink),
            torch.where(torch.isposinf(lse), sink, torch.logaddexp(lse, sink)))


def apply_sinks(o: Any, lse: Any, sinks: Any, layout: str) -> Tuple[Any, Any]:
    """(o', L'): the output and log-sum-exp ``(B, H_q, S_q)`` of attention
    with ``sinks`` from those without, ``o`` rescaled in place. Not
    differentiable: AttentionFunction's backward has its own formulas."""
    factor, with_sink = _with_sink(lse, sinks.detach().float()[None, :, None])
    o.mul_(_per_row(factor, layout).to(o.dtype))
    return o, with_sink


def apply_sinks_packed(o: Any, lse: Any, sinks: Any, total_rows: Any) -> None:
    """apply_sinks for a packed batch, in place: ``o`` ``(total_q, H_q,
    D_v)`` and ``lse`` ``(H_q, total_q)``, only the rows before
    ``total_rows`` (a device scalar: cu_seqlens_q[-1], read without a
    synchronisation); the rows after the last sequence stay as they were."""
    import torch

    factor, with_sink = _with_sink(lse, sinks.detach().float()[:, None])
    rows = torch.arange(lse.shape[1], device=lse.device)[None, :] < total_rows
    factor = torch.where(rows, factor, torch.ones_like(lse))
    o.mul_(factor.transpose(0, 1)[..., None].to(o.dtype))
    lse.copy_(torch.where(rows, with_sink, lse))


def sink_gradient(o: Any, do: Any, lse: Any, sinks: Any, layout: str) -> Any:
    """d sinks of attention with sinks, from its output ``o``, the output's
    gradient ``do`` and its log-sum-exp ``lse`` (L', with the sinks)."""
    d = (do.float() * o.float()).sum(dim=-1)
    if layout != "bhsd":
        d = d.transpose(1, 2)
    share = (sinks.detach().float()[None, :, None] - lse).exp()
    return (-(share * d)).sum(dim=(0, 2)).to(sinks.dtype)
