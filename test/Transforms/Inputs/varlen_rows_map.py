"""Checks the packed (varlen) backward's row-wise kernels by interpreting
them (simt.py) for every CTA of their grid.

A batch of sequences packed without padding -- empty ones, one row, a whole
64-row block, partial blocks -- with rows after the last that belong to no
sequence. The preprocess must write, for each head and each sequence's
rows padded to whole 64-row blocks from the sequence's padded start
floor((cu_seqlens_q[b] + 64 b) / 64) * 64: delta = rowsum(dO * O) and
lse * log2(e) (from flash-attn's (H, total_q) lse; 0 for padding rows) and
zeros over the row's dq_accum, each once and nothing else -- a block past a
sequence's rows (the grid is sized by the longest) writes nothing, and every
row lies below varlen_padded_rows(total_q, batch, 64) of its head
(python/kvpipe/varlen.py). The postprocess must write every row of every
sequence of dQ ((total_q, H, D)) from its padded dq_accum row, scaled, and
nothing else (not the rows after the last sequence). Prints one line per
kernel and configuration and "mismatches: 0" at the end.

Usage: varlen_rows_map.py KVPIPE_OPT
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from preprocess_rows import expect_row, value  # noqa: E402
from simt import Interpreter, count_mismatches, kernel_ops, write_recorder  # noqa: E402

OPT = sys.argv[1]
THREADS = 128
BLOCK_M = 64
LENGTHS = (100, 0, 1, 64, 130)
TAIL = 3  # rows after the last sequence
HEADS = 2



def padded_rows(total_q, batch):
    """python/kvpipe/varlen.py's varlen_padded_rows (64-row blocks)."""
    return (total_q + batch * BLOCK_M + BLOCK_M - 1) // BLOCK_M * BLOCK_M


def offsets():
    starts = [0]
    for n in LENGTHS:
        starts.append(starts[-1] + n)
    return starts


def kernel(head_dim, value_dim, dtype, name):
    extra = f", value_head_dim = {value_dim} : i64" if value_dim != head_dim else ""
    return kernel_ops(OPT, f"head_dim = {head_dim} : i64, element_type = {dtype}, "
                           f"causal = false, backward = true, varlen = true{extra}",
                      name)


def run_grid(names, ops, args, load, store):
    batch, blocks = len(LENGTHS), -(-max(LENGTHS) // BLOCK_M)
    for z in range(batch):
        for y in range(HEADS):
            for x in range(blocks):
                interp = Interpreter(THREADS, {"x": x, "y": y, "z": z}, load, store)
                interp.grid = {"x": blocks, "y": HEADS, "z": batch}
                interp.bind(names, args)
                interp.run(ops)


def check_preprocess(head_dim, value_dim, dtype):
    names, ops = kernel(head_dim, value_dim, dtype, "bwd_preprocess")
    starts, batch = offsets(), len(LENGTHS)
    total_q = starts[-1] + TAIL
    # (total_q, H, D_v) O and dO: the row stride is the sequence stride.
    strides = (0, value_dim, HEADS * value_dim)
    writes = {}

    def load(pointer, type_):
        buffer, byte = pointer
        if buffer in ("o", "do"):
            m = re.match(r"vector<(\d+)x(\w+)>", type_)
            count = int(m.group(1)) if m else 1
            values = [value(buffer, byte // 2 + k) for k in range(count)]
            return values if m else values[0]
        if buffer == "cu_q":
            return starts[byte // 4]
        assert buffer == "lse" and type_ == "f32", pointer
        return value("lse", byte // 4) + 0.5

    run_grid(names, ops, [("o", 0), ("do", 0), ("lse", 0), ("delta", 0), ("lse_log2", 0),
                          ("dq_accum", 0), *strides, *strides, max(LENGTHS), HEADS,
                          ("cu_q", 0), total_q], load, write_recorder(writes))
    per_head = padded_rows(total_q, batch)
    expected = {}
    for h in range(HEADS):
        for b, n in enumerate(LENGTHS):
            base = h * per_head + (starts[b] + BLOCK_M * b) // BLOCK_M * BLOCK_M
            for r in range(-(-n // BLOCK_M) * BLOCK_M):
                assert base + r < (h + 1) * per_head
                expect_row(expected, base + r, h * strides[1] + (starts[b] + r) * strides[2],
                           h * total_q + starts[b] + r, r < n, value_dim, head_dim)
    mismatches = count_mismatches(expected, writes)
    print(f"preprocess D {head_dim}/{value_dim} {dtype}: {len(writes)} writes, "
          f"{mismatches} mismatches")
    return mismatches


def check_postprocess(head_dim, dtype):
    names, ops = kernel(head_dim, head_dim, dtype, "bwd_postprocess")
    starts, batch = offsets(), len(LENGTHS)
    total_q = starts[-1] + TAIL
    per_head = padded_rows(total_q, batch)
    scale = 0.5
    writes = {}

    def load(pointer, type_):
        buffer, byte = pointer
        if buffer == "cu_q":
            return starts[byte // 4]
        if type_ == "address":  # dQ's, 16-byte aligned
            return 0x10000 + byte
        assert buffer == "dq_accum", pointer
        m = re.match(r"vector<(\d+)x(\w+)>", type_)
        count = int(m.group(1)) if m else 1
        values = [float(byte // 4 + k) for k in range(count)]
        return values if m else values[0]

    run_grid(names, ops, [("dq_accum", 0), ("dq", 0), 0, head_dim, HEADS * head_dim,
                          max(LENGTHS), HEADS, scale, ("cu_q", 0), total_q], load,
             write_recorder(writes))
    # Each padded row's head_dim floats are some permutation (the fragment
    # order) of its own block's: the row's values must come from its
    # sequence's padded block, and every element of dQ's sequence rows be
    # written once, scaled.
    expected_rows = set()
    for h in range(HEADS):
        for b, n in enumerate(LENGTHS):
            base = h * per_head + (starts[b] + BLOCK_M * b) // BLOCK_M * BLOCK_M
            for r in range(n):
                expected_rows.add((starts[b] + r, h, base + r))
    mismatches = 0
    written = {}
    for (buffer, element), v in writes.items():
        row, rest = divmod(element, HEADS * head_dim)
        written.setdefault((buffer, row, rest // head_dim), []).append(v)
    for row, h, padded in expected_rows:
        got = written.pop(("dq", row, h), [])
        block = padded // BLOCK_M
        lo, hi = block * BLOCK_M * head_dim, (block + 1) * BLOCK_M * head_dim
        if len(got) != head_dim or any(
                not isinstance(v, float) or not lo <= v / scale < hi for v in got):
            mismatches += 1
    mismatches += len(written)  # writes outside the sequences' rows
    print(f"postprocess D {head_dim} {dtype}: {len(writes)} writes, {mismatches} mismatches")
    return mismatches


total = 0
for d, dv, dtype in ((64, 64, "bf16"), (192, 128, "f16")):
    total += check_preprocess(d, dv, dtype)
for d, dtype in ((128, "bf16"),):
    total += check_postprocess(d, dtype)
print(f"mismatches: {total}")
