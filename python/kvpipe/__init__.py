"""kvpipe: Hopper attention kernels from the kvpipe MLIR dialect.

The package drives the project's compiler (``kvpipe-opt``) and, on a machine
with a GPU, loads and launches the kernels it produced.
"""

from kvpipe.compiler import CompilerError, CompilerNotFoundError, find_compiler, run_opt

__version__ = "0.1.0"

__all__ = [
    "CompilerError",
    "CompilerNotFoundError",
    "find_compiler",
    "run_opt",
    "__version__",
]
