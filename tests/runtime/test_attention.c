/* tests/runtime/test_attention.c — rt_attention and rt_attention_streaming
 * against a naive double-precision reference of the `attention` op
 * (ir/ops.def): with and without a mask, every broadcast shape of the mask
 * ([1|B, 1|Tq, Tk]), the probabilities output, heads 1..12, odd sizes
 * (Tq and Tk of 1, sizes crossing the 64-row query blocks, dh != dv, dh 1),
 * fully masked rows (uniform attention), no keys at all, pools of 1-3
 * threads (results bit-identical across thread counts), the AVX2 products
 * (dv a multiple of 8, short keys) and the BLAS path (other dv, long keys),
 * the OpenBLAS and portable GEMMs, and scratch buffers growing between calls. Nothing may be
 * written outside out and probs. Every shape runs under several policies
 * (block_q, max_tk_tiled): the AVX2 products whenever the CPU and dv allow,
 * never, or up to a key length, in blocks of 64 or of 5 query rows.
 * rt_attention_flash runs on every shape too, with key blocks of 1, 3, 7,
 * 16 and 128 (dividing the lengths or not) and query blocks of 64 and 5;
 * causal masks, Q/K/V read out of one fused QKV buffer (row strides) and
 * thread counts have their own tests, and so do the AVX-512, AVX2 and
 * scalar paths (TFMC_GEMM_ISA). */
#include "runtime/rt_attention.h"
#include "runtime/rt_gemm.h"
#include "runtime/rt_pool.h"
#include "tests/runtime/isa_init.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545F4914F6CDD1Dull;
}

static float frand(void) { /* uniform in [-1, 1) */
  return (float)((double)(next() >> 11) / 4503599627370496.0 - 1.0);
}

static float *rand_buf(int64_t n, float amp) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  cr_assert_not_null(p);
  for (int64_t i = 0; i < n; i++)
    p[i] = amp * frand();
  return p;
}

enum { GUARD = 37 };           /* floats after out / probs that must stay as they were */
static const float POISON = -12345.5f;

static float *guarded(int64_t n) {
  float *p = malloc(sizeof(float) * (size_t)(n + GUARD));
  cr_assert_not_null(p);
  for (int64_t i = 0; i < n + GUARD; i++)
    p[i] = POISON;
  return p;
}

static void check_guard(const float *p, int64_t n, const char *what) {
  for (int64_t i = n; i < n + GUARD; i++)
    cr_assert_eq(p[i], POISON, "%s: wrote past its end (element %lld)", what, (long long)i);
}

typedef struct Shape {
  int64_t b, h, tq, tk, dh, dv;
  int64_t mask_b, mask_q; /* 0: no mask */
} Shape;

typedef struct Data {
  Shape s;
  float scale;
  float *q, *k, *v;
  uint8_t *mask;
  double *ref_out, *ref_probs;
} Data;

/* The reference: per (b, h, t) scores in double, masked scores replaced by
 * -1e9, softmax, weighted sum of v rows. */
static void reference(Data *d) {
  const Shape *s = &d->s;
  int64_t D = s->h * s->dh, Dv = s->h * s->dv;
  double *sc = malloc(sizeof(double) * (size_t)(s->tk > 0 ? s->tk : 1));
  d->ref_out = calloc((size_t)(s->b * s->tq * Dv + 1), sizeof(double));
  d->ref_probs = calloc((size_t)(s->b * s->h * s->tq * s->tk + 1), sizeof(double));
  cr_assert(sc && d->ref_out && d->ref_probs);
  for (int64_t b = 0; b < s->b; b++)
    for (int64_t h = 0; h < s->h; h++)
      for (int64_t t = 0; t < s->tq; t++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < s->tk; j++) {
          double dot = 0;
          for (int64_t e = 0; e < s->dh; e++)
            dot += (double)d->q[(b * s->tq + t) * D + h * s->dh + e] *
                   (double)d->k[(b * s->tk + j) * D + h * s->dh + e];
          sc[j] = dot * (double)d->scale;
          if (d->mask) {
            int64_t mb = s->mask_b == 1 ? 0 : b, mq = s->mask_q == 1 ? 0 : t;
            if (!d->mask[(mb * s->mask_q + mq) * s->tk + j])
              sc[j] = -1e9;
          }
          if (sc[j] > mx)
            mx = sc[j];
        }
        for (int64_t j = 0; j < s->tk; j++) {
          sc[j] = exp(sc[j] - mx);
          sum += sc[j];
        }
        double *pr = d->ref_probs + ((b * s->h + h) * s->tq + t) * s->tk;
        for (int64_t j = 0; j < s->tk; j++)
          pr[j] = sc[j] / sum;
        double *o = d->ref_out + (b * s->tq + t) * Dv + h * s->dv;
        for (int64_t j = 0; j < s->tk; j++)
          for (int64_t e = 0; e < s->dv; e++)
            o[e] += pr[j] * (double)d->v[(b * s->tk + j) * Dv + h * s->dv + e];
      }
  free(sc);
}

