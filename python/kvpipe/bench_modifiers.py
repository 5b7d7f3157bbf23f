"""``python -m kvpipe bench --mods``: modifiers against kvpipe's plain kernel
and FlexAttention, in one process on the same inputs.

Rows (D 128, bf16, H 16, B * N = 16k tokens by default N = 8k):

- ``softcap+window``: soft-cap 50 (score_mod) with a causal sliding window of
  ``WINDOW`` keys (mask_mod, whose shape the compiler proves: blocks outside
  the window are never loaded). Plain: kvpipe's built-in window
  (``window_size=(WINDOW, 0)``, ``causal=True``), the same visible work
  without the soft-cap. FlexAttention: the same score_mod and a block mask of
  the same mask_mod.
- ``alibi``: ALiBi (per-head slopes tensor), no mask. Plain: kvpipe without
  a modifier. FlexAttention: the same score_mod, no block mask.
- ``alibi+causal``: ALiBi with kvpipe's built-in causal mask; FlexAttention
  with a causal block mask.

TFLOP/s count the visible (query, key) pairs only: 4 * B * H * D * pairs.
``vs_plain`` = kvpipe with the modifier / kvpipe plain; ``vs_flex`` =
kvpipe with the modifier / FlexAttention (torch.compile'd flex_attention).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from kvpipe import modifiers
from kvpipe.bench import _median_ms

WINDOW = 1024
SOFTCAP = 50.0


def _flex() -> Optional[Any]:
    """(compiled flex_attention, create_block_mask), or None without it."""
    try:
        import torch
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except Exception:  # noqa: BLE001 -- an older torch
        return None
    return torch.compile(flex_attention, dynamic=False), create_block_mask


def _visible_pairs(n: int, causal: bool, window: Optional[int]) -> int:
    if window is not None:  # keys [i - window, i]
        return sum(min(i, window) + 1 for i in range(n))
    return n * (n + 1) // 2 if causal else n * n


def run(seq_lens: Sequence[int] = (8192,), head_dim: int = 128,
        heads: int = 16) -> List[Dict[str, Any]]:
    import torch

    import kvpipe

    flex = _flex()
    rows = []
    for n in seq_lens:
        b = max(1, 16384 // n)
        q, k, v = (torch.randn(b, heads, n, head_dim, dtype=torch.bfloat16, device="cuda")
                   for _ in range(3))
        slopes = torch.rand(heads, device="cuda") * 0.1
        for name in ("softcap+window", "alibi", "alibi+causal"):
            if name == "softcap+window":
                score_mod, mask_mod = modifiers.soft_cap(SOFTCAP), modifiers.sliding_window(
                    WINDOW, 0)
                plain = dict(causal=True, window_size=(WINDOW, 0))
                causal, window = True, WINDOW
            else:
                score_mod, mask_mod = modifiers.alibi(slopes), None
                causal, window = name == "alibi+causal", None
                plain = dict(causal=causal)
            flops = 4 * b * heads * head_dim * _visible_pairs(n, causal, window)
            row: Dict[str, Any] = {"mod": name, "D": head_dim, "N": n, "B": b, "H": heads}
            builtin = dict(causal=causal) if name == "alibi+causal" else {}
            mod_fn = lambda: kvpipe.attention(q, k, v, score_mod=score_mod,  # noqa: E731
                                              mask_mod=mask_mod, **builtin)
            plain_fn = lambda: kvpipe.attention(q, k, v, **plain)  # noqa: E731
            row["kvpipe"] = round(flops / _median_ms(mod_fn) / 1e9, 1)
            row["kvpipe_plain"] = round(flops / _median_ms(plain_fn) / 1e9, 1)
            row["vs_plain"] = round(row["kvpipe"] / row["kvpipe_plain"], 3)
            if flex is not None:
                flex_attention, create_block_mask = flex
                try:
                    block_mask = None
                    flex_mask = mask_mod if mask_mod is not None else (
                        modifiers_causal_flex if causal else None)
                    if flex_mask is not None:
                        block_mask = create_block_mask(flex_mask, None, None, n, n,
                                                       device="cuda")
                    # One score_mod object: a new closure per call would
                    # make torch.compile recompile.
                    flex_score_mod = _flex_score_mod(name, slopes)
                    flex_fn = lambda: flex_attention(q, k, v,  # noqa: E731
                                                     score_mod=flex_score_mod,
                                                     block_mask=block_mask)
                    flex_fn()  # compiles outside the timing
                    row["flex"] = round(flops / _median_ms(flex_fn) / 1e9, 1)
                    row["vs_flex"] = round(row["kvpipe"] / row["flex"], 3)
                except Exception as exc:  # noqa: BLE001 -- a peer's failure
                    print(f"FlexAttention failed for {name} at N{n}: {exc}", flush=True)
                    row["flex"] = None
            print(row, flush=True)
            rows.append(row)
        del q, k, v
    return rows


def bench_kernel_configs(head_dim: int = 128, heads: int = 16) -> List[Dict[str, Any]]:
    """The compile_attention arguments of the kernels ``run`` launches, for
    ``python -m kvpipe compile --for-check --mods`` (traced with a shape-only
    slopes tensor: the IR does not depend on its values)."""
    from kvpipe.check_modifiers import _ShapeOnly

    base = dict(head_dim=head_dim, dtype="bf16", value_head_dim=None,
                mask_alignment="top_left", kv_lengths=False)
    window = modifiers.trace(modifiers.soft_cap(SOFTCAP), modifiers.sliding_window(WINDOW, 0))
    alibi = modifiers.trace(modifiers.alibi(_ShapeOnly((heads,), "float32")))
    return [
        dict(base, causal=False, sliding_window=False, modifiers=window.ir,
             aux_types=window.aux_types),
        dict(base, causal=True, sliding_window=True),
        dict(base, causal=False, sliding_window=False, modifiers=alibi.ir,
             aux_types=alibi.aux_types),
        dict(base, causal=True, sliding_window=False, modifiers=alibi.ir,
             aux_types=alibi.aux_types),
        dict(base, causal=False, sliding_window=False),
        dict(base, causal=True, sliding_window=False),
    ]


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


def to_markdown(rows: List[Dict[str, Any]]) -> str:
    lines = ["| modifier | D | N | B x H | kvpipe TFLOP/s | kvpipe plain | vs plain | "
             "FlexAttention | vs Flex |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['mod']} | {r['D']} | {r['N']} | {r['B']} x {r['H']} | "
                     f"{r['kvpipe']} | {r['kvpipe_plain']} | {r['vs_plain']} | "
                     f"{r.get('flex')} | {r.get('vs_flex')} |")
    return "\n".join(lines) + "\n"
