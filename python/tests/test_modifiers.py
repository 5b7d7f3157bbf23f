"""kvpipe.modifiers: the tracer's IR, the library, the argument errors, and
the kernels with modifiers the compiler makes (CPU only: tensor-like fakes
stand in for torch tensors)."""

import pytest

import kvpipe
from kvpipe import modifiers as m
from fakes import FakeTensor
from plan_configs import without_spill_fallbacks


class Tensor(FakeTensor):
    """A fake tensor indexed as torch's __torch_function__ lets the tracer."""

    def __getitem__(self, index):
        return m.load(self, index)


def region_lines(ir):
    return [line.strip() for line in ir.splitlines()]


def test_score_mod_arguments_and_yield():
    traced = m.trace(lambda score, b, h, q_idx, kv_idx: score * 2.0)
    assert region_lines(traced.ir) == [
        "score_mod {",
        "^bb0(%score: f32, %b: index, %h: index, %q_idx: index, %kv_idx: index):",
        "%0 = arith.constant 2.000000000e+00 : f32",
        "%1 = arith.mulf %score, %0 : f32",
        "kvpipe.yield %1 : f32",
        "}"]
    assert traced.aux_types == () and traced.has_score_mod and not traced.has_mask_mod


def test_mask_mod_comparisons_and_boolean_ops():
    traced = m.trace(mask_mod=lambda b, h, q, kv: ~((kv > q) | (kv == 3)) & (q - kv < 100))
    lines = region_lines(traced.ir)
    assert lines[1] == "^bb0(%b: index, %h: index, %q_idx: index, %kv_idx: index):"
    assert "%0 = arith.cmpi sgt, %kv_idx, %q_idx : index" in lines
    assert "%2 = arith.cmpi eq, %kv_idx, %1 : index" in lines
    assert "%3 = arith.ori %0, %2 : i1" in lines
    assert "%5 = arith.xori %3, %4 : i1" in lines and "%4 = arith.constant true : i1" in lines
    assert lines[-2].startswith("kvpipe.yield %") and lines[-2].endswith(": i1")


def test_indices_mixed_with_scores_become_f32():
    traced = m.trace(lambda s, b, h, q, kv: s - abs(q - kv) / 4)
    lines = region_lines(traced.ir)
    assert "%2 = arith.subi %1, %0 : index" in lines and "%1 = arith.constant 0 : index" in lines
    assert "%3 = arith.maxsi %0, %2 : index" in lines
    assert "%4 = arith.index_cast %3 : index to i32" in lines
    assert "%5 = arith.sitofp %4 : i32 to f32" in lines
    assert any("arith.divf %5" in line for line in lines)


def test_where_tanh_exp_and_methods():
    traced = m.trace(lambda s, b, h, q, kv: m.where(q >= kv, s.tanh(), s.exp() * 0.5))
    lines = "\n".join(region_lines(traced.ir))
    assert "math.tanh %score : f32" in lines and "math.exp %score : f32" in lines
    assert "arith.select %0," in lines


def test_aux_tensor_reads_are_flat_and_numbered_once():
    slopes = Tensor((8,), dtype="float32")
    table = Tensor((8, 33), dtype="float32")
    traced = m.trace(lambda s, b, h, q, kv: s + slopes[h] + table[h, kv - q + 16] + slopes[h],
                     lambda b, h, q, kv: table[h][q] > 0.0)
    assert traced.aux_types == ("f32", "f32")
    assert traced.aux_tensors[0] is slopes and traced.aux_tensors[1] is table
    lines = region_lines(traced.ir)
    assert lines.count("%0 = kvpipe.aux_load 0[%h] : f32") == 1
    # table[h, x] is element h * 33 + x.
    assert "%5 = arith.constant 33 : index" in lines
    assert "%6 = arith.muli %h, %5 : index" in lines
    assert "%7 = arith.addi %4, %6 : index" in lines
    assert "%8 = kvpipe.aux_load 1[%7] : f32" in lines


def test_integer_tensors_are_read_as_i32_and_used_as_indices():
    docs = Tensor((100,), dtype="int32")
    traced = m.trace(mask_mod=m.document(docs))
    assert traced.aux_types == ("i32",)
    lines = region_lines(traced.ir)
    assert "%0 = kvpipe.aux_load 0[%q_idx] : i32" in lines
    assert "%1 = arith.index_cast %0 : i32 to index" in lines
    assert "%4 = arith.cmpi eq, %1, %3 : index" in lines


