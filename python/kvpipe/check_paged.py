"""``python -m kvpipe check --paged``: the paged K/V cache on the GPU.

Every page size (16, 32, 64, 128, 256) with shuffled block tables (a
``torch.randperm`` of the pages; entries past a sequence's last page hold a
page index outside the cache, which the kernel must not need), decode
(S_q 1, 4, 16) and chunked prefill (S_q 300 < S_kv), per-sequence lengths
from 1 to ~20k keys including one-token sequences, GQA and MQA, sliding
windows, both causal alignments, head dims 64 and 128 and the others'
block sizes (96, 192/128, 256), and appends through
``flash_attn_with_kvcache(k=, v=, block_table=)``. The reference gathers
each sequence's pages and computes masked attention in float32
(``check._masked_attention``); outputs of ``paged_attention`` are poisoned
(NaN) before the launch, and the appends are compared with a reference
scatter of the new keys. A paged decode step is also captured in a CUDA
graph and replayed.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Dict, List, Optional, Tuple

from kvpipe.check import (LSE_TOLERANCE, REL_TOLERANCE, _lse_error, _masked_attention,
                          _sink_attention, flash_score_modifiers, reference_mask)


@dataclasses.dataclass(frozen=True)
class PagedCase:
    dtype: str
    head_dim: int
    causal: bool
    page_size: int
    heads_q: int
    heads_kv: int
    seq_q: int
    #: Each sequence's key count (after the append, with ``append``).
    lengths: Tuple[int, ...]
    alignment: str = "bottom_right"
    window: Tuple[int, int] = (-1, -1)
    value_head_dim: Optional[int] = None
    #: Tokens appended through flash_attn_with_kvcache(k=, v=) (0: call
    #: paged_attention on the cache as it is).
    append: int = 0
    #: With ``append``: cache_seqlens as an int (all lengths equal) rather
    #: than a tensor.
    int_seqlens: bool = False
    #: paged_attention's num_splits (with pack_gqa chosen unless 1); an
    #: append goes through flash_attn_with_kvcache, which chooses both.
    num_splits: int = 1
    #: Attention sinks (kvpipe.sinks): random logits per query head.
    sinks: bool = False
    #: flash_attn_with_kvcache's softcap and alibi_slopes (the modifiers in
    #: the decode kernels; the call chooses num_splits and pack_gqa).
    softcap: float = 0.0
    alibi: bool = False

    @property
    def v_head_dim(self) -> int:
        return self.value_head_dim if self.value_head_dim is not None else self.head_dim

    @property
    def name(self) -> str:
        dims = f"d{self.head_dim}" + (f"v{self.value_head_dim}" if self.value_head_dim else "")
        extra = "" if self.alignment == "bottom_right" else f",{self.alignment}"
        if self.window != (-1, -1):
            extra += f",window{self.window[0]}:{self.window[1]}"
        if self.append:
            extra += f",append{self.append}" + ("(int)" if self.int_seqlens else "")
        if self.num_splits != 1:
            extra += f",splits{self.num_splits or 'chosen'}"
        if self.sinks:
            extra += ",sinks"
        if self.softcap:
            extra += f",softcap{self.softcap:g}"
        if self.alibi:
            extra += ",alibi"
        lengths = ",".join(map(str, self.lengths))
        return (f"paged p{self.page_size} {self.dtype} {dims} "
                f"{'causal' if self.causal else 'full'} H{self.heads_q}/{self.heads_kv} "
                f"Sq{self.seq_q} len[{lengths}]{extra}")


def paged_grid() -> List[PagedCase]:
    cases: List[PagedCase] = []
    for p in (16, 32, 64, 128, 256):
        cases += [
            # Decode, GQA, lengths from 1 to 20k (one-token sequences, page
            # and block boundaries).
            PagedCase("bf16", 128, True, p, 8, 2, 1, (1, p, p + 1, 129, 20000)),
            # A few queries, MQA, no mask.
            PagedCase("f16", 64, False, p, 4, 1, 4, (1, 4, 3 * p - 1, 4097)),
            # S_q 16 with a causal window.
            PagedCase("bf16", 128, True, p, 4, 4, 16, (16, 300, 20001), window=(256, 0)),
            # Chunked prefill: 300 new queries at the end of longer sequences.
            PagedCase("bf16", 64, True, p, 4, 2, 300, (300, 1000, 5003)),
            # Top-left causal (rows past a short sequence's keys see them all).
            PagedCase("bf16", 128, True, p, 2, 1, 16, (1, 16, 700), alignment="top_left"),
            # A window on both sides, no causal.
            PagedCase("f16", 128, False, p, 4, 2, 16, (5, 2000, 9000), window=(100, 50)),
            # Appends through flash_attn_with_kvcache: decode, and a chunk.
            PagedCase("bf16", 128, True, p, 8, 1, 1, (1, 2, p + 1, 12000), append=1),
            PagedCase("bf16", 64, True, p, 4, 2, 4, (2000, 2000), append=4, int_seqlens=True),
        ]
    # Decode kernels on pages: split-KV and pack-GQA, chosen and forced.
    for p, splits in ((16, 0), (64, 3), (256, 0), (32, 5)):
        cases += [
            PagedCase("bf16", 128, True, p, 32, 8, 1, (1, 700, 20000), num_splits=splits),
            PagedCase("bf16", 128, True, p, 28, 4, 4, (3, 5000), num_splits=splits,
                      window=(300, 0)),
        ]
    # Attention sinks (gpt-oss: D 64, GQA 8, a window on half the layers):
    # decode, split-KV chosen, and a chunk with a window.
    cases += [PagedCase("bf16", 64, True, 16, 8, 1, 1, (1, 700, 20000), num_splits=0,
                        sinks=True),
              PagedCase("bf16", 64, True, 32, 8, 1, 16, (16, 300, 5000), window=(128, 0),
                        sinks=True)]
    # Modifiers in the decode kernels, through flash_attn_with_kvcache as
    # vLLM calls it: Gemma 2's soft-cap with its window (D 256, GQA 2) and
    # without, BLOOM's ALiBi (MHA: split-KV alone) and ALiBi with GQA 4
    # (pack-GQA: a slope per row), decode and a 16-query chunk.
    cases += [PagedCase("bf16", 256, True, 16, 8, 4, 1, (1, 700, 20000), window=(4095, 0),
                        num_splits=0, softcap=50.0),
              PagedCase("bf16", 128, True, 32, 16, 8, 16, (16, 300, 5000), num_splits=0,
                        softcap=30.0),
              PagedCase("bf16", 128, True, 16, 8, 8, 1, (1, 3000, 20000), num_splits=0,
                        alibi=True),
              PagedCase("bf16", 64, True, 64, 8, 2, 4, (4, 129, 7000), num_splits=0,
                        alibi=True, softcap=20.0)]
    # The other head dims' block sizes under paging (112, 96 and 64 keys per
    # slot, the 64-byte swizzle at 96).
    for head_dim, value_head_dim, p in ((96, None, 16), (96, None, 32), (96, None, 256),
                                        (192, 128, 16), (192, None, 64), (256, None, 32),
                                        (256, None, 128)):
        cases.append(PagedCase("bf16", head_dim, True, p, 4, 2, 4, (1, 333, 4100),
                               value_head_dim=value_head_dim))
    return cases


def kernel_configs(cases: Optional[List[PagedCase]] = None) -> List[Dict[str, Any]]:
    """The ``compile_attention`` arguments of the kernels ``run`` launches
    (``python -m kvpipe compile --for-check --paged``): paged_attention's
    choice, no mask meaning the top-left kernel."""
    from kvpipe.attention import normalise_window
    from kvpipe.check import H200_MULTIPROCESSORS
    from kvpipe.plans import decode_plan

    configs: List[Dict[str, Any]] = []
    for case in cases if cases is not None else paged_grid():
        left, right = normalise_window(case.window, case.causal)
        window = left >= 0 or right >= 0
        alignment = case.alignment if case.causal or window else "top_left"
        config = dict(head_dim=case.head_dim, dtype=case.dtype, causal=case.causal,
                      value_head_dim=case.value_head_dim, mask_alignment=alignment,
                      sliding_window=window, kv_lengths=True, page_size=case.page_size,
                      **({"sinks": True} if case.sinks else {}),
                      **_regions(case.softcap, case.alibi, case.heads_q, len(case.lengths),
                                 False))
        # The decode plan (split-KV, pack-GQA) paged_attention makes on the
        # H200's SMs: flash_attn_with_kvcache (the appends) chooses both.
        splits = 0 if case.append else case.num_splits
        if splits != 1:
            width = max(max(1, math.ceil(n / case.page_size)) for n in case.lengths) + 1
            splits, pack, tuning = decode_plan(
                len(case.lengths), case.heads_q, case.heads_kv, case.seq_q,
                width * case.page_size, case.head_dim, case.v_head_dim, splits, None,
                H200_MULTIPROCESSORS, {})
            config.update(split_kv=splits > 1, pack_gqa=pack, **tuning)
        if config not in configs:
            configs.append(config)
    return configs


def _paged_inputs(case: PagedCase, torch: Any):
    """A shuffled paged cache holding each sequence's keys, its block table
    (entries past a sequence's last page poisoned with an index outside the
    cache), and the lengths."""
    dtype = torch.bfloat16 if case.dtype == "bf16" else torch.float16
    p = case.page_size
    pages_of = [max(1, math.ceil(n / p)) for n in case.lengths]
    width = max(pages_of) + 1  # a spare column: rows longer than any sequence
    num_pages = sum(pages_of) + 5  # and pages no sequence uses
    order = torch.randperm(num_pages, device="cuda").to(torch.int32)
    table = torch.full((len(case.lengths), width), num_pages + 1000, dtype=torch.int32,
                       device="cuda")
    start = 0
    for b, count in enumerate(pages_of):
        table[b, :count] = order[start:start + count]
        start += count
    k_cache = torch.randn(num_pages, p, case.heads_kv, case.head_dim, dtype=dtype, device="cuda")
    v_cache = torch.randn(num_pages, p, case.heads_kv, case.v_head_dim, dtype=dtype,
                          device="cuda")
    lengths = torch.tensor(case.lengths, dtype=torch.int32, device="cuda")
    return k_cache, v_cache, table, lengths


def _gather(cache: Any, table: Any, b: int, n: int, page_size: int) -> Any:
    """Sequence b's first n keys, (H, n, D) in float32, from its pages."""
    count = max(1, math.ceil(n / page_size))
    pages = table[b, :count].long()
    rows = cache[pages].reshape(count * page_size, cache.shape[2], cache.shape[3])[:n]
    return rows.transpose(0, 1).float()


