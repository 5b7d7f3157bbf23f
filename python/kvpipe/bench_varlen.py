"""``python -m kvpipe bench --varlen``: the ``varlen`` kernel (packed
sequences, ``kvpipe.flash_attn.flash_attn_varlen_func``) against the dense
kernel on the same sequence lengths, in one process on the same inputs.

Equal lengths (8 x 2k, 4 x 8k): the dense kernel runs the batch as
``(B, S, H, D)``, exactly the same work, so the ratio is the cost of the
per-tile offsets and the predicated epilogue (issue 14 asks >= 0.9). An
uneven batch: the dense kernel must pad every sequence to the longest,
which is what varlen saves. TFLOP/s count the real work of each sequence
(4 * H * n_q * n_k * D, halved when causal) over the median time, for both
columns.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from kvpipe.bench import _median_ms

#: (label, lengths) of the batches.
BATCHES: List[Tuple[str, Tuple[int, ...]]] = [
    ("8 x 2k", (2048,) * 8),
    ("4 x 8k", (8192,) * 4),
    ("uneven", (8192, 4096, 3000, 2048, 1024, 700, 512, 129, 64, 1)),
]
HEADS = 16
HEAD_DIM = 128


def kernel_configs() -> List[Dict[str, Any]]:
    """The kernels ``run`` launches: varlen (causal bottom-right, as
    flash-attn's) and dense (top-left, the same mask on equal lengths)."""
    configs = []
    for causal in (False, True):
        alignment = "bottom_right" if causal else "top_left"
        configs.append(dict(head_dim=HEAD_DIM, dtype="bf16", causal=causal, value_head_dim=None,
                            mask_alignment=alignment, sliding_window=False, varlen=True))
        configs.append(dict(head_dim=HEAD_DIM, dtype="bf16", causal=causal, value_head_dim=None,
                            mask_alignment="top_left", sliding_window=False))
    return configs


def _flops(lengths: Sequence[int], causal: bool) -> float:
    return sum(4 * HEADS * n * n * HEAD_DIM / (2 if causal else 1) for n in lengths)


def run(causals: Sequence[bool] = (False, True)) -> List[Dict[str, Any]]:
    import torch

    import kvpipe
    from kvpipe.flash_attn import flash_attn_varlen_func

    rows = []
    for label, lengths in BATCHES:
        for causal in causals:
            total, longest, batch = sum(lengths), max(lengths), len(lengths)
            q, k, v = (torch.randn(total, HEADS, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
                       for _ in range(3))
            offsets = [0]
            for n in lengths:
                offsets.append(offsets[-1] + n)
            cu = torch.tensor(offsets, dtype=torch.int32, device="cuda")
            flops = _flops(lengths, causal)
            row: Dict[str, Any] = {"batch": label, "lengths": list(lengths), "causal": causal,
                                   "D": HEAD_DIM, "H": HEADS}

            def varlen() -> Any:
                return flash_attn_varlen_func(q, k, v, cu, cu, longest, longest, causal=causal)

            row["varlen"] = round(flops / _median_ms(varlen) / 1e9, 1)
            # Dense: the same sequences padded to the longest (no padding
            # when the lengths are equal), (B, S, H, D).
            padded = [torch.zeros(batch, longest, HEADS, HEAD_DIM, dtype=torch.bfloat16,
                                  device="cuda") for _ in range(3)]
            for b, n in enumerate(lengths):
                for dense, packed in zip(padded, (q, k, v)):
                    dense[b, :n] = packed[offsets[b]:offsets[b] + n]
            dq, dk, dv = padded

            def dense() -> Any:
                # Top-left: the same mask as bottom-right for n_q = n_k.
                return kvpipe.attention(dq, dk, dv, causal=causal, layout="bshd")

            row["dense"] = round(flops / _median_ms(dense) / 1e9, 1)
            row["padded"] = any(n != longest for n in lengths)
            row["varlen_vs_dense"] = round(row["varlen"] / row["dense"], 3)
            print(row, flush=True)
            rows.append(row)
            del q, k, v, padded, dq, dk, dv
    return rows


def to_markdown(rows: List[Dict[str, Any]]) -> str:
    lines = [f"Varlen vs dense, bf16, D {HEAD_DIM}, H {HEADS}; TFLOP/s of the real work "
             "(the dense kernel pads uneven batches to the longest sequence).", "",
             "| batch | causal | varlen TFLOP/s | dense TFLOP/s | varlen/dense |",
             "| --- | --- | --- | --- | --- |"]
    for r in rows:
        batch = r["batch"] + (" (dense padded)" if r["padded"] else "")
        lines.append(f"| {batch} | {'yes' if r['causal'] else 'no'} | {r['varlen']} | "
                     f"{r['dense']} | {r['varlen_vs_dense']} |")
    return "\n".join(lines) + "\n"
