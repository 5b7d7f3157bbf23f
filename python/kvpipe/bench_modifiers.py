"""``python -m kvpipe bench --mods``: modifiers against kvpipe's plain kernel,
FlexAttention and FlashAttention-4, forward and backward, in one process on
the same inputs.

Rows (D 128, bf16, H 16, B * N = 16k tokens by default N = 8k; ``bench_rows``):

- ``softcap+window``: soft-cap 50 (score_mod) with a causal sliding window of
  ``WINDOW`` keys (mask_mod, whose shape the compiler proves: blocks outside
  the window are never loaded). Plain: kvpipe's built-in window
  (``window_size=(WINDOW, 0)``, ``causal=True``), the same visible work
  without the soft-cap. FlexAttention: the same score_mod and a block mask of
  the same mask_mod. FA4: its built-in ``softcap=`` and ``window_size=(WINDOW,
  0)`` with ``causal=True``.
- ``alibi``: ALiBi (per-head slopes tensor), no mask. Plain: kvpipe without
  a modifier. FlexAttention: the same score_mod, no block mask. FA4: no
  built-in ALiBi in ``flash_attn.cute``, but a ``score_mod`` (with the
  ``score_mod_bwd`` its backward requires): CuTe DSL callbacks reading the
  same slopes tensor through ``aux_tensors`` (kvpipe/_fa4_alibi.py, written
  to the callback signature of FA4 4.0.0b36's source; not yet run on a GPU:
  a compile failure or an output that is not kvpipe's leaves the FA4
  columns of these rows None, with the reason printed).
- ``alibi+causal``: ALiBi with kvpipe's built-in causal mask; FlexAttention
  with a causal block mask; FA4 with ``causal=True``.

TFLOP/s count the visible (query, key) pairs only: 4 * B * H * D * pairs
forward, ``bench.BACKWARD_FLOPS`` (2.5) times that backward (as ``bench
--backward`` counts). Each backward figure times the backward alone: the
forward runs once outside the timing, with a fixed output gradient (kvpipe:
``attention_backward`` with the row's modifiers, after ``kvpipe.attention(...,
return_lse=True)``; FlexAttention and FA4: ``torch.autograd.grad`` of a
retained graph). ``vs_plain`` = kvpipe with the modifier / kvpipe plain;
``vs_flex`` = kvpipe with the modifier / FlexAttention (torch.compile'd
flex_attention); ``vs_fa4`` = kvpipe with the modifier / FA4; the ``bwd_``
ones the same for the backward.

FA4 (``flash_attn.cute.flash_attn_func``) is measured where it is importable
(``../shared/peers/fa4.sh`` stages it on the GPU machine); its columns are
None without it, or where a call fails (the message is printed), or where
its forward output disagrees with kvpipe's (``FA4_TOLERANCE``): a peer that
computes another function gets no figure, nor a backward one.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from kvpipe import modifiers
from kvpipe.bench import (BACKWARD_FLOPS, DEFAULT_ROUNDS, _autograd_backward_ms, _fa4,
                          _kvpipe_backward_fn, _median_ms)

WINDOW = 1024
SOFTCAP = 50.0
#: bench --mods's sequence lengths without --seq-len.
DEFAULT_SEQ_LENS = (8192,)
#: The most FA4's forward output may differ from kvpipe's, as mean |difference|
#: over mean |kvpipe's output|, for its figures to count (two bf16 kernels of
#: the same function differ by a few 1e-3; another function by tens of %).
FA4_TOLERANCE = 0.02

#: The table's figures, in order after (modifier, D, N, B x H): header, key.
COLUMNS = (("kvpipe TFLOP/s", "kvpipe"), ("kvpipe plain", "kvpipe_plain"),
           ("vs plain", "vs_plain"), ("FlexAttention", "flex"), ("vs Flex", "vs_flex"),
           ("FA4", "fa4"), ("vs FA4", "vs_fa4"),
           ("bwd kvpipe", "bwd_kvpipe"), ("bwd plain", "bwd_kvpipe_plain"),
           ("bwd vs plain", "bwd_vs_plain"), ("bwd Flex", "bwd_flex"),
           ("bwd vs Flex", "bwd_vs_flex"), ("bwd FA4", "bwd_fa4"), ("bwd vs FA4", "bwd_vs_fa4"))
#: (ratio, numerator, denominator) keys of a row.
RATIOS = tuple((f"{pass_}vs_{peer}", f"{pass_}kvpipe", f"{pass_}{column}")
               for pass_ in ("", "bwd_")
               for peer, column in (("plain", "kvpipe_plain"), ("flex", "flex"), ("fa4", "fa4")))


class BenchRow(NamedTuple):
    """One row's work: the visible pairs (``causal``, a causal ``window`` of
    keys or None) and the keyword arguments of kvpipe's calls, with the
    modifier and plain (``kvpipe.attention`` and ``attention_backward``
    take the same ones)."""
    name: str
    causal: bool
    window: Optional[int]
    modified: Dict[str, Any]
    plain: Dict[str, Any]


def bench_rows(slopes: Any) -> List[BenchRow]:
    """The rows, with ALiBi over ``slopes`` (``(H,)`` float32)."""
    alibi = modifiers.alibi(slopes)
    return [
        BenchRow("softcap+window", True, WINDOW,
                 dict(score_mod=modifiers.soft_cap(SOFTCAP),
                      mask_mod=modifiers.sliding_window(WINDOW, 0)),
                 dict(causal=True, window_size=(WINDOW, 0))),
        BenchRow("alibi", False, None, dict(score_mod=alibi), {}),
        BenchRow("alibi+causal", True, None, dict(score_mod=alibi, causal=True),
                 dict(causal=True)),
    ]


def _visible_pairs(n: int, causal: bool, window: Optional[int]) -> int:
    if window is not None:  # keys [i - window, i]
        return sum(min(i, window) + 1 for i in range(n))
    return n * (n + 1) // 2 if causal else n * n


def row_flops(batch: int, heads: int, head_dim: int, n: int, causal: bool,
              window: Optional[int]) -> Tuple[float, float]:
    """(forward, backward) FLOPs of the visible pairs of an N x N attention."""
    forward = 4 * batch * heads * head_dim * _visible_pairs(n, causal, window)
    return forward, BACKWARD_FLOPS * forward


def add_ratios(row: Dict[str, Any]) -> Dict[str, Any]:
    """Sets each ratio of RATIOS whose figures the row has (and not None)."""
    for ratio, numerator, denominator in RATIOS:
        if row.get(numerator) and row.get(denominator):
            row[ratio] = round(row[numerator] / row[denominator], 3)
    return row


def _tflops(flops: float, ms: float) -> float:
    return round(flops / ms / 1e9, 1)


def _flex() -> Optional[Any]:
    """(compiled flex_attention, create_block_mask), or None without it."""
    try:
        import torch
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except Exception:  # noqa: BLE001 -- an older torch
        return None
    return torch.compile(flex_attention, dynamic=False), create_block_mask


def _peer_columns(row: Dict[str, Any], key: str, what: str,
                  setup: Callable[[], Callable[..., Any]], inputs: Sequence[Any], flops: float,
                  bwd_flops: float, check: Optional[Callable[[Any], None]] = None) -> None:
    """A peer's forward and backward figures, ``row[key]`` and
    ``row["bwd_" + key]``: ``setup()`` returns its forward, called as
    ``forward(q, k, v)`` on ``inputs`` (q, k, v and the output gradient);
    its first call (compiling, outside the timing) goes to ``check``, which
    raises where the output is wrong. A failure is a table entry: None and a
    printed message (no backward figure after a failed forward)."""
    q, k, v, do = inputs
    row[key] = row["bwd_" + key] = None
    try:
        forward = setup()
        out = forward(q, k, v)
        if check is not None:
            check(out[0] if isinstance(out, tuple) else out)
        row[key] = _tflops(flops, _median_ms(lambda: forward(q, k, v)))
    except Exception as exc:  # noqa: BLE001 -- a peer's failure
        print(f"{what} failed for {row['mod']} at N{row['N']}: {exc}"[:300], flush=True)
        return
    try:
        # The first call with inputs requiring grad compiles the backward
        # (one runs before the timing).
        row["bwd_" + key] = _tflops(bwd_flops, _autograd_backward_ms(forward, (q, k, v), do))
    except Exception as exc:  # noqa: BLE001
        print(f"{what} backward failed for {row['mod']} at N{row['N']}: {exc}"[:300],
              flush=True)


def run(seq_lens: Sequence[int] = DEFAULT_SEQ_LENS, head_dim: int = 128,
        heads: int = 16, variants: Optional[Sequence[Dict[str, Any]]] = None,
        rounds: int = DEFAULT_ROUNDS) -> List[Dict[str, Any]]:
    """One row per (modifier, N). Each of ``variants`` (forward tuning
    attributes, e.g. ``{"exp2_emulation": 4}``) times the forward with the
    modifier and plain again with that tuning, on the same inputs, under
    ``row["variants"][label]`` (``{"fwd": ..., "fwd_plain": ...}``). kvpipe's
    forwards are timed in ``rounds`` interleaved rounds."""
    import torch

    from kvpipe.bench import interleaved_ms, variant_label

    import kvpipe

    flex = _flex()
    fa4 = _fa4()
    rows = []
    for n in seq_lens:
        b = max(1, 16384 // n)
        q, k, v, do = (torch.randn(b, heads, n, head_dim, dtype=torch.bfloat16, device="cuda")
                       for _ in range(4))
        slopes = torch.rand(heads, device="cuda") * 0.1
        # FA4's (B, S, H, D) layout, contiguous as flash-attn's.
        fa4_inputs = [t.transpose(1, 2).contiguous() for t in (q, k, v, do)] if fa4 else None
        for spec in bench_rows(slopes):
            flops, bwd_flops = row_flops(b, heads, head_dim, n, spec.causal, spec.window)
            row: Dict[str, Any] = {"mod": spec.name, "D": head_dim, "N": n, "B": b, "H": heads,
                                   # None where a peer is not on the machine.
                                   "flex": None, "bwd_flex": None, "fa4": None, "bwd_fa4": None}
            # The kvpipe calls that bench_kernel_configs lists: the forward
            # (and with the log-sum-exp, the same kernel) and the backward,
            # with the modifier and plain. The forwards (the row's "vs plain"
            # and the variants') in interleaved rounds, then the two
            # backwards likewise (bench.interleaved_ms: the GPU's clock drift
            # favours no column).
            forwards = [("kvpipe", spec.modified, {}), ("kvpipe_plain", spec.plain, {})]
            for variant in variants or ():
                forwards += [((variant_label(variant), key), kwargs, variant)
                             for key, kwargs in (("fwd", spec.modified),
                                                 ("fwd_plain", spec.plain))]
            ms = interleaved_ms(
                [(name, lambda kwargs=kwargs, tuning=tuning: kvpipe.attention(
                    q, k, v, **kwargs, **tuning)) for name, kwargs, tuning in forwards],
                rounds)
            row["kvpipe"] = _tflops(flops, ms["kvpipe"])
            row["kvpipe_plain"] = _tflops(flops, ms["kvpipe_plain"])
            bwd = interleaved_ms(
                [("bwd_kvpipe" + suffix, _kvpipe_backward_fn(q, k, v, do, deterministic=False,
                                                             **kwargs))
                 for suffix, kwargs in (("", spec.modified), ("_plain", spec.plain))], rounds)
            for name, ms_bwd in bwd.items():
                row[name] = _tflops(bwd_flops, ms_bwd)
            row["variants"] = {}
            for variant in variants or ():
                label = variant_label(variant)
                row["variants"][label] = {key: _tflops(flops, ms[(label, key)])
                                          for key in ("fwd", "fwd_plain")}
            if flex is not None:
                _flex_columns(row, flex, spec, slopes, (q, k, v, do), flops, bwd_flops)
            if fa4 is not None:
                reference = kvpipe.attention(q, k, v, **spec.modified)
                _fa4_columns(row, fa4, spec, slopes, fa4_inputs, reference, flops, bwd_flops)
                del reference
            print(add_ratios(row), flush=True)
            rows.append(row)
        del q, k, v, do, fa4_inputs
    return rows


def _flex_columns(row: Dict[str, Any], flex: Any, spec: BenchRow, slopes: Any,
                  inputs: Sequence[Any], flops: float, bwd_flops: float) -> None:
    """FlexAttention's forward and backward figures of a row: the same
    score_mod, and a block mask of the same mask (the row's mask_mod, or the
    causal one)."""
    flex_attention, create_block_mask = flex
    n = inputs[0].shape[2]
    mask_mod = spec.modified.get("mask_mod") or (modifiers_causal_flex if spec.causal
                                                 else None)
    # One score_mod object: a new closure per call would make torch.compile
    # recompile.
    score_mod = _flex_score_mod(spec.name, slopes)

    def setup() -> Callable[..., Any]:
        block_mask = (create_block_mask(mask_mod, None, None, n, n, device="cuda")
                      if mask_mod is not None else None)
        return lambda *qkv: flex_attention(*qkv, score_mod=score_mod, block_mask=block_mask)

    _peer_columns(row, "flex", "FlexAttention", setup, inputs, flops, bwd_flops)


def modifiers_causal_flex(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
    """The causal mask_mod for FlexAttention's block mask."""
    return q_idx >= kv_idx


