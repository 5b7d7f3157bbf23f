#!/usr/bin/env bash
# Summarises the SASS of cubins for performance work: the wgmma count, the
# R2UR moves (wgmma descriptors that left the uniform registers) and local
# memory traffic (spills), per kernel. Runs on the CPU machine.
#
#   scripts/sass-report.sh [--dump DIR] kernel.cubin...
#
# cuobjdump is $CUOBJDUMP, else on PATH, else in /usr/local/cuda/bin, else
# taken with nvdisasm (which it runs) from NVIDIA's `nvidia-cuda-cuobjdump` and
# `nvidia-cuda-nvdisasm` wheels (pip download, cached in ~/.cache/kvpipe-tools;
# the CUDA toolkit on this machine ships neither).
set -euo pipefail

dump=""
if [[ ${1:-} == --dump ]]; then
  dump=$2
  shift 2
  mkdir -p "$dump"
fi
if [[ $# -eq 0 ]]; then
  echo "usage: $0 [--dump DIR] kernel.cubin..." >&2
  exit 2
fi

find_cuobjdump() {
  if [[ -n ${CUOBJDUMP:-} ]]; then echo "$CUOBJDUMP"; return; fi
  if command -v cuobjdump >/dev/null; then command -v cuobjdump; return; fi
  if [[ -x /usr/local/cuda/bin/cuobjdump ]]; then echo /usr/local/cuda/bin/cuobjdump; return; fi
  local cache=${XDG_CACHE_HOME:-$HOME/.cache}/kvpipe-tools
  local tool
  tool=$(find "$cache" -path '*/bin/cuobjdump' -type f 2>/dev/null | head -1 || true)
  if [[ -z $tool ]]; then
    mkdir -p "$cache"
    python3 -m pip download --quiet --no-deps nvidia-cuda-cuobjdump \
      nvidia-cuda-nvdisasm -d "$cache" >&2
    for wheel in "$cache"/nvidia_cuda_*.whl; do
      python3 -m zipfile -e "$wheel" "$cache/unpacked"
    done
    tool=$(find "$cache" -path '*/bin/cuobjdump' -type f | head -1)
    chmod +x "$(dirname "$tool")"/*
  fi
  echo "$tool"
}

cuobjdump=$(find_cuobjdump)
# cuobjdump runs the nvdisasm next to it.
export PATH="$(dirname "$cuobjdump"):$PATH"
printf '%-60s %6s %6s %6s %6s\n' kernel HGMMA R2UR LDL STL
for cubin in "$@"; do
  sass=$("$cuobjdump" --dump-sass "$cubin")
  if [[ -n $dump ]]; then
    printf '%s\n' "$sass" > "$dump/$(basename "$cubin" .cubin).sass"
  fi
  count() { grep -c "$1" <<<"$sass" || true; }
  printf '%-60s %6s %6s %6s %6s\n' "$cubin" "$(count HGMMA)" "$(count R2UR)" \
    "$(count 'LDL')" "$(count 'STL')"
done
