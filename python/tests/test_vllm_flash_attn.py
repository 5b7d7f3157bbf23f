"""The drop-in for vLLM's ``vllm.vllm_flash_attn``: its signature, how its
arguments reach kvpipe's launchers (out=, s_aux, seqused_k, the window as
vLLM passes it), and the arguments it refuses by name (CPU-only: fakes stand
in for tensors, the launchers are recorded)."""

import inspect

import pytest

from fakes import FakeTensor
from kvpipe import flash_attn, paged, vllm_flash_attn

_ = inspect.Parameter.empty
#: vllm-project/flash-attention's vllm_flash_attn/flash_attn_interface.py.
VLLM_FLASH_ATTN_VARLEN_FUNC = [
    ("q", _), ("k", _), ("v", _), ("max_seqlen_q", _), ("cu_seqlens_q", _),
    ("max_seqlen_k", _), ("cu_seqlens_k", None), ("seqused_k", None), ("q_v", None),
    ("dropout_p", 0.0), ("softmax_scale", None), ("causal", False), ("window_size", None),
    ("softcap", 0.0), ("alibi_slopes", None), ("deterministic", False),
    ("return_attn_probs", False), ("block_table", None), ("return_softmax_lse", False),
    ("out", None), ("scheduler_metadata", None), ("q_descale", None), ("k_descale", None),
    ("v_descale", None), ("num_splits", 0), ("fa_version", 2), ("s_aux", None),
    ("cp_world_size", 1), ("cp_rank", 0), ("cp_tot_seqused_k", None)]


def test_signature_matches_vllm():
    params = inspect.signature(vllm_flash_attn.flash_attn_varlen_func).parameters
    assert [(p.name, p.default) for p in params.values()] == VLLM_FLASH_ATTN_VARLEN_FUNC


def step(batch=3, total_q=5, hq=8, hkv=2, d=128, pages=40, page=16, width=8):
    """A vLLM step's tensors: packed queries over a paged cache."""
    return dict(q=FakeTensor((total_q, hq, d), ptr=0x100000),
                k=FakeTensor((pages, page, hkv, d), ptr=0x200000),
                v=FakeTensor((pages, page, hkv, d), ptr=0x300000),
                cu_seqlens_q=FakeTensor((batch + 1,), dtype="int32", ptr=0x400000),
                seqused_k=FakeTensor((batch,), dtype="int32", ptr=0x500000),
                block_table=FakeTensor((batch, width), dtype="int32", ptr=0x600000),
                out=FakeTensor((total_q, hq, d), ptr=0x700000),
                s_aux=FakeTensor((hq,), dtype="float32", ptr=0x800000))


@pytest.fixture
def launched(monkeypatch):
    """attention_varlen_paged's and attention_varlen's calls, recorded."""
    calls = []

    def record(name):
        def launcher(*args, **kwargs):
            calls.append((name, args, kwargs))
            out = kwargs.get("out") or "new out"
            return (out, "lse") if kwargs.get("return_lse") else out
        return launcher
    monkeypatch.setattr(paged, "attention_varlen_paged", record("paged"))
    monkeypatch.setattr(flash_attn, "attention_varlen", record("packed"))
    return calls


def test_the_backends_call_reaches_the_paged_varlen_kernel(launched):
    # vLLM's FlashAttentionImpl.forward: positional q, k, v, then keywords.
    t = step()
    result = vllm_flash_attn.flash_attn_varlen_func(
        t["q"], t["k"], t["v"], out=t["out"], cu_seqlens_q=t["cu_seqlens_q"], max_seqlen_q=2,
        seqused_k=t["seqused_k"], max_seqlen_k=100, softmax_scale=0.1, causal=True,
        alibi_slopes=None, window_size=[-1, -1], block_table=t["block_table"], softcap=0.0,
        scheduler_metadata=object(), fa_version=3, q_descale=None, k_descale=None,
        v_descale=None, num_splits=8, s_aux=t["s_aux"])
    assert result is t["out"]
    ((name, args, kwargs),) = launched
    assert name == "paged"
    assert args[:8] == (t["q"], t["k"], t["v"], t["cu_seqlens_q"], None, 2, 100,
                        t["block_table"])
    assert kwargs["seqused_k"] is t["seqused_k"] and kwargs["out"] is t["out"]
    assert kwargs["sinks"] is t["s_aux"] and kwargs["scale"] == 0.1
    assert kwargs["causal"] is True and kwargs["mask_alignment"] == "bottom_right"
    assert kwargs["window_size"] == (-1, -1)  # vLLM passes a list
    assert kwargs["score_mod"] is None and kwargs["return_lse"] is False


