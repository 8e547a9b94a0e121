/* tests/runtime/test_gemm.c — rt_sgemm, rt_sgemm_portable and rt_linear
 * against a naive double-precision reference: random and awkward sizes (1,
 * 7, 17, 129, sizes crossing every block boundary), all transposes, alpha
 * and beta cases, padded leading dimensions, pools of 1-3 threads, both
 * backends and kernel sets (TFMC_GEMM=portable / portable-baseline, and
 * every ISA path through TFMC_GEMM_ISA=avx512 / avx2 / neon / scalar, each
 * in its own test process; a path the CPU cannot run is reported and
 * skipped: neon everywhere but aarch64, where tests/runtime/
 * test_gemm_cross.c runs it under qemu),
 * rt_linear's decode path (M <= 8) and odd shapes (M, N, K in 1..130,
 * padded x and y, bias or not); rt_linear's epilogue (act, scale, residual
 * with its own stride) under odd cache blocks (M, N, K not multiples of
 * mc, nc, kc), and that the fused call gives the bits of the separate
 * steps on tfmc's own GEMM. Errors must be
 * within 1e-4 of the magnitude of the terms summed (|alpha| sum |a||b| +
 * |beta c|). Also prints measured GFLOP/s (not asserted). */
#include "runtime/rt_act.h"
#include "runtime/rt_gemm.h"
#include "runtime/rt_pool.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ---- */

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static float frand(void) { /* uniform in [-1, 1) */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (float)((double)((rng * 0x2545F4914F6CDD1Dull) >> 11) / 4503599627370496.0 - 1.0);
}

static float *rand_buf(int64_t n) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  cr_assert_not_null(p);
  for (int64_t i = 0; i < n; i++)
    p[i] = frand();
  return p;
}

static double at(int trans, const float *a, int64_t ld, int64_t i, int64_t p) {
  return trans ? a[p * ld + i] : a[i * ld + p];
}

typedef void (*SgemmFn)(int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                        const float *, int64_t, float, float *, int64_t);

/* Runs fn on random data and compares with the double reference; the
 * padding around C (ldc > n) must stay untouched. */
static void check_sgemm(SgemmFn fn, const char *what, int ta, int tb, int64_t m, int64_t n,
                        int64_t k, float alpha, float beta, int64_t pad) {
  int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
  int64_t rows_a = ta ? k : m, rows_b = tb ? n : k;
  float *a = rand_buf(rows_a * lda), *b = rand_buf(rows_b * ldb), *c = rand_buf(m * ldc);
  float *c0 = malloc(sizeof(float) * (size_t)(m * ldc > 0 ? m * ldc : 1));
  memcpy(c0, c, sizeof(float) * (size_t)(m * ldc));
  fn(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double s = 0, mag = 0;
      for (int64_t p = 0; p < k; p++) {
        double t = at(ta, a, lda, i, p) * at(tb, b, ldb, p, j);
        s += t;
        mag += fabs(t);
      }
      double cin = beta == 0 ? 0 : (double)c0[i * ldc + j];
      double ref = alpha * s + beta * cin;
      double tol = 1e-4 * (fabs(alpha) * mag + fabs(beta * cin)) + 1e-30;
      double got = c[i * ldc + j];
      cr_assert(fabs(got - ref) <= tol,
                "%s ta=%d tb=%d m=%lld n=%lld k=%lld alpha=%g beta=%g: C[%lld,%lld] = %.9g, "
                "reference %.9g",
                what, ta, tb, (long long)m, (long long)n, (long long)k, alpha, beta, (long long)i,
                (long long)j, got, ref);
    }
    for (int64_t j = n; j < ldc; j++)
      cr_assert_eq(c[i * ldc + j], c0[i * ldc + j], "%s wrote into C's padding", what);
  }
  free(a);
  free(b);
  free(c);
  free(c0);
}

static const int64_t odd_sizes[] = {1, 2, 3, 4, 5, 7, 16, 17, 23, 24, 25, 31, 48, 129};

static void sweep(SgemmFn fn, const char *what) {
  const int nsz = (int)(sizeof odd_sizes / sizeof *odd_sizes);
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (int r = 0; r < 60; r++) {
        int64_t m = odd_sizes[(r * 7 + ta) % nsz], n = odd_sizes[(r * 5 + tb + 3) % nsz];
        int64_t k = odd_sizes[(r * 3 + 1) % nsz];
        float alpha = (r % 4 == 0) ? 1.0f : (r % 4 == 1) ? -0.5f : (r % 4 == 2) ? 2.0f : 0.75f;
        float beta = (r % 3 == 0) ? 0.0f : (r % 3 == 1) ? 1.0f : -1.5f;
        check_sgemm(fn, what, ta, tb, m, n, k, alpha, beta, r % 2 ? 3 : 0);
      }
}

/* ---- sgemm: both entry points, every transpose ---- */

Test(gemm, portable_matches_reference_all_transposes) {
  sweep(rt_sgemm_portable, "portable");
}

Test(gemm, sgemm_matches_reference_all_transposes) {
  fprintf(stderr, "gemm backend: %s\n", rt_gemm_backend());
  sweep(rt_sgemm, "rt_sgemm");
}

/* Sizes crossing MC (128; a set's multiple of its MR: up to 1.25 MC rows
 * run as one block, so 129 and 130 take one block longer than MC, 170 two,
 * 257 two of which the last is longer), KC (384: K=400 is cut into two
 * blocks of 200, K=777 into three), NC (2016) and the 4x24 micro tile. */
Test(gemm, block_boundaries, .timeout = 120) {
  const int64_t shapes[][3] = {{130, 50, 400}, {129, 2017, 9}, {7, 2040, 385}, {257, 25, 777},
                               {1, 2100, 400}, {1, 17, 1000},  {5, 7, 1},      {170, 50, 400}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int t = 0; t < 4; t++) {
      check_sgemm(rt_sgemm_portable, "portable", t & 1, t >> 1, shapes[s][0], shapes[s][1],
                  shapes[s][2], 1.0f, 0.0f, 0);
      check_sgemm(rt_sgemm, "rt_sgemm", t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2],
                  0.5f, 1.0f, 1);
    }
}

Test(gemm, degenerate_sizes) {
  /* k = 0: C = beta C; alpha = 0: the same; m or n = 0: nothing touched */
  for (int p = 0; p < 2; p++) {
    SgemmFn fn = p ? rt_sgemm : rt_sgemm_portable;
    check_sgemm(fn, "k=0", 0, 1, 5, 6, 0, 1.0f, 0.5f, 0);
    check_sgemm(fn, "alpha=0", 1, 0, 5, 6, 7, 0.0f, 2.0f, 0);
    check_sgemm(fn, "alpha=0 beta=0", 0, 0, 3, 3, 3, 0.0f, 0.0f, 0);
    float c = 42;
    fn(0, 0, 0, 1, 1, 1, &c, 1, &c, 1, 0, &c, 1);
    fn(0, 0, 1, 0, 1, 1, &c, 1, &c, 1, 0, &c, 1);
    cr_assert_eq(c, 42);
  }
}