def _flex_score_mod(name: str, slopes: Any) -> Any:
    """The same score_mod for FlexAttention (torch ops on its tensors)."""
    import torch

    if name == "softcap+window":
        def softcap(score, b, h, q_idx, kv_idx):
            return SOFTCAP * torch.tanh(score / SOFTCAP)
        return softcap

    def alibi(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx - kv_idx).abs()
    return alibi


@functools.lru_cache(maxsize=None)
def _fa4_alibi_callbacks() -> Tuple[Callable[..., Any], Callable[..., Any]]:
    """FA4's ALiBi (score_mod, score_mod_bwd): CuTe DSL, imported only here."""
    from kvpipe import _fa4_alibi as cute_alibi

    return cute_alibi.alibi, cute_alibi.alibi_bwd


def fa4_arguments(spec: BenchRow, slopes: Any,
                  alibi: Optional[Tuple[Any, Any]] = None) -> Dict[str, Any]:
    """``flash_attn_func``'s keyword arguments for a row (FA4 4.0.0b36): the
    soft-cap and the causal window as its ``softcap=`` and ``window_size=``
    (keys ``[i - left, i + right]``, as kvpipe's window_size); ALiBi as the
    CuTe DSL ``score_mod``/``score_mod_bwd`` pair ``alibi`` (default
    ``_fa4_alibi_callbacks()``) over ``aux_tensors=[slopes]``."""
    if spec.window is not None:
        return dict(causal=spec.causal, softcap=SOFTCAP, window_size=(spec.window, 0))
    score_mod, score_mod_bwd = alibi if alibi is not None else _fa4_alibi_callbacks()
    return dict(causal=spec.causal, score_mod=score_mod, score_mod_bwd=score_mod_bwd,
                aux_tensors=[slopes])


