/* tests/runtime/test_sample_cross.c — the same seed gives the same tokens
 * on every platform: tests/data/sample/cross_driver.c (hashes of PCG32
 * outputs, rt_sample_exp/log bits, 3000 sampled tokens, a beam search) is
 * built with each toolchain at hand and must print exactly the lines below:
 * native gcc and clang in C11 and GNU modes (GNU modes allow FP contraction,
 * which rt_sample.c turns off), aarch64 (FMA hardware) and s390x (big
 * endian) under qemu. A cross target is skipped, naming its Debian package,
 * only when its compiler or qemu is missing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const want = "rng 85878a93efa4b0ff\n"
                                "explog 94320e97249b663a\n"
                                "tokens 4f9e96c7b60be716\n"
                                "beam a2d42b22989d407a\n";

static int have(const char *prog) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
  return system(cmd) == 0;
}

/* Builds the driver as `name` with cc and flags, runs it (through run, ""
 * for native) and compares what it prints with want. */
static void check(const char *name, const char *cc, const char *flags, const char *run) {
  const char *src = TFMC_SOURCE_DIR;
  char dir[1024], cmd[4096];
  snprintf(dir, sizeof dir, "%s/sample_cross", TFMC_BINARY_DIR);
  snprintf(cmd, sizeof cmd,
           "mkdir -p %s && %s %s -O2 -Wall -Wextra -pedantic -Werror -I%s "
           "%s/tests/data/sample/cross_driver.c %s/runtime/rt_sample.c -lm -o %s/%s",
           dir, cc, flags, src, src, src, dir, name);
  cr_assert_eq(system(cmd), 0, "%s: build failed: %s", name, cmd);
  snprintf(cmd, sizeof cmd, "%s %s/%s", run, dir, name);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  char got[512] = "";
  size_t n = fread(got, 1, sizeof got - 1, p);
  got[n] = 0;
  cr_assert_eq(pclose(p), 0, "%s: %s failed", name, cmd);
  cr_expect_str_eq(got, want, "%s prints\n%swhere the pinned hashes are\n%s", name, got, want);
}

Test(sample_cross, native_gcc) {
  check("gcc_c11", "gcc", "-std=c11", "");
  check("gcc_gnu11", "gcc", "-std=gnu11", "");
}

Test(sample_cross, native_clang) {
  if (!have("clang")) cr_skip_test("clang is missing (Debian package clang)");
  check("clang_c11", "clang", "-std=c11", "");
  check("clang_gnu11", "clang", "-std=gnu11", "");
}

Test(sample_cross, aarch64_qemu, .timeout = 120) {
  if (!have("aarch64-linux-gnu-gcc"))
    cr_skip_test("aarch64-linux-gnu-gcc is missing (Debian package gcc-aarch64-linux-gnu)");
  if (!have("qemu-aarch64")) cr_skip_test("qemu-aarch64 is missing (Debian package qemu-user)");
  check("aarch64_c11", "aarch64-linux-gnu-gcc", "-std=c11 -static", "qemu-aarch64");
  check("aarch64_gnu11", "aarch64-linux-gnu-gcc", "-std=gnu11 -static", "qemu-aarch64");
}

Test(sample_cross, s390x_big_endian_qemu, .timeout = 120) {
  if (!have("s390x-linux-gnu-gcc"))
    cr_skip_test("s390x-linux-gnu-gcc is missing (Debian package gcc-s390x-linux-gnu)");
  if (!have("qemu-s390x")) cr_skip_test("qemu-s390x is missing (Debian package qemu-user)");
  check("s390x_gnu11", "s390x-linux-gnu-gcc", "-std=gnu11 -static", "qemu-s390x");
}