/* beta = 0 must overwrite C, NaN included (BLAS semantics). */
Test(gemm, beta_zero_ignores_nan_in_c) {
  for (int p = 0; p < 2; p++) {
    SgemmFn fn = p ? rt_sgemm : rt_sgemm_portable;
    for (int64_t m = 1; m <= 9; m += 8) {
      float a[9 * 4], b[4 * 5], c[9 * 5];
      for (int i = 0; i < 36; i++)
        a[i] = 1;
      for (int i = 0; i < 20; i++)
        b[i] = 2;
      for (int i = 0; i < 45; i++)
        c[i] = NAN;
      fn(0, 0, m, 5, 4, 1.0f, a, 4, b, 5, 0.0f, c, 5);
      for (int i = 0; i < m * 5; i++)
        cr_assert_eq(c[i], 8.0f, "C[%d] = %g", i, c[i]);
    }
  }
}

/* ---- rt_linear ---- */

/* rt_linear's split policy (task_macs, split_macs). */
typedef struct LinearPolicy {
  int64_t task_macs, split_macs;
} LinearPolicy;

/* What the lowering passes by default (LowerLoopsOptions). */
static const LinearPolicy DEFAULT_POLICY = {(int64_t)1 << 17, (int64_t)1 << 23};
/* Extremes that change every split decision: the finest pieces; always one
 * piece per thread; always the calling thread (values below 1 count as 1). */
static const LinearPolicy POLICIES[] = {
    {(int64_t)1 << 17, (int64_t)1 << 23}, {1, 0}, {64, INT64_MAX}, {INT64_MAX, 0}, {0, -1}};
enum { N_POLICIES = sizeof POLICIES / sizeof *POLICIES };

/* When set, every product below goes through rt_linear_packed on weights
 * packed by rt_gemm_pack (the pack-weights pass's form) instead of
 * rt_linear: the same checks then pin the packed path. */
static int use_packed;

static void lin(RtPool *pool, int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                const float *w, const float *bias, float *y, int64_t ldy, int64_t act, float scale,
                const float *r, int64_t ldr, int64_t mc, int64_t nc, int64_t kc, int64_t task_macs,
                int64_t split_macs) {
  if (!use_packed) {
    rt_linear(pool, m, n, k, x, ldx, w, bias, y, ldy, act, scale, r, ldr, mc, nc, kc, task_macs,
              split_macs);
    return;
  }
  int64_t floats = rt_gemm_packed_floats(n, k);
  float *wp = aligned_alloc(64, ((size_t)(floats > 0 ? floats : 1) * 4 + 63) & ~(size_t)63);
  cr_assert(wp);
  rt_gemm_pack(n, k, w, wp);
  rt_linear_packed(pool, m, n, k, x, ldx, wp, bias, y, ldy, act, scale, r, ldr, mc, nc, kc,
                   task_macs, split_macs);
  free(wp);
}

/* The plain product (no epilogue) with the lowering's default blocks. */
static void linear(RtPool *pool, int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                   const float *w, const float *bias, float *y, int64_t ldy, LinearPolicy pol) {
  lin(pool, m, n, k, x, ldx, w, bias, y, ldy, RT_ACT_NONE, 1.0f, NULL, 0, 128, 2016, 384,
      pol.task_macs, pol.split_macs);
}

static void check_linear_policy(RtPool *pool, int64_t m, int64_t n, int64_t k, int with_bias,
                                int64_t pad, LinearPolicy pol) {
  int64_t ldx = k + pad, ldy = n + pad;
  float *x = rand_buf(m * ldx), *w = rand_buf(n * k), *bias = with_bias ? rand_buf(n) : NULL;
  float *y = rand_buf(m * ldy), *y0 = malloc(sizeof(float) * (size_t)(m * ldy));
  memcpy(y0, y, sizeof(float) * (size_t)(m * ldy));
  linear(pool, m, n, k, x, ldx, w, bias, y, ldy, pol);
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double s = bias ? bias[j] : 0, mag = bias ? fabs(bias[j]) : 0;
      for (int64_t p = 0; p < k; p++) {
        double t = (double)x[i * ldx + p] * w[j * k + p];
        s += t;
        mag += fabs(t);
      }
      cr_assert(fabs(y[i * ldy + j] - s) <= 1e-4 * mag + 1e-30,
                "rt_linear threads=%d m=%lld n=%lld k=%lld bias=%d policy %lld,%lld: "
                "y[%lld,%lld] = %.9g, reference %.9g",
                rt_pool_size(pool), (long long)m, (long long)n, (long long)k, with_bias,
                (long long)pol.task_macs, (long long)pol.split_macs, (long long)i, (long long)j,
                y[i * ldy + j], s);
    }
    for (int64_t j = n; j < ldy; j++)
      cr_assert_eq(y[i * ldy + j], y0[i * ldy + j], "rt_linear wrote into y's padding");
  }
  free(x);
  free(w);
  free(bias);
  free(y);
  free(y0);
}

/* Under the default policy, and on 2 threads under every policy. */
static void check_linear(RtPool *pool, int64_t m, int64_t n, int64_t k, int with_bias,
                         int64_t pad) {
  check_linear_policy(pool, m, n, k, with_bias, pad, DEFAULT_POLICY);
  if (rt_pool_size(pool) == 2)
    for (int i = 1; i < N_POLICIES; i++)
      check_linear_policy(pool, m, n, k, with_bias, pad, POLICIES[i]);
}

static void linear_sweep(void) {
  RtPool *pools[4] = {NULL, rt_pool_create(1), rt_pool_create(2), rt_pool_create(3)};
  const int64_t shapes[][3] = {{1, 7, 17},    {1, 768, 64},   {1, 1000, 129}, {2, 129, 17},
                               {3, 100, 300}, {7, 17, 129},   {8, 500, 64},   {17, 96, 40},
                               {129, 7, 33},  {129, 200, 64}, {300, 50, 100}, {64, 1, 300}};
  for (int p = 0; p < 4; p++)
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int bias = 0; bias < 2; bias++)
        check_linear(pools[p], shapes[s][0], shapes[s][1], shapes[s][2], bias,
                     (int64_t)(s % 2) * 5);
  for (int p = 0; p < 4; p++)
    rt_pool_destroy(pools[p]);
}

Test(gemm, linear_matches_reference, .timeout = 120) {
  linear_sweep();
}

/* Odd shapes around the decode path (M <= 8) and the register tiles
 * (4x16, 6x16, 6x64): M, N, K in 1..130, leading dimensions padded or not, bias
 * or not, on the calling thread and pools of 1-3 threads. */
static void linear_odd_sweep(void) {
  static const int64_t ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 33, 130};
  static const int64_t nks[] = {1, 2, 3, 5, 15, 16, 17, 31, 47, 48, 49, 64, 95, 97, 129, 130};
  const int nm = (int)(sizeof ms / sizeof *ms), nnk = (int)(sizeof nks / sizeof *nks);
  RtPool *pools[4] = {NULL, rt_pool_create(1), rt_pool_create(2), rt_pool_create(3)};
  for (int r = 0; r < 96; r++) {
    int64_t m = ms[r % nm], n = nks[(r * 7 + 3) % nnk], k = nks[(r * 5 + r / nnk) % nnk];
    check_linear_policy(pools[r % 4], m, n, k, r % 3 != 0, (int64_t)(r % 2) * 3,
                        POLICIES[r % N_POLICIES]);
  }
  for (int p = 0; p < 4; p++)
    rt_pool_destroy(pools[p]);
}

Test(gemm, linear_odd_shapes, .timeout = 120) {
  linear_odd_sweep();
}

