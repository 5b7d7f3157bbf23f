"""The host time of kvpipe's launchers without a GPU: CPU torch tensors stand in for CUDA ones
and a fake driver takes the launches, so what is timed is kvpipe's Python between the call
and cuLaunchKernel (checks, plans, tensor maps from the cache, argument packing); torch's
CUDA allocations and the driver's own time are not in it (on the GPU, `bench --decode`
prints the whole host time per call).

    python3 scripts/host-profile.py                  # us per call of each case
    python3 scripts/host-profile.py --profile CASE   # and cProfile's top functions
    python3 scripts/host-profile.py --gpu ...        # on a GPU: the real driver and tensors
                                                     # (host time of calls queued ahead)

Needs torch (CPU) and this checkout's compiler (KVPIPE_OPT, or build/bin/kvpipe-opt) for the
kernels' ABIs; the kernel cache is KVPIPE_CACHE_DIR's as usual.
"""
import argparse
import contextlib
import cProfile
import ctypes
import os
import pstats
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
if (ROOT / "build" / "bin" / "kvpipe-opt").exists():  # (a GPU machine has only the cache)
    os.environ.setdefault("KVPIPE_OPT", str(ROOT / "build" / "bin" / "kvpipe-opt"))

import torch  # noqa: E402

import kvpipe  # noqa: E402
from kvpipe import (_tensors, cuda, flash_attn_interface, launch, paged, plans, tma,  # noqa: E402
                    vllm_flash_attn)
from kvpipe.flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache  # noqa: E402

attention_module = sys.modules["kvpipe.attention"]
MULTIPROCESSORS = 132


def fake_device() -> None:
    """CPU tensors pass as CUDA ones; the driver's calls return at once."""
    check_tensor = _tensors.check_tensor
    _tensors.check_tensor = lambda name, t, *, device="cuda", **kw: check_tensor(
        name, t, device=None, **kw)
    descriptor = ctypes.create_string_buffer(tma.TENSOR_MAP_BYTES)

    class Encoded:
        def getPtr(self):
            return ctypes.addressof(descriptor)

    class Names:
        def __getattr__(self, name):
            return name

    driver = types.SimpleNamespace(
        cuuint64_t=int, cuuint32_t=int, CUtensorMapDataType=Names(),
        CUtensorMapInterleave=Names(), CUtensorMapSwizzle=Names(),
        CUtensorMapL2promotion=Names(), CUtensorMapFloatOOBfill=Names(),
        cuTensorMapEncodeTiled=lambda *a: (0, Encoded()), cuLaunchKernel=lambda *a: (0,))
    cuda.driver = tma.driver = lambda: driver
    tma.init_driver = lambda: None
    tma._call = lambda function, *a, context=None: getattr(driver, function)(*a)[1]
    launch.device_launch = attention_module.device_launch = (
        lambda index: (contextlib.nullcontext(), 0))
    launch._multiprocessors = plans._multiprocessors = lambda index: MULTIPROCESSORS

    attention_module._device_index = lambda q: 0

    def load_kernel(key):  # the compiler's ABI, a kernel handle the fake driver takes
        compiled = launch.compiled_kernel(key)
        if launch._forward_extras(key[0])[0]:  # split_kv
            combine = compiled.kernel_abi("combine")
            launch._loaded_combine[key[:3]] = (cuda.Kernel(object(), combine["kernel"]),
                                               combine)
        launch._loaded[key] = (cuda.Kernel(object(), compiled.name), compiled.abi)
        return launch._loaded[key]
    launch._load_kernel = load_kernel


