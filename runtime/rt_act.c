/* runtime/rt_act.c — vectorisable gelu, and the activations of the GEMM
 * epilogue applied in place (see rt_act.h).
 *
 * erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7):
 *   erf(a) = 1 - (a1 t + a2 t^2 + a3 t^3 + a4 t^4 + a5 t^5) e^(-a^2),
 *   t = 1 / (1 + p a), a = |x|, odd in x;
 * tanh(u) = sign(u) (1 - e) / (1 + e) with e = e^(-2|u|) <= 1.
 * Both use exp(x) for x <= 0 without branches or calls (runtime/rt_exp.h:
 * the vectoriser turns the loops into SIMD code), within 2e-7 relative. */
#include "runtime/rt_act.h"

#include "runtime/rt_exp.h"
#include "runtime/rt_gemm.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

/* The element formulas, shared by the out-of-place loops (rt_gelu) and the
 * in-place ones (rt_act_rows: the GEMM epilogue), so both give the same
 * bits for the same input. */
#define ACT_GELU_ERF(EXP, MADD, v, out)                                                       \
  do {                                                                                        \
    float a_ = fabsf(v) * 0.70710678118654752f;                                               \
    float t_ = 1.0f / MADD(0.3275911f, a_, 1.0f);                                             \
    float poly_ = MADD(t_, 1.061405429f, -1.453152027f);                                      \
    poly_ = MADD(poly_, t_, 1.421413741f);                                                    \
    poly_ = MADD(poly_, t_, -0.284496736f);                                                   \
    poly_ = MADD(poly_, t_, 0.254829592f);                                                    \
    poly_ *= t_;                                                                              \
    float erf_a_ = MADD(-poly_, EXP(-a_ * a_), 1.0f);                                         \
    (out) = 0.5f * (v) * (1.0f + copysignf(erf_a_, v));                                       \
  } while (0)
#define ACT_GELU_TANH(EXP, MADD, v, out)                                                      \
  do {                                                                                        \
    float u_ = 0.7978845608028654f * MADD(0.044715f * (v), (v) * (v), v);                     \
    float e_ = EXP(-2.0f * fabsf(u_));                                                        \
    (out) = 0.5f * (v) * (1.0f + copysignf((1.0f - e_) / (1.0f + e_), u_));                   \
  } while (0)

/* The loops, instantiated for the baseline ISA and, on x86, for AVX2+FMA
 * and AVX-512F (chosen at run time, as rt_gemm.c does; every instance
 * computes each element by the same formula with fused multiply-adds, so
 * the ISAs give the same bits). In the out-of-place loops x and
 * y never overlap; the _ip loops rewrite y[0..n) in place. */
