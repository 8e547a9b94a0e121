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
 * register tiles, K transposed per task into scratch), which skip BLAS's
 * packing; the softmax has an AVX2 version too. Everything else keeps the
 * portable loops and BLAS. What the CPU can run is decided here (cpuid);
 * which path and how many query rows per task (block_q) are arguments the
 * compiler chooses (passes/lower_loops.c).
 * Tasks are numbered ((bi * h) + hd) * n_blocks + block, so the tasks a
 * thread gets in a row mostly share one head's K and V.
 *
 * Invariants: every task writes only its own rows of its own head's columns
 * of out (and of probs), so tasks never race; S lives in the probs output
 * when there is one, else in the calling thread's scratch buffer (with K's
 * transposed copy after it on the AVX2 path; a pthread
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

/* softmax_row_base's steps on 8 lanes at a time (the scalar tail with the
 * same exp); the masking loop is the same scalar loop, which vectorises. */
ATTN_VEC ATTN_AVX2 static void softmax_row_avx2(float *restrict row, int64_t tk,
                                                const uint8_t *restrict m) {
  int64_t full = tk - tk % 8, x;
  if (m)
    for (x = 0; x < tk; x++) {
      float v = row[x];
      row[x] = m[x] ? v : ATTN_MASKED_SCORE;
    }
  float mx = row[0];
  if (full) {
    __m256 vm = _mm256_loadu_ps(row);
    for (x = 8; x < full; x += 8)
      vm = _mm256_max_ps(vm, _mm256_loadu_ps(row + x));
    mx = attn_hmax8(vm);
  }
  for (x = full; x < tk; x++)
    mx = row[x] > mx ? row[x] : mx;
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
  for (x = full; x < tk; x++) {
    row[x] = attn_exp_avx2(row[x] - mx);
    sum += row[x];
  }
  float inv = 1.0f / sum; /* sum >= 1: the largest term is e^0 */
  __m256 vinv = _mm256_set1_ps(inv);
  for (x = 0; x < full; x += 8)
    _mm256_storeu_ps(row + x, _mm256_mul_ps(_mm256_loadu_ps(row + x), vinv));
  for (x = full; x < tk; x++)
    row[x] *= inv;
}

/* The two products of a block without BLAS: at head dims this small
 * (tiny models: 16; BERT: 64) a BLAS call spends as long packing its
 * operands and scaling C as multiplying (64x128x16 through OpenBLAS: 6.7 us,
 * half of it copies); these read Q, V and the scores in place and K through
 * a transposed copy of the head (kt[d][j], dh x tk8: tk rounded up to 8,
 * the pad zero), with 4 rows x 16 columns of accumulators.
 *
 * S[r, j] = scale * sum_d Q[r, d] K[j, d]     r < rows, j < tk (row stride tk) */
