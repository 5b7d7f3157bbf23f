#!/usr/bin/env bash
# Installs what building and testing kvpipe needs, only where it is missing:
# Debian's LLVM/MLIR 22, ninja, cmake, and python3-venv (the test suite's
# Python environment is a venv, scripts/python-env.sh; nothing is installed
# into a system interpreter).
set -euo pipefail

APT_PACKAGES=(llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools ninja-build cmake g++ python3-venv)
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
