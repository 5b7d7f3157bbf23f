"""``python -m kvpipe check --varlen``: the ``varlen`` kernels (sequences
packed without padding, flash-attn's ``flash_attn_varlen_func``) on the GPU.

Each case is a batch of sequences of its own query and key lengths, from 0
and 1 to 20k, tiny ones next to long ones, chunked prefill (fewer queries
than keys) and more queries than keys, under no mask, causal in both
alignments and sliding windows, MHA, GQA and MQA, head dims 64 to 256, bf16
and f16. The reference is per sequence: float32 attention with an explicit
mask (``check.reference_mask``), query rows in chunks. Every case runs twice:

* through ``kvpipe.flash_attn.flash_attn_varlen_func`` (bottom-right masks)
  or ``kvpipe.varlen.attention_varlen`` (top-left), on packed tensors:
  the whole output and log-sum-exp are compared;
* through ``attention_varlen`` with the sequences in reverse order and 1 to
  70 rows after the last one that belong to no sequence (``cu_seqlens_q``
  ends before q does), into output and log-sum-exp buffers filled with NaN:
  every row of a sequence must be written and right, and the rows after
  must still be NaN -- a tile that stored past its sequence's end would
  have written there. (Between sequences, such a store would race with the
  next sequence's own: the whole output is compared in both runs.)

The backward (``backward_cases``): ``flash_attn_varlen_func`` on inputs that
require grad, ``.backward(dout)``, dq, dk and dv against float32 autograd of
the per-sequence reference, on batches with a sequence without keys or
queries, GQA, causal (bottom-right), a window, head dims 64 to 256, rows
after the last sequence (zero gradients); each case both per sequence and
by the packed kernels, and softcap / ALiBi (``MODIFIER_BACKWARD_CASES``)
and attention sinks (``SINK_BACKWARD_CASES``, their gradient too) packed.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from kvpipe.check import (LSE_TOLERANCE, REL_TOLERANCE, _lse_error, _masked_attention,
                          _sink_attention, _sink_softmax, flash_score_modifiers, reference_mask,
                          unique_configs)


@dataclasses.dataclass(frozen=True)
class VarlenCase:
    dtype: str
    head_dim: int
    heads_q: int
    heads_kv: int
    lengths_q: Tuple[int, ...]
    lengths_k: Tuple[int, ...]
    causal: bool = False
    alignment: str = "top_left"
    window: Tuple[int, int] = (-1, -1)
    value_head_dim: Optional[int] = None
    #: Attention sinks (kvpipe.sinks): random logits per query head.
    sinks: bool = False

    @property
    def v_head_dim(self) -> int:
        return self.value_head_dim if self.value_head_dim is not None else self.head_dim

    @property
    def name(self) -> str:
        """dtype, dims, mask, heads, then each sequence's query and key
        lengths (long lists cut)."""
        mask = ("causal" if self.causal else "full") + "".join(
            f",{part}" for part in (
                self.alignment if self.causal or self.window != (-1, -1) else None,
                "window{}:{}".format(*self.window) if self.window != (-1, -1) else None)
            if part)
        value = f"v{self.value_head_dim}" if self.value_head_dim else ""
        sequences = " ".join(f"{which}[{_cut(','.join(map(str, lengths)))}]" for which, lengths in
                             (("q", self.lengths_q), ("k", self.lengths_k)))
        return (f"varlen {self.dtype} d{self.head_dim}{value} {mask}"
                f"{',sinks' if self.sinks else ''} "
                f"H{self.heads_q}/{self.heads_kv} B{len(self.lengths_q)} {sequences}")


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


#: (name, query lengths, key lengths) of the batches.
BATCHES = [
    # Self-attention prefill: one-token and tiny sequences, tile edges.
    ("mixed", (1, 2, 17, 64, 65, 127, 128, 129, 1000, 3, 2049, 1),
     (1, 2, 17, 64, 65, 127, 128, 129, 1000, 3, 2049, 1)),
    # A 20k sequence between one-token ones.
    ("long", (1, 20000, 1, 5, 3000), (1, 20000, 1, 5, 3000)),
    # Chunked prefill: new queries against longer caches.
    ("chunked", (1, 16, 100, 257, 1, 500, 64), (1000, 16, 3000, 300, 1, 4096, 64)),
    # More queries than keys (bottom-right: rows without keys), no keys.
    ("fewer keys", (300, 50, 1, 200, 33), (77, 50, 9, 0, 1)),
    # Empty sequences between others.
    ("empty", (0, 5, 0, 130, 1, 0), (10, 0, 0, 200, 1, 3)),
]

#: (causal, alignment, window) of the masks.
MASKS = [
    (False, "top_left", (-1, -1)),
    (True, "top_left", (-1, -1)),
    (True, "bottom_right", (-1, -1)),
    (True, "bottom_right", (255, -1)),
    (False, "bottom_right", (100, 50)),
    (False, "top_left", (64, 64)),
]

#: (heads_q, heads_kv): MHA, GQA, MQA, taken in turn.
HEADS = [(4, 4), (8, 2), (6, 1)]


def varlen_grid() -> List[VarlenCase]:
    cases = []
    for head_dim in (64, 128):
        for b, (_, lengths_q, lengths_k) in enumerate(BATCHES):
            for m, (causal, alignment, window) in enumerate(MASKS):
                # Heads and dtype vary with the batch and the mask, so that
                # every mask meets MHA, GQA and MQA, and both dtypes.
                hq, hkv = HEADS[(b + m) % len(HEADS)]
                dtype = ("bf16", "f16")[(b + m + head_dim // 64) % 2]
                cases.append(VarlenCase(dtype, head_dim, hq, hkv, lengths_q, lengths_k,
                                        causal, alignment, window))
    # The other head dims' tiles (and the 64-byte swizzle at 96): one mixed
    # batch each, causal bottom-right and a window.
    _, mixed_q, mixed_k = BATCHES[0]
    _, chunked_q, chunked_k = BATCHES[2]
    for head_dim, value_head_dim in ((96, None), (192, 128), (256, None)):
        cases += [
            VarlenCase("bf16", head_dim, 4, 2, mixed_q, mixed_k, True, "bottom_right",
                       value_head_dim=value_head_dim),
            VarlenCase("f16", head_dim, 4, 4, chunked_q, chunked_k, False, "bottom_right",
                       (100, 50), value_head_dim=value_head_dim),
        ]
    # Attention sinks (gpt-oss: D 64, GQA 8; a window on half the layers),
    # rows without keys (fewer keys: the sink alone) and rows after the last
    # sequence (the second run) left as they were.
    _, fewer_q, fewer_k = BATCHES[3]
    cases += [VarlenCase("bf16", 64, 8, 1, mixed_q, mixed_k, True, "bottom_right", sinks=True),
              VarlenCase("bf16", 64, 8, 2, chunked_q, chunked_k, True, "bottom_right",
                         (128, 0), sinks=True),
              VarlenCase("bf16", 128, 4, 2, fewer_q, fewer_k, True, "bottom_right",
                         sinks=True)]
    return cases


#: flash_attn_varlen_func's softcap and ALiBi (each sequence's own diagonal)
#: through the varlen kernel's score_mod: (case, softcap, alibi).
MODIFIER_CASES = [
    (VarlenCase("bf16", 128, 4, 2, (1, 200, 77, 513), (5, 300, 77, 513), True, "bottom_right"),
     30.0, True),
    (VarlenCase("f16", 64, 4, 4, (300, 64, 0), (300, 128, 7)), 0.0, True),
    (VarlenCase("bf16", 128, 8, 2, (190, 33), (190, 100)), 50.0, False),
]


def _flash_varlen_score_mod(case: VarlenCase, softcap: float, alibi: bool) -> Any:
    """What flash_attn_varlen_func traces for a case (``_varlen_score_mod``),
    with shape-only tensors: the kernel ``compile --for-check --varlen``
    must hold (ALiBi's diagonal each sequence's, a (batch,) tensor)."""
    from kvpipe.check_modifiers import _flash_score_mod

    return _flash_score_mod(softcap, alibi, True, slopes_shape=(case.heads_q,),
                            kv_lengths_shape=(len(case.lengths_q),))


def modifier_kernel_configs() -> List[Dict[str, Any]]:
    from kvpipe import modifiers

    configs = []
    for case, softcap, alibi in MODIFIER_CASES:
        traced = modifiers.trace(_flash_varlen_score_mod(case, softcap, alibi))
        causal, alignment, window = _kernel_choice(case)
        configs.append(dict(head_dim=case.head_dim, dtype=case.dtype, causal=causal,
                            value_head_dim=case.value_head_dim, mask_alignment=alignment,
                            sliding_window=window, varlen=True, modifiers=traced.ir,
                            aux_types=traced.aux_types))
    return configs


def run_modifier_case(case: VarlenCase, softcap: float, alibi: bool,
                      seed: int) -> Dict[str, Any]:
    """flash_attn_varlen_func with softcap / alibi_slopes against a float32
    reference per sequence (flash-attn's formulas)."""
    import torch

    from kvpipe.flash_attn import flash_attn_varlen_func

    torch.manual_seed(seed)
    q, k, v, cu_q, cu_k, starts_q, starts_k = _packed_inputs(case, 0, torch)
    slopes = (torch.rand(case.heads_q, device="cuda") * 0.5 if alibi else None)
    scale = 1.0 / math.sqrt(case.head_dim)
    row: Dict[str, Any] = {"case": f"{case.name} softcap {softcap} alibi {alibi}"}
    try:
        out, lse, _ = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(case.lengths_q),
                                             max(case.lengths_k), causal=case.causal,
                                             softcap=softcap, alibi_slopes=slopes,
                                             return_attn_probs=True)
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    group = case.heads_q // case.heads_kv
    rel_worst, lse_worst = 0.0, 0.0
    for s, (n_q, n_k) in enumerate(zip(case.lengths_q, case.lengths_k)):
        if not n_q:
            continue
        rows_q = slice(starts_q[s], starts_q[s] + n_q)
        rows_k = slice(starts_k[s], starts_k[s] + n_k)
        qs = q[rows_q].transpose(0, 1).float()
        ks = k[rows_k].transpose(0, 1).float().repeat_interleave(group, 0)
        vs = v[rows_k].transpose(0, 1).float().repeat_interleave(group, 0)
        scores = _reference_scores(case, qs, ks, scale, softcap, slopes, n_q, n_k, torch)
        ref_lse = torch.logsumexp(scores, dim=-1)
        empty = torch.isneginf(ref_lse)
        ref = torch.matmul(torch.softmax(scores, dim=-1), vs).masked_fill(empty[..., None], 0.0)
        ref_lse = ref_lse.masked_fill(empty, float("inf"))
        rel, lse_err = _compare(out[rows_q], lse[:, rows_q], ref.transpose(0, 1), ref_lse,
                                torch)
        rel_worst, lse_worst = max(rel_worst, rel), max(lse_worst, lse_err)
    row.update(ok=rel_worst < REL_TOLERANCE and lse_worst < LSE_TOLERANCE, rel=rel_worst,
               max_abs=float("nan"), lse_err=lse_worst)
    return row


