"""kvpipe.flash_attn: flash-attn 2.x's signatures, and its argument errors
raised before any launch (CPU-only: tensor-like fakes stand in for torch)."""

import inspect

import pytest

import kvpipe
from kvpipe.attention import normalise_window
from kvpipe import flash_attn
from fakes import FakeTensor, torch_stand_in


def bshd(b=2, s=16, h=4, d=128, **kw):
    return FakeTensor((b, s, h, d), **kw)


# flash-attn 2.x's signatures (flash_attn/flash_attn_interface.py), which an
# engine calls by keyword: names, order and defaults must match; then
# FlashAttention-4's learnable_sink (gpt-oss's attention sinks).
FLASH_ATTN_FUNC = [
    ("q", inspect.Parameter.empty), ("k", inspect.Parameter.empty),
    ("v", inspect.Parameter.empty), ("dropout_p", 0.0), ("softmax_scale", None),
    ("causal", False), ("window_size", (-1, -1)), ("softcap", 0.0), ("alibi_slopes", None),
    ("deterministic", False), ("return_attn_probs", False), ("learnable_sink", None)]
FLASH_ATTN_WITH_KVCACHE = [
    ("q", inspect.Parameter.empty), ("k_cache", inspect.Parameter.empty),
    ("v_cache", inspect.Parameter.empty), ("k", None), ("v", None), ("rotary_cos", None),
    ("rotary_sin", None), ("cache_seqlens", None), ("cache_batch_idx", None),
    ("cache_leftpad", None), ("block_table", None), ("softmax_scale", None), ("causal", False),
    ("window_size", (-1, -1)), ("softcap", 0.0), ("rotary_interleaved", True),
    ("alibi_slopes", None), ("num_splits", 0), ("return_softmax_lse", False),
    ("learnable_sink", None)]


@pytest.mark.parametrize("function,expected", [
    (flash_attn.flash_attn_func, FLASH_ATTN_FUNC),
    (flash_attn.flash_attn_with_kvcache, FLASH_ATTN_WITH_KVCACHE),
])
def test_signatures_match_flash_attn(function, expected):
    params = inspect.signature(function).parameters
    assert [(p.name, p.default) for p in params.values()] == expected


def test_learnable_sink_reaches_the_launchers_as_sinks(monkeypatch):
    from kvpipe import paged

    calls = []

    def record(*args, **kwargs):
        calls.append(kwargs.get("sinks"))
        return "o"

    torch_stand_in(monkeypatch)
    monkeypatch.setattr(flash_attn, "attention", record)
    monkeypatch.setattr(flash_attn, "attention_varlen", record)
    monkeypatch.setattr(paged, "paged_attention", record)
    sink = FakeTensor((4,), dtype="float32")
    flash_attn.flash_attn_func(bshd(), bshd(), bshd(), learnable_sink=sink)
    flash_attn.flash_attn_with_kvcache(bshd(s=1), bshd(s=64), bshd(s=64), learnable_sink=sink)
    flash_attn.flash_attn_with_kvcache(bshd(s=1), FakeTensor((8, 16, 4, 128)),
                                       FakeTensor((8, 16, 4, 128)),
                                       block_table=FakeTensor((2, 4), dtype="int32"),
                                       cache_seqlens=FakeTensor((2,), dtype="int32"),
                                       learnable_sink=sink)
    flash_attn.flash_attn_varlen_func(FakeTensor((32, 4, 128)), FakeTensor((32, 4, 128)),
                                      FakeTensor((32, 4, 128)), FakeTensor((3,), dtype="int32"),
                                      FakeTensor((3,), dtype="int32"), 16, 16,
                                      learnable_sink=sink)
    assert calls == [sink] * 4


