"""Windowed decode: which part of the decode plan makes a sliding-window step slower than the
unsplit kernel (session 33: Gemma 2's local layer, 8 x 32k, window 4096, 0.294 ms on the
decode plan against 0.233 ms unsplit). Each shape runs kvpipe.attention (Sq 1, bf16, bshd,
bottom-right causal, kv_lengths) with num_splits x pack_gqa fixed, with and without the window,
in interleaved rounds (bench.interleaved_ms); TB/s of the K/V the window leaves visible.

    python3 scripts/gpu/window-decode.py --compile   # here: the kernels into the cache
    python3 scripts/gpu/window-decode.py             # on the GPU machine
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from gpu_script import arguments  # noqa: E402

import kvpipe  # noqa: E402
from kvpipe.plans import decode_plan  # noqa: E402

#: (model, H_q, H_kv, D, window left, batch, context)
SHAPES = [("gemma-2-9b local", 16, 8, 256, 4095, 8, 32768),
          ("mistral-7b", 32, 8, 128, 4095, 8, 32768)]
#: (num_splits, pack_gqa) of each column; (1, False) is the unsplit kernel.
VARIANTS = [(1, False), (1, True), (2, False), (2, True), (4, True), (8, True), (0, None)]
MULTIPROCESSORS = 132


def config(shape, window, splits, pack):
    """The compile_attention arguments of the kernel a variant launches."""
    _, hq, hkv, d, _, b, n = shape
    splits, packed, tuning = decode_plan(b, hq, hkv, 1, n, d, d, splits, pack,
                                         MULTIPROCESSORS, {})
    return dict(head_dim=d, dtype="bf16", causal=True, mask_alignment="bottom_right",
                sliding_window=window, kv_lengths=True, split_kv=splits > 1,
                pack_gqa=packed, **tuning)


def main() -> int:
    if arguments(__doc__, lambda: [config(shape, window, splits, pack) for shape in SHAPES
                                   for window in (True, False)
                                   for splits, pack in VARIANTS]) is None:
        return 0

    import torch

    from kvpipe.bench import interleaved_ms

    names = [f"{s}x{'pack' if p else 'nopack' if p is False else 'plan'}" for s, p in VARIANTS]
    print("| model | window | " + " | ".join(f"{n} ms (TB/s)" for n in names) + " |\n"
          + "| --- " * (len(names) + 2) + "|")
    for shape in SHAPES:
        model, hq, hkv, d, left, b, n = shape
        q = torch.randn(b, 1, hq, d, dtype=torch.bfloat16, device="cuda")
        k, v = (torch.randn(b, n, hkv, d, dtype=torch.bfloat16, device="cuda")
                for _ in range(2))
        lengths = torch.full((b,), n, dtype=torch.int32, device="cuda")
        for window in ((left, 0), (-1, -1)):
            fns = [(name, lambda s=s, p=p: kvpipe.attention(
                        q, k, v, causal=True, layout="bshd", mask_alignment="bottom_right",
                        window_size=window, kv_lengths=lengths, num_splits=s, pack_gqa=p))
                   for name, (s, p) in zip(names, VARIANTS)]
            ms = interleaved_ms(fns, 7)
            read = min(n, window[0] + 1) if window[0] >= 0 else n
            cells = [f"{ms[name]:.3f} ({2 * b * read * hkv * d * 2 / (ms[name] * 1e9):.2f})"
                     for name in names]
            print(f"| {model} | {window} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
