"""``python -m kvpipe bench --paged``: a paged K/V cache against a contiguous
one, for decode.

S_q 1, H_q 32 / H_kv 8, D 128, bf16, bottom-right causal, every sequence of
the same length (64 x 8k and 8 x 32k keys by default), in one process on
the same keys and values: the contiguous ``kv_lengths`` kernel
(``kvpipe.attention`` on a ``(B, S, H_kv, D)`` cache) and the paged kernel
(``kvpipe.paged.paged_attention``) at pages of 16, 64 and 256 rows with a
shuffled block table (the pages of a sequence scattered over the cache).
TB/s counts the bytes of K and V the call must read; "paged/contiguous" is
the ratio of the two speeds (issue 14 asks for >= 0.9). FA2's paged
``flash_attn_with_kvcache`` is measured too where the flash_attn package is
importable.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from kvpipe.bench import _median_ms

#: (batch, keys per sequence) of the default table.
SHAPES = ((64, 8192), (8, 32768))
PAGE_SIZES = (16, 64, 256)


def kernel_configs(page_sizes: Sequence[int] = PAGE_SIZES,
                   head_dim: int = 128) -> List[Dict[str, Any]]:
    """The ``compile_attention`` arguments of the kernels ``run`` launches:
    the contiguous kv_lengths kernel and the paged one per page size
    (``python -m kvpipe compile --for-check --paged`` compiles them too)."""
    from kvpipe.check import H200_MULTIPROCESSORS
    from kvpipe.plans import decode_plan

    base = dict(head_dim=head_dim, dtype="bf16", causal=True, value_head_dim=None,
                mask_alignment="bottom_right", sliding_window=False, kv_lengths=True)
    configs = [base] + [dict(base, page_size=page) for page in page_sizes]
    # And with the decode plan (split-KV, pack-GQA) each shape gets on the
    # H200, contiguous and paged.
    for batch, keys in SHAPES:
        splits, pack, tuning = decode_plan(batch, 32, 8, 1, keys, head_dim, head_dim, 0, None,
                                           H200_MULTIPROCESSORS, {})
        plan = dict(base, split_kv=splits > 1, pack_gqa=pack, **tuning)
        for config in [plan] + [dict(plan, page_size=page) for page in page_sizes]:
            if config not in configs:
                configs.append(config)
    return configs


def _fa2_kvcache() -> Optional[Any]:
    try:
        from flash_attn import flash_attn_with_kvcache
    except Exception:  # noqa: BLE001 -- absent, or its CUDA libraries are
        return None
    return flash_attn_with_kvcache


def run(shapes: Sequence[Tuple[int, int]] = SHAPES,
        page_sizes: Sequence[int] = PAGE_SIZES, heads_q: int = 32, heads_kv: int = 8,
        head_dim: int = 128) -> List[Dict[str, Any]]:
    import torch

    import kvpipe
    from kvpipe.paged import paged_attention

    fa2 = _fa2_kvcache()
    rows = []
    for batch, keys in shapes:
        torch.manual_seed(0)
        dtype = torch.bfloat16
        k = torch.randn(batch, keys, heads_kv, head_dim, dtype=dtype, device="cuda")
        v = torch.randn_like(k)
        q = torch.randn(batch, 1, heads_q, head_dim, dtype=dtype, device="cuda")
        lengths = torch.full((batch,), keys, dtype=torch.int32, device="cuda")
        read = 2 * batch * keys * heads_kv * head_dim * k.element_size()

        def tbps(ms: float) -> float:
            return round(read / (ms * 1e-3) / 1e12, 3)

        contiguous = tbps(_median_ms(lambda: kvpipe.attention(
            q, k, v, causal=True, layout="bshd", mask_alignment="bottom_right",
            kv_lengths=lengths)))
        # The decode kernels (split-KV, pack-GQA), as flash_attn_with_kvcache
        # chooses them.
        contiguous_plan = tbps(_median_ms(lambda: kvpipe.attention(
            q, k, v, causal=True, layout="bshd", mask_alignment="bottom_right",
            kv_lengths=lengths, num_splits=0, pack_gqa=None)))
        for page in page_sizes:
            per_sequence = keys // page
            num_pages = batch * per_sequence
            # The same keys, their pages scattered: page j of sequence b is
            # cache page table[b, j].
            table = torch.randperm(num_pages, device="cuda").to(torch.int32).view(
                batch, per_sequence)
            k_cache = torch.empty(num_pages, page, heads_kv, head_dim, dtype=dtype,
                                  device="cuda")
            v_cache = torch.empty_like(k_cache)
            k_cache[table.long().flatten()] = k.reshape(num_pages, page, heads_kv, head_dim)
            v_cache[table.long().flatten()] = v.reshape(num_pages, page, heads_kv, head_dim)
            row: Dict[str, Any] = {"B": batch, "S_kv": keys, "H": f"{heads_q}/{heads_kv}",
                                   "D": head_dim, "page": page, "contiguous": contiguous}
            row["paged"] = tbps(_median_ms(lambda: paged_attention(
                q, k_cache, v_cache, table, lengths, causal=True)))
            row["paged/contiguous"] = round(row["paged"] / contiguous, 3)
            row["contiguous_plan"] = contiguous_plan
            row["paged_plan"] = tbps(_median_ms(lambda: paged_attention(
                q, k_cache, v_cache, table, lengths, causal=True, num_splits=0,
                pack_gqa=None)))
            row["paged/contiguous_plan"] = round(row["paged_plan"] / contiguous_plan, 3)
            if fa2 is not None:
                try:
                    row["fa2_paged"] = tbps(_median_ms(lambda: fa2(
                        q, k_cache, v_cache, cache_seqlens=lengths, block_table=table,
                        causal=True)))
                except Exception as exc:  # noqa: BLE001 -- a peer's failure (page sizes)
                    print(f"FA2 paged failed at page {page}: {exc}", flush=True)
                    row["fa2_paged"] = None
            print(row, flush=True)
            rows.append(row)
            del k_cache, v_cache, table
        del k, v, q
    return rows


#: The table's columns: heading and cell of a row.
_COLUMNS = (
    ("B x S_kv", lambda r: f"{r['B']} x {r['S_kv']}"), ("H_q/H_kv", lambda r: r["H"]),
    ("D", lambda r: r["D"]), ("page", lambda r: r["page"]),
    ("contiguous TB/s", lambda r: r["contiguous"]), ("paged TB/s", lambda r: r["paged"]),
    ("paged/contiguous", lambda r: r["paged/contiguous"]),
    ("contiguous TB/s, decode plan", lambda r: r["contiguous_plan"]),
    ("paged TB/s, decode plan", lambda r: r["paged_plan"]),
    ("paged/contiguous, decode plan", lambda r: r["paged/contiguous_plan"]),
    ("FA2 paged TB/s", lambda r: r.get("fa2_paged")))


def to_markdown(rows: List[Dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(name for name, _ in _COLUMNS) + " |",
             "|" + " --- |" * len(_COLUMNS)]
    lines += ["| " + " | ".join(str(cell(r)) for _, cell in _COLUMNS) + " |" for r in rows]
    return "\n".join(lines) + "\n"
