"""Variable-length batches (varlen): flash_attn_varlen_func's signature and
argument errors, the varlen kernel's configuration and its launch arguments,
and the check/bench/compile --for-check wiring (CPU-only: tensor-like fakes
stand in for torch)."""

import inspect
import sys
import types

import pytest

import kvpipe
from fakes import FakeTensor, ReachedTorch, torch_stand_in
from kvpipe import check_varlen, bench_varlen, cuda, flash_attn, kernels, launch, tma, varlen

FLASH_ATTN_VARLEN_FUNC = [  # flash-attn 2.x's, then FA4's learnable_sink
    ("q", inspect.Parameter.empty), ("k", inspect.Parameter.empty),
    ("v", inspect.Parameter.empty), ("cu_seqlens_q", inspect.Parameter.empty),
    ("cu_seqlens_k", inspect.Parameter.empty), ("max_seqlen_q", inspect.Parameter.empty),
    ("max_seqlen_k", inspect.Parameter.empty), ("dropout_p", 0.0), ("softmax_scale", None),
    ("causal", False), ("window_size", (-1, -1)), ("softcap", 0.0), ("alibi_slopes", None),
    ("deterministic", False), ("return_attn_probs", False), ("block_table", None),
    ("learnable_sink", None),  # FlashAttention-4's (gpt-oss's attention sinks)
    ("seqused_k", None)]  # vLLM's key counts with a block table


def packed(total_q=300, total_k=500, hq=8, hkv=2, d=128, dv=None, batch=3, **kw):
    q = FakeTensor((total_q, hq, d), ptr=0x100000, **kw)
    k = FakeTensor((total_k, hkv, d), ptr=0x200000, **kw)
    v = FakeTensor((total_k, hkv, d if dv is None else dv), ptr=0x300000, **kw)
    cu_q = FakeTensor((batch + 1,), dtype="int32", ptr=0x400000)
    cu_k = FakeTensor((batch + 1,), dtype="int32", ptr=0x500000)
    return q, k, v, cu_q, cu_k


def test_signature_matches_flash_attn():
    params = inspect.signature(flash_attn.flash_attn_varlen_func).parameters
    assert [(p.name, p.default) for p in params.values()] == FLASH_ATTN_VARLEN_FUNC


def test_valid_arguments_reach_the_launch(monkeypatch):
    torch_stand_in(monkeypatch)
    with pytest.raises(ReachedTorch):
        flash_attn.flash_attn_varlen_func(*packed(), 200, 400, causal=True)


def test_unsupported_arguments_are_named():
    with pytest.raises(NotImplementedError, match="dropout_p"):
        flash_attn.flash_attn_varlen_func(*packed(), 200, 400, dropout_p=0.1)


def paged_caches(pages=40, page=16, hkv=2, d=128, batch=3, width=8):
    k_cache = FakeTensor((pages, page, hkv, d), ptr=0x600000)
    v_cache = FakeTensor((pages, page, hkv, d), ptr=0x700000)
    table = FakeTensor((batch, width), dtype="int32", ptr=0x800000)
    return k_cache, v_cache, table


def test_a_block_table_runs_the_paged_varlen_kernel(monkeypatch):
    # flash-attn 2's varlen call over paged caches (vLLM's mixed batches):
    # valid arguments reach the launch, with cu_seqlens_k or seqused_k.
    q, _, _, cu_q, cu_k = packed()
    k_cache, v_cache, table = paged_caches()
    torch_stand_in(monkeypatch)
    with pytest.raises(ReachedTorch):
        flash_attn.flash_attn_varlen_func(q, k_cache, v_cache, cu_q, cu_k, 200, 128,
                                          causal=True, block_table=table, softcap=30.0)
    used = FakeTensor((3,), dtype="int32", ptr=0x900000)
    with pytest.raises(ReachedTorch):
        flash_attn.flash_attn_varlen_func(q, k_cache, v_cache, cu_q, None, 200, 128,
                                          causal=True, block_table=table, seqused_k=used)


