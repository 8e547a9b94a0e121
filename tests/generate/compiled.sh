# tests/generate/compiled.sh — sourced by the generation tests that run
# compiled artefacts. compiled_build MODE NAME SPEC WEIGHTS [OPTION...]
# makes the executable $tmp/NAME: MODE exe with `tfmc build`, MODE emitc
# with `tfmc emit-c` into $tmp/NAME.d, built with its Makefile (NO_BLAS=1,
# the generated C at -Werror), the executable and its weights linked in as
# $tmp/NAME and $tmp/NAME.weights. The caller defines $tfmc, $tmp and fail.
compiled_build() {
  local mode=$1 name=$2 spec=$3 w=$4
  shift 4
  if [ "$mode" = exe ]; then
    timeout 600 "$tfmc" build "$spec" --weights "$w" -o "$tmp/$name" "$@" 2> "$tmp/log" ||
      fail "build $name: $(cat "$tmp/log")"
    return
  fi
  timeout 600 "$tfmc" emit-c "$spec" --weights "$w" -o "$tmp/$name.d" "$@" 2> "$tmp/log" ||
    fail "emit-c $name: $(cat "$tmp/log")"
  timeout 900 make -C "$tmp/$name.d" -j2 NO_BLAS=1 CFLAGS="-O2 -Werror" > "$tmp/log" 2>&1 ||
    fail "make $name: $(tail -20 "$tmp/log")"
  local exe
  exe=$(sed -n 's/^all: \([A-Za-z0-9_]*\) libmodel.a$/\1/p' "$tmp/$name.d/Makefile")
  [ -n "$exe" ] && [ -x "$tmp/$name.d/$exe" ] || fail "the emitted Makefile of $name built no executable"
  ln -s "$name.d/$exe" "$tmp/$name"
  ln -s "$name.d/$exe.weights" "$tmp/$name.weights"
}
