/* runtime/rt_attention.c — multi-head attention as two GEMMs per block of
 * query rows (see rt_attention.h for the formula and the layouts).
 *
 * Per task (batch element bi, head hd, query rows t0 .. t0+rows):
 *   S[rows, tk]  = scale * Q[t0.., hd] K[.., hd]^T     rt_sgemm, no transpose copy:
 *                                                      Q and K rows are h*dh apart
 *   S[r, j]      = -1e9 where the mask row says 0
 *   S[r, :]      = softmax(S[r, :])                    max-subtracted, in place
 *   O[t0.., hd]  = S V[.., hd]                         rt_sgemm into out, ldc = h*dv
 * On x86 with AVX2+FMA, dv a multiple of 8 and tk <= max_tk_tiled (the
 * caller's policy: small models, BERT at seq 128), the two products are
 * AVX2 loops instead of BLAS calls (attn_scores_avx2 / attn_mix_avx2: 6x16
 * register tiles over K and V packed into panels once per head and thread),
 * which skip BLAS's per-call packing; the softmax has an AVX2 version too. Everything else keeps the
 * portable loops and BLAS. What the CPU can run is decided here (cpuid);
 * which path and how many query rows per task (block_q) are arguments the
 * compiler chooses (passes/lower_loops.c).
 * Tasks are numbered ((bi * h) + hd) * n_blocks + block, so the tasks a
 * thread gets in a row mostly share one head's K and V.
 *
 * Invariants: every task writes only its own rows of its own head's columns
 * of out (and of probs), so tasks never race; S lives in the probs output
 * when there is one, else in the calling thread's scratch buffer (after the
 * head's packed K and V on the AVX2 path; a pthread
 * key, freed at thread exit, grown only when a task needs more than any
 * before it), so steady-state runs do not allocate. A refused allocation
 * sends that task to the streaming loops, which need no memory at all. */
#include "runtime/rt_attention.h"

#include "runtime/rt_exp.h"
#include "runtime/rt_gemm.h"

#include <math.h>
#ifndef TFMC_STATIC
#include <pthread.h>
#include <stdlib.h>
#endif
#include <string.h>

/* masked_fill(mask == 0, -1e9), as the interpreter and PyTorch do */
#define ATTN_MASKED_SCORE (-1e9f)

typedef struct AttnJob {
  int64_t b, h, tq, tk, dh, dv;
  int64_t block_q, n_blocks; /* query rows per task, tasks per head */
  int tiled;                 /* the AVX2 products (attn_tiled) */
  int pack_v;                /* ... reading V from panels packed per head */
  int direct;                /* ... one query row (tq 1, a decode step): the
                                scores from K in place (attn_scores_row), not
                                packed first: packing a head's K for one row
                                copies as much as the row multiplies */
  int lanes;                 /* rt_gemm_lanes(): 16 takes the AVX-512F
                                products, 8 or more the AVX2 softmax */
  float scale;
  const float *q, *k, *v;
  int64_t ldq, ldk, ldv;        /* floats between rows of q, k, v */
  int64_t k_bstride, v_bstride; /* floats between batch elements of k, v */
  int64_t block_k;              /* flash: keys per block (0: not flash) */
  const uint8_t *mask;
  int64_t mask_b, mask_q;
  float *out, *probs;
} AttnJob;

/* ---- per-thread scratch for the scores ---- */

#ifdef TFMC_STATIC
/* The static build (runtime/rt_static.c: no heap, no threads) has no
 * scratch: every task runs the streaming loops, which need no memory. */
static float *scratch_get(int64_t n) {
  (void)n;
  return NULL;
}
#else

typedef struct AttnScratch {
  float *data;
  int64_t cap; /* floats */
} AttnScratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free(void *p) {
  AttnScratch *s = p;
  if (!s)
    return;
  free(s->data);
  free(s);
}

static void scratch_key_init(void) {
  scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

/* The calling thread's buffer of at least n floats (n >= 1), or NULL when
 * memory is refused. The contents are left over from earlier tasks. */
static float *scratch_get(int64_t n) {
  pthread_once(&scratch_once, scratch_key_init);
  if (!scratch_key_ok)
    return NULL;
  AttnScratch *s = pthread_getspecific(scratch_key);
  if (!s) {
    s = calloc(1, sizeof *s);
    if (!s)
      return NULL;
    if (pthread_setspecific(scratch_key, s) != 0) {
      free(s);
      return NULL;
    }
  }
  if (s->cap < n) {
    if ((uint64_t)n > SIZE_MAX / sizeof(float))
      return NULL;
    float *d = malloc((size_t)n * sizeof(float)); /* old contents are not needed */
    if (!d)
      return NULL;
    free(s->data);
    s->data = d;
    s->cap = n;
  }
  return s->data;
}
#endif

/* ---- the pieces ---- */

/* The mask row for query t of batch element bi (broadcast dims read row
 * 0), or NULL without a mask. */
static const uint8_t *mask_row(const AttnJob *j, int64_t bi, int64_t t) {
  if (!j->mask)
    return NULL;
  int64_t mb = j->mask_b == 1 ? 0 : bi, mq = j->mask_q == 1 ? 0 : t;
  return j->mask + (mb * j->mask_q + mq) * j->tk;
}

/* Loops over rows run in blocks of ATTN_LANES with a scalar tail: a fixed
 * trip count the compiler vectorises. */
#define ATTN_LANES 16

/* row[0..tk) = softmax(row masked by m, when m is not NULL), tk >= 1. */
#define ATTN_DEFINE_SOFTMAX(SUFFIX, ATTR)                                                          \
  ATTR static void softmax_row_##SUFFIX(float *restrict row, int64_t tk,                           \
                                        const uint8_t *restrict m) {                               \
    int64_t full = tk - tk % ATTN_LANES, x;                                                        \
    if (m) {                                                                                       \
      for (x = 0; x < full; x += ATTN_LANES)                                                       \
        for (int l = 0; l < ATTN_LANES; l++) {                                                     \
          float v = row[x + l]; /* loaded either way: no conditional load */                       \
          row[x + l] = m[x + l] ? v : ATTN_MASKED_SCORE;                                           \
        }                                                                                          \
      for (x = full; x < tk; x++)                                                                  \
        row[x] = m[x] ? row[x] : ATTN_MASKED_SCORE;                                                \
    }                                                                                              \
    float lane[ATTN_LANES];                                                                        \
    for (int l = 0; l < ATTN_LANES; l++)                                                           \
      lane[l] = row[0];                                                                            \
    for (x = 0; x < full; x += ATTN_LANES)                                                         \
      for (int l = 0; l < ATTN_LANES; l++)                                                         \
        lane[l] = row[x + l] > lane[l] ? row[x + l] : lane[l];                                     \
    float mx = row[0];                                                                             \
    for (int l = 0; l < ATTN_LANES; l++)                                                           \
      mx = lane[l] > mx ? lane[l] : mx;                                                            \
    for (x = full; x < tk; x++)                                                                    \
      mx = row[x] > mx ? row[x] : mx;                                                              \
    for (int l = 0; l < ATTN_LANES; l++)                                                           \
      lane[l] = 0;                                                                                 \
    for (x = 0; x < full; x += ATTN_LANES)                                                         \
      for (int l = 0; l < ATTN_LANES; l++) {                                                       \
        float e = attn_exp_##SUFFIX(row[x + l] - mx);                                              \
        row[x + l] = e;                                                                            \
        lane[l] += e;                                                                              \
      }                                                                                            \
    double sum = 0;                                                                                \
    for (int l = 0; l < ATTN_LANES; l++)                                                           \
      sum += lane[l];                                                                              \
    for (x = full; x < tk; x++) {                                                                  \
      row[x] = attn_exp_##SUFFIX(row[x] - mx);                                                     \
      sum += row[x];                                                                               \
    }                                                                                              \
    float inv = (float)(1.0 / sum);                                                                \
    for (x = 0; x < full; x += ATTN_LANES)                                                         \
      for (int l = 0; l < ATTN_LANES; l++)                                                         \
        row[x + l] *= inv;                                                                         \
    for (x = full; x < tk; x++)                                                                    \
      row[x] *= inv;                                                                               \
  }