/* The same product on 1, 2 and 3 threads (row and column splits, one-row
 * remainders) under every policy must give the same bits as on the calling
 * thread. Asserted
 * for the portable GEMM (guaranteed by construction); for OpenBLAS only
 * reported, as its kernels promise nothing about it. */
static int linear_is_split_invariant(int assert_it) {
  RtPool *pools[3] = {rt_pool_create(1), rt_pool_create(2), rt_pool_create(3)};
  const int64_t shapes[][3] = {{9, 768, 64},  {13, 40, 300},  {300, 50, 100}, {1, 1000, 129},
                               {6, 2000, 70}, {129, 100, 64}, {8, 3, 130},    {5, 301, 17}};
  int same = 1;
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    float *x = rand_buf(m * k), *w = rand_buf(n * k), *bias = rand_buf(n);
    float *y0 = rand_buf(m * n), *y = rand_buf(m * n);
    linear(NULL, m, n, k, x, k, w, bias, y0, n, DEFAULT_POLICY);
    for (int p = 0; p < 3; p++)
      for (int i = 0; i < N_POLICIES; i++) {
        linear(pools[p], m, n, k, x, k, w, bias, y, n, POLICIES[i]);
        int eq = memcmp(y, y0, sizeof(float) * (size_t)(m * n)) == 0;
        if (assert_it)
          cr_assert(eq, "m=%lld n=%lld k=%lld on %d threads, policy %d differs from 1 thread",
                    (long long)m, (long long)n, (long long)k, rt_pool_size(pools[p]), i);
        same &= eq;
      }
    free(x);
    free(w);
    free(bias);
    free(y0);
    free(y);
  }
  for (int p = 0; p < 3; p++)
    rt_pool_destroy(pools[p]);
  return same;
}

Test(gemm, linear_split_invariance_report) {
  fprintf(stderr, "gemm: %s: rt_linear results %s across thread counts\n", rt_gemm_backend(),
          linear_is_split_invariant(0) ? "identical" : "differ");
}

/* ---- rt_linear's epilogue: y = act(scale (x w^T + b)) + r ---- */

static double ref_act(int act, double v) {
  switch (act) {
  case RT_ACT_RELU: return v < 0 ? 0 : v;
  case RT_ACT_GELU: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
  case RT_ACT_GELU_TANH:
    return 0.5 * v * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
  default: return v;
  }
}

typedef struct EpiCase {
  int64_t m, n, k;
  int act;
  float scale;
  int residual, bias;
  int64_t mc, nc, kc; /* the caller's blocks */
} EpiCase;

/* One call against the double reference: every element within the sum's
 * error (1e-4 of the terms' magnitude, times gelu's largest slope 1.13 and
 * |scale|) plus rt_act's approximation (2e-7 relative) and the residual's
 * rounding; y's padding and the residual untouched. */
static void check_epilogue(RtPool *pool, const EpiCase *c, int64_t pad) {
  int64_t m = c->m, n = c->n, k = c->k, ldx = k + pad, ldy = n + pad, ldr = n + 2 * pad + 1;
  float *x = rand_buf(m * ldx), *w = rand_buf(n * k), *bias = c->bias ? rand_buf(n) : NULL;
  float *r = c->residual ? rand_buf(m * ldr) : NULL;
  float *r0 = r ? malloc(sizeof(float) * (size_t)(m * ldr)) : NULL;
  if (r)
    memcpy(r0, r, sizeof(float) * (size_t)(m * ldr));
  float *y = rand_buf(m * ldy), *y0 = malloc(sizeof(float) * (size_t)(m * ldy));
  memcpy(y0, y, sizeof(float) * (size_t)(m * ldy));
  lin(pool, m, n, k, x, ldx, w, bias, y, ldy, c->act, c->scale, r, r ? ldr : 0, c->mc, c->nc, c->kc,
      1, 0);
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double s = bias ? bias[j] : 0, mag = bias ? fabs(bias[j]) : 0;
      for (int64_t p = 0; p < k; p++) {
        double t = (double)x[i * ldx + p] * w[j * k + p];
        s += t;
        mag += fabs(t);
      }
      double t = ref_act(c->act, (double)c->scale * s);
      double rv = r ? r[i * ldr + j] : 0, want = t + rv;
      double tol = 1.2e-4 * fabs(c->scale) * mag + 1e-6 * (fabs(t) + fabs(rv)) + 1e-30;
      cr_assert(fabs(y[i * ldy + j] - want) <= tol,
                "rt_linear epilogue m=%lld n=%lld k=%lld act=%d scale=%g residual=%d bias=%d "
                "blocks %lld,%lld,%lld threads=%d: y[%lld,%lld] = %.9g, reference %.9g",
                (long long)m, (long long)n, (long long)k, c->act, c->scale, c->residual, c->bias,
                (long long)c->mc, (long long)c->nc, (long long)c->kc, rt_pool_size(pool),
                (long long)i, (long long)j, y[i * ldy + j], want);
    }
    for (int64_t j = n; j < ldy; j++)
      cr_assert_eq(y[i * ldy + j], y0[i * ldy + j], "rt_linear wrote into y's padding");
  }
  if (r)
    cr_assert(memcmp(r, r0, sizeof(float) * (size_t)(m * ldr)) == 0, "the residual was written");
  free(x);
  free(w);
  free(bias);
  free(r);
  free(r0);
  free(y);
  free(y0);
}

/* Odd shapes (decode-path rows, register-tile and block remainders) under
 * blocks that do not divide them, each activation, scales, residual or
 * not, on the calling thread and pools of 1-3 threads. */
static void epilogue_sweep(void) {
  static const int64_t shapes[][3] = {{1, 7, 17},   {3, 50, 9},    {8, 97, 130},  {9, 31, 47},
                                      {13, 130, 5}, {33, 49, 200}, {130, 95, 64}, {61, 300, 129}};
  static const int64_t blocks[][3] = {{128, 2016, 384}, {5, 30, 20},  {1, 1, 1},
                                      {0, 0, 0},        {12, 64, 48}, {100000, 1 << 20, 100000}};
  static const float scales[] = {1.0f, 0.5f, -1.25f};
  RtPool *pools[4] = {NULL, rt_pool_create(1), rt_pool_create(2), rt_pool_create(3)};
  int r = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int act = 0; act < RT_ACT_COUNT; act++, r++) {
      EpiCase c = {shapes[s][0],     shapes[s][1],    shapes[s][2], act,
                   scales[r % 3],    r % 2,           r % 5 != 0,   blocks[r % 6][0],
                   blocks[r % 6][1], blocks[r % 6][2]};
      check_epilogue(pools[r % 4], &c, (int64_t)(r % 3));
      c.residual = !c.residual;
      c.mc = blocks[(r + 1) % 6][0], c.nc = blocks[(r + 1) % 6][1], c.kc = blocks[(r + 1) % 6][2];
      check_epilogue(pools[(r + 1) % 4], &c, (int64_t)(r % 2) * 4);
    }
  for (int p = 0; p < 4; p++)
    rt_pool_destroy(pools[p]);
}

Test(gemm, linear_epilogue_matches_reference, .timeout = 120) {
  epilogue_sweep();
}

