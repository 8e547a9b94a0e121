/* runtime/rt_sample.c — the PRNG and token sampling of rt_sample.h.
 *
 * Invariants:
 *   - every result is a function of the inputs' bits only: integer PRNG,
 *     candidates ordered by a total order (logit descending, index
 *     ascending), so qsort's algorithm cannot change the outcome, and
 *     double arithmetic through exactly rounded operations only (our own
 *     exp/log, no FP contraction), summed in a fixed order;
 *   - no allocation on the sampling path (the caller's scratch). */
#include "runtime/rt_sample.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* No fused multiply-add: a*b+c rounded once on some targets and twice on
 * others would change bits. gcc contracts only in its GNU modes (not with
 * -std=c99/c11, as the runtime is built) but is told anyway, in case a
 * project builds it with -std=gnu11; clang honours the standard pragma. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return 1;
}

/* ---- PCG32 ---------------------------------------------------------------- */

uint32_t rt_rng_u32(RtRng *rng) {
  uint64_t old = rng->state;
  rng->state = old * 6364136223846793005ULL + rng->inc;
  uint32_t xorshifted = (uint32_t)(((old >> 18) ^ old) >> 27);
  uint32_t rot = (uint32_t)(old >> 59);
  return (xorshifted >> rot) | (xorshifted << ((32u - rot) & 31u));
}

void rt_rng_seed_stream(RtRng *rng, uint64_t seed, uint64_t stream) {
  rng->state = 0;
  rng->inc = (stream << 1) | 1u;
  (void)rt_rng_u32(rng);
  rng->state += seed;
  (void)rt_rng_u32(rng);
}

void rt_rng_seed(RtRng *rng, uint64_t seed) {
  rt_rng_seed_stream(rng, seed, RT_RNG_DEFAULT_STREAM);
}

float rt_rng_uniform(RtRng *rng) {
  return (float)(rt_rng_u32(rng) >> 8) * (1.0f / 16777216.0f);
}

/* ---- exp and log from exactly rounded operations -------------------------- */

/* ln 2 split so that k * LN2_HI is exact for |k| < 2^11 (fdlibm's split). */
#define LN2_HI 6.93147180369123816490e-01
#define LN2_LO 1.90821492927058770002e-10
#define INV_LN2 1.44269504088896338700e+00

/* exp(x) = 2^k e^r, k = round(x / ln 2), |r| <= ~0.347; e^r by its Taylor
 * series to r^14 (the next term is below 2^-60 relative). */
double rt_sample_exp(double x) {
  if (x != x) return x;
  if (x > 709.78) return HUGE_VAL;
  if (x < -745.2) return 0.0;
  double k = floor(x * INV_LN2 + 0.5);
  double r = (x - k * LN2_HI) - k * LN2_LO;
  static const double c[15] = {1.0,
                               1.0,
                               1.0 / 2,
                               1.0 / 6,
                               1.0 / 24,
                               1.0 / 120,
                               1.0 / 720,
                               1.0 / 5040,
                               1.0 / 40320,
                               1.0 / 362880,
                               1.0 / 3628800,
                               1.0 / 39916800,
                               1.0 / 479001600,
                               1.0 / 6227020800.0,
                               1.0 / 87178291200.0};
  double p = c[14];
  for (int i = 13; i >= 0; i--) p = c[i] + r * p;
  /* 2^k in two halves so neither overflows nor loses the subnormal range */
  int ki = (int)k;
  return ldexp(ldexp(p, ki / 2), ki - ki / 2);
}

/* log(x) = e ln 2 + log m, m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(t),
 * t = (m - 1) / (m + 1), |t| < 0.1716, by its series to t^25. */
double rt_sample_log(double x) {
  if (x != x || x < 0) return NAN;
  if (x == 0) return -HUGE_VAL;
  if (x == HUGE_VAL) return x;
  int e;
  double m = frexp(x, &e);
  if (m < 0.70710678118654752440) {
    m *= 2;
    e -= 1;
  }
  double t = (m - 1) / (m + 1), t2 = t * t;
  double s = 1.0 / 25;
  for (int n = 11; n >= 0; n--) s = 1.0 / (2 * n + 1) + t2 * s;
  double lm = 2 * t * s;
  return e * LN2_HI + (lm + e * LN2_LO);
}

/* ---- sampling ------------------------------------------------------------- */

RtSampleOptions rt_sample_options_default(void) {
  RtSampleOptions o;
  o.sample = 0;
  o.temperature = 1.0;
  o.top_k = 0;
  o.top_p = 1.0;
  return o;
}

int rt_sample_options_check(const RtSampleOptions *o, char *err, size_t errlen) {
  if (!(isfinite(o->temperature) && o->temperature > 0))
    return fail(err, errlen, "--temperature must be a finite number > 0 (got %g)", o->temperature);
  if (o->top_k < 0)
    return fail(err, errlen, "--top-k must be >= 1, or 0 for no top-k (got %lld)",
                (long long)o->top_k);
  if (!(o->top_p > 0 && o->top_p <= 1))
    return fail(err, errlen, "--top-p must be in (0, 1] (got %g)", o->top_p);
  if (!o->sample) {
    if (o->temperature != 1.0) return fail(err, errlen, "--temperature needs --sample");
    if (o->top_k != 0) return fail(err, errlen, "--top-k needs --sample");
    if (o->top_p != 1.0) return fail(err, errlen, "--top-p needs --sample");
  }
  return 0;
}

