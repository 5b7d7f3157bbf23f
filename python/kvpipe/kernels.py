"""Compiling attention kernels and caching them.

``compile_attention`` turns a configuration into a compiled kernel (PTX, a
cubin where ``ptxas`` exists, and the kernel's ABI) by running the project's
compiler on a ``kvpipe.attention_kernel`` declaration. Results are stored in a
cache directory (``KVPIPE_CACHE_DIR``, default ``~/.cache/kvpipe``) keyed by
the configuration; each entry records which compiler build made it (the
digest of ``kvpipe-opt`` or of the C API library, whichever compiled it), so
that another build recompiles while a machine without any compiler (a GPU
machine that only runs kernels) loads what was compiled elsewhere.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from kvpipe import compiler as _compiler
from kvpipe._log import log

DTYPES = ("bf16", "f16")
#: Head dims of Q and K.
HEAD_DIMS = (64, 96, 128, 192, 256)
#: The (Q/K head dim, V head dim) pairs the compiler generates: equal dims,
#: and 192 with 128 (DeepSeek's).
HEAD_DIM_PAIRS = ((64, 64), (96, 96), (128, 128), (192, 128), (192, 192), (256, 256))
#: The largest head dim the entry points accept: others up to it (multiples
#: of 8) run the next kernel's by zero padding (``padded_head_dims``).
MAX_PADDED_HEAD_DIM = 256


def padded_head_dims(head_dim: int, value_head_dim: int) -> Optional[Tuple[int, int]]:
    """The kernel head dims ``(D, D_v)`` that Q/K of ``head_dim`` and V of
    ``value_head_dim`` columns run as, zero-padded (FA3's interface does the
    same): the smallest generated pair (``HEAD_DIM_PAIRS``) with ``D >=
    head_dim`` and ``D_v >= value_head_dim``; the pair itself when it is
    generated; None where none holds them (above 256, or not a multiple of
    8: the kernels' 16-byte rows). Zero columns of Q and K add nothing to
    ``q . k``, and zero columns of V only add output columns, which are
    dropped; the softmax scale stays ``1 / sqrt(head_dim)``."""
    if (head_dim, value_head_dim) in HEAD_DIM_PAIRS:
        return head_dim, value_head_dim
    if (head_dim <= 0 or value_head_dim <= 0 or head_dim % 8 or value_head_dim % 8
            or max(head_dim, value_head_dim) > MAX_PADDED_HEAD_DIM):
        return None
    fits = [(d, v) for d, v in HEAD_DIM_PAIRS if d >= head_dim and v >= value_head_dim]
    return min(fits, key=lambda pair: (pair[0] + pair[1], pair[0])) if fits else None


#: Head dims of the backward family the compiler generates (docs/backward.md):
#: V's equal to Q/K's, and 192 with 128.
BACKWARD_HEAD_DIMS = (64, 96, 128, 192, 256)
BACKWARD_HEAD_DIM_PAIRS = tuple((d, d) for d in BACKWARD_HEAD_DIMS) + ((192, 128),)
#: Tuning attributes of kvpipe.attention_kernel (all optional).
TUNING_ATTRIBUTES = ("block_n", "kv_stages", "q_stages", "consumer_warpgroups",
                     "producer_registers", "consumer_registers", "overlap_softmax",
                     "pingpong", "persistent", "dq_atomics", "shared_statistics",
                     "exp2_emulation", "rescale_threshold", "tensor_row_sums",
                     "skip_idle_warpgroups", "mask_bits", "late_pv_retire", "lpt_tiles",
                     "tile_table", "separable_bias", "separable_bias_mma", "bias_origin_first",
                     "static_row_max", "prescaled_q", "bias_accumulator")
#: The boolean ones among them.
_BOOL_TUNING = ("overlap_softmax", "pingpong", "persistent", "dq_atomics",
                "shared_statistics", "tensor_row_sums", "skip_idle_warpgroups",
                "mask_bits", "late_pv_retire", "lpt_tiles", "tile_table", "separable_bias",
                "separable_bias_mma", "bias_origin_first", "static_row_max", "prescaled_q",
                "bias_accumulator")
#: The int ones that are not counts: their ranges (the verifier's,
#: AttentionConfig.cpp) and what they mean, for the error message.
_RANGED_TUNING = {
    "exp2_emulation": (0, 8, "exponentials of every 8 on the FMA pipe"),
    "rescale_threshold": (-1, 15, "how far a block's maximum may pass the running one before "
                                  "O is rescaled, in powers of 2; -1: every iteration"),
}
#: The backward's (its tiles are fixed per head dim; these choose how dQ
#: reaches its fp32 accumulator above head dim 128 and where the consumers
#: read the log-sum-exp and delta from, docs/backward.md).
BACKWARD_TUNING = ("dq_atomics", "shared_statistics")


#: The largest pack_gqa (a consumer warpgroup's 64 rows hold at least one
#: query position of every head of the group).
MAX_PACK_GQA = 64

#: Where the causal diagonal and sliding windows are anchored (the
#: ``mask_alignment`` of kvpipe.attention_kernel): query i at key i
#: (torch's ``is_causal``) or at key i + seq_kv - seq_q (flash-attn's).
MASK_ALIGNMENTS = ("top_left", "bottom_right")

#: Rows per page of a paged K/V cache (the ``page_size`` of
#: kvpipe.attention_kernel; flash-attn's ``page_block_size``).
PAGE_SIZES = (16, 32, 64, 128, 256)


class KernelNotAvailableError(RuntimeError):
    """Neither a compiler nor a cached kernel is available."""


@dataclasses.dataclass(frozen=True)
class AttentionConfig:
    """What a kernel computes and how (the declaration's attributes)."""

    head_dim: int
    dtype: str
    causal: bool
    tuning: tuple = ()  # sorted (name, value) pairs
    #: Debug: bound every barrier wait to this many cycles (0: off).
    wait_timeout: int = 0
    #: V's head dim where it differs from ``head_dim`` (None: the same).
    value_head_dim: Optional[int] = None
    #: One of MASK_ALIGNMENTS.
    mask_alignment: str = "top_left"
    #: The kernel takes runtime window bounds (flash-attn's window_size).
    sliding_window: bool = False
    #: The kernel takes a per-batch key count (flash-attn's cache_seqlens).
    kv_lengths: bool = False
    #: The backward family (docs/backward.md) instead of the forward kernel.
    backward: bool = False
    #: Backward only: dQ contributions added in a fixed order (bit-identical
    #: gradients run to run).
    deterministic: bool = False
    #: Split-KV (docs/serving.md, "Decode"): a runtime num_splits, partials
    #: merged by the family's ``<name>_combine`` kernel.
    split_kv: bool = False
    #: Pack-GQA: the query heads per K/V head packed into a tile (0: off).
    pack_gqa: int = 0
    #: Rows per page of a paged K/V cache read through a block table (0:
    #: contiguous K and V); needs kv_lengths.
    page_size: int = 0
    #: The traced score_mod/mask_mod regions (kvpipe.modifiers: the text
    #: following the declaration's attributes; "" for none) and the element
    #: types of the auxiliary tensors they read.
    modifiers: str = ""
    aux_types: tuple = ()
    #: Sequences packed without padding, with cu_seqlens (flash-attn's
    #: flash_attn_varlen_func).
    varlen: bool = False
    #: Backward: the auxiliary tensors (indices into aux_types, f32) whose
    #: gradients the main kernel adds into ``aux<i>_grad`` parameters.
    aux_grads: tuple = ()
    #: gpt-oss's attention sinks in the epilogue (forward): the kernel (or a
    #: split family's combine kernel) takes one f32 logit per query head.
    sinks: bool = False

    @staticmethod
    def make(head_dim: int, dtype: Any, causal: bool, wait_timeout: int = 0,
             value_head_dim: Optional[int] = None, mask_alignment: str = "top_left",
             sliding_window: bool = False, kv_lengths: bool = False,
             backward: bool = False, deterministic: bool = False,
             split_kv: bool = False, pack_gqa: int = 0, page_size: int = 0,
             modifiers: str = "", aux_types: tuple = (), varlen: bool = False,
             aux_grads: tuple = (), sinks: bool = False,
             **tuning: int) -> "AttentionConfig":
        dtype = dtype_name(dtype)
        if not isinstance(head_dim, int) or isinstance(head_dim, bool):
            raise TypeError(f"head_dim must be an int, got {head_dim!r}")
        if head_dim not in HEAD_DIMS:
            raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim}")
        if value_head_dim is not None:
            if not isinstance(value_head_dim, int) or isinstance(value_head_dim, bool):
                raise TypeError(f"value_head_dim must be an int, got {value_head_dim!r}")
            if (head_dim, value_head_dim) not in HEAD_DIM_PAIRS:
                supported = ", ".join(f"{v}" for d, v in HEAD_DIM_PAIRS if d == head_dim)
                raise ValueError(f"value_head_dim must be one of ({supported}) with head_dim "
                                 f"{head_dim}, got {value_head_dim}")
            if value_head_dim == head_dim:
                value_head_dim = None
        if not isinstance(causal, bool):
            raise TypeError(f"causal must be a bool, got {causal!r}")
        for name, value in tuning.items():
            if name not in TUNING_ATTRIBUTES:
                raise ValueError(f"unknown tuning attribute {name!r}; expected one of "
                                 f"{', '.join(TUNING_ATTRIBUTES)}")
            if name in _BOOL_TUNING:
                if not isinstance(value, bool):
                    raise ValueError(f"tuning attribute {name} must be a bool, got {value!r}")
            elif name in _RANGED_TUNING:
                low, high, meaning = _RANGED_TUNING[name]
                if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                    raise ValueError(f"tuning attribute {name} ({meaning}) must be an int in "
                                     f"[{low}, {high}], got {value!r}")
            elif not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"tuning attribute {name} must be a positive int, got {value!r}")
        if not isinstance(wait_timeout, int) or wait_timeout < 0:
            raise ValueError(f"wait_timeout must be a non-negative int, got {wait_timeout!r}")
        if mask_alignment not in MASK_ALIGNMENTS:
            raise ValueError(f"mask_alignment must be one of {MASK_ALIGNMENTS}, "
                             f"got {mask_alignment!r}")
        if not isinstance(sliding_window, bool):
            raise TypeError(f"sliding_window must be a bool, got {sliding_window!r}")
        if not isinstance(kv_lengths, bool):
            raise TypeError(f"kv_lengths must be a bool, got {kv_lengths!r}")
        if not isinstance(backward, bool):
            raise TypeError(f"backward must be a bool, got {backward!r}")
        if not isinstance(deterministic, bool):
            raise TypeError(f"deterministic must be a bool, got {deterministic!r}")
        if deterministic and not backward:
            raise ValueError("deterministic=True applies to the backward kernels only "
                             "(backward=True): the forward is deterministic")
        if not isinstance(split_kv, bool):
            raise TypeError(f"split_kv must be a bool, got {split_kv!r}")
        if isinstance(pack_gqa, bool) or not isinstance(pack_gqa, int):
            raise TypeError(f"pack_gqa must be an int (query heads per K/V head, 0: off), "
                            f"got {pack_gqa!r}")
        if not 0 <= pack_gqa <= MAX_PACK_GQA:
            raise ValueError(f"pack_gqa must be in [0, {MAX_PACK_GQA}] (query heads per K/V "
                             f"head packed into a tile; 0: off), got {pack_gqa}")
        if backward and (split_kv or pack_gqa):
            raise ValueError("split_kv and pack_gqa are forward (decode) attributes: not "
                             "with backward=True")
        forward_only = sorted(set(tuning) - set(BACKWARD_TUNING))
        if backward and forward_only:
            raise ValueError(f"tuning attributes ({', '.join(forward_only)}) are not "
                             "supported with backward=True: the backward kernels' tiles are "
                             "fixed per head dim (docs/backward.md)")
        if "shared_statistics" in tuning and not backward:
            raise ValueError("shared_statistics applies to backward=True only (the forward "
                             "reads no per-query statistics)")
        if "dq_atomics" in tuning and (not backward or head_dim <= 128 or deterministic):
            raise ValueError("dq_atomics applies to backward=True at head dims above 128, "
                             f"not with deterministic=True (got backward={backward}, "
                             f"head_dim={head_dim}, deterministic={deterministic})")
        if backward and ((head_dim, value_head_dim or head_dim) not in BACKWARD_HEAD_DIM_PAIRS
                         or kv_lengths):
            raise ValueError("backward=True supports head_dim "
                             f"{', '.join(map(str, BACKWARD_HEAD_DIMS))} (and 192 with "
                             "value_head_dim 128) without kv_lengths (docs/backward.md)")
        if backward and deterministic and (sliding_window or mask_alignment != "top_left"
                                           and causal):
            raise ValueError("deterministic=True with backward=True supports the top-left "
                             "causal mask or none: not sliding_window or a bottom_right "
                             "causal mask_alignment (docs/backward.md)")
        _check_page_size(page_size, kv_lengths or varlen is True, backward)
        if not isinstance(modifiers, str):
            raise TypeError(f"modifiers must be the traced regions' text, got {modifiers!r}")
        aux_types = tuple(aux_types)
        if any(t not in ("f32", "i32") for t in aux_types):
            raise ValueError(f"aux_types must be 'f32' or 'i32' each, got {aux_types!r}")
        if aux_types and not modifiers:
            raise ValueError("aux_types need modifiers (score_mod/mask_mod regions) to read them")
        aux_grads = tuple(sorted(aux_grads))
        if aux_grads and (not backward or any(
                not isinstance(i, int) or not 0 <= i < len(aux_types) or aux_types[i] != "f32"
                for i in aux_grads)):
            raise ValueError(f"aux_grads must index f32 aux_types of a backward family, got "
                             f"{aux_grads!r} with aux_types {aux_types!r}")
        if pack_gqa and tuning.get("separable_bias"):
            raise ValueError("separable_bias is not supported with pack_gqa (its terms are "
                             "the tile's one head's)")
        _check_varlen(varlen, backward, kv_lengths, dict(tuning, split_kv=split_kv,
                                                          pack_gqa=pack_gqa,
                                                          deterministic=deterministic,
                                                          page_size=page_size))
        if not isinstance(sinks, bool):
            raise TypeError(f"sinks must be a bool, got {sinks!r}")
        if sinks and backward:
            raise ValueError("sinks=True applies to the forward kernels: the backward reads "
                             "the forward's log-sum-exp, which includes the sinks")
        return AttentionConfig(head_dim, dtype, causal, tuple(sorted(tuning.items())),
                               wait_timeout, value_head_dim, mask_alignment, sliding_window,
                               kv_lengths, backward, deterministic, split_kv, pack_gqa,
                               page_size, modifiers, aux_types, varlen, aux_grads, sinks)

    @property
    def v_head_dim(self) -> int:
        """V's (and the output's) head dim."""
        return self.value_head_dim if self.value_head_dim is not None else self.head_dim

    @property
    def kernel_name(self) -> str:
        dims = f"d{self.head_dim}"
        if self.value_head_dim is not None:
            dims += f"v{self.value_head_dim}"
        parts = [f"kvpipe_attention{'_bwd' if self.backward else ''}_{dims}_{self.dtype}",
                 "causal" if self.causal else "full"]
        if self.mask_alignment != "top_left":
            parts.append(self.mask_alignment)
        if self.sliding_window:
            parts.append("window")
        if self.kv_lengths:
            parts.append("kvlengths")
        if self.deterministic:
            parts.append("deterministic")
        if self.split_kv:
            parts.append("split")
        if self.pack_gqa:
            parts.append(f"pack{self.pack_gqa}")
        if self.page_size:
            parts.append(f"page{self.page_size}")
        if self.modifiers:
            # Kernels with modifiers differ by their regions: a digest of them.
            digest = hashlib.sha256((self.modifiers + repr(self.aux_types)
                                     + (repr(self.aux_grads) if self.aux_grads else ""))
                                    .encode())
            parts.append("mods" + digest.hexdigest()[:10])
        if self.varlen:
            parts.append("varlen")
        if self.sinks:
            parts.append("sinks")
        # A symbol name has no '-': rescale_threshold = -1 is "..._thresholdm1".
        parts += [f"{name}{int(value)}".replace("-", "m") for name, value in self.tuning]
        if self.wait_timeout:
            parts.append(f"timeout{self.wait_timeout}")
        return "_".join(parts)

    def declaration(self) -> str:
        """The MLIR module declaring this kernel."""
        attrs = [f"head_dim = {self.head_dim} : i64", f"element_type = {self.dtype}",
                 f"causal = {'true' if self.causal else 'false'}"]
        if self.value_head_dim is not None:
            attrs.append(f"value_head_dim = {self.value_head_dim} : i64")
        if self.mask_alignment != "top_left":
            attrs.append(f"mask_alignment = #kvpipe.mask_alignment<{self.mask_alignment}>")
        if self.sliding_window:
            attrs.append("sliding_window = true")
        if self.kv_lengths:
            attrs.append("kv_lengths = true")
        if self.backward:
            attrs.append("backward = true")
        if self.deterministic:
            attrs.append("deterministic = true")
        if self.split_kv:
            attrs.append("split_kv = true")
        if self.pack_gqa:
            attrs.append(f"pack_gqa = {self.pack_gqa} : i64")
        if self.page_size:
            attrs.append(f"page_size = {self.page_size} : i64")
        if self.varlen:
            attrs.append("varlen = true")
        if self.sinks:
            attrs.append("sinks = true")
        attrs += [f"{name} = {str(value).lower()}" if isinstance(value, bool)
                  else f"{name} = {value} : i64" for name, value in self.tuning]
        if self.aux_types:
            attrs.append(f"aux_types = [{', '.join(self.aux_types)}]")
        if self.aux_grads:
            attrs.append(f"aux_grads = array<i64: {', '.join(map(str, self.aux_grads))}>")
        regions = f"\n  {self.modifiers}" if self.modifiers else ""
        return ("gpu.module @kvpipe_kernels "
                "[#nvvm.target<chip = \"sm_90a\", features = \"+ptx86\">] {\n"
                f"  kvpipe.attention_kernel @{self.kernel_name} {{{', '.join(attrs)}}}"
                f"{regions}\n"
                "}\n")


