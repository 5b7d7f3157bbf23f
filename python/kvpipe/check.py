"""``python -m kvpipe check``: verify the attention kernels on the GPU.

For a grid of configurations (both dtypes, every head dim: 64, 96, 128, 192,
256 and (192, 128) for (Q/K, V), causal and not,
odd and even sequence lengths including 1, tails that are not tile
multiples, seq_q != seq_kv, GQA and MQA, both layouts, strided views), runs
``kvpipe.attention`` on fresh random inputs with a poisoned (NaN) output and
compares the output and the log-sum-exp against torch computed in float32.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Dict, List, Optional, Tuple

from kvpipe.kernels import HEAD_DIM_PAIRS

#: Relative error bound of the output (||o - ref|| / ||ref||), per the spec.
REL_TOLERANCE = 1e-2
#: Absolute error bound of the log-sum-exp (natural log).
LSE_TOLERANCE = 2e-2


@dataclasses.dataclass(frozen=True)
class Case:
    dtype: str
    head_dim: int
    causal: bool
    batch: int
    heads_q: int
    heads_kv: int
    seq_q: int
    seq_kv: int
    layout: str = "bhsd"
    strided: bool = False
    #: V's head dim where it differs from Q/K's.
    value_head_dim: Optional[int] = None
    #: kvpipe.attention's mask_alignment and window_size.
    alignment: str = "top_left"
    window: Tuple[int, int] = (-1, -1)

    @property
    def v_head_dim(self) -> int:
        return self.value_head_dim if self.value_head_dim is not None else self.head_dim

    def kernel_pair(self) -> Tuple[int, int]:
        """The (Q/K, V) head dims of the kernels the case launches: its own,
        or the pair they run zero-padded as (``kernels.padded_head_dims``:
        80 as 96)."""
        from kvpipe.kernels import padded_head_dims

        return padded_head_dims(self.head_dim, self.v_head_dim) or (self.head_dim,
                                                                    self.v_head_dim)

    def kernel_dims(self) -> Dict[str, int]:
        """``kernel_pair`` as ``compile_attention`` arguments."""
        d, dv = self.kernel_pair()
        return dict(head_dim=d, **({"value_head_dim": dv} if dv != d else {}))

    @property
    def name(self) -> str:
        extra = ",strided" if self.strided else ""
        if self.alignment != "top_left":
            extra += f",{self.alignment}"
        if self.window != (-1, -1):
            extra += f",window{self.window[0]}:{self.window[1]}"
        dims = f"d{self.head_dim}" + (f"v{self.value_head_dim}" if self.value_head_dim else "")
        return (f"{self.dtype} {dims} {'causal' if self.causal else 'full'} "
                f"B{self.batch} H{self.heads_q}/{self.heads_kv} "
                f"{self.seq_q}x{self.seq_kv} {self.layout}{extra}")


#: (B, H_q, H_kv, S_q, S_kv) of the grids, each with both dtypes, head dims
#: and causal or not.
SHAPES = [
    (2, 4, 4, 256, 256),   # tile multiples
    (1, 2, 2, 1, 1),       # a single query and key
    (2, 3, 3, 197, 197),   # odd lengths, tails in both dimensions
    (1, 2, 2, 100, 300),   # seq_q < seq_kv
    (1, 2, 2, 300, 77),    # seq_q > seq_kv
]


def _shape_grid(shapes: List[tuple]) -> List[Case]:
    return [Case(dtype, head_dim, causal, b, hq, hkv, sq, skv)
            for dtype in ("bf16", "f16") for head_dim in (64, 128)
            for causal in (False, True) for b, hq, hkv, sq, skv in shapes]


def default_grid() -> List[Case]:
    cases = _shape_grid(SHAPES)
    for causal in (False, True):
        for head_dim in (64, 128):
            cases += [
                Case("bf16", head_dim, causal, 2, 8, 2, 160, 333),            # GQA
                Case("bf16", head_dim, causal, 1, 6, 1, 129, 129),            # MQA
                Case("bf16", head_dim, causal, 2, 4, 2, 190, 257, "bshd"),    # GQA bshd
                Case("f16", head_dim, causal, 1, 3, 3, 64, 1000, "bhsd", True),
                Case("bf16", head_dim, causal, 2, 2, 1, 333, 128, "bshd", True),
            ]
    cases.append(Case("bf16", 128, False, 1, 1, 1, 1, 4096))   # one query, long keys
    cases.append(Case("bf16", 128, True, 1, 2, 2, 2048, 2048))  # long causal
    cases.append(Case("bf16", 64, True, 1, 2, 2, 3001, 3001))   # the plan's 2k-4k D 64 kernel
    # Causal sequences past the prefill plan's short lengths
    # (plans.PREFILL_PLAN): D 64's persistent kernel on the host's tile
    # table (several batches and heads, GQA: tiles of every pair in the
    # table) and D 128's long-sequence kernel, with tails.
    cases += [Case("bf16", 64, True, 1, 2, 1, 4500, 4500),
              Case("f16", 128, True, 1, 2, 2, 4133, 4133, "bshd"),
              Case("bf16", 64, True, 1, 2, 2, 300, 4200),
              Case("bf16", 64, True, 3, 4, 2, 4700, 4700, "bshd")]
    # Chunked prefill (fewer queries than keys, bottom-right causal): the
    # plan's kernels past 4k keys at head dim 64 (persistent on the tile
    # table) and at head dim 128 (R2P masks and the late retire).
    cases += [Case("bf16", 64, True, 2, 4, 2, 700, 5000, alignment="bottom_right"),
              Case("f16", 128, True, 1, 4, 2, 1000, 4500, "bshd", alignment="bottom_right"),
              Case("bf16", 128, True, 2, 2, 1, 129, 333, alignment="bottom_right")]
    # Non-causal ones past the plan's 1k at head dim 128 (its 192 x 80 tiles)
    # and at head dim 64 (the persistent kernels that skip the idle
    # warpgroups up to 4k, with the row sums past it).
    cases += [Case("f16", 128, False, 1, 2, 2, 1500, 1500, "bshd"),
              Case("bf16", 128, False, 2, 2, 1, 1100, 2000),
              Case("bf16", 64, False, 1, 2, 1, 1300, 1300),
              Case("f16", 64, False, 1, 2, 2, 4200, 4200, "bshd")]
    # The plan's long-sequence kernels at head dim 128 (192-row Q tiles on
    # 80-key blocks): tails of both, a Q tile mostly past seq_q, GQA.
    cases += [Case("bf16", 128, True, 1, 2, 1, 8300, 8300),
              Case("bf16", 128, True, 1, 2, 2, 300, 8500),
              Case("f16", 128, False, 1, 2, 2, 8250, 8250, "bshd"),
              Case("bf16", 128, False, 1, 4, 2, 100, 9000)]
    # The other head dims (their own tile shapes and, at 96, the 64-byte
    # swizzle): the same shapes in both dtypes, GQA, bshd and strided views,
    # and a long causal case.
    for head_dim, value_head_dim in ((96, None), (192, None), (192, 128), (256, None)):
        for causal in (False, True):
            for dtype in ("bf16", "f16"):
                for b, hq, hkv, sq, skv in SHAPES:
                    cases.append(Case(dtype, head_dim, causal, b, hq, hkv, sq, skv,
                                      value_head_dim=value_head_dim))
            cases += [
                Case("bf16", head_dim, causal, 2, 8, 2, 160, 333,
                     value_head_dim=value_head_dim),
                Case("bf16", head_dim, causal, 2, 4, 2, 190, 257, "bshd",
                     value_head_dim=value_head_dim),
                Case("f16", head_dim, causal, 1, 3, 3, 64, 1000, "bhsd", True,
                     value_head_dim=value_head_dim),
            ]
        cases.append(Case("bf16", head_dim, True, 1, 2, 2, 2048, 2048,
                          value_head_dim=value_head_dim))
    # D 192's default kernels past the plan's persistent ones (2k causal, 1k
    # not).
    cases += [Case("bf16", 192, True, 1, 2, 1, 4400, 4400),
              Case("bf16", 192, False, 1, 2, 1, 1500, 1500)]
    # Head dims without a kernel of their own run zero-padded as the next
    # (80 as 96: Phi-2, StableLM; 32 as 64; V's 64 with Q/K's 128 as 128).
    for head_dim, value_head_dim in ((80, None), (32, None), (128, 64)):
        for causal in (False, True):
            cases += [Case("bf16", head_dim, causal, 2, 8, 2, 160, 333,
                           value_head_dim=value_head_dim),
                      Case("f16", head_dim, causal, 1, 4, 2, 190, 257, "bshd", True,
                           value_head_dim=value_head_dim)]
    cases += mask_grid()
    return cases


def mask_grid() -> List[Case]:
    """Bottom-right causal masks and sliding windows (flash-attn's): chunked
    prefill (seq_q < seq_kv), decode (one to a few queries), more queries
    than keys (rows without any key), windows on one or both sides, with
    and without causal, across tile boundaries."""
    cases: List[Case] = []
    for head_dim in (64, 128):
        br = "bottom_right"
        cases += [
            Case("bf16", head_dim, True, 2, 4, 2, 100, 300, alignment=br),    # chunked prefill
            Case("bf16", head_dim, True, 1, 8, 2, 1, 1000, alignment=br),     # decode
            Case("f16", head_dim, True, 2, 4, 4, 7, 517, "bshd", alignment=br),
            Case("bf16", head_dim, True, 1, 2, 2, 300, 77, alignment=br),     # rows with no key
            Case("bf16", head_dim, True, 1, 2, 1, 333, 333, "bshd", True, alignment=br),
            Case("bf16", head_dim, False, 1, 4, 2, 700, 700, window=(128, 0)),
            Case("bf16", head_dim, False, 2, 2, 2, 500, 900, alignment=br, window=(100, 50)),
            Case("f16", head_dim, True, 1, 4, 1, 1000, 1000, "bshd", alignment=br,
                 window=(255, -1)),
            Case("bf16", head_dim, True, 1, 2, 2, 129, 1500, alignment=br, window=(64, -1)),
            Case("bf16", head_dim, False, 1, 2, 2, 600, 600, window=(-1, 37)),
            Case("bf16", head_dim, False, 1, 3, 3, 400, 200, alignment=br, window=(0, 0)),
            Case("bf16", head_dim, True, 1, 2, 2, 640, 640, window=(1, 0)),
        ]
    # The other head dims' tile shapes under the masks.
    for head_dim, value_head_dim in ((96, None), (192, 128), (256, None)):
        cases += [
            Case("bf16", head_dim, True, 2, 4, 2, 100, 300, value_head_dim=value_head_dim,
                 alignment="bottom_right"),
            Case("bf16", head_dim, True, 1, 2, 2, 500, 900, "bshd",
                 value_head_dim=value_head_dim, alignment="bottom_right", window=(100, -1)),
        ]
    return cases


def random_grid(count: int, seed: int) -> List[Case]:
    """``count`` configurations drawn at random (reproducibly from ``seed``).

    Sequence lengths are drawn from 1 to 5000 with a bias towards tile
    boundaries and their neighbours (where masks and clipped stores live),
    heads with a random grouped-query ratio, both layouts and strided views.
    """
    import random

    rng = random.Random(seed)

    def length() -> int:
        if rng.random() < 0.4:  # at or next to a multiple of 64
            return max(1, 64 * rng.randint(1, 40) + rng.choice((-1, 0, 1)))
        return rng.randint(1, 5000)

    cases = []
    for _ in range(count):
        heads_kv = rng.choice((1, 1, 2, 3, 4))
        group = rng.choice((1, 1, 2, 3, 4, 8))
        heads_q = heads_kv * group
        seq_q, seq_kv = length(), length()
        # Keep each case small enough to check in float32 quickly.
        batch = max(1, min(4, 4_000_000 // max(1, heads_q * seq_q * seq_kv)))
        head_dim, value_head_dim = rng.choice(HEAD_DIM_PAIRS)
        case = Case(rng.choice(("bf16", "f16")), head_dim,
                    rng.random() < 0.5, rng.randint(1, batch), heads_q, heads_kv,
                    seq_q, seq_kv, rng.choice(("bhsd", "bshd")), rng.random() < 0.25,
                    value_head_dim if value_head_dim != head_dim else None)
        # A third bottom-right aligned, a quarter with a sliding window.
        alignment = "bottom_right" if rng.random() < 1 / 3 else "top_left"
        window = (-1, -1)
        if rng.random() < 0.25:
            window = (rng.choice((-1, 0, 1, 63, 64, rng.randint(0, 3000))),
                      rng.choice((-1, 0, 5, 128, rng.randint(0, 3000))))
        cases.append(dataclasses.replace(case, alignment=alignment, window=window))
    return cases


def _make(case: Case, which: str, heads: int, seq: int, torch: Any) -> Any:
    """A random (B, H, S, D)-or-(B, S, H, D) tensor; strided cases are views."""
    dtype = torch.bfloat16 if case.dtype == "bf16" else torch.float16
    b, d = case.batch, case.v_head_dim if which == "v" else case.head_dim
    shape = (b, heads, seq, d) if case.layout == "bhsd" else (b, seq, heads, d)
    if not case.strided:
        return torch.randn(shape, dtype=dtype, device="cuda")
    # Allocated in the other layout with a padded head dim, then viewed:
    # non-contiguous in two ways at once.
    other = (b, seq, heads, d + 64) if case.layout == "bhsd" else (b, heads, seq, d + 64)
    base = torch.randn(other, dtype=dtype, device="cuda")
    return base[..., :d].transpose(1, 2)


def _reference(case: Case, q: Any, k: Any, v: Any, scale: float, torch: Any):
    if case.layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    qf, kf, vf = (t.float() for t in (q, k, v))
    group = case.heads_q // case.heads_kv
    kf = kf.repeat_interleave(group, dim=1)
    vf = vf.repeat_interleave(group, dim=1)
    visible = reference_mask(case.seq_q, case.seq_kv, case.causal, case.alignment,
                             case.window, q.device, torch)
    out, lse = _masked_attention(qf, kf, vf, scale, visible, torch)
    if case.layout == "bshd":
        out = out.transpose(1, 2)
    return out, lse


def _masked_attention(qf: Any, kf: Any, vf: Any, scale: float, visible: Any, torch: Any):
    """(out, lse) of float32 (..., S, D) inputs with the keys ``visible``
    (None: all) leaves each query; a row without any key gets zeros and an
    lse of +inf (flash-attn's convention, which the kernels follow)."""
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if visible is not None:
        scores = scores.masked_fill(~visible, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.matmul(torch.softmax(scores, dim=-1), vf)
    empty = torch.isneginf(lse)
    return out.masked_fill(empty[..., None], 0.0), lse.masked_fill(empty, float("inf"))


def _sink_attention(qf: Any, kf: Any, vf: Any, scale: float, visible: Any, sinks: Any,
                    torch: Any):
    """(out, lse) of float32 (H, S, D) inputs with a sink column of logits
    ``sinks`` (H,) in each row's softmax (its value zero): a row without
    keys attends to the sink alone."""
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if visible is not None:
        scores = scores.masked_fill(~visible, float("-inf"))
    return _sink_softmax(scores, sinks.float()[:, None, None], vf, torch)


def _sink_softmax(scores: Any, sink: Any, vf: Any, torch: Any):
    """(out, lse) of float32 masked (-inf) ``scores`` with a column of sink
    logits ``sink`` (broadcast against one column of the scores) in each
    row's softmax, its value zero: softmax over [scores, sink] without the
    sink's column, times ``vf``; the lse over both (differentiable in the
    sinks)."""
    scores = torch.cat([scores, sink.expand(*scores.shape[:-1], 1)], dim=-1)
    return (torch.matmul(torch.softmax(scores, dim=-1)[..., :-1], vf),
            torch.logsumexp(scores, dim=-1))


def _lse_error(lse: Any, lse_ref: Any, torch: Any) -> float:
    """The largest lse error over the rows that saw keys, or +inf where the
    rows without keys (+inf) differ: those must match exactly."""
    if not bool(torch.equal(torch.isinf(lse), torch.isinf(lse_ref))):
        return float("inf")
    finite_rows = torch.isfinite(lse_ref)
    if not bool(finite_rows.any()):
        return 0.0
    return float((lse[finite_rows] - lse_ref[finite_rows]).abs().max())


def flash_score_modifiers(scores: Any, softcap: float, slopes: Any, torch: Any) -> Any:
    """flash-attn's soft-cap, then its ALiBi, on float32 scaled scores
    ``(..., S_q, S_kv)`` whose last three dims are (heads, queries, keys):
    ``softcap * tanh(s / softcap)`` (0: none), then ``- slope * |i + S_kv -
    S_q - j|`` (the bottom-right diagonal) with ``slopes`` ``(H,)`` or ``(B,
    H)`` broadcast against the leading dims (None: none)."""
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    if slopes is not None:
        sq, skv = scores.shape[-2:]
        i = torch.arange(sq, device=scores.device)[:, None] + skv - sq
        j = torch.arange(skv, device=scores.device)[None, :]
        scores = scores - slopes[..., None, None] * (i - j).abs().float()
    return scores


def reference_mask(seq_q: int, seq_kv: int, causal: bool, alignment: str,
                   window: Tuple[int, int], device: Any, torch: Any) -> Any:
    """The keys each query sees, as a (seq_q, seq_kv) bool tensor, or None
    for all: query i is aligned with key i + d (d = 0 top-left,
    seq_kv - seq_q bottom-right) and sees keys up to i + d when causal, and
    in [i + d - left, i + d + right] with a window (-1: unbounded)."""
    left, right = window
    if causal:
        right = 0
    if not causal and left < 0 and right < 0:
        return None
    d = seq_kv - seq_q if alignment == "bottom_right" else 0
    i = torch.arange(seq_q, device=device)[:, None] + d
    j = torch.arange(seq_kv, device=device)[None, :]
    visible = torch.ones(seq_q, seq_kv, dtype=torch.bool, device=device)
    if right >= 0:
        visible &= j <= i + right
    if left >= 0:
        visible &= j >= i - left
    return visible


def run_case(case: Case, seed: int, tuning: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    import torch

    import kvpipe

    torch.manual_seed(seed)
    q = _make(case, "q", case.heads_q, case.seq_q, torch)
    k = _make(case, "k", case.heads_kv, case.seq_kv, torch)
    v = _make(case, "v", case.heads_kv, case.seq_kv, torch)
    scale = 1.0 / math.sqrt(case.head_dim)
    out = torch.full(tuple(q.shape[:-1]) + (case.v_head_dim,), float("nan"), dtype=q.dtype,
                     device=q.device)
    row: Dict[str, Any] = {"case": case.name}
    try:
        o, lse = kvpipe.attention(q, k, v, causal=case.causal, return_lse=True,
                                  layout=case.layout, out=out,
                                  mask_alignment=case.alignment, window_size=case.window,
                                  **(tuning or {}))
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    ref, lse_ref = _reference(case, q, k, v, scale, torch)
    of = o.float()
    finite = bool(torch.isfinite(of).all())
    rel = float((of - ref).norm() / ref.norm().clamp_min(1e-30))
    max_abs = float((of - ref).abs().max())
    lse_err = _lse_error(lse, lse_ref, torch)
    ok = finite and rel < REL_TOLERANCE and lse_err < LSE_TOLERANCE
    row.update(ok=ok, rel=rel, max_abs=max_abs, lse_err=lse_err, finite=finite)
    return row


_compiles_cache: Dict[Any, bool] = {}


def _compiles(case: Case, tuning: Dict[str, Any]) -> bool:
    """Whether the compiler accepts ``tuning`` at the case's head dims (a
    block size or stage count that suits head dim 64 may not fit the shared
    memory at 256: the verifier says so, and the case is skipped)."""
    import kvpipe

    # A zero-padded head dim (80) runs the kernels of the pair it pads to.
    dims = case.kernel_dims()
    key = (dims["head_dim"], dims.get("value_head_dim"), case.dtype, case.causal,
           tuple(sorted(tuning.items())))
    if key not in _compiles_cache:
        try:
            kvpipe.compile_attention(dims["head_dim"], case.dtype, case.causal,
                                     value_head_dim=dims.get("value_head_dim"), **tuning)
            _compiles_cache[key] = True
        except kvpipe.CompilerError as exc:
            print(f"SKIP {case.name} with {tuning}: {str(exc).splitlines()[0][:200]}",
                  flush=True)
            _compiles_cache[key] = False
    return _compiles_cache[key]


def run(cases: Optional[List[Case]] = None, tuning: Optional[Dict[str, Any]] = None,
        on_plan: bool = False) -> List[Dict[str, Any]]:
    """Each case against the float32 reference (``tuning``: case_tuning)."""
    rows = []
    for i, (case, case_tuned) in enumerate(tuned_cases(cases, tuning, on_plan)):
        start = time.perf_counter()
        row = run_case(case, seed=1234 + i, tuning=case_tuned)
        if tuning:
            row["case"] += " " + ",".join(f"{k}={v}" for k, v in sorted(case_tuned.items()))
        row["seconds"] = round(time.perf_counter() - start, 3)
        rows.append(row)
        _print_row(case.name, row)
    return rows


def _print_row(name: str, row: Dict[str, Any]) -> None:
    """One line per case as it finishes: PASS/FAIL, the errors or the exception."""
    status = "PASS" if row["ok"] else "FAIL"
    detail = (f"rel {row['rel']:.2e} max_abs {row['max_abs']:.2e} lse {row['lse_err']:.2e}"
              if "rel" in row else row.get("error", ""))
    print(f"{status} {name}: {detail}", flush=True)


def to_markdown(rows: List[Dict[str, Any]]) -> str:
    lines = ["| case | result | rel. error | max abs error | lse max error |",
             "| --- | --- | --- | --- | --- |"]
    for row in rows:
        if "rel" in row:
            lines.append(f"| {row['case']} | {'PASS' if row['ok'] else 'FAIL'} | "
                         f"{row['rel']:.2e} | {row['max_abs']:.2e} | {row['lse_err']:.2e} |")
        else:
            lines.append(f"| {row['case']} | FAIL | {row.get('error', '')} | | |")
    passed = sum(r["ok"] for r in rows)
    lines.append(f"\n{passed}/{len(rows)} configurations passed "
                 f"(rel. error < {REL_TOLERANCE}, lse error < {LSE_TOLERANCE}).")
    return "\n".join(lines) + "\n"


def run_torch_integration() -> List[Dict[str, Any]]:
    """torch.compile without graph breaks, and CUDA-graph capture and replay."""
    import torch

    import kvpipe

    rows: List[Dict[str, Any]] = []
    torch.manual_seed(7)
    q, k, v = (torch.randn(2, 4, 300, 128, dtype=torch.bfloat16, device="cuda")
               for _ in range(3))

    def f(q, k, v):
        return kvpipe.attention(q, k, v, causal=True) * 2.0 + 1.0

    try:
        torch._dynamo.reset()
        explanation = torch._dynamo.explain(f)(q, k, v)
        compiled = torch.compile(f, fullgraph=True)
        got, want = compiled(q, k, v).float(), f(q, k, v).float()
        rel = float((got - want).norm() / want.norm())
        ok = explanation.graph_break_count == 0 and rel < 1e-2
        rows.append({"case": "torch.compile(fullgraph=True) vs eager", "ok": ok,
                     "rel": rel, "max_abs": float((got - want).abs().max()),
                     "lse_err": 0.0, "graph_breaks": explanation.graph_break_count})
    except Exception as exc:
        rows.append({"case": "torch.compile(fullgraph=True) vs eager", "ok": False,
                     "error": f"{type(exc).__name__}: {exc}"[:300]})

    try:
        static = [t.clone() for t in (q, k, v)]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            kvpipe.attention(*static, causal=False)  # load the kernel outside capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured, captured_lse = kvpipe.attention(*static, causal=False, return_lse=True)
        fresh = [torch.randn_like(t) for t in static]
        for t, n in zip(static, fresh):
            t.copy_(n)
        graph.replay()
        torch.cuda.synchronize()
        want, want_lse = kvpipe.attention(*fresh, causal=False, return_lse=True)
        ok = bool(torch.equal(captured, want)) and bool(torch.equal(captured_lse, want_lse))
        rows.append({"case": "CUDA graph replay vs eager (bit-exact)", "ok": ok,
                     "rel": float((captured.float() - want.float()).norm() / want.float().norm()),
                     "max_abs": float((captured.float() - want.float()).abs().max()),
                     "lse_err": float((captured_lse - want_lse).abs().max())})
    except Exception as exc:
        rows.append({"case": "CUDA graph replay vs eager (bit-exact)", "ok": False,
                     "error": f"{type(exc).__name__}: {exc}"[:300]})
    for row in rows:
        print(f"{'PASS' if row['ok'] else 'FAIL'} {row['case']}: "
              f"{row.get('error', '')}{row.get('rel', '')}", flush=True)
    return rows


#: run_kvcache's cases: (head_dim, dtype, batch, heads_q, heads_kv, seq_q,
#: capacity, causal, window).
KVCACHE_CASES = [
    (128, "bf16", 4, 32, 8, 1, 3000, True, (-1, -1)),     # decode, GQA 4
    (64, "f16", 3, 8, 8, 1, 1000, False, (-1, -1)),
    (128, "bf16", 3, 8, 2, 37, 2000, True, (-1, -1)),     # chunked prefill
    (128, "bf16", 2, 4, 4, 16, 1500, True, (255, -1)),    # sliding window
    (64, "bf16", 5, 6, 1, 4, 700, False, (64, 3)),        # MQA, both sides
]
#: run_kvcache's CUDA-graph decode step: (batch, heads_q, heads_kv, head_dim,
#: capacity), causal, one query.
KVCACHE_GRAPH_CASE = (4, 16, 4, 128, 2048)


def run_kvcache() -> List[Dict[str, Any]]:
    """``kvpipe.flash_attn.flash_attn_with_kvcache`` on padded KV caches with
    per-sequence lengths (a decode step, chunked prefill, new keys appended
    in place), against a per-sequence float32 reference with flash-attn's
    semantics (bottom-right causal, windows); and a decode step captured in
    a CUDA graph."""
    import torch

    from kvpipe.flash_attn import flash_attn_with_kvcache

    configs = KVCACHE_CASES
    rows: List[Dict[str, Any]] = []
    gen = torch.Generator(device="cpu").manual_seed(11)
    for i, (d, dtype_name, b, hq, hkv, sq, cap, causal, window) in enumerate(configs):
        dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float16
        name = (f"kvcache {dtype_name} d{d} B{b} H{hq}/{hkv} q{sq} cache{cap} "
                f"{'causal' if causal else 'full'} window{window[0]}:{window[1]}")
        torch.manual_seed(100 + i)
        k_cache = torch.randn(b, cap, hkv, d, dtype=dtype, device="cuda")
        v_cache = torch.randn_like(k_cache)
        new = sq  # append as many keys as queries (flash-attn's decode/prefill step)
        # Lengths from 0 (only the new keys) to the capacity left.
        before = torch.randint(0, cap - new + 1, (b,), generator=gen)
        before[0] = 0
        before[-1] = cap - new
        seqlens = before.to(torch.int32).cuda()
        q = torch.randn(b, sq, hq, d, dtype=dtype, device="cuda")
        k_new = torch.randn(b, new, hkv, d, dtype=dtype, device="cuda")
        v_new = torch.randn_like(k_new)
        k_ref, v_ref = k_cache.clone(), v_cache.clone()
        try:
            out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new,
                                               cache_seqlens=seqlens, causal=causal,
                                               window_size=window, return_softmax_lse=True)
            torch.cuda.synchronize()
        except Exception as exc:
            rows.append({"case": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        rel_worst, lse_worst, appended = 0.0, 0.0, True
        scale = 1.0 / math.sqrt(d)
        for s in range(b):
            n0 = int(before[s])
            k_ref[s, n0:n0 + new] = k_new[s]
            v_ref[s, n0:n0 + new] = v_new[s]
            appended &= bool(torch.equal(k_cache[s], k_ref[s])) and bool(
                torch.equal(v_cache[s], v_ref[s]))
            used = n0 + new
            qs = q[s].transpose(0, 1).float()                       # (H, Sq, D)
            ks = k_ref[s, :used].transpose(0, 1).float().repeat_interleave(hq // hkv, 0)
            vs = v_ref[s, :used].transpose(0, 1).float().repeat_interleave(hq // hkv, 0)
            visible = reference_mask(sq, used, causal, "bottom_right", window, q.device, torch)
            ref, lse_ref = _masked_attention(qs, ks, vs, scale, visible, torch)
            ref = ref.transpose(0, 1)
            got = out[s].float()
            rel_worst = max(rel_worst, float((got - ref).norm() / ref.norm().clamp_min(1e-30)))
            lse_worst = max(lse_worst, _lse_error(lse[s], lse_ref, torch))
        ok = appended and rel_worst < REL_TOLERANCE and lse_worst < LSE_TOLERANCE
        rows.append({"case": name + ("" if appended else " (append wrong)"), "ok": ok,
                     "rel": rel_worst, "max_abs": float("nan"), "lse_err": lse_worst})

    # A decode step with fixed shapes, captured in a CUDA graph and replayed
    # on new inputs and lengths.
    case = "kvcache decode step: CUDA graph replay vs eager (bit-exact)"
    try:
        b, hq, hkv, d, cap = KVCACHE_GRAPH_CASE
        k_cache = torch.randn(b, cap, hkv, d, dtype=torch.bfloat16, device="cuda")
        v_cache = torch.randn_like(k_cache)
        q = torch.randn(b, 1, hq, d, dtype=torch.bfloat16, device="cuda")
        seqlens = torch.tensor([5, 2047, 1000, 0], dtype=torch.int32, device="cuda")
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, causal=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens,
                                               causal=True)
        q.copy_(torch.randn_like(q))
        seqlens.copy_(torch.tensor([2048, 1, 17, 600], dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        want = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, causal=True)
        ok = bool(torch.equal(captured, want))
        rows.append({"case": case, "ok": ok, "rel": float((captured.float() - want.float())
                                                           .norm() / want.float().norm()),
                     "max_abs": float((captured.float() - want.float()).abs().max()),
                     "lse_err": 0.0})
    except Exception as exc:
        rows.append({"case": case, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]})
    for row in rows:
        print(f"{'PASS' if row['ok'] else 'FAIL'} {row['case']}: "
              f"{row.get('error', '')}{row.get('rel', '')}", flush=True)
    return rows


def unique_configs(configs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """``configs`` without repeats, in order (the compile lists of the
    check families: a kernel several cases launch is compiled once)."""
    unique: List[Dict[str, Any]] = []
    for config in configs:
        if config not in unique:
            unique.append(config)
    return unique


def _launched_mask(case: Case) -> Tuple[bool, str, bool]:
    """``(causal, mask_alignment, sliding_window)`` of the kernel attention_impl
    launches for the case (kvpipe.attention.launched_mask)."""
    from kvpipe.attention import launched_mask, normalise_window

    left, right = normalise_window(case.window, case.causal)
    window = left >= 0 or right >= 0
    causal, alignment = launched_mask(case.causal, case.alignment, window, case.seq_q,
                                      case.seq_kv, False)
    return causal, alignment, window


def case_tuning(case: Case, tuning: Optional[Dict[str, Any]],
                on_plan: bool = False) -> Dict[str, Any]:
    """The tuning a case is checked with: ``tuning`` as given (it replaces the
    prefill plan, as in kvpipe.attention), or with ``on_plan`` the plan's choice
    for the case plus ``tuning`` (a lever tried on the kernels kvpipe.attention
    launches: ``check --tune NAME=VALUE --on-plan``)."""
    if not on_plan or not tuning:
        return dict(tuning or {})
    from kvpipe.plans import prefill_plan

    causal, alignment, window = _launched_mask(case)
    planned = prefill_plan(*case.kernel_pair(), causal, alignment, window, False, False,
                           case.seq_q, case.seq_kv, {})
    return {**planned, **tuning}


def tuned_cases(cases: Optional[List[Case]], tuning: Optional[Dict[str, Any]],
                on_plan: bool = False) -> List[Tuple[Case, Dict[str, Any]]]:
    """The cases (default: the grid) with the tuning each runs with
    (case_tuning); with a tuning, only those whose head dims it fits (a
    tuning's kernels exist per head dim: the verifier may refuse it at one)."""
    cases = cases if cases is not None else default_grid()
    tuned = [(c, case_tuning(c, tuning, on_plan)) for c in cases]
    if tuning:
        tuned = [(c, t) for c, t in tuned if "head_dim" not in tuning and _compiles(c, t)]
    return tuned


def kernel_configs(cases: Optional[List[Case]] = None, with_kvcache: bool = True,
                   tuning: Optional[Dict[str, Any]] = None,
                   on_plan: bool = False) -> List[Dict[str, Any]]:
    """The ``compile_attention`` arguments of every kernel that ``run(cases)``
    (default: the grid) and ``run_kvcache`` launch, so that a machine with
    the compiler can fill the kernel cache for a GPU machine without one
    (``python -m kvpipe compile --for-check``). Mirrors attention_impl's
    choice of kernel (_launched_mask) and ``tuning`` (case_tuning, as
    ``run(cases, tuning=..., on_plan=...)`` passes it) or else the prefill
    plan's."""
    from kvpipe.plans import prefill_plan

    wanted = []
    for case, tuned in tuned_cases(cases, tuning, on_plan):  # run()'s
        causal, alignment, window = _launched_mask(case)
        dims = case.kernel_dims()
        planned = prefill_plan(*case.kernel_pair(), causal, alignment, window, False, False,
                               case.seq_q, case.seq_kv, tuned)
        wanted.append(dict(head_dim=dims["head_dim"], dtype=case.dtype, causal=causal,
                           value_head_dim=dims.get("value_head_dim"), mask_alignment=alignment,
                           sliding_window=window, kv_lengths=False, **planned))
    if with_kvcache and not tuning:  # check --tune runs the grid alone
        # flash_attn_with_kvcache chooses num_splits and pack-GQA (decode_plan,
        # for the H200's SMs); its cases append keys, so every sequence has some.
        b, hq, hkv, d, cap = KVCACHE_GRAPH_CASE
        for d, dtype, b, hq, hkv, sq, cap, causal, window in KVCACHE_CASES + [
                (d, "bf16", b, hq, hkv, 1, cap, True, (-1, -1))]:
            case = DecodeCase(dtype, d, hq, hkv, sq, cap, (cap,) * b, causal, window, 0)
            wanted.append(_decode_kernel_config(case, H200_MULTIPROCESSORS))
    return unique_configs(wanted)


def backward_grid() -> List[Case]:
    """The backward's grid: both dtypes and head dims, causal and not, odd
    lengths, seq_q != seq_kv, GQA/MQA, both layouts, strided views."""
    # The forward's shapes, with fewer batches and heads (the float32
    # reference autograd is the slow part).
    cases = _shape_grid([(1, min(hq, 2), min(hkv, 2), sq, skv)
                         for _, hq, hkv, sq, skv in SHAPES])
    for causal in (False, True):
        for head_dim in (64, 128):
            cases += [
                Case("bf16", head_dim, causal, 2, 8, 2, 160, 333),            # GQA
                Case("bf16", head_dim, causal, 1, 6, 1, 129, 129),            # MQA
                Case("bf16", head_dim, causal, 1, 4, 2, 190, 257, "bshd", True),
            ]
    cases.append(Case("bf16", 128, True, 1, 2, 2, 1024, 1024))  # longer causal
    # Head dim 96 (the 64-byte swizzle, three column blocks of 32, dQ by
    # turns): odd lengths, seq_q != seq_kv, GQA, bshd strided, both dtypes.
    for causal in (False, True):
        cases += [Case("bf16", 96, causal, 1, 2, 2, 197, 197),
                  Case("f16", 96, causal, 1, 2, 2, 100, 300),
                  Case("bf16", 96, causal, 1, 2, 2, 300, 77),
                  Case("bf16", 96, causal, 2, 8, 2, 160, 333),
                  Case("bf16", 96, causal, 1, 4, 2, 190, 257, "bshd", True)]
    # Head dims 192 and 256 (the head dim split over the consumer warpgroups,
    # dK^T and dV^T stored transposed; 96 and 64 keys per CTA): the same
    # shapes, and a longer causal one crossing many K/V blocks.
    for head_dim in (192, 256):
        for causal in (False, True):
            cases += [Case("bf16", head_dim, causal, 1, 2, 2, 197, 197),
                      Case("f16", head_dim, causal, 1, 2, 2, 100, 300),
                      Case("bf16", head_dim, causal, 1, 2, 2, 300, 77),
                      Case("bf16", head_dim, causal, 2, 8, 2, 160, 333),
                      Case("bf16", head_dim, causal, 1, 4, 2, 190, 257, "bshd", True)]
        cases.append(Case("bf16", head_dim, True, 1, 2, 2, 1000, 1000))
    # Zero-padded head dims (the forward grid's): gradients of the padded
    # inputs, cut back.
    for head_dim, value_head_dim in ((80, None), (32, None), (128, 64)):
        cases += [Case("bf16", head_dim, True, 2, 8, 2, 160, 333, value_head_dim=value_head_dim),
                  Case("f16", head_dim, False, 1, 4, 2, 190, 257, "bshd", True,
                       value_head_dim=value_head_dim)]
    # 192 with V's 128 (DeepSeek's): two of the three warpgroups hold dV^T.
    for causal in (False, True):
        cases += [Case("bf16", 192, causal, 1, 2, 2, 197, 300, value_head_dim=128),
                  Case("f16", 192, causal, 2, 8, 2, 160, 333, value_head_dim=128),
                  Case("bf16", 192, causal, 1, 4, 2, 190, 257, "bshd", True,
                       value_head_dim=128)]
    return cases


def backward_kernel_configs() -> List[Dict[str, Any]]:
    """The ``compile_attention`` arguments of the backward families (and the
    forward kernels whose O and log-sum-exp they take) that ``run_backward``
    and ``run_backward_integration`` launch."""
    from kvpipe.plans import prefill_kernel_configs, prefill_plan

    configs: List[Dict[str, Any]] = []

    def add(case: Case, **backward: Any) -> None:
        # The forward kernel attention_impl launches (the prefill plan's for
        # short causal sequences), then the backward family.
        dims = case.kernel_dims()
        planned = prefill_plan(*case.kernel_pair(), case.causal, "top_left", False, False,
                               False, case.seq_q, case.seq_kv, {})
        for config in (dict(**dims, dtype=case.dtype, causal=case.causal, **planned),
                       dict(**dims, dtype=case.dtype, causal=case.causal, backward=True,
                            **backward)):
            if config not in configs:
                configs.append(config)

    for case in backward_grid():
        add(case)
    for case in deterministic_cases():
        config = dict(head_dim=case.head_dim, dtype=case.dtype, causal=case.causal,
                      backward=True, deterministic=True)
        if config not in configs:
            configs.append(config)
    for case, tuning in tuned_backward_cases():
        add(case, **tuning)
    # run_backward_integration's sinks case: the forward kernel with sinks
    # (its backward family is the one without).
    _, _, n, d = INTEGRATION_SHAPE
    configs += prefill_kernel_configs(d, None, "bf16", True, "top_left", False, None, n, n,
                                      sinks=True)
    return configs


def deterministic_cases() -> List[Case]:
    """Backward cases run in deterministic mode: several times each, the
    gradients must be bit-identical (and right). The grids exceed the
    resident CTAs, and the last case has more K/V blocks in one head (136)
    than the H200 has SMs: the ordered dQ additions of a causal CTA wait on
    other K/V blocks of its head, which must have started before it (a
    CTA waiting on one not yet started would never finish)."""
    return [Case("bf16", 128, True, 2, 16, 16, 4096, 4096),
            Case("bf16", 64, True, 1, 1, 1, 17408, 17408),
            Case("bf16", 128, False, 1, 8, 2, 1000, 3000),
            Case("f16", 64, True, 3, 4, 1, 777, 777, layout="bshd"),
            Case("bf16", 64, False, 2, 6, 3, 129, 65),
            # The split head dim: three consumer warpgroups' turns per K/V
            # block of 96 keys (192), and 64-key blocks (256).
            Case("bf16", 192, True, 1, 4, 2, 1000, 1000),
            Case("bf16", 256, False, 1, 4, 4, 513, 700)]


def run_deterministic(repeats: int = 3) -> List[Dict[str, Any]]:
    """Deterministic mode: ``repeats`` backward passes of each case on the
    same inputs give bit-identical dQ, dK, dV, within the tolerance of torch's
    float32 autograd."""
    import torch

    import kvpipe
    from kvpipe.backward import attention_backward

    rows = []
    for i, case in enumerate(deterministic_cases()):
        torch.manual_seed(777 + i)
        q = _make(case, "q", case.heads_q, case.seq_q, torch)
        k = _make(case, "k", case.heads_kv, case.seq_kv, torch)
        v = _make(case, "v", case.heads_kv, case.seq_kv, torch)
        do = torch.randn_like(q, memory_format=torch.contiguous_format)
        name = f"backward deterministic x{repeats}: {case.name}"
        try:
            with torch.no_grad():
                o, lse = kvpipe.attention(q, k, v, causal=case.causal, return_lse=True,
                                          layout=case.layout)
            runs = []
            for _ in range(repeats):
                outs = [torch.full_like(t, float("nan"), memory_format=torch.contiguous_format)
                        for t in (q, k, v)]
                runs.append(attention_backward(q, k, v, o, lse, do, causal=case.causal,
                                               layout=case.layout, dq=outs[0], dk=outs[1],
                                               dv=outs[2], deterministic=True))
            torch.cuda.synchronize()
        except Exception as exc:
            rows.append({"case": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        identical = all(torch.equal(a, b) for run in runs[1:] for a, b in zip(runs[0], run))
        refs = _reference_grads(case, q, k, v, do, 1.0 / math.sqrt(case.head_dim), torch)
        rel = max(float((g.float() - r).norm() / max(float(r.norm()), 1e-3 * math.sqrt(r.numel())))
                  for g, r in zip(runs[0], refs))
        finite = all(bool(torch.isfinite(g).all()) for g in runs[0])
        rows.append({"case": name, "ok": identical and finite and rel < REL_TOLERANCE,
                     "rel": rel, "bit_identical": identical, "max_abs": 0.0, "lse_err": 0.0})
    for row in rows:
        print(f"{'PASS' if row['ok'] else 'FAIL'} {row['case']}: "
              f"{row.get('error', '')}{row.get('rel', '')}", flush=True)
    return rows


def _reference_grads(case: Case, q: Any, k: Any, v: Any, do: Any, scale: float, torch: Any):
    """dq, dk, dv by torch's float32 autograd, in the case's layout."""
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    out, _ = _reference(case, qf, kf, vf, scale, torch)
    out.backward(do.float())
    return qf.grad, kf.grad, vf.grad


def staged_dq_cases() -> List[Case]:
    """Backward cases run again with ``dq_atomics=False`` (head dims above
    128: dQ staged and bulk-reduced, deterministic mode's way, rather than
    the default's reductions from registers): odd lengths, seq_q != seq_kv,
    GQA, bshd strided, f16, causal, V's 128 with Q/K's 192."""
    cases = []
    for head_dim in (192, 256):
        cases += [Case("bf16", head_dim, False, 1, 2, 2, 197, 300),
                  Case("f16", head_dim, True, 2, 8, 2, 160, 333),
                  Case("bf16", head_dim, True, 1, 4, 2, 190, 257, "bshd", True),
                  Case("bf16", head_dim, True, 1, 2, 2, 1000, 1000)]
    cases.append(Case("bf16", 192, True, 1, 2, 2, 197, 300, value_head_dim=128))
    return cases


def global_statistics_cases() -> List[Case]:
    """Backward cases run again with ``shared_statistics=False`` (the
    log-sum-exp and delta read from global memory per thread rather than
    copied into shared memory with Q and dO): both consumer forms (keys
    split at 64 and 128, head dim split at 256), causal with odd lengths,
    GQA, bshd strided."""
    return [Case("bf16", 64, False, 1, 2, 2, 197, 300),
            Case("bf16", 128, True, 2, 8, 2, 160, 333),
            Case("f16", 128, True, 1, 4, 2, 190, 257, "bshd", True),
            Case("bf16", 256, True, 1, 2, 2, 1000, 1000)]


def tuned_backward_cases() -> List[Tuple[Case, Dict[str, bool]]]:
    """The backward cases ``check --backward`` runs with a tuning attribute
    other than the default, and that attribute."""
    return ([(case, {"dq_atomics": False}) for case in staged_dq_cases()]
            + [(case, {"shared_statistics": False}) for case in global_statistics_cases()])


def run_backward_case(case: Case, seed: int, tuning: Optional[Dict[str, bool]] = None
                      ) -> Dict[str, Any]:
    import torch

    import kvpipe
    from kvpipe.backward import attention_backward

    torch.manual_seed(seed)
    q = _make(case, "q", case.heads_q, case.seq_q, torch)
    k = _make(case, "k", case.heads_kv, case.seq_kv, torch)
    v = _make(case, "v", case.heads_kv, case.seq_kv, torch)
    scale = 1.0 / math.sqrt(case.head_dim)
    row: Dict[str, Any] = {"case": case.name + "".join(
        f" {name}={int(value)}" for name, value in (tuning or {}).items())}
    try:
        with torch.no_grad():
            o, lse = kvpipe.attention(q, k, v, causal=case.causal, return_lse=True,
                                      layout=case.layout)
        # dO has O's shape (v's head dim).
        do = torch.randn_like(o, memory_format=torch.contiguous_format)
        # Poisoned outputs: every element the kernels miss stays NaN.
        outs = [torch.full_like(t, float("nan"), memory_format=torch.contiguous_format)
                for t in (q, k, v)]
        dq, dk, dv = attention_backward(q, k, v, o, lse, do, causal=case.causal,
                                        layout=case.layout, dq=outs[0], dk=outs[1], dv=outs[2],
                                        **(tuning or {}))
        # And through autograd: kvpipe.attention(...).backward(do).
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        kvpipe.attention(*leaves, causal=case.causal, layout=case.layout).backward(do)
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    refs = _reference_grads(case, q, k, v, do, scale, torch)
    compare_grads(row, (dq, dk, dv), [leaf.grad for leaf in leaves], refs, torch)
    return row


def compare_grads(row: Dict[str, Any], got: Any, autograd: Any, refs: Any, torch: Any) -> None:
    """Fills ``row`` (ok, rel, errors) with the relative errors of (dq, dk,
    dv) from the kernels and from autograd against the float32 reference."""
    ok, errors = True, {}
    for name, direct, auto, ref in zip(("dq", "dk", "dv"), got, autograd, refs):
        for label, value in ((name, direct), (name + "_autograd", auto)):
            gf = value.float()
            finite = bool(torch.isfinite(gf).all())
            # Relative to the reference, or to a floor of 1e-3 per element
            # where the reference vanishes: with one key, dS = P (dP - delta)
            # is exactly 0 in float32 and ~1e-8 in the kernel (first GPU run,
            # results/gpu-results.md), which is no error.
            floor = 1e-3 * math.sqrt(ref.numel())
            rel = float((gf - ref).norm() / max(float(ref.norm()), floor))
            errors[label] = rel
            ok = ok and finite and rel < REL_TOLERANCE
    row.update(ok=ok, rel=max(errors.values()), errors=errors)


def run_backward(cases: Optional[List[Case]] = None) -> List[Dict[str, Any]]:
    """The backward cases (the grid, then ``tuned_backward_cases`` with
    their tuning, when ``cases`` is None)."""
    runs = ([(case, None) for case in cases] if cases is not None else
            [(case, None) for case in backward_grid()] + tuned_backward_cases())
    rows = []
    for i, (case, tuning) in enumerate(runs):
        start = time.perf_counter()
        row = run_backward_case(case, seed=4321 + i, tuning=tuning)
        row["seconds"] = round(time.perf_counter() - start, 3)
        rows.append(row)
        detail = (" ".join(f"{k} {v:.2e}" for k, v in row["errors"].items())
                  if "errors" in row else row.get("error", ""))
        print(f"{'PASS' if row['ok'] else 'FAIL'} backward {row['case']}: {detail}", flush=True)
    return rows


def backward_to_markdown(rows: List[Dict[str, Any]]) -> str:
    lines = ["| case | result | dQ rel. | dK rel. | dV rel. | via autograd (max) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        e = row.get("errors")
        if e:
            # Rows checked through autograd alone (attention sinks) have no
            # second column; their other errors (the output, the sinks'
            # gradient) go with the case.
            autograd = [v for k, v in e.items() if k.endswith("_autograd")]
            auto = f"{max(autograd):.2e}" if autograd else "-"
            extra = ", ".join(f"{k} {v:.2e}" for k, v in e.items()
                              if k not in ("dq", "dk", "dv") and not k.endswith("_autograd"))
            case = f"{row['case']} ({extra})" if extra else row["case"]
            lines.append(f"| {case} | {'PASS' if row['ok'] else 'FAIL'} | "
                         f"{e['dq']:.2e} | {e['dk']:.2e} | {e['dv']:.2e} | {auto} |")
        else:
            lines.append(f"| {row['case']} | FAIL | {row.get('error', '')} | | | |")
    passed = sum(r["ok"] for r in rows)
    lines.append(f"\n{passed}/{len(rows)} backward configurations passed "
                 f"(relative error of dQ, dK, dV < {REL_TOLERANCE}, against torch float32 "
                 "autograd; the norm of the reference floored at 1e-3 per element).")
    return "\n".join(lines) + "\n"


#: (B, H, S, D) of run_backward_integration's causal bf16 training steps.
INTEGRATION_SHAPE = (2, 4, 300, 128)


def run_backward_integration() -> List[Dict[str, Any]]:
    """A training step through torch: ``torch.compile(fullgraph=True)`` of
    forward + backward without a graph break, matching eager gradients; and
    forward + backward captured in a CUDA graph, replayed on new inputs,
    bit-identical to eager."""
    import torch

    import kvpipe

    rows: List[Dict[str, Any]] = []
    torch.manual_seed(17)
    shape = INTEGRATION_SHAPE

    def leaves():
        return [torch.randn(shape, dtype=torch.bfloat16, device="cuda").requires_grad_()
                for _ in range(3)]

    def step(q, k, v, do):
        o = kvpipe.attention(q, k, v, causal=True)
        grads = torch.autograd.grad(o, (q, k, v), do)
        return (o, *grads)

    def layer(q, k, v):
        return kvpipe.attention(q, k, v, causal=True) * 2.0

    def sink_layer(q, k, v, sinks):
        return kvpipe.attention(q, k, v, causal=True, sinks=sinks) * 2.0

    def compiled_vs_eager(case: str, fn: Any, with_sinks: bool) -> None:
        """torch.compile(fullgraph=True) of ``fn`` against ``fn`` eagerly:
        no graph break, the output and its inputs' gradients."""
        try:
            inputs = leaves()
            if with_sinks:
                inputs.append(torch.randn(shape[1], device="cuda").requires_grad_())
            do = torch.randn(shape, dtype=torch.bfloat16, device="cuda")
            torch._dynamo.reset()
            explanation = torch._dynamo.explain(fn)(*inputs)
            compiled = torch.compile(fn, fullgraph=True)

            def run(f):
                for t in inputs:
                    t.grad = None
                o = f(*inputs)
                o.backward(do)
                return (o.detach(), *(t.grad.clone() for t in inputs))

            got, want = run(compiled), run(fn)
            rel = max(float((g.float() - w.float()).norm() / w.float().norm())
                      for g, w in zip(got, want))
            ok = explanation.graph_break_count == 0 and rel < 1e-2
            rows.append({"case": case, "ok": ok, "rel": rel, "max_abs": 0.0, "lse_err": 0.0,
                         "graph_breaks": explanation.graph_break_count})
        except Exception as exc:
            rows.append({"case": case, "ok": False,
                         "error": f"{type(exc).__name__}: {exc}"[:300]})

    compiled_vs_eager("backward: torch.compile(fullgraph=True) forward, .backward() vs eager",
                      layer, False)
    compiled_vs_eager("sinks: torch.compile(fullgraph=True) forward, .backward() vs eager "
                      "(O, dQ, dK, dV and the sinks' gradient)", sink_layer, True)

    case = ("backward: forward + backward in a CUDA graph vs eager (O, dK, dV bit-exact; "
            "dQ, summed with atomics, to 1e-2)")
    try:
        q, k, v = leaves()
        do = torch.randn(shape, dtype=torch.bfloat16, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step(q, k, v, do)  # load the kernels outside capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = step(q, k, v, do)
        with torch.no_grad():
            for t in (q, k, v, do):
                t.copy_(torch.randn_like(t))
        graph.replay()
        torch.cuda.synchronize()
        want = step(q, k, v, do)
        o_c, dq_c, dk_c, dv_c = captured
        o_w, dq_w, dk_w, dv_w = want
        rel = float((dq_c.float() - dq_w.float()).norm() / dq_w.float().norm())
        ok = (all(bool(torch.equal(c, w)) for c, w in ((o_c, o_w), (dk_c, dk_w), (dv_c, dv_w)))
              and rel < REL_TOLERANCE)
        rows.append({"case": case, "ok": ok, "rel": rel, "max_abs": 0.0, "lse_err": 0.0})
    except Exception as exc:
        rows.append({"case": case, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]})
    for row in rows:
        print(f"{'PASS' if row['ok'] else 'FAIL'} {row['case']}: "
              f"{row.get('error', '')}{row.get('rel', '')}", flush=True)
    return rows


# ---------------------------------------------------------------------------
# Decode: pack-GQA and split-KV (``check --decode``)
# ---------------------------------------------------------------------------

#: The SMs the decode heuristic assumes when kernels are compiled away from
#: the GPU (``compile --for-check --decode``): the H200's.
H200_MULTIPROCESSORS = 132


@dataclasses.dataclass(frozen=True)
class DecodeCase:
    """A decode step (few queries against a padded KV cache with per-sequence
    lengths), bshd layout, bottom-right aligned masks (flash-attn's)."""

    dtype: str
    head_dim: int
    heads_q: int
    heads_kv: int
    seq_q: int
    capacity: int
    #: Keys per sequence (flash-attn's cache_seqlens); the batch is its length.
    lengths: Tuple[int, ...]
    causal: bool
    window: Tuple[int, int]
    #: flash-attn's num_splits: 0 chooses, 1 does not split.
    num_splits: int
    #: Modifiers in the decode kernels (``_decode_modifiers``), "+"-joined:
    #: "softcap" (30), "alibi" (per-head slopes, each sequence's diagonal),
    #: "stride" (a mask_mod keeping the keys not 1 mod 3: no shape to prove).
    mods: str = ""

    @property
    def batch(self) -> int:
        return len(self.lengths)

    @property
    def name(self) -> str:
        mask = "causal" if self.causal else "full"
        if self.window != (-1, -1):
            mask += f",window{self.window[0]}:{self.window[1]}"
        lengths = "/".join(str(n) for n in self.lengths)
        return (f"decode {self.dtype} d{self.head_dim} H{self.heads_q}/{self.heads_kv} "
                f"q{self.seq_q} cache{self.capacity} lengths {lengths} {mask} "
                f"splits {self.num_splits or 'chosen'}"
                + (f" mods {self.mods}" if self.mods else ""))


def decode_grid() -> List[DecodeCase]:
    """Sq 1, 4, 16; Hq/Hkv 32/8, 28/4 (a group of 7), 8/1 (MQA), 16/16 (no
    group); num_splits 1, 3 and chosen; caches of 1 to 32k keys with a full,
    a one-token, a partial and an empty sequence; no mask, bottom-right
    causal, a causal window and a two-sided window, in rotation."""
    heads = [(32, 8), (28, 4), (8, 1), (16, 16)]
    masks = [(False, (-1, -1)), (True, (-1, -1)), (True, (255, -1)), (False, (64, 3))]
    capacities = [1, 700, 5000, 32768]
    cases = []
    for i, (hq, hkv) in enumerate(heads):
        for j, sq in enumerate((1, 4, 16)):
            for k, splits in enumerate((1, 3, 0)):
                causal, window = masks[(i + j + k) % len(masks)]
                capacity = capacities[(i + 2 * j + k) % len(capacities)]
                lengths = (capacity, 1, max(1, 2 * capacity // 3), 0)
                dtype, head_dim = ("f16", 64) if (i + j + k) % 3 == 2 else ("bf16", 128)
                cases.append(DecodeCase(dtype, head_dim, hq, hkv, sq, capacity, lengths,
                                        causal, window, splits))
    # Modifiers: packed rows with heads of their own (ALiBi's slope per row),
    # a mask_mod tested per element, chosen and forced splits.
    cases += [DecodeCase("bf16", 128, 32, 8, 4, 5000, (5000, 1, 3333, 0), True, (-1, -1), 0,
                         "alibi"),
              DecodeCase("bf16", 128, 28, 4, 1, 32768, (32768, 1, 20000, 0), True, (-1, -1), 3,
                         "softcap+stride"),
              DecodeCase("f16", 64, 16, 16, 16, 700, (700, 1, 466, 0), False, (-1, -1), 0,
                         "softcap+alibi"),
              DecodeCase("bf16", 128, 8, 1, 1, 32768, (32768, 1, 21845, 0), True, (255, -1), 0,
                         "alibi+stride")]
    return cases


def _decode_modifiers(case: DecodeCase, slopes: Any, shift: Any, lengths: Any
                      ) -> Tuple[Any, Any]:
    """(score_mod, mask_mod) of a decode case: the library's soft-cap and
    ALiBi (its diagonal each sequence's: query i of S_q at key i + n_k -
    S_q, ``shift`` the (1,) int tensor -S_q), a strided mask_mod."""
    from kvpipe import modifiers

    parts = case.mods.split("+") if case.mods else []
    scores = [modifiers.soft_cap(30.0)] if "softcap" in parts else []
    if "alibi" in parts:
        scores.append(modifiers.alibi(slopes, shift, kv_lengths=lengths))
    score_mod = (scores[0] if len(scores) == 1 else modifiers.compose_scores(*scores)
                 if scores else None)
    mask_mod = ((lambda b, h, q_idx, kv_idx: kv_idx % 3 != 1) if "stride" in parts else None)
    return score_mod, mask_mod


def _decode_kernel_config(case: DecodeCase, multiprocessors: int) -> Dict[str, Any]:
    """The compile_attention arguments of the kernel a decode case launches
    (attention_impl's choice, through decode_plan)."""
    from kvpipe.attention import normalise_window
    from kvpipe.plans import decode_plan

    left, right = normalise_window(case.window, case.causal)
    window = left >= 0 or right >= 0
    num_splits, pack, tuning = decode_plan(
        case.batch, case.heads_q, case.heads_kv, case.seq_q, case.capacity, case.head_dim,
        case.head_dim, case.num_splits, None, multiprocessors, {})
    regions = {}
    if case.mods:
        from kvpipe import modifiers
        from kvpipe.check_modifiers import _ShapeOnly

        traced = modifiers.trace(*_decode_modifiers(
            case, _ShapeOnly((case.heads_q,), "float32"), _ShapeOnly((1,), "int32"),
            _ShapeOnly((case.batch,), "int32")))
        regions = dict(modifiers=traced.ir, aux_types=traced.aux_types)
    return dict(head_dim=case.head_dim, dtype=case.dtype, causal=case.causal,
                value_head_dim=None,
                mask_alignment="bottom_right" if case.causal or window else "top_left",
                sliding_window=window, kv_lengths=True, split_kv=num_splits > 1,
                pack_gqa=pack, **tuning, **regions)


def decode_kernel_configs(multiprocessors: int = H200_MULTIPROCESSORS) -> List[Dict[str, Any]]:
    """The kernels ``run_decode`` launches on a GPU with ``multiprocessors``
    SMs (``compile --for-check --decode``), and those of
    ``run_kvcache``'s flash_attn_with_kvcache calls, which choose theirs."""
    wanted = [_decode_kernel_config(case, multiprocessors) for case in decode_grid()]
    return unique_configs(wanted)


def run_decode_case(case: DecodeCase, seed: int) -> Dict[str, Any]:
    import torch

    import kvpipe

    torch.manual_seed(seed)
    dtype = torch.bfloat16 if case.dtype == "bf16" else torch.float16
    b, d = case.batch, case.head_dim
    q = torch.randn(b, case.seq_q, case.heads_q, d, dtype=dtype, device="cuda")
    k_cache = torch.randn(b, case.capacity, case.heads_kv, d, dtype=dtype, device="cuda")
    v_cache = torch.randn_like(k_cache)
    lengths = torch.tensor(case.lengths, dtype=torch.int32, device="cuda")
    out = torch.full(tuple(q.shape), float("nan"), dtype=dtype, device="cuda")
    left, right = case.window
    slopes = torch.rand(case.heads_q, device="cuda") * 0.3
    score_mod, mask_mod = _decode_modifiers(
        case, slopes, torch.tensor([-case.seq_q], dtype=torch.int32, device="cuda"), lengths)
    row: Dict[str, Any] = {"case": case.name}
    try:
        o, lse = kvpipe.attention(q, k_cache, v_cache, causal=case.causal, return_lse=True,
                                  layout="bshd", out=out, mask_alignment="bottom_right",
                                  window_size=(left, right), kv_lengths=lengths,
                                  num_splits=case.num_splits, pack_gqa=None,
                                  score_mod=score_mod, mask_mod=mask_mod)
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    scale = 1.0 / math.sqrt(d)
    group = case.heads_q // case.heads_kv
    rel_worst, abs_worst, lse_worst, finite = 0.0, 0.0, 0.0, True
    for s, used in enumerate(case.lengths):
        qs = q[s].transpose(0, 1).float()                                   # (H, Sq, D)
        ks = k_cache[s, :used].transpose(0, 1).float().repeat_interleave(group, 0)
        vs = v_cache[s, :used].transpose(0, 1).float().repeat_interleave(group, 0)
        visible = reference_mask(case.seq_q, used, case.causal, "bottom_right", case.window,
                                 q.device, torch)
        if case.mods:
            ref, lse_ref = _decode_reference(case, qs, ks, vs, scale, visible, slopes, torch)
        else:
            ref, lse_ref = _masked_attention(qs, ks, vs, scale, visible, torch)
        got = o[s].transpose(0, 1).float()
        finite &= bool(torch.isfinite(got).all())
        # A sequence whose rows all see no key has a zero reference: the
        # error is then absolute.
        norm = float(ref.norm())
        error = float((got - ref).norm()) / norm if norm > 0 else float((got - ref).abs().max())
        rel_worst = max(rel_worst, error)
        abs_worst = max(abs_worst, float((got - ref).abs().max()))
        lse_worst = max(lse_worst, _lse_error(lse[s], lse_ref, torch))
    ok = finite and rel_worst < REL_TOLERANCE and lse_worst < LSE_TOLERANCE
    row.update(ok=ok, rel=rel_worst, max_abs=abs_worst, lse_err=lse_worst, finite=finite)
    return row


def _decode_reference(case: DecodeCase, qs: Any, ks: Any, vs: Any, scale: float,
                      visible: Any, slopes: Any, torch: Any) -> Tuple[Any, Any]:
    """(out, lse) of one sequence's (H, S_q, D) float32 inputs with the
    case's modifiers written out (``_decode_modifiers``)."""
    from kvpipe.check_modifiers import _softmax

    parts = case.mods.split("+")
    n = ks.shape[1]
    scores = flash_score_modifiers(torch.matmul(qs, ks.transpose(-1, -2)) * scale,
                                   30.0 if "softcap" in parts else 0.0,
                                   slopes if "alibi" in parts else None, torch)
    j = torch.arange(n, device=qs.device)[None, :]
    keep = (j % 3 != 1).expand(case.seq_q, n) if "stride" in parts else None
    if visible is not None:
        keep = visible if keep is None else keep & visible
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return _softmax(scores, vs, torch)


def run_decode(cases: Optional[List[DecodeCase]] = None) -> List[Dict[str, Any]]:
    """``check --decode``: the decode grid through ``kvpipe.attention`` with
    ``num_splits`` and pack-GQA chosen as flash_attn_with_kvcache chooses
    them (poisoned output, float32 per-sequence reference), then
    ``flash_attn_with_kvcache`` itself for each split choice on a GQA decode
    step."""
    import torch

    from kvpipe.flash_attn import flash_attn_with_kvcache

    rows = []
    for i, case in enumerate(cases if cases is not None else decode_grid()):
        start = time.perf_counter()
        row = run_decode_case(case, seed=4321 + i)
        row["seconds"] = round(time.perf_counter() - start, 3)
        rows.append(row)
        _print_row(case.name, row)
    # The API: every split choice must give the unsplit answer (to rounding).
    torch.manual_seed(77)
    b, hq, hkv, d, cap = 2, 32, 8, 128, 9000
    q = torch.randn(b, 1, hq, d, dtype=torch.bfloat16, device="cuda")
    k_cache = torch.randn(b, cap, hkv, d, dtype=torch.bfloat16, device="cuda")
    v_cache = torch.randn_like(k_cache)
    seqlens = torch.tensor([8999, 4000], dtype=torch.int32, device="cuda")
    api_rows = len(rows)
    try:
        want, want_lse = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens,
                                                 num_splits=1, return_softmax_lse=True)
        for splits in (0, 2, 7, 128):
            got, got_lse = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens,
                                                   num_splits=splits, return_softmax_lse=True)
            torch.cuda.synchronize()
            rel = float((got.float() - want.float()).norm() / want.float().norm())
            lse_err = _lse_error(got_lse, want_lse, torch)
            rows.append({"case": f"flash_attn_with_kvcache num_splits={splits} vs 1",
                         "ok": rel < REL_TOLERANCE and lse_err < LSE_TOLERANCE, "rel": rel,
                         "max_abs": float((got.float() - want.float()).abs().max()),
                         "lse_err": lse_err})
    except Exception as exc:
        rows.append({"case": "flash_attn_with_kvcache num_splits", "ok": False,
                     "error": f"{type(exc).__name__}: {exc}"[:300]})
    for row in rows[api_rows:]:
        _print_row(row["case"], row)
    return rows


def decode_api_kernel_configs(multiprocessors: int = H200_MULTIPROCESSORS) -> List[Dict[str, Any]]:
    """The kernels of run_decode's flash_attn_with_kvcache comparison."""
    from kvpipe.plans import decode_plan

    configs = []
    for splits in (1, 0, 2, 7, 128):
        num_splits, pack, tuning = decode_plan(2, 32, 8, 1, 9000, 128, 128, splits, None,
                                               multiprocessors, {})
        config = dict(head_dim=128, dtype="bf16", causal=False, value_head_dim=None,
                      mask_alignment="top_left", sliding_window=False, kv_lengths=True,
                      split_kv=num_splits > 1, pack_gqa=pack, **tuning)
        if config not in configs:
            configs.append(config)
    return configs
