"""Finding the kvpipe compiler and running pass pipelines on IR text.

Two backends compile IR text, with the same results:

* ``kvpipe-opt``, run as a subprocess (:class:`OptCompiler`);
* ``libKVPipeCAPI.so``, the C API library, loaded into this process with
  ctypes (:class:`CAPICompiler`): its ``kvpipeCompileText`` parses, runs a
  pipeline and prints as ``kvpipe-opt`` does. It serves installations that
  ship the library without the tool, and needs no process per compilation.

:func:`get_compiler` picks one. ``KVPIPE_COMPILER=opt`` or ``capi`` (or its
``backend`` argument) forces a backend; by default it is ``kvpipe-opt`` where
one is found, because a subprocess can be timed out and a crash of the
compiler cannot take the calling process down, and the library otherwise.

``kvpipe-opt`` is looked up, in order, through the ``KVPIPE_OPT`` environment
variable, the build tree of the source checkout this package lives in
(``<repo>/build/bin/kvpipe-opt``), and ``PATH``. The library, in order,
through ``KVPIPE_CAPI_LIB``, the build tree (``<repo>/build/lib``), the
``lib`` directory of the installation a ``kvpipe-opt`` named by ``KVPIPE_OPT``
or found on ``PATH`` belongs to (``<prefix>/bin/kvpipe-opt`` and
``<prefix>/lib/libKVPipeCAPI.so``, as ``cmake --install`` lays them out), and
the dynamic linker's search path (``ctypes.util.find_library``).
"""

from __future__ import annotations

import abc
import ctypes
import ctypes.util
import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import List, Optional, Sequence, Union

_REPO_ROOT = Path(__file__).resolve().parent.parent.parent
_LIBRARY_FILE = "libKVPipeCAPI.so"
#: Values of ``KVPIPE_COMPILER`` (and of :func:`get_compiler`'s ``backend``).
BACKENDS = ("auto", "opt", "capi")


class CompilerNotFoundError(FileNotFoundError):
    """No compiler could be found (or the one named could not be used)."""


class CompilerError(RuntimeError):
    """The compiler rejected its input or failed.

    Attributes:
        diagnostics: the compiler's diagnostics (``kvpipe-opt``'s standard
            error), with locations, as MLIR prints them.
        returncode: ``kvpipe-opt``'s exit status (negative: killed by a
            signal); 1 when the C API library reports a failure.
        command: the command line that was run; for the C API library, its
            path, the entry point and the pipeline.
    """

    def __init__(self, diagnostics: str, returncode: int, command: Sequence[str]):
        self.diagnostics = diagnostics
        self.returncode = returncode
        self.command = list(command)
        summary = diagnostics.strip() or f"kvpipe-opt exited with status {returncode}"
        super().__init__(summary)


