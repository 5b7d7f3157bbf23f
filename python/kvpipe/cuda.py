"""The kvpipe CUDA runtime: loading and launching compiled kernels.

A thin layer over the driver API of ``cuda-bindings`` (``cuda.bindings.driver``)
in pure Python, so that it runs wherever that package and a driver are
installed, without a compiler. ``cuda-bindings`` is imported on first use, so
``import kvpipe`` works without it; using the runtime without it raises a
``RuntimeError`` that says how to install it.

Typical use::

    ensure_context()                       # torch's device, or device 0
    module = Module(ptx_text)              # or cubin bytes
    kernel = module.function("attn_fwd")
    kernel.set_max_dynamic_shared_memory(200 * 1024)
    kernel.launch((132,), (384,), [TensorMapArg(desc), PtrArg(out.data_ptr()),
                                   I32Arg(seq_len), F32Arg(scale)],
                  shared_mem=200 * 1024)

``Kernel.launch`` neither synchronises nor allocates device memory, so that
launches can be captured in CUDA graphs; errors that the kernel raises while
it runs (an illegal address, say) surface at ``synchronize()``.
"""

from __future__ import annotations

import ctypes
import importlib
import numbers
import operator
import struct
import sys
from types import ModuleType
from typing import Any, Optional, Sequence, Union

__all__ = [
    "ArgLayout",
    "CudaError",
    "DriverNotFoundError",
    "F32Arg",
    "I32Arg",
    "I64Arg",
    "Kernel",
    "KernelArg",
    "Module",
    "PackedArgs",
    "PtrArg",
    "TensorMapArg",
    "check",
    "driver",
    "ensure_context",
    "init_driver",
    "launch_config",
    "pack_args",
    "synchronize",
]

_INSTALL_HINT = (
    "cuda-bindings is not installed: the kvpipe runtime needs it to load and launch "
    "kernels (pip install cuda-bindings, or pip install 'kvpipe[gpu]')")

_driver_module: Optional[ModuleType] = None


def driver() -> ModuleType:
    """Returns ``cuda.bindings.driver``, imported on first use.

    Raises:
        RuntimeError: cuda-bindings is not installed.
    """
    global _driver_module
    if _driver_module is None:
        try:
            _driver_module = importlib.import_module("cuda.bindings.driver")
        except ImportError as exc:
            raise RuntimeError(_INSTALL_HINT) from exc
    return _driver_module


# ---------------------------------------------------------------------------
# Errors


class CudaError(RuntimeError):
    """A CUDA driver call failed.

    Attributes:
        code: the ``CUresult`` (None when the driver library itself could not
            be loaded, see ``DriverNotFoundError``).
        name: the result's name, e.g. ``"CUDA_ERROR_ILLEGAL_ADDRESS"``.
        message: the driver's description of the result.
        context: what kvpipe was doing (kernel name, launch configuration,
            ...), or None.
        log: a log that explains the failure (the PTX JIT's error log), or None.
    """

    def __init__(self, code: Any, context: Optional[str] = None, *,
                 name: Optional[str] = None, message: Optional[str] = None,
                 log: Optional[str] = None):
        self.code = code
        self.log = log
        if name is None or message is None:
            looked_up_name, looked_up_message = _describe_result(code)
            name = name if name is not None else looked_up_name
            message = message if message is not None else looked_up_message
        self.name = name
        self.message = message
        self.context = context
        super().__init__(self._format())

    def _format(self) -> str:
        text = f"{self.name}: {self.message}" if self.message else self.name
        if self.context:
            text = f"{self.context}: {text}"
        return f"{text}\n{self.log}" if self.log else text


class DriverNotFoundError(CudaError):
    """The CUDA driver library (``libcuda.so.1``) could not be loaded: no GPU driver."""

    def __init__(self, context: Optional[str] = None):
        super().__init__(
            None, context, name="CUDA driver not found",
            message="libcuda.so.1 could not be loaded (is an NVIDIA driver installed?)")