/* gcc's -O2 cost model ("very cheap") declines these loops; ask for the
 * "cheap" one (clang vectorises them at -O2 as they are). */
#if defined(__GNUC__) && !defined(__clang__)
#define ATTN_VEC __attribute__((optimize("tree-vectorize", "vect-cost-model=cheap")))
#else
#define ATTN_VEC
#endif
/* fmaf only where it is one instruction (ISO C mode contracts nothing) */
#ifdef FP_FAST_FMAF
#define ATTN_MADD_BASE(a, b, c) fmaf(a, b, c)
#else
#define ATTN_MADD_BASE(a, b, c) ((a) * (b) + (c))
#endif

RT_DEFINE_EXP_NEG(attn_exp_base, ATTN_VEC, ATTN_MADD_BASE)
ATTN_DEFINE_SOFTMAX(base, ATTN_VEC)
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(TFMC_STATIC)
#define ATTN_X86 1
#include <immintrin.h>

#define ATTN_AVX2 __attribute__((target("avx2,fma")))
RT_DEFINE_EXP_NEG(attn_exp_avx2, ATTN_AVX2, fmaf)

/* attn_exp_avx2 (rt_exp.h) on 8 lanes: the same steps with the same constants. */
ATTN_AVX2 static inline __m256 attn_exp8(__m256 x) {
  const __m256 shift = _mm256_set1_ps(12582912.0f);
  __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), shift);
  __m256 n = _mm256_sub_ps(t, shift);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723e-6f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  __m256i e = _mm256_slli_epi32(
      _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B400000)), 23);
  __m256 y = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e)); /* * 2^n */
  y = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-86.0f), _CMP_LT_OQ), y); /* 0 */
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));            /* NaN */
}

ATTN_AVX2 static float attn_hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

/* max(from, row[0..n)), n >= 1, on 8 lanes (NaN lanes may or may not win:
 * the callers make such rows NaN through the exp) */
ATTN_AVX2 static float attn_rowmax_avx2(const float *row, int64_t n, float from) {
  int64_t full = n - n % 8, x;
  float mx = from > row[0] ? from : row[0];
  if (full) {
    __m256 vm = _mm256_loadu_ps(row);
    for (x = 8; x < full; x += 8)
      vm = _mm256_max_ps(vm, _mm256_loadu_ps(row + x));
    float h = attn_hmax8(vm);
    mx = h > mx ? h : mx;
  }
  for (x = full; x < n; x++)
    mx = row[x] > mx ? row[x] : mx;
  return mx;
}

/* row[x] = exp(row[x] - mx) for x < n, in place, on 8 lanes (the scalar
 * tail with the same exp); returns their sum. */
