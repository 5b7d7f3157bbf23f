"""Attention sinks in the kernels (the `sinks` attribute) against float32 softmax with a
sink column: every sink case of the three checks in one process, without the rest of their
grids -- `check --mods --backward`'s SINK_CASES (forward, lse and dq, dk, dv, dsinks through
autograd), `check --paged`'s sink cases (split-KV decode: the combine kernel's sinks; a
16-query chunk with a window) and `check --varlen`'s (forward, each also reversed with rows
after the last sequence) and SINK_BACKWARD_CASES (the packed backward with the sinks'
gradient). Exits 1 when a case fails.

    python3 scripts/gpu/check-sinks.py --compile   # here: the kernels into the cache
    python3 scripts/gpu/check-sinks.py             # on the GPU machine
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from gpu_script import arguments  # noqa: E402

from kvpipe import check_modifiers, check_paged, check_varlen  # noqa: E402
from kvpipe.check import unique_configs  # noqa: E402


def kernel_configs():
    paged = [c for c in check_paged.paged_grid() if c.sinks]
    varlen = [c for c in check_varlen.varlen_grid() if c.sinks]
    return unique_configs(check_modifiers.mods_backward_kernel_configs(only_sinks=True)
                          + check_paged.kernel_configs(paged)
                          + check_varlen.forward_kernel_configs(varlen)
                          + check_varlen.sink_backward_kernel_configs())


def main() -> int:
    if arguments(__doc__, kernel_configs) is None:
        return 0
    # The modifier and paged checks print their rows; the varlen ones here.
    rows = check_modifiers._run_cases(check_modifiers.SINK_CASES,
                                      check_modifiers.run_sink_case, 2468)
    rows += check_paged.run([c for c in check_paged.paged_grid() if c.sinks])
    varlen = []
    for i, case in enumerate(c for c in check_varlen.varlen_grid() if c.sinks):
        varlen += [check_varlen.run_case(case, seed=777 + i, tail=tail) for tail in (False, True)]
    varlen += [check_varlen.run_backward_case(case, seed=4242 + i, way="packed")
               for i, case in enumerate(check_varlen.SINK_BACKWARD_CASES)]
    rows += varlen
    for row in varlen:
        detail = (f"rel {row['rel']:.2e}" if "rel" in row else row.get("error", ""))
        if row.get("errors"):
            detail += " " + " ".join(f"{k} {v:.1e}" for k, v in row["errors"].items())
        print(f"{'PASS' if row['ok'] else 'FAIL'} {row.get('case', '')}: {detail}")
    passed = sum(bool(row["ok"]) for row in rows)
    print(f"{passed}/{len(rows)} passed")
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