def backward_cases() -> List[VarlenCase]:
    """Short batches (the float32 reference's autograd is per sequence):
    every sequence has at least as many keys as queries where causal, so
    that no row is without keys (whose reference gradient would be NaN)."""
    return [
        VarlenCase("bf16", 64, 4, 2, (1, 0, 200, 77, 513), (5, 3, 200, 300, 513), True,
                   "bottom_right"),
        VarlenCase("f16", 128, 4, 4, (300, 64, 1), (300, 128, 1)),
        VarlenCase("bf16", 128, 6, 2, (130, 257), (400, 257), True, "bottom_right", (64, 0)),
        VarlenCase("bf16", 96, 2, 2, (33, 190), (100, 190), True, "bottom_right"),
        VarlenCase("bf16", 256, 2, 1, (190, 33), (190, 100), True, "bottom_right"),
        VarlenCase("bf16", 192, 4, 2, (100, 250), (300, 250), value_head_dim=128),
        # Many short sequences next to a long one (the packed kernels' padded
        # row blocks and key blocks end at each sequence's own rows).
        VarlenCase("bf16", 128, 4, 1, (17, 64, 65, 3, 640, 1, 129),
                   (17, 64, 70, 40, 640, 9, 129), True, "bottom_right"),
        VarlenCase("f16", 64, 2, 2, (129, 5, 300), (700, 5, 300)),
    ]


