"""Checks the backward postprocess by interpreting it (simt.py) for one CTA.

dq_accum holds each 64-row block in the wgmma accumulator's fragment order
(AccumulatorLayout.h): element i of thread t at (i / 4) * 4 * 128 + 4 t +
i % 4 is row 16 (t / 32) + (t % 32) / 4 + 8 ((i % 4) / 2) and column
2 (t % 4) + 8 (i / 4) + i % 2 of the block. With a distinct value in every
dq_accum element, every dQ element of the block's rows below seq_q must be
written once with scale times its own accumulator element, and nothing
else: through the quad transpose and 16-byte stores when dQ's address and
strides are multiples of 16 bytes, through 4-byte stores when the address
is not. Prints one line per configuration and "mismatches: 0" at the end.

Usage: postprocess_map.py KVPIPE_OPT
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from simt import Interpreter, kernel_ops  # noqa: E402

OPT = sys.argv[1]
THREADS = 128
SCALE = 0.5


def check(head_dim, dtype, seq_q, block, misaligned):
    names, ops = kernel_ops(OPT, f"head_dim = {head_dim} : i64, element_type = {dtype}, "
                                 "causal = false, backward = true", "bwd_postprocess")
    heads = 3
    # dQ (B, S, H, D) (bshd), in elements; 16-byte multiples.
    strides = (seq_q * heads * head_dim, head_dim, heads * head_dim)
    base = 0x10000 + (2 if misaligned else 0)  # bytes
    padded = -(-seq_q // 64) * 64
    acc_base = ((block["z"] * heads + block["y"]) * padded + 64 * block["x"]) * head_dim
    writes, widths = {}, set()

    def load(pointer, type_):
        buffer, byte = pointer
        if type_ == "address":
            assert buffer == "dq", pointer
            return base + byte
        assert buffer == "dq_accum", pointer
        m = re.match(r"vector<(\d+)xf32>", type_)
        count = int(m.group(1)) if m else 1
        values = [float(byte // 4 + k) for k in range(count)]
        return values if m else values[0]

    def store(pointer, type_, stored):
        buffer, byte = pointer
        assert buffer == "dq" and byte % 2 == 0, pointer
        m = re.match(r"vector<(\d+)x(\w+)>", type_)
        count, elem = int(m.group(1)), m.group(2)
        values = []
        for v in stored:  # i32 elements are bitcast pairs of dQ's elements
            values += [v[1], v[2]] if elem == "i32" else [v]
        widths.add(2 * len(values))
        for k, v in enumerate(values):
            key = byte // 2 + k
            writes[key] = "twice" if key in writes else v

    interp = Interpreter(THREADS, block, load, store)
    interp.bind(names, [("dq_accum", 0), ("dq", 0), *strides, seq_q, heads, SCALE])
    interp.run(ops)
    expected = {}
    for t in range(THREADS):
        w, lane = divmod(t, 32)
        for i in range(head_dim // 2):
            row = 16 * w + lane // 4 + 8 * ((i % 4) // 2)
            col = 2 * (lane % 4) + 8 * (i // 4) + i % 2
            seq_row = 64 * block["x"] + row
            if seq_row >= seq_q:
                continue
            acc = acc_base + (i // 4) * 4 * THREADS + 4 * t + i % 4
            at = block["z"] * strides[0] + block["y"] * strides[1] + seq_row * strides[2] + col
            expected[at] = SCALE * acc
    mismatches = sum(1 for key, v in expected.items() if writes.get(key) != v)
    mismatches += sum(1 for key in writes if key not in expected)
    print(f"D {head_dim} {dtype} seq_q {seq_q} block {block['x']} "
          f"{'misaligned' if misaligned else 'aligned'}: {len(writes)} writes, "
          f"{sorted(widths)}-byte stores, {mismatches} mismatches")
    return mismatches


total = 0
for d, dtype in ((64, "bf16"), (96, "f16"), (128, "bf16"), (192, "bf16"), (256, "f16")):
    total += check(d, dtype, 100, {"x": 1, "y": 2, "z": 1}, misaligned=False)
    total += check(d, dtype, 100, {"x": 0, "y": 0, "z": 0}, misaligned=False)
total += check(128, "bf16", 100, {"x": 1, "y": 1, "z": 0}, misaligned=True)
print(f"mismatches: {total}")