/* Random q, k, v (amplitude 2, so some softmaxes are peaked) and a mask
 * where about one key in four is masked and row 0 of every mask is fully
 * masked when full_row is set. */
static Data make(Shape s, bool full_row) {
  Data d = {.s = s};
  d.scale = s.dh > 0 ? (float)(1.0 / sqrt((double)s.dh)) : 1.0f;
  d.q = rand_buf(s.b * s.tq * s.h * s.dh, 2);
  d.k = rand_buf(s.b * s.tk * s.h * s.dh, 2);
  d.v = rand_buf(s.b * s.tk * s.h * s.dv, 1);
  if (s.mask_b) {
    int64_t n = s.mask_b * s.mask_q * s.tk;
    d.mask = malloc((size_t)(n > 0 ? n : 1));
    cr_assert_not_null(d.mask);
    for (int64_t i = 0; i < n; i++)
      d.mask[i] = (next() >> 60) % 4 != 0;
    if (full_row)
      for (int64_t m = 0; m < s.mask_b; m++)
        memset(d.mask + m * s.mask_q * s.tk, 0, (size_t)s.tk);
  }
  reference(&d);
  return d;
}

static void release(Data *d) {
  free(d->q);
  free(d->k);
  free(d->v);
  free(d->mask);
  free(d->ref_out);
  free(d->ref_probs);
}

static void check_close(const float *got, const double *ref, int64_t n, const char *what,
                        const Shape *s) {
  for (int64_t i = 0; i < n; i++)
    cr_assert(fabs((double)got[i] - ref[i]) <= 2e-5 + 1e-4 * fabs(ref[i]),
              "%s b=%lld h=%lld tq=%lld tk=%lld dh=%lld dv=%lld mask=[%lld,%lld]: [%lld] = %.9g, "
              "reference %.9g",
              what, (long long)s->b, (long long)s->h, (long long)s->tq, (long long)s->tk,
              (long long)s->dh, (long long)s->dv, (long long)s->mask_b, (long long)s->mask_q,
              (long long)i, got[i], ref[i]);
}

/* rt_attention's policy arguments: query rows per task, and the longest
 * keys the AVX2 register-tiled products take. */
typedef struct Policy {
  int64_t block_q, max_tk_tiled;
} Policy;

/* What the lowering passes by default at dh = dv = 64 (LowerLoopsOptions). */
static const Policy DEFAULT_POLICY = {64, 256};
/* Tiled whenever the CPU and dv allow; never (BLAS); up to 40 keys in
 * blocks of 5 rows. */
static const Policy POLICIES[] = {{64, INT64_MAX}, {64, 0}, {5, 40}};
enum { N_POLICIES = sizeof POLICIES / sizeof *POLICIES };

static void attention(RtPool *pool, const Data *d, float *out, float *probs, Policy pol) {
  const Shape *s = &d->s;
  rt_attention(pool, s->b, s->h, s->tq, s->tk, s->dh, s->dv, d->scale, d->q, s->h * s->dh, d->k,
               s->h * s->dh, d->v, s->h * s->dv, s->tk * s->h * s->dh, s->tk * s->h * s->dv,
               d->mask, s->mask_b, s->mask_q, out, probs, pol.block_q, pol.max_tk_tiled);
}

/* rt_attention_flash's keys per block: one key, sizes that divide no
 * length here, and more than any tk (one block: the plain form) */
static const int64_t BLOCK_KS[] = {1, 3, 7, 16, 128};
enum { N_BLOCK_KS = sizeof BLOCK_KS / sizeof *BLOCK_KS };

static void attention_flash(RtPool *pool, const Data *d, float *out, int64_t block_q,
                            int64_t block_k) {
  const Shape *s = &d->s;
  rt_attention_flash(pool, s->b, s->h, s->tq, s->tk, s->dh, s->dv, d->scale, d->q, s->h * s->dh,
                     d->k, s->h * s->dh, d->v, s->h * s->dv, s->tk * s->h * s->dh,
                     s->tk * s->h * s->dv, d->mask, s->mask_b, s->mask_q, out, block_q, block_k);
}

/* Runs rt_attention (with and without probs, under every policy) and
 * rt_attention_streaming on d and checks all of them; returns
 * rt_attention's out under the first policy (caller frees). */
