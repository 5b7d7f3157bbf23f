"""``kvpipe.attention``: FlashAttention forward on Hopper with kvpipe kernels.

The forward's public API -- ``attention`` (which ``kvpipe.attention`` is:
the package exports the function under the module's name), the operator's
implementation ``attention_impl`` and the split-KV launch ``attention_split``
-- and its argument checks, which the backward (kvpipe.backward), the packed
sequences (kvpipe.varlen) and the paged cache (kvpipe.paged) share: shapes,
masks and windows, the scale, head dims run zero-padded, modifiers, what
autograd cannot do. What each kernel parameter means is filled in here; the
ABI's mechanics (argument order, tensor maps, grids, loading) are
kvpipe.launch's, the choice of tuning and of decode kernels kvpipe.plans's.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

from kvpipe import _tensors, kernels, schedule
from kvpipe import compiler as _compiler
from kvpipe import modifiers as _modifiers
from kvpipe._log import log
from kvpipe.launch import (_LOG2E, LaunchPlans, _bhsd_view, _compile_backward, _kernel_for,
                           _loaded_combine, _multiprocessors, aligned_16, backward_config_args,
                           combine_grid, device_launch, forward_config_args, kernel_arguments,
                           launch_grid, plan_key)
from kvpipe.plans import _check_decode_args, launch_decode_plan, prefill_plan, spill_fallback
from kvpipe.sinks import check_sinks, kernel_sinks


LAYOUTS = ("bhsd", "bshd")

#: The longest sequence (queries or keys) a kernel with score_mod/mask_mod
#: takes: its regions' index arithmetic is computed in f32, exact below it
#: (lib/Dialect/KVPipe/Transforms/Modifiers.cpp, kMaxModifierSequence).
MAX_MODIFIER_SEQUENCE = 1 << 23


def _check_inputs(q: Any, k: Any, v: Any, layout: str) -> Tuple[Tuple[int, ...], ...]:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        _tensors.check_tensor(name, t, rank=4, device="cuda", last_dim_contiguous=True,
                              stride_alignment_bytes=16)
    # (Equal objects first: the strings are for stand-ins that compare
    # otherwise.)
    if not (q.dtype == k.dtype == v.dtype) and len({str(t.dtype) for t in (q, k, v)}) != 1:
        raise TypeError(f"q, k and v must have the same dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    kernels.dtype_name(q.dtype)  # raises TypeError for other dtypes
    if (not (q.device == k.device == v.device)
            and len({str(t.device) for t in (q, k, v)}) != 1):
        raise ValueError(f"q, k and v must be on the same device, got {q.device}, "
                         f"{k.device}, {v.device}")
    qs, ks, vs = (_bhsd_view(n, t, layout)[0] for n, t in (("q", q), ("k", k), ("v", v)))
    b, hq, sq, d = qs
    if d not in kernels.HEAD_DIMS:
        raise ValueError(f"q's head dim must be one of {kernels.HEAD_DIMS} "
                         f"{_PADDED_HEAD_DIMS}, got {d}")
    if ks[:3] != vs[:3]:
        raise ValueError(f"k and v must have the same batch, heads and sequence length, got "
                         f"{tuple(k.shape)} and {tuple(v.shape)} ({layout})")
    if ks[0] != b:
        raise ValueError(f"k's batch must equal q's ({b}), got {ks[0]}")
    if ks[3] != d:
        raise ValueError(f"k's head dim must equal q's ({d}), got {ks[3]}")
    if (d, vs[3]) not in kernels.HEAD_DIM_PAIRS:
        supported = ", ".join(str(dv) for dq, dv in kernels.HEAD_DIM_PAIRS if dq == d)
        raise ValueError(f"v's head dim must be one of ({supported}) {_PADDED_HEAD_DIMS} "
                         f"with q's head dim {d}, "
                         f"got {vs[3]}")
    if ks[1] < 1 or hq % ks[1] != 0:
        raise ValueError(f"q's heads ({hq}) must be a multiple of k and v's heads "
                         f"({ks[1]}) (grouped-query attention)")
    if sq < 1:
        raise ValueError(f"q's sequence length must be at least 1, got {sq}")
    if ks[2] < 1:
        raise ValueError(f"k and v's sequence length must be at least 1, got {ks[2]}")
    if hq > 65535 or b > 65535:
        raise ValueError(f"q's heads ({hq}) and batch ({b}) must each be at most 65535 "
                         f"(grid dimensions)")
    return qs, ks, vs


def normalise_window(window_size: Any, causal: bool) -> Tuple[int, int]:
    """``window_size`` as ``(left, right)`` with -1 for an unbounded side,
    and right = 0 when causal (flash-attn's rule); ``(-1, -1)`` is no window.

    Raises:
        TypeError: not a pair of ints.
    """
    if (not isinstance(window_size, (tuple, list)) or len(window_size) != 2 or
            any(isinstance(w, bool) or not isinstance(w, int) for w in window_size)):
        raise TypeError(f"window_size must be a pair of ints (left, right), -1 for "
                        f"unbounded, got {window_size!r}")
    left, right = (max(int(w), -1) for w in window_size)
    if causal:
        right = -1 if left < 0 else 0  # the causal mask is the right bound
    return left, right


def launched_mask(causal: bool, mask_alignment: str, sliding_window: bool, seq_q: int,
                  seq_kv: int, per_sequence_lengths: bool) -> Tuple[bool, str]:
    """``(causal, mask_alignment)`` of the kernel a forward launch takes for
    its masks: no mask is the top-left kernel, one bottom-right query sees
    every key (the plain kernel), and bottom-right on equal lengths is
    top-left (the same diagonal; the prefill plan's kernels). Lengths of
    each sequence's own (``kv_lengths``, paged caches, packed varlen
    sequences) move the diagonal per sequence: only the first rule holds."""
    if (causal and not sliding_window and seq_q == 1 and mask_alignment == "bottom_right"
            and not per_sequence_lengths):
        causal = False
    if not causal and not sliding_window:
        mask_alignment = "top_left"
    if mask_alignment == "bottom_right" and seq_q == seq_kv and not per_sequence_lengths:
        mask_alignment = "top_left"
    return causal, mask_alignment


def _check_masks(causal: Any, mask_alignment: Any,
                 window_size: Any) -> Tuple[int, int, bool]:
    """Checks ``causal``, ``mask_alignment`` and ``window_size``; returns the
    window's bounds (``normalise_window``) and whether there is one."""
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {causal!r}")
    if mask_alignment not in kernels.MASK_ALIGNMENTS:
        raise ValueError(f"mask_alignment must be one of {kernels.MASK_ALIGNMENTS}, "
                         f"got {mask_alignment!r}")
    window_left, window_right = normalise_window(window_size, causal)
    return window_left, window_right, window_left >= 0 or window_right >= 0


def attention(q: Any, k: Any, v: Any, causal: bool = False, scale: Optional[float] = None,
              return_lse: bool = False, layout: str = "bhsd", out: Any = None,
              mask_alignment: str = "top_left", window_size: Tuple[int, int] = (-1, -1),
              kv_lengths: Any = None, deterministic: Optional[bool] = None,
              num_splits: int = 1, pack_gqa: Optional[bool] = False,
              score_mod: Any = None, mask_mod: Any = None, sinks: Any = None,
              **tuning: int) -> Any:
    """Scaled dot-product attention, forward, computed by a kvpipe kernel.

    Head dims with a kernel of their own: 64, 96, 128, 192, 256 and 192 with
    v's 128; any other multiple of 8 up to 256, for q/k and for v, runs as
    the next of those with q, k and v zero-padded (80 as 96; the scale stays
    ``1 / sqrt(d)``, the output is cut back to v's columns, and autograd
    goes through the padding).

    ``score_mod`` and ``mask_mod``: FlexAttention's callbacks
    (``score_mod(score, b, h, q_idx, kv_idx)``, ``mask_mod(b, h, q_idx,
    kv_idx)``), traced into the kernel (kvpipe.modifiers, docs/modifiers.md),
    launched directly; with inputs requiring grad the backward kernels are
    generated from the same regions (the score_mod's derivative by the
    compiler). Tensors the callbacks index get no gradient: one that
    requires grad is refused.

    With torch installed and real tensors, this goes through the custom
    operator ``torch.ops.kvpipe.attention`` (so that ``torch.compile`` traces
    it without a graph break); ``out=`` and tuning attributes call the
    kernel directly. See ``attention_impl`` for the arguments.

    When grad mode is on and ``q``, ``k`` or ``v`` requires grad, the output
    has a ``grad_fn``: the forward saves O and the log-sum-exp, and the
    backward launches kvpipe's backward kernels (docs/backward.md). Tuning
    attributes apply to the forward kernel; ``out=`` is refused then (an
    output written in place cannot be differentiated). ``deterministic``:
    the backward's gradients are bit-identical run to run (dQ is summed in a
    fixed order, at a cost: docs/backward.md); None follows
    ``torch.are_deterministic_algorithms_enabled()`` at backward time.

    ``sinks``: gpt-oss's attention sinks, a float tensor ``(H_q,)`` of
    logits, one per query head, that join every row's softmax as a key of
    value zero (kvpipe.sinks); the log-sum-exp returned includes them, and a
    sinks tensor that requires grad gets its gradient.
    """
    if deterministic is not None and not isinstance(deterministic, bool):
        raise TypeError(f"deterministic must be a bool or None, got {deterministic!r}")
    padding = _head_dim_padding(q, k, v)
    if padding is not None:
        def padded_call(qp: Any, kp: Any, vp: Any, padded_scale: float, outp: Any) -> Any:
            return attention(qp, kp, vp, causal=causal, scale=padded_scale,
                             return_lse=return_lse, layout=layout, out=outp,
                             mask_alignment=mask_alignment, window_size=window_size,
                             kv_lengths=kv_lengths, deterministic=deterministic,
                             num_splits=num_splits, pack_gqa=pack_gqa, score_mod=score_mod,
                             mask_mod=mask_mod, sinks=sinks, **tuning)
        return _attention_padded(q, k, v, padding, scale, return_lse, out, padded_call)
    if sinks is not None:
        return _attention_with_sinks(
            q, k, v, sinks, causal=causal, scale=scale, return_lse=return_lse,
            layout=layout, out=out, mask_alignment=mask_alignment, window_size=window_size,
            kv_lengths=kv_lengths, deterministic=deterministic, num_splits=num_splits,
            pack_gqa=pack_gqa, score_mod=score_mod, mask_mod=mask_mod, **tuning)
    _check_decode_args(num_splits, pack_gqa)
    if score_mod is not None or mask_mod is not None:
        traced = _modifiers.trace(score_mod, mask_mod)
        # The score_mod's tensors that require grad get their gradients
        # (learnable biases, slopes: the backward adds the score's gradient
        # times the region's derivative at each value read).
        if _needs_grad(q, k, v, *traced.aux_tensors):
            # Chosen (0, None) decode kernels fall back to the one the
            # backward pairs with; asked for ones are refused.
            if num_splits > 1 or pack_gqa is True:
                raise ValueError("num_splits > 1 and pack_gqa=True (decode kernels) cannot "
                                 "be used when q, k, v or a score_mod's tensor requires grad")
            _check_grad_args(out, kv_lengths, deterministic, causal, mask_alignment,
                             window_size, mask_mod)
            _check_differentiable(traced, q, v, causal, deterministic, mask_alignment,
                                  window_size)
            from kvpipe.autograd import attention_with_grad

            o, lse = attention_with_grad(q, k, v, causal, scale, layout, tuning,
                                         deterministic, mask_alignment, tuple(window_size),
                                         score_mod, mask_mod, traced)
            return (o, lse) if return_lse else o
        return attention_impl(q, k, v, causal=causal, scale=scale, return_lse=return_lse,
                              layout=layout, out=out, mask_alignment=mask_alignment,
                              window_size=window_size, kv_lengths=kv_lengths,
                              num_splits=num_splits, pack_gqa=pack_gqa, score_mod=score_mod,
                              mask_mod=mask_mod, _traced=traced, **tuning)
    if _needs_grad(q, k, v):
        # Chosen (0, None) decode kernels fall back to the one the backward
        # pairs with; asked for ones are refused.
        if num_splits > 1 or pack_gqa is True:
            raise ValueError("num_splits > 1 and pack_gqa=True (decode kernels) cannot be "
                             "used when q, k or v requires grad")
        _check_grad_args(out, kv_lengths, deterministic, causal, mask_alignment,
                         window_size, None)
        op = _custom_op(q)
        if op is not None and not tuning:
            o, lse = _call_op(op, q, k, v, causal, scale, layout, mask_alignment,
                              window_size, None, deterministic)
        else:
            from kvpipe.autograd import attention_with_grad

            o, lse = attention_with_grad(q, k, v, causal, scale, layout, tuning,
                                         deterministic, mask_alignment, tuple(window_size))
        return (o, lse) if return_lse else o
    op = _custom_op(q)
    if op is not None and not _op_takes(causal, layout, mask_alignment, scale):
        op = None  # let attention_impl report the bad argument
    # While torch.compile traces, the operator computes the unsplit,
    # unpacked kernel: same results (its schema has no decode choices yet).
    if op is None or out is not None or tuning:
        return attention_impl(q, k, v, causal=causal, scale=scale, return_lse=return_lse,
                              layout=layout, out=out, mask_alignment=mask_alignment,
                              window_size=window_size, kv_lengths=kv_lengths,
                              num_splits=num_splits, pack_gqa=pack_gqa, **tuning)
    o, lse = _call_op(op, q, k, v, causal, scale, layout, mask_alignment, window_size,
                      kv_lengths)
    return (o, lse) if return_lse else o


def _op_takes(causal: Any, layout: Any, mask_alignment: Any, scale: Any) -> bool:
    """Whether the custom operator's schema takes these arguments (else
    attention_impl reports the bad one)."""
    return (isinstance(causal, bool) and layout in LAYOUTS
            and mask_alignment in kernels.MASK_ALIGNMENTS
            and (scale is None or (not isinstance(scale, bool)
                                   and isinstance(scale, (int, float)))))


def _call_op(op: Any, q: Any, k: Any, v: Any, causal: bool, scale: Optional[float],
             layout: str, mask_alignment: str, window_size: Any, kv_lengths: Any,
             deterministic: Optional[bool] = None, sinks: Any = None) -> Tuple[Any, Any]:
    """(o, lse) from ``torch.ops.kvpipe.attention`` (while torch.compile
    traces) with kvpipe.attention's defaults: the scale 1/sqrt(D), the
    window normalised against the causal mask."""
    if scale is None:
        shape = tuple(q.shape)
        scale = 1.0 / math.sqrt(shape[-1]) if shape and shape[-1] > 0 else 1.0
    left, right = normalise_window(window_size, causal)
    return op(q, k, v, causal, float(scale), layout, mask_alignment, left, right, kv_lengths,
              deterministic, sinks)


def _attention_with_sinks(q: Any, k: Any, v: Any, sinks: Any, return_lse: bool, layout: str,
                          out: Any, score_mod: Any, mask_mod: Any, **kwargs: Any) -> Any:
    """kvpipe.attention with ``sinks`` (kvpipe.sinks) at a head dim with a
    kernel of its own: the kernels' epilogue takes them (their ``sinks``
    parameter); through AttentionFunction where autograd records the
    call."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    check_sinks(sinks, q, tuple(q.shape)[1 if layout == "bhsd" else 2])
    traced = _modifiers.trace(score_mod, mask_mod)
    aux = tuple(traced.aux_tensors) if traced is not None else ()
    op = _custom_op(q)
    if (op is not None and traced is None and out is None and not _tuning_of(kwargs)
            and _op_takes(kwargs["causal"], layout, kwargs["mask_alignment"],
                          kwargs["scale"])):
        # While torch.compile traces: the operator (its backward gives the
        # sinks their gradient), the unsplit, unpacked kernel as without
        # sinks.
        if _needs_grad(q, k, v, sinks):
            _check_grad_args(out, kwargs["kv_lengths"], kwargs["deterministic"],
                             kwargs["causal"], kwargs["mask_alignment"],
                             kwargs["window_size"], None)
        o, lse = _call_op(op, q, k, v, kwargs["causal"], kwargs["scale"], layout,
                          kwargs["mask_alignment"], kwargs["window_size"],
                          kwargs["kv_lengths"], kwargs["deterministic"], sinks)
        return (o, lse) if return_lse else o
    if _needs_grad(q, k, v, sinks, *aux):
        if kwargs["num_splits"] > 1 or kwargs["pack_gqa"] is True:
            raise ValueError("num_splits > 1 and pack_gqa=True (decode kernels) cannot be "
                             "used when q, k, v or sinks requires grad")
        causal, window_size = kwargs["causal"], kwargs["window_size"]
        _check_grad_args(out, kwargs["kv_lengths"], kwargs["deterministic"], causal,
                         kwargs["mask_alignment"], window_size, mask_mod)
        if traced is not None:
            _check_differentiable(traced, q, v, causal, kwargs["deterministic"],
                                  kwargs["mask_alignment"], window_size)
        from kvpipe.autograd import attention_with_grad

        o, lse = attention_with_grad(q, k, v, causal, kwargs["scale"], layout,
                                     _tuning_of(kwargs),
                                     kwargs["deterministic"], kwargs["mask_alignment"],
                                     tuple(window_size), score_mod, mask_mod, traced,
                                     sinks=sinks)
        return (o, lse) if return_lse else o
    kwargs.pop("deterministic")  # a backward option: there is no backward here
    return attention_impl(q, k, v, return_lse=return_lse, layout=layout, out=out,
                          score_mod=score_mod, mask_mod=mask_mod, sinks=sinks, _traced=traced,
                          **kwargs)


def _tuning_of(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The tuning attributes among kvpipe.attention's keyword arguments."""
    return {key: value for key, value in kwargs.items() if key not in (
        "causal", "scale", "mask_alignment", "window_size", "kv_lengths", "deterministic",
        "num_splits", "pack_gqa")}


def _check_grad_args(out: Any, kv_lengths: Any, deterministic: Optional[bool], causal: Any,
                     mask_alignment: Any, window_size: Any, mask_mod: Any) -> None:
    """What the backward cannot do, refused before the forward runs (when q,
    k or v requires grad), naming the argument."""
    _check_masks(causal, mask_alignment, window_size)
    if out is not None:
        raise ValueError("out= cannot be used when q, k or v requires grad")
    if kv_lengths is not None:
        raise ValueError("kv_lengths cannot be used when q, k or v requires grad: kvpipe's "
                         "backward has no per-batch key counts")
    if deterministic:
        # The ordered dQ additions assume the top-left causal mask or none
        # (docs/backward.md).
        if tuple(window_size) != (-1, -1):
            raise ValueError("window_size cannot be combined with deterministic=True when q, "
                             "k or v requires grad")
        if causal and mask_alignment != "top_left":
            raise ValueError("mask_alignment='bottom_right' with causal=True cannot be "
                             "combined with deterministic=True when q, k or v requires grad")
        if mask_mod is not None:
            raise ValueError("mask_mod cannot be combined with deterministic=True when q, k "
                             "or v requires grad")


def _check_modifier_lengths(traced: Any, sq: int, skv: int) -> None:
    """The kernels compute the regions' index arithmetic in f32 where that
    is exact for indices below MAX_MODIFIER_SEQUENCE (docs/modifiers.md)."""
    if traced is None:
        return
    for name, length in (("q", sq), ("k", skv)):
        if length >= MAX_MODIFIER_SEQUENCE:
            raise ValueError(f"with score_mod or mask_mod, {name}'s sequence length must be "
                             f"below 2**23 = {MAX_MODIFIER_SEQUENCE}, got {length}")


def _check_differentiable(traced: Any, q: Any, v: Any, causal: bool,
                          deterministic: Optional[bool],
                          mask_alignment: str, window_size: Tuple[int, int]) -> None:
    """Compiles (or finds in the cache) the backward family of a score_mod
    before the forward runs, so that a region the backward cannot
    differentiate is refused now, naming score_mod, rather than at the first
    ``.backward()``. Without a compiler this is left to the backward."""
    if traced is None or not traced.has_score_mod:
        return
    d, v_dim = tuple(q.shape)[-1], tuple(v.shape)[-1]
    if (d, v_dim) not in kernels.BACKWARD_HEAD_DIM_PAIRS:
        return  # attention_backward names the head dims
    _, _, sliding_window = _check_masks(causal, mask_alignment, window_size)
    if not causal and not sliding_window:
        mask_alignment = "top_left"  # as attention_backward: one family for both
    try:
        _compile_backward(backward_config_args(d, q.dtype, causal, bool(deterministic),
                                               mask_alignment, sliding_window, v_dim),
                          (traced.ir, traced.aux_types))
    except _compiler.CompilerNotFoundError:
        return
    except _compiler.CompilerError as exc:
        if "cannot be differentiated" not in str(exc):
            raise
        line = next(l for l in str(exc).splitlines() if "cannot be differentiated" in l)
        raise ValueError("score_mod cannot be differentiated by kvpipe's backward: "
                         + line.split("error: ", 1)[-1]) from None


def score_mod_reads(traced: Any) -> set:
    """The aux tensors (indices) the traced score_mod reads: the ones with a
    gradient (a mask_mod's reads have none: the mask is piecewise constant)."""
    if traced is None:
        return set()
    return set(traced.score_mod_reads)


def check_aux_grad(traced: Any) -> None:
    """Refuses modifiers that index a tensor requiring grad (with grad mode
    on): kvpipe's backward computes dq, dk and dv only."""
    if traced is None:
        return
    torch = sys.modules.get("torch")
    if torch is not None and not torch.is_grad_enabled():
        return
    for t in traced.aux_tensors:
        if getattr(t, "requires_grad", False):
            raise ValueError(f"score_mod/mask_mod index a tensor of shape {tuple(t.shape)} that "
                             "requires grad: its gradient comes from kvpipe.attention's "
                             "autograd or attention_backward(..., aux_grads=True), not here "
                             "(the varlen kernels do not compute it); pass it detached")


#: What the head-dim errors add: the dims that run zero-padded.
_PADDED_HEAD_DIMS = (f"or another multiple of 8 up to {kernels.MAX_PADDED_HEAD_DIM} "
                     "(run zero-padded as the next)")


_GENERATED_PAIRS = frozenset(kernels.HEAD_DIM_PAIRS)


def _head_dim_padding(q: Any, k: Any, v: Any) -> Optional[Tuple[int, int, int, int]]:
    """``(d, d_v, D, D_v)`` where q/k's head dim ``d`` and v's ``d_v`` (the
    last dimension in every layout) are not a generated pair but run zero
    padded as ``(D, D_v)`` (``kernels.padded_head_dims``: multiples of 8 up
    to 256, e.g. 80 as 96, 32 as 64); None otherwise, also for inputs the
    checks refuse (they name the argument)."""
    shapes = [tuple(getattr(t, "shape", ())) for t in (q, k, v)]
    if any(len(shape) < 3 for shape in shapes):
        return None
    d, dk, dv = (shape[-1] for shape in shapes)
    # No padding, the common case, decided first (symbolic sizes, which
    # torch.compile may pass, are not hashable: the full test below).
    if type(d) is int and type(dv) is int and (d, dv) in _GENERATED_PAIRS:
        return None
    if dk != d or not all(isinstance(n, int) for shape in shapes for n in shape):
        return None
    pair = kernels.padded_head_dims(d, dv)
    if pair is None or pair == (d, dv):
        return None
    return d, dv, pair[0], pair[1]


def _zero_pad_columns(t: Any, columns: int) -> Any:
    """``t`` with zero columns appended to its last dimension up to
    ``columns`` (a torch op: autograd goes through it); ``t`` itself when it
    has them."""
    import torch.nn.functional as F

    width = tuple(t.shape)[-1]
    return F.pad(t, (0, columns - width)) if width != columns else t


def _attention_padded(q: Any, k: Any, v: Any, padding: Tuple[int, int, int, int],
                      scale: Optional[float], return_lse: bool, out: Any,
                      call: Callable[[Any, Any, Any, float, Any], Any]) -> Any:
    """``call(q, k, v, scale, out)`` on q, k, v (and ``out``) zero-padded to
    the kernels' head dims (``_head_dim_padding``), with the scale of the
    unpadded head dim; returns the output's first ``d_v`` columns (copied
    into ``out`` when given: rows the kernel leaves alone keep their
    values). Padding is done by torch ops, so autograd carries the gradients
    back through it (the padded columns' gradients are zero and dropped)."""
    d, dv, padded_d, padded_dv = padding
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    pad = _zero_pad_columns
    outp = None
    if out is not None:
        if _needs_grad(q, k, v):  # the call below would say so of the padded copy
            raise ValueError("out= cannot be used when q, k or v requires grad")
        if tuple(out.shape)[-1:] != (dv,):
            raise ValueError(f"out's head dim must be v's ({dv}), got {tuple(out.shape)}")
        outp = pad(out, padded_dv)
    result = call(pad(q, padded_d), pad(k, padded_d), pad(v, padded_dv), scale, outp)
    o, lse = result if return_lse else (result, None)
    o = o[..., :dv]
    if out is not None:
        out.copy_(o)
        o = out
    return (o, lse) if return_lse else o


def _needs_grad(*tensors: Any) -> bool:
    """Whether autograd must record the call: grad mode on and an input
    requiring grad."""
    if not any(getattr(t, "requires_grad", False) for t in tensors):
        return False
    torch = sys.modules.get("torch")
    return torch is None or torch.is_grad_enabled()


def _custom_op(q: Any) -> Any:
    """torch.ops.kvpipe.attention while torch.compile traces, else None.

    Eager calls launch directly: the operator's dispatch would add host time
    to every call, which short kernels feel.
    """
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(q, torch.Tensor):
        return None
    if not torch.compiler.is_compiling():
        return None
    from kvpipe import torch_ops  # noqa: F401  (registers the operator)

    return torch.ops.kvpipe.attention


def attention_impl(q: Any, k: Any, v: Any, causal: bool = False, scale: Optional[float] = None,
                   return_lse: bool = False, layout: str = "bhsd", out: Any = None,
                   mask_alignment: str = "top_left", window_size: Tuple[int, int] = (-1, -1),
                   kv_lengths: Any = None, num_splits: int = 1,
                   pack_gqa: Optional[bool] = False, score_mod: Any = None,
                   mask_mod: Any = None, sinks: Any = None,
                   _traced: Any = _modifiers.UNTRACED, **tuning: int) -> Any:
    """Launches the kernel (the operator's implementation).

    ``_traced``: ``kvpipe.modifiers.trace(score_mod, mask_mod)`` where the
    caller already traced them (each trace runs the callbacks in Python);
    by default traced here.

    Args:
        q: ``(B, H_q, S_q, D)`` (``layout="bhsd"``, torch SDPA's) or
            ``(B, S_q, H_q, D)`` (``"bshd"``, flash-attn's); bfloat16 or
            float16, on a CUDA device, D in {64, 96, 128, 192, 256}. Any
            strides with a contiguous last dimension and 16-byte aligned
            other strides.
        k, v: the same layout, with ``H_kv`` heads dividing ``H_q`` (GQA/MQA)
            and any ``S_kv``; k's head dim is q's, v's is q's or, with q's
            192, 128 (``kernels.HEAD_DIM_PAIRS``).
        causal: causal mask: query i sees keys <= i + d, where d is 0 with
            ``mask_alignment="top_left"`` (torch SDPA's ``is_causal``) and
            ``S_kv - S_q`` with ``"bottom_right"`` (flash-attn's).
        mask_alignment: ``"top_left"`` or ``"bottom_right"``: where the
            diagonal of the causal mask and of the window is.
        window_size: ``(left, right)``: query i sees keys in
            ``[i + d - left, i + d + right]``; -1 leaves a side unbounded
            (flash-attn's ``window_size``; with ``causal`` the right bound
            is 0). A query that sees no key gets zeros and an lse of +inf.
        kv_lengths: an optional int32 tensor ``(B,)`` on q's device: batch b
            uses only its first ``kv_lengths[b]`` keys (a padded KV cache;
            flash-attn's ``cache_seqlens``); values are clamped to
            ``[0, S_kv]``.
        num_splits: split each tile's K/V range over this many CTAs whose
            fp32 partials a combine kernel merges (decode: few queries, long
            caches; docs/serving.md); 1: no split; 0: chosen
            (``num_splits_heuristic``: enough CTAs to fill the SMs).
        pack_gqa: pack the query heads of each K/V head into one tile, so
            that K/V is read once per group (True), not (False), or choose
            (None: ``should_pack_gqa``, when ``S_q`` times the group is small).
        score_mod, mask_mod: FlexAttention-style callbacks traced into the
            kernel (kvpipe.modifiers): the score_mod receives the scaled
            score; the masks combine with causal and window_size; tensors
            they index must be on q's device.
        sinks: gpt-oss's attention sinks, a float tensor ``(H_q,)`` on q's
            device (kvpipe.sinks): the kernel's epilogue (a split family's
            combine kernel) adds them to each row's softmax; the lse
            includes them.
        scale: the softmax scale (default ``1/sqrt(D)``).
        return_lse: also return the fp32 log-sum-exp ``(B, H_q, S_q)``.
        layout: ``"bhsd"`` or ``"bshd"``.
        out: an optional output tensor (q's shape with v's head dim, q's
            dtype, device and layout).
        **tuning: tuning attributes of the kernel (see kvpipe.compile_attention).

    Returns:
        ``o`` (q's shape with v's head dim, q's dtype and layout), or
        ``(o, lse)``.

    Raises:
        ValueError / TypeError: an argument of the wrong rank, dtype, device,
            head dim, head count, shape or strides; the message names it.
        kvpipe.cuda.CudaError: the launch failed (with the kernel's name and
            configuration).
    """
    traced = _modifiers.trace_unless_traced(_traced, score_mod, mask_mod)
    key = _signature(q, k, v, causal, scale, return_lse, layout, out, mask_alignment,
                     window_size, kv_lengths, num_splits, pack_gqa, traced, sinks, tuning)
    launch = _launches.get(key)
    if launch is None or not aligned_16(q, k, v, out):
        launch = _plan_forward(q, k, v, causal, scale, layout, out, mask_alignment,
                               window_size, kv_lengths, num_splits, pack_gqa, traced, sinks,
                               tuning)
        _launches.remember(key, launch)
    return _launch_forward(launch, q, k, v, out, kv_lengths, traced, sinks, layout,
                           return_lse)


class _ForwardLaunch(NamedTuple):
    """What a forward call's signature decides (``_plan_forward``): the
    checks passed, the plan, the kernel, its grid and its scalar arguments.
    A decode step repeats its signature every call, and deciding it again
    was most of the call's host time; remembered per signature
    (``_launches``), the call keeps only what its pointers need (their
    alignment, the outputs, the tensor maps from their cache, the launch)."""

    out_shape: Tuple[int, ...]
    lse_shape: Tuple[int, int, int]
    device_index: int
    #: The scalar arguments (and the tile table's pointer).
    scalars: Dict[str, Any]
    #: Without a split: the loaded kernel, its ABI and its grid.
    kernel: Any
    abi: Optional[Dict[str, Any]]
    grid: Optional[Tuple[int, int, int]]
    #: With a split: the family's launches.
    split: Optional["SplitLaunch"]
    #: The tile table (device tensor) the scalars point into, kept alive.
    tile_table: Any
    kv_lengths_contiguous: bool


def _plan_forward(q: Any, k: Any, v: Any, causal: Any, scale: Any, layout: Any, out: Any,
                  mask_alignment: Any, window_size: Any, kv_lengths: Any, num_splits: Any,
                  pack_gqa: Any, traced: Any, sinks: Any,
                  tuning: Dict[str, Any]) -> _ForwardLaunch:
    """attention_impl's checks (each raising with the argument's name) and
    plan for a call: everything but what depends on its pointers."""
    (b, hq, sq, d), (_, hkv, skv, _), (_, _, _, dv) = _check_inputs(q, k, v, layout)
    out_shape = tuple(q.shape[:-1]) + (dv,)
    window_left, window_right, sliding_window = _check_masks(causal, mask_alignment,
                                                             window_size)
    _check_decode_args(num_splits, pack_gqa)
    if kv_lengths is not None:
        _tensors.check_tensor("kv_lengths", kv_lengths, rank=1, dtype="i32", device="cuda",
                              stride_alignment_bytes=None)
        if tuple(kv_lengths.shape) != (b,) or str(kv_lengths.device) != str(q.device):
            raise ValueError(f"kv_lengths must have shape ({b},) (one length per batch) on "
                             f"{q.device}, got {tuple(kv_lengths.shape)} on "
                             f"{kv_lengths.device}")
    causal, mask_alignment = launched_mask(causal, mask_alignment, sliding_window, sq, skv,
                                           kv_lengths is not None)
    scale = check_scale_and_out(scale, d, out, out_shape, q)
    _check_modifier_lengths(traced, sq, skv)
    if sinks is not None:
        check_sinks(sinks, q, hq)
    device_index = _device_index(q)
    num_splits, pack, tuning = launch_decode_plan(b, hq, hkv, sq, skv, d, dv, num_splits,
                                                  pack_gqa, device_index, tuning)
    fallback = None
    if num_splits == 1 and not pack:
        chosen = bool(tuning)
        tuning = prefill_plan(d, dv, causal, mask_alignment, sliding_window,
                              kv_lengths is not None, traced is not None, sq, skv, tuning)
        fallback = None if chosen else spill_fallback(tuning)
    config_args = forward_config_args(d, kernels.dtype_name(q.dtype), causal,
                                      dv if dv != d else None, mask_alignment, sliding_window,
                                      kv_lengths is not None, split_kv=num_splits > 1,
                                      pack_gqa=pack, sinks=sinks is not None)
    regions = (traced.ir, traced.aux_types) if traced else ("", ())
    scalars = {"seq_q": sq, "seq_kv": skv, "heads_per_kv_head": hq // hkv,
               "scale_log2": scale * _LOG2E, "heads_q": hq, "batch": b,
               "window_left": window_left, "window_right": window_right}
    kernel = abi = grid = table = split = None
    if num_splits > 1:
        split = plan_split(config_args, device_index, tuning, regions, sq, hq, b, num_splits)
    else:
        kernel, abi = _kernel_for(config_args, device_index, tuple(sorted(tuning.items())),
                                  regions,
                                  spill_fallback=(tuple(sorted(fallback.items()))
                                                  if fallback is not None else None))
        grid = launch_grid(abi, sq, hq, b,
                           _multiprocessors(device_index) if abi.get("persistent") else 0)
        if abi.get("tile_table"):
            table = schedule.device_tile_table(schedule.launch_tile_shape(
                abi, sq, skv, hq, hq // hkv, b, window_left, window_right), grid[0],
                device_index)
    scalars["tile_table"] = table.data_ptr() if table is not None else 0
    return _ForwardLaunch(out_shape, (b, hq, sq), device_index, scalars, kernel, abi, grid,
                          split, table,
                          kv_lengths is None or tuple(kv_lengths.stride()) == (1,))


def _launch_forward(launch: _ForwardLaunch, q: Any, k: Any, v: Any, out: Any, kv_lengths: Any,
                    traced: Any, sinks: Any, layout: str, return_lse: bool) -> Any:
    """A planned forward's launch with this call's tensors."""
    out, lse, _ = forward_outputs(q, out, launch.out_shape, launch.lse_shape, return_lse)
    if kv_lengths is not None and not launch.kv_lengths_contiguous:
        kv_lengths = kv_lengths.contiguous()
    aux_values = _aux_arguments(traced, q) if traced is not None else {}
    sink_values = kernel_sinks(sinks) if sinks is not None else None
    values = {"q_map": ("q", q, layout), "k_map": ("k", k, layout), "v_map": ("v", v, layout),
              **launch.scalars,
              "kv_lengths": kv_lengths.data_ptr() if kv_lengths is not None else 0,
              "sinks": sink_values.data_ptr() if sink_values is not None else 0,
              **{name: t.data_ptr() for name, t in aux_values.items()}}
    return launch_planned(launch, q, out, lse, layout, values, return_lse)


def launch_planned(plan: Any, q: Any, out: Any, lse: Any, layout: str,
                   values: Dict[str, Any], return_lse: bool) -> Any:
    """Launches a planned forward (``_ForwardLaunch``, ``paged._PagedLaunch``:
    its ``split`` family, or its one ``kernel`` with ``abi`` and ``grid``) on
    the call's arguments ``values`` (all but the output's map and lse)."""
    if plan.split is not None:
        return attention_split(plan.split, q, out, lse, layout, values, return_lse)
    abi = plan.abi
    args = kernel_arguments(abi, {**values, "o_map": ("out", out, layout),
                                  "lse": lse.data_ptr() if lse is not None else 0})
    log("launch %s: grid %s, block (%d, 1, 1), %d B shared, B=%d H=%d S=%d/%d",
        abi["kernel"], plan.grid, abi["threads"], abi["dynamic_shared_memory"],
        *plan.lse_shape, plan.scalars["seq_kv"])
    guard, stream = device_launch(plan.device_index)
    with guard:
        plan.kernel.launch(plan.grid, (abi["threads"], 1, 1), args,
                           shared_mem=abi["dynamic_shared_memory"], stream=stream)
    return (out, lse) if return_lse else out


#: Planned forwards by call signature (``_signature``).
_launches = LaunchPlans()


def _signature(q: Any, k: Any, v: Any, causal: Any, scale: Any, return_lse: Any, layout: Any,
               out: Any, mask_alignment: Any, window_size: Any, kv_lengths: Any,
               num_splits: Any, pack_gqa: Any, traced: Any, sinks: Any,
               tuning: Dict[str, Any]) -> Any:
    """The key of a call's plan (``launch.plan_key``): everything
    ``_plan_forward`` reads but the tensors' addresses, and the traced
    regions. None where a value is not hashable or not a tensor (the checks
    name it)."""
    key = plan_key((q, k, v, out, kv_lengths, sinks),
                   (causal, scale, return_lse, layout, mask_alignment, num_splits, pack_gqa),
                   window_size, tuning,
                   (traced.ir, traced.aux_types) if traced is not None else None)
    return _device_keyed(key, q)


def _device_keyed(key: Any, q: Any) -> Any:
    """A plan's key with the current device where q's device has no index
    (it is the current one, whichever that is)."""
    try:
        if key is None or q.device.index is not None:
            return key
    except AttributeError:  # (not a tensor: the checks name it)
        return None
    return key + (_device_index(q),)


class SplitLaunch(NamedTuple):
    """A split-KV family planned for a call signature (docs/kernel-abi.md,
    "Split-KV"): the main kernel, which writes each split's fp32 partial
    output and log-sum-exp to a workspace, and the combine kernel, which
    merges them into the output and lse; their grids; the workspace's rows
    (splits x B x H_q x S_q)."""

    kernel: Any
    abi: Dict[str, Any]
    grid: Tuple[int, int, int]
    combine: Any
    combine_abi: Dict[str, Any]
    combine_grid: Tuple[int, int, int]
    num_splits: int
    rows: int
    device_index: int


def plan_split(config_args: Tuple[Any, ...], device_index: int, tuning: Dict[str, Any],
               modifiers: Tuple[str, Tuple[str, ...]], seq_q: int, heads_q: int, batch: int,
               num_splits: int) -> SplitLaunch:
    """The split family of a configuration (``config_args`` and
    ``modifiers``, the traced regions, as ``_kernel_for`` takes them) for
    launches of these sizes."""
    key = (config_args, device_index, tuple(sorted(tuning.items())))
    kernel, abi = _kernel_for(config_args, device_index, key[2], modifiers)
    # (The combine kernel does not depend on the regions: one per key.)
    combine, combine_abi = _loaded_combine[key]
    return SplitLaunch(kernel, abi, launch_grid(abi, seq_q, heads_q, batch, 0, num_splits),
                       combine, combine_abi, combine_grid(combine_abi, seq_q, heads_q, batch),
                       num_splits, num_splits * batch * heads_q * seq_q, device_index)


def attention_split(split: SplitLaunch, q: Any, out: Any, lse: Any, layout: str,
                    values: Dict[str, Any], return_lse: bool) -> Any:
    """Launches a planned split-KV family. ``values``: the main kernel's
    arguments by name but the workspace's (its maps as ``kernel_arguments``
    takes them, its scalars, the aux tensors' pointers).

    The workspace is taken from torch's caching allocator per call: that is
    cheap, stream-ordered (concurrent calls on other streams get their own)
    and private to a CUDA graph being captured, which a buffer kept here
    would not be.
    """
    import torch

    dv = tuple(out.shape)[-1]
    # One allocation for both partials: O's (num_splits, B, H_q, S_q, D_v),
    # then the lse's (num_splits, B, H_q, S_q) at a multiple of 128 bytes
    # (D_v is a multiple of 32).
    partials = torch.empty(split.rows * (dv + 1), dtype=torch.float32, device=q.device)
    o_partial = partials.data_ptr()
    lse_partial = o_partial + split.rows * dv * 4
    args = kernel_arguments(split.abi, {
        **values, "num_splits": split.num_splits, "o_partial": o_partial,
        "lse_partial": lse_partial})
    out_strides = _bhsd_view("out", out, layout)[1]
    combine_args = kernel_arguments(split.combine_abi, {
        "o_partial": o_partial, "lse_partial": lse_partial,
        "o": out.data_ptr(), "lse": lse.data_ptr() if lse is not None else 0,
        "o_stride_b": out_strides[0], "o_stride_h": out_strides[1],
        "o_stride_s": out_strides[2], "seq_q": values["seq_q"], "heads_q": values["heads_q"],
        "batch": values["batch"], "num_splits": split.num_splits,
        "sinks": values.get("sinks", 0)})
    log("launch %s: grid %s, %d splits, then %s", split.abi["kernel"], split.grid,
        split.num_splits, split.combine_abi["kernel"])
    guard, stream = device_launch(split.device_index)
    with guard:
        split.kernel.launch(split.grid, (split.abi["threads"], 1, 1), args,
                            shared_mem=split.abi["dynamic_shared_memory"], stream=stream)
        split.combine.launch(split.combine_grid, (split.combine_abi["threads"], 1, 1),
                             combine_args, stream=stream)
    return (out, lse) if return_lse else out


#: The kernels take scale * log2(e) as an f32 and divide by it (additive
#: score_mods): it must be a normal f32.
_SCALE_RANGE = (2.0 ** -126 / math.log2(math.e), 2.0 ** 127 / math.log2(math.e))


def checked_scale(scale: Any, head_dim: int) -> float:
    """The softmax scale: ``1/sqrt(head_dim)`` by default, else ``scale``
    checked (a positive number whose ``scale * log2(e)`` is a normal f32)."""
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if (isinstance(scale, bool) or not isinstance(scale, (int, float))
            or not math.isfinite(scale) or scale <= 0):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    if not _SCALE_RANGE[0] <= scale <= _SCALE_RANGE[1]:
        raise ValueError(f"scale must be between {_SCALE_RANGE[0]:.3g} and "
                         f"{_SCALE_RANGE[1]:.3g} (scale * log2(e) a normal f32), got {scale!r}")
    return float(scale)


def check_scale_and_out(scale: Any, head_dim: int, out: Any, out_shape: Tuple[int, ...],
                        q: Any) -> float:
    """The softmax scale (default ``1/sqrt(head_dim)``), checked, and checks
    ``out`` (when given) against the output's shape and q's dtype and device."""
    scale = checked_scale(scale, head_dim)
    if out is not None:
        _tensors.check_tensor("out", out, rank=4, device="cuda", last_dim_contiguous=True,
                              stride_alignment_bytes=16)
        if (tuple(out.shape) != out_shape or str(out.dtype) != str(q.dtype)
                or str(out.device) != str(q.device)):
            raise ValueError(f"out must have shape {out_shape} (q's with v's head dim), dtype "
                             f"{q.dtype} and device {q.device}, got {tuple(out.shape)}, "
                             f"{out.dtype}, {out.device}")
    return scale


def _device_index(q: Any) -> int:
    """q's device index (the current device for a device without one)."""
    index = getattr(q.device, "index", None)
    if index is None:
        import torch

        index = torch.cuda.current_device()
    return index


def forward_outputs(q: Any, out: Any, out_shape: Tuple[int, ...],
                    lse_shape: Tuple[int, int, int], return_lse: bool) -> Tuple[Any, Any, int]:
    """The forward's output (``out``, or a new tensor like q of ``out_shape``),
    its fp32 log-sum-exp ``(B, H_q, S_q)`` or None, and q's device index."""
    import torch

    if out is None:
        out = torch.empty(out_shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(lse_shape, dtype=torch.float32, device=q.device) if return_lse else None
    return out, lse, _device_index(q)


def _aux_arguments(traced: Any, q: Any) -> Dict[str, Any]:
    """The auxiliary tensors of traced modifiers as the kernel reads them
    (``aux<i>``: contiguous float32 or int32 on q's device), by name."""
    import torch

    values = {}
    for i, (t, element) in enumerate(zip(traced.aux_tensors, traced.aux_types)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"a modifier indexes a {type(t).__name__}: only torch tensors "
                            "can be read by the kernel")
        if str(t.device) != str(q.device):
            raise ValueError(f"a tensor a modifier indexes (shape {tuple(t.shape)}) must be on "
                             f"q's device {q.device}, got {t.device}")
        want = torch.float32 if element == "f32" else torch.int32
        values[f"aux{i}"] = t.detach().to(want).contiguous()
    return values
