"""``python -m kvpipe check --models``: published models' attention at their own shapes.

The other grids vary one thing at a time on small head counts. This one takes
the attention layers of real models as their configurations publish them --
heads, K/V heads, head dims, windows, soft-caps, ALiBi, sinks, scales -- at
prefill lengths beyond their windows, through the interface each model's
users call (``kvpipe.attention`` or the flash-attn drop-ins), forward and,
for models people train, backward through autograd:

- ``MODEL_CASES``: prefill and training steps (``ModelCase``), each against a
  float32 torch reference of the same layer on fresh random inputs;
- ``paged_cases()`` / ``paged_varlen_cases()`` / ``varlen_cases()``: serving
  at the models' shapes (a vLLM-style paged cache, its mixed steps of decodes
  and chunks, packed variable-length batches), run by check_paged /
  check_varlen;
- ``LARGE_CASES``: tensors of more than 2^31 elements (a long-context
  prefill and its backward, a paged cache of 4.6 GB per K and V), where a
  32-bit offset anywhere would show; checked on sampled rows and keys, whose
  reference is computed in float32 in chunks.

``model_kernel_configs()`` lists every kernel these launch, so that
``python -m kvpipe compile --for-check --models`` fills the kernel cache of a
GPU machine without the compiler.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from kvpipe import modifiers
from kvpipe.check import (LSE_TOLERANCE, REL_TOLERANCE, _lse_error, _sink_softmax,
                          compare_grads, flash_score_modifiers, reference_mask, unique_configs)


@dataclasses.dataclass(frozen=True)
class ModelLayer:
    """One attention layer as a model's configuration publishes it."""
    heads_q: int
    heads_kv: int
    head_dim: int
    value_head_dim: Optional[int] = None
    causal: bool = True
    #: flash-attn's window_size (left, right); (-1, -1): none.
    window: Tuple[int, int] = (-1, -1)
    softcap: float = 0.0
    alibi: bool = False
    sinks: bool = False
    #: The softmax scale where it is not 1/sqrt(head_dim).
    scale: Optional[float] = None

    @property
    def v_dim(self) -> int:
        return self.value_head_dim or self.head_dim

    @property
    def softmax_scale(self) -> float:
        return self.scale if self.scale is not None else 1.0 / math.sqrt(self.head_dim)


#: The layers, from the models' published configurations (config.json).
MODELS: Dict[str, ModelLayer] = {
    "llama-3.1-8b": ModelLayer(32, 8, 128),
    "llama-3.1-70b/tp8": ModelLayer(8, 1, 128),            # 64/8 heads over 8 GPUs
    "qwen2.5-7b": ModelLayer(28, 4, 128),
    "qwen2.5-0.5b": ModelLayer(14, 2, 64),
    "mistral-7b-v0.1": ModelLayer(32, 8, 128, window=(4095, 0)),
    # Gemma 2: query_pre_attn_scalar 256 (9B) and 144 (27B), soft-cap 50,
    # a 4096-token window on every other layer.
    "gemma-2-9b/local": ModelLayer(16, 8, 256, window=(4095, 0), softcap=50.0),
    "gemma-2-9b/global": ModelLayer(16, 8, 256, softcap=50.0),
    "gemma-2-27b/local": ModelLayer(32, 16, 128, window=(4095, 0), softcap=50.0,
                                    scale=144 ** -0.5),
    "gemma-3-4b/local": ModelLayer(8, 4, 256, window=(1023, 0)),
    # gpt-oss: sinks on every layer, a 128-token window on every other one.
    "gpt-oss-20b/local": ModelLayer(64, 8, 64, window=(127, 0), sinks=True),
    "gpt-oss-20b/global": ModelLayer(64, 8, 64, sinks=True),
    "phi-3-mini": ModelLayer(32, 32, 96),
    "phi-2": ModelLayer(32, 32, 80),                      # run zero-padded as 96
    "deepseek-v2-lite": ModelLayer(16, 16, 192, 128, scale=192 ** -0.5),  # MLA, expanded
    "falcon-7b": ModelLayer(71, 1, 64),
    "gpt-2": ModelLayer(12, 12, 64),
    "bloom-7b1": ModelLayer(32, 32, 128, alibi=True),
    "bert-base": ModelLayer(12, 12, 64, causal=False),
    "vit-h-14": ModelLayer(16, 16, 80, causal=False),
    # Stable Diffusion 1.5's UNet: 8 heads of 40, 80, 160; cross-attention
    # over CLIP's 77 tokens.
    "sd-1.5/d40": ModelLayer(8, 8, 40, causal=False),
    "sd-1.5/d160": ModelLayer(8, 8, 160, causal=False),
    "whisper-large-v3/cross": ModelLayer(20, 20, 64, causal=False),
}


