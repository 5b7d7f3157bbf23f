"""Decode kernels (split-KV, pack-GQA) on the CPU: the heuristics that choose
them, the argument checks, the launch's argument assembly from the
compiler's ABI (5-D packed maps, workspace, combine kernel), and the
check's decode grid and the kernels it needs (docs/serving.md)."""

import re
from pathlib import Path

import pytest

import kvpipe
from fakes import FakeTensor
from kvpipe import check, cuda, flash_attn, launch, plans, tma

DOC = Path(__file__).resolve().parents[2] / "docs" / "kernel-abi.md"


# --- heuristics ---------------------------------------------------------------

def test_no_split_when_the_tiles_fill_the_sms():
    assert plans.num_splits_heuristic(512, 132, 64) == 1
    assert plans.num_splits_heuristic(106, 132, 1000) == 1     # >= 80 % of the SMs


def test_split_fills_the_sms_with_a_few_blocks_each():
    # 8 x 32k, packed (8 sequences x 8 K/V heads): 2 splits make 128 CTAs.
    assert plans.num_splits_heuristic(64, 132, 256) == 2
    # 1 x 128k: 8 tiles; 15 splits (120 CTAs) is the first count within 85 %
    # of the best wave efficiency.
    assert plans.num_splits_heuristic(8, 132, 1024) == 15
    # Few blocks: at least 4 per split.
    assert plans.num_splits_heuristic(8, 132, 12) == 3
    assert plans.num_splits_heuristic(8, 132, 7) == 1
    # Never more than 128 splits or the SM count.
    assert plans.num_splits_heuristic(1, 200, 10**6) <= 128


def test_pack_gqa_for_few_queries_only():
    assert plans.should_pack_gqa(1, 4)
    assert plans.should_pack_gqa(16, 7)
    assert plans.should_pack_gqa(4, 64)
    assert not plans.should_pack_gqa(1, 1)           # MHA: nothing to pack
    assert not plans.should_pack_gqa(1, 65)          # more heads than rows
    assert not plans.should_pack_gqa(4096, 4)        # prefill: both full


@pytest.mark.parametrize("batch,cache,splits", [(64, 8192, 1), (8, 32768, 2), (1, 131072, 15)])
def test_decode_plan_of_the_bench_points(batch, cache, splits):
    num_splits, pack, tuning = plans.decode_plan(batch, 32, 8, 1, cache, 128, 128, 0,
                                                 None, 132, {})
    assert (num_splits, pack, tuning) == (splits, 4, {"consumer_warpgroups": 1})
    # An explicit stage count is kept.
    assert plans.decode_plan(batch, 32, 8, 1, cache, 128, 128, 0, None, 132,
                             {"kv_stages": 3})[2]["kv_stages"] == 3


def test_decode_plan_keeps_explicit_choices():
    # num_splits 1 and pack_gqa False: the prefill kernel, untouched.
    assert plans.decode_plan(2, 32, 8, 1, 4096, 128, 128, 1, False, 0, {}) == (1, 0, {})
    # Explicit tuning wins over the one-warpgroup choice.
    assert plans.decode_plan(2, 32, 8, 1, 4096, 128, 128, 3, True, 0,
                             {"consumer_warpgroups": 2}) == (3, 4, {"consumer_warpgroups": 2})
    # Two warpgroups when a packed tile needs more than 64 rows.
    assert plans.decode_plan(2, 32, 4, 16, 4096, 128, 128, 3, True, 0, {}) == (3, 8, {})
    with pytest.raises(ValueError, match="pack_gqa=True needs at most 64 query heads"):
        plans.decode_plan(1, 128, 1, 1, 100, 128, 128, 1, True, 0, {})


# --- argument checks ----------------------------------------------------------

def qkv(hq=8, hkv=2, sq=1, skv=512):
    return (FakeTensor((2, hq, sq, 128)), FakeTensor((2, hkv, skv, 128)),
            FakeTensor((2, hkv, skv, 128)))


@pytest.mark.parametrize("kwargs,error,match", [
    ({"num_splits": -1}, ValueError, "num_splits must be in \\[0, 128\\]"),
    ({"num_splits": 129}, ValueError, "num_splits must be in \\[0, 128\\]"),
    ({"num_splits": True}, TypeError, "num_splits must be an int"),
    ({"num_splits": 2.0}, TypeError, "num_splits must be an int"),
    ({"pack_gqa": 4}, TypeError, "pack_gqa must be a bool or None"),
])
def test_attention_decode_argument_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        kvpipe.attention(*qkv(), **kwargs)


@pytest.mark.parametrize("num_splits,error", [(-1, ValueError), (129, ValueError),
                                              ("2", TypeError), (False, TypeError)])