@pytest.mark.parametrize("change,error,match", [
    ({"max_seqlen_k": 129}, ValueError, "max_seqlen_k .129. must be at most block_table's row"),
    ({"table": FakeTensor((2, 8), dtype="int32", ptr=0x800000)}, ValueError, "block_table"),
    ({"table": FakeTensor((3, 8), dtype="int64", ptr=0x800000)}, TypeError, "block_table"),
    ({"k_cache": FakeTensor((40, 24, 2, 128), ptr=0x600000),
      "v_cache": FakeTensor((40, 24, 2, 128), ptr=0x700000)}, ValueError, "page size"),
    ({"q": FakeTensor((300, 8, 64), ptr=0x100000)}, ValueError, "head dim"),
    ({"q": FakeTensor((300, 7, 128), ptr=0x100000)}, ValueError, "multiple of k_cache's"),
    ({"cu_k": FakeTensor((5,), dtype="int32", ptr=0x500000)}, ValueError, "cu_seqlens_k"),
    ({"seqused_k": FakeTensor((3,), dtype="int32", ptr=0x900000)}, ValueError,
     "cu_seqlens_k or seqused_k"),
    ({"table": None, "seqused_k": FakeTensor((3,), dtype="int32", ptr=0x900000)}, ValueError,
     "seqused_k goes with block_table"),
])
def test_paged_varlen_arguments_are_checked(change, error, match):
    q, _, _, cu_q, cu_k = packed()
    k_cache, v_cache, table = paged_caches()
    args = dict(q=q, k_cache=k_cache, v_cache=v_cache, cu_k=cu_k, table=table,
                max_seqlen_k=128, seqused_k=None)
    args.update(change)
    with pytest.raises(error, match=match):
        flash_attn.flash_attn_varlen_func(args["q"], args["k_cache"], args["v_cache"], cu_q,
                                          args["cu_k"], 200, args["max_seqlen_k"],
                                          causal=True, block_table=args["table"],
                                          seqused_k=args["seqused_k"])


def test_softcap_and_alibi_become_a_score_mod_of_the_varlen_kernel(monkeypatch):
    # flash-attn's softcap and alibi_slopes with packed sequences: a
    # score_mod traced into the varlen kernel (b: the sequence), ALiBi's
    # diagonal from each sequence's own lengths.
    seen = {}

    def fake_varlen(*args, score_mod=None, **kwargs):
        seen["score_mod"] = score_mod
        return "out"

    monkeypatch.setattr(flash_attn, "attention_varlen", fake_varlen)
    assert flash_attn.flash_attn_varlen_func(*packed(), 200, 400, softcap=30.0) == "out"
    ir = kvpipe.modifiers.trace(seen["score_mod"]).ir
    assert "math.tanh" in ir
    # A bad slopes shape is named before anything reads cu_seqlens.
    with pytest.raises(ValueError, match=r"alibi_slopes must have shape \(8,\) or \(3, 8\)"):
        flash_attn.flash_attn_varlen_func(*packed(), 200, 400,
                                          alibi_slopes=FakeTensor((7,), dtype="float32"))


def test_varlen_modifiers_with_grad_go_through_autograd(monkeypatch):
    # The packed backward gives the regions each sequence's b: a score_mod on
    # inputs requiring grad reaches the autograd function with its trace.
    import sys
    import types

    calls = []
    fake = types.ModuleType("kvpipe.autograd")
    fake.varlen_attention_with_grad = lambda *args: calls.append(args) or ("o", "lse")
    monkeypatch.setitem(sys.modules, "kvpipe.autograd", fake)
    q, k, v, cu_q, cu_k = packed()
    score_mod = lambda s, b, h, qi, kv: s * 2.0  # noqa: E731
    assert varlen.attention_varlen(_GradTensor(q.shape, ptr=0x100000), k, v, cu_q, cu_k,
                                   200, 400, score_mod=score_mod) == "o"
    (args,) = calls
    # ..., score_mod, mask_mod, traced, sinks
    assert args[-4] is score_mod and args[-3] is None and args[-1] is None
    assert "arith.mulf" in args[-2].ir


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(packed="yes"), TypeError, "packed must be a bool or None"),
    (dict(deterministic=1), TypeError, "deterministic must be a bool or None"),
    (dict(deterministic=True, score_mod=lambda s, b, h, qi, kv: s * 2.0),
     NotImplementedError, "deterministic mode with score_mod/mask_mod in the varlen backward"),
    (dict(deterministic=True, packed=True), ValueError,
     "packed=True is not supported with deterministic=True"),
    (dict(deterministic=False, packed=False, score_mod=lambda s, b, h, qi, kv: s * 2.0),
     ValueError, "packed=False cannot run score_mod/mask_mod"),
])
def test_varlen_backward_ways_are_checked_by_name(kwargs, error, match):
    q, k, v, cu_q, cu_k = packed()
    out = FakeTensor((300, 8, 128), ptr=0x600000)
    lse = FakeTensor((8, 300), dtype="float32", ptr=0x700000)
    with pytest.raises(error, match=match):
        varlen.attention_varlen_backward(q, k, v, out, lse, out, cu_q, cu_k, **kwargs)