ATTN_AVX2 static void attn_pack_kt(int64_t tk, int64_t dh, const float *k, int64_t ldk, float *kt,
                                   int64_t tk8) {
  int64_t x = 0, dh8 = dh - dh % 8;
  /* 8 keys x 8 dims at a time: an 8x8 transpose in registers */
  for (; x + 8 <= tk; x += 8) {
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
      float *o = kt + d * tk8 + x; /* row d + i of kt gets keys x .. x+7 */
      _mm256_storeu_ps(o + 0 * tk8, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(o + 1 * tk8, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(o + 2 * tk8, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(o + 3 * tk8, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(o + 4 * tk8, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(o + 5 * tk8, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(o + 6 * tk8, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(o + 7 * tk8, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
    for (int64_t d = dh8; d < dh; d++)
      for (int64_t i = 0; i < 8; i++)
        kt[d * tk8 + x + i] = k[(x + i) * ldk + d];
  }
  /* the last keys one by one, then the zero pad up to tk8 */
  for (; x < tk; x++)
    for (int64_t d = 0; d < dh; d++)
      kt[d * tk8 + x] = k[x * ldk + d];
  for (int64_t d = 0; d < dh; d++)
    for (x = tk; x < tk8; x++)
      kt[d * tk8 + x] = 0;
}

/* mask of the first n (0..8) lanes, for the ragged end of a row */
ATTN_AVX2 static inline __m256i attn_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Runs TILE(R, C) over rows x columns [0, jn): blocks of 6 rows (then 4,
 * then 1) by 16 columns (then 8); the tile reads its position from r and
 * from the column variable j. */
#define ATTN_FOR_TILES(TILE, j, jn)                                                                \
  do {                                                                                             \
    int64_t r = 0;                                                                                 \
    for (; r + 6 <= rows; r += 6) {                                                                \
      int64_t j = 0;                                                                               \
      for (; j + 16 <= (jn); j += 16)                                                              \
        TILE(6, 2);                                                                                \
      for (; j < (jn); j += 8)                                                                     \
        TILE(6, 1);                                                                                \
    }                                                                                              \
    for (; r + 4 <= rows; r += 4) {                                                                \
      int64_t j = 0;                                                                               \
      for (; j + 16 <= (jn); j += 16)                                                              \
        TILE(4, 2);                                                                                \
      for (; j < (jn); j += 8)                                                                     \
        TILE(4, 1);                                                                                \
    }                                                                                              \
    for (; r < rows; r++) {                                                                        \
      int64_t j = 0;                                                                               \
      for (; j + 16 <= (jn); j += 16)                                                              \
        TILE(1, 2);                                                                                \
      for (; j < (jn); j += 8)                                                                     \
        TILE(1, 1);                                                                                \
    }                                                                                              \
  } while (0)

/* R (1, 4 or 6) rows of scores, columns j0 .. j0+8*C (C = 1 or 2 vectors). */
#define ATTN_SCORE_TILE(R, C)                                                                      \
  do {                                                                                             \
    __m256 acc[R][C];                                                                              \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++)                                            \
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) acc[i][c] = _mm256_setzero_ps();       \
    for (int64_t d = 0; d < dh; d++) {                                                             \
      __m256 kv[C];                                                                                \
      _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) kv[c] =                                  \
          _mm256_loadu_ps(kt + d * tk8 + j0 + 8 * c);                                              \
      _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                                        \
        __m256 qb = _mm256_broadcast_ss(q + (r + i) * ldq + d);                                    \
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) acc[i][c] =                            \
            _mm256_fmadd_ps(qb, kv[c], acc[i][c]);                                                 \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++)                                            \
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {                                      \
      int64_t col = j0 + 8 * c;                                                                    \
      __m256 v = _mm256_mul_ps(acc[i][c], vscale);                                                 \
      if (col + 8 <= tk)                                                                           \
        _mm256_storeu_ps(sc + (r + i) * tk + col, v);                                              \
      else if (col < tk)                                                                           \
        _mm256_maskstore_ps(sc + (r + i) * tk + col, attn_lanes(tk - col), v);                     \
    }                                                                                              \
  } while (0)

ATTN_AVX2 static void attn_scores_avx2(int64_t rows, int64_t tk, int64_t dh, float scale,
                                       const float *q, int64_t ldq, const float *kt, int64_t tk8,
                                       float *sc) {
  __m256 vscale = _mm256_set1_ps(scale);
  ATTN_FOR_TILES(ATTN_SCORE_TILE, j0, tk8);
}

/* O[r, c] = (acc_in ? O[r, c] : 0) + sum_j P[r, j] V[j, c]
 *   r < rows, c < dv (dv a multiple of 8) */
#define ATTN_MIX_TILE(R, C)                                                                        \
  do {                                                                                             \
    __m256 acc[R][C];                                                                              \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++)                                            \
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) acc[i][c] =                            \
            acc_in ? _mm256_loadu_ps(o + (r + i) * ldo + c0 + 8 * c) : _mm256_setzero_ps();        \
    for (int64_t x = 0; x < tk; x++) {                                                             \
      __m256 vv[C];                                                                                \
      _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) vv[c] =                                  \
          _mm256_loadu_ps(v + x * ldv + c0 + 8 * c);                                               \
      _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                                        \
        __m256 pb = _mm256_broadcast_ss(p + (r + i) * tk + x);                                     \
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) acc[i][c] =                            \
            _mm256_fmadd_ps(pb, vv[c], acc[i][c]);                                                 \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++)                                            \
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++)                                        \
            _mm256_storeu_ps(o + (r + i) * ldo + c0 + 8 * c, acc[i][c]);                           \
  } while (0)

ATTN_AVX2 static void attn_mix_avx2(int64_t rows, int64_t tk, int64_t dv, const float *p,
                                    const float *v, int64_t ldv, float *o, int64_t ldo,
                                    int acc_in) {
  ATTN_FOR_TILES(ATTN_MIX_TILE, c0, dv);
}
#endif

static void softmax_row(float *row, int64_t tk, const uint8_t *m) {
#ifdef ATTN_X86
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
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
    softmax_row(s + r * j->tk, j->tk, mask_row(j, bi, t0 + r));
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
  return dv % 8 == 0 && tk <= max_tk_tiled && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("fma");
#else
  (void)tk, (void)dv, (void)max_tk_tiled;
  return 0;
#endif
}