class Compiler(abc.ABC):
    """A kvpipe compiler build that compiles IR text, whatever its backend.

    Attributes:
        kind: ``"opt"`` or ``"capi"``.
        path: the file of the build: ``kvpipe-opt``, or the library.
    """

    kind: str

    def __init__(self, path: str):
        self.path = path

    def run(self, ir: str, passes: Sequence[str] = (), *,
            pass_pipeline: Optional[str] = None,
            extra_args: Sequence[str] = (),
            timeout: Optional[float] = 600.0) -> str:
        """Compiles ``ir`` and returns the output IR text (see :func:`run_opt`)."""
        if passes and pass_pipeline:
            raise ValueError("give either passes or pass_pipeline, not both")
        return self._run(ir, list(passes), pass_pipeline, list(extra_args), timeout)

    @abc.abstractmethod
    def _run(self, ir: str, passes: List[str], pass_pipeline: Optional[str],
             extra_args: List[str], timeout: Optional[float]) -> str:
        ...

    @abc.abstractmethod
    def release(self) -> str:
        """The kvpipe release this build reports (``kvpipe-opt --version``)."""

    def identity(self) -> str:
        """Identifies the build, for cache keys: the digest of its file."""
        digest = hashlib.sha256()
        with open(self.path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()[:16]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"


class OptCompiler(Compiler):
    """``kvpipe-opt``, run as a subprocess for each compilation."""

    kind = "opt"

    def _run(self, ir, passes, pass_pipeline, extra_args, timeout):
        cmd = [self.path]
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

    def release(self) -> str:
        out = subprocess.run([self.path, "--version"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.strip().startswith("kvpipe "):
                return line.split()[1]
        raise CompilerError(f"{self.path} --version does not name a kvpipe release:\n{out}",
                            0, [self.path])


class _StringRef(ctypes.Structure):
    """MlirStringRef: a pointer and a length; the text is not NUL-terminated."""

    _fields_ = [("data", ctypes.c_void_p), ("length", ctypes.c_size_t)]

    @classmethod
    def to(cls, data: bytes) -> "_StringRef":
        """A reference to ``data``, which must outlive it (no copy is made)."""
        return cls(ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p), len(data))

    def read(self) -> bytes:
        return ctypes.string_at(self.data, self.length) if self.length else b""


class _LogicalResult(ctypes.Structure):
    """MlirLogicalResult: nonzero on success."""

    _fields_ = [("value", ctypes.c_int8)]


#: MlirStringCallback: void (*)(MlirStringRef, void *userData).
_StringCallback = ctypes.CFUNCTYPE(None, _StringRef, ctypes.c_void_p)
#: The NULL callback: kvpipeCompileText then does not print the IR.
_NO_CALLBACK = _StringCallback()


def passes_to_pipeline(passes: Sequence[str]) -> str:
    """The textual pipeline that does what ``kvpipe-opt`` pass flags do.

    ``--name`` becomes the element ``name`` and ``--name=options`` becomes
    ``name{options}`` (a pass flag's value is its option list), in order,
    anchored on ``builtin.module``: ``["--cse", "--kvpipe-to-ptx=ptx-file=k.ptx
    abi-file=k.json"]`` gives ``builtin.module(cse,kvpipe-to-ptx{ptx-file=k.ptx
    abi-file=k.json})``. No flags give the empty pipeline (parse, verify and
    print).

    A textual pipeline nests explicitly, where ``kvpipe-opt`` nests flags
    implicitly: a pass restricted to ``func.func`` fails ("did you intend to
    nest?"); give it as ``pass_pipeline="builtin.module(func.func(pass))"``.
    """
    elements = []
    for flag in passes:
        name, has_options, options = flag.lstrip("-").partition("=")
        if not name:
            raise ValueError(f"{flag!r} is not a pass flag")
        elements.append(f"{name}{{{options}}}" if has_options else name)
    return f"builtin.module({','.join(elements)})" if elements else ""


def _output_path(extra_args: Sequence[str], library: str) -> Optional[str]:
    """The ``-o PATH`` among ``extra_args``: the one option of ``kvpipe-opt``
    the library can honour (the package passes ``-o /dev/null`` when it
    wants only a pass's files); any other is an error rather than ignored."""
    path, rest, args = None, [], list(extra_args)
    while args:
        arg = args.pop(0)
        if arg in ("-o", "--o") and args:
            path = args.pop(0)
        elif arg.startswith(("-o=", "--o=")):
            path = arg.partition("=")[2]
        else:
            rest.append(arg)
    if rest:
        raise ValueError(
            f"the C API library {library} cannot honour extra_args {rest}: it takes "
            "only '-o PATH'; use kvpipe-opt for other options (KVPIPE_COMPILER=opt)")
    return path


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _file_defining(function: object) -> Optional[str]:
    """The file of the loaded library that defines ``function`` (dladdr)."""
    # dladdr is in libc since glibc 2.34, in libdl before.
    for libc in (None, "libdl.so.2"):
        try:
            dladdr = ctypes.CDLL(libc).dladdr
            break
        except (OSError, AttributeError):
            continue
    else:
        return None
    info = _DlInfo()
    if not dladdr(ctypes.cast(function, ctypes.c_void_p), ctypes.byref(info)):
        return None
    return os.fsdecode(info.dli_fname) if info.dli_fname else None


class CAPICompiler(Compiler):
    """``libKVPipeCAPI.so``, loaded into this process with ctypes.

    Each compilation is one call of ``kvpipeCompileText`` (with its own
    MLIR context), with the same output and diagnostics as ``kvpipe-opt``.
    It runs in this process: ``timeout`` cannot interrupt it, and a crash of
    the compiler ends the process.
    """

    kind = "capi"

    def __init__(self, path: str):
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise CompilerNotFoundError(f"cannot load the kvpipe C API library {path}: {e}") from e
        try:
            compile_text, version = lib.kvpipeCompileText, lib.kvpipeGetVersion
        except AttributeError as e:
            raise CompilerNotFoundError(
                f"{path} lacks kvpipeCompileText/kvpipeGetVersion: it was built from an "
                "older kvpipe; rebuild it") from e
        compile_text.argtypes = [_StringRef, _StringRef, _StringRef,
                                 _StringCallback, _StringCallback, ctypes.c_void_p]
        compile_text.restype = _LogicalResult
        version.argtypes = []
        version.restype = _StringRef
        # A library found by the dynamic linker is named by its file name
        # only; identity() hashes the file that was actually loaded.
        if os.sep not in path:
            path = _file_defining(compile_text) or path
        super().__init__(path)
        self._compile_text = compile_text
        self._version = version

    def _run(self, ir, passes, pass_pipeline, extra_args, timeout):
        output_path = _output_path(extra_args, self.path)
        pipeline = pass_pipeline if pass_pipeline else passes_to_pipeline(passes)
        output: List[bytes] = []
        diagnostics: List[bytes] = []
        # The callbacks only collect: an exception raised in one could not
        # cross the C frames anyway.
        on_output = _StringCallback(lambda text, _: output.append(text.read()))
        on_diagnostic = _StringCallback(lambda text, _: diagnostics.append(text.read()))
        ir_bytes, pipeline_bytes = ir.encode(), pipeline.encode()
        result = self._compile_text(
            _StringRef.to(ir_bytes), _StringRef.to(b""), _StringRef.to(pipeline_bytes),
            _NO_CALLBACK if output_path == os.devnull else on_output, on_diagnostic, None)
        if not result.value:
            text = b"".join(diagnostics).decode("utf-8", errors="replace")
            raise CompilerError(text or "kvpipeCompileText failed without a diagnostic", 1,
                                [self.path, "kvpipeCompileText", pipeline])
        text = b"".join(output).decode("utf-8", errors="replace")
        if output_path is None:
            return text
        if output_path != os.devnull:
            Path(output_path).write_text(text)
        return ""

    def release(self) -> str:
        return self._version().read().decode()


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


@functools.lru_cache(maxsize=1)
def _linker_search() -> Optional[str]:
    # Cached: find_library runs ldconfig and a compiler, and the dynamic
    # linker's search path does not change while the process runs.
    return ctypes.util.find_library("KVPipeCAPI")


def find_library(required: bool = True) -> Optional[str]:
    """Returns the path (or, when found by the dynamic linker, the file name)
    of ``libKVPipeCAPI.so``, or None when absent and not required."""
    env = os.environ.get("KVPIPE_CAPI_LIB")
    if env:
        if not os.path.isfile(env):
            raise CompilerNotFoundError(f"KVPIPE_CAPI_LIB={env!r} is not a file")
        return env
    build_tree = _REPO_ROOT / "build" / "lib" / _LIBRARY_FILE
    candidates = [build_tree]
    for opt in (os.environ.get("KVPIPE_OPT"), shutil.which("kvpipe-opt")):
        if opt:
            candidates.append(Path(opt).resolve().parent.parent / "lib" / _LIBRARY_FILE)
    for path in candidates:
        if path.is_file():
            return str(path)
    found = _linker_search()
    if found:
        return found
    if required:
        raise CompilerNotFoundError(
            f"{_LIBRARY_FILE} not found: set KVPIPE_CAPI_LIB, build the project "
            f"(expected {build_tree}), install kvpipe (the library next to kvpipe-opt, "
            "in <prefix>/lib), or put it on the dynamic linker's path (LD_LIBRARY_PATH)")
    return None


def get_compiler(backend: Optional[str] = None, required: bool = True) -> Optional[Compiler]:
    """The compiler to use, or None when there is none and none is required.

    Args:
        backend: ``"opt"`` (``kvpipe-opt``), ``"capi"`` (the C API library)
            or ``"auto"``; default: ``KVPIPE_COMPILER``, else ``"auto"``:
            ``kvpipe-opt`` where found, else the library.
        required: raise :class:`CompilerNotFoundError` rather than return None.
    """
    backend = backend or os.environ.get("KVPIPE_COMPILER") or "auto"
    if backend not in BACKENDS:
        raise ValueError(f"unknown compiler backend {backend!r} (KVPIPE_COMPILER): "
                         f"expected one of {', '.join(BACKENDS)}")
    if backend in ("auto", "opt"):
        exe = find_compiler(required=required and backend == "opt")
        if exe:
            return OptCompiler(exe)
    if backend in ("auto", "capi"):
        library = find_library(required=required and backend == "capi")
        if library:
            return CAPICompiler(library)
    if required:
        raise CompilerNotFoundError(
            "no kvpipe compiler found: neither kvpipe-opt (KVPIPE_OPT, the build tree, "
            f"PATH) nor {_LIBRARY_FILE} (KVPIPE_CAPI_LIB, the build tree, next to "
            "kvpipe-opt, the dynamic linker's path); build the project or install kvpipe")
    return None


def _as_compiler(compiler: Union[str, Compiler, None]) -> Compiler:
    if isinstance(compiler, Compiler):
        return compiler
    return OptCompiler(compiler) if compiler else get_compiler()


def compiler_release(compiler: Union[str, Compiler, None] = None) -> str:
    """The kvpipe release a compiler was built as (``kvpipe-opt --version``).

    ``compiler``: a :class:`Compiler`, the path of a ``kvpipe-opt``, or None
    for :func:`get_compiler`'s.
    """
    return _as_compiler(compiler).release()


def run_opt(ir: str, passes: Sequence[str] = (), *,
            pass_pipeline: Optional[str] = None,
            extra_args: Sequence[str] = (),
            compiler: Union[str, Compiler, None] = None,
            timeout: Optional[float] = 600.0) -> str:
    """Compiles ``ir`` as ``kvpipe-opt`` would and returns the output IR text.

    Args:
        ir: MLIR text.
        passes: pass flags, e.g. ``["--canonicalize", "--kvpipe-to-ptx"]``
            (the leading dashes may be omitted); for the C API library they
            become a pipeline on ``builtin.module`` (:func:`passes_to_pipeline`).
        pass_pipeline: a textual pipeline for ``--pass-pipeline``, e.g.
            ``"builtin.module(canonicalize)"``; exclusive with ``passes``.
        extra_args: further ``kvpipe-opt`` options; the C API library takes
            only ``-o PATH`` and raises ValueError for others.
        compiler: a :class:`Compiler`, or the path of the ``kvpipe-opt`` to
            use (default: :func:`get_compiler`'s: ``kvpipe-opt`` where found,
            else the C API library).
        timeout: seconds before ``kvpipe-opt`` is killed; the C API library
            runs in this process and cannot be interrupted.

    Raises:
        CompilerError: the compiler reported an error; ``.diagnostics`` holds
            what it printed, with locations.
        CompilerNotFoundError: no compiler was found.
    """
    if passes and pass_pipeline:
        raise ValueError("give either passes or pass_pipeline, not both")
    return _as_compiler(compiler).run(ir, passes, pass_pipeline=pass_pipeline,
                                      extra_args=extra_args, timeout=timeout)