@dataclasses.dataclass(frozen=True)
class ModelCase:
    model: str
    batch: int
    seq_q: int
    seq_kv: int
    #: "attention" (kvpipe.attention, bhsd, top-left) or "flash_attn"
    #: (flash_attn_func, bshd, bottom-right, its softcap / alibi_slopes /
    #: learnable_sink arguments).
    api: str = "attention"
    #: A training step: gradients of q, k, v (and the sinks) too.
    train: bool = False
    dtype: str = "bf16"

    @property
    def layer(self) -> ModelLayer:
        return MODELS[self.model]

    @property
    def alignment(self) -> str:
        if self.api == "flash_attn" and self.seq_q != self.seq_kv:
            return "bottom_right"
        return "top_left"

    @property
    def name(self) -> str:
        layer = self.layer
        dims = f"d{layer.head_dim}" + (f"v{layer.value_head_dim}" if layer.value_head_dim else "")
        return (f"{self.model} {self.api}{' train' if self.train else ''} {self.dtype} {dims} "
                f"H{layer.heads_q}/{layer.heads_kv} B{self.batch} {self.seq_q}x{self.seq_kv}")


#: Prefill and training steps at lengths past the windows.
MODEL_CASES = [
    ModelCase("llama-3.1-8b", 1, 4099, 4099, train=True),
    ModelCase("llama-3.1-70b/tp8", 2, 3001, 3001, api="flash_attn", train=True),
    ModelCase("qwen2.5-7b", 1, 2500, 2500, train=True),
    ModelCase("qwen2.5-0.5b", 4, 1500, 1500, api="flash_attn"),
    ModelCase("mistral-7b-v0.1", 1, 4500, 4500, api="flash_attn", train=True),
    ModelCase("mistral-7b-v0.1", 1, 512, 4700, api="flash_attn"),    # a chunk of a prompt
    ModelCase("gemma-2-9b/local", 1, 4500, 4500, api="flash_attn", train=True),
    ModelCase("gemma-2-9b/global", 1, 2100, 2100, api="flash_attn"),
    ModelCase("gemma-2-27b/local", 1, 4400, 4400, api="flash_attn", train=True),
    ModelCase("gemma-3-4b/local", 2, 2000, 2000, train=True),
    ModelCase("gpt-oss-20b/local", 1, 2000, 2000, api="flash_attn", train=True),
    ModelCase("gpt-oss-20b/global", 1, 1500, 1500, train=True),
    ModelCase("phi-3-mini", 1, 3000, 3000, train=True),
    ModelCase("phi-2", 2, 1200, 1200, train=True),
    ModelCase("deepseek-v2-lite", 1, 3000, 3000, train=True),
    ModelCase("falcon-7b", 1, 2048, 2048, api="flash_attn", train=True),
    ModelCase("gpt-2", 8, 1024, 1024, train=True, dtype="f16"),
    ModelCase("bloom-7b1", 1, 2048, 2048, api="flash_attn", train=True),
    ModelCase("bloom-7b1", 2, 100, 1900, api="flash_attn"),            # a chunk: shift read
    ModelCase("bert-base", 8, 512, 512, train=True),
    ModelCase("vit-h-14", 16, 257, 257, train=True),
    ModelCase("sd-1.5/d40", 2, 4096, 4096, dtype="f16"),
    ModelCase("sd-1.5/d40", 2, 4096, 77, dtype="f16"),                 # cross-attention
    ModelCase("sd-1.5/d160", 2, 256, 256, dtype="f16"),
    ModelCase("sd-1.5/d160", 2, 256, 77, dtype="f16"),
    ModelCase("whisper-large-v3/cross", 4, 448, 1500, api="flash_attn"),
]


