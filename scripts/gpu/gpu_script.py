"""What the scripts in scripts/gpu share: their command line, whose ``--compile`` fills the
kernel cache here (no GPU) with the kernels the script launches there (scripts/gpu/pack.sh
then packs the cache for the GPU machine, which has no compiler)."""
import argparse
from typing import Any, Callable, Dict, Iterable, Optional


def arguments(doc: str, kernel_configs: Callable[[], Iterable[Dict[str, Any]]],
              add_arguments: Optional[Callable[[argparse.ArgumentParser], None]] = None
              ) -> Optional[argparse.Namespace]:
    """The script's parsed arguments (its docstring's first paragraph is the description;
    ``add_arguments`` adds its own); None once ``--compile`` has compiled
    ``kernel_configs()`` (compile_attention's keyword arguments) into the cache, printing
    each kernel's name: the script then stops."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--compile", action="store_true",
                        help="compile the kernels into the cache (no GPU) and stop")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args()
    if not args.compile:
        return args
    from kvpipe import kernels

    configs = list(kernel_configs())
    for config in configs:
        print(kernels.compile_attention(**config).name)
    print(f"{len(configs)} kernels compiled")
    return None
