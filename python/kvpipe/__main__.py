"""The kvpipe command line: ``python -m kvpipe {compile,check,bench}``."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from typing import Any, List, Optional


def _header(title: str) -> str:
    commit = os.environ.get("KVPIPE_COMMIT")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, cwd=os.path.dirname(__file__)).stdout.strip()
        except OSError:
            commit = ""
    gpu = "no GPU"
    try:
        import torch

        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name()
    except ImportError:
        pass
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"## {title}\n\nDate: {date}. Commit: {commit or 'unknown'}. GPU: {gpu}.\n\n"


def _write(args: Any, title: str, rows: List[Any], markdown: str) -> None:
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(_header(title) + markdown + "\n")


def _tuning(values: Optional[List[str]]) -> dict:
    tuning = {}
    for item in values or []:
        name, _, value = item.partition("=")
        tuning[name] = {"true": True, "false": False}.get(value.lower(), None)
        if tuning[name] is None:
            tuning[name] = int(value)
    return tuning


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="kvpipe", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    comp = sub.add_parser("compile", help="compile attention kernels into the kernel cache")
    comp.add_argument("--head-dim", type=int, nargs="+", default=[64, 128])
    comp.add_argument("--dtype", nargs="+", default=["bf16", "f16"])
    comp.add_argument("--causal", choices=["yes", "no", "both"], default="both")
    comp.add_argument("--tune", nargs="*", metavar="NAME=VALUE",
                      help="tuning attributes, e.g. block_n=128 kv_stages=3")
    for p in (comp,) + tuple(sub.add_parser(n, help=h) for n, h in (
            ("check", "verify the kernels against torch on the GPU"),
            ("bench", "benchmark against torch SDPA's cuDNN and flash backends"))):
        p.add_argument("--json", help="write the table as JSON")
        p.add_argument("--markdown", help="append the table as Markdown to this file")
    sub.choices["check"].add_argument("--tune", nargs="*", metavar="NAME=VALUE",
                                      help="check kernels with these tuning attributes")
    sub.choices["check"].add_argument(
        "--random", type=int, metavar="N", default=0,
        help="check N random configurations instead of the grid")
    sub.choices["check"].add_argument("--seed", type=int, default=0,
                                      help="seed of the random configurations")
    bench = sub.choices["bench"]
    bench.add_argument("--head-dim", type=int, nargs="+", default=[64, 128])
    bench.add_argument("--seq-len", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    bench.add_argument("--tune", nargs="*", metavar="NAME=VALUE")
    bench.add_argument("--variant", action="append", metavar="NAME=VALUE[,NAME=VALUE]",
                       help="also measure this tuning (repeatable), in the same process")
    bench.add_argument("--causal", choices=["yes", "no", "both"], default="both")
    args = parser.parse_args(argv)

    if args.command == "compile":
        from kvpipe.kernels import compile_attention

        causals = {"yes": [True], "no": [False], "both": [False, True]}[args.causal]
        rows = []
        for d in args.head_dim:
            for dtype in args.dtype:
                for causal in causals:
                    k = compile_attention(d, dtype, causal, **_tuning(args.tune))
                    rows.append({"kernel": k.name, "compile_s": k.compile_seconds,
                                 "cubin": k.cubin is not None,
                                 "shared_memory": k.abi["dynamic_shared_memory"]})
                    print(f"{k.name}: {'cubin+' if k.cubin else ''}PTX, "
                          f"{k.abi['threads']} threads, {k.abi['dynamic_shared_memory']} B shared, "
                          f"compiled in {k.compile_seconds} s")
        markdown = "| kernel | compile s | cubin |\n| --- | --- | --- |\n" + "".join(
            f"| {r['kernel']} | {r['compile_s']} | {r['cubin']} |\n" for r in rows)
        _write(args, "kvpipe compile", rows, markdown)
        return 0
    if args.command == "check":
        from kvpipe import check

        tuning = _tuning(args.tune)
        cases = check.random_grid(args.random, args.seed) if args.random else None
        rows = check.run(cases, tuning=tuning)
        if not tuning and not args.random:
            rows += check.run_torch_integration()
        markdown = check.to_markdown(rows)
        print(markdown)
        _write(args, "kvpipe check", rows, markdown)
        return 0 if all(r["ok"] for r in rows) else 1
    from kvpipe import bench as bench_mod

    variants = [_tuning(v.split(",")) for v in args.variant or []]
    causals = {"yes": [True], "no": [False], "both": [False, True]}[args.causal]
    rows = bench_mod.run(args.head_dim, args.seq_len, causals, variants=variants,
                         **_tuning(args.tune))
    markdown = bench_mod.to_markdown(rows)
    print(markdown)
    _write(args, "kvpipe bench", rows, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
