"""Checks the backward preprocess by interpreting it (simt.py) for one CTA.

For each head dim (64-256, bf16 and f16; V's 128 with Q/K's 192) and a
partial last Q block, O, dO and lse hold distinct values (exact in the
element type), and the kernel must write, for every row of the CTA's 64-row
block: delta = rowsum(dO * O) (0 for rows past seq_q), lse * log2(e) (0 past
seq_q) at the padded row, and zeros over the row's dq_accum (head_dim
floats), and nothing else. Prints one line per configuration and
"mismatches: 0" at the end.

Usage: preprocess_map.py KVPIPE_OPT
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from preprocess_rows import expect_row, value  # noqa: E402
from simt import Interpreter, count_mismatches, kernel_ops, write_recorder  # noqa: E402

OPT = sys.argv[1]
THREADS = 128



def check(head_dim, value_dim, dtype, seq_q, block):
    extra = f", value_head_dim = {value_dim} : i64" if value_dim != head_dim else ""
    names, ops = kernel_ops(OPT, f"head_dim = {head_dim} : i64, element_type = {dtype}, "
                                 f"causal = false, backward = true{extra}",
                            "bwd_preprocess")
    heads, bsz = 3, 2
    # (B, S, H, D) strides for O and dO (bshd), in elements.
    strides = (seq_q * heads * value_dim, value_dim, heads * value_dim)
    writes = {}

    def load(pointer, type_):
        buffer, byte = pointer
        if buffer in ("o", "do"):
            m = re.match(r"vector<(\d+)x(\w+)>", type_)
            count, elem = (int(m.group(1)), m.group(2)) if m else (1, type_)
            values = [value(buffer, byte // 2 + k) for k in range(count)]
            return values if m else values[0]
        assert buffer == "lse" and type_ == "f32", pointer
        return value("lse", byte // 4) + 0.5

    interp = Interpreter(THREADS, block, load, write_recorder(writes))
    interp.bind(names, [("o", 0), ("do", 0), ("lse", 0), ("delta", 0), ("lse_log2", 0),
                        ("dq_accum", 0), *strides, *strides, seq_q, heads])
    interp.run(ops)
    padded = -(-seq_q // 64) * 64
    base = (block["z"] * heads + block["y"]) * padded
    expected = {}
    for r in range(64):
        row = 64 * block["x"] + r
        o_row = block["z"] * strides[0] + block["y"] * strides[1] + row * strides[2]
        expect_row(expected, base + row, o_row,
                   (block["z"] * heads + block["y"]) * seq_q + row, row < seq_q, value_dim,
                   head_dim)
    mismatches = count_mismatches(expected, writes)
    print(f"D {head_dim}/{value_dim} {dtype} seq_q {seq_q} block {block['x']}: "
          f"{len(writes)} writes, {mismatches} mismatches")
    return mismatches


total = 0
for d, dv, dtype in ((64, 64, "bf16"), (96, 96, "f16"), (128, 128, "bf16"),
                     (192, 128, "bf16"), (256, 256, "f16")):
    total += check(d, dv, dtype, 100, {"x": 1, "y": 2, "z": 1})  # rows 64-99 of 64-127
    total += check(d, dv, dtype, 100, {"x": 0, "y": 0, "z": 0})
print(f"mismatches: {total}")
