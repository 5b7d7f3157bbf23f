"""Validation of tensor-like arguments, without importing torch.

Everything here works on real ``torch.Tensor`` objects and on any duck-typed
object with ``.shape``, ``.stride()``, ``.dtype``, ``.device`` (with
``.type``), ``.data_ptr()`` and ``.element_size()``, so that machines without
torch (CI) can exercise the rules with a small fake tensor class.

Data types are named by short canonical strings (``"bf16"``, ``"f32"``, ...).
A torch dtype is recognised by its ``str()`` (``"torch.bfloat16"``), which is
why this module never needs torch itself.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Optional, Union

# Canonical name -> element size in bytes.
ELEMENT_SIZES: dict[str, int] = {
    "bf16": 2,
    "f16": 2,
    "f32": 4,
    "tf32": 4,  # a TMA/MMA interpretation of 32-bit floats, not a storage dtype
    "f64": 8,
    "u8": 1,
    "i8": 1,
    "u16": 2,
    "i16": 2,
    "u32": 4,
    "i32": 4,
    "u64": 8,
    "i64": 8,
    "fp8e4m3": 1,
    "fp8e5m2": 1,
}

# Other spellings accepted for the canonical names: torch's dtype names (as
# ``str(torch.<dtype>)`` minus the ``torch.`` prefix) and common long names.
_ALIASES: dict[str, str] = {
    "bfloat16": "bf16",
    "float16": "f16",
    "half": "f16",
    "float32": "f32",
    "float": "f32",
    "float64": "f64",
    "double": "f64",
    "uint8": "u8",
    "int8": "i8",
    "uint16": "u16",
    "int16": "i16",
    "uint32": "u32",
    "int32": "i32",
    "uint64": "u64",
    "int64": "i64",
    "float8_e4m3fn": "fp8e4m3",
    "float8_e5m2": "fp8e5m2",
}

DtypeLike = Any  # a canonical name, an alias, or a torch dtype
RankSpec = Union[int, Collection[int], None]
DtypeSpec = Union[DtypeLike, Collection[DtypeLike], None]


#: Canonical names already resolved, by dtype (name or torch dtype): every
#: launch asks for its tensors' dtypes.
_NAMES: dict = {}


def dtype_name(dtype: DtypeLike) -> str:
    """Returns the canonical name (``"bf16"``, ...) of a dtype name or torch dtype.

    Raises:
        TypeError: the dtype is not one kvpipe knows.
    """
    try:
        return _NAMES[dtype]
    except (KeyError, TypeError):  # TypeError: an unhashable stand-in
        pass
    name = _dtype_name(dtype)
    try:
        _NAMES[dtype] = name
    except TypeError:
        pass
    return name


def _dtype_name(dtype: DtypeLike) -> str:
    text = dtype if isinstance(dtype, str) else str(dtype)
    key = text[len("torch."):] if text.startswith("torch.") else text
    if key in ELEMENT_SIZES:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    known = ", ".join(ELEMENT_SIZES)
    raise TypeError(f"unsupported dtype {dtype!r}: expected one of {known} or a torch dtype")


def element_size(dtype: DtypeLike) -> int:
    """Returns the size in bytes of one element of ``dtype``."""
    return ELEMENT_SIZES[dtype_name(dtype)]


_TENSOR_ATTRS = ("shape", "stride", "dtype", "device", "data_ptr", "element_size")
#: torch's tensor types seen: their instances have every attribute of
#: _TENSOR_ATTRS (no hasattr on each check).
_TENSOR_TYPES: set = set()


def check_tensor(
    name: str,
    t: Any,
    *,
    rank: RankSpec = None,
    dtype: DtypeSpec = None,
    device: Optional[str] = "cuda",
    last_dim_contiguous: bool = True,
    stride_alignment_bytes: Optional[int] = 16,
) -> None:
    """Checks that argument ``name`` is a tensor as a kernel needs it.

    Args:
        name: the argument's name, used in the messages.
        t: the tensor (or tensor-like object).
        rank: the required number of dimensions, or a collection of them.
        dtype: the required dtype, or a collection of them (names or torch dtypes).
        device: the required device type (``t.device.type``); None: any.
        last_dim_contiguous: require stride 1 in the last dimension.
        stride_alignment_bytes: require the data pointer and the byte stride of
            every dimension but the last to be multiples of this (TMA needs
            16); None: no requirement.

    Raises:
        TypeError: ``t`` is not tensor-like, or has the wrong dtype.
        ValueError: wrong rank, device, strides or alignment.
    """
    if type(t) not in _TENSOR_TYPES:
        if any(not hasattr(t, a) for a in _TENSOR_ATTRS):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
        if type(t).__module__.split(".")[0] == "torch":
            _TENSOR_TYPES.add(type(t))
    shape = tuple(t.shape)
    _check_rank(name, shape, rank)
    _check_dtype(name, t.dtype, dtype)
    if device is not None and t.device.type != device:
        raise ValueError(f"{name} must be on a {device} device, got {t.device}")
    strides = tuple(t.stride())
    if last_dim_contiguous:
        _check_last_dim(name, shape, strides)
    if stride_alignment_bytes is not None:
        _check_alignment(name, t, shape, strides, stride_alignment_bytes)


def _check_rank(name: str, shape: tuple[int, ...], rank: RankSpec) -> None:
    if rank is None:
        return
    allowed = (rank,) if isinstance(rank, int) else tuple(rank)
    if len(shape) not in allowed:
        expected = " or ".join(str(r) for r in allowed)
        raise ValueError(
            f"{name} must have rank {expected}, got rank {len(shape)} (shape {shape})")


def _check_dtype(name: str, actual: DtypeLike, expected: DtypeSpec) -> None:
    if expected is None:
        return
    if isinstance(expected, (str, bytes)) or not isinstance(expected, Collection):
        expected = (expected,)
    wanted = [dtype_name(d) for d in expected]
    try:
        got = dtype_name(actual)
    except TypeError:
        got = str(actual)
    if got not in wanted:
        raise TypeError(f"{name} must have dtype {' or '.join(wanted)}, got {got}")


def _check_last_dim(name: str, shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
    # A dimension of extent 1 is never stepped through, so its stride is
    # meaningless (torch gives such dimensions arbitrary strides).
    if shape and shape[-1] != 1 and strides[-1] != 1:
        raise ValueError(
            f"{name} must have a contiguous last dimension (stride 1), "
            f"got strides {strides} for shape {shape}")


def _check_alignment(name: str, t: Any, shape: tuple[int, ...],
                     strides: tuple[int, ...], alignment: int) -> None:
    ptr = t.data_ptr()
    if ptr % alignment:
        raise ValueError(
            f"{name}'s data pointer must be {alignment}-byte aligned, got {ptr:#x} "
            f"(a view with an unaligned storage offset?)")
    esize = t.element_size()
    for dim, (extent, stride) in enumerate(zip(shape[:-1], strides[:-1])):
        if extent != 1 and (stride * esize) % alignment:
            raise ValueError(
                f"{name} must have strides that are multiples of {alignment} bytes "
                f"in every dimension but the last; dimension {dim} has stride "
                f"{stride} elements = {stride * esize} bytes (strides {strides}, "
                f"shape {shape})")