def _check_page_size(page_size: Any, kv_lengths: bool, backward: bool) -> None:
    if isinstance(page_size, bool) or not isinstance(page_size, int):
        raise TypeError(f"page_size must be an int, got {page_size!r}")
    if page_size == 0:
        return
    if page_size not in PAGE_SIZES:
        raise ValueError(f"page_size must be one of {PAGE_SIZES} (or 0: no paging), "
                         f"got {page_size}")
    if not kv_lengths or backward:
        raise ValueError("page_size needs kv_lengths=True or varlen=True (the lengths index "
                         "the block table) and the forward kernel (not backward=True)")


def _check_varlen(varlen: Any, backward: bool, kv_lengths: bool,
                  attributes: Dict[str, Any]) -> None:
    """The combinations the compiler refuses with ``varlen`` (its verifier's
    rules), refused before compiling; ``attributes``: the tuning and the
    decode attributes."""
    if not isinstance(varlen, bool):
        raise TypeError(f"varlen must be a bool, got {varlen!r}")
    if not varlen:
        return
    if backward and attributes.get("deterministic"):
        raise ValueError("varlen=True is not supported with backward=True and "
                         "deterministic=True (the ordered dQ additions number the K/V "
                         "blocks of one sequence length)")
    if kv_lengths and not attributes.get("page_size"):
        raise ValueError("varlen=True with kv_lengths=True needs page_size (packed K/V rows "
                         "are addressed by cu_seqlens_k; a paged cache's key counts may come "
                         "from kv_lengths)")
    for name in ("persistent", "split_kv", "pack_gqa"):
        if attributes.get(name):
            raise ValueError(f"varlen=True is not supported with {name}")


