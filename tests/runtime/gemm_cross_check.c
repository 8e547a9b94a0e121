/* tests/runtime/gemm_cross_check.c — a plain C (no Criterion) check of
 * rt_linear, rt_linear_packed (weights packed by rt_gemm_pack),
 * rt_linear_packed_bf16 (rt_gemm_pack_bf16) and rt_linear_packed_i8
 * (rt_gemm_pack_i8), built with any C11 compiler
 * and run where Criterion is not: cross-compiled for aarch64 and run under
 * qemu-user by tests/runtime/test_gemm_cross.c, once per kernel set.
 *
 *   gemm_cross_check WORDS    (e.g. "neon kernels", "baseline kernels")
 *
 * The caller selects the kernel set (TFMC_GEMM=portable, TFMC_GEMM_ISA);
 * WORDS must appear in rt_gemm_backend(), so a set that was not chosen
 * fails instead of testing another one. Over odd shapes (M 1..130,
 * including the decode path M <= 8; N and K not multiples of 16, odd K),
 * each activation, scales, bias and residual or not, padded leading
 * dimensions and cache blocks that do not divide the shapes:
 *   - every element against a double reference within 1e-4 of the summed
 *     terms' magnitude (times gelu's slope and |scale|, as
 *     tests/runtime/test_gemm.c), bf16 against the reference on the
 *     bf16-rounded weights (x as it is: NEON and the C set widen the
 *     weights; only an x86 set with vdpbf16ps, "+bf16" in its name, may
 *     also round x, as rt_gemm.h says); int8 against the exact integer
 *     formula of rt_gemm.h (sx sw sum qx qw, x and w quantised per row)
 *     within 2e-6 of the values added, as tests/runtime/test_gemm.c
 *     (scale 1 there and here), and the f32 product within the
 *     quantisation's bound: each |x w - sx qx sw qw| is at most
 *     sw |x| / 2 + sx |w| / 2 + sx sw / 4 (plus f32 rounding), times
 *     gelu's largest slope;
 *   - y's padding and the residual untouched;
 *   - the same bits on pools of 1, 2 and 3 threads under split policies
 *     that change every decision (split invariance).
 * Prints the backend, a digest (FNV-1a) of every output's bits and "ok";
 * exits 1 at the first failure, naming it. */
#include "runtime/rt_act.h"
#include "runtime/rt_gemm.h"
#include "runtime/rt_pool.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static float frand(void) { /* uniform in [-1, 1) */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (float)((double)((rng * 0x2545F4914F6CDD1Dull) >> 11) / 4503599627370496.0 - 1.0);
}

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "gemm_cross_check: out of memory\n");
    exit(1);
  }
  return p;
}

static float *rand_buf(int64_t n) {
  float *p = xmalloc(sizeof(float) * (size_t)(n > 0 ? n : 0));
  for (int64_t i = 0; i < n; i++)
    p[i] = frand();
  return p;
}

static uint64_t digest = 0xcbf29ce484222325ull;

static void digest_floats(const float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &y[i], 4);
    for (int b = 0; b < 4; b++) {
      digest ^= (u >> (8 * b)) & 0xffu;
      digest *= 0x100000001b3ull;
    }
  }
}

/* f32 -> bf16 -> f32, round to nearest even (no NaNs here) */
static double bf16_round(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float r;
  memcpy(&r, &u, 4);
  return r;
}

static double ref_act(int act, double v) {
  switch (act) {
  case RT_ACT_RELU: return v < 0 ? 0 : v;
  case RT_ACT_GELU: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
  case RT_ACT_GELU_TANH:
    return 0.5 * v * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
  default: return v;
  }
}

/* rt_gemm.h's int8 quantisation: scale max|v| / 127, values v * 127 /
 * max|v| rounded to nearest even. */
static void quant_row(const float *v, int64_t n, int8_t *q, float *scale) {
  float amax = 0;
  for (int64_t i = 0; i < n; i++)
    amax = fmaxf(amax, fabsf(v[i]));
  float inv = amax > 0 ? 127.0f / amax : 0.0f;
  *scale = amax / 127.0f;
  for (int64_t i = 0; i < n; i++)
    q[i] = (int8_t)nearbyintf(v[i] * inv);
}

