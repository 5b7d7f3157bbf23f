"""What the optional tests need, and pytest marks that skip them, with the
reason, where it is missing: cuda-bindings, torch, a CUDA GPU.

``importlib.util.find_spec("cuda.bindings")`` is not a safe probe: it
imports the parent package ``cuda`` and raises ModuleNotFoundError when no
``cuda`` package is installed at all, which stops pytest at collection.
"""

import importlib.util

import pytest


def module_available(name: str) -> bool:
    """Whether ``name`` (dotted) can be imported, without raising when a
    parent package is missing."""
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # ModuleNotFoundError of a parent package
        return False


HAVE_BINDINGS = module_available("cuda.bindings")
HAVE_TORCH = module_available("torch")


def gpu_available() -> bool:
    """torch sees a CUDA GPU and cuda-bindings is there to drive it."""
    if not (HAVE_BINDINGS and HAVE_TORCH):
        return False
    import torch

    return torch.cuda.is_available()


needs_bindings = pytest.mark.skipif(not HAVE_BINDINGS, reason="cuda-bindings is not installed")
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
gpu = pytest.mark.skipif(not gpu_available(),
                         reason="needs torch with a CUDA GPU and cuda-bindings")
