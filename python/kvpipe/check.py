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
from typing import Any, Dict, List, Optional

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

    @property
    def v_head_dim(self) -> int:
        return self.value_head_dim if self.value_head_dim is not None else self.head_dim

    @property
    def name(self) -> str:
        extra = ",strided" if self.strided else ""
        dims = f"d{self.head_dim}" + (f"v{self.value_head_dim}" if self.value_head_dim else "")
        return (f"{self.dtype} {dims} {'causal' if self.causal else 'full'} "
                f"B{self.batch} H{self.heads_q}/{self.heads_kv} "
                f"{self.seq_q}x{self.seq_kv} {self.layout}{extra}")


def default_grid() -> List[Case]:
    cases: List[Case] = []
    shapes = [
        (2, 4, 4, 256, 256),   # tile multiples
        (1, 2, 2, 1, 1),       # a single query and key
        (2, 3, 3, 197, 197),   # odd lengths, tails in both dimensions
        (1, 2, 2, 100, 300),   # seq_q < seq_kv
        (1, 2, 2, 300, 77),    # seq_q > seq_kv
    ]
    for dtype in ("bf16", "f16"):
        for head_dim in (64, 128):
            for causal in (False, True):
                for b, hq, hkv, sq, skv in shapes:
                    cases.append(Case(dtype, head_dim, causal, b, hq, hkv, sq, skv))
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
    # The other head dims (their own tile shapes and, at 96, the 64-byte
    # swizzle): the same shapes in both dtypes, GQA, bshd and strided views,
    # and a long causal case.
    for head_dim, value_head_dim in ((96, None), (192, None), (192, 128), (256, None)):
        for causal in (False, True):
            for dtype in ("bf16", "f16"):
                for b, hq, hkv, sq, skv in shapes:
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
        cases.append(Case(rng.choice(("bf16", "f16")), head_dim,
                          rng.random() < 0.5, rng.randint(1, batch), heads_q, heads_kv,
                          seq_q, seq_kv, rng.choice(("bhsd", "bshd")), rng.random() < 0.25,
                          value_head_dim if value_head_dim != head_dim else None))
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
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if case.causal:
        mask = torch.ones(case.seq_q, case.seq_kv, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.matmul(torch.softmax(scores, dim=-1), vf)
    if case.layout == "bshd":
        out = out.transpose(1, 2)
    return out, lse


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
                                  layout=case.layout, out=out, **(tuning or {}))
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    ref, lse_ref = _reference(case, q, k, v, scale, torch)
    of = o.float()
    finite = bool(torch.isfinite(of).all())
    rel = float((of - ref).norm() / ref.norm().clamp_min(1e-30))
    max_abs = float((of - ref).abs().max())
    lse_err = float((lse - lse_ref).abs().max())
    ok = finite and rel < REL_TOLERANCE and lse_err < LSE_TOLERANCE
    row.update(ok=ok, rel=rel, max_abs=max_abs, lse_err=lse_err, finite=finite)
    return row


_compiles_cache: Dict[Any, bool] = {}


def _compiles(case: Case, tuning: Dict[str, Any]) -> bool:
    """Whether the compiler accepts ``tuning`` at the case's head dims (a
    block size or stage count that suits head dim 64 may not fit the shared
    memory at 256: the verifier says so, and the case is skipped)."""
    import kvpipe

    key = (case.head_dim, case.value_head_dim, case.dtype, case.causal,
           tuple(sorted(tuning.items())))
    if key not in _compiles_cache:
        try:
            kvpipe.compile_attention(case.head_dim, case.dtype, case.causal,
                                     value_head_dim=case.value_head_dim, **tuning)
            _compiles_cache[key] = True
        except kvpipe.CompilerError as exc:
            print(f"SKIP {case.name} with {tuning}: {str(exc).splitlines()[0][:200]}",
                  flush=True)
            _compiles_cache[key] = False
    return _compiles_cache[key]


def run(cases: Optional[List[Case]] = None,
        tuning: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    cases = cases if cases is not None else default_grid()
    if tuning:  # a tuning's kernels exist per head dim: check those it fits
        cases = [c for c in cases if "head_dim" not in tuning and _compiles(c, tuning)]
    rows = []
    for i, case in enumerate(cases):
        start = time.perf_counter()
        row = run_case(case, seed=1234 + i, tuning=tuning)
        if tuning:
            row["case"] += " " + ",".join(f"{k}={v}" for k, v in sorted(tuning.items()))
        row["seconds"] = round(time.perf_counter() - start, 3)
        rows.append(row)
        status = "PASS" if row["ok"] else "FAIL"
        detail = (f"rel {row['rel']:.2e} max_abs {row['max_abs']:.2e} lse {row['lse_err']:.2e}"
                  if "rel" in row else row.get("error", ""))
        print(f"{status} {case.name}: {detail}", flush=True)
    return rows


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