#: Backward cases through flash_attn_varlen_func's softcap / alibi_slopes
#: (score_mods: only the packed kernels run them): (case, softcap, alibi).
MODIFIER_BACKWARD_CASES = [
    (VarlenCase("bf16", 128, 4, 2, (1, 200, 77, 130), (5, 300, 77, 130), True, "bottom_right"),
     30.0, True),
    (VarlenCase("f16", 64, 4, 4, (300, 64), (300, 128)), 0.0, True),
]

#: Backward cases with attention sinks (attention_varlen(sinks=) through
#: autograd: the packed kernels with the lse the forward wrote, and the
#: sinks' gradient): GQA 8 at D 64 as gpt-oss, rows without keys (a sequence
#: without keys: the sink alone), a window.
SINK_BACKWARD_CASES = [
    VarlenCase("bf16", 64, 8, 1, (1, 0, 200, 77, 130), (5, 0, 300, 77, 130), True,
               "bottom_right", sinks=True),
    VarlenCase("bf16", 128, 4, 2, (300, 64), (300, 128), True, "bottom_right", (64, 0),
               sinks=True),
]

#: How the check runs the backward without modifiers: both ways
#: (attention_varlen_backward's ``packed``).
BACKWARD_WAYS = ("sequences", "packed")


def sink_backward_kernel_configs() -> List[Dict[str, Any]]:
    """The kernels of SINK_BACKWARD_CASES: the varlen forward with sinks
    (attention_varlen's plan) and the packed backward family."""
    return packed_backward_kernel_configs(SINK_BACKWARD_CASES)


