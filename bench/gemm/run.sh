#!/bin/sh
# bench/gemm/run.sh — tfmc's GEMM (rt_linear_packed on prepacked weights,
# fp32, bf16 and int8, every ISA path; rt_linear, portable and on OpenBLAS)
# against OpenBLAS called directly (every core type plausible on this CPU)
# and ONNX Runtime's MatMul, at bert-base and gpt2 shapes; the machine's
# fp32 FMA peak (widest vector unit, and 256-bit for reference) and DRAM
# read bandwidth alongside (a read probe before, after and in every round;
# the decode rows are set against the median reading). Prints markdown
# tables (medians over interleaved rounds; the first one side by side:
# packed, bf16, OpenBLAS with its best core type, ORT, with % of the
# widest FMA peak and, for M = 1 and 8, weight GB/s against the DRAM read
# bandwidth) and keeps the raw lines in bench/gemm/work/.
#
#   bench/gemm/run.sh [--quick] [--rounds N] [--threads T] [--no-ort]
#
# Every configuration is a fresh process (the runtime chooses its backend
# and kernels once per process); one round runs each configuration once,
# and the rounds interleave them, so a slow stretch of a shared machine
# hits all configurations alike. Needs cc, python3, libopenblas0; for the
# ORT column /usr/bin/python3 with torch (exports the one-MatMul models
# once into work/ort/, ~1.3 GB: the weights rotate through > 256 MiB per
# shape as gemm_bench's do), node and npm (onnxruntime-node from
# bench/package-lock.json, as bench/run.sh installs it); --no-ort skips it.
# tfmc's rows use the cache blocks the tile pass chooses for this machine
# and T threads, asked of build/tfmc (`tfmc ir ... --pass-stats`), as a
# model compiled here gets them; without build/tfmc, rt_linear's
# defaults. The backend column names them.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work="$here/work"
rounds=3
threads=2
quick=
ort=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=--quick ;;
    --rounds) rounds=$2; shift ;;
    --threads) threads=$2; shift ;;
    --no-ort) ort= ;;
    *) echo "usage: $0 [--quick] [--rounds N] [--threads T] [--no-ort]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$work"
# the runtime as its library is built: -O2, no -march (kernels by cpuid);
# rt_weights.c for rt_weights_advise_huge only (--gc-sections drops the
# rest, which would need the model runtime)
cc -std=c11 -O2 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -ffunction-sections -I"$root" \
  "$here/gemm_bench.c" "$root/runtime/rt_gemm.c" "$root/runtime/rt_gemm_avx512.c" \
  "$root/runtime/rt_gemm_avx2.c" "$root/runtime/rt_gemm_avx512bf16.c" "$root/runtime/rt_gemm_i8.c" "$root/runtime/rt_act.c" \
  "$root/runtime/rt_pool.c" "$root/runtime/rt_weights.c" -Wl,--gc-sections \
  -o "$work/gemm_bench" -lpthread -lm -ldl
cc -std=c11 -O2 -Wall -Wextra -Werror -mavx2 -mfma -pthread "$root/bench/peak_fma.c" \
  -o "$work/peak_fma"
cc -std=c11 -O2 -Wall -Wextra -Werror -mavx2 -pthread "$root/bench/stream_read.c" \
  -o "$work/stream_read"

# OpenBLAS core types plausible here (bench/bench.py's blas_candidates):
# the AVX-512 kernels only where the CPU has AVX-512F (elsewhere they die
# with SIGILL), Cooperlake where it has AVX512_BF16, the AVX2 ones where it
# has AVX2 and FMA; openblas-default is OpenBLAS's own pick
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { case " $flags " in *" $1 "*) return 0 ;; esac; return 1; }
cores=
has avx512f && cores="$cores SkylakeX"
has avx512_bf16 && cores="$cores Cooperlake"
has avx2 && has fma && cores="$cores Haswell Zen"

if [ -n "$ort" ]; then
  if ! /usr/bin/python3 -c 'import torch' 2>/dev/null || ! command -v node >/dev/null; then
    echo "bench/gemm/run.sh: no torch for /usr/bin/python3 or no node: the ORT column is skipped" >&2
    ort=
  else
    if ! (cd "$root/bench" && node -e 'require("onnxruntime-node")' >/dev/null 2>&1); then
      echo "installing onnxruntime-node (npm ci --ignore-scripts in bench/)" >&2
      (cd "$root/bench" && npm ci --ignore-scripts --no-audit --no-fund) >"$work/npm.log" 2>&1 || {
        echo "bench/gemm/run.sh: npm ci failed (see $work/npm.log): the ORT column is skipped" >&2
        ort=
      }
    fi
    [ -z "$ort" ] || /usr/bin/python3 "$here/ort_matmul.py" --out "$work/ort" || {
      echo "bench/gemm/run.sh: exporting the MatMul models failed: the ORT column is skipped" >&2
      ort=
    }
  fi
fi

blocks= # gemm_bench's --blocks argument, or nothing: rt_linear's defaults
if [ -x "$root/build/tfmc" ]; then
  b=$("$root/build/tfmc" ir "$root/tests/passes/loop/tile.tfloop" --passes=tile \
    --target-threads "$threads" --pass-stats 2>&1 >/dev/null |
    sed -n 's/.* mc=\([0-9]*\) nc=\([0-9]*\) kc=\([0-9]*\) .*/\1,\2,\3/p' | head -n 1)
  [ -n "$b" ] && blocks="--blocks $b"
fi
[ -n "$blocks" ] ||
  echo "bench/gemm/run.sh: no tile pass choice from build/tfmc: tfmc's rows use rt_linear's default blocks" >&2

out="$work/results.jsonl"
: >"$out"
clean="env -u TFMC_GEMM -u TFMC_GEMM_ISA -u OPENBLAS_CORETYPE -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS"
run() { # label mode [VAR=value...]
  label=$1 mode=$2
  shift 2
  $clean "$@" "$work/gemm_bench" "$mode" --threads "$threads" --label "$label" $blocks $quick \
    >>"$out"
}
echo "{\"loadavg_before\": \"$(cat /proc/loadavg)\"}" >>"$out"
"$work/peak_fma" 1 "$threads" | sed 's/^{/{"probe": "fma", /' >>"$out"
"$work/peak_fma" --avx2 1 "$threads" | sed 's/^{/{"probe": "fma", /' >>"$out"
"$work/stream_read" 1 "$threads" | sed 's/^{/{"probe": "read", /' >>"$out"
r=1
while [ "$r" -le "$rounds" ]; do
  echo "round $r of $rounds ($(cat /proc/loadavg))" >&2
  # a read probe every round: the decode rows' bar is the median reading
  "$work/stream_read" "$threads" | sed "s/^{/{\"probe\": \"read\", \"round\": $r, /" >>"$out"
  run packed packed
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
  for c in $cores; do
    run "openblas-$c" openblas OPENBLAS_CORETYPE="$c"
  done
  if [ -n "$ort" ]; then
    $clean node "$here/ort_matmul.js" "$work/ort" --threads "$threads" $quick >>"$out" ||
      echo "bench/gemm/run.sh: ort_matmul.js failed in round $r" >&2
  fi
  r=$((r + 1))
done
"$work/peak_fma" 1 "$threads" | sed 's/^{/{"probe": "fma", /' >>"$out"
"$work/stream_read" 1 "$threads" | sed 's/^{/{"probe": "read", /' >>"$out"
echo "{\"loadavg_after\": \"$(cat /proc/loadavg)\"}" >>"$out"
python3 "$here/table.py" "$out" --threads "$threads"
