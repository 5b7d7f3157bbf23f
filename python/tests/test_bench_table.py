"""The bench table and the command line's tuning syntax (no GPU needed)."""

import pytest

from kvpipe import bench, kernels
from kvpipe.__main__ import _tuning


def test_tuning_values_parse_as_bools_and_ints():
    assert _tuning(["pingpong=true", "kv_stages=3", "overlap_softmax=False"]) == {
        "pingpong": True, "kv_stages": 3, "overlap_softmax": False}


def test_variant_label_is_compact_and_ordered():
    assert bench.variant_label({"pingpong": True, "kv_stages": 3}) == "pingpong=1,kv_stages=3"


def test_markdown_has_a_column_per_variant_with_its_ratio_to_cudnn():
    rows = [
        {"D": 128, "N": 4096, "B": 8, "causal": False, "kvpipe": 580.0, "cudnn": 600.0,
         "flash": 340.0, "fa4": 620.0, "vs_fa4": 0.935, "vs_cudnn": 0.967, "vs_flash": 1.706, "ptx_s": 0.2, "compile_s": 0.5,
         "variants": {"pingpong=1": 630.0}},
        {"D": 128, "N": 4096, "B": 8, "causal": True, "kvpipe": 520.0, "cudnn": None,
         "flash": 310.0, "vs_cudnn": None, "vs_flash": 1.677, "ptx_s": 0.2, "compile_s": 0.5,
         "variants": {"pingpong=1": 540.0}},
    ]
    lines = bench.to_markdown(rows).splitlines()
    assert lines[0].endswith("| pingpong=1 (/cuDNN) |")
    assert lines[1].count("---") == 13
    assert "| FA4 |" in lines[0] and "| kvpipe/FA4 |" in lines[0]
    assert lines[2].endswith("| 630.0 (1.050) |")
    assert "| 620.0 |" in lines[2] and "| 0.935 |" in lines[2]
    # Without a cuDNN figure there is no ratio, but the variant's figure stays.
    assert lines[3].endswith("| 540.0 |")


def test_markdown_without_variants_keeps_the_reference_columns():
    rows = [{"D": 64, "N": 1024, "B": 32, "causal": True, "kvpipe": 226.3, "cudnn": 336.6,
             "flash": 213.6, "vs_cudnn": 0.672, "vs_flash": 1.059, "ptx_s": 0.16,
             "compile_s": 0.39}]
    lines = bench.to_markdown(rows).splitlines()
    assert lines[0].count("|") == 13
    # Without FA4 on the machine its columns say None.
    assert "| 226.3 | 336.6 | 213.6 | None | 0.672 | 1.059 | None | 0.16, 0.39 |" in lines[2]


def test_random_check_grid_is_reproducible_and_valid():
    from kvpipe import check

    first, again = check.random_grid(50, seed=7), check.random_grid(50, seed=7)
    assert first == again
    assert first != check.random_grid(50, seed=8)
    for case in first:
        assert case.dtype in ("bf16", "f16") and case.head_dim in (64, 96, 128, 192, 256)
        assert (case.head_dim, case.v_head_dim) in kernels.HEAD_DIM_PAIRS
        assert 1 <= case.seq_q <= 5000 and 1 <= case.seq_kv <= 5000
        assert case.heads_q % case.heads_kv == 0 and case.batch >= 1
        assert case.layout in ("bhsd", "bshd")
    # Both causal and non-causal cases, and some at tile boundaries.
    assert {c.causal for c in first} == {False, True}


def test_check_grid_covers_every_head_dim_pair():
    from kvpipe import check

    grid = check.default_grid()
    pairs = {(c.head_dim, c.v_head_dim) for c in grid}
    assert pairs >= set(kernels.HEAD_DIM_PAIRS)
    # And dims that run zero-padded, each as a generated pair.
    padded = pairs - set(kernels.HEAD_DIM_PAIRS)
    assert {(80, 80), (32, 32), (128, 64)} <= padded
    assert all(kernels.padded_head_dims(d, dv) in kernels.HEAD_DIM_PAIRS for d, dv in padded)
    for d, dv in kernels.HEAD_DIM_PAIRS:
        cases = [c for c in grid if (c.head_dim, c.v_head_dim) == (d, dv)]
        # Both dtypes, causal and not, a tail case, GQA, bshd and strided views at each.
        assert {c.dtype for c in cases} == {"bf16", "f16"}
        assert {c.causal for c in cases} == {False, True}
        assert any(c.seq_q % 64 and c.seq_kv % 64 for c in cases)
        assert any(c.heads_q != c.heads_kv for c in cases)
        assert any(c.layout == "bshd" for c in cases) and any(c.strided for c in cases)
    assert "d192v128" in next(c.name for c in grid if c.value_head_dim == 128)


