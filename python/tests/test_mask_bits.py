"""The arithmetic of the forward's ``mask_bits`` (Fragment::columnRangeBits
and selectByBits, lib/Dialect/KVPipe/Transforms/Fragment.cpp), mirrored
here and checked against the per-element mask it replaces, for every lane
position, block offset and bound around a block: the kept elements must be
exactly those whose key lies in [first key, min(seq_kv, last key + 1)).
The GPU check grid runs the kernels themselves (check --tune mask_bits=true).
"""
import itertools

U32 = 0xFFFFFFFF


def column_offset(i):  # AccumulatorLayout::columnOffset
    return 8 * (i // 4) + i % 2


def row_half(i):  # AccumulatorLayout::rowHalf
    return (i % 4) // 2


def position_in_row_half(i):  # AccumulatorLayout::positionInRowHalf
    return 2 * (i // 4) + i % 2


def positions_left_of(u, groups):  # the IR: u clamped to [0, 8 groups]
    u = min(max(u, 0), 8 * groups)
    return 2 * (u // 8) + min(u % 8, 2)


def low_bits(k):  # ~0 >> (32 - max(k, 1)), 0 for k = 0 (no shift by 32)
    bits = (U32 >> (32 - max(k, 1))) & U32
    return 0 if k == 0 else bits


def column_range_bits(low, high, n):
    positions, groups = n // 2, n // 4
    end = positions_left_of(high, groups)
    begin = positions_left_of(low, groups) if low is not None else None
    words = []
    for word in range(-(-positions // 32)):
        def in_word(count):
            return min(max(count - 32 * word, 0), 32)
        bits = low_bits(in_word(end))
        if begin is not None:
            bits &= low_bits(in_word(begin)) ^ U32
        words.append(bits)
    return words


def kept_by_bits(words, n):
    kept = []
    for i in range(n):
        p = position_in_row_half(i)
        kept.append(bool(words[row_half(i)][p // 32] & (1 << (p % 32))))
    return kept


def test_mask_bits_keep_exactly_the_keys_in_range():
    for block_n in (64, 80, 256):
        n = block_n // 2
        for lane4, kv_row in itertools.product(range(4), (0, 384)):
            first_col = kv_row + 2 * lane4
            keys = [first_col + column_offset(i) for i in range(n)]
            span = range(kv_row - 9, kv_row + block_n + 10, 7)
            for seq_kv, last0, last1 in itertools.product(span, span, (kv_row + 5, kv_row - 1)):
                for first in (None, kv_row - 3, kv_row + 17, kv_row + block_n):
                    end = [min(seq_kv, last0 + 1), min(seq_kv, last1 + 1)]
                    words = [column_range_bits(None if first is None else first - first_col,
                                               end[h] - first_col, n) for h in (0, 1)]
                    want = [(first is None or k >= first) and k < end[row_half(i)]
                            for i, k in enumerate(keys)]
                    assert kept_by_bits(words, n) == want, (block_n, lane4, kv_row, seq_kv,
                                                            last0, last1, first)
