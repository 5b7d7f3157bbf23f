"""The compiler driver: running kvpipe-opt on IR text and reporting errors."""

import os
import stat

import pytest

import kvpipe
from kvpipe.compiler import CompilerError, CompilerNotFoundError, run_opt

from programs import PIPELINE, RING


def test_round_trip_returns_ir(compiler):
    out = run_opt(RING, compiler=compiler)
    assert "kvpipe.create" in out
    assert out.count("kvpipe.step") == 2


def test_passes_are_applied(compiler):
    out = run_opt(RING, ["cse"], compiler=compiler)
    # CSE merges the two identical pure steps.
    assert out.count("kvpipe.step") == 1
    out = run_opt(RING, pass_pipeline="builtin.module(func.func(cse))", compiler=compiler)
    assert out.count("kvpipe.step") == 1


def test_generic_output(compiler):
    out = run_opt(RING, extra_args=["-mlir-print-op-generic"], compiler=compiler)
    assert '"kvpipe.create"()' in out


def test_verifier_error_raises_with_location(compiler):
    bad = RING.replace("kv_stages = 2", "kv_stages = 0", 1)
    with pytest.raises(CompilerError) as info:
        run_opt(bad, compiler=compiler)
    err = info.value
    assert err.returncode == 1
    assert "pipeline parameter 'kv_stages' must be a positive integer, got 0" in err.diagnostics
    # MLIR diagnostics carry a location: <file>:<line>:<col>: error:
    assert "<stdin>:3:" in err.diagnostics
    assert "kv_stages" in str(err)


def test_op_error_raises(compiler):
    bad = f"""
func.func @f(%p: {PIPELINE}) {{
  kvpipe.consumer_wait %p stage 3 : {PIPELINE}
  return
}}
"""
    with pytest.raises(CompilerError, match=r"'qk_stage' must be in \[0, 1\)"):
        run_opt(bad, compiler=compiler)


def test_unknown_pass_raises(compiler):
    with pytest.raises(CompilerError) as info:
        run_opt(RING, ["--no-such-pass"], compiler=compiler)
    assert "no-such-pass" in info.value.diagnostics


def test_passes_and_pipeline_are_exclusive(compiler):
    with pytest.raises(ValueError):
        run_opt(RING, ["cse"], pass_pipeline="builtin.module(cse)", compiler=compiler)


def test_kvpipe_opt_env_must_be_executable(tmp_path, monkeypatch):
    monkeypatch.setenv("KVPIPE_OPT", str(tmp_path / "missing"))
    with pytest.raises(CompilerNotFoundError, match="KVPIPE_OPT"):
        kvpipe.find_compiler()


def test_kvpipe_opt_env_is_used(tmp_path, monkeypatch):
    fake = tmp_path / "kvpipe-opt"
    fake.write_text("#!/bin/sh\ncat >/dev/null\necho fake-output\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("KVPIPE_OPT", str(fake))
    monkeypatch.delenv("KVPIPE_COMPILER", raising=False)
    assert kvpipe.find_compiler() == str(fake)
    assert run_opt("module {}").strip() == "fake-output"


def test_crash_is_reported_not_hidden(tmp_path, monkeypatch):
    fake = tmp_path / "kvpipe-opt"
    fake.write_text("#!/bin/sh\necho 'boom' >&2\nkill -SEGV $$\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(CompilerError) as info:
        run_opt("module {}", compiler=str(fake))
    assert info.value.returncode < 0


def test_package_version_matches_the_compiler(compiler):
    from kvpipe.compiler import compiler_release

    assert compiler_release(compiler) == kvpipe.__version__
