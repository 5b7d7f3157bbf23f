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

With `transpose` (stmatrix .trans) the tile is the fragment's transpose,
[N][64]: lane 8k + r gives the address of row r of the transposed matrix k,
whose 8 elements are column r of matrix k (lane l holds its rows l / 4), and
element (row, column) of the fragment lands at tile row `column`, tile column
`row`.

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


def expected(swizzle, width, block_stride, thread, i, transpose):
    w, l = thread // 32, thread % 32
    row = 16 * w + l // 4 + 8 * ((i % 4) // 2)
    col = 2 * (l % 4) + 8 * (i // 4) + i % 2
    if transpose:
        row, col = col, row
    offset = row * swizzle + (col % width) * 2
    offset ^= ((offset >> 7) & (swizzle // 16 - 1)) << 4
    return (col // width) * block_stride + offset


def lower(swizzle, blocks, stride_rows, ty, rows=64, n=None, transpose=False):
    width = swizzle // 2
    n = n or blocks * width // 2
    tile = (f"memref<{blocks}x{rows}x{width}x{ty}, strided<[{stride_rows * width}, "
            f"{width}, 1]>, #gpu.address_space<workgroup>>")
    attrs = f"swizzle = {swizzle}" + (", transpose" if transpose else "")
    src = (f"func.func @f(%f: vector<{n}x{ty}>, %t: {tile}) {{\n"
           f"  kvpipe.store_fragment %f, %t {{{attrs}}} : "
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


def check(swizzle, blocks, stride_rows, ty, rows, transpose):
    """Interprets one configuration; returns (stmatrix per thread, mismatches)."""
    width = swizzle // 2
    n = (rows if transpose else blocks * width) // 2
    lines = lower(swizzle, blocks, stride_rows, ty, rows, n, transpose)
    trans = [ln for ln in lines if ln.startswith("nvvm.stmatrix")]
    bad = sum(("<col>" in ln) != transpose for ln in trans)
    stores = [interpret(lines, t) for t in range(128)]
    written = set()
    for t in range(128):
        w, l = t // 32, t % 32
        for s, (_, pairs) in enumerate(stores[t]):
            for k in range(4):
                for half in (0, 1):
                    if transpose:
                        # Column 2 (l % 4) + half of matrix k is row
                        # 2 (l % 4) + half of its transpose, addressed by
                        # lane 8 k + that row; the lane's own row of the
                        # matrix (l / 4) is the column there.
                        addresser = 32 * w + 8 * k + 2 * (l % 4) + half
                        offset = 2 * (l // 4)
                    else:
                        addresser = 32 * w + 8 * k + l // 4
                        offset = 2 * (2 * (l % 4) + half)
                    row_address = stores[addresser][s][0]
                    bad += row_address % 16 != 0
                    address = row_address + offset
                    i = 2 * pairs[k] + half
                    bad += address != expected(swizzle, width,
                                               stride_rows * swizzle, t, i,
                                               transpose)
                    written.add(address)
    bad += len(written) != rows * blocks * width
    return len(stores[0]), bad


mismatches = 0
for swizzle in (32, 64, 128):
    for blocks in range(1, 5):
        for stride_rows, ty in ((64, "bf16"), (72, "f16")):
            count, bad = check(swizzle, blocks, stride_rows, ty, 64, False)
            mismatches += bad
            print(f"swizzle {swizzle} blocks {blocks} stride {stride_rows} {ty}: "
                  f"{count} stmatrix, {bad} mismatches")
    # Transposed: [N][64], 64 / W blocks, N rows (a multiple of 16).
    width = swizzle // 2
    for rows, stride_rows, ty in ((16, 16, "bf16"), (64, 64, "f16"),
                                  (96, 104, "bf16"), (128, 128, "bf16")):
        count, bad = check(swizzle, 64 // width, stride_rows, ty, rows, True)
        mismatches += bad
        print(f"transposed swizzle {swizzle} rows {rows} stride {stride_rows} "
              f"{ty}: {count} stmatrix, {bad} mismatches")
print(f"mismatches: {mismatches}")