def run_case(case: PagedCase, seed: int) -> Dict[str, Any]:
    import torch

    from kvpipe.flash_attn import flash_attn_with_kvcache
    from kvpipe.paged import paged_attention

    torch.manual_seed(seed)
    dtype = torch.bfloat16 if case.dtype == "bf16" else torch.float16
    b = len(case.lengths)
    k_cache, v_cache, table, lengths = _paged_inputs(case, torch)
    q = torch.randn(b, case.seq_q, case.heads_q, case.head_dim, dtype=dtype, device="cuda")
    scale = 1.0 / math.sqrt(case.head_dim)
    slopes = torch.rand(case.heads_q, device="cuda") * 0.3 if case.alibi else None
    sinks = torch.randn(case.heads_q, device="cuda") * 2.0 if case.sinks else None
    row: Dict[str, Any] = {"case": case.name}
    appended_ok = True
    try:
        if case.append:
            new = case.append
            before = lengths - new
            k_new = torch.randn(b, new, case.heads_kv, case.head_dim, dtype=dtype, device="cuda")
            v_new = torch.randn(b, new, case.heads_kv, case.v_head_dim, dtype=dtype,
                                device="cuda")
            k_ref, v_ref = k_cache.clone(), v_cache.clone()
            for s in range(b):  # the reference scatter, one token at a time
                for t in range(new):
                    pos = case.lengths[s] - new + t
                    page = int(table[s, pos // case.page_size])
                    k_ref[page, pos % case.page_size] = k_new[s, t]
                    v_ref[page, pos % case.page_size] = v_new[s, t]
            seqlens = case.lengths[0] - new if case.int_seqlens else before
            o, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new,
                                             cache_seqlens=seqlens, block_table=table,
                                             causal=case.causal, window_size=case.window,
                                             return_softmax_lse=True)
            torch.cuda.synchronize()
            appended_ok = bool(torch.equal(k_cache, k_ref)) and bool(torch.equal(v_cache, v_ref))
        elif case.softcap or case.alibi:
            o, lse = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths,
                                             block_table=table, causal=case.causal,
                                             window_size=case.window, softcap=case.softcap,
                                             alibi_slopes=slopes, num_splits=case.num_splits,
                                             return_softmax_lse=True)
            torch.cuda.synchronize()
        else:
            out = torch.full((b, case.seq_q, case.heads_q, case.v_head_dim), float("nan"),
                             dtype=dtype, device="cuda")
            o, lse = paged_attention(q, k_cache, v_cache, table, lengths, causal=case.causal,
                                     return_lse=True, out=out, mask_alignment=case.alignment,
                                     window_size=case.window, num_splits=case.num_splits,
                                     pack_gqa=False if case.num_splits == 1 else None,
                                     sinks=sinks)
            torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    group = case.heads_q // case.heads_kv
    rel_worst, abs_worst, lse_worst, finite = 0.0, 0.0, 0.0, True
    for s, n in enumerate(case.lengths):
        ks = _gather(k_cache, table, s, n, case.page_size).repeat_interleave(group, 0)
        vs = _gather(v_cache, table, s, n, case.page_size).repeat_interleave(group, 0)
        qs = q[s].transpose(0, 1).float()                         # (H, S_q, D)
        visible = reference_mask(case.seq_q, n, case.causal, case.alignment, case.window,
                                 q.device, torch)
        ref, lse_ref = _sequence_reference(qs, ks, vs, scale, visible, torch, sinks,
                                           case.softcap, slopes)
        got = o[s].transpose(0, 1).float()
        finite &= bool(torch.isfinite(got).all())
        rel_worst = max(rel_worst, float((got - ref).norm() / ref.norm().clamp_min(1e-30)))
        abs_worst = max(abs_worst, float((got - ref).abs().max()))
        lse_worst = max(lse_worst, _lse_error(lse[s], lse_ref, torch))
    ok = appended_ok and finite and rel_worst < REL_TOLERANCE and lse_worst < LSE_TOLERANCE
    row.update(ok=ok, rel=rel_worst, max_abs=abs_worst, lse_err=lse_worst, finite=finite)
    if not appended_ok:
        row["case"] += " (append wrong)"
    return row


