#!/usr/bin/env python3
"""Generates the kernel grids of the GPU execution tests wgmma.mlir and tma_store.mlir.

The two files hold one kernel per case of a grid (dtype x N x K/swizzle x
form), which is too repetitive to write by hand; this script is their source.
Their header comments and RUN/CHECK lines are written here too.

    python3 test/Integration/GPU/gen_kernels.py          # rewrite both files
    python3 test/Integration/GPU/gen_kernels.py --check  # fail if they are stale

The runners (runners/wgmma.py, runners/tma_store.py) parse the kernel names
that this script emits; keep the two in step (`case_names()` here is what
they expect).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

DTYPES = ("bf16", "f16")
NS = (64, 128, 256)
# K and the swizzle (bytes) of the K-major tiles: one row of a 64xK tile is
# exactly one swizzle span (K * 2 bytes), so all three swizzles are covered.
KS = {16: 32, 32: 64, 64: 128}
FORMS = ("ss", "rs")
MAJORS = ("kmaj", "mnmaj")

WG = "#gpu.address_space<workgroup>"


def wgmma_kernels() -> list[tuple[str, str, str, int, int]]:
    """(name, form, major, dtype, N, K) of every wgmma kernel."""
    out = []
    for dt in DTYPES:
        for form in FORMS:
            for major in MAJORS:
                for k in KS:
                    for n in NS:
                        out.append((f"{form}_{major}_{dt}_n{n}_k{k}", form, major, dt, n, k))
    return out


def roundtrip_kernels() -> list[tuple[str, str, int]]:
    """(name, dtype, swizzle) of the TMA load -> TMA store kernels."""
    return [(f"roundtrip_{dt}_sw{s}", dt, s)
            for dt, s in (("f16", 0), ("bf16", 32), ("f16", 64), ("bf16", 128))]


def roundtrip_sizes(w: int) -> list[tuple[int, int]]:
    """(R, C) of the round-trip cases of a kernel whose box is 64 x w: one exact
    tile, exact multiples, partial tiles at both edges, a tensor smaller than
    one box, many partial tiles (C stays a multiple of 8: 16-byte rows)."""
    return [(64, w), (192, 3 * w), (200, 2 * w + 8), (1, 8), (1000, 5 * w + 24)]


# R of the fragment cases: exact, partial last tile, a single row, many tiles.
FRAGMENT_ROWS = (64, 200, 1, 1000)


def fragment_kernels() -> list[tuple[str, str, int, int]]:
    """(name, dtype, swizzle, N) of the store_fragment -> TMA store kernels."""
    return [(f"fragment_{dt}_sw{s}_n{n}", dt, s, n)
            for dt in DTYPES for s in (32, 64, 128) for n in (64, 128)]


# ---------------------------------------------------------------------------
# Helpers emitted into the gpu.module (func.func private: inlined by LLVM).


# The wgmma accumulator layout (also the RS A-fragment and store_fragment
# layout). Its source of truth is the compiler's
# include/kvpipe/Dialect/KVPipe/IR/AccumulatorLayout.h (AccumulatorLayout::
# threadRow, threadColumn, rowOffset, columnOffset); Python cannot call it,
# so it is restated here once and the helpers below read it from here only.
# Element i of thread t (warp w = t/32, lane l = t%32) is at
#   row    ACC_ROWS_PER_WARP*w + l/ACC_LANES_PER_ROW + acc_row_offset(i)
#   column ACC_COLUMNS_PER_LANE*(l%ACC_LANES_PER_ROW) + acc_column_offset(i)
ACC_ROWS_PER_WARP = 16
ACC_LANES_PER_ROW = 4
ACC_COLUMNS_PER_LANE = 2


def acc_row_offset(i: int) -> int:
    """AccumulatorLayout::rowOffset: the row half of element i, 0 or 8."""
    return 8 * ((i % 4) // 2)


def acc_column_offset(i: int) -> int:
    """AccumulatorLayout::columnOffset."""
    return 8 * (i // 4) + i % 2


def frag_offsets(elems: int, row_stride: int) -> list[int]:
    """Offset of fragment element i from the thread's base (row*stride + col),
    in the accumulator layout above."""
    return [acc_row_offset(i) * row_stride + acc_column_offset(i) for i in range(elems)]


def thread_base(lines: list[str], row_stride: str, row0: str | None = None) -> None:
    """Emits %base = (row0 + 16w + l/4) * stride + 2*(l%4) for the thread
    (the accumulator layout's thread base, see ACC_ROWS_PER_WARP)."""
    lines += [
        f"    %c2 = arith.constant {ACC_COLUMNS_PER_LANE} : index",
        f"    %c4 = arith.constant {ACC_LANES_PER_ROW} : index",
        f"    %c16 = arith.constant {ACC_ROWS_PER_WARP} : index",
        "    %c32 = arith.constant 32 : index",
        "    %c128 = arith.constant 128 : index",
        "    %tid = gpu.thread_id x",
        "    %t = arith.remui %tid, %c128 : index",
        "    %w = arith.divui %t, %c32 : index",
        "    %l = arith.remui %t, %c32 : index",
        "    %w16 = arith.muli %w, %c16 : index",
        "    %l4 = arith.divui %l, %c4 : index",
        "    %rowf = arith.addi %w16, %l4 : index",
    ]
    if row0 is not None:
        lines.append(f"    %row = arith.addi %rowf, {row0} : index")
    else:
        lines.append("    %row = arith.addi %rowf, %c0 : index")
    lines += [
        "    %lm = arith.remui %l, %c4 : index",
        "    %col = arith.muli %lm, %c2 : index",
        f"    %rs = arith.muli %row, {row_stride} : index",
        "    %base = arith.addi %rs, %col : index",
    ]


def store_c_helper(n: int) -> str:
    """func @store_c_n{n}(%d: vector<n/2 x f32>, %c: memref<?xf32>): C[64][n] row-major."""
    e = n // 2
    lines = [f"  func.func private @store_c_n{n}(%d: vector<{e}xf32>, %c: memref<?xf32>) {{",
             "    %c0 = arith.constant 0 : index",
             f"    %n = arith.constant {n} : index"]
    thread_base(lines, "%n")
    for i, off in enumerate(frag_offsets(e, n)):
        lines += [f"    %o{i} = arith.constant {off} : index",
                  f"    %i{i} = arith.addi %base, %o{i} : index",
                  f"    %e{i} = vector.extract %d[{i}] : f32 from vector<{e}xf32>",
                  f"    memref.store %e{i}, %c[%i{i}] : memref<?xf32>"]
    lines += ["    return", "  }"]
    return "\n".join(lines)


def load_frag_helper(dt: str, cols: int, with_row0: bool) -> str:
    """func @load_frag_{dt}_c{cols}: the thread's fragment of a 64 x cols tile
    of a row-major [?][cols] global tensor (starting at row %row0)."""
    e = cols // 2
    name = f"load_frag_{dt}_c{cols}"
    args = f"%x: memref<?x{dt}>" + (", %row0: index" if with_row0 else "")
    lines = [f"  func.func private @{name}({args}) -> vector<{e}x{dt}> {{",
             "    %c0 = arith.constant 0 : index",
             f"    %ncols = arith.constant {cols} : index"]
    thread_base(lines, "%ncols", "%row0" if with_row0 else None)
    lines.append(f"    %v0 = arith.constant dense<0.0> : vector<{e}x{dt}>")
    for i, off in enumerate(frag_offsets(e, cols)):
        lines += [f"    %o{i} = arith.constant {off} : index",
                  f"    %i{i} = arith.addi %base, %o{i} : index",
                  f"    %x{i} = memref.load %x[%i{i}] : memref<?x{dt}>",
                  f"    %v{i + 1} = vector.insert %x{i}, %v{i} [{i}] : {dt} into vector<{e}x{dt}>"]
    lines += [f"    return %v{e} : vector<{e}x{dt}>", "  }"]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# wgmma.mlir

WGMMA_HEADER = """\
// GENERATED by test/Integration/GPU/gen_kernels.py -- edit that, not this file.
//
// wgmma tile products (issue 3, GPU execution test b).
//
// What the kernels compute: C[64][N] = A[64][K] * B[K][N] in f32 with one
// kvpipe.warpgroup_mma (K/16 wgmma.mma_async m64nNk16 instructions), for
//   dtype bf16 and f16, N in {64, 128, 256},
//   K = 16 / 32 / 64 with the 32B / 64B / 128B swizzle (a K-major row of K
//     elements is exactly one swizzle span, so W = K),
//   form ss (A from shared memory, K-major, loaded by TMA) and rs (A from
//     registers: each thread loads its fragment of A from global memory into
//     vector<K/2 x T> in the accumulator layout),
//   B K-major (kmaj: B^T stored [N][K], one TMA box [N][K], tile
//     memref<N x K x T>) or MN-major (mnmaj: B stored [K][N], transpose_b,
//     N/K TMA boxes [K][K] into tile memref<N/K x K x K x T>).
// Kernel name: {ss|rs}_{kmaj|mnmaj}_{bf16|f16}_n{N}_k{K}. One warpgroup
// (block 128, grid 1). Thread 0 is the producer of a one-slot kvpipe pipeline
// (producer_acquire, tma_load on producer_mbar, producer_commit); every thread
// consumer_waits, issues the wgmma, warpgroup_waits, consumer_releases, and
// stores its f32 fragment to C with plain global stores (element i of thread
// t: row 16(t/32) + (t%32)/4 + 8((i%4)/2), column 8(i/4) + 2(t%4) + i%2).
//
// How it is checked: runners/wgmma.py fills A and B with fresh random values,
// poisons C with NaN, and compares C with torch.matmul in float32:
// ||C - ref|| / ||ref|| < 1e-2 and every element finite.
//
// Kernel ABI: ss: (C: memref<?xf32> = 5 params, A map, B map);
//             rs: (C: memref<?xf32>, A: memref<?xT> = 5 params each, B map).

// RUN: %python %S/gen_kernels.py --check
// The pipelines here have a consumer side only (the test fills the tiles),
// which the protocol checker cannot prove filled: it warns instead of failing.
// GPU-TEST-OPTIONS: strict-protocol=false
// RUN: kvpipe-opt %s --kvpipe-to-ptx="strict-protocol=false ptx-file=%t.ptx" -o %t.mlir
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}
// RUN: %python %S/runners/wgmma.py --dry-run | FileCheck %s --check-prefix=PLAN
// RUN: %if gpu %{ %python %S/runners/wgmma.py %t.ptx | FileCheck %s %}
"""


def wgmma_kernel(name: str, form: str, major: str, dt: str, n: int, k: int) -> str:
    s = KS[k]
    w = k  # swizzle span in elements
    e = n // 2
    amap = f"!kvpipe.tensor_map<box = [64, {k}], element_type = {dt}, swizzle = {s}>"
    atile = f"memref<64x{k}x{dt}, {WG}>"
    if major == "kmaj":
        bmap = f"!kvpipe.tensor_map<box = [{n}, {k}], element_type = {dt}, swizzle = {s}>"
        btile = f"memref<{n}x{k}x{dt}, {WG}>"
    else:
        bmap = f"!kvpipe.tensor_map<box = [{k}, {w}], element_type = {dt}, swizzle = {s}>"
        btile = f"memref<{n // w}x{k}x{w}x{dt}, {WG}>"
    pipe = "!kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 128>"
    params = ["%c: memref<?xf32>"]
    params.append(f"%amap: {amap}" if form == "ss" else f"%a: memref<?x{dt}>")
    params.append(f"%bmap: {bmap}")
    attribs = []
    if form == "ss":
        attribs.append(f"%sa : {atile} {{llvm.align = 1024 : i64}}")
    attribs.append(f"%sb : {btile} {{llvm.align = 1024 : i64}}")
    lines = [
        f"  gpu.func @{name}({', '.join(params)})",
        f"      workgroup({', '.join(attribs)})",
        "      kernel attributes {known_block_size = array<i32: 128, 1, 1>} {",
        "    %c0 = arith.constant 0 : index",
        "    %c1 = arith.constant 1 : index",
        "    %true = arith.constant true",
        f"    %p = kvpipe.create : {pipe}",
        f"    kvpipe.init %p : {pipe}",
        "    %tid = gpu.thread_id x",
        "    %t0 = arith.cmpi eq, %tid, %c0 : index",
        "    scf.if %t0 {",
        f"      kvpipe.producer_acquire %p : {pipe}",
        f"      %bar = kvpipe.producer_mbar %p : {pipe}",
    ]
    if form == "ss":
        lines.append(f"      kvpipe.tma_load %amap[%c0, %c0], %sa, %bar : {amap}, {atile}")
    if major == "kmaj":
        lines.append(f"      kvpipe.tma_load %bmap[%c0, %c0], %sb, %bar : {bmap}, {btile}")
    else:
        blk = f"memref<{k}x{w}x{dt}, strided<[{w}, 1], offset: ?>, {WG}>"
        lines += [
            f"      %nblk = arith.constant {n // w} : index",
            f"      %wcols = arith.constant {w} : index",
            "      scf.for %j = %c0 to %nblk step %c1 {",
            f"        %dst = memref.subview %sb[%j, 0, 0] [1, {k}, {w}] [1, 1, 1] : {btile} to {blk}",
            "        %col = arith.muli %j, %wcols : index",
            f"        kvpipe.tma_load %bmap[%c0, %col], %dst, %bar : {bmap}, {blk}",
            "      }",
        ]
    lines += [f"      kvpipe.producer_commit %p : {pipe}", "    }"]
    if form == "rs":
        lines.append(f"    %afrag = func.call @load_frag_{dt}_c{k}(%a) : "
                     f"(memref<?x{dt}>) -> vector<{k // 2}x{dt}>")
        aval, atype = "%afrag", f"vector<{k // 2}x{dt}>"
    else:
        aval, atype = "%sa", atile
    tb = ", transpose_b" if major == "mnmaj" else ""
    lines += [
        f"    kvpipe.consumer_wait %p : {pipe}",
        f"    %d = kvpipe.warpgroup_mma {aval}, %sb {{swizzle = {s}{tb}}} : {atype}, {btile} -> vector<{e}xf32>",
        f"    %d1 = kvpipe.warpgroup_wait %d {{pending = 0}} : vector<{e}xf32>",
        f"    %p1 = kvpipe.consumer_release %p, %true : {pipe}",
        f"    func.call @store_c_n{n}(%d1, %c) : (vector<{e}xf32>, memref<?xf32>) -> ()",
        "    gpu.return",
        "  }",
    ]
    return "\n".join(lines)


def wgmma_file() -> str:
    kernels = wgmma_kernels()
    out = [WGMMA_HEADER]
    # One CHECK per kernel, in launch order, then the summary.
    for name, *_ in kernels:
        out.append(f"// CHECK: PASS {name}")
    out.append(f"// CHECK: ALL PASS wgmma ({len(kernels)} cases)")
    out.append(f"// PLAN: DRY-RUN OK wgmma ({len(kernels)} cases)")
    out.append("")
    out.append("module attributes {gpu.container_module} {")
    out.append("gpu.module @wgmma {")
    for n in NS:
        out.append(store_c_helper(n))
        out.append("")
    for dt in DTYPES:
        for k in KS:
            out.append(load_frag_helper(dt, k, with_row0=False))
            out.append("")
    for kernel in kernels:
        out.append(wgmma_kernel(*kernel))
        out.append("")
    out.append("}")
    out.append("}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# tma_store.mlir

TMA_STORE_HEADER = """\
// GENERATED by test/Integration/GPU/gen_kernels.py -- edit that, not this file.
//
// TMA store round trips (issue 3, GPU execution test c).
//
// roundtrip_{dtype}_sw{S}: grid (ceil(R/64), ceil(C/W)), block 32. Thread 0
//   loads the 64xW box of X at (64*bid.x, W*bid.y) with kvpipe.tma_load (a
//   one-slot kvpipe pipeline: producer_acquire, producer_commit,
//   consumer_wait), then stores the same shared tile with kvpipe.tma_store
//   to the box of OUT at the same coordinates, cp.async.bulk.commit_group,
//   cp.async.bulk.wait_group 0, consumer_release. W = 64 for S = 0, else
//   S / 2 (one swizzle span). The load zero-fills out-of-bounds elements and
//   the store clips them, so tiles at the tensor's edge are partial.
// fragment_{dtype}_sw{S}_n{N}: grid (ceil(R/64)), block 128 (one warpgroup).
//   Each thread loads its fragment of the 64xN tile of X (rows 64*bid.x..)
//   from global memory in the accumulator layout (element i of thread t: row
//   16(t/32) + (t%32)/4 + 8((i%4)/2), column 8(i/4) + 2(t%4) + i%2), writes
//   it to the swizzled shared tile with kvpipe.store_fragment (tile
//   memref<N/W x 64 x W x T>), fence.proxy.async + CTA barrier, then thread 0
//   stores the N/W blocks with kvpipe.tma_store (box 64xW, swizzle S) and
//   waits for the bulk group. OUT = X holds only if the fragment layout and
//   store_fragment's swizzle agree with what TMA reads. The last row tile is
//   partial (R is not a multiple of 64): TMA clips its rows.
//
// How it is checked: runners/tma_store.py fills X with random 16-bit
// patterns; OUT is a view [R][C] with a padded row stride inside a larger
// buffer poisoned with 0xFF bytes. OUT must equal X bit for bit and every
// byte of the padding and of the guard rows after OUT must still be 0xFF.
//
// Kernel ABI: roundtrip: (X map, OUT map); fragment: (X: memref<?xT> = 5
// params, row-major [ceil(R/64)*64][N]; OUT map).

// RUN: %python %S/gen_kernels.py --check
// The pipelines here have a consumer side only (the test fills the tiles),
// which the protocol checker cannot prove filled: it warns instead of failing.
// GPU-TEST-OPTIONS: strict-protocol=false
// RUN: kvpipe-opt %s --kvpipe-to-ptx="strict-protocol=false ptx-file=%t.ptx" -o %t.mlir
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t.ptx -o %t.cubin %}
// RUN: %python %S/runners/tma_store.py --dry-run | FileCheck %s --check-prefix=PLAN
// RUN: %if gpu %{ %python %S/runners/tma_store.py %t.ptx | FileCheck %s %}
"""


def roundtrip_kernel(name: str, dt: str, s: int) -> str:
    w = 64 if s == 0 else s // 2
    tmap = f"!kvpipe.tensor_map<box = [64, {w}], element_type = {dt}, swizzle = {s}>"
    tile = f"memref<64x{w}x{dt}, {WG}>"
    pipe = "!kvpipe.pipeline<kv_stages = 1, qk_stages = 1, producers = 1, consumers = 1>"
    return "\n".join([
        f"  gpu.func @{name}(%xmap: {tmap}, %omap: {tmap})",
        f"      workgroup(%buf : {tile} {{llvm.align = 1024 : i64}})",
        "      kernel attributes {known_block_size = array<i32: 32, 1, 1>} {",
        "    %c0 = arith.constant 0 : index",
        "    %c64 = arith.constant 64 : index",
        f"    %cw = arith.constant {w} : index",
        "    %true = arith.constant true",
        f"    %p = kvpipe.create : {pipe}",
        f"    kvpipe.init %p : {pipe}",
        "    %tid = gpu.thread_id x",
        "    %bx = gpu.block_id x",
        "    %by = gpu.block_id y",
        "    %row = arith.muli %bx, %c64 : index",
        "    %col = arith.muli %by, %cw : index",
        "    %t0 = arith.cmpi eq, %tid, %c0 : index",
        "    scf.if %t0 {",
        f"      kvpipe.tma_prefetch_descriptor %xmap : {tmap}",
        f"      kvpipe.producer_acquire %p : {pipe}",
        f"      %bar = kvpipe.producer_mbar %p : {pipe}",
        f"      kvpipe.tma_load %xmap[%row, %col], %buf, %bar : {tmap}, {tile}",
        f"      kvpipe.producer_commit %p : {pipe}",
        f"      kvpipe.consumer_wait %p : {pipe}",
        "      // Both sides of the copy are the async proxy; the fence is",
        "      // cheap insurance, not a requirement.",
        "      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}",
        f"      kvpipe.tma_store %buf, %omap[%row, %col] : {tile}, {tmap}",
        "      nvvm.cp.async.bulk.commit.group",
        "      nvvm.cp.async.bulk.wait_group 0",
        f"      %p1 = kvpipe.consumer_release %p, %true : {pipe}",
        "    }",
        "    gpu.return",
        "  }",
    ])


def fragment_kernel(name: str, dt: str, s: int, n: int) -> str:
    w = s // 2
    nb = n // w
    tmap = f"!kvpipe.tensor_map<box = [64, {w}], element_type = {dt}, swizzle = {s}>"
    tile = f"memref<{nb}x64x{w}x{dt}, {WG}>"
    blk = f"memref<64x{w}x{dt}, strided<[{w}, 1], offset: ?>, {WG}>"
    return "\n".join([
        f"  gpu.func @{name}(%x: memref<?x{dt}>, %omap: {tmap})",
        f"      workgroup(%tile : {tile} {{llvm.align = 1024 : i64}})",
        "      kernel attributes {known_block_size = array<i32: 128, 1, 1>} {",
        "    %c0 = arith.constant 0 : index",
        "    %c1 = arith.constant 1 : index",
        "    %c64 = arith.constant 64 : index",
        f"    %cw = arith.constant {w} : index",
        f"    %nblk = arith.constant {nb} : index",
        "    %tid = gpu.thread_id x",
        "    %bx = gpu.block_id x",
        "    %row = arith.muli %bx, %c64 : index",
        f"    %frag = func.call @load_frag_{dt}_c{n}(%x, %row) : (memref<?x{dt}>, index) -> vector<{n // 2}x{dt}>",
        f"    kvpipe.store_fragment %frag, %tile {{swizzle = {s}}} : vector<{n // 2}x{dt}>, {tile}",
        "    // Every writer makes its st.shared visible to the async proxy, then",
        "    // the CTA barrier orders them before the TMA store.",
        "    nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}",
        "    gpu.barrier",
        "    %t0 = arith.cmpi eq, %tid, %c0 : index",
        "    scf.if %t0 {",
        "      scf.for %j = %c0 to %nblk step %c1 {",
        f"        %src = memref.subview %tile[%j, 0, 0] [1, 64, {w}] [1, 1, 1] : {tile} to {blk}",
        "        %col = arith.muli %j, %cw : index",
        f"        kvpipe.tma_store %src, %omap[%row, %col] : {blk}, {tmap}",
        "      }",
        "      nvvm.cp.async.bulk.commit.group",
        "      nvvm.cp.async.bulk.wait_group 0",
        "    }",
        "    gpu.return",
        "  }",
    ])


def tma_store_file() -> str:
    out = [TMA_STORE_HEADER]
    for name, *_ in roundtrip_kernels():
        out.append(f"// CHECK: PASS {name}/")
    for name, *_ in fragment_kernels():
        out.append(f"// CHECK: PASS {name}/")
    n = (sum(len(roundtrip_sizes(64 if s == 0 else s // 2)) for _, _, s in roundtrip_kernels())
         + len(FRAGMENT_ROWS) * len(fragment_kernels()))
    out.append(f"// CHECK: ALL PASS tma_store ({n} cases)")
    out.append(f"// PLAN: DRY-RUN OK tma_store ({n} cases)")
    out.append("")
    out.append("module attributes {gpu.container_module} {")
    out.append("gpu.module @tma_store {")
    for dt in DTYPES:
        for n in (64, 128):
            out.append(load_frag_helper(dt, n, with_row0=True))
            out.append("")
    for kernel in roundtrip_kernels():
        out.append(roundtrip_kernel(*kernel))
        out.append("")
    for kernel in fragment_kernels():
        out.append(fragment_kernel(*kernel))
        out.append("")
    out.append("}")
    out.append("}")
    return "\n".join(out) + "\n"


FILES = {"wgmma.mlir": wgmma_file, "tma_store.mlir": tma_store_file}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a generated file differs from what this script writes")
    args = parser.parse_args()
    stale = []
    for name, make in FILES.items():
        path = HERE / name
        text = make()
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"stale generated files (run {Path(__file__).name}): {', '.join(stale)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