/* The fused call against its steps: y = x w^T + b (rt_linear), then
 * rt_gelu or relu (max(v, 0)), scale first, then + r. On tfmc's own GEMM
 * the bits must match (the same sums, the same activation code); returns
 * whether they did (for OpenBLAS, whose sgemm per block is only reported). */
static int epilogue_is_composition(int assert_it) {
  static const int64_t shapes[][3] = {{130, 95, 64}, {9, 300, 129}, {4, 50, 33}, {64, 768, 200}};
  RtPool *pool = rt_pool_create(2);
  int same = 1;
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int act = 0; act < RT_ACT_COUNT; act++) {
      int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ldr = n + 3;
      float *x = rand_buf(m * k), *w = rand_buf(n * k), *b = rand_buf(n), *r = rand_buf(m * ldr);
      float *y = rand_buf(m * n), *t = rand_buf(m * n), *u = rand_buf(m * n);
      float scale = act % 2 ? 0.75f : 1.0f;
      lin(pool, m, n, k, x, k, w, b, y, n, act, scale, r, ldr, 40, 100, 64, 1, 0);
      lin(pool, m, n, k, x, k, w, b, t, n, RT_ACT_NONE, 1.0f, NULL, 0, 40, 100, 64, 1, 0);
      for (int64_t i = 0; i < m * n; i++)
        t[i] *= scale;
      if (act == RT_ACT_GELU || act == RT_ACT_GELU_TANH)
        rt_gelu(pool, m * n, t, u, act == RT_ACT_GELU_TANH, 1);
      else
        for (int64_t i = 0; i < m * n; i++)
          u[i] = act == RT_ACT_RELU ? fmaxf(t[i], 0.0f) : t[i];
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
          u[i * n + j] += r[i * ldr + j];
      int eq = memcmp(y, u, sizeof(float) * (size_t)(m * n)) == 0;
      if (assert_it)
        cr_assert(eq, "m=%lld n=%lld k=%lld act=%d: the fused epilogue differs from its steps",
                  (long long)m, (long long)n, (long long)k, act);
      same &= eq;
      free(x);
      free(w);
      free(b);
      free(r);
      free(y);
      free(t);
      free(u);
    }
  rt_pool_destroy(pool);
  return same;
}

Test(gemm, linear_epilogue_composition_report) {
  fprintf(stderr, "gemm: %s: the fused epilogue %s its separate steps\n", rt_gemm_backend(),
          epilogue_is_composition(0) ? "gives the bits of" : "differs in bits from");
}

static void use_portable(void) {
  setenv("TFMC_GEMM", "portable", 1);
}

/* A fresh process (Criterion runs each test in its own) that chooses the
 * portable backend: rt_sgemm and rt_linear through it. */
Test(gemm, portable_backend_via_environment, .init = use_portable, .timeout = 120) {
  const char *name = rt_gemm_backend();
  cr_assert(strncmp(name, "portable", 8) == 0, "backend is '%s'", name);
  sweep(rt_sgemm, "rt_sgemm (portable backend)");
  linear_sweep();
  linear_is_split_invariant(1);
  epilogue_sweep();
  epilogue_is_composition(1);
}

static void use_baseline(void) {
  setenv("TFMC_GEMM", "portable-baseline", 1);
}

/* The kernels a CPU without AVX2 gets (built for the baseline ISA). */
Test(gemm, portable_baseline_kernels, .init = use_baseline, .timeout = 120) {
  const char *name = rt_gemm_backend();
  cr_assert(strstr(name, "baseline kernels"), "backend is '%s'", name);
  sweep(rt_sgemm, "rt_sgemm (baseline kernels)");
  linear_sweep();
  epilogue_sweep();
  epilogue_is_composition(1);
}

/* On tfmc's own GEMM, prepacked weights give the bits of packing per call
 * (the same micro-kernel over the same panels and K blocks) wherever the
 * GEMM runs (M > 8; the decode path reads the two layouts with different
 * kernels, each checked against the reference above). */
static void packed_equals_unpacked(void) {
  const int64_t shapes[][3] = {{9, 768, 64},   {130, 95, 64}, {33, 300, 500},
                               {64, 17, 1000}, {44, 100, 300}};
  RtPool *pool = rt_pool_create(2);
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    float *x = rand_buf(m * k), *w = rand_buf(n * k), *b = rand_buf(n), *r = rand_buf(m * n);
    float *y0 = rand_buf(m * n), *y1 = rand_buf(m * n);
    use_packed = 0;
    lin(pool, m, n, k, x, k, w, b, y0, n, RT_ACT_GELU, 0.5f, r, n, 40, 100, 64, 1, 0);
    use_packed = 1;
    lin(pool, m, n, k, x, k, w, b, y1, n, RT_ACT_GELU, 0.5f, r, n, 40, 100, 64, 1, 0);
    use_packed = 0;
    cr_assert(memcmp(y0, y1, sizeof(float) * (size_t)(m * n)) == 0,
              "m=%lld n=%lld k=%lld: prepacked weights differ from packing per call", (long long)m,
              (long long)n, (long long)k);
    free(x);
    free(w);
    free(b);
    free(r);
    free(y0);
    free(y1);
  }
  rt_pool_destroy(pool);
}

/* The packed path on the default backend: always tfmc's kernels. */
Test(gemm, packed_linear_matches_reference, .timeout = 240) {
  use_packed = 1;
  linear_sweep();
  linear_odd_sweep();
  linear_is_split_invariant(1);
  epilogue_sweep();
  epilogue_is_composition(1);
  use_packed = 0;
}

/* ---- bf16 weights (rt_linear_packed_bf16) ---- */

/* f32 -> bf16 -> f32, round to nearest even (no NaNs here) */
static double bf16_round(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float r;
  memcpy(&r, &u, 4);
  return r;
}

/* y = act(scale (x bf16(w)^T + b)) + r against two double references: x
 * as it is (kernels that widen the weights) and x rounded to bf16 (the
 * vdpbf16ps kernel); each element within 1e-4 of the terms' magnitude of
 * one of them (times gelu's slope and |scale|, as the f32 checks). */
