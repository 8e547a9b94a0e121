#!/bin/bash
# tests/generate/run_generate.sh TFMC DIR BACKEND — greedy generation with a KV
# cache against PyTorch, and the refusals of `tfmc run --generate`.
#
# DIR (tests/generate/gpt2, made by tools/gen_generate_golden.py)
# holds generate.tfm, weights.safetensors, prompt (ids) and expected (the
# ids PyTorch's greedy decode with past keys / values produced). The ids
# tfmc prints, one per line, must be exactly those; --outputs must hold
# generated i64 [1,N] and generated_lengths i64 [1]. Then: a prompt longer
# than max_len, --generate 0, an encoder, an encoder_decoder without bos
# and a source id out of range each exit 1
# with a message; a run reaching max_len stops there and says so.
set -eu
[ $# -eq 3 ] || { echo "usage: $0 TFMC DIR BACKEND" >&2; exit 2; }
tfmc=$1
dir=${2%/}
backend=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-generate.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

prompt=$(cat "$dir/prompt")
want=$(cat "$dir/expected")
n=$(echo "$want" | wc -w)
timeout 300 "$tfmc" run "$dir/generate.tfm" --weights "$dir/weights.safetensors" \
  --tokens "$prompt" --generate "$n" --backend "$backend" --outputs "$tmp/out.safetensors" \
  > "$tmp/ids" || fail "tfmc run --generate failed"
got=$(tr '\n' ' ' < "$tmp/ids" | sed 's/ *$//')
[ "$got" = "$want" ] || fail "generated '$got', PyTorch '$want'"
grep -aq "\"generated\":{\"dtype\":\"I64\",\"shape\":\[1,$n\]" "$tmp/out.safetensors" ||
  fail "--outputs has no generated i64 [1,$n]"
grep -aq '"generated_lengths":{"dtype":"I64","shape":\[1\]' "$tmp/out.safetensors" ||
  fail "--outputs has no generated_lengths i64 [1]"

# refusals: exit status 1 and the message
refuse() { # WANT_MESSAGE ARGS...
  local msg=$1
  shift
  if timeout 300 "$tfmc" run "$@" --backend "$backend" > /dev/null 2> "$tmp/err"; then
    fail "accepted: $*"
  else
    local rc=$?
    [ $rc -eq 1 ] || fail "exit $rc (want 1): $*"
  fi
  grep -q -- "$msg" "$tmp/err" || fail "no '$msg' in: $(cat "$tmp/err")"
}
refuse "more than the model's max_len 64" "$dir/generate.tfm" --init random \
  --tokens "$(seq -s ' ' 1 65)" --generate 3
refuse "nothing to generate" "$dir/generate.tfm" --init random --tokens "1 2" --generate 0
sed 's/ bos 2//' "$root/tests/e2e/generate/seq2seq_tiny.tfm" > "$tmp/nobos.tfm"
refuse "encoder_decoder without a bos token" "$tmp/nobos.tfm" --init random --tokens "4 5" \
  --generate 3
refuse "source token id 53 is outside the vocabulary" "$root/tests/e2e/generate/seq2seq_tiny.tfm" \
  --init random --tokens "4 53" --generate 3
refuse "is an encoder, which does not generate" "$root/examples/bert.tfm" --init random \
  --tokens "1 2" --generate 3

# max_len: prompt 60 + 4 generated = 64 positions, then it stops
timeout 300 "$tfmc" run "$dir/generate.tfm" --init random --tokens "$(seq -s ' ' 1 60)" \
  --generate 10 --backend "$backend" > "$tmp/ids" 2> "$tmp/err" || fail "max_len run failed"
[ "$(wc -l < "$tmp/ids")" -eq 4 ] || fail "max_len run printed $(wc -l < "$tmp/ids") ids, want 4"
grep -q "reached max_len 64" "$tmp/err" || fail "no max_len message: $(cat "$tmp/err")"
# sampling: the same seed gives the same ids, on this backend as on the other
# (the pinned ids come from the JIT: a backend that drew differently fails);
# another seed gives others; bad options are refused
sample() { # SEED
  timeout 300 "$tfmc" run "$dir/generate.tfm" --weights "$dir/weights.safetensors" \
    --tokens "$prompt" --generate 12 --sample --temperature 1.5 --top-k 20 --top-p 0.95 \
    --seed "$1" --backend "$backend" 2> "$tmp/err" | tr '\n' ' ' || fail "sampling failed: $(cat "$tmp/err")"
}
s7=$(sample 7)
[ "$s7" = "$(sample 7)" ] || fail "the same seed gave different ids"
[ "$s7" != "$(sample 8)" ] || fail "seeds 7 and 8 gave the same 12 ids"
[ "$s7" = "$(cat "$dir/sampled_seed7")" ] || fail "seed 7 drew '$s7', not '$(cat "$dir/sampled_seed7")'"
refuse "must be a finite number > 0" "$dir/generate.tfm" --init random --tokens "1 2" \
  --generate 3 --sample --temperature 0
refuse "must be in (0, 1]" "$dir/generate.tfm" --init random --tokens "1 2" --generate 3 \
  --sample --top-p 1.5
echo "generate $backend: ok ($n ids equal PyTorch's; sampling reproducible)"
