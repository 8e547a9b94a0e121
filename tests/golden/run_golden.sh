#!/bin/bash
# tests/golden/run_golden.sh TFMC DIR BACKEND — one PyTorch parity golden.
#
# Runs DIR/model.tfm with DIR/weights.safetensors on DIR/inputs.safetensors
# through `TFMC run --backend BACKEND` (plus the extra arguments in DIR/args,
# e.g. `--attention decoder.1.cross`) and compares every output with
# DIR/expected.safetensors (made by tools/gen_goldens.py) within
# atol 1e-4 + rtol 1e-4 * |ref|.
#
# Exit status: 0 pass, 1 mismatch or tfmc failure, 2 bad usage or an
# incomplete golden directory. Each tfmc step is bounded by a timeout
# (TFMC_GOLDEN_TIMEOUT seconds, default 300) so a hang fails the test
# instead of stalling the suite. The scratch directory is always removed.
set -eu

usage() {
  echo "usage: $0 TFMC GOLDEN_DIR BACKEND" >&2
  exit 2
}
[ $# -eq 3 ] || usage
tfmc=$1
dir=${2%/}
backend=$3
name=$(basename "$dir")

[ -x "$tfmc" ] || { echo "$0: $tfmc is not an executable" >&2; exit 2; }
for f in model.tfm weights.safetensors inputs.safetensors expected.safetensors; do
  [ -f "$dir/$f" ] || { echo "$0: $dir/$f is missing" >&2; exit 2; }
done

# Extra `tfmc run` arguments: whitespace-separated words on the first line
# of DIR/args (an absent or empty file means none). Read into an array so
# nothing in the file is glob-expanded or evaluated.
extra=()
if [ -s "$dir/args" ]; then
  read -r -a extra < "$dir/args" || true
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-golden-$name.XXXXXX")
cleanup() { rm -rf -- "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

limit=${TFMC_GOLDEN_TIMEOUT:-300}
bounded() {
  if command -v timeout >/dev/null 2>&1; then
    timeout "$limit" "$@"
  else
    "$@"
  fi
}

echo "golden $name, backend $backend${extra[*]:+, args: ${extra[*]}}"
set +e
bounded "$tfmc" run "$dir/model.tfm" \
  --weights "$dir/weights.safetensors" \
  --inputs "$dir/inputs.safetensors" \
  --outputs "$tmp/out.safetensors" \
  --backend "$backend" "${extra[@]}"
status=$?
set -e
if [ $status -ne 0 ]; then
  [ $status -eq 124 ] && echo "$0: tfmc run timed out after ${limit}s" >&2
  echo "FAIL $name: tfmc run exited with status $status" >&2
  exit 1
fi
[ -f "$tmp/out.safetensors" ] || { echo "FAIL $name: tfmc run wrote no outputs" >&2; exit 1; }

set +e
bounded "$tfmc" compare "$tmp/out.safetensors" "$dir/expected.safetensors" \
  --atol 1e-4 --rtol 1e-4
status=$?
set -e
if [ $status -ne 0 ]; then
  echo "FAIL $name: outputs differ from PyTorch (tfmc compare status $status)" >&2
  exit 1
fi
echo "PASS $name"
