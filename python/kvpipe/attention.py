"""``kvpipe.attention``: FlashAttention forward on Hopper with kvpipe kernels.

The launch follows the kernel's ABI as the compiler wrote it
(docs/kernel-abi.md): the parameter order (``params``), each tensor map's box
and swizzle, ``block_m`` for the grid, ``threads`` and the dynamic shared
memory. Only what each parameter means -- which tensor a map encodes, what
``seq_q`` is -- lives here. The maps are by-value CUtensorMaps of the 4-D
tensors seen as ``(B, H, S, D)`` whatever their memory layout (the strides
say where things are); ``lse`` is a pointer to a contiguous fp32
``(B, H_q, S_q)`` tensor or null; grid ``(ceil(S_q / block_m), H_q, B)``, or
for a persistent kernel ``(min(tiles, SMs), 1, 1)``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

from kvpipe import _tensors, cuda, kernels, tma
from kvpipe import compiler as _compiler
from kvpipe import modifiers as _modifiers
from kvpipe._log import log

LAYOUTS = ("bhsd", "bshd")
_LOG2E = 1.4426950408889634
#: The longest sequence (queries or keys) a kernel with score_mod/mask_mod
#: takes: its regions' index arithmetic is computed in f32, exact below it
#: (lib/Dialect/KVPipe/Transforms/Modifiers.cpp, kMaxModifierSequence).
MAX_MODIFIER_SEQUENCE = 1 << 23

_loaded: Dict[Tuple[Any, ...], Tuple[cuda.Kernel, Dict[str, Any]]] = {}
#: The combine kernel of a loaded split-KV family, under the main kernel's key.
_loaded_combine: Dict[Tuple[Any, ...], Tuple[cuda.Kernel, Dict[str, Any]]] = {}
_lock = threading.Lock()


def _kernel_for(config_args: Tuple[Any, ...],
                device_index: int,
                tuning: Tuple[Tuple[str, int], ...],
                modifiers: Tuple[str, Tuple[str, ...]] = ("", ()),
                varlen: bool = False) -> Tuple[cuda.Kernel, Dict[str, Any]]:
    """The loaded kernel for a configuration on a device, compiled or cached
    once; ``modifiers``: the traced regions and aux types (kvpipe.modifiers);
    ``varlen``: the kernel of packed variable-length batches."""
    key = (config_args, device_index, tuning, modifiers, varlen)
    found = _loaded.get(key)
    if found is not None:
        return found
    with _lock:
        found = _loaded.get(key)
        if found is None:
            (head_dim, dtype, causal, value_head_dim, mask_alignment, sliding_window,
             kv_lengths, *extra) = config_args
            # Decode (split_kv, pack_gqa) and paging (page_size) follow, where
            # given, in that order.
            split_kv, pack_gqa, page_size = tuple(extra) + (False, 0, 0)[len(extra):]
            timeout = int(os.environ.get("KVPIPE_WAIT_TIMEOUT", "0"))
            compiled = kernels.compile_attention(head_dim, dtype, causal,
                                                 value_head_dim=value_head_dim,
                                                 wait_timeout=timeout,
                                                 mask_alignment=mask_alignment,
                                                 sliding_window=sliding_window,
                                                 kv_lengths=kv_lengths, split_kv=split_kv,
                                                 pack_gqa=pack_gqa, page_size=page_size,
                                                 modifiers=modifiers[0],
                                                 aux_types=modifiers[1], varlen=varlen,
                                                 **dict(tuning))
            module = cuda.Module(compiled.image, name=compiled.name, device=device_index)
            kernel = module.function(compiled.name)
            kernel.set_max_dynamic_shared_memory(compiled.abi["dynamic_shared_memory"])
            if split_kv:
                combine_abi = compiled.kernel_abi("combine")
                # Under the key without modifiers: split kernels have none.
                _loaded_combine[key[:3]] = (module.function(combine_abi["kernel"]),
                                            combine_abi)
            log("loaded %s on device %d (%s)", compiled.name, device_index,
                "cubin" if compiled.cubin is not None else "PTX, JIT-compiled by the driver")
            found = (kernel, compiled.abi)
            _loaded[key] = found
    return found


def launch_grid(abi: Dict[str, Any], seq_q: int, heads_q: int, batch: int,
                multiprocessors: int, num_splits: int = 1) -> Tuple[int, int, int]:
    """The grid of an attention kernel (docs/kernel-abi.md).

    One CTA per (Q block, head, batch) tile, or for a persistent kernel at
    most one CTA per SM (``multiprocessors``), each looping over its tiles.
    A pack-GQA kernel's Q block is ``queries_per_tile`` query positions of
    the ``pack_gqa`` heads of a K/V head (y: the K/V heads); a split-KV
    kernel has ``num_splits`` CTAs per tile along x.
    """
    rows = abi.get("queries_per_tile", abi["block_m"])
    q_blocks = (seq_q + rows - 1) // rows
    if abi.get("persistent"):
        return (min(q_blocks * heads_q * batch, multiprocessors), 1, 1)
    heads = heads_q // abi["pack_gqa"] if abi.get("pack_gqa") else heads_q
    if abi.get("split_kv"):
        return (q_blocks * num_splits, heads, batch)
    return (q_blocks, heads, batch)


def combine_grid(abi: Dict[str, Any], seq_q: int, heads_q: int,
                 batch: int) -> Tuple[int, int, int]:
    """The grid of a split-KV family's combine kernel: one warp per output
    row, ``rows_per_cta`` rows per CTA."""
    rows = batch * heads_q * seq_q
    return ((rows + abi["rows_per_cta"] - 1) // abi["rows_per_cta"], 1, 1)


_sm_counts: Dict[int, int] = {}


def _multiprocessors(device_index: int) -> int:
    """The SM count of a device (the grid of a persistent kernel)."""
    count = _sm_counts.get(device_index)
    if count is None:
        import torch

        count = torch.cuda.get_device_properties(device_index).multi_processor_count
        _sm_counts[device_index] = count
    return count


_SAME_DEVICE = contextlib.nullcontext()


def device_launch(device_index: int) -> Tuple[Any, int]:
    """What a launch on ``device_index`` needs: a context manager that makes
    the device current and the raw handle of torch's current stream there.

    The context manager is a no-op when the device is already current (the
    usual case): entering ``torch.cuda.device`` and asking for
    ``torch.cuda.current_stream()`` cost tens of microseconds of host time,
    as much as a decode kernel at a short cache runs.
    """
    import torch

    get_device = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)
    raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    stream = (raw_stream(device_index) if raw_stream is not None
              else torch.cuda.current_stream(device_index).cuda_stream)
    guard = _SAME_DEVICE if get_device() == device_index else torch.cuda.device(device_index)
    return guard, stream


def _bhsd_view(name: str, t: Any, layout: str) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """Shape and element strides of ``t`` seen as (B, H, S, D)."""
    shape, strides = tuple(t.shape), tuple(t.stride())
    if layout == "bshd":
        return ((shape[0], shape[2], shape[1], shape[3]),
                (strides[0], strides[2], strides[1], strides[3]))
    return shape, strides


def _check_inputs(q: Any, k: Any, v: Any, layout: str) -> Tuple[Tuple[int, ...], ...]:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        _tensors.check_tensor(name, t, rank=4, device="cuda", last_dim_contiguous=True,
                              stride_alignment_bytes=16)
    dtypes = {str(t.dtype) for t in (q, k, v)}
    if len(dtypes) != 1:
        raise TypeError(f"q, k and v must have the same dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    kernels.dtype_name(q.dtype)  # raises TypeError for other dtypes
    if len({str(t.device) for t in (q, k, v)}) != 1:
        raise ValueError(f"q, k and v must be on the same device, got {q.device}, "
                         f"{k.device}, {v.device}")
    qs, ks, vs = (_bhsd_view(n, t, layout)[0] for n, t in (("q", q), ("k", k), ("v", v)))
    b, hq, sq, d = qs
    if d not in kernels.HEAD_DIMS:
        raise ValueError(f"q's head dim must be one of {kernels.HEAD_DIMS} "
                         f"{_PADDED_HEAD_DIMS}, got {d}")
    if ks[:3] != vs[:3]:
        raise ValueError(f"k and v must have the same batch, heads and sequence length, got "
                         f"{tuple(k.shape)} and {tuple(v.shape)} ({layout})")
    if ks[0] != b:
        raise ValueError(f"k's batch must equal q's ({b}), got {ks[0]}")
    if ks[3] != d:
        raise ValueError(f"k's head dim must equal q's ({d}), got {ks[3]}")
    if (d, vs[3]) not in kernels.HEAD_DIM_PAIRS:
        supported = ", ".join(str(dv) for dq, dv in kernels.HEAD_DIM_PAIRS if dq == d)
        raise ValueError(f"v's head dim must be one of ({supported}) {_PADDED_HEAD_DIMS} "
                         f"with q's head dim {d}, "
                         f"got {vs[3]}")
    if ks[1] < 1 or hq % ks[1] != 0:
        raise ValueError(f"q's heads ({hq}) must be a multiple of k and v's heads "
                         f"({ks[1]}) (grouped-query attention)")
    if sq < 1:
        raise ValueError(f"q's sequence length must be at least 1, got {sq}")
    if ks[2] < 1:
        raise ValueError(f"k and v's sequence length must be at least 1, got {ks[2]}")
    if hq > 65535 or b > 65535:
        raise ValueError(f"q's heads ({hq}) and batch ({b}) must each be at most 65535 "
                         f"(grid dimensions)")
    return qs, ks, vs


def normalise_window(window_size: Any, causal: bool) -> Tuple[int, int]:
    """``window_size`` as ``(left, right)`` with -1 for an unbounded side,
    and right = 0 when causal (flash-attn's rule); ``(-1, -1)`` is no window.

    Raises:
        TypeError: not a pair of ints.
    """
    if (not isinstance(window_size, (tuple, list)) or len(window_size) != 2 or
            any(isinstance(w, bool) or not isinstance(w, int) for w in window_size)):
        raise TypeError(f"window_size must be a pair of ints (left, right), -1 for "
                        f"unbounded, got {window_size!r}")
    left, right = (max(int(w), -1) for w in window_size)
    if causal:
        right = -1 if left < 0 else 0  # the causal mask is the right bound
    return left, right


def _check_masks(causal: Any, mask_alignment: Any,
                 window_size: Any) -> Tuple[int, int, bool]:
    """Checks ``causal``, ``mask_alignment`` and ``window_size``; returns the
    window's bounds (``normalise_window``) and whether there is one."""
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {causal!r}")
    if mask_alignment not in kernels.MASK_ALIGNMENTS:
        raise ValueError(f"mask_alignment must be one of {kernels.MASK_ALIGNMENTS}, "
                         f"got {mask_alignment!r}")
    window_left, window_right = normalise_window(window_size, causal)
    return window_left, window_right, window_left >= 0 or window_right >= 0


_maps: "OrderedDict[Tuple[Any, ...], bytes]" = OrderedDict()
_MAX_CACHED_MAPS = 256


def _tensor_map(name: str, t: Any, layout: str, spec: Dict[str, Any]) -> bytes:
    """The tensor map of ``t`` as the kernel's ABI describes it: ``spec`` is
    the ABI's entry for the map (its ``box`` in (B, H, S, D) order and its
    ``swizzle`` in bytes)."""
    box, swizzle = tuple(spec["box"]), int(spec["swizzle"])
    # The kernel sees every tensor as (B, H, S, D); for bshd that is a
    # permutation of the dimensions, which the strides express. Encoding goes
    # through the driver: reuse the bytes for a tensor seen before (the
    # descriptor depends only on address, shape, strides, dtype and box).
    key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype), layout, box, swizzle)
    cached = _maps.get(key)
    if cached is not None:
        _maps.move_to_end(key)
        return cached
    order = (0, 2, 1, 3) if layout == "bshd" else None
    try:
        if len(box) == 5:  # a pack-GQA kernel's (B, H_kv, S, G, D) Q or O
            encoded = _encode_packed(t, layout, box, swizzle)
        else:
            encoded = tma.encode_from_tensor(t, box, swizzle, dims_order=order)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    _maps[key] = encoded
    if len(_maps) > _MAX_CACHED_MAPS:
        _maps.popitem(last=False)
    return encoded


