/* tests/runtime/test_act.c — rt_gelu (both forms) against libm in double
 * over a dense sweep, odd lengths and both pool paths; the same bits for
 * any grain. */
#include "runtime/rt_act.h"
#include "runtime/rt_gemm.h"
#include "tests/runtime/isa_init.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* what the lowering passes by default (LowerLoopsOptions.gelu_grain) */
enum { GRAIN = 1 << 13 };

static double gelu_ref(double x, int tanh_form) {
  if (tanh_form) return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + erf(x / sqrt(2.0)));
}

static void sweep(int tanh_form, RtPool *pool, int64_t n) {
  float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
  cr_assert(x && y);
  for (int64_t i = 0; i < n; i++) x[i] = (float)(-20.0 + 40.0 * (double)i / (double)(n > 1 ? n - 1 : 1));
  rt_gelu(pool, n, x, y, tanh_form, GRAIN);
  for (int64_t i = 0; i < n; i++) {
    double r = gelu_ref(x[i], tanh_form);
    cr_assert(fabs(y[i] - r) <= 2e-7 * fabs(x[i]) + 1e-7, "gelu%s(%.9g) = %.9g, want %.9g",
              tanh_form ? "_tanh" : "", x[i], y[i], r);
  }
  free(x);
  free(y);
}

Test(act, gelu_erf_matches_libm) { sweep(0, NULL, 100003); }
Test(act, gelu_tanh_matches_libm) { sweep(1, NULL, 100003); }
Test(act, small_and_pooled) {
  RtPool *p = rt_pool_create(2);
  for (int64_t n = 1; n < 40; n += 3) sweep(0, p, n);
  sweep(0, p, 300001); /* over the parallel grain */
  sweep(1, p, 300001);
  rt_pool_destroy(p);
}
Test(act, exact_zeros_and_extremes) {
  float x[4] = {0.0f, -0.0f, -100.0f, 100.0f}, y[4];
  rt_gelu(NULL, 4, x, y, 0, GRAIN);
  cr_assert_eq(y[0], 0.0f);
  cr_assert_eq(y[2], 0.0f, "gelu(-100) = %g", y[2]);
  cr_assert_float_eq(y[3], 100.0f, 1e-4);
}

/* The grain only decides how the elements are split over the pool: every
 * grain (values below 1 count as 1) gives the same bits. */
Test(act, same_bits_for_any_grain) {
  enum { N = 50001 };
  float *x = malloc(N * 4), *y0 = malloc(N * 4), *y = malloc(N * 4);
  cr_assert(x && y0 && y);
  for (int i = 0; i < N; i++) x[i] = (float)(-8.0 + 16.0 * i / (N - 1));
  RtPool *p = rt_pool_create(3);
  const int64_t grains[] = {1, 7, 1000, GRAIN, N, 0, -5};
  for (int tanh_form = 0; tanh_form < 2; tanh_form++) {
    rt_gelu(NULL, N, x, y0, tanh_form, GRAIN);
    for (size_t g = 0; g < sizeof grains / sizeof *grains; g++) {
      memset(y, 0, N * 4);
      rt_gelu(p, N, x, y, tanh_form, grains[g]);
      cr_assert(memcmp(y, y0, N * 4) == 0, "grain %lld changed the result", (long long)grains[g]);
    }
  }
  rt_pool_destroy(p);
  free(x);
  free(y0);
  free(y);
}

/* Each ISA instance (TFMC_GEMM_ISA caps the kernel set rt_gemm_lanes
 * reports, which the activations follow; Criterion runs each test in a
 * fresh process): the out-of-place sweep against libm, both forms, and
 * the in-place form the GEMM epilogue applies to each tile row (rt_act_row)
 * giving the same bits as the out-of-place one, at lengths that leave
 * every vector tail (1..40 around 8 and 16 lanes) and one of a row of
 * bert-base's FFN (3072). */
static void isa_check(const char *isa, int lanes) {
  if (rt_gemm_lanes() != lanes) {
    fprintf(stderr, "act: %s: skipped on this CPU (%s)\n", isa, rt_gemm_backend());
    return;
  }
  sweep(0, NULL, 100003);
  sweep(1, NULL, 100003);
  static const int64_t lens[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 40, 3072};
  float x[3072], y[3072], z[3072];
  for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
    int64_t n = lens[l];
    /* values in [-4, 4] in no order: gelu moves every one of them, so an
     * element a loop skips shows */
    for (int64_t i = 0; i < n; i++) x[i] = (float)(4.0 * sin(0.7 * (double)i + (double)l));
    for (int tanh_form = 0; tanh_form < 2; tanh_form++) {
      rt_gelu(NULL, n, x, y, tanh_form, GRAIN);
      memcpy(z, x, sizeof(float) * (size_t)n);
      rt_act_row(tanh_form ? RT_ACT_GELU_TANH : RT_ACT_GELU, z, n);
      cr_assert(memcmp(y, z, sizeof(float) * (size_t)n) == 0, "%s: n %lld tanh %d: in place differs",
                isa, (long long)n, tanh_form);
    }
  }
}

Test(act, isa_avx512, .init = isa_avx512) {
  isa_check("avx512", 16);
}
Test(act, isa_avx2, .init = isa_avx2) {
  isa_check("avx2", 8);
}
Test(act, isa_scalar, .init = isa_scalar) {
  isa_check("scalar", 1);
}
