#!/bin/sh
# Installs what tfmc needs on Debian 12 (when missing; as root), then
# configures and builds it in build/. Safe to run again.
set -eu
cd "$(dirname "$0")/.."
# clang and the cross toolchains + qemu-user: the portable C backend's tests
# build emitted code with both compilers and run it on aarch64 and s390x.
# libxml2-utils (xmllint) and librsvg2-bin (rsvg-convert): the tests of
# `tfmc attention` parse its SVG back and render it; rsvg-convert also
# makes PNGs of the pictures (README).
PKGS="build-essential cmake pkg-config libcriterion-dev libopenblas-dev llvm-14-dev clang
      gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-s390x-linux-gnu libc6-dev-s390x-cross
      qemu-user libxml2-utils librsvg2-bin"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing$missing" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
echo "setup: built build/tfmc" >&2
