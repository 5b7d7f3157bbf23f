#!/usr/bin/env python3
"""Runner of ring.mlir: tiles streamed through a kvpipe ring, copied back, compared bit for bit.

    python3 ring.py KERNELS.{ptx,cubin} [--case TEXT] [--timeout S] [--seed N]
    python3 ring.py --dry-run

Each case launches G CTAs of 256 threads; CTA b copies tiles [b*T, (b+1)*T) of
X[64*TR][64*TC] (64x64 tiles numbered row-major) into OUT through the ring.
X holds random finite 16-bit patterns; OUT starts as 0xFF bytes and must end
equal to X bit for bit (which also proves every element was written).
"""

from __future__ import annotations

from gpu_common import Runner, ceil_div, check_map, describe_mismatch, encode, poison_bits, \
    random_bits, bits  # noqa: F401

# kernel -> (dtype, TMA box [rows, cols], swizzle bytes)
KERNELS = {
    "ring_kv3_f16_sw0": ("f16", (64, 64), 0),
    "ring_kv2_bf16_sw128": ("bf16", (64, 64), 128),
    "ring_kv4_f16_sw64": ("f16", (64, 32), 64),
    "ring_kv2_qk2_bf16_sw128": ("bf16", (32, 64), 128),
}

# (G CTAs, T tiles per CTA): single tiles, fewer and more tiles than slots,
# long runs (hundreds of phase flips), and many CTAs at once.
SIZES = [(1, 1), (1, 2), (1, 3), (1, 4), (1, 5), (1, 8), (1, 255), (1, 257), (1, 300),
         (4, 64), (24, 100), (132, 37)]


def tile_cols(total: int) -> int:
    """Tiles per row of X: the largest of 8, 4, 2, 1 dividing the tile count."""
    return next(tc for tc in (8, 4, 2, 1) if total % tc == 0)


def main() -> None:
    r = Runner("ring", __doc__.splitlines()[0])
    r.start()
    for name, (dtype, box, swizzle) in KERNELS.items():
        for g, t in SIZES:
            total = g * t
            tc = tile_cols(total)
            rows, cols = 64 * (total // tc), 64 * tc

            def plan(dtype=dtype, box=box, swizzle=swizzle, rows=rows, cols=cols):
                check_map(dtype, [rows, cols], [cols * 2], box, swizzle)

            def body(name=name, dtype=dtype, box=box, swizzle=swizzle, g=g, t=t, tc=tc,
                     rows=rows, cols=cols):
                x = random_bits((rows, cols), dtype)
                out = poison_bits(rows * cols, dtype)
                xmap = encode(x, dtype, [rows, cols], [cols * 2], box, swizzle)
                args = r.memref(out) + [r.tensor_map(xmap), r.i64(t), r.i64(tc), r.i64(cols)]
                ms = r.launch(r.kernel(name), (g,), (256,), args)
                got, want = bits(out).view(rows, cols), bits(x)
                if not bool((got == want).all()):
                    return False, describe_mismatch(got, want)
                nbytes = rows * cols * 2
                return True, (f"bit-exact {rows}x{cols} ({total} tiles, TC={tc}) "
                              f"{ms:.3f} ms {2 * nbytes / ms / 1e6:.1f} GB/s")

            r.run(f"{name}/G{g}_T{t}", body, plan)
    r.finish()


if __name__ == "__main__":
    main()
