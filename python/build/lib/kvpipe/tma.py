"""TMA (Tensor Memory Accelerator) descriptors: ``cuTensorMapEncodeTiled`` made safe.

Dimensions are given OUTERMOST-FIRST, like a torch shape (``(B, H, S, D)``);
the driver wants them innermost-first, with no stride for the innermost
dimension, which must be contiguous. ``encode_tiled`` converts, and checks
every requirement of ``cuTensorMapEncodeTiled`` first, so that a bad
descriptor is a ValueError that names the argument instead of the driver's
bare CUDA_ERROR_INVALID_VALUE.

The result is the 128 bytes of a ``CUtensorMap``, to be passed to a kernel by
value with ``kvpipe.cuda.TensorMapArg``.
"""

from __future__ import annotations

import ctypes
import operator
from typing import Any, NamedTuple, Optional, Sequence

from kvpipe import _tensors
from kvpipe.cuda import _call, driver, init_driver

__all__ = ["TENSOR_MAP_BYTES", "TiledArgs", "encode_from_tensor", "encode_tiled", "tiled_args"]

TENSOR_MAP_BYTES = 128

_MAX_RANK = 5
_MAX_GLOBAL_DIM = 2**32
_STRIDE_LIMIT = 2**40
_MAX_BOX_DIM = 256
_MAX_ELEMENT_STRIDE = 8

# Canonical dtype name -> CUtensorMapDataType member. TMA only moves bytes, so
# types without a tensor-map type of their own travel as unsigned integers.
_DATA_TYPES = {
    "u8": "UINT8", "i8": "UINT8", "fp8e4m3": "UINT8", "fp8e5m2": "UINT8",
    "u16": "UINT16", "i16": "UINT16",
    "u32": "UINT32", "i32": "INT32",
    "u64": "UINT64", "i64": "INT64",
    "f16": "FLOAT16", "bf16": "BFLOAT16", "f32": "FLOAT32", "tf32": "TFLOAT32",
    "f64": "FLOAT64",
}
_FLOAT_TYPES = {"f16", "bf16", "f32", "tf32", "f64"}
_SWIZZLES = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}
_L2_PROMOTIONS = {"none": "NONE", "64B": "L2_64B", "128B": "L2_128B", "256B": "L2_256B"}
_OOB_FILLS = {"zero": "NONE", "nan": "NAN_REQUEST_ZERO_FMA"}
_INTERLEAVES = {"none": "NONE", "16B": "16B", "32B": "32B"}


class TiledArgs(NamedTuple):
    """The arguments of ``cuTensorMapEncodeTiled``, innermost-first, as plain values.

    Enum fields hold the member's name (``"CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"``).
    """

    data_type: str
    rank: int
    address: int
    global_dims: tuple[int, ...]
    global_strides: tuple[int, ...]  # rank - 1 entries, bytes
    box_dims: tuple[int, ...]
    elem_strides: tuple[int, ...]
    interleave: str
    swizzle: str
    l2_promotion: str
    oob_fill: str


def _choice(what: str, value: Any, table: dict) -> str:
    if value not in table:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, table))}, got {value!r}")
    return table[value]


def _ints(what: str, values: Sequence[Any], rank: int) -> tuple[int, ...]:
    """``values`` as a tuple of ``rank`` ints (numpy integers welcome)."""
    values = tuple(values)
    if len(values) != rank:
        raise ValueError(f"{what} must have {rank} entries (one per dimension), "
                         f"got {len(values)}: {values}")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(f"{what}[{i}] must be an int, got {type(v).__name__}")
    return tuple(operator.index(v) for v in values)


def _in_range(what: str, values: Sequence[int], low: int, high: int) -> None:
    for i, v in enumerate(values):
        if not low <= v <= high:
            raise ValueError(f"{what}[{i}] must be in [{low}, {high}], got {v}")