static void check_bf16(RtPool *pool, int64_t m, int64_t n, int64_t k, int act, float scale,
                       int with_bias, int with_res, int64_t pad, LinearPolicy pol) {
  int64_t ldx = k + pad, ldy = n + pad, ldr = n + 1;
  float *x = rand_buf(m * ldx), *w = rand_buf(n * k), *bias = with_bias ? rand_buf(n) : NULL;
  float *r = with_res ? rand_buf(m * ldr) : NULL;
  float *y = rand_buf(m * ldy), *y0 = malloc(sizeof(float) * (size_t)(m * ldy));
  memcpy(y0, y, sizeof(float) * (size_t)(m * ldy));
  int64_t floats = rt_gemm_packed_bf16_floats(n, k);
  cr_assert_eq(floats, (n + 15) / 16 * 16 * ((k + 1) / 2));
  float *wp = aligned_alloc(64, ((size_t)floats * 4 + 63) & ~(size_t)63);
  cr_assert(wp);
  rt_gemm_pack_bf16(n, k, w, wp);
  rt_linear_packed_bf16(pool, m, n, k, x, ldx, wp, bias, y, ldy, act, scale, r, r ? ldr : 0, 40,
                        100, 64, pol.task_macs, pol.split_macs);
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double s[2] = {bias ? bias[j] : 0, bias ? bias[j] : 0}, mag = bias ? fabs(bias[j]) : 0;
      for (int64_t p = 0; p < k; p++) {
        double wv = bf16_round(w[j * k + p]), xv = x[i * ldx + p];
        s[0] += xv * wv;
        s[1] += bf16_round(x[i * ldx + p]) * wv;
        mag += fabs(xv * wv);
      }
      double rv = r ? r[i * ldr + j] : 0, got = y[i * ldy + j], err = INFINITY;
      for (int v = 0; v < 2; v++) {
        double want = ref_act(act, (double)scale * s[v]) + rv;
        if (fabs(got - want) < err)
          err = fabs(got - want);
      }
      double tol = 1.2e-4 * fabs(scale) * mag + 1e-6 * fabs(rv) + 1e-30;
      cr_assert(err <= tol,
                "rt_linear_packed_bf16 %s m=%lld n=%lld k=%lld act=%d threads=%d: y[%lld,%lld] = "
                "%.9g, off by %.3g (tolerance %.3g)",
                rt_gemm_backend(), (long long)m, (long long)n, (long long)k, act,
                rt_pool_size(pool), (long long)i, (long long)j, got, err, tol);
    }
    for (int64_t j = n; j < ldy; j++)
      cr_assert_eq(y[i * ldy + j], y0[i * ldy + j], "rt_linear_packed_bf16 wrote into padding");
  }
  /* the same bits on 1-3 threads under every policy */
  RtPool *pools[3] = {rt_pool_create(1), rt_pool_create(2), rt_pool_create(3)};
  float *y1 = malloc(sizeof(float) * (size_t)(m * ldy));
  for (int t = 0; t < 3; t++)
    for (int q = 0; q < N_POLICIES; q += 2) {
      memcpy(y1, y0, sizeof(float) * (size_t)(m * ldy));
      rt_linear_packed_bf16(pools[t], m, n, k, x, ldx, wp, bias, y1, ldy, act, scale, r,
                            r ? ldr : 0, 40, 100, 64, POLICIES[q].task_macs,
                            POLICIES[q].split_macs);
      cr_assert(memcmp(y, y1, sizeof(float) * (size_t)(m * ldy)) == 0,
                "bf16 m=%lld n=%lld k=%lld: %d threads, policy %d differ", (long long)m,
                (long long)n, (long long)k, rt_pool_size(pools[t]), q);
    }
  for (int t = 0; t < 3; t++)
    rt_pool_destroy(pools[t]);
  free(y1);
  free(x);
  free(w);
  free(wp);
  free(bias);
  free(r);
  free(y);
  free(y0);
}

/* A row block of at least 3 tiles widens each bf16 panel once and runs
 * the f32 micro-kernel on it (sets with widen_bf16); fewer rows take the
 * bf16 micro-kernel. Both must give the same bits: m rows at once (one
 * row block of mc 40) against the same rows in two pieces of m/2 < 18
 * (the widening threshold for 6-row tiles), K odd and over two K blocks
 * (kc 64), both activations with a slope, bias and residual. */
static void bf16_widened_same_bits(int64_t m, int64_t n, int64_t k, int act) {
  int64_t ldr = n + 1;
  float *x = rand_buf(m * k), *w = rand_buf(n * k), *bias = rand_buf(n), *r = rand_buf(m * ldr);
  float *y = rand_buf(m * n), *y2 = malloc(sizeof(float) * (size_t)(m * n));
  float *wp = aligned_alloc(64, ((size_t)rt_gemm_packed_bf16_floats(n, k) * 4 + 63) & ~(size_t)63);
  cr_assert(wp && y2);
  rt_gemm_pack_bf16(n, k, w, wp);
  rt_linear_packed_bf16(NULL, m, n, k, x, k, wp, bias, y, n, act, 1.0f, r, ldr, 40, 100, 64,
                        (int64_t)1 << 17, (int64_t)1 << 23);
  for (int64_t h = 0; h < 2; h++) {
    int64_t r0 = h * (m / 2), rows = h ? m - m / 2 : m / 2;
    rt_linear_packed_bf16(NULL, rows, n, k, x + r0 * k, k, wp, bias, y2 + r0 * n, n, act, 1.0f,
                          r + r0 * ldr, ldr, 40, 100, 64, (int64_t)1 << 17, (int64_t)1 << 23);
  }
  cr_assert(memcmp(y, y2, sizeof(float) * (size_t)(m * n)) == 0,
            "bf16 %s m=%lld n=%lld k=%lld: widened panels and the bf16 kernel differ",
            rt_gemm_backend(), (long long)m, (long long)n, (long long)k);
  free(x);
  free(w);
  free(bias);
  free(r);
  free(y);
  free(y2);
  free(wp);
}

/* Odd shapes around the decode path, the tiles and odd K (the padding
 * step of the last pair), each activation, with and without bias and
 * residual, on the calling thread and pools. */
static void bf16_sweep(void) {
  bf16_widened_same_bits(34, 65, 97, RT_ACT_GELU);
  bf16_widened_same_bits(30, 16, 130, RT_ACT_NONE);
  bf16_widened_same_bits(24, 47, 17, RT_ACT_RELU);
  static const int64_t ms[] = {1, 2, 3, 5, 8, 9, 13, 33, 130};
  static const int64_t nks[] = {1, 3, 15, 16, 17, 47, 64, 65, 97, 130};
  RtPool *pools[3] = {NULL, rt_pool_create(1), rt_pool_create(2)};
  for (int c = 0; c < 40; c++) {
    int64_t m = ms[c % 9], n = nks[(c * 7 + 3) % 10], k = nks[(c * 3 + c / 10) % 10];
    check_bf16(pools[c % 3], m, n, k, c % RT_ACT_COUNT, c % 3 ? 1.0f : -0.75f, c % 2, c % 5 == 1,
               (int64_t)(c % 2) * 3, POLICIES[c % N_POLICIES]);
  }
  check_bf16(pools[2], 128, 768, 768, RT_ACT_GELU, 1.0f, 1, 1, 0, DEFAULT_POLICY);
  /* 44 rows at mc 40 (36 for 6- and 12-row tiles): one block longer than mc */
  check_bf16(pools[1], 44, 65, 97, RT_ACT_NONE, 1.0f, 1, 1, 3, DEFAULT_POLICY);
  check_bf16(pools[2], 4, 2304, 768, RT_ACT_NONE, 1.0f, 1, 0, 0, DEFAULT_POLICY);
  for (int p = 0; p < 3; p++)
    rt_pool_destroy(pools[p]);
}

Test(gemm, bf16_weights_match_reference, .timeout = 240) {
  bf16_sweep();
}

/* ---- int8 weights (rt_linear_packed_i8) ---- */

/* The documented quantisation: scale max|v| / 127, values v * 127 / max|v|
 * rounded to nearest even. */
static void quant_row(const float *v, int64_t n, int8_t *q, float *scale) {
  float amax = 0;
  for (int64_t i = 0; i < n; i++)
    amax = fmaxf(amax, fabsf(v[i]));
  float inv = amax > 0 ? 127.0f / amax : 0.0f;
  *scale = amax / 127.0f;
  for (int64_t i = 0; i < n; i++)
    q[i] = (int8_t)nearbyintf(v[i] * inv);
}

