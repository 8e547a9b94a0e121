#!/bin/sh
# bench/passes/epilogue.sh — what fuse-epilogue and tile buy, measured with
# `tfmc bench` (each pass of -O2 left out in turn, every variant run
# interleaved in one process: README "Measuring a pass") on bert-base-like
# and gpt2-small-like specs at batch 1, seq 128, random weights.
#
#   bench/passes/epilogue.sh [--rounds N] [--threads T] [--seq S]
#
# Prints the machine (CPU, ISA, load average before and after) and the two
# tables; the JSON of each run goes to bench/work/passes/. Times are only
# comparable within one run: read the ratios against the noise line.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tfmc="${TFMC:-$root/build/tfmc}"
rounds=10
threads=""
seq=128
while [ $# -gt 0 ]; do
  case "$1" in
  --rounds) rounds="$2"; shift 2 ;;
  --threads) threads="--threads $2"; shift 2 ;;
  --seq) seq="$2"; shift 2 ;;
  *) echo "usage: $0 [--rounds N] [--threads T] [--seq S]" >&2; exit 2 ;;
  esac
done
[ -x "$tfmc" ] || { echo "epilogue.sh: no $tfmc (build tfmc first: tools/setup.sh)" >&2; exit 1; }
work="$root/bench/work/passes"
mkdir -p "$work"
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
isa=$(grep -m1 '^flags' /proc/cpuinfo | grep -o 'avx512f\|avx2' | sort -u | tr '\n' ' ')
echo "machine: $cpu, $(nproc) CPUs, ISA: ${isa:-baseline}"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for spec in bert_base gpt2_small; do
  # shellcheck disable=SC2086
  "$tfmc" bench "$root/bench/specs/$spec.tfm" --init random --seq "$seq" --rounds "$rounds" \
    $threads --json "$work/$spec.json"
  echo
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
