"""`pip install ./python` into a fresh virtual environment gives a working
`kvpipe` package and console script, with either compiler backend."""

import os
import subprocess
import venv
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh virtual environment with the package installed: its directory."""
    env_dir = tmp_path_factory.mktemp("packaging") / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # The build backend (setuptools >= 64) comes from PyPI, as for any user.
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", str(PACKAGE)],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stdout + install.stderr
    return env_dir


def _compile(env_dir, cwd, env):
    """Runs the installed `kvpipe compile` for one kernel into cwd/cache."""
    env = dict(env, KVPIPE_CACHE_DIR=str(cwd / "cache"))
    env.pop("PYTHONPATH", None)
    result = subprocess.run([str(env_dir / "bin" / "kvpipe"), "compile", "--head-dim", "64",
                             "--dtype", "bf16", "--causal", "yes"],
                            capture_output=True, text=True, cwd=cwd, env=env)
    assert result.returncode == 0, result.stderr
    assert "kvpipe_attention_d64_bf16_causal" in result.stdout
    assert any((cwd / "cache").iterdir())


def test_pip_install_in_fresh_venv(installed, tmp_path, compiler):
    env = dict(os.environ, KVPIPE_OPT=compiler)
    env.pop("PYTHONPATH", None)
    out = subprocess.run([str(installed / "bin" / "python"), "-c",
                          "import kvpipe, sys; print(kvpipe.__file__, kvpipe.__version__)"],
                         check=True, capture_output=True, text=True, cwd=tmp_path, env=env).stdout
    assert str(installed) in out and "0.1.0" in out
    # The license pyproject.toml declares ships with the package.
    license_files = subprocess.run(
        [str(installed / "bin" / "python"), "-c",
         "import importlib.metadata as m; "
         "print([str(f) for f in m.files('kvpipe') if 'LICENSE' in str(f)])"],
        check=True, capture_output=True, text=True, cwd=tmp_path, env=env).stdout
    assert "LICENSE" in license_files
    _compile(installed, tmp_path, env)


def test_installed_package_compiles_through_the_library(installed, tmp_path, capi):
    # The installed package is outside the source tree: it finds the library
    # through KVPIPE_CAPI_LIB alone.
    env = dict(os.environ, KVPIPE_CAPI_LIB=capi.path, KVPIPE_COMPILER="capi")
    env.pop("KVPIPE_OPT", None)
    _compile(installed, tmp_path, env)
