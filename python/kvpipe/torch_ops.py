"""``kvpipe.attention`` as a torch custom operator (``torch.ops.kvpipe.attention``).

Registered with ``torch.library`` together with a fake (meta) implementation,
so that ``torch.compile`` graphs call the kernel without a graph break, and
the launch path (host-side tensor-map encoding and ``cuLaunchKernel`` on the
current stream) can be captured in CUDA graphs.
"""


from typing import Optional, Tuple

import torch

from kvpipe.attention import attention_impl


@torch.library.custom_op("kvpipe::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                 scale: float, layout: str, mask_alignment: str, window_left: int,
                 window_right: int,
                 kv_lengths: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) = attention(q, k, v); see kvpipe.attention."""
    return attention_impl(q, k, v, causal=causal, scale=scale, return_lse=True, layout=layout,
                          mask_alignment=mask_alignment,
                          window_size=(window_left, window_right), kv_lengths=kv_lengths)


@attention_op.register_fake
def _(q, k, v, causal, scale, layout, mask_alignment, window_left, window_right, kv_lengths):
    if layout == "bshd":
        b, s, h = q.shape[0], q.shape[1], q.shape[2]
    else:
        b, h, s = q.shape[0], q.shape[1], q.shape[2]
    # The output has q's shape with v's head dim.
    return (q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],)),
            q.new_empty((b, h, s), dtype=torch.float32))
