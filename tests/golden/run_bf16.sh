#!/bin/bash
# tests/golden/run_bf16.sh TFMC — bf16 weights (--weights-dtype bf16) against
# PyTorch fp32:
#  - the PyTorch goldens (tests/golden/NAME, tools/gen_goldens.py) through
#    the JIT, and bert's through an executable (`tfmc build`, the packed
#    file holding bf16 panels), within atol 0.05 + rtol 0.02 * |ref|: bf16
#    keeps 8 bits of mantissa, so these random-weight models land within
#    0.3-2.5e-2 of fp32 (README, "bf16 weights"); a layout or kernel bug
#    is off by the values' own size;
#  - the trained examples give exactly the fp32 greedy ids: examples/sort's
#    test batch (every argmax per position, as `tfmc run` prints them) and
#    examples/reverse's held-out words (PyTorch's greedy translations).
# Each tfmc step is bounded by a timeout; the scratch directory is removed.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 TFMC" >&2; exit 2; }
tfmc=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-bf16.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
t() { timeout 300 "$@"; }

for name in bert gpt2 seq2seq annotated anatomy torchnn_transformer; do
  d=$root/tests/golden/$name
  extra=()
  [ -s "$d/args" ] && read -r -a extra < "$d/args"
  t "$tfmc" run "$d/model.tfm" --weights "$d/weights.safetensors" --inputs "$d/inputs.safetensors" \
    --outputs "$tmp/$name.safetensors" --weights-dtype bf16 "${extra[@]}" > /dev/null ||
    fail "$name: tfmc run --weights-dtype bf16 failed"
  echo "golden $name, jit, bf16 weights:"
  t "$tfmc" compare "$tmp/$name.safetensors" "$d/expected.safetensors" --atol 0.05 --rtol 0.02 ||
    fail "$name: bf16 outputs too far from PyTorch fp32"
done

d=$root/tests/golden/bert
extra=()
[ -s "$d/args" ] && read -r -a extra < "$d/args"
t "$tfmc" build "$d/model.tfm" --weights "$d/weights.safetensors" --weights-dtype bf16 \
  "${extra[@]}" -o "$tmp/bert_bf16" > /dev/null || fail "tfmc build --weights-dtype bf16 failed"
t "$tmp/bert_bf16" --inputs "$d/inputs.safetensors" --outputs "$tmp/exe.safetensors" > /dev/null ||
  fail "the bf16 executable failed"
echo "golden bert, executable, bf16 weights:"
t "$tfmc" compare "$tmp/exe.safetensors" "$d/expected.safetensors" --atol 0.05 --rtol 0.02 ||
  fail "bert executable: bf16 outputs too far from PyTorch fp32"
# the executable reads the same bf16 panels the JIT packs: the same results
t "$tfmc" compare "$tmp/exe.safetensors" "$tmp/bert.safetensors" --atol 1e-5 --rtol 1e-5 > /dev/null ||
  fail "bert: the bf16 executable and the bf16 JIT differ"

ex=$root/examples/sort
t "$tfmc" run "$ex/model.tfm" --weights "$ex/weights.safetensors" --inputs "$ex/inputs.safetensors" \
  > "$tmp/sort_f32.txt" || fail "sort f32"
t "$tfmc" run "$ex/model.tfm" --weights "$ex/weights.safetensors" --inputs "$ex/inputs.safetensors" \
  --weights-dtype bf16 > "$tmp/sort_bf16.txt" || fail "sort bf16"
diff "$tmp/sort_f32.txt" "$tmp/sort_bf16.txt" || fail "sort: bf16 greedy ids differ from fp32"
echo "examples/sort: bf16 argmax ids identical to fp32 ($(grep -c 'output:' "$tmp/sort_bf16.txt") sequences)"

ex=$root/examples/reverse
k=0
while IFS=$'\t' read -r word want; do
  k=$((k + 1))
  got=$(t "$tfmc" run "$ex/model.tfm" --weights "$ex/weights.safetensors" --vocab "$ex/vocab.txt" \
    --text "$word" --generate 20 --weights-dtype bf16) || fail "reverse '$word'"
  [ "$got" = "$want" ] || fail "reverse, bf16: '$word' -> '$got', PyTorch '$want'"
done < "$ex/expected.txt"
echo "examples/reverse: bf16 greedy translations identical to PyTorch's ($k words)"
echo "PASS bf16"