def packed_backward_kernel_configs(cases: List[VarlenCase]) -> List[Dict[str, Any]]:
    """The kernels of ``run_backward_case(case, way="packed")`` for each of
    ``cases`` (no modifiers): the varlen forward (attention_varlen's plan,
    with sinks where the case has them) and the packed backward family."""
    wanted = forward_kernel_configs(cases)
    for config in list(wanted):
        wanted.append(dict({key: value for key, value in config.items()
                            if key in ("head_dim", "dtype", "causal", "value_head_dim",
                                       "mask_alignment", "sliding_window", "varlen")},
                           backward=True))
    return wanted


def backward_kernel_configs() -> List[Dict[str, Any]]:
    """The ``compile_attention`` arguments of the kernels ``run_backward``
    launches: the varlen forward, the packed varlen backward family, and
    the dense backward families that ``attention_varlen_backward`` runs per
    sequence (top-left for sequences as long as their keys)."""
    from kvpipe import modifiers

    wanted = sink_backward_kernel_configs()
    for case in backward_cases():
        causal, alignment, window = _kernel_choice(case)
        dims = dict(head_dim=case.head_dim, dtype=case.dtype,
                    value_head_dim=case.value_head_dim)
        wanted.append(dict(**dims, causal=causal, mask_alignment=alignment,
                           sliding_window=window, varlen=True))
        wanted.append(dict(**dims, causal=causal, mask_alignment=alignment,
                           sliding_window=window, varlen=True, backward=True))
        for seq_alignment in {alignment, "top_left"}:
            if not (causal or window):
                seq_alignment = "top_left"
            wanted.append(dict(**dims, causal=causal, mask_alignment=seq_alignment,
                               sliding_window=window, backward=True))
    for case, softcap, alibi in MODIFIER_BACKWARD_CASES:
        traced = modifiers.trace(_flash_varlen_score_mod(case, softcap, alibi))
        causal, alignment, window = _kernel_choice(case)
        for backward in (False, True):
            wanted.append(dict(head_dim=case.head_dim, dtype=case.dtype, causal=causal,
                               value_head_dim=case.value_head_dim, mask_alignment=alignment,
                               sliding_window=window, varlen=True, backward=backward,
                               modifiers=traced.ir, aux_types=traced.aux_types))
    return unique_configs(wanted)