ATTN_AVX2 static float attn_exp_sum_avx2(float *row, int64_t n, float mx) {
  int64_t full = n - n % 8, x;
  __m256 vmx = _mm256_set1_ps(mx), vs0 = _mm256_setzero_ps(), vs1 = _mm256_setzero_ps();
  for (x = 0; x + 16 <= full; x += 16) { /* two sums: the adds do not wait on each other */
    __m256 e0 = attn_exp8(_mm256_sub_ps(_mm256_loadu_ps(row + x), vmx));
    __m256 e1 = attn_exp8(_mm256_sub_ps(_mm256_loadu_ps(row + x + 8), vmx));
    _mm256_storeu_ps(row + x, e0);
    _mm256_storeu_ps(row + x + 8, e1);
    vs0 = _mm256_add_ps(vs0, e0);
    vs1 = _mm256_add_ps(vs1, e1);
  }
  for (; x < full; x += 8) {
    __m256 e0 = attn_exp8(_mm256_sub_ps(_mm256_loadu_ps(row + x), vmx));
    _mm256_storeu_ps(row + x, e0);
    vs0 = _mm256_add_ps(vs0, e0);
  }
  __m256 vs = _mm256_add_ps(vs0, vs1);
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(vs), _mm256_extractf128_ps(vs, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  float sum = _mm_cvtss_f32(_mm_add_ss(s4, _mm_shuffle_ps(s4, s4, 1)));
  for (x = full; x < n; x++) {
    row[x] = attn_exp_avx2(row[x] - mx);
    sum += row[x];
  }
  return sum;
}

/* softmax_row_base's steps on 8 lanes at a time; the masking loop is the
 * same scalar loop, which vectorises. */
ATTN_VEC ATTN_AVX2 static void softmax_row_avx2(float *restrict row, int64_t tk,
                                                const uint8_t *restrict m) {
  int64_t full = tk - tk % 8, x;
  if (m)
    for (x = 0; x < tk; x++) {
      float v = row[x];
      row[x] = m[x] ? v : ATTN_MASKED_SCORE;
    }
  float mx = attn_rowmax_avx2(row, tk, row[0]);
  float inv = 1.0f / attn_exp_sum_avx2(row, tk, mx); /* >= 1: the largest term is e^0 */
  __m256 vinv = _mm256_set1_ps(inv);
  for (x = 0; x < full; x += 8)
    _mm256_storeu_ps(row + x, _mm256_mul_ps(_mm256_loadu_ps(row + x), vinv));
  for (x = full; x < tk; x++)
    row[x] *= inv;
}

/* The two products of a block without BLAS: at head dims this small
 * (tiny models: 16; BERT: 64) a BLAS call spends as long packing its
 * operands and scaling C as multiplying (64x128x16 through OpenBLAS: 6.7 us,
 * half of it copies). These read Q and the scores in place, and K and V of
 * the head through copies packed once per head for all the query blocks a
 * thread runs on it (attn_task): Q, K and V rows sit h*dh floats apart in
 * the caller's layout (3 KB at BERT's dims), so a block of 600 keys spans
 * hundreds of pages and every strided read missed the TLB; the panels below
 * are read front to back.
 *
 * K panels: kp[p][d][16] = K[16p + i, d] for keys 16p .. 16p+15 (0 past tk),
 * dh x 16 floats per panel, so one score tile reads 16 keys' dims in order. */
ATTN_AVX2 static void attn_pack_kp(int64_t tk, int64_t dh, const float *k, int64_t ldk, float *kp) {
  int64_t dh8 = dh - dh % 8, x = 0;
  /* 8 keys x 8 dims at a time: an 8x8 transpose in registers; whole rows
   * as vectors, so many rows' cache lines are in flight at once */
  for (; x + 8 <= tk; x += 8) {
    float *dst = kp + (x - x % 16) * dh + x % 16; /* panel x/16, lanes x%16 .. */
    for (int64_t d = 0; d < dh8; d += 8) {
      __m256 r0 = _mm256_loadu_ps(k + (x + 0) * ldk + d),
             r1 = _mm256_loadu_ps(k + (x + 1) * ldk + d);
      __m256 r2 = _mm256_loadu_ps(k + (x + 2) * ldk + d),
             r3 = _mm256_loadu_ps(k + (x + 3) * ldk + d);
      __m256 r4 = _mm256_loadu_ps(k + (x + 4) * ldk + d),
             r5 = _mm256_loadu_ps(k + (x + 5) * ldk + d);
      __m256 r6 = _mm256_loadu_ps(k + (x + 6) * ldk + d),
             r7 = _mm256_loadu_ps(k + (x + 7) * ldk + d);
      __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
      __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
      __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
      __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
      __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      float *o = dst + d * 16; /* dim d + i of the panel gets keys x .. x+7 */
      _mm256_storeu_ps(o + 0 * 16, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(o + 1 * 16, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(o + 2 * 16, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(o + 3 * 16, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(o + 4 * 16, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(o + 5 * 16, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(o + 6 * 16, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(o + 7 * 16, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
    for (int64_t d = dh8; d < dh; d++)
      for (int64_t i = 0; i < 8; i++)
        dst[d * 16 + i] = k[(x + i) * ldk + d];
  }
  /* the last keys one by one, then the zero pad to the panel's end */
  int64_t end = (tk + 15) / 16 * 16;
  for (; x < end; x++) {
    float *dst = kp + (x - x % 16) * dh + x % 16;
    for (int64_t d = 0; d < dh; d++)
      dst[d * 16] = x < tk ? k[x * ldk + d] : 0.0f;
  }
}

/* V panels: vp[c][x][16] = V[x, 16c + e] for columns 16c .. 16c+15 (0 past
 * dv, a multiple of 8), tk x 16 floats per panel: one mix tile reads its 16
 * columns of every key in order. */
ATTN_AVX2 static void attn_pack_vp(int64_t tk, int64_t dv, const float *v, int64_t ldv,
                                   float *vp) {
  for (int64_t x = 0; x < tk; x++) {
    const float *vr = v + x * ldv;
    for (int64_t c0 = 0; c0 < dv; c0 += 16) {
      float *dst = vp + c0 * tk + x * 16; /* panel c0/16, row x */
      _mm256_storeu_ps(dst, _mm256_loadu_ps(vr + c0));
      _mm256_storeu_ps(dst + 8, c0 + 16 <= dv ? _mm256_loadu_ps(vr + c0 + 8) : _mm256_setzero_ps());
    }
  }
}

/* mask of the first n (0..8) lanes, for the ragged end of a row */
ATTN_AVX2 static inline __m256i attn_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Runs TILE(R) over the rows in blocks of 6, then 4, then 1; the tile
 * reads its first row from r. */
#define ATTN_FOR_ROWS(TILE)                                                                        \
  do {                                                                                             \
    int64_t r = 0;                                                                                 \
    for (; r + 6 <= rows; r += 6)                                                                  \
      TILE(6);                                                                                     \
    for (; r + 4 <= rows; r += 4)                                                                  \
      TILE(4);                                                                                     \
    for (; r < rows; r++)                                                                          \
      TILE(1);                                                                                     \
  } while (0)

/* S[r, j] = scale * sum_d Q[r, d] K[j, d]     r < rows, j < n (row stride lds)
 * K in panels (attn_pack_kp) from the panel of key 0. R rows by one panel's
 * 16 keys: 2R accumulators; a ragged last panel stores its first n % 16. */
#define ATTN_SCORE_TILE(R)                                                                         \
  do {                                                                                             \
    __m256 acc[R][2];                                                                              \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) acc[i][0] = acc[i][1] =                    \
        _mm256_setzero_ps();                                                                       \
    const float *kpan = kp + j0 * dh;                                                              \
    for (int64_t d = 0; d < dh; d++) {                                                             \
      __m256 k0 = _mm256_loadu_ps(kpan + d * 16), k1 = _mm256_loadu_ps(kpan + d * 16 + 8);         \
      _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                                        \
        __m256 qb = _mm256_broadcast_ss(q + (r + i) * ldq + d);                                    \
        acc[i][0] = _mm256_fmadd_ps(qb, k0, acc[i][0]);                                            \
        acc[i][1] = _mm256_fmadd_ps(qb, k1, acc[i][1]);                                            \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++)                                            \
        _Pragma("GCC unroll 2") for (int c = 0; c < 2; c++) {                                      \
      int64_t col = j0 + 8 * c;                                                                    \
      __m256 v = _mm256_mul_ps(acc[i][c], vscale);                                                 \
      if (col + 8 <= n)                                                                            \
        _mm256_storeu_ps(sc + (r + i) * lds + col, v);                                             \
      else if (col < n)                                                                            \
        _mm256_maskstore_ps(sc + (r + i) * lds + col, attn_lanes(n - col), v);                     \
    }                                                                                              \
  } while (0)

ATTN_AVX2 static void attn_scores_avx2(int64_t rows, int64_t n, int64_t dh, float scale,
                                       const float *q, int64_t ldq, const float *kp, float *sc,
                                       int64_t lds) {
  __m256 vscale = _mm256_set1_ps(scale);
  for (int64_t j0 = 0; j0 < n; j0 += 16)
    ATTN_FOR_ROWS(ATTN_SCORE_TILE);
}

/* s[x] = scale * q . k_x for n keys of one query row, K read in place
 * (rows ldk apart): per key one 8-lane FMA chain over dh (a masked last
 * chunk), summed across lanes. */
ATTN_AVX2 static void attn_scores_row_avx2(int64_t n, int64_t dh, float scale, const float *q,
                                           const float *k, int64_t ldk, float *s) {
  const int64_t full = dh - dh % 8;
  const __m256i tail = attn_lanes(dh - full);
  for (int64_t x = 0; x < n; x++) {
    const float *kx = k + x * ldk;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t d = 0; d < full; d += 8)
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(kx + d), acc);
    if (full < dh)
      acc = _mm256_fmadd_ps(_mm256_maskload_ps(q + full, tail), _mm256_maskload_ps(kx + full, tail),
                            acc);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    s[x] = scale * _mm_cvtss_f32(h);
  }
}

/* O[r, c] = (cs ? O[r, c] cs[r] : 0) + sum_{x < n} P[r, x] V[x, c]
 *   r < rows, c < dv (dv a multiple of 8), P's row stride ldp.
 * V's element (x, c) is at v + (c / 16) pstride + x vstride + c % 16: the
 * packed panels (pstride 16 tk, vstride 16) or the caller's rows (pstride
 * 16, vstride ldv). R rows by 16 columns (8 at a ragged end). */
#define ATTN_MIX_TILE(R, C)                                                                        \
  do {                                                                                             \
    __m256 acc[R][C];                                                                              \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                                          \
      __m256 ci = cs ? _mm256_set1_ps(cs[r + i]) : _mm256_setzero_ps();                            \
      _Pragma("GCC unroll 2") for (int c = 0; c < C; c++) acc[i][c] =                              \
          cs ? _mm256_mul_ps(_mm256_loadu_ps(o + (r + i) * ldo + c0 + 8 * c), ci)                  \
             : _mm256_setzero_ps();                                                                \
    }                                                                                              \
    const float *vpan = v + c0 / 16 * pstride;                                                     \
    for (int64_t x = 0; x < n; x++) {                                                              \
      __m256 vv[C];                                                                                \
      _Pragma("GCC unroll 2") for (int c = 0; c < C; c++) vv[c] =                                  \
          _mm256_loadu_ps(vpan + x * vstride + 8 * c);                                             \
      _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                                        \
        __m256 pb = _mm256_broadcast_ss(p + (r + i) * ldp + x);                                    \
        _Pragma("GCC unroll 2") for (int c = 0; c < C; c++) acc[i][c] =                            \
            _mm256_fmadd_ps(pb, vv[c], acc[i][c]);                                                 \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++)                                            \
        _Pragma("GCC unroll 2") for (int c = 0; c < C; c++)                                        \
            _mm256_storeu_ps(o + (r + i) * ldo + c0 + 8 * c, acc[i][c]);                           \
  } while (0)
#define ATTN_MIX_TILE16(R) ATTN_MIX_TILE(R, 2)
#define ATTN_MIX_TILE8(R) ATTN_MIX_TILE(R, 1)

ATTN_AVX2 static void attn_mix_avx2(int64_t rows, int64_t n, int64_t dv, const float *p,
                                    int64_t ldp, const float *v, int64_t pstride,
                                    int64_t vstride, float *o, int64_t ldo, const float *cs) {
  int64_t c0 = 0;
  for (; c0 + 16 <= dv; c0 += 16)
    ATTN_FOR_ROWS(ATTN_MIX_TILE16);
  if (c0 < dv)
    ATTN_FOR_ROWS(ATTN_MIX_TILE8);
}

/* online_rows_base's steps (below) on vectors (attn_rowmax_SUFFIX, attn_exp_sum_SUFFIX),
 * rows lds apart. */
#define ATTN_DEFINE_ONLINE(SUFFIX, ATTR)                                                           \
  ATTR static void online_rows_##SUFFIX(float *restrict s, int64_t rows, int64_t n, int64_t lds,   \
                                        float *restrict m, float *restrict l,                      \
                                        float *restrict c) {                                       \
    for (int64_t r = 0; r < rows; r++) {                                                           \
      float *row = s + r * lds;                                                                    \
      float mx = isnan(row[0]) ? row[0] : attn_rowmax_##SUFFIX(row, n, m[r]);                      \
      float cr = m[r] == -INFINITY ? 0.0f : attn_exp_avx2(m[r] - mx);                              \
      l[r] = l[r] * cr + attn_exp_sum_##SUFFIX(row, n, mx);                                        \
      m[r] = mx;                                                                                   \
      c[r] = cr;                                                                                   \
    }                                                                                              \
  }
ATTN_DEFINE_ONLINE(avx2, ATTN_AVX2)

#ifdef __x86_64__
/* The same products with AVX-512F, where the GEMM runs its AVX-512 set
 * (rt_gemm_lanes() == 16): one K or V panel is one register, and 32
 * registers take bigger tiles (scores 8 rows x 48 keys, the mix 6 rows x 64
 * columns: 24 accumulators), so fewer loads per FMA. */
#define ATTN_AVX512_OK 1
#define ATTN_AVX512 __attribute__((target("avx512f,avx2,fma")))

/* Runs TILE(R, C) over the rows in blocks of R0, then R1, then 1. */
#define ATTN_FOR_ROWS3(TILE, R0, R1, C)                                                            \
  do {                                                                                             \
    int64_t r = 0;                                                                                 \
    for (; r + R0 <= rows; r += R0)                                                                \
      TILE(R0, C);                                                                                 \
    for (; r + R1 <= rows; r += R1)                                                                \
      TILE(R1, C);                                                                                 \
    for (; r < rows; r++)                                                                          \
      TILE(1, C);                                                                                  \
  } while (0)

/* R rows x C K panels (16 keys each) of scores from panel j0 / 16. */
#define ATTN_SCORE_TILE512(R, C)                                                                   \
  do {                                                                                             \
    __m512 acc[R][C];                                                                              \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++)                                            \
        _Pragma("GCC unroll 3") for (int c = 0; c < C; c++) acc[i][c] = _mm512_setzero_ps();       \
    const float *kpan = kp + j0 * dh;                                                              \
    for (int64_t d = 0; d < dh; d++) {                                                             \
      __m512 kv[C];                                                                                \
      _Pragma("GCC unroll 3") for (int c = 0; c < C; c++) kv[c] =                                  \
          _mm512_loadu_ps(kpan + c * 16 * dh + d * 16);                                            \
      _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                                        \
        __m512 qb = _mm512_set1_ps(q[(r + i) * ldq + d]);                                          \
        _Pragma("GCC unroll 3") for (int c = 0; c < C; c++) acc[i][c] =                            \
            _mm512_fmadd_ps(qb, kv[c], acc[i][c]);                                                 \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++)                                            \
        _Pragma("GCC unroll 3") for (int c = 0; c < C; c++) {                                      \
      int64_t col = j0 + 16 * c;                                                                   \
      __m512 v = _mm512_mul_ps(acc[i][c], vscale);                                                 \
      if (col + 16 <= n)                                                                           \
        _mm512_storeu_ps(sc + (r + i) * lds + col, v);                                             \
      else if (col < n)                                                                            \
        _mm512_mask_storeu_ps(sc + (r + i) * lds + col, (__mmask16)((1u << (n - col)) - 1), v);    \
    }                                                                                              \
  } while (0)

ATTN_AVX512 static void attn_scores_avx512(int64_t rows, int64_t n, int64_t dh, float scale,
                                           const float *q, int64_t ldq, const float *kp,
                                           float *sc, int64_t lds) {
  __m512 vscale = _mm512_set1_ps(scale);
  int64_t j0 = 0;
  for (; j0 + 48 <= n; j0 += 48)
    ATTN_FOR_ROWS3(ATTN_SCORE_TILE512, 8, 4, 3);
  for (; j0 < n; j0 += 16)
    ATTN_FOR_ROWS3(ATTN_SCORE_TILE512, 8, 4, 1);
}

/* attn_scores_row_avx2 on 16 lanes. */
ATTN_AVX512 static void attn_scores_row_avx512(int64_t n, int64_t dh, float scale, const float *q,
                                               const float *k, int64_t ldk, float *s) {
  const int64_t full = dh - dh % 16;
  const __mmask16 tail = (__mmask16)((1u << (dh - full)) - 1);
  for (int64_t x = 0; x < n; x++) {
    const float *kx = k + x * ldk;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t d = 0; d < full; d += 16)
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), _mm512_loadu_ps(kx + d), acc);
    if (full < dh)
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, q + full),
                            _mm512_maskz_loadu_ps(tail, kx + full), acc);
    s[x] = scale * _mm512_reduce_add_ps(acc);
  }
}

