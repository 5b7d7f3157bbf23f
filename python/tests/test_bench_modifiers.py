"""bench --mods without a GPU: the FLOPs of the visible pairs (forward and
backward), the table's columns and ratios, a failing peer's entries, FA4's
arguments and ALiBi callbacks, and the kernels the bench launches against
the list `compile --for-check --mods` compiles (kvpipe.attention and
attention_backward run on tensor fakes up to the compile request)."""

import ast
import contextlib
import importlib
import inspect
import sys
import types
from pathlib import Path

import pytest

import kvpipe
from fakes import FakeTensor
from plan_configs import without_spill_fallbacks
from kvpipe import backward, bench, bench_modifiers, kernels, modifiers
from kvpipe.check_modifiers import _ShapeOnly

attention = importlib.import_module("kvpipe.attention")  # kvpipe.attention is the function

SLOPES = _ShapeOnly((16,), "float32")


@pytest.mark.parametrize("n", [1, 2, 7, 64, 130])
@pytest.mark.parametrize("causal,window", [(False, None), (True, None), (True, 0), (True, 3),
                                           (True, 64), (True, 1000)])
def test_visible_pairs_are_the_masks_pairs(n, causal, window):
    visible = sum(1 for i in range(n) for j in range(n)
                  if (not causal or j <= i) and (window is None or i - j <= window))
    assert bench_modifiers._visible_pairs(n, causal, window) == visible