@pytest.mark.parametrize("kwargs,error,match", [
    ({"dropout_p": 0.1}, NotImplementedError, "dropout_p"),
    ({"softcap": -1.0}, ValueError, "softcap must be 0"),
    ({"softcap": "30"}, TypeError, "softcap must be a number"),
    ({"alibi_slopes": FakeTensor((3,), dtype="float32")}, ValueError,
     r"alibi_slopes must have shape \(4,\) or \(2, 4\)"),
    ({"alibi_slopes": FakeTensor((4,), dtype="bfloat16")}, TypeError, "alibi_slopes"),
    ({"alibi_slopes": FakeTensor((4,), dtype="float32", device="cpu")}, ValueError,
     "alibi_slopes"),
    ({"window_size": 128}, TypeError, "window_size must be a pair of ints"),
    ({"window_size": (1.5, 0)}, TypeError, "window_size"),
    ({"causal": 1}, TypeError, "causal must be a bool"),
    ({"deterministic": "no"}, TypeError, "deterministic must be a bool"),
])
def test_flash_attn_func_argument_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        flash_attn.flash_attn_func(bshd(), bshd(), bshd(), **kwargs)


def test_flash_attn_func_checks_tensors_like_kvpipe_attention():
    with pytest.raises(ValueError, match="head dim must be one of"):
        flash_attn.flash_attn_func(bshd(d=264), bshd(d=264), bshd(d=264))
    with pytest.raises(ValueError, match="multiple of k and v's heads"):
        flash_attn.flash_attn_func(bshd(h=6), bshd(h=4), bshd(h=4))


def cache(b=2, s=256, h=2, d=128):
    return FakeTensor((b, s, h, d)), FakeTensor((b, s, h, d))


@pytest.mark.parametrize("name", ["rotary_cos", "rotary_sin", "cache_batch_idx",
                                  "cache_leftpad"])
def test_kvcache_unsupported_arguments_are_named(name):
    k_cache, v_cache = cache()
    with pytest.raises(NotImplementedError, match=name):
        flash_attn.flash_attn_with_kvcache(bshd(s=1), k_cache, v_cache,
                                           **{name: FakeTensor((2,), dtype="int32")})


@pytest.mark.parametrize("kwargs,error,match", [
    ({"k": bshd(s=1, h=2)}, ValueError, "k and v must be given together"),
    ({"num_splits": -1}, ValueError, "num_splits"),
    ({"softcap": float("nan")}, ValueError, "softcap must be 0"),
])
def test_kvcache_argument_errors(kwargs, error, match):
    k_cache, v_cache = cache()
    with pytest.raises(error, match=match):
        flash_attn.flash_attn_with_kvcache(bshd(s=1), k_cache, v_cache, **kwargs)


def test_kvcache_shapes():
    k_cache, _ = cache()
    with pytest.raises(ValueError, match="v_cache must have k_cache's shape"):
        flash_attn.flash_attn_with_kvcache(bshd(s=1), k_cache, FakeTensor((2, 128, 2, 128)))
    k_cache, v_cache = cache(b=3)
    with pytest.raises(ValueError, match="q's batch \\(2\\) must equal k_cache's \\(3\\)"):
        flash_attn.flash_attn_with_kvcache(bshd(s=1), k_cache, v_cache)
    k_cache, v_cache = cache()
    with pytest.raises(ValueError, match="cache_seqlens is required with k and v"):
        flash_attn.flash_attn_with_kvcache(bshd(s=1), k_cache, v_cache, k=bshd(s=1, h=2),
                                           v=bshd(s=1, h=2))
    with pytest.raises(ValueError, match="k must be"):
        flash_attn.flash_attn_with_kvcache(bshd(s=1), k_cache, v_cache, k=bshd(s=1, h=3),
                                           v=bshd(s=1, h=3), cache_seqlens=5)


