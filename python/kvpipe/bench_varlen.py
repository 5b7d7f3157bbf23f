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

FlashAttention-4's ``flash_attn_varlen_func`` (``flash_attn.cute``, where
``../shared/peers/fa4.sh`` staged it) runs the same packed batch: the
serving peer's column.

The backward (2.5x the forward's FLOPs): ``attention_varlen_backward``'s
two ways -- the packed varlen backward family (three launches for the
batch) and the dense backward family per sequence (a cu_seqlens read-back
and three launches a sequence) -- and the dense backward on the padded
batch.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from kvpipe.bench import _median_ms
from kvpipe.plans import varlen_plan

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
                            mask_alignment=alignment, sliding_window=False, varlen=True,
                            **varlen_plan(HEAD_DIM, HEAD_DIM, causal, False, False, {})))
        configs.append(dict(head_dim=HEAD_DIM, dtype="bf16", causal=causal, value_head_dim=None,
                            mask_alignment="top_left", sliding_window=False))
        # The backward: packed, and dense (per sequence: each has as many
        # queries as keys, which takes the top-left family; and padded).
        configs.append(dict(head_dim=HEAD_DIM, dtype="bf16", causal=causal, value_head_dim=None,
                            mask_alignment=alignment, sliding_window=False, varlen=True,
                            backward=True))
        configs.append(dict(head_dim=HEAD_DIM, dtype="bf16", causal=causal, value_head_dim=None,
                            mask_alignment="top_left", sliding_window=False, backward=True))
    return configs


def _flops(lengths: Sequence[int], causal: bool) -> float:
    return sum(4 * HEADS * n * n * HEAD_DIM / (2 if causal else 1) for n in lengths)


def _fa4_varlen() -> Any:
    """FlashAttention-4's ``flash_attn_varlen_func``, or None."""
    try:
        from flash_attn.cute import flash_attn_varlen_func
    except Exception:  # noqa: BLE001 -- absent, or its CUDA libraries are
        return None
    return flash_attn_varlen_func


def run(causals: Sequence[bool] = (False, True)) -> List[Dict[str, Any]]:
    import torch

    import kvpipe
    from kvpipe.attention import attention_impl
    from kvpipe.backward import attention_backward
    from kvpipe.flash_attn import flash_attn_varlen_func
    from kvpipe.varlen import attention_varlen, attention_varlen_backward

    fa4 = _fa4_varlen()
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
            if fa4 is not None:
                def peer() -> Any:
                    return fa4(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu,
                               max_seqlen_q=longest, max_seqlen_k=longest, causal=causal)

                row["fa4"] = round(flops / _median_ms(peer) / 1e9, 1)
                row["varlen_vs_fa4"] = round(row["varlen"] / row["fa4"], 3)
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

            # The backward, 2.5x the forward's FLOPs.
            alignment = "bottom_right" if causal else "top_left"
            out, lse = attention_varlen(q, k, v, cu, cu, longest, longest, causal=causal,
                                        return_lse=True, mask_alignment=alignment)
            dout = torch.randn_like(out)
            for name, packed in (("bwd_packed", True), ("bwd_sequences", False)):
                def backward(packed: bool = packed) -> Any:
                    return attention_varlen_backward(
                        q, k, v, out, lse, dout, cu, cu, causal=causal,
                        mask_alignment=alignment, deterministic=False, max_seqlen_q=longest,
                        max_seqlen_k=longest, packed=packed)
                row[name] = round(2.5 * flops / _median_ms(backward) / 1e9, 1)
            dense_out, dense_lse = attention_impl(dq, dk, dv, causal=causal, layout="bshd",
                                                  return_lse=True)
            dense_dout = torch.randn_like(dense_out)

            def dense_backward() -> Any:
                return attention_backward(dq, dk, dv, dense_out, dense_lse, dense_dout,
                                          causal=causal, layout="bshd", deterministic=False)

            row["bwd_dense"] = round(2.5 * flops / _median_ms(dense_backward) / 1e9, 1)
            row["bwd_packed_vs_sequences"] = round(row["bwd_packed"] / row["bwd_sequences"], 3)
            print(row, flush=True)
            rows.append(row)
            del q, k, v, padded, dq, dk, dv, out, lse, dout, dense_out, dense_lse, dense_dout
    return rows


def to_markdown(rows: List[Dict[str, Any]]) -> str:
    lines = [f"Varlen vs dense, bf16, D {HEAD_DIM}, H {HEADS}; TFLOP/s of the real work "
             "(the dense kernel pads uneven batches to the longest sequence).", "",
             "Backward (2.5x the FLOPs): the packed varlen family, the dense family per "
             "sequence, the dense family on the padded batch.", "",
             "| batch | causal | varlen TFLOP/s | dense TFLOP/s | varlen/dense | FA4 varlen | "
             "varlen/FA4 | bwd packed | bwd per sequence | bwd dense | packed/per sequence |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        batch = r["batch"] + (" (dense padded)" if r["padded"] else "")
        lines.append(f"| {batch} | {'yes' if r['causal'] else 'no'} | {r['varlen']} | "
                     f"{r['dense']} | {r['varlen_vs_dense']} | {r.get('fa4', 'None')} | "
                     f"{r.get('varlen_vs_fa4', 'None')} | {r.get('bwd_packed', '')} | "
                     f"{r.get('bwd_sequences', '')} | {r.get('bwd_dense', '')} | "
                     f"{r.get('bwd_packed_vs_sequences', '')} |")
    return "\n".join(lines) + "\n"
