"""Where the soft-cap + window row of `bench --mods` loses to its plain kernel (issue 15).

    python3 scripts/gpu/softcap-breakdown.py [--rounds R]   # on the GPU machine
    python3 scripts/gpu/softcap-breakdown.py --compile      # here: fill the kernel cache

Times kvpipe's forward at D 128, 8k tokens (B 2, H 16, bf16), in one process and interleaved
rounds (bench.interleaved_ms), for several ways of writing the same visible work, each with the
tuning kvpipe.attention plans for it (plans.prefill_plan) unless the case names its own:

- the causal window of 1024 keys: built in (the plain kernel), as a mask_mod region, with the
  soft-cap score_mod beside the built-in window or the mask_mod (`bench --mods`'s row), and
  the plain and soft-capped kernels on the other's tiles;
- the same at a window of 4096 keys, and without a window (non-causal), where the tiles see
  no masked blocks: how much of the gap is the window's;
- `prescaled_q` on the soft-capped row.

Each case's TFLOP/s counts its visible pairs; "vs plain" divides by the plain kernel of the same
visible work (the first case of its group).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from gpu_script import arguments  # noqa: E402

from kvpipe import bench_modifiers, modifiers, plans  # noqa: E402

N, B, H, D = 8192, 2, 16, 128
WINDOW, CAP = bench_modifiers.WINDOW, bench_modifiers.SOFTCAP
MOD_TILES = {k: v for k, v in plans.MODIFIER_PLAN[D].items()
             if k in ("consumer_warpgroups", "block_n", "tensor_row_sums", "mask_bits",
                      "late_pv_retire")}
PLAIN_TILES = dict(plans.WINDOW_PLAN[D])


def _cases():
    """(group, name, window or None (non-causal), attention kwargs, tuning or None: planned)."""
    cases = []
    for window in (WINDOW, 4 * WINDOW):
        group = f"window {window}"
        builtin = dict(causal=True, window_size=(window, 0))
        as_mask = dict(mask_mod=modifiers.sliding_window(window, 0))
        cap = dict(score_mod=modifiers.soft_cap(CAP))
        cases += [(group, "built-in window (plain)", window, builtin, None),
                  (group, "soft-cap + window mask_mod", window, {**cap, **as_mask}, None)]
        if window == WINDOW:
            cases += [
                (group, "plain on the modifier tiles", window, builtin, MOD_TILES),
                (group, "window as mask_mod", window, as_mask, None),
                (group, "soft-cap + built-in window", window, {**cap, **builtin}, None),
                (group, "soft-cap + mask_mod on the plain tiles", window, {**cap, **as_mask},
                 {**PLAIN_TILES, "static_row_max": True}),
                (group, "soft-cap + mask_mod, prescaled_q", window, {**cap, **as_mask},
                 {**plans.MODIFIER_PLAN[D], "prescaled_q": True}),
            ]
    cases += [("no window", "plain (non-causal)", None, {}, None),
              ("no window", "soft-cap (non-causal)", None,
               dict(score_mod=modifiers.soft_cap(CAP)), None)]
    return cases


def _configs(kwargs, tuning):
    """The compile_attention arguments of kvpipe.attention(**kwargs, **tuning) at N."""
    from kvpipe.attention import normalise_window

    causal = kwargs.get("causal", False)
    left, right = normalise_window(kwargs.get("window_size", (-1, -1)), causal)
    window = left >= 0 or right >= 0
    traced = modifiers.trace(kwargs.get("score_mod"), kwargs.get("mask_mod"))
    return plans.prefill_kernel_configs(D, None, "bf16", causal, "top_left", window, traced,
                                        N, N, tuning)


def main() -> int:
    args = arguments(__doc__, lambda: [config for _, _, _, kwargs, tuning in _cases()
                                       for config in _configs(kwargs, tuning)],
                     lambda parser: parser.add_argument("--rounds", type=int, default=7))
    if args is None:
        return 0
    import torch

    import kvpipe
    from kvpipe.bench import interleaved_ms

    q, k, v = (torch.randn(B, H, N, D, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    cases = _cases()
    ms = interleaved_ms(
        [((group, name), lambda kwargs=kwargs, tuning=tuning: kvpipe.attention(
            q, k, v, **kwargs, **(tuning or {}))) for group, name, _, kwargs, tuning in cases],
        args.rounds)
    print(f"D {D}, N {N}, B {B} x H {H}, cap {CAP}, forward TFLOP/s of the visible pairs, "
          f"median of {args.rounds} interleaved rounds, {torch.cuda.get_device_name()}\n")
    print("| visible work | way | tuning | TFLOP/s | vs plain |\n| --- | --- | --- | --- | --- |")
    plain = {}
    for group, name, window, kwargs, tuning in cases:
        flops, _ = bench_modifiers.row_flops(B, H, D, N, window is not None, window)
        tflops = flops / ms[(group, name)] / 1e9
        plain.setdefault(group, tflops)
        label = "plan" if tuning is None else ",".join(f"{a}={b}" for a, b in tuning.items())
        print(f"| {group} | {name} | {label} | {tflops:.1f} | {tflops / plain[group]:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
