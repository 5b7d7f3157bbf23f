"""The drop-in for FlashAttention-3's interface (``flash_attn_interface``,
SGLang's ``sgl_kernel.flash_attn``): its signatures, how SGLang's calls reach
kvpipe's launchers, and what it refuses by name (CPU-only: fakes stand in for
tensors, the launchers are recorded)."""

import inspect

import pytest

from fakes import FakeTensor
from kvpipe import flash_attn, flash_attn_interface, paged

_ = inspect.Parameter.empty
#: Dao-AILab/flash-attention's hopper/flash_attn_interface.py, then SGLang's sinks.
FA3_WITH_KVCACHE = [
    ("q", _), ("k_cache", _), ("v_cache", _), ("k", None), ("v", None), ("qv", None),
    ("rotary_cos", None), ("rotary_sin", None), ("cache_seqlens", None),
    ("cache_batch_idx", None), ("cache_leftpad", None), ("page_table", None),
    ("cu_seqlens_q", None), ("cu_seqlens_k_new", None), ("max_seqlen_q", None),
    ("rotary_seqlens", None), ("q_descale", None), ("k_descale", None), ("v_descale", None),
    ("softmax_scale", None), ("causal", False), ("window_size", (-1, -1)),
    ("attention_chunk", 0), ("softcap", 0.0), ("rotary_interleaved", True),
    ("scheduler_metadata", None), ("num_splits", 0), ("pack_gqa", None), ("sm_margin", 0),
    ("return_softmax_lse", False), ("sinks", None)]
FA3_VARLEN_FUNC = [
    ("q", _), ("k", _), ("v", _), ("cu_seqlens_q", _), ("cu_seqlens_k", _),
    ("max_seqlen_q", _), ("max_seqlen_k", _), ("seqused_q", None), ("seqused_k", None),
    ("softmax_scale", None), ("causal", False), ("qv", None), ("q_descale", None),
    ("k_descale", None), ("v_descale", None), ("window_size", (-1, -1)),
    ("attention_chunk", 0), ("softcap", 0.0), ("num_splits", 1), ("pack_gqa", None),
    ("deterministic", False), ("sm_margin", 0), ("return_attn_probs", False)]


@pytest.mark.parametrize("function,expected", [
    (flash_attn_interface.flash_attn_with_kvcache, FA3_WITH_KVCACHE),
    (flash_attn_interface.flash_attn_varlen_func, FA3_VARLEN_FUNC)])
def test_signatures_match_fa3(function, expected):
    params = inspect.signature(function).parameters
    assert [(p.name, p.default) for p in params.values()] == expected


def extend_batch(batch=3, total_q=5, hq=8, hkv=2, d=128, pages=40, page=16, width=8):
    """SGLang's extend/decode batch: packed queries over a paged cache."""
    return dict(q=FakeTensor((total_q, hq, d), ptr=0x100000),
                k_cache=FakeTensor((pages, page, hkv, d), ptr=0x200000),
                v_cache=FakeTensor((pages, page, hkv, d), ptr=0x300000),
                cu_seqlens_q=FakeTensor((batch + 1,), dtype="int32", ptr=0x400000),
                cache_seqlens=FakeTensor((batch,), dtype="int32", ptr=0x500000),
                page_table=FakeTensor((batch, width), dtype="int32", ptr=0x600000),
                sinks=FakeTensor((hq,), dtype="float32", ptr=0x800000))


@pytest.fixture
def launched(monkeypatch):
    """The launchers the drop-in reaches, recorded."""
    calls = []

    def record(name):
        def launcher(*args, **kwargs):
            calls.append((name, args, kwargs))
            lse = kwargs.get("return_lse", kwargs.get("return_softmax_lse"))
            return ("out", "lse") if lse else "out"
        return launcher
    monkeypatch.setattr(paged, "attention_varlen_paged", record("paged varlen"))
    monkeypatch.setattr(flash_attn, "attention_varlen", record("packed"))
    monkeypatch.setattr(flash_attn, "flash_attn_with_kvcache", record("fa2 kvcache"))
    return calls


