"""``python -m kvpipe check --mods``: the score/mask modifiers on the GPU.

Every modifier of kvpipe.modifiers, alone and combined with the built-in
causal mask and sliding window, at head dims 64 and 128, bf16, odd lengths,
GQA: ``kvpipe.attention(..., score_mod=, mask_mod=)`` on fresh random inputs
with a poisoned (NaN) output, against a float32 torch reference that computes
the same modifier explicitly on the whole score matrix (not through the
tracer). Also flash_attn_func's ``softcap`` and ``alibi_slopes`` against
flash-attn's reference formulas.

``python -m kvpipe check --mods --backward``: dQ, dK and dV through the same
modifiers (``mods_backward_grid``: every library modifier, the built-in
bottom-right causal mask and sliding windows, odd lengths, S_q != S_kv,
GQA), from ``kvpipe.attention_backward`` into poisoned gradients and through
autograd, against torch float32 autograd of the same explicit reference.

``mods_kernel_configs()`` lists the kernels the check launches, traced with
shape-only stand-ins of the auxiliary tensors (the traced IR depends on
their dtype and trailing dims, not their values), so that
``python -m kvpipe compile --for-check --mods`` fills the kernel cache on a
machine without torch.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from kvpipe import modifiers
from kvpipe.check import (LSE_TOLERANCE, REL_TOLERANCE, _lse_error, _sink_softmax,
                          compare_grads, flash_score_modifiers, reference_mask, unique_configs)

#: The modifiers the grid checks (names of ModCase.mod): score modifiers,
#: mask modifiers, and combinations.
MODS = ("softcap", "alibi", "relbias", "calculus", "causal_mod", "window_mod", "prefix_lm",
        "document", "softcap+window_mod", "alibi+window_mod", "relbias+document")

SOFTCAP = 20.0
WINDOW = (96, 0)  # the window_mod's (left, right)
PREFIX = 70
MAX_DISTANCE = 64


@dataclasses.dataclass(frozen=True)
class ModCase:
    mod: str
    head_dim: int
    batch: int
    heads_q: int
    heads_kv: int
    seq_q: int
    seq_kv: int
    causal: bool = False
    window: Tuple[int, int] = (-1, -1)
    dtype: str = "bf16"
    #: Where the built-in causal mask and window are anchored.
    alignment: str = "top_left"
    #: V's head dim where it differs from Q's and K's (192 / 128).
    value_head_dim: Optional[int] = None

    @property
    def v_dim(self) -> int:
        return self.value_head_dim or self.head_dim

    @property
    def name(self) -> str:
        extra = " causal" if self.causal else ""
        if self.window != (-1, -1):
            extra += f" window{self.window[0]}:{self.window[1]}"
        if self.alignment != "top_left":
            extra += f" {self.alignment}"
        dims = f"d{self.head_dim}" + (f"v{self.value_head_dim}" if self.value_head_dim else "")
        return (f"{self.mod} {self.dtype} {dims} B{self.batch} "
                f"H{self.heads_q}/{self.heads_kv} {self.seq_q}x{self.seq_kv}{extra}")


#: The head dims beside 64 and 128 that models use (Phi's 96, Gemma's 256,
#: DeepSeek-style Q/K 192 with V 128): (Q/K head dim, V's or None).
OTHER_HEAD_DIMS = ((96, None), (192, None), (256, None), (192, 128))


def mods_grid() -> List[ModCase]:
    """Every modifier alone and with causal / a window, D 64 and 128, odd
    lengths, GQA; every modifier at the other head dims (OTHER_HEAD_DIMS)
    on GQA with unequal lengths and causal; and F16_BACKWARD_MODS in f16."""
    cases = []
    shapes = [(2, 4, 2, 333, 333), (1, 8, 2, 1000, 1000), (2, 4, 4, 1, 257),
              (1, 6, 3, 300, 517)]
    for mod in MODS:
        for d in (64, 128):
            for b, hq, hkv, sq, skv in shapes:
                cases.append(ModCase(mod, d, b, hq, hkv, sq, skv))
            cases.append(ModCase(mod, d, 1, 4, 2, 777, 777, causal=True))
            cases.append(ModCase(mod, d, 2, 4, 1, 500, 500, window=(128, 32)))
        for d, vd in OTHER_HEAD_DIMS:
            cases.append(ModCase(mod, d, 1, 6, 3, 300, 517, value_head_dim=vd))
            cases.append(ModCase(mod, d, 1, 4, 2, 777, 777, causal=True, value_head_dim=vd))
    # f16, whose P has less range than bf16's (a constant row maximum that
    # bf16 holds underflows it).
    for mod in F16_BACKWARD_MODS:
        for d in (64, 128):
            cases.append(ModCase(mod, d, 1, 6, 3, 300, 517, dtype="f16"))
            cases.append(ModCase(mod, d, 1, 4, 2, 777, 777, causal=True, dtype="f16"))
    return cases


class _ShapeOnly:
    """A tensor stand-in with a shape and a dtype: enough to trace."""

    def __init__(self, shape: Tuple[int, ...], dtype: str) -> None:
        self.shape, self.dtype = shape, dtype

    def __getitem__(self, index: Any) -> Any:
        return modifiers.load(self, index)


def _aux_tensors(case: ModCase, torch: Any = None) -> Dict[str, Any]:
    """The case's auxiliary tensors: random on the GPU with torch, else
    shape-only stand-ins."""
    shapes = {"slopes": ((case.heads_q,), "float32"),
              "table": ((case.heads_q, 2 * MAX_DISTANCE + 1), "float32"),
              "documents": ((max(case.seq_q, case.seq_kv),), "int32"),
              "key_bias": ((case.heads_q, case.seq_kv), "float32"),
              "query_temperature": ((case.heads_q, case.seq_q), "float32")}
    if torch is None:
        return {name: _ShapeOnly(shape, dtype) for name, (shape, dtype) in shapes.items()}
    n = max(case.seq_q, case.seq_kv)
    # Documents of random lengths (a few), as packed sequences have.
    starts = torch.zeros(n, dtype=torch.int32, device="cuda")
    starts[torch.randint(1, max(n, 2), (max(1, n // 150),), device="cuda")] = 1
    return {"slopes": torch.rand(case.heads_q, device="cuda") * 0.5 + 0.01,
            "table": torch.randn(case.heads_q, 2 * MAX_DISTANCE + 1, device="cuda"),
            "documents": torch.cumsum(starts, 0, dtype=torch.int32),
            "key_bias": torch.randn(case.heads_q, case.seq_kv, device="cuda"),
            "query_temperature": torch.rand(case.heads_q, case.seq_q, device="cuda") * 0.5}


def calculus(score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
    """A score_mod made of the ops whose derivative rules no library
    modifier uses -- exp, log, sqrt, division, select, maximum, sigmoid --
    continuous (the select's branches meet at 0), so that the kernel and
    the float32 reference agree where rounding flips the branch."""
    gated = modifiers.where(score > 0.0, (score * score + 1.0).sqrt(), (score * 0.5).exp())
    smooth = (gated + 1.0).log() + gated / (gated * 0.1 + 1.0)
    return modifiers.maximum(smooth, score - 2.0) + score.sigmoid()


def _reference_calculus(scores: Any, torch: Any) -> Any:
    gated = torch.where(scores > 0, torch.sqrt(scores * scores + 1.0), torch.exp(scores * 0.5))
    smooth = torch.log(gated + 1.0) + gated / (gated * 0.1 + 1.0)
    return torch.maximum(smooth, scores - 2.0) + torch.sigmoid(scores)


def case_modifiers(case: ModCase, aux: Dict[str, Any]) -> Tuple[Optional[Callable[..., Any]],
                                                                  Optional[Callable[..., Any]]]:
    """(score_mod, mask_mod) of the case, from the library."""
    score, mask = [], []
    for part in case.mod.split("+"):
        if part == "none":  # the built-in masks alone
            continue
        if part == "softcap":
            score.append(modifiers.soft_cap(SOFTCAP))
        elif part == "alibi":
            score.append(modifiers.alibi(aux["slopes"]))
        elif part == "relbias":
            score.append(modifiers.relative_bias(aux["table"], MAX_DISTANCE))
        elif part == "calculus":
            score.append(calculus)
        elif part == "keybias":  # a bias per head and key: learnable "attention sinks"
            table = aux["key_bias"]
            score.append(lambda s, b, h, q_idx, kv_idx: s + table[h, kv_idx])
        elif part == "querytemp":  # a temperature per head and query
            temperature = aux["query_temperature"]
            score.append(lambda s, b, h, q_idx, kv_idx: s * (temperature[h, q_idx] + 1.0))
        elif part == "causal_mod":
            mask.append(modifiers.causal())
        elif part == "window_mod":
            mask.append(modifiers.sliding_window(*WINDOW))
        elif part == "prefix_lm":
            mask.append(modifiers.prefix_lm(PREFIX))
        elif part == "document":
            mask.append(modifiers.document(aux["documents"]))
        else:
            raise ValueError(f"unknown modifier {part!r}")
    score_mod = (score[0] if len(score) == 1 else modifiers.compose_scores(*score)
                 if score else None)
    mask_mod = mask[0] if len(mask) == 1 else modifiers.and_masks(*mask) if mask else None
    return score_mod, mask_mod


def _reference_modifier(case: ModCase, scores: Any, aux: Dict[str, Any], torch: Any):
    """The case's modifiers computed explicitly on (B, H, S_q, S_kv) float32
    scaled scores: (new scores, keep mask or None)."""
    i = torch.arange(case.seq_q, device=scores.device)[:, None]
    j = torch.arange(case.seq_kv, device=scores.device)[None, :]
    keep = None
    for part in case.mod.split("+"):
        if part == "none":
            continue
        if part == "softcap":
            scores = SOFTCAP * torch.tanh(scores / SOFTCAP)
        elif part == "alibi":
            scores = scores - aux["slopes"][None, :, None, None] * (i - j).abs().float()
        elif part == "relbias":
            rel = (j - i).clamp(-MAX_DISTANCE, MAX_DISTANCE) + MAX_DISTANCE
            scores = scores + aux["table"][:, rel][None]
        elif part == "calculus":
            scores = _reference_calculus(scores, torch)
        elif part == "keybias":
            scores = scores + aux["key_bias"][None, :, None, :]
        elif part == "querytemp":
            scores = scores * (aux["query_temperature"][None, :, :, None] + 1.0)
        else:
            if part == "causal_mod":
                m = j <= i
            elif part == "window_mod":
                m = (j - i >= -WINDOW[0]) & (j - i <= WINDOW[1])
            elif part == "prefix_lm":
                m = (j <= i) | (j < PREFIX)
            else:  # document
                docs = aux["documents"].long()
                m = docs[: case.seq_q][:, None] == docs[: case.seq_kv][None, :]
            keep = m if keep is None else keep & m
    return scores, keep


def _reference_scores(case: ModCase, qf: Any, kf: Any, scale: float, aux: Dict[str, Any],
                      torch: Any):
    """The case's float32 scores (K with H_kv heads) after its modifiers and
    masks (-inf)."""
    kf = kf.repeat_interleave(case.heads_q // case.heads_kv, dim=1)
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    scores, keep = _reference_modifier(case, scores, aux, torch)
    visible = reference_mask(case.seq_q, case.seq_kv, case.causal, case.alignment,
                             case.window, qf.device, torch)
    if keep is not None:
        visible = keep if visible is None else visible & keep
    if visible is not None:
        scores = scores.masked_fill(~visible, float("-inf"))
    return scores


def _reference(case: ModCase, q: Any, k: Any, v: Any, scale: float, aux: Dict[str, Any],
               torch: Any):
    scores = _reference_scores(case, q.float(), k.float(), scale, aux, torch)
    vf = v.float().repeat_interleave(case.heads_q // case.heads_kv, dim=1)
    return _softmax(scores, vf, torch)


def _softmax(scores: Any, vf: Any, torch: Any):
    """(out, lse) of masked (-inf) float32 scores; a row without any key gets
    zeros and an lse of +inf (the kernels' convention)."""
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.matmul(torch.softmax(scores, dim=-1), vf)
    empty = torch.isneginf(lse)
    return out.masked_fill(empty[..., None], 0.0), lse.masked_fill(empty, float("inf"))


def _compare(row: Dict[str, Any], o: Any, lse: Any, ref: Any, lse_ref: Any, torch: Any) -> None:
    of = o.float()
    finite = bool(torch.isfinite(of).all())
    rel = float((of - ref).norm() / ref.norm().clamp_min(1e-30))
    lse_err = _lse_error(lse, lse_ref, torch) if lse is not None else 0.0
    row.update(ok=finite and rel < REL_TOLERANCE and lse_err < LSE_TOLERANCE, rel=rel,
               max_abs=float((of - ref).abs().max()), lse_err=lse_err, finite=finite)


def _case_inputs(case: ModCase, seed: int, torch: Any):
    """Fresh random q, k, v (bhsd) and the case's auxiliary tensors and
    modifiers."""
    torch.manual_seed(seed)
    dtype = torch.bfloat16 if case.dtype == "bf16" else torch.float16
    q = torch.randn(case.batch, case.heads_q, case.seq_q, case.head_dim, dtype=dtype,
                    device="cuda")
    k, v = (torch.randn(case.batch, case.heads_kv, case.seq_kv, dim, dtype=dtype,
                        device="cuda") for dim in (case.head_dim, case.v_dim))
    aux = _aux_tensors(case, torch)
    return q, k, v, aux, case_modifiers(case, aux)


def run_mod_case(case: ModCase, seed: int,
                 tuning: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    import torch

    import kvpipe

    q, k, v, aux, (score_mod, mask_mod) = _case_inputs(case, seed, torch)
    out = q.new_full((*q.shape[:-1], case.v_dim), float("nan"))
    row: Dict[str, Any] = {"case": case.name}
    try:
        o, lse = kvpipe.attention(q, k, v, causal=case.causal, window_size=case.window,
                                  return_lse=True, out=out, score_mod=score_mod,
                                  mask_mod=mask_mod, **(tuning or {}))
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    ref, lse_ref = _reference(case, q, k, v, 1.0 / math.sqrt(case.head_dim), aux, torch)
    _compare(row, o, lse, ref, lse_ref, torch)
    return row


def run_flash_attn_cases() -> List[Dict[str, Any]]:
    """flash_attn_func's softcap and alibi_slopes (bottom-right: |i + s_k -
    s_q - j|) against flash-attn's reference formulas."""
    import torch

    from kvpipe.flash_attn import flash_attn_func

    rows = []
    for i, (sq, skv, causal, softcap, alibi) in enumerate(FLASH_CASES):
        torch.manual_seed(99 + i)
        b, h, hkv, d = 2, 4, 2, 128
        q = torch.randn(b, sq, h, d, dtype=torch.bfloat16, device="cuda")
        k, v = (torch.randn(b, skv, hkv, d, dtype=torch.bfloat16, device="cuda")
                for _ in range(2))
        slopes = torch.rand(b, h, device="cuda") * 0.3 if alibi else None
        name = (f"flash_attn_func softcap={softcap} alibi={alibi} "
                f"{'causal ' if causal else ''}{sq}x{skv}")
        row: Dict[str, Any] = {"case": name}
        try:
            o, lse, _ = flash_attn_func(q, k, v, causal=causal, softcap=softcap,
                                        alibi_slopes=slopes, return_attn_probs=True)
            torch.cuda.synchronize()
        except Exception as exc:  # reported in the table, fails the run
            row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
            rows.append(row)
            continue
        vf = v.float().transpose(1, 2).repeat_interleave(h // hkv, dim=1)
        scores = _flash_scores(q.float(), k.float(), causal, softcap, slopes, torch)
        ref, lse_ref = _softmax(scores, vf, torch)
        _compare(row, o, lse, ref.transpose(1, 2), lse_ref, torch)
        rows.append(_report(row))
    return rows


def _flash_scores(qf: Any, kf: Any, causal: bool, softcap: float, slopes: Any, torch: Any):
    """flash-attn's reference scores (bshd float32 inputs, K with fewer
    heads): soft-cap, then ALiBi and the causal mask aligned bottom-right."""
    sq, skv, h, d = qf.shape[1], kf.shape[1], qf.shape[2], qf.shape[3]
    qt, kt = qf.transpose(1, 2), kf.transpose(1, 2).repeat_interleave(h // kf.shape[2], dim=1)
    scores = flash_score_modifiers(torch.matmul(qt, kt.transpose(-1, -2)) / math.sqrt(d),
                                   softcap, slopes, torch)
    ii = torch.arange(sq, device=qf.device)[:, None]
    jj = torch.arange(skv, device=qf.device)[None, :]
    if causal:
        scores = scores.masked_fill(jj > ii + skv - sq, float("-inf"))
    return scores


def _report(row: Dict[str, Any]) -> Dict[str, Any]:
    """Prints one line for a checked case; returns it."""
    if "errors" in row:  # a backward case
        detail = " ".join(f"{k} {v:.2e}" for k, v in row["errors"].items())
    elif "rel" in row:
        detail = f"rel {row['rel']:.2e} max_abs {row['max_abs']:.2e} lse {row['lse_err']:.2e}"
    else:
        detail = row.get("error", "")
    print(f"{'PASS' if row['ok'] else 'FAIL'} {row['case']}: {detail}", flush=True)
    return row


def _run_cases(cases: List[ModCase], run: Callable[[ModCase, int], Dict[str, Any]],
               first_seed: int) -> List[Dict[str, Any]]:
    """``run(case, seed)`` for each case, timed and reported."""
    rows = []
    for i, case in enumerate(cases):
        start = time.perf_counter()
        row = run(case, first_seed + i)
        row["seconds"] = round(time.perf_counter() - start, 3)
        rows.append(_report(row))
    return rows


def run_mods(cases: Optional[List[ModCase]] = None,
             tuning: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """The grid (default mods_grid()) and the flash_attn cases; one row each.
    With ``tuning`` (``check --mods --tune``: a lever tried on the modifier
    kernels) the grid alone, every launch with it: flash_attn_func takes no
    tuning."""
    grid = cases if cases is not None else mods_grid()
    if tuning:
        return _run_cases(grid, lambda case, seed: run_mod_case(case, seed, tuning), 4321)
    return _run_cases(grid, run_mod_case, 4321) + run_flash_attn_cases()


def mods_kernel_configs(cases: Optional[List[ModCase]] = None,
                        tuning: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    """The compile_attention arguments of the kernels ``run_mods`` launches
    (kvpipe.attention's choice of kernel, the regions traced with shape-only
    tensors; the prefill plan's tuning for modifiers, plans.MODIFIER_PLAN).
    The flash_attn cases' kernels are included, except with ``tuning``
    (run_mods' grid alone, each kernel with it instead of the plan's)."""
    from kvpipe.attention import normalise_window
    from kvpipe.plans import prefill_kernel_configs

    wanted = []
    for case in cases if cases is not None else mods_grid():
        traced = modifiers.trace(*case_modifiers(case, _aux_tensors(case)))
        left, right = normalise_window(case.window, case.causal)
        wanted += prefill_kernel_configs(case.head_dim, case.value_head_dim, case.dtype,
                                         case.causal, "top_left", left >= 0 or right >= 0,
                                         traced, case.seq_q, case.seq_kv, tuning)
    for sq, skv, causal, softcap, alibi in FLASH_CASES if not tuning else ():
        traced = modifiers.trace(_flash_score_mod(softcap, alibi, sq == skv))
        wanted += prefill_kernel_configs(128, None, "bf16", causal,
                                         "bottom_right" if causal else "top_left", False,
                                         traced, sq, skv)
    return unique_configs(wanted)


def _flash_score_mod(softcap: float, alibi: bool, equal_lengths: bool,
                     slopes_shape: Tuple[int, ...] = (2, 4),
                     kv_lengths_shape: Optional[Tuple[int, ...]] = None) -> Callable[..., Any]:
    """flash_attn_func's score_mod, to trace with shape-only slopes of
    ``slopes_shape`` (the check's cases: batch 2, 4 heads) and shift
    (kvpipe.flash_attn._score_mod: the shift 0 compiled in where the lengths
    are equal); with ``kv_lengths_shape``, flash_attn_with_kvcache's, whose
    diagonal is each sequence's key count (a ``(batch,)`` tensor)."""
    mods = []
    if softcap:
        mods.append(modifiers.soft_cap(softcap))
    if alibi:
        shift = 0 if equal_lengths else _ShapeOnly((1,), "int32")
        lengths = ({} if kv_lengths_shape is None
                   else {"kv_lengths": _ShapeOnly(kv_lengths_shape, "int32")})
        mods.append(modifiers.alibi(_ShapeOnly(slopes_shape, "float32"), shift, **lengths))
    return mods[0] if len(mods) == 1 else modifiers.compose_scores(*mods)


# ---------------------------------------------------------------------------
# The backward through the modifiers (check --mods --backward).
# ---------------------------------------------------------------------------

#: The modifiers of the backward grid: every library modifier (score
#: modifiers differentiated by the compiler, masks turned around), and
#: "none" for the built-in masks alone (bottom-right causal, windows).
BACKWARD_MODS = ("none", "softcap", "alibi", "relbias", "calculus", "causal_mod",
                 "window_mod", "prefix_lm", "document", "softcap+window_mod",
                 "alibi+window_mod", "relbias+document", "softcap+prefix_lm")
#: Modifiers the backward grid also runs in f16, whose dS (P^T times the
#: score_mod's derivative, rounded to the element type) has less range.
F16_BACKWARD_MODS = ("softcap", "alibi", "calculus", "relbias+document")


def mods_backward_grid() -> List[ModCase]:
    """Every modifier at D 64 and 128 on odd lengths with S_q = S_kv,
    S_q < S_kv and S_q > S_kv, GQA; and with the built-in masks: top-left
    and bottom-right causal, windows in both alignments. Fewer at D 192 and
    256."""
    cases = []
    shapes = [(2, 4, 2, 333, 333), (1, 6, 3, 300, 517), (1, 4, 4, 517, 300)]
    for mod in BACKWARD_MODS:
        for d in (64, 128):
            for b, hq, hkv, sq, skv in shapes:
                if mod != "none":
                    cases.append(ModCase(mod, d, b, hq, hkv, sq, skv))
                cases.append(ModCase(mod, d, b, hq, hkv, sq, skv, causal=True,
                                     alignment="bottom_right"))
            cases.append(ModCase(mod, d, 1, 4, 2, 777, 777, causal=True))
            cases.append(ModCase(mod, d, 2, 4, 1, 500, 613, window=(128, 32),
                                 alignment="bottom_right"))
            if mod == "none":
                cases.append(ModCase(mod, d, 2, 4, 2, 500, 500, window=(128, 32)))
                cases.append(ModCase(mod, d, 1, 4, 2, 613, 400, window=(100, -1),
                                     alignment="bottom_right"))
                cases.append(ModCase(mod, d, 1, 4, 2, 400, 613, causal=True, window=(64, -1),
                                     alignment="bottom_right"))
    for mod in F16_BACKWARD_MODS:
        for d in (64, 128):
            cases.append(ModCase(mod, d, 1, 6, 3, 300, 517, dtype="f16"))
            cases.append(ModCase(mod, d, 1, 4, 2, 777, 777, causal=True, dtype="f16"))
    # The split head dim (192, 256: S's rows are queries, masks as the
    # forward's): every modifier without a mask and bottom-right causal, and
    # the windows.
    for d in (192, 256):
        for mod in BACKWARD_MODS:
            if mod != "none":
                cases.append(ModCase(mod, d, 1, 6, 3, 300, 517))
            cases.append(ModCase(mod, d, 1, 4, 2, 517, 300, causal=True,
                                 alignment="bottom_right"))
        cases.append(ModCase("none", d, 2, 4, 1, 500, 613, window=(128, 32),
                             alignment="bottom_right"))
        cases.append(ModCase("none", d, 1, 4, 2, 400, 613, causal=True, window=(64, -1),
                             alignment="bottom_right"))
    return cases


def _reference_backward(case: ModCase, q: Any, k: Any, v: Any, do: Any, scale: float,
                        aux: Dict[str, Any], torch: Any):
    """dq, dk, dv by torch's float32 autograd of the case's explicit
    reference (rows without any key contribute nothing)."""
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    scores = _reference_scores(case, qf, kf, scale, aux, torch)
    ve = vf.repeat_interleave(case.heads_q // case.heads_kv, dim=1)
    out = torch.matmul(_reference_probabilities(scores, torch), ve)
    out.backward(do.float())
    return qf.grad, kf.grad, vf.grad


def _reference_probabilities(scores: Any, torch: Any):
    """softmax of masked (-inf) float32 scores, differentiable, with P = 0
    for a row without any key. Its log-sum-exp is taken of zeros instead of
    -inf: logsumexp's backward of an all -inf row is NaN, which a
    torch.where after it would still multiply into the gradients."""
    empty = torch.isneginf(scores).all(dim=-1, keepdim=True)
    lse = torch.logsumexp(scores.masked_fill(empty, 0.0), dim=-1, keepdim=True)
    return torch.exp(scores - lse)


def run_mod_backward_case(case: ModCase, seed: int) -> Dict[str, Any]:
    import torch

    import kvpipe
    from kvpipe.backward import attention_backward

    q, k, v, aux, (score_mod, mask_mod) = _case_inputs(case, seed, torch)
    do = torch.randn_like(q)
    masks = dict(causal=case.causal, window_size=case.window, mask_alignment=case.alignment)
    row: Dict[str, Any] = {"case": "backward " + case.name}
    try:
        with torch.no_grad():
            o, lse = kvpipe.attention(q, k, v, return_lse=True, score_mod=score_mod,
                                      mask_mod=mask_mod, **masks)
        # Poisoned gradients: every element the kernels miss stays NaN.
        outs = [torch.full_like(t, float("nan")) for t in (q, k, v)]
        dq, dk, dv = attention_backward(q, k, v, o, lse, do, dq=outs[0], dk=outs[1],
                                        dv=outs[2], score_mod=score_mod, mask_mod=mask_mod,
                                        **masks)
        # And through autograd: kvpipe.attention(...).backward(do).
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        kvpipe.attention(*leaves, score_mod=score_mod, mask_mod=mask_mod,
                         **masks).backward(do)
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    refs = _reference_backward(case, q, k, v, do, 1.0 / math.sqrt(case.head_dim), aux, torch)
    compare_grads(row, (dq, dk, dv), [leaf.grad for leaf in leaves], refs, torch)
    return row


#: flash_attn_func's softcap / alibi_slopes cases, forward and trainable:
#: (seq_q, seq_kv, causal, softcap, alibi).
FLASH_CASES = ((300, 517, False, 30.0, False), (300, 517, True, 0.0, True),
               (517, 517, False, 15.0, True), (64, 1000, True, 50.0, True))


def run_flash_attn_backward_cases() -> List[Dict[str, Any]]:
    """flash_attn_func with softcap / alibi_slopes: gradients of q, k, v
    through autograd against float32 autograd of flash-attn's formulas."""
    import torch

    from kvpipe.flash_attn import flash_attn_func

    rows = []
    for i, (sq, skv, causal, softcap, alibi) in enumerate(FLASH_CASES):
        torch.manual_seed(199 + i)
        b, h, hkv, d = 2, 4, 2, 128
        q = torch.randn(b, sq, h, d, dtype=torch.bfloat16, device="cuda")
        k, v = (torch.randn(b, skv, hkv, d, dtype=torch.bfloat16, device="cuda")
                for _ in range(2))
        do = torch.randn_like(q)
        # Slopes that require grad, as an nn.Parameter: flash-attn takes
        # them as constants (no gradient, no error).
        slopes = (torch.rand(b, h, device="cuda") * 0.3).requires_grad_() if alibi else None
        row: Dict[str, Any] = {"case": (f"backward flash_attn_func softcap={softcap} "
                                        f"alibi={alibi} {'causal ' if causal else ''}"
                                        f"{sq}x{skv}")}
        try:
            leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
            flash_attn_func(*leaves, causal=causal, softcap=softcap,
                            alibi_slopes=slopes).backward(do)
            torch.cuda.synchronize()
        except Exception as exc:  # reported in the table, fails the run
            row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
            rows.append(_report(row))
            continue
        if slopes is not None and slopes.grad is not None:
            row.update(ok=False, error="alibi_slopes got a gradient (flash-attn gives none)")
            rows.append(_report(row))
            continue
        qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
        scores = _flash_scores(qf, kf, causal, softcap,
                               None if slopes is None else slopes.detach(), torch)
        vt = vf.transpose(1, 2).repeat_interleave(h // hkv, dim=1)
        out = torch.matmul(torch.softmax(scores, dim=-1), vt).transpose(1, 2)
        out.backward(do.float())
        grads = [leaf.grad for leaf in leaves]
        compare_grads(row, grads, grads, (qf.grad, kf.grad, vf.grad), torch)
        rows.append(_report(row))
    return rows


#: Learnable auxiliary tensors (issue 15): the score_mod's f32 tensors
#: require grad, and kvpipe.attention's backward returns their gradients.
LEARNABLE_AUX_CASES = [
    ModCase("relbias", 64, 2, 4, 2, 333, 333, causal=True),
    ModCase("relbias", 128, 1, 6, 3, 300, 517),
    ModCase("alibi", 128, 2, 4, 4, 517, 300, causal=True, alignment="bottom_right"),
    ModCase("relbias+document", 64, 1, 4, 2, 400, 400),
    ModCase("alibi", 256, 1, 4, 2, 300, 300, causal=True),
    # An index that only the key (the query) determines: the backward sums
    # each row (column) of S^T across lanes before one atomic.
    ModCase("keybias", 128, 2, 4, 2, 300, 517, causal=True),
    ModCase("querytemp", 64, 1, 4, 4, 517, 300),
    ModCase("keybias+querytemp", 192, 1, 4, 2, 300, 300),
]


def _learnable(case: ModCase, aux: Dict[str, Any]) -> Dict[str, Any]:
    """The case's f32 tensors as leaves requiring grad."""
    return {name: t.detach().clone().requires_grad_() if t.dtype.is_floating_point else t
            for name, t in aux.items()}


def run_learnable_aux_case(case: ModCase, seed: int) -> Dict[str, Any]:
    import torch

    import kvpipe

    q, k, v, aux, _ = _case_inputs(case, seed, torch)
    row: Dict[str, Any] = {"case": "learnable aux " + case.name}
    masks = dict(causal=case.causal, window_size=case.window, mask_alignment=case.alignment)
    learnable = _learnable(case, aux)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    try:
        score_mod, mask_mod = case_modifiers(case, learnable)
        out = kvpipe.attention(*leaves, score_mod=score_mod, mask_mod=mask_mod, **masks)
        do = torch.randn_like(out)
        out.backward(do)
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    # The float32 reference with its own leaves for the tensors.
    ref_aux = {name: t.detach().float().clone().requires_grad_() if t.is_floating_point()
               else t for name, t in aux.items()}
    scale = 1.0 / math.sqrt(case.head_dim)
    refs = _reference_backward(case, q, k, v, do, scale, ref_aux, torch)
    compare_grads(row, tuple(leaf.grad for leaf in leaves), [leaf.grad for leaf in leaves],
                  refs, torch)
    given_o = _aux_grads_given_output(case, q, k, v, do, out.detach(), scale, aux, torch)
    for name, t in learnable.items():
        if not t.is_floating_point() or ref_aux[name].grad is None:
            continue
        got = t.grad
        if got is None:
            row.update(ok=False, error=f"no gradient for {name}")
            return row
        exact, floor = ref_aux[name].grad, given_o[name]
        # Held to the float32 gradient given the forward's O (see
        # _aux_grads_given_output); the error against the exact one is reported.
        rel = float((got.float() - floor).norm() / max(float(floor.norm()), 1e-6))
        row["errors"][name] = rel
        row["errors"][name + "_exact"] = float((got.float() - exact).norm()
                                               / max(float(exact.norm()), 1e-6))
        row["rel"] = max(row["rel"], rel)
        row["ok"] = row["ok"] and bool(torch.isfinite(got).all()) and rel < REL_TOLERANCE
    return row


def _aux_grads_given_output(case: ModCase, q: Any, k: Any, v: Any, do: Any, o: Any,
                            scale: float, aux: Dict[str, Any], torch: Any) -> Dict[str, Any]:
    """The f32 aux tensors' gradients in float32, except that the backward's
    delta = rowsum(dO * O) is taken of ``o``, the O the forward returned, as
    every FlashAttention-style backward takes it (kvpipe's, FA2/3/4's,
    FlexAttention's).

    An aux gradient can be a sum whose terms cancel: ALiBi's slope gets
    sum_ij dS_ij * -|i - j| while each row of dS sums to zero, so an error
    in O (its rounding to bf16, and the forward's P rounded to bf16 before
    P V) multiplies the mean distance into delta's error while the gradient
    only grows with the distances' spread. At 517 x 300 causal bottom-right
    (every visible distance >= 217) O's rounding alone is a relative error of
    0.06-0.13 and the forward's O 0.15 (session 13: CPU simulation and H200);
    dq, dk and dv are not sums of that kind, and O itself is checked by the
    forward grid. Given O, what is left is the backward's own error."""
    leaves = {name: t.detach().float().clone().requires_grad_()
              for name, t in aux.items() if t.is_floating_point()}
    qf, kf, vf = (t.detach().float() for t in (q, k, v))
    scores = _reference_scores(case, qf, kf, scale, {**aux, **leaves}, torch)
    ve = vf.repeat_interleave(case.heads_q // case.heads_kv, dim=1)
    with torch.no_grad():
        p = _reference_probabilities(scores, torch)
        dof = do.float()
        delta = (dof * o.float()).sum(-1, keepdim=True)
        ds = p * (torch.matmul(dof, ve.transpose(-1, -2)) - delta)
    grads = torch.autograd.grad(scores, list(leaves.values()), grad_outputs=ds,
                                allow_unused=True)
    return {name: (g if g is not None else torch.zeros_like(leaves[name]))
            for name, g in zip(leaves, grads)}


#: Attention sinks (kvpipe.sinks, gpt-oss): the forward and the gradients of
#: q, k, v and the sinks, alone and with the masks and modifiers gpt-oss and
#: others combine them with; GQA; rows without keys (bottom-right causal,
#: more queries than keys) attend to the sink alone.
SINK_CASES = [
    ModCase("none", 64, 1, 8, 2, 333, 333, causal=True),
    ModCase("none", 64, 2, 4, 1, 500, 500, causal=True, window=(128, 0)),
    ModCase("none", 128, 1, 6, 3, 300, 517),
    ModCase("none", 64, 1, 4, 2, 517, 300, causal=True, alignment="bottom_right"),
    ModCase("softcap", 64, 1, 4, 2, 300, 517),
    ModCase("alibi+window_mod", 128, 1, 4, 2, 400, 400),
]


def run_sink_case(case: ModCase, seed: int) -> Dict[str, Any]:
    """``case`` with random sinks: the forward (a poisoned ``out=``) and its
    log-sum-exp, and dq, dk, dv, dsinks through autograd, against torch's
    float32 softmax over the scores and a sink column."""
    import torch

    import kvpipe

    q, k, v, aux, (score_mod, mask_mod) = _case_inputs(case, seed, torch)
    sinks = torch.randn(case.heads_q, device="cuda") * 2.0
    do = torch.randn(*q.shape[:-1], case.v_dim, dtype=q.dtype, device="cuda")
    masks = dict(causal=case.causal, window_size=case.window, mask_alignment=case.alignment,
                 score_mod=score_mod, mask_mod=mask_mod)
    row: Dict[str, Any] = {"case": "sinks " + case.name}
    try:
        out = q.new_full((*q.shape[:-1], case.v_dim), float("nan"))
        o, lse = kvpipe.attention(q, k, v, sinks=sinks, return_lse=True, out=out, **masks)
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v, sinks)]
        kvpipe.attention(*leaves[:3], sinks=leaves[3], **masks).backward(do)
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    qf, kf, vf, sf = (t.detach().float().requires_grad_() for t in (q, k, v, sinks))
    scores = _reference_scores(case, qf, kf, 1.0 / math.sqrt(case.head_dim), aux, torch)
    ref, lse_ref = _sink_softmax(scores, sf[None, :, None, None],
                                 vf.repeat_interleave(case.heads_q // case.heads_kv, dim=1),
                                 torch)
    ref.backward(do.float())
    _compare(row, o, lse, ref.detach(), lse_ref.detach(), torch)
    forward_ok = row["ok"]
    grads = {}
    for name, leaf, refleaf in zip(("dq", "dk", "dv", "dsinks"), leaves, (qf, kf, vf, sf)):
        if leaf.grad is None:  # autograd gave none: a failure, not a crash
            grads[name] = float("inf")
            continue
        floor = 1e-3 * math.sqrt(refleaf.grad.numel())
        grads[name] = float((leaf.grad.float() - refleaf.grad).norm()
                            / max(float(refleaf.grad.norm()), floor))
    row.update(ok=forward_ok and all(e < REL_TOLERANCE for e in grads.values()),
               errors={"out": row["rel"], "lse": row["lse_err"], **grads},
               rel=max(row["rel"], *grads.values()))
    return row


def run_mods_backward(cases: Optional[List[ModCase]] = None) -> List[Dict[str, Any]]:
    """The backward grid (default mods_backward_grid()), flash_attn_func's
    trainable softcap / alibi, the learnable aux tensors and the attention
    sinks; one row each."""
    return (_run_cases(cases if cases is not None else mods_backward_grid(),
                       run_mod_backward_case, 8765)
            + run_flash_attn_backward_cases()
            + (_run_cases(LEARNABLE_AUX_CASES, run_learnable_aux_case, 5678)
               + _run_cases(SINK_CASES, run_sink_case, 2468) if cases is None else []))


def training_kernel_configs(case_mods: Tuple[Any, Any], head_dim: int,
                            value_head_dim: Optional[int], dtype: str, causal: bool,
                            alignment: str, window: bool, seq_q: int, seq_kv: int,
                            learnable: bool = False, sinks: bool = False
                            ) -> List[Dict[str, Any]]:
    """The compile_attention arguments of the kernels a training step of
    kvpipe.attention loads (its forward under autograd, then
    attention_backward's family) for the (score_mod, mask_mod) pair
    ``case_mods`` (traced here: shape-only aux tensors will do), at kernel
    head dims (``kernels.padded_head_dims``' pair for a padded one);
    ``learnable``: also the family with the score_mod's f32 tensors'
    gradients; ``sinks``: the forward with sinks (its backward family is
    the one without)."""
    from kvpipe.attention import launched_mask
    from kvpipe.plans import prefill_kernel_configs

    traced = modifiers.trace(*case_mods)
    if not causal and not window:
        alignment = "top_left"  # no mask: one kernel for both alignments
    regions = dict(modifiers=traced.ir, aux_types=traced.aux_types) if traced else {}
    # The forward's kernel for the masks (bottom-right on equal lengths is
    # top-left) and, without modifiers, maybe the prefill plan's.
    forward_causal, forward_alignment = launched_mask(causal, alignment, window, seq_q, seq_kv,
                                                      False)
    configs = prefill_kernel_configs(head_dim, value_head_dim, dtype, forward_causal,
                                     forward_alignment, window, traced, seq_q, seq_kv,
                                     **({"sinks": True} if sinks else {}))
    values = {} if value_head_dim in (None, head_dim) else {"value_head_dim": value_head_dim}
    configs.append(dict(head_dim=head_dim, dtype=dtype, causal=causal, backward=True,
                        mask_alignment=alignment, sliding_window=window, **values, **regions))
    if learnable:
        # The family with the score_mod's f32 tensors' gradients.
        from kvpipe.attention import score_mod_reads

        grads = tuple(i for i in sorted(score_mod_reads(traced))
                      if traced.aux_types[i] == "f32")
        configs.append(dict(configs[-1], aux_grads=grads))
    return configs


def mods_backward_kernel_configs(cases: Optional[List[ModCase]] = None,
                                 only_sinks: bool = False) -> List[Dict[str, Any]]:
    """The compile_attention arguments of the kernels ``run_mods_backward``
    launches: each case's forward kernel and backward family (as
    kvpipe.attention and attention_backward choose them, the regions traced
    with shape-only tensors), and flash_attn_func's; ``only_sinks``: those
    of SINK_CASES alone (scripts/gpu/check-sinks.py)."""
    from kvpipe.attention import normalise_window

    wanted = []

    def add(case_mods: Tuple[Any, Any], d: int, causal: bool, alignment: str,
            window: bool, sq: int, skv: int, dtype: str = "bf16",
            learnable: bool = False, sinks: bool = False) -> None:
        wanted.extend(training_kernel_configs(case_mods, d, None, dtype, causal, alignment,
                                              window, sq, skv, learnable=learnable,
                                              sinks=sinks))

    def add_case(case: ModCase, **flags: bool) -> None:
        left, right = normalise_window(case.window, case.causal)
        add(case_modifiers(case, _aux_tensors(case)), case.head_dim, case.causal,
            case.alignment, left >= 0 or right >= 0, case.seq_q, case.seq_kv, case.dtype,
            **flags)

    if not only_sinks:
        for case in cases if cases is not None else mods_backward_grid():
            add_case(case)
        for sq, skv, causal, softcap, alibi in FLASH_CASES:
            add((_flash_score_mod(softcap, alibi, sq == skv), None), 128, causal,
                "top_left" if sq == skv else "bottom_right", False, sq, skv)
    if cases is None:
        for case in SINK_CASES:
            add_case(case, sinks=True)
        for case in () if only_sinks else LEARNABLE_AUX_CASES:
            add_case(case, learnable=True)
    return unique_configs(wanted)
