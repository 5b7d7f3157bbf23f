"""The kvpipe command line: python -m kvpipe {compile,check,bench,cache}.

Errors are reported on one line (``kvpipe: error: ...``) with exit status 1;
``KVPIPE_LOG=1`` logs the compiler, cache and launch decisions to stderr.
"""

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


class UsageError(Exception):
    """A command-line argument that cannot be used; reported on one line."""


def _mods_bench_head_dims(args: argparse.Namespace) -> List[int]:
    """The head dims of bench --mods (and of its kernels in compile
    --for-check --mods): 128 (issue 15's rows) unless --head-dim names
    others."""
    from kvpipe import kernels

    return [128] if args.head_dim == list(kernels.HEAD_DIMS) else list(args.head_dim)


def _tuning(values: Optional[List[str]]) -> dict:
    tuning = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--tune/--variant takes NAME=VALUE, got {item!r}")
        parsed = {"true": True, "false": False}.get(value.lower())
        if parsed is None:
            try:
                parsed = int(value)
            except ValueError:
                raise UsageError(f"tuning attribute {name}: expected an integer, true or "
                                 f"false, got {value!r}") from None
        tuning[name] = parsed
    return tuning


_DESCRIPTION = """Compile, verify and benchmark kvpipe's attention kernels.

  compile   compile kernels into the kernel cache (no GPU needed)
  check     verify the kernels against torch on a GPU
  bench     benchmark against torch SDPA's cuDNN and flash backends on a GPU
  cache     list or clear the kernel cache

Environment: KVPIPE_OPT or KVPIPE_CAPI_LIB (the compiler), KVPIPE_COMPILER
(opt or capi), KVPIPE_CACHE_DIR (default ~/.cache/kvpipe), KVPIPE_LOG=1 (log
decisions to stderr).
"""


def _require_gpu(command: str) -> None:
    """One-line errors for what check and bench need: torch, a GPU, cuda-bindings."""
    try:
        import torch
    except ImportError:
        raise UsageError(f"'kvpipe {command}' needs torch with a CUDA GPU: torch is not "
                         "installed") from None
    if not torch.cuda.is_available():
        raise UsageError(f"'kvpipe {command}' needs a CUDA GPU: torch sees none")
    try:
        import cuda.bindings  # noqa: F401
    except ImportError:
        raise UsageError(f"'kvpipe {command}' needs cuda-bindings: it is not installed") \
            from None


def _version() -> str:
    from kvpipe import __version__, compiler

    try:
        found = compiler.get_compiler(required=False)
    except (compiler.CompilerNotFoundError, ValueError) as exc:
        return f"kvpipe {__version__}\ncompiler: {exc}"
    if found is None:
        return f"kvpipe {__version__}\ncompiler: none found (kernels only from the cache)"
    try:
        release = found.release()
    except (compiler.CompilerError, OSError) as exc:
        release = f"unusable: {exc}"
    return f"kvpipe {__version__}\ncompiler: {found.path} ({found.kind}, release {release})"


class _VersionAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        print(_version())
        parser.exit()