static float *run_all(Data *d, RtPool *pool) {
  const Shape *s = &d->s;
  int64_t n_out = s->b * s->tq * s->h * s->dv, n_p = s->b * s->h * s->tq * s->tk;
  float *out = guarded(n_out), *out2 = guarded(n_out), *out3 = guarded(n_out);
  float *probs = guarded(n_p);
  for (int i = N_POLICIES - 1; i >= 0; i--) { /* ending with the first: out is its result */
    attention(pool, d, out, NULL, POLICIES[i]);
    check_close(out, d->ref_out, n_out, "rt_attention out", s);
    check_guard(out, n_out, "rt_attention out");

    attention(pool, d, out2, probs, POLICIES[i]);
    check_close(out2, d->ref_out, n_out, "rt_attention out (with probs)", s);
    check_close(probs, d->ref_probs, n_p, "rt_attention probs", s);
    check_guard(out2, n_out, "rt_attention out (with probs)");
    check_guard(probs, n_p, "rt_attention probs");
  }

  rt_attention_streaming(s->b, s->h, s->tq, s->tk, s->dh, s->dv, d->scale, d->q, d->k, d->v,
                         d->mask, s->mask_b, s->mask_q, out3);
  check_close(out3, d->ref_out, n_out, "rt_attention_streaming out", s);
  check_guard(out3, n_out, "rt_attention_streaming out");
  for (int i = 0; i < N_BLOCK_KS; i++)
    for (int64_t bq = 64; bq >= 5; bq -= 59) {
      attention_flash(pool, d, out3, bq, BLOCK_KS[i]);
      check_close(out3, d->ref_out, n_out, "rt_attention_flash out", s);
      check_guard(out3, n_out, "rt_attention_flash out");
    }
  free(out2);
  free(out3);
  free(probs);
  return out;
}

/* Every mask shape for one size: none, [1,1,Tk], [B,1,Tk], [1,Tq,Tk], [B,Tq,Tk]. */
static void check_shape(int64_t b, int64_t h, int64_t tq, int64_t tk, int64_t dh, int64_t dv,
                        RtPool *pool) {
  static const int masks[5][2] = {{0, 0}, {1, 1}, {2, 1}, {1, 2}, {2, 2}};
  for (int m = 0; m < 5; m++) {
    Shape s = {b, h, tq, tk, dh, dv, 0, 0};
    if (masks[m][0]) {
      s.mask_b = masks[m][0] == 1 ? 1 : b;
      s.mask_q = masks[m][1] == 1 ? 1 : tq;
    }
    Data d = make(s, false);
    free(run_all(&d, pool));
    release(&d);
  }
}

/* ---- tests ---- */

Test(attention, small_and_odd_sizes_single_thread) {
  check_shape(1, 1, 1, 1, 1, 1, NULL);
  check_shape(2, 1, 3, 1, 4, 4, NULL);   /* one key */
  check_shape(1, 2, 1, 9, 8, 3, NULL);   /* one query, dv != dh */
  check_shape(3, 3, 5, 7, 5, 2, NULL);   /* odd everything */
  check_shape(2, 4, 7, 5, 1, 6, NULL);   /* dh 1 */
  check_shape(1, 5, 13, 17, 3, 7, NULL);
}

Test(attention, heads_1_to_12) {
  RtPool *pool = rt_pool_create(2);
  for (int64_t h = 1; h <= 12; h++)
    check_shape(2, h, 9, 11, 8, 8, pool);
  rt_pool_destroy(pool);
}

Test(attention, query_blocks_and_long_keys) {
  RtPool *pool = rt_pool_create(3);
  check_shape(1, 2, 64, 64, 16, 16, pool);   /* exactly one block */
  check_shape(2, 3, 65, 33, 16, 8, pool);    /* one row into the second block */
  check_shape(1, 2, 130, 257, 32, 24, pool); /* three blocks, long keys */
  check_shape(2, 1, 129, 3, 64, 64, pool);   /* cross attention: few keys */
  /* long keys (beyond what the lowering lets the AVX2 products take by
   * default), on both paths */
  check_shape(1, 2, 70, 2100, 8, 8, pool);
  rt_pool_destroy(pool);
}

Test(attention, bert_base_shape) {
  RtPool *pool = rt_pool_create(2);
  Shape s = {2, 12, 128, 128, 64, 64, 2, 1}; /* key padding mask [B,1,S] */
  Data d = make(s, false);
  free(run_all(&d, pool));
  release(&d);
  rt_pool_destroy(pool);
}

/* A query row whose keys are all masked attends uniformly: out is the mean
 * of the v rows, the probabilities all 1/Tk. */