/* R rows x C V panels (16 columns each, from column c0; the last may be a
 * ragged 8: `last` masks its loads and stores). V's element (x, c) as in
 * attn_mix_avx2. */
#define ATTN_MIX_TILE512(R, C)                                                                     \
  do {                                                                                             \
    __m512 acc[R][C];                                                                              \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                                          \
      __m512 ci = cs ? _mm512_set1_ps(cs[r + i]) : _mm512_setzero_ps();                            \
      _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) acc[i][c] =                              \
          cs ? _mm512_mul_ps(_mm512_maskz_loadu_ps(c == C - 1 ? last : 0xFFFF,                     \
                                                   o + (r + i) * ldo + c0 + 16 * c),               \
                             ci)                                                                   \
             : _mm512_setzero_ps();                                                                \
    }                                                                                              \
    for (int64_t x = 0; x < n; x++) {                                                              \
      __m512 vv[C];                                                                                \
      _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) vv[c] = _mm512_maskz_loadu_ps(           \
          c == C - 1 ? last : 0xFFFF, v + (c0 / 16 + c) * pstride + x * vstride);                  \
      _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                                        \
        __m512 pb = _mm512_set1_ps(p[(r + i) * ldp + x]);                                          \
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) acc[i][c] =                            \
            _mm512_fmadd_ps(pb, vv[c], acc[i][c]);                                                 \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++)                                            \
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) _mm512_mask_storeu_ps(                 \
            o + (r + i) * ldo + c0 + 16 * c, c == C - 1 ? last : 0xFFFF, acc[i][c]);               \
  } while (0)