def _reference_scores(case: VarlenCase, qs: Any, ks: Any, scale: float, softcap: float,
                      slopes: Any, n_q: int, n_k: int, torch: Any) -> Any:
    """One sequence's float32 scores (H, n_q, n_k) with flash-attn's softcap
    and ALiBi (slopes per head, or None) and the case's mask (-inf)."""
    scores = flash_score_modifiers(torch.matmul(qs, ks.transpose(-1, -2)) * scale, softcap,
                                   slopes, torch)
    visible = reference_mask(n_q, n_k, case.causal, case.alignment, case.window,
                             qs.device, torch)
    if visible is not None:
        scores = scores.masked_fill(~visible, float("-inf"))
    return scores


def run_backward_case(case: VarlenCase, seed: int, way: str = "sequences",
                      softcap: float = 0.0, alibi: bool = False) -> Dict[str, Any]:
    """flash_attn_varlen_func on leaves that require grad, ``.backward`` of
    a random output gradient, with attention_varlen_backward's ``way``
    (``KVPIPE_VARLEN_BACKWARD``; with softcap or ALiBi always packed), and
    3 rows after the last sequence that belong to none: dq, dk and dv
    against float32 autograd of the per-sequence reference (whose gradient
    there is 0). With ``case.sinks``, attention_varlen with random sinks
    that require grad too (their gradient checked as well)."""
    import os

    import torch

    from kvpipe.flash_attn import flash_attn_varlen_func
    from kvpipe.varlen import VARLEN_BACKWARD_ENV, attention_varlen

    torch.manual_seed(seed)
    q, k, v, cu_q, cu_k, starts_q, starts_k = _packed_inputs(case, 3, torch)
    slopes = torch.rand(case.heads_q, device="cuda") * 0.5 if alibi else None
    scale = 1.0 / math.sqrt(case.head_dim)
    mods = f" softcap {softcap} alibi {alibi}" if softcap or alibi else ""
    row: Dict[str, Any] = {"case": f"backward {way}{mods} {case.name}"}
    sinks = torch.randn(case.heads_q, device="cuda") * 2.0 if case.sinks else None
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    if sinks is not None:
        leaves.append(sinks.clone().requires_grad_())
    before = os.environ.get(VARLEN_BACKWARD_ENV)
    os.environ[VARLEN_BACKWARD_ENV] = way
    try:
        if sinks is not None:
            out = attention_varlen(*leaves[:3], cu_q, cu_k, max(case.lengths_q),
                                   max(case.lengths_k), causal=case.causal,
                                   mask_alignment=case.alignment, window_size=case.window,
                                   sinks=leaves[3])
        else:
            out = flash_attn_varlen_func(*leaves, cu_q, cu_k, max(case.lengths_q),
                                         max(case.lengths_k), causal=case.causal,
                                         window_size=case.window, softcap=softcap,
                                         alibi_slopes=slopes)
        dout = torch.randn_like(out)
        out.backward(dout)
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    finally:
        if before is None:
            os.environ.pop(VARLEN_BACKWARD_ENV, None)
        else:
            os.environ[VARLEN_BACKWARD_ENV] = before
    # The reference: float32 leaves, the per-sequence masked attention.
    ref_leaves = [t.detach().float().requires_grad_()
                  for t in (q, k, v) + ((sinks,) if sinks is not None else ())]
    qf, kf, vf = ref_leaves[:3]
    group = case.heads_q // case.heads_kv
    loss = qf.sum() * 0.0
    for s, (n_q, n_k) in enumerate(zip(case.lengths_q, case.lengths_k)):
        # Without keys the output is 0 (with sinks too: the sink's value).
        if not n_q or not n_k:
            continue
        rows_q = slice(starts_q[s], starts_q[s] + n_q)
        rows_k = slice(starts_k[s], starts_k[s] + n_k)
        scores = _reference_scores(case, qf[rows_q].transpose(0, 1),
                                   kf[rows_k].transpose(0, 1).repeat_interleave(group, 0),
                                   scale, softcap, slopes, n_q, n_k, torch)
        values = vf[rows_k].transpose(0, 1).repeat_interleave(group, 0)
        if sinks is not None:
            o = _sink_softmax(scores, ref_leaves[3][:, None, None], values, torch)[0]
        else:
            o = torch.matmul(torch.softmax(scores, dim=-1), values)
        loss = loss + (o.transpose(0, 1) * dout[rows_q].float()).sum()
    loss.backward()
    errors, ok = {}, True
    for name, got, ref in zip(("dq", "dk", "dv", "dsinks"), (t.grad for t in leaves),
                              (t.grad for t in ref_leaves)):
        if got is None:  # autograd gave none: a failure, not a crash
            errors[name], ok = float("inf"), False
            continue
        gf = got.float()
        floor = 1e-3 * math.sqrt(ref.numel())
        rel = float((gf - ref).norm() / max(float(ref.norm()), floor))
        errors[name] = rel
        ok = ok and bool(torch.isfinite(gf).all()) and rel < REL_TOLERANCE
    row.update(ok=ok, rel=max(errors.values()), errors=errors, max_abs=float("nan"),
               lse_err=0.0)
    return row


