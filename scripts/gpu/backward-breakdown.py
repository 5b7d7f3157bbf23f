"""The backward's time by kernel, kvpipe's and cuDNN's, from torch.profiler (issue 13).

    python3 scripts/gpu/backward-breakdown.py [--head-dim 128] [--seq-len 1024] [--causal]

On the GPU machine, kernels from the cache (`scripts/gpu/pack.sh backward`, or `python -m
kvpipe compile --backward` and the forward). B·N = 32k tokens, H 16, bf16, as `bench
--backward`. Prints one table: each CUDA kernel the backward launches (kvpipe's preprocess,
main and postprocess; cuDNN's through torch SDPA's autograd), its mean time per backward and its
share, so that the row-wise kernels' part of a short sequence's backward is a number.
"""

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    from kvpipe.bench import _autograd_backward_fn, _kvpipe_backward_fn, _sdpa

    n, d = args.seq_len, args.head_dim
    b = max(1, 32768 // n)
    q, k, v, do = (torch.randn(b, 16, n, d, dtype=torch.bfloat16, device="cuda")
                   for _ in range(4))
    # The backward alone, as bench --backward times it: the forward once, here.
    kvpipe_backward = _kvpipe_backward_fn(q, k, v, do, causal=args.causal)
    cudnn_backward = _autograd_backward_fn(_sdpa("cudnn", args.causal), (q, k, v), do)

    rows = []
    for name, step in (("kvpipe", kvpipe_backward), ("cuDNN", cudnn_backward)):
        for _ in range(3):  # warm up (and load the kernels)
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.repeat):
                step()
            torch.cuda.synchronize()
        times = defaultdict(float)
        for entry in prof.key_averages():
            if entry.device_type == torch.autograd.DeviceType.CUDA:
                total_us = getattr(entry, "device_time_total", None)
                if total_us is None:  # older torch
                    total_us = entry.cuda_time_total
                times[entry.key] += total_us / args.repeat
        total = sum(times.values())
        for kernel, us in sorted(times.items(), key=lambda item: -item[1]):
            rows.append((name, kernel[:90], us, us / total))
        rows.append((name, "total", total, 1.0))
    print(f"backward by kernel: D {d}, N {n}, B {b} x H 16, causal {args.causal}, "
          f"{torch.cuda.get_device_name()}, mean of {args.repeat}\n")
    print("| peer | kernel | µs per backward | share |\n| --- | --- | --- | --- |")
    for name, kernel, us, share in rows:
        print(f"| {name} | `{kernel}` | {us:.1f} | {share:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
