#!/bin/bash
# tests/generate/run_beam.sh TFMC BACKEND — beam search on the command line
# (tfmc run --generate N --beams K --length-penalty A) against a PyTorch
# reference beam search, decoder (tests/generate/gpt2) and encoder_decoder
# (tests/generate/seq2seq), and its refusals.
#
# tests/generate/beam/cases (made by tools/gen_beam_golden.py) holds one case
# per line: DIR K ALPHA N | PROMPT OR SOURCE IDS | EXPECTED IDS; the ids tfmc
# prints must be exactly the expected ones.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 TFMC BACKEND" >&2; exit 2; }
tfmc=$1
backend=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-beam.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

k=0
while IFS='|' read -r head ids want; do
  case $head in \#*|'') continue ;; esac
  read -r dir beams alpha n <<< "$head"
  ids=$(echo $ids)
  want=$(echo $want)
  k=$((k + 1))
  timeout 300 "$tfmc" run "$here/$dir/generate.tfm" --weights "$here/$dir/weights.safetensors" \
    --tokens "$ids" --generate "$n" --beams "$beams" --length-penalty "$alpha" \
    --backend "$backend" > "$tmp/ids" 2> "$tmp/err" || fail "case $k: $(cat "$tmp/err")"
  got=$(tr '\n' ' ' < "$tmp/ids" | sed 's/ *$//')
  [ "$got" = "$want" ] || fail "case $k ($dir --beams $beams --length-penalty $alpha): '$got', PyTorch '$want'"
done < "$here/beam/cases"
[ "$k" -ge 5 ] || fail "only $k cases"

refuse() { # WANT_STATUS WANT_MESSAGE ARGS...
  local want=$1 msg=$2
  shift 2
  local rc=0
  timeout 300 "$tfmc" run "$here/gpt2/generate.tfm" --init random --tokens "1 2" --generate 3 \
    --backend "$backend" "$@" > /dev/null 2> "$tmp/err" || rc=$?
  [ $rc -eq "$want" ] || fail "exit $rc (want $want): $*"
  grep -q -- "$msg" "$tmp/err" || fail "no '$msg' in: $(cat "$tmp/err")"
}
refuse 1 "--beams must be in 1..64" --beams 0
refuse 1 "--beams and --sample do not go together" --beams 2 --sample
refuse 2 "--length-penalty goes with --beams" --length-penalty 1
refuse 2 "--length-penalty takes a finite number" --beams 2 --length-penalty nan
echo "beam $backend: ok ($k cases equal PyTorch's)"
