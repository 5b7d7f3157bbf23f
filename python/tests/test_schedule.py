"""The host's tile tables for persistent kernels with ``tile_table``
(kvpipe.schedule, docs/kernel-abi.md "Tile tables")."""

import itertools

import pytest

from kvpipe import schedule
from kvpipe.schedule import TileShape, build_tile_table, kv_blocks


def shape(**overrides):
    values = dict(block_m=192, block_n=128, causal=True, bottom_right=False, seq_q=8192,
                  seq_kv=8192, heads_q=16, heads_per_kv_head=1, batch=4, head_dim=64,
                  value_head_dim=64, element_bytes=2)
    values.update(overrides)
    return TileShape(**values)


def columns(table, ctas):
    """Each CTA's tiles in round order, up to its -1."""
    rows = len(table) // ctas
    assert len(table) == rows * ctas
    result = []
    for cta in range(ctas):
        column = [table[r * ctas + cta] for r in range(rows)]
        end = column.index(-1)
        result.append(column[:end])
    return result


def visible_blocks(s, q_block):
    """kv_blocks by brute force: the K/V blocks with a visible key for some
    row of the Q block, under the flash-attn mask rules."""
    shift = s.seq_kv - s.seq_q if s.bottom_right else 0
    right = 0 if s.causal else s.window_right
    blocks = set()
    for i in range(q_block * s.block_m, min(s.seq_q, (q_block + 1) * s.block_m)):
        for j in range(s.seq_kv):
            if right >= 0 and j > i + shift + right:
                continue
            if s.window_left >= 0 and j < i + shift - s.window_left:
                continue
            blocks.add(j // s.block_n)
    return len(blocks)


@pytest.mark.parametrize("causal,bottom_right,window,seq_q,seq_kv", [
    (True, False, (-1, -1), 700, 700), (True, True, (-1, -1), 300, 900),
    (True, True, (-1, -1), 900, 300), (False, False, (100, 37), 500, 640),
    (False, True, (-1, 50), 333, 777), (True, False, (130, 0), 640, 640),
    (False, False, (-1, -1), 250, 130)])
def test_kv_blocks_counts_the_visible_blocks(causal, bottom_right, window, seq_q, seq_kv):
    s = shape(block_m=64, block_n=48, causal=causal, bottom_right=bottom_right, seq_q=seq_q,
              seq_kv=seq_kv, window_left=window[0], window_right=window[1])
    for q_block in range(-(-seq_q // 64)):
        assert kv_blocks(s, q_block) == visible_blocks(s, q_block), q_block


@pytest.mark.parametrize("s,ctas", [
    (shape(), 132), (shape(seq_q=16384, seq_kv=16384, batch=2), 132),
    (shape(causal=False, seq_q=1000, seq_kv=1000, batch=3, heads_q=5), 100),
    (shape(block_m=128, head_dim=128, value_head_dim=128, heads_per_kv_head=4), 114),
    (shape(seq_q=100, seq_kv=100, batch=1, heads_q=2), 132),
    (shape(seq_q=4096, seq_kv=4096, bottom_right=True, window_left=512), 78)])
def test_the_table_holds_every_tile_once_in_columns_ending_with_minus_one(s, ctas):
    table = build_tile_table(s, ctas)
    q_blocks = -(-s.seq_q // s.block_m)
    tiles = list(itertools.chain.from_iterable(columns(table, ctas)))
    assert sorted(tiles) == list(range(q_blocks * s.heads_q * s.batch))
    assert table[-ctas:] == [-1] * ctas  # the last row ends every column


def test_causal_tiles_are_balanced_longest_first():
    # D 64 causal 8k, B 4 x H 16, 132 SMs: the closed-form round robin leaves
    # the busiest CTA 20 % over the mean; the table within a tile of it.
    s = shape()
    ctas = 132
    q_blocks = -(-s.seq_q // s.block_m)
    cost = lambda tile: kv_blocks(s, q_blocks - 1 - tile % q_blocks) + 1
    loads = [sum(map(cost, column)) for column in columns(build_tile_table(s, ctas), ctas)]
    mean = sum(loads) / ctas
    longest = max(cost(x) for x in range(q_blocks))
    assert max(loads) <= mean + longest / 2
    assert max(loads) / mean < 1.01
    # Longest first within a group of heads: the first round is the first
    # group's 132 longest tiles (its 10 pairs' Q blocks, the longest block
    # of each pair first), and no CTA's column gets longer along it.
    table = columns(build_tile_table(s, ctas), ctas)
    first_group = [cost(x) for x in range(q_blocks) for _pair in range(10)]
    assert sorted(cost(column[0]) for column in table) == sorted(first_group[:132])
    bounds = [g * 64 // 6 for g in range(7)]
    group_of = lambda tile: max(g for g in range(6) if bounds[g] <= tile // q_blocks)
    for column in table:
        for a, b in zip(column, column[1:]):
            assert group_of(a) < group_of(b) or cost(a) >= cost(b)


def test_heads_are_grouped_to_fit_l2():
    # K and V of one (batch, head) pair at 8k, D 64: 2 MiB; groups of at most
    # 12 pairs (24 MiB), equal in size: 64 pairs in 6 groups of 10-11. The
    # tiles handed out first are all from the first group.
    s = shape()
    table = build_tile_table(s, 132)
    q_blocks = -(-s.seq_q // s.block_m)
    first_row_pairs = {tile // q_blocks for tile in table[:132]}
    assert first_row_pairs <= set(range(11))


def test_bad_grid_is_refused():
    with pytest.raises(ValueError, match="ctas must be positive"):
        build_tile_table(shape(), 0)


def test_launch_tile_shape_reads_the_abi():
    abi = {"block_m": 192, "block_n": 128, "causal": True, "mask_alignment": "bottom_right",
           "head_dim": 64, "value_head_dim": 64, "element_type": "bf16"}
    s = schedule.launch_tile_shape(abi, 100, 200, 8, 2, 3, -1, -1)
    assert s == TileShape(192, 128, True, True, 100, 200, 8, 2, 3, 64, 64, 2, -1, -1)
    # The K/V bytes (the L2 groups) from the ABI's element type.
    wide = schedule.launch_tile_shape({**abi, "element_type": "f32"}, 100, 200, 8, 2, 3,
                                      -1, -1)
    assert wide.element_bytes == 4
