/* runtime/rt_act.c — vectorisable gelu (see rt_act.h).
 *
 * erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7):
 *   erf(a) = 1 - (a1 t + a2 t^2 + a3 t^3 + a4 t^4 + a5 t^5) e^(-a^2),
 *   t = 1 / (1 + p a), a = |x|, odd in x;
 * tanh(u) = sign(u) (1 - e) / (1 + e) with e = e^(-2|u|) <= 1.
 * Both use exp(x) for x <= 0 without branches or calls (runtime/rt_exp.h:
 * the vectoriser turns the loops into SIMD code), within 2e-7 relative. */
#include "runtime/rt_act.h"

#include "runtime/rt_exp.h"

#include <math.h>
#include <string.h>

/* The two loops, instantiated for the baseline ISA and, on x86, for
 * AVX2+FMA (chosen at run time, as rt_gemm.c does). x and y never overlap. */
#define ACT_DEFINE(SUFFIX, ATTR, MADD)                                                        \
  RT_DEFINE_EXP_NEG(act_exp_##SUFFIX, ATTR, MADD)                                             \
  ATTR static void gelu_erf_##SUFFIX(const float *restrict x, float *restrict y, int64_t lo,   \
                                     int64_t hi) {                                            \
    for (int64_t i = lo; i < hi; i++) {                                                       \
      float v = x[i];                                                                         \
      float a = fabsf(v) * 0.70710678118654752f;                                              \
      float t = 1.0f / MADD(0.3275911f, a, 1.0f);                                             \
      float poly = MADD(t, 1.061405429f, -1.453152027f);                                      \
      poly = MADD(poly, t, 1.421413741f);                                                     \
      poly = MADD(poly, t, -0.284496736f);                                                    \
      poly = MADD(poly, t, 0.254829592f);                                                     \
      poly *= t;                                                                              \
      float erf_a = MADD(-poly, act_exp_##SUFFIX(-a * a), 1.0f);                              \
      y[i] = 0.5f * v * (1.0f + copysignf(erf_a, v));                                         \
    }                                                                                         \
  }                                                                                           \
  ATTR static void gelu_tanh_##SUFFIX(const float *restrict x, float *restrict y, int64_t lo,  \
                                      int64_t hi) {                                           \
    for (int64_t i = lo; i < hi; i++) {                                                       \
      float v = x[i];                                                                         \
      float u = 0.7978845608028654f * MADD(0.044715f * v, v * v, v);                          \
      float e = act_exp_##SUFFIX(-2.0f * fabsf(u));                                           \
      y[i] = 0.5f * v * (1.0f + copysignf((1.0f - e) / (1.0f + e), u));                       \
    }                                                                                         \
  }

/* gcc's -O2 cost model ("very cheap") declines these loops; ask for the
 * "cheap" one (clang vectorises them at -O2 as they are). */
#if defined(__GNUC__) && !defined(__clang__)
#define ACT_VEC __attribute__((optimize("tree-vectorize", "vect-cost-model=cheap")))
#else
#define ACT_VEC
#endif
#ifdef FP_FAST_FMAF
#define ACT_MADD_BASE(a, b, c) fmaf(a, b, c)
#else
#define ACT_MADD_BASE(a, b, c) ((a) * (b) + (c))
#endif

ACT_DEFINE(base, ACT_VEC, ACT_MADD_BASE)
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(TFMC_STATIC)
#define ACT_X86 1 /* (the static build, rt_static.c, keeps to the portable loops) */
ACT_DEFINE(avx2, ACT_VEC __attribute__((target("avx2,fma"))), fmaf)
#endif

typedef struct GeluJob {
  const float *x;
  float *y;
  int64_t tanh_approx;
} GeluJob;

static void gelu_task(void *ctx, int64_t lo, int64_t hi) {
  const GeluJob *j = ctx;
#ifdef ACT_X86
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    if (j->tanh_approx) gelu_tanh_avx2(j->x, j->y, lo, hi);
    else gelu_erf_avx2(j->x, j->y, lo, hi);
    return;
  }
#endif
  if (j->tanh_approx) gelu_tanh_base(j->x, j->y, lo, hi);
  else gelu_erf_base(j->x, j->y, lo, hi);
}

void rt_gelu(RtPool *pool, int64_t n, const float *x, float *y, int64_t tanh_approx,
             int64_t grain) {
  GeluJob j = {x, y, tanh_approx};
  rt_pool_parallel_for(pool, n, grain > 0 ? grain : 1, gelu_task, &j);
}