def test_library_soft_cap_multiplies_by_the_reciprocal():
    lines = region_lines(m.trace(m.soft_cap(30.0)).ir)
    assert lines[2:7] == ["%0 = arith.constant 3.333333333e-02 : f32",
                          "%1 = arith.mulf %score, %0 : f32",
                          "%2 = math.tanh %1 fastmath<afn> : f32",
                          "%3 = arith.constant 3.000000000e+01 : f32",
                          "%4 = arith.mulf %2, %3 : f32"]


def test_library_soft_cap_exact_tanh():
    assert "math.tanh %1 : f32" in m.trace(m.soft_cap(30.0, approximate=False)).ir


def test_library_alibi_shift_constant_or_tensor():
    slopes = Tensor((4,), dtype="float32")
    assert "arith.addi" not in m.trace(m.alibi(slopes)).ir
    assert "arith.constant 5 : index" in m.trace(m.alibi(slopes, 5)).ir
    shift = Tensor((1,), dtype="int32")
    traced = m.trace(m.alibi(Tensor((2, 4), dtype="float32"), shift,
                             kv_lengths=Tensor((2,), dtype="int32")))
    assert traced.aux_types == ("f32", "i32", "i32")
    lines = region_lines(traced.ir)
    # slopes[b, h]: b * 4 + h.
    assert "%1 = arith.muli %b, %0 : index" in lines
    assert any("kvpipe.aux_load 1[" in line for line in lines)
    assert any("kvpipe.aux_load 2[%b] : i32" in line for line in lines)


def test_trace_records_which_tensors_the_score_mod_reads():
    # The score_mod's reads have a gradient; the mask_mod's do not (the mask
    # is piecewise constant), even where both read one tensor.
    bias, docs, shared = (Tensor((8,), dtype="float32"), Tensor((64,), dtype="int32"),
                          Tensor((8,), dtype="float32"))
    traced = m.trace(lambda s, b, h, q, kv: s + bias[h] * shared[h],
                     lambda b, h, q, kv: (docs[q] == docs[kv]) & (shared[h] > 0))
    assert traced.score_mod_reads == {0, 1}
    assert traced.aux_types == ("f32", "f32", "i32")
    only_mask = m.trace(mask_mod=lambda b, h, q, kv: docs[q] == docs[kv])
    assert only_mask.score_mod_reads == frozenset()


def test_library_masks():
    window = region_lines(m.trace(mask_mod=m.sliding_window(256, 0)).ir)
    assert "%0 = arith.subi %kv_idx, %q_idx : index" in window
    assert "%1 = arith.constant -256 : index" in window
    assert "%2 = arith.cmpi sge, %0, %1 : index" in window
    causal = region_lines(m.trace(mask_mod=m.causal()).ir)
    assert causal[2:4] == ["%0 = arith.cmpi sle, %kv_idx, %q_idx : index",
                           "kvpipe.yield %0 : i1"]
    prefix = m.trace(mask_mod=m.prefix_lm(10)).ir
    assert "arith.ori" in prefix and "arith.constant 10 : index" in prefix
    both = m.trace(mask_mod=m.and_masks(m.causal(), m.sliding_window(8)))
    assert "arith.andi" in both.ir


def test_relative_bias_clamps_the_distance():
    traced = m.trace(m.relative_bias(Tensor((4, 9), dtype="float32"), 4))
    lines = region_lines(traced.ir)
    assert "%2 = arith.maxsi %0, %1 : index" in lines
    assert "%4 = arith.minsi %2, %3 : index" in lines