/* One task: query rows t0 .. t0+rows of head hd of batch element bi. */
static void attn_block(const AttnJob *j, int64_t bi, int64_t hd, int64_t t0, int64_t rows) {
  int64_t ldq = j->ldq, ldk = j->ldk, ldv = j->ldv, ldo = j->h * j->dv;
  int direct = j->tiled;
  int64_t tk8 = (j->tk + 7) / 8 * 8, kt_floats = direct ? j->dh * tk8 : 0;
  /* scratch: the scores (unless they go to probs), then kt */
  float *scratch = scratch_get((j->probs ? 0 : rows * j->tk) + kt_floats + 1);
  float *s = j->probs ? j->probs + ((bi * j->h + hd) * j->tq + t0) * j->tk : scratch;
  if (!scratch) {
    for (int64_t r = 0; r < rows; r++)
      attn_row_streaming(j, bi, hd, t0 + r);
    return;
  }
  const float *q = j->q + (bi * j->tq + t0) * ldq + hd * j->dh;
  const float *k = j->k + bi * j->k_bstride + hd * j->dh;
  const float *v = j->v + bi * j->v_bstride + hd * j->dv;
  float *o = j->out + (bi * j->tq + t0) * ldo + hd * j->dv;
#ifdef ATTN_X86
  if (direct) {
    float *kt = scratch + (j->probs ? 0 : rows * j->tk);
    attn_pack_kt(j->tk, j->dh, k, ldk, kt, tk8);
    attn_scores_avx2(rows, j->tk, j->dh, j->scale, q, ldq, kt, tk8, s);
    softmax_rows(j, bi, t0, s, rows);
    attn_mix_avx2(rows, j->tk, j->dv, s, v, ldv, o, ldo, 0);
    return;
  }
#endif
  /* S[rows, tk] = scale * Q_blk[rows, dh] K_h[tk, dh]^T */
  rt_sgemm(0, 1, rows, j->tk, j->dh, j->scale, q, ldq, k, ldk, 0.0f, s, j->tk);
  softmax_rows(j, bi, t0, s, rows);
  /* O_blk[rows, dv] = P[rows, tk] V_h[tk, dv] */
  rt_sgemm(0, 0, rows, j->dv, j->tk, 1.0f, s, j->tk, v, ldv, 0.0f, o, ldo);
}

/* Online-softmax update of one block of scores s[rows, n] (row stride n),
 * already masked: per row r, m' = max(m[r], max_j s[r, j]), s[r, j] =
 * exp(s[r, j] - m'), l[r] = l[r] exp(m[r] - m') + sum_j s[r, j], m[r] = m';
 * c[r] = exp(m[r] - m') is what the output row must be multiplied by
 * before this block's weighted sum is added (0 on the first block, whose m
 * is -inf). A NaN score makes its row NaN, as in the reference. */
#define ATTN_DEFINE_ONLINE(SUFFIX, ATTR)                                                           \
  ATTR static void online_rows_##SUFFIX(float *restrict s, int64_t rows, int64_t n,                \
                                        float *restrict m, float *restrict l,                      \
                                        float *restrict c) {                                       \
    int64_t full = n - n % ATTN_LANES;                                                             \
    for (int64_t r = 0; r < rows; r++) {                                                           \
      float *row = s + r * n;                                                                      \
      float lane[ATTN_LANES];                                                                      \
      for (int q = 0; q < ATTN_LANES; q++)                                                         \
        lane[q] = row[0];                                                                          \
      for (int64_t x = 0; x < full; x += ATTN_LANES)                                               \
        for (int q = 0; q < ATTN_LANES; q++)                                                       \
          lane[q] = row[x + q] > lane[q] ? row[x + q] : lane[q];                                   \
      float mx = m[r] > row[0] ? m[r] : row[0];                                                    \
      for (int q = 0; q < ATTN_LANES; q++)                                                         \
        mx = lane[q] > mx ? lane[q] : mx;                                                          \
      for (int64_t x = full; x < n; x++)                                                           \
        mx = row[x] > mx ? row[x] : mx;                                                            \
      if (isnan(row[0]))                                                                           \
        mx = row[0];                                                                               \
      float cr = m[r] == -INFINITY ? 0.0f : attn_exp_##SUFFIX(m[r] - mx);                          \
      for (int q = 0; q < ATTN_LANES; q++)                                                         \
        lane[q] = 0;                                                                               \
      for (int64_t x = 0; x < full; x += ATTN_LANES)                                               \
        for (int q = 0; q < ATTN_LANES; q++) {                                                     \
          float e = attn_exp_##SUFFIX(row[x + q] - mx);                                            \
          row[x + q] = e;                                                                          \
          lane[q] += e;                                                                            \
        }                                                                                          \
      double sum = 0;                                                                              \
      for (int q = 0; q < ATTN_LANES; q++)                                                         \
        sum += lane[q];                                                                            \
      for (int64_t x = full; x < n; x++) {                                                         \
        row[x] = attn_exp_##SUFFIX(row[x] - mx);                                                   \
        sum += row[x];                                                                             \
      }                                                                                            \
      l[r] = l[r] * cr + (float)sum;                                                               \
      m[r] = mx;                                                                                   \
      c[r] = cr;                                                                                   \
    }                                                                                              \
  }

