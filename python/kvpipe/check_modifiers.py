"""``python -m kvpipe check --mods``: the score/mask modifiers on the GPU.

Every modifier of kvpipe.modifiers, alone and combined with the built-in
causal mask and sliding window, at head dims 64 and 128, bf16, odd lengths,
GQA: ``kvpipe.attention(..., score_mod=, mask_mod=)`` on fresh random inputs
with a poisoned (NaN) output, against a float32 torch reference that computes
the same modifier explicitly on the whole score matrix (not through the
tracer). Also flash_attn_func's ``softcap`` and ``alibi_slopes`` against
flash-attn's reference formulas.

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
from kvpipe.check import LSE_TOLERANCE, REL_TOLERANCE, _lse_error, reference_mask

#: The modifiers the grid checks (names of ModCase.mod): score modifiers,
#: mask modifiers, and combinations.
MODS = ("softcap", "alibi", "relbias", "causal_mod", "window_mod", "prefix_lm", "document",
        "softcap+window_mod", "alibi+window_mod", "relbias+document")

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

    @property
    def name(self) -> str:
        extra = " causal" if self.causal else ""
        if self.window != (-1, -1):
            extra += f" window{self.window[0]}:{self.window[1]}"
        return (f"{self.mod} {self.dtype} d{self.head_dim} B{self.batch} "
                f"H{self.heads_q}/{self.heads_kv} {self.seq_q}x{self.seq_kv}{extra}")


def mods_grid() -> List[ModCase]:
    """Every modifier alone and with causal / a window, D 64 and 128, odd
    lengths, GQA."""
    cases = []
    shapes = [(2, 4, 2, 333, 333), (1, 8, 2, 1000, 1000), (2, 4, 4, 1, 257),
              (1, 6, 3, 300, 517)]
    for mod in MODS:
        for d in (64, 128):
            for b, hq, hkv, sq, skv in shapes:
                cases.append(ModCase(mod, d, b, hq, hkv, sq, skv))
            cases.append(ModCase(mod, d, 1, 4, 2, 777, 777, causal=True))
            cases.append(ModCase(mod, d, 2, 4, 1, 500, 500, window=(128, 32)))
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
              "documents": ((max(case.seq_q, case.seq_kv),), "int32")}
    if torch is None:
        return {name: _ShapeOnly(shape, dtype) for name, (shape, dtype) in shapes.items()}
    n = max(case.seq_q, case.seq_kv)
    # Documents of random lengths (a few), as packed sequences have.
    starts = torch.zeros(n, dtype=torch.int32, device="cuda")
    starts[torch.randint(1, max(n, 2), (max(1, n // 150),), device="cuda")] = 1
    return {"slopes": torch.rand(case.heads_q, device="cuda") * 0.5 + 0.01,
            "table": torch.randn(case.heads_q, 2 * MAX_DISTANCE + 1, device="cuda"),
            "documents": torch.cumsum(starts, 0, dtype=torch.int32)}


def case_modifiers(case: ModCase, aux: Dict[str, Any]) -> Tuple[Optional[Callable[..., Any]],
                                                                  Optional[Callable[..., Any]]]:
    """(score_mod, mask_mod) of the case, from the library."""
    score, mask = [], []
    for part in case.mod.split("+"):
        if part == "softcap":
            score.append(modifiers.soft_cap(SOFTCAP))
        elif part == "alibi":
            score.append(modifiers.alibi(aux["slopes"]))
        elif part == "relbias":
            score.append(modifiers.relative_bias(aux["table"], MAX_DISTANCE))
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
    i = torch.arange(case.seq_q, device="cuda")[:, None]
    j = torch.arange(case.seq_kv, device="cuda")[None, :]
    keep = None
    for part in case.mod.split("+"):
        if part == "softcap":
            scores = SOFTCAP * torch.tanh(scores / SOFTCAP)
        elif part == "alibi":
            scores = scores - aux["slopes"][None, :, None, None] * (i - j).abs().float()
        elif part == "relbias":
            rel = (j - i).clamp(-MAX_DISTANCE, MAX_DISTANCE) + MAX_DISTANCE
            scores = scores + aux["table"][:, rel][None]
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


def _reference(case: ModCase, q: Any, k: Any, v: Any, scale: float, aux: Dict[str, Any],
               torch: Any):
    qf, kf, vf = (t.float() for t in (q, k, v))
    group = case.heads_q // case.heads_kv
    kf, vf = (t.repeat_interleave(group, dim=1) for t in (kf, vf))
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    scores, keep = _reference_modifier(case, scores, aux, torch)
    visible = reference_mask(case.seq_q, case.seq_kv, case.causal, "top_left", case.window,
                             q.device, torch)
    if keep is not None:
        visible = keep if visible is None else visible & keep
    if visible is not None:
        scores = scores.masked_fill(~visible, float("-inf"))
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


def run_mod_case(case: ModCase, seed: int) -> Dict[str, Any]:
    import torch

    import kvpipe

    torch.manual_seed(seed)
    dtype = torch.bfloat16 if case.dtype == "bf16" else torch.float16
    q = torch.randn(case.batch, case.heads_q, case.seq_q, case.head_dim, dtype=dtype,
                    device="cuda")
    k, v = (torch.randn(case.batch, case.heads_kv, case.seq_kv, case.head_dim, dtype=dtype,
                        device="cuda") for _ in range(2))
    aux = _aux_tensors(case, torch)
    score_mod, mask_mod = case_modifiers(case, aux)
    out = torch.full_like(q, float("nan"))
    row: Dict[str, Any] = {"case": case.name}
    try:
        o, lse = kvpipe.attention(q, k, v, causal=case.causal, window_size=case.window,
                                  return_lse=True, out=out, score_mod=score_mod,
                                  mask_mod=mask_mod)
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
    for i, (sq, skv, causal, softcap, alibi) in enumerate((
            (300, 517, False, 30.0, False), (300, 517, True, 0.0, True),
            (517, 517, False, 15.0, True), (64, 1000, True, 50.0, True))):
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
        qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
        kf, vf = (t.repeat_interleave(h // hkv, dim=1) for t in (kf, vf))
        scores = torch.matmul(qf, kf.transpose(-1, -2)) / math.sqrt(d)
        if softcap:
            scores = softcap * torch.tanh(scores / softcap)
        ii = torch.arange(sq, device="cuda")[:, None]
        jj = torch.arange(skv, device="cuda")[None, :]
        if alibi:
            scores = scores - slopes[:, :, None, None] * (ii + skv - sq - jj).abs().float()
        if causal:
            scores = scores.masked_fill(jj > ii + skv - sq, float("-inf"))
        ref, lse_ref = _softmax(scores, vf, torch)
        _compare(row, o, lse, ref.transpose(1, 2), lse_ref, torch)
        rows.append(_report(row))
    return rows


def _report(row: Dict[str, Any]) -> Dict[str, Any]:
    """Prints one line for a checked case; returns it."""
    detail = (f"rel {row['rel']:.2e} max_abs {row['max_abs']:.2e} lse {row['lse_err']:.2e}"
              if "rel" in row else row.get("error", ""))
    print(f"{'PASS' if row['ok'] else 'FAIL'} {row['case']}: {detail}", flush=True)
    return row


def run_mods(cases: Optional[List[ModCase]] = None) -> List[Dict[str, Any]]:
    """The grid (default mods_grid()) and the flash_attn cases; one row each."""
    rows = []
    for i, case in enumerate(cases if cases is not None else mods_grid()):
        start = time.perf_counter()
        row = run_mod_case(case, seed=4321 + i)
        row["seconds"] = round(time.perf_counter() - start, 3)
        rows.append(_report(row))
    return rows + run_flash_attn_cases()


def mods_kernel_configs(cases: Optional[List[ModCase]] = None) -> List[Dict[str, Any]]:
    """The compile_attention arguments of the kernels ``run_mods`` launches
    (kvpipe.attention's choice of kernel, the regions traced with shape-only
    tensors). The flash_attn cases' kernels are included."""
    from kvpipe.attention import normalise_window

    wanted = []
    for case in cases if cases is not None else mods_grid():
        traced = modifiers.trace(*case_modifiers(case, _aux_tensors(case)))
        left, right = normalise_window(case.window, case.causal)
        window = left >= 0 or right >= 0
        wanted.append(dict(head_dim=case.head_dim, dtype=case.dtype, causal=case.causal,
                           value_head_dim=None, mask_alignment="top_left",
                           sliding_window=window, kv_lengths=False, modifiers=traced.ir,
                           aux_types=traced.aux_types))
    for causal, softcap, alibi in ((False, 30.0, False), (True, 0.0, True),
                                   (False, 15.0, True), (True, 50.0, True)):
        mods = []
        if softcap:
            mods.append(modifiers.soft_cap(softcap))
        if alibi:
            mods.append(modifiers.alibi(_ShapeOnly((2, 4), "float32"),
                                        _ShapeOnly((1,), "int32")))
        traced = modifiers.trace(mods[0] if len(mods) == 1 else modifiers.compose_scores(*mods))
        wanted.append(dict(head_dim=128, dtype="bf16", causal=causal, value_head_dim=None,
                           mask_alignment="bottom_right" if causal else "top_left",
                           sliding_window=False, kv_lengths=False, modifiers=traced.ir,
                           aux_types=traced.aux_types))
    unique = []
    for config in wanted:
        if config not in unique:
            unique.append(config)
    return unique