@pytest.mark.parametrize("window,causal,expected", [
    ((-1, -1), False, (-1, -1)),
    ((5, 3), False, (5, 3)),
    ((5, 3), True, (5, 0)),       # causal: the diagonal is the right bound
    ((-1, 3), True, (-1, -1)),    # causal alone: no window
    ((-7, 2), False, (-1, 2)),    # any negative is unbounded
    ([0, 0], False, (0, 0)),
])
def test_window_normalisation(window, causal, expected):
    assert normalise_window(window, causal) == expected


def qkv():
    return (FakeTensor((2, 4, 100, 128)), FakeTensor((2, 4, 120, 128)),
            FakeTensor((2, 4, 120, 128)))


@pytest.mark.parametrize("kwargs,error,match", [
    ({"mask_alignment": "bottom"}, ValueError, "mask_alignment must be one of"),
    ({"window_size": (1, 2, 3)}, TypeError, "window_size must be a pair"),
    ({"kv_lengths": FakeTensor((2,), dtype="float32")}, TypeError, "kv_lengths"),
    ({"kv_lengths": FakeTensor((3,), dtype="int32")}, ValueError,
     "kv_lengths must have shape \\(2,\\)"),
    ({"kv_lengths": FakeTensor((2, 1), dtype="int32")}, ValueError, "kv_lengths.*rank 1"),
])
def test_attention_mask_argument_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        kvpipe.attention(*qkv(), causal=True, **kwargs)


def test_alibi_of_equal_lengths_compiles_its_zero_shift_in():
    # As many queries as keys: the diagonal's shift 0 is a constant of the
    # kernel (no shift tensor copied to the device per call, none read by
    # the kernel); the slopes are the only aux tensor.
    import kvpipe

    class Loadable(FakeTensor):
        def __getitem__(self, index):
            return kvpipe.modifiers.load(self, index)

    q = FakeTensor((2, 300, 4, 64))
    slopes = Loadable((4,), dtype="float32")
    traced = kvpipe.modifiers.trace(flash_attn._score_mod(0.0, slopes, q, 300))
    assert traced.aux_types == ("f32",)
    assert "arith.subi %q_idx, %kv_idx" in traced.ir and "arith.addi" not in traced.ir


def test_check_mods_lists_the_kernel_flash_attn_traces_for_equal_lengths():
    # check --mods's flash_attn_func cases run on a machine without the
    # compiler: the kernel _score_mod traces for equal lengths (the shift 0
    # compiled in) must be in compile --for-check --mods's list.
    import kvpipe
    from kvpipe import check_modifiers

    class Loadable(FakeTensor):
        def __getitem__(self, index):
            return kvpipe.modifiers.load(self, index)

    configs = check_modifiers.mods_kernel_configs(cases=[])
    equal = [c for c in check_modifiers.FLASH_CASES if c[0] == c[1] and c[4]]
    assert equal
    for sq, skv, causal, softcap, alibi in equal:
        q = FakeTensor((2, sq, 4, 128))
        traced = kvpipe.modifiers.trace(
            flash_attn._score_mod(softcap, Loadable((2, 4), dtype="float32"), q, skv))
        assert any(c.get("modifiers") == traced.ir and c["causal"] == causal
                   for c in configs), (sq, skv)


def test_alibi_shift_tensors_are_built_once(monkeypatch):
    # ALiBi's diagonal shift goes to the device once per (device, value):
    # a host-to-device copy on every decode step waited for the stream.
    import sys
    import types

    made = []
    torch = types.ModuleType("torch")
    torch.int32 = "int32"
    torch.tensor = lambda data, dtype=None, device=None: made.append((tuple(data), device)) \
        or object()
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(flash_attn, "_SHIFTS", {})
    first = flash_attn._shift_tensor(-1, "cuda:0")
    assert flash_attn._shift_tensor(-1, "cuda:0") is first
    assert flash_attn._shift_tensor(-4, "cuda:0") is not first
    assert flash_attn._shift_tensor(-1, "cuda:1") is not first
    assert made == [((-1,), "cuda:0"), ((-4,), "cuda:0"), ((-1,), "cuda:1")]