def _describe_result(code: Any) -> tuple[str, str]:
    """Returns (name, description) of a CUresult, from the driver when it can."""
    try:
        drv = driver()
    except RuntimeError:
        return f"CUresult {code!r}", ""
    try:
        err, name = drv.cuGetErrorName(code)
        err2, text = drv.cuGetErrorString(code)
        if err == 0 and err2 == 0:
            return name.decode(), text.decode()
    # Describing an error must never raise in its place: without a loadable
    # driver (or for an unknown code) fall back to the enum's own name.
    except Exception:  # noqa: BLE001
        pass
    try:
        return drv.CUresult(int(code)).name, ""
    except (ValueError, TypeError):
        return f"CUresult {code!r}", ""


def check(result: Any, context: Optional[str] = None) -> Any:
    """Unwraps a cuda-bindings return value, raising CudaError on failure.

    cuda-bindings returns ``(CUresult, *outputs)``. Returns None when there is
    no output, the output when there is one, and the tuple of outputs otherwise.
    """
    if isinstance(result, tuple):
        code, outputs = result[0], result[1:]
    else:
        code, outputs = result, ()
    if code != 0:  # CUDA_SUCCESS; CUresult compares as an int
        raise CudaError(code, context)
    if not outputs:
        return None
    return outputs[0] if len(outputs) == 1 else outputs


def _call(function: str, *args: Any, context: Optional[str] = None) -> Any:
    """Calls ``cuda.bindings.driver.<function>(*args)`` and checks its result."""
    fn = getattr(driver(), function)
    try:
        result = fn(*args)
    except RuntimeError as exc:
        # cuda-bindings loads libcuda on the first call and reports a missing
        # driver as a RuntimeError: a bare one naming libcuda (12.x), or
        # cuda.pathfinder's DynamicLibNotFoundError (13.x), which names the
        # library "cuda". Make it a CudaError like the others.
        if "libcuda" in str(exc) or type(exc).__name__ == "DynamicLibNotFoundError":
            raise DriverNotFoundError(context) from exc
        raise
    return check(result, context)


# ---------------------------------------------------------------------------
# Contexts

_driver_initialised = False
_primary_contexts: dict[int, Any] = {}  # device ordinal -> retained CUcontext


def init_driver() -> None:
    """Calls ``cuInit(0)`` once per process."""
    global _driver_initialised
    if not _driver_initialised:
        _call("cuInit", 0, context="initialising the CUDA driver (cuInit)")
        _driver_initialised = True