@pytest.mark.parametrize("call,error,match", [
    (lambda: m.trace(score_mod=3), TypeError, "score_mod must be a callable"),
    (lambda: m.trace(mask_mod="causal"), TypeError, "mask_mod must be a callable"),
    (lambda: m.trace(mask_mod=lambda b, h, q, kv: q), m.TraceError,
     "mask_mod must return a boolean"),
    (lambda: m.trace(lambda s, b, h, q, kv: "x"), m.TraceError, "score_mod must return"),
    (lambda: m.trace(mask_mod=lambda b, h, q, kv: q > kv and kv > 0), m.TraceError,
     "use &, |, ~ and torch.where"),
    (lambda: m.trace(lambda s, b, h, q, kv: s if q > kv else 0.0), m.TraceError,
     "no truth value"),
    (lambda: m.trace(lambda s, b, h, q, kv: Tensor((4,), dtype="float32")[s]), m.TraceError,
     "indexed by a f32 value"),
    (lambda: m.trace(lambda s, b, h, q, kv: Tensor((4,), dtype="float32")[h, q]),
     m.TraceError, "indexed with 2 indices"),
    (lambda: m.trace(lambda s, b, h, q, kv: s + Tensor((4,), dtype="complex64")[h]),
     m.TraceError, "only float and integer"),
    (lambda: m.trace(mask_mod=lambda b, h, q, kv: ~q), m.TraceError, "~ applies to booleans"),
    (lambda: m.soft_cap(0.0), ValueError, "cap must be a positive"),
    (lambda: m.sliding_window(-1), ValueError, "left must be a non-negative int"),
    (lambda: m.prefix_lm(1.5), ValueError, "prefix must be a non-negative int"),
    (lambda: m.relative_bias(Tensor((4, 8), dtype="float32"), 4), ValueError,
     r"table must be \(heads, 9\)"),
    (lambda: m.alibi(Tensor((4,), dtype="float32"), Tensor((2, 2), dtype="int32")),
     ValueError, "shift must be an int or a"),
])
def test_argument_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_none_traces_to_none():
    assert m.trace() is None


def test_modifiers_reach_the_declaration_and_the_cache_key():
    traced = m.trace(m.soft_cap(30.0), m.sliding_window(128))
    config = kvpipe.kernels.AttentionConfig.make(128, "bf16", False, modifiers=traced.ir,
                                                 aux_types=traced.aux_types)
    text = config.declaration()
    assert "score_mod {" in text and "mask_mod {" in text
    assert "_mods" in config.kernel_name
    other = m.trace(m.soft_cap(20.0), m.sliding_window(128))
    assert kvpipe.kernels.AttentionConfig.make(
        128, "bf16", False, modifiers=other.ir).kernel_name != config.kernel_name
    plain = kvpipe.kernels.AttentionConfig.make(128, "bf16", False)
    assert "aux_types" not in plain.declaration() and "_mods" not in plain.kernel_name


@pytest.mark.parametrize("kwargs,error,match", [
    ({"aux_types": ("f32",)}, ValueError, "aux_types need modifiers"),
    ({"modifiers": "score_mod {}", "aux_types": ("f16",)}, ValueError, "'f32' or 'i32'"),
    ({"modifiers": "score_mod {}", "backward": True, "kv_lengths": True}, ValueError,
     "without kv_lengths"),
    ({"backward": True, "deterministic": True, "sliding_window": True}, ValueError,
     "deterministic=True with backward=True supports the top-left causal mask or none"),
])
def test_configuration_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        kvpipe.kernels.AttentionConfig.make(128, "bf16", False, **kwargs)


def test_kernels_with_modifiers_compile_and_report_them(compiler, tmp_path, monkeypatch):
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    slopes = Tensor((16,), dtype="float32")
    traced = m.trace(m.compose_scores(m.soft_cap(30.0), m.alibi(slopes)),
                     m.sliding_window(256))
    k = kvpipe.compile_attention(128, "bf16", False, modifiers=traced.ir,
                                 aux_types=traced.aux_types)
    assert k.abi["params"][-1] == "aux0" and k.abi["param_kinds"]["aux0"] == "pointer"
    assert k.abi["score_mod"] is True and k.abi["mask_mod"] is True
    assert k.abi["aux_types"] == ["f32"]
    assert k.abi["mask_mod_shape"] == "proven" and k.abi["mask_mod_unproven"] == []
    assert "tanh" in k.ptx or "ex2" in k.ptx
    docs = m.trace(None, m.document(Tensor((64,), dtype="int32")))
    k = kvpipe.compile_attention(64, "bf16", True, modifiers=docs.ir, aux_types=docs.aux_types)
    assert k.abi["mask_mod_shape"] == "unknown"
    assert any("arith.cmpi" in op for op in k.abi["mask_mod_unproven"])


def test_kernel_arguments_pass_the_aux_pointers():
    from kvpipe.launch import KernelABIError, kernel_arguments

    abi = {"abi_version": 2, "kernel": "k", "params": ["seq_q", "aux0", "aux1"],
           "param_kinds": {"seq_q": "i32", "aux0": "pointer", "aux1": "pointer"}}
    args = kernel_arguments(abi, {"seq_q": 7, "aux0": 0x1000, "aux1": 0x2000})
    assert [type(a).__name__ for a in args] == ["I32Arg", "PtrArg", "PtrArg"]
    with pytest.raises(KernelABIError, match="aux1"):
        kernel_arguments(abi, {"seq_q": 7, "aux0": 0x1000})


