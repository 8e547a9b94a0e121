#!/bin/bash
# bench/passes/fusion.sh — what the fusion passes buy: `tfmc bench` on
# bert-base and gpt2-small (bench/specs, random weights, batch 1, seq 128):
# each pass of -O2 left out in turn and all of -O2 against -O0, interleaved
# in one process (kernels per forward, activation bytes not written, median
# ms with and without). Prints the machine and its load first: compare
# ratios against the noise line bench prints, not milliseconds across runs.
# usage: bench/passes/fusion.sh [BUILD_DIR] [ROUNDS] [SEQ]
#   JSON results go to $OUT_DIR (default: a temporary directory, removed).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
rounds=${2:-10}
seq=${3:-128}
tfmc=$build/tfmc
[ -x "$tfmc" ] || { echo "fusion.sh: no $tfmc (build first)" >&2; exit 1; }
out=${OUT_DIR:-}
if [ -z "$out" ]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-bench-fusion.XXXXXX")
  trap 'rm -rf -- "$out"' EXIT
fi
isa=$(grep -m1 -o -w 'avx512f' /proc/cpuinfo || grep -m1 -o -w 'avx2' /proc/cpuinfo || echo baseline)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $isa; load $(cut -d' ' -f1-3 /proc/loadavg)"
for spec in bert_base gpt2_small; do
  "$tfmc" bench "$root/bench/specs/$spec.tfm" --init random --seq "$seq" --rounds "$rounds" \
    --json "$out/$spec.json"
  echo
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