def test_kvcache_num_splits_errors(num_splits, error):
    k_cache, v_cache = FakeTensor((2, 256, 2, 128)), FakeTensor((2, 256, 2, 128))
    with pytest.raises(error, match="num_splits"):
        flash_attn.flash_attn_with_kvcache(FakeTensor((2, 1, 8, 128)), k_cache, v_cache,
                                           num_splits=num_splits)


@pytest.mark.parametrize("num_splits", [0, 1, 5, 128])
def test_valid_num_splits_reach_the_launch(num_splits):
    k_cache, v_cache = FakeTensor((2, 256, 2, 128)), FakeTensor((2, 256, 2, 128))
    # (Past the checks: no torch, a fake device torch refuses, or a CPU-only
    # torch asked for the current CUDA device.)
    with pytest.raises((ImportError, AttributeError, TypeError, RuntimeError)) as info:
        flash_attn.flash_attn_with_kvcache(FakeTensor((2, 1, 8, 128)), k_cache, v_cache,
                                           num_splits=num_splits)
    assert "num_splits" not in str(info.value)


def test_compile_attention_decode_attribute_errors():
    with pytest.raises(ValueError, match="pack_gqa must be in \\[0, 64\\]"):
        kvpipe.compile_attention(128, "bf16", False, pack_gqa=65)
    with pytest.raises(TypeError, match="pack_gqa must be an int"):
        kvpipe.compile_attention(128, "bf16", False, pack_gqa=True)
    with pytest.raises(TypeError, match="split_kv must be a bool"):
        kvpipe.compile_attention(128, "bf16", False, split_kv=1)
    with pytest.raises(ValueError, match="not with backward=True"):
        kvpipe.compile_attention(128, "bf16", False, backward=True, split_kv=True)


def test_decode_declaration_and_name():
    from kvpipe.kernels import AttentionConfig

    config = AttentionConfig.make(128, "bf16", False, kv_lengths=True, split_kv=True,
                                  pack_gqa=7, consumer_warpgroups=1)
    assert "split_kv = true" in config.declaration()
    assert "pack_gqa = 7 : i64" in config.declaration()
    assert config.kernel_name.endswith("kvlengths_split_pack7_consumer_warpgroups1")


# --- packed maps and the launch -----------------------------------------------

@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_packed_map_geometry_steps_over_the_heads(layout):
    # q of 8 heads, 3 queries, D 128; group of 4: (B, H_kv, S, G, D).
    shape = (2, 8, 3, 128) if layout == "bhsd" else (2, 3, 8, 128)
    t = FakeTensor(shape)
    view_shape, view_strides = launch._bhsd_view("q", t, layout)
    dims, strides = launch.packed_map_geometry(view_shape, view_strides, 4)
    assert dims == (2, 2, 3, 4, 128)
    sb, sh, ss, _ = view_strides
    assert strides == (sb, 4 * sh, ss, sh, 1)
    # Element (b, kv, s, g) is head kv * 4 + g of query s.
    b, kv, s, g = 1, 1, 2, 3
    assert (b * strides[0] + kv * strides[1] + s * strides[2] + g * strides[3]
            == b * sb + (kv * 4 + g) * sh + s * ss)


@pytest.fixture
def decode_family(compiler, tmp_path, monkeypatch):
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    return kvpipe.compile_attention(128, "bf16", False, kv_lengths=True, split_kv=True,
                                    pack_gqa=4, consumer_warpgroups=1)


def test_split_family_abis(decode_family):
    main, combine = decode_family.kernel_abi("main"), decode_family.kernel_abi("combine")
    assert main["kernel"] == decode_family.name and main["family"] == decode_family.name
    assert combine["kernel"] == decode_family.name + "_combine"
    assert main["params"] == ["q_map", "k_map", "v_map", "seq_q", "seq_kv",
                              "heads_per_kv_head", "scale_log2", "heads_q", "batch",
                              "kv_lengths", "num_splits", "o_partial", "lse_partial"]
    assert main["q_map"]["box"] == [1, 1, 16, 4, 64] and "o_map" not in main
    assert main["queries_per_tile"] == 16 and main["pack_gqa"] == 4
    assert combine["params"] == ["o_partial", "lse_partial", "o", "lse", "o_stride_b",
                                 "o_stride_h", "o_stride_s", "seq_q", "heads_q", "batch",
                                 "num_splits"]


