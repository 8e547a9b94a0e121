#!/bin/bash
# tests/generate/run_leftpad.sh TFMC MODE — generation over a batch of
# padded prompts (sources) at once, `--generate N --inputs IN` with B > 1:
# MODE interp or jit (`tfmc run --backend MODE`), exe (`tfmc build`) or
# emitc (`tfmc emit-c`, built with its Makefile).
#
# Against PyTorch (tools/gen_leftpad_golden.py, tests/generate/leftpad): a
# left-padded batch of 3 GPT-2 prompts generated Hugging Face-style
# (position_ids = cumsum(mask) - 1, the mask extended per step, past keys /
# values, each row stopping at eos on its own): every row's ids (one line
# per row, "row B: IDS", as rows finish), --outputs generated i64 [3,N] and
# generated_lengths i64 [3]; the same prompts right-padded give the same
# rows. Properties: each row equals its prompt alone at batch 1; sampled,
# row b with --seed S equals its prompt alone with --seed S+b. The
# encoder_decoder: pytorch-seq2seq's 3 sources as one padded batch (right-
# padded with <pad>; left-padded with src_mask) give translate_sentence's
# ids per source (tests/generate/seq2seq/expected). Refused with exit 1 and
# a message: a mask not shaped like the tokens, a row of pads only,
# padding between real tokens, a batch above the model's rows, --beams
# with a batch.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 TFMC interp|jit|exe|emitc" >&2; exit 2; }
tfmc=$1
mode=$2
here=$(cd "$(dirname "$0")" && pwd)
lp=$here/leftpad
s2s=$here/seq2seq
w=$here/gpt2/weights.safetensors
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-leftpad.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "$mode" = exe ] || [ "$mode" = emitc ]; then
  # build NAME SPEC WEIGHTS [--max-beams K]: $tmp/NAME
  . "$here/compiled.sh"
  build() { compiled_build "$mode" "$@"; }
  build lp "$lp/generate.tfm" "$w"
  build s2s "$s2s/generate.tfm" "$s2s/weights.safetensors"
  # the limit on rows is rt_genrun.c's for both: checked on the executable
  if [ "$mode" = exe ]; then build lp2 "$lp/generate.tfm" "$w" --max-beams 2; fi
  gpt() { timeout 300 "$tmp/lp" "$@"; }
  s2s() { timeout 300 "$tmp/s2s" "$@"; }
else
  gpt() { timeout 300 "$tfmc" run "$lp/generate.tfm" --weights "$w" --backend "$mode" "$@"; }
  s2s() {
    timeout 300 "$tfmc" run "$s2s/generate.tfm" --weights "$s2s/weights.safetensors" \
      --backend "$mode" "$@"
  }
fi
ids() { tr '\n' ' ' | sed 's/ *$//'; }
row() { sed -n "s/^row $1: //p" "$2"; } # ROW FILE

n=$(cat "$lp/steps")
# expect_rows FILE EXPECTED: every row's ids, and nothing else
expect_rows() {
  local k=0 want
  while IFS= read -r want; do
    [ "$(row $k "$1")" = "$want" ] || fail "row $k: '$(row $k "$1")', want '$want' ($1)"
    k=$((k + 1))
  done < "$2"
  [ "$(wc -l < "$1")" -eq "$k" ] || fail "$(wc -l < "$1") lines for $k rows: $(cat "$1")"
}

# the left-padded batch against Hugging Face-style generation
gpt --inputs "$lp/inputs.safetensors" --generate "$n" --outputs "$tmp/out.safetensors" \
  > "$tmp/rows" 2> "$tmp/err" || fail "batch: $(cat "$tmp/err")"
expect_rows "$tmp/rows" "$lp/expected"
head -n 1 "$tmp/rows" | grep -q '^row 0: ' || fail "row 0 ends first (eos) but is not printed first"
grep -aq "\"generated\":{\"dtype\":\"I64\",\"shape\":\[3,$n\]" "$tmp/out.safetensors" ||
  fail "--outputs has no generated i64 [3,$n]"
grep -aq '"generated_lengths":{"dtype":"I64","shape":\[3\]' "$tmp/out.safetensors" ||
  fail "--outputs has no generated_lengths i64 [3]"
# --repeat: the batch timed, the programs' compile time with the whole
# generation (executables compile nothing at run time)
gpt --inputs "$lp/inputs.safetensors" --generate "$n" --repeat 2 > /dev/null 2> "$tmp/err" ||
  fail "--repeat: $(cat "$tmp/err")"