def _torch_cuda() -> Optional[ModuleType]:
    """Returns torch when it is importable and sees a GPU, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _device_ordinal(device: Any) -> int:
    """The CUDA device ordinal of ``device``: None, an int, ``"cuda[:N]"`` or a torch.device."""
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    index: Optional[int] = None
    if isinstance(device, str) and (device == "cuda" or device.startswith("cuda:")):
        index = int(device[len("cuda:"):]) if ":" in device else None
    elif getattr(device, "type", None) == "cuda":
        index = device.index
    elif device is not None:
        raise ValueError(f"device must be a CUDA device (an ordinal, 'cuda:N' or a "
                         f"torch.device), got {device!r}")
    if index is not None:
        return index
    torch = _torch_cuda()
    if torch is None:
        return 0
    torch.cuda.init()
    return torch.cuda.current_device()


def ensure_context(device: Any = None) -> Any:
    """Makes sure a CUDA context for ``device`` is current on this thread; returns it.

    ``device`` is an ordinal, ``"cuda:N"``, a torch.device, or None for torch's
    current device (device 0 without torch). A context already current on that
    device is kept (torch's, or one the caller made); otherwise the device's
    primary context -- the one torch and the CUDA runtime use -- is retained
    and made current, so kernels loaded here share memory with torch tensors.
    """
    ordinal = _device_ordinal(device)
    init_driver()
    current = _call("cuCtxGetCurrent", context="querying the current CUDA context")
    if current is not None and int(current) != 0:
        current_device = _call("cuCtxGetDevice", context="querying the current context's device")
        if int(current_device) == ordinal:
            return current
    context = _primary_contexts.get(ordinal)
    if context is None:
        dev = _call("cuDeviceGet", ordinal, context=f"getting CUDA device {ordinal}")
        context = _call("cuDevicePrimaryCtxRetain", dev,
                        context=f"retaining the primary context of CUDA device {ordinal}")
        _primary_contexts[ordinal] = context
    _call("cuCtxSetCurrent", context,
          context=f"making the primary context of CUDA device {ordinal} current")
    return context


# ---------------------------------------------------------------------------
# Streams and synchronisation


def _stream_handle(stream: Any) -> int:
    """The CUstream handle of ``stream`` as an int.

    None is torch's current stream when torch has initialised CUDA (looked up
    in sys.modules so that a launch never imports torch), else the legacy
    default stream 0.
    """
    if stream is None:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            return torch.cuda.current_stream().cuda_stream
        return 0
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream, ExternalStream
    if isinstance(handle, int):
        return handle
    if isinstance(stream, driver().CUstream):
        return int(stream)
    raise TypeError(f"stream must be a torch.cuda.Stream, a CUstream, an int handle or None, "
                    f"got {type(stream).__name__}")


def synchronize(stream: Any = None, context: Optional[str] = None) -> None:
    """Waits for ``stream`` (None: the whole current context) to finish.

    Faults raised by kernels while they ran (e.g. CUDA_ERROR_ILLEGAL_ADDRESS)
    are reported here, as CudaError; ``context`` describes what was running.
    """
    if stream is None:
        _call("cuCtxSynchronize", context=context or "synchronizing the CUDA context")
    else:
        handle = _stream_handle(stream)
        _call("cuStreamSynchronize", handle,
              context=context or f"synchronizing CUDA stream {handle:#x}")


# ---------------------------------------------------------------------------
# Kernel arguments


class KernelArg:
    """One kernel argument: host storage holding exactly the parameter's bytes.

    ``address`` points at the bytes; ``size`` is their number. The storage
    lives as long as the argument object.
    """

    __slots__ = ("_storage", "address")
    size: int = 0

    def __bytes__(self) -> bytes:
        return ctypes.string_at(self.address, self.size)

    def _store(self, storage: Any, address: Optional[int] = None) -> None:
        self._storage = storage
        self.address = ctypes.addressof(storage) if address is None else address

    def __repr__(self) -> str:
        return f"{type(self).__name__}({bytes(self).hex()})"


def _int_in_range(what: str, value: Any, low: int, high: int) -> int:
    """``value`` as an int, checked to lie in [low, high]."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, got bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {type(value).__name__}") from None
    if not low <= value <= high:
        raise ValueError(f"{what} must be in [{low}, {high}], got {value}")
    return value


class PtrArg(KernelArg):
    """A 64-bit device pointer (``.param .u64``): an int address or an object with ``data_ptr()``."""

    __slots__ = ()
    size = 8

    def __init__(self, ptr: Any):
        if hasattr(ptr, "data_ptr"):
            ptr = ptr.data_ptr()
        self._store(ctypes.c_uint64(_int_in_range("PtrArg", ptr, 0, 2**64 - 1)))


class I32Arg(KernelArg):
    """A signed 32-bit integer (``.param .s32`` / ``.u32`` below 2**31)."""

    __slots__ = ()
    size = 4

    def __init__(self, value: int):
        self._store(ctypes.c_int32(_int_in_range("I32Arg", value, -2**31, 2**31 - 1)))


class I64Arg(KernelArg):
    """A signed 64-bit integer (``.param .s64``)."""

    __slots__ = ()
    size = 8

    def __init__(self, value: int):
        self._store(ctypes.c_int64(_int_in_range("I64Arg", value, -2**63, 2**63 - 1)))


class F32Arg(KernelArg):
    """A 32-bit float (``.param .f32``)."""

    __slots__ = ()
    size = 4

    def __init__(self, value: float):
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise TypeError(f"F32Arg must be a float, got {type(value).__name__}")
        self._store(ctypes.c_float(value))


