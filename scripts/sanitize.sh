#!/usr/bin/env bash
# Builds kvpipe with AddressSanitizer and UndefinedBehaviorSanitizer into its
# own build directory and runs the lit suite and a fuzz run on it. Run it
# before each release (docs/fuzzing.md records the figures).
#
#   scripts/sanitize.sh [--build-only] [--fuzz-mutants N] [--fuzz-seconds S]
#                       [--fuzz-seed S] [--jobs J]
#
# Environment: KVPIPE_ASAN_BUILD_DIR (default build-asan), KVPIPE_NINJA_JOBS
# (parallel compile jobs, default: ninja's), KVPIPE_FUZZ_DIR
# (crash directory, default /tmp/kvpipe-asan-fuzz).
#
# Only the project's code is instrumented: Debian's libMLIR.so is not, so
# ASan sees out-of-bounds accesses and use-after-free in kvpipe's code and
# in MLIR/LLVM templates instantiated there, and UBSan sees undefined
# arithmetic (signed overflow, shifts, ...) in kvpipe's code. Every finding
# aborts the process (abort_on_error), which the fuzzer counts as a crash
# and lit as a failing test: an ASan or UBSan report is never an exit code 1
# that looks like an ordinary diagnostic.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KVPIPE_ASAN_BUILD_DIR:-$ROOT/build-asan}
FUZZ_DIR=${KVPIPE_FUZZ_DIR:-/tmp/kvpipe-asan-fuzz}
MUTANTS=2000
SECONDS_LIMIT=600
SEED=1
JOBS=$(nproc)
BUILD_ONLY=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-only) BUILD_ONLY=1 ;;
    --fuzz-mutants) MUTANTS=$2; shift ;;
    --fuzz-seconds) SECONDS_LIMIT=$2; shift ;;
    --fuzz-seed) SEED=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    *) echo "sanitize.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

if [[ ! -f $BUILD/build.ninja ]]; then
  LAUNCHER=()
  if command -v ccache >/dev/null; then
    LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  cmake -G Ninja -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    "${LAUNCHER[@]}" -DKVPIPE_SANITIZERS=address,undefined >/dev/null
fi
ninja -C "$BUILD" ${KVPIPE_NINJA_JOBS:+-j "$KVPIPE_NINJA_JOBS"} kvpipe-opt kvpipe-capi-test \
  mlir-doc

# Leak checking stays on. abort_on_error turns a report into SIGABRT.
# allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons a new slab and
# unpoisons each allocation only where Allocator.h is compiled with ASan.
# kvpipe's types allocate their storage from the context's allocator in
# instrumented code (a new slab: poisoned), and Debian's uninstrumented
# libMLIR then allocates from the same slab without unpoisoning: every such
# write is reported (use-after-poison in MemRefType::get, found by the first
# full run). Manual poisoning is only meaningful in a fully instrumented
# LLVM; heap, stack and global checks are unaffected.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:hard_rss_limit_mb=4096:allow_user_poisoning=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-abort_on_error=1:halt_on_error=1:print_stacktrace=1}
[[ $BUILD_ONLY == 1 ]] && exit 0

status=0
echo "== lit ($BUILD/test)"
/usr/lib/llvm-22/bin/lit -sv "$BUILD/test" || status=1

echo "== fuzz: $MUTANTS mutants or $SECONDS_LIMIT s, seed $SEED, $JOBS jobs"
# Fuzz a snapshot, so that rebuilding meanwhile does not change the binary.
SNAPSHOT=$(mktemp /tmp/kvpipe-opt-asan.XXXXXX)
cp "$BUILD/bin/kvpipe-opt" "$SNAPSHOT"
chmod +x "$SNAPSHOT"
python3 "$ROOT/tools/fuzz/kvpipe_fuzz.py" --kvpipe-opt "$SNAPSHOT" \
  --mutants "$MUTANTS" --seconds "$SECONDS_LIMIT" --seed "$SEED" \
  --jobs "$JOBS" --timeout 60 --sanitized --crash-dir "$FUZZ_DIR" || status=1
rm -f "$SNAPSHOT"
exit $status