ATTN_AVX512 static void attn_mix_avx512(int64_t rows, int64_t n, int64_t dv, const float *p,
                                        int64_t ldp, const float *v, int64_t pstride,
                                        int64_t vstride, float *o, int64_t ldo,
                                        const float *cs) {
  int64_t c0 = 0;
  __mmask16 last = 0xFFFF;
  for (; c0 + 64 <= dv; c0 += 64)
    ATTN_FOR_ROWS3(ATTN_MIX_TILE512, 6, 4, 4);
  for (; c0 + 32 <= dv; c0 += 32)
    ATTN_FOR_ROWS3(ATTN_MIX_TILE512, 6, 4, 2);
  for (; c0 < dv; c0 += 16) {
    last = dv - c0 >= 16 ? 0xFFFF : (__mmask16)((1u << (dv - c0)) - 1);
    ATTN_FOR_ROWS3(ATTN_MIX_TILE512, 6, 4, 1);
  }
}

/* attn_exp8 on 16 lanes: the same steps and constants, the same values. */
ATTN_AVX512 static inline __m512 attn_exp16(__m512 x) {
  const __m512 shift = _mm512_set1_ps(12582912.0f);
  __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), shift);
  __m512 n = _mm512_sub_ps(t, shift);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  __m512i e = _mm512_slli_epi32(
      _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(0x4B400000)), 23);
  __m512 y = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), e)); /* * 2^n */
  y = _mm512_maskz_mov_ps((__mmask16)~_mm512_cmp_ps_mask(x, _mm512_set1_ps(-86.0f), _CMP_LT_OQ),
                          y);                                              /* 0 */
  return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x); /* NaN */
}

/* attn_rowmax_avx2 and attn_exp_sum_avx2 on 16 lanes */
ATTN_AVX512 static float attn_rowmax_avx512(const float *row, int64_t n, float from) {
  int64_t full = n - n % 16, x;
  float mx = from > row[0] ? from : row[0];
  if (full) {
    __m512 vm = _mm512_loadu_ps(row);
    for (x = 16; x < full; x += 16)
      vm = _mm512_max_ps(vm, _mm512_loadu_ps(row + x));
    float h = _mm512_reduce_max_ps(vm);
    mx = h > mx ? h : mx;
  }
  for (x = full; x < n; x++)
    mx = row[x] > mx ? row[x] : mx;
  return mx;
}

ATTN_AVX512 static float attn_exp_sum_avx512(float *row, int64_t n, float mx) {
  int64_t full = n - n % 16, x;
  __m512 vmx = _mm512_set1_ps(mx), vs = _mm512_setzero_ps();
  for (x = 0; x < full; x += 16) {
    __m512 e = attn_exp16(_mm512_sub_ps(_mm512_loadu_ps(row + x), vmx));
    _mm512_storeu_ps(row + x, e);
    vs = _mm512_add_ps(vs, e);
  }
  float sum = _mm512_reduce_add_ps(vs);
  for (x = full; x < n; x++) {
    row[x] = attn_exp_avx2(row[x] - mx);
    sum += row[x];
  }
  return sum;
}

/* online_rows_avx2 on 16 lanes */
ATTN_DEFINE_ONLINE(avx512, ATTN_AVX512)
#endif
#endif

static void softmax_row(float *row, int64_t tk, const uint8_t *m, int lanes) {
  (void)lanes; /* only the x86 paths ask */
#ifdef ATTN_X86
  if (lanes >= 8) {
    softmax_row_avx2(row, tk, m);
    return;
  }
#endif
  softmax_row_base(row, tk, m);
}

/* s[r, :] (rows of tk floats, contiguous) = softmax(masked s[r, :]) for the
 * query rows t0 .. t0+rows of batch element bi. tk >= 1. */
static void softmax_rows(const AttnJob *j, int64_t bi, int64_t t0, float *s, int64_t rows) {
  for (int64_t r = 0; r < rows; r++)
    softmax_row(s + r * j->tk, j->tk, mask_row(j, bi, t0 + r), j->lanes);
}

/* out row of query t, head hd = softmax(scores) v with an online softmax:
 * the running max mx and sum l; when a score beats mx, what was summed so
 * far is rescaled by exp(old mx - new mx). Needs no memory. tk >= 1. */
static void attn_row_streaming(const AttnJob *j, int64_t bi, int64_t hd, int64_t t) {
  int64_t ldo = j->h * j->dv;
  const float *qr = j->q + (bi * j->tq + t) * j->ldq + hd * j->dh;
  float *o = j->out + (bi * j->tq + t) * ldo + hd * j->dv;
  const uint8_t *m = mask_row(j, bi, t);
  for (int64_t c = 0; c < j->dv; c++)
    o[c] = 0;
  float mx = -INFINITY;
  double l = 0;
  for (int64_t x = 0; x < j->tk; x++) {
    const float *kr = j->k + bi * j->k_bstride + x * j->ldk + hd * j->dh;
    float sc = 0;
    for (int64_t d = 0; d < j->dh; d++)
      sc += qr[d] * kr[d];
    sc *= j->scale;
    if (m && !m[x])
      sc = ATTN_MASKED_SCORE;
    if (sc > mx) { /* (from -inf the rescale factor is 0, and o and l are 0) */
      float c = expf(mx - sc);
      l *= c;
      for (int64_t e = 0; e < j->dv; e++)
        o[e] *= c;
      mx = sc;
    }
    float e = expf(sc - mx);
    l += e;
    const float *vr = j->v + bi * j->v_bstride + x * j->ldv + hd * j->dv;
    for (int64_t c = 0; c < j->dv; c++)
      o[c] += e * vr[c];
  }
  float inv = (float)(1.0 / l);
  for (int64_t c = 0; c < j->dv; c++)
    o[c] *= inv;
}