def test_learnable_modifier_tensors_go_through_autograd(monkeypatch):
    # A score_mod tensor that requires grad (a learnable ALiBi slope) makes
    # kvpipe.attention record the autograd function, with the tensor as one
    # of its inputs (its gradient comes from the backward's aux_grads), even
    # when q, k and v do not require grad.
    import sys
    import types

    calls = []
    fake = types.ModuleType("kvpipe.autograd")
    fake.attention_with_grad = lambda *args: calls.append(args) or ("o", "lse")
    monkeypatch.setitem(sys.modules, "kvpipe.autograd", fake)
    q = FakeTensor((1, 2, 16, 64))
    slopes = Tensor((2,), dtype="float32")
    slopes.requires_grad = True
    assert kvpipe.attention(q, q, q, score_mod=m.alibi(slopes)) == "o"
    traced = calls[0][-1]
    assert traced.aux_tensors == [slopes]


def test_backward_families_with_aux_grads_name_their_gradients():
    # aux_grads: only the f32 tensors of a backward family; the declaration
    # carries them, and the kernels' names differ from the family without.
    from kvpipe import kernels

    region = m.trace(m.relative_bias(Tensor((2, 9), dtype="float32"), 4))
    base = dict(head_dim=64, dtype="bf16", causal=False, backward=True,
                modifiers=region.ir, aux_types=region.aux_types)
    with_grads = kernels.AttentionConfig.make(**base, aux_grads=(0,))
    assert "aux_grads = array<i64: 0>" in with_grads.declaration()
    assert with_grads.kernel_name != kernels.AttentionConfig.make(**base).kernel_name
    for bad in ({"aux_grads": (1,)}, {"aux_grads": (0,), "backward": False}):
        with pytest.raises(ValueError, match="aux_grads must index f32 aux_types"):
            kernels.AttentionConfig.make(**dict(base, **bad))


def test_attention_backward_refuses_modifier_tensors_that_require_grad():
    from kvpipe.backward import attention_backward

    q = FakeTensor((1, 2, 16, 64))
    table = Tensor((2, 9), dtype="float32")
    table.requires_grad = True
    lse = FakeTensor((1, 2, 16), dtype="float32")
    with pytest.raises(ValueError, match="requires grad"):
        attention_backward(q, q, q, q, lse, q, score_mod=m.relative_bias(table, 4))


@pytest.mark.parametrize("causal,alignment,window", [
    (True, "bottom_right", False), (False, "top_left", True), (True, "bottom_right", True)])
def test_backward_kernels_with_masks_compile(compiler, tmp_path, monkeypatch, causal,
                                             alignment, window):
    # Bottom-right causal masks and windows in the backward: the window
    # bounds are parameters of the main kernel only.
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    k = kvpipe.compile_attention(64, "bf16", causal, backward=True, mask_alignment=alignment,
                                 sliding_window=window)
    main = k.kernel_abi("main")
    assert main["mask_alignment"] == alignment and main["sliding_window"] is window
    assert ("window_left" in main["params"]) is window
    assert "window_left" not in k.kernel_abi("preprocess")["params"]


def test_backward_kernels_with_modifiers_compile_and_assemble(compiler, tmp_path, monkeypatch):
    # Every library modifier through the backward: the regions traced as
    # for the forward, the score_mod's derivative generated by the compiler,
    # the aux tensors the main kernel's last parameters; ptxas assembles
    # them where it is installed (a cubin).
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    slopes = Tensor((8,), dtype="float32")
    docs = Tensor((300,), dtype="int32")
    cases = [
        (m.compose_scores(m.soft_cap(30.0), m.alibi(slopes)), m.sliding_window(64), 128),
        (m.relative_bias(Tensor((8, 9), dtype="float32"), 4), m.document(docs), 64),
        (None, m.prefix_lm(70), 128),
    ]
    for score_mod, mask_mod, head_dim in cases:
        traced = m.trace(score_mod, mask_mod)
        k = kvpipe.compile_attention(head_dim, "bf16", False, backward=True,
                                     modifiers=traced.ir, aux_types=traced.aux_types)
        main = k.kernel_abi("main")
        n = len(traced.aux_types)
        assert main["params"][len(main["params"]) - n:] == [f"aux{i}" for i in range(n)]
        assert main["score_mod"] is (score_mod is not None) and main["mask_mod"] is True
        if kvpipe.kernels._find_ptxas() is not None:
            assert k.cubin is not None


