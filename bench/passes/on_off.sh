#!/bin/bash
# bench/passes/on_off.sh — what each pass of -O2 buys, measured by `tfmc
# bench`: every model is compiled with the whole pipeline, with each pass
# left out in turn and with no passes, all variants run interleaved in one
# process (median of ROUNDS runs each), and the table says per pass the
# kernels removed, the activation bytes no longer written and the median
# ms with and without it. Random weights, batch 1, seq 128.
# usage: bench/passes/on_off.sh [BUILD_DIR] [ROUNDS] [SPEC...]
#   default specs: bench/specs/bert_base.tfm bench/specs/gpt2_small.tfm
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
rounds=${2:-20}
shift $(( $# > 2 ? 2 : $# ))
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=("$root/bench/specs/bert_base.tfm" "$root/bench/specs/gpt2_small.tfm")
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
for s in "${specs[@]}"; do
  echo
  echo "\$ tfmc bench $(basename "$s") --init random --seq 128 --rounds $rounds"
  "$build/tfmc" bench "$s" --init random --seq 128 --rounds "$rounds"
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
