#!/usr/bin/env bash
# Creates (once per set of declared dependencies) the virtual environment the
# test suite runs in, and prints its interpreter's path.
#
# The environment holds the kvpipe package (editable) and exactly what
# python/pyproject.toml declares for its `test` extra, so nothing installed
# by hand on a machine can make the suite pass or fail. It works with any
# Python >= 3.10, Debian's "externally managed" /usr/bin/python3 included
# (pip never touches that interpreter). Usage:
#   PY=$(scripts/python-env.sh)   # PYTHON=/usr/bin/python3 picks the base
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KVPIPE_BUILD_DIR:-$ROOT/build}
PYTHON=${PYTHON:-python3}
ENV=${KVPIPE_PYTHON_ENV:-$BUILD/python-env}

# The environment is rebuilt when the base interpreter or the declared
# dependencies change.
stamp=$( { "$PYTHON" -c 'import sys; print(sys.executable, sys.version)'; cat "$ROOT/python/pyproject.toml"; } | sha256sum | cut -c1-16)
if [[ ! -x $ENV/bin/python || $(cat "$ENV/.kvpipe-stamp" 2>/dev/null) != "$stamp" ]]; then
  rm -rf "$ENV"
  mkdir -p "$(dirname "$ENV")"
  if ! "$PYTHON" -m venv "$ENV" >&2; then
    echo "kvpipe: '$PYTHON -m venv' failed; on Debian install python3-venv (scripts/install-deps.sh does)" >&2
    exit 1
  fi
  "$ENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT/python[test]" >&2
  echo "$stamp" > "$ENV/.kvpipe-stamp"
fi
echo "$ENV/bin/python"
