#!/bin/bash
# bench/backends/compile.sh — what share-kernels buys at compile time:
# the JIT's compile time (lowering excluded: LLVM emission, O3, code
# generation) and the emitted model.c's size, for bert-base and gpt2-small,
# with the default -O2 pipeline and with -O2 less share-kernels, measured
# in interleaved rounds in one run. Medians of ROUNDS (default 5) each.
# usage: bench/backends/compile.sh [BUILD_DIR] [ROUNDS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
rounds=${2:-5}
tfmc=$build/tfmc
work=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-bench-compile.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
off="-share-kernels"   # -O2 without share-kernels (--passes=-NAME: the level less NAME)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
compile_ms() { # SPEC PASSES...
  "$tfmc" run "$1" --init random --tokens "1 2 3 4" --repeat 1 --threads 1 "${@:2}" 2>&1 >/dev/null |
    sed -n 's/.*compile \([0-9.]*\) ms.*/\1/p'
}
printf "%-12s %8s %8s %9s %10s %10s %8s\n" model kernels funcs "ms -O2" "ms no-shr" ratio "C KB"
# bert-base: the encoder of bench/backends (token ids only); gpt2-small: bench/specs
for s in "$here/bert_base.tfm" "$root/bench/specs/gpt2_small.tfm"; do
  spec=$(basename "$s" .tfm)
  : >"$work/on" && : >"$work/off"
  for r in $(seq "$rounds"); do
    compile_ms "$s" -O2 >>"$work/on"
    compile_ms "$s" -O2 --passes="$off" >>"$work/off"
  done
  on=$(median <"$work/on"); offm=$(median <"$work/off")
  stats=$("$tfmc" ir "$s" -O2 --level loop --pass-stats 2>&1 >/dev/null | sed -n 's/.*share-kernels.* \([0-9]*\) kernels run as \([0-9]*\) functions.*/\1 \2/p')
  "$tfmc" emit-c "$s" --init random -o "$work/c_on" >/dev/null 2>&1
  "$tfmc" emit-c "$s" --init random -O2 --passes="$off" -o "$work/c_off" >/dev/null 2>&1
  kb_on=$(( $(stat -c %s "$work/c_on/model.c") / 1024 )); kb_off=$(( $(stat -c %s "$work/c_off/model.c") / 1024 ))
  printf "%-12s %8s %8s %9.1f %10.1f %10.3f %8s\n" "$spec" ${stats:-? ?} "$on" "$offm" \
    "$(echo "$on / $offm" | bc -l)" "$kb_on/$kb_off"
  rm -rf "$work/c_on" "$work/c_off"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