def _slopes(heads: int, torch: Any) -> Any:
    """ALiBi's slopes (Press et al.; BLOOM's): 2^(-8 i / n) for the nearest
    power of two n, interleaved with the next one's for the remaining heads."""
    def powers(n: int) -> List[float]:
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]
    n = 2 ** math.floor(math.log2(heads))
    slopes = powers(n) + powers(2 * n)[0::2][:heads - n]
    return torch.tensor(slopes, dtype=torch.float32, device="cuda")


def _score_mod(layer: ModelLayer) -> Optional[Callable[..., Any]]:
    """The score_mod kvpipe.attention cases pass (flash_attn cases pass the
    drop-in's arguments instead): the soft-cap (the ALiBi models go through
    flash_attn_func)."""
    return modifiers.soft_cap(layer.softcap) if layer.softcap else None


def _inputs(case: ModelCase, seed: int, torch: Any) -> Tuple[Any, ...]:
    """q, k, v in the API's layout, and the ALiBi slopes and sinks (or None)."""
    torch.manual_seed(seed)
    layer = case.layer
    dtype = torch.bfloat16 if case.dtype == "bf16" else torch.float16

    def make(heads: int, seq: int, dim: int) -> Any:
        shape = ((case.batch, heads, seq, dim) if case.api == "attention"
                 else (case.batch, seq, heads, dim))
        return torch.randn(shape, dtype=dtype, device="cuda")
    q = make(layer.heads_q, case.seq_q, layer.head_dim)
    k = make(layer.heads_kv, case.seq_kv, layer.head_dim)
    v = make(layer.heads_kv, case.seq_kv, layer.v_dim)
    slopes = _slopes(layer.heads_q, torch) if layer.alibi else None
    sinks = torch.randn(layer.heads_q, device="cuda") * 2.0 if layer.sinks else None
    return q, k, v, slopes, sinks


def _call(case: ModelCase, q: Any, k: Any, v: Any, slopes: Any, sinks: Any,
          out: Any = None) -> Tuple[Any, Any]:
    """(out, lse) through the case's interface."""
    import kvpipe
    from kvpipe.flash_attn import flash_attn_func

    layer = case.layer
    if case.api == "attention":
        return kvpipe.attention(q, k, v, causal=layer.causal, scale=layer.scale,
                                window_size=layer.window, score_mod=_score_mod(layer),
                                sinks=sinks, return_lse=True, out=out)
    o, lse, _ = flash_attn_func(q, k, v, causal=layer.causal, softmax_scale=layer.scale,
                                window_size=layer.window, softcap=layer.softcap,
                                alibi_slopes=slopes, learnable_sink=sinks,
                                return_attn_probs=True)
    return o, lse


def _reference(case: ModelCase, q: Any, k: Any, v: Any, slopes: Any, sinks: Any,
               torch: Any) -> Tuple[Any, Any]:
    """(out, lse) in float32, written out: scaled scores, soft-cap, ALiBi
    (flash-attn's |i + S_kv - S_q - j|), the masks, softmax with the sink
    column; out in the case's layout."""
    layer = case.layer
    if case.api == "flash_attn":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    group = layer.heads_q // layer.heads_kv
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    scores = flash_score_modifiers(torch.matmul(q.float(), kf.transpose(-1, -2))
                                   * layer.softmax_scale, layer.softcap, slopes, torch)
    visible = reference_mask(case.seq_q, case.seq_kv, layer.causal, case.alignment,
                             layer.window, q.device, torch)
    if visible is not None:
        scores = scores.masked_fill(~visible, float("-inf"))
    if sinks is not None:
        out, lse = _sink_softmax(scores, sinks[None, :, None, None], vf, torch)
    else:
        lse = torch.logsumexp(scores, dim=-1)
        out = torch.matmul(torch.softmax(scores, dim=-1), vf)
        empty = torch.isneginf(lse)
        out, lse = out.masked_fill(empty[..., None], 0.0), lse.masked_fill(empty, float("inf"))
    return (out.transpose(1, 2) if case.api == "flash_attn" else out), lse