/* The AVX2 register-tiled products take heads whose dv is whole vectors,
 * on a CPU with AVX2+FMA, when the caller's policy allows them at this key
 * length (tk <= max_tk_tiled: the compiler chooses it, see
 * passes/lower_loops.c). */
static int attn_tiled(int64_t tk, int64_t dv, int64_t max_tk_tiled) {
#ifdef ATTN_X86
  return dv % 8 == 0 && tk <= max_tk_tiled && rt_gemm_lanes() >= 8;
#else
  (void)tk, (void)dv, (void)max_tk_tiled;
  return 0;
#endif
}

#ifdef ATTN_X86
/* The products on the widest vectors the job may use. */
static void attn_scores(const AttnJob *j, int64_t rows, int64_t n, const float *q,
                        const float *kp, float *s, int64_t lds) {
#ifdef ATTN_AVX512_OK
  if (j->lanes >= 16) {
    attn_scores_avx512(rows, n, j->dh, j->scale, q, j->ldq, kp, s, lds);
    return;
  }
#endif
  attn_scores_avx2(rows, n, j->dh, j->scale, q, j->ldq, kp, s, lds);
}

/* One query row's scores from K in place (the direct form). */
static void attn_scores_row(const AttnJob *j, int64_t n, const float *q, const float *k,
                            float *s) {
#ifdef ATTN_AVX512_OK
  if (j->lanes >= 16) {
    attn_scores_row_avx512(n, j->dh, j->scale, q, k, j->ldk, s);
    return;
  }
#endif
  attn_scores_row_avx2(n, j->dh, j->scale, q, k, j->ldk, s);
}

static void attn_mix(const AttnJob *j, int64_t rows, int64_t n, const float *p, int64_t ldp,
                     const float *v, int64_t pstride, int64_t vstride, float *o,
                     const float *cs) {
#ifdef ATTN_AVX512_OK
  if (j->lanes >= 16) {
    attn_mix_avx512(rows, n, j->dv, p, ldp, v, pstride, vstride, o, j->h * j->dv, cs);
    return;
  }
#endif
  attn_mix_avx2(rows, n, j->dv, p, ldp, v, pstride, vstride, o, j->h * j->dv, cs);
}
#endif

/* K and V of one head, packed for the AVX2 products (attn_pack_kp,
 * attn_pack_vp); bh is the head's batch * h + head, -1 before any. */
typedef struct AttnHead {
  int64_t bh;
  float *kp, *vp; /* vp NULL: the mix reads V in place */
} AttnHead;

/* One task: query rows t0 .. t0+rows of head hd of batch element bi; s
 * holds rows x tk scores when they do not go to probs. */
static void attn_block(const AttnJob *j, const AttnHead *hc, float *s, int64_t bi, int64_t hd,
                       int64_t t0, int64_t rows) {
  int64_t ldq = j->ldq, ldk = j->ldk, ldv = j->ldv, ldo = j->h * j->dv;
  if (j->probs)
    s = j->probs + ((bi * j->h + hd) * j->tq + t0) * j->tk;
  const float *q = j->q + (bi * j->tq + t0) * ldq + hd * j->dh;
  const float *k = j->k + bi * j->k_bstride + hd * j->dh;
  const float *v = j->v + bi * j->v_bstride + hd * j->dv;
  float *o = j->out + (bi * j->tq + t0) * ldo + hd * j->dv;
  (void)hc;
#ifdef ATTN_X86
  if (j->tiled) {
    if (j->direct)
      attn_scores_row(j, j->tk, q, k, s);
    else
      attn_scores(j, rows, j->tk, q, hc->kp, s, j->tk);
    softmax_rows(j, bi, t0, s, rows);
    if (hc->vp)
      attn_mix(j, rows, j->tk, s, j->tk, hc->vp, 16 * j->tk, 16, o, NULL);
    else
      attn_mix(j, rows, j->tk, s, j->tk, v, 16, ldv, o, NULL);
    return;
  }
#endif
  /* S[rows, tk] = scale * Q_blk[rows, dh] K_h[tk, dh]^T */
  rt_sgemm(0, 1, rows, j->tk, j->dh, j->scale, q, ldq, k, ldk, 0.0f, s, j->tk);
  softmax_rows(j, bi, t0, s, rows);
  /* O_blk[rows, dv] = P[rows, tk] V_h[tk, dv] */
  rt_sgemm(0, 0, rows, j->dv, j->tk, 1.0f, s, j->tk, v, ldv, 0.0f, o, ldo);
}

/* sr[x] = -1e9 where mr[x] is 0, x < n */
ATTN_VEC static void mask_scores(float *restrict sr, const uint8_t *restrict mr, int64_t n) {
  for (int64_t x = 0; x < n; x++) {
    float v = sr[x]; /* loaded either way: no conditional load */
    sr[x] = mr[x] ? v : ATTN_MASKED_SCORE;
  }
}

/* Online-softmax update of one block of scores s[rows, n] (row stride
 * lds), already masked: per row r, m' = max(m[r], max_j s[r, j]), s[r, j] =
 * exp(s[r, j] - m'), l[r] = l[r] exp(m[r] - m') + sum_j s[r, j], m[r] = m';
 * c[r] = exp(m[r] - m') is what the output row must be multiplied by
 * before this block's weighted sum is added (0 on the first block, whose m
 * is -inf). A NaN score makes its row NaN, as in the reference. */
ATTN_VEC static void online_rows_base(float *restrict s, int64_t rows, int64_t n, int64_t lds,
                                      float *restrict m, float *restrict l, float *restrict c) {
  int64_t full = n - n % ATTN_LANES;
  for (int64_t r = 0; r < rows; r++) {
    float *row = s + r * lds;
    float lane[ATTN_LANES];
    for (int q = 0; q < ATTN_LANES; q++)
      lane[q] = row[0];
    for (int64_t x = 0; x < full; x += ATTN_LANES)
      for (int q = 0; q < ATTN_LANES; q++)
        lane[q] = row[x + q] > lane[q] ? row[x + q] : lane[q];
    float mx = m[r] > row[0] ? m[r] : row[0];
    for (int q = 0; q < ATTN_LANES; q++)
      mx = lane[q] > mx ? lane[q] : mx;
    for (int64_t x = full; x < n; x++)
      mx = row[x] > mx ? row[x] : mx;
    if (isnan(row[0]))
      mx = row[0];
    float cr = m[r] == -INFINITY ? 0.0f : attn_exp_base(m[r] - mx);
    for (int q = 0; q < ATTN_LANES; q++)
      lane[q] = 0;
    for (int64_t x = 0; x < full; x += ATTN_LANES)
      for (int q = 0; q < ATTN_LANES; q++) {
        float e = attn_exp_base(row[x + q] - mx);
        row[x + q] = e;
        lane[q] += e;
      }
    double sum = 0;
    for (int q = 0; q < ATTN_LANES; q++)
      sum += lane[q];
    for (int64_t x = full; x < n; x++) {
      row[x] = attn_exp_base(row[x] - mx);
      sum += row[x];
    }
    l[r] = l[r] * cr + (float)sum;
    m[r] = mx;
    c[r] = cr;
  }
}

