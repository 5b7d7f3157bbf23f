"""One FlashAttention-4 sm_90 forward kernel compiled without a GPU (scripts/peers/fa4-sass.sh).

    python fa4_compile.py HEAD_DIM CAUSAL(0|1)

FA4's interface compiles on the first call and skips the launch under torch's FakeTensorMode;
the environment (set by fa4-sass.sh) names the target and where the PTX and cubin are kept.
Prints the kernel object's tile configuration."""
import json
import sys
import time

import cutlass.cute as cute
import flash_attn.cute.interface as interface
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

head_dim, causal = int(sys.argv[1]), bool(int(sys.argv[2]))
batch, seq, heads = 4, 4096, 16
kernels = []
compile_ = cute.compile


def recording_compile(*args, **kwargs):
    kernels.append(args[0])
    return compile_(*args, **kwargs)


interface.cute.compile = recording_compile
start = time.time()
with FakeTensorMode(allow_non_fake_inputs=True):
    q, k, v = (torch.empty(batch, seq, heads, head_dim, dtype=torch.bfloat16, device="cuda")
               for _ in range(3))
    interface._flash_attn_fwd(q, k, v, causal=causal)
print(f"compiled d={head_dim} causal={causal} in {time.time() - start:.1f} s")
names = ("tile_m", "tile_n", "num_stages", "num_wg_mma", "num_threads", "num_mma_regs",
         "num_producer_regs", "intra_wg_overlap", "mma_pv_is_rs", "use_scheduler_barrier")
config = {name: getattr(kernels[0], name, None) for name in names}
print("config " + json.dumps({k: v if isinstance(v, (int, bool, type(None))) else str(v)
                              for k, v in config.items()}))
