#!/bin/bash
# tests/generate/run_compiled.sh TFMC MODE — generation from compiled
# artefacts: MODE exe (`tfmc build`) or emitc (`tfmc emit-c`, the project
# built with its Makefile, NO_BLAS=1, the generated C at -Werror).
#
# The same PyTorch goldens the JIT and the interpreter are held to
# (tests/generate): GPT-2 greedy with past keys / values, the Annotated
# Transformer's greedy_decode and pytorch-seq2seq's translate_sentence,
# the reference beam searches, fixed-seed sampling (the ids the JIT draws),
# text prompts, the trained examples/reverse ("h e l l o" -> "o l l e h");
# --outputs (seq2seq is built with --attention decoder.1.cross: its
# attention rows equal translate_sentence's, and with --beams the JIT's);
# the forward pass without --generate; bad input refused with
# exit status 1 (2 for usage). emitc also builds step_api_example.c (the
# README's model.h step API example) and checks it prints the golden ids,
# and step_api_attention.c (tfmc_gen_attention against translate_sentence).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 TFMC exe|emitc" >&2; exit 2; }
tfmc=$1
mode=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-compiled-gen.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# make_exe NAME SPEC WEIGHTS [OPTION...]: the executable $tmp/NAME (beam search up to 5)
. "$here/compiled.sh"
make_exe() { compiled_build "$mode" "$1" "$2" "$3" --max-beams 5 "${@:4}"; }
ids() { tr '\n' ' ' | sed 's/ *$//'; }

g=$here/gpt2
make_exe gpt2 "$g/generate.tfm" "$g/weights.safetensors"
want=$(cat "$g/expected")
n=$(echo "$want" | wc -w)
got=$("$tmp/gpt2" --tokens "$(cat "$g/prompt")" --generate "$n" --outputs "$tmp/out.safetensors" | ids)
[ "$got" = "$want" ] || fail "gpt2: '$got', PyTorch '$want'"
grep -aq "\"generated\":{\"dtype\":\"I64\",\"shape\":\[1,$n\]" "$tmp/out.safetensors" ||
  fail "--outputs has no generated i64 [1,$n]"
grep -aq '"generated_lengths":{"dtype":"I64","shape":\[1\]' "$tmp/out.safetensors" ||
  fail "--outputs has no generated_lengths i64 [1]"
s7=$("$tmp/gpt2" --tokens "$(cat "$g/prompt")" --generate 12 --sample --temperature 1.5 --top-k 20 \
  --top-p 0.95 --seed 7 | ids)
[ "$s7" = "$(echo $(cat "$g/sampled_seed7"))" ] || fail "seed 7 drew '$s7', the JIT '$(cat "$g/sampled_seed7")'"
# --repeat reports prefill and decode separately
"$tmp/gpt2" --tokens "$(cat "$g/prompt")" --generate 5 --repeat 2 > /dev/null 2> "$tmp/err" ||
  fail "--repeat: $(cat "$tmp/err")"
grep -q "prefill median .* ms per token" "$tmp/err" || fail "--repeat: $(cat "$tmp/err")"
grep -q "^timing: backend executable, compile 0\.0 ms, whole generation median .* ms (min .*): prefill and 4 decode steps" "$tmp/err" ||
  fail "--repeat: no whole generation: $(cat "$tmp/err")"
# the forward pass, without --generate, as before
"$tmp/gpt2" --tokens "1 2 3" > "$tmp/fwd" || fail "forward pass failed"
grep -q "argmax per position" "$tmp/fwd" || fail "forward pass: $(cat "$tmp/fwd")"

