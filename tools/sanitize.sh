#!/bin/sh
# The whole test suite again, built with AddressSanitizer and
# UndefinedBehaviorSanitizer (-DTFMC_SANITIZE=ON: every library and test,
# the executables `tfmc build` links and the emitted-C builds of the tests),
# in build-san/. Any sanitizer report fails its test. Run after
# tools/setup.sh (which installs what this needs); .ci/run runs it after
# the README's test command. About 15 minutes on 2 idle cores.
set -eu
cd "$(dirname "$0")/.."
log=build-san/build.log
mkdir -p build-san
echo "sanitize: building with ASan+UBSan in build-san/ (log: $log)" >&2
if ! { cmake -S . -B build-san -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFMC_SANITIZE=ON &&
       cmake --build build-san -j"$(nproc)"; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "sanitize: the build failed (whole log: $log)" >&2
  exit 1
fi
echo "sanitize: running the suite under the sanitizers" >&2
ctest --test-dir build-san -j"$(nproc)" --output-on-failure
