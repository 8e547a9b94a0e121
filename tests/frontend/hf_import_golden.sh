#!/bin/bash
# tests/frontend/hf_import_golden.sh TFMC CONFIG.json GOLDEN_DIR BACKEND [WEIGHTS]
# — a Hugging Face config imported end to end: `TFMC import-hf CONFIG.json`
# writes the spec, which then runs GOLDEN_DIR's PyTorch checkpoint (HF
# names), or WEIGHTS (the same tensors under other names), on its inputs
# through tests/golden/run_golden.sh, compared with its expected outputs.
# So the imported spec, not the golden's hand-written one, must reproduce
# PyTorch. (A model.safetensors beside CONFIG.json is what import-hf reads
# the root from.)
set -eu
[ $# -eq 4 ] || [ $# -eq 5 ] ||
  { echo "usage: $0 TFMC CONFIG.json GOLDEN_DIR BACKEND [WEIGHTS]" >&2; exit 2; }
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
  if [ $f = weights.safetensors ] && [ $# -eq 5 ]; then
    ln -s "$(cd "$(dirname "$5")" && pwd)/$(basename "$5")" "$dir/$f"
  elif [ -e "$golden/$f" ]; then
    ln -s "$(cd "$golden" && pwd)/$f" "$dir/$f"
  fi
done
"$here/../golden/run_golden.sh" "$tfmc" "$dir" "$backend"
