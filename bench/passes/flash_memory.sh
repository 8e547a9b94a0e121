#!/bin/bash
# bench/passes/flash_memory.sh — peak memory of one encoder forward against
# the sequence length, with flash-attention (-O2) and without it: the peak
# resident set (/usr/bin/time -v) of `tfmc run` on bench/passes/encoder_8k.tfm
# (bert-base dims, 1 layer, max_len 8192, random weights, batch 1) at
# S = 1024, 2048, 4096, 8192. The JIT and the weights take the same memory in
# both columns; what differs is what attention keeps per thread: the plain
# form's scores are block_q x S floats per task, the flash form's
# block_q x block_k.
# usage: bench/passes/flash_memory.sh [BUILD_DIR] [THREADS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
threads=${2:-2}
spec=$here/encoder_8k.tfm
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); $threads threads"
printf "%6s %16s %16s %12s %12s\n" S "peak MB flash" "peak MB plain" "s flash" "s plain"
peak() { # S PASSES... -> "KB SECONDS"
  local S=$1
  shift
  local toks
  toks=$(awk -v n="$S" 'BEGIN { for (i = 0; i < n; i++) printf "%d ", 1 + (i * 7919) % 30000 }')
  /usr/bin/time -f "%M %e" "$build/tfmc" run "$spec" --init random --tokens "$toks" \
    --threads "$threads" "$@" 2>&1 >/dev/null | tail -1
}
for S in 1024 2048 4096 8192; do
  read -r kb_on s_on < <(peak "$S" -O2)
  read -r kb_off s_off < <(peak "$S" -O2 --disable-pass=flash-attention)
  printf "%6d %16.1f %16.1f %12s %12s\n" "$S" "$(echo "$kb_on / 1024" | bc -l)" \
    "$(echo "$kb_off / 1024" | bc -l)" "$s_on" "$s_off"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
