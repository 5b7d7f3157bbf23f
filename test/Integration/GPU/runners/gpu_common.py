"""Shared machinery of the GPU execution test runners (test/Integration/GPU/runners).

A runner takes the path of a test's compiled kernels (PTX text or a cubin; the
first bytes tell which), loads them with the project's runtime
(``kvpipe.cuda``), runs its cases and prints one line per case::

    PASS <case> <metric>
    FAIL <case> <why>

then ``ALL PASS <test> (<n> cases)`` or ``FAILED <test>: <k> of <n> cases``,
and exits 0 only if every case passed (1 on a failed case, 2 when the runner
could not start, 3 when a kernel hung). Lines starting with ``#`` are
information (kernels, seed, device).

Safety: every launch is followed by a bounded wait (``--timeout`` seconds,
polling a CUDA event), so a kernel that hangs (a pipeline phase mismatch, a
lost TMA transaction) fails its case loudly and ends the process instead of
freezing it; a fault (illegal address, trap) breaks the CUDA context, so the
runner reports it and stops, since later cases could not run anyway.

``--dry-run`` needs neither a GPU nor torch: it checks every case's TMA
descriptor arguments with ``kvpipe.tma.tiled_args`` and prints ``PLAN-OK
<case>`` lines and ``DRY-RUN OK <test> (<n> cases)``, so that a bad box or
stride is found before device time is spent (the lit tests run it).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parents[3]  # test/Integration/GPU/runners -> repository root
for _p in (_REPO / "python", _HERE.parent):  # kvpipe; gen_kernels.py
    if _p.is_dir() and str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from kvpipe import tma  # noqa: E402  (pure Python; cuda-bindings is imported on use)

EXIT_FAILED = 1
EXIT_SETUP = 2
EXIT_HANG = 3

# 16-bit element types: exponent mask and its lowest bit (to keep random bit
# patterns finite: TMA and ld/st move bits, but a NaN could be canonicalised
# by a conversion that the test does not mean to test).
_EXPONENT = {"f16": (0x7C00, 0x0400), "bf16": (0x7F80, 0x0080)}


def torch_dtype(name: str) -> Any:
    import torch
    return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[name]


def random_bits(shape: Sequence[int], dtype: str) -> Any:
    """A CUDA tensor of ``dtype`` ("f16"/"bf16") holding random finite bit patterns
    (every sign, exponent and mantissa, subnormals and zeros included; no
    Inf/NaN)."""
    import torch
    x = torch.randint(-32768, 32768, tuple(shape), dtype=torch.int32, device="cuda")
    x = x.to(torch.int16)
    mask, low = _EXPONENT[dtype]
    special = (x & mask) == mask
    x = torch.where(special, x ^ low, x)
    return x.view(torch_dtype(dtype))


def poison_bits(numel: int, dtype: str) -> Any:
    """A flat CUDA tensor of ``numel`` elements of ``dtype`` whose bytes are all 0xFF."""
    import torch
    return torch.full((numel,), -1, dtype=torch.int16, device="cuda").view(torch_dtype(dtype))


def bits(t: Any) -> Any:
    """The raw 16-bit patterns of a 2-byte tensor, for bit-exact comparison."""
    import torch
    return t.view(torch.int16)


class Runner:
    """Parses the command line, loads the kernels, runs cases, reports."""

    def __init__(self, test: str, description: str):
        parser = argparse.ArgumentParser(description=description)
        parser.add_argument("kernels", nargs="?",
                            help="the test's compiled kernels: a .ptx file or a .cubin")
        parser.add_argument("--case", action="append", default=[],
                            help="run only the cases whose name contains this text (repeatable)")
        parser.add_argument("--timeout", type=float, default=20.0,
                            help="seconds one launch may take before the runner declares a hang "
                                 "(default 20)")
        parser.add_argument("--seed", type=int, default=None,
                            help="random seed (default: a fresh one, printed)")
        parser.add_argument("--dry-run", action="store_true",
                            help="check every case's plan and TMA descriptor arguments without "
                                 "a GPU")
        parser.add_argument("--list", action="store_true", help="list the cases and exit")
        self.args = parser.parse_args()
        self.test = test
        self.passed = 0
        self.failed = 0
        self.module = None
        self.current: Optional[str] = None
        self.dry_run = self.args.dry_run
        if not (self.dry_run or self.args.list) and not self.args.kernels:
            parser.error("the kernels path is required (or --dry-run / --list)")

    # -- setup -------------------------------------------------------------

    def start(self) -> None:
        """Initialises CUDA and loads the kernels (not in dry-run mode)."""
        if self.dry_run or self.args.list:
            return
        path = Path(self.args.kernels)
        try:
            import torch
            if not torch.cuda.is_available():
                raise RuntimeError("torch sees no CUDA device")
            torch.cuda.init()
            torch.zeros(1, device="cuda")  # torch's primary context, current on this thread
            from kvpipe import cuda as kcuda
            self.kcuda = kcuda
            image = path.read_bytes()
            self.module = kcuda.Module(image, name=path.name)
        except Exception as exc:  # noqa: BLE001 -- report anything that stops the start
            print(f"FAIL {self.test}/setup {type(exc).__name__}: {exc}", flush=True)
            print(f"FAILED {self.test}: could not start", flush=True)
            sys.exit(EXIT_SETUP)
        seed = self.args.seed if self.args.seed is not None else int.from_bytes(os.urandom(4), "little")
        torch.manual_seed(seed)
        kind = "cubin" if image[:4] in (b"\x7fELF", b"\x50\xed\x55\xba") else "ptx"
        print(f"# {self.test}: kernels {path} ({kind}), seed {seed}, "
              f"device {torch.cuda.get_device_name()}", flush=True)
        if self.module.info_log:
            print("# JIT log: " + self.module.info_log.replace("\n", "\n# "), flush=True)

    def kernel(self, name: str) -> Any:
        return self.module.function(name)

    # -- cases -------------------------------------------------------------

    def selected(self, case: str) -> bool:
        return not self.args.case or any(c in case for c in self.args.case)

    def run(self, case: str, body: Callable[[], tuple[bool, str]],
            plan: Callable[[], None] = lambda: None) -> None:
        """Runs one case: ``body()`` returns (passed, metric or reason).

        In dry-run mode only ``plan()`` runs (descriptor arguments, shapes).
        """
        if not self.selected(case):
            return
        self.current = case
        if self.args.list:
            print(case)
            return
        try:
            if self.dry_run:
                plan()
                ok, text = True, "(descriptor arguments valid)"
            else:
                ok, text = body()
        except Exception as exc:  # noqa: BLE001 -- every error fails the case
            ok, text = False, f"{type(exc).__name__}: {exc}".replace("\n", " | ")
            self._report(case, ok, text)
            if not self.dry_run and self._context_broken():
                print(f"# the CUDA context is broken after {case}: stopping", flush=True)
                self.finish()
            return
        self._report(case, ok, text)

    def _report(self, case: str, ok: bool, text: str) -> None:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        word = ("PLAN-OK" if ok else "PLAN-FAIL") if self.dry_run else ("PASS" if ok else "FAIL")
        print(f"{word} {case} {text}", flush=True)

    def _context_broken(self) -> bool:
        try:
            import torch
            torch.cuda.synchronize()
            torch.zeros(1, device="cuda").add_(1).item()
            return False
        except Exception:  # noqa: BLE001
            return True

    def finish(self) -> None:
        if self.args.list:
            sys.exit(0)
        total = self.passed + self.failed
        if total == 0:
            print(f"FAILED {self.test}: no case ran (filter {self.args.case!r})", flush=True)
            sys.exit(EXIT_FAILED)
        if self.failed:
            what = "plans of " if self.dry_run else ""
            print(f"FAILED {self.test}: {what}{self.failed} of {total} cases", flush=True)
            sys.exit(EXIT_FAILED)
        if self.dry_run:
            print(f"DRY-RUN OK {self.test} ({total} cases)", flush=True)
        else:
            print(f"ALL PASS {self.test} ({total} cases)", flush=True)
        sys.exit(0)

    # -- launching ---------------------------------------------------------

    def launch(self, kernel: Any, grid: Any, block: Any, args: Sequence[Any],
               shared_mem: int = 0) -> float:
        """Launches and waits at most ``--timeout`` seconds; returns milliseconds.

        A kernel still running at the deadline is a hang: report it and end
        the process (the driver tears the context and its kernel down).
        """
        import torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        kernel.launch(grid, block, args, shared_mem=shared_mem)
        end.record()
        deadline = time.monotonic() + self.args.timeout
        while not end.query():
            if time.monotonic() > deadline:
                self._report(self.current or "?", False,
                             f"HANG: kernel {kernel.name} grid={grid} block={block} still running "
                             f"after {self.args.timeout:g} s")
                print(f"FAILED {self.test}: hang in {self.current}", flush=True)
                sys.stdout.flush()
                os._exit(EXIT_HANG)
            time.sleep(0.0002)
        torch.cuda.synchronize()  # raises a fault the kernel hit
        return start.elapsed_time(end)

    # -- kernel arguments --------------------------------------------------

    def memref(self, t: Any) -> list:
        """The 5 parameters of a memref<?xT> argument: allocated and aligned
        pointers, offset 0, size, stride 1 (t must be contiguous)."""
        k = self.kcuda
        assert t.is_contiguous()
        return [k.PtrArg(t.data_ptr()), k.PtrArg(t.data_ptr()), k.I64Arg(0),
                k.I64Arg(t.numel()), k.I64Arg(1)]

    def tensor_map(self, desc: bytes) -> Any:
        return self.kcuda.TensorMapArg(desc)

    def i64(self, v: int) -> Any:
        return self.kcuda.I64Arg(v)


def check_map(dtype: str, dims: Sequence[int], strides: Sequence[int],
              box: Sequence[int], swizzle: int) -> None:
    """Dry-run check of a descriptor's arguments (a 1024-byte aligned fake address)."""
    tma.tiled_args(1 << 20, dtype, dims, strides, box, swizzle)


def encode(t: Any, dtype: str, dims: Sequence[int], strides: Sequence[int],
           box: Sequence[int], swizzle: int) -> bytes:
    """``kvpipe.tma.encode_tiled`` over the tensor ``t``'s storage (OOB fill: zero)."""
    return tma.encode_tiled(t.data_ptr(), dtype, dims, strides, box, swizzle)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def describe_mismatch(got: Any, want: Any, limit: int = 3) -> str:
    """'k of n differ, first at (i, j): got 0x.., want 0x..' for 2-D int tensors."""
    import torch
    diff = (got != want)
    k = int(diff.sum().item())
    if k == 0:
        return "0 differ"
    idx = torch.nonzero(diff)[:limit].tolist()
    parts = [f"{tuple(i)}: got {int(got[tuple(i)]) & 0xFFFF:#06x} want "
             f"{int(want[tuple(i)]) & 0xFFFF:#06x}" for i in idx]
    return f"{k} of {diff.numel()} differ, first " + "; ".join(parts)
