#!/bin/sh
# tests/frontend/check_hf_import.sh TFMC CONFIG.json — an import golden
# through the command line, run from the config's directory:
#   - with NAME.tfm beside it: `TFMC import-hf NAME.json` prints exactly
#     NAME.tfm, `-o FILE` writes the same text, a second `-o FILE` is
#     refused without --force and accepted with it, and FILE passes
#     `TFMC check`;
#   - with NAME.err beside it: the import exits with status 1, prints
#     nothing on stdout and exactly NAME.err on stderr.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 TFMC CONFIG.json" >&2
  exit 2
fi
tfmc=$1
config=$2
case $tfmc in
  /*) ;;
  */*) tfmc=$(pwd)/$tfmc ;;
  *) ;;
esac
dir=$(dirname "$config")
base=$(basename "$config")
name=${base%.json}
cd "$dir" || exit 2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfmc-hf-$name.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
fail=0
if [ -f "$name.err" ]; then
  "$tfmc" import-hf "$base" >"$tmp/out" 2>"$tmp/err"
  status=$?
  [ $status -eq 1 ] || { echo "$config: exit status $status, expected 1" >&2; fail=1; }
  [ -s "$tmp/out" ] && { echo "$config: printed on stdout:" >&2; cat "$tmp/out" >&2; fail=1; }
  if ! cmp -s "$tmp/err" "$name.err"; then
    echo "$config: stderr differs from $name.err:" >&2
    diff -u "$name.err" "$tmp/err" >&2
    fail=1
  fi
  exit $fail
fi
[ -f "$name.tfm" ] || { echo "$config: missing $name.tfm or $name.err" >&2; exit 1; }
"$tfmc" import-hf "$base" >"$tmp/out" 2>"$tmp/err"
status=$?
if [ $status -ne 0 ] || ! cmp -s "$tmp/out" "$name.tfm"; then
  echo "$config: import-hf exited with $status; stdout vs $name.tfm:" >&2
  diff -u "$name.tfm" "$tmp/out" >&2
  cat "$tmp/err" >&2
  exit 1
fi
"$tfmc" import-hf "$base" -o "$tmp/$name.tfm" || { echo "$config: import-hf -o failed" >&2; exit 1; }
cmp -s "$tmp/$name.tfm" "$name.tfm" || { echo "$config: -o wrote other text" >&2; fail=1; }
if "$tfmc" import-hf "$base" -o "$tmp/$name.tfm" 2>"$tmp/err"; then
  echo "$config: import-hf overwrote an existing file without --force" >&2
  fail=1
fi
grep -q "exists; refusing to overwrite it" "$tmp/err" || { cat "$tmp/err" >&2; fail=1; }
"$tfmc" import-hf "$base" -o "$tmp/$name.tfm" --force || { echo "$config: --force refused" >&2; fail=1; }
"$tfmc" check "$tmp/$name.tfm" >"$tmp/check" 2>&1 || {
  echo "$config: the imported spec does not check:" >&2
  cat "$tmp/check" >&2
  fail=1
}
exit $fail