def test_attention_names_a_bad_modifier_before_launch():
    q = FakeTensor((1, 2, 16, 64))
    with pytest.raises(TypeError, match="score_mod must be a callable"):
        kvpipe.attention(q, q, q, score_mod=1.0)


def test_check_and_bench_kernels_trace_without_torch():
    from kvpipe import bench_modifiers, check_modifiers

    configs = check_modifiers.mods_kernel_configs()
    # Every modifier of the grid, at every head dim, with and without the
    # built-in masks; the regions do not depend on the lengths.
    mods = {c["modifiers"] for c in configs}
    # + flash_attn's softcap, alibi and two softcap + alibi.
    assert len(mods) == len(check_modifiers.MODS) + 4
    assert {(c["head_dim"], c["value_head_dim"]) for c in configs} == {
        (64, None), (128, None), (96, None), (192, None), (256, None), (192, 128)}
    # Every modifier at each of the other head dims, causal and not.
    for d, vd in check_modifiers.OTHER_HEAD_DIMS:
        at = [c for c in configs if (c["head_dim"], c["value_head_dim"]) == (d, vd)]
        assert len({c["modifiers"] for c in at}) == len(check_modifiers.MODS)
        assert {c["causal"] for c in at} == {False, True}
    assert len(configs) == len({kvpipe.kernels.AttentionConfig.make(**c).kernel_name
                                for c in configs})
    bench = bench_modifiers.bench_kernel_configs()
    # The three rows' forward kernels and backward families (bench --mods
    # times both).
    assert sum(1 for c in without_spill_fallbacks(bench)
               if c.get("modifiers") and not c.get("backward")) == 3
    assert sum(1 for c in bench if c.get("modifiers") and c.get("backward")) == 3


def test_compile_mods_needs_for_check(capsys):
    from kvpipe.__main__ import main

    with pytest.raises(SystemExit):
        main(["compile", "--mods"])
    assert "compile --mods goes with --for-check" in capsys.readouterr().err


@pytest.mark.parametrize("mask,shape", [
    (m.causal(), "proven"), (m.sliding_window(100, 5), "proven"), (m.prefix_lm(64), "proven"),
    (m.and_masks(m.causal(), m.document(Tensor((8,), dtype="int32"))), "partial"),
])
def test_library_masks_shape_in_the_abi(mask, shape, compiler, tmp_path, monkeypatch):
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    traced = m.trace(None, mask)
    k = kvpipe.compile_attention(64, "bf16", False, modifiers=traced.ir,
                                 aux_types=traced.aux_types)
    assert k.abi["mask_mod_shape"] == shape
    assert k.abi["consumer_warpgroups"] == 2


def test_torch_calls_reach_the_tracer_through_a_mode(monkeypatch):
    """With torch loaded, tensor[h] and torch.tanh(value) go through a
    TorchFunctionMode into the tracer (a stand-in torch module here)."""
    import sys
    import types

    overrides = types.SimpleNamespace(TorchFunctionMode=object)
    fake_torch = types.SimpleNamespace(overrides=overrides)
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setitem(sys.modules, "torch.overrides", overrides)
    mode = m._torch_mode()
    assert type(mode).__name__ == "_TraceMode"
    # The mode routes a call that mentions a traced value to the tracer.
    recorder = m._Recorder(m._AuxTensors(), "score_mod")
    x = m.Value(recorder, "%x", "f32")
    tanh = types.SimpleNamespace(__name__="tanh")
    result = mode.__torch_function__(tanh, (), (x,))
    assert isinstance(result, m.Value) and "math.tanh %x : f32" in recorder.lines[-1]
    getitem = types.SimpleNamespace(__name__="__getitem__")
    idx = m.Value(recorder, "%h", "index")
    slopes = Tensor((4,), dtype="float32")
    loaded = mode.__torch_function__(getitem, (), (slopes, idx))
    assert "kvpipe.aux_load 0[%h] : f32" in recorder.lines[-1] and loaded.type == "f32"
    # Other calls run as they are.
    assert mode.__torch_function__(lambda a, b: a + b, (), (1, 2)) == 3


