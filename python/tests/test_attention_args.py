"""kvpipe.attention rejects bad arguments with a message naming them, before
touching the GPU (CPU-only: tensor-like fakes stand in for torch tensors)."""

import pytest

import kvpipe
from fakes import FakeTensor, ReachedTorch, torch_stand_in
from needs import needs_torch
from kvpipe.backward import attention_backward


def qkv(b=2, hq=4, hkv=4, sq=100, skv=120, d=128, layout="bhsd", dv=None, **kw):
    def make(h, s, dim=d):
        shape = (b, h, s, dim) if layout == "bhsd" else (b, s, h, dim)
        return FakeTensor(shape, **kw)
    return make(hq, sq), make(hkv, skv), make(hkv, skv, d if dv is None else dv)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_valid_arguments_reach_the_launch(layout, monkeypatch):
    torch_stand_in(monkeypatch)
    q, k, v = qkv(layout=layout)
    with pytest.raises(ReachedTorch):
        kvpipe.attention(q, k, v, layout=layout)


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


@pytest.mark.parametrize("d", [264, 512])
def test_head_dim(d):
    q, k, v = qkv(d=d)
    with pytest.raises(ValueError,
                       match="q's head dim must be one of \\(64, 96, 128, 192, 256\\) or another "
                             f"multiple of 8 up to 256 \\(run zero-padded as the next\\), got {d}"):
        kvpipe.attention(q, k, v)


@pytest.mark.parametrize("d,dv,padded", [
    (80, 80, (96, 96)),      # Phi-2, StableLM
    (32, 32, (64, 64)), (8, 8, (64, 64)), (112, 112, (128, 128)), (160, 160, (192, 192)),
    (200, 200, (256, 256)), (128, 64, (128, 128)), (96, 128, (128, 128)),
    (192, 120, (192, 128)), (176, 128, (192, 128)), (192, 256, (256, 256)),
    (64, 64, (64, 64)), (192, 128, (192, 128)),  # generated: no padding
    (81, 81, None), (264, 264, None), (128, 260, None), (128, 60, None),
])
def test_padded_head_dims_are_the_smallest_generated_pair_holding_them(d, dv, padded):
    from kvpipe import kernels
    assert kernels.padded_head_dims(d, dv) == padded
    if padded is not None:
        assert padded in kernels.HEAD_DIM_PAIRS and padded in kernels.BACKWARD_HEAD_DIM_PAIRS
        assert padded[0] >= d and padded[1] >= dv


def test_unsupported_head_dims_run_zero_padded():
    from kvpipe.attention import _head_dim_padding
    assert _head_dim_padding(*qkv(d=80)) == (80, 80, 96, 96)
    assert _head_dim_padding(*qkv(d=128, dv=64, layout="bshd")) == (128, 64, 128, 128)
    assert _head_dim_padding(*qkv(d=128)) is None  # a kernel's own
    assert _head_dim_padding(*qkv(d=81)) is None  # refused by the checks, naming it
    q, k, v = qkv(d=80)
    assert _head_dim_padding(q, FakeTensor((1, 2, 16, 64)), v) is None  # k's dim is q's


@pytest.mark.parametrize("d,dv", [(64, 64), (96, 96), (128, 128), (192, 192), (192, 128),
                                  (256, 256)])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_supported_head_dims_reach_the_launch(d, dv, layout, monkeypatch):
    torch_stand_in(monkeypatch)
    q, k, v = qkv(d=d, dv=dv, layout=layout)
    with pytest.raises(ReachedTorch):
        kvpipe.attention(q, k, v, layout=layout)


@pytest.mark.parametrize("d,dv,supported", [(128, 264, "128"), (192, 264, "128, 192"),
                                            (96, 272, "96")])
def test_value_head_dim_names_v(d, dv, supported):
    q, k, v = qkv(d=d, dv=dv)
    with pytest.raises(ValueError, match=f"v's head dim must be one of \\({supported}\\) or "
                                         f"another multiple of 8 up to 256 .* with q's head dim "
                                         f"{d}, got {dv}"):
        kvpipe.attention(q, k, v)


def test_k_head_dim_must_equal_q():
    q, _, v = qkv(d=192, dv=128)
    _, k, _ = qkv(d=128)
    with pytest.raises(ValueError, match="k's head dim must equal q's \\(192\\), got 128"):
        kvpipe.attention(q, k, v)


