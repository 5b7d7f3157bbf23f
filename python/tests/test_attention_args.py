"""kvpipe.attention rejects bad arguments with a message naming them, before
touching the GPU (CPU-only: tensor-like fakes stand in for torch tensors)."""

import pytest

import kvpipe
from fakes import FakeTensor


def qkv(b=2, hq=4, hkv=4, sq=100, skv=120, d=128, layout="bhsd", **kw):
    def make(h, s):
        shape = (b, h, s, d) if layout == "bhsd" else (b, s, h, d)
        return FakeTensor(shape, **kw)
    return make(hq, sq), make(hkv, skv), make(hkv, skv)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_valid_arguments_reach_the_launch(layout, monkeypatch):
    # Validation passes; the first thing after it is importing torch, which
    # is absent here (or, with torch, the fake is not a real tensor).
    q, k, v = qkv(layout=layout)
    with pytest.raises((ImportError, AttributeError, TypeError)) as info:
        kvpipe.attention(q, k, v, layout=layout)
    assert "must" not in str(info.value)


def test_rank():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="q.*rank 4"):
        kvpipe.attention(FakeTensor((2, 4, 100)), k, v)


def test_dtype():
    q, k, v = qkv(dtype="float32")
    with pytest.raises(TypeError, match="bfloat16 or float16"):
        kvpipe.attention(q, k, v)


def test_mixed_dtypes():
    q, _, _ = qkv()
    _, k, v = qkv(dtype="float16")
    with pytest.raises(TypeError, match="same dtype"):
        kvpipe.attention(q, k, v)


def test_device():
    q, k, v = qkv(device="cpu")
    with pytest.raises(ValueError, match="cuda"):
        kvpipe.attention(q, k, v)


def test_head_dim():
    q, k, v = qkv(d=96)
    with pytest.raises(ValueError, match="head dim must be one of \\(64, 128\\), got 96"):
        kvpipe.attention(q, k, v)


def test_head_counts_must_divide():
    q, k, v = qkv(hq=6, hkv=4)
    with pytest.raises(ValueError, match="multiple of k and v's heads"):
        kvpipe.attention(q, k, v)


def test_k_v_shapes_must_match():
    q, k, _ = qkv()
    _, _, v = qkv(skv=121)
    with pytest.raises(ValueError, match="k and v must have the same shape"):
        kvpipe.attention(q, k, v)


def test_batch_must_match():
    q, _, _ = qkv(b=2)
    _, k, v = qkv(b=3)
    with pytest.raises(ValueError, match="k's batch must equal q's"):
        kvpipe.attention(q, k, v)


def test_layout():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="layout must be one of"):
        kvpipe.attention(q, k, v, layout="sbhd")


def test_last_dim_must_be_contiguous():
    q, k, v = qkv()
    bad = FakeTensor(q.shape, strides=(4 * 100 * 256, 100 * 256, 256, 2))
    with pytest.raises(ValueError, match="q.*contiguous"):
        kvpipe.attention(bad, k, v)


def test_strides_must_be_16_byte_aligned():
    q, k, v = qkv(d=64)
    # A row stride of 68 elements is 136 bytes: not a multiple of 16.
    bad = FakeTensor(k.shape, strides=(4 * 120 * 68, 120 * 68, 68, 1))
    with pytest.raises(ValueError, match="k.*16"):
        kvpipe.attention(q, bad, v)


def test_empty_sequences():
    q, k, v = qkv(skv=0)
    with pytest.raises(ValueError, match="sequence length must be at least 1"):
        kvpipe.attention(q, k, v)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf"), True])
def test_scale(scale):
    q, k, v = qkv()
    with pytest.raises(ValueError, match="scale must be a positive finite number"):
        kvpipe.attention(q, k, v, scale=scale)


def test_causal_must_be_bool():
    q, k, v = qkv()
    with pytest.raises(TypeError, match="causal must be a bool"):
        kvpipe.attention(q, k, v, causal=1)


def test_out_shape():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="out must have q's shape"):
        kvpipe.attention(q, k, v, out=FakeTensor((2, 4, 99, 128)))


def test_launch_grid_has_a_cta_per_tile_or_per_sm_when_persistent():
    from kvpipe.attention import launch_grid

    abi = {"block_m": 128, "persistent": False}
    assert launch_grid(abi, 1000, 16, 4, 0) == (8, 16, 4)
    persistent = {"block_m": 192, "persistent": True}
    # 6 Q blocks x 16 heads x 32 batches = 3072 tiles over 132 SMs.
    assert launch_grid(persistent, 1024, 16, 32, 132) == (132, 1, 1)
    # Fewer tiles than SMs: one CTA per tile.
    assert launch_grid(persistent, 1, 2, 3, 132) == (6, 1, 1)


class _GradTensor(FakeTensor):
    requires_grad = True


@pytest.mark.parametrize("which", [0, 1, 2])
def test_inputs_that_require_grad_are_refused(which):
    # No backward pass yet: an output without grad_fn would surface far
    # from the cause, as a confusing autograd error in the training loop.
    tensors = list(qkv())
    tensors[which] = _GradTensor(tensors[which].shape)
    with pytest.raises(NotImplementedError, match=f"no backward pass yet, and {'qkv'[which]} "
                                                  "requires grad.*torch.no_grad"):
        kvpipe.attention(*tensors)
