#!/bin/sh
# tests/frontend/check_diag.sh TFMC SPEC — a diagnostics golden through the
# command line: `TFMC check NAME.tfm`, run from the spec's directory, must
# exit with status 1 and print exactly NAME.err on stderr.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 TFMC SPEC.tfm" >&2
  exit 2
fi
tfmc=$1
spec=$2
case $tfmc in
  /*) ;;                      # absolute
  */*) tfmc=$(pwd)/$tfmc ;;   # relative to where we were started
  *) ;;                       # a command on PATH
esac
dir=$(dirname "$spec")
base=$(basename "$spec")
name=${base%.tfm}
cd "$dir" || exit 2
if [ ! -f "$name.err" ]; then
  echo "$spec: missing $name.err" >&2
  exit 1
fi
actual=$(mktemp)
trap 'rm -f "$actual"' EXIT
"$tfmc" check "$base" >/dev/null 2>"$actual"
status=$?
fail=0
if [ $status -ne 1 ]; then
  echo "$spec: 'tfmc check' exited with $status, expected 1" >&2
  fail=1
fi
if ! cmp -s "$actual" "$name.err"; then
  echo "$spec: stderr differs from $name.err:" >&2
  diff -u "$name.err" "$actual" >&2
  fail=1
fi
exit $fail
