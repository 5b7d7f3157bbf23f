"""The C API backend: libKVPipeCAPI.so loaded with ctypes compiles as kvpipe-opt does.

Each test compares the library with kvpipe-opt where both exist: same IR
text, same PTX, same diagnostics, same release.
"""

import hashlib
import os

import pytest

import kvpipe
from kvpipe import compiler as compiler_module
from kvpipe.compiler import (CAPICompiler, CompilerError, CompilerNotFoundError, OptCompiler,
                             passes_to_pipeline, run_opt)

from programs import PIPELINE, RING


@pytest.fixture
def opt(compiler):
    return OptCompiler(compiler)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KVPIPE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("passes,pipeline", [
    ((), None),
    (("cse",), None),
    (("--canonicalize", "-cse"), None),
    ((), "builtin.module(func.func(cse))"),
    ((), "builtin.module(func.func(affine-loop-invariant-code-motion))"),
])
def test_output_is_kvpipe_opts(opt, capi, passes, pipeline):
    expected = opt.run(RING, passes, pass_pipeline=pipeline)
    assert capi.run(RING, passes, pass_pipeline=pipeline) == expected


def test_attention_ptx_is_kvpipe_opts(compiler, capi, cache, monkeypatch):
    monkeypatch.setenv("KVPIPE_COMPILER", "capi")
    from_library = kvpipe.compile_attention(64, "bf16", True, use_cache=False)
    monkeypatch.setenv("KVPIPE_COMPILER", "opt")
    from_opt = kvpipe.compile_attention(64, "bf16", True, use_cache=False)
    assert from_library.ptx == from_opt.ptx
    assert f".entry {from_library.name}(" in from_library.ptx
    timings = ("ptx_seconds",)
    assert ({k: v for k, v in from_library.abi.items() if k not in timings}
            == {k: v for k, v in from_opt.abi.items() if k not in timings})
    # The cache key names the build that compiled: here, the library.
    assert from_library.compiler_version == capi.identity() != from_opt.compiler_version


def test_forced_backend_fills_and_reads_the_cache(capi, cache, monkeypatch):
    monkeypatch.setenv("KVPIPE_COMPILER", "capi")
    made = kvpipe.compile_attention(64, "f16", False)
    assert made.compiler_version == capi.identity()
    assert kvpipe.compile_attention(64, "f16", False).ptx == made.ptx
    assert any(cache.iterdir())


def test_verifier_error_has_location_and_message(opt, capi):
    bad = RING.replace("kv_stages = 2", "kv_stages = 0", 1)
    with pytest.raises(CompilerError) as info:
        capi.run(bad)
    err = info.value
    assert "<stdin>:3:" in err.diagnostics
    assert "error: pipeline parameter 'kv_stages' must be a positive integer, got 0" \
        in err.diagnostics
    assert "kv_stages" in str(err) and err.returncode == 1
    with pytest.raises(CompilerError) as from_opt:
        opt.run(bad)
    assert err.diagnostics == from_opt.value.diagnostics


@pytest.mark.parametrize("text", ["func.func @f( {", "\x00\xff garbage", "module {"])
def test_unparsable_text_is_a_diagnostic_not_a_crash(opt, capi, text):
    with pytest.raises(CompilerError, match=r"<stdin>:1:\d+: error: ") as info:
        capi.run(text)
    with pytest.raises(CompilerError) as from_opt:
        opt.run(text)
    assert info.value.diagnostics == from_opt.value.diagnostics


def test_deeply_nested_input_is_refused_not_a_crash(opt, capi):
    # 200,000 nested '[' overflowed the parser's stack: through the library
    # that killed this process. Both backends refuse it with the same error.
    deep = "func.func @f() attributes {a = " + "[" * 200000 + "]" * 200000 + "} { return }"
    with pytest.raises(CompilerError, match=r"<stdin>:1:\d+: error: input nests brackets "
                                            r"more than 1000 levels deep") as info:
        capi.run(deep)
    with pytest.raises(CompilerError) as from_opt:
        opt.run(deep)
    assert from_opt.value.returncode == 1  # an error, not a signal
    assert info.value.diagnostics == from_opt.value.diagnostics


def test_bad_option_value_is_short(opt, capi):
    # One line naming the option, not the module printed after a pipeline
    # failure; the library adds the pipeline parser's own "failed to add".
    for backend, lines in ((opt, 1), (capi, 2)):
        with pytest.raises(CompilerError) as info:
            backend.run(RING, ["--kvpipe-to-ptx=format=elf"])
        text = info.value.diagnostics.strip()
        assert len(text.splitlines()) == lines, text
        assert "format='elf' is not a format" in text and "gpu.module" not in text


