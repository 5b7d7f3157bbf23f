"""Attention over a batch of sequences packed without padding (flash-attn's
varlen layout: ``(total, H, D)`` tensors and ``cu_seqlens`` offsets):
``attention_varlen`` (the ``varlen`` kernel), its backward
``attention_varlen_backward`` (the packed ``varlen`` backward family, or
the dense one per sequence), their argument checks and the packed kernels'
launch arguments (docs/kernel-abi.md, "Packed sequences").
"""

from __future__ import annotations

import math
import os
from typing import Any, Dict, Optional, Tuple

from kvpipe import _tensors, kernels
from kvpipe import modifiers as _modifiers
from kvpipe._log import log
from kvpipe.attention import (_PADDED_HEAD_DIMS, _attention_padded, _aux_arguments,
                              _check_masks, _check_modifier_lengths, _head_dim_padding,
                              _needs_grad, check_aux_grad, checked_scale, launched_mask)
from kvpipe.backward import _check_backward_dims, _kernel_ready, attention_backward
from kvpipe.plans import varlen_plan
from kvpipe.launch import (_LOG2E, _backward_kernels, _kernel_for, backward_config_args,
                           device_launch, forward_config_args, kernel_arguments, launch_grid)
from kvpipe.sinks import check_sinks, kernel_sinks


def _is_contiguous(t: Any) -> bool:
    """Row-major strides (what the kernel's pointer arithmetic assumes)."""
    expected, step = [], 1
    for extent in reversed(tuple(t.shape)):
        expected.insert(0, step)
        step *= extent
    return all(a == b for a, b, n in zip(tuple(t.stride()), expected, tuple(t.shape)) if n > 1)


class _PackedView:
    """A packed ``(total, H, D)`` tensor seen as ``(1, total, H, D)`` (the
    kernel's maps are 4-D; flash-attn's varlen tensors are 3-D), with
    everything else the tensor's."""

    def __init__(self, t: Any):
        self._t = t
        total, heads, dim = tuple(t.shape)
        s0, s1, s2 = tuple(t.stride())
        self.shape = (1, total, heads, dim)
        self._strides = (max(total, 1) * s0, s0, s1, s2)
        self.dtype, self.device = t.dtype, t.device

    def stride(self) -> Tuple[int, ...]:
        return self._strides

    def data_ptr(self) -> int:
        return self._t.data_ptr()

    def element_size(self) -> int:
        return self._t.element_size()


#: Set to 1 to have attention_varlen check cu_seqlens on the device (one
#: synchronisation per call); flash_attn_varlen_func honours it too.
CHECK_CU_SEQLENS_ENV = "KVPIPE_CHECK_CU_SEQLENS"


def check_cu_seqlens_args(cu_seqlens_q: Any, cu_seqlens_k: Any, q: Any) -> int:
    """Checks the offsets' dtype, shape and device (not their values: that
    needs a device read); returns the batch."""
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _tensors.check_tensor(name, t, rank=1, dtype="i32", device="cuda",
                              last_dim_contiguous=False, stride_alignment_bytes=None)
        if str(t.device) != str(q.device):
            raise ValueError(f"{name} must be on q's device {q.device}, got {t.device}")
    entries = tuple(cu_seqlens_q.shape)[0]
    if entries < 2:
        raise ValueError(f"cu_seqlens_q must have shape (batch + 1,) with batch >= 1, got "
                         f"{tuple(cu_seqlens_q.shape)}")
    if tuple(cu_seqlens_k.shape) != (entries,):
        raise ValueError(f"cu_seqlens_k must have cu_seqlens_q's shape ({entries},) (batch + "
                         f"1 offsets), got {tuple(cu_seqlens_k.shape)}")
    batch = entries - 1
    if batch > 65535:
        raise ValueError(f"the batch (cu_seqlens_q's length - 1 = {batch}) must be at most "
                         "65535 (a grid dimension)")
    return batch