def _cache_command(args: Any) -> int:
    from kvpipe import kernels

    if args.action == "clear":
        print(f"removed {kernels.clear_cache()} entries from {kernels.cache_dir()}")
        return 0
    entries = kernels.cache_entries()
    print(f"{kernels.cache_dir()}: {len(entries)} entries")
    for e in entries:
        print(f"  {e['name'] or '(unreadable) ' + e['path']}  {e['bytes'] // 1024} KiB  "
              f"compiler {e['compiler_version']}{'  (refused)' if e['refused'] else ''}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("kvpipe: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 -- the CLI's one-line report
        from kvpipe import compiler, kernels

        if not isinstance(exc, (UsageError, compiler.CompilerError,
                                compiler.CompilerNotFoundError,
                                kernels.KernelNotAvailableError, ValueError, TypeError,
                                OSError)):
            raise
        message = str(exc).strip().splitlines()
        text = message[0] if message else type(exc).__name__
        if isinstance(exc, compiler.CompilerError) and len(message) > 1:
            text += f" (and {len(message) - 1} more lines: KVPIPE_LOG=1 or the Python API show them)"
        print(f"kvpipe: error: {text}", file=sys.stderr)
        return 1


def _main(argv: Optional[List[str]]) -> int:
    from kvpipe import kernels

    parser = argparse.ArgumentParser(prog="kvpipe", description=_DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="print the version and the compiler found, then exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    comp = sub.add_parser("compile", help="compile attention kernels into the kernel cache")
    comp.add_argument("--head-dim", type=int, nargs="+", default=list(kernels.HEAD_DIMS),
                      choices=kernels.HEAD_DIMS, metavar="D",
                      help=f"Q/K head dims (choices: {', '.join(map(str, kernels.HEAD_DIMS))}); "
                           "192 also compiles V head dim 128")
    comp.add_argument("--dtype", nargs="+", default=list(kernels.DTYPES),
                      choices=kernels.DTYPES)
    comp.add_argument("--causal", choices=["yes", "no", "both"], default="both")
    comp.add_argument("--tune", nargs="*", metavar="NAME=VALUE",
                      help="tuning attributes, e.g. block_n=128 kv_stages=3")
    comp.add_argument("--for-check", action="store_true",
                      help="compile exactly the kernels `check` launches (its grid, the mask "
                           "and KV-cache cases), for a GPU machine without the compiler")
    comp.add_argument("--on-plan", action="store_true",
                      help="with --for-check --tune: the tuning added to the prefill plan's "
                           "kernels instead of replacing them (the kernels of `check --tune "
                           "... --on-plan`)")
    comp.add_argument("--random", type=int, metavar="N", default=0,
                      help="with --for-check: the kernels of `check --random N --seed S`")
    comp.add_argument("--seed", type=int, default=0, help="with --random: the seed")
    comp.add_argument("--masks", action="store_true",
                      help="also the serving masks' kernels: bottom-right alignment, sliding "
                           "windows, per-batch KV lengths (what check's mask and KV-cache "
                           "cases launch)")
    comp.add_argument("--mods", action="store_true",
                      help="with --for-check: also the kernels of `check --mods` and "
                           "`bench --mods` (score/mask modifiers)")
    comp.add_argument("--backward", action="store_true",
                      help="compile the backward kernels (docs/backward.md); with "
                           "--for-check --mods: also those of `check --mods --backward`")
    comp.add_argument("--decode", action="store_true",
                      help="with --for-check: the decode kernels (split-KV, pack-GQA) of "
                           "`check --decode` and `bench --decode`, chosen for the H200's 132 "
                           "SMs")
    comp.add_argument("--paged", action="store_true",
                      help="with --for-check: only the paged-cache kernels that `check "
                           "--paged` and `bench --paged` launch (page sizes 16-256)")
    comp.add_argument("--varlen", action="store_true",
                      help="with --for-check: the varlen kernels `check --varlen` and "
                           "`bench --varlen` launch (packed sequences, cu_seqlens)")
    comp.add_argument("--models", action="store_true",
                      help="with --for-check: the kernels `check --models` launches")
    for p in (comp,) + tuple(sub.add_parser(n, help=h) for n, h in (
            ("check", "verify the kernels against torch on the GPU"),
            ("bench", "benchmark against torch SDPA's cuDNN and flash backends"))):
        p.add_argument("--json", help="write the table as JSON")
        p.add_argument("--markdown", help="append the table as Markdown to this file")
    sub.choices["check"].add_argument("--tune", nargs="*", metavar="NAME=VALUE",
                                      help="check kernels with these tuning attributes")
    sub.choices["check"].add_argument(
        "--on-plan", action="store_true",
        help="with --tune: add the tuning to the prefill plan's choice for each case instead "
             "of replacing it (a lever tried on the kernels kvpipe.attention launches)")
    sub.choices["check"].add_argument(
        "--random", type=int, metavar="N", default=0,
        help="check N random configurations instead of the grid")
    sub.choices["check"].add_argument("--seed", type=int, default=0,
                                      help="seed of the random configurations")
    sub.choices["check"].add_argument(
        "--mods", action="store_true",
        help="check the score/mask modifiers (kvpipe.modifiers) instead of the grid")
    sub.choices["check"].add_argument(
        "--backward", action="store_true",
        help="check dQ, dK, dV of the backward kernels against torch float32 autograd "
             "(with --mods: through the score/mask modifiers)")
    sub.choices["check"].add_argument(
        "--decode", action="store_true",
        help="check the decode kernels (split-KV, pack-GQA) on padded KV caches")
    sub.choices["check"].add_argument(
        "--paged", action="store_true",
        help="check the paged K/V cache (block tables, every page size) against a "
             "float32 reference")
    sub.choices["check"].add_argument(
        "--varlen", action="store_true",
        help="check the varlen kernels (packed sequences of lengths 0 to 20k, cu_seqlens) "
             "against a per-sequence torch float32 reference")
    sub.choices["check"].add_argument(
        "--models", action="store_true",
        help="check published models' attention layers at their own shapes (Llama, Qwen, "
             "Mistral, Gemma 2/3, gpt-oss, Phi, DeepSeek, Falcon, BLOOM, BERT, ViT, SD, "
             "Whisper; prefill, training, paged decode, varlen) and tensors of more than "
             "2^31 elements")
    bench = sub.choices["bench"]
    bench.add_argument("--head-dim", type=int, nargs="+", default=list(kernels.HEAD_DIMS),
                       choices=kernels.HEAD_DIMS, metavar="D",
                       help=f"head dims (choices: {', '.join(map(str, kernels.HEAD_DIMS))})")
    bench.add_argument("--seq-len", type=int, nargs="+", default=None,
                       help="sequence lengths (default 1k-16k; with --backward 1k, 4k, 16k)")
    bench.add_argument("--tune", nargs="*", metavar="NAME=VALUE")
    bench.add_argument("--variant", action="append", metavar="NAME=VALUE[,NAME=VALUE]",
                       help="also measure this tuning (repeatable), in the same process")
    bench.add_argument("--causal", choices=["yes", "no", "both"], default="both")
    bench.add_argument("--rounds", type=int, default=None,
                       help="the forward and backward grids' columns and --mods' kvpipe "
                            "forwards: interleaved rounds per row, each in a shuffled order, "
                            "medians reported (default 3)")
    bench.add_argument("--mods", action="store_true",
                       help="modifiers (soft-cap + window, ALiBi) against kvpipe plain, "
                            "FlexAttention and FA4, forward and backward, D 128 (default N 8k)")
    bench.add_argument("--backward", action="store_true",
                       help="benchmark the backward pass (2.5x the forward FLOPs) against "
                            "SDPA's cuDNN and flash backward")
    bench.add_argument("--decode", action="store_true",
                       help="decode TB/s of K+V read (Sq 1, Hq 32 / Hkv 8, D 128, bf16; "
                            "64x8k, 8x32k, 1x128k) against SDPA's cuDNN and flash")
    bench.add_argument("--paged", action="store_true",
                       help="decode over a paged K/V cache (pages of 16, 64, 256) against "
                            "the contiguous kv_lengths kernel, TB/s of K and V")
    bench.add_argument("--varlen", action="store_true",
                       help="the varlen kernel against the dense one on the same sequence "
                            "lengths (8 x 2k, 4 x 8k, an uneven batch; D 128)")
    cache = sub.add_parser("cache", help="list or clear the kernel cache")
    cache.add_argument("action", choices=["list", "clear"])
    args = parser.parse_args(argv)
    if getattr(args, "on_plan", False) and not getattr(args, "tune", None):
        parser.error("--on-plan goes with --tune (the tuning it adds to the prefill plan)")

    if args.command == "cache":
        return _cache_command(args)

    if args.command == "compile":
        from kvpipe.kernels import compile_attention
        from kvpipe.plans import PREFILL_PLAN

        causals = {"yes": [True], "no": [False], "both": [False, True]}[args.causal]
        # (mask_alignment, sliding_window, kv_lengths); without causal or a
        # window the alignment does not matter (kvpipe.attention uses top_left).
        masks = [("top_left", False, False)]
        if args.masks:
            masks += [(a, w, n) for a in kernels.MASK_ALIGNMENTS for w in (False, True)
                      for n in (False, True) if (a, w, n) != ("top_left", False, False)]
        if args.models:
            if (not args.for_check or args.random or args.backward or args.tune or args.mods
                    or args.varlen or args.paged or args.decode):
                parser.error("compile --models goes with --for-check alone (the kernels of "
                             "check --models)")
            from kvpipe import check_models

            for config in check_models.model_kernel_configs():
                k = compile_attention(**config)
                print(f"{k.name}: {k.describe()}")
            return 0
        if args.varlen:
            if not args.for_check or args.random or args.backward or args.tune:
                parser.error("compile --varlen goes with --for-check (and neither --random, "
                             "--backward nor --tune: check --varlen and bench --varlen take "
                             "no tuning)")
            from kvpipe import check_varlen

            for config in check_varlen.kernel_configs():
                k = compile_attention(**config)
                print(f"{k.name}: {k.describe()}")
            return 0
        if args.decode and (not args.for_check or args.tune):
            parser.error("compile --decode goes with --for-check, without --tune (check "
                         "--decode and bench --decode take no tuning)")
        if args.for_check and args.decode:
            from kvpipe import check

            # Each kernel once: the grid's, the API comparison's, the bench's.
            configs = []
            for config in (check.decode_kernel_configs() + check.decode_api_kernel_configs()
                           + bench_decode_kernel_configs()):
                if config not in configs:
                    configs.append(config)
            for config in configs:
                k = compile_attention(**config)
                print(f"{k.name}: {k.describe()}")
            return 0
        if args.for_check and args.paged:
            from kvpipe import bench_paged, check_paged

            if args.random or args.backward or args.tune:
                parser.error("compile --for-check --paged takes neither --random, "
                             "--backward nor --tune")
            # What check --paged and bench --paged launch.
            configs = check_paged.kernel_configs() + check_paged.paged_varlen_kernel_configs()
            configs += [c for c in bench_paged.kernel_configs() if c not in configs]
            for config in configs:
                k = compile_attention(**config)
                print(f"{k.name}: {k.describe()}")
            return 0
        if args.paged:
            parser.error("compile --paged goes with --for-check")
        if args.for_check:
            from kvpipe import check

            # The grid's and bench --mods' kernels take the tuning: forward only.
            if set(_tuning(args.tune)) & set(kernels.BACKWARD_TUNING):
                parser.error("compile --for-check --tune takes forward tuning (the check "
                             "grid's and bench --mods --variant's kernels)")
            cases = check.random_grid(args.random, args.seed) if args.random else None
            for config in check.kernel_configs(cases, with_kvcache=not args.random,
                                               tuning=_tuning(args.tune),
                                               on_plan=args.on_plan):
                k = compile_attention(**config)
                print(f"{k.name}: {k.describe()}")
            if args.backward:  # and the backward families check --backward launches
                for config in check.backward_kernel_configs():
                    k = compile_attention(**config)
                    print(f"{k.name}: {k.describe()}")
            if args.mods:  # and the modifiers' kernels of check --mods, bench --mods
                from kvpipe import bench_modifiers, check_modifiers

                # --tune: the kernels of check --mods --tune and of bench
                # --mods --variant with it too.
                configs = (check_modifiers.mods_kernel_configs()
                           + (check_modifiers.mods_kernel_configs(tuning=_tuning(args.tune))
                              if args.tune else [])
                           + [config for head_dim in _mods_bench_head_dims(args)
                              for config in bench_modifiers.bench_kernel_configs(
                                  head_dim=head_dim,
                                  variants=[_tuning(args.tune)] if args.tune else ())])
                if args.backward:  # and those of check --mods --backward
                    configs += check_modifiers.mods_backward_kernel_configs()
                for config in configs:
                    k = compile_attention(**config)
                    print(f"{k.name}: {k.describe()}")
            return 0
        if args.mods:
            parser.error("compile --mods goes with --for-check (the kernels of check --mods "
                         "and bench --mods)")
        if args.backward:
            if args.masks or set(_tuning(args.tune)) - set(kernels.BACKWARD_TUNING):
                parser.error("compile --backward takes no --masks, and --tune only with "
                             f"the backward's attributes ({', '.join(kernels.BACKWARD_TUNING)})")
            masks = [("top_left", False, False)]
        rows = []
        # Every (Q/K, V) head-dim pair of the chosen Q/K head dims: 192
        # also compiles (192, 128).
        pairs = [(d, dv) for d, dv in kernels.HEAD_DIM_PAIRS if d in args.head_dim
                 and (not args.backward or (d, dv) in kernels.BACKWARD_HEAD_DIM_PAIRS)]
        for d, dv in pairs:
            for dtype in args.dtype:
                for causal, (alignment, window, lengths) in (
                        (c, m) for c in causals for m in masks
                        if c or m[1] or m[0] == "top_left"):
                    k = compile_attention(d, dtype, causal,
                                          value_head_dim=dv if dv != d else None,
                                          mask_alignment=alignment,
                                          sliding_window=window, kv_lengths=lengths,
                                          backward=args.backward, **_tuning(args.tune))
                    rows.append({"kernel": k.name, "cached": k.cached,
                                 "compile_s": None if k.cached else k.compile_seconds,
                                 "cubin": k.cubin is not None,
                                 "shared_memory": k.abi["dynamic_shared_memory"]})
                    print(f"{k.name}: {k.describe()}")
                    extra = []
                    if args.backward:  # bench --backward times deterministic mode too
                        extra.append(dict(backward=True, deterministic=True,
                                          value_head_dim=dv if dv != d else None))
                    elif (alignment == "top_left" and not window and not lengths and dv == d
                          and (not args.tune or args.on_plan)):
                        # What kvpipe.attention launches for short
                        # sequences (plans.PREFILL_PLAN), with --on-plan
                        # plus the tuning.
                        extra += [{**planned, **_tuning(args.tune)}
                                  for _, planned in PREFILL_PLAN.get((d, causal), ())]
                    for tuning in extra:
                        k = compile_attention(d, dtype, causal, **tuning)
                        rows.append({"kernel": k.name, "cached": k.cached,
                                     "compile_s": None if k.cached else k.compile_seconds,
                                     "cubin": k.cubin is not None,
                                     "shared_memory": k.abi["dynamic_shared_memory"]})
                        print(f"{k.name}: {k.describe()}")
        markdown = "| kernel | compile s | cubin |\n| --- | --- | --- |\n" + "".join(
            f"| {r['kernel']} | {'cached' if r['cached'] else r['compile_s']} | {r['cubin']} |\n"
            for r in rows)
        _write(args, "kvpipe compile", rows, markdown)
        return 0
    if args.command == "check":
        _require_gpu("check")
        from kvpipe import check

        tuning = _tuning(args.tune)
        # The families with a check of their own: flag -> (module, function).
        families = {"varlen": ("check_varlen", "run"), "decode": ("check", "run_decode"),
                    "paged": ("check_paged", "run"), "mods": ("check_modifiers", "run_mods")}
        family = next((name for name in families if getattr(args, name)), None)
        if args.models:
            if tuning or args.random or args.backward or family is not None:
                parser.error("check --models goes alone (its cases take their models' own "
                             "settings; training cases check the backward already)")
            from kvpipe import check_models

            rows = check_models.run()
            markdown = check_models.to_markdown(rows)
            print(markdown)
            _write(args, "kvpipe check --models", rows, markdown)
            return 0 if all(r["ok"] for r in rows) else 1
        if family == "mods" and args.backward:
            if tuning or args.random:
                parser.error("check --mods --backward takes neither --tune nor --random")
            from kvpipe import check_modifiers

            rows = check_modifiers.run_mods_backward()
            markdown = check.backward_to_markdown(
                [r for r in rows if "errors" in r or "error" in r])
            print(markdown)
            _write(args, "kvpipe check --mods --backward", rows, markdown)
            return 0 if all(r["ok"] for r in rows) else 1
        if family is not None:
            # --mods --tune: a forward lever tried on the modifier kernels.
            if (tuning and (family != "mods" or args.on_plan)) or args.random or args.backward:
                parser.error(f"check --{family} takes neither --random nor --backward, and "
                             "--tune (without --on-plan) only with --mods")
            import importlib

            module, function = families[family]
            run = getattr(importlib.import_module(f"kvpipe.{module}"), function)
            rows = run(tuning=tuning) if tuning else run()
            markdown = check.to_markdown(rows)
            print(markdown)
            _write(args, f"kvpipe check --{family}", rows, markdown)
            return 0 if all(r["ok"] for r in rows) else 1
        if args.backward:
            if tuning or args.random:
                parser.error("check --backward takes neither --tune nor --random")
            rows = check.run_backward()
            markdown = check.backward_to_markdown(rows)
            integration = check.run_backward_integration() + check.run_deterministic()
            markdown += "\n" + check.to_markdown(integration)
            rows += integration
            print(markdown)
            _write(args, "kvpipe check --backward", rows, markdown)
            return 0 if all(r["ok"] for r in rows) else 1
        cases = check.random_grid(args.random, args.seed) if args.random else None
        rows = check.run(cases, tuning=tuning, on_plan=args.on_plan)
        if not tuning and not args.random:
            rows += check.run_torch_integration()
            rows += check.run_kvcache()
        markdown = check.to_markdown(rows)
        print(markdown)
        _write(args, "kvpipe check", rows, markdown)
        return 0 if all(r["ok"] for r in rows) else 1
    _require_gpu("bench")
    from kvpipe import bench as bench_mod

    if args.rounds is not None and (args.rounds < 1 or args.decode or args.paged
                                    or args.varlen):
        parser.error("bench --rounds (at least 1) times the columns of the forward and "
                     "backward grids and --mods' kvpipe forwards in interleaved rounds, got "
                     f"{args.rounds}" + (" with another family" if args.rounds >= 1 else ""))
    rounds = args.rounds or bench_mod.DEFAULT_ROUNDS
    variants = [_tuning(v.split(",")) for v in args.variant or []]
    backward_only = sorted({name for v in variants + [_tuning(args.tune)] for name in v}
                           & set(kernels.BACKWARD_TUNING))
    if backward_only and not args.backward:
        parser.error(f"{', '.join(backward_only)} tune the backward: with bench --backward "
                     "--variant only")
    causals = {"yes": [True], "no": [False], "both": [False, True]}[args.causal]
    if args.varlen:
        if args.tune or args.variant or args.backward or args.seq_len:
            parser.error("bench --varlen takes neither --tune, --variant, --backward nor "
                         "--seq-len")
        from kvpipe import bench_varlen

        rows = bench_varlen.run(causals)
        markdown = bench_varlen.to_markdown(rows)
        print(markdown)
        _write(args, "kvpipe bench --varlen", rows, markdown)
        return 0
    if args.decode:
        if args.tune or args.variant or args.backward:
            parser.error("bench --decode takes neither --tune, --variant nor --backward")
        rows = bench_mod.run_decode()
        markdown = bench_mod.decode_to_markdown(rows)
        print(markdown)
        _write(args, "kvpipe bench --decode", rows, markdown)
        return 0
    if args.paged:
        from kvpipe import bench_paged

        if args.tune or args.variant or args.backward or args.seq_len:
            parser.error("bench --paged takes neither --tune, --variant, --backward nor "
                         "--seq-len")
        rows = bench_paged.run()
        markdown = bench_paged.to_markdown(rows)
        print(markdown)
        _write(args, "kvpipe bench --paged", rows, markdown)
        return 0
    if args.mods:
        if args.tune or args.backward:
            parser.error("bench --mods takes neither --tune nor --backward (its rows have the "
                         "backward's columns; --variant times the forward with a tuning)")
        from kvpipe import bench_modifiers

        rows = [row for head_dim in _mods_bench_head_dims(args)
                for row in bench_modifiers.run(
                    args.seq_len or bench_modifiers.DEFAULT_SEQ_LENS, head_dim=head_dim,
                    variants=variants, rounds=rounds)]
        markdown = bench_modifiers.to_markdown(rows)
        print(markdown)
        _write(args, "kvpipe bench --mods", rows, markdown)
        return 0
    if args.backward:
        if args.tune:
            parser.error("bench --backward takes no --tune (its tiles are fixed per head "
                         "dim); --variant dq_atomics=false measures the staged dQ beside the default")
        unknown = sorted({name for v in variants for name in v} - set(kernels.BACKWARD_TUNING))
        if unknown:
            parser.error(f"bench --backward --variant takes {', '.join(kernels.BACKWARD_TUNING)}"
                         f", got {', '.join(unknown)}")
        # The backward's benchmark grid (issue 13) is head dims 64 and 128:
        # those by default.
        head_dims = ([64, 128] if args.head_dim == list(kernels.HEAD_DIMS)
                     else args.head_dim)
        rows = bench_mod.run_backward(head_dims, args.seq_len or [1024, 4096, 16384],
                                      causals, variants=variants, rounds=rounds)
        markdown = bench_mod.backward_to_markdown(rows)
        print(markdown)
        _write(args, "kvpipe bench --backward", rows, markdown)
        return 0
    seq_lens = args.seq_len or [1024, 2048, 4096, 8192, 16384]
    rows = bench_mod.run(args.head_dim, seq_lens, causals, variants=variants, rounds=rounds,
                         **_tuning(args.tune))
    markdown = bench_mod.to_markdown(rows)
    print(markdown)
    _write(args, "kvpipe bench", rows, markdown)
    return 0


def bench_decode_kernel_configs(multiprocessors: int = 132) -> List[dict]:
    """The kernels ``bench --decode`` launches on a GPU with
    ``multiprocessors`` SMs (default the H200's): flash_attn_with_kvcache's
    choice for each point, with and without cache_seqlens, unsplit, and with
    the deeper K/V ring of its variant column."""
    from kvpipe.bench import DECODE_POINTS, DECODE_VARIANT_STAGES
    from kvpipe.plans import decode_plan

    configs = []
    for b, n in DECODE_POINTS:
        for splits, variant in ((0, {}), (1, {}), (0, {"kv_stages": DECODE_VARIANT_STAGES})):
            num_splits, pack, tuning = decode_plan(b, 32, 8, 1, n, 128, 128, splits, None,
                                                   multiprocessors, variant)
            for lengths in (False, True):
                config = dict(head_dim=128, dtype="bf16", causal=False, value_head_dim=None,
                              mask_alignment="top_left", sliding_window=False,
                              kv_lengths=lengths, split_kv=num_splits > 1, pack_gqa=pack,
                              **tuning)
                if config not in configs:
                    configs.append(config)
    return configs


if __name__ == "__main__":
    sys.exit(main())
