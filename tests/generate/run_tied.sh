#!/bin/bash
# tests/generate/run_tied.sh TFMC MODE — a tied embedding is stored once.
# MODE jit (`tfmc run`), exe (`tfmc build`) or emitc (`tfmc emit-c` and its
# Makefile).
#
# pack-weights stores a weight that the LM head multiplies and the
# embedding gathers once, in the head's GEMM panels, and the gather reads
# the panels. Before, the plain table stayed beside a packed copy: the
# same computation as the untied model whose head weight holds the same
# values (the embedding gathered plain, the head multiplied by its own
# panels). So for tests/golden/gpt2 (random weights, a forward pass with
# an attention output, `lm_head.weight` stored as a copy of `wte`) and
# examples/add (trained; greedy generation: the forward pass and the step
# program), each spec with `head logits tied` and again with `head logits
# no_bias` (untied, the head read from `lm_head.weight`) must give the
# same bits: the forward outputs byte for byte (logits and attention),
# the generated ids. And, for exe and emitc, the tied model's packed-weights image
# is smaller than the untied one's by exactly the table (vocab x d_model
# floats): the table is in it once.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 TFMC jit|exe|emitc" >&2; exit 2; }
tfmc=$1
mode=$2
case $mode in jit|exe|emitc) ;; *) echo "usage: $0 TFMC jit|exe|emitc" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-tied.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$0")/compiled.sh"

# untie SPEC OUT: the spec with its head untied (no bias, as GPT-2's)
untie() {
  sed 's/^\( *head  *\)logits tied$/\1logits no_bias/' "$1" > "$2"
  grep -q '^ *head  *logits no_bias$' "$2" || fail "$1 has no 'head logits tied' line to untie"
}

# spec_int SPEC KEY: the number after KEY in the spec ("vocab", "d_model")
spec_int() { sed -n "s/^ *$2  *\([0-9][0-9]*\).*/\1/p" "$1" | head -1; }

# runner NAME SPEC WEIGHTS [OPTION...]: sets run=(the command that runs it)
runner() {
  local name=$1 spec=$2 w=$3
  shift 3
  if [ "$mode" = jit ]; then
    run=("$tfmc" run "$spec" --weights "$w" "$@")
  else
    compiled_build "$mode" "$name" "$spec" "$w" "$@"
    run=("$tmp/$name")
  fi
}

# the image of the tied model holds the table once: smaller by V x D floats
check_image() { # NAME SPEC
  [ "$mode" = jit ] && return
  local v d tied untied
  v=$(spec_int "$2" vocab)
  d=$(spec_int "$2" d_model)
  tied=$(stat -L -c %s "$tmp/$1_tied.weights")
  untied=$(stat -L -c %s "$tmp/$1_untied.weights")
  [ $((untied - tied)) -eq $((v * d * 4)) ] ||
    fail "$1: the tied image is $tied bytes, the untied $untied: not smaller by the ${v}x$d table ($((v * d * 4)) bytes)"
  echo "$1 $mode: image $tied bytes tied, $untied untied (the ${v}x$d table once)"
}

# tests/golden/gpt2: the forward pass, logits and an attention output
g=$root/tests/golden/gpt2
extra=()
[ -s "$g/args" ] && read -r -a extra < "$g/args"
untie "$g/model.tfm" "$tmp/gpt2_untied.tfm"
for tie in tied untied; do
  spec=$g/model.tfm
  [ $tie = untied ] && spec=$tmp/gpt2_untied.tfm
  runner "gpt2_$tie" "$spec" "$g/weights.safetensors" "${extra[@]}"
  timeout 300 "${run[@]}" --inputs "$g/inputs.safetensors" --outputs "$tmp/gpt2_$tie.safetensors" \
    > /dev/null || fail "gpt2 $tie: the $mode run failed"
done
cmp -s "$tmp/gpt2_tied.safetensors" "$tmp/gpt2_untied.safetensors" ||
  fail "gpt2: the tied model's outputs differ from the untied one's"
timeout 300 "$tfmc" compare "$tmp/gpt2_tied.safetensors" "$g/expected.safetensors" > /dev/null ||
  fail "gpt2 tied: outputs not PyTorch's"
check_image gpt2 "$g/model.tfm"

# examples/add: greedy generation (the step program) of held-out prompts
ex=$root/examples/add
untie "$ex/model.tfm" "$tmp/add_untied.tfm"
for tie in tied untied; do
  spec=$ex/model.tfm
  [ $tie = untied ] && spec=$tmp/add_untied.tfm
  runner "add_$tie" "$spec" "$ex/weights.safetensors"
  : > "$tmp/add_$tie.txt"
  k=0
  while IFS=$'\t' read -r prompt want && [ $k -lt 8 ]; do
    k=$((k + 1))
    timeout 300 "${run[@]}" --vocab "$ex/vocab.txt" --text "$prompt" --generate 20 \
      >> "$tmp/add_$tie.txt" || fail "add $tie: the $mode run failed on '$prompt'"
    [ "$(tail -1 "$tmp/add_$tie.txt")" = "$want" ] ||
      fail "add $tie: '$prompt' -> '$(tail -1 "$tmp/add_$tie.txt")', PyTorch '$want'"
  done < "$ex/expected.txt"
done
cmp -s "$tmp/add_tied.txt" "$tmp/add_untied.txt" || fail "add: tied and untied generate differently"
check_image add "$ex/model.tfm"
echo "tied $mode: ok (gpt2 forward, add generation: tied = untied bit for bit)"