Test(attention, fully_masked_row_is_uniform) {
  Shape s = {2, 3, 4, 6, 4, 5, 2, 4};
  Data d = make(s, true); /* row 0 of each batch element's mask is all zeros */
  float *out = run_all(&d, NULL);
  int64_t Dv = s.h * s.dv;
  for (int64_t b = 0; b < s.b; b++)
    for (int64_t e = 0; e < Dv; e++) {
      double mean = 0;
      for (int64_t j = 0; j < s.tk; j++)
        mean += d.v[(b * s.tk + j) * Dv + e];
      mean /= (double)s.tk;
      cr_assert(fabs(out[b * s.tq * Dv + e] - mean) <= 1e-5 + 1e-5 * fabs(mean),
                "b=%lld column %lld: %.9g, mean of v %.9g", (long long)b, (long long)e,
                out[b * s.tq * Dv + e], mean);
    }
  float *probs = guarded(s.b * s.h * s.tq * s.tk), *o2 = guarded(s.b * s.tq * Dv);
  attention(NULL, &d, o2, probs, DEFAULT_POLICY);
  for (int64_t b = 0; b < s.b; b++)
    for (int64_t h = 0; h < s.h; h++)
      for (int64_t t = 0; t < s.tq; t++)
        for (int64_t j = 0; j < s.tk; j++) {
          float p = probs[((b * s.h + h) * s.tq + t) * s.tk + j];
          if (t == 0)
            cr_assert(fabsf(p - 1.0f / (float)s.tk) <= 1e-6f, "uniform row: p = %.9g", p);
          else if (!d.mask[(b * s.tq + t) * s.tk + j])
            cr_assert_eq(p, 0.0f, "a masked key has probability %.9g", p);
        }
  free(out);
  free(o2);
  free(probs);
  release(&d);
}

/* The blocks do not depend on the number of threads: bit-identical results
 * under each policy (dv 12 takes the BLAS path, dv 16 the AVX2 one where
 * the policy and CPU allow). */
Test(attention, same_bits_for_any_thread_count) {
  Shape shapes[2] = {{3, 4, 70, 45, 16, 12, 3, 1}, {3, 4, 70, 45, 16, 16, 3, 1}};
  for (int si = 0; si < 2; si++)
    for (int pi = 0; pi < N_POLICIES; pi++) {
      Shape s = shapes[si];
      Data d = make(s, false);
      int64_t n = s.b * s.tq * s.h * s.dv;
      float *o1 = guarded(n);
      attention(NULL, &d, o1, NULL, POLICIES[pi]);
      for (int threads = 1; threads <= 3; threads++) {
        RtPool *pool = rt_pool_create(threads);
        float *o = guarded(n);
        attention(pool, &d, o, NULL, POLICIES[pi]);
        cr_assert(memcmp(o, o1, sizeof(float) * (size_t)n) == 0,
                  "dv %lld, policy %d: %d threads changed the result", (long long)s.dv, pi,
                  threads);
        free(o);
        rt_pool_destroy(pool);
      }
      free(o1);
      release(&d);
    }
}

/* block_q below 1 counts as 1 query row per task. */
Test(attention, block_q_below_one) {
  Shape s = {2, 3, 9, 11, 8, 8, 2, 1};
  Data d = make(s, false);
  int64_t n = s.b * s.tq * s.h * s.dv;
  float *o = guarded(n);
  attention(NULL, &d, o, NULL, (Policy){0, 256});
  check_close(o, d.ref_out, n, "block_q 0", &s);
  check_guard(o, n, "block_q 0");
  attention(NULL, &d, o, NULL, (Policy){-3, 0});
  check_close(o, d.ref_out, n, "block_q -3", &s);
  free(o);
  release(&d);
}

/* The per-thread scratch grows when a later call needs more: small, large,
 * small again on the same pool. */
Test(attention, scratch_grows_between_calls) {
  RtPool *pool = rt_pool_create(2);
  Shape sizes[3] = {{1, 2, 8, 4, 8, 8, 1, 1}, {1, 2, 100, 700, 8, 8, 1, 1}, {1, 2, 9, 5, 8, 8, 0, 0}};
  for (int i = 0; i < 3; i++) {
    Data d = make(sizes[i], false);
    free(run_all(&d, pool));
    release(&d);
  }
  rt_pool_destroy(pool);
}

/* No keys: every output is an empty sum. Empty batches, heads or queries:
 * nothing is written. */