def test_check_with_tuning_skips_head_dims_the_compiler_rejects(monkeypatch, capsys):
    import kvpipe
    from kvpipe import check

    def fake_compile(head_dim, dtype, causal, value_head_dim=None, **tuning):
        if head_dim == 256:
            raise kvpipe.CompilerError("error: needs 263168 bytes of shared memory", 1, ["x"])

    ran = []
    monkeypatch.setattr(kvpipe, "compile_attention", fake_compile)
    monkeypatch.setattr(check, "_compiles_cache", {})
    monkeypatch.setattr(check, "run_case",
                        lambda case, seed, tuning=None: ran.append(case) or {"case": case.name,
                                                                             "ok": True})
    cases = [check.Case("bf16", 128, False, 1, 1, 1, 64, 64),
             check.Case("bf16", 256, False, 1, 1, 1, 64, 64)]
    rows = check.run(cases, tuning={"persistent": True})
    assert [c.head_dim for c in ran] == [128] and len(rows) == 1
    assert "SKIP bf16 d256" in capsys.readouterr().out


def test_backward_table_has_fa4_beside_cudnn_and_fa2():
    rows = [{"D": 128, "N": 4096, "B": 8, "causal": True, "kvpipe": 397.3,
             "deterministic": 248.1, "cudnn": 458.0, "flash": 263.4, "fa4": 548.0,
             "vs_cudnn": 0.867, "vs_flash": 1.508, "vs_fa4": 0.725},
            # FA4 not staged on the machine: its entries stay empty.
            {"D": 64, "N": 1024, "B": 32, "causal": False, "kvpipe": 271.9,
             "deterministic": 191.4, "cudnn": 367.0, "flash": 213.5, "fa4": None,
             "vs_cudnn": 0.741, "vs_flash": 1.274}]
    lines = bench.backward_to_markdown(rows).splitlines()
    assert lines[0].count("|") - 1 == lines[1].count("---") == 12
    assert "| FA4 |" in lines[0] and lines[0].endswith("| kvpipe/FA4 |")
    assert lines[2] == ("| 128 | 4096 | 8 | yes | 397.3 | 248.1 | 458.0 | 263.4 | 548.0 | "
                        "0.867 | 1.508 | 0.725 |")
    assert lines[3].endswith("| None | 0.741 | 1.274 | None |")


class _Leaf:
    """A stand-in tensor: detach().requires_grad_() and transpose() record
    themselves in its name."""

    def __init__(self, name, shape=(2, 4, 64, 128)):
        self.name, self.shape = name, shape

    def detach(self):
        return _Leaf(self.name + ".detach", self.shape)

    def requires_grad_(self):
        return _Leaf(self.name + ".leaf", self.shape)

    def transpose(self, a, b):
        shape = list(self.shape)
        shape[a], shape[b] = shape[b], shape[a]
        return _Leaf(self.name + ".t", tuple(shape))

    def contiguous(self):
        return self


def _fake_torch(monkeypatch, grads):
    import contextlib
    import sys
    import types

    torch = types.ModuleType("torch")
    torch.no_grad = contextlib.nullcontext
    torch.autograd = types.SimpleNamespace(
        grad=lambda out, leaves, do, retain_graph: grads.append(
            (out, [leaf.name for leaf in leaves], do, retain_graph)))
    torch.bfloat16 = "bf16"
    torch.randn = lambda *shape, dtype=None, device=None: _Leaf("x", shape)
    torch.randn_like = lambda t: _Leaf("do", t.shape)
    nn = types.ModuleType("torch.nn")
    functional = types.ModuleType("torch.nn.functional")
    functional.scaled_dot_product_attention = lambda q, k, v, is_causal: ("sdpa", is_causal)
    attention = types.ModuleType("torch.nn.attention")
    attention.SDPBackend = types.SimpleNamespace(CUDNN_ATTENTION="cudnn",
                                                 FLASH_ATTENTION="flash")
    attention.sdpa_kernel = lambda backends: contextlib.nullcontext()
    for name, module in (("torch", torch), ("torch.nn", nn),
                         ("torch.nn.functional", functional), ("torch.nn.attention", attention)):
        monkeypatch.setitem(sys.modules, name, module)
    torch.nn, nn.functional, nn.attention = nn, functional, attention
    return torch


