#!/bin/bash
# tests/generate/run_translate.sh TFMC DIR BACKEND — encoder-decoder generation
# (encode once, then cached decoder steps from bos) against PyTorch.
#
# DIR (tests/generate/annotated or seq2seq, made by
# tools/gen_translate_golden.py) holds generate.tfm, weights.safetensors,
# sources (source ids, a line each), expected (the ids the codebase's own
# decode produced for that source: the Annotated Transformer's greedy_decode
# for a fixed number of steps, pytorch-seq2seq's translate_sentence until
# <eos>) and steps (the --generate count). For every source the ids tfmc
# prints, one per line, must be exactly the expected line; --outputs holds
# generated i64 [1,N] and generated_lengths i64 [1] with N the ids printed.
# Where DIR has attention_K.safetensors (seq2seq: the attention
# translate_sentence returns for source K, its last decoder layer's
# cross-attention), `--attention decoder.1.cross` writes the same
# attention [1,H,N,S] within 1e-4 + 1e-4|ref|.
set -eu
[ $# -eq 3 ] || { echo "usage: $0 TFMC DIR BACKEND" >&2; exit 2; }
tfmc=$1
dir=${2%/}
backend=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-translate.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

steps=$(cat "$dir/steps")
k=0
while IFS= read -r src <&3 && IFS= read -r want <&4; do
  k=$((k + 1))
  timeout 300 "$tfmc" run "$dir/generate.tfm" --weights "$dir/weights.safetensors" \
    --tokens "$src" --generate "$steps" --backend "$backend" \
    --outputs "$tmp/out.safetensors" > "$tmp/ids" || fail "source $k: tfmc run --generate failed"
  got=$(tr '\n' ' ' < "$tmp/ids" | sed 's/ *$//')
  [ "$got" = "$want" ] || fail "source $k ($src): generated '$got', PyTorch '$want'"
  n=$(echo "$want" | wc -w)
  grep -aq "\"generated\":{\"dtype\":\"I64\",\"shape\":\[1,$n\]" "$tmp/out.safetensors" ||
    fail "source $k: --outputs has no generated i64 [1,$n]"
  grep -aq '"generated_lengths":{"dtype":"I64","shape":\[1\]' "$tmp/out.safetensors" ||
    fail "source $k: --outputs has no generated_lengths i64 [1]"
  ref=$dir/attention_$k.safetensors
  [ -f "$ref" ] || continue
  timeout 300 "$tfmc" run "$dir/generate.tfm" --weights "$dir/weights.safetensors" \
    --tokens "$src" --generate "$steps" --backend "$backend" --attention decoder.1.cross \
    --outputs "$tmp/att.safetensors" > "$tmp/ids2" || fail "source $k: --attention failed"
  cmp -s "$tmp/ids" "$tmp/ids2" || fail "source $k: --attention changed the ids"
  "$tfmc" compare "$tmp/att.safetensors" "$ref" --atol 1e-4 --rtol 1e-4 > "$tmp/cmp" ||
    { cat "$tmp/cmp" >&2; fail "source $k: attention differs from translate_sentence's"; }
  atts=$((${atts:-0} + 1))
done 3< "$dir/sources" 4< "$dir/expected"
[ "$k" -ge 2 ] || fail "fewer than two sources in $dir"
echo "translate $(basename "$dir") $backend: ok ($k sources, ids equal PyTorch's;" \
  "${atts:-0} attention maps equal translate_sentence's)"