def test_sglangs_packed_batch_reaches_the_paged_varlen_kernel(launched):
    t = extend_batch()
    out, lse, *rest = flash_attn_interface.flash_attn_with_kvcache(
        q=t["q"], k_cache=t["k_cache"], v_cache=t["v_cache"], page_table=t["page_table"],
        cache_seqlens=t["cache_seqlens"], cu_seqlens_q=t["cu_seqlens_q"],
        cu_seqlens_k_new=t["cache_seqlens"], max_seqlen_q=4, softmax_scale=0.1, causal=True,
        window_size=(-1, -1), softcap=30.0, k_descale=None, v_descale=None,
        return_softmax_lse=True, sinks=t["sinks"])
    assert (out, lse, rest) == ("out", "lse", [])
    ((name, args, kwargs),) = launched
    assert name == "paged varlen"
    # max_seqlen_k is the table's row of keys (8 pages of 16): one plan for every step.
    assert args[:8] == (t["q"], t["k_cache"], t["v_cache"], t["cu_seqlens_q"], None, 4, 128,
                        t["page_table"])
    assert kwargs["seqused_k"] is t["cache_seqlens"] and kwargs["sinks"] is t["sinks"]
    assert kwargs["causal"] is True and kwargs["scale"] == 0.1
    assert "math.tanh" in __import__("kvpipe").modifiers.trace(kwargs["score_mod"]).ir


def test_a_batched_call_is_flash_attn_with_kvcache(launched):
    t = extend_batch()
    q = FakeTensor((3, 1, 8, 128), ptr=0x100000)
    assert flash_attn_interface.flash_attn_with_kvcache(
        q, t["k_cache"], t["v_cache"], cache_seqlens=t["cache_seqlens"],
        page_table=t["page_table"], causal=True, num_splits=4, sinks=t["sinks"]) == "out"
    ((name, args, kwargs),) = launched
    assert name == "fa2 kvcache" and args == (q, t["k_cache"], t["v_cache"])
    assert kwargs["block_table"] is t["page_table"] and kwargs["num_splits"] == 4
    assert kwargs["learnable_sink"] is t["sinks"] and kwargs["k"] is None


def test_the_varlen_func_reaches_the_varlen_kernel(launched):
    q = FakeTensor((300, 8, 128), ptr=0x100000)
    k = FakeTensor((500, 2, 128), ptr=0x200000)
    cu = FakeTensor((4,), dtype="int32", ptr=0x400000)
    out, lse = flash_attn_interface.flash_attn_varlen_func(q, k, k, cu, cu, 200, 400,
                                                          causal=True, return_attn_probs=True)
    assert (out, lse) == ("out", "lse")
    ((name, args, kwargs),) = launched
    assert name == "packed" and args[:7] == (q, k, k, cu, cu, 200, 400)


@pytest.mark.parametrize("change,error,match", [
    ({"qv": FakeTensor((5, 8, 128))}, NotImplementedError, "qv"),
    ({"q_descale": FakeTensor((1,), dtype="float32")}, NotImplementedError, "q_descale"),
    ({"rotary_cos": FakeTensor((8, 64))}, NotImplementedError, "rotary_cos"),
    ({"cache_leftpad": FakeTensor((3,), dtype="int32")}, NotImplementedError, "cache_leftpad"),
    ({"attention_chunk": 8192}, NotImplementedError, "attention_chunk"),
    ({"num_splits": -1}, ValueError, "num_splits must be a non-negative int"),
    ({"pack_gqa": 1}, TypeError, "pack_gqa must be None or a bool"),
    ({"k": FakeTensor((3, 1, 2, 128)), "v": FakeTensor((3, 1, 2, 128))}, NotImplementedError,
     "k and v with cu_seqlens_q"),
    ({"page_table": None}, NotImplementedError, "cu_seqlens_q without page_table"),
    ({"cache_seqlens": 7}, ValueError, "cache_seqlens must be an int32 tensor"),
    ({"max_seqlen_q": None}, ValueError, "max_seqlen_q is required"),
    ({"return_softmax_lse": 1}, TypeError, "return_softmax_lse must be a bool"),
])
def test_what_it_does_not_compute_is_refused_by_name(launched, change, error, match):
    t = extend_batch()
    kwargs = dict(cache_seqlens=t["cache_seqlens"], page_table=t["page_table"],
                  cu_seqlens_q=t["cu_seqlens_q"], max_seqlen_q=4)
    kwargs.update(change)
    with pytest.raises(error, match=match):
        flash_attn_interface.flash_attn_with_kvcache(t["q"], t["k_cache"], t["v_cache"],
                                                     **kwargs)
    assert not launched


def test_the_varlen_funcs_refusals():
    q = FakeTensor((300, 8, 128), ptr=0x100000)
    cu = FakeTensor((4,), dtype="int32", ptr=0x400000)
    used = FakeTensor((3,), dtype="int32", ptr=0x500000)
    with pytest.raises(NotImplementedError, match="seqused_q"):
        flash_attn_interface.flash_attn_varlen_func(q, q, q, cu, cu, 200, 400, seqused_q=used)
    with pytest.raises(NotImplementedError, match="seqused_k over packed K/V"):
        flash_attn_interface.flash_attn_varlen_func(q, q, q, cu, cu, 200, 400, seqused_k=used)
    assert flash_attn_interface.get_scheduler_metadata(3, 1, 4096, 8, 2, 128, None) is None