size_t rt_sample_scratch_bytes(int64_t vocab) {
  return vocab > 0 ? (size_t)vocab * 16u : 0;
}

/* A candidate: its logit (as a double, NaN already made -inf), its id; the
 * weight w_i replaces the logit once the order is fixed. */
typedef struct Cand {
  double v;
  int64_t id;
} Cand;

/* The sampling order: a before b when its logit is larger, or equal with a
 * lower index. A total order, so any correct sort gives the same array. */
static int cand_before(const Cand *a, const Cand *b) {
  return a->v > b->v || (a->v == b->v && a->id < b->id);
}

static int cand_cmp(const void *pa, const void *pb) {
  const Cand *a = pa, *b = pb;
  return cand_before(a, b) ? -1 : cand_before(b, a) ? 1 : 0;
}

/* Keeps the k first of c[0..n) in the sampling order in c[0..k), sorted,
 * in O(n log k): a heap of the k best so far with the worst at the root. */
static void cand_top_k(Cand *c, int64_t n, int64_t k) {
  /* heap property: no child comes after its parent (parent is "worse") */
  for (int64_t i = 0; i < n; i++) {
    Cand x = c[i];
    int64_t j;
    if (i < k) { /* sift up */
      j = i;
      while (j > 0) {
        int64_t p = (j - 1) / 2;
        if (!cand_before(&c[p], &x)) break; /* parent worse than x: stop */
        c[j] = c[p];
        j = p;
      }
      c[j] = x;
      continue;
    }
    if (!cand_before(&x, &c[0])) continue; /* not better than the worst kept */
    j = 0;                                  /* sift down from the root */
    for (;;) {
      int64_t l = 2 * j + 1, r = l + 1, w = j;
      const Cand *worst = &x;
      if (l < k && cand_before(worst, &c[l])) worst = &c[l], w = l;
      if (r < k && cand_before(worst, &c[r])) w = r;
      if (w == j) break;
      c[j] = c[w];
      j = w;
    }
    c[j] = x;
  }
  qsort(c, (size_t)k, sizeof *c, cand_cmp);
}

int rt_sample_token(const float *logits, int64_t vocab, const RtSampleOptions *o, RtRng *rng,
                    void *scratch, int64_t *token, char *err, size_t errlen) {
  if (vocab < 1) return fail(err, errlen, "sampling: empty vocabulary");
  if (!o->sample) {
    int64_t best = -1;
    for (int64_t i = 0; i < vocab; i++) {
      float x = logits[i];
      if (x != x || x == -INFINITY) continue;
      if (best < 0 || x > logits[best]) best = i;
    }
    if (best < 0) return fail(err, errlen, "sampling: all logits are -inf or NaN");
    *token = best;
    return 0;
  }
  if (rt_sample_options_check(o, err, errlen)) return 1;

  /* candidates: the tokens that can be drawn (the +inf ones if any) */
  Cand *c = scratch;
  int64_t n = 0;
  int any_posinf = 0;
  for (int64_t i = 0; i < vocab; i++) any_posinf |= logits[i] == INFINITY;
  for (int64_t i = 0; i < vocab; i++) {
    float x = logits[i];
    if (x != x || x == -INFINITY || (any_posinf && x != INFINITY)) continue;
    c[n].v = any_posinf ? 0.0 : (double)x; /* +inf ties: equally likely */
    c[n].id = i;
    n++;
  }
  if (n == 0) return fail(err, errlen, "sampling: all logits are -inf or NaN");

  int64_t k = o->top_k > 0 && o->top_k < n ? o->top_k : n;
  if (k < n)
    cand_top_k(c, n, k);
  else
    qsort(c, (size_t)n, sizeof *c, cand_cmp);
  n = k;

  /* weights relative to the largest, in double: w_i = exp((l_i - l_0) / T)
   * computed as exp(l_i / T - l_0 / T), the formula the header states */
  double x0 = c[0].v / o->temperature, z = 0;
  for (int64_t i = 0; i < n; i++) {
    c[i].v = rt_sample_exp(c[i].v / o->temperature - x0);
    z += c[i].v;
  }
  if (o->top_p < 1.0) {
    double cum = 0;
    int64_t keep = n;
    for (int64_t i = 0; i < n; i++) {
      cum += c[i].v;
      if (cum / z >= o->top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
    z = 0;
    for (int64_t i = 0; i < n; i++) z += c[i].v;
  }

  double target = (double)rt_rng_uniform(rng) * z, cum = 0;
  int64_t pick = -1, last_pos = 0;
  for (int64_t i = 0; i < n; i++) {
    if (c[i].v > 0) last_pos = i;
    cum += c[i].v;
    if (cum > target) {
      pick = i;
      break;
    }
  }
  *token = c[pick >= 0 ? pick : last_pos].id;
  return 0;
}
