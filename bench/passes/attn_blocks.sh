#!/bin/sh
# bench/passes/attn_blocks.sh — what the tile pass's attention blocks buy:
# rt_attention_flash alone (bert-base heads: 12 x 64, batch 1, S keys and
# queries) at a grid of block_q x block_k, interleaved rounds in one process
# (bench/passes/attn_blocks.c), against the choice the tile pass makes for
# this machine (its --pass-stats note is printed first).
# usage: bench/passes/attn_blocks.sh [BUILD_DIR] [S] [THREADS] [ROUNDS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
S=${2:-2048}
threads=${3:-2}
rounds=${4:-7}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cc -std=c11 -O2 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -I"$root" "$here/attn_blocks.c" \
  "$build/libtfmc_rt.a" -lpthread -lm -ldl -o "$bin/attn_blocks"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/tfmc" ir "$root/bench/specs/bert_base.tfm" --level loop -O2 --pass-stats 2>&1 >/dev/null |
  grep '^tile' | sed 's/.*rt_linear calls: [^(]*/tile pass: /'
"$bin/attn_blocks" "$S" "$rounds" "$threads" 64x128 64x672 32x128 64x64 64x256 64x512 128x128 \
  128x256 128x512
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
