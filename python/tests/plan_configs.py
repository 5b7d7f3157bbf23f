"""Kernel lists without the plan's spill fallbacks (plans.with_spill_fallback):
the lists of kernels to compile for a machine without the compiler hold, next
to each planned tuning that may spill, its fallback, which a launch loads only
where the planned kernel spills; counts of what the check and the bench
launch leave the fallbacks out."""

from typing import Any, Dict, List, Sequence

from kvpipe import kernels, plans


def _split(config: Dict[str, Any]):
    """(the config without its tuning, as a key; the tuning)."""
    tuning = {k: v for k, v in config.items() if k in kernels.TUNING_ATTRIBUTES}
    rest = tuple(sorted((k, repr(v)) for k, v in config.items()
                        if k not in kernels.TUNING_ATTRIBUTES))
    return rest, tuning


def _key(rest, tuning: Dict[str, Any]):
    return rest, tuple(sorted(tuning.items()))


def without_spill_fallbacks(configs: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """``configs`` less those that are another config's spill fallback (the
    same kernel but for the tuning, which is the other's fallback)."""
    fallbacks = set()
    for config in configs:
        rest, tuning = _split(config)
        fallback = plans.spill_fallback(tuning)
        if fallback is not None:
            fallbacks.add(_key(rest, fallback))
    return [c for c in configs if _key(*_split(c)) not in fallbacks]
