#!/usr/bin/env python3
"""Runs the GPU execution tests on kernels compiled earlier (no compiler needed).

    python3 test/Integration/GPU/run_prebuilt.py DIR [--markdown FILE] [--timeout 60]
        [--format cubin|ptx|both] [--only NAME ...] [--runner-timeout S]

DIR holds <test>.ptx and/or <test>.cubin per test (scripts/build-gpu-tests.sh
writes kernels-out/gpu-tests). Every runner in runners/ (one per test) runs
in its own subprocess with a timeout, so that a hang or a fault in one test
cannot take the others down; the runner's own per-launch watchdog normally
reports a hang long before. Prints a summary table (test, kernels, cases,
result, time), writes it as Markdown with --markdown, and exits non-zero if
any test failed, timed out, or had no kernels.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNNERS = HERE / "runners"
NOT_RUNNERS = {"gpu_common"}


def runners() -> list[str]:
    return sorted(p.stem for p in RUNNERS.glob("*.py") if p.stem not in NOT_RUNNERS)


def kernel_files(directory: Path, test: str, fmt: str) -> list[Path]:
    """The kernel images to run `test` on, by --format; cubin first."""
    wanted = {"cubin": ["cubin"], "ptx": ["ptx"], "both": ["cubin", "ptx"]}[fmt]
    return [directory / f"{test}.{ext}" for ext in wanted if (directory / f"{test}.{ext}").is_file()]


class Result:
    def __init__(self, test: str, image: str):
        self.test, self.image = test, image
        self.passed = self.failed = 0
        self.status = "FAIL"
        self.seconds = 0.0
        self.note = ""
        self.device = ""
        self.output = ""


def run_one(test: str, image: Path, timeout: float, launch_timeout: float) -> Result:
    res = Result(test, image.name)
    cmd = [sys.executable, str(RUNNERS / f"{test}.py"), str(image),
           "--timeout", str(launch_timeout)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout, env=env)
        res.output, rc = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or ""
        res.output = out.decode(errors="replace") if isinstance(out, bytes) else out
        rc = None
    res.seconds = time.monotonic() - start
    for line in res.output.splitlines():
        if line.startswith("PASS "):
            res.passed += 1
        elif line.startswith("FAIL "):
            res.failed += 1
        m = re.search(r", device (.+)$", line) if line.startswith("# ") else None
        if m:
            res.device = m.group(1)
    summary = any(line.startswith(f"ALL PASS {test} ") for line in res.output.splitlines())
    if rc is None:
        res.status, res.note = "TIMEOUT", f"killed after {timeout:g} s"
    elif rc == 0 and summary and res.failed == 0 and res.passed > 0:
        res.status = "PASS"
    else:
        res.status = "FAIL"
        res.note = {3: "hang (launch watchdog)", 2: "could not start"}.get(rc, f"exit code {rc}")
    return res


def table(results: list[Result]) -> list[list[str]]:
    rows = [["test", "kernels", "cases", "passed", "failed", "result", "time (s)", "note"]]
    for r in results:
        rows.append([r.test, r.image, str(r.passed + r.failed), str(r.passed), str(r.failed),
                     r.status, f"{r.seconds:.1f}", r.note])
    return rows


def print_table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for j, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if j == 0:
            print("  ".join("-" * w for w in widths))


def build_info(directory: Path) -> dict[str, str]:
    info = {}
    path = directory / "BUILD-INFO"
    if path.is_file():
        for line in path.read_text().splitlines():
            key, _, value = line.partition(": ")
            info[key] = value
    return info


def markdown(results: list[Result], rows: list[list[str]], directory: Path, ok: bool) -> str:
    info = build_info(directory)
    device = next((r.device for r in results if r.device), "unknown")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# kvpipe GPU execution tests (prebuilt kernels)",
        "",
        f"- date: {now}",
        f"- GPU: {device}",
        f"- kernels: `{directory}` built {info.get('date', '?')} from commit "
        f"{info.get('commit', '?')} (ptxas: {info.get('ptxas', '?')}, "
        f"wait-timeout: {info.get('wait-timeout', '?')})",
        f"- result: {'ALL PASS' if ok else 'FAILURES'}",
        "",
        "| " + " | ".join(rows[0]) + " |",
        "| " + " | ".join("---" for _ in rows[0]) + " |",
    ]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows[1:]]
    failing = [r for r in results if r.status != "PASS"]
    for r in failing:
        lines += ["", f"## {r.test} on {r.image}: {r.status} {r.note}", "", "```"]
        lines += r.output.splitlines()[-60:]
        lines += ["```"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="folder of <test>.ptx / <test>.cubin")
    parser.add_argument("--markdown", type=Path, help="write the summary table here as Markdown")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds one runner may take before it is killed (default 60)")
    parser.add_argument("--launch-timeout", type=float, default=20.0,
                        help="seconds one kernel launch may take inside a runner (default 20)")
    parser.add_argument("--format", choices=("cubin", "ptx", "both"), default="both",
                        help="run on the cubins, on the PTX (JIT by the driver), or both "
                             "(default)")
    parser.add_argument("--only", action="append", default=[],
                        help="run only this test (repeatable)")
    parser.add_argument("--log-dir", type=Path, help="also write each runner's full output here")
    args = parser.parse_args()

    tests = [t for t in runners() if not args.only or t in args.only]
    results: list[Result] = []
    for test in tests:
        images = kernel_files(args.directory, test, args.format)
        if not images:
            res = Result(test, "-")
            res.note = f"no {test}.cubin/.ptx in {args.directory}"
            results.append(res)
            print(f"== {test}: {res.note}", flush=True)
            continue
        for image in images:
            print(f"== {test} on {image}", flush=True)
            res = run_one(test, image, args.timeout, args.launch_timeout)
            for line in res.output.splitlines():
                print(f"   {line}")
            print(f"== {test} on {image.name}: {res.status} ({res.passed} passed, "
                  f"{res.failed} failed, {res.seconds:.1f} s) {res.note}", flush=True)
            if args.log_dir:
                args.log_dir.mkdir(parents=True, exist_ok=True)
                (args.log_dir / f"{test}.{image.suffix[1:]}.log").write_text(res.output)
            results.append(res)

    ok = bool(results) and all(r.status == "PASS" for r in results)
    rows = table(results)
    print()
    print_table(rows)
    print(f"\n{'ALL PASS' if ok else 'FAILURES'}: {sum(r.status == 'PASS' for r in results)} of "
          f"{len(results)} runs passed")
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown(results, rows, args.directory, ok))
        print(f"wrote {args.markdown}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