def _kernel_choice(case: VarlenCase) -> Tuple[bool, str, bool]:
    """(causal, mask_alignment, sliding_window) of the kernel attention_varlen
    picks for the case (kvpipe.attention.launched_mask)."""
    from kvpipe.attention import launched_mask, normalise_window

    left, right = normalise_window(case.window, case.causal)
    window = left >= 0 or right >= 0
    causal, alignment = launched_mask(case.causal, case.alignment, window,
                                      max(case.lengths_q), max(case.lengths_k), True)
    return causal, alignment, window


def forward_kernel_configs(cases: List[VarlenCase]) -> List[Dict[str, Any]]:
    """The ``compile_attention`` arguments of the forward kernels ``run_case``
    launches for ``cases`` (attention_varlen's choice and plan)."""
    from kvpipe.plans import varlen_plan

    wanted: List[Dict[str, Any]] = []
    for case in cases:
        causal, alignment, window = _kernel_choice(case)
        planned = varlen_plan(case.head_dim, case.v_head_dim, causal, window, False, {})
        wanted.append(dict(head_dim=case.head_dim, dtype=case.dtype, causal=causal,
                           value_head_dim=case.value_head_dim, mask_alignment=alignment,
                           sliding_window=window, varlen=True, **planned,
                           **({"sinks": True} if case.sinks else {})))
    return wanted


def kernel_configs(cases: Optional[List[VarlenCase]] = None) -> List[Dict[str, Any]]:
    """The ``compile_attention`` arguments of the kernels ``run`` (default:
    the grid) and ``bench_varlen.run`` launch (``python -m kvpipe compile
    --for-check --varlen``)."""
    from kvpipe import bench_varlen
    from kvpipe.plans import varlen_plan

    wanted = forward_kernel_configs(cases if cases is not None else varlen_grid())
    wanted += bench_varlen.kernel_configs()
    if cases is None:
        wanted += backward_kernel_configs() + modifier_kernel_configs()
    return unique_configs(wanted)


def _packed_inputs(case: VarlenCase, extra: int, torch: Any) -> Tuple[Any, ...]:
    """Random packed q, k, v of the case's dtype with ``extra`` rows after
    the last sequence, the int32 cu_seqlens on the GPU, and their lists:
    ``(q, k, v, cu_q, cu_k, starts_q, starts_k)``."""
    dtype = torch.bfloat16 if case.dtype == "bf16" else torch.float16
    starts_q, starts_k = _offsets(case.lengths_q), _offsets(case.lengths_k)
    total_q, total_k = starts_q[-1] + extra, starts_k[-1] + extra
    q = torch.randn(total_q, case.heads_q, case.head_dim, dtype=dtype, device="cuda")
    k = torch.randn(total_k, case.heads_kv, case.head_dim, dtype=dtype, device="cuda")
    v = torch.randn(total_k, case.heads_kv, case.v_head_dim, dtype=dtype, device="cuda")
    cu_q = torch.tensor(starts_q, dtype=torch.int32, device="cuda")
    cu_k = torch.tensor(starts_k, dtype=torch.int32, device="cuda")
    return q, k, v, cu_q, cu_k, starts_q, starts_k


