#!/usr/bin/env bash
# The main job on an example: install what is missing, build kvpipe, and
# compile an example kvpipe program to PTX for sm_90a.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KVPIPE_BUILD_DIR:-$ROOT/build}

"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh"
echo "kvpipe: built $BUILD/bin/kvpipe-opt"
"$BUILD/bin/kvpipe-opt" "$ROOT/examples/ring.mlir" > "$BUILD/ring.out.mlir"
echo "kvpipe: parsed and verified examples/ring.mlir -> $BUILD/ring.out.mlir"