def check_varlen_inputs(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                        max_seqlen_q: Any, max_seqlen_k: Any) -> Tuple[int, ...]:
    """Checks what can be checked without reading device memory: the packed
    tensors' ranks, dtypes, devices, strides and head counts, the cu_seqlens
    tensors' dtype, shape and device, and the maxima's types.

    Returns:
        ``(batch, total_q, total_k, heads_q, heads_kv, head_dim, value_head_dim,
        max_seqlen_q, max_seqlen_k)``, the maxima as ints.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        _tensors.check_tensor(name, t, rank=3, device="cuda", last_dim_contiguous=True,
                              stride_alignment_bytes=16)
    if len({str(t.dtype) for t in (q, k, v)}) != 1:
        raise TypeError(f"q, k and v must have the same dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    kernels.dtype_name(q.dtype)  # raises TypeError for other dtypes
    if len({str(t.device) for t in (q, k, v)}) != 1:
        raise ValueError(f"q, k and v must be on the same device, got {q.device}, "
                         f"{k.device}, {v.device}")
    total_q, hq, d = tuple(q.shape)
    total_k, hkv, dk = tuple(k.shape)
    if d not in kernels.HEAD_DIMS:
        raise ValueError(f"q's head dim must be one of {kernels.HEAD_DIMS} "
                         f"{_PADDED_HEAD_DIMS}, got {d}")
    if dk != d:
        raise ValueError(f"k's head dim must equal q's ({d}), got {dk}")
    if tuple(v.shape)[:2] != (total_k, hkv):
        raise ValueError(f"v must have k's rows and heads ({total_k}, {hkv}), got "
                         f"{tuple(v.shape)}")
    dv = tuple(v.shape)[2]
    if (d, dv) not in kernels.HEAD_DIM_PAIRS:
        supported = ", ".join(str(x) for dq, x in kernels.HEAD_DIM_PAIRS if dq == d)
        raise ValueError(f"v's head dim must be one of ({supported}) {_PADDED_HEAD_DIMS} "
                         f"with q's head dim {d}, "
                         f"got {dv}")
    if hkv < 1 or hq % hkv != 0:
        raise ValueError(f"q's heads ({hq}) must be a multiple of k and v's heads "
                         f"({hkv}) (grouped-query attention)")
    if hq > 65535:
        raise ValueError(f"q's heads ({hq}) must be at most 65535 (a grid dimension)")
    batch = check_cu_seqlens_args(cu_seqlens_q, cu_seqlens_k, q)
    return (batch, total_q, total_k, hq, hkv, d, dv,
            *check_maxima(max_seqlen_q, max_seqlen_k))


def check_maxima(max_seqlen_q: Any, max_seqlen_k: Any) -> Tuple[int, int]:
    """The longest sequences as ints: any integer (numpy's too), not a bool
    or a float, and not negative."""
    maxima = []
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if value.__index__() < 0:
            raise ValueError(f"{name} must be non-negative, got {value}")
        maxima.append(value.__index__())
    return maxima[0], maxima[1]


def check_packed_outputs(q: Any, out: Any, lse_out: Any, total_q: int, heads_q: int,
                         value_head_dim: int) -> None:
    """Checks the optional outputs of a packed batch: ``out`` ``(total_q,
    H_q, D_v)`` and ``lse_out`` fp32 ``(H_q, total_q)``, contiguous, on q's
    device (``out``'s rows are written with 16-byte stores)."""
    for name, t, shape, dtype in (("out", out, (total_q, heads_q, value_head_dim),
                                   str(q.dtype)),
                                  ("lse_out", lse_out, (heads_q, total_q), "torch.float32")):
        if t is None:
            continue
        _tensors.check_tensor(name, t, rank=len(shape), device="cuda",
                              last_dim_contiguous=True,
                              stride_alignment_bytes=16 if name == "out" else None)
        if (tuple(t.shape) != shape or str(t.dtype) != dtype or str(t.device) != str(q.device)
                or not _is_contiguous(t)):
            raise ValueError(f"{name} must be a contiguous {dtype} tensor of shape {shape} on "
                             f"{q.device}, got {t.dtype} {tuple(t.shape)} strides "
                             f"{tuple(t.stride())} on {t.device}")


def validate_cu_seqlens(cu_seqlens_q: Any, cu_seqlens_k: Any, total_q: int, total_k: int,
                     max_seqlen_q: int, max_seqlen_k: int) -> None:
    """Checks the offsets' values: each starts at 0, never decreases, ends at
    its tensor's rows, and no sequence is longer than its maximum. Reads the
    device (one synchronisation): only when asked.

    Raises:
        ValueError: naming the argument and the first bad sequence.
    """
    import torch

    for name, offsets, total, longest, maximum in (
            ("cu_seqlens_q", cu_seqlens_q, total_q, "max_seqlen_q", max_seqlen_q),
            ("cu_seqlens_k", cu_seqlens_k, total_k, "max_seqlen_k", max_seqlen_k)):
        values = offsets.to(torch.int64).tolist()
        if values[0] != 0 or values[-1] != total:
            raise ValueError(f"{name} must start at 0 and end at the packed rows ({total}), "
                             f"got {values[0]} ... {values[-1]}")
        lengths = [b - a for a, b in zip(values, values[1:])]
        for i, n in enumerate(lengths):
            if n < 0:
                raise ValueError(f"{name} must not decrease: sequence {i} has length {n}")
            if n > maximum:
                raise ValueError(f"{longest} ({maximum}) is smaller than sequence {i}'s "
                                 f"length {n} ({name})")


def attention_varlen(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                     max_seqlen_q: int, max_seqlen_k: int, causal: bool = False,
                     scale: Optional[float] = None, return_lse: bool = False,
                     mask_alignment: str = "top_left",
                     window_size: Tuple[int, int] = (-1, -1),
                     check_cu_seqlens: Optional[bool] = None, out: Any = None,
                     lse_out: Any = None, score_mod: Any = None, mask_mod: Any = None,
                     deterministic: Optional[bool] = None, sinks: Any = None,
                     **tuning: int) -> Any:
    """Attention over a batch of sequences packed without padding (the
    ``varlen`` kernel; flash-attn's ``flash_attn_varlen_func`` layout).

    Args:
        q: ``(total_q, H_q, D)``; sequence b is rows
            ``[cu_seqlens_q[b], cu_seqlens_q[b+1])``. bfloat16 or float16 on
            a CUDA device; strides as for :func:`attention_impl`.
        k, v: ``(total_k, H_kv, D)`` (v: ``D_v``), sequence b at rows
            ``[cu_seqlens_k[b], cu_seqlens_k[b+1])``.
        cu_seqlens_q, cu_seqlens_k: int32 ``(batch + 1,)`` on q's device.
        max_seqlen_q, max_seqlen_k: the longest sequences. The grid covers
            ``max_seqlen_q`` query rows per sequence: rows of a longer
            sequence are not computed (not checked unless asked: that needs
            a device read); keys are each sequence's own.
        causal, mask_alignment, window_size, scale: as for
            :func:`attention_impl`, per sequence (its own lengths anchor the
            bottom-right diagonal).
        return_lse: also return the fp32 log-sum-exp ``(H_q, total_q)``.
        check_cu_seqlens: read cu_seqlens back and check them (one
            synchronisation); default: the ``KVPIPE_CHECK_CU_SEQLENS``
            environment variable.
        out: an optional output, ``(total_q, H_q, D_v)`` contiguous, q's
            dtype and device.
        lse_out: an optional fp32 ``(H_q, total_q)`` contiguous log-sum-exp
            output (with ``return_lse``).
        score_mod, mask_mod: FlexAttention-style callbacks, as for
            :func:`attention`, traced into the kernel (docs/modifiers.md):
            ``b`` is the sequence's index, ``q_idx`` and ``kv_idx`` its query's
            and key's positions in the sequence. With inputs requiring grad,
            the packed backward kernels run them (their tensors get no
            gradient; not in deterministic mode).
        deterministic: with inputs requiring grad, the backward's
            (:func:`attention_varlen_backward`'s, per sequence); None follows
            ``torch.are_deterministic_algorithms_enabled()``.
        sinks: gpt-oss's attention sinks, a float tensor ``(H_q,)``
            (kvpipe.sinks), in the kernel's epilogue; with grad enabled they
            get their gradient (and q, k, v theirs through the packed
            backward, which reads the lse with the sinks in it).

    Returns:
        ``out`` ``(total_q, H_q, D_v)`` contiguous, or ``(out, lse)``. Only
        the sequences' rows are written: rows after ``cu_seqlens_q[-1]``
        are left as they were. With q, k or v requiring grad (and grad
        mode on), ``out`` has a grad_fn: the backward is
        :func:`attention_varlen_backward`.

    Raises:
        ValueError / TypeError: a bad argument, named.
    """
    padding = _head_dim_padding(q, k, v)
    if padding is not None:
        def padded_call(qp: Any, kp: Any, vp: Any, padded_scale: float, outp: Any) -> Any:
            return attention_varlen(qp, kp, vp, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                    max_seqlen_k, causal=causal, scale=padded_scale,
                                    return_lse=return_lse, mask_alignment=mask_alignment,
                                    window_size=window_size, check_cu_seqlens=check_cu_seqlens,
                                    out=outp, lse_out=lse_out, score_mod=score_mod, mask_mod=mask_mod,
                                    deterministic=deterministic, sinks=sinks, **tuning)
        return _attention_padded(q, k, v, padding, scale, return_lse, out, padded_call)
    traced = _modifiers.trace(score_mod, mask_mod)
    check_aux_grad(traced)
    if _needs_grad(q, k, v, sinks):
        if out is not None or lse_out is not None:
            raise ValueError("out and lse_out cannot be given when q, k, v or sinks require "
                             "grad (autograd records a new output)")
        if deterministic is not None and not isinstance(deterministic, bool):
            raise TypeError(f"deterministic must be a bool or None, got {deterministic!r}")
        if deterministic and traced is not None:  # refused now rather than in the backward
            raise NotImplementedError(
                "deterministic mode with score_mod/mask_mod in the varlen backward: the packed "
                "kernels add dQ in no fixed order")
        from kvpipe.autograd import varlen_attention_with_grad

        # The arguments are checked by this function, called again there
        # without grad.
        o, lse = varlen_attention_with_grad(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                            max_seqlen_k, causal, scale, mask_alignment,
                                            tuple(window_size), check_cu_seqlens, tuning,
                                            deterministic, score_mod, mask_mod, traced, sinks)
        return (o, lse) if return_lse else o
    batch, total_q, total_k, hq, hkv, d, dv, max_seqlen_q, max_seqlen_k = check_varlen_inputs(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    window_left, window_right, sliding_window = _check_masks(causal, mask_alignment,
                                                             window_size)
    scale = checked_scale(scale, d)
    _check_modifier_lengths(traced, max_seqlen_q, max_seqlen_k)
    if sinks is not None:
        check_sinks(sinks, q, hq)
    check_packed_outputs(q, out, lse_out, total_q, hq, dv)
    if lse_out is not None and not return_lse:
        raise ValueError("lse_out needs return_lse=True")
    if check_cu_seqlens is None:
        check_cu_seqlens = os.environ.get(CHECK_CU_SEQLENS_ENV, "0") not in ("", "0")

    import torch

    if check_cu_seqlens:
        validate_cu_seqlens(cu_seqlens_q, cu_seqlens_k, total_q, total_k, max_seqlen_q,
                            max_seqlen_k)
    # No sequence is longer than the packed tensor: a larger maximum only
    # grows the grid.
    max_seqlen_q, max_seqlen_k = min(max_seqlen_q, total_q), min(max_seqlen_k, total_k)
    if out is None:
        out = torch.empty((total_q, hq, dv), dtype=q.dtype, device=q.device)
    lse = lse_out
    if return_lse and lse is None:
        lse = torch.empty((hq, total_q), dtype=torch.float32, device=q.device)
    sink_values = kernel_sinks(sinks) if sinks is not None else None
    if max_seqlen_q == 0:
        return (out, lse) if return_lse else out
    if total_k == 0:  # no keys in any sequence: zeros and an lse of +inf
        out.zero_()
        if lse is not None:
            lse.fill_(math.inf)
            if sink_values is not None:  # or the sink's, as the kernels give it
                rows = torch.arange(total_q, device=q.device) < cu_seqlens_q[-1]
                sink = sink_values[:, None]
                lse.copy_(torch.where(rows[None, :] & (sink > -math.inf), sink, lse))
        return (out, lse) if return_lse else out
    cu_seqlens_q, cu_seqlens_k = cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous()
    device_index = q.device.index if q.device.index is not None else torch.cuda.current_device()
    causal, mask_alignment = launched_mask(causal, mask_alignment, sliding_window,
                                           max_seqlen_q, max_seqlen_k, True)
    tuning = varlen_plan(d, dv, causal, sliding_window, traced is not None, tuning)
    kernel, abi = _kernel_for(forward_config_args(d, kernels.dtype_name(q.dtype), causal,
                                                  dv if dv != d else None, mask_alignment,
                                                  sliding_window, False,
                                                  sinks=sink_values is not None),
                              device_index, tuple(sorted(tuning.items())),
                              (traced.ir, traced.aux_types) if traced else ("", ()),
                              varlen=True)
    # Held until the launch: the kernel reads them (copies where converted).
    aux_values = _aux_arguments(traced, q) if traced else {}
    args = varlen_kernel_arguments(abi, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
                                   max_seqlen_q, max_seqlen_k, scale, (window_left, window_right),
                                   aux_values,
                                   sink_values.data_ptr() if sink_values is not None else 0)
    grid = launch_grid(abi, max_seqlen_q, hq, batch, 0)
    log("launch %s: grid %s, block (%d, 1, 1), %d B shared, varlen B=%d H=%d/%d "
        "total=%d/%d max=%d/%d", abi["kernel"], grid, abi["threads"],
        abi["dynamic_shared_memory"], batch, hq, hkv, total_q, total_k, max_seqlen_q,
        max_seqlen_k)
    guard, stream = device_launch(device_index)
    with guard:
        kernel.launch(grid, (abi["threads"], 1, 1), args,
                      shared_mem=abi["dynamic_shared_memory"], stream=stream)
    return (out, lse) if return_lse else out


#: Which kernels ``attention_varlen_backward`` runs without modifiers and
#: outside deterministic mode: "packed" (the default: the varlen backward
#: family, three launches for the batch, no synchronisation; 0.97-2.2x the
#: per-sequence way in ``bench --varlen``, results/gpu-results.md) or
#: "sequences" (the dense backward family per sequence: one synchronisation
#: and three launches a sequence). With a score_mod or mask_mod only the
#: packed kernels serve (their ``b`` is the sequence); deterministic mode
#: only the per-sequence ones.
VARLEN_BACKWARD_ENV = "KVPIPE_VARLEN_BACKWARD"


def varlen_padded_rows(total_q: int, batch: int, block_m: int) -> int:
    """Rows per head of the packed backward's fp32 row buffers (lse_log2,
    delta, dq_accum): each sequence's rows padded to whole ``block_m``-row
    Q blocks from ``floor((cu_seqlens_q[b] + b * block_m) / block_m) *
    block_m`` (the kernels' ``paddedRowBase``, docs/backward.md)."""
    return (total_q + batch * block_m + block_m - 1) // block_m * block_m


def attention_varlen_backward(q: Any, k: Any, v: Any, out: Any, lse: Any, dout: Any,
                              cu_seqlens_q: Any, cu_seqlens_k: Any, causal: bool = False,
                              scale: Optional[float] = None, mask_alignment: str = "top_left",
                              window_size: Tuple[int, int] = (-1, -1),
                              deterministic: Optional[bool] = None,
                              max_seqlen_q: Optional[int] = None,
                              max_seqlen_k: Optional[int] = None,
                              score_mod: Any = None, mask_mod: Any = None,
                              _traced: Any = _modifiers.UNTRACED,
                              packed: Optional[bool] = None) -> Tuple[Any, Any, Any]:
    """The gradients ``(dq, dk, dv)`` of :func:`attention_varlen` for the
    output gradient ``dout``, from its ``out`` and ``lse`` (``(H_q,
    total_q)``), in the packed layouts of q, k and v; rows that belong to no
    sequence get zero gradients.

    Two ways (``packed``; None: packed, per sequence in deterministic mode
    or where ``KVPIPE_VARLEN_BACKWARD=sequences``, see
    ``VARLEN_BACKWARD_ENV``; packed wherever modifiers are given):

    * packed: the ``varlen`` backward family (docs/backward.md, "Packed
      sequences"): preprocess, main and postprocess over the whole batch,
      each CTA reading its sequence from ``cu_seqlens``; the grids are sized
      by ``max_seqlen_q`` / ``max_seqlen_k`` (read back from cu_seqlens, one
      synchronisation, when not given). ``score_mod`` / ``mask_mod``: the
      forward's callbacks (``b`` the sequence); their tensors get no
      gradient.
    * per sequence: the dense backward family (:func:`attention_backward`)
      on views of each sequence's rows, after reading ``cu_seqlens`` back
      (one synchronisation, three launches a sequence). Deterministic mode
      takes this way.

    Raises:
        ValueError / TypeError: a bad argument, named.
        NotImplementedError: deterministic mode with modifiers.
    """
    _, total_q, total_k, hq, hkv, d, dv, _, _ = check_varlen_inputs(
        q, k, v, cu_seqlens_q, cu_seqlens_k, 1, 1)
    for name, t, shape, dtype in (("out", out, (total_q, hq, dv), str(q.dtype)),
                                  ("dout", dout, (total_q, hq, dv), str(q.dtype)),
                                  ("lse", lse, (hq, total_q), "torch.float32")):
        _tensors.check_tensor(name, t, rank=len(shape), device="cuda",
                              last_dim_contiguous=False, stride_alignment_bytes=None)
        if tuple(t.shape) != shape or str(t.dtype) != dtype:
            raise ValueError(f"{name} must be a {dtype} tensor of shape {shape}, got "
                             f"{t.dtype} {tuple(t.shape)}")
    if packed is not None and not isinstance(packed, bool):
        raise TypeError(f"packed must be a bool or None, got {packed!r}")
    if deterministic is not None and not isinstance(deterministic, bool):
        raise TypeError(f"deterministic must be a bool or None, got {deterministic!r}")
    traced = _modifiers.trace_unless_traced(_traced, score_mod, mask_mod)
    if deterministic is None:
        import torch

        deterministic = torch.are_deterministic_algorithms_enabled()
    if deterministic and traced is not None:
        raise NotImplementedError(
            "deterministic mode with score_mod/mask_mod in the varlen backward: the packed "
            "kernels add dQ in no fixed order, and the per-sequence ones would give the "
            "regions each sequence as batch 0")
    if packed is None:
        way = os.environ.get(VARLEN_BACKWARD_ENV, "") or "packed"
        if way not in ("sequences", "packed"):
            raise ValueError(f"{VARLEN_BACKWARD_ENV} must be 'sequences' or 'packed', "
                             f"got {way!r}")
        packed = traced is not None or (way == "packed" and not deterministic)
    if packed and deterministic:
        raise ValueError("packed=True is not supported with deterministic=True (the packed "
                         "kernels add dQ in no fixed order)")
    if packed:
        return _varlen_backward_packed(q, k, v, out, lse, dout, cu_seqlens_q, cu_seqlens_k,
                                       causal, scale, mask_alignment, window_size,
                                       max_seqlen_q, max_seqlen_k, traced)
    if traced is not None:
        raise ValueError("packed=False cannot run score_mod/mask_mod: per sequence, their b "
                         "index would not be the sequence's")
    import torch

    starts_q, starts_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    # Read back anyway: overlapping sequences would overwrite each other's
    # gradients, so the offsets are checked here.
    for name, starts, total in (("cu_seqlens_q", starts_q, total_q),
                                ("cu_seqlens_k", starts_k, total_k)):
        if starts[0] != 0 or starts[-1] > total or any(
                a > b for a, b in zip(starts, starts[1:])):
            raise ValueError(f"{name} must start at 0, never decrease and end at most at "
                             f"{total} (the packed rows), got {starts}")
    dq, dk, dv_out = (torch.zeros_like(t, memory_format=torch.contiguous_format)
                      for t in (q, k, v))

    def rows(t: Any, start: int, end: int) -> Any:
        return t[start:end].unsqueeze(0)  # (1, len, H, D): bshd

    for b in range(len(starts_q) - 1):
        q0, q1 = max(starts_q[b], 0), min(starts_q[b + 1], total_q)
        k0, k1 = max(starts_k[b], 0), min(starts_k[b + 1], total_k)
        if q1 <= q0 or k1 <= k0:
            continue  # no queries, or no keys (out is 0): nothing flows back
        # A sequence with as many queries as keys has one diagonal for both
        # alignments: the top-left family then serves (and deterministic
        # mode, which needs it).
        alignment = "top_left" if q1 - q0 == k1 - k0 else mask_alignment
        attention_backward(rows(q, q0, q1), rows(k, k0, k1), rows(v, k0, k1),
                           rows(out, q0, q1), lse[:, q0:q1].unsqueeze(0),
                           rows(dout, q0, q1), causal=causal, scale=scale, layout="bshd",
                           dq=rows(dq, q0, q1), dk=rows(dk, k0, k1), dv=rows(dv_out, k0, k1),
                           deterministic=deterministic, mask_alignment=alignment,
                           window_size=window_size)
    return dq, dk, dv_out


def _varlen_backward_packed(q: Any, k: Any, v: Any, out: Any, lse: Any, dout: Any,
                            cu_seqlens_q: Any, cu_seqlens_k: Any, causal: bool,
                            scale: Optional[float], mask_alignment: str,
                            window_size: Tuple[int, int], max_seqlen_q: Optional[int],
                            max_seqlen_k: Optional[int], traced: Any) -> Tuple[Any, Any, Any]:
    """``attention_varlen_backward`` by the varlen backward family: the
    arguments are checked there."""
    import torch

    total_q, hq, d = tuple(q.shape)
    total_k, hkv, _ = tuple(k.shape)
    v_dim = tuple(v.shape)[-1]
    batch = tuple(cu_seqlens_q.shape)[0] - 1
    _check_backward_dims(d, v_dim, causal)
    scale = checked_scale(scale, d)
    window_left, window_right, sliding_window = _check_masks(causal, mask_alignment,
                                                             window_size)
    if not causal and not sliding_window:
        mask_alignment = "top_left"  # no mask: one kernel for both alignments
    if traced is not None:
        check_aux_grad(traced)
    if max_seqlen_q is None or max_seqlen_k is None:
        lengths = [(t[1:] - t[:-1]).max().item() if batch else 0
                   for t in (cu_seqlens_q, cu_seqlens_k)]
        max_seqlen_q = lengths[0] if max_seqlen_q is None else max_seqlen_q
        max_seqlen_k = lengths[1] if max_seqlen_k is None else max_seqlen_k
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise TypeError(f"{name} must be a non-negative int, got {value!r}")
    # No sequence is longer than the packed tensor: a larger maximum only
    # grows the grids.
    max_seqlen_q, max_seqlen_k = min(max_seqlen_q, total_q), min(max_seqlen_k, total_k)
    _check_modifier_lengths(traced, max_seqlen_q, max_seqlen_k)
    group = hq // hkv
    # Rows of no sequence, and keys no query sees, keep these zeros.
    dq = torch.zeros((total_q, hq, d), dtype=q.dtype, device=q.device)
    if max_seqlen_q == 0 or max_seqlen_k == 0 or batch == 0:
        return dq, torch.zeros((total_k, hkv, d), dtype=q.dtype, device=q.device), \
            torch.zeros((total_k, hkv, v_dim), dtype=q.dtype, device=q.device)
    dk_heads = torch.zeros((total_k, hq, d), dtype=q.dtype, device=q.device)
    dv_heads = torch.zeros((total_k, hq, v_dim), dtype=q.dtype, device=q.device)
    out, dout = _kernel_ready("out", out), _kernel_ready("dout", dout)
    lse = lse.contiguous()
    cu_seqlens_q, cu_seqlens_k = cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous()
    device_index = q.device.index if q.device.index is not None else torch.cuda.current_device()
    family = _backward_kernels(backward_config_args(d, q.dtype, causal, False, mask_alignment,
                                                    sliding_window, v_dim, varlen=True),
                               device_index,
                               *([(traced.ir, traced.aux_types)] if traced else []))
    block_m = family["main"][1]["block_m"]
    padded = varlen_padded_rows(total_q, batch, block_m)
    f32 = dict(dtype=torch.float32, device=q.device)
    buffers = {"delta": torch.empty((hq, padded), **f32),
               "lse_log2": torch.empty((hq, padded), **f32),
               "dq_accum": torch.empty((hq, padded, d), **f32),
               "dq": dq, "dk": dk_heads, "dv": dv_heads}
    aux_values = _aux_arguments(traced, q) if traced is not None else {}
    launches = varlen_backward_launches(
        {role: abi for role, (_, abi) in family.items()}, q, k, v, out, dout, lse,
        cu_seqlens_q, cu_seqlens_k, {name: t.data_ptr() for name, t in buffers.items()},
        max_seqlen_q, max_seqlen_k, scale, (window_left, window_right),
        {name: t.data_ptr() for name, t in aux_values.items()})
    guard, stream = device_launch(device_index)
    with guard:
        for role, grid, values in launches:
            kernel, abi = family[role]
            log("launch %s: grid %s, block (%d, 1, 1), %d B shared, varlen B=%d total=%d/%d",
                abi["kernel"], grid, abi["threads"], abi["dynamic_shared_memory"], batch,
                total_q, total_k)
            kernel.launch(grid, (abi["threads"], 1, 1), kernel_arguments(abi, values),
                          shared_mem=abi["dynamic_shared_memory"], stream=stream)
    if group == 1:
        return dq, dk_heads, dv_heads
    # GQA/MQA: a K/V head's gradient is the sum over its query heads.
    dk, dv_out = (t.view(total_k, hkv, group, t.shape[-1]).sum(dim=2, dtype=torch.float32)
                  .to(q.dtype) for t in (dk_heads, dv_heads))
    return dq, dk, dv_out


def varlen_backward_launches(abis: Dict[str, Dict[str, Any]], q: Any, k: Any, v: Any,
                             out: Any, dout: Any, lse: Any, cu_seqlens_q: Any,
                             cu_seqlens_k: Any, buffers: Dict[str, int], max_seqlen_q: int,
                             max_seqlen_k: int, scale: float, window: Tuple[int, int],
                             aux: Dict[str, int]) -> list:
    """The packed backward family's launches, in order: ``(role, grid,
    values)`` with ``values`` the parameters by name (for
    ``kernel_arguments``). ``abis``: role -> ABI; ``buffers``: the device
    addresses of ``delta``, ``lse_log2``, ``dq_accum`` (``(H_q,
    varlen_padded_rows)`` rows), ``dq`` ``(total_q, H_q, D)`` and the per
    query head ``dk``, ``dv`` ``(total_kv, H_q, D)``, all contiguous; ``aux``:
    the modifiers' tensors' addresses (docs/kernel-abi.md, "Packed
    sequences")."""
    total_q, hq, d = tuple(q.shape)
    total_k, hkv = tuple(k.shape)[:2]
    batch = tuple(cu_seqlens_q.shape)[0] - 1
    block_m = abis["main"]["block_m"]
    offsets = {"cu_seqlens_q": cu_seqlens_q.data_ptr(), "cu_seqlens_k": cu_seqlens_k.data_ptr(),
               "total_q": total_q, "total_kv": total_k}
    rows = {name: buffers[name] for name in ("delta", "lse_log2", "dq_accum")}
    grid_q = ((max_seqlen_q + block_m - 1) // block_m, hq, batch)
    o_strides, do_strides = tuple(out.stride()), tuple(dout.stride())
    # (total, H, D): the row stride is the sequence stride, no batch's.
    preprocess = {"o": out.data_ptr(), "do": dout.data_ptr(), "lse": lse.data_ptr(), **rows,
                  "o_stride_b": 0, "o_stride_h": o_strides[1], "o_stride_s": o_strides[0],
                  "do_stride_b": 0, "do_stride_h": do_strides[1], "do_stride_s": do_strides[0],
                  "seq_q": max_seqlen_q, "heads_q": hq, **offsets}
    main = {"q_map": ("q", _PackedView(q), "bshd"), "k_map": ("k", _PackedView(k), "bshd"),
            "v_map": ("v", _PackedView(v), "bshd"),
            "do_map": ("dout", _PackedView(dout), "bshd"), "dk": buffers["dk"],
            "dv": buffers["dv"], **rows, "seq_q": max_seqlen_q, "seq_kv": max_seqlen_k,
            "heads_per_kv_head": hq // hkv, "scale_log2": scale * _LOG2E,
            "scale": float(scale), "heads_q": hq, "batch": batch, "window_left": window[0],
            "window_right": window[1], **offsets, **aux}
    postprocess = {"dq_accum": buffers["dq_accum"], "dq": buffers["dq"], "dq_stride_b": 0,
                   "dq_stride_h": d, "dq_stride_s": hq * d, "seq_q": max_seqlen_q,
                   "heads_q": hq, "scale": float(scale), **offsets}
    grid_kv = ((max_seqlen_k + abis["main"]["block_n"] - 1) // abis["main"]["block_n"], hq,
               batch)
    return [("preprocess", grid_q, preprocess), ("main", grid_kv, main),
            ("postprocess", grid_q, postprocess)]


def varlen_kernel_arguments(abi: Dict[str, Any], q: Any, k: Any, v: Any, out: Any, lse: Any,
                            cu_seqlens_q: Any, cu_seqlens_k: Any, max_seqlen_q: int,
                            max_seqlen_k: int, scale: float,
                            window: Tuple[int, int],
                            aux: Optional[Dict[str, Any]] = None, sinks: int = 0,
                            block_table: Any = None, kv_lengths: bool = False) -> list:
    """The launch arguments of a ``varlen`` kernel: the packed tensors'
    maps as ``(1, total, H, D)``, the maxima as seq_q / seq_kv, the offsets,
    the output's address and rows, the modifiers' tensors (``aux<i>``;
    docs/kernel-abi.md), the sinks' address (kernels with ``sinks``). With
    ``block_table`` (a ``page_size`` kernel) k and v are paged caches
    ``(num_pages, page_size, H_kv, D)``, mapped as the paged kernels map
    them, and the table and its row length follow; ``kv_lengths``: the
    (paged) kernel takes the key counts ``cu_seqlens_k`` then holds (B,),
    as ``kv_lengths``."""
    hq = tuple(q.shape)[1]
    if block_table is None:
        hkv, kv_maps = tuple(k.shape)[1], {"k_map": ("k", _PackedView(k), "bshd"),
                                           "v_map": ("v", _PackedView(v), "bshd")}
    else:
        hkv, kv_maps = tuple(k.shape)[2], {
            "k_map": ("k_cache", k, "bshd"), "v_map": ("v_cache", v, "bshd"),
            "block_table": block_table.data_ptr(),
            "max_pages_per_seq": tuple(block_table.shape)[1]}
    return kernel_arguments(abi, {
        "q_map": ("q", _PackedView(q), "bshd"), **kv_maps,
        "o_map": ("out", _PackedView(out), "bshd"),
        "lse": lse.data_ptr() if lse is not None else 0,
        "seq_q": max_seqlen_q, "seq_kv": max_seqlen_k, "heads_per_kv_head": hq // hkv,
        "scale_log2": scale * _LOG2E, "heads_q": hq, "batch": tuple(cu_seqlens_q.shape)[0] - 1,
        "window_left": window[0], "window_right": window[1],
        "cu_seqlens_q": cu_seqlens_q.data_ptr(),
        "kv_lengths" if kv_lengths else "cu_seqlens_k": cu_seqlens_k.data_ptr(),
        "o": out.data_ptr(), "total_q": tuple(q.shape)[0], "sinks": sinks,
        **{name: t.data_ptr() for name, t in (aux or {}).items()}})
