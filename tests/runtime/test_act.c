/* tests/runtime/test_act.c — rt_gelu (both forms) against libm in double
 * over a dense sweep, odd lengths and both pool paths. */
#include "runtime/rt_act.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

static double gelu_ref(double x, int tanh_form) {
  if (tanh_form) return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + erf(x / sqrt(2.0)));
}

static void sweep(int tanh_form, RtPool *pool, int64_t n) {
  float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
  cr_assert(x && y);
  for (int64_t i = 0; i < n; i++) x[i] = (float)(-20.0 + 40.0 * (double)i / (double)(n > 1 ? n - 1 : 1));
  rt_gelu(pool, n, x, y, tanh_form);
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
  rt_gelu(NULL, 4, x, y, 0);
  cr_assert_eq(y[0], 0.0f);
  cr_assert_eq(y[2], 0.0f, "gelu(-100) = %g", y[2]);
  cr_assert_float_eq(y[3], 100.0f, 1e-4);
}
