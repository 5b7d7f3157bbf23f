"""Driving ``kvpipe-opt``: find the compiler and run pass pipelines on IR text.

The compiler is looked up, in order, through the ``KVPIPE_OPT`` environment
variable, the build tree of the source checkout this package lives in
(``<repo>/build/bin/kvpipe-opt``), and ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional, Sequence

_REPO_ROOT = Path(__file__).resolve().parent.parent.parent


class CompilerNotFoundError(FileNotFoundError):
    """No ``kvpipe-opt`` could be found."""


class CompilerError(RuntimeError):
    """``kvpipe-opt`` rejected its input or failed.

    Attributes:
        diagnostics: the compiler's diagnostics (its standard error), with
            locations, as MLIR prints them.
        returncode: the compiler's exit status (negative: killed by a signal).
        command: the command line that was run.
    """

    def __init__(self, diagnostics: str, returncode: int, command: Sequence[str]):
        self.diagnostics = diagnostics
        self.returncode = returncode
        self.command = list(command)
        summary = diagnostics.strip() or f"kvpipe-opt exited with status {returncode}"
        super().__init__(summary)


def find_compiler(required: bool = True) -> Optional[str]:
    """Returns the path of ``kvpipe-opt``, or None when absent and not required."""
    candidates = []
    env = os.environ.get("KVPIPE_OPT")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise CompilerNotFoundError(
                f"KVPIPE_OPT={env!r} is not an executable file")
        return env
    candidates.append(_REPO_ROOT / "build" / "bin" / "kvpipe-opt")
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    found = shutil.which("kvpipe-opt")
    if found:
        return found
    if required:
        raise CompilerNotFoundError(
            "kvpipe-opt not found: set KVPIPE_OPT, build the project "
            f"(expected {candidates[0]}), or put kvpipe-opt on PATH")
    return None


def compiler_release(compiler: Optional[str] = None) -> str:
    """The kvpipe release a ``kvpipe-opt`` was built as (``kvpipe-opt --version``)."""
    exe = compiler or find_compiler()
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.strip().startswith("kvpipe "):
            return line.split()[1]
    raise CompilerError(f"{exe} --version does not name a kvpipe release:\n{out}", 0, [exe])


def run_opt(ir: str, passes: Sequence[str] = (), *,
            pass_pipeline: Optional[str] = None,
            extra_args: Sequence[str] = (),
            compiler: Optional[str] = None,
            timeout: Optional[float] = 600.0) -> str:
    """Runs ``kvpipe-opt`` on ``ir`` and returns the output IR text.

    Args:
        ir: MLIR text.
        passes: pass flags, e.g. ``["--canonicalize", "--kvpipe-to-ptx"]``
            (the leading dashes may be omitted).
        pass_pipeline: a textual pipeline for ``--pass-pipeline``, e.g.
            ``"builtin.module(canonicalize)"``; exclusive with ``passes``.
        extra_args: further command-line options.
        compiler: the ``kvpipe-opt`` to use (default: :func:`find_compiler`).
        timeout: seconds before the compiler is killed.

    Raises:
        CompilerError: the compiler reported an error; ``.diagnostics`` holds
            what it printed, with locations.
        CompilerNotFoundError: no compiler was found.
    """
    if passes and pass_pipeline:
        raise ValueError("give either passes or pass_pipeline, not both")
    exe = compiler or find_compiler()
    cmd = [exe]
    for p in passes:
        cmd.append(p if p.startswith("-") else "--" + p)
    if pass_pipeline:
        cmd.append(f"--pass-pipeline={pass_pipeline}")
    cmd.extend(extra_args)
    cmd.append("-")
    try:
        proc = subprocess.run(cmd, input=ir, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise CompilerError(f"kvpipe-opt timed out after {timeout} s", -1, cmd) from e
    if proc.returncode != 0:
        raise CompilerError(proc.stderr, proc.returncode, cmd)
    return proc.stdout