Test(attention, empty_sizes) {
  float q[8], k[1], v[1];
  for (int i = 0; i < 8; i++)
    q[i] = 1;
  float *out = guarded(2 * 2 * 3);
  rt_attention(NULL, 1, 2, 2, 0, 2, 3, 1.0f, q, 4, k, 4, v, 6, 0, 0, NULL, 1, 1, out, NULL, 64, 256);
  for (int i = 0; i < 12; i++)
    cr_assert_eq(out[i], 0.0f);
  check_guard(out, 12, "tk = 0");
  for (int i = 0; i < 12; i++)
    out[i] = POISON;
  rt_attention_streaming(1, 2, 2, 0, 2, 3, 1.0f, q, k, v, NULL, 1, 1, out);
  for (int i = 0; i < 12; i++)
    cr_assert_eq(out[i], 0.0f);
  for (int i = 0; i < 12; i++)
    out[i] = POISON;
  rt_attention(NULL, 0, 2, 2, 2, 2, 3, 1.0f, q, 4, k, 4, v, 6, 0, 0, NULL, 1, 1, out, NULL, 64, 256);
  rt_attention(NULL, 1, 0, 2, 2, 2, 3, 1.0f, q, 4, k, 4, v, 6, 0, 0, NULL, 1, 1, out, NULL, 64, 256);
  rt_attention(NULL, 1, 2, 0, 2, 2, 3, 1.0f, q, 4, k, 4, v, 6, 0, 0, NULL, 1, 1, out, NULL, 64, 256);
  check_guard(out, 0, "empty sizes");
  free(out);
}

/* k and v as views of larger caches (batch elements `rows` rows apart, as
 * a KV cache holds them): the same result as contiguous copies, under every
 * policy. */
