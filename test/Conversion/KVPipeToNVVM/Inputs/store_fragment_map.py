"""Checks kvpipe.store_fragment's lowering address by address.

Lowers store_fragment for every swizzle (32, 64, 128 B), 1 to 4 column blocks,
packed and padded block strides, bf16 and f16, then interprets the emitted
LLVM/NVVM IR for each of the 128 threads (tid.x of the last warpgroup of four)
and applies PTX's `stmatrix.sync.aligned.m8n8.x4.b16` rule: lane 8k + r gives
the address of row r of matrix k; in each matrix, lane l holds row l / 4,
columns 2 (l % 4) and +1 of register k. Every element must land where the
accumulator layout (include/kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h)
and the TMA swizzle put it: row 16 w + l / 4 + 8 ((i % 4) / 2), column
8 (i / 4) + 2 (l % 4) + i % 2; byte offset o = row * S + (column in block) * 2,
16-byte chunk XOR (o >> 7) & (S / 16 - 1); plus the block's offset. Prints
one line per configuration and "mismatches: 0" at the end.

Usage: store_fragment_map.py KVPIPE_OPT
"""
import re
import subprocess
import sys

OPT = sys.argv[1]
BINARY = {
    "llvm.urem": lambda x, y: x % y,
    "llvm.udiv": lambda x, y: x // y,
    "llvm.mul": lambda x, y: x * y,
    "llvm.add": lambda x, y: x + y,
    "llvm.lshr": lambda x, y: x >> y,
    "llvm.and": lambda x, y: x & y,
    "llvm.shl": lambda x, y: x << y,
    "llvm.xor": lambda x, y: x ^ y,
}


def expected(swizzle, width, block_stride, thread, i):
    w, l = thread // 32, thread % 32
    row = 16 * w + l // 4 + 8 * ((i % 4) // 2)
    col = 2 * (l % 4) + 8 * (i // 4) + i % 2
    offset = row * swizzle + (col % width) * 2
    offset ^= ((offset >> 7) & (swizzle // 16 - 1)) << 4
    return (col // width) * block_stride + offset


def lower(swizzle, blocks, stride_rows, ty):
    width = swizzle // 2
    n = blocks * width // 2
    tile = (f"memref<{blocks}x64x{width}x{ty}, strided<[{stride_rows * width}, "
            f"{width}, 1]>, #gpu.address_space<workgroup>>")
    src = (f"func.func @f(%f: vector<{n}x{ty}>, %t: {tile}) {{\n"
           f"  kvpipe.store_fragment %f, %t {{swizzle = {swizzle}}} : "
           f"vector<{n}x{ty}>, {tile}\n  return\n}}\n")
    out = subprocess.run([OPT, "--convert-kvpipe-to-nvvm", "-"], input=src,
                         capture_output=True, text=True, check=True)
    return [ln.strip() for ln in out.stdout.splitlines()]


def interpret(lines, thread):
    """The stmatrix instructions of `thread`: (row address, pair indices)."""
    env, stores = {}, []
    for ln in lines:
        if ln.startswith("llvm.store"):
            raise SystemExit("unexpected scalar store: " + ln)
        if ln.startswith("nvvm.stmatrix"):
            ops = re.findall(r"%\w+", ln.split("{")[0])
            stores.append((env[ops[0]], [env[o] for o in ops[1:]]))
            continue
        m = re.match(r"(%\w+) = ([\w.]+)(.*)", ln)
        if not m:
            continue
        dest, op, rest = m.groups()
        args = re.findall(r"%\w+", rest)
        if op == "llvm.mlir.constant":
            env[dest] = int(re.match(r"\s*\((-?\d+)", rest).group(1))
        elif op == "nvvm.read.ptx.sreg.tid.x":
            env[dest] = 3 * 128 + thread
        elif op in BINARY:
            env[dest] = BINARY[op](env[args[0]], env[args[1]])
        elif op == "llvm.extractvalue":
            env[dest] = 0  # the tile's (aligned) base
        elif op == "llvm.getelementptr":
            scale = 1 if rest.rstrip().endswith("i8") else 2
            env[dest] = env[args[0]] + scale * env[args[1]]
        elif op == "llvm.extractelement":
            env[dest] = env[args[1]]  # the pair's index
    return stores


mismatches = 0
for swizzle in (32, 64, 128):
    for blocks in range(1, 5):
        for stride_rows, ty in ((64, "bf16"), (72, "f16")):
            width = swizzle // 2
            lines = lower(swizzle, blocks, stride_rows, ty)
            stores = [interpret(lines, t) for t in range(128)]
            written, bad = set(), 0
            for t in range(128):
                w, l = t // 32, t % 32
                for s, (_, pairs) in enumerate(stores[t]):
                    for k in range(4):
                        row_address = stores[32 * w + 8 * k + l // 4][s][0]
                        bad += row_address % 16 != 0
                        for half in (0, 1):
                            address = row_address + 2 * (2 * (l % 4) + half)
                            i = 2 * pairs[k] + half
                            bad += address != expected(
                                swizzle, width, stride_rows * swizzle, t, i)
                            written.add(address)
            bad += len(written) != 64 * blocks * width
            mismatches += bad
            print(f"swizzle {swizzle} blocks {blocks} stride {stride_rows} {ty}: "
                  f"{len(stores[0])} stmatrix, {bad} mismatches")
print(f"mismatches: {mismatches}")
