"""One forward launch of kvpipe and of its peers on the same inputs, for Nsight Compute.

    ncu --profile-from-start off --section WarpStateStats --section SchedulerStats \
        python3 scripts/gpu/profile-forward.py --head-dim 64 --seq-len 8192 --peer fa4 cudnn

Every callable runs a few times first (FA4 JIT-compiles its kernel on its first call), then the
profiler range (cudaProfilerStart/Stop) holds exactly one launch of each, in the order given:
kvpipe first. `--clocks SECONDS` instead runs each callable alone for that long while
`nvidia-smi` samples the SM clock and the power draw every 50 ms, and prints each one's
TFLOP/s with its median clock and power (what ncu's fixed clocks hide). Shapes as `bench`: H 16, B·N = 32k tokens, bf16, (B, H, S, D). `--soft-cap CAP` adds
kvpipe with a soft-cap score_mod after the plain kernel. Kernels come from
the cache (KVPIPE_CACHE_DIR), compiled on the CPU machine with the same tuning (`--tune`, added
to the prefill plan's choice when it starts with '+', as scripts/gpu/ab.py).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import kvpipe  # noqa: E402
from kvpipe.__main__ import _tuning  # noqa: E402
from kvpipe.plans import prefill_plan  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--head-dim", type=int, default=64)
parser.add_argument("--seq-len", type=int, default=8192)
parser.add_argument("--heads", type=int, default=16)
parser.add_argument("--causal", action="store_true")
parser.add_argument("--tune", default="", help="NAME=VALUE[,...]; '+' adds it to the plan's")
parser.add_argument("--peer", nargs="*", default=[], choices=["fa4", "cudnn"])
parser.add_argument("--soft-cap", type=float, default=0.0,
                    help="also kvpipe with modifiers.soft_cap(CAP) as its score_mod, after the "
                         "plain kernel (each with the plan's tuning unless --tune)")
parser.add_argument("--clocks", type=float, default=0.0,
                    help="seconds per callable under nvidia-smi sampling (no profiler range)")
args = parser.parse_args()

batch = max(1, 32768 // args.seq_len)
shape = (batch, args.heads, args.seq_len, args.head_dim)
q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
text = args.tune
tuning = _tuning(text.lstrip("+").split(",") if text.lstrip("+") else [])
if text.startswith("+"):
    planned = prefill_plan(args.head_dim, args.head_dim, args.causal, "top_left", False, False,
                           False, args.seq_len, args.seq_len, {})
    tuning = {**planned, **tuning}

calls = [("kvpipe", lambda: kvpipe.attention(q, k, v, causal=args.causal, **tuning))]
if args.soft_cap:
    from kvpipe import modifiers

    soft_cap = modifiers.soft_cap(args.soft_cap)
    calls.append(("kvpipe soft-cap", lambda: kvpipe.attention(
        q, k, v, causal=args.causal, score_mod=soft_cap, **tuning)))
for peer in args.peer:
    if peer == "fa4":
        from flash_attn.cute import flash_attn_func

        qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
        calls.append(("fa4", lambda: flash_attn_func(qt, kt, vt, causal=args.causal)))
    else:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=args.causal)

        calls.append(("cudnn", cudnn))
for _ in range(3):
    for _, call in calls:
        call()
torch.cuda.synchronize()
if args.clocks > 0:
    import statistics
    import subprocess
    import time

    flops = 4 * batch * args.heads * args.seq_len ** 2 * args.head_dim
    if args.causal:
        flops //= 2
    sampler = subprocess.Popen(
        ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits",
         "-lms", "50"], stdout=subprocess.PIPE, text=True)
    windows = []
    for name, call in calls:
        time.sleep(1.0)  # let the clock recover between callables
        start, launches = time.time(), 0
        while time.time() - start < args.clocks:
            for _ in range(10):
                call()
            torch.cuda.synchronize()
            launches += 10
        windows.append((name, start, time.time(), launches))
    time.sleep(0.2)
    sampler.terminate()
    samples = []
    for line in sampler.communicate()[0].splitlines():
        stamp, clock, power = (f.strip() for f in line.split(","))
        when = time.mktime(time.strptime(stamp.split(".")[0], "%Y/%m/%d %H:%M:%S"))
        when += float("0." + stamp.split(".")[1]) if "." in stamp else 0.0
        samples.append((when, float(clock), float(power)))
    print("| callable | TFLOP/s | SM clock MHz (median) | power W (median) | samples |")
    print("| --- | --- | --- | --- | --- |")
    for name, start, end, launches in windows:
        inside = [(c, w) for t, c, w in samples if start + 0.3 <= t <= end]
        clock = statistics.median(c for c, _ in inside) if inside else float("nan")
        power = statistics.median(w for _, w in inside) if inside else float("nan")
        print(f"| {name} | {flops * launches / (end - start) / 1e12:.1f} | {clock:.0f} | "
              f"{power:.0f} | {len(inside)} |")
    sys.exit(0)
torch.cuda.cudart().cudaProfilerStart()
for name, call in calls:
    call()
    torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("profiled, in order:", ", ".join(name for name, _ in calls), "tuning", tuning)