@pytest.mark.parametrize("kwargs,match", [
    (dict(passes=["--no-such-pass"]), "'no-such-pass' does not refer to a registered pass"),
    (dict(pass_pipeline="func.func(cse)"), "must be anchored on builtin.module, got 'func.func'"),
    (dict(pass_pipeline="cse"), "wrapped with the anchor operation type"),
    (dict(passes=["--kvpipe-to-ptx=no-such-option=1"]), "no-such-option"),
    # Flags become a pipeline on builtin.module, whose nesting is explicit.
    (dict(passes=["--affine-loop-invariant-code-motion"]),
     "restricted to 'func.func' .* did you intend to nest"),
])
def test_bad_pipeline_raises(capi, kwargs, match):
    with pytest.raises(CompilerError, match=match):
        capi.run(RING, **kwargs)


def test_release_is_kvpipe_opts(compiler, capi):
    assert capi.release() == kvpipe.compiler.compiler_release(compiler) == kvpipe.__version__
    assert kvpipe.compiler.compiler_release(capi) == kvpipe.__version__


def test_identity_is_the_library_digest(capi):
    with open(capi.path, "rb") as f:
        assert capi.identity() == hashlib.sha256(f.read()).hexdigest()[:16]


def test_output_file(capi, tmp_path):
    out = tmp_path / "out.mlir"
    assert capi.run(RING, extra_args=["-o", str(out)]) == ""
    assert out.read_text() == capi.run(RING)
    assert capi.run(RING, extra_args=[f"-o={os.devnull}"]) == ""


def test_other_extra_args_are_refused(capi):
    with pytest.raises(ValueError, match=r"cannot honour extra_args \['-mlir-print-op-generic'\]"):
        capi.run(RING, extra_args=["-mlir-print-op-generic"])


def test_passes_to_pipeline():
    assert passes_to_pipeline([]) == ""
    assert passes_to_pipeline(["cse", "-canonicalize"]) == "builtin.module(cse,canonicalize)"
    assert (passes_to_pipeline(["--kvpipe-to-ptx=ptx-file=a.ptx abi-file=a.json"])
            == "builtin.module(kvpipe-to-ptx{ptx-file=a.ptx abi-file=a.json})")
    with pytest.raises(ValueError, match="not a pass flag"):
        passes_to_pipeline(["--=x"])


def test_run_opt_uses_the_library_without_kvpipe_opt(capi, monkeypatch):
    monkeypatch.setattr(compiler_module, "find_compiler", lambda required=True: None)
    monkeypatch.setenv("KVPIPE_CAPI_LIB", capi.path)
    monkeypatch.delenv("KVPIPE_COMPILER", raising=False)
    assert isinstance(kvpipe.get_compiler(), CAPICompiler)
    assert run_opt(RING, ["cse"]).count("kvpipe.step") == 1


def test_auto_prefers_kvpipe_opt(compiler, monkeypatch):
    monkeypatch.delenv("KVPIPE_COMPILER", raising=False)
    monkeypatch.setenv("KVPIPE_OPT", compiler)
    assert isinstance(kvpipe.get_compiler(), OptCompiler)


def test_forcing_an_unknown_backend(monkeypatch):
    monkeypatch.setenv("KVPIPE_COMPILER", "gcc")
    with pytest.raises(ValueError, match="unknown compiler backend 'gcc'.*KVPIPE_COMPILER"):
        kvpipe.get_compiler()


def test_library_env_must_be_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("KVPIPE_CAPI_LIB", str(tmp_path / "missing.so"))
    with pytest.raises(CompilerNotFoundError, match="KVPIPE_CAPI_LIB=.*missing.so.* is not a file"):
        kvpipe.get_compiler("capi")


def test_library_that_does_not_load(tmp_path, monkeypatch):
    fake = tmp_path / "libKVPipeCAPI.so"
    fake.write_text("not a library")
    monkeypatch.setenv("KVPIPE_CAPI_LIB", str(fake))
    with pytest.raises(CompilerNotFoundError, match="cannot load the kvpipe C API library"):
        kvpipe.get_compiler("capi")


def test_library_not_found_names_every_place(tmp_path, monkeypatch):
    monkeypatch.delenv("KVPIPE_CAPI_LIB", raising=False)
    monkeypatch.delenv("KVPIPE_OPT", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(compiler_module, "_REPO_ROOT", tmp_path)
    monkeypatch.setattr(compiler_module, "_linker_search", lambda: None)
    with pytest.raises(CompilerNotFoundError) as info:
        kvpipe.get_compiler("capi")
    message = str(info.value)
    for place in ("libKVPipeCAPI.so not found", "KVPIPE_CAPI_LIB",
                  str(tmp_path / "build" / "lib" / "libKVPipeCAPI.so"), "LD_LIBRARY_PATH"):
        assert place in message
    assert kvpipe.get_compiler("capi", required=False) is None
    with pytest.raises(CompilerNotFoundError, match="neither kvpipe-opt .* nor libKVPipeCAPI.so"):
        kvpipe.get_compiler("auto")
