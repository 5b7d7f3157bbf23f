"""Attention sinks as gpt-oss has them: a learnable logit per query head that
joins every row's softmax as one more key whose value is zero.

    o_i = sum_j exp(s_ij - L'_i) v_j,   L'_i = log(exp(L_i) + exp(sink_h))

where L is the log-sum-exp of the row's scores. A sink is not a score_mod
(it adds a column instead of changing one) nor a mask_mod, so it is the
``sinks=`` argument of ``kvpipe.attention``, ``paged_attention`` and
``attention_varlen``: the forward kernels' epilogue (a split-KV family's
combine kernel) divides O by the row's sum with the sink's term in it and
writes L' (the kernels' ``sinks`` attribute, docs/kernel-abi.md). The
backward is the kernels' with L' in place of L (the sink's zero value adds
nothing to dQ, dK, dV once its share is in L') and, for the sinks,

    d sink_h = -sum over the head's rows of exp(sink_h - L'_i) D_i,
    D_i = sum_d dO_id O'_id

(``sink_gradient``, ``sink_gradient_packed``). A row that sees no key
attends to the sink alone: o' = 0, L' = sink.
"""

from __future__ import annotations

from typing import Any


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


def kernel_sinks(sinks: Any) -> Any:
    """The sinks, checked (``check_sinks``), as the kernels read them (their
    ``sinks`` parameter, one float32 per query head): float32 and contiguous,
    without a copy where they are already."""
    import torch

    return sinks.detach().to(torch.float32).contiguous()


def sink_gradient(o: Any, do: Any, lse: Any, sinks: Any, layout: str) -> Any:
    """d sinks of attention with sinks, from its output ``o``, the output's
    gradient ``do`` and its log-sum-exp ``lse`` (L', with the sinks)."""
    d = (do.float() * o.float()).sum(dim=-1)
    if layout != "bhsd":
        d = d.transpose(1, 2)
    share = (sinks.detach().float()[None, :, None] - lse).exp()
    return (-(share * d)).sum(dim=(0, 2)).to(sinks.dtype)


def sink_gradient_packed(o: Any, do: Any, lse: Any, sinks: Any, total_rows: Any) -> Any:
    """sink_gradient for a packed batch: ``o`` and ``do`` ``(total_q, H_q,
    D_v)``, ``lse`` ``(H_q, total_q)`` (L'), only the rows before
    ``total_rows`` (a device scalar: cu_seqlens_q[-1], read without a
    synchronisation); the rows after the last sequence hold no output."""
    import torch

    d = (do.float() * o.float()).sum(dim=-1).transpose(0, 1)
    share = (sinks.detach().float()[:, None] - lse).exp()
    rows = torch.arange(lse.shape[1], device=lse.device)[None, :] < total_rows
    return (-torch.where(rows, share * d, torch.zeros_like(d))).sum(dim=1).to(sinks.dtype)