static void online_rows(float *s, int64_t rows, int64_t n, int64_t lds, float *m, float *l,
                        float *c, int lanes) {
  (void)lanes;
#ifdef ATTN_AVX512_OK
  if (lanes >= 16) {
    online_rows_avx512(s, rows, n, lds, m, l, c);
    return;
  }
#endif
#ifdef ATTN_X86
  if (lanes >= 8) {
    online_rows_avx2(s, rows, n, lds, m, l, c);
    return;
  }
#endif
  online_rows_base(s, rows, n, lds, m, l, c);
}

/* Keys per block of the flash form: block_k, rounded up to whole K panels
 * (16 keys) for the AVX2 products, at most tk. */
static int64_t flash_bk(const AttnJob *j) {
  int64_t bk = j->tiled ? (j->block_k + 15) / 16 * 16 : j->block_k;
  return bk < j->tk ? bk : j->tk;
}

/* The keys a flash task must sweep: past the last key any of its rows
 * sees, every score is masked for every row, so its weight is exp(-1e9 -
 * m) = 0 exactly and it changes neither a row's max, nor its sum, nor its
 * output (O * exp(0) + 0 V). A causal mask's first query block of 64
 * rows at S = 128 needs half the keys. Rounded up to ATTN_LANES keys so
 * the online softmax sums the same lanes in the same order (the dropped
 * zeros added nothing): the same bits as sweeping all tk. A row with no
 * key at all attends uniformly over all tk keys (mask_scores' -1e9), so
 * then nothing is dropped. */
static int64_t flash_keys(const AttnJob *j, int64_t bi, int64_t t0, int64_t rows) {
  if (!j->mask)
    return j->tk;
  int64_t need = 0;
  for (int64_t r = 0; r < rows; r++) {
    const uint8_t *mr = mask_row(j, bi, t0 + r);
    int64_t x = j->tk;
    while (x > 0 && !mr[x - 1])
      x--;
    if (x == 0) /* no key: uniform over all */
      return j->tk;
    need = x > need ? x : need;
    if (j->mask_q == 1) /* one mask row for every query */
      break;
  }
  need = (need + ATTN_LANES - 1) / ATTN_LANES * ATTN_LANES;
  return need < j->tk ? need : j->tk;
}

/* Query rows t0 .. t0+rows of head hd of batch element bi, the keys in
 * blocks of flash_bk (see rt_attention_flash) up to tk (their flash_keys);
 * s holds rows x bk scores, then m, l and c (rows each). */
static void attn_rows_flash(const AttnJob *j, const AttnHead *hc, float *s, int64_t bi,
                            int64_t hd, int64_t t0, int64_t rows, int64_t tk) {
  int64_t ldq = j->ldq, ldk = j->ldk, ldv = j->ldv, ldo = j->h * j->dv;
  int64_t bk = flash_bk(j);
  float *m = s + rows * bk, *l = m + rows, *c = l + rows;
  const float *q = j->q + (bi * j->tq + t0) * ldq + hd * j->dh;
  float *o = j->out + (bi * j->tq + t0) * ldo + hd * j->dv;
  for (int64_t r = 0; r < rows; r++) {
    m[r] = -INFINITY;
    l[r] = 0;
  }
  (void)hc;
  for (int64_t x0 = 0; x0 < tk; x0 += bk) {
    int64_t n = tk - x0 < bk ? tk - x0 : bk;
    const float *k = j->k + bi * j->k_bstride + x0 * ldk + hd * j->dh;
    const float *v = j->v + bi * j->v_bstride + x0 * ldv + hd * j->dv;
    /* S[rows, n] = scale * Q_blk K_j^T */
#ifdef ATTN_X86
    if (j->tiled && j->direct)
      attn_scores_row(j, n, q, k, s);
    else if (j->tiled)
      attn_scores(j, rows, n, q, hc->kp + x0 * j->dh, s, bk);
    else
#endif
      rt_sgemm(0, 1, rows, n, j->dh, j->scale, q, ldq, k, ldk, 0.0f, s, bk);
    if (j->mask)
      for (int64_t r = 0; r < rows; r++) {
        const uint8_t *mr = mask_row(j, bi, t0 + r) + x0;
        if (memchr(mr, 0, (size_t)n)) /* a block the row sees whole needs nothing */
          mask_scores(s + r * bk, mr, n);
      }
    online_rows(s, rows, n, bk, m, l, c, j->lanes);
    /* O = O * c + P V_j (the first block: O = P V_j) */
#ifdef ATTN_X86
    if (j->tiled) {
      const float *cs = x0 > 0 ? c : NULL;
      if (hc->vp)
        attn_mix(j, rows, n, s, bk, hc->vp + x0 * 16, 16 * j->tk, 16, o, cs);
      else
        attn_mix(j, rows, n, s, bk, v, 16, ldv, o, cs);
      continue;
    }
#endif
    if (x0 > 0)
      for (int64_t r = 0; r < rows; r++)
        for (int64_t e = 0; e < j->dv; e++)
          o[r * ldo + e] *= c[r];
    rt_sgemm(0, 0, rows, j->dv, n, 1.0f, s, bk, v, ldv, x0 > 0 ? 1.0f : 0.0f, o, ldo);
  }
  for (int64_t r = 0; r < rows; r++) {
    float inv = (float)(1.0 / (double)l[r]);
    for (int64_t e = 0; e < j->dv; e++)
      o[r * ldo + e] *= inv;
  }
}

/* Rows of a block below which no split goes (two 16-key lanes' worth). */
#define FLASH_SPLIT_ROWS 32

/* Query rows t0 .. t0+rows of head hd of batch element bi, whose keys
 * reach tk (flash_keys). Where the first half reaches fewer keys (a causal
 * mask: row t sees keys 0..t), the halves run apart, each sweeping only
 * its own reach, down to FLASH_SPLIT_ROWS rows; the second half then
 * reaches tk itself (the whole's reach is the larger of the halves'): a
 * 64-row block at the start of a causal S = 128 sweeps 32 + 64 keys for
 * its halves instead of 64 for both. A row's result does not depend on
 * which rows share its block (scores, softmax and mix go row by row; keys
 * past a row's reach add exact zeros, see flash_keys), so this changes no
 * bits. No mask, or one where every row reaches as far (padding), keeps
 * the block whole. */
static void attn_split_flash(const AttnJob *j, const AttnHead *hc, float *s, int64_t bi,
                             int64_t hd, int64_t t0, int64_t rows, int64_t tk) {
  if (rows >= 2 * FLASH_SPLIT_ROWS) {
    int64_t half = rows / 2, first = flash_keys(j, bi, t0, half);
    if (first < tk) {
      attn_split_flash(j, hc, s, bi, hd, t0, half, first);
      attn_split_flash(j, hc, s, bi, hd, t0 + half, rows - half, tk);
      return;
    }
  }
  attn_rows_flash(j, hc, s, bi, hd, t0, rows, tk);
}