def packed_map_geometry(shape: Tuple[int, ...], strides: Tuple[int, ...],
                        group: int) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """Dims and element strides, outermost first, of a pack-GQA map: the
    ``(B, H, S, D)`` view ``shape``/``strides`` of Q or O seen as
    ``(B, H_kv, S, G, D)`` with head ``h = h_kv * G + g`` (TMA gathers the G
    heads of a box from their own stride)."""
    b, h, sq, d = shape
    sb, sh, ss, sd = strides
    if h % group:
        raise ValueError(f"heads ({h}) must be a multiple of pack_gqa ({group})")
    return (b, h // group, sq, group, d), (sb, sh * group, ss, sh, sd)


def _encode_packed(t: Any, layout: str, box: Tuple[int, ...], swizzle: int) -> bytes:
    """The 5-D map of a pack-GQA kernel's Q or O (docs/kernel-abi.md)."""
    shape, strides = _bhsd_view("", t, layout)
    dims, elems = packed_map_geometry(shape, strides, box[3])
    return tma.encode_tiled(t.data_ptr(), t.dtype, dims,
                            tma._byte_strides(dims, elems, t.element_size()), box, swizzle)


#: The ABI versions whose parameters this runtime knows (docs/kernel-abi.md).
ABI_VERSIONS = (2,)


class KernelABIError(RuntimeError):
    """A kernel's ABI (what the compiler wrote) names something this runtime
    cannot provide: a compiler and a runtime of different kvpipe releases."""


def kernel_arguments(abi: Dict[str, Any], values: Dict[str, Any]) -> list:
    """The launch arguments in the order the ABI's ``params`` lists them.

    ``values`` maps each parameter name to its value: tensor maps to the
    ``(name, tensor, layout)`` they encode (the box and swizzle come from the
    ABI's entry of that name), ``lse`` to a device address, the rest to
    numbers; each parameter's kind is the ABI's (``param_kinds``) or, for
    the kinds ABI version 2 fixed, this table's.
    """
    params = _param_kinds(abi)
    unknown = [name for name, _ in params if name not in values]
    if unknown:
        raise KernelABIError(f"kernel {abi.get('kernel')} takes parameters {unknown} "
                             "that this runtime does not provide")
    if abi.get("pack_gqa") and values.get("heads_per_kv_head") != abi["pack_gqa"]:
        raise ValueError(f"heads_per_kv_head ({values.get('heads_per_kv_head')}) must equal the "
                         f"pack_gqa ({abi['pack_gqa']}) kernel {abi.get('kernel')} was "
                         "compiled for")
    args = []
    for name, kind in params:
        value = values[name]
        if kind == "tensor_map":
            tensor_name, tensor, layout = value
            args.append(cuda.TensorMapArg(_tensor_map(tensor_name, tensor, layout, abi[name])))
        else:
            args.append(_SCALAR_ARGS[kind](value))
    return args


_resolved_kinds: Dict[int, Tuple[Dict[str, Any], Tuple[Tuple[str, str], ...]]] = {}


def _param_kinds(abi: Dict[str, Any]) -> Tuple[Tuple[str, str], ...]:
    """``(name, kind)`` of each parameter of a kernel's ABI, in order,
    resolved once per ABI (every launch reads them).

    Raises:
        KernelABIError: an ABI version or a parameter kind this runtime does
            not know.
    """
    found = _resolved_kinds.get(id(abi))
    if found is not None and found[0] is abi:
        return found[1]
    if abi.get("abi_version") not in ABI_VERSIONS:
        raise KernelABIError(f"kernel {abi.get('kernel')} has ABI version "
                             f"{abi.get('abi_version')}; this runtime knows {ABI_VERSIONS}: "
                             "use a compiler and a Python package of the same release")
    kinds = {**_V2_PARAM_KINDS, **abi.get("param_kinds", {})}
    unknown = [name for name in abi["params"]
               if kinds.get(name) not in ("tensor_map", *_SCALAR_ARGS)]
    if unknown:
        raise KernelABIError(f"kernel {abi.get('kernel')} takes parameters {unknown} "
                             "that this runtime does not provide")
    params = tuple((name, kinds[name]) for name in abi["params"])
    # The ABI is kept with its entry, so that its id is not reused meanwhile.
    _resolved_kinds[id(abi)] = (abi, params)
    return params


#: Parameter kinds of ABI version 2, for compilers that do not write them.
_V2_PARAM_KINDS = {"q_map": "tensor_map", "k_map": "tensor_map", "v_map": "tensor_map",
                   "o_map": "tensor_map", "lse": "pointer", "seq_q": "i32", "seq_kv": "i32",
                   "heads_per_kv_head": "i32", "scale_log2": "f32", "heads_q": "i32",
                   "batch": "i32", "window_left": "i32", "window_right": "i32",
                   "kv_lengths": "pointer", "num_splits": "i32", "o_partial": "pointer",
                   "lse_partial": "pointer", "cu_seqlens_q": "pointer",
                   "cu_seqlens_k": "pointer", "o": "pointer", "total_q": "i32"}
_SCALAR_ARGS = {"pointer": cuda.PtrArg, "i32": cuda.I32Arg, "i64": cuda.I64Arg,
                "f32": cuda.F32Arg}


#: K/V rows per pipeline slot of the default kernels, per (Q/K, V) head dim
#: (docs/kernel-abi.md; the split heuristic counts K/V blocks with it).
_DEFAULT_BLOCK_N = {(64, 64): 128, (96, 96): 112, (128, 128): 128, (192, 128): 128,
                    (192, 192): 112, (256, 256): 80}
#: The most splits of a K/V range (FA3's limit), and the fewest K/V blocks
#: a split should read (fewer and the combine's traffic is not worth it).
MAX_SPLITS = 128
MIN_BLOCKS_PER_SPLIT = 4


@functools.lru_cache(maxsize=4096)
def num_splits_heuristic(tiles: int, multiprocessors: int, kv_blocks: int,
                         max_splits: int = MAX_SPLITS,
                         min_blocks_per_split: int = MIN_BLOCKS_PER_SPLIT) -> int:
    """How many CTAs to split each tile's K/V range over (FA3's
    ``num_splits_heuristic``, hopper/heuristics.h): none when the tiles
    nearly fill the SMs (80 %); otherwise the fewest splits whose last wave
    is at least 85 % as full as the best count's, each split keeping at
    least ``min_blocks_per_split`` K/V blocks, skipping counts that leave
    the blocks per split unchanged. Memoised: it loops over up to 128
    counts, which cost a decode call tens of microseconds of host time."""
    if tiles >= 0.8 * multiprocessors:
        return 1
    limit = min(max_splits, multiprocessors, max(1, kv_blocks // min_blocks_per_split))
    if limit <= 1:
        return 1
    efficiency = []
    for splits in range(1, limit + 1):
        waves = tiles * splits / multiprocessors
        efficiency.append(waves / math.ceil(waves))
    best = max(efficiency)
    for splits in range(1, limit + 1):
        if splits > 1 and (-(-kv_blocks // splits)) == (-(-kv_blocks // (splits - 1))):
            continue
        if efficiency[splits - 1] >= 0.85 * best:
            return splits
    return 1


def should_pack_gqa(seq_q: int, group: int) -> bool:
    """Whether packing the ``group`` query heads of a K/V head into a tile
    fills the consumer warpgroups' 64 rows better (FA3's ``should_pack_gqa``:
    packed when the unpacked rows are used less than 90 % as well): decode
    and short chunks of queries."""
    if group <= 1 or group > kernels.MAX_PACK_GQA:
        return False
    per_warpgroup = 64 // group
    unpacked = seq_q / (-(-seq_q // 64) * 64)
    packed = seq_q * group / (-(-seq_q // per_warpgroup) * 64)
    return unpacked < 0.9 * packed


def launch_decode_plan(batch: int, heads_q: int, heads_kv: int, seq_q: int, seq_kv: int,
                       head_dim: int, value_head_dim: int, num_splits: int,
                       pack_gqa: Optional[bool], device_index: int,
                       tuning: Dict[str, Any]) -> Tuple[int, int, Dict[str, Any]]:
    """``decode_plan`` for a launch on ``device_index`` (whose SM count is
    read only when the split count is chosen); ``(1, 0, tuning)`` unchanged
    when no decode kernel is asked for."""
    if num_splits == 1 and pack_gqa is False:
        return 1, 0, tuning
    return decode_plan(batch, heads_q, heads_kv, seq_q, seq_kv, head_dim, value_head_dim,
                       num_splits, pack_gqa,
                       _multiprocessors(device_index) if num_splits == 0 else 0, tuning)


#: The prefill plan: the tuning of the plain kernels (top-left mask, no
#: window, no KV lengths, no modifiers, V's head dim Q's), by (head dim,
#: causal): entries ``(longest, tuning)`` in order, the first whose
#: ``longest`` is at least the longer of the two sequences (``None``: any
#: length) wins; lengths past every entry keep the head dim's defaults.
#:
#: Short sequences (measured on the H200: results/gpu-results.md, "Forward:
#: persistent kernels for short causal sequences" and "Persistent kernels
#: for short non-causal sequences"): a persistent grid starts each SM's next
#: tile while the last one's epilogue drains, which pays where the tiles are
#: short; at head dim 64 two consumer warpgroups (128 query rows) also halve
#: the masked work on the diagonal. Causal: D 64 1k +26 %, 2k +5 %, 4k +3 %;
#: D 96 1k +12 % (2k even); D 128 1k +5 %, 2k +6 %, 4k +3 %; from 8k on they
#: are slower (the grid's order no longer balances the causal work).
#: Non-causal: D 128 1k +4-5 % (2k on within noise); D 64 even and D 96 6-8 %
#: slower at 1k. Head dims 192 and 256 have no persistent kernel that fits in
#: shared memory with their 112- and 80-key blocks; at 192 one with 64 or 80
#: keys fits and pays for causal sequences up to 2k (H100, session 18,
#: interleaved against the default tiles: 1k +12 % and +11 % with 64 keys
#: (calls 8 and 10), 2k +6 % and +2 % with 80, 4k +4 % and -1 %); at 256 the
#: 48-key one is slower everywhere.
#:
#: Longer sequences at head dim 128 (H100, session 18: docs/performance.md
#: v14): three consumer warpgroups of 64 rows on 80-key blocks (192 x 80
#: tiles; 160 registers hold O's 64 and S's 40 accumulators without spills)
#: against two on 128 x 128, interleaved A/B (scripts/gpu/ab.py, 7 rounds,
#: both without rescale_threshold's skip): +7 % non-causal and +1 % causal
#: at 8k-16k, +4-5 % non-causal at 2k-4k; with the skip (which the 192 x 80
#: kernel gains from and 128 x 128 does not) +11-13 % and +7-8 % at 8k-16k.
#: Slower than the persistent kernel at 1k non-causal and 2k-4k causal.
#: Keyed like the rest by the longer sequence: a short query block over a
#: long cache (seq_q 100, seq_kv 9000) gets these tiles too (checked, not
#: timed).
PREFILL_PLAN: Dict[Tuple[int, bool], Tuple[Tuple[Optional[int], Dict[str, Any]], ...]] = {
    (64, True): ((2048, {"consumer_warpgroups": 2, "persistent": True}),
                 (4096, {"persistent": True})),
    (96, True): ((1024, {"consumer_warpgroups": 2, "persistent": True}),),
    (192, True): ((1024, {"persistent": True, "block_n": 64}),
                  (2048, {"persistent": True, "block_n": 80})),
    (128, True): ((4096, {"persistent": True}),
                  (None, {"consumer_warpgroups": 3, "block_n": 80})),
    (128, False): ((1024, {"persistent": True}),
                   (None, {"consumer_warpgroups": 3, "block_n": 80})),
}


def prefill_plan(head_dim: int, value_head_dim: int, causal: bool, mask_alignment: str,
                 sliding_window: bool, kv_lengths: bool, modifiers: bool, seq_q: int,
                 seq_kv: int, tuning: Dict[str, Any]) -> Dict[str, Any]:
    """The tuning of a plain forward launch: ``tuning`` as given when it is
    not empty (the caller chose), else PREFILL_PLAN's choice for the
    sequences' length, else none (the head dim's defaults)."""
    if (tuning or (causal and mask_alignment != "top_left") or sliding_window or kv_lengths
            or modifiers or value_head_dim != head_dim):
        return tuning
    for longest, planned in PREFILL_PLAN.get((head_dim, causal), ()):
        if longest is None or max(seq_q, seq_kv) <= longest:
            return dict(planned)
    return tuning


def _check_decode_args(num_splits: Any, pack_gqa: Any) -> None:
    if isinstance(num_splits, bool) or not isinstance(num_splits, int):
        raise TypeError(f"num_splits must be an int (0: choose, 1: no split), got "
                        f"{num_splits!r}")
    if not 0 <= num_splits <= MAX_SPLITS:
        raise ValueError(f"num_splits must be in [0, {MAX_SPLITS}] (0: choose, 1: no split), "
                         f"got {num_splits}")
    if pack_gqa is not None and not isinstance(pack_gqa, bool):
        raise TypeError(f"pack_gqa must be a bool or None (choose), got {pack_gqa!r}")


def decode_plan(batch: int, heads_q: int, heads_kv: int, seq_q: int, seq_kv: int,
                head_dim: int, value_head_dim: int, num_splits: int, pack_gqa: Optional[bool],
                multiprocessors: int, tuning: Dict[str, Any]) -> Tuple[int, int, Dict[str, Any]]:
    """The decode attributes of a launch: ``(num_splits, pack_gqa, tuning)``
    (pack_gqa: the G of the kernel, 0 for none; ``tuning`` with one consumer
    warpgroup where a packed or split tile's rows fit in 64). ``num_splits``
    0 and ``pack_gqa`` None are chosen (``should_pack_gqa``,
    ``num_splits_heuristic``); ``multiprocessors`` is only read then.

    Raises:
        ValueError: pack_gqa=True with more than 64 query heads per K/V head.
    """
    group = heads_q // heads_kv
    if pack_gqa is None:
        pack_gqa = should_pack_gqa(seq_q, group)
    elif pack_gqa and group > kernels.MAX_PACK_GQA:
        raise ValueError(f"pack_gqa=True needs at most {kernels.MAX_PACK_GQA} query heads per "
                         f"K/V head, got {heads_q} // {heads_kv} = {group}")
    pack = group if pack_gqa and group > 1 else 0
    # One consumer warpgroup when its 64 rows hold a whole decode tile: a
    # second would only multiply unused rows.
    one_warpgroup = (seq_q * (pack or 1) <= 64 and "consumer_warpgroups" not in tuning
                     and "pingpong" not in tuning)
    if num_splits == 0:
        warpgroups = tuning.get("consumer_warpgroups",
                                1 if one_warpgroup else 3 if head_dim in (64, 96) else 2)
        queries = (64 // pack if pack else 64) * warpgroups
        tiles = -(-seq_q // queries) * (heads_kv if pack else heads_q) * batch
        block_n = tuning.get("block_n", _DEFAULT_BLOCK_N.get((head_dim, value_head_dim), 128))
        num_splits = num_splits_heuristic(tiles, multiprocessors, -(-seq_kv // block_n))
    chosen = dict(tuning)
    if one_warpgroup and (pack or num_splits > 1):
        chosen["consumer_warpgroups"] = 1
    return num_splits, pack, chosen


def attention(q: Any, k: Any, v: Any, causal: bool = False, scale: Optional[float] = None,
              return_lse: bool = False, layout: str = "bhsd", out: Any = None,
              mask_alignment: str = "top_left", window_size: Tuple[int, int] = (-1, -1),
              kv_lengths: Any = None, deterministic: Optional[bool] = None,
              num_splits: int = 1, pack_gqa: Optional[bool] = False,
              score_mod: Any = None, mask_mod: Any = None,
              **tuning: int) -> Any:
    """Scaled dot-product attention, forward, computed by a kvpipe kernel.

    Head dims with a kernel of their own: 64, 96, 128, 192, 256 and 192 with
    v's 128; any other multiple of 8 up to 256, for q/k and for v, runs as
    the next of those with q, k and v zero-padded (80 as 96; the scale stays
    ``1 / sqrt(d)``, the output is cut back to v's columns, and autograd
    goes through the padding).

    ``score_mod`` and ``mask_mod``: FlexAttention's callbacks
    (``score_mod(score, b, h, q_idx, kv_idx)``, ``mask_mod(b, h, q_idx,
    kv_idx)``), traced into the kernel (kvpipe.modifiers, docs/modifiers.md),
    launched directly; with inputs requiring grad the backward kernels are
    generated from the same regions (the score_mod's derivative by the
    compiler). Tensors the callbacks index get no gradient: one that
    requires grad is refused.

    With torch installed and real tensors, this goes through the custom
    operator ``torch.ops.kvpipe.attention`` (so that ``torch.compile`` traces
    it without a graph break); ``out=`` and tuning attributes call the
    kernel directly. See ``attention_impl`` for the arguments.

    When grad mode is on and ``q``, ``k`` or ``v`` requires grad, the output
    has a ``grad_fn``: the forward saves O and the log-sum-exp, and the
    backward launches kvpipe's backward kernels (docs/backward.md). Tuning
    attributes apply to the forward kernel; ``out=`` is refused then (an
    output written in place cannot be differentiated). ``deterministic``:
    the backward's gradients are bit-identical run to run (dQ is summed in a
    fixed order, at a cost: docs/backward.md); None follows
    ``torch.are_deterministic_algorithms_enabled()`` at backward time.
    """
    if deterministic is not None and not isinstance(deterministic, bool):
        raise TypeError(f"deterministic must be a bool or None, got {deterministic!r}")
    padding = _head_dim_padding(q, k, v)
    if padding is not None:
        def padded_call(qp: Any, kp: Any, vp: Any, padded_scale: float, outp: Any) -> Any:
            return attention(qp, kp, vp, causal=causal, scale=padded_scale,
                             return_lse=return_lse, layout=layout, out=outp,
                             mask_alignment=mask_alignment, window_size=window_size,
                             kv_lengths=kv_lengths, deterministic=deterministic,
                             num_splits=num_splits, pack_gqa=pack_gqa, score_mod=score_mod,
                             mask_mod=mask_mod, **tuning)
        return _attention_padded(q, k, v, padding, scale, return_lse, out, padded_call)
    _check_decode_args(num_splits, pack_gqa)
    decode = num_splits != 1 or pack_gqa is not False
    if score_mod is not None or mask_mod is not None:
        if num_splits not in (0, 1) or pack_gqa is True:
            raise ValueError("score_mod and mask_mod cannot be combined with num_splits > 1 or "
                             "pack_gqa=True yet (the decode kernels have no modifiers)")
        traced = _modifiers.trace(score_mod, mask_mod)
        # The score_mod's tensors that require grad get their gradients
        # (learnable biases, slopes: the backward adds the score's gradient
        # times the region's derivative at each value read).
        if _needs_grad(q, k, v, *traced.aux_tensors):
            _check_grad_args(out, kv_lengths, deterministic, causal, mask_alignment,
                             window_size, mask_mod)
            _check_differentiable(traced, q, v, causal, deterministic, mask_alignment,
                                  window_size)
            from kvpipe.autograd import attention_with_grad

            o, lse = attention_with_grad(q, k, v, causal, scale, layout, tuning,
                                         deterministic, mask_alignment, tuple(window_size),
                                         score_mod, mask_mod, traced)
            return (o, lse) if return_lse else o
        return attention_impl(q, k, v, causal=causal, scale=scale, return_lse=return_lse,
                              layout=layout, out=out, mask_alignment=mask_alignment,
                              window_size=window_size, kv_lengths=kv_lengths,
                              score_mod=score_mod, mask_mod=mask_mod, _traced=traced,
                              **tuning)
    if _needs_grad(q, k, v):
        # Chosen (0, None) decode kernels fall back to the one the backward
        # pairs with; asked for ones are refused.
        if num_splits > 1 or pack_gqa is True:
            raise ValueError("num_splits > 1 and pack_gqa=True (decode kernels) cannot be "
                             "used when q, k or v requires grad")
        _check_grad_args(out, kv_lengths, deterministic, causal, mask_alignment,
                         window_size, None)
        op = _custom_op(q)
        if op is not None and not tuning:
            if scale is None:
                scale = 1.0 / math.sqrt(tuple(q.shape)[-1])
            left, right = normalise_window(window_size, causal)
            o, lse = op(q, k, v, causal, float(scale), layout, mask_alignment, left, right,
                        None, deterministic)
        else:
            from kvpipe.autograd import attention_with_grad

            o, lse = attention_with_grad(q, k, v, causal, scale, layout, tuning,
                                         deterministic, mask_alignment, tuple(window_size))
        return (o, lse) if return_lse else o
    op = _custom_op(q)
    if op is not None and (not isinstance(causal, bool) or layout not in LAYOUTS or
                           mask_alignment not in kernels.MASK_ALIGNMENTS or
                           (scale is not None and (isinstance(scale, bool) or
                                                   not isinstance(scale, (int, float))))):
        op = None  # let attention_impl report the bad argument
    # While torch.compile traces, the operator computes the unsplit,
    # unpacked kernel: same results (its schema has no decode choices yet).
    if op is None or out is not None or tuning:
        return attention_impl(q, k, v, causal=causal, scale=scale, return_lse=return_lse,
                              layout=layout, out=out, mask_alignment=mask_alignment,
                              window_size=window_size, kv_lengths=kv_lengths,
                              num_splits=num_splits, pack_gqa=pack_gqa, **tuning)
    if scale is None:
        shape = tuple(q.shape)
        scale = 1.0 / math.sqrt(shape[-1]) if shape and shape[-1] > 0 else 1.0
    left, right = normalise_window(window_size, causal)
    o, lse = op(q, k, v, causal, float(scale), layout, mask_alignment, left, right,
                kv_lengths)
    return (o, lse) if return_lse else o


def _check_grad_args(out: Any, kv_lengths: Any, deterministic: Optional[bool], causal: Any,
                     mask_alignment: Any, window_size: Any, mask_mod: Any) -> None:
    """What the backward cannot do, refused before the forward runs (when q,
    k or v requires grad), naming the argument."""
    _check_masks(causal, mask_alignment, window_size)
    if out is not None:
        raise ValueError("out= cannot be used when q, k or v requires grad")
    if kv_lengths is not None:
        raise ValueError("kv_lengths cannot be used when q, k or v requires grad: kvpipe's "
                         "backward has no per-batch key counts")
    if deterministic:
        # The ordered dQ additions assume the top-left causal mask or none
        # (docs/backward.md).
        if tuple(window_size) != (-1, -1):
            raise ValueError("window_size cannot be combined with deterministic=True when q, "
                             "k or v requires grad")
        if causal and mask_alignment != "top_left":
            raise ValueError("mask_alignment='bottom_right' with causal=True cannot be "
                             "combined with deterministic=True when q, k or v requires grad")
        if mask_mod is not None:
            raise ValueError("mask_mod cannot be combined with deterministic=True when q, k "
                             "or v requires grad")


def _check_modifier_lengths(traced: Any, sq: int, skv: int) -> None:
    """The kernels compute the regions' index arithmetic in f32 where that
    is exact for indices below MAX_MODIFIER_SEQUENCE (docs/modifiers.md)."""
    if traced is None:
        return
    for name, length in (("q", sq), ("k", skv)):
        if length >= MAX_MODIFIER_SEQUENCE:
            raise ValueError(f"with score_mod or mask_mod, {name}'s sequence length must be "
                             f"below 2**23 = {MAX_MODIFIER_SEQUENCE}, got {length}")


def _check_differentiable(traced: Any, q: Any, v: Any, causal: bool,
                          deterministic: Optional[bool],
                          mask_alignment: str, window_size: Tuple[int, int]) -> None:
    """Compiles (or finds in the cache) the backward family of a score_mod
    before the forward runs, so that a region the backward cannot
    differentiate is refused now, naming score_mod, rather than at the first
    ``.backward()``. Without a compiler this is left to the backward."""
    if traced is None or not traced.has_score_mod:
        return
    d, v_dim = tuple(q.shape)[-1], tuple(v.shape)[-1]
    if (d, v_dim) not in kernels.BACKWARD_HEAD_DIM_PAIRS:
        return  # attention_backward names the head dims
    _, _, sliding_window = _check_masks(causal, mask_alignment, window_size)
    if not causal and not sliding_window:
        mask_alignment = "top_left"  # as attention_backward: one family for both
    try:
        _compile_backward(backward_config_args(d, q.dtype, causal, bool(deterministic),
                                               mask_alignment, sliding_window, v_dim),
                          (traced.ir, traced.aux_types))
    except _compiler.CompilerNotFoundError:
        return
    except _compiler.CompilerError as exc:
        if "cannot be differentiated" not in str(exc):
            raise
        line = next(l for l in str(exc).splitlines() if "cannot be differentiated" in l)
        raise ValueError("score_mod cannot be differentiated by kvpipe's backward: "
                         + line.split("error: ", 1)[-1]) from None


def score_mod_reads(traced: Any) -> set:
    """The aux tensors (indices) the traced score_mod reads: the ones with a
    gradient (a mask_mod's reads have none: the mask is piecewise constant)."""
    if traced is None:
        return set()
    return set(traced.score_mod_reads)


def check_aux_grad(traced: Any) -> None:
    """Refuses modifiers that index a tensor requiring grad (with grad mode
    on): kvpipe's backward computes dq, dk and dv only."""
    if traced is None:
        return
    torch = sys.modules.get("torch")
    if torch is not None and not torch.is_grad_enabled():
        return
    for t in traced.aux_tensors:
        if getattr(t, "requires_grad", False):
            raise ValueError(f"score_mod/mask_mod index a tensor of shape {tuple(t.shape)} that "
                             "requires grad: its gradient comes from kvpipe.attention's "
                             "autograd or attention_backward(..., aux_grads=True), not here "
                             "(the varlen kernels do not compute it); pass it detached")


#: What the head-dim errors add: the dims that run zero-padded.
_PADDED_HEAD_DIMS = (f"or another multiple of 8 up to {kernels.MAX_PADDED_HEAD_DIM} "
                     "(run zero-padded as the next)")


def _head_dim_padding(q: Any, k: Any, v: Any) -> Optional[Tuple[int, int, int, int]]:
    """``(d, d_v, D, D_v)`` where q/k's head dim ``d`` and v's ``d_v`` (the
    last dimension in every layout) are not a generated pair but run zero
    padded as ``(D, D_v)`` (``kernels.padded_head_dims``: multiples of 8 up
    to 256, e.g. 80 as 96, 32 as 64); None otherwise, also for inputs the
    checks refuse (they name the argument)."""
    shapes = [tuple(getattr(t, "shape", ())) for t in (q, k, v)]
    if any(len(shape) < 3 or not all(isinstance(n, int) for n in shape) for shape in shapes):
        return None
    d, dk, dv = (shape[-1] for shape in shapes)
    if dk != d:
        return None
    pair = kernels.padded_head_dims(d, dv)
    if pair is None or pair == (d, dv):
        return None
    return d, dv, pair[0], pair[1]


def _zero_pad_columns(t: Any, columns: int) -> Any:
    """``t`` with zero columns appended to its last dimension up to
    ``columns`` (a torch op: autograd goes through it); ``t`` itself when it
    has them."""
    import torch.nn.functional as F

    width = tuple(t.shape)[-1]
    return F.pad(t, (0, columns - width)) if width != columns else t


def _attention_padded(q: Any, k: Any, v: Any, padding: Tuple[int, int, int, int],
                      scale: Optional[float], return_lse: bool, out: Any,
                      call: Callable[[Any, Any, Any, float, Any], Any]) -> Any:
    """``call(q, k, v, scale, out)`` on q, k, v (and ``out``) zero-padded to
    the kernels' head dims (``_head_dim_padding``), with the scale of the
    unpadded head dim; returns the output's first ``d_v`` columns (copied
    into ``out`` when given: rows the kernel leaves alone keep their
    values). Padding is done by torch ops, so autograd carries the gradients
    back through it (the padded columns' gradients are zero and dropped)."""
    d, dv, padded_d, padded_dv = padding
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    pad = _zero_pad_columns
    outp = None
    if out is not None:
        if _needs_grad(q, k, v):  # the call below would say so of the padded copy
            raise ValueError("out= cannot be used when q, k or v requires grad")
        if tuple(out.shape)[-1:] != (dv,):
            raise ValueError(f"out's head dim must be v's ({dv}), got {tuple(out.shape)}")
        outp = pad(out, padded_dv)
    result = call(pad(q, padded_d), pad(k, padded_d), pad(v, padded_dv), scale, outp)
    o, lse = result if return_lse else (result, None)
    o = o[..., :dv]
    if out is not None:
        out.copy_(o)
        o = out
    return (o, lse) if return_lse else o


def _needs_grad(*tensors: Any) -> bool:
    """Whether autograd must record the call: grad mode on and an input
    requiring grad."""
    if not any(getattr(t, "requires_grad", False) for t in tensors):
        return False
    torch = sys.modules.get("torch")
    return torch is None or torch.is_grad_enabled()


def _custom_op(q: Any) -> Any:
    """torch.ops.kvpipe.attention while torch.compile traces, else None.

    Eager calls launch directly: the operator's dispatch would add host time
    to every call, which short kernels feel.
    """
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(q, torch.Tensor):
        return None
    if not torch.compiler.is_compiling():
        return None
    from kvpipe import torch_ops  # noqa: F401  (registers the operator)

    return torch.ops.kvpipe.attention


def attention_impl(q: Any, k: Any, v: Any, causal: bool = False, scale: Optional[float] = None,
                   return_lse: bool = False, layout: str = "bhsd", out: Any = None,
                   mask_alignment: str = "top_left", window_size: Tuple[int, int] = (-1, -1),
                   kv_lengths: Any = None, num_splits: int = 1,
                   pack_gqa: Optional[bool] = False, score_mod: Any = None,
                   mask_mod: Any = None, _traced: Any = _modifiers.UNTRACED, **tuning: int) -> Any:
    """Launches the kernel (the operator's implementation).

    ``_traced``: ``kvpipe.modifiers.trace(score_mod, mask_mod)`` where the
    caller already traced them (each trace runs the callbacks in Python);
    by default traced here.

    Args:
        q: ``(B, H_q, S_q, D)`` (``layout="bhsd"``, torch SDPA's) or
            ``(B, S_q, H_q, D)`` (``"bshd"``, flash-attn's); bfloat16 or
            float16, on a CUDA device, D in {64, 96, 128, 192, 256}. Any
            strides with a contiguous last dimension and 16-byte aligned
            other strides.
        k, v: the same layout, with ``H_kv`` heads dividing ``H_q`` (GQA/MQA)
            and any ``S_kv``; k's head dim is q's, v's is q's or, with q's
            192, 128 (``kernels.HEAD_DIM_PAIRS``).
        causal: causal mask: query i sees keys <= i + d, where d is 0 with
            ``mask_alignment="top_left"`` (torch SDPA's ``is_causal``) and
            ``S_kv - S_q`` with ``"bottom_right"`` (flash-attn's).
        mask_alignment: ``"top_left"`` or ``"bottom_right"``: where the
            diagonal of the causal mask and of the window is.
        window_size: ``(left, right)``: query i sees keys in
            ``[i + d - left, i + d + right]``; -1 leaves a side unbounded
            (flash-attn's ``window_size``; with ``causal`` the right bound
            is 0). A query that sees no key gets zeros and an lse of +inf.
        kv_lengths: an optional int32 tensor ``(B,)`` on q's device: batch b
            uses only its first ``kv_lengths[b]`` keys (a padded KV cache;
            flash-attn's ``cache_seqlens``); values are clamped to
            ``[0, S_kv]``.
        num_splits: split each tile's K/V range over this many CTAs whose
            fp32 partials a combine kernel merges (decode: few queries, long
            caches; docs/serving.md); 1: no split; 0: chosen
            (``num_splits_heuristic``: enough CTAs to fill the SMs).
        pack_gqa: pack the query heads of each K/V head into one tile, so
            that K/V is read once per group (True), not (False), or choose
            (None: ``should_pack_gqa``, when ``S_q`` times the group is small).
        score_mod, mask_mod: FlexAttention-style callbacks traced into the
            kernel (kvpipe.modifiers): the score_mod receives the scaled
            score; the masks combine with causal and window_size; tensors
            they index must be on q's device.
        scale: the softmax scale (default ``1/sqrt(D)``).
        return_lse: also return the fp32 log-sum-exp ``(B, H_q, S_q)``.
        layout: ``"bhsd"`` or ``"bshd"``.
        out: an optional output tensor (q's shape with v's head dim, q's
            dtype, device and layout).
        **tuning: tuning attributes of the kernel (see kvpipe.compile_attention).

    Returns:
        ``o`` (q's shape with v's head dim, q's dtype and layout), or
        ``(o, lse)``.

    Raises:
        ValueError / TypeError: an argument of the wrong rank, dtype, device,
            head dim, head count, shape or strides; the message names it.
        kvpipe.cuda.CudaError: the launch failed (with the kernel's name and
            configuration).
    """
    (b, hq, sq, d), (_, hkv, skv, _), (_, _, _, dv) = _check_inputs(q, k, v, layout)
    out_shape = tuple(q.shape[:-1]) + (dv,)
    window_left, window_right, sliding_window = _check_masks(causal, mask_alignment,
                                                             window_size)
    _check_decode_args(num_splits, pack_gqa)
    if kv_lengths is not None:
        _tensors.check_tensor("kv_lengths", kv_lengths, rank=1, dtype="i32", device="cuda",
                              stride_alignment_bytes=None)
        if tuple(kv_lengths.shape) != (b,) or str(kv_lengths.device) != str(q.device):
            raise ValueError(f"kv_lengths must have shape ({b},) (one length per batch) on "
                             f"{q.device}, got {tuple(kv_lengths.shape)} on "
                             f"{kv_lengths.device}")
        if tuple(kv_lengths.stride()) != (1,):
            kv_lengths = kv_lengths.contiguous()
    if (causal and not sliding_window and sq == 1 and mask_alignment == "bottom_right"
            and kv_lengths is None):
        causal = False  # one query at the end sees every key: the plain kernel
    scale = check_scale_and_out(scale, d, out, out_shape, q)

    traced = _modifiers.trace_unless_traced(_traced, score_mod, mask_mod)
    _check_modifier_lengths(traced, sq, skv)
    if traced is not None and (num_splits != 1 or pack_gqa is not False):
        raise ValueError("score_mod and mask_mod cannot be combined with num_splits or "
                         "pack_gqa yet (the decode kernels have no modifiers)")
    import torch

    aux_values = _aux_arguments(traced, q) if traced is not None else {}
    out, lse, device_index = forward_outputs(q, out, out_shape, (b, hq, sq), return_lse)
    if not causal and not sliding_window:
        mask_alignment = "top_left"  # no mask: one kernel for both alignments
    num_splits, pack, tuning = launch_decode_plan(b, hq, hkv, sq, skv, d, dv, num_splits,
                                                  pack_gqa, device_index, tuning)
    if num_splits == 1 and not pack:
        tuning = prefill_plan(d, dv, causal, mask_alignment, sliding_window,
                              kv_lengths is not None, traced is not None, sq, skv, tuning)
    if num_splits > 1:
        return attention_split(q, out, lse, layout, (
            d, kernels.dtype_name(q.dtype), causal, dv if dv != d else None, mask_alignment,
            sliding_window, kv_lengths is not None, True, pack), device_index, tuning, {
            "q_map": ("q", q, layout), "k_map": ("k", k, layout), "v_map": ("v", v, layout),
            "seq_q": sq, "seq_kv": skv, "heads_per_kv_head": hq // hkv,
            "scale_log2": scale * _LOG2E, "heads_q": hq, "batch": b,
            "window_left": window_left, "window_right": window_right,
            "kv_lengths": kv_lengths.data_ptr() if kv_lengths is not None else 0},
            num_splits, return_lse)
    config_args: Tuple[Any, ...] = (d, kernels.dtype_name(q.dtype), causal,
                                    dv if dv != d else None, mask_alignment, sliding_window,
                                    kv_lengths is not None)
    if pack:
        config_args += (False, pack)
    kernel, abi = _kernel_for(config_args, device_index, tuple(sorted(tuning.items())),
                              *([(traced.ir, traced.aux_types)] if traced else []))
    args = kernel_arguments(abi, {
        "q_map": ("q", q, layout), "k_map": ("k", k, layout), "v_map": ("v", v, layout),
        "o_map": ("out", out, layout), "lse": lse.data_ptr() if lse is not None else 0,
        "seq_q": sq, "seq_kv": skv, "heads_per_kv_head": hq // hkv,
        "scale_log2": scale * _LOG2E, "heads_q": hq, "batch": b,
        "window_left": window_left, "window_right": window_right,
        "kv_lengths": kv_lengths.data_ptr() if kv_lengths is not None else 0,
        **{name: t.data_ptr() for name, t in aux_values.items()}})
    grid = launch_grid(abi, sq, hq, b,
                       _multiprocessors(device_index) if abi.get("persistent") else 0)
    log("launch %s: grid %s, block (%d, 1, 1), %d B shared, B=%d H=%d/%d S=%d/%d",
        abi["kernel"], grid, abi["threads"], abi["dynamic_shared_memory"], b, hq, hkv, sq, skv)
    guard, stream = device_launch(device_index)
    with guard:
        kernel.launch(grid, (abi["threads"], 1, 1), args,
                      shared_mem=abi["dynamic_shared_memory"], stream=stream)
    return (out, lse) if return_lse else out


def attention_split(q: Any, out: Any, lse: Any, layout: str, config_args: Tuple[Any, ...],
                    device_index: int, tuning: Dict[str, Any], values: Dict[str, Any],
                    num_splits: int, return_lse: bool) -> Any:
    """Launches a split-KV family (docs/kernel-abi.md, "Split-KV"): the main
    kernel writes each split's fp32 partial output and log-sum-exp to a
    workspace, the combine kernel merges them into ``out`` and ``lse``.
    ``values``: the main kernel's arguments by name but the workspace's (its
    maps as ``kernel_arguments`` takes them, and its scalars); ``config_args``
    as ``_kernel_for`` takes them.

    The workspace is taken from torch's caching allocator per call: that is
    cheap, stream-ordered (concurrent calls on other streams get their own)
    and private to a CUDA graph being captured, which a buffer kept here
    would not be.
    """
    import torch

    key = (config_args, device_index, tuple(sorted(tuning.items())))
    kernel, abi = _kernel_for(config_args, device_index, key[2])
    combine, combine_abi = _loaded_combine[key]
    b, hq, sq = values["batch"], values["heads_q"], values["seq_q"]
    dv = tuple(out.shape)[-1]
    o_partial = torch.empty((num_splits, b, hq, sq, dv), dtype=torch.float32, device=q.device)
    lse_partial = torch.empty((num_splits, b, hq, sq), dtype=torch.float32, device=q.device)
    args = kernel_arguments(abi, {
        **values, "num_splits": num_splits, "o_partial": o_partial.data_ptr(),
        "lse_partial": lse_partial.data_ptr()})
    grid = launch_grid(abi, sq, hq, b, 0, num_splits)
    out_strides = _bhsd_view("out", out, layout)[1]
    combine_args = kernel_arguments(combine_abi, {
        "o_partial": o_partial.data_ptr(), "lse_partial": lse_partial.data_ptr(),
        "o": out.data_ptr(), "lse": lse.data_ptr() if lse is not None else 0,
        "o_stride_b": out_strides[0], "o_stride_h": out_strides[1],
        "o_stride_s": out_strides[2], "seq_q": sq, "heads_q": hq, "batch": b,
        "num_splits": num_splits})
    log("launch %s: grid %s, %d splits, then %s", abi["kernel"], grid, num_splits,
        combine_abi["kernel"])
    guard, stream = device_launch(device_index)
    with guard:
        kernel.launch(grid, (abi["threads"], 1, 1), args,
                      shared_mem=abi["dynamic_shared_memory"], stream=stream)
        combine.launch(combine_grid(combine_abi, sq, hq, b), (combine_abi["threads"], 1, 1),
                       combine_args, stream=stream)
    return (out, lse) if return_lse else out


#: The kernels take scale * log2(e) as an f32 and divide by it (additive
#: score_mods): it must be a normal f32.
_SCALE_RANGE = (2.0 ** -126 / math.log2(math.e), 2.0 ** 127 / math.log2(math.e))


def checked_scale(scale: Any, head_dim: int) -> float:
    """The softmax scale: ``1/sqrt(head_dim)`` by default, else ``scale``
    checked (a positive number whose ``scale * log2(e)`` is a normal f32)."""
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if (isinstance(scale, bool) or not isinstance(scale, (int, float))
            or not math.isfinite(scale) or scale <= 0):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    if not _SCALE_RANGE[0] <= scale <= _SCALE_RANGE[1]:
        raise ValueError(f"scale must be between {_SCALE_RANGE[0]:.3g} and "
                         f"{_SCALE_RANGE[1]:.3g} (scale * log2(e) a normal f32), got {scale!r}")
    return float(scale)


def check_scale_and_out(scale: Any, head_dim: int, out: Any, out_shape: Tuple[int, ...],
                        q: Any) -> float:
    """The softmax scale (default ``1/sqrt(head_dim)``), checked, and checks
    ``out`` (when given) against the output's shape and q's dtype and device."""
    scale = checked_scale(scale, head_dim)
    if out is not None:
        _tensors.check_tensor("out", out, rank=4, device="cuda", last_dim_contiguous=True,
                              stride_alignment_bytes=16)
        if (tuple(out.shape) != out_shape or str(out.dtype) != str(q.dtype)
                or str(out.device) != str(q.device)):
            raise ValueError(f"out must have shape {out_shape} (q's with v's head dim), dtype "
                             f"{q.dtype} and device {q.device}, got {tuple(out.shape)}, "
                             f"{out.dtype}, {out.device}")
    return scale


def forward_outputs(q: Any, out: Any, out_shape: Tuple[int, ...],
                    lse_shape: Tuple[int, int, int], return_lse: bool) -> Tuple[Any, Any, int]:
    """The forward's output (``out``, or a new tensor like q of ``out_shape``),
    its fp32 log-sum-exp ``(B, H_q, S_q)`` or None, and q's device index."""
    import torch

    if out is None:
        out = torch.empty(out_shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(lse_shape, dtype=torch.float32, device=q.device) if return_lse else None
    device_index = q.device.index if q.device.index is not None else torch.cuda.current_device()
    return out, lse, device_index


def _aux_arguments(traced: Any, q: Any) -> Dict[str, Any]:
    """The auxiliary tensors of traced modifiers as the kernel reads them
    (``aux<i>``: contiguous float32 or int32 on q's device), by name."""
    import torch

    values = {}
    for i, (t, element) in enumerate(zip(traced.aux_tensors, traced.aux_types)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"a modifier indexes a {type(t).__name__}: only torch tensors "
                            "can be read by the kernel")
        if str(t.device) != str(q.device):
            raise ValueError(f"a tensor a modifier indexes (shape {tuple(t.shape)}) must be on "
                             f"q's device {q.device}, got {t.device}")
        want = torch.float32 if element == "f32" else torch.int32
        values[f"aux{i}"] = t.detach().to(want).contiguous()
    return values


class BackwardConfig(NamedTuple):
    """What selects a backward family (and keys its cache), besides the
    modifiers: ``backward_config_args`` builds it from a call's arguments."""
    head_dim: int
    dtype: str
    causal: bool
    deterministic: bool
    mask_alignment: str = "top_left"
    sliding_window: bool = False
    #: V's head dim where it differs from Q/K's (192/128), else None.
    value_head_dim: Optional[int] = None
    #: The aux tensors (indices) whose gradients the main kernel adds.
    aux_grads: Tuple[int, ...] = ()
    #: Sequences packed without padding (``attention_varlen_backward``).
    varlen: bool = False
    #: dQ from registers above head dim 128 (the ``dq_atomics`` tuning
    #: attribute); None: the compiler's default (on there, outside
    #: deterministic mode).
    dq_atomics: Optional[bool] = None
    #: The log-sum-exp and delta of each Q block loaded into shared memory
    #: with Q and dO (the ``shared_statistics`` tuning attribute); None: the
    #: compiler's default (on).
    shared_statistics: Optional[bool] = None

    def tuning(self) -> Dict[str, bool]:
        """The backward tuning attributes this key sets (the others are the
        compiler's defaults)."""
        return {name: getattr(self, name) for name in kernels.BACKWARD_TUNING
                if getattr(self, name) is not None}


_loaded_backward: Dict[Tuple[Any, ...], Dict[str, Tuple[cuda.Kernel, Dict[str, Any]]]] = {}


def _backward_kernels(config_args: BackwardConfig, device_index: int,
                      modifiers: Tuple[str, Tuple[str, ...]] = ("", ())
                      ) -> Dict[str, Tuple[cuda.Kernel, Dict[str, Any]]]:
    """The loaded backward family (role -> (kernel, ABI)), compiled or cached
    once; ``modifiers``: the traced regions and aux types, as for the forward
    (the cache key)."""
    key = (config_args, device_index, modifiers)
    found = _loaded_backward.get(key)
    if found is not None:
        return found
    with _lock:
        found = _loaded_backward.get(key)
        if found is None:
            compiled = _compile_backward(config_args, modifiers)
            module = cuda.Module(compiled.image, name=compiled.name, device=device_index)
            found = {}
            for role in ("preprocess", "main", "postprocess"):
                abi = compiled.kernel_abi(role)
                kernel = module.function(abi["kernel"])
                if abi["dynamic_shared_memory"]:
                    kernel.set_max_dynamic_shared_memory(abi["dynamic_shared_memory"])
                found[role] = (kernel, abi)
            log("loaded %s on device %d", compiled.name, device_index)
            _loaded_backward[key] = found
    return found


def _compile_backward(config: BackwardConfig,
                      modifiers: Tuple[str, Tuple[str, ...]]) -> Any:
    """The compiled (or cached) backward family of ``config`` and
    ``modifiers`` (regions, aux types)."""
    return kernels.compile_attention(config.head_dim, config.dtype, config.causal,
                                     backward=True, deterministic=config.deterministic,
                                     mask_alignment=config.mask_alignment,
                                     sliding_window=config.sliding_window,
                                     value_head_dim=config.value_head_dim,
                                     modifiers=modifiers[0], aux_types=modifiers[1],
                                     aux_grads=config.aux_grads, varlen=config.varlen,
                                     **config.tuning())


def backward_config_args(head_dim: int, dtype: Any, causal: bool, deterministic: bool,
                         mask_alignment: str = "top_left", sliding_window: bool = False,
                         value_head_dim: Optional[int] = None,
                         aux_grads: Tuple[int, ...] = (), varlen: bool = False,
                         dq_atomics: Optional[bool] = None,
                         shared_statistics: Optional[bool] = None) -> BackwardConfig:
    """The key of a backward family (``_backward_kernels``)."""
    return BackwardConfig(head_dim, kernels.dtype_name(dtype), causal, deterministic,
                          mask_alignment, sliding_window,
                          None if value_head_dim in (None, head_dim) else value_head_dim,
                          tuple(aux_grads), varlen, dq_atomics, shared_statistics)


def _check_backward_dims(d: int, v_dim: int, causal: Any) -> None:
    """The head dim pairs the backward families have, and a bool ``causal``."""
    if (d, v_dim) not in kernels.BACKWARD_HEAD_DIM_PAIRS:
        raise ValueError("the backward supports head dims "
                         f"{', '.join(map(str, kernels.BACKWARD_HEAD_DIMS))} with v's equal to "
                         f"q's, and q's 192 with v's 128, got q's {d} and v's {v_dim}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {causal!r}")


def _kernel_ready(name: str, t: Any) -> Any:
    """``t`` with a contiguous last dimension and 16-byte aligned strides
    (what the kernels read), copied only when it has not."""
    ok = (t.stride(-1) == 1 and all(s * t.element_size() % 16 == 0 for s in t.stride()[:-1])
          and t.data_ptr() % 16 == 0)
    return t if ok else t.contiguous()


def attention_backward(q: Any, k: Any, v: Any, o: Any, lse: Any, do: Any,
                       causal: bool = False, scale: Optional[float] = None,
                       layout: str = "bhsd", dq: Any = None, dk: Any = None,
                       dv: Any = None,
                       deterministic: Optional[bool] = None,
                       mask_alignment: str = "top_left",
                       window_size: Tuple[int, int] = (-1, -1),
                       score_mod: Any = None, mask_mod: Any = None,
                       _traced: Any = _modifiers.UNTRACED,
                       aux_grads: bool = False,
                       dq_atomics: Optional[bool] = None,
                       shared_statistics: Optional[bool] = None) -> Tuple[Any, ...]:
    """The gradients ``(dq, dk, dv)`` of ``o = attention(q, k, v)`` for the
    output gradient ``do`` (with ``aux_grads``, also a tuple of the score_mod
    tensors' gradients: one per aux tensor, None for those that do not
    require grad or that only a mask_mod reads), from the forward's ``o``
    and ``lse`` (what
    ``attention(..., return_lse=True)`` returns), by kvpipe's backward kernels
    (docs/backward.md): preprocess, main, postprocess.

    ``q``, ``k``, ``v``, ``causal``, ``scale`` and ``layout`` as for the
    forward (head dims 64, 96, 128, 192, 256, and 192 with v's 128); ``o``
    and ``do`` have q's shape with v's head dim, ``lse`` is fp32 ``(B, H_q,
    S_q)``. ``dq``, ``dk``, ``dv``: optional outputs of q's, k's and v's
    shapes, dtype and layout (written in place; any strides the forward
    accepts). ``deterministic``: bit-identical gradients run to run (the
    dQ contributions of the K/V blocks are added in a fixed order); None
    follows ``torch.are_deterministic_algorithms_enabled()``.
    ``dq_atomics``: at head dims above 128, dQ added to its fp32 accumulator
    from registers rather than through staged bulk reductions (the kernel's
    ``dq_atomics`` tuning attribute; None: the compiler's choice, from
    registers outside deterministic mode).
    ``shared_statistics``: each Q block's log-sum-exp and delta copied into
    shared memory with its Q and dO tiles, rather than read from global
    memory by every thread (the kernel's ``shared_statistics`` tuning
    attribute; None: the compiler's choice, on).
    ``mask_alignment``, ``window_size``, ``score_mod`` and ``mask_mod``: the
    forward's (the same callbacks: they are traced again, and the kernels
    are cached by the traced regions); the score_mod's derivative is
    generated by the compiler (docs/modifiers.md), and tensors the callbacks
    index get no gradient. Deterministic mode supports the top-left causal
    mask or none, without a mask_mod.

    Raises:
        ValueError / TypeError: an argument of the wrong shape, dtype, device
            or strides; the message names it.
    """
    padding = _head_dim_padding(q, k, v)
    if padding is not None:
        # Zero columns of q, k (and v, o, dO) give zero gradient columns:
        # the kernels' gradients of the padded inputs, cut back.
        d_qk, d_v, padded_d, padded_dv = padding
        grads = attention_backward(
            *(_zero_pad_columns(t, n)
              for t, n in ((q, padded_d), (k, padded_d), (v, padded_dv), (o, padded_dv))),
            lse, _zero_pad_columns(do, padded_dv), causal=causal,
            scale=1.0 / math.sqrt(d_qk) if scale is None else scale, layout=layout,
            deterministic=deterministic, mask_alignment=mask_alignment,
            window_size=window_size, score_mod=score_mod, mask_mod=mask_mod, _traced=_traced,
            aux_grads=aux_grads, dq_atomics=dq_atomics, shared_statistics=shared_statistics)
        cut = [g[..., :n] for g, n in zip(grads[:3], (d_qk, d_qk, d_v))]
        for i, given in enumerate((dq, dk, dv)):
            if given is not None:
                given.copy_(cut[i])
                cut[i] = given
        return (*cut, *grads[3:])
    (b, hq, sq, d), (_, hkv, skv, _), (_, _, _, v_dim) = _check_inputs(q, k, v, layout)
    _check_backward_dims(d, v_dim, causal)
    if deterministic is not None and not isinstance(deterministic, bool):
        raise TypeError(f"deterministic must be a bool or None, got {deterministic!r}")
    for name, value in (("dq_atomics", dq_atomics), ("shared_statistics", shared_statistics)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool or None, got {value!r}")
    scale = checked_scale(scale, d)
    window_left, window_right, sliding_window = _check_masks(causal, mask_alignment,
                                                             window_size)
    if not causal and not sliding_window:
        mask_alignment = "top_left"  # no mask: one kernel for both alignments
    traced = _modifiers.trace_unless_traced(_traced, score_mod, mask_mod)
    if not aux_grads:
        check_aux_grad(traced)
    _check_modifier_lengths(traced, sq, skv)
    if deterministic:
        _check_grad_args(None, None, deterministic, causal, mask_alignment, window_size,
                         mask_mod)
    # Copied below where the kernels cannot read them as they are.
    # O and dO: q's shape with v's head dim.
    o_shape = tuple(q.shape)[:-1] + (v_dim,)
    for name, t in (("o", o), ("do", do)):
        _tensors.check_tensor(name, t, rank=4, device="cuda", last_dim_contiguous=False,
                              stride_alignment_bytes=None)
        if tuple(t.shape) != o_shape or str(t.dtype) != str(q.dtype):
            raise ValueError(f"{name} must have the shape {o_shape} (q's, with v's head dim) "
                             f"and q's dtype {q.dtype}, got {tuple(t.shape)} and {t.dtype}")
    _tensors.check_tensor("lse", lse, rank=3, device="cuda", last_dim_contiguous=False,
                          stride_alignment_bytes=None)
    if tuple(lse.shape) != (b, hq, sq) or str(lse.dtype) != "torch.float32":
        raise ValueError(f"lse must be float32 of shape {(b, hq, sq)}, got {lse.dtype} "
                         f"{tuple(lse.shape)}")
    for name, t, like in (("dq", dq, q), ("dk", dk, k), ("dv", dv, v)):
        if t is None:
            continue
        _tensors.check_tensor(name, t, rank=4, device="cuda", last_dim_contiguous=True,
                              stride_alignment_bytes=16)
        if tuple(t.shape) != tuple(like.shape) or str(t.dtype) != str(like.dtype):
            raise ValueError(f"{name} must have the shape {tuple(like.shape)} and dtype "
                             f"{like.dtype} of its input, got {tuple(t.shape)}, {t.dtype}")
    import torch

    o, do = _kernel_ready("o", o), _kernel_ready("do", do)
    lse = lse.contiguous()
    if deterministic is None:
        deterministic = torch.are_deterministic_algorithms_enabled()
    if deterministic:  # as torch.are_deterministic_algorithms_enabled() says
        _check_grad_args(None, None, deterministic, causal, mask_alignment, window_size,
                         mask_mod)
    aux_values = _aux_arguments(traced, q) if traced is not None else {}
    # The gradients of the f32 tensors that require grad (with aux_grads):
    # fp32 accumulators of their elements, which the kernel adds into.
    grad_indices = tuple(
        i for i, (t, element) in enumerate(zip(traced.aux_tensors, traced.aux_types))
        if element == "f32" and getattr(t, "requires_grad", False)
        and i in score_mod_reads(traced)
    ) if aux_grads and traced is not None else ()
    aux_accumulators = {f"aux{i}_grad": torch.zeros_like(aux_values[f"aux{i}"])
                        for i in grad_indices}

    device_index = q.device.index if q.device.index is not None else torch.cuda.current_device()
    family = _backward_kernels(backward_config_args(d, q.dtype, causal, deterministic,
                                                    mask_alignment, sliding_window, v_dim,
                                                    grad_indices, dq_atomics=dq_atomics,
                                                    shared_statistics=shared_statistics),
                               device_index,
                               *([(traced.ir, traced.aux_types)] if traced else []))
    block_m = family["main"][1]["block_m"]
    padded = (sq + block_m - 1) // block_m * block_m
    f32 = dict(dtype=torch.float32, device=q.device)
    delta = torch.empty((b, hq, padded), **f32)
    lse_log2 = torch.empty((b, hq, padded), **f32)
    dq_accum = torch.empty((b, hq, padded, d), **f32)
    # One counter per 64-row Q block (deterministic mode; the preprocess
    # zeroes them).
    dq_semaphore = (torch.empty((b, hq, padded // block_m), dtype=torch.int32,
                                device=q.device) if deterministic else None)
    semaphore = {"dq_semaphore": dq_semaphore.data_ptr()} if deterministic else {}
    if dq is None:
        dq = torch.empty_like(q, memory_format=torch.contiguous_format)
    group = hq // hkv
    # The main kernel writes dK and dV per query head: into the gradients
    # themselves for MHA, else into (B, H_q, S_kv, D) buffers whose groups are
    # summed below.
    if group == 1:
        dk_out = dk if dk is not None else torch.empty_like(k, memory_format=torch.contiguous_format)
        dv_out = dv if dv is not None else torch.empty_like(v, memory_format=torch.contiguous_format)
        kv_layout = layout
    else:
        dk_out = torch.empty((b, hq, skv, d), dtype=q.dtype, device=q.device)
        dv_out = torch.empty((b, hq, skv, v_dim), dtype=q.dtype, device=q.device)
        kv_layout = "bhsd"

    def strides(t: Any, t_layout: str) -> Tuple[int, ...]:
        return _bhsd_view("", t, t_layout)[1][:3]

    grid_q = ((sq + block_m - 1) // block_m, hq, b)
    guard, stream = device_launch(device_index)
    with guard:
        kernel, abi = family["preprocess"]
        os_, dos = strides(o, layout), strides(do, layout)
        args = kernel_arguments(abi, {
            "o": o.data_ptr(), "do": do.data_ptr(), "lse": lse.data_ptr(),
            "delta": delta.data_ptr(), "lse_log2": lse_log2.data_ptr(),
            "dq_accum": dq_accum.data_ptr(), "o_stride_b": os_[0], "o_stride_h": os_[1],
            "o_stride_s": os_[2], "do_stride_b": dos[0], "do_stride_h": dos[1],
            "do_stride_s": dos[2], "seq_q": sq, "heads_q": hq, **semaphore})
        kernel.launch(grid_q, (abi["threads"], 1, 1), args, stream=stream)

        kernel, abi = family["main"]
        args = kernel_arguments(abi, {
            "q_map": ("q", q, layout), "k_map": ("k", k, layout), "v_map": ("v", v, layout),
            "do_map": ("do", do, layout), "dk_map": ("dk", dk_out, kv_layout),
            "dv_map": ("dv", dv_out, kv_layout), "lse_log2": lse_log2.data_ptr(),
            "delta": delta.data_ptr(), "dq_accum": dq_accum.data_ptr(), "seq_q": sq,
            "seq_kv": skv, "heads_per_kv_head": group, "scale_log2": scale * _LOG2E,
            "scale": float(scale), "heads_q": hq, "batch": b, **semaphore,
            "window_left": window_left, "window_right": window_right,
            **{name: t.data_ptr() for name, t in aux_values.items()},
            **{name: t.data_ptr() for name, t in aux_accumulators.items()}})
        grid = ((skv + abi["block_n"] - 1) // abi["block_n"], hq, b)
        log("launch %s: grid %s, block (%d, 1, 1), %d B shared", abi["kernel"], grid,
            abi["threads"], abi["dynamic_shared_memory"])
        kernel.launch(grid, (abi["threads"], 1, 1), args,
                      shared_mem=abi["dynamic_shared_memory"], stream=stream)

        kernel, abi = family["postprocess"]
        dqs = strides(dq, layout)
        args = kernel_arguments(abi, {
            "dq_accum": dq_accum.data_ptr(), "dq": dq.data_ptr(), "dq_stride_b": dqs[0],
            "dq_stride_h": dqs[1], "dq_stride_s": dqs[2], "seq_q": sq, "heads_q": hq,
            "scale": float(scale)})
        kernel.launch(grid_q, (abi["threads"], 1, 1), args, stream=stream)

    if aux_grads:
        # Each tensor's gradient in its shape and dtype (None for the others).
        extra = tuple(
            aux_accumulators[f"aux{i}_grad"].view(tuple(t.shape)).to(t.dtype)
            if f"aux{i}_grad" in aux_accumulators else None
            for i, t in enumerate(traced.aux_tensors)) if traced is not None else ()
    if group == 1:
        return (dq, dk_out, dv_out) + ((extra,) if aux_grads else ())
    # GQA/MQA: a K/V head's gradient is the sum over its query heads.
    summed = []
    for name, buf, out_t, like in (("dk", dk_out, dk, k), ("dv", dv_out, dv, v)):
        total = buf.view(b, hkv, group, skv, buf.shape[-1]).sum(
            dim=2, dtype=torch.float32).to(q.dtype)
        if layout == "bshd":
            total = total.transpose(1, 2)
        if out_t is None:
            out_t = torch.empty_like(like, memory_format=torch.contiguous_format)
        out_t.copy_(total)
        summed.append(out_t)
    return (dq, summed[0], summed[1]) + ((extra,) if aux_grads else ())


def _is_contiguous(t: Any) -> bool:
    """Row-major strides (what the kernel's pointer arithmetic assumes)."""
    expected, step = [], 1
    for extent in reversed(tuple(t.shape)):
        expected.insert(0, step)
        step *= extent
    return all(a == b for a, b, n in zip(tuple(t.stride()), expected, tuple(t.shape)) if n > 1)


class _PackedView:
    """A packed ``(total, H, D)`` tensor seen as ``(1, total, H, D)`` (the
    kernel's maps are 4-D; flash-attn's varlen tensors are 3-D), with
    everything else the tensor's."""

    def __init__(self, t: Any):
        self._t = t
        total, heads, dim = tuple(t.shape)
        s0, s1, s2 = tuple(t.stride())
        self.shape = (1, total, heads, dim)
        self._strides = (max(total, 1) * s0, s0, s1, s2)
        self.dtype, self.device = t.dtype, t.device

    def stride(self) -> Tuple[int, ...]:
        return self._strides

    def data_ptr(self) -> int:
        return self._t.data_ptr()

    def element_size(self) -> int:
        return self._t.element_size()


#: Set to 1 to have attention_varlen check cu_seqlens on the device (one
#: synchronisation per call); flash_attn_varlen_func honours it too.
CHECK_CU_SEQLENS_ENV = "KVPIPE_CHECK_CU_SEQLENS"


def check_varlen_inputs(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                        max_seqlen_q: Any, max_seqlen_k: Any) -> Tuple[int, ...]:
    """Checks what can be checked without reading device memory: the packed
    tensors' ranks, dtypes, devices, strides and head counts, the cu_seqlens
    tensors' dtype, shape and device, and the maxima's types.

    Returns:
        ``(batch, total_q, total_k, heads_q, heads_kv, head_dim, value_head_dim,
        max_seqlen_q, max_seqlen_k)``, the maxima as ints.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        _tensors.check_tensor(name, t, rank=3, device="cuda", last_dim_contiguous=True,
                              stride_alignment_bytes=16)
    if len({str(t.dtype) for t in (q, k, v)}) != 1:
        raise TypeError(f"q, k and v must have the same dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    kernels.dtype_name(q.dtype)  # raises TypeError for other dtypes
    if len({str(t.device) for t in (q, k, v)}) != 1:
        raise ValueError(f"q, k and v must be on the same device, got {q.device}, "
                         f"{k.device}, {v.device}")
    total_q, hq, d = tuple(q.shape)
    total_k, hkv, dk = tuple(k.shape)
    if d not in kernels.HEAD_DIMS:
        raise ValueError(f"q's head dim must be one of {kernels.HEAD_DIMS} "
                         f"{_PADDED_HEAD_DIMS}, got {d}")
    if dk != d:
        raise ValueError(f"k's head dim must equal q's ({d}), got {dk}")
    if tuple(v.shape)[:2] != (total_k, hkv):
        raise ValueError(f"v must have k's rows and heads ({total_k}, {hkv}), got "
                         f"{tuple(v.shape)}")
    dv = tuple(v.shape)[2]
    if (d, dv) not in kernels.HEAD_DIM_PAIRS:
        supported = ", ".join(str(x) for dq, x in kernels.HEAD_DIM_PAIRS if dq == d)
        raise ValueError(f"v's head dim must be one of ({supported}) {_PADDED_HEAD_DIMS} "
                         f"with q's head dim {d}, "
                         f"got {dv}")
    if hkv < 1 or hq % hkv != 0:
        raise ValueError(f"q's heads ({hq}) must be a multiple of k and v's heads "
                         f"({hkv}) (grouped-query attention)")
    if hq > 65535:
        raise ValueError(f"q's heads ({hq}) must be at most 65535 (a grid dimension)")
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        _tensors.check_tensor(name, t, rank=1, dtype="i32", device="cuda",
                              last_dim_contiguous=False, stride_alignment_bytes=None)
        if str(t.device) != str(q.device):
            raise ValueError(f"{name} must be on q's device {q.device}, got {t.device}")
    entries = tuple(cu_seqlens_q.shape)[0]
    if entries < 2:
        raise ValueError(f"cu_seqlens_q must have shape (batch + 1,) with batch >= 1, got "
                         f"{tuple(cu_seqlens_q.shape)}")
    if tuple(cu_seqlens_k.shape) != (entries,):
        raise ValueError(f"cu_seqlens_k must have cu_seqlens_q's shape ({entries},) (batch + "
                         f"1 offsets), got {tuple(cu_seqlens_k.shape)}")
    batch = entries - 1
    if batch > 65535:
        raise ValueError(f"the batch (cu_seqlens_q's length - 1 = {batch}) must be at most "
                         "65535 (a grid dimension)")
    maxima = []
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        # Any integer (numpy's too), not a bool or a float.
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if value.__index__() < 0:
            raise ValueError(f"{name} must be non-negative, got {value}")
        maxima.append(value.__index__())
    return (batch, total_q, total_k, hq, hkv, d, dv, *maxima)


def validate_cu_seqlens(cu_seqlens_q: Any, cu_seqlens_k: Any, total_q: int, total_k: int,
                     max_seqlen_q: int, max_seqlen_k: int) -> None:
    """Checks the offsets' values: each starts at 0, never decreases, ends at
    its tensor's rows, and no sequence is longer than its maximum. Reads the
    device (one synchronisation): only when asked.

    Raises:
        ValueError: naming the argument and the first bad sequence.
    """
    import torch

    for name, offsets, total, longest, maximum in (
            ("cu_seqlens_q", cu_seqlens_q, total_q, "max_seqlen_q", max_seqlen_q),
            ("cu_seqlens_k", cu_seqlens_k, total_k, "max_seqlen_k", max_seqlen_k)):
        values = offsets.to(torch.int64).tolist()
        if values[0] != 0 or values[-1] != total:
            raise ValueError(f"{name} must start at 0 and end at the packed rows ({total}), "
                             f"got {values[0]} ... {values[-1]}")
        lengths = [b - a for a, b in zip(values, values[1:])]
        for i, n in enumerate(lengths):
            if n < 0:
                raise ValueError(f"{name} must not decrease: sequence {i} has length {n}")
            if n > maximum:
                raise ValueError(f"{longest} ({maximum}) is smaller than sequence {i}'s "
                                 f"length {n} ({name})")


def attention_varlen(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                     max_seqlen_q: int, max_seqlen_k: int, causal: bool = False,
                     scale: Optional[float] = None, return_lse: bool = False,
                     mask_alignment: str = "top_left",
                     window_size: Tuple[int, int] = (-1, -1),
                     check_cu_seqlens: Optional[bool] = None, out: Any = None,
                     lse_out: Any = None, score_mod: Any = None, mask_mod: Any = None,
                     deterministic: Optional[bool] = None, **tuning: int) -> Any:
    """Attention over a batch of sequences packed without padding (the
    ``varlen`` kernel; flash-attn's ``flash_attn_varlen_func`` layout).

    Args:
        q: ``(total_q, H_q, D)``; sequence b is rows
            ``[cu_seqlens_q[b], cu_seqlens_q[b+1])``. bfloat16 or float16 on
            a CUDA device; strides as for :func:`attention_impl`.
        k, v: ``(total_k, H_kv, D)`` (v: ``D_v``), sequence b at rows
            ``[cu_seqlens_k[b], cu_seqlens_k[b+1])``.
        cu_seqlens_q, cu_seqlens_k: int32 ``(batch + 1,)`` on q's device.
        max_seqlen_q, max_seqlen_k: the longest sequences. The grid covers
            ``max_seqlen_q`` query rows per sequence: rows of a longer
            sequence are not computed (not checked unless asked: that needs
            a device read); keys are each sequence's own.
        causal, mask_alignment, window_size, scale: as for
            :func:`attention_impl`, per sequence (its own lengths anchor the
            bottom-right diagonal).
        return_lse: also return the fp32 log-sum-exp ``(H_q, total_q)``.
        check_cu_seqlens: read cu_seqlens back and check them (one
            synchronisation); default: the ``KVPIPE_CHECK_CU_SEQLENS``
            environment variable.
        out: an optional output, ``(total_q, H_q, D_v)`` contiguous, q's
            dtype and device.
        lse_out: an optional fp32 ``(H_q, total_q)`` contiguous log-sum-exp
            output (with ``return_lse``).
        score_mod, mask_mod: FlexAttention-style callbacks, as for
            :func:`attention`, traced into the kernel (docs/modifiers.md):
            ``b`` is the sequence's index, ``q_idx`` and ``kv_idx`` its query's
            and key's positions in the sequence. With inputs requiring grad,
            the packed backward kernels run them (their tensors get no
            gradient; not in deterministic mode).
        deterministic: with inputs requiring grad, the backward's
            (:func:`attention_varlen_backward`'s, per sequence); None follows
            ``torch.are_deterministic_algorithms_enabled()``.

    Returns:
        ``out`` ``(total_q, H_q, D_v)`` contiguous, or ``(out, lse)``. Only
        the sequences' rows are written: rows after ``cu_seqlens_q[-1]``
        are left as they were. With q, k or v requiring grad (and grad
        mode on), ``out`` has a grad_fn: the backward is
        :func:`attention_varlen_backward`.

    Raises:
        ValueError / TypeError: a bad argument, named.
    """
    padding = _head_dim_padding(q, k, v)
    if padding is not None:
        def padded_call(qp: Any, kp: Any, vp: Any, padded_scale: float, outp: Any) -> Any:
            return attention_varlen(qp, kp, vp, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                    max_seqlen_k, causal=causal, scale=padded_scale,
                                    return_lse=return_lse, mask_alignment=mask_alignment,
                                    window_size=window_size, check_cu_seqlens=check_cu_seqlens,
                                    out=outp, lse_out=lse_out, score_mod=score_mod, mask_mod=mask_mod,
                                    deterministic=deterministic, **tuning)
        return _attention_padded(q, k, v, padding, scale, return_lse, out, padded_call)
    traced = _modifiers.trace(score_mod, mask_mod)
    check_aux_grad(traced)
    if _needs_grad(q, k, v):
        if out is not None or lse_out is not None:
            raise ValueError("out and lse_out cannot be given when q, k or v require grad "
                             "(autograd records a new output)")
        if deterministic is not None and not isinstance(deterministic, bool):
            raise TypeError(f"deterministic must be a bool or None, got {deterministic!r}")
        if deterministic and traced is not None:  # refused now rather than in the backward
            raise NotImplementedError(
                "deterministic mode with score_mod/mask_mod in the varlen backward: the packed "
                "kernels add dQ in no fixed order")
        from kvpipe.autograd import varlen_attention_with_grad

        # The arguments are checked by this function, called again there
        # without grad.
        o, lse = varlen_attention_with_grad(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                            max_seqlen_k, causal, scale, mask_alignment,
                                            tuple(window_size), check_cu_seqlens, tuning,
                                            deterministic, score_mod, mask_mod, traced)
        return (o, lse) if return_lse else o
    batch, total_q, total_k, hq, hkv, d, dv, max_seqlen_q, max_seqlen_k = check_varlen_inputs(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    window_left, window_right, sliding_window = _check_masks(causal, mask_alignment,
                                                             window_size)
    scale = checked_scale(scale, d)
    _check_modifier_lengths(traced, max_seqlen_q, max_seqlen_k)
    for name, t, shape, dtype in (("out", out, (total_q, hq, dv), str(q.dtype)),
                                  ("lse_out", lse_out, (hq, total_q), "torch.float32")):
        if t is None:
            continue
        # The output's rows are written with 16-byte stores.
        _tensors.check_tensor(name, t, rank=len(shape), device="cuda",
                              last_dim_contiguous=True,
                              stride_alignment_bytes=16 if name == "out" else None)
        if (tuple(t.shape) != shape or str(t.dtype) != dtype or str(t.device) != str(q.device)
                or not _is_contiguous(t)):
            raise ValueError(f"{name} must be a contiguous {dtype} tensor of shape {shape} on "
                             f"{q.device}, got {t.dtype} {tuple(t.shape)} strides "
                             f"{tuple(t.stride())} on {t.device}")
    if lse_out is not None and not return_lse:
        raise ValueError("lse_out needs return_lse=True")
    if check_cu_seqlens is None:
        check_cu_seqlens = os.environ.get(CHECK_CU_SEQLENS_ENV, "0") not in ("", "0")

    import torch

    if check_cu_seqlens:
        validate_cu_seqlens(cu_seqlens_q, cu_seqlens_k, total_q, total_k, max_seqlen_q,
                            max_seqlen_k)
    # No sequence is longer than the packed tensor: a larger maximum only
    # grows the grid.
    max_seqlen_q, max_seqlen_k = min(max_seqlen_q, total_q), min(max_seqlen_k, total_k)
    if out is None:
        out = torch.empty((total_q, hq, dv), dtype=q.dtype, device=q.device)
    lse = lse_out
    if return_lse and lse is None:
        lse = torch.empty((hq, total_q), dtype=torch.float32, device=q.device)
    if max_seqlen_q == 0:
        return (out, lse) if return_lse else out
    if total_k == 0:  # no keys in any sequence: zeros and an lse of +inf
        out.zero_()
        if lse is not None:
            lse.fill_(math.inf)
        return (out, lse) if return_lse else out
    cu_seqlens_q, cu_seqlens_k = cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous()
    device_index = q.device.index if q.device.index is not None else torch.cuda.current_device()
    if not causal and not sliding_window:
        mask_alignment = "top_left"  # no mask: one kernel for both alignments
    kernel, abi = _kernel_for((d, kernels.dtype_name(q.dtype), causal,
                               dv if dv != d else None, mask_alignment, sliding_window, False),
                              device_index, tuple(sorted(tuning.items())),
                              (traced.ir, traced.aux_types) if traced else ("", ()),
                              varlen=True)
    args = varlen_kernel_arguments(abi, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
                                   max_seqlen_q, max_seqlen_k, scale, (window_left, window_right),
                                   _aux_arguments(traced, q) if traced else {})
    grid = launch_grid(abi, max_seqlen_q, hq, batch, 0)
    log("launch %s: grid %s, block (%d, 1, 1), %d B shared, varlen B=%d H=%d/%d "
        "total=%d/%d max=%d/%d", abi["kernel"], grid, abi["threads"],
        abi["dynamic_shared_memory"], batch, hq, hkv, total_q, total_k, max_seqlen_q,
        max_seqlen_k)
    guard, stream = device_launch(device_index)
    with guard:
        kernel.launch(grid, (abi["threads"], 1, 1), args,
                      shared_mem=abi["dynamic_shared_memory"], stream=stream)
    return (out, lse) if return_lse else out


#: Which kernels ``attention_varlen_backward`` runs without modifiers and
#: outside deterministic mode: "packed" (the default: the varlen backward
#: family, three launches for the batch, no synchronisation; 0.97-2.2x the
#: per-sequence way in ``bench --varlen``, results/gpu-results.md) or
#: "sequences" (the dense backward family per sequence: one synchronisation
#: and three launches a sequence). With a score_mod or mask_mod only the
#: packed kernels serve (their ``b`` is the sequence); deterministic mode
#: only the per-sequence ones.
VARLEN_BACKWARD_ENV = "KVPIPE_VARLEN_BACKWARD"


def varlen_padded_rows(total_q: int, batch: int, block_m: int) -> int:
    """Rows per head of the packed backward's fp32 row buffers (lse_log2,
    delta, dq_accum): each sequence's rows padded to whole ``block_m``-row
    Q blocks from ``floor((cu_seqlens_q[b] + b * block_m) / block_m) *
    block_m`` (the kernels' ``paddedRowBase``, docs/backward.md)."""
    return (total_q + batch * block_m + block_m - 1) // block_m * block_m


def attention_varlen_backward(q: Any, k: Any, v: Any, out: Any, lse: Any, dout: Any,
                              cu_seqlens_q: Any, cu_seqlens_k: Any, causal: bool = False,
                              scale: Optional[float] = None, mask_alignment: str = "top_left",
                              window_size: Tuple[int, int] = (-1, -1),
                              deterministic: Optional[bool] = None,
                              max_seqlen_q: Optional[int] = None,
                              max_seqlen_k: Optional[int] = None,
                              score_mod: Any = None, mask_mod: Any = None,
                              _traced: Any = _modifiers.UNTRACED,
                              packed: Optional[bool] = None) -> Tuple[Any, Any, Any]:
    """The gradients ``(dq, dk, dv)`` of :func:`attention_varlen` for the
    output gradient ``dout``, from its ``out`` and ``lse`` (``(H_q,
    total_q)``), in the packed layouts of q, k and v; rows that belong to no
    sequence get zero gradients.

    Two ways (``packed``; None: packed, per sequence in deterministic mode
    or where ``KVPIPE_VARLEN_BACKWARD=sequences``, see
    ``VARLEN_BACKWARD_ENV``; packed wherever modifiers are given):

    * packed: the ``varlen`` backward family (docs/backward.md, "Packed
      sequences"): preprocess, main and postprocess over the whole batch,
      each CTA reading its sequence from ``cu_seqlens``; the grids are sized
      by ``max_seqlen_q`` / ``max_seqlen_k`` (read back from cu_seqlens, one
      synchronisation, when not given). ``score_mod`` / ``mask_mod``: the
      forward's callbacks (``b`` the sequence); their tensors get no
      gradient.
    * per sequence: the dense backward family (:func:`attention_backward`)
      on views of each sequence's rows, after reading ``cu_seqlens`` back
      (one synchronisation, three launches a sequence). Deterministic mode
      takes this way.

    Raises:
        ValueError / TypeError: a bad argument, named.
        NotImplementedError: deterministic mode with modifiers.
    """
    _, total_q, total_k, hq, hkv, d, dv, _, _ = check_varlen_inputs(
        q, k, v, cu_seqlens_q, cu_seqlens_k, 1, 1)
    for name, t, shape, dtype in (("out", out, (total_q, hq, dv), str(q.dtype)),
                                  ("dout", dout, (total_q, hq, dv), str(q.dtype)),
                                  ("lse", lse, (hq, total_q), "torch.float32")):
        _tensors.check_tensor(name, t, rank=len(shape), device="cuda",
                              last_dim_contiguous=False, stride_alignment_bytes=None)
        if tuple(t.shape) != shape or str(t.dtype) != dtype:
            raise ValueError(f"{name} must be a {dtype} tensor of shape {shape}, got "
                             f"{t.dtype} {tuple(t.shape)}")
    if packed is not None and not isinstance(packed, bool):
        raise TypeError(f"packed must be a bool or None, got {packed!r}")
    if deterministic is not None and not isinstance(deterministic, bool):
        raise TypeError(f"deterministic must be a bool or None, got {deterministic!r}")
    traced = _modifiers.trace_unless_traced(_traced, score_mod, mask_mod)
    if deterministic is None:
        import torch

        deterministic = torch.are_deterministic_algorithms_enabled()
    if deterministic and traced is not None:
        raise NotImplementedError(
            "deterministic mode with score_mod/mask_mod in the varlen backward: the packed "
            "kernels add dQ in no fixed order, and the per-sequence ones would give the "
            "regions each sequence as batch 0")
    if packed is None:
        way = os.environ.get(VARLEN_BACKWARD_ENV, "") or "packed"
        if way not in ("sequences", "packed"):
            raise ValueError(f"{VARLEN_BACKWARD_ENV} must be 'sequences' or 'packed', "
                             f"got {way!r}")
        packed = traced is not None or (way == "packed" and not deterministic)
    if packed and deterministic:
        raise ValueError("packed=True is not supported with deterministic=True (the packed "
                         "kernels add dQ in no fixed order)")
    if packed:
        return _varlen_backward_packed(q, k, v, out, lse, dout, cu_seqlens_q, cu_seqlens_k,
                                       causal, scale, mask_alignment, window_size,
                                       max_seqlen_q, max_seqlen_k, traced)
    if traced is not None:
        raise ValueError("packed=False cannot run score_mod/mask_mod: per sequence, their b "
                         "index would not be the sequence's")
    import torch

    starts_q, starts_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    # Read back anyway: overlapping sequences would overwrite each other's
    # gradients, so the offsets are checked here.
    for name, starts, total in (("cu_seqlens_q", starts_q, total_q),
                                ("cu_seqlens_k", starts_k, total_k)):
        if starts[0] != 0 or starts[-1] > total or any(
                a > b for a, b in zip(starts, starts[1:])):
            raise ValueError(f"{name} must start at 0, never decrease and end at most at "
                             f"{total} (the packed rows), got {starts}")
    dq, dk, dv_out = (torch.zeros_like(t, memory_format=torch.contiguous_format)
                      for t in (q, k, v))

    def rows(t: Any, start: int, end: int) -> Any:
        return t[start:end].unsqueeze(0)  # (1, len, H, D): bshd

    for b in range(len(starts_q) - 1):
        q0, q1 = max(starts_q[b], 0), min(starts_q[b + 1], total_q)
        k0, k1 = max(starts_k[b], 0), min(starts_k[b + 1], total_k)
        if q1 <= q0 or k1 <= k0:
            continue  # no queries, or no keys (out is 0): nothing flows back
        # A sequence with as many queries as keys has one diagonal for both
        # alignments: the top-left family then serves (and deterministic
        # mode, which needs it).
        alignment = "top_left" if q1 - q0 == k1 - k0 else mask_alignment
        attention_backward(rows(q, q0, q1), rows(k, k0, k1), rows(v, k0, k1),
                           rows(out, q0, q1), lse[:, q0:q1].unsqueeze(0),
                           rows(dout, q0, q1), causal=causal, scale=scale, layout="bshd",
                           dq=rows(dq, q0, q1), dk=rows(dk, k0, k1), dv=rows(dv_out, k0, k1),
                           deterministic=deterministic, mask_alignment=alignment,
                           window_size=window_size)
    return dq, dk, dv_out


def _varlen_backward_packed(q: Any, k: Any, v: Any, out: Any, lse: Any, dout: Any,
                            cu_seqlens_q: Any, cu_seqlens_k: Any, causal: bool,
                            scale: Optional[float], mask_alignment: str,
                            window_size: Tuple[int, int], max_seqlen_q: Optional[int],
                            max_seqlen_k: Optional[int], traced: Any) -> Tuple[Any, Any, Any]:
    """``attention_varlen_backward`` by the varlen backward family: the
    arguments are checked there."""
    import torch

    total_q, hq, d = tuple(q.shape)
    total_k, hkv, _ = tuple(k.shape)
    v_dim = tuple(v.shape)[-1]
    batch = tuple(cu_seqlens_q.shape)[0] - 1
    _check_backward_dims(d, v_dim, causal)
    scale = checked_scale(scale, d)
    window_left, window_right, sliding_window = _check_masks(causal, mask_alignment,
                                                             window_size)
    if not causal and not sliding_window:
        mask_alignment = "top_left"  # no mask: one kernel for both alignments
    if traced is not None:
        check_aux_grad(traced)
    if max_seqlen_q is None or max_seqlen_k is None:
        lengths = [(t[1:] - t[:-1]).max().item() if batch else 0
                   for t in (cu_seqlens_q, cu_seqlens_k)]
        max_seqlen_q = lengths[0] if max_seqlen_q is None else max_seqlen_q
        max_seqlen_k = lengths[1] if max_seqlen_k is None else max_seqlen_k
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise TypeError(f"{name} must be a non-negative int, got {value!r}")
    # No sequence is longer than the packed tensor: a larger maximum only
    # grows the grids.
    max_seqlen_q, max_seqlen_k = min(max_seqlen_q, total_q), min(max_seqlen_k, total_k)
    _check_modifier_lengths(traced, max_seqlen_q, max_seqlen_k)
    group = hq // hkv
    # Rows of no sequence, and keys no query sees, keep these zeros.
    dq = torch.zeros((total_q, hq, d), dtype=q.dtype, device=q.device)
    if max_seqlen_q == 0 or max_seqlen_k == 0 or batch == 0:
        return dq, torch.zeros((total_k, hkv, d), dtype=q.dtype, device=q.device), \
            torch.zeros((total_k, hkv, v_dim), dtype=q.dtype, device=q.device)
    dk_heads = torch.zeros((total_k, hq, d), dtype=q.dtype, device=q.device)
    dv_heads = torch.zeros((total_k, hq, v_dim), dtype=q.dtype, device=q.device)
    out, dout = _kernel_ready("out", out), _kernel_ready("dout", dout)
    lse = lse.contiguous()
    cu_seqlens_q, cu_seqlens_k = cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous()
    device_index = q.device.index if q.device.index is not None else torch.cuda.current_device()
    family = _backward_kernels(backward_config_args(d, q.dtype, causal, False, mask_alignment,
                                                    sliding_window, v_dim, varlen=True),
                               device_index,
                               *([(traced.ir, traced.aux_types)] if traced else []))
    block_m = family["main"][1]["block_m"]
    padded = varlen_padded_rows(total_q, batch, block_m)
    f32 = dict(dtype=torch.float32, device=q.device)
    buffers = {"delta": torch.empty((hq, padded), **f32),
               "lse_log2": torch.empty((hq, padded), **f32),
               "dq_accum": torch.empty((hq, padded, d), **f32),
               "dq": dq, "dk": dk_heads, "dv": dv_heads}
    aux_values = _aux_arguments(traced, q) if traced is not None else {}
    launches = varlen_backward_launches(
        {role: abi for role, (_, abi) in family.items()}, q, k, v, out, dout, lse,
        cu_seqlens_q, cu_seqlens_k, {name: t.data_ptr() for name, t in buffers.items()},
        max_seqlen_q, max_seqlen_k, scale, (window_left, window_right),
        {name: t.data_ptr() for name, t in aux_values.items()})
    guard, stream = device_launch(device_index)
    with guard:
        for role, grid, values in launches:
            kernel, abi = family[role]
            log("launch %s: grid %s, block (%d, 1, 1), %d B shared, varlen B=%d total=%d/%d",
                abi["kernel"], grid, abi["threads"], abi["dynamic_shared_memory"], batch,
                total_q, total_k)
            kernel.launch(grid, (abi["threads"], 1, 1), kernel_arguments(abi, values),
                          shared_mem=abi["dynamic_shared_memory"], stream=stream)
    if group == 1:
        return dq, dk_heads, dv_heads
    # GQA/MQA: a K/V head's gradient is the sum over its query heads.
    dk, dv_out = (t.view(total_k, hkv, group, t.shape[-1]).sum(dim=2, dtype=torch.float32)
                  .to(q.dtype) for t in (dk_heads, dv_heads))
    return dq, dk, dv_out


def varlen_backward_launches(abis: Dict[str, Dict[str, Any]], q: Any, k: Any, v: Any,
                             out: Any, dout: Any, lse: Any, cu_seqlens_q: Any,
                             cu_seqlens_k: Any, buffers: Dict[str, int], max_seqlen_q: int,
                             max_seqlen_k: int, scale: float, window: Tuple[int, int],
                             aux: Dict[str, int]) -> list:
    """The packed backward family's launches, in order: ``(role, grid,
    values)`` with ``values`` the parameters by name (for
    ``kernel_arguments``). ``abis``: role -> ABI; ``buffers``: the device
    addresses of ``delta``, ``lse_log2``, ``dq_accum`` (``(H_q,
    varlen_padded_rows)`` rows), ``dq`` ``(total_q, H_q, D)`` and the per
    query head ``dk``, ``dv`` ``(total_kv, H_q, D)``, all contiguous; ``aux``:
    the modifiers' tensors' addresses (docs/kernel-abi.md, "Packed
    sequences")."""
    total_q, hq, d = tuple(q.shape)
    total_k, hkv = tuple(k.shape)[:2]
    batch = tuple(cu_seqlens_q.shape)[0] - 1
    block_m = abis["main"]["block_m"]
    offsets = {"cu_seqlens_q": cu_seqlens_q.data_ptr(), "cu_seqlens_k": cu_seqlens_k.data_ptr(),
               "total_q": total_q, "total_kv": total_k}
    rows = {name: buffers[name] for name in ("delta", "lse_log2", "dq_accum")}
    grid_q = ((max_seqlen_q + block_m - 1) // block_m, hq, batch)
    o_strides, do_strides = tuple(out.stride()), tuple(dout.stride())
    # (total, H, D): the row stride is the sequence stride, no batch's.
    preprocess = {"o": out.data_ptr(), "do": dout.data_ptr(), "lse": lse.data_ptr(), **rows,
                  "o_stride_b": 0, "o_stride_h": o_strides[1], "o_stride_s": o_strides[0],
                  "do_stride_b": 0, "do_stride_h": do_strides[1], "do_stride_s": do_strides[0],
                  "seq_q": max_seqlen_q, "heads_q": hq, **offsets}
    main = {"q_map": ("q", _PackedView(q), "bshd"), "k_map": ("k", _PackedView(k), "bshd"),
            "v_map": ("v", _PackedView(v), "bshd"),
            "do_map": ("dout", _PackedView(dout), "bshd"), "dk": buffers["dk"],
            "dv": buffers["dv"], **rows, "seq_q": max_seqlen_q, "seq_kv": max_seqlen_k,
            "heads_per_kv_head": hq // hkv, "scale_log2": scale * _LOG2E,
            "scale": float(scale), "heads_q": hq, "batch": batch, "window_left": window[0],
            "window_right": window[1], **offsets, **aux}
    postprocess = {"dq_accum": buffers["dq_accum"], "dq": buffers["dq"], "dq_stride_b": 0,
                   "dq_stride_h": d, "dq_stride_s": hq * d, "seq_q": max_seqlen_q,
                   "heads_q": hq, "scale": float(scale), **offsets}
    grid_kv = ((max_seqlen_k + abis["main"]["block_n"] - 1) // abis["main"]["block_n"], hq,
               batch)
    return [("preprocess", grid_q, preprocess), ("main", grid_kv, main),
            ("postprocess", grid_q, postprocess)]


def varlen_kernel_arguments(abi: Dict[str, Any], q: Any, k: Any, v: Any, out: Any, lse: Any,
                            cu_seqlens_q: Any, cu_seqlens_k: Any, max_seqlen_q: int,
                            max_seqlen_k: int, scale: float,
                            window: Tuple[int, int],
                            aux: Optional[Dict[str, Any]] = None) -> list:
    """The launch arguments of a ``varlen`` kernel: the packed tensors'
    maps as ``(1, total, H, D)``, the maxima as seq_q / seq_kv, the offsets,
    the output's address and rows, the modifiers' tensors (``aux<i>``;
    docs/kernel-abi.md)."""
    hq, hkv = tuple(q.shape)[1], tuple(k.shape)[1]
    return kernel_arguments(abi, {
        "q_map": ("q", _PackedView(q), "bshd"), "k_map": ("k", _PackedView(k), "bshd"),
        "v_map": ("v", _PackedView(v), "bshd"), "o_map": ("out", _PackedView(out), "bshd"),
        "lse": lse.data_ptr() if lse is not None else 0,
        "seq_q": max_seqlen_q, "seq_kv": max_seqlen_k, "heads_per_kv_head": hq // hkv,
        "scale_log2": scale * _LOG2E, "heads_q": hq, "batch": tuple(cu_seqlens_q.shape)[0] - 1,
        "window_left": window[0], "window_right": window[1],
        "cu_seqlens_q": cu_seqlens_q.data_ptr(), "cu_seqlens_k": cu_seqlens_k.data_ptr(),
        "o": out.data_ptr(), "total_q": tuple(q.shape)[0],
        **{name: t.data_ptr() for name, t in (aux or {}).items()}})
