#!/usr/bin/env bash
# Runs time-boxed steps on the GPU machine against the kernels scripts/gpu/pack.sh packed.
#
#   bash scripts/gpu/steps.sh 'NAME SECONDS COMMAND ...' ...
#   e.g. bash scripts/gpu/steps.sh 'check_backward 150 python -m kvpipe check --backward' \
#                                  'bench_bwd 200 python -m kvpipe bench --backward --head-dim 128'
#
# Each step runs under `timeout`, its output goes to $OUT/NAME.txt (with the exit status and
# the clock), and its last TAIL lines (default 8) to stdout; a step that fails or runs out of
# time does not stop the next. A step whose command has `--markdown` gets its table back too.
# FA4 (../shared/peers/fa4.sh) is used where it was staged in /tmp/fa4-site by earlier calls.
set -u
cd "$(dirname "$0")/../.."
# Every pack carried (kernels.tgz, or several, each carried in a call of its own).
for pack in .gpupack/*.tgz; do tar xzf "$pack"; done
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
[[ -d /tmp/fa4-site ]] && export PYTHONPATH=$PYTHONPATH:/tmp/fa4-site
export KVPIPE_CACHE_DIR=$PWD/.gpu/cache
# The commit pack.sh packed the kernels at (the device's git metadata may be stale).
[[ -f .gpu/commit ]] && export KVPIPE_COMMIT=$(cat .gpu/commit)
unset KVPIPE_OPT
OUT=${OUT:-/tmp/steps-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for step in "$@"; do
  read -r name limit command <<< "$step"
  echo "=== $name ($(date +%T), limit ${limit}s)"
  timeout "$limit" bash -c "$command" > "$OUT/$name.txt" 2>&1
  echo "rc=$? ($(date +%T))" >> "$OUT/$name.txt"
  tail -n "${TAIL:-8}" "$OUT/$name.txt"
done