@pytest.mark.parametrize("sq,skv,name", [(1 << 23, 16, "q"), (16, 1 << 23, "k")])
def test_attention_refuses_sequences_past_the_exact_float_indices(sq, skv, name):
    # The regions' index arithmetic runs in f32, exact below 2**23 indices.
    q, k = FakeTensor((1, 2, sq, 64)), FakeTensor((1, 2, skv, 64))
    with pytest.raises(ValueError, match=f"{name}'s sequence length must be below 2\\*\\*23"):
        kvpipe.attention(q, k, k, score_mod=m.soft_cap(10.0))


def test_backward_check_kernels_trace_without_torch():
    # `compile --for-check --mods --backward` fills the cache from these.
    from kvpipe import check_modifiers

    configs = check_modifiers.mods_backward_kernel_configs()
    backward = [c for c in configs if c.get("backward") and not c.get("aux_grads")]
    forward = [c for c in without_spill_fallbacks(configs) if not c.get("backward")]
    # Each backward family pairs with the forward kernel whose O and lse it
    # takes: the same masks and regions (and the learnable-aux cases' too).
    # The attention sinks' forward kernels (sinks=True) share the families
    # of the kernels without them: the backward reads the lse with the sinks.
    assert sum(bool(c.get("sinks")) for c in forward) == len(check_modifiers.SINK_CASES)
    forward = [{k: v for k, v in c.items() if k != "sinks"} for c in forward]
    forward = [c for i, c in enumerate(forward) if c not in forward[:i]]
    assert len(backward) == len(forward)
    learnable = [c for c in configs if c.get("aux_grads")]
    assert len(learnable) == len(check_modifiers.LEARNABLE_AUX_CASES)
    for config in backward:
        twin = {k: v for k, v in config.items() if k != "backward"}
        assert any(all(f.get(k) == v for k, v in twin.items()) for f in forward), config
    kinds = {(c["causal"], c["mask_alignment"], c["sliding_window"]) for c in backward}
    assert {(True, "bottom_right", False), (False, "bottom_right", True),
            (True, "top_left", False), (False, "top_left", False)} <= kinds
    assert sum("tanh" in c.get("modifiers", "") for c in backward) >= 4
    names = {case.mod for case in check_modifiers.mods_backward_grid()}
    assert names == set(check_modifiers.BACKWARD_MODS)


def test_attention_backward_refuses_sequences_past_the_exact_float_indices():
    from kvpipe.backward import attention_backward

    q, k = FakeTensor((1, 2, 16, 64)), FakeTensor((1, 2, 1 << 23, 64))
    lse = FakeTensor((1, 2, 16), dtype="float32")
    with pytest.raises(ValueError, match="k's sequence length must be below 2\\*\\*23"):
        attention_backward(q, k, k, q, lse, q, mask_mod=m.causal())


def test_backward_refuses_modifiers_that_trace_differently_than_in_the_forward():
    slopes = Tensor((4,), dtype="float32")
    forward = m.trace(m.alibi(slopes))
    m.check_same_modifiers(forward.ir, tuple(forward.aux_tensors), m.alibi(slopes), None)
    m.check_same_modifiers(None, (), None, None)
    # Another tensor captured, another constant, or no modifier at all.
    other = Tensor((4,), dtype="float32", ptr=0x20000)
    for score_mod in (m.alibi(other), m.alibi(slopes, shift=3), None):
        with pytest.raises(RuntimeError, match="trace differently in the backward"):
            m.check_same_modifiers(forward.ir, tuple(forward.aux_tensors), score_mod, None)
    # The same storage and shape seen through other strides (t swapped
    # for t.t()) is another tensor too.
    table = Tensor((4, 4), dtype="float32")
    transposed = Tensor((4, 4), strides=(1, 4), dtype="float32")
    transposed.dtype = table.dtype
    forward = m.trace(lambda s, b, h, q, kv: s + table[h, h])
    with pytest.raises(RuntimeError, match="trace differently in the backward"):
        m.check_same_modifiers(forward.ir, tuple(forward.aux_tensors),
                               lambda s, b, h, q, kv: s + transposed[h, h], None)
    again = m.check_same_modifiers(forward.ir, tuple(forward.aux_tensors),
                                   lambda s, b, h, q, kv: s + table[h, h], None)
    assert again.ir == forward.ir


