"""The command line (``python -m kvpipe``) as a user meets it: one-line errors
with a non-zero exit, --version, --help, cache listing, and the cache and
logging behaviour of compile_attention behind it (no GPU needed)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kvpipe
from kvpipe import compiler as compiler_mod
from kvpipe import kernels
from kvpipe.__main__ import main

PACKAGE = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _one_line_error(capsys, argv, expected):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("kvpipe: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and expected in err, err
    return err


def test_no_compiler_and_nothing_cached_is_one_line(capsys, cache, monkeypatch):
    monkeypatch.setattr(compiler_mod, "get_compiler", lambda *a, **k: None)
    _one_line_error(capsys, ["compile", "--head-dim", "64", "--dtype", "bf16", "--causal", "no"],
                    "no compiler was found")


def test_check_and_bench_without_torch_are_one_line(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    for command in ("check", "bench"):
        _one_line_error(capsys, [command], "torch is not installed")


def test_bad_tuning_value_is_one_line(capsys, cache):
    _one_line_error(capsys, ["compile", "--tune", "kv_stages=three"], "kv_stages")
    _one_line_error(capsys, ["compile", "--tune", "kv_stages"], "NAME=VALUE")


def test_unknown_tuning_attribute_is_one_line(capsys, cache, compiler):
    _one_line_error(capsys, ["compile", "--head-dim", "64", "--tune", "warp_size=3"],
                    "unknown tuning attribute 'warp_size'")


def test_backward_tuning_is_refused_where_only_forward_kernels_take_it(capsys, cache):
    # compile --for-check --tune compiles the check grid's and bench --mods'
    # forward variants: a backward attribute is a usage error, before any
    # kernel is compiled.
    for argv in (["compile", "--for-check", "--mods", "--tune", "shared_statistics=false"],
                 ["compile", "--for-check", "--tune", "dq_atomics=true"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert "takes forward tuning" in capsys.readouterr().err


def test_families_without_tuning_refuse_it_at_compile(capsys, cache):
    # check/bench --varlen and --decode take no --tune: compiling their
    # kernels with one would fill the cache with kernels nobody launches (and
    # the varlen family's backward kernels refuse forward tuning).
    for family in ("--varlen", "--decode"):
        with pytest.raises(SystemExit) as exit_info:
            main(["compile", "--for-check", family, "--tune", "mask_bits=true"])
        assert exit_info.value.code == 2
        assert "--tune" in capsys.readouterr().err


def test_unsupported_head_dim_lists_the_choices(capsys):
    with pytest.raises(SystemExit) as info:
        main(["compile", "--head-dim", "80"])
    assert info.value.code == 2
    assert "invalid choice: 80 (choose from 64, 96, 128, 192, 256)" in capsys.readouterr().err


def test_version_names_the_release_and_the_compiler(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"kvpipe {kvpipe.__version__}\n") and "compiler: " in out


def test_help_is_plain_text_with_choices(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["compile", "--help"])
    compile_help = capsys.readouterr().out
    for text in (top, compile_help):
        assert "``" not in text and ":func:" not in text
    assert "cache" in top and "KVPIPE_LOG" in top
    assert "{bf16,f16}" in compile_help and "64, 96, 128, 192, 256" in compile_help


def test_compile_head_dim_192_also_compiles_value_head_dim_128(capsys, cache, compiler):
    argv = ["compile", "--head-dim", "192", "--dtype", "bf16", "--causal", "yes"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "kvpipe_attention_d192v128_bf16_causal:" in out
    assert "kvpipe_attention_d192_bf16_causal:" in out


def test_compile_causal_also_compiles_the_prefill_plans_kernels(capsys, cache, compiler):
    # kvpipe.attention launches PREFILL_PLAN's persistent kernels for short
    # causal sequences: a cache filled by `compile` must hold them.
    assert main(["compile", "--head-dim", "64", "--dtype", "bf16", "--causal", "yes"]) == 0
    out = capsys.readouterr().out
    assert "kvpipe_attention_d64_bf16_causal:" in out
    levers = "late_pv_retire1_mask_bits1_persistent1_q_stages2_tensor_row_sums1"
    assert f"kvpipe_attention_d64_bf16_causal_consumer_warpgroups2_{levers}:" in out
    assert f"kvpipe_attention_d64_bf16_causal_{levers}:" in out
    assert main(["compile", "--head-dim", "256", "--dtype", "bf16", "--causal", "no"]) == 0
    assert "persistent" not in capsys.readouterr().out


def test_compile_on_plan_adds_the_tuning_to_the_plans_kernels(capsys, cache, compiler):
    # --on-plan: a lever tried on the kernels kvpipe.attention launches (the
    # plan's, plus the tuning), not on the head dim's defaults alone.
    assert main(["compile", "--head-dim", "64", "--dtype", "bf16", "--causal", "yes",
                 "--tune", "skip_idle_warpgroups=true", "--on-plan"]) == 0
    out = capsys.readouterr().out
    assert "kvpipe_attention_d64_bf16_causal_skip_idle_warpgroups1:" in out
    assert ("kvpipe_attention_d64_bf16_causal_consumer_warpgroups2_late_pv_retire1_mask_bits1_"
            "persistent1_q_stages2_skip_idle_warpgroups1_tensor_row_sums1:") in out
    with pytest.raises(SystemExit) as info:
        main(["compile", "--head-dim", "64", "--on-plan"])
    assert info.value.code == 2
    assert "--on-plan goes with --tune" in capsys.readouterr().err


def test_cache_hit_says_cached(capsys, cache, compiler):
    argv = ["compile", "--head-dim", "64", "--dtype", "bf16", "--causal", "yes"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert "compiled in" in first and "cached" not in first
    assert main(argv) == 0
    second = capsys.readouterr().out
    assert "cached" in second and "compiled in" not in second


def test_cache_list_and_clear(capsys, cache, compiler):
    assert main(["cache", "list"]) == 0
    assert ": 0 entries" in capsys.readouterr().out
    kvpipe.compile_attention(64, "f16", False)
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert ": 1 entries" in out and "kvpipe_attention_d64_f16_full" in out
    assert main(["cache", "clear"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert kernels.cache_entries() == []


def test_repr_of_a_compiled_kernel_is_one_line(cache, compiler):
    k = kvpipe.compile_attention(64, "bf16", True)
    text = repr(k)
    assert "\n" not in text and len(text) < 200, text
    assert k.name in text and "compiled in" in text
    again = kvpipe.compile_attention(64, "bf16", True)
    assert again.cached and "cached" in repr(again)


def test_unwritable_cache_warns_and_runs_uncached(tmp_path, monkeypatch, compiler):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(kernels, "_unwritable_warned", set())
    with pytest.warns(RuntimeWarning, match="not writable.*not cached"):
        k = kvpipe.compile_attention(64, "bf16", False)
    assert ".entry kvpipe_attention_d64_bf16_full(" in k.ptx and not k.cached


def test_kvpipe_log_reports_decisions(tmp_path, compiler):
    env = dict(os.environ, KVPIPE_LOG="1", KVPIPE_CACHE_DIR=str(tmp_path / "cache"),
               KVPIPE_OPT=compiler, PYTHONPATH=str(PACKAGE))
    argv = [sys.executable, "-m", "kvpipe", "compile", "--head-dim", "64", "--dtype", "f16",
            "--causal", "no"]
    first = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "kvpipe: cache miss: kvpipe_attention_d64_f16_full; compiling" in first.stderr
    assert "kvpipe: compiled kvpipe_attention_d64_f16_full with OptCompiler(" in first.stderr
    second = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert "kvpipe: cache hit: kvpipe_attention_d64_f16_full" in second.stderr
    quiet = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path,
                           env=dict(env, KVPIPE_LOG="0"))
    assert quiet.stderr == ""