@dataclasses.dataclass
class CompiledKernel:
    """A compiled attention kernel: what the runtime needs to launch it."""

    config: AttentionConfig
    name: str
    ptx: str
    cubin: Optional[bytes]
    abi: Dict[str, Any]
    compiler_version: str
    #: Seconds the compilation took when it was compiled by this call, or
    #: when loaded from the cache, what it took then.
    compile_seconds: Optional[float] = None
    #: Loaded from the kernel cache rather than compiled by this call.
    cached: bool = False
    #: The ABI of every kernel the declaration generated (one for the
    #: forward; preprocess, main and postprocess for the backward, whose
    #: ``abi`` is the main kernel's).
    abis: List[Dict[str, Any]] = dataclasses.field(default_factory=list)

    def kernel_abi(self, role: str) -> Dict[str, Any]:
        """The ABI of the kernel of ``role`` of a family: preprocess, main,
        postprocess (backward); main, combine (split-KV)."""
        for abi in self.abis:
            if abi.get("role") == role:
                return abi
        raise KeyError(f"{self.name} has no {role} kernel")

    @property
    def image(self) -> bytes:
        """What to load: the cubin where there is one, else the PTX."""
        return self.cubin if self.cubin is not None else self.ptx.encode()

    def describe(self) -> str:
        """One line: the image, the launch shape, and how it was obtained."""
        image = "cubin+PTX" if self.cubin is not None else "PTX"
        origin = "cached" if self.cached else f"compiled in {self.compile_seconds} s"
        return (f"{image}, {self.abi.get('threads')} threads, "
                f"{self.abi.get('dynamic_shared_memory')} B shared, {origin}")

    def __repr__(self) -> str:
        # The dataclass default would print the whole PTX and cubin.
        return f"<CompiledKernel {self.name}: {self.describe()}>"