def _offsets(lengths: Sequence[int]) -> List[int]:
    """cu_seqlens: each sequence's first row, and the end of the last."""
    starts, row = [], 0
    for n in lengths:
        starts.append(row)
        row += n
    return starts + [row]


def _reference(case: VarlenCase, q: Any, k: Any, v: Any, starts_q: Sequence[int],
               starts_k: Sequence[int], scale: float, torch: Any, sinks: Any = None):
    """Per sequence, float32: a list of (out (n_q, H, D_v), lse (H, n_q));
    with ``sinks``, a sink column of those logits in each row's softmax."""
    group = case.heads_q // case.heads_kv
    results = []
    for s, (n_q, n_k) in enumerate(zip(case.lengths_q, case.lengths_k)):
        qs = q[starts_q[s]:starts_q[s] + n_q].transpose(0, 1).float()      # (H, n_q, D)
        ks = k[starts_k[s]:starts_k[s] + n_k].transpose(0, 1).float().repeat_interleave(group, 0)
        vs = v[starts_k[s]:starts_k[s] + n_k].transpose(0, 1).float().repeat_interleave(group, 0)
        visible = reference_mask(n_q, n_k, case.causal, case.alignment, case.window,
                                 q.device, torch)
        # Query rows in chunks: a 20k x 20k float32 score matrix per head
        # would not fit.
        chunk = max(1, (1 << 28) // max(1, case.heads_q * max(n_k, 1)))
        outs, lses = [], []
        for r in range(0, n_q, chunk):
            rows = slice(r, min(n_q, r + chunk))
            rows_visible = None if visible is None else visible[rows]
            o, lse = (_masked_attention(qs[:, rows], ks, vs, scale, rows_visible, torch)
                      if sinks is None else
                      _sink_attention(qs[:, rows], ks, vs, scale, rows_visible, sinks, torch))
            outs.append(o)
            lses.append(lse)
        if n_q:
            results.append((torch.cat(outs, 1).transpose(0, 1), torch.cat(lses, 1)))
        else:
            results.append((None, None))
    return results


def _compare(got: Any, got_lse: Any, ref: Any, ref_lse: Any, torch: Any) -> Tuple[float, float]:
    """(relative error of the output, lse error) of one sequence; a
    reference of zeros (no keys) must be matched exactly."""
    gf = got.float()
    if not bool(torch.isfinite(gf).all()):
        return float("inf"), float("inf")
    norm = float(ref.norm())
    rel = float((gf - ref).norm()) / norm if norm > 0 else float(gf.norm())
    return rel, _lse_error(got_lse, ref_lse, torch)


def run_case(case: VarlenCase, seed: int, tail: bool) -> Dict[str, Any]:
    import torch

    from kvpipe.flash_attn import flash_attn_varlen_func
    from kvpipe.varlen import attention_varlen

    torch.manual_seed(seed)
    dtype = torch.bfloat16 if case.dtype == "bf16" else torch.float16
    if tail:
        # The sequences in reverse order (another one is last), then 1 to 70
        # rows that belong to no sequence: cu_seqlens_q ends before q does.
        case = dataclasses.replace(case, lengths_q=case.lengths_q[::-1],
                                   lengths_k=case.lengths_k[::-1])
        extra = 1 + seed % 70
    else:
        extra = 0
    q, k, v, cu_q, cu_k, starts_q, starts_k = _packed_inputs(case, extra, torch)
    total_q = starts_q[-1] + extra
    scale = 1.0 / math.sqrt(case.head_dim)
    max_q, max_k = max(case.lengths_q), max(case.lengths_k)
    label = case.name + (f" reversed, {extra} rows after" if tail else "")
    row: Dict[str, Any] = {"case": label}
    sinks = torch.randn(case.heads_q, device="cuda") * 2.0 if case.sinks else None
    try:
        if tail:
            out = torch.full((total_q, case.heads_q, case.v_head_dim), float("nan"),
                             dtype=dtype, device="cuda")
            lse = torch.full((case.heads_q, total_q), float("nan"), dtype=torch.float32,
                             device="cuda")
            out, lse = attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=case.causal,
                                        return_lse=True, mask_alignment=case.alignment,
                                        window_size=case.window, out=out, lse_out=lse,
                                        sinks=sinks)
        elif not case.sinks and (case.alignment == "bottom_right"
                                 or not (case.causal or case.window != (-1, -1))):
            out, lse, _ = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k,
                                                 causal=case.causal, window_size=case.window,
                                                 return_attn_probs=True)
        else:
            out, lse = attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=case.causal,
                                        return_lse=True, mask_alignment=case.alignment,
                                        window_size=case.window, sinks=sinks)
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    refs = _reference(case, q, k, v, starts_q, starts_k, scale, torch, sinks)
    rel_worst, lse_worst = 0.0, 0.0
    covered = torch.zeros(total_q, dtype=torch.bool, device="cuda")
    for s, (ref, ref_lse) in enumerate(refs):
        n = case.lengths_q[s]
        if not n:
            continue
        rows = slice(starts_q[s], starts_q[s] + n)
        covered[rows] = True
        rel, lse_err = _compare(out[rows], lse[:, rows], ref, ref_lse, torch)
        rel_worst, lse_worst = max(rel_worst, rel), max(lse_worst, lse_err)
    # Rows of no sequence (after the last) must be untouched: still NaN.
    untouched = bool(torch.isnan(out[~covered]).all()) and bool(
        torch.isnan(lse[:, ~covered]).all())
    ok = untouched and rel_worst < REL_TOLERANCE and lse_worst < LSE_TOLERANCE
    row.update(ok=ok, rel=rel_worst, max_abs=float("nan"), lse_err=lse_worst,
               untouched_after=untouched)
    if not untouched:
        row["case"] += " (rows outside the sequences written)"
    return row