@pytest.mark.parametrize("head_dim,value_dim,causal,window", [
    (128, 128, True, False), (64, 64, False, True), (192, 128, False, False)])
def test_packed_backward_launches_follow_the_abis(compiler, tmp_path, monkeypatch, head_dim,
                                                 value_dim, causal, window):
    # Every parameter each of the three kernels names is provided, the grids
    # are sized by the maxima with the batch in z, the packed tensors are
    # (1, total, H, D) maps, and the row strides are the packed ones.
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    family = kvpipe.compile_attention(head_dim, "bf16", causal, backward=True, varlen=True,
                                      mask_alignment="bottom_right" if causal else "top_left",
                                      sliding_window=window,
                                      value_head_dim=None if value_dim == head_dim else value_dim)
    abis = {role: family.kernel_abi(role) for role in ("preprocess", "main", "postprocess")}
    assert all(abi["varlen"] is True for abi in abis.values())
    assert abis["main"]["params"][4:6] == ["dk", "dv"]
    assert abis["main"]["param_kinds"]["dk"] == "pointer"
    encoded = []

    def fake_encode(t, box, swizzle, dims_order=None, **kwargs):
        encoded.append((t.data_ptr(), tuple(t.shape), tuple(t.stride())))
        return bytes(128)

    monkeypatch.setattr(tma, "encode_from_tensor", fake_encode)
    monkeypatch.setattr(launch, "_maps", type(launch._maps)())
    q, k, v, cu_q, cu_k = packed(d=head_dim, dv=value_dim)
    out = FakeTensor((300, 8, value_dim), ptr=0x600000)
    dout = FakeTensor((300, 8, value_dim), ptr=0x800000)
    lse = FakeTensor((8, 300), dtype="float32", ptr=0x700000)
    buffers = {name: 0x1000000 * (i + 1) for i, name in
               enumerate(("delta", "lse_log2", "dq_accum", "dq", "dk", "dv"))}
    launches = varlen.varlen_backward_launches(abis, q, k, v, out, dout, lse, cu_q, cu_k,
                                               buffers, 200, 400, 0.125, (-1, 0), {})
    assert [role for role, _, _ in launches] == ["preprocess", "main", "postprocess"]
    block_n = abis["main"]["block_n"]
    grids = {role: grid for role, grid, _ in launches}
    assert grids == {"preprocess": (4, 8, 3), "main": (-(-400 // block_n), 8, 3),
                     "postprocess": (4, 8, 3)}
    for role, _, values in launches:
        args = launch.kernel_arguments(abis[role], values)
        assert len(args) == len(abis[role]["params"])
        assert values.get("cu_seqlens_q") == 0x400000 and values.get("total_q") == 300
    pre, main, post = (values for _, _, values in launches)
    assert (pre["o_stride_s"], pre["o_stride_h"], pre["o_stride_b"]) == (8 * value_dim,
                                                                         value_dim, 0)
    assert (main["cu_seqlens_k"], main["total_kv"], main["heads_per_kv_head"]) == (
        0x500000, 500, 4)
    assert (main["dk"], main["dv"], post["dq"]) == (buffers["dk"], buffers["dv"], buffers["dq"])
    assert (post["dq_stride_s"], post["dq_stride_h"]) == (8 * head_dim, head_dim)
    assert [e[:2] for e in encoded] == [
        (0x100000, (1, 300, 8, head_dim)), (0x200000, (1, 500, 2, head_dim)),
        (0x300000, (1, 500, 2, value_dim)), (0x800000, (1, 300, 8, value_dim))]


def test_varlen_padded_rows_keep_sequences_apart():
    # Each sequence's rows padded to whole blocks from FA3's padded start
    # never overlap the next's and end inside varlen_padded_rows.
    import random

    rng = random.Random(5)
    for _ in range(200):
        lengths = [rng.choice((0, 1, 63, 64, 65, rng.randrange(300))) for _ in
                   range(rng.randrange(1, 9))]
        starts = [sum(lengths[:b]) for b in range(len(lengths))]
        total = sum(lengths) + rng.randrange(3)
        end = varlen.varlen_padded_rows(total, len(lengths), 64)
        previous = 0
        for b, (start, n) in enumerate(zip(starts, lengths)):
            first = (start + 64 * b) // 64 * 64
            assert first >= previous and first % 64 == 0
            previous = first + -(-n // 64) * 64
        assert previous <= end


@pytest.mark.parametrize("change,error,match", [
    # cu_seqlens: dtype, rank, shape, device, batch >= 1
    ({"cu_q": FakeTensor((4,), dtype="float32")}, TypeError, "cu_seqlens_q"),
    ({"cu_k": FakeTensor((4,), dtype="bfloat16")}, TypeError, "cu_seqlens_k"),
    ({"cu_q": FakeTensor((4, 1), dtype="int32")}, ValueError, "cu_seqlens_q must have rank 1"),
    ({"cu_k": FakeTensor((5,), dtype="int32")}, ValueError, r"cu_seqlens_k must have "
                                                           r"cu_seqlens_q's shape \(4,\)"),
    ({"cu_q": FakeTensor((1,), dtype="int32"), "cu_k": FakeTensor((1,), dtype="int32")},
     ValueError, r"cu_seqlens_q must have shape \(batch \+ 1,\) with batch >= 1"),
    ({"cu_k": FakeTensor((4,), dtype="int32", device="cpu")}, ValueError,
     "cu_seqlens_k must be on a cuda device"),
    # the packed tensors
    ({"q": FakeTensor((2, 300, 8, 128))}, ValueError, "q must have rank 3"),
    ({"k": FakeTensor((500, 3, 128)), "v": FakeTensor((500, 3, 128))}, ValueError,
     r"multiple of k and v's heads \(3\)"),
    ({"v": FakeTensor((499, 2, 128))}, ValueError, "v must have k's rows and heads"),
    ({"q": FakeTensor((300, 8, 264)), "k": FakeTensor((500, 2, 264)),
      "v": FakeTensor((500, 2, 264))}, ValueError, "q's head dim must be one of"),
    ({"k": FakeTensor((500, 2, 128), dtype="float16")}, TypeError, "same dtype"),
    ({"v": FakeTensor((500, 2, 128), device="cpu")}, ValueError, "v must be on a cuda device"),
])
def test_bad_tensors_are_named(change, error, match):
    q, k, v, cu_q, cu_k = packed()
    args = dict(q=q, k=k, v=v, cu_q=cu_q, cu_k=cu_k)
    args.update(change)
    with pytest.raises(error, match=match):
        flash_attn.flash_attn_varlen_func(args["q"], args["k"], args["v"], args["cu_q"],
                                          args["cu_k"], 200, 400)


@pytest.mark.parametrize("max_q,max_k,error,match", [
    (200.0, 400, TypeError, "max_seqlen_q must be an int"),
    (200, True, TypeError, "max_seqlen_k must be an int"),
    (-1, 400, ValueError, "max_seqlen_q must be non-negative"),
    (200, -5, ValueError, "max_seqlen_k must be non-negative"),
])
def test_bad_maxima_are_named(max_q, max_k, error, match):
    with pytest.raises(error, match=match):
        flash_attn.flash_attn_varlen_func(*packed(), max_q, max_k)


def test_other_arguments():
    with pytest.raises(TypeError, match="deterministic must be a bool"):
        flash_attn.flash_attn_varlen_func(*packed(), 200, 400, deterministic=None)
    with pytest.raises(TypeError, match="return_attn_probs must be a bool"):
        flash_attn.flash_attn_varlen_func(*packed(), 200, 400, return_attn_probs=1)
    with pytest.raises(TypeError, match="window_size"):
        flash_attn.flash_attn_varlen_func(*packed(), 200, 400, window_size=5)
    with pytest.raises(ValueError, match="mask_alignment"):
        varlen.attention_varlen(*packed(), 200, 400, mask_alignment="middle")
    with pytest.raises(ValueError, match="scale"):
        varlen.attention_varlen(*packed(), 200, 400, scale=-1.0)


@pytest.mark.parametrize("name,tensor,match", [
    ("out", FakeTensor((300, 8, 64)), r"out must be a contiguous torch.bfloat16 tensor of "
                                      r"shape \(300, 8, 128\)"),
    ("out", FakeTensor((300, 8, 128), dtype="float16"), "out must be a contiguous"),
    ("out", FakeTensor((300, 8, 128), strides=(2048, 128, 1)), "out must be a contiguous"),
    ("lse_out", FakeTensor((300, 8), dtype="float32"), r"lse_out must be a contiguous "
                                                        r"torch.float32 tensor of shape \(8, 300\)"),
])
def test_bad_outputs_are_named(name, tensor, match):
    with pytest.raises(ValueError, match=match):
        varlen.attention_varlen(*packed(), 200, 400, return_lse=True, **{name: tensor})


def test_sinks_are_checked_by_name(monkeypatch):
    # Attention sinks (kvpipe.sinks): a float (H_q,) tensor.
    with pytest.raises(ValueError, match=r"sinks must have shape \(H_q,\) = \(8,\)"):
        varlen.attention_varlen(*packed(), 200, 400, sinks=FakeTensor((2,), dtype="float32"))
    with pytest.raises(TypeError, match="sinks must have dtype"):
        varlen.attention_varlen(*packed(), 200, 400, sinks=FakeTensor((8,), dtype="int32"))
    with pytest.raises(ValueError, match="lse_out needs return_lse=True"):
        varlen.attention_varlen(*packed(), 200, 400, sinks=FakeTensor((8,), dtype="float32"),
                                lse_out=FakeTensor((8, 300), dtype="float32"))
    sinks = FakeTensor((8,), dtype="float32")
    sinks.requires_grad = True  # autograd records the call: no output given
    with pytest.raises(ValueError, match="out and lse_out cannot be given when q, k, v or "
                                         "sinks require grad"):
        varlen.attention_varlen(*packed(), 200, 400, sinks=sinks,
                                out=FakeTensor((300, 8, 128), dtype="bfloat16"))
    torch_stand_in(monkeypatch)
    with pytest.raises(ReachedTorch):
        varlen.attention_varlen(*packed(), 200, 400, sinks=FakeTensor((8,), dtype="float32"))


def test_lse_out_needs_return_lse():
    with pytest.raises(ValueError, match="lse_out needs return_lse=True"):
        varlen.attention_varlen(*packed(), 200, 400,
                                lse_out=FakeTensor((8, 300), dtype="float32"))


def test_the_kernel_configuration_says_varlen():
    config = kernels.AttentionConfig.make(128, "bf16", True, mask_alignment="bottom_right",
                                          varlen=True)
    assert "varlen = true" in config.declaration()
    assert config.kernel_name.endswith("_bottom_right_varlen")
    plain = kernels.AttentionConfig.make(128, "bf16", True)
    assert "varlen" not in plain.declaration() and "varlen" not in plain.kernel_name


@pytest.mark.parametrize("kwargs,match", [
    ({"kv_lengths": True}, "varlen=True with kv_lengths=True needs page_size"),
    ({"backward": True, "deterministic": True}, "not supported with backward=True and "
                                                "deterministic=True"),
    ({"persistent": True}, "not supported with persistent"),
    ({"split_kv": True}, "not supported with split_kv"),
    ({"pack_gqa": 4}, "not supported with pack_gqa"),
])
def test_the_combinations_the_compiler_refuses_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        kernels.AttentionConfig.make(64, "bf16", False, varlen=True, **kwargs)
    with pytest.raises(TypeError, match="varlen must be a bool"):
        kernels.AttentionConfig.make(64, "bf16", False, varlen=1)


def test_launch_arguments_follow_the_varlen_abi(compiler, tmp_path, monkeypatch):
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    abi = kvpipe.compile_attention(128, "bf16", True, mask_alignment="bottom_right",
                                   varlen=True).abi
    assert abi["varlen"] is True
    assert abi["params"][-4:] == ["cu_seqlens_q", "cu_seqlens_k", "o", "total_q"]
    encoded = []

    def fake_encode(t, box, swizzle, dims_order=None, **kwargs):
        encoded.append((t.data_ptr(), tuple(t.shape), tuple(t.stride()), dims_order))
        return bytes(128)

    monkeypatch.setattr(tma, "encode_from_tensor", fake_encode)
    monkeypatch.setattr(launch, "_maps", type(launch._maps)())
    q, k, v, cu_q, cu_k = packed()
    out = FakeTensor((300, 8, 128), ptr=0x600000)
    lse = FakeTensor((8, 300), dtype="float32", ptr=0x700000)
    args = varlen.varlen_kernel_arguments(abi, q, k, v, out, lse, cu_q, cu_k, 200, 400,
                                          0.125, (-1, 0))
    values = dict(zip(abi["params"], args))
    kinds = {"tensor_map": cuda.TensorMapArg, "pointer": cuda.PtrArg, "i32": cuda.I32Arg,
             "f32": cuda.F32Arg}
    assert [type(a) for a in args] == [kinds[abi["param_kinds"][p]] for p in abi["params"]]
    # The packed tensors are seen as (1, total, H, D), in bshd order.
    assert encoded == [
        (0x100000, (1, 300, 8, 128), (300 * 1024, 1024, 128, 1), (0, 2, 1, 3)),
        (0x200000, (1, 500, 2, 128), (500 * 256, 256, 128, 1), (0, 2, 1, 3)),
        (0x300000, (1, 500, 2, 128), (500 * 256, 256, 128, 1), (0, 2, 1, 3)),
        (0x600000, (1, 300, 8, 128), (300 * 1024, 1024, 128, 1), (0, 2, 1, 3))]

    def scalar(name):
        return int.from_bytes(bytes(values[name]), "little", signed=True)

    assert scalar("cu_seqlens_q") == 0x400000 and scalar("cu_seqlens_k") == 0x500000
    assert scalar("o") == 0x600000 and scalar("lse") == 0x700000
    assert (scalar("seq_q"), scalar("seq_kv"), scalar("batch"), scalar("total_q")) == (
        200, 400, 3, 300)
    assert scalar("heads_q") == 8 and scalar("heads_per_kv_head") == 4


def test_the_abi_table_documents_the_varlen_parameters():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "kernel-abi.md").read_text()
    for name in ("cu_seqlens_q", "cu_seqlens_k", "o", "total_q"):
        assert f"| next | `{name}` |" in doc


def test_the_check_grid_covers_what_the_issue_asks():
    cases = check_varlen.varlen_grid()
    lengths = {n for c in cases for n in c.lengths_q + c.lengths_k}
    assert {0, 1, 20000} <= lengths
    assert any(q != k for c in cases for q, k in zip(c.lengths_q, c.lengths_k))
    assert {(c.causal, c.alignment) for c in cases} >= {(True, "top_left"),
                                                       (True, "bottom_right")}
    assert any(c.window != (-1, -1) for c in cases)
    assert {c.heads_q // c.heads_kv > 1 for c in cases} == {False, True}
    assert any(c.heads_kv == 1 for c in cases)
    assert {64, 128} <= {c.head_dim for c in cases}
    assert {c.dtype for c in cases} == {"bf16", "f16"}
    # Attention sinks, with a window and with rows without keys.
    assert any(c.sinks and c.window != (-1, -1) for c in cases)
    assert any(c.sinks and any(k < q for q, k in zip(c.lengths_q, c.lengths_k))
               for c in cases)


def test_compile_for_check_varlen_covers_the_check_and_the_bench():
    from kvpipe.plans import varlen_plan

    configs = check_varlen.kernel_configs()
    for case in check_varlen.varlen_grid():
        causal, alignment, window = check_varlen._kernel_choice(case)
        # The kernel attention_varlen launches: the varlen plan's tuning.
        planned = varlen_plan(case.head_dim, case.v_head_dim, causal, window, False, {})
        assert dict(head_dim=case.head_dim, dtype=case.dtype, causal=causal,
                    value_head_dim=case.value_head_dim, mask_alignment=alignment,
                    sliding_window=window, varlen=True, **planned) in configs
    for config in bench_varlen.kernel_configs():
        assert config in configs
    # Every configuration is one the kernels module accepts.
    for config in configs:
        kernels.AttentionConfig.make(**config)


def test_kernel_choice_matches_attention_varlen():
    # No mask: the top-left kernel whatever the alignment asked.
    case = check_varlen.VarlenCase("bf16", 128, 4, 4, (1,), (1,), False, "bottom_right")
    assert check_varlen._kernel_choice(case) == (False, "top_left", False)
    case = check_varlen.VarlenCase("bf16", 128, 4, 4, (1,), (1,), False, "bottom_right",
                                   (100, 50))
    assert check_varlen._kernel_choice(case) == (False, "bottom_right", True)


def test_cli_varlen_flags(capsys):
    from kvpipe.__main__ import main

    with pytest.raises(SystemExit):
        main(["compile", "--varlen"])
    assert "--for-check" in capsys.readouterr().err


def test_integer_maxima_of_other_types_are_accepted(monkeypatch):
    torch_stand_in(monkeypatch)

    class NumpyLikeInt:  # numpy.int64 and torch's SymInt have __index__
        def __init__(self, value):
            self.value = value

        def __index__(self):
            return self.value

    with pytest.raises(ReachedTorch):
        flash_attn.flash_attn_varlen_func(*packed(), NumpyLikeInt(200), NumpyLikeInt(400))


class _GradTensor(FakeTensor):
    requires_grad = True


def test_outputs_in_place_are_refused_when_inputs_require_grad():
    # An output written in place cannot carry a grad_fn.
    q, k, v, cu_q, cu_k = packed()
    with pytest.raises(ValueError, match="out and lse_out cannot be given when q, k, v or "
                                         "sinks require grad"):
        varlen.attention_varlen(_GradTensor(q.shape, ptr=0x100000), k, v, cu_q, cu_k,
                                200, 400, out=FakeTensor((300, 8, 128)))


def test_inputs_requiring_grad_go_through_autograd(monkeypatch):
    # With an input requiring grad (grad mode on: no torch here), the call is
    # recorded by the autograd function, which runs the forward without grad
    # and saves what the per-sequence backward needs.
    import sys
    import types

    calls = []
    fake = types.ModuleType("kvpipe.autograd")
    fake.varlen_attention_with_grad = lambda *args: calls.append(args) or ("o", "lse")
    monkeypatch.setitem(sys.modules, "kvpipe.autograd", fake)
    q, k, v, cu_q, cu_k = packed()
    grad_q = _GradTensor(q.shape, ptr=0x100000)
    assert varlen.attention_varlen(grad_q, k, v, cu_q, cu_k, 200, 400, causal=True,
                                   mask_alignment="bottom_right") == "o"
    assert varlen.attention_varlen(grad_q, k, v, cu_q, cu_k, 200, 400,
                                   return_lse=True) == ("o", "lse")
    (args, _) = calls
    assert args[:7] == (grad_q, k, v, cu_q, cu_k, 200, 400)
    assert args[7:10] == (True, None, "bottom_right")


def test_the_backward_check_covers_the_backward_families():
    # check --varlen's backward cases: a sequence without keys and one
    # without queries, GQA, bottom-right causal, a window, every head dim
    # pair's tiles; compile --for-check --varlen holds the packed backward
    # family and the dense backward families the per-sequence backward
    # launches (top-left for sequences as long as their keys).
    cases = check_varlen.backward_cases()
    assert any(0 in c.lengths_q for c in cases)
    assert any(c.heads_q != c.heads_kv for c in cases)
    assert any(c.causal and c.alignment == "bottom_right" for c in cases)
    assert any(c.window != (-1, -1) for c in cases)
    assert {64, 96, 128, 192, 256} <= {c.head_dim for c in cases}
    assert any(c.value_head_dim == 128 for c in cases)
    configs = check_varlen.kernel_configs()
    for case in cases:
        causal, alignment, window = check_varlen._kernel_choice(case)
        for kind in ({"varlen": True}, {"backward": True}, {"varlen": True, "backward": True}):
            assert dict(head_dim=case.head_dim, dtype=case.dtype, causal=causal,
                        value_head_dim=case.value_head_dim, mask_alignment=alignment,
                        sliding_window=window, **kind) in configs
        if any(n_q == n_k for n_q, n_k in zip(case.lengths_q, case.lengths_k)) and causal:
            assert dict(head_dim=case.head_dim, dtype=case.dtype, causal=causal,
                        value_head_dim=case.value_head_dim, mask_alignment="top_left",
                        sliding_window=window, backward=True) in configs
    for config in configs:
        kernels.AttentionConfig.make(**config)


def test_compile_for_check_varlen_holds_the_modifier_kernels():
    # check --varlen's flash-attn softcap / ALiBi cases launch kernels traced
    # from the same score_mod flash_attn_varlen_func builds: their IR must be
    # in compile --for-check --varlen's list, or the GPU machine (no
    # compiler) would miss them.
    class Loadable(FakeTensor):
        def __getitem__(self, index):
            return kvpipe.modifiers.load(self, index)

    class Lengths(FakeTensor):
        def __sub__(self, other):  # lengths_k - lengths_q: the diagonals
            return Loadable(self.shape, dtype="int32")

    class Offsets(FakeTensor):
        # cu_seqlens: slices and differences give the per-sequence lengths.
        def __getitem__(self, key):
            return self

        def __sub__(self, other):
            return Lengths((self.shape[0] - 1,), dtype="int32")

    configs = check_varlen.kernel_configs()
    cases = [(case, softcap, alibi, False) for case, softcap, alibi in check_varlen.MODIFIER_CASES]
    cases += [(case, softcap, alibi, True)
              for case, softcap, alibi in check_varlen.MODIFIER_BACKWARD_CASES]
    for case, softcap, alibi, backward in cases:
        q = FakeTensor((sum(case.lengths_q), case.heads_q, case.head_dim))
        offsets = Offsets((len(case.lengths_q) + 1,), dtype="int32")
        slopes = Loadable((case.heads_q,), dtype="float32") if alibi else None
        traced = kvpipe.modifiers.trace(
            flash_attn._varlen_score_mod(softcap, slopes, q, offsets, offsets))
        assert any(c.get("modifiers") == traced.ir and c["head_dim"] == case.head_dim
                   and c.get("backward", False) == backward for c in configs), case.name


def test_the_varlen_bench_table_has_the_backward_columns():
    row = {"batch": "uneven", "padded": True, "causal": True, "varlen": 300.0, "dense": 200.0,
           "varlen_vs_dense": 1.5, "bwd_packed": 250.0, "bwd_sequences": 125.0,
           "bwd_dense": 100.0, "bwd_packed_vs_sequences": 2.0}
    peer = dict(row, batch="4 x 8k", padded=False, fa4=280.0, varlen_vs_fa4=1.071)
    lines = bench_varlen.to_markdown([row, peer]).splitlines()
    header = next(line for line in lines if line.startswith("| batch"))
    assert header.count("|") == lines[-1].count("|") == lines[-2].count("|")
    # FA4's varlen where it was staged, None where not.
    assert lines[-2] == ("| uneven (dense padded) | yes | 300.0 | 200.0 | 1.5 | None | None | "
                         "250.0 | 125.0 | 100.0 | 2.0 |")
    assert lines[-1] == ("| 4 x 8k | yes | 300.0 | 200.0 | 1.5 | 280.0 | 1.071 | 250.0 | "
                         "125.0 | 100.0 | 2.0 |")
    # The packed and dense backward families are compiled for the GPU.
    configs = bench_varlen.kernel_configs()
    assert any(c.get("varlen") and c.get("backward") for c in configs)
    assert any(c.get("backward") and not c.get("varlen") for c in configs)


def test_deterministic_varlen_modifiers_with_grad_are_refused_at_the_forward():
    # Only the packed backward runs modifiers, and it adds dQ in no fixed
    # order: refused before the forward runs, naming both.
    q, k, v, cu_q, cu_k = packed()
    with pytest.raises(NotImplementedError, match="deterministic mode with score_mod/mask_mod"):
        varlen.attention_varlen(_GradTensor(q.shape, ptr=0x100000), k, v, cu_q, cu_k,
                                200, 400, score_mod=lambda s, b, h, qi, kv: s * 2.0,
                                deterministic=True)


def test_a_bad_varlen_backward_way_in_the_environment_is_named(monkeypatch):
    monkeypatch.setenv(varlen.VARLEN_BACKWARD_ENV, "yes")
    q, k, v, cu_q, cu_k = packed()
    out = FakeTensor((300, 8, 128), ptr=0x600000)
    lse = FakeTensor((8, 300), dtype="float32", ptr=0x700000)
    with pytest.raises(ValueError, match="KVPIPE_VARLEN_BACKWARD must be 'sequences' or "
                                         "'packed', got 'yes'"):
        varlen.attention_varlen_backward(q, k, v, out, lse, out, cu_q, cu_k,
                                         deterministic=False)


class _Ran(Exception):
    pass


@pytest.mark.parametrize("deterministic, env, expected", [
    (False, None, "packed"),
    (False, "packed", "packed"),
    (False, "sequences", "sequences"),
    (True, None, "sequences"),
    (True, "packed", "sequences"),
])
def test_the_varlen_backward_runs_packed_unless_deterministic_or_asked(
        monkeypatch, deterministic, env, expected):
    # The packed family passed check --varlen on a GPU: it is the default;
    # deterministic mode (dQ in a fixed order) and the environment's
    # "sequences" take the per-sequence way.
    if env is None:
        monkeypatch.delenv(varlen.VARLEN_BACKWARD_ENV, raising=False)
    else:
        monkeypatch.setenv(varlen.VARLEN_BACKWARD_ENV, env)
    ran = []

    def packed_way(*args, **kwargs):
        ran.append("packed")
        raise _Ran

    def per_sequence(self):  # its first step: reading cu_seqlens back
        ran.append("sequences")
        raise _Ran

    monkeypatch.setattr(varlen, "_varlen_backward_packed", packed_way)
    monkeypatch.setattr(FakeTensor, "tolist", per_sequence, raising=False)
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    q, k, v, cu_q, cu_k = packed()
    out = FakeTensor((300, 8, 128), ptr=0x600000)
    lse = FakeTensor((8, 300), dtype="float32", ptr=0x700000)
    with pytest.raises(_Ran):
        varlen.attention_varlen_backward(q, k, v, out, lse, out, cu_q, cu_k,
                                         deterministic=deterministic)
    assert ran == [expected]