def _disagreement(out: Any, reference: Any) -> float:
    """mean |out - reference| / mean |reference| (float32)."""
    reference = reference.float()
    return float((out.float() - reference).abs().mean() / reference.abs().mean().clamp_min(1e-12))


def _fa4_columns(row: Dict[str, Any], fa4: Any, spec: BenchRow, slopes: Any,
                 inputs: Sequence[Any], reference: Any, flops: float, bwd_flops: float) -> None:
    """FA4's forward and backward figures of a row; ``inputs``: q, k, v and
    the output gradient in its (B, S, H, D) layout; ``reference``: kvpipe's
    output with the modifier ((B, H, S, D)), which FA4's must match."""
    def setup() -> Callable[..., Any]:
        kwargs = fa4_arguments(spec, slopes)
        return lambda *qkv: fa4(*qkv, **kwargs)

    def check(out: Any) -> None:
        error = _disagreement(out.transpose(1, 2), reference)
        if not error <= FA4_TOLERANCE:
            raise RuntimeError(f"its output is not kvpipe's (mean |difference| / mean |output| "
                               f"= {error:.3g} > {FA4_TOLERANCE})")

    _peer_columns(row, "fa4", "FA4", setup, inputs, flops, bwd_flops, check)


def bench_kernel_configs(head_dim: int = 128, heads: int = 16,
                         seq_lens: Optional[Sequence[int]] = None,
                         variants: Sequence[Dict[str, Any]] = ()) -> List[Dict[str, Any]]:
    """The compile_attention arguments of the kernels ``run(seq_lens)``
    launches, for ``python -m kvpipe compile --for-check --mods``: for each
    row, with the modifier and plain, the forward kernel ``kvpipe.attention``
    chooses (the prefill plan's where it has one: plain, no window, short
    sequences; the backward's forward with the log-sum-exp is the same
    kernel) and the backward family ``attention_backward`` launches
    (deterministic off). ``seq_lens`` None: those of any lengths (one per
    choice of the plan). Traced with a shape-only slopes tensor: the IR does
    not depend on its values. ``variants``: also the forward kernels of
    ``run(..., variants=variants)``."""
    from kvpipe.attention import normalise_window
    from kvpipe.check import unique_configs
    from kvpipe.check_modifiers import _ShapeOnly
    from kvpipe.plans import PREFILL_PLAN, prefill_kernel_configs

    if seq_lens is None:
        # The plan's choice changes past each of its lengths only.
        ends = {longest for causal in (False, True)
                for longest, _ in PREFILL_PLAN.get((head_dim, causal), ())
                if longest is not None}
        seq_lens = sorted(ends | set(DEFAULT_SEQ_LENS) | {max(ends, default=0) + 1})
    configs = []
    for spec in bench_rows(_ShapeOnly((heads,), "float32")):
        for kwargs in (spec.modified, spec.plain):
            causal = kwargs.get("causal", False)
            left, right = normalise_window(kwargs.get("window_size", (-1, -1)), causal)
            window = left >= 0 or right >= 0
            traced = modifiers.trace(kwargs.get("score_mod"), kwargs.get("mask_mod"))
            regions = dict(modifiers=traced.ir, aux_types=traced.aux_types) if traced else {}
            for n in seq_lens:
                for tuning in ({}, *variants):
                    configs += prefill_kernel_configs(head_dim, None, "bf16", causal,
                                                      "top_left", window, traced, n, n, tuning)
            configs.append(dict(head_dim=head_dim, dtype="bf16", causal=causal, backward=True,
                                deterministic=False, mask_alignment="top_left",
                                sliding_window=window, **regions))
    return unique_configs(configs)