def test_head_counts_must_divide():
    q, k, v = qkv(hq=6, hkv=4)
    with pytest.raises(ValueError, match="multiple of k and v's heads"):
        kvpipe.attention(q, k, v)


def test_k_v_shapes_must_match():
    q, k, _ = qkv()
    _, _, v = qkv(skv=121)
    with pytest.raises(ValueError,
                       match="k and v must have the same batch, heads and sequence length"):
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


@pytest.mark.parametrize("scale", [1e-39, 1e39])
def test_scale_whose_log2_scaled_f32_is_not_normal(scale):
    # The kernels take scale * log2(e) as an f32 and divide by it.
    q, k, v = qkv()
    with pytest.raises(ValueError, match="scale must be between .* normal f32"):
        kvpipe.attention(q, k, v, scale=scale)


def test_causal_must_be_bool():
    q, k, v = qkv()
    with pytest.raises(TypeError, match="causal must be a bool"):
        kvpipe.attention(q, k, v, causal=1)


def test_out_shape():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="out must have shape \\(2, 4, 100, 128\\)"):
        kvpipe.attention(q, k, v, out=FakeTensor((2, 4, 99, 128)))


def test_out_has_v_head_dim():
    # (192, 128): the output has q's shape with v's head dim; q's shape is wrong.
    q, k, v = qkv(d=192, dv=128)
    with pytest.raises(ValueError, match="out must have shape \\(2, 4, 100, 128\\) "
                                         "\\(q's with v's head dim\\)"):
        kvpipe.attention(q, k, v, out=FakeTensor((2, 4, 100, 192)))


def test_launch_grid_has_a_cta_per_tile_or_per_sm_when_persistent():
    from kvpipe.launch import launch_grid

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
def test_out_is_refused_when_inputs_require_grad(which):
    # An output written in place cannot carry a grad_fn.
    tensors = list(qkv())
    tensors[which] = _GradTensor(tensors[which].shape)
    with pytest.raises(ValueError, match="out= cannot be used when q, k or v requires grad"):
        kvpipe.attention(*tensors, out=FakeTensor(tensors[0].shape))


def test_inputs_that_require_grad_take_the_autograd_path():
    # Validation passes and the call reaches torch.autograd (absent here, or
    # refusing the fakes): no NotImplementedError any more.
    q, k, v = qkv()
    with pytest.raises((ImportError, AttributeError, TypeError, RuntimeError)) as info:
        kvpipe.attention(_GradTensor(q.shape), k, v)
    assert not isinstance(info.value, NotImplementedError)


def _backward_args(**overrides):
    q, k, v = qkv(sq=100, skv=120)
    args = dict(q=q, k=k, v=v, o=FakeTensor(q.shape), lse=FakeTensor((2, 4, 100), dtype="float32"),
                do=FakeTensor(q.shape))
    args.update(overrides)
    return args


def test_backward_valid_arguments_reach_the_launch():
    with pytest.raises((ImportError, AttributeError, TypeError)) as info:
        attention_backward(**_backward_args())
    assert "must" not in str(info.value)


@pytest.mark.parametrize("name,value,message", [
    ("do", FakeTensor((2, 4, 101, 128)),
     r"do must have the shape \(2, 4, 100, 128\) \(q's, with v's head dim\)"),
    ("o", FakeTensor((2, 4, 100, 128), dtype="float16"), "o must have the shape .* and q's dtype"),
    ("lse", FakeTensor((2, 4, 100)), "lse must be float32 of shape"),
    ("lse", FakeTensor((2, 4, 99), dtype="float32"), "lse must be float32 of shape"),
    ("dk", FakeTensor((2, 4, 100, 128)), "dk must have the shape \\(2, 4, 120, 128\\)"),
    ("dq", FakeTensor((2, 4, 100, 128), strides=(1, 1, 1, 2)), "dq"),
    ("do", FakeTensor((2, 4, 100, 128), device="cpu"), "do.*cuda"),
])
def test_backward_bad_arguments(name, value, message):
    with pytest.raises((ValueError, TypeError), match=message):
        attention_backward(**_backward_args(**{name: value}))


