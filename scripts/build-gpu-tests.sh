#!/usr/bin/env bash
# Compiles the GPU execution tests (test/Integration/GPU/*.mlir) for a machine
# without the compiler: kernels-out/gpu-tests/<name>.ptx and <name>.cubin.
#
#   scripts/build-gpu-tests.sh [OUT_DIR]
#
# Then, on the GPU machine, from a copy of the repository holding that folder:
#   python3 test/Integration/GPU/run_prebuilt.py kernels-out/gpu-tests --markdown results.md
#
# The compiler is $KVPIPE_OPT, else build/bin/kvpipe-opt, else kvpipe-opt on
# PATH; ptxas is $PTXAS, else ptxas on PATH, else /usr/local/cuda/bin/ptxas
# (without it only the .ptx files are written, and run_prebuilt.py loads those).
# KVPIPE_WAIT_TIMEOUT=<cycles> compiles every pipeline wait as a bounded wait
# that prints the stuck barrier and traps (the lowering's wait-timeout debug
# option), to diagnose a hang; the default is the production lowering.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/kernels-out/gpu-tests}

opt=${KVPIPE_OPT:-}
if [[ -z $opt ]]; then
  if [[ -x $root/build/bin/kvpipe-opt ]]; then
    opt=$root/build/bin/kvpipe-opt
  elif command -v kvpipe-opt >/dev/null; then
    opt=$(command -v kvpipe-opt)
  else
    echo "build-gpu-tests: no kvpipe-opt (set KVPIPE_OPT, or build into build/)" >&2
    exit 2
  fi
fi
ptxas=${PTXAS:-$(command -v ptxas || true)}
[[ -n $ptxas ]] || { [[ -x /usr/local/cuda/bin/ptxas ]] && ptxas=/usr/local/cuda/bin/ptxas; }

# The generated kernel files must match their generator.
python3 "$root/test/Integration/GPU/gen_kernels.py" --check

options="ptx-file=PTX"
if [[ -n ${KVPIPE_WAIT_TIMEOUT:-} ]]; then
  options+=" wait-timeout=$KVPIPE_WAIT_TIMEOUT"
fi

mkdir -p "$out"
status=0
built=()
for src in "$root"/test/Integration/GPU/*.mlir; do
  name=$(basename "$src" .mlir)
  ptx=$out/$name.ptx
  rm -f "$ptx" "$out/$name.cubin"
  # A test may add pipeline options: `// GPU-TEST-OPTIONS: ...`.
  extra=$(sed -n 's|^// GPU-TEST-OPTIONS: ||p' "$src" | head -1)
  if ! "$opt" "$src" --kvpipe-to-ptx="${options/PTX/$ptx}${extra:+ $extra}" -o /dev/null; then
    echo "build-gpu-tests: $name: kvpipe-opt failed" >&2
    status=1
    continue
  fi
  if [[ -n $ptxas ]]; then
    if ! "$ptxas" -arch=sm_90a "$ptx" -o "$out/$name.cubin"; then
      echo "build-gpu-tests: $name: ptxas failed" >&2
      rm -f "$out/$name.cubin"
      status=1
      continue
    fi
  fi
  built+=("$name")
  echo "built $name: $(wc -c <"$ptx") bytes of PTX${ptxas:+, cubin}"
done

# What was built, from what, for the results table.
{
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(
    git -C "$root" diff --quiet HEAD -- 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "compiler: $opt"
  echo "ptxas: ${ptxas:-none} $([[ -n $ptxas ]] && "$ptxas" --version | tail -1)"
  echo "wait-timeout: ${KVPIPE_WAIT_TIMEOUT:-off}"
  echo "tests: ${built[*]}"
} >"$out/BUILD-INFO"
echo "wrote $out (see $out/BUILD-INFO)"
exit $status
