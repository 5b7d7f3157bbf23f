#!/usr/bin/env bash
# Builds kvpipe and runs the whole test suite: lit (FileCheck, ptxas and,
# where a GPU is configured, execution tests) and the Python tests.
#
# The Python tests run in a virtual environment this script makes from the
# dependencies python/pyproject.toml declares (scripts/python-env.sh), never
# in the machine's own interpreter: what a machine has installed by hand
# (torch, cuda-bindings, pytest) cannot change the outcome. Tests that need
# torch, cuda-bindings or a GPU skip with the reason, listed at the end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KVPIPE_BUILD_DIR:-$ROOT/build}

"$ROOT/scripts/build.sh"
TEST_PYTHON=$("$ROOT/scripts/python-env.sh")
/usr/lib/llvm-22/bin/lit -sv "$BUILD/test"
# -rs: one line per skipped test with its reason.
"$TEST_PYTHON" -m pytest -q -rs -p no:cacheprovider "$ROOT/python/tests"