def test_backward_timings_time_the_backward_alone(monkeypatch):
    import importlib

    import kvpipe

    grads, calls, timed = [], [], []
    _fake_torch(monkeypatch, grads)
    monkeypatch.setattr(bench, "_median_ms", lambda fn: timed.append(fn) or fn() or 3.0)
    # kvpipe: the forward with the log-sum-exp once, outside the timing; the
    # timed call is attention_backward with the same masks and modifiers.
    monkeypatch.setattr(kvpipe, "attention",
                        lambda q, k, v, **kw: calls.append(kw) or ("o", "lse"))
    backward_module = importlib.import_module("kvpipe.backward")
    monkeypatch.setattr(backward_module, "attention_backward", lambda *args, **kw: calls.append(
        (args, kw)))
    backward = bench._kvpipe_backward_fn("q", "k", "v", "do", deterministic=False, causal=True,
                                         score_mod="mod", tuning=dict(dq_atomics=True))
    # The forward runs once, when the callable to time is made; each call is
    # the backward alone.
    assert calls == [dict(return_lse=True, causal=True, score_mod="mod")]
    backward()
    # The backward's tuning goes to the backward alone (the forward takes no
    # dq_atomics: the first GPU run of the variant lost every cell to that).
    assert calls == [dict(return_lse=True, causal=True, score_mod="mod"),
                     (("q", "k", "v", "o", "lse", "do"),
                      dict(deterministic=False, dq_atomics=True, causal=True,
                           score_mod="mod"))]
    assert not timed
    # A peer: its forward once on leaves requiring grad (the first output of
    # a tuple), a backward before the timing, the graph retained.
    forwards = []

    def forward(*leaves):
        forwards.append([leaf.name for leaf in leaves])
        return "out", "lse"

    assert bench._autograd_backward_ms(forward, [_Leaf("q"), _Leaf("k")], "do") == 3.0
    assert forwards == [["q.detach.leaf", "k.detach.leaf"]]
    assert grads == [("out", ["q.detach.leaf", "k.detach.leaf"], "do", True)] * 2


def test_run_backward_measures_every_backend(monkeypatch):
    grads = []
    _fake_torch(monkeypatch, grads)
    kvpipe_calls, peer_calls = [], []

    def kvpipe_fn(q, k, v, do, **kw):
        kvpipe_calls.append(kw)
        return lambda: 2.0 if kw.get("deterministic") else 1.0

    def peer(forward, inputs, do):
        peer_calls.append((forward(*inputs), [t.name for t in inputs], do.name))
        return lambda: 4.0

    monkeypatch.setattr(bench, "_kvpipe_backward_fn", kvpipe_fn)
    monkeypatch.setattr(bench, "_autograd_backward_fn", peer)
    monkeypatch.setattr(bench, "_round_ms", lambda fn: fn())
    monkeypatch.setattr(bench, "_fa4", lambda: lambda q, k, v, causal: ("fa4", causal))
    rows = bench.run_backward([128], [1024], [True])
    assert kvpipe_calls == [dict(causal=True), dict(deterministic=True, causal=True)]
    flops = 2.5 * 4 * 32 * 16 * 1024 * 1024 * 128 / 2
    assert rows[0]["kvpipe"] == round(flops / 1e9, 1)
    assert rows[0]["deterministic"] == round(flops / 2e9, 1)
    assert peer_calls == [(("sdpa", True), ["x", "x", "x"], "do")] * 2 + [
        (("fa4", True), ["x.t", "x.t", "x.t"], "do.t")]
    assert rows[0]["cudnn"] == rows[0]["flash"] == rows[0]["fa4"] == round(flops / 4e9, 1)
    assert rows[0]["vs_cudnn"] == rows[0]["vs_fa4"] == 4.0


