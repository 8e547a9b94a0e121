#!/bin/bash
# bench/backends/run.sh — the LLVM backend's figures for bert-base dims at
# seq 128, batch 1, measured side by side in one run: JIT compile time, the
# JIT's forward time, the interpreter's, and the sum of the same matmuls
# through the runtime's GEMM entry alone. Medians of several runs each.
# usage: bench/backends/run.sh [BUILD_DIR]   (default: build)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
tfmc=$build/tfmc
work=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-bench-backends.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
cc -O2 -I"$root" "$here/matmul_sum.c" "$build/libtfmc_rt.a" -lm -lpthread -ldl -o "$work/matmul_sum"
tokens=$(awk 'BEGIN { srand(1); for (i = 0; i < 128; i++) printf "%d ", int(rand() * 30522) }')
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in 1 2 3; do
  "$tfmc" run "$here/bert_base.tfm" --init random --tokens "$tokens" --repeat 5 2>&1 >/dev/null | grep timing
  "$work/matmul_sum" 128 5
done
echo "interpreter (slow; 3 runs):"
"$tfmc" run "$here/bert_base.tfm" --init random --tokens "$tokens" --backend interp --repeat 3 2>&1 >/dev/null | grep timing
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
