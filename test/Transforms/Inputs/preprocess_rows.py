"""What the backward preprocess must write for one row, shared by
preprocess_map.py (dense batches) and varlen_rows_map.py (packed
sequences): the inputs' values and the expected delta, lse * log2(e) and
zeroed dq_accum row."""
import math


def value(tensor, element):
    """A distinct value of O, dO or the log-sum-exp at `element`, exact in
    bf16 and f16 (small integers / 8)."""
    return float(((element * (7 if tensor == "o" else 13) + 3) % 23) - 11) / 8.0


def expect_row(expected, padded_row, o_row, lse_element, valid, value_dim, head_dim):
    """Adds to `expected` the preprocess's writes for the row at `padded_row`
    of the fp32 buffers: delta = rowsum(dO * O) over the row's `value_dim`
    elements from `o_row`, lse * log2(e) of the lse at `lse_element` (both 0
    for a padding row, `valid` false), and zeros over its dq_accum row. A row
    expected twice (overlapping padded rows) is an error."""
    delta = sum(value("o", o_row + c) * value("do", o_row + c)
                for c in range(value_dim)) if valid else 0.0
    lse = (value("lse", lse_element) + 0.5) * math.log2(math.e) if valid else 0.0
    for key, v in ((("delta", padded_row), delta), (("lse_log2", padded_row), lse)):
        assert key not in expected, "padded rows overlap"
        expected[key] = v
    for c in range(head_dim):
        expected[("dq_accum", padded_row * head_dim + c)] = 0.0
