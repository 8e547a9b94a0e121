#!/bin/sh
# bench/gemm/run.sh — tfmc's GEMM (rt_linear, every ISA path and the
# OpenBLAS backend) against OpenBLAS called directly (every core type worth
# trying here), at bert-base and gpt2 shapes; the machine's fp32 FMA peak
# and DRAM read bandwidth alongside. Prints a markdown table (medians over
# interleaved rounds) and keeps the raw lines in bench/gemm/work/.
#
#   bench/gemm/run.sh [--quick] [--rounds N] [--threads T]
#
# Every configuration is a fresh process (the runtime chooses its backend
# and kernels once per process); one round runs each configuration once,
# and the rounds interleave them, so a slow stretch of a shared machine
# hits all configurations alike. Needs cc, python3, libopenblas0.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work="$here/work"
rounds=3
threads=2
quick=
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=--quick ;;
    --rounds) rounds=$2; shift ;;
    --threads) threads=$2; shift ;;
    *) echo "usage: $0 [--quick] [--rounds N] [--threads T]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$work"
# the runtime as its library is built: -O2, no -march (kernels by cpuid)
cc -std=c11 -O2 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -I"$root" \
  "$here/gemm_bench.c" "$root/runtime/rt_gemm.c" "$root/runtime/rt_gemm_avx512.c" \
  "$root/runtime/rt_gemm_avx2.c" "$root/runtime/rt_gemm_avx512bf16.c" "$root/runtime/rt_gemm_i8.c" "$root/runtime/rt_act.c" \
  "$root/runtime/rt_pool.c" -o "$work/gemm_bench" -lpthread -lm -ldl
cc -std=c11 -O2 -Wall -Wextra -Werror -mavx2 -mfma -pthread "$root/bench/peak_fma.c" \
  -o "$work/peak_fma"
cc -std=c11 -O2 -Wall -Wextra -Werror -mavx2 -pthread "$root/bench/stream_read.c" \
  -o "$work/stream_read"

out="$work/results.jsonl"
: >"$out"
clean="env -u TFMC_GEMM -u TFMC_GEMM_ISA -u OPENBLAS_CORETYPE -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS"
run() { # label mode [VAR=value...]
  label=$1 mode=$2
  shift 2
  $clean "$@" "$work/gemm_bench" "$mode" --threads "$threads" --label "$label" $quick >>"$out"
}
echo "{\"loadavg_before\": \"$(cat /proc/loadavg)\"}" >>"$out"
"$work/peak_fma" 1 "$threads" | sed 's/^{/{"probe": "fma", /' >>"$out"
"$work/peak_fma" --avx2 1 "$threads" | sed 's/^{/{"probe": "fma", /' >>"$out"
"$work/stream_read" 1 "$threads" | sed 's/^{/{"probe": "read", /' >>"$out"
r=1
while [ "$r" -le "$rounds" ]; do
  echo "round $r of $rounds ($(cat /proc/loadavg))" >&2
  run packed-avx512 packed TFMC_GEMM_ISA=avx512
  run packed-avx2 packed TFMC_GEMM_ISA=avx2
  run packed-scalar packed TFMC_GEMM_ISA=scalar
  run bf16 bf16
  run bf16-avx512 bf16 TFMC_GEMM_ISA=avx512
  run bf16-avx2 bf16 TFMC_GEMM_ISA=avx2
  run int8 int8
  run int8-avx2 int8 TFMC_GEMM_ISA=avx2
  run tfmc-avx512 tfmc TFMC_GEMM=portable TFMC_GEMM_ISA=avx512
  run tfmc-avx2 tfmc TFMC_GEMM=portable TFMC_GEMM_ISA=avx2
  run tfmc-scalar tfmc TFMC_GEMM=portable TFMC_GEMM_ISA=scalar
  run tfmc-openblas tfmc
  run openblas-default openblas
  run openblas-SkylakeX openblas OPENBLAS_CORETYPE=SkylakeX
  run openblas-Zen openblas OPENBLAS_CORETYPE=Zen
  run openblas-Haswell openblas OPENBLAS_CORETYPE=Haswell
  r=$((r + 1))
done
"$work/peak_fma" 1 "$threads" | sed 's/^{/{"probe": "fma", /' >>"$out"
"$work/stream_read" 1 "$threads" | sed 's/^{/{"probe": "read", /' >>"$out"
echo "{\"loadavg_after\": \"$(cat /proc/loadavg)\"}" >>"$out"
python3 "$here/table.py" "$out" --threads "$threads"