enum { ENTRY_F32, ENTRY_PACKED, ENTRY_BF16, ENTRY_I8, ENTRY_COUNT };
static const char *const entry_names[ENTRY_COUNT] = {"rt_linear", "rt_linear_packed",
                                                     "rt_linear_packed_bf16", "rt_linear_packed_i8"};

typedef struct Case {
  int entry;
  int64_t m, n, k;
  int act;
  float scale;
  int bias, residual;
  int64_t pad;
  int64_t mc, nc, kc; /* the caller's cache blocks */
} Case;

/* rt_linear's split policies (task_macs, split_macs): the lowering's
 * default, the finest pieces, one piece per thread */
static const int64_t policies[][2] = {{(int64_t)1 << 17, (int64_t)1 << 23}, {1, 0}, {64, INT64_MAX}};
enum { N_POLICIES = sizeof policies / sizeof *policies };

static int failures;
static int x_rounded_ok; /* the backend's bf16 products may round x to bf16 */

static void fail_case(const Case *c, const char *what) {
  fprintf(stderr,
          "FAIL %s m=%lld n=%lld k=%lld act=%d scale=%g bias=%d residual=%d pad=%lld blocks "
          "%lld,%lld,%lld: %s\n",
          entry_names[c->entry], (long long)c->m, (long long)c->n, (long long)c->k, c->act,
          c->scale, c->bias, c->residual, (long long)c->pad, (long long)c->mc, (long long)c->nc,
          (long long)c->kc, what);
  failures++;
}

static void run(const Case *c, RtPool *pool, const int64_t *pol, const float *x, int64_t ldx,
                const float *w, const float *wp, const float *bias, float *y, int64_t ldy,
                const float *r, int64_t ldr) {
  switch (c->entry) {
  case ENTRY_F32:
    rt_linear(pool, c->m, c->n, c->k, x, ldx, w, bias, y, ldy, c->act, c->scale, r, ldr, c->mc,
              c->nc, c->kc, pol[0], pol[1]);
    break;
  case ENTRY_PACKED:
    rt_linear_packed(pool, c->m, c->n, c->k, x, ldx, wp, bias, y, ldy, c->act, c->scale, r, ldr,
                     c->mc, c->nc, c->kc, pol[0], pol[1]);
    break;
  case ENTRY_BF16:
    rt_linear_packed_bf16(pool, c->m, c->n, c->k, x, ldx, wp, bias, y, ldy, c->act, c->scale, r,
                          ldr, c->mc, c->nc, c->kc, pol[0], pol[1]);
    break;
  case ENTRY_I8:
    rt_linear_packed_i8(pool, c->m, c->n, c->k, x, ldx, wp, bias, y, ldy, c->act, c->scale, r, ldr,
                        c->mc, c->nc, c->kc, pol[0], pol[1]);
    break;
  }
}

