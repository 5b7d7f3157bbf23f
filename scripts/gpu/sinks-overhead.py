"""What attention sinks (kvpipe.sinks) cost the forward: kvpipe.attention with and without
``sinks=`` on the same inputs (the sinks in the kernel's epilogue: the `sinks` attribute),
interleaved rounds (bench.interleaved_ms), 8k tokens, causal, bf16, D 128 and 64; with the
lse as well (the sinks kernel writes it too); and FA4 without and with its ``learnable_sink``
where ../shared/peers/fa4.sh staged it.

    python3 scripts/gpu/sinks-overhead.py --compile   # here: the kernels into the cache
    python3 scripts/gpu/sinks-overhead.py             # on the GPU machine
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from gpu_script import arguments  # noqa: E402

import kvpipe  # noqa: E402
from kvpipe.plans import prefill_kernel_configs  # noqa: E402

N, B, H = 8192, 2, 16
HEAD_DIMS = (128, 64)


def main() -> int:
    if arguments(__doc__, lambda: [
            config for d in HEAD_DIMS for sinks in (False, True)
            for config in prefill_kernel_configs(d, None, "bf16", True, "top_left", False,
                                                 None, N, N, sinks=sinks)]) is None:
        return 0

    import torch

    from kvpipe.bench import _fa4, interleaved_ms

    fa4 = _fa4()
    print("| D | N | B x H | causal | no sinks ms | with the lse ms | sinks ms | overhead "
          "| FA4 ms | FA4 sinks ms | FA4 overhead | kvpipe sinks / FA4 sinks (time) |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for d in HEAD_DIMS:
        q, k, v = (torch.randn(B, H, N, d, dtype=torch.bfloat16, device="cuda")
                   for _ in range(3))
        sinks = torch.randn(H, device="cuda")
        fns = [("plain", lambda: kvpipe.attention(q, k, v, causal=True)),
               ("lse", lambda: kvpipe.attention(q, k, v, causal=True, return_lse=True)),
               ("sinks", lambda: kvpipe.attention(q, k, v, causal=True, sinks=sinks))]
        if fa4 is not None:
            # FA4's learnable_sink (flash_attn.cute), on (B, S, H, D) views.
            qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
            try:
                for sink in (None, sinks):
                    fa4(qt, kt, vt, causal=True, learnable_sink=sink)
                torch.cuda.synchronize()
                fns += [("fa4", lambda: fa4(qt, kt, vt, causal=True)),
                        ("fa4 sinks", lambda: fa4(qt, kt, vt, causal=True,
                                                  learnable_sink=sinks))]
            except Exception as exc:  # noqa: BLE001 -- reported, the rest still runs
                print(f"FA4 with learnable_sink failed: {type(exc).__name__}: {exc}"[:300])
        ms = interleaved_ms(fns, 7)
        peer = (f"{ms['fa4']:.3f} | {ms['fa4 sinks']:.3f} | "
                f"{ms['fa4 sinks'] / ms['fa4'] - 1:+.1%} | {ms['sinks'] / ms['fa4 sinks']:.3f}"
                if "fa4 sinks" in ms else "- | - | - | -")
        print(f"| {d} | {N} | {B} x {H} | yes | {ms['plain']:.3f} | {ms['lse']:.3f} | "
              f"{ms['sinks']:.3f} | {ms['sinks'] / ms['plain'] - 1:+.1%} | {peer} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
