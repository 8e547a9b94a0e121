/* runtime/rt_sample.c — the PRNG, token sampling and beam search of
 * rt_sample.h.
 *
 * Invariants:
 *   - every result is a function of the inputs' bits only: integer PRNG,
 *     candidates ordered by a total order (logit descending, index
 *     ascending), so qsort's algorithm cannot change the outcome, and
 *     double arithmetic through exactly rounded operations only (our own
 *     exp/log, no FP contraction), summed in a fixed order;
 *   - no allocation on the sampling path (the caller's scratch); beam search
 *     allocates once, in rt_beam_create. */
#include "runtime/rt_sample.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
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

/* 1/i!, the Taylor coefficients of rt_sample_exp (and sum_exp_avx2) */
static const double EXP_C[15] = {1.0,
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

/* exp(x) = 2^k e^r, k = round(x / ln 2), |r| <= ~0.347; e^r by its Taylor
 * series to r^14 (the next term is below 2^-60 relative). */
double rt_sample_exp(double x) {
  if (x != x) return x;
  if (x > 709.78) return HUGE_VAL;
  if (x < -745.2) return 0.0;
  double k = floor(x * INV_LN2 + 0.5);
  double r = (x - k * LN2_HI) - k * LN2_LO;
  double p = EXP_C[14];
  for (int i = 13; i >= 0; i--) p = EXP_C[i] + r * p;
  /* p in [0.70, 1.42]: for k in [-1021, 1022], p 2^k is a normal number,
   * and multiplying by 2^k built from its exponent bits is exact, the same
   * bits as the two ldexp below without their calls (beam search takes
   * V exps per beam and step: gpt2-small, 8 beams, 15% of the CPU went to
   * them). Elsewhere 2^k in two halves so neither overflows nor loses the
   * subnormal range. */
  int ki = (int)k;
  if (ki >= -1021 && ki <= 1022) {
    uint64_t bits = (uint64_t)(ki + 1023) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
  }
  return ldexp(ldexp(p, ki / 2), ki - ki / 2);
}

/* z plus rt_sample_exp(row[v] - mx) for v < n, NaN entries left out,
 * added one by one in order of v (from z = 0: the beam search's softmax
 * normaliser, mx the row's largest entry). */
static double sum_exp_scalar(double z, const float *row, int64_t n, double mx) {
  for (int64_t v = 0; v < n; v++) {
    double x = row[v];
    if (x == x) z += rt_sample_exp(x - mx);
  }
  return z;
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(TFMC_STATIC)
#include <immintrin.h>
/* The same on AVX2, four exps at a time: rt_sample_exp's operations in its
 * order, each rounded as the scalar one (separate multiplies and adds:
 * the target has no FMA, so nothing can be contracted; floor is exact),
 * and the sums added to z one by one in order of v, so z has the scalar
 * loop's bits. A group with a NaN or an x - mx below -707 (where 2^k
 * leaves the normal range or the result is 0) takes the scalar steps.
 * gpt2-small, 8 beams: 4 x 50257 exps per beam and step. */
__attribute__((target("avx2"))) static double sum_exp_avx2(const float *row, int64_t n,
                                                            double mx) {
  const __m256d m = _mm256_set1_pd(mx), lim = _mm256_set1_pd(-707.0);
  double z = 0;
  int64_t v = 0;
  for (; v + 4 <= n; v += 4) {
    __m256d x = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(row + v)), m);
    if (_mm256_movemask_pd(_mm256_cmp_pd(x, lim, _CMP_GE_OQ)) != 15) { /* NaN or small */
      z = sum_exp_scalar(z, row + v, 4, mx);
      continue;
    }
    __m256d k = _mm256_floor_pd(
        _mm256_add_pd(_mm256_mul_pd(x, _mm256_set1_pd(INV_LN2)), _mm256_set1_pd(0.5)));
    __m256d r = _mm256_sub_pd(_mm256_sub_pd(x, _mm256_mul_pd(k, _mm256_set1_pd(LN2_HI))),
                              _mm256_mul_pd(k, _mm256_set1_pd(LN2_LO)));
    __m256d p = _mm256_set1_pd(EXP_C[14]);
    for (int i = 13; i >= 0; i--)
      p = _mm256_add_pd(_mm256_set1_pd(EXP_C[i]), _mm256_mul_pd(r, p));
    __m256i ki = _mm256_cvtepi32_epi64(_mm_add_epi32(_mm256_cvtpd_epi32(k), _mm_set1_epi32(1023)));
    __m256d e = _mm256_mul_pd(p, _mm256_castsi256_pd(_mm256_slli_epi64(ki, 52)));
    double t[4];
    _mm256_storeu_pd(t, e);
    z += t[0];
    z += t[1];
    z += t[2];
    z += t[3];
  }
  return sum_exp_scalar(z, row + v, n - v, mx); /* the last 0-3 entries */
}
#endif

