"""Remembered launch plans (kvpipe.attention's ``_launches``): a call whose
signature was planned before launches exactly what planning it again
launches. CPU torch tensors stand in for CUDA ones and a fake driver records
the launches (needs torch, CPU is enough)."""

import contextlib
import sys

import pytest

import kvpipe
from kvpipe import _tensors, cuda, flash_attn, launch, modifiers, paged, plans, schedule
from needs import needs_torch

attention_module = sys.modules["kvpipe.attention"]
#: Every launcher's plans (and the drop-in's checked calls).
PLANS = ((attention_module, "_launches"), (paged, "_launches"), (paged, "_varlen_launches"),
         (flash_attn, "_kvcache_calls"))


def clear_plans():
    for module, name in PLANS:
        getattr(module, name).clear()


def planned():
    return sum(len(getattr(module, name)) for module, name in PLANS)


@pytest.fixture
def launches(compiler, tmp_path, monkeypatch):
    """Every launch as (kernel, grid, block, shared memory, argument bytes);
    allocations come from a pool (the same address for the same request), so
    that two calls' arguments compare byte for byte."""
    import torch

    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path))
    check_tensor = _tensors.check_tensor
    monkeypatch.setattr(_tensors, "check_tensor", lambda name, t, *, device="cuda", **kw:
                        check_tensor(name, t, device=None, **kw))
    monkeypatch.setattr(launch, "_loaded", {})
    combines = {}  # (attention.py holds the dict by name too)
    monkeypatch.setattr(launch, "_loaded_combine", combines)
    monkeypatch.setattr(attention_module, "_loaded_combine", combines)
    monkeypatch.setattr(launch, "_maps", type(launch._maps)())
    monkeypatch.setattr(launch, "_tensor_map", lambda name, t, layout, spec: (
        t.data_ptr().to_bytes(8, "little") + bytes(str((t.shape, t.stride(), spec)), "ascii")
    ).ljust(128, b"\0")[:128])
    for module, name in PLANS:
        monkeypatch.setattr(module, name, launch.LaunchPlans())
    monkeypatch.setattr(attention_module, "_device_index", lambda q: 0)
    for module in (attention_module, launch):
        monkeypatch.setattr(module, "device_launch",
                            lambda index: (contextlib.nullcontext(), 0))
    for module in (launch, plans, attention_module):
        monkeypatch.setattr(module, "_multiprocessors", lambda index: 132)
    tables = {}

    def device_tile_table(shape, ctas, index):  # built once per key, as on a device
        if (shape, ctas) not in tables:
            tables[shape, ctas] = torch.tensor(schedule.build_tile_table(
                shape, ctas, schedule.L2_GROUP_BYTES), dtype=torch.int32)
        return tables[shape, ctas]
    monkeypatch.setattr(schedule, "device_tile_table", device_tile_table)

    def load_kernel(key):  # the compiler's ABI, no module
        compiled = launch.compiled_kernel(key)
        if launch._forward_extras(key[0])[0]:  # split_kv
            combine = compiled.kernel_abi("combine")
            launch._loaded_combine[key[:3]] = (cuda.Kernel(None, combine["kernel"]), combine)
        launch._loaded[key] = (cuda.Kernel(None, compiled.name), compiled.abi)
        return launch._loaded[key]
    monkeypatch.setattr(launch, "_load_kernel", load_kernel)

    recorded = []

    def record(self, grid, block, args, shared_mem=0, stream=None):
        recorded.append((self.name, grid, block, shared_mem, [bytes(a) for a in args]))
    monkeypatch.setattr(cuda.Kernel, "launch", record)

    pool = {}
    empty = torch.empty

    def pooled(*shape, dtype=None, device=None):
        key = (str(shape), dtype)
        if key not in pool:
            pool[key] = empty(*shape, dtype=dtype)
        return pool[key]
    monkeypatch.setattr(torch, "empty", pooled)
    return recorded