class TensorMapArg(KernelArg):
    """A TMA descriptor passed by value (``.param .align 64 .b8 p[128]``, grid-constant).

    The kernel reads the descriptor straight from its parameter space, so no
    device copy is made per launch (which keeps launches graph-capturable).
    """

    __slots__ = ()
    size = 128
    _ALIGN = 64

    def __init__(self, desc: Union[bytes, bytearray, memoryview]):
        desc = bytes(desc)
        if len(desc) != self.size:
            raise ValueError(f"TensorMapArg needs the 128 bytes of a CUtensorMap, "
                             f"got {len(desc)} bytes")
        # The driver copies parameters by their size, but keep the host copy
        # 64-byte aligned like the C type (alignas(64) CUtensorMap).
        buf = ctypes.create_string_buffer(self.size + self._ALIGN - 1)
        address = -(-ctypes.addressof(buf) // self._ALIGN) * self._ALIGN
        ctypes.memmove(address, desc, self.size)
        self._store(buf, address)


def pack_args(args: Sequence[KernelArg]) -> ctypes.Array:
    """Builds the ``void*[]`` that ``cuLaunchKernel`` takes as ``kernelParams``.

    Entry i is the address of argument i's bytes: the array points into the
    arguments' own storage, so keep ``args`` alive until the launch returns.
    """
    for i, arg in enumerate(args):
        if not isinstance(arg, KernelArg):
            raise TypeError(
                f"args[{i}] must be a kernel argument (PtrArg, I32Arg, I64Arg, F32Arg or "
                f"TensorMapArg), got {type(arg).__name__}")
    return (ctypes.c_void_p * len(args))(*[arg.address for arg in args])


class ArgLayout:
    """Where each argument of a kernel goes in one host buffer, by kind:
    ``"tensor_map"`` (128 bytes, 64-aligned), ``"pointer"`` (u64), ``"i32"``,
    ``"i64"``, ``"f32"``.

    ``pack`` writes every argument with one ``struct.pack_into`` and the
    ``void*[]`` that ``cuLaunchKernel`` takes after them: a launch costs a
    few microseconds of host time where an object per argument
    (``KernelArg``) costs tens, which a decode step's launch cannot afford.
    A layout is made once per kernel signature and used from any thread
    (each ``pack`` has its own buffer).
    """

    __slots__ = ("kinds", "offsets", "sizes", "tensor_maps", "pointers", "_struct",
                 "_pointers", "_pointer_offset", "_size")
    #: kind -> (struct code, size, host alignment).
    KINDS = {"tensor_map": ("128s", 128, 64), "pointer": ("Q", 8, 8), "i32": ("i", 4, 4),
             "i64": ("q", 8, 8), "f32": ("f", 4, 4)}

    def __init__(self, kinds: Sequence[str]):
        unknown = [kind for kind in kinds if kind not in self.KINDS]
        if unknown:
            raise ValueError(f"argument kinds must be among {sorted(self.KINDS)}, got {unknown}")
        self.kinds = tuple(kinds)
        fmt, offset, offsets = "<", 0, []
        for kind in self.kinds:
            code, size, align = self.KINDS[kind]
            padding = -offset % align
            if padding:
                fmt += f"{padding}x"
            offset += padding
            offsets.append(offset)
            fmt += code
            offset += size
        self.offsets = tuple(offsets)
        self.sizes = tuple(self.KINDS[kind][1] for kind in self.kinds)
        #: The positions of the tensor maps and of the pointers.
        self.tensor_maps = tuple(i for i, kind in enumerate(self.kinds) if kind == "tensor_map")
        self.pointers = tuple(i for i, kind in enumerate(self.kinds) if kind == "pointer")
        self._struct = struct.Struct(fmt)
        self._pointer_offset = offset + (-offset % 8)
        self._pointers = struct.Struct(f"<{len(self.kinds)}Q")
        self._size = self._pointer_offset + 8 * len(self.kinds)

    def pack(self, values: Sequence[Any]) -> "PackedArgs":
        """The arguments ``values`` (tensor maps as their 128 bytes, pointers
        and numbers as ints and floats), one per kind, in a new buffer.

        Raises:
            ValueError / TypeError: a value out of its kind's range or of the
                wrong type (as the ``KernelArg`` of its kind raises).
        """
        if len(values) != len(self.kinds):
            raise ValueError(f"{len(self.kinds)} arguments ({', '.join(self.kinds)}), got "
                             f"{len(values)}")
        for i in self.tensor_maps:  # (struct would pad or cut other lengths)
            if len(values[i]) != TensorMapArg.size:
                TensorMapArg(values[i])  # raises, naming what it needs
        buffer = ctypes.create_string_buffer(self._size + 63)
        start = -ctypes.addressof(buffer) % 64
        try:
            self._struct.pack_into(buffer, start, *values)
        except (struct.error, TypeError, OverflowError):
            # Each kind's own checks name what is wrong; a float beyond
            # f32's range is inf there, as ctypes stores it.
            for offset, kind, value in zip(self.offsets, self.kinds, values):
                arg = _ARG_CLASSES[kind](value)
                ctypes.memmove(ctypes.addressof(buffer) + start + offset, arg.address, arg.size)
        base = ctypes.addressof(buffer) + start
        self._pointers.pack_into(buffer, start + self._pointer_offset,
                                 *[base + offset for offset in self.offsets])
        return PackedArgs(self, buffer, base)


class PackedArgs(Sequence):
    """A kernel's arguments packed by an ``ArgLayout``: ``address`` is the
    ``void*[]`` for ``cuLaunchKernel``; item i is argument i as the
    ``KernelArg`` of its kind (a copy, for inspection)."""

    __slots__ = ("layout", "_buffer", "_base")

    def __init__(self, layout: ArgLayout, buffer: Any, base: int):
        self.layout = layout
        self._buffer = buffer  # keeps the bytes alive as long as this object
        self._base = base

    @property
    def address(self) -> int:
        return self._base + self.layout._pointer_offset

    def __len__(self) -> int:
        return len(self.layout.kinds)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        kind = self.layout.kinds[index]
        raw = ctypes.string_at(self._base + self.layout.offsets[index], self.layout.sizes[index])
        if kind == "tensor_map":
            return TensorMapArg(raw)
        if kind == "f32":
            return F32Arg(struct.unpack("<f", raw)[0])
        return _ARG_CLASSES[kind](int.from_bytes(raw, "little", signed=kind != "pointer"))


_ARG_CLASSES = {"tensor_map": TensorMapArg, "pointer": PtrArg, "i32": I32Arg, "i64": I64Arg,
                "f32": F32Arg}


# ---------------------------------------------------------------------------
# Launch configuration

_MAX_GRID = (2**31 - 1, 65535, 65535)
_MAX_BLOCK = (1024, 1024, 64)
Dim3 = tuple[int, int, int]


def _dim3(what: str, value: Any, limits: Sequence[int]) -> Dim3:
    try:
        dims: tuple[Any, ...] = (operator.index(value),)
    except TypeError:
        try:
            dims = tuple(value)
        except TypeError:
            raise ValueError(f"{what} must be an int or a tuple of 1 to 3 ints, "
                             f"got {value!r}") from None
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"{what} must have 1 to 3 dimensions, got {value!r}")
    out = []
    for axis, dim, limit in zip("xyz", dims, limits):
        try:
            dim = operator.index(dim)
        except TypeError:
            raise ValueError(f"{what}.{axis} must be a positive int, got {dim!r}") from None
        if not 1 <= dim <= limit:
            raise ValueError(f"{what}.{axis} must be in [1, {limit}], got {dim} ({what}={value!r})")
        out.append(dim)
    out += [1] * (3 - len(out))
    return out[0], out[1], out[2]


