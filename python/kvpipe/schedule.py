"""The host's tile schedule for persistent kernels with ``tile_table``
(docs/kernel-abi.md, "Tile tables").

A persistent CTA ``i`` of a ``tile_table`` kernel takes, in round ``r``, the
tile whose linear index ``x + X * (y + Y * z)`` is the i32 at
``table[r * G + i]`` (``G`` the grid's CTAs), until it reads -1. Causal tiles
differ in length (Q block ``q`` visits about ``q + 1`` K/V blocks), so the
closed-form round-robin order of a plain persistent grid leaves CTAs with
12-21 % more work than others at 8k-16k tokens; this table is the schedule
FA3's dynamic scheduler reaches at run time, computed once per shape on the
host: the tiles longest first, each given to the CTA with the least work so
far (greedy LPT list scheduling), with the (batch, head) pairs taken in groups
whose K and V fit in L2 together (``L2_GROUP_BYTES``, as the kernels'
``lpt_tiles`` order) so that the CTAs running at one time share them.

``build_tile_table`` is the pure computation (a list of ints, for tests and
for embedders who compute the table themselves); ``device_tile_table`` the
cached device tensor a launcher passes.
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from kvpipe._tensors import element_size

#: The K/V bytes of one group of (batch, head) pairs: half of an H100's L2,
#: AttentionConfig::kL2TileGroupBytes (the kernels' lpt_tiles order).
L2_GROUP_BYTES = 24 * 1024 * 1024

#: A tile's fixed cost in K/V blocks: its Q load, its epilogue and its output
#: store, so that fully masked tiles are not free.
_TILE_OVERHEAD_BLOCKS = 1


class TileShape(NamedTuple):
    """What a tile table depends on: the kernel's tiles and masks and the
    launch's shape (``window_left`` / ``window_right`` -1 where unbounded,
    ``window_right`` 0 when causal; ``element_bytes`` of K and V)."""

    block_m: int
    block_n: int
    causal: bool
    bottom_right: bool
    seq_q: int
    seq_kv: int
    heads_q: int
    heads_per_kv_head: int
    batch: int
    head_dim: int
    value_head_dim: int
    element_bytes: int
    window_left: int = -1
    window_right: int = -1


def kv_blocks(shape: TileShape, q_block: int) -> int:
    """The K/V blocks Q block ``q_block`` visits under the launch's masks."""
    first_row = q_block * shape.block_m
    last_row = min(shape.seq_q, first_row + shape.block_m) - 1
    if last_row < first_row:
        return 0
    shift = shape.seq_kv - shape.seq_q if shape.bottom_right else 0
    right = 0 if shape.causal else shape.window_right
    end = shape.seq_kv if right < 0 else min(shape.seq_kv, last_row + shift + right + 1)
    start = 0 if shape.window_left < 0 else max(0, first_row + shift - shape.window_left)
    if end <= start:
        return 0
    return -(-end // shape.block_n) - start // shape.block_n


def build_tile_table(shape: TileShape, ctas: int,
                     group_bytes: Optional[int] = None) -> List[int]:
    """The table for a grid of ``ctas`` CTAs: ``rows * ctas`` i32 entries,
    row ``r`` holding each CTA's ``r``-th tile, every CTA's column ending with
    -1 (the last row is all -1). ``group_bytes``: the K/V bytes of a group of
    (batch, head) pairs (default ``L2_GROUP_BYTES``)."""
    if ctas < 1:
        raise ValueError(f"ctas must be positive, got {ctas}")
    q_blocks = -(-shape.seq_q // shape.block_m)
    pairs = shape.heads_q * shape.batch
    # x is the grid's Q block coordinate; the kernel takes x = 0 as the last
    # (longest) block when causal (setTile).
    cost = [kv_blocks(shape, q_blocks - 1 - x if shape.causal else x) + _TILE_OVERHEAD_BLOCKS
            for x in range(q_blocks)]
    pair_bytes = max(shape.seq_kv * (shape.head_dim + shape.value_head_dim) *
                     shape.element_bytes // max(shape.heads_per_kv_head, 1), 1)
    group_bytes = L2_GROUP_BYTES if group_bytes is None else group_bytes
    group = min(max(group_bytes // pair_bytes, 1), max(pairs, 1))
    # Groups of equal size (within one pair): a small last group's longest
    # tiles would start late, with too little of its work left to balance
    # them.
    groups = -(-max(pairs, 1) // group)
    bounds = [g * pairs // groups for g in range(groups + 1)]
    # Longest first within each group (x = 0 is the longest when causal; the
    # non-causal ones are equal), the group's pairs fastest.
    order = sorted(range(q_blocks), key=lambda x: -cost[x])
    loads = [(0, cta) for cta in range(ctas)]
    columns: List[List[int]] = [[] for _ in range(ctas)]
    for first, end in zip(bounds, bounds[1:]):
        members = range(first, end)
        for x in order:
            for pair in members:
                load, cta = heapq.heappop(loads)
                columns[cta].append(x + q_blocks * pair)
                heapq.heappush(loads, (load + cost[x], cta))
    rows = max(len(column) for column in columns) + 1
    table = [-1] * (rows * ctas)
    for cta, column in enumerate(columns):
        for r, tile in enumerate(column):
            table[r * ctas + cta] = tile
    return table


_tables: "OrderedDict[Tuple[Any, ...], Any]" = OrderedDict()
_tables_lock = threading.Lock()
#: Tables kept per process (the least recently used go first).
_MAX_TABLES = 64


def device_tile_table(shape: TileShape, ctas: int, device_index: int) -> Any:
    """The table as an int32 torch tensor on the device, computed once per
    shape and grid. Build it before a CUDA graph capture (its first use
    copies it to the device)."""
    import torch

    key = (shape, ctas, device_index, L2_GROUP_BYTES)
    with _tables_lock:
        table = _tables.get(key)
        if table is not None:
            _tables.move_to_end(key)
            return table
    table = torch.tensor(build_tile_table(shape, ctas, L2_GROUP_BYTES), dtype=torch.int32,
                         device=torch.device("cuda", device_index))
    with _tables_lock:
        _tables[key] = table
        while len(_tables) > _MAX_TABLES:
            _tables.popitem(last=False)
    return table


def launch_tile_shape(abi: Dict[str, Any], seq_q: int, seq_kv: int, heads_q: int,
                      heads_per_kv_head: int, batch: int, window_left: int,
                      window_right: int) -> TileShape:
    """The TileShape of a launch of the kernel ``abi`` describes."""
    return TileShape(
        block_m=abi["block_m"], block_n=abi["block_n"], causal=bool(abi["causal"]),
        bottom_right=abi.get("mask_alignment") == "bottom_right", seq_q=seq_q,
        seq_kv=seq_kv, heads_q=heads_q, heads_per_kv_head=heads_per_kv_head, batch=batch,
        head_dim=abi["head_dim"], value_head_dim=abi.get("value_head_dim", abi["head_dim"]),
        element_bytes=element_size(abi["element_type"]), window_left=window_left,
        window_right=window_right)