def dtype_name(dtype: Any) -> str:
    """'bf16' or 'f16' for a name or a torch dtype."""
    text = str(dtype).replace("torch.", "")
    names = {"bf16": "bf16", "bfloat16": "bf16", "f16": "f16", "float16": "f16",
             "half": "f16", "fp16": "f16"}
    if text not in names:
        raise TypeError(f"dtype must be bfloat16 or float16, got {dtype}")
    return names[text]


def cache_dir() -> Path:
    env = os.environ.get("KVPIPE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "kvpipe"


def _entry_dir(config: AttentionConfig) -> Path:
    key = hashlib.sha256((config.declaration() + str(config.wait_timeout)).encode())
    key = key.hexdigest()[:12]
    return cache_dir() / f"{config.kernel_name}-{key}"


def _find_ptxas() -> Optional[str]:
    found = shutil.which("ptxas")
    if found:
        return found
    candidate = "/usr/local/cuda/bin/ptxas"
    return candidate if os.access(candidate, os.X_OK) else None


def _load_entry(entry: Path, config: AttentionConfig) -> Optional[CompiledKernel]:
    try:
        meta = json.loads((entry / "meta.json").read_text())
        ptx = (entry / "kernel.ptx").read_text()
        abi = json.loads((entry / "abi.json").read_text())
    except (OSError, ValueError):
        return None
    cubin_path = entry / "kernel.cubin"
    cubin = cubin_path.read_bytes() if cubin_path.is_file() else None
    if meta.get("declaration") != config.declaration():
        return None
    try:
        abis = json.loads((entry / "abis.json").read_text())
    except (OSError, ValueError):
        abis = [abi]
    return CompiledKernel(config, meta["name"], ptx, cubin, abi, meta["compiler_version"],
                          meta.get("compile_seconds"), cached=True, abis=abis)


def _compile(config: AttentionConfig, compiler: _compiler.Compiler,
             version: str) -> CompiledKernel:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kvpipe-") as tmp:
        ptx_path = os.path.join(tmp, "kernel.ptx")
        abi_path = os.path.join(tmp, "abi.json")
        # Only the pass's files are wanted, not the IR.
        compiler.run(
            config.declaration(),
            [f"--kvpipe-to-ptx=ptx-file={ptx_path} abi-file={abi_path} "
             f"wait-timeout={config.wait_timeout}"],
            extra_args=["-o", os.devnull])
        ptx = Path(ptx_path).read_text()
        abis = json.loads(Path(abi_path).read_text())
        # The backward family's main kernel is named like the declaration.
        abi = next((a for a in abis if a.get("kernel") == config.kernel_name), abis[0])
        ptx_seconds = time.perf_counter() - start
        cubin = None
        ptxas = _find_ptxas()
        if ptxas:
            cubin_path = os.path.join(tmp, "kernel.cubin")
            proc = subprocess.run([ptxas, "-arch=sm_90a", ptx_path, "-o", cubin_path],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise _compiler.CompilerError(proc.stderr, proc.returncode, [ptxas])
            cubin = Path(cubin_path).read_bytes()
    kernel = CompiledKernel(config, abi["kernel"], ptx, cubin, abi, version,
                            compile_seconds=round(time.perf_counter() - start, 3), abis=abis)
    kernel.abi["ptx_seconds"] = round(ptx_seconds, 3)
    log("compiled %s with %s in %s s (PTX in %s s)", kernel.name, compiler,
        kernel.compile_seconds, kernel.abi["ptx_seconds"])
    if kernel.abi.get("mask_mod_shape") not in (None, "proven"):
        # docs/modifiers.md: what the compiler could not prove is masked
        # element by element in every block it visits.
        log("%s: mask_mod shape %s; not proven: %s", kernel.name, kernel.abi["mask_mod_shape"],
            ", ".join(kernel.abi.get("mask_mod_unproven", [])))
    return kernel


def _store_entry(kernel: CompiledKernel) -> None:
    """Stores ``kernel`` in the cache; a cache that cannot be written is
    warned about (once per directory) and the kernel stays uncached."""
    entry = _entry_dir(kernel.config)
    try:
        _write_entry(kernel, entry)
    except OSError as exc:
        directory = str(cache_dir())
        log("cannot store %s in the cache %s: %s", kernel.name, directory, exc)
        if directory not in _unwritable_warned:
            _unwritable_warned.add(directory)
            warnings.warn(f"kvpipe: the kernel cache {directory} (KVPIPE_CACHE_DIR) is not "
                          f"writable ({exc.strerror or exc}); kernels are compiled but not "
                          "cached", RuntimeWarning, stacklevel=3)
        return
    log("stored %s in the cache: %s", kernel.name, entry)


_unwritable_warned: set = set()


def _replace_entry(entry: Path, files: Dict[str, Any]) -> None:
    """Writes ``files`` (name: text or bytes) into a temporary folder beside
    ``entry`` and replaces ``entry`` with it, so that concurrent readers see
    a whole entry or none. Raises OSError (the temporary folder removed)."""
    tmp = entry.with_name(entry.name + f".tmp{os.getpid()}")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            if isinstance(content, bytes):
                (tmp / name).write_bytes(content)
            else:
                (tmp / name).write_text(content)
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        os.replace(tmp, entry)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_entry(kernel: CompiledKernel, entry: Path) -> None:
    files: Dict[str, Any] = {"kernel.ptx": kernel.ptx}
    if kernel.cubin is not None:
        files["kernel.cubin"] = kernel.cubin
    files["abi.json"] = json.dumps(kernel.abi, indent=1)
    files["abis.json"] = json.dumps(kernel.abis, indent=1)
    files["meta.json"] = json.dumps({
        "name": kernel.name, "declaration": kernel.config.declaration(),
        "compiler_version": kernel.compiler_version,
        "compile_seconds": kernel.compile_seconds}, indent=1)
    _replace_entry(entry, files)


_REFUSAL = "refused.json"


def _store_refusal(config: AttentionConfig, version: str,
                   error: _compiler.CompilerError) -> None:
    """Records in the cache that the compiler build ``version`` refused
    ``config`` (a verifier or ptxas error, not a crash), so that a machine
    with the cache and no compiler (the GPU machine) gets the same
    CompilerError rather than a missing kernel: ``check --tune`` skips the
    head dims a tuning does not fit by that error."""
    try:
        _replace_entry(_entry_dir(config), {_REFUSAL: json.dumps({
            "name": config.kernel_name, "declaration": config.declaration(),
            "compiler_version": version, "diagnostics": error.diagnostics,
            "returncode": error.returncode, "command": error.command}, indent=1)})
    except OSError as exc:
        log("cannot store the refusal of %s in the cache: %s", config.kernel_name, exc)


def _load_refusal(entry: Path, config: AttentionConfig
                  ) -> Optional[Tuple[str, _compiler.CompilerError]]:
    """The cached refusal of ``config`` (the compiler build that refused it,
    and its error), if the entry is one."""
    try:
        refusal = json.loads((entry / _REFUSAL).read_text())
    except (OSError, ValueError):
        return None
    if refusal.get("declaration") != config.declaration():
        return None
    return refusal["compiler_version"], _compiler.CompilerError(
        refusal["diagnostics"], refusal["returncode"], refusal["command"])


def compile_attention(head_dim: int, dtype: Any, causal: bool, *,
                      value_head_dim: Optional[int] = None,
                      use_cache: bool = True, wait_timeout: int = 0,
                      mask_alignment: str = "top_left", sliding_window: bool = False,
                      kv_lengths: bool = False, backward: bool = False,
                      deterministic: bool = False, split_kv: bool = False,
                      pack_gqa: int = 0, page_size: int = 0, modifiers: str = "",
                      aux_types: tuple = (), varlen: bool = False,
                      aux_grads: tuple = (), sinks: bool = False,
                      **tuning: int) -> CompiledKernel:
    """Compiles (or loads from the cache) a FlashAttention forward kernel, or
    with ``backward=True`` the backward family (docs/backward.md: preprocess,
    main and postprocess kernels in one module, their ABIs in ``abis``).

    Args:
        head_dim: of Q and K: 64, 96, 128, 192 or 256.
        value_head_dim: of V and the output, if not ``head_dim``: 128 with
            ``head_dim`` 192 (``HEAD_DIM_PAIRS``).
        dtype: bfloat16 or float16 (a torch dtype or 'bf16'/'f16').
        causal: causal mask, anchored as ``mask_alignment`` says.
        use_cache: read and fill the kernel cache.
        wait_timeout: debug aid: every barrier wait gives up after this many
            clock cycles, prints where it hung and traps (0: off).
        mask_alignment: "top_left" (query i aligned with key i, torch's
            ``is_causal``) or "bottom_right" (with key i + seq_kv - seq_q,
            flash-attn's).
        sliding_window: the kernel takes runtime window bounds
            (``window_left``, ``window_right``; negative: unbounded).
        kv_lengths: the kernel takes a pointer to one int32 key count per
            batch (a padded KV cache).
        backward: the backward family instead of the forward kernel.
        deterministic: with ``backward``, bit-identical gradients run to run
            (dQ contributions added in a fixed order; docs/backward.md).
        split_kv: the decode family: the K/V range split over a runtime
            ``num_splits`` CTAs, and a ``<name>_combine`` kernel merging the
            partials (its ABI in ``abis``, role ``combine``).
        pack_gqa: pack this many query heads (those of one K/V head) into a
            tile (1 to 64; 0: off); the launch's heads_per_kv_head must be it.
        page_size: with ``kv_lengths``, K and V are a paged cache of pages
            of this many rows (``PAGE_SIZES``), read through a runtime block
            table (``block_table``, ``max_pages_per_seq``; docs/kernel-abi.md).
        modifiers, aux_types: score_mod/mask_mod regions and the element
            types of the tensors they read, as ``kvpipe.modifiers.trace``
            makes them (``TracedModifiers.ir`` and ``.aux_types``).
        aux_grads: with ``backward``, the indices of the f32 aux tensors
            whose gradients the main kernel computes (``aux<i>_grad``).
        varlen: the kernel takes sequences packed without padding and their
            ``cu_seqlens_q`` / ``cu_seqlens_k`` offsets (docs/kernel-abi.md).
        sinks: gpt-oss's attention sinks in the epilogue: the kernel (with
            ``split_kv``, the combine kernel) takes a ``sinks`` pointer to one
            float32 logit per query head (kvpipe.sinks); forward only.
        **tuning: optional tuning attributes of ``kvpipe.attention_kernel``
            (block_n, kv_stages, consumer_warpgroups, producer_registers,
            consumer_registers, overlap_softmax, pingpong, persistent).

    Needs no GPU. With a compiler (``kvpipe-opt`` or the C API library,
    see :func:`kvpipe.compiler.get_compiler`), a cached kernel from another
    compiler build is recompiled; without one, any cached kernel of this
    configuration is used.

    Raises:
        KernelNotAvailableError: no compiler and nothing cached.
        kvpipe.CompilerError: the compiler rejected the configuration (its
            diagnostics name the attribute).
    """
    config = AttentionConfig.make(head_dim, dtype, causal, wait_timeout, value_head_dim,
                                  mask_alignment, sliding_window, kv_lengths, backward,
                                  deterministic, split_kv, pack_gqa, page_size,
                                  modifiers, aux_types, varlen=varlen, aux_grads=aux_grads,
                                  sinks=sinks, **tuning)
    entry = _entry_dir(config)
    cached = _load_entry(entry, config) if use_cache else None
    refused = _load_refusal(entry, config) if use_cache and cached is None else None
    compiler = _compiler.get_compiler(required=False)
    if compiler is None:
        if cached is not None:
            log("no compiler; %s from the cache: %s", config.kernel_name, entry)
            return cached
        if refused is not None:
            log("no compiler; %s was refused by %s (cached)", config.kernel_name, refused[0])
            raise refused[1]
        raise KernelNotAvailableError(
            f"no compiled kernel for {config.kernel_name}: no compiler was found "
            f"(kvpipe-opt: set KVPIPE_OPT, build the project, or put it on PATH; or "
            f"libKVPipeCAPI.so: set KVPIPE_CAPI_LIB) and the kernel cache "
            f"{cache_dir()} (KVPIPE_CACHE_DIR) holds no entry for it")
    version = compiler.identity()
    if cached is not None and cached.compiler_version == version:
        log("cache hit: %s (%s)", config.kernel_name, entry)
        return cached
    if refused is not None and refused[0] == version:
        log("cache hit: %s was refused by this compiler build", config.kernel_name)
        raise refused[1]
    reason = ("cache not used" if not use_cache else "cache miss" if cached is None
              else "cached by another compiler build")
    log("%s: %s; compiling", reason, config.kernel_name)
    try:
        kernel = _compile(config, compiler, version)
    except _compiler.CompilerError as error:
        # A refusal (exit status > 0) is the build's answer for this
        # configuration; a crash or a kill (< 0) may not be.
        if use_cache and error.returncode > 0:
            _store_refusal(config, version, error)
        raise
    if use_cache:
        _store_entry(kernel)
    return kernel


def cache_entries() -> List[Dict[str, Any]]:
    """The kernel cache's entries: name, path, size in bytes, the compiler
    build that made each, and its declaration (``refused``: the build
    refused the configuration, the entry holds its diagnostics); unreadable
    entries are listed with ``name`` None."""
    root = cache_dir()
    if not root.is_dir():
        return []
    entries = []
    for entry in sorted(root.iterdir()):
        if not entry.is_dir() or ".tmp" in entry.name:
            continue
        size = sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
        refused = (entry / _REFUSAL).exists()
        try:
            meta = json.loads((entry / (_REFUSAL if refused else "meta.json")).read_text())
        except (OSError, ValueError):
            meta = {}
        entries.append({"name": meta.get("name"), "path": str(entry), "bytes": size,
                        "compiler_version": meta.get("compiler_version"),
                        "declaration": meta.get("declaration"), "refused": refused})
    return entries


def clear_cache() -> int:
    """Removes every entry of the kernel cache; returns how many."""
    root = cache_dir()
    if not root.is_dir():
        return 0
    removed = 0
    for entry in root.iterdir():
        if entry.is_dir() and ((entry / "meta.json").exists() or (entry / _REFUSAL).exists()
                               or ".tmp" in entry.name):
            shutil.rmtree(entry)
            removed += 1
    log("cleared %d entries from the cache %s", removed, root)
    return removed
