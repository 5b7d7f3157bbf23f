"""kvpipe: Hopper attention kernels from the kvpipe MLIR dialect.

The package drives the project's compiler (``kvpipe-opt``, or its C API
library through ctypes), caches the kernels it produces, and on a machine with
a GPU loads and launches them:

    import kvpipe
    o = kvpipe.attention(q, k, v, causal=True)
    o, lse = kvpipe.attention(q, k, v, return_lse=True, layout="bshd")
    kernel = kvpipe.compile_attention(head_dim=128, dtype="bf16", causal=False)
"""

from kvpipe import _log
from kvpipe.attention import attention
from kvpipe.compiler import (Compiler, CompilerError, CompilerNotFoundError, find_compiler,
                             get_compiler, run_opt)
from kvpipe.kernels import CompiledKernel, KernelNotAvailableError, compile_attention

__version__ = "0.1.0"

__all__ = [
    "CompiledKernel",
    "Compiler",
    "CompilerError",
    "CompilerNotFoundError",
    "KernelNotAvailableError",
    "attention",
    "compile_attention",
    "find_compiler",
    "get_compiler",
    "run_opt",
    "__version__",
]

_log.configure()  # KVPIPE_LOG=1: decisions to standard error