static void check_case(const Case *c, RtPool *const pools[3]) {
  const int64_t m = c->m, n = c->n, k = c->k;
  const int64_t ldx = k + c->pad, ldy = n + c->pad, ldr = n + 2 * c->pad + 1;
  float *x = rand_buf(m * ldx), *w = rand_buf(n * k), *bias = c->bias ? rand_buf(n) : NULL;
  float *r = c->residual ? rand_buf(m * ldr) : NULL;
  float *r0 = xmalloc(sizeof(float) * (size_t)(m * ldr));
  if (r)
    memcpy(r0, r, sizeof(float) * (size_t)(m * ldr));
  float *y = rand_buf(m * ldy), *y0 = xmalloc(sizeof(float) * (size_t)(m * ldy));
  float *y1 = xmalloc(sizeof(float) * (size_t)(m * ldy));
  memcpy(y0, y, sizeof(float) * (size_t)(m * ldy));
  float *wp = NULL;
  if (c->entry != ENTRY_F32) {
    int64_t floats = c->entry == ENTRY_BF16 ? rt_gemm_packed_bf16_floats(n, k)
                     : c->entry == ENTRY_I8 ? rt_gemm_packed_i8_floats(n, k)
                                            : rt_gemm_packed_floats(n, k);
    wp = aligned_alloc(64, ((size_t)(floats > 0 ? floats : 1) * 4 + 63) & ~(size_t)63);
    if (!wp) {
      fprintf(stderr, "gemm_cross_check: out of memory\n");
      exit(1);
    }
    if (c->entry == ENTRY_BF16)
      rt_gemm_pack_bf16(n, k, w, wp);
    else if (c->entry == ENTRY_I8)
      rt_gemm_pack_i8(n, k, w, wp);
    else
      rt_gemm_pack(n, k, w, wp);
  }
  if (c->entry == ENTRY_I8 && m > 2) /* a row of zeros: scale 0 */
    memset(x + 2 * ldx, 0, sizeof(float) * (size_t)k);
  int8_t *qx = xmalloc((size_t)k), *qw = xmalloc((size_t)(n * k));
  float *sw = xmalloc(sizeof(float) * (size_t)n), sx = 0;
  if (c->entry == ENTRY_I8)
    for (int64_t j = 0; j < n; j++)
      quant_row(w + j * k, k, qw + j * k, &sw[j]);
  run(c, NULL, policies[0], x, ldx, w, wp, bias, y, ldy, r, r ? ldr : 0);
  for (int64_t i = 0; i < m && !failures; i++) {
    if (c->entry == ENTRY_I8)
      quant_row(x + i * ldx, k, qx, &sx);
    for (int64_t j = 0; j < n; j++) {
      if (c->entry == ENTRY_I8) { /* the exact formula, and near the f32 product */
        int32_t isum = 0;
        double f = bias ? bias[j] : 0, mag = bias ? fabs(bias[j]) : 0, qerr = 0;
        for (int64_t p = 0; p < k; p++) {
          isum += qx[p] * qw[j * k + p];
          f += (double)x[i * ldx + p] * w[j * k + p];
          mag += fabs((double)x[i * ldx + p] * w[j * k + p]);
          qerr += 0.5 * sw[j] * fabs(x[i * ldx + p]) + 0.5 * (double)sx * fabs(w[j * k + p]) +
                  0.25 * (double)sx * sw[j];
        }
        double rv = r ? r[i * ldr + j] : 0, got = y[i * ldy + j];
        double pre = (double)((float)isum * (sx * sw[j])) + (bias ? bias[j] : 0);
        double exact = ref_act(c->act, pre) + rv, approx = ref_act(c->act, f) + rv;
        if (!(fabs(got - exact) <= 2e-6 * (fabs(pre) + fabs(rv)) + 1e-30) ||
            !(fabs(got - approx) <= 1.2 * (qerr + 1e-6 * mag) + 1e-6)) {
          char what[192];
          snprintf(what, sizeof what,
                   "y[%lld,%lld] = %.9g, the integer formula %.9g, the f32 product %.9g",
                   (long long)i, (long long)j, got, exact, approx);
          fail_case(c, what);
          break;
        }
        continue;
      }
      double s = bias ? bias[j] : 0, sr = s, mag = bias ? fabs(bias[j]) : 0;
      for (int64_t p = 0; p < k; p++) {
        double wv = c->entry == ENTRY_BF16 ? bf16_round(w[j * k + p]) : w[j * k + p];
        double t = (double)x[i * ldx + p] * wv;
        s += t;
        sr += bf16_round(x[i * ldx + p]) * wv;
        mag += fabs(t);
      }
      double t = ref_act(c->act, (double)c->scale * s);
      double rv = r ? r[i * ldr + j] : 0, want = t + rv, got = y[i * ldy + j];
      double tol = 1.2e-4 * fabs(c->scale) * mag + 1e-6 * (fabs(t) + fabs(rv)) + 1e-30;
      double err = fabs(got - want);
      if (c->entry == ENTRY_BF16 && x_rounded_ok) {
        double tr = ref_act(c->act, (double)c->scale * sr);
        if (fabs(got - (tr + rv)) < err)
          err = fabs(got - (tr + rv));
      }
      if (!(err <= tol)) {
        char what[160];
        snprintf(what, sizeof what, "y[%lld,%lld] = %.9g, reference %.9g (tolerance %.3g)",
                 (long long)i, (long long)j, got, want, tol);
        fail_case(c, what);
        break;
      }
    }
    for (int64_t j = n; j < ldy; j++)
      if (memcmp(&y[i * ldy + j], &y0[i * ldy + j], 4) != 0) {
        fail_case(c, "wrote into y's padding");
        break;
      }
  }
  if (r && memcmp(r, r0, sizeof(float) * (size_t)(m * ldr)) != 0)
    fail_case(c, "wrote into the residual");
  digest_floats(y, m * ldy);
  /* the same bits on 1-3 threads under every policy */
  for (int t = 0; t < 3 && !failures; t++)
    for (int q = 0; q < N_POLICIES && !failures; q++) {
      memcpy(y1, y0, sizeof(float) * (size_t)(m * ldy));
      run(c, pools[t], policies[q], x, ldx, w, wp, bias, y1, ldy, r, r ? ldr : 0);
      if (memcmp(y, y1, sizeof(float) * (size_t)(m * ldy)) != 0) {
        char what[96];
        snprintf(what, sizeof what, "%d threads under policy %d differ from the calling thread",
                 rt_pool_size(pools[t]), q);
        fail_case(c, what);
      }
    }
  free(qx);
  free(qw);
  free(sw);
  free(x);
  free(w);
  free(wp);
  free(bias);
  free(r);
  free(r0);
  free(y);
  free(y0);
  free(y1);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gemm_cross_check WORDS (what rt_gemm_backend() must name)\n");
    return 2;
  }
  const char *backend = rt_gemm_backend();
  printf("backend: %s\n", backend);
  if (strncmp(backend, "portable", 8) != 0 || !strstr(backend, argv[1])) {
    fprintf(stderr, "FAIL: the backend is '%s', not one with '%s'\n", backend, argv[1]);
    return 1;
  }
  x_rounded_ok = strstr(backend, "+bf16") != NULL;
  static const int64_t ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 17, 33, 64, 130};
  static const int64_t nks[] = {1, 2, 3, 5, 15, 16, 17, 31, 33, 47, 63, 65, 97, 130};
  static const int64_t blocks[][3] = {{128, 2016, 384}, {5, 30, 20}, {1, 1, 1},
                                      {0, 0, 0},        {12, 64, 48}, {100000, 1 << 20, 100000}};
  static const float scales[] = {1.0f, 0.5f, -1.25f};
  const int nm = (int)(sizeof ms / sizeof *ms), nnk = (int)(sizeof nks / sizeof *nks);
  RtPool *pools[3] = {rt_pool_create(1), rt_pool_create(2), rt_pool_create(3)};
  int cases = 0;
  for (int e = 0; e < ENTRY_COUNT && !failures; e++) {
    for (int i = 0; i < 60 && !failures; i++, cases++) {
      const int64_t *bl = blocks[(i + e) % 6];
      Case c = {e, ms[i % nm], nks[(i * 7 + 3 + e) % nnk], nks[(i * 5 + i / nnk + 2 * e) % nnk],
                (i + e) % RT_ACT_COUNT, e == ENTRY_I8 ? 1.0f : scales[i % 3], i % 3 != 0,
                (i + e) % 2 == 1,
                (int64_t)(i % 3), bl[0], bl[1], bl[2]};
      check_case(&c, pools);
    }
    /* K over several default K blocks (384), and odd; wide decode rows */
    static const int64_t big[][3] = {{20, 100, 777}, {8, 300, 401}, {1, 1000, 129}, {130, 130, 130}};
    for (int i = 0; i < 4 && !failures; i++, cases++) {
      Case c = {e, big[i][0], big[i][1], big[i][2], i % RT_ACT_COUNT, 1.0f, 1, i % 2, 1, 0, 0, 0};
      check_case(&c, pools);
    }
  }
  for (int t = 0; t < 3; t++)
    rt_pool_destroy(pools[t]);
  if (failures)
    return 1;
  printf("digest: %016llx\n", (unsigned long long)digest);
  printf("ok: %d cases\n", cases);
  return 0;
}
