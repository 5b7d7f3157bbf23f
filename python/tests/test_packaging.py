"""`pip install ./python` into a fresh virtual environment gives a working
`kvpipe` package and console script."""

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent


def test_pip_install_in_fresh_venv(tmp_path, compiler):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # The build backend (setuptools >= 64) comes from PyPI, as for any user.
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", str(PACKAGE)],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stdout + install.stderr
    env = dict(os.environ, KVPIPE_OPT=compiler, KVPIPE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("PYTHONPATH", None)
    out = subprocess.run([str(python), "-c", "import kvpipe, sys; print(kvpipe.__file__, kvpipe.__version__)"],
                         check=True, capture_output=True, text=True, cwd=tmp_path, env=env).stdout
    assert str(env_dir) in out and "0.1.0" in out
    script = env_dir / "bin" / "kvpipe"
    result = subprocess.run([str(script), "compile", "--head-dim", "64", "--dtype", "bf16",
                             "--causal", "yes"], capture_output=True, text=True, cwd=tmp_path,
                            env=env)
    assert result.returncode == 0, result.stderr
    assert "kvpipe_attention_d64_bf16_causal" in result.stdout
    assert any((tmp_path / "cache").iterdir())
