#!/bin/sh
# bench/run.sh — tfmc's benchmark suite, one command:
#
#   bench/run.sh [--only WORKLOAD]... [--skip FRAMEWORK]... [--quick]
#
# Builds what it needs (tfmc in build-bench/ as a Release build, the two
# machine probes, onnxruntime-node from bench/package-lock.json with
# `npm ci --ignore-scripts`: the suite's only download), then runs
# bench/bench.py, which prepares the models (PyTorch, random weights, fixed
# seeds), cross-checks every framework's outputs, measures the machine's
# ceilings and times tfmc (JIT, executable, emitted C) against PyTorch eager
# (out of the box and tuned) and ONNX Runtime, and writes bench/RESULTS.md.
# Everything it generates lives in bench/work/ (git-ignored).
#
# tfmc is built in build-bench/ at the top of the checkout. Options after
# the script name go to bench.py (see `/usr/bin/python3 bench/bench.py --help`).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=$root/build-bench
work=$here/work

die() { echo "bench/run.sh: $*" >&2; exit 1; }

for tool in cmake cc make node npm /usr/bin/python3 /usr/bin/time; do
  command -v "$tool" >/dev/null 2>&1 || die "needs $tool (Debian: see tools/setup.sh; node/npm for ONNX Runtime)"
done
/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null ||
  die "needs PyTorch for /usr/bin/python3 (Debian: apt-get install python3-torch)"

mkdir -p "$work/bin"

echo "== building tfmc (Release) in $build"
# -Wno-error=maybe-uninitialized: gcc 12 at -O3 warns about interp.c's
# shape arrays (false positives the default -O2 build does not see).
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS=-Wno-error=maybe-uninitialized >"$work/cmake.log" 2>&1 ||
  die "cmake configure failed; see $work/cmake.log"
cmake --build "$build" --target tfmc -j"$(nproc)" >"$work/build.log" 2>&1 ||
  die "building tfmc failed; see $work/build.log"

echo "== building the machine probes"
cc -std=c11 -O2 -Wall -Wextra -Werror -mavx2 -mfma -pthread "$here/peak_fma.c" \
  -o "$work/bin/peak_fma" || die "cannot build peak_fma.c"
cc -std=c11 -O2 -Wall -Wextra -Werror -mavx2 -pthread "$here/stream_read.c" \
  -o "$work/bin/stream_read" || die "cannot build stream_read.c"

if ! (cd "$here" && node -e 'require("onnxruntime-node")' >/dev/null 2>&1); then
  echo "== installing onnxruntime-node (npm ci --ignore-scripts)"
  (cd "$here" && npm ci --ignore-scripts --no-audit --no-fund) >"$work/npm.log" 2>&1 ||
    die "npm ci failed; see $work/npm.log"
fi

echo "== running the suite"
exec /usr/bin/python3 "$here/bench.py" --tfmc "$build/tfmc" --bin "$work/bin" --work "$work" "$@"
