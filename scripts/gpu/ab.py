#!/usr/bin/env python3
"""Interleaved A/B timing of kvpipe forward tunings, for decisions the H100's drift would blur.

Timed one after the other, the same kernel has read 10 % apart within one row on the H100
(session 18, call 6: the D 128 2k default and the identical `rescale_threshold=8` variant), so a
few per cent between two columns decide nothing. This script measures every variant of a point
in R rounds, each in its own (seeded) shuffled order, and reports each variant's median TFLOP/s
over the rounds and the spread (min-max) of its ratio to the first variant, round by round
(both measured within seconds of each other). `bench` times its columns the same way
(`--rounds`), without the per-round ratios.

    python scripts/gpu/ab.py --head-dim 128 --seq-len 8192 16384 --rounds 7 \
        --variant '' --variant rescale_threshold=-1 [--markdown OUT.md]

`--window LEFT` gives every kvpipe and FA4 call a causal sliding window of LEFT keys
(`window_size=(LEFT, 0)`; TFLOP/s of the visible pairs; cuDNN has none and is refused).

`--backward` times the backward alone instead (the forward run once outside the timing, as
`bench --backward`: kvpipe's `attention_backward`, the peers' `torch.autograd.grad` of a retained
graph; B·N = 32k, TFLOP/s of 2.5x the forward's FLOPs); its variants are the backward's tuning.

`--varlen` times packed batches instead (bench --varlen's: 8 x 2k, 4 x 8k and an uneven one, H 16;
`kvpipe.varlen.attention_varlen`, causal bottom-right as flash-attn's; `fa4` is FA4's
`flash_attn_varlen_func`); `--seq-len` is then ignored.

`--seq-q SQ` gives each sequence SQ queries against N keys, the causal mask bottom-right
(flash-attn's: chunked prefill against a longer K/V); TFLOP/s of the visible pairs; cuDNN (SDPA's
causal mask is top-left) is refused.

`--paged PAGE` runs kvpipe.paged.paged_attention instead, K/V in a cache of PAGE-row pages with a
shuffled block table (every sequence N keys), bottom-right causal; with `--seq-q` the chunked
prefill of a paged cache. Variants are its tuning; no peers.

`l2group=MIB` is the plan's choice with persistent kernels' tile tables
(kvpipe.schedule) built for groups of MIB MiB of K/V instead of the default 24.

`''` is kvpipe.attention's own choice (the prefill plan's where it has one); a variant's
tuning replaces the plan, as in `bench`, and one that starts with `+` is added to the plan's
choice for the point (`--variant '' --variant +mask_bits=true`: a lever on the kernels
kvpipe.attention launches; compile them with `compile ... --tune mask_bits=true --on-plan`). `cudnn` and `fa4` are the peers (torch SDPA's cuDNN
backend; FlashAttention-4 where ../shared/peers/fa4.sh staged it), measured in the same
rounds. Kernels come from the kernel cache (compile them on the CPU machine: `python -m kvpipe
compile --head-dim D --dtype bf16 --causal both --tune ...`).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
from typing import Any, List

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))


def _backward_fns(variants: List[str], q: Any, k: Any, v: Any, causal: bool) -> List[Any]:
    """The backward alone of each variant on the same inputs and output gradient
    (bench's: the forward once, here; the peers' graph retained)."""
    import torch

    from kvpipe.__main__ import _tuning
    from kvpipe.bench import _autograd_backward_fn, _kvpipe_backward_fn, _sdpa

    do = torch.randn_like(q)
    fns = []
    for text in variants:
        if text == "fa4":
            from flash_attn.cute import flash_attn_func

            fns.append(_autograd_backward_fn(
                lambda *leaves: flash_attn_func(*leaves, causal=causal),
                [t.transpose(1, 2) for t in (q, k, v)], do.transpose(1, 2)))
        elif text == "cudnn":
            fns.append(_autograd_backward_fn(_sdpa("cudnn", causal), (q, k, v), do))
        else:
            fns.append(_kvpipe_backward_fn(q, k, v, do, causal=causal,
                                           tuning=_tuning(text.split(",") if text else [])))
    return fns


def _paged_fns(variants: List[str], q: Any, k: Any, v: Any, causal: bool,
               page: int) -> List[Any]:
    """paged_attention of each variant's tuning, K and V copied into a cache
    of ``page``-row pages with a shuffled block table (bottom-right causal)."""
    import torch

    from kvpipe.__main__ import _tuning
    from kvpipe.paged import paged_attention

    b, h, n, d = k.shape
    per_sequence = -(-n // page)
    order = torch.randperm(b * per_sequence, device=k.device)
    table = order.view(b, per_sequence).to(torch.int32)
    caches = []
    for t in (k, v):
        cache = torch.zeros(b * per_sequence, page, h, d, dtype=t.dtype, device=t.device)
        padded = torch.zeros(b, per_sequence * page, h, d, dtype=t.dtype, device=t.device)
        padded[:, :n] = t.transpose(1, 2)
        cache[order] = padded.view(b * per_sequence, page, h, d)
        caches.append(cache)
    lengths = torch.full((b,), n, dtype=torch.int32, device=k.device)
    qt = q.transpose(1, 2).contiguous()
    return [lambda tuning=_tuning(text.split(",") if text else []): paged_attention(
                qt, caches[0], caches[1], table, lengths, causal=causal, **tuning)
            for text in variants]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-dim", type=int, nargs="+", default=[128])
    parser.add_argument("--seq-len", type=int, nargs="+", default=[8192])
    parser.add_argument("--paged", type=int, default=None,
                        help="K/V in a paged cache of this many rows per page (forward)")
    parser.add_argument("--seq-q", type=int, default=None,
                        help="queries per sequence (default: --seq-len), bottom-right causal")
    parser.add_argument("--causal", choices=["yes", "no", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--variant", action="append", default=None,
                        help="NAME=VALUE[,NAME=VALUE] ('' = kvpipe.attention's choice)")
    parser.add_argument("--backward", action="store_true")
    parser.add_argument("--varlen", action="store_true",
                        help="packed batches of sequences (the varlen kernels; forward)")
    parser.add_argument("--window", type=int, default=None,
                        help="a causal sliding window of this many keys (forward)")
    parser.add_argument("--markdown")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    variants = args.variant or [""]
    if args.window is not None and (args.window < 0 or args.backward or args.causal != "yes"
                                    or "cudnn" in variants):
        parser.error("--window LEFT (>= 0) goes with --causal yes, the forward and no cudnn "
                     "variant")
    if args.seq_q is not None and (args.seq_q < 1 or "cudnn" in variants or args.backward
                                   or args.window is not None or args.varlen):
        parser.error("--seq-q (>= 1) goes with the forward of a plain mask and no cudnn variant")
    if args.paged is not None and (args.backward or args.window is not None or args.varlen
                                   or any(v in ("cudnn", "fa4") or v.startswith(("+", "l2"))
                                          for v in variants)):
        parser.error("--paged goes with the forward of a plain mask and tuning variants only")
    # kvpipe.attention's and FA4's arguments for the window (none without one).
    window = {} if args.window is None else {"window_size": (args.window, 0)}
    if args.backward and any(v.startswith("+") for v in variants):
        parser.error("--backward has no prefill plan: a variant is the backward's tuning")

    import torch
    from triton.testing import do_bench

    import kvpipe
    from kvpipe.__main__ import _tuning
    from kvpipe.bench import _sdpa, interleaved_times
    from kvpipe.bench_modifiers import _visible_pairs
    from kvpipe.plans import prefill_plan

    causals = {"yes": [True], "no": [False], "both": [False, True]}[args.causal]
    labels = [v or "default" for v in variants]
    rows: List[str] = []

    def time_row(cells: List[str], fns: List[Any], flops: float) -> None:
        # bench.interleaved_times: every variant warmed first, then each
        # round in its own seeded shuffled order (rotation kept each variant
        # after the same neighbour, whose heat or coolness shifts the next
        # one's clock: results, session 18 call 15).
        per_round = interleaved_times(
            list(enumerate(fns)), args.rounds,
            time=lambda fn: float(do_bench(fn, warmup=5, rep=40, return_mode="median")))
        times = [per_round[i] for i in range(len(fns))]
        tflops = [flops / statistics.median(t) / 1e9 for t in times]
        cells = cells + [f"{tflops[0]:.1f}"]
        for i in range(1, len(fns)):
            ratios = sorted(times[0][r] / times[i][r] for r in range(args.rounds))
            cells.append(f"{tflops[i]:.1f} ({statistics.median(ratios):.3f}, "
                         f"{ratios[0]:.3f}-{ratios[-1]:.3f})")
        row = "| " + " | ".join(cells) + " |"
        print(row, flush=True)
        rows.append(row)

    if args.varlen:
        from kvpipe.bench_varlen import BATCHES, HEADS
        from kvpipe.plans import varlen_plan
        from kvpipe.varlen import attention_varlen

        for d in args.head_dim:
            for label, lengths in BATCHES:
                for causal in causals:
                    total, longest = sum(lengths), max(lengths)
                    q, k, v = (torch.randn(total, HEADS, d, dtype=torch.bfloat16,
                                           device="cuda") for _ in range(3))
                    offsets = [0]
                    for n in lengths:
                        offsets.append(offsets[-1] + n)
                    cu = torch.tensor(offsets, dtype=torch.int32, device="cuda")
                    flops = sum(4 * HEADS * n * n * d / (2 if causal else 1) for n in lengths)
                    alignment = "bottom_right" if causal else "top_left"
                    fns = []
                    for text in variants:
                        if text == "fa4":
                            from flash_attn.cute import flash_attn_varlen_func

                            fns.append(lambda: flash_attn_varlen_func(
                                q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu,
                                max_seqlen_q=longest, max_seqlen_k=longest, causal=causal))
                            continue
                        if text == "cudnn" or text.startswith("l2group="):
                            parser.error(f"--varlen has no variant {text!r}")
                        tuning = (_tuning(text.split(",")) if text and not text.startswith("+")
                                  else {})
                        if text.startswith("+"):
                            tuning = {**varlen_plan(d, d, causal, False, False, {}),
                                      **_tuning(text[1:].split(","))}
                        fns.append(lambda tuning=tuning: attention_varlen(
                            q, k, v, cu, cu, longest, longest, causal=causal,
                            mask_alignment=alignment, **tuning))
                    time_row([str(d), label, "yes" if causal else "no"], fns, flops)
                    del q, k, v
        header = ("| D | batch | causal | " + labels[0] + " TFLOP/s | "
                  + " | ".join(f"{label} (ratio to {labels[0]}: median, range)"
                               for label in labels[1:]) + " |")
        table = "\n".join([header, "| " + " | ".join(["---"] * (3 + len(labels))) + " |"]
                          + rows)
        return _report(args, table, torch)

    for d in args.head_dim:
        for n in args.seq_len:
            b = max(1, 16384 // n) * 2
            sq = min(args.seq_q or n, n)
            # Fewer queries than keys: the diagonal at the end (flash-attn's).
            alignment = {"mask_alignment": "bottom_right"} if sq != n else {}
            for causal in causals:
                q = torch.randn(b, 16, sq, d, dtype=torch.bfloat16, device="cuda")
                k, v = (torch.randn(b, 16, n, d, dtype=torch.bfloat16, device="cuda")
                        for _ in range(2))
                pairs = (sq * (n - sq) + sq * (sq + 1) / 2 if causal else sq * n)
                flops = 4 * b * 16 * d * (_visible_pairs(n, causal, args.window)
                                          if args.window is not None
                                          else pairs if sq != n
                                          else n * n / (2 if causal else 1))
                if args.backward:
                    fns = _backward_fns(variants, q, k, v, causal)
                    flops *= 2.5
                elif args.paged is not None:
                    fns = _paged_fns(variants, q, k, v, causal, args.paged)
                else:
                    fns = []
                for text in variants if not args.backward and args.paged is None else ():
                    if text == "cudnn":
                        fns.append(lambda attend=_sdpa("cudnn", causal): attend(q, k, v))
                    elif text == "fa4":
                        from flash_attn.cute import flash_attn_func

                        qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
                        fns.append(lambda qt=qt, kt=kt, vt=vt: flash_attn_func(
                            qt, kt, vt, causal=causal, **window))
                    elif text.startswith("l2group="):
                        from kvpipe import schedule

                        def grouped(mib=int(text.split("=")[1])):
                            default, schedule.L2_GROUP_BYTES = schedule.L2_GROUP_BYTES, mib << 20
                            try:
                                return kvpipe.attention(q, k, v, causal=causal, **window)
                            finally:
                                schedule.L2_GROUP_BYTES = default

                        fns.append(grouped)
                    elif text.startswith("+"):  # the plan's choice and these
                        tuning = {**prefill_plan(d, d, causal, alignment.get(
                                      "mask_alignment", "top_left"), bool(window), False,
                                      False, sq, n, {}),
                                  **_tuning(text[1:].split(","))}
                        fns.append(lambda tuning=tuning: kvpipe.attention(
                            q, k, v, causal=causal, **window, **alignment, **tuning))
                    else:
                        tuning = _tuning(text.split(",") if text else [])
                        fns.append(lambda tuning=tuning: kvpipe.attention(
                            q, k, v, causal=causal, **window, **alignment, **tuning))
                label = str(n) if sq == n else f"{sq} x {n}"
                time_row([str(d), label, str(b), "yes" if causal else "no"], fns, flops)
                del q, k, v
    header = ("| D | N | B | causal | " + labels[0] + " TFLOP/s | "
              + " | ".join(f"{label} (ratio to {labels[0]}: median, range)" for label in labels[1:])
              + " |")
    table = "\n".join([header, "| " + " | ".join(["---"] * (4 + len(labels))) + " |"] + rows)
    return _report(args, table, torch)


def _report(args: Any, table: str, torch: Any) -> int:
    """Prints the table with its date, commit and GPU, and appends it to
    --markdown."""
    stamp = (f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC. Commit: "
             f"{os.environ.get('KVPIPE_COMMIT', '?')}. GPU: {torch.cuda.get_device_name()}. "
             f"{args.rounds} rounds, each in a shuffled order.")
    text = f"## scripts/gpu/ab.py\n\n{stamp}\n\n{table}\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "a") as out:
            out.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
