"""What attention sinks (kvpipe.sinks) cost the forward: kvpipe.attention with and without
``sinks=`` on the same inputs, interleaved rounds (bench.interleaved_ms), D 128 and 64, 8k
tokens, causal, bf16 (kernels from the cache: `bench --mods`'s plain ones).

    python3 scripts/gpu/sinks-overhead.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

import torch  # noqa: E402

import kvpipe  # noqa: E402
from kvpipe.bench import interleaved_ms  # noqa: E402

print("| D | N | B x H | causal | no sinks ms | with the lse ms | sinks ms | overhead |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- |")
for d in (128,):
    n, b, h = 8192, 2, 16
    q, k, v = (torch.randn(b, h, n, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    sinks = torch.randn(h, device="cuda")
    ms = interleaved_ms([("plain", lambda: kvpipe.attention(q, k, v, causal=True)),
                         ("lse", lambda: kvpipe.attention(q, k, v, causal=True,
                                                          return_lse=True)),
                         ("sinks", lambda: kvpipe.attention(q, k, v, causal=True, sinks=sinks))],
                        7)
    print(f"| {d} | {n} | {b} x {h} | yes | {ms['plain']:.3f} | {ms['lse']:.3f} | "
          f"{ms['sinks']:.3f} | {ms['sinks'] / ms['plain'] - 1:+.1%} |")
