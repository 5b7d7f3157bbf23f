#!/usr/bin/env bash
# The main job on an example: install what is missing, build kvpipe, compile
# the example attention kernel (examples/attention.mlir) to PTX for sm_90a
# and assemble it with ptxas; on a machine with a GPU (torch and
# cuda-bindings importable), also run it and check it against torch.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KVPIPE_BUILD_DIR:-$ROOT/build}
OUT=$BUILD/quickstart
PYTHON=${PYTHON:-python3}

"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh"
mkdir -p "$OUT"
"$BUILD/bin/kvpipe-opt" "$ROOT/examples/attention.mlir" \
  --kvpipe-to-ptx="ptx-file=$OUT/fa_fwd.ptx abi-file=$OUT/fa_fwd.json" -o "$OUT/fa_fwd.mlir"
echo "kvpipe: examples/attention.mlir -> $OUT/fa_fwd.ptx ($(grep -c 'wgmma.mma_async' "$OUT/fa_fwd.ptx") wgmma, ABI in $OUT/fa_fwd.json)"
PTXAS=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
if [[ -x $PTXAS ]]; then
  "$PTXAS" -arch=sm_90a -v "$OUT/fa_fwd.ptx" -o "$OUT/fa_fwd.cubin" 2>&1 | grep -E "registers|spill" || true
  echo "kvpipe: assembled $OUT/fa_fwd.cubin"
fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
   "$PYTHON" -c "import torch, cuda.bindings; assert torch.cuda.is_available()" 2>/dev/null; then
  echo "kvpipe: GPU found: running the attention check against torch"
  PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m kvpipe check
else
  echo "kvpipe: no usable GPU here (nvidia-smi, torch with CUDA, cuda-bindings): skipped the run"
fi