def run_case(case: ModelCase, seed: int) -> Dict[str, Any]:
    """The forward (a poisoned ``out=`` where the interface takes one) and
    its log-sum-exp against the reference; for a training step also dq, dk,
    dv (and dsinks) through autograd against float32 autograd."""
    import torch

    q, k, v, slopes, sinks = _inputs(case, seed, torch)
    row: Dict[str, Any] = {"case": case.name}
    try:
        out = (q.new_full((*q.shape[:-1], case.layer.v_dim), float("nan"))
               if case.api == "attention" else None)
        o, lse = _call(case, q, k, v, slopes, sinks, out)
        if case.train:
            do = torch.randn_like(o)
            leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
            sink_leaf = sinks.detach().clone().requires_grad_() if sinks is not None else None
            _call(case, *leaves, slopes, sink_leaf)[0].backward(do)
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    refs = [t.detach().float().requires_grad_(case.train) for t in (q, k, v)]
    sink_ref = (sinks.detach().float().requires_grad_(case.train) if sinks is not None
                else None)
    ref, lse_ref = _reference(case, *refs, slopes, sink_ref, torch)
    of = o.float()
    finite = bool(torch.isfinite(of).all())
    rel = float((of - ref.detach()).norm() / ref.detach().norm().clamp_min(1e-30))
    lse_err = _lse_error(lse, lse_ref.detach(), torch)
    row.update(ok=finite and rel < REL_TOLERANCE and lse_err < LSE_TOLERANCE, rel=rel,
               max_abs=float((of - ref.detach()).abs().max()), lse_err=lse_err)
    if case.train:
        forward_ok = row["ok"]
        ref.backward(do.float())
        errors = {"out": rel, "lse": lse_err}
        # The drop-ins and kvpipe.attention are autograd's only way in
        # here: the autograd column stands for both.
        grads: Dict[str, Any] = {}
        compare_grads(grads, [leaf.grad for leaf in leaves], [leaf.grad for leaf in leaves],
                      [r.grad for r in refs], torch)
        errors.update({name: value for name, value in grads["errors"].items()
                       if not name.endswith("_autograd")})
        ok = forward_ok and grads["ok"]
        if sinks is not None:
            got = sink_leaf.grad
            dsinks = (float("inf") if got is None else
                      float((got.float() - sink_ref.grad).norm()
                            / max(float(sink_ref.grad.norm()), 1e-3)))
            errors["dsinks"] = dsinks
            ok = ok and dsinks < REL_TOLERANCE
        row.update(ok=ok, errors=errors, rel=max(errors[n] for n in errors if n != "lse"))
    return row


# ---------------------------------------------------------------------------
# Serving at the models' shapes: paged decode and chunked prefill, packed
# variable-length batches (run by check_paged and check_varlen).
# ---------------------------------------------------------------------------

def paged_cases() -> List[Any]:
    """vLLM-style paged caches (16-token pages unless noted) at the models'
    head counts: decode batches of mixed lengths and a chunked prefill."""
    from kvpipe.check_paged import PagedCase

    lengths = (1, 17, 700, 4097, 12000, 33)
    return [
        PagedCase("bf16", 128, True, 16, 32, 8, 1, lengths, num_splits=0),      # llama-3.1-8b
        PagedCase("bf16", 128, True, 16, 28, 4, 1, lengths, num_splits=0),      # qwen2.5-7b
        PagedCase("bf16", 128, True, 16, 32, 8, 512, (512, 3000, 8000)),        # chunked prefill
        PagedCase("bf16", 128, True, 32, 32, 8, 1, lengths, window=(4095, 0),   # mistral
                  num_splits=0),
        PagedCase("bf16", 64, True, 16, 64, 8, 1, lengths, window=(127, 0),     # gpt-oss local
                  num_splits=0, sinks=True),
        PagedCase("bf16", 64, True, 16, 64, 8, 1, lengths, num_splits=0, sinks=True),
        PagedCase("bf16", 64, True, 16, 71, 1, 1, lengths, num_splits=0),       # falcon-7b
        PagedCase("bf16", 256, True, 16, 8, 4, 1, lengths, window=(1023, 0),    # gemma-3-4b
                  num_splits=0),
        PagedCase("bf16", 256, True, 16, 16, 8, 1, lengths, window=(4095, 0),   # gemma-2-9b
                  num_splits=0, softcap=50.0),
        PagedCase("bf16", 128, True, 16, 32, 32, 1, lengths, num_splits=0,      # bloom-7b1
                  alibi=True),
        PagedCase("bf16", 96, True, 16, 32, 32, 1, (1, 900, 4000)),             # phi-3-mini
        PagedCase("bf16", 128, True, 64, 8, 1, 4, (4, 2000, 30000),             # 70b/tp8, MTP
                  num_splits=0),
    ]


