"""Attention sinks (kvpipe.sinks) on the CPU: the kernels' ``sinks``
parameter as the compiler reports it and the launchers pass it (the epilogue
itself is checked on the GPU: check --mods --backward, check --paged,
check --varlen), and the sinks' gradient formulas with torch (CPU is enough)
against autograd through float32 softmax with a sink column
(check._sink_softmax, the GPU checks' reference)."""

import math

import pytest

import kvpipe
from fakes import FakeTensor, ReachedTorch, torch_stand_in
from kvpipe import check, launch, sinks
from kvpipe.kernels import AttentionConfig
from needs import HAVE_TORCH

needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="needs torch (CPU is enough)")

B, H, SQ, SK, D = 2, 4, 7, 9, 16


# --- the kernels' parameter ---------------------------------------------------

def test_the_declaration_asks_for_sinks():
    config = AttentionConfig.make(128, "bf16", True, sinks=True)
    assert "sinks = true" in config.declaration()
    assert config.kernel_name.endswith("_sinks")
    # Another kernel: another cache entry.
    assert config.kernel_name != AttentionConfig.make(128, "bf16", True).kernel_name
    with pytest.raises(ValueError, match="sinks=True applies to the forward kernels"):
        AttentionConfig.make(128, "bf16", True, backward=True, sinks=True)
    with pytest.raises(TypeError, match="sinks must be a bool"):
        AttentionConfig.make(128, "bf16", True, sinks=1)


def test_the_kernel_key_leaves_out_trailing_defaults():
    fixed = (128, "bf16", True, None, "top_left", False, False)
    assert launch.forward_config_args(*fixed) == fixed
    assert launch.forward_config_args(*fixed, pack_gqa=4) == fixed + (False, 4)
    assert launch.forward_config_args(*fixed, sinks=True) == fixed + (False, 0, 0, True)
    assert launch.forward_config_args(*fixed, split_kv=True, pack_gqa=4, page_size=64,
                                      sinks=True) == fixed + (True, 4, 64, True)


@pytest.fixture
def cache(compiler, tmp_path, monkeypatch):
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))


def test_a_sinks_kernel_takes_them_last(cache):
    abi = kvpipe.compile_attention(64, "bf16", True, sinks=True).abi
    plain = kvpipe.compile_attention(64, "bf16", True).abi
    assert abi["params"] == plain["params"] + ["sinks"]
    assert abi["param_kinds"]["sinks"] == "pointer" and abi["sinks"] is True
    assert "sinks" not in plain
    varlen = kvpipe.compile_attention(64, "bf16", True, varlen=True, sinks=True).abi
    assert varlen["params"][-2:] == ["total_q", "sinks"]


def test_a_split_family_gives_them_to_its_combine_kernel(cache):
    family = kvpipe.compile_attention(128, "bf16", False, kv_lengths=True, split_kv=True,
                                      pack_gqa=4, consumer_warpgroups=1, sinks=True)
    plain = kvpipe.compile_attention(128, "bf16", False, kv_lengths=True, split_kv=True,
                                     pack_gqa=4, consumer_warpgroups=1)
    # The partials are the plain family's; the combine kernel adds the sink.
    assert family.kernel_abi("main")["params"] == plain.kernel_abi("main")["params"]
    assert (family.kernel_abi("combine")["params"]
            == plain.kernel_abi("combine")["params"] + ["sinks"])
    args = launch.kernel_arguments(family.kernel_abi("combine"), {
        "o_partial": 1, "lse_partial": 2, "o": 3, "lse": 0, "o_stride_b": 4,
        "o_stride_h": 5, "o_stride_s": 6, "seq_q": 1, "heads_q": 32, "batch": 3,
        "num_splits": 5, "sinks": 0x7000})
    assert bytes(args[-1]) == (0x7000).to_bytes(8, "little")


def test_valid_sinks_reach_the_launch_of_every_launcher(monkeypatch):
    from kvpipe import paged, varlen

    torch_stand_in(monkeypatch)
    q = FakeTensor((2, 1, 8, 128))
    cache_k = FakeTensor((16, 64, 2, 128))
    with pytest.raises(ReachedTorch):
        paged.paged_attention(q, cache_k, cache_k, FakeTensor((2, 8), dtype="int32"),
                              FakeTensor((2,), dtype="int32"),
                              sinks=FakeTensor((8,), dtype="float32"))
    packed = FakeTensor((300, 8, 128))
    with pytest.raises(ReachedTorch):
        varlen.attention_varlen(packed, packed, packed, FakeTensor((3,), dtype="int32"),
                                FakeTensor((3,), dtype="int32"), 200, 200,
                                sinks=FakeTensor((8,), dtype="float32"))


