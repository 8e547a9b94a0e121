#!/bin/bash
# tests/golden/run_golden_exe.sh TFMC DIR [--embed-weights] — one PyTorch
# parity golden through a standalone executable: `tfmc build` it (with the
# extra arguments in DIR/args, e.g. --attention), run it on
# DIR/inputs.safetensors, compare with DIR/expected.safetensors within
# atol 1e-4 + rtol 1e-4 * |ref|. Also checks the executable does not need
# LLVM (ldd). The scratch directory is always removed.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 TFMC GOLDEN_DIR [--embed-weights]" >&2; exit 2; }
tfmc=$1
dir=${2%/}
embed=${3:-}
name=$(basename "$dir")
extra=()
if [ -s "$dir/args" ]; then
  read -r -a extra < "$dir/args" || true
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-exe-$name.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
timeout 300 "$tfmc" build "$dir/model.tfm" --weights "$dir/weights.safetensors" -o "$tmp/model" \
  ${embed:+"$embed"} "${extra[@]}"
if ldd "$tmp/model" | grep -qi llvm; then
  echo "$0: $tmp/model depends on LLVM:" >&2
  ldd "$tmp/model" >&2
  exit 1
fi
if [ -n "$embed" ] && [ -e "$tmp/model.weights" ]; then
  echo "$0: --embed-weights left a weights file next to the executable" >&2
  exit 1
fi
timeout 300 "$tmp/model" --inputs "$dir/inputs.safetensors" --outputs "$tmp/out.safetensors"
"$tfmc" compare "$tmp/out.safetensors" "$dir/expected.safetensors" --atol 1e-4 --rtol 1e-4