/* sum_exp_scalar from 0, on AVX2 where the CPU has it (the same bits).
 * The compiler's cpu check, not rt_gemm_lanes(): this file stands alone
 * (test_sample_cross builds it without the rest of the runtime), and the
 * choice never changes a result, so TFMC_GEMM_ISA has nothing to cap. */
static double sum_exp(const float *row, int64_t n, double mx) {
#if defined(__GNUC__) && defined(__x86_64__) && !defined(TFMC_STATIC)
  if (__builtin_cpu_supports("avx2"))
    return sum_exp_avx2(row, n, mx);
#endif
  return sum_exp_scalar(0, row, n, mx);
}

double rt_sample_sum_exp(const float *row, int64_t n, double mx, int portable) {
  return portable ? sum_exp_scalar(0, row, n, mx) : sum_exp(row, n, mx);
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

/* Sampling candidates are 64-bit keys: the high half orders logits (a larger
 * logit, a smaller key), the low half is the token id, so ascending keys are
 * the sampling order (logit descending, then index ascending): a total
 * order. A stable LSD radix sort of the high halves of keys laid out in
 * index order sorts them in O(V), about 10x faster than qsort for V = 50k,
 * and no sort algorithm can change the outcome. */
static uint64_t cand_key(float x, int64_t id) {
  uint32_t u;
  if (x == 0) x = 0.0f; /* -0 and +0 are equal logits */
  memcpy(&u, &x, sizeof u);
  u = (u & 0x80000000u) ? ~u : u | 0x80000000u; /* ascending with x */
  return ((uint64_t)~u << 32) | (uint64_t)id;
}

/* Sorts a[0..n) by the high 32 bits, stably; tmp[n] is clobbered. */
static void cand_sort(uint64_t *a, uint64_t *tmp, int64_t n) {
  for (int shift = 32; shift < 64; shift += 8) { /* 4 passes: ends in a */
    int64_t at[257] = {0};
    for (int64_t i = 0; i < n; i++) at[((a[i] >> shift) & 255u) + 1]++;
    for (int b = 0; b < 256; b++) at[b + 1] += at[b];
    for (int64_t i = 0; i < n; i++) tmp[at[(a[i] >> shift) & 255u]++] = a[i];
    uint64_t *t = a;
    a = tmp;
    tmp = t;
  }
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
  if ((uint64_t)vocab > 0xffffffffu)
    return fail(err, errlen, "sampling: a vocabulary of %lld ids is too large", (long long)vocab);

  /* scratch: key[vocab] (the candidates), then w[vocab] (the sort's buffer,
   * then the weights) */
  uint64_t *key = scratch, *tmp = key + vocab;
  double *w = (double *)(void *)tmp;

  /* candidates: the tokens that can be drawn (the +inf ones if any, all
   * keyed as logit 0: equally likely) */
  int64_t n = 0;
  int any_posinf = 0;
  for (int64_t i = 0; i < vocab; i++) any_posinf |= logits[i] == INFINITY;
  for (int64_t i = 0; i < vocab; i++) {
    float x = logits[i];
    if (x != x || x == -INFINITY || (any_posinf && x != INFINITY)) continue;
    key[n++] = cand_key(any_posinf ? 0.0f : x, i);
  }
  if (n == 0) return fail(err, errlen, "sampling: all logits are -inf or NaN");
  cand_sort(key, tmp, n);
  if (o->top_k > 0 && o->top_k < n) n = o->top_k;

  /* weights relative to the largest, in double: w_i = exp(l_i / T - l_0 / T) */
#define CAND_ID(i) ((int64_t)(key[i] & 0xffffffffu))
#define CAND_LOGIT(i) (any_posinf ? 0.0 : (double)logits[CAND_ID(i)])
  double x0 = CAND_LOGIT(0) / o->temperature, z = 0;
  for (int64_t i = 0; i < n; i++) {
    w[i] = rt_sample_exp(CAND_LOGIT(i) / o->temperature - x0);
    z += w[i];
  }
  if (o->top_p < 1.0) {
    double cum = 0;
    int64_t keep = n;
    for (int64_t i = 0; i < n; i++) {
      cum += w[i];
      if (cum / z >= o->top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
    z = 0;
    for (int64_t i = 0; i < n; i++) z += w[i];
  }

  double target = (double)rt_rng_uniform(rng) * z, cum = 0;
  int64_t pick = -1, last_pos = 0;
  for (int64_t i = 0; i < n; i++) {
    if (w[i] > 0) last_pos = i;
    cum += w[i];
    if (cum > target) {
      pick = i;
      break;
    }
  }
  *token = CAND_ID(pick >= 0 ? pick : last_pos);
#undef CAND_ID
#undef CAND_LOGIT
  return 0;
}

/* Beam candidates: a score (a sum of log-probs) and a flat index b * V + v. */
typedef struct Cand {
  double v;
  int64_t id;
} Cand;

/* Beam candidate order: a before b when its score is larger, or equal with
 * a lower index. */
static int cand_before(const Cand *a, const Cand *b) {
  return a->v > b->v || (a->v == b->v && a->id < b->id);
}

/* ---- beam search ---------------------------------------------------------- */

struct RtBeam {
  int K;
  int64_t V, max_new, eos;
  double alpha;
  int64_t step; /* tokens generated so far by every live beam */
  int n_live, done;
  int64_t *live_tok, *next_tok; /* [K, max_new] */
  double *live_sum, *next_sum;  /* [K] */
  int n_fin;
  int64_t *fin_tok; /* [K, max_new] */
  int64_t *fin_len; /* [K] */
  double *fin_score; /* [K], descending */
  double *lp;        /* [V] one row's log-probs */
  Cand *cand;        /* [2K] the best candidates of a step, in rank order */
};

int rt_beam_create(RtBeam **out, int beams, int64_t vocab, int64_t max_new, int64_t eos,
                   double length_penalty, char *err, size_t errlen) {
  *out = NULL;
  if (beams < 1) return fail(err, errlen, "--beams must be >= 1 (got %d)", beams);
  if (vocab < 1) return fail(err, errlen, "beam search: empty vocabulary");
  if (max_new < 1)
    return fail(err, errlen, "beam search: at least one new token is needed (got %lld)",
                (long long)max_new);
  if (eos < -1 || eos >= vocab)
    return fail(err, errlen, "beam search: the end-of-sequence id %lld is not in [0, %lld)",
                (long long)eos, (long long)vocab);
  if (!isfinite(length_penalty))
    return fail(err, errlen, "--length-penalty must be a finite number (got %g)", length_penalty);
  if ((uint64_t)max_new > (SIZE_MAX / sizeof(int64_t) / 3) / (uint64_t)beams ||
      (uint64_t)vocab > SIZE_MAX / sizeof(double) / 2)
    return fail(err, errlen, "beam search: %d beams of %lld tokens do not fit in memory", beams,
                (long long)max_new);
  RtBeam *bs = calloc(1, sizeof *bs);
  if (!bs) return fail(err, errlen, "out of memory");
  size_t kt = (size_t)beams * (size_t)max_new;
  bs->K = beams;
  bs->V = vocab;
  bs->max_new = max_new;
  bs->eos = eos;
  bs->alpha = length_penalty;
  bs->n_live = 1;
  bs->live_tok = malloc(kt * sizeof(int64_t));
  bs->next_tok = malloc(kt * sizeof(int64_t));
  bs->fin_tok = malloc(kt * sizeof(int64_t));
  bs->live_sum = calloc((size_t)beams, sizeof(double));
  bs->next_sum = calloc((size_t)beams, sizeof(double));
  bs->fin_len = calloc((size_t)beams, sizeof(int64_t));
  bs->fin_score = calloc((size_t)beams, sizeof(double));
  bs->lp = malloc((size_t)vocab * sizeof(double));
  bs->cand = malloc(2 * (size_t)beams * sizeof(Cand));
  if (!bs->live_tok || !bs->next_tok || !bs->fin_tok || !bs->live_sum || !bs->next_sum ||
      !bs->fin_len || !bs->fin_score || !bs->lp || !bs->cand) {
    rt_beam_destroy(bs);
    return fail(err, errlen, "out of memory");
  }
  *out = bs;
  return 0;
}

void rt_beam_destroy(RtBeam *bs) {
  if (!bs) return;
  free(bs->live_tok);
  free(bs->next_tok);
  free(bs->fin_tok);
  free(bs->live_sum);
  free(bs->next_sum);
  free(bs->fin_len);
  free(bs->fin_score);
  free(bs->lp);
  free(bs->cand);
  free(bs);
}

/* len^alpha, exact for the common alpha 0 and 1. */
static double beam_len_pow(double len, double alpha) {
  if (alpha == 0) return 1.0;
  if (alpha == 1) return len;
  return rt_sample_exp(alpha * rt_sample_log(len));
}

/* Adds a finished hypothesis (prefix tok[0..len-1], the last token given
 * separately when >= 0) with sum of log-probs `sum`: kept if fewer than K
 * are kept or it beats the worst; after any equal score (finished later). */
static void beam_finish(RtBeam *bs, const int64_t *prefix, int64_t plen, int64_t last,
                        double sum) {
  int64_t len = plen + (last >= 0);
  double score = sum / beam_len_pow((double)len, bs->alpha);
  int pos = bs->n_fin;
  while (pos > 0 && bs->fin_score[pos - 1] < score) pos--;
  if (pos >= bs->K) return;
  int end = bs->n_fin < bs->K ? bs->n_fin : bs->K - 1; /* the last one falls off when full */
  for (int i = end; i > pos; i--) {
    bs->fin_score[i] = bs->fin_score[i - 1];
    bs->fin_len[i] = bs->fin_len[i - 1];
    memcpy(bs->fin_tok + (size_t)i * bs->max_new, bs->fin_tok + (size_t)(i - 1) * bs->max_new,
           (size_t)bs->fin_len[i] * sizeof(int64_t));
  }
  int64_t *dst = bs->fin_tok + (size_t)pos * bs->max_new;
  memmove(dst, prefix, (size_t)plen * sizeof(int64_t));
  if (last >= 0) dst[plen] = last;
  bs->fin_score[pos] = score;
  bs->fin_len[pos] = len;
  if (bs->n_fin < bs->K) bs->n_fin++;
}

/* log_softmax of one row into lp, NaN as -inf. Returns non-zero when the
 * row has no finite or +inf entry. +inf entries share the mass (log(1/n)),
 * the rest get -inf, as in sampling. */
static int beam_log_softmax(const float *row, int64_t V, double *lp) {
  double mx = -HUGE_VAL;
  int64_t n_posinf = 0;
  for (int64_t v = 0; v < V; v++) {
    double x = row[v];
    if (x != x) x = -HUGE_VAL;
    if (x == HUGE_VAL) n_posinf++;
    if (x > mx) mx = x;
  }
  if (mx == -HUGE_VAL) return 1;
  if (n_posinf) {
    double l = -rt_sample_log((double)n_posinf);
    for (int64_t v = 0; v < V; v++) lp[v] = row[v] == INFINITY ? l : -HUGE_VAL;
    return 0;
  }
  double lz = rt_sample_log(sum_exp(row, V, mx));
  for (int64_t v = 0; v < V; v++) {
    double x = row[v];
    lp[v] = x == x ? (x - mx) - lz : -HUGE_VAL;
  }
  return 0;
}

/* Candidate order for beams: sum descending, then flat index b * V + v
 * ascending (Cand.id holds the flat index). */
static void beam_offer(RtBeam *bs, int *n, double s, int64_t flat) {
  Cand x;
  x.v = s;
  x.id = flat;
  int cap = 2 * bs->K;
  if (*n == cap && !cand_before(&x, &bs->cand[cap - 1])) return;
  int pos = *n < cap ? (*n)++ : cap - 1;
  while (pos > 0 && cand_before(&x, &bs->cand[pos - 1])) {
    bs->cand[pos] = bs->cand[pos - 1];
    pos--;
  }
  bs->cand[pos] = x;
}

int rt_beam_step(RtBeam *bs, const float *logits, int64_t *parent, int64_t *token, int *n_live,
                 int *done, char *err, size_t errlen) {
  if (bs->done) return fail(err, errlen, "beam search: step after the search is done");
  int K = bs->K;
  int64_t V = bs->V;
  int nc = 0;
  for (int b = 0; b < bs->n_live; b++) {
    if (beam_log_softmax(logits + (size_t)b * V, V, bs->lp))
      return fail(err, errlen, "beam search: all logits of beam %d are -inf or NaN", b);
    for (int64_t v = 0; v < V; v++) {
      double s = bs->live_sum[b] + bs->lp[v];
      if (s == -HUGE_VAL) continue;
      beam_offer(bs, &nc, s, (int64_t)b * V + v);
    }
  }

  int64_t L = bs->step; /* prefix length before this step */
  int nl = 0;
  for (int r = 0; r < nc && nl < K; r++) {
    int b = (int)(bs->cand[r].id / V);
    int64_t v = bs->cand[r].id % V;
    const int64_t *prefix = bs->live_tok + (size_t)b * bs->max_new;
    if (v == bs->eos) {
      if (r < K) beam_finish(bs, prefix, L, v, bs->cand[r].v);
      continue;
    }
    memcpy(bs->next_tok + (size_t)nl * bs->max_new, prefix, (size_t)L * sizeof(int64_t));
    bs->next_tok[(size_t)nl * bs->max_new + L] = v;
    bs->next_sum[nl] = bs->cand[r].v;
    parent[nl] = b;
    token[nl] = v;
    nl++;
  }
  for (int i = nl; i < K; i++) {
    parent[i] = 0;
    token[i] = bs->eos >= 0 ? bs->eos : 0;
  }
  int64_t *tt = bs->live_tok;
  bs->live_tok = bs->next_tok;
  bs->next_tok = tt;
  double *ts = bs->live_sum;
  bs->live_sum = bs->next_sum;
  bs->next_sum = ts;
  bs->n_live = nl;
  bs->step = L + 1;

  if (bs->step >= bs->max_new) {
    for (int i = 0; i < nl; i++)
      beam_finish(bs, bs->live_tok + (size_t)i * bs->max_new, bs->step, -1, bs->live_sum[i]);
    bs->done = 1;
  } else if (nl == 0) {
    bs->done = 1;
  } else if (bs->n_fin == K) {
    double best = bs->live_sum[0]; /* live beams are in rank order */
    double len = bs->alpha > 0 && best < 0 ? (double)bs->max_new : (double)(bs->step + 1);
    if (best / beam_len_pow(len, bs->alpha) <= bs->fin_score[K - 1]) bs->done = 1;
  }
  *n_live = nl;
  *done = bs->done;
  return 0;
}

int rt_beam_n_finished(const RtBeam *bs) {
  return bs->n_fin;
}

int rt_beam_best(const RtBeam *bs, int rank, const int64_t **tokens, int64_t *len, double *score) {
  if (rank < 0 || rank >= bs->n_fin) return 1;
  *tokens = bs->fin_tok + (size_t)rank * bs->max_new;
  *len = bs->fin_len[rank];
  *score = bs->fin_score[rank];
  return 0;
}
