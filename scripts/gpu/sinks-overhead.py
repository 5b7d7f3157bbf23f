"""What attention sinks (kvpipe.sinks) cost the forward: kvpipe.attention with and without
``sinks=`` on the same inputs (the sinks in the kernel's epilogue: the `sinks` attribute),
interleaved rounds (bench.interleaved_ms), 8k tokens, causal, bf16, D 128 and 64; with the
lse as well (the sinks kernel writes it too).

    python3 scripts/gpu/sinks-overhead.py --compile   # here: the kernels into the cache
    python3 scripts/gpu/sinks-overhead.py             # on the GPU machine
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

import kvpipe  # noqa: E402
from kvpipe.plans import prefill_plan  # noqa: E402

N, B, H = 8192, 2, 16
HEAD_DIMS = (128, 64)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compile", action="store_true",
                        help="compile the kernels into the cache (no GPU) and stop")
    args = parser.parse_args()
    if args.compile:
        for d in HEAD_DIMS:
            tuning = prefill_plan(d, d, True, "top_left", False, False, False, N, N, {})
            for sinks in (False, True):
                kvpipe.compile_attention(d, "bf16", True, sinks=sinks, **tuning)
        return 0

    import torch

    from kvpipe.bench import interleaved_ms

    print("| D | N | B x H | causal | no sinks ms | with the lse ms | sinks ms | overhead |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |")
    for d in HEAD_DIMS:
        q, k, v = (torch.randn(B, H, N, d, dtype=torch.bfloat16, device="cuda")
                   for _ in range(3))
        sinks = torch.randn(H, device="cuda")
        ms = interleaved_ms([
            ("plain", lambda: kvpipe.attention(q, k, v, causal=True)),
            ("lse", lambda: kvpipe.attention(q, k, v, causal=True, return_lse=True)),
            ("sinks", lambda: kvpipe.attention(q, k, v, causal=True, sinks=sinks))], 7)
        print(f"| {d} | {N} | {B} x {H} | yes | {ms['plain']:.3f} | {ms['lse']:.3f} | "
              f"{ms['sinks']:.3f} | {ms['sinks'] / ms['plain'] - 1:+.1%} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