refuse() { # STATUS MESSAGE EXE ARGS...
  local want=$1 msg=$2 exe=$3 rc=0
  shift 3
  "$tmp/$exe" "$@" > /dev/null 2> "$tmp/err" || rc=$?
  [ $rc -eq "$want" ] || fail "exit $rc (want $want): $exe $* ($(cat "$tmp/err"))"
  grep -q -- "$msg" "$tmp/err" || fail "no '$msg' in: $(cat "$tmp/err")"
}
refuse 1 "more than the model's max_len 64" gpt2 --tokens "$(seq -s ' ' 1 65)" --generate 3
refuse 1 "nothing to generate" gpt2 --tokens "1 2" --generate 0
refuse 1 "must be a finite number > 0" gpt2 --tokens "1 2" --generate 3 --sample --temperature 0
refuse 1 "must be in (0, 1]" gpt2 --tokens "1 2" --generate 3 --sample --top-p 1.5
refuse 1 "--beams and --sample do not go together" gpt2 --tokens "1 2" --generate 3 --beams 2 --sample
refuse 1 "--beams must be in 1..64" gpt2 --tokens "1 2" --generate 3 --beams 0
refuse 1 "at most 5 beams" gpt2 --tokens "1 2" --generate 3 --beams 6
refuse 1 "outside the vocabulary" gpt2 --tokens "1 200" --generate 3
refuse 2 "go with --sample" gpt2 --tokens "1 2" --generate 3 --temperature 2
refuse 2 "--length-penalty goes with --beams" gpt2 --tokens "1 2" --generate 3 --length-penalty 1
refuse 2 "unknown option" gpt2 --tokens "1 2" --generate 3 --frobnicate 1
# max_len: prompt 60 + 4 generated = 64 positions, then it stops and says so
"$tmp/gpt2" --tokens "$(seq -s ' ' 1 60)" --generate 10 > "$tmp/ids" 2> "$tmp/err" ||
  fail "max_len run failed"
[ "$(wc -l < "$tmp/ids")" -eq 4 ] || fail "max_len run printed $(wc -l < "$tmp/ids") ids, want 4"
grep -q "reached max_len 64" "$tmp/err" || fail "no max_len message: $(cat "$tmp/err")"
# --help lists what it takes
"$tmp/gpt2" --help > "$tmp/help"
for o in --generate --tokens --text --inputs --vocab --tokenizer --sample --temperature --top-k \
  --top-p --seed --beams --length-penalty --outputs --weights --threads --repeat; do
  grep -q -- "$o" "$tmp/help" || fail "--help does not list $o"
done
# --text through a vocabulary (symbol wK for id K)
for i in $(seq 0 99); do echo "w$i"; done > "$tmp/w.txt"
sym() { for id in "$@"; do printf 'w%s ' "$id"; done | sed 's/ $//'; }
got=$("$tmp/gpt2" --vocab "$tmp/w.txt" --text "$(sym $(cat "$g/prompt"))" --generate "$n")
[ "$got" = "$(sym $want)" ] || fail "gpt2 text: '$got'"
refuse 1 "symbol 'zzz' is not in the vocabulary" gpt2 --vocab "$tmp/w.txt" --text "w17 zzz" --generate 3

# encoder_decoders against their codebases' decodes
for model in annotated seq2seq; do
  d=$here/$model
  att=()
  [ "$model" = seq2seq ] && att=(--attention decoder.1.cross)
  make_exe "$model" "$d/generate.tfm" "$d/weights.safetensors" "${att[@]}"
  k=0
  while IFS= read -r src <&3 && IFS= read -r want <&4; do
    k=$((k + 1))
    got=$("$tmp/$model" --tokens "$src" --generate "$(cat "$d/steps")" \
      --outputs "$tmp/gen.safetensors" | ids)
    [ "$got" = "$want" ] || fail "$model source $k: '$got', PyTorch '$want'"
    if [ -f "$d/attention_$k.safetensors" ]; then
      "$tfmc" compare "$tmp/gen.safetensors" "$d/attention_$k.safetensors" --atol 1e-4 \
        --rtol 1e-4 > "$tmp/cmp" || fail "$model source $k attention: $(cat "$tmp/cmp")"
    fi
    if [ "$mode" = emitc ] && [ "$model" = seq2seq ]; then
      [ -x "$tmp/api" ] || cc -std=c11 -Wall -Wextra -Werror -I"$tmp/$model.d" -o "$tmp/api" \
        "$here/step_api_example.c" "$tmp/$model.d/libmodel.a" -lm -lpthread ||
        fail "step_api_example.c does not build"
      got=$("$tmp/api" "$tmp/$model.weights" "$(cat "$d/steps")" $src | ids)
      [ "$got" = "$want" ] || fail "model.h step API, source $k: '$got', PyTorch '$want'"
      # tfmc_gen_attention: each step's row, translate_sentence's
      [ -x "$tmp/api_att" ] || cc -std=c11 -Wall -Wextra -Werror -I"$tmp/$model.d" \
        -o "$tmp/api_att" "$here/step_api_attention.c" "$tmp/$model.d/libmodel.a" -lm -lpthread ||
        fail "step_api_attention.c does not build"
      "$tmp/api_att" "$tmp/$model.weights" "$(cat "$d/steps")" "$d/attention_$k.safetensors" \
        $src > "$tmp/att.out" 2>&1 || fail "tfmc_gen_attention, source $k: $(cat "$tmp/att.out")"
    fi
  done 3< "$d/sources" 4< "$d/expected"