/* y against the exact integer formula (sx sw sum qx qw, then bias and the
 * epilogue in double): within 2e-6 of the values added (only the f32
 * rounding of the bias, activation and residual differs); and within the
 * quantisation's per-term bound of the f32 product (what int8 costs). Same bits on 1-3 threads. */
static void check_i8(RtPool *pool, int64_t m, int64_t n, int64_t k, int act, int with_bias,
                     int with_res, int64_t pad, LinearPolicy pol) {
  int64_t ldx = k + pad, ldy = n + pad, ldr = n + 1;
  float *x = rand_buf(m * ldx), *w = rand_buf(n * k), *bias = with_bias ? rand_buf(n) : NULL;
  if (m > 2)
    memset(x + 2 * ldx, 0, sizeof(float) * (size_t)k); /* a row of zeros: scale 0 */
  float *r = with_res ? rand_buf(m * ldr) : NULL;
  float *y = rand_buf(m * ldy), *y0 = malloc(sizeof(float) * (size_t)(m * ldy));
  memcpy(y0, y, sizeof(float) * (size_t)(m * ldy));
  int64_t floats = rt_gemm_packed_i8_floats(n, k);
  float *wp = aligned_alloc(64, ((size_t)floats * 4 + 63) & ~(size_t)63);
  cr_assert(wp);
  rt_gemm_pack_i8(n, k, w, wp);
  rt_linear_packed_i8(pool, m, n, k, x, ldx, wp, bias, y, ldy, act, 1.0f, r, r ? ldr : 0, 40, 100,
                      64, pol.task_macs, pol.split_macs);
  int8_t *qx = malloc((size_t)k), *qw = malloc((size_t)(n * k));
  float *sw = malloc(sizeof(float) * (size_t)n);
  for (int64_t j = 0; j < n; j++)
    quant_row(w + j * k, k, qw + j * k, &sw[j]);
  for (int64_t i = 0; i < m; i++) {
    float sx;
    quant_row(x + i * ldx, k, qx, &sx);
    for (int64_t j = 0; j < n; j++) {
      int32_t isum = 0;
      double f = bias ? bias[j] : 0, qerr = 0;
      for (int64_t p = 0; p < k; p++) {
        isum += qx[p] * qw[j * k + p];
        f += (double)x[i * ldx + p] * w[j * k + p];
        /* x = sx (qx + ex), w = sw (qw + ew), |ex|, |ew| <= 1/2 */
        qerr +=
            sw[j] * fabs(x[i * ldx + p]) / 2 + sx * fabs(w[j * k + p]) / 2 + (double)sx * sw[j] / 4;
      }
      double rv = r ? r[i * ldr + j] : 0;
      double pre = (double)((float)isum * (sx * sw[j])) + (bias ? bias[j] : 0);
      double exact = ref_act(act, pre) + rv;
      double approx = ref_act(act, f) + rv, got = y[i * ldy + j];
      /* the bias add, rt_act's approximation and the residual add round */
      cr_assert(fabs(got - exact) <= 2e-6 * (fabs(pre) + fabs(rv)) + 1e-30,
                "rt_linear_packed_i8 %s m=%lld n=%lld k=%lld act=%d: y[%lld,%lld] = %.9g, the "
                "integer formula %.9g",
                rt_gemm_backend(), (long long)m, (long long)n, (long long)k, act, (long long)i,
                (long long)j, got, exact);
      cr_assert(fabs(got - approx) <= 1.2 * qerr + 1e-5 * (fabs(approx) + fabs(rv)) + 1e-6,
                "int8 m=%lld n=%lld k=%lld: y[%lld,%lld] = %.9g, f32 %.9g", (long long)m,
                (long long)n, (long long)k, (long long)i, (long long)j, got, approx);
    }
    for (int64_t j = n; j < ldy; j++)
      cr_assert_eq(y[i * ldy + j], y0[i * ldy + j], "rt_linear_packed_i8 wrote into padding");
  }
  RtPool *pools[3] = {rt_pool_create(1), rt_pool_create(2), rt_pool_create(3)};
  float *y1 = malloc(sizeof(float) * (size_t)(m * ldy));
  for (int t = 0; t < 3; t++)
    for (int q = 0; q < N_POLICIES; q += 2) {
      memcpy(y1, y0, sizeof(float) * (size_t)(m * ldy));
      rt_linear_packed_i8(pools[t], m, n, k, x, ldx, wp, bias, y1, ldy, act, 1.0f, r, r ? ldr : 0,
                          40, 100, 64, POLICIES[q].task_macs, POLICIES[q].split_macs);
      cr_assert(memcmp(y, y1, sizeof(float) * (size_t)(m * ldy)) == 0,
                "int8 m=%lld n=%lld k=%lld: %d threads, policy %d differ", (long long)m,
                (long long)n, (long long)k, rt_pool_size(pools[t]), q);
    }
  for (int t = 0; t < 3; t++)
    rt_pool_destroy(pools[t]);
  free(y1);
  free(qx);
  free(qw);
  free(sw);
  free(x);
  free(w);
  free(wp);
  free(bias);
  free(r);
  free(y);
  free(y0);
}

static void i8_sweep(void) {
  static const int64_t ms[] = {1, 2, 3, 5, 8, 9, 13, 33, 130};
  static const int64_t nks[] = {1, 3, 15, 16, 17, 47, 64, 65, 97, 130};
  RtPool *pools[3] = {NULL, rt_pool_create(1), rt_pool_create(2)};
  for (int c = 0; c < 40; c++) {
    int64_t m = ms[c % 9], n = nks[(c * 7 + 3) % 10], k = nks[(c * 3 + c / 10) % 10];
    check_i8(pools[c % 3], m, n, k, c % RT_ACT_COUNT, c % 2, c % 5 == 1, (int64_t)(c % 2) * 3,
             POLICIES[c % N_POLICIES]);
  }
  check_i8(pools[2], 128, 768, 768, RT_ACT_GELU, 1, 1, 0, DEFAULT_POLICY);
  check_i8(pools[2], 4, 2304, 768, RT_ACT_NONE, 1, 0, 0, DEFAULT_POLICY);
  for (int p = 0; p < 3; p++)
    rt_pool_destroy(pools[p]);
}

Test(gemm, i8_weights_match_reference, .timeout = 240) {
  i8_sweep();
}

/* ---- the decode path (M <= 8) on prepacked f32, bf16 and int8 weights, tightly ---- */

/* Shapes for the decode kernels: every M of the path, N ragged against
 * their 16-, 32- and 64-column tiles, K odd (the padding half of the last
 * bf16 pair), not a multiple of 4 (int8's step) or of 32, and K a
 * multiple of 4 but not of 64 (4, 100: int8's last group of steps has no
 * padding, and x's row sums end in a partial 64-byte chunk). */
static const int64_t decode_ns[] = {1, 15, 17, 33, 47, 64, 97, 130};
static const int64_t decode_ks[] = {1, 2, 3, 4, 5, 31, 33, 63, 100, 130, 769};

/* A packed-weights linear (rt_linear_packed_bf16 / _i8) on 1-3 threads
 * under every split policy gives y's bits (y1 starts as y0, the padding
 * included). */
typedef void (*PackedLinearFn)(RtPool *, int64_t, int64_t, int64_t, const float *, int64_t,
                               const float *, const float *, float *, int64_t, int64_t, float,
                               const float *, int64_t, int64_t, int64_t, int64_t, int64_t,
                               int64_t);