def test_return_softmax_lse_and_a_window(launched):
    t = step()
    out, lse = vllm_flash_attn.flash_attn_varlen_func(
        t["q"], t["k"], t["v"], 2, t["cu_seqlens_q"], 100, seqused_k=t["seqused_k"],
        block_table=t["block_table"], window_size=(63, 0), return_softmax_lse=True)
    assert (out, lse) == ("new out", "lse")
    (_, _, kwargs), = launched
    assert kwargs["return_lse"] is True and kwargs["window_size"] == (63, 0)


def test_packed_keys_reach_the_varlen_kernel_with_out(launched):
    # vLLM's cascade / encoder calls: packed K/V with cu_seqlens_k.
    q = FakeTensor((300, 8, 128), ptr=0x100000)
    k = FakeTensor((500, 2, 128), ptr=0x200000)
    cu = FakeTensor((4,), dtype="int32", ptr=0x400000)
    out = FakeTensor((300, 8, 128), ptr=0x700000)
    assert vllm_flash_attn.flash_attn_varlen_func(q, k, k, 200, cu, 400, cu_seqlens_k=cu,
                                                  out=out, causal=True) is out
    ((name, args, kwargs),) = launched
    assert name == "packed" and args[:7] == (q, k, k, cu, cu, 200, 400)
    assert kwargs["out"] is out and kwargs["sinks"] is None


@pytest.mark.parametrize("change,error,match", [
    ({"q_descale": FakeTensor((1,), dtype="float32")}, NotImplementedError, "q_descale"),
    ({"k_descale": FakeTensor((1,), dtype="float32")}, NotImplementedError, "k_descale"),
    ({"q_v": FakeTensor((5, 8, 64))}, NotImplementedError, "q_v"),
    ({"cp_world_size": 2}, NotImplementedError, "cp_world_size != 1"),
    ({"cp_rank": 1}, NotImplementedError, "cp_rank != 0"),
    ({"fa_version": 4}, ValueError, "fa_version must be one of"),
    ({"num_splits": -1}, ValueError, "num_splits must be a non-negative int"),
    ({"window_size": [5]}, ValueError, "window_size must be None or"),
    ({"dropout_p": 0.1}, NotImplementedError, "dropout_p"),
    ({"return_softmax_lse": 1}, TypeError, "return_softmax_lse must be a bool"),
    ({"block_table": None}, NotImplementedError, "seqused_k without block_table"),
    ({"block_table": None, "seqused_k": None}, ValueError, "cu_seqlens_k or seqused_k"),
])
def test_what_it_does_not_compute_is_refused_by_name(launched, change, error, match):
    t = step()
    kwargs = dict(seqused_k=t["seqused_k"], block_table=t["block_table"])
    kwargs.update(change)
    with pytest.raises(error, match=match):
        vllm_flash_attn.flash_attn_varlen_func(t["q"], t["k"], t["v"], 2, t["cu_seqlens_q"],
                                               100, **kwargs)
    assert not launched


def test_the_version_queries_and_scheduler_metadata():
    assert vllm_flash_attn.is_fa_version_supported(3)
    assert vllm_flash_attn.is_fa_version_supported(2)
    assert not vllm_flash_attn.is_fa_version_supported(4)
    assert vllm_flash_attn.fa_version_unsupported_reason(3) is None
    assert "fa_version" in vllm_flash_attn.fa_version_unsupported_reason(4)
    assert vllm_flash_attn.get_scheduler_metadata(8, 1, 4096, 32, 8, 128,
                                                  cache_seqlens=None) is None
