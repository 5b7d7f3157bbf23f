"""Runs one kvpipe attention forward + backward on the GPU, for a profiler.

    ncu --kernel-name regex:bwd --launch-count 1 --section WarpStateStats \
        python3 scripts/profile-kernel.py --head-dim 128 --seq-len 4096 --batch 8

Shapes as `bench --backward` (H 16, bf16). Kernels come from the cache
(KVPIPE_CACHE_DIR), compiled on the CPU machine.
"""
import argparse

import torch

import kvpipe

parser = argparse.ArgumentParser()
parser.add_argument("--head-dim", type=int, default=128)
parser.add_argument("--seq-len", type=int, default=4096)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--heads", type=int, default=16)
parser.add_argument("--causal", action="store_true")
parser.add_argument("--repeat", type=int, default=3)
args = parser.parse_args()

shape = (args.batch, args.heads, args.seq_len, args.head_dim)
q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
           for _ in range(3))
for _ in range(args.repeat):
    out = kvpipe.attention(q, k, v, causal=args.causal)
    out.backward(torch.randn_like(out))
torch.cuda.synchronize()
print("done", tuple(q.grad.shape))
