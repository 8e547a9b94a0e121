#!/bin/bash
# tests/generate/run_add.sh TFMC MODE — the trained decoder-only example
# (examples/add, tools/train_lm_example.py) on one backend: MODE interp or
# jit (`tfmc run --backend MODE`), exe (an executable from `tfmc build`) or
# emitc (a `tfmc emit-c` project built with its Makefile, NO_BLAS=1, the
# generated C at -Werror).
#
# The README's command prints "1 0 0 3" for "4 0 6 + 5 9 7 ="; for every
# held-out prompt in examples/add/expected.txt (a prompt, a tab, PyTorch's
# greedy continuation) PyTorch's continuation is the sum's digits and tfmc
# prints exactly it, stopping at the spec's eos; a symbol outside the
# vocabulary and a prompt longer than max_len are refused with exit 1.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 TFMC interp|jit|exe|emitc" >&2; exit 2; }
tfmc=$1
mode=$2
ex=$(cd "$(dirname "$0")/../../examples/add" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-add.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

case $mode in
  interp|jit) gen=("$tfmc" run "$ex/model.tfm" --weights "$ex/weights.safetensors" --backend "$mode") ;;
  exe|emitc)
    . "$(dirname "$0")/compiled.sh"
    compiled_build "$mode" add "$ex/model.tfm" "$ex/weights.safetensors"
    gen=("$tmp/add") ;;
  *) echo "usage: $0 TFMC interp|jit|exe|emitc" >&2; exit 2 ;;
esac
run() { timeout 300 "${gen[@]}" --vocab "$ex/vocab.txt" --text "$1" --generate 20; }

got=$(run "4 0 6 + 5 9 7 =")
[ "$got" = "1 0 0 3" ] || fail "4 0 6 + 5 9 7 = -> '$got'"
k=0
while IFS=$'\t' read -r prompt want; do
  k=$((k + 1))
  a=$(echo "$prompt" | sed 's/ + .*//; s/ //g')
  b=$(echo "$prompt" | sed 's/.* + //; s/ =$//; s/ //g')
  sum=$(echo $((10#$a + 10#$b)) | sed 's/./& /g; s/ $//')
  [ "$want" = "$sum" ] || fail "expected.txt line $k: PyTorch's '$want' is not the sum of $a and $b"
  got=$(run "$prompt")
  [ "$got" = "$want" ] || fail "'$prompt' -> '$got', PyTorch '$want'"
done < "$ex/expected.txt"
[ "$k" -ge 50 ] || fail "only $k held-out prompts"

refuse() { # MESSAGE TEXT
  local rc=0
  timeout 300 "${gen[@]}" --vocab "$ex/vocab.txt" --text "$2" --generate 20 \
    > /dev/null 2> "$tmp/err" || rc=$?
  [ $rc -eq 1 ] || fail "exit $rc (want 1) for '$2': $(cat "$tmp/err")"
  grep -q -- "$1" "$tmp/err" || fail "no '$1' in: $(cat "$tmp/err")"
}
refuse "symbol 'x' is not in the vocabulary" "1 2 x 3 ="
refuse "more than the model's max_len 16" "1 2 3 4 5 6 7 8 9 + 1 2 3 4 5 6 7 ="
echo "add $mode: ok ($((k + 1)) prompts)"