def paged_varlen_cases() -> List[Any]:
    """vLLM's mixed steps (flash_attn_varlen_func with a block table and
    seqused_k): decodes and prefill chunks of Llama's and Qwen's layers in
    one launch, and gpt-oss's local layer with its sinks."""
    from kvpipe.check_paged import PagedVarlenCase

    queries, keys = (1, 1, 512, 1, 37, 1, 1), (4097, 12000, 3000, 1, 37, 700, 30000)
    return [PagedVarlenCase(128, 16, 32, 8, queries, keys, seqused=True),
            PagedVarlenCase(128, 16, 28, 4, queries, keys),
            PagedVarlenCase(64, 16, 64, 8, queries, keys, window=(127, 0), sinks=True)]


def varlen_backward_cases() -> List[Any]:
    """Training on packed documents (check_varlen.run_backward_case, the
    packed backward): llama's, and gpt-oss's with sinks and its window."""
    from kvpipe.check_varlen import VarlenCase

    docs = (1, 300, 2048, 77, 1500)
    return [VarlenCase("bf16", 128, 32, 8, docs, docs, causal=True),
            VarlenCase("bf16", 64, 64, 8, docs, docs, causal=True, window=(127, 0),
                       sinks=True)]


def varlen_cases() -> List[Any]:
    """Packed batches at the models' head counts (causal, as training and
    prefill pack them), and BERT's unpadded non-causal batch."""
    from kvpipe.check_varlen import VarlenCase

    docs = (1, 37, 1000, 4096, 2500, 129)
    return [
        VarlenCase("bf16", 128, 32, 8, docs, docs, causal=True),                 # llama-3.1-8b
        VarlenCase("bf16", 128, 28, 4, docs, docs, causal=True, window=(255, 0)),
        VarlenCase("bf16", 64, 64, 8, docs, docs, causal=True, sinks=True,      # gpt-oss
                   window=(127, 0)),
        VarlenCase("bf16", 64, 12, 12, (128, 512, 77, 300, 1, 64),              # bert-base
                   (128, 512, 77, 300, 1, 64)),
        VarlenCase("bf16", 192, 16, 16, docs, docs, causal=True, value_head_dim=128),
    ]


# ---------------------------------------------------------------------------
# Tensors of more than 2^31 elements.
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class LargeCase:
    kind: str            # "prefill" (forward and backward) or "paged" (decode)
    heads_q: int
    heads_kv: int
    head_dim: int
    seq: int             # prefill: the sequence; paged: pages in the cache
    lengths: Tuple[int, ...] = ()

    @property
    def name(self) -> str:
        if self.kind == "prefill":
            elements = self.heads_q * self.seq * self.head_dim
            return (f"large prefill+backward bf16 d{self.head_dim} causal "
                    f"H{self.heads_q}/{self.heads_kv} {self.seq}x{self.seq} "
                    f"(q: {elements / 2 ** 31:.2f} x 2^31 elements)")
        elements = self.seq * 16 * self.heads_kv * self.head_dim
        return (f"large paged decode bf16 d{self.head_dim} H{self.heads_q}/{self.heads_kv} "
                f"{self.seq} pages of 16 (k_cache: {elements / 2 ** 31:.2f} x 2^31 elements) "
                f"len[{','.join(map(str, self.lengths))}]")


