"""``python -m kvpipe bench``: kvpipe's attention against torch's SDPA backends.

TFLOP/s = 4 * B * H * N^2 * D (halved when causal) over the median time, for
kvpipe, cuDNN and flash (FA2) measured in the same process on the same
inputs (bf16 forward, H = 16, B * N = 32k tokens so inputs exceed the L2),
and FlashAttention-4 (``flash_attn.cute``) where it is importable
(``../shared/peers/fa4.sh`` brings it to the GPU machine).
With several tuning variants (``--variant``), each is measured on the same
inputs in the same process, so that their ratios are comparable. The forward
grid times a row's columns (kvpipe, variants, peers) in interleaved rounds,
each in its own shuffled order (``interleaved_ms``, ``--rounds``), so that
the GPU's clock drift during a row favours no column.
"""

from __future__ import annotations

import random
import statistics
from typing import Any, Callable, Collection, Dict, List, Optional, Sequence, Tuple


def _median_ms(fn: Callable[[], Any]) -> float:
    try:
        from triton.testing import do_bench

        return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))
    except ImportError:
        import torch

        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(30):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        times.sort()
        return times[len(times) // 2]


#: Rounds of the benchmarks' interleaved timing (``run``, ``run_backward``,
#: bench --mods' kvpipe forwards): every column of a row is timed once per
#: round, each round in its own shuffled order, and each column's figure is
#: its median over the rounds. One timing after the other read the same
#: kernel 10 % apart within a row on the H100 (clock drift,
#: results/gpu-results.md session 18 call 6), and a fixed cyclic order
#: favoured the column after the coolest one (call 15).
DEFAULT_ROUNDS = 3


def _round_ms(fn: Callable[[], Any]) -> float:
    """One round's median time of ``fn`` (shorter than ``_median_ms``'s: the
    rounds add up)."""
    try:
        from triton.testing import do_bench

        return float(do_bench(fn, warmup=10, rep=40, return_mode="median"))
    except ImportError:
        return _median_ms(fn)


def interleaved_times(columns: Sequence[Tuple[Any, Callable[[], Any]]], rounds: int,
                      time: Optional[Callable[[Callable[[], Any]], float]] = None,
                      optional: Collection[Any] = ()) -> Dict[Any, Optional[List[float]]]:
    """The times in ms of each named callable, one per round, over
    ``rounds`` rounds, each round timing every column once (``time``,
    default ``_round_ms``) in an order of its own (seeded shuffles). A
    column named in ``optional`` (a peer, a variant a head dim may not take)
    whose first call raises gets None, its reason printed, and is not timed;
    any other column's error propagates."""
    time = time or _round_ms
    live: List[Tuple[Any, Callable[[], Any]]] = []
    result: Dict[Any, Optional[List[float]]] = {}
    for name, fn in columns:  # load, compile and warm every column first
        try:
            fn()
            live.append((name, fn))
        except Exception as exc:  # noqa: BLE001 -- a peer's failure is an entry
            if name not in optional:
                raise
            print(f"{name} failed: {exc}"[:300], flush=True)
            result[name] = None
    for name, _ in live:
        result[name] = []
    # Each round in its own order (seeded: reproducible), so that no column
    # always follows the same one: a slow, cool-running peer lends the column
    # after it a boost clock (session 18, call 15, where rotation kept FA4
    # after FA2 in every round).
    shuffle = random.Random(0).shuffle
    for _ in range(max(1, rounds)):
        order = list(live)
        shuffle(order)
        for name, fn in order:
            result[name].append(time(fn))
    return {name: result[name] for name, _ in columns}


def interleaved_ms(columns: Sequence[Tuple[Any, Callable[[], Any]]], rounds: int,
                   time: Optional[Callable[[Callable[[], Any]], float]] = None,
                   optional: Collection[Any] = ()) -> Dict[Any, Optional[float]]:
    """Each column's median over ``interleaved_times``' rounds (None for an
    optional column that failed)."""
    return {name: statistics.median(times) if times is not None else None
            for name, times in interleaved_times(columns, rounds, time, optional).items()}


#: The backward's FLOPs over the forward's (bench --backward, bench --mods):
#: five matmuls of the forward's size (S again, dP, dV, dQ, dK) to its two.
BACKWARD_FLOPS = 2.5


def _sdpa(backend: str, causal: bool) -> Callable[..., Any]:
    """torch SDPA held to one backend (``"cudnn"`` or ``"flash"``, FA2) as
    ``attend(q, k, v)``."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kind = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[backend]

    def attend(q: Any, k: Any, v: Any) -> Any:
        with sdpa_kernel([kind]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return attend


def _kvpipe_backward_fn(q: Any, k: Any, v: Any, do: Any, deterministic: Optional[bool] = None,
                        tuning: Optional[Dict[str, Any]] = None, **masks: Any
                        ) -> Callable[[], Any]:
    """kvpipe's backward alone (``attention_backward``) of
    ``kvpipe.attention(q, k, v, **masks)`` for the output gradient ``do``, as
    a callable to time: the forward (with the log-sum-exp) runs once, here.
    ``masks``: what both take (causal, window_size, score_mod, mask_mod);
    ``tuning``: what only the backward takes (``dq_atomics``)."""
    import torch

    import kvpipe
    from kvpipe.backward import attention_backward

    with torch.no_grad():
        o, lse = kvpipe.attention(q, k, v, return_lse=True, **masks)
    return lambda: attention_backward(q, k, v, o, lse, do, deterministic=deterministic,
                                      **(tuning or {}), **masks)


def _autograd_backward_fn(forward: Callable[..., Any], inputs: Sequence[Any], do: Any
                          ) -> Callable[[], Any]:
    """``torch.autograd.grad`` alone through the graph of ``forward(*leaves)``
    (``inputs`` detached, requiring grad; the first output where it returns a
    tuple) for the output gradient ``do``, as a callable to time: the forward
    runs once, here, and the graph is retained between calls."""
    import torch

    leaves = [t.detach().requires_grad_() for t in inputs]
    out = forward(*leaves)
    out = out[0] if isinstance(out, tuple) else out
    return lambda: torch.autograd.grad(out, leaves, do, retain_graph=True)


def _autograd_backward_ms(forward: Callable[..., Any], inputs: Sequence[Any], do: Any) -> float:
    """The median time of ``_autograd_backward_fn``'s backward, after one
    untimed backward (peers that compile on first use: FA4's JIT,
    torch.compile)."""
    grad = _autograd_backward_fn(forward, inputs, do)
    grad()
    return _median_ms(grad)


def _graph_median_ms(fn: Callable[[], Any]) -> Optional[float]:
    """The median time of ``fn`` replayed from a CUDA graph (no host time:
    how a serving engine runs a decode step), or None without triton or
    when ``fn`` cannot be captured."""
    try:
        from triton.testing import do_bench_cudagraph

        return float(do_bench_cudagraph(fn, rep=100, return_mode="median"))
    except (ImportError, RuntimeError) as exc:
        print(f"CUDA-graph timing failed: {exc}"[:300], flush=True)
        return None


def _host_us(fn: Callable[[], Any], calls: int = 200) -> float:
    """Host microseconds per call of ``fn`` (argument checks, plan, launch):
    ``calls`` calls issued back to back, timed on the host before the device
    catches up (the launch queue holds them)."""
    import time

    import torch

    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return host


def _fa4() -> Optional[Callable[..., Any]]:
    """FlashAttention-4's ``flash_attn_func`` ((B, S, H, D) inputs), or None."""
    try:
        from flash_attn.cute import flash_attn_func
    except Exception:  # noqa: BLE001 -- absent, or its CUDA libraries are
        return None
    return flash_attn_func


def run(head_dims: Sequence[int] = (64, 128),
        seq_lens: Sequence[int] = (1024, 2048, 4096, 8192, 16384),
        causals: Sequence[bool] = (False, True), heads: int = 16,
        peers: bool = True, variants: Optional[Sequence[Dict[str, Any]]] = None,
        rounds: int = DEFAULT_ROUNDS, **tuning: Any) -> List[Dict[str, Any]]:
    """Measures every point; returns one row per (D, N, causal).

    ``tuning`` applies to the main kvpipe column; each of ``variants`` (a
    dict of tuning attributes, on top of ``tuning``) gets a column of its own
    under ``row["variants"][label]``. The columns of a row (kvpipe, the
    variants, cuDNN, FA2, FA4) are timed in ``rounds`` interleaved rounds
    (``interleaved_ms``).
    """
    import torch

    import kvpipe

    fa4 = _fa4() if peers else None
    rows = []
    for d in head_dims:
        for n in seq_lens:
            b = max(1, 16384 // n) * 2
            for causal in causals:
                q, k, v = (torch.randn(b, heads, n, d, dtype=torch.bfloat16, device="cuda")
                           for _ in range(3))
                flops = 4 * b * heads * n * n * d / (2 if causal else 1)
                compiled = kvpipe.compile_attention(d, "bf16", causal, **tuning)
                row: Dict[str, Any] = {"D": d, "N": n, "B": b, "H": heads, "causal": causal,
                                       "compile_s": compiled.compile_seconds,
                                       "ptx_s": compiled.abi.get("ptx_seconds")}
                columns: List[Tuple[str, Callable[[], Any]]] = [
                    ("kvpipe", lambda: kvpipe.attention(q, k, v, causal=causal, **tuning))]
                for variant in variants or ():
                    merged = {**tuning, **variant}
                    kvpipe.compile_attention(d, "bf16", causal, **merged)
                    columns.append((variant_label(variant),
                                    lambda merged=merged: kvpipe.attention(
                                        q, k, v, causal=causal, **merged)))
                if peers:
                    for name in ("cudnn", "flash"):
                        columns.append((name, lambda attend=_sdpa(name, causal): attend(
                            q, k, v)))
                    if fa4 is not None:
                        # FA4 takes flash-attn's (B, S, H, D); its first call
                        # per configuration JIT-compiles (interleaved_ms warms
                        # every column before timing).
                        qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
                        columns.append(("fa4", lambda qt=qt, kt=kt, vt=vt: fa4(
                            qt, kt, vt, causal=causal)))
                ms = interleaved_ms(columns, rounds, optional=("cudnn", "flash", "fa4"))
                tflops = {name: (round(flops / t / 1e9, 1) if t else None)
                          for name, t in ms.items()}
                row["kvpipe"] = tflops.pop("kvpipe")
                row["variants"] = {variant_label(variant): tflops.pop(variant_label(variant))
                                   for variant in variants or ()}
                if peers:
                    row.update(cudnn=tflops.get("cudnn"), flash=tflops.get("flash"))
                    if fa4 is not None:
                        row["fa4"] = tflops.get("fa4")
                    for name in ("fa4", "cudnn", "flash"):
                        if row.get(name) and row["kvpipe"]:
                            row["vs_" + name] = round(row["kvpipe"] / row[name], 3)
                print(row, flush=True)
                rows.append(row)
                del q, k, v
    return rows


def variant_label(variant: Dict[str, Any]) -> str:
    """``{"pingpong": True, "kv_stages": 3}`` -> ``"pingpong=1,kv_stages=3"``."""
    return ",".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in variant.items())


def to_markdown(rows: List[Dict[str, Any]]) -> str:
    labels, cells = _variant_cells(rows)
    lines = ["| D | N | B | causal | kvpipe TFLOP/s | cuDNN | flash (FA2) | FA4 | kvpipe/cuDNN "
             "| kvpipe/flash | kvpipe/FA4 | compile s (PTX, +cubin) |"
             + "".join(f" {label} (/cuDNN) |" for label in labels),
             "|" + " --- |" * 12 + " --- |" * len(labels)]
    for r in rows:
        extra = cells(r)
        lines.append(f"| {r['D']} | {r['N']} | {r['B']} | {'yes' if r['causal'] else 'no'} | "
                     f"{r['kvpipe']} | {r.get('cudnn')} | {r.get('flash')} | {r.get('fa4')} | "
                     f"{r.get('vs_cudnn')} | {r.get('vs_flash')} | {r.get('vs_fa4')} | "
                     f"{r.get('ptx_s')}, {r.get('compile_s')} |" + extra)
    return "\n".join(lines) + "\n"


def run_backward(head_dims: Sequence[int] = (64, 128),
                 seq_lens: Sequence[int] = (1024, 4096, 16384),
                 causals: Sequence[bool] = (False, True), heads: int = 16,
                 peers: bool = True, variants: Optional[Sequence[Dict[str, Any]]] = None,
                 rounds: int = DEFAULT_ROUNDS) -> List[Dict[str, Any]]:
    """Backward TFLOP/s (2.5x the forward's FLOPs, halved when causal) of
    kvpipe's backward family, of torch SDPA's cuDNN and flash (FA2)
    backward and of FlashAttention-4 (when importable, ``../shared/peers/
    fa4.sh``), on the same inputs and output gradient, in one process. The
    forward is run once outside the timing; each timed call is the backward
    alone (kvpipe: ``attention_backward``; the peers: ``torch.autograd.grad``
    of a retained graph). Each of ``variants`` (``attention_backward``'s
    tuning, e.g. ``{"dq_atomics": True}``) is measured on the same inputs,
    under ``row["variants"][label]``; a variant a head dim does not take is
    None there. A row's columns are timed in ``rounds`` interleaved rounds
    (``interleaved_ms``)."""
    import torch

    fa4 = _fa4() if peers else None
    rows = []
    for d in head_dims:
        for n in seq_lens:
            b = max(1, 32768 // n)
            for causal in causals:
                q, k, v = (torch.randn(b, heads, n, d, dtype=torch.bfloat16, device="cuda")
                           for _ in range(3))
                do = torch.randn_like(q)
                flops = BACKWARD_FLOPS * 4 * b * heads * n * n * d / (2 if causal else 1)
                row: Dict[str, Any] = {"D": d, "N": n, "B": b, "H": heads, "causal": causal}
                # kvpipe, its deterministic mode's cost and the variants, on
                # the same inputs; then the peers.
                columns: List[Tuple[str, Callable[[], Any]]] = [
                    ("kvpipe", _kvpipe_backward_fn(q, k, v, do, causal=causal)),
                    ("deterministic", _kvpipe_backward_fn(q, k, v, do, deterministic=True,
                                                          causal=causal))]
                for variant in variants or ():
                    columns.append((variant_label(variant), _kvpipe_backward_fn(
                        q, k, v, do, causal=causal, tuning=variant)))
                if peers:
                    for name in ("cudnn", "flash"):
                        columns.append((name, _peer_backward_fn(_sdpa(name, causal), (q, k, v),
                                                                do)))
                    if fa4 is not None:
                        # FA4 takes flash-attn's (B, S, H, D); its first call
                        # JIT-compiles the forward (here) and the backward
                        # (interleaved_ms's warm-up).
                        columns.append(("fa4", _peer_backward_fn(
                            lambda *leaves: fa4(*leaves, causal=causal),
                            [t.transpose(1, 2) for t in (q, k, v)], do.transpose(1, 2))))
                # A variant a head dim does not take (dq_atomics at 128) and a
                # peer that fails are None; kvpipe's own columns must run.
                ms = interleaved_ms(columns, rounds, optional=[
                    "cudnn", "flash", "fa4",
                    *(variant_label(variant) for variant in variants or ())])
                tflops = {name: (round(flops / t / 1e9, 1) if t else None)
                          for name, t in ms.items()}
                row["kvpipe"] = tflops["kvpipe"]
                row["deterministic"] = tflops["deterministic"]
                row["variants"] = {variant_label(variant): tflops[variant_label(variant)]
                                   for variant in variants or ()}
                if peers:
                    for name in ("cudnn", "flash", "fa4"):
                        row[name] = tflops.get(name)
                        if row[name] and row["kvpipe"]:
                            row["vs_" + name] = round(row["kvpipe"] / row[name], 3)
                print(row, flush=True)
                rows.append(row)
                del q, k, v, do
    return rows


def _peer_backward_fn(forward: Callable[..., Any], inputs: Sequence[Any], do: Any
                      ) -> Callable[[], Any]:
    """``_autograd_backward_fn``, or where the peer's forward raises (a
    backend that does not take the shape) a callable that raises the same,
    so that ``interleaved_ms`` reports the column as None."""
    try:
        return _autograd_backward_fn(forward, inputs, do)
    except Exception as exc:  # noqa: BLE001 -- a peer's failure is an entry
        error = exc  # `exc` is unbound after the except clause

        def failed() -> Any:
            raise error
        return failed


def _variant_cells(rows: List[Dict[str, Any]]) -> Tuple[List[str], Callable[..., str]]:
    """The variant labels of ``rows`` (in first-seen order) and a function
    giving a row's cells for them: ``TFLOP/s (/cuDNN)``."""
    labels: List[str] = []
    for r in rows:
        labels += [label for label in r.get("variants", {}) if label not in labels]

    def cells(r: Dict[str, Any]) -> str:
        extra = ""
        for label in labels:
            value = r.get("variants", {}).get(label)
            ratio = f" ({value / r['cudnn']:.3f})" if value and r.get("cudnn") else ""
            extra += f" {value}{ratio} |"
        return extra
    return labels, cells


def backward_to_markdown(rows: List[Dict[str, Any]]) -> str:
    labels, cells = _variant_cells(rows)
    lines = ["| D | N | B | causal | kvpipe bwd TFLOP/s | deterministic | cuDNN | flash (FA2) "
             "| FA4 | kvpipe/cuDNN | kvpipe/flash | kvpipe/FA4 |"
             + "".join(f" {label} (/cuDNN) |" for label in labels),
             "|" + " --- |" * (12 + len(labels))]
    for r in rows:
        lines.append(f"| {r['D']} | {r['N']} | {r['B']} | {'yes' if r['causal'] else 'no'} | "
                     f"{r['kvpipe']} | {r.get('deterministic')} | {r.get('cudnn')} | "
                     f"{r.get('flash')} | {r.get('fa4')} | {r.get('vs_cudnn')} | "
                     f"{r.get('vs_flash')} | {r.get('vs_fa4')} |" + cells(r))
    return "\n".join(lines) + "\n"


#: ``bench --decode``'s points: (batch, cache length), Sq 1, Hq 32 / Hkv 8,
#: D 128, bf16 (issue 14's decode table).
DECODE_POINTS = ((64, 8192), (8, 32768), (1, 131072))
#: The K/V ring depth of bench --decode's variant column (the plan's is 2;
#: docs/serving.md has two runs of both).
DECODE_VARIANT_STAGES = 3


def run_decode(points: Sequence[Sequence[int]] = DECODE_POINTS, heads_q: int = 32,
               heads_kv: int = 8, head_dim: int = 128, peers: bool = True) -> List[Dict[str, Any]]:
    """Decode TB/s: the bytes of K and V each implementation reads
    (``2 * B * S * H_kv * D * 2``) over the median time of one decode step
    (one query per sequence against a full cache), for kvpipe's
    ``flash_attn_with_kvcache`` (num_splits and pack-GQA chosen; also with
    per-sequence ``cache_seqlens``, the serving path, and unsplit), cuDNN
    and flash (FA2) through torch SDPA, in one process on the same inputs.
    SDPA reads the K/V heads through ``enable_gqa`` where the backend takes
    it, else K/V expanded to H_q heads beforehand (outside the timing): it
    then reads ``H_q / H_kv`` times the bytes, which its TB/s counts (the
    ``*_gqa`` entry says which); ``speedup_*`` is the time ratio."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import kvpipe
    from kvpipe.flash_attn import flash_attn_with_kvcache
    from kvpipe.launch import _multiprocessors
    from kvpipe.plans import decode_plan

    rows = []
    group = heads_q // heads_kv
    for b, n in points:
        q = torch.randn(b, 1, heads_q, head_dim, dtype=torch.bfloat16, device="cuda")
        k_cache = torch.randn(b, n, heads_kv, head_dim, dtype=torch.bfloat16, device="cuda")
        v_cache = torch.randn_like(k_cache)
        seqlens = torch.full((b,), n, dtype=torch.int32, device="cuda")
        read = 2 * b * n * heads_kv * head_dim * 2
        splits, pack, tuning = decode_plan(b, heads_q, heads_kv, 1, n, head_dim, head_dim, 0,
                                           None, _multiprocessors(torch.cuda.current_device()),
                                           {})
        row: Dict[str, Any] = {"B": b, "S": n, "Hq": heads_q, "Hkv": heads_kv, "D": head_dim,
                               "num_splits": splits, "pack_gqa": pack,
                               "consumer_warpgroups": tuning.get("consumer_warpgroups")}
        times: Dict[str, float] = {}

        def measure(name: str, fn: Callable[[], Any], nbytes: int = read) -> None:
            times[name] = _median_ms(fn)
            row[name] = round(nbytes / times[name] / 1e9, 2)

        def graph(name: str, fn: Callable[[], Any], nbytes: int = read) -> None:
            """The CUDA-graph time and the host time per call of ``fn``."""
            ms = _graph_median_ms(fn)
            row[name + "_graph"] = round(nbytes / ms / 1e9, 2) if ms else None
            row[name + "_host_us"] = round(_host_us(fn), 1)

        measure("kvpipe", lambda: flash_attn_with_kvcache(q, k_cache, v_cache))
        graph("kvpipe", lambda: flash_attn_with_kvcache(q, k_cache, v_cache))
        measure("kvpipe_seqlens", lambda: flash_attn_with_kvcache(
            q, k_cache, v_cache, cache_seqlens=seqlens))
        measure("kvpipe_nosplit", lambda: flash_attn_with_kvcache(q, k_cache, v_cache,
                                                                  num_splits=1))
        # Another K/V ring depth, same plan.
        measure("kvpipe_stages_variant", lambda: kvpipe.attention(
            q, k_cache, v_cache, layout="bshd", num_splits=0, pack_gqa=None,
            kv_stages=DECODE_VARIANT_STAGES))
        if peers:
            # SDPA's (B, H, S, D), contiguous as its backends prefer.
            qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k_cache, v_cache))
            for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                                  ("flash", SDPBackend.FLASH_ATTENTION)):
                row[name] = None
                try:
                    with sdpa_kernel([backend]):
                        measure(name, lambda: F.scaled_dot_product_attention(
                            qt, kt, vt, enable_gqa=True))
                        if name == "cudnn":
                            graph(name, lambda: F.scaled_dot_product_attention(
                                qt, kt, vt, enable_gqa=True))
                    row[name + "_gqa"] = "enable_gqa"
                    continue
                except (RuntimeError, TypeError):
                    pass
                try:
                    ke = kt.repeat_interleave(group, dim=1)
                    ve = vt.repeat_interleave(group, dim=1)
                    with sdpa_kernel([backend]):
                        measure(name, lambda: F.scaled_dot_product_attention(qt, ke, ve),
                                read * group)
                    row[name + "_gqa"] = "expanded"
                    del ke, ve
                except RuntimeError as exc:
                    print(f"{name} failed at B{b} S{n}: {exc}"[:300], flush=True)
            fa4 = _fa4()
            row["fa4"] = None
            if fa4 is not None:
                # FA4 takes the (B, S, H, D) cache as it is, GQA included; it has
                # no split-KV on sm_90. Its first call JIT-compiles: warm up.
                try:
                    fa4(q, k_cache, v_cache)
                    measure("fa4", lambda: fa4(q, k_cache, v_cache))
                except Exception as exc:  # noqa: BLE001 -- a peer's failure is a table entry
                    print(f"FA4 failed at B{b} S{n}: {exc}"[:300], flush=True)
            for name in ("cudnn", "flash", "fa4"):
                if row.get(name):
                    row["vs_" + name] = round(row["kvpipe"] / row[name], 3)
                    row["speedup_" + name] = round(times[name] / times["kvpipe"], 3)
            if row.get("kvpipe_graph") and row.get("cudnn_graph"):
                row["vs_cudnn_graph"] = round(row["kvpipe_graph"] / row["cudnn_graph"], 3)
            del qt, kt, vt
        row["ms"] = {name: round(ms, 4) for name, ms in times.items()}
        print(row, flush=True)
        rows.append(row)
        del q, k_cache, v_cache
    return rows


def decode_to_markdown(rows: List[Dict[str, Any]]) -> str:
    lines = ["| batch x cache | kvpipe TB/s | kvpipe, cache_seqlens | kvpipe, num_splits=1 | "
             f"kvpipe, kv_stages={DECODE_VARIANT_STAGES} | "
             "cuDNN TB/s (K/V) | FA2 TB/s (K/V) | FA4 TB/s | kvpipe/cuDNN TB/s | "
             "kvpipe/FA2 TB/s | kvpipe/FA4 | speedup vs cuDNN, FA2 | splits, pack, warpgroups |",
             "|" + " --- |" * 13]
    graph_lines = ["| batch x cache | kvpipe TB/s, CUDA graph | cuDNN TB/s, CUDA graph | "
                   "kvpipe/cuDNN, CUDA graph | host us/call kvpipe | host us/call cuDNN |",
                   "|" + " --- |" * 6]
    for r in rows:
        graph_lines.append(f"| {r['B']} x {r['S'] // 1024}k | {r.get('kvpipe_graph')} | "
                           f"{r.get('cudnn_graph')} | {r.get('vs_cudnn_graph')} | "
                           f"{r.get('kvpipe_host_us')} | {r.get('cudnn_host_us')} |")
        lines.append(f"| {r['B']} x {r['S'] // 1024}k | {r['kvpipe']} | {r['kvpipe_seqlens']} | "
                     f"{r['kvpipe_nosplit']} | {r.get('kvpipe_stages_variant')} | "
                     f"{r.get('cudnn')} ({r.get('cudnn_gqa')}) | "
                     f"{r.get('flash')} ({r.get('flash_gqa')}) | {r.get('fa4')} | "
                     f"{r.get('vs_cudnn')} | {r.get('vs_flash')} | {r.get('vs_fa4')} | "
                     f"{r.get('speedup_cudnn')}, {r.get('speedup_flash')} | "
                     f"{r['num_splits']}, {r['pack_gqa']}, "
                     f"{r['consumer_warpgroups'] or 'default'} |")
    return ("\n".join(lines) + "\n\nThe same calls replayed from CUDA graphs (no host time, as "
            "serving engines run decode steps), and each call's host time:\n\n"
            + "\n".join(graph_lines) + "\n")
