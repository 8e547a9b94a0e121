#!/bin/bash
# tests/generate/run_text.sh TFMC BACKEND — generation from --text prompts
# through a vocabulary, the generated text streamed to stdout.
#
# Uses the PyTorch goldens of tests/generate (gpt2: a decoder; seq2seq: an
# encoder_decoder) with made-up vocabularies (symbol wK / sK for id K): the
# text printed must be the golden ids' symbols, space-separated, eos not
# printed; a symbol the vocabulary lacks becomes its <unk> id when it has
# one, and is refused by name (exit 1) when it has none; text that is not
# UTF-8 is refused (exit 1).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 TFMC BACKEND" >&2; exit 2; }
tfmc=$1
backend=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-text.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
sym() { local p=$1; shift; for id in "$@"; do printf '%s%s ' "$p" "$id"; done | sed 's/ $//'; }

for i in $(seq 0 99); do [ "$i" = 7 ] && echo "<unk>" || echo "w$i"; done > "$tmp/unk.txt"
for i in $(seq 0 99); do echo "w$i"; done > "$tmp/plain.txt"
g=$here/gpt2
run() { timeout 300 "$tfmc" run "$g/generate.tfm" --weights "$g/weights.safetensors" --backend "$backend" "$@"; }

# the golden prompt as text: the golden ids as text
want=$(sym w $(cat "$g/expected"))
got=$(run --vocab "$tmp/unk.txt" --text "$(sym w $(cat "$g/prompt"))" --generate 20)
[ "$got" = "$want" ] || fail "gpt2 text: '$got', want '$want'"
# a symbol the vocabulary lacks is <unk> (id 7): the same as the ids 17 7 42
a=$(run --vocab "$tmp/unk.txt" --text "w17 zzz w42" --generate 6)
b=$(run --vocab "$tmp/unk.txt" --tokens "17 7 42" --generate 6 | cut -d' ' -f2 | tr '\n' ' ' | sed 's/ $//')
[ "$a" = "$b" ] || fail "unknown symbol: '$a', with <unk>'s id '$b'"
refuse() { # MESSAGE ARGS...
  local msg=$1 rc=0
  shift
  run "$@" > /dev/null 2> "$tmp/err" || rc=$?
  [ $rc -eq 1 ] || fail "exit $rc (want 1): $*"
  grep -q -- "$msg" "$tmp/err" || fail "no '$msg' in: $(cat "$tmp/err")"
}
refuse "symbol 'zzz' is not in the vocabulary" --vocab "$tmp/plain.txt" --text "w17 zzz" --generate 3
refuse "invalid UTF-8 at byte 4" --vocab "$tmp/unk.txt" --text "$(printf 'w17 \377 w4')" --generate 3

# encoder_decoder: the source as text, the translation as text (no </s>)
s=$here/seq2seq
for i in $(seq 0 46); do echo "s$i"; done > "$tmp/s.txt"
while IFS= read -r src <&3 && IFS= read -r ids <&4; do
  want=$(sym s $(echo "$ids" | sed 's/ *3$//'))
  got=$(timeout 300 "$tfmc" run "$s/generate.tfm" --weights "$s/weights.safetensors" \
    --backend "$backend" --vocab "$tmp/s.txt" --text "$(sym s $src)" --generate 50)
  [ "$got" = "$want" ] || fail "seq2seq text ($src): '$got', want '$want'"
done 3< "$s/sources" 4< "$s/expected"
echo "text $backend: ok"
