#!/bin/sh
# Installs what tfmc needs on Debian 12 (when missing; as root), then
# configures and builds it in build/. Safe to run again.
set -eu
cd "$(dirname "$0")/.."
# clang and the cross toolchains + qemu-user: the portable C backend's tests
# build emitted code with both compilers and run it on aarch64 and s390x.
# libxml2-utils (xmllint) and librsvg2-bin (rsvg-convert): the tests of
# `tfmc attention` parse its SVG back and render it; rsvg-convert also
# makes PNGs of the pictures (README). graphviz: the README's `dot` example.
# gcc-arm-none-eabi + libnewlib-arm-none-eabi and qemu-system-arm: the tests of
# `emit-c --static` build the sort model for a Cortex-M4F and run it on QEMU's
# mps2-an386 board; valgrind: they check the static library uses no heap.
# ccache: the tests compile the emitted projects' shared runtime once, not
# once per project (tests/CMakeLists.txt).
PKGS="build-essential cmake pkg-config libcriterion-dev libopenblas-dev llvm-14-dev clang
      gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-s390x-linux-gnu libc6-dev-s390x-cross
      qemu-user libxml2-utils librsvg2-bin graphviz
      gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm valgrind ccache"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing with apt-get (a few minutes on a fresh machine):$missing" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
else
  echo "setup: every package is installed" >&2
fi
mkdir -p build
log=build/setup.log
echo "setup: configuring and building tfmc in build/ (about a minute on 2 cores; log: $log)" >&2
if ! { cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build build -j"$(nproc)"; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "setup: the build failed (whole log: $log)" >&2
  exit 1
fi
echo "setup: built build/tfmc; the tests (ctest --test-dir build) take about 9 minutes on 2 idle cores" >&2