def test_split_launch_arguments_and_grids(decode_family, monkeypatch):
    main, combine = decode_family.kernel_abi("main"), decode_family.kernel_abi("combine")
    encoded = []

    def fake_tiled(ptr, dtype, dims, strides, box, swizzle, **kw):
        encoded.append((ptr, tuple(dims), tuple(strides), tuple(box)))
        return bytes(128)

    def fake_from_tensor(t, box, swizzle, dims_order=None, **kw):
        encoded.append((t.data_ptr(), None, None, tuple(box)))
        return bytes(128)

    monkeypatch.setattr(tma, "encode_tiled", fake_tiled)
    monkeypatch.setattr(tma, "encode_from_tensor", fake_from_tensor)
    monkeypatch.setattr(launch, "_maps", type(launch._maps)())
    q = FakeTensor((3, 2, 32, 128), ptr=0x10000)          # bshd: B 3, Sq 2, Hq 32
    k = FakeTensor((3, 4096, 8, 128), ptr=0x20000)
    values = {"q_map": ("q", q, "bshd"), "k_map": ("k", k, "bshd"),
              "v_map": ("v", k, "bshd"), "seq_q": 2, "seq_kv": 4096, "heads_per_kv_head": 4,
              "scale_log2": 0.1, "heads_q": 32, "batch": 3, "kv_lengths": 0x30000,
              "num_splits": 5, "o_partial": 0x40000, "lse_partial": 0x50000}
    args = launch.kernel_arguments(main, values)
    assert [type(a) for a in args[:3]] == [cuda.TensorMapArg] * 3
    assert [type(a) for a in args[-3:]] == [cuda.I32Arg, cuda.PtrArg, cuda.PtrArg]
    # Q's 5-D map: (B, H_kv, S, G, D) with the heads' stride inside a group.
    assert encoded[0] == (0x10000, (3, 8, 2, 4, 128), (2 * 32 * 128 * 2, 4 * 128 * 2,
                                                       32 * 128 * 2, 128 * 2),
                          (1, 1, 16, 4, 64))
    # The launcher refuses a group other than the kernel's.
    with pytest.raises(ValueError, match="heads_per_kv_head \\(2\\) must equal the pack_gqa"):
        launch.kernel_arguments(main, dict(values, heads_per_kv_head=2))
    # 8 K/V heads per sequence, 5 splits of the one packed Q block.
    assert launch.launch_grid(main, 1, 32, 3, 0, 5) == (5, 8, 3)
    assert launch.launch_grid(main, 20, 32, 3, 0, 5) == (10, 8, 3)
    # One warp per output row, 4 rows per CTA.
    assert launch.combine_grid(combine, 1, 32, 3) == (24, 1, 1)
    assert launch.combine_grid(combine, 3, 5, 1) == (4, 1, 1)
    args = launch.kernel_arguments(combine, {
        "o_partial": 1, "lse_partial": 2, "o": 3, "lse": 0, "o_stride_b": 4,
        "o_stride_h": 5, "o_stride_s": 6, "seq_q": 1, "heads_q": 32, "batch": 3,
        "num_splits": 5})
    assert [type(a) for a in args] == [cuda.PtrArg] * 4 + [cuda.I64Arg] * 3 + [cuda.I32Arg] * 4


def test_the_documented_decode_tables_are_the_compilers(decode_family):
    section = DOC.read_text().split("## Decode kernels")[1].split("## Backward kernels")[0]
    main_table, combine_table = re.split(r"The combine kernel", section)
    names = lambda text: [n for cell in re.findall(r"^\| (`[^|]+) \|", text, flags=re.M)  # noqa
                          for n in re.findall(r"`(\w+)`", cell)]
    main, combine = decode_family.kernel_abi("main"), decode_family.kernel_abi("combine")
    assert names(main_table) == main["params"][-3:]
    # The table's last row is the combine kernel's `sinks`, only with sinks
    # (test_sinks.py).
    assert names(combine_table) == combine["params"] + ["sinks"]


# --- the check's decode grid --------------------------------------------------

def test_decode_grid_covers_the_serving_shapes():
    grid = check.decode_grid()
    assert {c.seq_q for c in grid} == {1, 4, 16}
    assert {(c.heads_q, c.heads_kv) for c in grid} == {(32, 8), (28, 4), (8, 1), (16, 16)}
    assert {c.num_splits for c in grid} == {0, 1, 3}
    assert {c.capacity for c in grid} >= {1, 32768}
    assert all(1 in c.lengths and 0 in c.lengths for c in grid)
    assert any(c.causal and c.window == (-1, -1) for c in grid)
    assert any(c.window[0] >= 0 and c.window[1] >= 0 for c in grid)
    # For each (group, seq_q, splits), every mask occurs in some case.
    configs = check.decode_kernel_configs()
    assert any(c["split_kv"] for c in configs) and any(not c["split_kv"] for c in configs)
    assert {c["pack_gqa"] for c in configs} >= {0, 4, 7, 8}


