#!/usr/bin/env bash
# ptx-fingerprint.sh - lower a fixed set of attention declarations to PTX and
# compare with a recorded baseline.
#
# A restructuring of the generator or the lowering that is meant to preserve
# behaviour must leave the generated PTX byte-identical (or, where it cannot,
# differ only trivially: same instruction counts, and the same registers and
# no spills under `ptxas -v`). This script is the check, on a machine without
# a GPU:
#
#   scripts/ptx-fingerprint.sh record  DIR   # write DIR/<config>.ptx (+ .ptxas)
#   scripts/ptx-fingerprint.sh compare DIR   # lower again, diff against DIR
#   scripts/ptx-fingerprint.sh list          # the configurations, name|attributes
#
# Options (environment): KVPIPE_OPT (default build/bin/kvpipe-opt, or
# build-gen/bin/kvpipe-opt if that exists), PTXAS (default
# /usr/local/cuda/bin/ptxas; ptxas -v output is recorded and compared when it
# exists), JOBS (parallel lowerings, default 2), KVPIPE_EXPAND_OPT (if set,
# this kvpipe-opt expands the declarations, `--kvpipe-expand-attention`, and
# KVPIPE_OPT lowers the result: a generator change is then checked against a
# fixed lowering, while other parts of the compiler change concurrently).
#
# `compare` prints, per configuration, `same`, or `DIFF` with the instruction
# count per opcode that changed, and exits 1 if any PTX differs.
set -euo pipefail

mode=${1:-}
dir=${2:-}
if [[ $mode == list ]]; then
  dir=-
fi
if [[ -z $mode || -z $dir || ($mode != record && $mode != compare && $mode != list) ]]; then
  echo "usage: $0 record|compare DIR, or $0 list" >&2
  exit 2
fi

root=$(cd "$(dirname "$0")/.." && pwd)
if [[ -z ${KVPIPE_OPT:-} ]]; then
  KVPIPE_OPT=$root/build/bin/kvpipe-opt
  [[ -x $root/build-gen/bin/kvpipe-opt ]] && KVPIPE_OPT=$root/build-gen/bin/kvpipe-opt
fi
PTXAS=${PTXAS:-/usr/local/cuda/bin/ptxas}
JOBS=${JOBS:-2}
KVPIPE_EXPAND_OPT=${KVPIPE_EXPAND_OPT:-}