def test_attention_refuses_an_undifferentiable_score_mod_before_the_forward(
        compiler, tmp_path, monkeypatch):
    # The backward family is compiled (and cached) when inputs require grad,
    # so that the region's verifier speaks now, naming score_mod, and not at
    # the first .backward().
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    q = FakeTensor((1, 2, 16, 64))
    q.requires_grad = True
    with pytest.raises(ValueError, match="score_mod cannot be differentiated by kvpipe's "
                                         "backward: 'arith.remf' op cannot be differentiated"):
        kvpipe.attention(q, q, q, score_mod=lambda s, b, h, qi, ki: s % 2.0)


def test_maximum_and_minimum_trace_to_the_float_or_integer_op():
    traced = m.trace(lambda s, b, h, q, kv: m.maximum(s, 0.5) + m.minimum(q, kv))
    lines = "\n".join(region_lines(traced.ir))
    assert "arith.maximumf %score," in lines
    assert "arith.minsi %q_idx, %kv_idx : index" in lines


def test_the_calculus_check_modifier_uses_every_differentiated_op():
    # check --mods [--backward] runs it on the GPU: the derivative rules of
    # these ops (ScoreModDerivative.h) then meet torch's autograd.
    from kvpipe import check_modifiers

    lines = "\n".join(region_lines(m.trace(check_modifiers.calculus).ir))
    for op in ("math.exp", "math.log", "math.sqrt", "arith.divf", "arith.select",
               "arith.maximumf"):
        assert op in lines, op
    grid = check_modifiers.mods_backward_grid()
    assert any(c.mod == "calculus" for c in grid)
    assert {c.dtype for c in grid if c.mod == "calculus"} == {"bf16", "f16"}
    configs = check_modifiers.mods_backward_kernel_configs()
    assert any(c["dtype"] == "f16" and c.get("backward") for c in configs)


def test_mods_backward_kernel_configs_hold_the_prefill_plans_forward_kernels():
    # The grid's "none" cases (built-in masks alone) run kvpipe.attention
    # without modifiers: a short top-left causal one launches the plan's
    # persistent kernel, which a cache filled for the check must hold.
    from kvpipe import check_modifiers

    configs = check_modifiers.mods_backward_kernel_configs()
    for d in (64, 128):
        assert any(c["head_dim"] == d and c.get("persistent") and c["causal"]
                   and "modifiers" not in c for c in configs), d
    # With modifiers only causal launches at head dim 128 take a persistent
    # grid, over the host's tile table (plans.MODIFIER_CAUSAL_PLAN).
    persistent = [c for c in configs if "modifiers" in c and c.get("persistent")]
    assert persistent
    for c in persistent:
        assert c["causal"] and c["head_dim"] == 128 and c.get("tile_table"), c


def test_a_call_traces_its_callbacks_once(monkeypatch):
    # kvpipe.attention traces the callbacks (running them in Python) once
    # per call and hands the trace down; attention_impl and the backward
    # trace only when called directly.
    import kvpipe
    from fakes import FakeTensor

    calls = []
    real = m.trace

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(m, "trace", counting)
    q = FakeTensor((1, 2, 16, 64))
    try:
        kvpipe.attention(q, q, q, score_mod=lambda s, b, h, qi, kv: s * 2.0)
    except Exception:  # no GPU here: the launch fails after the trace
        pass
    assert len(calls) == 1


def test_check_mods_tune_runs_the_grid_with_the_tuning(monkeypatch):
    # check --mods --tune: every grid kernel with the lever, the flash_attn
    # cases (which take no tuning) left out, in the configs compile
    # --for-check --mods --tune fills the cache with and in the run.
    from kvpipe import check_modifiers

    lever = {"tensor_row_sums": True, "mask_bits": True}
    plain = without_spill_fallbacks(check_modifiers.mods_kernel_configs())
    tuned = check_modifiers.mods_kernel_configs(tuning=lever)
    assert tuned and all(lever.items() <= c.items() for c in tuned)
    assert len(tuned) == len(plain) - len(check_modifiers.FLASH_CASES)
    names = {kvpipe.kernels.AttentionConfig.make(**c).kernel_name for c in tuned}
    assert all("mask_bits1_tensor_row_sums1" in n for n in names)

    seen = []
    monkeypatch.setattr(check_modifiers, "run_mod_case",
                        lambda case, seed, tuning=None: seen.append(tuning) or {"ok": True,
                                                                                  "case": "c"})
    monkeypatch.setattr(check_modifiers, "run_flash_attn_cases",
                        lambda: pytest.fail("flash_attn cases run with a tuning"))
    cases = check_modifiers.mods_grid()[:2]
    rows = check_modifiers.run_mods(cases, tuning=lever)
    assert len(rows) == 2 and seen == [lever, lever]