be=$mode
if [ "$mode" = exe ] || [ "$mode" = emitc ]; then be=executable; fi
grep -q "^timing: backend $be, compile [0-9]*\.[0-9] ms, whole generation median .* ms (min .*): prefill and $((n - 1)) decode steps of the batch; 2 runs$" "$tmp/err" ||
  fail "--repeat: no whole generation line with the compile time: $(cat "$tmp/err")"
# right padding: the same rows
gpt --inputs "$lp/inputs_right.safetensors" --generate "$n" > "$tmp/rows_right" ||
  fail "right-padded batch failed"
expect_rows "$tmp/rows_right" "$lp/expected"

# each row is its prompt alone at batch 1 (greedy; sampled with seed + row)
gpt --inputs "$lp/inputs.safetensors" --generate 10 --sample --temperature 1.5 --seed 7 \
  > "$tmp/sampled" || fail "sampled batch failed"
k=0
while IFS= read -r p; do
  alone=$(gpt --tokens "$p" --generate "$n" | ids)
  [ "$alone" = "$(row $k "$tmp/rows")" ] || fail "row $k: batch '$(row $k "$tmp/rows")', alone '$alone'"
  alone=$(gpt --tokens "$p" --generate 10 --sample --temperature 1.5 --seed $((7 + k)) | ids)
  [ "$alone" = "$(row $k "$tmp/sampled")" ] ||
    fail "sampled row $k: batch '$(row $k "$tmp/sampled")', alone with seed $((7 + k)) '$alone'"
  k=$((k + 1))
done < "$lp/prompts"
[ "$(row 1 "$tmp/sampled")" != "$(row 1 "$tmp/rows" | cut -d' ' -f1-10)" ] ||
  fail "sampling drew the greedy ids"

# the encoder_decoder: a batch of padded sources, each translated as alone
for f in batch batch_left; do
  s2s --inputs "$s2s/$f.safetensors" --generate "$(cat "$s2s/steps")" > "$tmp/s2s_rows" \
    2> "$tmp/err" || fail "seq2seq $f: $(cat "$tmp/err")"
  expect_rows "$tmp/s2s_rows" "$s2s/expected"
done

# refusals: exit status 1 and the message
refuse() { # WANT_MESSAGE COMMAND ARGS...
  local msg=$1
  shift
  if "$@" > /dev/null 2> "$tmp/err"; then
    fail "accepted: $*"
  else
    local rc=$?
    [ $rc -eq 1 ] || fail "exit $rc (want 1): $* ($(cat "$tmp/err"))"
  fi
  grep -q -- "$msg" "$tmp/err" || fail "no '$msg' in: $(cat "$tmp/err")"
}
refuse "input 'mask' has shape \[3,5\]; expected \[3,6\]" gpt --inputs "$lp/bad_mask_shape.safetensors" \
  --generate 3
refuse "sequence 1 has no real token" gpt --inputs "$lp/bad_mask_zero_row.safetensors" --generate 3
refuse "prompt row 0 has padding between its real tokens" gpt \
  --inputs "$lp/bad_mask_holes.safetensors" --generate 3
refuse "beam search of a batch is not supported" gpt --inputs "$lp/inputs.safetensors" \
  --generate 3 --beams 2
if [ "$mode" = jit ] || [ "$mode" = interp ]; then
  refuse "the attention of a batch is not supported" gpt --inputs "$lp/inputs.safetensors" \
    --generate 3 --attention decoder.0 --outputs "$tmp/attn.safetensors"
  [ ! -e "$tmp/attn.safetensors" ] || fail "a refused run wrote its outputs"
fi
if [ "$mode" = exe ]; then
  refuse "a batch of 3 prompts; this model was compiled to generate at most 2 rows" \
    timeout 300 "$tmp/lp2" --inputs "$lp/inputs.safetensors" --generate 3
elif [ "$mode" != emitc ]; then
  sed 's/^  vocab       100$/  vocab       100\n  max_batch   2/' "$lp/generate.tfm" > "$tmp/b2.tfm"
  grep -q 'max_batch   2' "$tmp/b2.tfm" || fail "no max_batch in $tmp/b2.tfm"
  refuse "a batch of 3 prompts; model 'gpt2_leftpad' takes at most 2 (max_batch)" \
    timeout 300 "$tfmc" run "$tmp/b2.tfm" --weights "$w" --backend "$mode" \
    --inputs "$lp/inputs.safetensors" --generate 3
fi
echo "leftpad $mode: ok (3 padded prompts and 3 padded sources as PyTorch; each row as alone)"
