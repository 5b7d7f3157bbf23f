#!/usr/bin/env bash
# Installs what building and testing kvpipe needs, only where it is missing:
# Debian's LLVM/MLIR 22, ninja and cmake; pytest for the Python tests.
set -euo pipefail

APT_PACKAGES=(llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools ninja-build cmake g++)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "kvpipe: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c "import pytest" >/dev/null 2>&1; then
  echo "kvpipe: installing pytest"
  "$PYTHON" -m pip install -q pytest
fi
