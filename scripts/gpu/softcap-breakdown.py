"""Where the soft-cap + window row of `bench --mods` loses to its plain kernel (issue 15).

    python3 scripts/gpu/softcap-breakdown.py            # on the GPU machine
    python3 scripts/gpu/softcap-breakdown.py --compile  # here: fill the kernel cache

Times kvpipe's forward at D 128, 8k tokens (B 2, H 16, bf16), in one process, for the four
ways of writing the same visible work: the built-in causal window (the plain kernel), the window
as a mask_mod region, the soft-cap score_mod with the built-in window, and both as regions
(`bench --mods`'s row). The ratios to the plain kernel split the gap into the mask_mod's part
and the soft-cap's.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from kvpipe import bench_modifiers, modifiers  # noqa: E402

N, B, H, D = 8192, 2, 16, 128
WINDOW, CAP = bench_modifiers.WINDOW, bench_modifiers.SOFTCAP
VARIANTS = {
    "built-in window (plain)": dict(causal=True, window_size=(WINDOW, 0)),
    "window as mask_mod": dict(mask_mod=modifiers.sliding_window(WINDOW, 0)),
    "soft-cap + built-in window": dict(score_mod=modifiers.soft_cap(CAP), causal=True,
                                       window_size=(WINDOW, 0)),
    "soft-cap + window mask_mod": dict(score_mod=modifiers.soft_cap(CAP),
                                       mask_mod=modifiers.sliding_window(WINDOW, 0)),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", action="store_true",
                        help="compile the four kernels into the cache (no GPU)")
    args = parser.parse_args()
    if args.compile:
        from kvpipe import kernels
        from kvpipe.attention import normalise_window

        for name, kwargs in VARIANTS.items():
            traced = modifiers.trace(kwargs.get("score_mod"), kwargs.get("mask_mod"))
            left, right = normalise_window(kwargs.get("window_size", (-1, -1)),
                                           kwargs.get("causal", False))
            k = kernels.compile_attention(
                D, "bf16", kwargs.get("causal", False), sliding_window=left >= 0 or right >= 0,
                **(dict(modifiers=traced.ir, aux_types=traced.aux_types) if traced else {}))
            print(f"{name}: {k.name}")
        return 0
    import torch

    import kvpipe

    q, k, v = (torch.randn(B, H, N, D, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    flops, _ = bench_modifiers.row_flops(B, H, D, N, True, WINDOW)
    reference = kvpipe.attention(q, k, v, **VARIANTS["built-in window (plain)"])
    rows = []
    for name, kwargs in VARIANTS.items():
        out = kvpipe.attention(q, k, v, **kwargs)
        if "score_mod" not in kwargs:  # the same output as the plain kernel
            assert (out - reference).abs().max().item() < 1e-2, name
        rows.append((name, round(flops / bench_modifiers._median_ms(
            lambda kwargs=kwargs: kvpipe.attention(q, k, v, **kwargs)) / 1e9, 1)))
    plain = rows[0][1]
    print(f"D {D}, N {N}, B {B} x H {H}, window {WINDOW}, cap {CAP}, forward TFLOP/s "
          f"of the visible pairs, {torch.cuda.get_device_name()}\n")
    print("| way | TFLOP/s | vs plain |\n| --- | --- | --- |")
    for name, tflops in rows:
        print(f"| {name} | {tflops} | {tflops / plain:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