# --- the gradient formulas (torch on the CPU) ---------------------------------

def _inputs(torch):
    torch.manual_seed(0)
    scores = torch.randn(B, H, SQ, SK)
    scores[0, 1, 2, :] = -math.inf      # a row without keys: the sink alone
    scores[1, :, 3, 4:] = -math.inf
    return scores, torch.randn(B, H, SK, D), torch.randn(H)


@needs_torch
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_sink_gradient_is_autograds(layout):
    import torch

    scores, v, s = _inputs(torch)
    s = s.clone().requires_grad_()
    ref, lse = check._sink_softmax(scores, s[None, :, None, None], v, torch)
    do = torch.randn_like(ref)
    expected = torch.autograd.grad((ref * do).sum(), s)[0]
    o, dout = ref.detach(), do
    if layout == "bshd":
        o, dout = o.transpose(1, 2), do.transpose(1, 2)
    got = sinks.sink_gradient(o, dout, lse.detach(), s.detach(), layout)
    assert torch.allclose(got, expected, atol=1e-6)


@needs_torch
def test_packed_sink_gradient_is_autograds_over_the_sequences_rows():
    import torch

    scores, v, s = _inputs(torch)
    s = s.clone().requires_grad_()
    # Batch 0's rows packed, then 3 rows after the last sequence holding
    # whatever the buffers held (NaN here): they add nothing.
    ref, lse = check._sink_softmax(scores[:1], s[None, :, None, None], v[:1], torch)
    do = torch.randn_like(ref)
    expected = torch.autograd.grad((ref * do).sum(), s)[0]
    after = torch.full((3, H, D), math.nan)
    o = torch.cat([ref.detach()[0].transpose(0, 1), after])          # (total, H, D)
    dout = torch.cat([do[0].transpose(0, 1), after])
    lse_packed = torch.cat([lse.detach()[0], torch.full((H, 3), math.nan)], dim=1)
    got = sinks.sink_gradient_packed(o, dout, lse_packed, s.detach(), torch.tensor(SQ))
    assert torch.allclose(got, expected, atol=1e-6)


@needs_torch
def test_the_custom_operator_gives_the_sinks_their_gradient(monkeypatch):
    # torch.ops.kvpipe.attention (what torch.compile traces) with sinks:
    # the kernels stand in as float32 references on the CPU; the operator's
    # backward must give autograd's dsinks (and pass the kernels' dq, dk,
    # dv through).
    import torch

    from kvpipe import torch_ops

    scores_of = lambda q, k: q @ k.transpose(-1, -2) * 0.25  # noqa: E731

    def forward(q, k, v, sinks=None, **kwargs):
        o, lse = check._sink_softmax(scores_of(q, k), sinks[None, :, None, None], v, torch)
        return o.detach(), lse.detach()

    def backward(q, k, v, o, lse, do, **kwargs):
        return torch.zeros_like(q), torch.ones_like(k), torch.full_like(v, 2.0)

    monkeypatch.setattr(torch_ops, "attention_impl", forward)
    monkeypatch.setattr(torch_ops, "attention_backward", backward)
    torch.manual_seed(3)
    q, k, v = (torch.randn(B, H, SQ, D) for _ in range(3))
    s = torch.randn(H, requires_grad=True)
    o, lse = torch.ops.kvpipe.attention(q, k, v, False, 0.25, "bhsd", "top_left", -1, -1,
                                        None, None, s)
    do = torch.randn_like(o)
    (o * do).sum().backward()
    ref = s.detach().clone().requires_grad_()
    want, _ = check._sink_softmax(scores_of(q, k), ref[None, :, None, None], v, torch)
    (want * do).sum().backward()
    assert torch.allclose(s.grad, ref.grad, atol=1e-5)
    qs = q.clone().requires_grad_()
    o, _ = torch.ops.kvpipe.attention(qs, k, v, False, 0.25, "bhsd", "top_left", -1, -1,
                                      None, None, s.detach())
    o.sum().backward()
    assert torch.equal(qs.grad, torch.zeros_like(q))  # the kernels' dq, passed through
