"""Loading and launching kvpipe kernels: what every launcher (kvpipe.attention,
kvpipe.backward, kvpipe.varlen, kvpipe.paged) shares.

The launch follows the kernel's ABI as the compiler wrote it
(docs/kernel-abi.md): the parameter order (``params``), each tensor map's box
and swizzle, ``block_m`` for the grid, ``threads`` and the dynamic shared
memory. Only what each parameter means -- which tensor a map encodes, what
``seq_q`` is -- lives in the launchers. The maps are by-value CUtensorMaps of
the 4-D tensors seen as ``(B, H, S, D)`` whatever their memory layout (the
strides say where things are); ``lse`` is a pointer to a contiguous fp32
``(B, H_q, S_q)`` tensor or null; grid ``(ceil(S_q / block_m), H_q, B)``, or
for a persistent kernel ``(min(tiles, SMs), 1, 1)``.

Here: the loaded kernels, compiled or found in the cache once per
configuration and device (``_kernel_for``; ``_backward_kernels`` for a
backward family, keyed by ``BackwardConfig``, here rather than in
kvpipe.backward because the forward compiles a score_mod's backward family
before it runs), the arguments in the ABI's order (``kernel_arguments``, the
tensor maps encoded and cached), the grids, and a launch's device and stream.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from typing import Any, Dict, NamedTuple, Optional, Tuple

from kvpipe import cuda, kernels, tma
from kvpipe._log import log

#: The kernels take the softmax scale times log2(e) (``scale_log2``).
_LOG2E = 1.4426950408889634


_loaded: Dict[Tuple[Any, ...], Tuple[cuda.Kernel, Dict[str, Any]]] = {}
#: The combine kernel of a loaded split-KV family, under the main kernel's key.
_loaded_combine: Dict[Tuple[Any, ...], Tuple[cuda.Kernel, Dict[str, Any]]] = {}
_lock = threading.Lock()


def _kernel_for(config_args: Tuple[Any, ...],
                device_index: int,
                tuning: Tuple[Tuple[str, int], ...],
                modifiers: Tuple[str, Tuple[str, ...]] = ("", ()),
                varlen: bool = False,
                spill_fallback: Optional[Tuple[Tuple[str, int], ...]] = None,
                ) -> Tuple[cuda.Kernel, Dict[str, Any]]:
    """The loaded kernel for a configuration on a device, compiled or cached
    once; ``modifiers``: the traced regions and aux types (kvpipe.modifiers);
    ``varlen``: the kernel of packed variable-length batches.
    ``spill_fallback``: a plan's tuning to load instead where the kernel of
    ``tuning`` keeps part of its registers in local memory
    (plans.spill_fallback); the choice is remembered apart from the kernel of
    ``tuning`` itself, which a caller that chose ``tuning`` gets as chosen."""
    key = (config_args, device_index, tuning, modifiers, varlen)
    choice = key if spill_fallback is None else key + (spill_fallback,)
    found = _loaded.get(choice)
    if found is not None:
        return found
    found = _load_kernel(key)
    if spill_fallback is not None:
        spilled = found[0].attribute("local_size_bytes")
        if spilled:
            log("%s keeps %d B a thread in local memory: loading the plan's fallback "
                "tuning %s instead", found[1]["kernel"], spilled, dict(spill_fallback))
            found = _kernel_for(config_args, device_index, spill_fallback, modifiers, varlen)
        with _lock:
            _loaded[choice] = found
    return found


#: The defaults of the optional ``config_args`` of a forward kernel, in
#: order: split_kv, pack_gqa, page_size, sinks (forward_config_args).
_FORWARD_EXTRA_DEFAULTS = (False, 0, 0, False)


def forward_config_args(head_dim: int, dtype: str, causal: bool,
                        value_head_dim: Optional[int], mask_alignment: str,
                        sliding_window: bool, kv_lengths: bool, split_kv: bool = False,
                        pack_gqa: int = 0, page_size: int = 0,
                        sinks: bool = False) -> Tuple[Any, ...]:
    """The ``config_args`` of a forward kernel for ``_kernel_for``: the
    fixed seven, then ``split_kv``, ``pack_gqa``, ``page_size`` and
    ``sinks`` up to the last one that is not its default (one key per
    kernel, whichever launcher asks)."""
    extra = (split_kv, pack_gqa, page_size, sinks)
    used = max((i + 1 for i, (value, default) in enumerate(zip(extra, _FORWARD_EXTRA_DEFAULTS))
                if value != default), default=0)
    return (head_dim, dtype, causal, value_head_dim, mask_alignment, sliding_window,
            kv_lengths) + extra[:used]


def _forward_extras(config_args: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """``(split_kv, pack_gqa, page_size, sinks)`` of a forward kernel's
    ``config_args``: decode, paging and sinks follow the fixed seven, where
    given, in that order."""
    extra = tuple(config_args[7:])
    return extra + _FORWARD_EXTRA_DEFAULTS[len(extra):]


def compiled_kernel(key: Tuple[Any, ...]) -> Any:
    """The compiled kernel (``kernels.compile_attention``, from the cache or
    compiled) of a ``_kernel_for`` key."""
    config_args, _, tuning, modifiers, varlen = key
    (head_dim, dtype, causal, value_head_dim, mask_alignment, sliding_window,
     kv_lengths) = config_args[:7]
    split_kv, pack_gqa, page_size, sinks = _forward_extras(config_args)
    return kernels.compile_attention(
        head_dim, dtype, causal, value_head_dim=value_head_dim,
        wait_timeout=int(os.environ.get("KVPIPE_WAIT_TIMEOUT", "0")),
        mask_alignment=mask_alignment, sliding_window=sliding_window, kv_lengths=kv_lengths,
        split_kv=split_kv, pack_gqa=pack_gqa, page_size=page_size, sinks=sinks,
        modifiers=modifiers[0], aux_types=modifiers[1], varlen=varlen, **dict(tuning))


def _load_kernel(key: Tuple[Any, ...]) -> Tuple[cuda.Kernel, Dict[str, Any]]:
    """Compiles (or takes from the cache) and loads the kernel of a
    ``_kernel_for`` key, once."""
    device_index = key[1]
    with _lock:
        found = _loaded.get(key)
        if found is None:
            compiled = compiled_kernel(key)
            module = cuda.Module(compiled.image, name=compiled.name, device=device_index)
            kernel = module.function(compiled.name)
            kernel.set_max_dynamic_shared_memory(compiled.abi["dynamic_shared_memory"])
            if _forward_extras(key[0])[0]:  # split_kv
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


_maps: "OrderedDict[Tuple[Any, ...], bytes]" = OrderedDict()
#: A serving step launches every layer on its own Q, output and K/V cache
#: buffers (four maps a layer, 80 layers and more): the maps of a whole step
#: stay cached (128 bytes each).
_MAX_CACHED_MAPS = 4096


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


class LaunchPlans:
    """Launch plans remembered per call signature (``plan_key``), for the
    launchers whose calls repeat (a decode step launches the same signature
    every layer and step): what the checks and the plan decide, so that a
    call of a planned signature only binds its tensors' addresses. Bounded
    (the oldest plan goes first); first in, first out, so that a lookup
    never reorders what another thread evicts."""

    def __init__(self, capacity: int = 1024):
        self.capacity = capacity
        self._plans: Dict[Any, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        return self._plans.get(key) if key is not None else None

    def remember(self, key: Any, plan: Any) -> None:
        if key is None:
            return
        with self._lock:
            self._plans[key] = plan
            if len(self._plans) > self.capacity:
                self._plans.pop(next(iter(self._plans)))

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()

    def __len__(self) -> int:
        return len(self._plans)


def tensor_signature(t: Any) -> Any:
    """What a plan may read of a tensor but its address and values (None for
    None)."""
    return None if t is None else (t.shape, t.stride(), t.dtype, t.device)


def plan_key(tensors: Tuple[Any, ...], options: Tuple[Any, ...], window_size: Any,
             tuning: Dict[str, Any], regions: Any = None) -> Any:
    """The key of a launch plan: the tensors' signatures (shapes, strides,
    dtypes, devices; None for absent ones), the scalar options, the window,
    the tuning and the traced regions, with the type of every scalar: True,
    1 and 1.0 hash alike, and a launcher's checks accept some of them and
    refuse others. None where something is not a tensor or not hashable:
    such a call is checked and planned every time (the checks name the
    argument). A device without an index is the current one, which the
    caller adds to the key."""
    try:
        scalars = (*options, *window_size, *tuning.values())
        key = (tuple(map(tensor_signature, tensors)), scalars, tuple(map(type, scalars)),
               tuple(tuning), regions)
        hash(key)
        return key
    except (AttributeError, TypeError):
        return None


def aligned_16(*tensors: Any) -> bool:
    """Whether each tensor (None: skipped) starts 16-byte aligned, as TMA
    needs: what a planned call still checks of its tensors (the plan checked
    the rest of what their signature holds)."""
    return not any(t is not None and t.data_ptr() % 16 for t in tensors)


class KernelABIError(RuntimeError):
    """A kernel's ABI (what the compiler wrote) names something this runtime
    cannot provide: a compiler and a runtime of different kvpipe releases."""


def kernel_arguments(abi: Dict[str, Any], values: Dict[str, Any]) -> cuda.PackedArgs:
    """The launch arguments in the order the ABI's ``params`` lists them,
    packed for ``Kernel.launch`` (the ABI's ``cuda.ArgLayout``).

    ``values`` maps each parameter name to its value: tensor maps to the
    ``(name, tensor, layout)`` they encode (the box and swizzle come from the
    ABI's entry of that name), ``lse`` to a device address, the rest to
    numbers; each parameter's kind is the ABI's (``param_kinds``) or, for
    the kinds ABI version 2 fixed, this table's.
    """
    params, layout = _param_kinds(abi)
    if abi.get("pack_gqa") and values.get("heads_per_kv_head") != abi["pack_gqa"]:
        raise ValueError(f"heads_per_kv_head ({values.get('heads_per_kv_head')}) must equal the "
                         f"pack_gqa ({abi['pack_gqa']}) kernel {abi.get('kernel')} was "
                         "compiled for")
    try:
        ordered = [values[name] for name, _ in params]
    except KeyError:
        unknown = [name for name, _ in params if name not in values]
        raise KernelABIError(f"kernel {abi.get('kernel')} takes parameters {unknown} "
                             "that this runtime does not provide") from None
    for i in layout.tensor_maps:
        tensor_name, tensor, tensor_layout = ordered[i]
        ordered[i] = _tensor_map(tensor_name, tensor, tensor_layout, abi[params[i][0]])
    for i in layout.pointers:
        if type(ordered[i]) is not int and hasattr(ordered[i], "data_ptr"):
            ordered[i] = ordered[i].data_ptr()
    return layout.pack(ordered)


_resolved_kinds: Dict[int, Tuple[Dict[str, Any], Tuple[Tuple[str, str], ...],
                                 cuda.ArgLayout]] = {}


def _param_kinds(abi: Dict[str, Any]) -> Tuple[Tuple[Tuple[str, str], ...], cuda.ArgLayout]:
    """``(name, kind)`` of each parameter of a kernel's ABI, in order, and
    their ``cuda.ArgLayout``, resolved once per ABI (every launch reads them).

    Raises:
        KernelABIError: an ABI version or a parameter kind this runtime does
            not know.
    """
    found = _resolved_kinds.get(id(abi))
    if found is not None and found[0] is abi:
        return found[1], found[2]
    if abi.get("abi_version") not in ABI_VERSIONS:
        raise KernelABIError(f"kernel {abi.get('kernel')} has ABI version "
                             f"{abi.get('abi_version')}; this runtime knows {ABI_VERSIONS}: "
                             "use a compiler and a Python package of the same release")
    kinds = {**_V2_PARAM_KINDS, **abi.get("param_kinds", {})}
    unknown = [name for name in abi["params"]
               if kinds.get(name) not in cuda.ArgLayout.KINDS]
    if unknown:
        raise KernelABIError(f"kernel {abi.get('kernel')} takes parameters {unknown} "
                             "that this runtime does not provide")
    params = tuple((name, kinds[name]) for name in abi["params"])
    layout = cuda.ArgLayout([kind for _, kind in params])
    # The ABI is kept with its entry, so that its id is not reused meanwhile.
    _resolved_kinds[id(abi)] = (abi, params, layout)
    return params, layout


#: Parameter kinds of ABI version 2, for compilers that do not write them.
_V2_PARAM_KINDS = {"q_map": "tensor_map", "k_map": "tensor_map", "v_map": "tensor_map",
                   "o_map": "tensor_map", "lse": "pointer", "seq_q": "i32", "seq_kv": "i32",
                   "heads_per_kv_head": "i32", "scale_log2": "f32", "heads_q": "i32",
                   "batch": "i32", "window_left": "i32", "window_right": "i32",
                   "kv_lengths": "pointer", "num_splits": "i32", "o_partial": "pointer",
                   "lse_partial": "pointer", "cu_seqlens_q": "pointer",
                   "cu_seqlens_k": "pointer", "o": "pointer", "total_q": "i32"}


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