@needs_torch
def test_a_remembered_plan_launches_what_planning_launches(launches):
    # A call with new tensors of a planned signature (other addresses, other
    # values) launches what planning that call afresh launches.
    import torch
    from kvpipe.flash_attn import flash_attn_with_kvcache

    b, hq, hkv, n = 2, 8, 2, 2048

    def decode_tensors():
        return dict(q=torch.randn(b, 1, hq, 128, dtype=torch.bfloat16),
                    k=torch.randn(b, n, hkv, 128, dtype=torch.bfloat16),
                    v=torch.randn(b, n, hkv, 128, dtype=torch.bfloat16),
                    lengths=torch.randint(1, n, (b,), dtype=torch.int32),
                    slopes=torch.rand(hq))

    def prefill_tensors():
        return {name: torch.randn(1, 4, 300, 64, dtype=torch.float16) for name in "qkv"}

    def paged_tensors():  # 2 sequences of up to 2048 keys in pages of 16, shuffled
        pages = torch.randperm(b * n // 16, dtype=torch.int32)
        return dict(q=torch.randn(b, 1, hq, 128, dtype=torch.bfloat16),
                    k=torch.randn(b * n // 16, 16, hkv, 128, dtype=torch.bfloat16),
                    v=torch.randn(b * n // 16, 16, hkv, 128, dtype=torch.bfloat16),
                    table=pages.view(b, n // 16),
                    lengths=torch.randint(1, n, (b,), dtype=torch.int32),
                    cu_q=torch.arange(b + 1, dtype=torch.int32))

    calls = {  # name: (tensors, call, launches)
        "decode, split and packed": (decode_tensors, lambda t: flash_attn_with_kvcache(
            t["q"], t["k"], t["v"], cache_seqlens=t["lengths"], causal=True, num_splits=3), 2),
        "decode, window, soft-cap": (decode_tensors, lambda t: flash_attn_with_kvcache(
            t["q"], t["k"], t["v"], cache_seqlens=t["lengths"], causal=True,
            window_size=(500, 0), softcap=30.0), 2),
        "decode, ALiBi, lse": (decode_tensors, lambda t: flash_attn_with_kvcache(
            t["q"], t["k"], t["v"], cache_seqlens=t["lengths"], causal=True,
            alibi_slopes=t["slopes"], return_softmax_lse=True), 2),
        "paged decode, split": (paged_tensors, lambda t: flash_attn.flash_attn_with_kvcache(
            t["q"], t["k"], t["v"], cache_seqlens=t["lengths"], block_table=t["table"],
            causal=True, num_splits=2, return_softmax_lse=True), 2),
        "paged decode, unsplit, window": (paged_tensors, lambda t: paged.paged_attention(
            t["q"], t["k"], t["v"], t["table"], t["lengths"], causal=True,
            window_size=(300, 0)), 1),
        "paged varlen, seqused_k, soft-cap": (paged_tensors, lambda t:
            flash_attn.flash_attn_varlen_func(
                t["q"].view(b, hq, 128), t["k"], t["v"], t["cu_q"], None, 1, n, causal=True,
                softcap=20.0, block_table=t["table"], seqused_k=t["lengths"]), 1),
        "prefill, causal": (prefill_tensors, lambda t: kvpipe.attention(
            t["q"], t["k"], t["v"], causal=True), 1),
        "prefill, mask_mod": (prefill_tensors, lambda t: kvpipe.attention(
            t["q"], t["k"], t["v"], mask_mod=modifiers.prefix_lm(100), scale=0.5), 1),
    }
    for name, (tensors, call, count) in calls.items():
        clear_plans()
        call(tensors())
        assert planned() >= 1, name
        again = tensors()
        launches.clear()
        call(again)  # from the remembered plan
        remembered = list(launches)
        clear_plans()
        launches.clear()
        call(again)  # planned afresh
        assert len(remembered) == count and remembered == launches, name
        launches.clear()


@needs_torch
def test_a_plan_is_per_signature(launches):
    import torch

    x = torch.zeros(1, 4, 256, 64, dtype=torch.bfloat16)
    kvpipe.attention(x, x, x)
    kvpipe.attention(x, x, x, causal=True)
    kvpipe.attention(x[:, :, :128], x, x)            # another shape
    kvpipe.attention(x.transpose(1, 2).contiguous().transpose(1, 2), x, x)  # other strides
    kvpipe.attention(x, x, x, scale=0.25)
    assert len(attention_module._launches) == 5
    # An unaligned view is planned again (its checks name it).
    unaligned = torch.zeros(1 * 4 * 256 * 64 + 1, dtype=torch.bfloat16)[1:].view(1, 4, 256, 64)
    with pytest.raises(ValueError, match="q's data pointer must be 16-byte aligned"):
        kvpipe.attention(unaligned, x, x)
    # A value equal to a planned one but of a type the checks refuse is
    # checked, not taken for the planned one.
    with pytest.raises(TypeError, match="causal"):
        kvpipe.attention(x, x, x, causal=1)


@needs_torch
def test_seqused_k_is_the_kernels_kv_lengths(launches):
    # vLLM's seqused_k goes to the paged varlen kernel as given (its
    # kv_lengths), with no cu_seqlens_k computed from it per call.
    import torch

    b, hq, hkv, n = 3, 8, 2, 256
    k = torch.randn(b * n // 16, 16, hkv, 128, dtype=torch.bfloat16)
    table = torch.arange(b * n // 16, dtype=torch.int32).view(b, n // 16)
    used = torch.tensor([5, 256, 1], dtype=torch.int32)
    cu_q = torch.tensor([0, 1, 3, 4], dtype=torch.int32)
    q = torch.randn(4, hq, 128, dtype=torch.bfloat16)
    for _ in range(2):  # planned, then from the plan
        launches.clear()
        flash_attn.flash_attn_varlen_func(q, k, k, cu_q, None, 2, n, causal=True,
                                          block_table=table, seqused_k=used)
        (plan,) = paged._varlen_launches._plans.values()
        params = plan.abi["params"]
        assert "cu_seqlens_k" not in params and plan.abi["kv_lengths"]
        (_, _, _, _, args), = launches
        by_name = dict(zip(params, args))
        assert by_name["kv_lengths"] == used.data_ptr().to_bytes(8, "little")
        assert by_name["cu_seqlens_q"] == cu_q.data_ptr().to_bytes(8, "little")
    # Both key counts, or neither, are refused, naming them.
    with pytest.raises(ValueError, match="cu_seqlens_k or seqused_k"):
        flash_attn.flash_attn_varlen_func(q, k, k, cu_q, cu_q, 2, n, block_table=table,
                                          seqused_k=used)
    with pytest.raises(ValueError, match=r"seqused_k must have shape \(3,\)"):
        flash_attn.flash_attn_varlen_func(q, k, k, cu_q, None, 2, n, block_table=table,
                                          seqused_k=used[:2])