LARGE_CASES = [
    LargeCase("prefill", 128, 16, 128, 132000),
    LargeCase("paged", 32, 8, 128, 140000, (1, 4097, 20000, 70001)),
]

#: Rows (and keys) checked per sampled head of a large case.
_SAMPLED = 96


def _sampled_positions(n: int, torch: Any) -> Any:
    """The first and last 32 positions and 32 random ones between."""
    edge = torch.cat([torch.arange(32), torch.arange(n - 32, n)])
    middle = torch.randint(32, n - 32, (_SAMPLED - 64,))
    return torch.cat([edge, middle]).unique().cuda()


def run_large_prefill(case: LargeCase, seed: int) -> Dict[str, Any]:
    """kvpipe.attention's causal forward and backward on a (1, H, S, D) q of
    more than 2^31 elements: out, lse and dq on sampled rows of the first
    and last heads, dk and dv on sampled keys of the last K/V head, against
    float32 computed in chunks (the last K/V head's rows, all of them, for
    the keys' gradients)."""
    import torch

    import kvpipe

    torch.manual_seed(seed)
    h, hkv, n, d = case.heads_q, case.heads_kv, case.seq, case.head_dim
    group = h // hkv
    q = torch.randn(1, h, n, d, dtype=torch.bfloat16, device="cuda")
    k, v = (torch.randn(1, hkv, n, d, dtype=torch.bfloat16, device="cuda") for _ in range(2))
    row: Dict[str, Any] = {"case": case.name}
    try:
        leaves = [t.requires_grad_() for t in (q, k, v)]
        o, lse = kvpipe.attention(*leaves, causal=True, return_lse=True)
        do = torch.randn_like(o)
        o.backward(do)
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    scale = 1.0 / math.sqrt(d)
    o, q, k, v = o.detach(), q.detach(), k.detach(), v.detach()
    rows = _sampled_positions(n, torch)
    errors = {"out": 0.0, "lse": 0.0, "dq": 0.0, "dk": 0.0, "dv": 0.0}
    finite = True

    def worst(name: str, got: Any, ref: Any) -> None:
        nonlocal finite
        finite &= bool(torch.isfinite(got).all())
        errors[name] = max(errors[name], float((got.float() - ref).norm()
                                               / ref.norm().clamp_min(1e-30)))

    for head in (0, h - 1):
        kf, vf = k[0, head // group].float(), v[0, head // group].float()
        qs, dos = q[0, head, rows].float(), do[0, head, rows].float()
        s = (qs @ kf.T) * scale
        s = s.masked_fill(torch.arange(n, device="cuda")[None, :] > rows[:, None],
                          float("-inf"))
        lse_ref = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - lse_ref[:, None])
        out_ref = p @ vf
        ds = p * (dos @ vf.T - (dos * out_ref).sum(-1, keepdim=True))
        worst("out", o[0, head, rows], out_ref)
        errors["lse"] = max(errors["lse"], float((lse[0, head, rows] - lse_ref).abs().max()))
        worst("dq", leaves[0].grad[0, head, rows], (ds @ kf) * scale)
    # The last K/V head's sampled keys: every row of its query heads, in
    # chunks (P's columns need each row's full softmax).
    g = hkv - 1
    keys = _sampled_positions(n, torch)
    kf, vf = k[0, g].float(), v[0, g].float()
    dk_ref = torch.zeros(len(keys), d, device="cuda")
    dv_ref = torch.zeros(len(keys), d, device="cuda")
    chunk = 4096
    for head in range(g * group, (g + 1) * group):
        for start in range(0, n, chunk):
            r = torch.arange(start, min(n, start + chunk), device="cuda")
            qs, dos = q[0, head, r].float(), do[0, head, r].float()
            s = (qs @ kf.T) * scale
            s = s.masked_fill(torch.arange(n, device="cuda")[None, :] > r[:, None],
                              float("-inf"))
            lse_ref = torch.logsumexp(s, dim=-1, keepdim=True)
            p = torch.exp(s - lse_ref)
            delta = (dos * (p @ vf)).sum(-1, keepdim=True)
            pk = p[:, keys]
            dv_ref += pk.T @ dos
            dk_ref += ((pk * (dos @ vf[keys].T - delta)).T @ qs) * scale
            del s, p
    worst("dk", leaves[1].grad[0, g, keys], dk_ref)
    worst("dv", leaves[2].grad[0, g, keys], dv_ref)
    ok = finite and all(errors[name] < REL_TOLERANCE for name in errors if name != "lse") \
        and errors["lse"] < LSE_TOLERANCE
    row.update(ok=ok, errors=errors, rel=max(errors[n] for n in errors if n != "lse"))
    return row