def test_decode_modifier_cases_run_in_the_decode_kernels():
    # The modifier cases' kernels: the regions traced, packed where the
    # group fills a warpgroup's rows (a row's head its own), split where
    # chosen or asked.
    cases = [c for c in check.decode_grid() if c.mods]
    assert {part for c in cases for part in c.mods.split("+")} == {"softcap", "alibi", "stride"}
    configs = [check._decode_kernel_config(c, 132) for c in cases]
    assert all("modifiers" in c for c in configs)
    assert any(c["pack_gqa"] and c["split_kv"] for c in configs)
    assert any(c["pack_gqa"] == 7 for c in configs)
    assert all(c in check.decode_kernel_configs() for c in configs)


def test_decode_configs_follow_the_plan():
    case = check.DecodeCase("bf16", 128, 32, 8, 1, 5000, (5000, 1, 3333, 0), True,
                            (-1, -1), 0)
    config = check._decode_kernel_config(case, 132)
    assert config == dict(head_dim=128, dtype="bf16", causal=True, value_head_dim=None,
                          mask_alignment="bottom_right", sliding_window=False,
                          kv_lengths=True, split_kv=True, pack_gqa=4, consumer_warpgroups=1)


def test_kvcache_configs_follow_flash_attn_with_kvcaches_choice():
    configs = check.kernel_configs([], with_kvcache=True)
    assert configs and all(c["kv_lengths"] for c in configs)
    assert any(c["pack_gqa"] for c in configs)


# --- bench --decode and the command line ----------------------------------------

def test_decode_bench_table_reports_tbps_ratios_and_the_plan():
    from kvpipe import bench

    rows = [{"B": 64, "S": 8192, "kvpipe": 3.9, "kvpipe_seqlens": 3.8, "kvpipe_nosplit": 3.9,
             "kvpipe_stages_variant": 4.1, "cudnn": 4.4, "cudnn_gqa": "expanded", "flash": 2.6, "flash_gqa": "enable_gqa",
             "fa4": 4.3, "vs_fa4": 0.907, "vs_cudnn": 0.886, "vs_flash": 1.5, "speedup_cudnn": 3.5, "speedup_flash": 1.5,
             "num_splits": 1, "pack_gqa": 4, "consumer_warpgroups": 1, "kvpipe_graph": 4.4,
             "cudnn_graph": 4.5, "vs_cudnn_graph": 0.978, "kvpipe_host_us": 61.5,
             "cudnn_host_us": 15.2},
            {"B": 1, "S": 131072, "kvpipe": 3.6, "kvpipe_seqlens": 3.5, "kvpipe_nosplit": 0.4,
             "cudnn": None, "num_splits": 15, "pack_gqa": 4, "consumer_warpgroups": None}]
    lines = bench.decode_to_markdown(rows).splitlines()
    assert lines[0].count("|") - 1 == lines[1].count("---") == 13
    assert lines[2].startswith("| 64 x 8k | 3.9 | 3.8 | 3.9 | 4.1 | 4.4 (expanded) | "
                               "2.6 (enable_gqa) | 4.3 | 0.886 | 1.5 | 0.907 |")
    assert lines[2].endswith("| 1, 4, 1 |")
    assert "| None | None | None | None |" in lines[3]  # no peers measured
    assert lines[3].startswith("| 1 x 128k |") and lines[3].endswith("| 15, 4, default |")
    # The CUDA-graph table: TB/s without host time, and the host time per call.
    graph = lines[lines.index("") + 3:]
    assert graph[0].count("|") - 1 == graph[1].count("---") == 6
    assert graph[2] == "| 64 x 8k | 4.4 | 4.5 | 0.978 | 61.5 | 15.2 |"
    assert graph[3] == "| 1 x 128k | None | None | None | None | None |"


def test_bench_points_are_the_issues_table():
    from kvpipe import bench

    assert bench.DECODE_POINTS == ((64, 8192), (8, 32768), (1, 131072))


def test_compile_decode_kernel_lists():
    from kvpipe.__main__ import bench_decode_kernel_configs, main

    configs = bench_decode_kernel_configs()
    # Each point: the chosen plan and the unsplit one, with and without lengths.
    assert {(c["split_kv"], c["pack_gqa"], c["kv_lengths"]) for c in configs} == {
        (False, 4, False), (False, 4, True), (True, 4, False), (True, 4, True)}
    assert {c.get("kv_stages") for c in configs} == {None, 3}
    assert all(c["consumer_warpgroups"] == 1 for c in configs)
    api = check.decode_api_kernel_configs()
    assert {c["split_kv"] for c in api} == {False, True}
    # --decode goes with --for-check (argparse's usage error).
    with pytest.raises(SystemExit):
        main(["compile", "--decode"])