def tiled_args(
    ptr: int,
    dtype: Any,
    global_dims: Sequence[int],
    global_strides_bytes: Sequence[int],
    box_dims: Sequence[int],
    swizzle: int,
    elem_strides: Optional[Sequence[int]] = None,
    l2_promotion: str = "128B",
    oob_fill: str = "zero",
    interleave: str = "none",
) -> TiledArgs:
    """Validates ``encode_tiled``'s arguments and converts them to the driver's order.

    Needs neither cuda-bindings nor a GPU. See ``encode_tiled`` for the arguments.
    """
    name = _tensors.dtype_name(dtype)
    esize = _tensors.ELEMENT_SIZES[name]
    data_type = _DATA_TYPES[name]
    dims = tuple(global_dims)
    rank = len(dims)
    if not 1 <= rank <= _MAX_RANK:
        raise ValueError(f"global_dims must have 1 to {_MAX_RANK} dimensions, got {rank}: {dims}")
    dims = _ints("global_dims", dims, rank)
    _in_range("global_dims", dims, 1, _MAX_GLOBAL_DIM)
    interleave_kind = _choice("interleave", interleave, _INTERLEAVES)
    swizzle_kind = _choice("swizzle", swizzle, _SWIZZLES)
    l2_kind = _choice("l2_promotion", l2_promotion, _L2_PROMOTIONS)
    oob_kind = _choice("oob_fill", oob_fill, _OOB_FILLS)
    if oob_fill == "nan" and name not in _FLOAT_TYPES:
        raise ValueError(f"oob_fill='nan' needs a floating-point dtype, got {name}")
    if interleave != "none" and rank < 3:
        raise ValueError(f"interleave={interleave!r} needs rank >= 3, got rank {rank}")
    if interleave == "32B" and swizzle != 32:
        raise ValueError(f"interleave='32B' needs swizzle=32, got swizzle={swizzle}")
    # Interleaved layouts need 32-byte alignment for 32B, 16 otherwise.
    alignment = 32 if interleave == "32B" else 16
    _check_ptr(ptr, alignment)
    strides = _global_strides(global_strides_bytes, rank, esize, alignment)
    box = _ints("box_dims", box_dims, rank)
    _in_range("box_dims", box, 1, _MAX_BOX_DIM)
    if interleave == "none":
        _check_inner_box(box[-1], esize, swizzle)
    elems = (1,) * rank if elem_strides is None else _ints("elem_strides", elem_strides, rank)
    _in_range("elem_strides", elems, 1, _MAX_ELEMENT_STRIDE)
    return TiledArgs(
        data_type="CU_TENSOR_MAP_DATA_TYPE_" + data_type, rank=rank, address=ptr,
        global_dims=dims[::-1], global_strides=strides[::-1], box_dims=box[::-1],
        elem_strides=elems[::-1],
        interleave="CU_TENSOR_MAP_INTERLEAVE_" + interleave_kind,
        swizzle="CU_TENSOR_MAP_SWIZZLE_" + swizzle_kind,
        l2_promotion="CU_TENSOR_MAP_L2_PROMOTION_" + l2_kind,
        oob_fill="CU_TENSOR_MAP_FLOAT_OOB_FILL_" + oob_kind)


def _check_ptr(ptr: Any, alignment: int) -> None:
    if isinstance(ptr, bool) or not isinstance(ptr, int) or not 0 <= ptr < 2**64:
        raise ValueError(f"ptr must be a device address (an int in [0, 2**64)), got {ptr!r}")
    if ptr % alignment:
        raise ValueError(f"ptr must be {alignment}-byte aligned, got {ptr:#x}")


def _global_strides(strides: Sequence[int], rank: int, esize: int,
                    alignment: int) -> tuple[int, ...]:
    """The byte strides of every dimension but the innermost, outermost-first.

    Accepts rank - 1 strides, or rank strides whose last (innermost) one is the
    element size, i.e. contiguous (as ``t.stride()`` times the element size).
    """
    strides = tuple(strides)
    if len(strides) == rank:
        if strides[-1] != esize:
            raise ValueError(
                f"global_strides_bytes[-1] (the innermost dimension's) must be the element "
                f"size {esize} bytes: TMA needs a contiguous innermost dimension; got "
                f"{strides[-1]}")
        strides = strides[:-1]
    strides = _ints("global_strides_bytes (every dimension but the innermost)", strides, rank - 1)
    for i, s in enumerate(strides):
        if s % alignment:
            raise ValueError(f"global_strides_bytes[{i}] must be a multiple of {alignment} "
                             f"bytes, got {s}")
        if not 0 <= s < _STRIDE_LIMIT:
            raise ValueError(f"global_strides_bytes[{i}] must be in [0, 2**40), got {s}")
    return strides


def _check_inner_box(inner: int, esize: int, swizzle: int) -> None:
    inner_bytes = inner * esize
    if inner_bytes % 16:
        raise ValueError(
            f"box_dims[-1] * element size must be a multiple of 16 bytes, got "
            f"{inner} * {esize} = {inner_bytes} bytes")
    if swizzle and inner_bytes > swizzle:
        raise ValueError(
            f"box_dims[-1] * element size must be at most the swizzle span of {swizzle} "
            f"bytes (swizzle={swizzle}), got {inner} * {esize} = {inner_bytes} bytes")