def run_large_paged(case: LargeCase, seed: int) -> Dict[str, Any]:
    """paged_attention's decode (split-KV and pack-GQA as it chooses) over a
    cache of more than 2^31 elements per K and V, the sequences' pages drawn
    from its last tenth (and one sequence's spread over all of it)."""
    import torch

    from kvpipe.check import _masked_attention
    from kvpipe.check_paged import _gather
    from kvpipe.paged import paged_attention

    torch.manual_seed(seed)
    pages, p = case.seq, 16
    b = len(case.lengths)
    k_cache = torch.randn(pages, p, case.heads_kv, case.head_dim, dtype=torch.bfloat16,
                          device="cuda")
    v_cache = torch.randn_like(k_cache)
    pages_of = [math.ceil(n / p) for n in case.lengths]
    table = torch.full((b, max(pages_of)), pages + 1000, dtype=torch.int32, device="cuda")
    tail = torch.randperm(pages // 10, device="cuda") + pages - pages // 10
    start = 0
    for s, count in enumerate(pages_of[:-1]):
        table[s, :count] = tail[start:start + count].to(torch.int32)
        start += count
    table[b - 1, :pages_of[-1]] = torch.randperm(pages, device="cuda")[:pages_of[-1]].to(
        torch.int32)
    lengths = torch.tensor(case.lengths, dtype=torch.int32, device="cuda")
    q = torch.randn(b, 1, case.heads_q, case.head_dim, dtype=torch.bfloat16, device="cuda")
    out = torch.full_like(q, float("nan"))
    row: Dict[str, Any] = {"case": case.name}
    try:
        o, lse = paged_attention(q, k_cache, v_cache, table, lengths, causal=True,
                                 return_lse=True, out=out, num_splits=0, pack_gqa=None)
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    group = case.heads_q // case.heads_kv
    rel, lse_err, finite = 0.0, 0.0, True
    for s, n in enumerate(case.lengths):
        ks = _gather(k_cache, table, s, n, p).repeat_interleave(group, 0)
        vs = _gather(v_cache, table, s, n, p).repeat_interleave(group, 0)
        ref, lse_ref = _masked_attention(q[s].transpose(0, 1).float(), ks, vs,
                                         1.0 / math.sqrt(case.head_dim), None, torch)
        got = o[s].transpose(0, 1).float()
        finite &= bool(torch.isfinite(got).all())
        rel = max(rel, float((got - ref).norm() / ref.norm().clamp_min(1e-30)))
        lse_err = max(lse_err, _lse_error(lse[s], lse_ref, torch))
    row.update(ok=finite and rel < REL_TOLERANCE and lse_err < LSE_TOLERANCE, rel=rel,
               lse_err=lse_err)
    return row


def _detail(row: Dict[str, Any]) -> str:
    """A row's errors (out, lse and the gradients), or its exception."""
    if "errors" in row:
        return ", ".join(f"{k} {v:.2e}" for k, v in row["errors"].items())
    if "rel" in row:
        return f"out {row['rel']:.2e}, lse {row.get('lse_err', 0.0):.2e}"
    return row.get("error", "")


def _report(row: Dict[str, Any]) -> Dict[str, Any]:
    print(f"{'PASS' if row['ok'] else 'FAIL'} {row['case']}: {_detail(row)}", flush=True)
    return row


def run(large: bool = True) -> List[Dict[str, Any]]:
    """MODEL_CASES, the paged and varlen cases, then LARGE_CASES; one row each."""
    import torch

    from kvpipe import check_paged, check_varlen

    rows = []

    def timed(fn: Callable[[], Dict[str, Any]]) -> None:
        start = time.perf_counter()
        result = fn()
        result["seconds"] = round(time.perf_counter() - start, 3)
        rows.append(_report(result))
        torch.cuda.empty_cache()

    for i, case in enumerate(MODEL_CASES):
        timed(lambda: run_case(case, 9100 + i))
    for i, case in enumerate(paged_cases()):
        timed(lambda: check_paged.run_case(case, 9200 + i))
    for i, case in enumerate(paged_varlen_cases()):
        timed(lambda: check_paged.run_varlen_case(case, 9250 + i))
    for i, case in enumerate(varlen_cases()):
        timed(lambda: check_varlen.run_case(case, 9300 + i, tail=True))
    for i, case in enumerate(varlen_backward_cases()):
        timed(lambda: check_varlen.run_backward_case(case, 9350 + i, way="packed"))
    for i, case in enumerate(LARGE_CASES if large else ()):
        runner = run_large_prefill if case.kind == "prefill" else run_large_paged
        timed(lambda: runner(case, 9400 + i))
    return rows


def to_markdown(rows: List[Dict[str, Any]]) -> str:
    """One line per case: its errors (out, lse, and the gradients)."""
    lines = ["| case | ok | errors | s |", "| --- | --- | --- | --- |"]
    for row in rows:
        lines.append(f"| {row['case']} | {'PASS' if row['ok'] else 'FAIL'} | {_detail(row)} | "
                     f"{row.get('seconds', '')} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# The kernels these launch (compile --for-check --models).
# ---------------------------------------------------------------------------

def case_kernel_configs(case: ModelCase) -> List[Dict[str, Any]]:
    """The compile_attention arguments of the kernels ``run_case`` loads: its
    forward (and, training, the backward family), traced as the interface
    traces its modifiers, at the kernel head dims (padded ones run as the
    next pair)."""
    from kvpipe.attention import normalise_window
    from kvpipe.check_modifiers import _flash_score_mod, training_kernel_configs
    from kvpipe.kernels import padded_head_dims

    layer = case.layer
    d, dv = padded_head_dims(layer.head_dim, layer.v_dim) or (layer.head_dim, layer.v_dim)
    if case.api == "flash_attn" and (layer.softcap or layer.alibi):
        score_mod = _flash_score_mod(layer.softcap, layer.alibi, case.seq_q == case.seq_kv,
                                     slopes_shape=(layer.heads_q,))
    else:
        score_mod = _score_mod(layer)
    left, right = normalise_window(layer.window, layer.causal)
    window = left >= 0 or right >= 0
    configs = training_kernel_configs((score_mod, None), d, dv if dv != d else None,
                                      case.dtype, layer.causal, case.alignment, window,
                                      case.seq_q, case.seq_kv, sinks=layer.sinks)
    return configs if case.train else configs[:-1]


def model_kernel_configs() -> List[Dict[str, Any]]:
    """Every kernel ``run`` launches."""
    from kvpipe import check_paged, check_varlen
    from kvpipe.check_modifiers import training_kernel_configs
    from kvpipe.check_paged import PagedCase

    configs = [c for case in MODEL_CASES for c in case_kernel_configs(case)]
    configs += check_paged.kernel_configs(paged_cases())
    configs += check_paged.paged_varlen_kernel_configs(paged_varlen_cases())
    configs += check_varlen.forward_kernel_configs(varlen_cases())
    configs += check_varlen.packed_backward_kernel_configs(varlen_backward_cases())
    for case in LARGE_CASES:
        if case.kind == "prefill":  # a causal training step without modifiers
            configs += training_kernel_configs((None, None), case.head_dim, None, "bf16", True,
                                               "top_left", False, case.seq, case.seq)
        else:
            configs += check_paged.kernel_configs([PagedCase(
                "bf16", case.head_dim, True, 16, case.heads_q, case.heads_kv, 1, case.lengths,
                num_splits=0)])
    return unique_configs(configs)