def test_backward_flops_are_two_and_a_half_forwards_as_bench_backward_counts():
    forward, backward = bench_modifiers.row_flops(2, 16, 128, 8192, False, None)
    assert forward == 4 * 2 * 16 * 128 * 8192 * 8192
    assert bench.BACKWARD_FLOPS == 2.5 and backward == 2.5 * forward
    # The window row counts its window's pairs only: about N * (W + 1).
    forward, backward = bench_modifiers.row_flops(2, 16, 128, 8192, True, 1024)
    assert forward == 4 * 2 * 16 * 128 * (8192 * 1025 - 1024 * 1025 // 2)
    assert backward == 2.5 * forward


def _row(**figures):
    row = {"mod": "alibi", "D": 128, "N": 8192, "B": 2, "H": 16}
    row.update(figures)
    return bench_modifiers.add_ratios(row)


def test_ratios_are_kvpipe_over_each_peer_forward_and_backward():
    row = _row(kvpipe=400.0, kvpipe_plain=500.0, flex=200.0, fa4=None, bwd_kvpipe=300.0,
               bwd_kvpipe_plain=250.0, bwd_flex=150.0, bwd_fa4=600.0)
    assert row["vs_plain"] == 0.8 and row["vs_flex"] == 2.0 and "vs_fa4" not in row
    assert row["bwd_vs_plain"] == 1.2 and row["bwd_vs_flex"] == 2.0
    assert row["bwd_vs_fa4"] == 0.5


def test_markdown_keeps_the_forward_columns_and_adds_fa4_and_the_backward():
    rows = [_row(kvpipe=400.0, kvpipe_plain=500.0, flex=200.0, fa4=450.0, bwd_kvpipe=300.0,
                 bwd_kvpipe_plain=250.0, bwd_flex=150.0, bwd_fa4=600.0),
            # FA4 not on the machine, FlexAttention failed: None.
            _row(kvpipe=400.0, kvpipe_plain=500.0, flex=None, fa4=None, bwd_kvpipe=300.0,
                 bwd_kvpipe_plain=250.0, bwd_flex=None, bwd_fa4=None)]
    lines = bench_modifiers.to_markdown(rows).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| modifier"))
    head, rule, first, second = lines[header:header + 4]
    assert head.startswith("| modifier | D | N | B x H | kvpipe TFLOP/s | kvpipe plain | "
                           "vs plain | FlexAttention | vs Flex | FA4 | vs FA4 | ")
    assert head.endswith("| bwd kvpipe | bwd plain | bwd vs plain | bwd Flex | bwd vs Flex | "
                         "bwd FA4 | bwd vs FA4 |")
    assert head.count("|") == rule.count("|") == first.count("|") == second.count("|") == 19
    assert first == ("| alibi | 128 | 8192 | 2 x 16 | 400.0 | 500.0 | 0.8 | 200.0 | 2.0 | "
                     "450.0 | 0.889 | 300.0 | 250.0 | 1.2 | 150.0 | 2.0 | 600.0 | 0.5 |")
    assert second == ("| alibi | 128 | 8192 | 2 x 16 | 400.0 | 500.0 | 0.8 | None | None | "
                      "None | None | 300.0 | 250.0 | 1.2 | None | None | None | None |")


def test_a_failing_peer_is_none_and_a_wrong_output_gets_no_figure(monkeypatch, capsys):
    monkeypatch.setattr(bench_modifiers, "_median_ms", lambda fn: fn() and 2.0)
    monkeypatch.setattr(bench_modifiers, "_autograd_backward_ms",
                        lambda forward, inputs, do: forward(*inputs) and 4.0)
    inputs = ("q", "k", "v", "do")

    def good():
        return lambda *qkv: (qkv, "lse")

    row = _row()
    bench_modifiers._peer_columns(row, "fa4", "FA4", good, inputs, 8e9, 2e10)
    assert row["fa4"] == 4.0 and row["bwd_fa4"] == 5.0
    # The check sees the first output (of a tuple) and refuses it: no
    # figures, forward or backward.
    seen = []

    def refuse(out):
        seen.append(out)
        raise RuntimeError("its output is not kvpipe's")

    row = _row()
    bench_modifiers._peer_columns(row, "fa4", "FA4", good, inputs, 8e9, 2e10, refuse)
    assert seen == [("q", "k", "v")] and row["fa4"] is None and row["bwd_fa4"] is None
    assert "FA4 failed for alibi at N8192: its output is not kvpipe's" in capsys.readouterr().out

    def no_backward(forward, inputs, do):
        raise RuntimeError("no backward")

    monkeypatch.setattr(bench_modifiers, "_autograd_backward_ms", no_backward)
    row = _row()
    bench_modifiers._peer_columns(row, "flex", "FlexAttention", good, inputs, 8e9, 2e10)
    assert row["flex"] == 4.0 and row["bwd_flex"] is None
    assert "FlexAttention backward failed" in capsys.readouterr().out


def test_fa4_arguments_are_the_rows_masks():
    rows = {spec.name: spec for spec in bench_modifiers.bench_rows(SLOPES)}
    window = rows["softcap+window"]
    assert bench_modifiers.fa4_arguments(window, SLOPES) == dict(
        causal=True, softcap=bench_modifiers.SOFTCAP,
        window_size=window.plain["window_size"])
    assert window.plain["causal"] is True
    alibi = ("score_mod", "score_mod_bwd")
    for name, causal in (("alibi", False), ("alibi+causal", True)):
        assert bench_modifiers.fa4_arguments(rows[name], SLOPES, alibi) == dict(
            causal=causal, score_mod="score_mod", score_mod_bwd="score_mod_bwd",
            aux_tensors=[SLOPES])
        assert rows[name].modified.get("causal", False) is causal


def test_fa4_alibi_callbacks_take_the_arguments_fa4_passes():
    # FA4 4.0.0b36 calls score_mod(score, b, h, q_idx=, kv_idx=, seqlen_info=,
    # aux_tensors=) and score_mod_bwd(grad, score, b, h, ...same keywords)
    # (flash_attn/cute/softmax.py). The module needs the CUTLASS DSL, so it
    # is read, not imported.
    path = Path(bench_modifiers.__file__).with_name("_fa4_alibi.py")
    functions = {node.name: node for node in ast.parse(path.read_text()).body
                 if isinstance(node, ast.FunctionDef)}
    keywords = ["q_idx", "kv_idx", "seqlen_info", "aux_tensors"]
    for name, leading in (("alibi", 3), ("alibi_bwd", 4)):
        node = functions[name]
        args = [a.arg for a in node.args.args]
        assert len(args) == leading + 4 and args[leading:] == keywords, args
        assert [ast.unparse(d) for d in node.decorator_list] == ["cute.jit"]
    assert "cutlass" not in sys.modules  # bench_modifiers does not import it


class _Launched(Exception):
    """A compile request (recorded): nothing runs past it."""


class _Tensor(FakeTensor):
    """What attention_backward asks of its tensors besides FakeTensor's."""

    def stride(self, dim=None):
        return super().stride() if dim is None else super().stride()[dim]

    def contiguous(self):
        return self


def _requested_kernels(monkeypatch, n, heads=16, head_dim=128, batch=2):
    """The kernels (AttentionConfig) that bench --mods's kvpipe calls at
    length ``n`` ask compile_attention for: what run() calls, on fakes."""
    fake_torch = types.ModuleType("torch")  # what the calls ask of torch before compiling
    fake_torch.Tensor = type("Tensor", (), {})
    fake_torch.is_grad_enabled = lambda: True
    fake_torch.are_deterministic_algorithms_enabled = lambda: False
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(modifiers, "_torch_mode", contextlib.nullcontext)
    monkeypatch.setattr(attention, "_aux_arguments", lambda traced, q: {})
    monkeypatch.setattr(backward, "_aux_arguments", lambda traced, q: {})
    monkeypatch.setattr(attention, "_device_index", lambda q: 0)
    requested = set()

    def compile_attention(head_dim, dtype, causal, use_cache=True, **kwargs):
        requested.add(kernels.AttentionConfig.make(head_dim, dtype, causal, **kwargs))
        raise _Launched

    monkeypatch.setattr(kernels, "compile_attention", compile_attention)
    q = _Tensor((batch, heads, n, head_dim))
    q.device.index = 0
    lse = _Tensor((batch, heads, n), dtype="float32")
    for spec in bench_modifiers.bench_rows(SLOPES):
        for kwargs in (spec.modified, spec.plain):
            with pytest.raises(_Launched):  # the forward's timing
                kvpipe.attention(q, q, q, **kwargs)
            with pytest.raises(_Launched):  # bench._kvpipe_backward_fn's forward
                kvpipe.attention(q, q, q, return_lse=True, **kwargs)
            with pytest.raises(_Launched):  # and its backward
                backward.attention_backward(q, q, q, q, lse, q, deterministic=False, **kwargs)
    return requested


def test_kvpipe_backward_timing_makes_the_calls_the_kernel_list_follows():
    # _requested_kernels replays bench._kvpipe_backward_fn's calls (the
    # backward bench --mods times): keep them in step.
    def source(function):
        return " ".join(inspect.getsource(function).replace("(", "( ").split())

    timing = source(bench._kvpipe_backward_fn)
    assert "kvpipe.attention( q, k, v, return_lse=True, **masks)" in timing
    assert ("attention_backward( q, k, v, o, lse, do, deterministic=deterministic, "
            "**( tuning or {}), **masks)" in timing)
    run = source(bench_modifiers.run)
    assert 'for suffix, kwargs in ( ( "", spec.modified), ( "_plain", spec.plain))' in run
    assert "kvpipe.attention( q, k, v, **kwargs, **tuning)" in run
    assert "_kvpipe_backward_fn( q, k, v, do, deterministic=False, **kwargs)" in run


@pytest.mark.parametrize("n", [512, 1024, 2048, 4096, 8192, 16384])
def test_compile_for_check_mods_holds_every_kernel_bench_mods_launches(monkeypatch, n):
    requested = _requested_kernels(monkeypatch, n)
    # Per row, with the modifier and plain: a forward kernel and a backward
    # family (the backward's forward with the log-sum-exp is the same
    # kernel); the plain ALiBi rows take the prefill plan's kernel when short.
    assert sum(c.backward for c in requested) == 6
    assert sum(bool(c.modifiers) for c in requested if c.backward) == 3
    assert sum(not c.backward for c in requested) == 6
    plain = [c for c in requested if not c.backward and not c.modifiers]
    assert any(dict(c.tuning).get("persistent") for c in plain) == (n <= 4096)
    # The causal modifier row: a persistent grid over the host's tile table
    # at any length (plans.MODIFIER_CAUSAL_PLAN); the others are not.
    modified = [c for c in requested if not c.backward and c.modifiers]
    assert {c.causal for c in modified if dict(c.tuning).get("tile_table")} == {True}
    assert not any(dict(c.tuning).get("persistent") for c in modified if not c.causal)
    # Those of the lengths, but for the spill fallbacks (loaded only where a
    # planned kernel spills: the stand-ins' kernels do not).
    listed = bench_modifiers.bench_kernel_configs(seq_lens=(n,))
    exact = {kernels.AttentionConfig.make(**c) for c in without_spill_fallbacks(listed)}
    assert requested == exact
    # compile --for-check --mods compiles those of any length.
    default = {kernels.AttentionConfig.make(**c) for c in bench_modifiers.bench_kernel_configs()}
    assert requested <= default


def test_compile_for_check_mods_compiles_the_bench_list(monkeypatch):
    from kvpipe.__main__ import main

    compiled = []

    def compile_attention(*args, **kwargs):
        compiled.append(kernels.AttentionConfig.make(*args, **kwargs))
        return types.SimpleNamespace(name="k", describe=lambda: "")

    monkeypatch.setattr(kernels, "compile_attention", compile_attention)
    assert main(["compile", "--for-check", "--mods"]) == 0
    for config in bench_modifiers.bench_kernel_configs():
        assert kernels.AttentionConfig.make(**config) in compiled
    assert any(c.backward and c.modifiers for c in compiled)


def test_bench_and_compile_mods_take_the_head_dims_asked_for(monkeypatch):
    # bench --mods is D 128 unless --head-dim says otherwise, and compile
    # --for-check --mods --head-dim compiles those rows' kernels (variants
    # included): a D 64 bench must not look for D 128 kernels.
    from kvpipe.__main__ import main

    compiled, benched = [], []

    def compile_attention(*args, **kwargs):
        compiled.append(kernels.AttentionConfig.make(*args, **kwargs))
        return types.SimpleNamespace(name="k", describe=lambda: "")

    monkeypatch.setattr(kernels, "compile_attention", compile_attention)
    assert main(["compile", "--for-check", "--mods", "--head-dim", "64",
                 "--tune", "exp2_emulation=1"]) == 0
    for config in bench_modifiers.bench_kernel_configs(
            head_dim=64, variants=[{"exp2_emulation": 1}]):
        assert kernels.AttentionConfig.make(**config) in compiled

    def run(seq_lens, head_dim=128, variants=None, rounds=None, **_):
        benched.append(head_dim)
        return []

    monkeypatch.setattr(bench_modifiers, "run", run)
    monkeypatch.setattr(bench_modifiers, "to_markdown", lambda rows: "")
    monkeypatch.setattr(importlib.import_module("kvpipe.__main__"), "_require_gpu",
                        lambda command: None)
    assert main(["bench", "--mods", "--seq-len", "1024"]) == 0
    assert main(["bench", "--mods", "--head-dim", "64", "128", "--seq-len", "1024"]) == 0
    assert benched == [128, 64, 128]


class _Array:
    """A stand-in for the torch tensors run() makes and hands on."""

    def __init__(self, *shape):
        self.shape = shape

    def transpose(self, a, b):
        shape = list(self.shape)
        shape[a], shape[b] = shape[b], shape[a]
        return _Array(*shape)

    def contiguous(self):
        return self

    def __mul__(self, other):
        return self


def _fake_torch(monkeypatch):
    """A torch module whose randn and rand make _Array stand-ins."""
    fake_torch = types.ModuleType("torch")
    fake_torch.bfloat16 = "bf16"
    fake_torch.randn = lambda *shape, dtype=None, device=None: _Array(*shape)
    fake_torch.rand = lambda *shape, device=None: _Array(*shape)
    monkeypatch.setitem(sys.modules, "torch", fake_torch)


@pytest.mark.parametrize("cutlass", [True, False])
def test_run_fills_every_column_of_each_row(monkeypatch, capsys, cutlass):
    # run() itself on stand-ins: kvpipe, FlexAttention and FA4 calls are
    # recorded, every timing is 1 ms forward and 2 ms backward.
    _fake_torch(monkeypatch)
    calls = []
    monkeypatch.setattr(kvpipe, "attention", lambda q, k, v, **kw: calls.append(
        ("kvpipe", q.shape, kw)) or q)
    monkeypatch.setattr(bench_modifiers, "_kvpipe_backward_fn",
                        lambda q, k, v, do, **kw: calls.append(
                            ("kvpipe backward", do.shape, kw)) or (lambda: "backward"))
    monkeypatch.setattr(bench_modifiers, "_median_ms", lambda fn: fn() and 1.0)
    monkeypatch.setattr(bench, "_round_ms", lambda fn: 2.0 if fn() == "backward" else 1.0)
    monkeypatch.setattr(bench_modifiers, "_autograd_backward_ms",
                        lambda forward, inputs, do: forward(*inputs) and 2.0)
    monkeypatch.setattr(bench_modifiers, "_disagreement", lambda out, reference: 0.001)

    def flex_attention(q, k, v, score_mod, block_mask):
        calls.append(("flex", q.shape, block_mask))
        return q

    def create_block_mask(mask_mod, b, h, n_q, n_kv, device):
        return ("block mask", mask_mod, n_q, n_kv)

    monkeypatch.setattr(bench_modifiers, "_flex", lambda: (flex_attention, create_block_mask))

    def fa4(q, k, v, **kw):
        calls.append(("fa4", q.shape, kw))
        return q, "lse"

    monkeypatch.setattr(bench_modifiers, "_fa4", lambda: fa4)
    if cutlass:
        monkeypatch.setattr(bench_modifiers, "_fa4_alibi_callbacks", lambda: ("alibi", "alibi_bwd"))
    rows = bench_modifiers.run([4096], heads=4)
    assert [r["mod"] for r in rows] == ["softcap+window", "alibi", "alibi+causal"]
    for row in rows:
        assert (row["D"], row["N"], row["B"], row["H"]) == (128, 4096, 4, 4)
        forward, backward = bench_modifiers.row_flops(4, 4, 128, 4096, row["mod"] != "alibi",
                                                      1024 if "window" in row["mod"] else None)
        figure = round(forward / 1e9, 1)
        assert row["kvpipe"] == row["kvpipe_plain"] == row["flex"] == figure
        assert row["bwd_kvpipe"] == row["bwd_flex"] == round(backward / 2e9, 1)
        assert row["vs_plain"] == row["vs_flex"] == row["bwd_vs_plain"] == 1.0
        has_fa4 = cutlass or row["mod"] == "softcap+window"
        assert (row["fa4"] == figure and row["bwd_vs_fa4"] == 1.0) if has_fa4 else (
            row["fa4"] is None and row["bwd_fa4"] is None and "vs_fa4" not in row)
    if not cutlass:  # FA4's ALiBi needs the CUTLASS DSL: a printed failure
        assert "FA4 failed for alibi at N4096" in capsys.readouterr().out
    # kvpipe: (B, H, S, D) with the modifier and plain, forward and backward.
    kvpipe_calls = [c for c in calls if c[0].startswith("kvpipe")]
    assert {c[1] for c in kvpipe_calls} == {(4, 4, 4096, 128)}
    assert sum(c[0] == "kvpipe backward" for c in kvpipe_calls) == 6
    assert all(c[2]["deterministic"] is False for c in kvpipe_calls if "backward" in c[0])
    # FlexAttention: a block mask for the masked rows only.
    masks = [c[2] for c in calls if c[0] == "flex"]
    assert masks[0][0] == "block mask" and masks[0][2:] == (4096, 4096)
    assert any(m is None for m in masks)
    # FA4: (B, S, H, D), its built-in softcap and window, the CuTe ALiBi.
    fa4_calls = [c for c in calls if c[0] == "fa4"]
    assert {c[1] for c in fa4_calls} == {(4, 4096, 4, 128)}
    assert fa4_calls[0][2] == dict(causal=True, softcap=50.0, window_size=(1024, 0))
    if cutlass:
        alibi = [c[2] for c in fa4_calls if "score_mod" in c[2]]
        assert {a["causal"] for a in alibi} == {False, True}
        assert all(a["score_mod_bwd"] == "alibi_bwd" and len(a["aux_tensors"]) == 1
                   for a in alibi)
    markdown = bench_modifiers.to_markdown(rows)
    assert markdown.count("| softcap+window | 128 | 4096 | 4 x 4 |") == 1


def test_variants_time_the_forward_with_and_without_the_modifier(monkeypatch):
    # bench --mods --variant: each variant's tuning reaches kvpipe.attention
    # for the modified and the plain forward, on the row's inputs; the
    # markdown gets a column per variant with the ratio to the default plain.
    _fake_torch(monkeypatch)
    calls = []
    timings = {(): 1.0, (("exp2_emulation", 4),): 0.8}
    monkeypatch.setattr(kvpipe, "attention", lambda q, k, v, **kw: calls.append(kw) or q)
    monkeypatch.setattr(bench_modifiers, "_kvpipe_backward_fn",
                        lambda *a, **kw: lambda: "backward")
    monkeypatch.setattr(bench, "_round_ms", lambda fn: fn() and timings[
        tuple((k, v) for k, v in calls[-1].items() if k == "exp2_emulation")])
    monkeypatch.setattr(bench_modifiers, "_flex", lambda: None)
    monkeypatch.setattr(bench_modifiers, "_fa4", lambda: None)
    rows = bench_modifiers.run([4096], heads=4, variants=[{"exp2_emulation": 4}])
    for row in rows:
        variant = row["variants"]["exp2_emulation=4"]
        assert variant["fwd"] == variant["fwd_plain"] == round(row["kvpipe"] / 0.8, 1)
    tuned = [kw for kw in calls if "exp2_emulation" in kw]
    # Per row two variant columns, each warmed once and timed once a round.
    assert len(tuned) == 2 * (1 + bench.DEFAULT_ROUNDS) * len(rows)
    assert any("score_mod" in kw for kw in tuned) and any("score_mod" not in kw for kw in tuned)
    lines = bench_modifiers.to_markdown(rows).splitlines()
    header = next(line for line in lines if line.startswith("| modifier"))
    assert header.endswith("| exp2_emulation=4: fwd, plain (vs default plain) |")
    first = next(line for line in lines if line.startswith("| softcap+window"))
    figure = rows[0]["variants"]["exp2_emulation=4"]["fwd"]
    ratio = figure / rows[0]["kvpipe_plain"]
    assert 1.24 < ratio < 1.26 and first.endswith(f"| {figure}, {figure} ({ratio:.3f}) |")
    assert first.count("|") == header.count("|")


def test_bench_kernel_configs_hold_the_variants_forward_kernels():
    configs = bench_modifiers.bench_kernel_configs(seq_lens=(8192,),
                                                   variants=[{"exp2_emulation": 4}])
    forward = [c for c in without_spill_fallbacks(configs) if not c.get("backward")]
    tuned = [c for c in forward if c.get("exp2_emulation") == 4]
    # Each row's modified and plain forward, once more with the variant.
    assert len(tuned) == len(forward) - len(tuned) > 0
    assert not any(c.get("exp2_emulation") for c in configs if c.get("backward"))
