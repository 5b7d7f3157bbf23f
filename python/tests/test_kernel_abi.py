"""The launch follows the ABI the compiler writes (docs/kernel-abi.md): the
parameter order, each tensor map's box and swizzle; docs/kernel-abi.md's
parameter table is the compiler's (no GPU needed)."""

import re
from pathlib import Path

import pytest

import kvpipe
from fakes import FakeTensor
from kvpipe import cuda, launch, tma

DOC = Path(__file__).resolve().parents[2] / "docs" / "kernel-abi.md"


@pytest.fixture
def abi(compiler, tmp_path, monkeypatch):
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    return kvpipe.compile_attention(64, "bf16", True).abi


def _values(layout="bhsd"):
    q, k, v, o = (FakeTensor((2, 4, 100, 64), ptr=0x10000 * (i + 1)) for i in range(4))
    return {"q_map": ("q", q, layout), "k_map": ("k", k, layout), "v_map": ("v", v, layout),
            "o_map": ("out", o, layout), "lse": 0xABC000, "seq_q": 100, "seq_kv": 100,
            "heads_per_kv_head": 1, "scale_log2": 0.18, "heads_q": 4, "batch": 2}


def test_arguments_follow_the_abi(abi, monkeypatch):
    encoded = []

    def fake_encode(t, box, swizzle, dims_order=None, **kwargs):
        encoded.append((t.data_ptr(), tuple(box), swizzle))
        return bytes(128)

    monkeypatch.setattr(tma, "encode_from_tensor", fake_encode)
    monkeypatch.setattr(launch, "_maps", type(launch._maps)())
    args = launch.kernel_arguments(abi, _values())
    kinds = {"tensor_map": cuda.TensorMapArg, "pointer": cuda.PtrArg, "i32": cuda.I32Arg,
             "f32": cuda.F32Arg}
    expected = {**launch._V2_PARAM_KINDS, **abi.get("param_kinds", {})}
    assert [type(a) for a in args] == [kinds[expected[p]] for p in abi["params"]]
    # Each map's box and swizzle are the ABI's entry of that name.
    maps = [p for p in abi["params"] if expected[p] == "tensor_map"]
    assert [(box, swizzle) for _, box, swizzle in encoded] == [
        (tuple(abi[m]["box"]), abi[m]["swizzle"]) for m in maps]
    assert abi["q_map"]["box"][2] == abi["block_m"] and abi["k_map"]["box"][2] == abi["block_n"]


def test_a_parameter_the_runtime_does_not_know_is_an_error(abi):
    changed = dict(abi, params=abi["params"] + ["page_table"])
    with pytest.raises(launch.KernelABIError, match="'page_table'"):
        launch.kernel_arguments(changed, _values())


def test_another_abi_version_is_an_error(abi):
    with pytest.raises(launch.KernelABIError, match="ABI version 99"):
        launch.kernel_arguments(dict(abi, abi_version=99), _values())


def test_the_documented_parameter_table_is_the_compilers(abi):
    # docs/kernel-abi.md's table: "| # | `name` | PTX type | meaning |".
    forward = DOC.read_text().split("## Backward kernels")[0]
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", forward, flags=re.M)
    assert [name for _, name in rows] == abi["params"]
    assert [int(i) for i, _ in rows] == list(range(len(abi["params"])))
    assert f"ABI version {abi['abi_version']}" in DOC.read_text()


@pytest.mark.parametrize("head_dim,value_head_dim,width,swizzle,v_width,v_swizzle", [
    (96, None, 32, 64, 32, 64),      # 192-byte rows: 64-byte swizzle, 32-wide boxes
    (192, 128, 64, 128, 64, 128),
    (256, None, 64, 128, 64, 128),
])
def test_boxes_and_swizzles_come_from_the_abi(compiler, tmp_path, monkeypatch, head_dim,
                                              value_head_dim, width, swizzle, v_width,
                                              v_swizzle):
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    abi = kvpipe.compile_attention(head_dim, "bf16", False,
                                   value_head_dim=value_head_dim).abi
    assert abi["head_dim"] == head_dim
    assert abi["value_head_dim"] == (value_head_dim or head_dim)
    assert [abi[m]["box"][3] for m in ("q_map", "k_map", "v_map", "o_map")] == [
        width, width, v_width, v_width]
    assert [abi[m]["swizzle"] for m in ("q_map", "k_map", "v_map", "o_map")] == [
        swizzle, swizzle, v_swizzle, v_swizzle]

    encoded = []

    def fake_encode(t, box, swizzle, dims_order=None, **kwargs):
        encoded.append((tuple(t.shape), tuple(box), swizzle))
        return bytes(128)

    monkeypatch.setattr(tma, "encode_from_tensor", fake_encode)
    monkeypatch.setattr(launch, "_maps", type(launch._maps)())
    dv = value_head_dim or head_dim
    values = _values()
    for i, (name, dim) in enumerate((("q_map", head_dim), ("k_map", head_dim), ("v_map", dv),
                                     ("o_map", dv))):
        tensor_name, _, layout = values[name]
        values[name] = (tensor_name, FakeTensor((2, 4, 100, dim), ptr=0x10000 * (i + 1)), layout)
    launch.kernel_arguments(abi, values)
    assert [(box, s) for _, box, s in encoded] == [
        (tuple(abi[m]["box"]), abi[m]["swizzle"]) for m in ("q_map", "k_map", "v_map", "o_map")]


def test_the_documented_backward_tables_are_the_compilers(compiler, tmp_path, monkeypatch):
    # docs/kernel-abi.md's backward tables name every parameter of each
    # kernel, in order ("| 0, 1 | `o`, `do` | ..." rows list several); the
    # deterministic family has every optional parameter.
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    family = kvpipe.compile_attention(64, "bf16", True, backward=True, deterministic=True)
    backward = DOC.read_text().split("## Backward kernels")[1]
    sections = re.split(r"^`<name>(\w*)`", backward, flags=re.M)
    documented = {}
    for suffix, text in zip(sections[1::2], sections[2::2]):
        role = suffix.lstrip("_") or "main"
        cells = re.findall(r"^\| [\d, -]+ \| ([^|]+) \|", text, flags=re.M)
        documented[role] = [name for cell in cells for name in re.findall(r"`(\w+)`", cell)]
    assert documented == {abi["role"]: abi["params"] for abi in family.abis}
    for abi in family.abis:
        kinds = abi["param_kinds"]
        assert set(kinds) == set(abi["params"])
        assert set(kinds.values()) <= set(cuda.ArgLayout.KINDS)
