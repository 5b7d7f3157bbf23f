#!/usr/bin/env python3
"""Runner of wgmma.mlir: C[64][N] = A[64][K] * B per kernel, against torch.matmul in float32.

    python3 wgmma.py KERNELS.{ptx,cubin} [--case TEXT] [--timeout S] [--seed N]
    python3 wgmma.py --dry-run

The kernel list comes from gen_kernels.py (the generator of wgmma.mlir).
A and B hold fresh standard-normal values rounded to the kernel's dtype; C
starts as NaN. A case passes when every element of C is finite and
||C - ref|| / ||ref|| < 1e-2 with ref = A.float() @ B.float(); with exact
products in f32 the error is about 1e-7, while a wrong descriptor or
fragment layout gives errors near 1.
"""

from __future__ import annotations

from gpu_common import Runner, check_map, encode, torch_dtype

import gen_kernels

REL_TOL = 1e-2


def main() -> None:
    r = Runner("wgmma", __doc__.splitlines()[0])
    r.start()
    for name, form, major, dtype, n, k in gen_kernels.wgmma_kernels():
        swizzle = gen_kernels.KS[k]
        w = k  # swizzle span in elements: the B box of the MN-major layout is [K][W]

        def maps():
            """(name, dims, strides, box) of the descriptors this case encodes."""
            out = []
            if form == "ss":
                out.append(("a", [64, k], [k * 2], [64, k]))
            if major == "kmaj":
                out.append(("b", [n, k], [k * 2], [n, k]))  # B^T stored [N][K]
            else:
                out.append(("b", [k, n], [n * 2], [k, w]))  # B stored [K][N]
            return out

        def plan(dtype=dtype, swizzle=swizzle, maps=maps):
            for _, dims, strides, box in maps():
                check_map(dtype, dims, strides, box, swizzle)

        def body(name=name, form=form, major=major, dtype=dtype, n=n, k=k, swizzle=swizzle,
                 maps=maps):
            import torch
            dt = torch_dtype(dtype)
            a = torch.randn(64, k, device="cuda").to(dt).contiguous()
            if major == "kmaj":
                bt = torch.randn(n, k, device="cuda").to(dt).contiguous()  # [N][K]
                b_store, b_mat = bt, bt.t()
            else:
                b = torch.randn(k, n, device="cuda").to(dt).contiguous()  # [K][N]
                b_store, b_mat = b, b
            ref = a.float() @ b_mat.float()
            c = torch.full((64 * n,), float("nan"), dtype=torch.float32, device="cuda")
            args = r.memref(c)
            for which, dims, strides, box in maps():
                src = a if which == "a" else b_store
                desc = encode(src, dtype, dims, strides, box, swizzle)
                if which == "b" and form == "rs":
                    args += r.memref(a)
                args.append(r.tensor_map(desc))
            ms = r.launch(r.kernel(name), (1,), (128,), args)
            c = c.view(64, n)
            finite = bool(torch.isfinite(c).all())
            rel = float((c - ref).norm() / ref.norm())
            max_abs = float((c - ref).abs().nan_to_num(float("inf")).max())
            metric = f"rel_err={rel:.2e} max_abs={max_abs:.2e} ({ms:.3f} ms)"
            if not finite:
                bad = int((~torch.isfinite(c)).sum())
                return False, f"{bad} of {c.numel()} elements not finite (unwritten?) {metric}"
            if not rel < REL_TOL:
                return False, f"{metric} >= {REL_TOL:g}"
            return True, metric

        r.run(name, body, plan)
    r.finish()


if __name__ == "__main__":
    main()