def to_markdown(rows: List[Dict[str, Any]]) -> str:
    lines = ["TFLOP/s of the visible pairs; bwd: the backward alone (2.5x the forward's "
             "FLOPs). vs: kvpipe with the modifier over kvpipe plain, FlexAttention "
             "(compiled), FA4 (None: not on the machine, failed, or not kvpipe's output).",
             "",
             "| modifier | D | N | B x H | " + " | ".join(h for h, _ in COLUMNS) + " |",
             "|" + " --- |" * (4 + len(COLUMNS))]
    labels: List[str] = []
    for r in rows:
        labels += [label for label in r.get("variants", {}) if label not in labels]
    if labels:
        # Each variant: the forward with the modifier, plain, and the ratio of
        # the first to the default plain kernel's.
        lines[2] += "".join(f" {label}: fwd, plain (vs default plain) |" for label in labels)
        lines[3] += " --- |" * len(labels)
    for r in rows:
        cells = ""
        for label in labels:
            v = r.get("variants", {}).get(label) or {}
            ratio = (f" ({v['fwd'] / r['kvpipe_plain']:.3f})"
                     if v.get("fwd") and r.get("kvpipe_plain") else "")
            cells += f" {v.get('fwd')}, {v.get('fwd_plain')}{ratio} |"
        lines.append(f"| {r['mod']} | {r['D']} | {r['N']} | {r['B']} x {r['H']} | "
                     + " | ".join(str(r.get(key)) for _, key in COLUMNS) + " |" + cells)
    return "\n".join(lines) + "\n"