ATTN_DEFINE_ONLINE(base, ATTN_VEC)
#ifdef ATTN_X86
ATTN_DEFINE_ONLINE(avx2, ATTN_AVX2)
#endif

static void online_rows(float *s, int64_t rows, int64_t n, float *m, float *l, float *c) {
#ifdef ATTN_X86
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    online_rows_avx2(s, rows, n, m, l, c);
    return;
  }
#endif
  online_rows_base(s, rows, n, m, l, c);
}

/* One flash task: query rows t0 .. t0+rows of head hd of batch element bi,
 * the keys in blocks of block_k (see rt_attention_flash). */
static void attn_block_flash(const AttnJob *j, int64_t bi, int64_t hd, int64_t t0, int64_t rows) {
  int64_t ldq = j->ldq, ldk = j->ldk, ldv = j->ldv, ldo = j->h * j->dv;
  int64_t bk = j->block_k < j->tk ? j->block_k : j->tk, bk8 = (bk + 7) / 8 * 8;
  int direct = j->tiled;
  /* scratch: scores [rows, bk], m, l, c [rows] each, then K_j^T [dh, bk8] */
  float *scratch = scratch_get(rows * bk + 3 * rows + (direct ? j->dh * bk8 : 0) + 1);
  if (!scratch) {
    for (int64_t r = 0; r < rows; r++)
      attn_row_streaming(j, bi, hd, t0 + r);
    return;
  }
  float *s = scratch, *m = s + rows * bk, *l = m + rows, *c = l + rows, *kt = c + rows;
  const float *q = j->q + (bi * j->tq + t0) * ldq + hd * j->dh;
  float *o = j->out + (bi * j->tq + t0) * ldo + hd * j->dv;
  for (int64_t r = 0; r < rows; r++) {
    m[r] = -INFINITY;
    l[r] = 0;
  }
  (void)kt;
  for (int64_t x0 = 0; x0 < j->tk; x0 += bk) {
    int64_t n = j->tk - x0 < bk ? j->tk - x0 : bk;
    const float *k = j->k + bi * j->k_bstride + x0 * ldk + hd * j->dh;
    const float *v = j->v + bi * j->v_bstride + x0 * ldv + hd * j->dv;
    /* S[rows, n] = scale * Q_blk K_j^T */
#ifdef ATTN_X86
    int64_t n8 = (n + 7) / 8 * 8;
    if (direct) {
      attn_pack_kt(n, j->dh, k, ldk, kt, n8);
      attn_scores_avx2(rows, n, j->dh, j->scale, q, ldq, kt, n8, s);
    } else
#endif
      rt_sgemm(0, 1, rows, n, j->dh, j->scale, q, ldq, k, ldk, 0.0f, s, n);
    if (j->mask)
      for (int64_t r = 0; r < rows; r++) {
        const uint8_t *mr = mask_row(j, bi, t0 + r) + x0;
        float *sr = s + r * n;
        for (int64_t x = 0; x < n; x++)
          sr[x] = mr[x] ? sr[x] : ATTN_MASKED_SCORE;
      }
    online_rows(s, rows, n, m, l, c);
    /* O = O * c + P V_j (the first block: O = P V_j) */
    if (x0 > 0)
      for (int64_t r = 0; r < rows; r++)
        for (int64_t e = 0; e < j->dv; e++)
          o[r * ldo + e] *= c[r];
#ifdef ATTN_X86
    if (direct) {
      attn_mix_avx2(rows, n, j->dv, s, v, ldv, o, ldo, x0 > 0);
      continue;
    }
#endif
    rt_sgemm(0, 0, rows, j->dv, n, 1.0f, s, n, v, ldv, x0 > 0 ? 1.0f : 0.0f, o, ldo);
  }
  for (int64_t r = 0; r < rows; r++) {
    float inv = (float)(1.0 / (double)l[r]);
    for (int64_t e = 0; e < j->dv; e++)
      o[r * ldo + e] *= inv;
  }
}

static void attn_task(void *ctx, int64_t lo, int64_t hi) {
  const AttnJob *j = ctx;
  for (int64_t task = lo; task < hi; task++) {
    int64_t block = task % j->n_blocks, bh = task / j->n_blocks;
    int64_t t0 = block * j->block_q;
    int64_t rows = j->tq - t0 < j->block_q ? j->tq - t0 : j->block_q;
    if (j->block_k)
      attn_block_flash(j, bh / j->h, bh % j->h, t0, rows);
    else
      attn_block(j, bh / j->h, bh % j->h, t0, rows);
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
               .tiled = attn_tiled(tk, dv, max_tk_tiled), .scale = scale,
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
               .tiled = attn_tiled(0, dv, 1), .scale = scale,
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
