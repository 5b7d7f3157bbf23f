#!/usr/bin/env bash
# Fills a kernel cache for a GPU machine without the compiler and packs it for one device call.
#
#   scripts/gpu/pack.sh [FAMILY ...]     # families: default backward varlen mods decode paged
#                                        # models bench
#                                        # (default: default backward varlen)
#
# Compiles `python -m kvpipe compile --for-check` for each family (--mods also takes the
# backward's modifier kernels; bench: `compile` and `compile --backward`, bench's kernels)
# into .gpu/cache with this checkout's build/bin/kvpipe-opt (kernels already there from the
# same compiler build are kept), then writes .gpupack/kernels.tgz.
# Both folders are git-ignored (they travel only when carried): carry [".gpupack"] in the device call
# (64 MiB per call: the modifier kernels make it ~22 MB, so FA4's 44 MiB part b goes in a call of
# its own). On the device: scripts/gpu/steps.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
export KVPIPE_OPT=${KVPIPE_OPT:-$PWD/build/bin/kvpipe-opt} PYTHONPATH=$PWD/python
export KVPIPE_CACHE_DIR=$PWD/.gpu/cache
families=("$@")
[[ ${#families[@]} -gt 0 ]] || families=(default backward varlen)
for family in "${families[@]}"; do
  case $family in
    default) runs=("--for-check") ;;
    backward|varlen|decode|paged|models) runs=("--for-check --$family") ;;
    mods) runs=("--for-check --mods --backward") ;;
    # `bench` and `bench --backward` time every head dim's kernels at the bench lengths, some
    # of which no check launches (session 34's bench found none for D 64's plain kernel).
    bench) runs=("" "--backward") ;;
    *) echo "pack.sh: unknown family '$family' (default backward varlen mods decode paged" \
            "models bench)" >&2
       exit 2 ;;
  esac
  for run in "${runs[@]}"; do
    echo "pack.sh: compile $run"
    # shellcheck disable=SC2086  # (the flags split on purpose)
    python3 -m kvpipe compile $run | grep -cv ", cached$" |
      sed 's/^/pack.sh:   kernels compiled (not cached): /' || true
  done
done
mkdir -p .gpupack
# The commit the kernels come from, for the tables' "Commit:" line on the device (whose copy of
# the repository's git metadata may be stale): steps.sh exports it as KVPIPE_COMMIT.
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- lib include tools python || commit="$commit+changes"
echo "$commit" > .gpu/commit
tar czf .gpupack/kernels.tgz .gpu
echo "pack.sh: .gpupack/kernels.tgz $(du -h .gpupack/kernels.tgz | cut -f1)"
