#!/usr/bin/env bash
# Configures (once) and builds kvpipe into ./build.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KVPIPE_BUILD_DIR:-$ROOT/build}
if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
ninja -C "$BUILD" "$@"