def run(cases: Optional[List[VarlenCase]] = None) -> List[Dict[str, Any]]:
    """The grid (forward, twice per case), then the backward cases."""
    cases = cases if cases is not None else varlen_grid()
    rows = []
    for i, (case, softcap, alibi) in enumerate(MODIFIER_CASES):
        start = time.perf_counter()
        row = run_modifier_case(case, softcap, alibi, seed=2424 + i)
        row["seconds"] = round(time.perf_counter() - start, 3)
        rows.append(row)
        detail = (f"rel {row['rel']:.2e} lse {row['lse_err']:.2e}" if "rel" in row
                  else row.get("error", ""))
        print(f"{'PASS' if row['ok'] else 'FAIL'} {row['case']}: {detail}", flush=True)
    backward = [(case, way, 0.0, False) for case in backward_cases() for way in BACKWARD_WAYS]
    backward += [(case, "packed", softcap, alibi)
                 for case, softcap, alibi in MODIFIER_BACKWARD_CASES]
    backward += [(case, "packed", 0.0, False) for case in SINK_BACKWARD_CASES]
    for i, (case, way, softcap, alibi) in enumerate(backward):
        start = time.perf_counter()
        row = run_backward_case(case, seed=4242 + i, way=way, softcap=softcap, alibi=alibi)
        row["seconds"] = round(time.perf_counter() - start, 3)
        rows.append(row)
        detail = f"rel {row['rel']:.2e}" if "rel" in row else row.get("error", "")
        print(f"{'PASS' if row['ok'] else 'FAIL'} {row['case']}: {detail}", flush=True)
    for i, case in enumerate(cases):
        for tail in (False, True):
            start = time.perf_counter()
            row = run_case(case, seed=777 + i, tail=tail)
            row["seconds"] = round(time.perf_counter() - start, 3)
            rows.append(row)
            detail = (f"rel {row['rel']:.2e} lse {row['lse_err']:.2e}" if "rel" in row
                      else row.get("error", ""))
            print(f"{'PASS' if row['ok'] else 'FAIL'} {row['case']}: {detail}", flush=True)
    return rows
