#!/bin/bash
# tests/golden/run_lowp.sh TFMC DTYPE — low-precision weights
# (--weights-dtype "$dtype" | int8) against PyTorch fp32:
#  - the PyTorch goldens (tests/golden/NAME, tools/gen_goldens.py) through
#    the JIT, and bert's through an executable (`tfmc build`, the packed
#    file holding the low-precision panels), within atol + rtol * |ref|:
#    bf16 (8 bits of mantissa) 0.05 + 0.02 |ref|, int8 (one scale per
#    output column, x quantised per row) 0.1 + 0.05 |ref|. These
#    random-weight models land within 0.3-2.5e-2 (bf16) and 0.5-5.3e-2
#    (int8) of fp32 (README, "Low-precision weights"); a layout or kernel
#    bug is off by the values' own size;
#  - the trained examples give exactly the fp32 greedy ids: examples/sort's
#    test batch (every argmax per position, as `tfmc run` prints them) and
#    examples/reverse's held-out words (PyTorch's greedy translations).
# Each tfmc step is bounded by a timeout; the scratch directory is removed.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 TFMC bf16|int8" >&2; exit 2; }
tfmc=$1
dtype=$2
case "$dtype" in
  bf16) atol=0.05 rtol=0.02 ;;
  int8) atol=0.1 rtol=0.05 ;;
  *) echo "$0: unknown dtype '$dtype'" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-lowp.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
t() { timeout 300 "$@"; }

for name in bert gpt2 seq2seq annotated anatomy torchnn_transformer; do
  d=$root/tests/golden/$name
  extra=()
  [ -s "$d/args" ] && read -r -a extra < "$d/args"
  t "$tfmc" run "$d/model.tfm" --weights "$d/weights.safetensors" --inputs "$d/inputs.safetensors" \
    --outputs "$tmp/$name.safetensors" --weights-dtype "$dtype" "${extra[@]}" > /dev/null ||
    fail "$name: tfmc run --weights-dtype $dtype failed"
  echo "golden $name, jit, $dtype weights:"
  t "$tfmc" compare "$tmp/$name.safetensors" "$d/expected.safetensors" --atol "$atol" --rtol "$rtol" ||
    fail "$name: $dtype outputs too far from PyTorch fp32"
done

d=$root/tests/golden/bert
extra=()
[ -s "$d/args" ] && read -r -a extra < "$d/args"
t "$tfmc" build "$d/model.tfm" --weights "$d/weights.safetensors" --weights-dtype "$dtype" \
  "${extra[@]}" -o "$tmp/bert_lowp" > /dev/null || fail "tfmc build --weights-dtype $dtype failed"
t "$tmp/bert_lowp" --inputs "$d/inputs.safetensors" --outputs "$tmp/exe.safetensors" > /dev/null ||
  fail "the $dtype executable failed"
echo "golden bert, executable, $dtype weights:"
t "$tfmc" compare "$tmp/exe.safetensors" "$d/expected.safetensors" --atol "$atol" --rtol "$rtol" ||
  fail "bert executable: $dtype outputs too far from PyTorch fp32"
# the executable reads the same panels the JIT packs: the same results
t "$tfmc" compare "$tmp/exe.safetensors" "$tmp/bert.safetensors" --atol 1e-5 --rtol 1e-5 > /dev/null ||
  fail "bert: the $dtype executable and the $dtype JIT differ"

ex=$root/examples/sort
t "$tfmc" run "$ex/model.tfm" --weights "$ex/weights.safetensors" --inputs "$ex/inputs.safetensors" \
  > "$tmp/sort_f32.txt" || fail "sort f32"
t "$tfmc" run "$ex/model.tfm" --weights "$ex/weights.safetensors" --inputs "$ex/inputs.safetensors" \
  --weights-dtype "$dtype" > "$tmp/sort_lowp.txt" || fail "sort $dtype"
diff "$tmp/sort_f32.txt" "$tmp/sort_lowp.txt" || fail "sort: $dtype greedy ids differ from fp32"
echo "examples/sort: $dtype argmax ids identical to fp32 ($(grep -c 'output:' "$tmp/sort_lowp.txt") sequences)"

ex=$root/examples/reverse
k=0
while IFS=$'\t' read -r word want; do
  k=$((k + 1))
  got=$(t "$tfmc" run "$ex/model.tfm" --weights "$ex/weights.safetensors" --vocab "$ex/vocab.txt" \
    --text "$word" --generate 20 --weights-dtype "$dtype") || fail "reverse '$word'"
  [ "$got" = "$want" ] || fail "reverse, $dtype: '$word' -> '$got', PyTorch '$want'"
done < "$ex/expected.txt"
echo "examples/reverse: $dtype greedy translations identical to PyTorch's ($k words)"
echo "PASS $dtype"