def launch_config(grid: Any, block: Any, max_threads_per_block: int = 1024) -> tuple[Dim3, Dim3]:
    """Validates a launch configuration and returns (grid, block) as 3-tuples.

    ``grid`` and ``block`` are ints or tuples of 1 to 3 positive ints.

    Raises:
        ValueError: naming the bad value.
    """
    grid3 = _dim3("grid", grid, _MAX_GRID)
    block3 = _dim3("block", block, _MAX_BLOCK)
    threads = block3[0] * block3[1] * block3[2]
    if threads > max_threads_per_block:
        raise ValueError(f"block={block!r} has {threads} threads; at most "
                         f"{max_threads_per_block} are allowed per block")
    return grid3, block3


# ---------------------------------------------------------------------------
# Modules and kernels

_ELF_MAGIC = b"\x7fELF"
_FATBIN_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50, little-endian
_JIT_LOG_BYTES = 16384


def _jit_log(buffer: bytearray) -> str:
    return bytes(buffer).split(b"\0", 1)[0].decode(errors="replace").strip()


class Module:
    """A CUmodule loaded from PTX text or a cubin/fatbin.

    ``ensure_context(device)`` is called first, so the module lands in the
    device's primary context (torch's device by default) unless another
    context of that device is current; its kernels run there. PTX is
    JIT-compiled by the driver; a failure raises CudaError with the JIT's error
    log. ``info_log`` keeps the JIT's informational output (ptxas warnings).
    """

    def __init__(self, image: Union[str, bytes], name: str = "<module>", device: Any = None):
        self.name = name
        self.context = ensure_context(device)
        data, is_ptx = self._image_bytes(image)
        drv = driver()
        error_log, info_log = bytearray(_JIT_LOG_BYTES), bytearray(_JIT_LOG_BYTES)
        opt = drv.CUjit_option
        options = [opt.CU_JIT_ERROR_LOG_BUFFER, opt.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                   opt.CU_JIT_INFO_LOG_BUFFER, opt.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES]
        values = [error_log, _JIT_LOG_BYTES, info_log, _JIT_LOG_BYTES]
        what = "JIT-compiling PTX" if is_ptx else "loading a cubin"
        context = f"{what} for module {name!r}"
        try:
            self.handle = _call("cuModuleLoadDataEx", data, len(options), options, values,
                                context=context)
        except CudaError as exc:
            log = _jit_log(error_log)
            if log and exc.code is not None:
                raise CudaError(exc.code, context, log=log) from None
            raise
        self.info_log = _jit_log(info_log)
        self._kernels: dict[str, Kernel] = {}

    @staticmethod
    def _image_bytes(image: Union[str, bytes]) -> tuple[bytes, bool]:
        """The bytes to hand to the driver, and whether they are PTX."""
        if isinstance(image, str):
            image = image.encode()
        elif not isinstance(image, (bytes, bytearray, memoryview)):
            raise TypeError(f"a module image must be PTX text or cubin bytes, "
                            f"got {type(image).__name__}")
        image = bytes(image)
        if image.startswith((_ELF_MAGIC, _FATBIN_MAGIC)):
            return image, False
        # The driver finds the end of PTX by its NUL terminator.
        return (image if image.endswith(b"\0") else image + b"\0"), True

    def function(self, name: str) -> "Kernel":
        """Returns the kernel ``name`` (cached per module)."""
        kernel = self._kernels.get(name)
        if kernel is None:
            handle = _call("cuModuleGetFunction", self.handle, name.encode(),
                           context=f"looking up kernel {name!r} in module {self.name!r}")
            kernel = Kernel(
                handle, name, module=self, param_sizes=_param_sizes(handle),
                max_threads_per_block=_func_attribute(handle, "max_threads_per_block", name))
            self._kernels[name] = kernel
        return kernel

    def unload(self) -> None:
        """Unloads the module; its kernels become invalid."""
        _call("cuModuleUnload", self.handle, context=f"unloading module {self.name!r}")
        self._kernels.clear()