def run_graph_step() -> Dict[str, Any]:
    """A paged decode step (append one token per sequence, attend) with
    fixed shapes captured in a CUDA graph, replayed on new queries, tokens
    and lengths: bit-identical to the same step run eagerly."""
    import torch

    from kvpipe.flash_attn import flash_attn_with_kvcache

    case = "paged decode step (append + attend, page 16): CUDA graph replay vs eager (bit-exact)"
    try:
        torch.manual_seed(99)
        b, hq, hkv, d, page, per_sequence = 4, 16, 4, 128, 16, 64
        num_pages = b * per_sequence + 3
        k_cache = torch.randn(num_pages, page, hkv, d, dtype=torch.bfloat16, device="cuda")
        v_cache = torch.randn_like(k_cache)
        table = torch.randperm(num_pages, device="cuda")[:b * per_sequence].to(
            torch.int32).view(b, per_sequence)
        q = torch.randn(b, 1, hq, d, dtype=torch.bfloat16, device="cuda")
        k_new = torch.randn(b, 1, hkv, d, dtype=torch.bfloat16, device="cuda")
        v_new = torch.randn_like(k_new)
        seqlens = torch.tensor([5, 1000, 0, 16], dtype=torch.int32, device="cuda")

        def step():
            return flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new,
                                           cache_seqlens=seqlens, block_table=table,
                                           causal=True)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step()  # load the kernel outside capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = step()
        q.copy_(torch.randn_like(q))
        k_new.copy_(torch.randn_like(k_new))
        v_new.copy_(torch.randn_like(v_new))
        seqlens.copy_(torch.tensor([1023, 1, 17, 600], dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        want = step()  # appends the same tokens at the same places again
        ok = bool(torch.equal(captured, want))
        return {"case": case, "ok": ok,
                "rel": float((captured.float() - want.float()).norm() / want.float().norm()),
                "max_abs": float((captured.float() - want.float()).abs().max()),
                "lse_err": 0.0}
    except Exception as exc:  # reported in the table, fails the run
        return {"case": case, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}


def _regions(softcap: float, alibi: bool, heads_q: int, batch: int,
             shift_compiled: bool) -> Dict[str, Any]:
    """The traced modifiers, as compile_attention takes them, that the
    flash-attn drop-ins build from softcap and alibi_slopes over per-sequence
    key counts: flash_attn_with_kvcache's shift read at run time,
    flash_attn_varlen_func's compiled in (``shift_compiled``)."""
    if not (softcap or alibi):
        return {}
    from kvpipe import modifiers
    from kvpipe.check_modifiers import _flash_score_mod

    traced = modifiers.trace(_flash_score_mod(softcap, alibi, shift_compiled,
                                              slopes_shape=(heads_q,),
                                              kv_lengths_shape=(batch,)))
    return dict(modifiers=traced.ir, aux_types=traced.aux_types)


def _sequence_reference(qs: Any, ks: Any, vs: Any, scale: float, visible: Any, torch: Any,
                        sinks: Any = None, softcap: float = 0.0,
                        slopes: Any = None) -> Tuple[Any, Any]:
    """One sequence's float32 (out, lse) from its (H, S_q, D) queries and
    gathered keys and values: with the sinks' column, or flash-attn's
    soft-cap and ALiBi (the diagonal at the sequence's own key count) before
    the masks, or plain."""
    if sinks is not None:
        return _sink_attention(qs, ks, vs, scale, visible, sinks, torch)
    if not softcap and slopes is None:
        return _masked_attention(qs, ks, vs, scale, visible, torch)
    from kvpipe.check_modifiers import _softmax

    scores = flash_score_modifiers(torch.matmul(qs, ks.transpose(-1, -2)) * scale, softcap,
                                   slopes, torch)
    if visible is not None:
        scores = scores.masked_fill(~visible, float("-inf"))
    return _softmax(scores, vs, torch)


@dataclasses.dataclass(frozen=True)
class PagedVarlenCase:
    """A serving engine's mixed batch: packed queries (decodes, prefill
    chunks) over a paged cache, through flash_attn_varlen_func(block_table=)."""
    head_dim: int
    page_size: int
    heads_q: int
    heads_kv: int
    lengths_q: Tuple[int, ...]
    lengths_k: Tuple[int, ...]
    causal: bool = True
    window: Tuple[int, int] = (-1, -1)
    softcap: float = 0.0
    alibi: bool = False
    sinks: bool = False
    #: The key counts as vLLM's seqused_k rather than cu_seqlens_k.
    seqused: bool = False
    #: With seqused: the interface called, "flash_attn" (flash-attn 2's
    #: drop-in), "vllm" (kvpipe.vllm_flash_attn, into a poisoned out=) or
    #: "fa3" (kvpipe.flash_attn_interface: SGLang's packed batch, the key
    #: counts as cache_seqlens).
    interface: str = "flash_attn"

    @property
    def name(self) -> str:
        extra = "".join(f",{part}" for part in (
            "window{}:{}".format(*self.window) if self.window != (-1, -1) else "",
            f"softcap{self.softcap:g}" if self.softcap else "",
            "alibi" if self.alibi else "", "sinks" if self.sinks else "",
            "seqused_k" if self.seqused else "",
            self.interface if self.seqused and self.interface != "flash_attn" else "")
            if part)
        return (f"paged varlen p{self.page_size} bf16 d{self.head_dim} "
                f"{'causal' if self.causal else 'full'} H{self.heads_q}/{self.heads_kv} "
                f"q[{','.join(map(str, self.lengths_q))}] k[{','.join(map(str, self.lengths_k))}]"
                f"{extra}")


def paged_varlen_grid() -> List[PagedVarlenCase]:
    """Mixed batches: decodes (one query), a prefill chunk after a cached
    prefix, a whole prompt, an empty sequence; page sizes 16 to 256, GQA,
    a window, the modifiers and sinks; the key counts as cu_seqlens_k or
    vLLM's seqused_k."""
    mixed_q, mixed_k = (1, 300, 1, 0, 17, 1), (5000, 300, 1, 9, 2065, 20000)
    return [
        PagedVarlenCase(128, 16, 32, 8, mixed_q, mixed_k),
        PagedVarlenCase(128, 256, 28, 4, mixed_q, mixed_k, seqused=True),
        PagedVarlenCase(64, 32, 8, 1, mixed_q, mixed_k, window=(127, 0), sinks=True),
        PagedVarlenCase(256, 16, 16, 8, mixed_q, mixed_k, window=(4095, 0), softcap=50.0),
        PagedVarlenCase(128, 64, 8, 8, mixed_q, mixed_k, alibi=True),
        # vLLM's call with ALiBi: the kernel reads seqused_k, ALiBi's
        # diagonal is seqused_k - the query counts.
        PagedVarlenCase(128, 16, 16, 4, mixed_q, mixed_k, alibi=True, seqused=True,
                        interface="vllm"),
        # SGLang's call (FA3's interface) with sinks and a soft-cap.
        PagedVarlenCase(128, 64, 32, 8, mixed_q, mixed_k, softcap=30.0, sinks=True,
                        seqused=True, interface="fa3"),
        PagedVarlenCase(96, 16, 4, 2, (40, 1, 200), (40, 700, 1000), causal=False),
    ]


def paged_varlen_kernel_configs(cases: Optional[List[PagedVarlenCase]] = None
                                ) -> List[Dict[str, Any]]:
    """The kernels of ``run_varlen_case``: attention_varlen_paged's choice."""
    from kvpipe.attention import launched_mask, normalise_window

    configs: List[Dict[str, Any]] = []
    for case in cases if cases is not None else paged_varlen_grid():
        left, right = normalise_window(case.window, case.causal)
        window = left >= 0 or right >= 0
        causal, alignment = launched_mask(case.causal, "bottom_right", window,
                                          max(case.lengths_q), max(case.lengths_k), True)
        config = dict(head_dim=case.head_dim, dtype="bf16", causal=causal,
                      value_head_dim=None, mask_alignment=alignment, sliding_window=window,
                      kv_lengths=case.seqused, page_size=case.page_size, varlen=True,
                      **({"sinks": True} if case.sinks else {}),
                      **_regions(case.softcap, case.alibi, case.heads_q, len(case.lengths_q),
                                 True))
        if config not in configs:
            configs.append(config)
    return configs


def run_varlen_case(case: PagedVarlenCase, seed: int) -> Dict[str, Any]:
    """flash_attn_varlen_func(block_table=) on a shuffled paged cache, with
    rows after the last sequence that belong to none (poisoned, and left
    so), against a per-sequence float32 reference."""
    import torch

    from kvpipe.flash_attn import _varlen_score_mod, flash_attn_varlen_func
    from kvpipe.paged import attention_varlen_paged

    torch.manual_seed(seed)
    padded = PagedCase("bf16", case.head_dim, case.causal, case.page_size, case.heads_q,
                       case.heads_kv, 1, case.lengths_k)
    k_cache, v_cache, table, _ = _paged_inputs(padded, torch)
    offsets = [0]
    for n in case.lengths_q:
        offsets.append(offsets[-1] + n)
    extra = 3  # rows after the last sequence: belong to none
    q = torch.randn(offsets[-1] + extra, case.heads_q, case.head_dim, dtype=torch.bfloat16,
                    device="cuda")
    cu_q = torch.tensor(offsets, dtype=torch.int32, device="cuda")
    used = torch.tensor(case.lengths_k, dtype=torch.int32, device="cuda")
    cu_k = torch.nn.functional.pad(torch.cumsum(used, 0, dtype=torch.int32), (1, 0))
    slopes = torch.rand(case.heads_q, device="cuda") * 0.3 if case.alibi else None
    sinks = torch.randn(case.heads_q, device="cuda") * 2.0 if case.sinks else None
    row: Dict[str, Any] = {"case": case.name}
    try:
        poisoned = None
        if case.seqused and case.interface == "fa3":  # SGLang's call
            from kvpipe.flash_attn_interface import flash_attn_with_kvcache as fa3_kvcache

            o, lse, *_ = fa3_kvcache(
                q=q, k_cache=k_cache, v_cache=v_cache, page_table=table, cache_seqlens=used,
                cu_seqlens_q=cu_q, max_seqlen_q=max(case.lengths_q), causal=case.causal,
                window_size=case.window, softcap=case.softcap, return_softmax_lse=True,
                sinks=sinks)
        elif case.seqused and case.interface == "vllm":  # vLLM's FlashAttention backend
            from kvpipe.vllm_flash_attn import flash_attn_varlen_func as vllm_varlen

            poisoned = torch.full_like(q, float("nan"))
            o, lse = vllm_varlen(
                q, k_cache, v_cache, out=poisoned, cu_seqlens_q=cu_q,
                max_seqlen_q=max(case.lengths_q), seqused_k=used,
                max_seqlen_k=max(case.lengths_k), causal=case.causal,
                window_size=list(case.window), softcap=case.softcap, alibi_slopes=slopes,
                block_table=table, return_softmax_lse=True, s_aux=sinks, fa_version=3)
            if o is not poisoned:
                raise AssertionError("vLLM's out= was not the output")
        elif case.seqused:  # the drop-in, as vLLM calls it
            o, lse, _ = flash_attn_varlen_func(
                q, k_cache, v_cache, cu_q, None, max(case.lengths_q), max(case.lengths_k),
                causal=case.causal, window_size=case.window, softcap=case.softcap,
                alibi_slopes=slopes, return_attn_probs=True, block_table=table,
                learnable_sink=sinks, seqused_k=used)
        else:  # kvpipe's call, into a poisoned output
            score_mod = (_varlen_score_mod(case.softcap, slopes, q, cu_q, cu_k)
                         if case.softcap or case.alibi else None)
            out = torch.full_like(q, float("nan"))
            o, lse = attention_varlen_paged(
                q, k_cache, v_cache, cu_q, cu_k, max(case.lengths_q), max(case.lengths_k),
                table, causal=case.causal, return_lse=True, window_size=case.window,
                out=out, score_mod=score_mod, sinks=sinks)
            poisoned = out
        if poisoned is not None and not bool(torch.isnan(o[offsets[-1]:]).all()):
            row["case"] += " (rows past the last sequence written)"
            row.update(ok=False)
            return row
        torch.cuda.synchronize()
    except Exception as exc:  # reported in the table, fails the run
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return row
    group = case.heads_q // case.heads_kv
    scale = 1.0 / math.sqrt(case.head_dim)
    rel_worst, lse_worst, finite = 0.0, 0.0, True
    for s, (nq, nk) in enumerate(zip(case.lengths_q, case.lengths_k)):
        if nq == 0:
            continue
        ks = _gather(k_cache, table, s, nk, case.page_size).repeat_interleave(group, 0)
        vs = _gather(v_cache, table, s, nk, case.page_size).repeat_interleave(group, 0)
        qs = q[offsets[s]:offsets[s + 1]].transpose(0, 1).float()          # (H, nq, D)
        visible = reference_mask(nq, nk, case.causal, "bottom_right", case.window, q.device,
                                 torch)
        ref, lse_ref = _sequence_reference(qs, ks, vs, scale, visible, torch, sinks,
                                           case.softcap, slopes)
        got = o[offsets[s]:offsets[s + 1]].transpose(0, 1).float()
        finite &= bool(torch.isfinite(got).all())
        norm = float(ref.norm())
        error = float((got - ref).norm()) / norm if norm > 0 else float((got - ref).abs().max())
        rel_worst = max(rel_worst, error)
        lse_worst = max(lse_worst, _lse_error(lse[:, offsets[s]:offsets[s + 1]], lse_ref,
                                              torch))
    ok = finite and rel_worst < REL_TOLERANCE and lse_worst < LSE_TOLERANCE
    row.update(ok=ok, rel=rel_worst, max_abs=0.0, lse_err=lse_worst, finite=finite)
    return row


def run(cases: Optional[List[PagedCase]] = None) -> List[Dict[str, Any]]:
    rows = []
    for i, case in enumerate(cases if cases is not None else paged_grid()):
        start = time.perf_counter()
        row = run_case(case, seed=777 + i)
        row["seconds"] = round(time.perf_counter() - start, 3)
        rows.append(row)
        detail = (f"rel {row['rel']:.2e} max_abs {row['max_abs']:.2e} lse {row['lse_err']:.2e}"
                  if "rel" in row else row.get("error", ""))
        print(f"{'PASS' if row['ok'] else 'FAIL'} {case.name}: {detail}", flush=True)
    if cases is None:
        for i, varlen_case in enumerate(paged_varlen_grid()):
            start = time.perf_counter()
            row = run_varlen_case(varlen_case, seed=888 + i)
            row["seconds"] = round(time.perf_counter() - start, 3)
            rows.append(row)
            detail = (f"rel {row['rel']:.2e} lse {row['lse_err']:.2e}" if "rel" in row
                      else row.get("error", ""))
            print(f"{'PASS' if row['ok'] else 'FAIL'} {varlen_case.name}: {detail}", flush=True)
        rows.append(run_graph_step())
        print(f"{'PASS' if rows[-1]['ok'] else 'FAIL'} {rows[-1]['case']}: "
              f"{rows[-1].get('error', rows[-1].get('rel'))}", flush=True)
    return rows
