#!/usr/bin/env bash
# FlashAttention-4's sm_90a forward kernels compiled on the CPU machine (no GPU, no driver), for
# SASS comparisons with kvpipe's before any GPU time is spent (docs/performance.md, v15).
#
#   scripts/peers/fa4-sass.sh OUT [HEAD_DIM...]      # default head dims 64 128
#
# Writes OUT/fa4_d<D>_{full,causal}.{cubin,ptx,sass} (bf16, B 4, S 4096, H 16: FA4's choice of
# tiles for them). Compare with kvpipe's: `python -m kvpipe compile --head-dim D --dtype bf16`
# and `scripts/sass-report.sh --dump DIR` on its cubins (in the kernel cache).
#
# Needs FA4's staged wheels in .fa4/a and .fa4/b (../shared/peers/fa4.sh prepare .fa4), a
# Python 3.12 (FA4's CuTe-DSL wheels are cp312: $PYTHON312, else python3.12 on PATH or pyenv's)
# and PyPI: the first run makes a venv in ~/.cache/kvpipe-tools/fa4-venv with the wheels and
# PyPI's torch (~4 GB with its CUDA libraries, which the CPU-only import needs). FA4's interface
# skips the launch under torch's FakeTensorMode; the target comes from FLASH_ATTENTION_ARCH and
# CUTE_DSL_ARCH, the kept PTX and cubin from CUTE_DSL_KEEP / CUTE_DSL_DUMP_DIR.
set -euo pipefail
out=${1:?usage: $0 OUT [HEAD_DIM...]}
shift
[[ $# -gt 0 ]] && dims=("$@") || dims=(64 128)
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/kvpipe-tools
venv=${FA4_VENV:-$cache/fa4-venv}  # FA4_VENV: one made before
mkdir -p "$out" "$cache"
out=$(cd "$out" && pwd)

if [[ ! -x $venv/bin/python ]]; then
  py=${PYTHON312:-$(command -v python3.12 || ls "$HOME"/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | head -1 || true)}
  if [[ -z $py ]]; then
    echo "fa4-sass: no Python 3.12 (set PYTHON312): FA4's CuTe-DSL wheels are cp312" >&2
    exit 1
  fi
  if [[ ! -f $root/.fa4/a/libs.part-aa || ! -f $root/.fa4/b/libs.part-ab ]]; then
    echo "fa4-sass: FA4's wheels are not staged in .fa4 (../shared/peers/fa4.sh prepare .fa4)" >&2
    exit 1
  fi
  "$py" -m venv "$venv"
  wheels=$(mktemp -d)
  cp "$root"/.fa4/a/*.whl "$wheels"/
  cat "$root"/.fa4/a/libs.part-* "$root"/.fa4/b/libs.part-* \
    > "$wheels"/nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl
  "$venv"/bin/pip install -q --no-deps "$wheels"/*.whl
  "$venv"/bin/pip install -q einops typing_extensions 'cuda-bindings>=12.8' protobuf numpy torch
  rm -rf "$wheels"
fi

# cuobjdump: the toolkit's, or the wheel sass-report.sh caches.
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || true)}
[[ -z $cuobjdump && -x /usr/local/cuda/bin/cuobjdump ]] && cuobjdump=/usr/local/cuda/bin/cuobjdump
if [[ -z $cuobjdump ]]; then
  "$root"/scripts/sass-report.sh /dev/null >/dev/null 2>&1 || true  # fetches the wheel
  cuobjdump=$(find "$cache" -path '*/bin/cuobjdump' -type f | head -1)
fi

export FLASH_ATTENTION_ARCH=sm_90 CUTE_DSL_ARCH=sm_90a FLASH_ATTENTION_NUM_SMS=132
export CUTE_DSL_KEEP=ptx,cubin CUTE_DSL_NO_CACHE=1 CUTE_DSL_DISABLE_FILE_CACHING=1
for d in "${dims[@]}"; do
  for causal in 0 1; do
    name=fa4_d${d}_$([[ $causal == 1 ]] && echo causal || echo full)
    dump=$(mktemp -d)
    CUTE_DSL_DUMP_DIR=$dump "$venv"/bin/python "$root"/scripts/peers/fa4_compile.py "$d" "$causal" \
      2>&1 | grep -E "^(compiled|config)" || { echo "fa4-sass: $name did not compile" >&2; exit 1; }
    cp "$(ls "$dump"/*.cubin | head -1)" "$out/$name.cubin"
    cp "$(ls "$dump"/*.ptx | head -1)" "$out/$name.ptx"
    "$cuobjdump" -sass "$out/$name.cubin" > "$out/$name.sass"
    rm -rf "$dump"
    echo "fa4-sass: $out/$name.{cubin,ptx,sass}"
  done
done