def _param_sizes(handle: Any) -> Optional[tuple[int, ...]]:
    """The byte size of each kernel parameter, or None when the driver cannot say."""
    drv = driver()
    sizes = []
    while True:
        result = drv.cuFuncGetParamInfo(handle, len(sizes))
        if result[0] != 0:
            # Past the last parameter the driver answers INVALID_VALUE; any
            # other answer (an old driver) means the layout is unknown.
            invalid = result[0] == drv.CUresult.CUDA_ERROR_INVALID_VALUE
            return tuple(sizes) if invalid else None
        sizes.append(int(result[2]))


_FUNC_ATTRIBUTES = {
    "num_regs": "CU_FUNC_ATTRIBUTE_NUM_REGS",
    "shared_size_bytes": "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES",
    "local_size_bytes": "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES",
    "const_size_bytes": "CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES",
    "max_threads_per_block": "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK",
    "max_dynamic_shared_size_bytes": "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES",
    "ptx_version": "CU_FUNC_ATTRIBUTE_PTX_VERSION",
    "binary_version": "CU_FUNC_ATTRIBUTE_BINARY_VERSION",
}


def _func_attribute(handle: Any, name: str, kernel_name: str) -> int:
    if name not in _FUNC_ATTRIBUTES:
        raise ValueError(f"unknown kernel attribute {name!r}: expected one of "
                         f"{', '.join(_FUNC_ATTRIBUTES)}")
    attr = getattr(driver().CUfunction_attribute, _FUNC_ATTRIBUTES[name])
    return _call("cuFuncGetAttribute", attr, handle,
                 context=f"querying {name} of kernel {kernel_name!r}")