def test_backward_bad_causal_and_scale():
    with pytest.raises(TypeError, match="causal must be a bool"):
        attention_backward(**_backward_args(), causal=1)
    with pytest.raises(ValueError, match="scale must be a positive finite number"):
        attention_backward(**_backward_args(), scale=-1.0)
    with pytest.raises(TypeError, match="deterministic must be a bool or None"):
        attention_backward(**_backward_args(), deterministic="yes")
    q, k, v = qkv()
    with pytest.raises(TypeError, match="deterministic must be a bool or None"):
        kvpipe.attention(q, k, v, deterministic=1)


def test_kv_lengths_are_refused_when_inputs_require_grad():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="kv_lengths cannot be used when q, k or v requires"):
        kvpipe.attention(_GradTensor(q.shape), k, v, kv_lengths=FakeTensor((2,), dtype="int32"))


@pytest.mark.parametrize("kwargs,match", [
    ({"window_size": (128, 0)}, "window_size cannot be combined with deterministic=True"),
    ({"causal": True, "mask_alignment": "bottom_right"},
     "mask_alignment='bottom_right' with causal=True cannot be combined with deterministic"),
    ({"mask_mod": lambda b, h, q, kv: kv <= q},
     "mask_mod cannot be combined with deterministic=True"),
])
def test_deterministic_backward_refuses_other_masks(kwargs, match):
    # The ordered dQ additions assume the top-left causal mask or none.
    q, k, v = qkv()
    with pytest.raises(ValueError, match=match):
        kvpipe.attention(_GradTensor(q.shape), k, v, deterministic=True, **kwargs)


@pytest.mark.parametrize("kwargs,match", [
    ({"window_size": (128, 0), "deterministic": True}, "window_size cannot be combined"),
    ({"mask_alignment": "diagonal", "causal": True}, "mask_alignment must be one of"),
    ({"window_size": (1, 2, 3)}, "window_size must be a pair of ints"),
])
def test_attention_backward_checks_its_mask_arguments(kwargs, match):
    from kvpipe.backward import attention_backward

    q, k, v = qkv()
    lse = FakeTensor((q.shape[0], q.shape[1], q.shape[2]), dtype="float32")
    with pytest.raises((ValueError, TypeError), match=match):
        attention_backward(q, k, v, FakeTensor(q.shape), lse, FakeTensor(q.shape), **kwargs)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"window_size": 5}, TypeError, "window_size must be a pair of ints"),
    ({"mask_alignment": "middle", "causal": True}, ValueError, "mask_alignment must be one of"),
])
def test_bad_masks_are_named_when_inputs_require_grad(kwargs, error, match):
    q, k, v = qkv()
    for mods in ({}, {"score_mod": lambda s, b, h, qi, kv: s * 2.0}):
        with pytest.raises(error, match=match):
            kvpipe.attention(_GradTensor(q.shape), k, v, **kwargs, **mods)


def test_backward_refuses_head_dims_it_does_not_generate():
    from kvpipe.backward import attention_backward

    # Every (q, v) head-dim pair the forward takes has a backward family
    # (kernels.BACKWARD_HEAD_DIM_PAIRS): the others are refused by the input
    # check, naming the head dims.
    from kvpipe import kernels
    assert set(kernels.HEAD_DIM_PAIRS) <= set(kernels.BACKWARD_HEAD_DIM_PAIRS)
    q, v = FakeTensor((1, 2, 16, 128)), FakeTensor((1, 2, 16, 264))
    with pytest.raises(ValueError, match="v's head dim must be one of .* got 264"):
        attention_backward(q, q, v, v, FakeTensor((1, 2, 16), dtype="float32"), v)
    q = FakeTensor((1, 2, 16, 264))
    with pytest.raises(ValueError, match="q's head dim must be one of"):
        attention_backward(q, q, q, q, FakeTensor((1, 2, 16), dtype="float32"), q)


def test_backward_takes_192_with_v_128_and_checks_o_against_v():
    from kvpipe.backward import attention_backward

    # o and do have q's shape with v's head dim: one of q's is refused.
    q, v = FakeTensor((1, 2, 16, 192)), FakeTensor((1, 2, 16, 128))
    with pytest.raises(ValueError, match=r"o must have the shape \(1, 2, 16, 128\)"):
        attention_backward(q, q, v, q, FakeTensor((1, 2, 16), dtype="float32"), v)