static void same_bits_any_split(PackedLinearFn fn, const char *what, int64_t m, int64_t n,
                                int64_t k, const float *x, int64_t ldx, const float *wp,
                                const float *y, const float *y0, float *y1, int64_t ldy) {
  for (int t = 1; t <= 3; t++) {
    RtPool *pool = rt_pool_create(t);
    for (int q = 0; q < N_POLICIES; q++) {
      memcpy(y1, y0, sizeof(float) * (size_t)(m * ldy));
      fn(pool, m, n, k, x, ldx, wp, NULL, y1, ldy, RT_ACT_NONE, 1.0f, NULL, 0, 40, 100, 64,
         POLICIES[q].task_macs, POLICIES[q].split_macs);
      cr_assert(memcmp(y, y1, sizeof(float) * (size_t)(m * ldy)) == 0,
                "%s decode m=%lld n=%lld k=%lld: %d threads, policy %d differ", what,
                (long long)m, (long long)n, (long long)k, t, q);
    }
    rt_pool_destroy(pool);
  }
}

/* y = x w^T on M = 1..8 rows of prepacked f32 weights (rt_linear_packed)
 * or bf16 ones (rt_linear_packed_bf16), no bias or epilogue, so only the
 * kernel's sums are seen, against a double-precision sum over the x the
 * set multiplies: for bf16 rounded to bf16 (the avx512f+bf16 set:
 * vdpbf16ps, x rounded once per product) or as it is (sets that widen the
 * weights). Tolerance: each product is rounded at most by the FMA that
 * adds it (bf16 x bf16 fits f32's 24 bits; f32 x bf16 and f32 x f32 are
 * rounded only by the FMA), so the error is the f32 rounding of the k
 * additions, each at most 2^-24 of a partial sum bounded by sum |x w| =
 * mag: k 2^-24 mag, doubled for the order in which vdpbf16ps adds a pair's
 * two products. A term dropped or counted twice (~|x w|, mean 0.25) is far
 * outside it (f32 at K = 769 takes 7-8 rows over K in pieces). The same
 * bits on 1-3 threads under every split policy. */
static void check_decode_float(int bf16, int64_t m, int64_t n, int64_t k, int64_t pad) {
  const int x_rounded = bf16 && strstr(rt_gemm_backend(), "+bf16") != NULL;
  const char *what = bf16 ? "bf16" : "f32";
  PackedLinearFn fn = bf16 ? rt_linear_packed_bf16 : rt_linear_packed;
  int64_t ldx = k + pad, ldy = n + pad;
  float *x = rand_buf(m * ldx), *w = rand_buf(n * k), *y = rand_buf(m * ldy);
  float *y0 = malloc(sizeof(float) * (size_t)(m * ldy)),
        *y1 = malloc(sizeof(float) * (size_t)(m * ldy));
  memcpy(y0, y, sizeof(float) * (size_t)(m * ldy));
  int64_t floats = bf16 ? rt_gemm_packed_bf16_floats(n, k) : rt_gemm_packed_floats(n, k);
  float *wp = aligned_alloc(64, ((size_t)floats * 4 + 63) & ~(size_t)63);
  cr_assert(wp);
  if (bf16)
    rt_gemm_pack_bf16(n, k, w, wp);
  else
    rt_gemm_pack(n, k, w, wp);
  fn(NULL, m, n, k, x, ldx, wp, NULL, y, ldy, RT_ACT_NONE, 1.0f, NULL, 0, 40, 100, 64,
     DEFAULT_POLICY.task_macs, DEFAULT_POLICY.split_macs);
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double s = 0, mag = 0;
      for (int64_t p = 0; p < k; p++) {
        double xv = x_rounded ? bf16_round(x[i * ldx + p]) : x[i * ldx + p];
        double t = xv * (bf16 ? bf16_round(w[j * k + p]) : w[j * k + p]);
        s += t;
        mag += fabs(t);
      }
      double got = y[i * ldy + j], tol = (double)k * ldexp(mag, -23) + 1e-30;
      cr_assert(fabs(got - s) <= tol,
                "%s decode %s (x %s) m=%lld n=%lld k=%lld: y[%lld,%lld] = %.9g, reference "
                "%.9g (tolerance %.3g)",
                what, rt_gemm_backend(), x_rounded ? "rounded" : "as is", (long long)m,
                (long long)n, (long long)k, (long long)i, (long long)j, got, s, tol);
    }
    for (int64_t j = n; j < ldy; j++)
      cr_assert_eq(y[i * ldy + j], y0[i * ldy + j], "%s decode wrote into padding", what);
  }
  same_bits_any_split(fn, what, m, n, k, x, ldx, wp, y, y0, y1, ldy);
  free(x);
  free(w);
  free(wp);
  free(y);
  free(y0);
  free(y1);
}

/* y = x qw^T on M = 1..8 rows, int8: the kernels' integer sums are exact
 * and the output is (float)sum * (sx * sw), so y must equal the formula
 * computed here from the documented quantisation bit for bit (tolerance
 * 0); one zero row (scale 0). The same bits on 1-3 threads. */
static void check_decode_i8(int64_t m, int64_t n, int64_t k, int64_t pad) {
  int64_t ldx = k + pad, ldy = n + pad;
  float *x = rand_buf(m * ldx), *w = rand_buf(n * k), *y = rand_buf(m * ldy);
  if (m > 3)
    memset(x + 3 * ldx, 0, sizeof(float) * (size_t)k);
  float *y0 = malloc(sizeof(float) * (size_t)(m * ldy)),
        *y1 = malloc(sizeof(float) * (size_t)(m * ldy));
  memcpy(y0, y, sizeof(float) * (size_t)(m * ldy));
  float *wp = aligned_alloc(64, ((size_t)rt_gemm_packed_i8_floats(n, k) * 4 + 63) & ~(size_t)63);
  cr_assert(wp);
  rt_gemm_pack_i8(n, k, w, wp);
  rt_linear_packed_i8(NULL, m, n, k, x, ldx, wp, NULL, y, ldy, RT_ACT_NONE, 1.0f, NULL, 0, 40, 100,
                      64, DEFAULT_POLICY.task_macs, DEFAULT_POLICY.split_macs);
  int8_t *qx = malloc((size_t)k), *qw = malloc((size_t)(n * k));
  float *sw = malloc(sizeof(float) * (size_t)n);
  for (int64_t j = 0; j < n; j++)
    quant_row(w + j * k, k, qw + j * k, &sw[j]);
  for (int64_t i = 0; i < m; i++) {
    float sx;
    quant_row(x + i * ldx, k, qx, &sx);
    for (int64_t j = 0; j < n; j++) {
      int32_t isum = 0;
      for (int64_t p = 0; p < k; p++)
        isum += qx[p] * qw[j * k + p];
      float want = (float)isum * (sx * sw[j]);
      cr_assert(y[i * ldy + j] == want,
                "int8 decode %s m=%lld n=%lld k=%lld: y[%lld,%lld] = %.9g, the integer formula "
                "%.9g",
                rt_gemm_backend(), (long long)m, (long long)n, (long long)k, (long long)i,
                (long long)j, y[i * ldy + j], want);
    }
    for (int64_t j = n; j < ldy; j++)
      cr_assert_eq(y[i * ldy + j], y0[i * ldy + j], "int8 decode wrote into padding");
  }
  same_bits_any_split(rt_linear_packed_i8, "int8", m, n, k, x, ldx, wp, y, y0, y1, ldy);
  free(qx);
  free(qw);
  free(sw);
  free(x);
  free(w);
  free(wp);
  free(y);
  free(y0);
  free(y1);
}