_DEFAULT_DYNAMIC_SHARED_LIMIT = 48 * 1024  # above this a kernel must opt in


_MAX_CACHED_CONFIGS = 1024


def _hashable(grid: Any, block: Any) -> bool:
    """Whether a launch configuration can be remembered as it is: ints and
    tuples of ints (not bools, which compare equal to ints and are refused;
    not lists, which could change after the launch)."""
    return all(type(v) is int or (type(v) is tuple and all(type(x) is int for x in v))
               for v in (grid, block))


class Kernel:
    """A kernel (CUfunction) of a Module, with a checked, graph-capturable launch.

    Attributes:
        name: the kernel's name.
        param_sizes: the byte size of each parameter as the driver reports it
            (None if unknown); launches are checked against it.
        max_threads_per_block: the kernel's limit (its ``.maxntid`` and
            register use lower it below 1024).
    """

    def __init__(self, handle: Any, name: str, *, module: Optional[Module] = None,
                 param_sizes: Optional[tuple[int, ...]] = None,
                 max_threads_per_block: int = 1024):
        self.handle = handle
        self.name = name
        self.module = module  # keeps the module (and its code) alive
        self.param_sizes = param_sizes
        self.max_threads_per_block = max_threads_per_block
        self._max_dynamic_shared = _DEFAULT_DYNAMIC_SHARED_LIMIT
        # Launch configurations already validated (a decode step launches
        # the same few each time; validating costs microseconds).
        self._configs: dict = {}
        # ArgLayouts whose sizes matched the driver's (PackedArgs launches).
        self._checked_layouts: set = set()

    def attribute(self, name: str) -> int:
        """Returns a function attribute by short name: num_regs, shared_size_bytes,
        local_size_bytes, const_size_bytes, max_threads_per_block,
        max_dynamic_shared_size_bytes, ptx_version or binary_version."""
        return _func_attribute(self.handle, name, self.name)

    @property
    def num_regs(self) -> int:
        """Registers per thread."""
        return self.attribute("num_regs")

    @property
    def static_shared_bytes(self) -> int:
        """Statically allocated shared memory per block."""
        return self.attribute("shared_size_bytes")

    def set_max_dynamic_shared_memory(self, nbytes: int) -> None:
        """Allows launches with up to ``nbytes`` of dynamic shared memory.

        Needed above 48 KiB; the device's opt-in limit (227 KiB on Hopper)
        minus the kernel's static shared memory is the most that works.
        """
        nbytes = _int_in_range("nbytes", nbytes, 0, 2**31 - 1)
        drv = driver()
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        context = f"setting the dynamic shared memory of kernel {self.name!r} to {nbytes} bytes"
        try:
            _call("cuFuncSetAttribute", self.handle, attr, nbytes, context=context)
        except CudaError as exc:
            raise CudaError(exc.code, f"{context} ({self._shared_memory_budget()})") from None
        self._max_dynamic_shared = nbytes

    def _shared_memory_budget(self) -> str:
        """What the current device allows, for error messages."""
        drv = driver()
        device = _call("cuCtxGetDevice", context="querying the current context's device")
        optin = _call("cuDeviceGetAttribute",
                      drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                      device, context="querying the device's shared memory limit")
        static = self.static_shared_bytes
        return (f"the device allows {optin} bytes per block, of which the kernel's static "
                f"shared memory uses {static}: at most {optin - static} dynamic")

    def launch(self, grid: Any, block: Any, args: Sequence[KernelArg],
               shared_mem: int = 0, stream: Any = None) -> None:
        """Launches the kernel asynchronously on ``stream``.

        Args:
            grid, block: ints or tuples of 1 to 3 positive ints.
            args: one KernelArg per kernel parameter, in order, or the
                ``PackedArgs`` of an ``ArgLayout``.
            shared_mem: dynamic shared memory per block, in bytes.
            stream: a torch.cuda.Stream, a CUstream, an int handle, or None
                (torch's current stream if torch has initialised CUDA, else 0).

        Raises:
            ValueError / TypeError: a bad configuration or arguments that do
                not match the kernel's parameters.
            CudaError: the driver refused the launch; the message names the
                kernel and the configuration.
        """
        remembered = type(shared_mem) is int and _hashable(grid, block)
        config = self._configs.get((grid, block, shared_mem)) if remembered else None
        if config is None:
            try:
                grid3, block3 = launch_config(grid, block, self.max_threads_per_block)
                checked_shared = _int_in_range("shared_mem", shared_mem, 0, 2**31 - 1)
            except (ValueError, TypeError) as exc:
                raise type(exc)(f"launching kernel {self.name!r}: {exc}") from None
            config = (grid3, block3, checked_shared)
            if remembered and len(self._configs) < _MAX_CACHED_CONFIGS:
                self._configs[(grid, block, shared_mem)] = config
        grid3, block3, shared_mem = config
        if isinstance(args, PackedArgs):
            # Sizes compared once per layout (the kernel's parameters do not
            # change).
            if args.layout not in self._checked_layouts:
                self._check_arg_sizes(args)
                self._checked_layouts.add(args.layout)
            params_address = args.address
        else:
            params = pack_args(args)
            self._check_arg_sizes(args)
            params_address = ctypes.addressof(params)
        handle = _stream_handle(stream)
        result = driver().cuLaunchKernel(self.handle, *grid3, *block3, shared_mem, handle,
                                         params_address, 0)
        code = result[0] if isinstance(result, tuple) else result
        if code != 0:
            raise CudaError(code, self._describe_launch(grid3, block3, shared_mem, handle))

    def _check_arg_sizes(self, args: Sequence[KernelArg]) -> None:
        # A size mismatch would not fail the launch: the kernel would read
        # garbage. The driver knows the parameter layout, so compare.
        sizes = self.param_sizes
        if sizes is None:
            return
        if len(args) != len(sizes):
            raise ValueError(f"kernel {self.name!r} takes {len(sizes)} arguments "
                             f"(sizes {sizes} bytes), got {len(args)}")
        for i, (arg, size) in enumerate(zip(args, sizes)):
            if arg.size != size:
                raise TypeError(f"argument {i} of kernel {self.name!r} is {size} bytes, "
                                f"got {type(arg).__name__} ({arg.size} bytes)")

    def _describe_launch(self, grid: Dim3, block: Dim3, shared_mem: int, stream: int) -> str:
        text = (f"launching kernel {self.name!r} with grid={grid}, block={block}, "
                f"shared_mem={shared_mem} bytes, stream={stream:#x}")
        if shared_mem > self._max_dynamic_shared:
            text += (f" (above the kernel's dynamic shared memory limit of "
                     f"{self._max_dynamic_shared} bytes: call set_max_dynamic_shared_memory)")
        return text

    def __repr__(self) -> str:
        return f"Kernel({self.name!r})"