def test_run_backward_measures_variants_beside_the_default(monkeypatch, capsys):
    grads = []
    _fake_torch(monkeypatch, grads)
    kvpipe_calls = []

    def kvpipe_fn(q, k, v, do, tuning=None, **kw):
        kvpipe_calls.append({**kw, **(tuning or {})})

        def backward():
            if tuning and q.shape[-1] <= 128:
                raise ValueError("dq_atomics applies to backward=True at head dims above 128")
            return 0.5 if tuning else 1.0
        return backward

    def no_sdpa(forward, inputs, do):
        raise RuntimeError("no cuDNN here")

    monkeypatch.setattr(bench, "_kvpipe_backward_fn", kvpipe_fn)
    monkeypatch.setattr(bench, "_autograd_backward_fn", no_sdpa)
    monkeypatch.setattr(bench, "_round_ms", lambda fn: fn())
    monkeypatch.setattr(bench, "_fa4", lambda: None)
    rows = bench.run_backward([256, 128], [1024], [False], variants=[{"dq_atomics": True}])
    assert dict(causal=False, dq_atomics=True) in kvpipe_calls
    assert rows[0]["variants"]["dq_atomics=1"] == 2 * rows[0]["kvpipe"]
    assert rows[1]["variants"]["dq_atomics=1"] is None  # head dim 128 does not take it
    # A peer whose forward raises is None, its reason printed.
    assert rows[0]["cudnn"] is None and "cudnn failed: no cuDNN here" in capsys.readouterr().out
    table = bench.backward_to_markdown(rows)
    header = table.splitlines()[0]
    assert header.endswith("| dq_atomics=1 (/cuDNN) |")
    assert table.splitlines()[3].endswith(" None |")


def test_interleaved_timing_shuffles_the_columns_and_takes_medians(capsys):
    order = []
    figures = {"a": iter([5.0, 1.0, 3.0]), "b": iter([2.0, 2.0, 9.0]), "c": iter([4.0] * 3)}

    def column(name):
        return lambda: name

    def time(fn):
        name = fn()
        order.append(name)
        return next(figures[name])

    def broken():
        raise RuntimeError("cuDNN does not take this shape")

    columns = [("a", column("a")), ("peer", broken), ("b", column("b")), ("c", column("c"))]
    ms = bench.interleaved_ms(columns, rounds=3, time=time, optional=["peer"])
    # Each round times every working column once, in an order of its own
    # (seeded: the same in every run).
    rounds = [order[i:i + 3] for i in range(0, 9, 3)]
    assert all(sorted(r) == ["a", "b", "c"] for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1
    assert ms == {"a": 3.0, "peer": None, "b": 2.0, "c": 4.0}
    assert list(ms) == ["a", "peer", "b", "c"]
    assert "peer failed: cuDNN does not take this shape" in capsys.readouterr().out
    # A column not named optional (kvpipe's own) propagates its error.
    with pytest.raises(RuntimeError, match="cuDNN does not take this shape"):
        bench.interleaved_ms(columns, rounds=1, time=time)
    # Two rounds: the mean of the two (statistics.median), not the slower.
    figures.update(a=iter([1.0, 3.0]), b=iter([2.0, 2.0]), c=iter([4.0, 4.0]))
    assert bench.interleaved_ms(columns, rounds=2, time=time, optional=["peer"])["a"] == 2.0


def test_run_times_every_column_of_a_row_in_interleaved_rounds(monkeypatch):
    import types

    import kvpipe

    _fake_torch(monkeypatch, [])
    launched = []
    monkeypatch.setattr(kvpipe, "compile_attention", lambda *a, **kw: types.SimpleNamespace(
        compile_seconds=0.5, abi={"ptx_seconds": 0.2}))
    monkeypatch.setattr(kvpipe, "attention", lambda q, k, v, **kw: launched.append(kw) or (
        "kvpipe", kw))
    monkeypatch.setattr(bench, "_fa4", lambda: lambda q, k, v, causal: ("fa4", causal))
    # Each column's time: kvpipe 1 ms, the variant 2, the SDPA backends 4, FA4 0.5.
    ms = {"kvpipe": 1.0, "sdpa": 4.0, "fa4": 0.5}

    def time(fn):
        out = fn()
        return 2.0 if out[0] == "kvpipe" and out[1].get("block_n") else ms[out[0]]

    monkeypatch.setattr(bench, "_round_ms", time)
    rows = bench.run([128], [1024], [True], variants=[{"block_n": 64}], rounds=3)
    flops = 4 * 32 * 16 * 1024 * 1024 * 128 / 2
    row = rows[0]
    assert row["kvpipe"] == round(flops / 1e9, 1)
    assert row["variants"] == {"block_n=64": round(flops / 2e9, 1)}
    assert row["cudnn"] == row["flash"] == round(flops / 4e9, 1)
    assert row["fa4"] == round(flops / 0.5e9, 1)
    assert row["vs_cudnn"] == round(row["kvpipe"] / row["cudnn"], 3) and row["vs_fa4"] == 0.5
    # Warm-up once, then three rounds: each kvpipe column 4 launches.
    assert launched.count(dict(causal=True)) == 4
    assert launched.count(dict(causal=True, block_n=64)) == 4