@needs_torch
@pytest.mark.parametrize("d,dv,layout", [(80, 80, "bhsd"), (128, 64, "bshd"), (32, 32, "bhsd")])
def test_zero_padding_leaves_outputs_and_gradients_unchanged(d, dv, layout):
    # _attention_padded around a float32 reference in place of the kernels:
    # the padded call's output, cut back, and its gradients through the
    # padding, are the unpadded attention's.
    import math

    import torch

    from kvpipe.attention import _attention_padded, _head_dim_padding

    def reference(q, k, v, scale):
        if layout == "bshd":
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        o = torch.softmax(q @ k.transpose(-1, -2) * scale, dim=-1) @ v
        return o.transpose(1, 2) if layout == "bshd" else o

    torch.manual_seed(0)
    shape = (2, 3, 17) if layout == "bhsd" else (2, 17, 3)
    q, k = (torch.randn(*shape, d, requires_grad=True) for _ in range(2))
    v = torch.randn(*shape, dv, requires_grad=True)
    padding = _head_dim_padding(q, k, v)
    assert padding is not None and padding[:2] == (d, dv)
    seen = []

    def call(qp, kp, vp, scale, outp):
        seen.append((qp.shape[-1], vp.shape[-1], scale))
        return reference(qp, kp, vp, scale)

    o = _attention_padded(q, k, v, padding, None, False, None, call)
    assert seen == [(padding[2], padding[3], 1.0 / math.sqrt(d))]
    expected = reference(q, k, v, 1.0 / math.sqrt(d))
    torch.testing.assert_close(o, expected)
    do = torch.randn_like(o)
    got = torch.autograd.grad(o, (q, k, v), do)
    want = torch.autograd.grad(expected, (q, k, v), do)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("sq,skv,expected", [(300, 300, "top_left"), (300, 400, "bottom_right")])
def test_bottom_right_on_equal_lengths_takes_the_top_left_kernels(sq, skv, expected,
                                                                  monkeypatch):
    # With S_q = S_kv both alignments put the diagonal in the same place: the
    # launch takes the top-left kernels and the prefill plan's choice for them.
    import sys

    attention_module = sys.modules["kvpipe.attention"]

    class Planned(Exception):
        pass

    def plan(d, dv, causal, mask_alignment, *rest):
        raise Planned(mask_alignment)

    monkeypatch.setattr(attention_module, "_device_index", lambda q: 0)
    monkeypatch.setattr(attention_module, "launch_decode_plan",
                        lambda *args: (1, 0, {}))
    monkeypatch.setattr(attention_module, "prefill_plan", plan)
    q, k, v = qkv(sq=sq, skv=skv)
    with pytest.raises(Planned, match=expected):
        kvpipe.attention(q, k, v, causal=True, mask_alignment="bottom_right")


# Attention sinks (kvpipe.sinks): one float logit per query head.

@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_valid_sinks_reach_the_launch(layout, monkeypatch):
    torch_stand_in(monkeypatch)
    q, k, v = qkv(hq=8, hkv=2, layout=layout)
    with pytest.raises(ReachedTorch):
        kvpipe.attention(q, k, v, layout=layout, sinks=FakeTensor((8,), dtype="float32"))


@pytest.mark.parametrize("sinks, error, message", [
    (0.5, TypeError, "sinks must be a tensor, got float"),
    (FakeTensor((2,), dtype="float32"), ValueError, r"sinks must have shape \(H_q,\) = \(8,\), "
                                                    r"got \(2,\)"),
    (FakeTensor((1, 8), dtype="float32"), ValueError, "sinks must have rank 1"),
    (FakeTensor((8,), dtype="int32"), TypeError, "sinks must have dtype f32 or bf16 or "
                                                 "f16, got i32"),
    (FakeTensor((8,), dtype="float32", device="cpu"), ValueError,
     "sinks must be on a cuda device"),
])
def test_bad_sinks_are_named(sinks, error, message):
    q, k, v = qkv(hq=8, hkv=2)
    with pytest.raises(error, match=message):
        kvpipe.attention(q, k, v, sinks=sinks)


def test_sinks_check_the_layout_first():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="layout must be one of"):
        kvpipe.attention(q, k, v, layout="sbhd", sinks=FakeTensor((4,), dtype="float32"))