#define ACT_DEFINE(SUFFIX, ATTR, MADD)                                                        \
  RT_DEFINE_EXP_NEG(act_exp_##SUFFIX, ATTR, MADD)                                             \
  ATTR static void gelu_erf_##SUFFIX(const float *restrict x, float *restrict y, int64_t lo,   \
                                     int64_t hi) {                                            \
    for (int64_t i = lo; i < hi; i++) {                                                       \
      float v = x[i];                                                                         \
      ACT_GELU_ERF(act_exp_##SUFFIX, MADD, v, y[i]);                                          \
    }                                                                                         \
  }                                                                                           \
  ATTR static void gelu_tanh_##SUFFIX(const float *restrict x, float *restrict y, int64_t lo,  \
                                      int64_t hi) {                                           \
    for (int64_t i = lo; i < hi; i++) {                                                       \
      float v = x[i];                                                                         \
      ACT_GELU_TANH(act_exp_##SUFFIX, MADD, v, y[i]);                                         \
    }                                                                                         \
  }                                                                                           \
  ATTR static void gelu_erf_ip_##SUFFIX(float *restrict y, int64_t n) {                       \
    for (int64_t i = 0; i < n; i++) {                                                         \
      float v = y[i];                                                                         \
      ACT_GELU_ERF(act_exp_##SUFFIX, MADD, v, y[i]);                                          \
    }                                                                                         \
  }                                                                                           \
  ATTR static void gelu_tanh_ip_##SUFFIX(float *restrict y, int64_t n) {                      \
    for (int64_t i = 0; i < n; i++) {                                                         \
      float v = y[i];                                                                         \
      ACT_GELU_TANH(act_exp_##SUFFIX, MADD, v, y[i]);                                         \
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
/* 16 lanes: the GEMM epilogue's gelu on bert-base's FFN was ~1.5% of a
 * forward pass in 8 */
ACT_DEFINE(avx512, ACT_VEC __attribute__((target("avx512f,avx2,fma"))), fmaf)
#endif

/* One instance's loops; act_loops picks the instance once. */
typedef struct ActLoops {
  void (*gelu_erf)(const float *restrict x, float *restrict y, int64_t lo, int64_t hi);
  void (*gelu_tanh)(const float *restrict x, float *restrict y, int64_t lo, int64_t hi);
  void (*gelu_erf_ip)(float *restrict y, int64_t n);
  void (*gelu_tanh_ip)(float *restrict y, int64_t n);
} ActLoops;
#define ACT_LOOPS(SUFFIX)                                                                      \
  {gelu_erf_##SUFFIX, gelu_tanh_##SUFFIX, gelu_erf_ip_##SUFFIX, gelu_tanh_ip_##SUFFIX}

static const ActLoops act_base = ACT_LOOPS(base);
#ifdef ACT_X86
static const ActLoops act_avx2 = ACT_LOOPS(avx2);
static const ActLoops act_avx512 = ACT_LOOPS(avx512);
#endif

/* The instance for the ISA the GEMM runs (rt_gemm_lanes: what the CPU and
 * OS support, or TFMC_GEMM_ISA's choice, as attention follows it), looked
 * up once: the GEMM epilogue asks per row of 64 values, and rt_gemm_lanes
 * compares the kernel set's name. */
static const ActLoops *act_loops(void) {
#ifdef ACT_X86
  static const ActLoops *_Atomic chosen;
  const ActLoops *a = atomic_load_explicit(&chosen, memory_order_relaxed);
  if (!a) {
    int lanes = rt_gemm_lanes();
    a = lanes == 16 ? &act_avx512 : lanes == 8 ? &act_avx2 : &act_base;
    atomic_store_explicit(&chosen, a, memory_order_relaxed);
  }
  return a;
#else
  return &act_base;
#endif
}

typedef struct GeluJob {
  const float *x;
  float *y;
  int64_t tanh_approx;
} GeluJob;

static void gelu_task(void *ctx, int64_t lo, int64_t hi) {
  const GeluJob *j = ctx;
  const ActLoops *a = act_loops();
  (j->tanh_approx ? a->gelu_tanh : a->gelu_erf)(j->x, j->y, lo, hi);
}

void rt_act_row(int64_t act, float *y, int64_t n) {
  switch (act) {
  case RT_ACT_RELU:
    /* max(v, 0) as the unfused relu kernel computes it (loop IR's max:
     * fmaxf for non-NaN values) */
    for (int64_t i = 0; i < n; i++)
      y[i] = fmaxf(y[i], 0.0f);
    return;
  case RT_ACT_GELU:
  case RT_ACT_GELU_TANH: {
    const ActLoops *a = act_loops();
    (act == RT_ACT_GELU_TANH ? a->gelu_tanh_ip : a->gelu_erf_ip)(y, n);
    return;
  }
  default: /* RT_ACT_NONE, or a value the caller should not pass: nothing */
    return;
  }
}

void rt_gelu(RtPool *pool, int64_t n, const float *x, float *y, int64_t tanh_approx,
             int64_t grain) {
  GeluJob j = {x, y, tanh_approx};
  rt_pool_parallel_for(pool, n, grain > 0 ? grain : 1, gelu_task, &j);
}