def _library_cases():
    """Library modifiers, each built twice over distinct tensors of the same shapes."""
    def build():
        slopes, table = Tensor((4,), dtype="float32"), Tensor((4, 9), dtype="float32")
        shift, lengths = Tensor((1,), dtype="int32"), Tensor((2,), dtype="int32")
        ids = Tensor((2, 64), dtype="int32")
        return [
            (m.soft_cap(30.0), None),
            (m.alibi(slopes, shift, kv_lengths=lengths), None),
            (m.compose_scores(m.soft_cap(50.0), m.alibi(slopes, 3)), m.causal(2)),
            (m.relative_bias(table, 4), m.and_masks(m.sliding_window(8, 0), m.document(ids))),
            (None, m.or_masks(m.prefix_lm(5), m.causal())),
        ]
    return build(), build()


def test_library_modifiers_trace_once_per_signature(monkeypatch):
    # A decode step's flash-attn softcap=/alibi_slopes= build new callbacks
    # over new tensors each call: their regions come from the first trace,
    # read from the new call's tensors.
    monkeypatch.setattr(m, "_library_traces", type(m._library_traces)())
    first, second = _library_cases()
    traces = [m.trace(*mods) for mods in first]
    regions = []
    real = m._trace_region
    monkeypatch.setattr(m, "_trace_region", lambda *a: regions.append(a) or real(*a))
    for mods, before in zip(second, traces):
        again = m.trace(*mods)
        assert again.ir == before.ir and again.aux_types == before.aux_types
        assert again.score_mod_reads == before.score_mod_reads
        # The tensors are the new callbacks' own, in the order the regions read them.
        tensors = m._call_signature(*mods)[1]
        assert all(any(t is u for u in tensors) for t in again.aux_tensors)
        assert not any(t is u for t in again.aux_tensors for u in before.aux_tensors)
    assert regions == []
    # A cached trace is what tracing afresh gives.
    monkeypatch.setattr(m, "_library_traces", type(m._library_traces)())
    for mods, cached in zip(second, [m.trace(*mods) for mods in second]):
        fresh = m.trace(*mods)
        assert (fresh.ir, fresh.aux_types, len(fresh.aux_tensors)) == (
            cached.ir, cached.aux_types, len(cached.aux_tensors))


def test_library_traces_are_keyed_by_shape_dtype_and_identity(monkeypatch):
    monkeypatch.setattr(m, "_library_traces", type(m._library_traces)())
    per_head = m.trace(m.alibi(Tensor((4,), dtype="float32")))
    per_batch = m.trace(m.alibi(Tensor((2, 4), dtype="float32")))
    assert per_head.ir != per_batch.ir
    # The same tensor as shift and as lengths is one parameter, two are two.
    one = Tensor((1,), dtype="int32")
    shared = m.trace(m.alibi(Tensor((1,), dtype="float32"), one, kv_lengths=one))
    separate = m.trace(m.alibi(Tensor((1,), dtype="float32"), one,
                               kv_lengths=Tensor((1,), dtype="int32")))
    assert len(shared.aux_tensors) == 2 and len(separate.aux_tensors) == 3
    # Parameters are part of the key.
    assert m.trace(m.soft_cap(20.0)).ir != m.trace(m.soft_cap(30.0)).ir
    assert m.trace(m.soft_cap(20.0)).ir != m.trace(m.soft_cap(20.0, approximate=False)).ir


def test_user_callbacks_are_traced_on_every_call(monkeypatch):
    monkeypatch.setattr(m, "_library_traces", type(m._library_traces)())
    scale = [2.0]

    def score_mod(s, b, h, q, kv):
        return s * scale[0]

    assert "2.0" in m.trace(score_mod).ir.replace("2.000000e+00", "2.0")
    scale[0] = 3.0  # a captured value changed: the next trace sees it
    assert "3.0" in m.trace(score_mod).ir.replace("3.000000e+00", "3.0")
    # A library combination with a user's part is not the library's.
    assert m._call_signature(m.compose_scores(m.soft_cap(5.0), score_mod), None) is None
    assert len(m._library_traces) == 0