/* Every M of the decode path against every N and K above (x and y padded
 * on odd combinations). */
static void decode_sweep(void) {
  const int nn = (int)(sizeof decode_ns / sizeof *decode_ns);
  const int nk = (int)(sizeof decode_ks / sizeof *decode_ks);
  for (int64_t m = 1; m <= 8; m++)
    for (int a = 0; a < nn; a++)
      for (int b = 0; b < nk; b++) {
        int64_t pad = (a + b) % 2 ? 3 : 0;
        check_decode_float(0, m, decode_ns[a], decode_ks[b], pad);
        check_decode_float(1, m, decode_ns[a], decode_ks[b], pad);
        check_decode_i8(m, decode_ns[a], decode_ks[b], pad);
      }
}

Test(gemm, decode_f32_bf16_i8_match_reference, .timeout = 240) {
  decode_sweep();
}

/* One ISA path of the portable GEMM, selected by TFMC_GEMM_ISA in a fresh
 * process: every entry point, every split, against the reference. Returns
 * early (reporting it) when this CPU cannot run the path. */
static void isa_suite(const char *isa_name) {
  const char *name = rt_gemm_backend();
  if (strstr(name, "not supported here")) {
    fprintf(stderr, "gemm: %s: skipped on this CPU (%s)\n", isa_name, name);
    return;
  }
  cr_assert(strncmp(name, "portable", 8) == 0 && strstr(name, isa_name), "backend is '%s'", name);
  fprintf(stderr, "gemm: testing %s\n", name);
  sweep(rt_sgemm, name);
  sweep(rt_sgemm_portable, name);
  for (use_packed = 0; use_packed < 2; use_packed++) {
    linear_sweep();
    linear_odd_sweep();
    linear_is_split_invariant(1);
    epilogue_sweep();
    epilogue_is_composition(1);
  }
  use_packed = 0;
  packed_equals_unpacked();
  bf16_sweep();
  i8_sweep();
  decode_sweep();
}

static void use_isa(const char *isa) {
  setenv("TFMC_GEMM", "portable", 1);
  setenv("TFMC_GEMM_ISA", isa, 1);
}
static void use_avx512(void) {
  use_isa("avx512");
}
static void use_avx2(void) {
  use_isa("avx2");
}
static void use_scalar(void) {
  use_isa("scalar");
}

static void use_avx512bf16(void) {
  use_isa("avx512bf16");
}
static void use_neon(void) {
  use_isa("neon");
}

Test(gemm, isa_avx512, .init = use_avx512, .timeout = 240) {
  isa_suite("avx512f kernels");
}

Test(gemm, isa_avx512bf16, .init = use_avx512bf16, .timeout = 240) {
  isa_suite("avx512f+bf16 kernels");
}

Test(gemm, isa_avx2, .init = use_avx2, .timeout = 240) {
  isa_suite("avx2+fma kernels");
}

Test(gemm, isa_neon, .init = use_neon, .timeout = 240) {
  isa_suite("neon kernels");
}

Test(gemm, isa_scalar, .init = use_scalar, .timeout = 240) {
  isa_suite("baseline kernels");
}

static void use_bogus_isa(void) {
  setenv("TFMC_GEMM", "portable", 1);
  setenv("TFMC_GEMM_ISA", "sse9", 1);
}

/* An unknown TFMC_GEMM_ISA changes nothing and says so. */
Test(gemm, isa_unknown_is_noted, .init = use_bogus_isa) {
  const char *name = rt_gemm_backend();
  cr_assert(strstr(name, "TFMC_GEMM_ISA=sse9 unknown"), "backend is '%s'", name);
  check_sgemm(rt_sgemm, name, 0, 1, 9, 50, 33, 1.0f, 0.0f, 0);
}

static void use_bogus_gemm(void) {
  setenv("TFMC_GEMM", "portible", 1);
  unsetenv("TFMC_GEMM_ISA");
}

/* A misspelt TFMC_GEMM is not taken for a choice: the default backend
 * (OpenBLAS where it loads, else the portable GEMM), named with the word. */
Test(gemm, backend_unknown_is_noted, .init = use_bogus_gemm) {
  const char *name = rt_gemm_backend();
  cr_assert(strstr(name, "TFMC_GEMM=portible unknown"), "backend is '%s'", name);
  cr_assert(strncmp(name, "openblas", 8) == 0 || strncmp(name, "portable", 8) == 0,
            "backend is '%s'", name);
  check_sgemm(rt_sgemm, name, 0, 1, 9, 50, 33, 1.0f, 0.0f, 0);
}

Test(gemm, backend_names_itself) {
  const char *name = rt_gemm_backend();
  cr_assert(name && (strncmp(name, "openblas", 8) == 0 || strncmp(name, "portable", 8) == 0),
            "backend '%s'", name ? name : "(null)");
  cr_assert_eq(rt_gemm_backend(), name, "the backend is chosen once");
}

/* ---- performance report (printed, not asserted) ---- */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Best of 3 timings of ~50 ms each. */
static double gflops(RtPool *pool, int64_t m, int64_t n, int64_t k) {
  float *x = rand_buf(m * k), *w = rand_buf(n * k), *b = rand_buf(n), *y = rand_buf(m * n);
  double t0 = now();
  linear(pool, m, n, k, x, k, w, b, y, n, DEFAULT_POLICY);
  double once = now() - t0;
  int reps = once > 0.05 ? 1 : (int)(0.05 / (once + 1e-9)) + 1;
  double best = 1e9;
  for (int r = 0; r < 3; r++) {
    t0 = now();
    for (int i = 0; i < reps; i++)
      linear(pool, m, n, k, x, k, w, b, y, n, DEFAULT_POLICY);
    double dt = (now() - t0) / reps;
    if (dt < best)
      best = dt;
  }
  free(x);
  free(w);
  free(b);
  free(y);
  return 2.0 * (double)(m * n * k) / best / 1e9;
}

static void report(void) {
#ifndef __OPTIMIZE__
  fprintf(stderr, "gemm: performance report skipped (unoptimised build)\n");
  return;
#endif
  const int64_t shapes[][3] = {{128, 768, 768}, {128, 3072, 768}, {1, 768, 768}};
  for (int threads = 1; threads <= 2; threads++) {
    RtPool *p = rt_pool_create(threads);
    for (int s = 0; s < 3; s++)
      fprintf(stderr, "gemm: %s, %d thread%s: rt_linear M=%lld N=%lld K=%lld: %.1f GFLOP/s\n",
              rt_gemm_backend(), threads, threads > 1 ? "s" : "", (long long)shapes[s][0],
              (long long)shapes[s][1], (long long)shapes[s][2],
              gflops(p, shapes[s][0], shapes[s][1], shapes[s][2]));
    rt_pool_destroy(p);
  }
}

Test(gemm, performance_report, .timeout = 120) {
  report();
}

Test(gemm, performance_report_portable, .init = use_portable, .timeout = 120) {
  report();
}

Test(gemm, performance_report_portable_baseline, .init = use_baseline, .timeout = 120) {
  report();
}
