#!/usr/bin/env python3
"""Runner of tma_store.mlir: TMA load -> TMA store, and store_fragment -> TMA store, bit-exact.

    python3 tma_store.py KERNELS.{ptx,cubin} [--case TEXT] [--timeout S] [--seed N]
    python3 tma_store.py --dry-run

X holds random finite 16-bit patterns. OUT is the view [R][C] with row stride
C + 8 at the start of a buffer of R + 3 rows, all 0xFF bytes before the
launch. A case passes when OUT equals X bit for bit and every other byte of
the buffer (the 8 padding columns of each row and the 3 guard rows) is still
0xFF: TMA stores must clip the partial tiles at the tensor's edges.
"""

from __future__ import annotations

from gpu_common import Runner, bits, ceil_div, check_map, describe_mismatch, encode, \
    poison_bits, random_bits

import gen_kernels

PAD_COLS = 8
GUARD_ROWS = 3


def out_buffer(rows: int, cols: int, dtype: str):
    """(buffer, row stride): the poisoned buffer holding OUT [rows][cols]."""
    ld = cols + PAD_COLS
    return poison_bits((rows + GUARD_ROWS) * ld, dtype), ld


def check_out(buf, ld: int, x, rows: int, cols: int) -> tuple[bool, str]:
    import torch
    got = bits(buf).view(rows + GUARD_ROWS, ld)
    want = torch.full_like(got, -1)
    want[:rows, :cols] = bits(x)[:rows, :cols]
    if bool((got == want).all()):
        return True, ""
    inside = describe_mismatch(got[:rows, :cols], want[:rows, :cols])
    outside = int((got != want).sum()) - int((got[:rows, :cols] != want[:rows, :cols]).sum())
    return False, f"OUT: {inside}; {outside} elements written outside OUT"


def main() -> None:
    r = Runner("tma_store", __doc__.splitlines()[0])
    r.start()

    for name, dtype, swizzle in gen_kernels.roundtrip_kernels():
        w = 64 if swizzle == 0 else swizzle // 2
        for rows, cols in gen_kernels.roundtrip_sizes(w):
            def plan(dtype=dtype, swizzle=swizzle, w=w, rows=rows, cols=cols):
                check_map(dtype, [rows, cols], [cols * 2], [64, w], swizzle)
                check_map(dtype, [rows, cols], [(cols + PAD_COLS) * 2], [64, w], swizzle)

            def body(name=name, dtype=dtype, swizzle=swizzle, w=w, rows=rows, cols=cols):
                x = random_bits((rows, cols), dtype)
                buf, ld = out_buffer(rows, cols, dtype)
                xmap = encode(x, dtype, [rows, cols], [cols * 2], [64, w], swizzle)
                omap = encode(buf, dtype, [rows, cols], [ld * 2], [64, w], swizzle)
                grid = (ceil_div(rows, 64), ceil_div(cols, w))
                ms = r.launch(r.kernel(name), grid, (32,), [r.tensor_map(xmap), r.tensor_map(omap)])
                ok, why = check_out(buf, ld, x, rows, cols)
                return ok, (f"bit-exact {rows}x{cols} grid={grid} {ms:.3f} ms" if ok else why)

            r.run(f"{name}/R{rows}_C{cols}", body, plan)

    for name, dtype, swizzle, n in gen_kernels.fragment_kernels():
        w = swizzle // 2
        for rows in gen_kernels.FRAGMENT_ROWS:
            def plan(dtype=dtype, swizzle=swizzle, w=w, n=n, rows=rows):
                check_map(dtype, [rows, n], [(n + PAD_COLS) * 2], [64, w], swizzle)

            def body(name=name, dtype=dtype, swizzle=swizzle, w=w, n=n, rows=rows):
                tiles = ceil_div(rows, 64)
                x = random_bits((tiles * 64, n), dtype)  # whole tiles: the kernel reads them all
                buf, ld = out_buffer(rows, n, dtype)
                omap = encode(buf, dtype, [rows, n], [ld * 2], [64, w], swizzle)
                args = r.memref(x.view(-1)) + [r.tensor_map(omap)]
                ms = r.launch(r.kernel(name), (tiles,), (128,), args)
                ok, why = check_out(buf, ld, x, rows, n)
                return ok, (f"bit-exact {rows}x{n} ({tiles} tiles) {ms:.3f} ms" if ok else why)

            r.run(f"{name}/R{rows}", body, plan)
    r.finish()


if __name__ == "__main__":
    main()