/* One flash task: query rows t0 .. t0+rows of head hd of batch element bi. */
static void attn_block_flash(const AttnJob *j, const AttnHead *hc, float *s, int64_t bi,
                             int64_t hd, int64_t t0, int64_t rows) {
  attn_split_flash(j, hc, s, bi, hd, t0, rows, flash_keys(j, bi, t0, rows));
}

/* Floats of one thread's scratch: the packed K and V of a head (AVX2
 * products), then one task's scores (and the flash form's m, l, c). */
static int64_t attn_scratch_floats(const AttnJob *j, int64_t *kp_floats, int64_t *vp_floats) {
  int64_t tk16 = (j->tk + 15) / 16 * 16, dv16 = (j->dv + 15) / 16 * 16;
  *kp_floats = j->tiled && !j->direct ? j->dh * tk16 : 0;
  *vp_floats = j->tiled && j->pack_v ? dv16 * j->tk : 0;
  int64_t task = j->block_k ? j->block_q * flash_bk(j) + 3 * j->block_q
                            : (j->probs ? 0 : j->block_q * j->tk);
  return *kp_floats + *vp_floats + task + 1;
}

static void attn_task(void *ctx, int64_t lo, int64_t hi) {
  const AttnJob *j = ctx;
  int64_t kp_floats, vp_floats;
  float *scratch = scratch_get(attn_scratch_floats(j, &kp_floats, &vp_floats));
  AttnHead hc = {.bh = -1, .kp = scratch, .vp = vp_floats && scratch ? scratch + kp_floats : NULL};
  float *s = scratch ? scratch + kp_floats + vp_floats : NULL;
  for (int64_t task = lo; task < hi; task++) {
    int64_t block = task % j->n_blocks, bh = task / j->n_blocks;
    int64_t bi = bh / j->h, hd = bh % j->h, t0 = block * j->block_q;
    int64_t rows = j->tq - t0 < j->block_q ? j->tq - t0 : j->block_q;
    if (!scratch) {
      for (int64_t r = 0; r < rows; r++)
        attn_row_streaming(j, bi, hd, t0 + r);
      continue;
    }
#ifdef ATTN_X86
    if (j->tiled && !j->direct && bh != hc.bh) { /* a new head: pack its K (and V) once */
      attn_pack_kp(j->tk, j->dh, j->k + bi * j->k_bstride + hd * j->dh, j->ldk, hc.kp);
      if (hc.vp)
        attn_pack_vp(j->tk, j->dv, j->v + bi * j->v_bstride + hd * j->dv, j->ldv, hc.vp);
      hc.bh = bh;
    }
#endif
    if (j->block_k)
      attn_block_flash(j, &hc, s, bi, hd, t0, rows);
    else
      attn_block(j, &hc, s, bi, hd, t0, rows);
  }
}

/* With no keys every output is an empty sum: zeros. */
static void zero_out(int64_t b, int64_t h, int64_t tq, int64_t dv, float *out) {
  int64_t n = b * tq * h * dv;
  if (n > 0)
    memset(out, 0, (size_t)n * sizeof *out);
}

void rt_attention(RtPool *pool, int64_t b, int64_t h, int64_t tq, int64_t tk, int64_t dh,
                  int64_t dv, float scale, const float *q, int64_t ldq, const float *k,
                  int64_t ldk, const float *v, int64_t ldv, int64_t k_bstride,
                  int64_t v_bstride, const uint8_t *mask, int64_t mask_b, int64_t mask_q,
                  float *out, float *probs, int64_t block_q, int64_t max_tk_tiled) {
  if (b <= 0 || h <= 0 || tq <= 0)
    return;
  if (tk <= 0) {
    zero_out(b, h, tq, dv, out);
    return;
  }
  if (block_q < 1)
    block_q = 1;
  int64_t n_blocks = (tq + block_q - 1) / block_q;
  AttnJob j = {.b = b, .h = h, .tq = tq, .tk = tk, .dh = dh, .dv = dv,
               .block_q = block_q, .n_blocks = n_blocks,
               .tiled = attn_tiled(tk, dv, max_tk_tiled), .pack_v = n_blocks > 1,
               .direct = tq == 1,
               .lanes = rt_gemm_lanes(), .scale = scale,
               .q = q, .k = k, .v = v, .ldq = ldq, .ldk = ldk, .ldv = ldv,
               .k_bstride = k_bstride, .v_bstride = v_bstride,
               .mask = mask, .mask_b = mask_b, .mask_q = mask_q, .out = out, .probs = probs};
  rt_pool_parallel_for(pool, b * h * n_blocks, 1, attn_task, &j);
}

void rt_attention_flash(RtPool *pool, int64_t b, int64_t h, int64_t tq, int64_t tk, int64_t dh,
                        int64_t dv, float scale, const float *q, int64_t ldq, const float *k,
                        int64_t ldk, const float *v, int64_t ldv, int64_t k_bstride,
                        int64_t v_bstride, const uint8_t *mask, int64_t mask_b, int64_t mask_q,
                        float *out, int64_t block_q, int64_t block_k) {
  if (b <= 0 || h <= 0 || tq <= 0)
    return;
  if (tk <= 0) {
    zero_out(b, h, tq, dv, out);
    return;
  }
  if (block_q < 1)
    block_q = 1;
  if (block_k < 1)
    block_k = 1;
  int64_t n_blocks = (tq + block_q - 1) / block_q;
  /* a key block's K^T and V always fit the AVX2 products' budget */
  AttnJob j = {.b = b, .h = h, .tq = tq, .tk = tk, .dh = dh, .dv = dv,
               .block_q = block_q, .n_blocks = n_blocks, .block_k = block_k,
               .tiled = attn_tiled(0, dv, 1), .pack_v = n_blocks > 1, .direct = tq == 1,
               .lanes = rt_gemm_lanes(), .scale = scale,
               .q = q, .k = k, .v = v, .ldq = ldq, .ldk = ldk, .ldv = ldv,
               .k_bstride = k_bstride, .v_bstride = v_bstride,
               .mask = mask, .mask_b = mask_b, .mask_q = mask_q, .out = out};
  rt_pool_parallel_for(pool, b * h * n_blocks, 1, attn_task, &j);
}

void rt_attention_streaming(int64_t b, int64_t h, int64_t tq, int64_t tk, int64_t dh,
                            int64_t dv, float scale, const float *q, const float *k,
                            const float *v, const uint8_t *mask, int64_t mask_b,
                            int64_t mask_q, float *out) {
  if (b <= 0 || h <= 0 || tq <= 0)
    return;
  if (tk <= 0) {
    zero_out(b, h, tq, dv, out);
    return;
  }
  AttnJob j = {.b = b, .h = h, .tq = tq, .tk = tk, .dh = dh, .dv = dv, .block_q = tq,
               .n_blocks = 1, .scale = scale, .q = q, .k = k, .v = v,
               .ldq = h * dh, .ldk = h * dh, .ldv = h * dv, .k_bstride = tk * h * dh, .v_bstride = tk * h * dv, .mask = mask,
               .mask_b = mask_b, .mask_q = mask_q, .out = out};
  for (int64_t bi = 0; bi < b; bi++)
    for (int64_t hd = 0; hd < h; hd++)
      for (int64_t t = 0; t < tq; t++)
        attn_row_streaming(&j, bi, hd, t);
}
