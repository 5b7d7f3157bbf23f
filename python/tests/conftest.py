import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kvpipe  # noqa: E402


@pytest.fixture(scope="session")
def compiler():
    path = kvpipe.find_compiler(required=False)
    if path is None:
        pytest.skip("kvpipe-opt is not built")
    return path


@pytest.fixture(scope="session")
def capi():
    """The C API library (libKVPipeCAPI.so) as a compiler."""
    path = kvpipe.compiler.find_library(required=False)
    if path is None:
        pytest.skip("libKVPipeCAPI.so is not built")
    return kvpipe.compiler.CAPICompiler(path)