done
refuse 1 "source token id 53 is outside the vocabulary" seq2seq --tokens "4 53" --generate 3

# beam search against the PyTorch reference
k=0
while IFS='|' read -r head src want; do
  case $head in \#*|'') continue ;; esac
  read -r dir beams alpha n <<< "$head"
  k=$((k + 1))
  got=$("$tmp/$dir" --tokens "$(echo $src)" --generate "$n" --beams "$beams" \
    --length-penalty "$alpha" 2> "$tmp/err" | ids) || fail "beam case $k: $(cat "$tmp/err")"
  [ "$got" = "$(echo $want)" ] || fail "beam case $k: '$got', PyTorch '$(echo $want)'"
done < "$here/beam/cases"
[ "$k" -ge 5 ] || fail "only $k beam cases"
# the attention rows of beam search's best hypothesis, as the JIT has them
# (the ids i64 are compared as printed: tfmc compare reads floats)
src="2 12 27 4 40 3"
"$tmp/seq2seq" --tokens "$src" --generate 30 --beams 3 --length-penalty 2 \
  --outputs "$tmp/b.safetensors" > "$tmp/b.ids" || fail "seq2seq --beams --outputs"
"$tfmc" run "$here/seq2seq/generate.tfm" --weights "$here/seq2seq/weights.safetensors" \
  --tokens "$src" --generate 30 --beams 3 --length-penalty 2 --attention decoder.1.cross \
  --outputs "$tmp/bj.safetensors" > "$tmp/bj.ids" || fail "tfmc run --beams --attention"
cmp -s "$tmp/b.ids" "$tmp/bj.ids" || fail "beam search: the executable and the JIT differ"
[ "$(wc -l < "$tmp/b.ids")" -ge 10 ] || fail "beam search: fewer than 10 ids"
"$tfmc" compare "$tmp/b.safetensors" "$tmp/bj.safetensors" --atol 1e-4 --rtol 1e-4 > "$tmp/cmp" || true
grep -q '^attention .* 0 over tolerance: ok$' "$tmp/cmp" ||
  fail "beam search's attention differs from the JIT's: $(cat "$tmp/cmp")"

# the trained example, as the README shows it
ex=$root/examples/reverse
make_exe reverse "$ex/model.tfm" "$ex/weights.safetensors"
got=$("$tmp/reverse" --vocab "$ex/vocab.txt" --text "h e l l o" --generate 20)
[ "$got" = "o l l e h" ] || fail "reverse: 'h e l l o' -> '$got'"
while IFS=$'\t' read -r word want; do
  got=$("$tmp/reverse" --vocab "$ex/vocab.txt" --text "$word" --generate 20)
  [ "$got" = "$want" ] || fail "reverse: '$word' -> '$got', PyTorch '$want'"
done < "$ex/expected.txt"
echo "compiled generation ($mode): ok"
