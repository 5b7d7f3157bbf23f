"""``kvpipe.attention`` as torch custom operators (``torch.ops.kvpipe.*``).

``kvpipe::attention`` (forward, returns ``(o, lse)``) and
``kvpipe::attention_backward`` (returns ``(dq, dk, dv)``) are registered with
``torch.library`` together with fake (meta) implementations, and the forward
gets the backward through ``register_autograd``, so that ``torch.compile``
graphs call the kernels -- forward and backward -- without a graph break, and
the launch path (host-side tensor-map encoding and ``cuLaunchKernel`` on the
current stream) can be captured in CUDA graphs.
"""


from typing import Optional, Tuple

import torch

from kvpipe.attention import attention_impl
from kvpipe.backward import attention_backward
from kvpipe.sinks import sink_gradient


@torch.library.custom_op("kvpipe::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                 scale: float, layout: str, mask_alignment: str, window_left: int,
                 window_right: int, kv_lengths: Optional[torch.Tensor],
                 deterministic: Optional[bool] = None,
                 sinks: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) = attention(q, k, v); see kvpipe.attention (``sinks``:
    kvpipe.sinks', in the kernel's epilogue; the lse includes them)."""
    return attention_impl(q, k, v, causal=causal, scale=scale, return_lse=True, layout=layout,
                          mask_alignment=mask_alignment,
                          window_size=(window_left, window_right), kv_lengths=kv_lengths,
                          sinks=sinks)


@attention_op.register_fake
def _(q, k, v, causal, scale, layout, mask_alignment, window_left, window_right, kv_lengths,
      deterministic=None, sinks=None):
    if layout == "bshd":
        b, s, h = q.shape[0], q.shape[1], q.shape[2]
    else:
        b, h, s = q.shape[0], q.shape[1], q.shape[2]
    # The output has q's shape with v's head dim.
    return (q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],)),
            q.new_empty((b, h, s), dtype=torch.float32))


@torch.library.custom_op("kvpipe::attention_backward", mutates_args=())
def attention_backward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                          lse: torch.Tensor, do: torch.Tensor, causal: bool, scale: float,
                          layout: str, deterministic: Optional[bool] = None,
                          mask_alignment: str = "top_left", window_left: int = -1,
                          window_right: int = -1
                          ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) of attention(q, k, v) for the output gradient do."""
    return attention_backward(q, k, v, o, lse, do, causal=causal, scale=scale, layout=layout,
                              deterministic=deterministic, mask_alignment=mask_alignment,
                              window_size=(window_left, window_right))


@attention_backward_op.register_fake
def _(q, k, v, o, lse, do, causal, scale, layout, deterministic=None, mask_alignment="top_left",
      window_left=-1, window_right=-1):
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            torch.empty_like(k, memory_format=torch.contiguous_format),
            torch.empty_like(v, memory_format=torch.contiguous_format))


def _setup_context(ctx, inputs, output):
    (q, k, v, causal, scale, layout, mask_alignment, window_left, window_right, kv_lengths,
     deterministic, sinks) = inputs
    o, lse = output
    ctx.has_sinks = sinks is not None
    ctx.save_for_backward(q, k, v, o, lse, *((sinks,) if sinks is not None else ()))
    ctx.causal, ctx.scale, ctx.layout = causal, scale, layout
    ctx.deterministic = deterministic
    ctx.mask_alignment, ctx.window = mask_alignment, (window_left, window_right)
    # kvpipe.attention refuses, before tracing gets here, what the backward
    # does not support (per-batch lengths).
    ctx.masked = kv_lengths is not None


def _backward(ctx, do, _dlse):
    if ctx.masked:
        raise NotImplementedError("kvpipe's backward has no per-batch key counts (kv_lengths)")
    q, k, v, o, lse, *sinks = ctx.saved_tensors
    # With sinks, o and lse include them: the kernels' backward as without,
    # and the sinks' gradient from o, do and lse (kvpipe.sinks).
    dq, dk, dv = torch.ops.kvpipe.attention_backward(q, k, v, o, lse, do.contiguous(),
                                                     ctx.causal, ctx.scale, ctx.layout,
                                                     ctx.deterministic, ctx.mask_alignment,
                                                     ctx.window[0], ctx.window[1])
    dsinks = (sink_gradient(o, do, lse, sinks[0], ctx.layout)
              if ctx.has_sinks and ctx.needs_input_grad[11] else None)
    return dq, dk, dv, None, None, None, None, None, None, None, None, dsinks


attention_op.register_autograd(_backward, setup_context=_setup_context)