# name|attributes of the kvpipe.attention_kernel declaration (beyond the
# element type, which every name's suffix gives).
configs() {
  local d c t
  for d in 64 128; do
    for c in false true; do
      for t in bf16 f16; do
        # The eight default kernels.
        echo "d${d}_c${c}_default_${t}|head_dim = $d : i64, element_type = $t, causal = $c"
      done
      t=bf16
      local base="head_dim = $d : i64, element_type = $t, causal = $c"
      echo "d${d}_c${c}_nooverlap_${t}|$base, overlap_softmax = false"
      echo "d${d}_c${c}_nopingpong_${t}|$base, pingpong = false"
      echo "d${d}_c${c}_nooverlap_nopingpong_${t}|$base, overlap_softmax = false, pingpong = false"
      echo "d${d}_c${c}_persistent_${t}|$base, persistent = true"
      echo "d${d}_c${c}_persistent_nopingpong_${t}|$base, persistent = true, pingpong = false"
      echo "d${d}_c${c}_persistent_nooverlap_${t}|$base, persistent = true, overlap_softmax = false"
      echo "d${d}_c${c}_wg1_${t}|$base, consumer_warpgroups = 1"
      echo "d${d}_c${c}_wg1_nooverlap_${t}|$base, consumer_warpgroups = 1, overlap_softmax = false"
      echo "d${d}_c${c}_bn64_${t}|$base, block_n = 64"
      echo "d${d}_c${c}_bn64_stages3_${t}|$base, block_n = 64, kv_stages = 3"
    done
    local base="head_dim = $d : i64, element_type = bf16, causal = true"
    echo "d${d}_ctrue_persistent_f16|head_dim = $d : i64, element_type = f16, causal = true, persistent = true"
    echo "d${d}_ctrue_persistent_wg1_bf16|$base, persistent = true, consumer_warpgroups = 1"
    echo "d${d}_ctrue_bn192_stages2_bf16|$base, block_n = 192, consumer_warpgroups = 1"
  done
  echo "d64_ctrue_wg2_bf16|head_dim = 64 : i64, element_type = bf16, causal = true, consumer_warpgroups = 2"
  echo "d64_cfalse_wg2_regs_bf16|head_dim = 64 : i64, element_type = bf16, causal = false, consumer_warpgroups = 2, producer_registers = 40, consumer_registers = 232"
  echo "d128_ctrue_wg3_bf16|head_dim = 128 : i64, element_type = bf16, causal = true, consumer_warpgroups = 3"
  echo "d128_cfalse_wg2_regs_bf16|head_dim = 128 : i64, element_type = bf16, causal = false, producer_registers = 40, consumer_registers = 232"
  echo "d128_ctrue_stages3_bf16|head_dim = 128 : i64, element_type = bf16, causal = true, kv_stages = 3, block_n = 64"
  # The other head dims (issue 15): the defaults and the schedule variants.
  local dims
  for dims in "d96|head_dim = 96 : i64" "d192|head_dim = 192 : i64" \
      "d192v128|head_dim = 192 : i64, value_head_dim = 128 : i64" "d256|head_dim = 256 : i64"; do
    local n=${dims%%|*} a=${dims#*|}
    for c in false true; do
      echo "${n}_c${c}_default_bf16|$a, element_type = bf16, causal = $c"
    done
    echo "${n}_ctrue_default_f16|$a, element_type = f16, causal = true"
    echo "${n}_ctrue_nooverlap_bf16|$a, element_type = bf16, causal = true, overlap_softmax = false"
    echo "${n}_ctrue_nopingpong_bf16|$a, element_type = bf16, causal = true, pingpong = false"
    echo "${n}_ctrue_wg1_bf16|$a, element_type = bf16, causal = true, consumer_warpgroups = 1"
  done
  echo "d96_ctrue_persistent_bf16|head_dim = 96 : i64, element_type = bf16, causal = true, persistent = true"
  echo "d96_ctrue_wg2_bf16|head_dim = 96 : i64, element_type = bf16, causal = true, consumer_warpgroups = 2"
  echo "d256_ctrue_persistent_bn48_bf16|head_dim = 256 : i64, element_type = bf16, causal = true, persistent = true, block_n = 48"
}

if [[ $mode == list ]]; then
  configs
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$work/out
mkdir -p "$out"

lower_one() {
  local name=$1 attrs=$2
  cat >"$work/$name.mlir" <<EOF
gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86">] {
  kvpipe.attention_kernel @$name {$attrs}
}
EOF
  local input=$work/$name.mlir
  if [[ -n ${KVPIPE_EXPAND_OPT:-} ]]; then
    input=$work/$name.expanded.mlir
    if ! "$KVPIPE_EXPAND_OPT" "$work/$name.mlir" --kvpipe-expand-attention \
        -o "$input" 2>"$out/$name.err"; then
      echo "FAILED to expand $name: $(head -3 "$out/$name.err")" >&2
      return 1
    fi
  fi
  if ! "$KVPIPE_OPT" "$input" --kvpipe-to-ptx="ptx-file=$out/$name.ptx" \
      -o /dev/null 2>"$out/$name.err"; then
    echo "FAILED to lower $name: $(head -3 "$out/$name.err")" >&2
    return 1
  fi
  if [[ -x $PTXAS ]]; then
    # The lines that matter: registers, spills, stack, shared memory.
    "$PTXAS" -arch=sm_90a -v "$out/$name.ptx" -o /dev/null 2>&1 |
      grep -E 'registers|spill|stack' | sed 's/^ptxas info *: //' >"$out/$name.ptxas"
  fi
  rm -f "$out/$name.err"
}
export -f lower_one
export KVPIPE_OPT KVPIPE_EXPAND_OPT PTXAS work out

configs | tr '\n' '\0' |
  xargs -0 -P "$JOBS" -I{} bash -c 'IFS="|" read -r n a <<<"$1"; lower_one "$n" "$a"' _ {}

if [[ $mode == record ]]; then
  mkdir -p "$dir"
  cp "$out"/* "$dir"/
  echo "recorded $(ls "$out"/*.ptx | wc -l) kernels in $dir"
  exit 0
fi

# Instruction counts by opcode (first token of each instruction line).
opcodes() {
  grep -E '^\s+[a-z@]' "$1" | sed -E 's/^\s+(@%p[0-9]+ )?//; s/[ \t;].*//' | sort | uniq -c
}

status=0
for ptx in "$out"/*.ptx; do
  name=$(basename "$ptx" .ptx)
  if [[ ! -f $dir/$name.ptx ]]; then
    echo "NEW   $name (no baseline)"
    continue
  fi
  if cmp -s "$ptx" "$dir/$name.ptx"; then
    line="same  $name"
  else
    status=1
    line="DIFF  $name"
    counts=$(diff <(opcodes "$dir/$name.ptx") <(opcodes "$ptx") | grep '^[<>]' | tr '\n' ' ' || true)
    line+=" lines $(wc -l <"$dir/$name.ptx")->$(wc -l <"$ptx")"
    [[ -n $counts ]] && line+=" opcode counts: $counts" || line+=" (same opcode counts)"
  fi
  if [[ -f $dir/$name.ptxas && -f $out/$name.ptxas ]] &&
      ! cmp -s "$dir/$name.ptxas" "$out/$name.ptxas"; then
    status=1
    line+=" ptxas: $(tr '\n' ' ' <"$dir/$name.ptxas") -> $(tr '\n' ' ' <"$out/$name.ptxas")"
  fi
  echo "$line"
done
exit $status