def cases(device: str):
    """Decode steps (Sq 1, H 32/8, D 128, bf16, bshd) at 8 x 32k: the split-KV, pack-GQA plan."""
    b, hq, hkv, d, n = 8, 32, 8, 128, 32768
    q = torch.randn(b, 1, hq, d, dtype=torch.bfloat16, device=device)
    k = torch.zeros(b, n, hkv, d, dtype=torch.bfloat16, device=device)
    v = torch.zeros_like(k)
    lengths = torch.full((b,), n, dtype=torch.int32, device=device)
    slopes = torch.rand(hq, dtype=torch.float32, device=device)
    return {
        "attention": lambda: kvpipe.attention(
            q, k, v, causal=True, layout="bshd", mask_alignment="bottom_right",
            kv_lengths=lengths, num_splits=0, pack_gqa=None),
        "kvcache": lambda: flash_attn_with_kvcache(q, k, v, cache_seqlens=lengths, causal=True),
        "kvcache_softcap": lambda: flash_attn_with_kvcache(
            q, k, v, cache_seqlens=lengths, causal=True, softcap=50.0),
        "kvcache_alibi": lambda: flash_attn_with_kvcache(
            q, k, v, cache_seqlens=lengths, causal=True, alibi_slopes=slopes),
        "attention_window": lambda: kvpipe.attention(
            q, k, v, causal=True, layout="bshd", mask_alignment="bottom_right",
            window_size=(4095, 0), kv_lengths=lengths, num_splits=0, pack_gqa=None),
        "kvcache_window": lambda: flash_attn_with_kvcache(
            q, k, v, cache_seqlens=lengths, causal=True, window_size=(4095, 0)),
        **paged_cases(device),
    }


def paged_cases(device: str):
    """The same decode steps over a paged cache (pages of 16, vLLM's), through the drop-in and
    kvpipe.paged; and vLLM's FlashAttention backend's call: flash_attn_varlen_func over the
    pages with seqused_k (a batch of 8 decodes), through flash-attn's and vLLM's interface;
    SGLang's (FA3's flash_attn_with_kvcache with packed queries)."""
    b, hq, hkv, d, n, page = 8, 32, 8, 128, 32768, 16
    q = torch.randn(b, 1, hq, d, dtype=torch.bfloat16, device=device)
    k = torch.zeros(b * n // page, page, hkv, d, dtype=torch.bfloat16, device=device)
    v = torch.zeros_like(k)
    table = torch.arange(b * n // page, dtype=torch.int32, device=device).view(b, n // page)
    lengths = torch.full((b,), n, dtype=torch.int32, device=device)
    packed = q.view(b, hq, d)
    cu_seqlens_q = torch.arange(b + 1, dtype=torch.int32, device=device)
    out = torch.empty_like(packed)
    return {
        "paged": lambda: paged.paged_attention(
            q, k, v, table, lengths, causal=True, num_splits=0, pack_gqa=None),
        "kvcache_paged": lambda: flash_attn_with_kvcache(
            q, k, v, cache_seqlens=lengths, block_table=table, causal=True),
        "varlen_paged": lambda: flash_attn_varlen_func(
            packed, k, v, cu_seqlens_q, None, 1, n, causal=True, block_table=table,
            seqused_k=lengths),
        "vllm": lambda: vllm_flash_attn.flash_attn_varlen_func(
            packed, k, v, 1, cu_seqlens_q, n, seqused_k=lengths, block_table=table,
            causal=True, out=out, fa_version=3),
        "fa3_packed": lambda: flash_attn_interface.flash_attn_with_kvcache(
            packed, k, v, page_table=table, cache_seqlens=lengths, cu_seqlens_q=cu_seqlens_q,
            max_seqlen_q=1, causal=True),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", metavar="CASE[,CASE]",
                        help="cProfile these cases too")
    parser.add_argument("--gpu", action="store_true",
                        help="time on a GPU with the real driver (no fakes); each round's "
                             "calls are queued ahead of the GPU, then synchronised")
    args = parser.parse_args()
    if args.gpu:
        args.calls = min(args.calls, 100)  # (the queue must not fill: host time only)
    else:
        fake_device()
    calls = cases("cuda" if args.gpu else "cpu")
    sync = torch.cuda.synchronize if args.gpu else (lambda: None)
    for call in calls.values():
        call()  # (loads the kernel)
    best = {name: float("inf") for name in calls}
    for _ in range(args.rounds):  # interleaved; the best round of each (the host is shared)
        for name, call in calls.items():
            sync()
            start = time.perf_counter()
            for _ in range(args.calls):
                call()
            best[name] = min(best[name], (time.perf_counter() - start) / args.calls * 1e6)
            sync()
    what = "host time, GPU" if args.gpu else "kvpipe's Python, fake driver"
    print(f"| case | us per call ({what}; best of {args.rounds} rounds of {args.calls}) |\n"
          "| --- | --- |")
    for name, us in best.items():
        print(f"| {name} | {us:.1f} |")
    for name in args.profile.split(",") if args.profile else ():
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.calls):
            calls[name]()
        profile.disable()
        sync()
        print(f"\n### {name}")
        pstats.Stats(profile).sort_stats("tottime").print_stats(20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
