#!/bin/bash
# tests/frontend/hf_import_golden.sh TFMC CONFIG.json GOLDEN_DIR BACKEND —
# a Hugging Face config imported end to end: `TFMC import-hf CONFIG.json`
# writes the spec, which then runs GOLDEN_DIR's PyTorch checkpoint (HF
# names) on its inputs through tests/golden/run_golden.sh, compared with
# its expected outputs. So the imported spec, not the golden's
# hand-written one, must reproduce PyTorch.
set -eu
[ $# -eq 4 ] || { echo "usage: $0 TFMC CONFIG.json GOLDEN_DIR BACKEND" >&2; exit 2; }
tfmc=$1
config=$2
golden=${3%/}
backend=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-hf-golden.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
dir=$tmp/$(basename "$golden")
mkdir "$dir"
"$tfmc" import-hf "$config" -o "$dir/model.tfm"
for f in weights.safetensors inputs.safetensors expected.safetensors args; do
  [ -e "$golden/$f" ] && ln -s "$(cd "$golden" && pwd)/$f" "$dir/$f"
done
"$here/../golden/run_golden.sh" "$tfmc" "$dir" "$backend"
