/* tests/runtime/test_gemm_cross.c — the GEMM kernel sets where Criterion
 * does not run: tests/runtime/gemm_cross_check.c (plain C: rt_linear,
 * rt_linear_packed and rt_linear_packed_bf16 over odd shapes against a
 * double reference, split invariance on 1-3 threads; see its header) is
 * built with the runtime's GEMM sources for
 *   - aarch64, run under qemu-user once with TFMC_GEMM_ISA=neon (the NEON
 *     set, rt_gemm_neon.c) and once with scalar (the baseline C set). On
 *     aarch64 both compute each element as one fused multiply-add chain
 *     over k in the same order (the baseline's MADD is fmaf there:
 *     FP_FAST_FMAF), so the two runs must also print the same digest of
 *     every output's bits;
 *   - the host, with gcc, on its widest set and on the baseline one.
 * The aarch64 run is skipped, naming the Debian package, only when the
 * cross compiler or qemu is missing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int have(const char *prog) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
  return system(cmd) == 0;
}

/* Builds the checker as `name` with cc: warnings are errors, the runtime's
 * sources as the checker needs them (the GEMM, its kernel sets, the pool,
 * the activations). */
static void build(const char *name, const char *cc) {
  const char *src = TFMC_SOURCE_DIR;
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "mkdir -p %s/gemm_cross && %s -std=c11 -O2 -Wall -Wextra -pedantic -Werror "
           "-D_POSIX_C_SOURCE=200809L -I%s %s/tests/runtime/gemm_cross_check.c "
           "%s/runtime/rt_gemm*.c %s/runtime/rt_pool.c %s/runtime/rt_act.c -lm -lpthread -ldl "
           "-o %s/gemm_cross/%s",
           TFMC_BINARY_DIR, cc, src, src, src, src, src, TFMC_BINARY_DIR, name);
  cr_assert_eq(system(cmd), 0, "%s: build failed: %s", name, cmd);
}

/* Runs the checker `name` (through run, "" for native) on the portable
 * GEMM capped at isa; it must pass, having used a set named words. Returns
 * its digest line in digest. */
static void check(const char *name, const char *run, const char *isa, const char *words,
                  char *digest, size_t digest_len) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "env TFMC_GEMM=portable TFMC_GEMM_ISA=%s %s %s/gemm_cross/%s '%s' 2>&1",
           isa, run, TFMC_BINARY_DIR, name, words);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  static char out[1 << 16];
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = 0;
  int rc = pclose(p);
  fprintf(stderr, "gemm_cross: %s, TFMC_GEMM_ISA=%s:\n%s", name, isa, out);
  cr_assert_eq(rc, 0, "%s failed:\n%s", cmd, out);
  cr_assert(strstr(out, "\nok: "), "%s did not finish:\n%s", cmd, out);
  const char *d = strstr(out, "digest: ");
  cr_assert(d, "%s printed no digest:\n%s", cmd, out);
  snprintf(digest, digest_len, "%.*s", (int)strcspn(d, "\n"), d);
}

Test(gemm_cross, native_gcc, .timeout = 300) {
  char widest[64], base[64];
  build("native", "gcc");
  check("native", "", "", "kernels", widest, sizeof widest);
  check("native", "", "scalar", "baseline kernels", base, sizeof base);
}

Test(gemm_cross, aarch64_neon_qemu, .timeout = 600) {
  if (!have("aarch64-linux-gnu-gcc"))
    cr_skip_test("aarch64-linux-gnu-gcc is missing (Debian package gcc-aarch64-linux-gnu)");
  if (!have("qemu-aarch64")) cr_skip_test("qemu-aarch64 is missing (Debian package qemu-user)");
  char neon[64], base[64];
  build("aarch64", "aarch64-linux-gnu-gcc");
  const char *qemu = "qemu-aarch64 -L /usr/aarch64-linux-gnu";
  check("aarch64", qemu, "neon", "neon kernels", neon, sizeof neon);
  check("aarch64", qemu, "scalar", "baseline kernels", base, sizeof base);
  cr_expect_str_eq(neon, base,
                   "aarch64: the NEON set (%s) and the baseline set (%s) gave different bits", neon,
                   base);
}
