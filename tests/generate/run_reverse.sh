#!/bin/bash
# tests/generate/run_reverse.sh TFMC BACKEND — the trained translation example
# (examples/reverse, tools/train_translate_example.py): the README's command
# prints "o l l e h" for "h e l l o", and for every held-out word in
# examples/reverse/expected.txt (a word, a tab, PyTorch's greedy translation)
# tfmc prints PyTorch's translation, which is the word reversed.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 TFMC BACKEND" >&2; exit 2; }
tfmc=$1
backend=$2
ex=$(cd "$(dirname "$0")/../../examples/reverse" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
run() {
  timeout 300 "$tfmc" run "$ex/model.tfm" --weights "$ex/weights.safetensors" \
    --vocab "$ex/vocab.txt" --backend "$backend" --text "$1" --generate 20
}
got=$(run "h e l l o")
[ "$got" = "o l l e h" ] || fail "h e l l o -> '$got'"
k=0
while IFS=$'\t' read -r word want; do
  k=$((k + 1))
  rev=$(echo "$word" | tr ' ' '\n' | tac | tr '\n' ' ' | sed 's/ $//')
  [ "$want" = "$rev" ] || fail "expected.txt line $k: PyTorch's '$want' is not '$word' reversed"
  got=$(run "$word")
  [ "$got" = "$want" ] || fail "'$word' -> '$got', PyTorch '$want'"
done < "$ex/expected.txt"
[ "$k" -ge 8 ] || fail "only $k held-out words"
# --repeat: encode, prefill, per-token decode and the whole generation, timed,
# with the compile time of the programs as a forward run's timing line has it
err=$(timeout 300 "$tfmc" run "$ex/model.tfm" --weights "$ex/weights.safetensors" \
  --vocab "$ex/vocab.txt" --backend "$backend" --text "h e l l o" --generate 20 --repeat 2 2>&1 >/dev/null) ||
  fail "--repeat: $err"
for want in "encode median" "prefill median .* ms per token" \
  "^timing: backend $backend, compile [0-9]*\.[0-9] ms, whole generation median .* ms (min .*): encode, prefill and 5 decode steps; 2 runs$"; do
  echo "$err" | grep -q "$want" || fail "--repeat: no '$want' in: $err"
done
# the JIT compiles the encoder and the step (the interpreter compiles nothing)
if [ "$backend" = jit ]; then
  echo "$err" | grep -q "compile 0\.0 ms" && fail "--repeat: the JIT's compile time is 0: $err"
else
  echo "$err" | grep -q "compile 0\.0 ms, whole generation" || fail "--repeat: interp compiles: $err"
fi
echo "reverse $backend: ok ($((k + 1)) words)"