Test(attention, batch_strided_kv) {
  enum { Bn = 2, H = 2, TQ = 3, TK = 5, DH = 8, ROWS = 9, D = H * DH };
  float q[Bn * TQ * D], k[Bn * TK * D], v[Bn * TK * D], kc[Bn * ROWS * D], vc[Bn * ROWS * D];
  float out[Bn * TQ * D], ref[Bn * TQ * D];
  for (int i = 0; i < Bn * TQ * D; i++) q[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
  for (int i = 0; i < Bn * ROWS * D; i++) kc[i] = vc[i] = 1e30f; /* rows past TK: never read */
  for (int b = 0; b < Bn; b++)
    for (int x = 0; x < TK * D; x++) {
      k[b * TK * D + x] = kc[b * ROWS * D + x] = (float)((x * 13 + b) % 11) / 11.0f - 0.5f;
      v[b * TK * D + x] = vc[b * ROWS * D + x] = (float)((x * 7 + b) % 23) / 23.0f - 0.5f;
    }
  rt_attention_streaming(Bn, H, TQ, TK, DH, DH, 0.3f, q, k, v, NULL, 1, 1, ref);
  for (int pi = 0; pi < N_POLICIES; pi++) {
    rt_attention(NULL, Bn, H, TQ, TK, DH, DH, 0.3f, q, D, kc, D, vc, D, ROWS * D, ROWS * D, NULL,
                 1, 1, out, NULL, POLICIES[pi].block_q, POLICIES[pi].max_tk_tiled);
    for (int i = 0; i < Bn * TQ * D; i++)
      cr_assert(fabsf(out[i] - ref[i]) <= 1e-5f, "policy %d out[%d] = %g, expected %g", pi, i,
                out[i], ref[i]);
  }
}

/* The same checks through the portable GEMM (its own test process). */
Test(attention, portable_gemm) {
  setenv("TFMC_GEMM", "portable", 1);
  cr_assert(strncmp(rt_gemm_backend(), "portable", 8) == 0, "%s", rt_gemm_backend());
  RtPool *pool = rt_pool_create(2);
  check_shape(2, 3, 67, 19, 8, 5, pool);
  check_shape(1, 1, 1, 1, 1, 1, pool);
  rt_pool_destroy(pool);
}

/* A NaN in a key makes every score row that sees it NaN, as in the
 * reference (no fast exp turns it into a number); other heads stay finite. */
Test(attention, nan_propagates) {
  Shape s = {1, 2, 3, 5, 4, 4, 0, 0};
  Data d = make(s, false);
  d.k[(2 * s.h) * s.dh + 1] = NAN; /* key 2, head 0 */
  int64_t Dv = s.h * s.dv;
  float *out = guarded(s.tq * Dv), *probs = guarded(s.h * s.tq * s.tk);
  attention(NULL, &d, out, probs, DEFAULT_POLICY);
  for (int64_t t = 0; t < s.tq; t++)
    for (int64_t e = 0; e < Dv; e++) {
      float x = out[t * Dv + e];
      cr_assert(e < s.dv ? isnan(x) : isfinite(x), "out[%lld,%lld] = %g", (long long)t,
                (long long)e, x);
    }
  for (int64_t j = 0; j < s.tq * s.tk; j++)
    cr_assert(isnan(probs[j]) && isfinite(probs[s.tq * s.tk + j]), "probs[%lld]", (long long)j);
  free(out);
  free(probs);
  release(&d);
}

/* ---- the flash form ---- */

/* A causal mask [1,Tq,Tk] (query t sees keys <= t + Tk - Tq), with a
 * padding of the last keys on top for batch element 1 ([B,Tq,Tk]):
 * key blocks that are wholly masked for some rows and not for others. */
Test(attention, flash_causal_and_padding) {
  RtPool *pool = rt_pool_create(2);
  int64_t sizes[][2] = {{37, 37}, {5, 41}, {130, 130}};
  for (int si = 0; si < 3; si++) {
    int64_t tq = sizes[si][0], tk = sizes[si][1];
    for (int padded = 0; padded < 2; padded++) {
      Shape s = {2, 3, tq, tk, 8, 8, padded ? 2 : 1, tq};
      Data d = make(s, false);
      for (int64_t b = 0; b < s.mask_b; b++)
        for (int64_t t = 0; t < tq; t++)
          for (int64_t j = 0; j < tk; j++)
            d.mask[(b * tq + t) * tk + j] = j <= t + tk - tq && !(b == 1 && j >= tk - 4);
      free(d.ref_out);
      free(d.ref_probs);
      reference(&d);
      free(run_all(&d, pool));
      release(&d);
    }
  }
  rt_pool_destroy(pool);
}

/* A flash task sweeps the keys only up to the last one any of its rows
 * sees (flash_keys), and that gives the same bits as sweeping them all:
 * under a causal mask in blocks of 16 query rows, block 0 (rows 0-15)
 * sweeps 16 keys; letting row 15 see every key makes the block sweep all
 * 48, and rows 0-14 must come out bit for bit the same (one key block, and
 * blocks of 16 keys; on a pool of 2), as must the other blocks' rows. */
Test(attention, flash_skips_masked_keys_exactly) {
  Shape s = {1, 2, 48, 48, 16, 16, 1, 48};
  Data d = make(s, false);
  const int64_t D = s.h * s.dv, n_out = s.tq * D;
  static const int64_t bks[] = {1024, 16};
  RtPool *pool = rt_pool_create(2);
  for (size_t bi = 0; bi < sizeof bks / sizeof *bks; bi++) {
    float *o[2];
    for (int wide = 0; wide < 2; wide++) {
      for (int64_t t = 0; t < s.tq; t++)
        for (int64_t x = 0; x < s.tk; x++)
          d.mask[t * s.tk + x] = x <= t || (wide && t == 15);
      o[wide] = guarded(n_out);
      rt_attention_flash(pool, s.b, s.h, s.tq, s.tk, s.dh, s.dv, d.scale, d.q, s.h * s.dh, d.k,
                         s.h * s.dh, d.v, s.h * s.dv, s.tk * s.h * s.dh, s.tk * s.h * s.dv, d.mask,
                         1, s.tq, o[wide], 16, bks[bi]);
    }
    cr_assert(memcmp(o[0], o[1], sizeof(float) * (size_t)(15 * D)) == 0,
              "block_k %lld: rows 0-14 differ when their block sweeps all keys",
              (long long)bks[bi]);
    /* row 15 itself now attends to all 48 keys: a different value */
    cr_assert(memcmp(o[0] + 15 * D, o[1] + 15 * D, sizeof(float) * (size_t)D) != 0);
    cr_assert(memcmp(o[0] + 16 * D, o[1] + 16 * D, sizeof(float) * (size_t)(32 * D)) == 0);
    free(o[0]);
    free(o[1]);
  }
  rt_pool_destroy(pool);
  release(&d);
}

/* Under a causal mask a block's rows run in halves, each sweeping only its
 * own keys (attn_block_flash), down to 32 rows; a row's bits must not
 * depend on the block it is in: blocks of 128, 64 and 100 rows (split
 * into halves, the last of 100 rows into 50 + 50, one of them ragged)
 * give exactly the rows that blocks of 16 (never split) give, with one
 * key block and with blocks of 32 keys; and all of them match the
 * reference. A padding mask (every row the same reach) is not split and
 * must match too. */
Test(attention, flash_causal_halves_keep_bits) {
  Shape s = {1, 2, 128, 128, 16, 16, 1, 128};
  Data d = make(s, false);
  const int64_t D = s.h * s.dv, n_out = s.tq * D;
  static const int64_t bqs[] = {128, 64, 100}, bks[] = {1024, 32};
  RtPool *pool = rt_pool_create(2);
  for (int padded = 0; padded < 2; padded++) {
    for (int64_t t = 0; t < s.tq; t++)
      for (int64_t x = 0; x < s.tk; x++)
        d.mask[t * s.tk + x] = padded ? x < 77 : x <= t;
    for (size_t ki = 0; ki < sizeof bks / sizeof *bks; ki++) {
      float *ref = guarded(n_out);
      rt_attention_flash(pool, s.b, s.h, s.tq, s.tk, s.dh, s.dv, d.scale, d.q, s.h * s.dh, d.k,
                         s.h * s.dh, d.v, s.h * s.dv, s.tk * s.h * s.dh, s.tk * s.h * s.dv, d.mask,
                         1, s.tq, ref, 16, bks[ki]);
      free(d.ref_out);
      free(d.ref_probs);
      reference(&d);
      check_close(ref, d.ref_out, n_out, "rt_attention_flash, blocks of 16 rows", &s);
      for (size_t qi = 0; qi < sizeof bqs / sizeof *bqs; qi++) {
        float *o = guarded(n_out);
        rt_attention_flash(pool, s.b, s.h, s.tq, s.tk, s.dh, s.dv, d.scale, d.q, s.h * s.dh, d.k,
                           s.h * s.dh, d.v, s.h * s.dv, s.tk * s.h * s.dh, s.tk * s.h * s.dv,
                           d.mask, 1, s.tq, o, bqs[qi], bks[ki]);
        cr_assert(memcmp(o, ref, sizeof(float) * (size_t)n_out) == 0,
                  "%s mask, block_q %lld, block_k %lld: not the bits of blocks of 16 rows",
                  padded ? "padding" : "causal", (long long)bqs[qi], (long long)bks[ki]);
        check_guard(o, n_out, "rt_attention_flash, causal halves");
        free(o);
      }
      free(ref);
    }
  }
  rt_pool_destroy(pool);
  release(&d);
}

/* Q, K and V read in place out of one fused buffer [B, T, 3*D] (what
 * fuse-qkv's slices compile to): row strides 3*D, batch strides T*3*D, the
 * same result as contiguous copies, through rt_attention (every policy)
 * and rt_attention_flash. */
Test(attention, qkv_from_one_fused_buffer) {
  Shape s = {2, 3, 19, 19, 8, 8, 2, 1};
  Data d = make(s, false);
  int64_t D = s.h * s.dh, T = s.tq, n_out = s.b * T * D;
  float *qkv = malloc(sizeof(float) * (size_t)(s.b * T * 3 * D));
  cr_assert_not_null(qkv);
  for (int64_t r = 0; r < s.b * T; r++)
    for (int64_t e = 0; e < D; e++) {
      qkv[r * 3 * D + e] = d.q[r * D + e];
      qkv[r * 3 * D + D + e] = d.k[r * D + e];
      qkv[r * 3 * D + 2 * D + e] = d.v[r * D + e];
    }
  float *out = guarded(n_out);
  for (int pi = 0; pi < N_POLICIES; pi++) {
    rt_attention(NULL, s.b, s.h, T, T, s.dh, s.dv, d.scale, qkv, 3 * D, qkv + D, 3 * D,
                 qkv + 2 * D, 3 * D, T * 3 * D, T * 3 * D, d.mask, s.mask_b, s.mask_q, out, NULL,
                 POLICIES[pi].block_q, POLICIES[pi].max_tk_tiled);
    check_close(out, d.ref_out, n_out, "rt_attention from a fused QKV buffer", &s);
    check_guard(out, n_out, "rt_attention from a fused QKV buffer");
  }
  for (int i = 0; i < N_BLOCK_KS; i++) {
    rt_attention_flash(NULL, s.b, s.h, T, T, s.dh, s.dv, d.scale, qkv, 3 * D, qkv + D, 3 * D,
                       qkv + 2 * D, 3 * D, T * 3 * D, T * 3 * D, d.mask, s.mask_b, s.mask_q, out,
                       64, BLOCK_KS[i]);
    check_close(out, d.ref_out, n_out, "rt_attention_flash from a fused QKV buffer", &s);
    check_guard(out, n_out, "rt_attention_flash from a fused QKV buffer");
  }
  free(qkv);
  free(out);
  release(&d);
}

/* Key blocks and query blocks do not depend on the number of threads. */
Test(attention, flash_same_bits_for_any_thread_count) {
  Shape shapes[2] = {{3, 4, 70, 45, 16, 12, 3, 1}, {2, 4, 70, 300, 16, 16, 2, 70}};
  for (int si = 0; si < 2; si++) {
    Shape s = shapes[si];
    Data d = make(s, false);
    int64_t n = s.b * s.tq * s.h * s.dv;
    float *o1 = guarded(n), *o = guarded(n);
    attention_flash(NULL, &d, o1, 64, 128);
    for (int threads = 1; threads <= 3; threads++) {
      RtPool *pool = rt_pool_create(threads);
      attention_flash(pool, &d, o, 64, 128);
      cr_assert(memcmp(o, o1, sizeof(float) * (size_t)n) == 0,
                "shape %d: %d threads changed the result", si, threads);
      rt_pool_destroy(pool);
    }
    free(o);
    free(o1);
    release(&d);
  }
}

/* No keys: zeros; empty batches, heads or queries: nothing written; block
 * sizes below 1 count as 1; a NaN key makes its rows NaN. */
Test(attention, flash_edge_cases) {
  float q[8], k[1], v[1];
  for (int i = 0; i < 8; i++)
    q[i] = 1;
  float *out = guarded(12);
  rt_attention_flash(NULL, 1, 2, 2, 0, 2, 3, 1.0f, q, 4, k, 4, v, 6, 0, 0, NULL, 1, 1, out, 64, 128);
  for (int i = 0; i < 12; i++)
    cr_assert_eq(out[i], 0.0f);
  check_guard(out, 12, "flash tk = 0");
  for (int i = 0; i < 12; i++)
    out[i] = POISON;
  rt_attention_flash(NULL, 0, 2, 2, 2, 2, 3, 1.0f, q, 4, k, 4, v, 6, 0, 0, NULL, 1, 1, out, 64, 128);
  rt_attention_flash(NULL, 1, 2, 0, 2, 2, 3, 1.0f, q, 4, k, 4, v, 6, 0, 0, NULL, 1, 1, out, 64, 128);
  for (int i = 0; i < 12; i++)
    cr_assert_eq(out[i], POISON);
  free(out);

  Shape s = {2, 3, 9, 11, 8, 8, 2, 1};
  Data d = make(s, false);
  int64_t n = s.b * s.tq * s.h * s.dv;
  float *o = guarded(n);
  attention_flash(NULL, &d, o, 0, -2);
  check_close(o, d.ref_out, n, "flash block_q 0, block_k -2", &s);
  check_guard(o, n, "flash block sizes below 1");
  d.k[(5 * s.h) * s.dh + 1] = NAN; /* batch 0, key 5, head 0 */
  attention_flash(NULL, &d, o, 64, 4);
  for (int64_t t = 0; t < s.tq; t++)
    for (int64_t h = 0; h < s.h; h++) {
      float x = o[t * s.h * s.dv + h * s.dv];
      bool sees = d.mask[5] != 0; /* mask [B,1,Tk]: batch 0's row */
      if (h == 0 && sees)
        cr_assert(isnan(x), "t=%lld: a NaN key left %g", (long long)t, x);
      if (h != 0)
        cr_assert(isfinite(x), "t=%lld head %lld: %g", (long long)t, (long long)h, x);
    }
  free(o);
  release(&d);
}

/* Each ISA path of the products: TFMC_GEMM_ISA caps the kernel set
 * rt_gemm_lanes reports, which rt_attention follows (Criterion runs each
 * test in a fresh process). Head widths that take every tile of the
 * AVX-512 mix (64-, 32-, 16- and ragged 8-column groups) and of the AVX2
 * one, key counts around the 48-key score groups and the 16-key panels,
 * query counts crossing the 8/6/4-row tiles; one query row (a decode
 * step: the scores from K in place, head widths 1-136 for the ragged
 * chunks); every mask shape, policy and flash block size (check_shape). */
static void isa_shapes(const char *isa, int lanes) {
  if (rt_gemm_lanes() != lanes) {
    fprintf(stderr, "attention: %s: skipped on this CPU (%s)\n", isa, rt_gemm_backend());
    return;
  }
  fprintf(stderr, "attention: testing the %d-lane products (%s)\n", lanes, rt_gemm_backend());
  static const int64_t dvs[] = {8, 24, 40, 64, 72, 136};
  static const int64_t tks[] = {7, 48, 50, 97};
  RtPool *pool = rt_pool_create(2);
  for (size_t a = 0; a < sizeof dvs / sizeof dvs[0]; a++)
    for (size_t b = 0; b < sizeof tks / sizeof tks[0]; b++)
      check_shape(2, 2, 13, tks[b], a % 2 ? 16 : dvs[a], dvs[a], pool);
  static const int64_t dhs[] = {1, 7, 8, 9, 16, 17, 64, 136};
  for (size_t a = 0; a < sizeof dhs / sizeof dhs[0]; a++)
    for (size_t b = 0; b < sizeof tks / sizeof tks[0]; b++)
      check_shape(3, 2, 1, tks[b], dhs[a], dvs[a % 6], pool);
  Shape s = {2, 12, 128, 128, 64, 64, 2, 1};
  Data d = make(s, false);
  free(run_all(&d, pool));
  release(&d);
  rt_pool_destroy(pool);
}

Test(attention, isa_avx512, .init = isa_avx512) {
  isa_shapes("avx512", 16);
}
Test(attention, isa_avx2, .init = isa_avx2) {
  isa_shapes("avx2", 8);
}
Test(attention, isa_scalar, .init = isa_scalar) {
  isa_shapes("scalar", 1);
}
