"""Decode with modifiers: flash_attn_with_kvcache(softcap= / alibi_slopes=) on the decode
kernels (split-KV and pack-GQA chosen, the modifiers in them) against the same call on the
kernel it ran before (no split, no packing: what kvpipe.attention launched for modifiers until
2026-12-07), the plain decode kernels without the modifiers (the bar), and SDPA's cuDNN without
them; TB/s of K and V read, interleaved rounds (bench.interleaved_ms). Sq 1, bf16, every
sequence at the context length.

    python3 scripts/gpu/decode-modifiers.py --compile   # here: the kernels into the cache
    python3 scripts/gpu/decode-modifiers.py             # on the GPU machine
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from gpu_script import arguments  # noqa: E402

import kvpipe  # noqa: E402
from kvpipe import modifiers  # noqa: E402
from kvpipe.check_modifiers import _flash_score_mod  # noqa: E402
from kvpipe.plans import decode_plan  # noqa: E402

#: (model, H_q, H_kv, D, softcap, alibi, window, batch, context)
SHAPES = [
    ("gemma-2-9b local", 16, 8, 256, 50.0, False, (4095, 0), 8, 32768),
    ("gemma-2-9b global", 16, 8, 256, 50.0, False, (-1, -1), 1, 32768),
    ("gemma-2-9b global", 16, 8, 256, 50.0, False, (-1, -1), 8, 32768),
    ("bloom-7b1", 32, 32, 128, 0.0, True, (-1, -1), 8, 8192),
    ("alibi GQA 4", 32, 8, 128, 0.0, True, (-1, -1), 1, 65536),
]
MULTIPROCESSORS = 132


def configs(shape):
    """The kernels the three kvpipe columns load: (new, old, plain)."""
    _, hq, hkv, d, softcap, alibi, window, b, n = shape
    traced = modifiers.trace(_flash_score_mod(softcap, alibi, False, slopes_shape=(hq,),
                                              kv_lengths_shape=(b,)))
    regions = dict(modifiers=traced.ir, aux_types=traced.aux_types)
    base = dict(head_dim=d, dtype="bf16", causal=True, mask_alignment="bottom_right",
                sliding_window=window != (-1, -1), kv_lengths=True)
    splits, pack, tuning = decode_plan(b, hq, hkv, 1, n, d, d, 0, None, MULTIPROCESSORS, {})
    chosen = dict(base, split_kv=splits > 1, pack_gqa=pack, **tuning)
    return dict(chosen, **regions), dict(base, **regions), chosen


def main() -> int:
    if arguments(__doc__, lambda: [c for shape in SHAPES for c in configs(shape)]) is None:
        return 0

    import torch
    import torch.nn.functional as F

    from kvpipe.bench import interleaved_ms
    from kvpipe.flash_attn import _score_mod, flash_attn_with_kvcache

    print("| model | H | D | mods | B x context | chosen (split, pack) ms | TB/s "
          "| unsplit, unpacked ms | TB/s | plain decode ms | TB/s | cuDNN plain ms | TB/s "
          "| chosen / unsplit | chosen / plain (time) |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
          "| --- | --- |")
    for shape in SHAPES:
        model, hq, hkv, d, softcap, alibi, window, b, n = shape
        q = torch.randn(b, 1, hq, d, dtype=torch.bfloat16, device="cuda")
        k, v = (torch.randn(b, n, hkv, d, dtype=torch.bfloat16, device="cuda")
                for _ in range(2))
        lengths = torch.full((b,), n, dtype=torch.int32, device="cuda")
        slopes = torch.rand(hq, device="cuda") * 0.1 if alibi else None
        mods = dict(softcap=softcap, alibi_slopes=slopes)
        score_mod = _score_mod(softcap, slopes, q, lengths)
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        # cuDNN through SDPA without the modifiers (it has neither), one query
        # seeing every key, GQA by SDPA's enable_gqa.
        cudnn = ((lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=hq != hkv))
                 if window == (-1, -1) else None)
        fns = [("chosen", lambda: flash_attn_with_kvcache(q, k, v, cache_seqlens=lengths,
                                                          causal=True, window_size=window,
                                                          **mods)),
               ("unsplit", lambda: kvpipe.attention(q, k, v, causal=True, layout="bshd",
                                                    mask_alignment="bottom_right",
                                                    window_size=window, kv_lengths=lengths,
                                                    score_mod=score_mod)),
               ("plain", lambda: flash_attn_with_kvcache(q, k, v, cache_seqlens=lengths,
                                                         causal=True, window_size=window))]
        if cudnn is not None:
            try:
                _cudnn(cudnn)
                fns.append(("cudnn", lambda: _cudnn(cudnn)))
            except RuntimeError as exc:  # reported, the rest still runs
                print(f"cuDNN at {model}: {type(exc).__name__}: {exc}"[:200])
        ms = interleaved_ms(fns, 7)
        read = min(n, window[0] + 1) if window != (-1, -1) else n
        tbs = {name: 2 * b * read * hkv * d * 2 / (t * 1e-3) / 1e12 for name, t in ms.items()}
        peer = (f"{ms['cudnn']:.3f} | {tbs['cudnn']:.2f}" if "cudnn" in ms else "- | -")
        print(f"| {model} | {hq}/{hkv} | {d} | {'softcap' if softcap else 'alibi'} "
              f"{'window' if window != (-1, -1) else ''} | {b} x {n} | {ms['chosen']:.3f} | "
              f"{tbs['chosen']:.2f} | {ms['unsplit']:.3f} | {tbs['unsplit']:.2f} | "
              f"{ms['plain']:.3f} | {tbs['plain']:.2f} | {peer} | "
              f"{ms['unsplit'] / ms['chosen']:.2f}x | {ms['plain'] / ms['chosen']:.3f} |",
              flush=True)
    return 0


def _cudnn(fn):
    import torch

    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
        return fn()


if __name__ == "__main__":
    sys.exit(main())
