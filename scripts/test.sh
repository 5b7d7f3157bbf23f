#!/usr/bin/env bash
# Builds kvpipe and runs the whole test suite: lit (FileCheck, ptxas and,
# where a GPU is configured, execution tests) and the Python tests.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KVPIPE_BUILD_DIR:-$ROOT/build}
PYTHON=${PYTHON:-python3}

"$ROOT/scripts/build.sh"
/usr/lib/llvm-22/bin/lit -sv "$BUILD/test"
"$PYTHON" -m pytest -q "$ROOT/python/tests"