def encode_tiled(
    ptr: int,
    dtype: Any,
    global_dims: Sequence[int],
    global_strides_bytes: Sequence[int],
    box_dims: Sequence[int],
    swizzle: int,
    elem_strides: Optional[Sequence[int]] = None,
    l2_promotion: str = "128B",
    oob_fill: str = "zero",
    interleave: str = "none",
) -> bytes:
    """Encodes a tiled TMA descriptor; returns its 128 bytes.

    Args:
        ptr: the global address of the tensor's first element (16-byte aligned).
        dtype: a dtype name (``"bf16"``, ``"f16"``, ``"f32"``, ``"u8"``, ...) or torch dtype.
        global_dims: the tensor's extents, outermost-first, 1 to 5 of them.
        global_strides_bytes: byte strides outermost-first for every dimension
            but the innermost (multiples of 16); a last entry equal to the
            element size (the contiguous innermost dimension) may be included.
        box_dims: the tile that one TMA copy moves, outermost-first, each in
            [1, 256]; the innermost one times the element size must be a
            multiple of 16 bytes and, when swizzled, at most the swizzle span.
        swizzle: the shared-memory swizzle span in bytes: 0, 32, 64 or 128.
        elem_strides: per-dimension traversal strides in [1, 8] (default all 1).
        l2_promotion: ``"none"``, ``"64B"``, ``"128B"`` or ``"256B"``.
        oob_fill: ``"zero"`` (out-of-bounds elements read as zero) or ``"nan"``.
        interleave: ``"none"``, ``"16B"`` or ``"32B"``.

    Raises:
        ValueError / TypeError: a requirement of cuTensorMapEncodeTiled is not met.
        CudaError: the driver rejected the descriptor anyway.
    """
    args = tiled_args(ptr, dtype, global_dims, global_strides_bytes, box_dims, swizzle,
                      elem_strides, l2_promotion, oob_fill, interleave)
    drv = driver()
    u64, u32 = drv.cuuint64_t, drv.cuuint32_t
    init_driver()
    tensor_map = _call(
        "cuTensorMapEncodeTiled",
        getattr(drv.CUtensorMapDataType, args.data_type), args.rank, args.address,
        [u64(d) for d in args.global_dims], [u64(s) for s in args.global_strides],
        [u32(b) for b in args.box_dims], [u32(e) for e in args.elem_strides],
        getattr(drv.CUtensorMapInterleave, args.interleave),
        getattr(drv.CUtensorMapSwizzle, args.swizzle),
        getattr(drv.CUtensorMapL2promotion, args.l2_promotion),
        getattr(drv.CUtensorMapFloatOOBfill, args.oob_fill),
        context=f"encoding a TMA descriptor with {args}")
    return ctypes.string_at(tensor_map.getPtr(), TENSOR_MAP_BYTES)


def encode_from_tensor(t: Any, box_dims: Sequence[int], swizzle: int,
                       dims_order: Optional[Sequence[int]] = None, **kwargs: Any) -> bytes:
    """Encodes a tiled TMA descriptor for a torch tensor (or tensor-like object).

    Args:
        t: a CUDA tensor whose last dimension is contiguous.
        box_dims: the tile, outermost-first, in the order of ``dims_order``.
        swizzle: 0, 32, 64 or 128.
        dims_order: a permutation of ``range(t.dim())`` giving the order in
            which the descriptor sees the dimensions, outermost-first (e.g.
            ``(0, 2, 1, 3)`` to describe a ``(B, S, H, D)`` tensor as
            ``(B, H, S, D)``); its last entry must be the contiguous dimension.
        **kwargs: passed to ``encode_tiled`` (elem_strides, l2_promotion, ...).

    Raises:
        ValueError: the last dimension is not contiguous, or ``dims_order`` is
            not a permutation; and everything ``encode_tiled`` raises.
    """
    _tensors.check_tensor("t", t, last_dim_contiguous=False, stride_alignment_bytes=None)
    shape, strides = tuple(t.shape), tuple(t.stride())
    order = tuple(range(len(shape))) if dims_order is None else tuple(dims_order)
    if sorted(order) != list(range(len(shape))):
        raise ValueError(f"dims_order must be a permutation of 0..{len(shape) - 1}, got {order}")
    shape = tuple(shape[i] for i in order)
    strides = tuple(strides[i] for i in order)
    if shape[-1] != 1 and strides[-1] != 1:
        raise ValueError(
            f"t must have a contiguous innermost dimension (stride 1) for TMA, got strides "
            f"{strides} for shape {shape}" + (f" (dims_order {order})" if dims_order else ""))
    esize = t.element_size()
    return encode_tiled(t.data_ptr(), t.dtype, shape, _byte_strides(shape, strides, esize),
                        box_dims, swizzle, **kwargs)


def _byte_strides(shape: Sequence[int], strides: Sequence[int], esize: int) -> list[int]:
    """Byte strides of every dimension but the innermost, outermost-first.

    A dimension of extent 1 is never stepped through, and torch gives such
    dimensions arbitrary strides; give it the stride a packed layout would
    have instead, so that it cannot break the 16-byte rule.
    """
    out = [0] * (len(shape) - 1)
    inner_span = shape[-1] * esize  # bytes spanned by the dimensions inside this one
    for i in reversed(range(len(shape) - 1)):
        if shape[i] == 1:
            out[i] = -(-inner_span // 16) * 16
        else:
            out[i] = strides[i] * esize
        inner_span = out[i] * shape[i]
    return out
