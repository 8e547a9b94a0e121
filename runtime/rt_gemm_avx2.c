/* runtime/rt_gemm_avx2.c — the AVX2+FMA kernels of the portable GEMM
 * (rt_gemm_kernels.h says what each computes and the packed layouts).
 *
 *   micro   C[6,16] += A_p^T B_p: 12 ymm accumulators (6 rows x 2 vectors
 *           of 8 columns: one panel), 2 loads of B and 6 broadcasts of A
 *           per step of k, 12 FMAs; 15 of the 16 ymm registers. The
 *           same tile on A itself (microa: rows lda apart) serves the
 *           decode path's 5-6 rows; the GEMM packs A (rt_gemm.c says why).
 *   rows_p  decode on prepacked panels: each lane one output column; up to
 *           4 rows of x pass over 2 panels (2 rows) or 1 panel (3-4 rows)
 *           at a time, 8 accumulators; 5-6 rows run the micro-kernel on
 *           x in place (y set to its sums), 7-8 rows two passes of at most
 *           4 rows, the second reading the panels from cache.
 *
 * Per output element: acc = fma(a, b, acc) over p in order, then C += acc
 * (micro) or y = acc (rows_p), wherever the element lies, so splits never
 * change results.
 *
 * Built with __attribute__((target("avx2,fma"))) only; rt_gemm.c calls
 * these after cpuid and xgetbv say the CPU and OS support AVX2 and FMA. On
 * other targets this file compiles to nothing. */
#include "runtime/rt_gemm_kernels.h"

#ifdef GEMM_AVX2
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define MR GEMM_AVX2_MR

_Static_assert(GEMM_AVX2_NR == 16, "the AVX2 tile is one panel wide");

/* an 8-lane load mask for lanes [0, n), n clamped to 0..8 */
AVX2 static inline __m256i lanes8(int n) {
  n = n < 0 ? 0 : n > 8 ? 8 : n;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* C[mr, nr] += A_p^T B_p for a tile of R <= MR rows (the A panel's rows
 * stay MR apart): a tile of fewer rows does only its rows' work (M = 128:
 * 21 tiles of 6 rows and one of 2). Rows by constant index in the ragged
 * store (an i < mr loop would keep acc in memory through the main loop).
 * The k loop unrolled by 4: on Zen 3 (AVX2 only) a 6-row step took 8.0
 * cycles rolled and 6.8 unrolled, from cache (12 FMAs on 2 ports: 6 at
 * best); 128 x 768 x 768 on one thread, interleaved runs, 8.6 -> 7.9
 * Gcycles (median of 6). */
#define A_PANEL(i, p) (a + (p) * MR + (i)) /* A_p: kc groups of MR */
#define A_ROWS(i, p) (a + (i) * lda + (p))  /* A itself: rows lda apart */
#define MICRO_AT(NAME, AT, R)                                                                      \
  AVX2 static void NAME##_##R(int64_t kc, const float *a, int64_t lda, const float *b, float *c,   \
                              int64_t ldc, int mr, int nr, const GemmTileExtra *x) {               \
    const float *bias = x->bias, *res = x->res;                                                    \
    const int set = x->set;                                                                        \
    const int64_t ldr = x->ldr;                                                                    \
    (void)lda;                                                                                     \
    __m256 acc[R][2];                                                                              \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) acc[i][0] = acc[i][1] =                    \
        _mm256_setzero_ps();                                                                       \
    _Pragma("GCC unroll 4") for (int64_t p = 0; p < kc; p++) {                                     \
      __m256 b0 = _mm256_load_ps(b + p * 16), b1 = _mm256_load_ps(b + p * 16 + 8);                \
      _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                                        \
        __m256 ai = _mm256_broadcast_ss(AT(i, p));                                                 \
        acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);                                            \
        acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);                                            \
      }                                                                                            \
    }                                                                                              \
    __m256i m0 = lanes8(nr), m1 = lanes8(nr - 8);                                                  \
    /* set: every row starts from the bias (or zeros) instead of C */                               \
    __m256 s0 = set && bias ? _mm256_maskload_ps(bias, m0) : _mm256_setzero_ps();                  \
    __m256 s1 = set && bias ? _mm256_maskload_ps(bias + 8, m1) : _mm256_setzero_ps();              \
    if (mr == R && nr == 16) {                                                                     \
      _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                                        \
        float *ci = c + i * ldc;                                                                   \
        __m256 t0 = _mm256_add_ps(set ? s0 : _mm256_loadu_ps(ci), acc[i][0]);                      \
        __m256 t1 = _mm256_add_ps(set ? s1 : _mm256_loadu_ps(ci + 8), acc[i][1]);                  \
        if (res) {                                                                                 \
          t0 = _mm256_add_ps(t0, _mm256_loadu_ps(res + i * ldr));                                  \
          t1 = _mm256_add_ps(t1, _mm256_loadu_ps(res + i * ldr + 8));                              \
        }                                                                                          \
        _mm256_storeu_ps(ci, t0);                                                                  \
        _mm256_storeu_ps(ci + 8, t1);                                                              \
      }                                                                                            \
      return;                                                                                      \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) if (i < mr) {                              \
      float *ci = c + i * ldc;                                                                     \
      __m256 t0 = _mm256_add_ps(set ? s0 : _mm256_maskload_ps(ci, m0), acc[i][0]);                 \
      __m256 t1 = _mm256_add_ps(set ? s1 : _mm256_maskload_ps(ci + 8, m1), acc[i][1]);             \
      if (res) {                                                                                   \
        t0 = _mm256_add_ps(t0, _mm256_maskload_ps(res + i * ldr, m0));                             \
        t1 = _mm256_add_ps(t1, _mm256_maskload_ps(res + i * ldr + 8, m1));                         \
      }                                                                                            \
      _mm256_maskstore_ps(ci, m0, t0);                                                             \
      _mm256_maskstore_ps(ci + 8, m1, t1);                                                         \
    }                                                                                              \
  }

MICRO_AT(micro, A_PANEL, 1)
MICRO_AT(micro, A_PANEL, 2)
MICRO_AT(micro, A_PANEL, 3)
MICRO_AT(micro, A_PANEL, 4)
MICRO_AT(micro, A_PANEL, 5)
MICRO_AT(micro, A_PANEL, 6)
/* on x in place: only the decode path's 5 and 6 rows (rt_gemm_rows_p_avx2) */
MICRO_AT(microa, A_ROWS, 5)
MICRO_AT(microa, A_ROWS, 6)

_Static_assert(MR == 6, "the tables below cover tiles of 1-6 rows");

typedef void (*MicroFn)(int64_t, const float *, int64_t, const float *, float *, int64_t, int, int,
                        const GemmTileExtra *);
static const GemmTileExtra no_extra; /* C += A B, nothing else */
static const MicroFn micro_rows[MR] = {micro_1, micro_2, micro_3, micro_4, micro_5, micro_6};

AVX2 void rt_gemm_micro_avx2(int64_t kc, const float *a, const float *b, int64_t bs, float *c,
                             int64_t ldc, int mr, int nr) {
  (void)bs; /* one panel */
  micro_rows[(mr < 1 ? 1 : mr > MR ? MR : mr) - 1](kc, a, MR, b, c, ldc, mr, nr, &no_extra);
}

/* acc[r][v] (R rows x V vectors of 8) to y[r, 8v ..], columns past ncols
 * left alone: the decode kernels' store */
#define STORE_ROWS(R, V)                                                                           \
  _Pragma("GCC unroll 4") for (int r = 0; r < (R); r++)                                            \
      _Pragma("GCC unroll 8") for (int v = 0; v < (V); v++)                                        \
          _mm256_maskstore_ps(y + r * ldy + 8 * v, lanes8(ncols - 8 * v), acc[r][v])

/* y[r, 16q + l] for R rows of x over P panels (columns: ncols of them).
 * With add, the sums start from y instead of 0 (a product over K in
 * pieces: the same fma chain per element). With pfo, every other step
 * also prefetches into L2 the line pfo + 32 p bytes past wp: over the pass
 * the bytes of half as many steps of one panel, on their way from memory
 * for a later pass while this one computes (rt_gemm_rows_p_avx2). */
#define ROWS_P(R, P)                                                                               \
  AVX2 static void rows_p_##R##x##P(int64_t k, const float *x, int64_t ldx, const float *wp,       \
                                    float *y, int64_t ldy, int ncols, int64_t pfo, int add) {      \
    __m256 acc[R][2 * P];                                                                          \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 4") for (int v = 0; v < 2 * P; v++) acc[r][v] =                        \
        add ? _mm256_maskload_ps(y + r * ldy + 8 * v, lanes8(ncols - 8 * v)) : _mm256_setzero_ps(); \
    const int64_t ps = k * 16;                                                                     \
    for (int64_t p = 0; p < k; p++) {                                                              \
      if (pfo && (p & 1) == 0)                                                                     \
        GEMM_PREFETCH_L2(wp, pfo + 32 * p);                                                        \
      __m256 wv[2 * P];                                                                            \
      _Pragma("GCC unroll 4") for (int v = 0; v < 2 * P; v++) wv[v] =                              \
          _mm256_load_ps(wp + (v / 2) * ps + p * 16 + 8 * (v % 2));                                \
      _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                        \
        __m256 xr = _mm256_broadcast_ss(x + r * ldx + p);                                          \
        _Pragma("GCC unroll 4") for (int v = 0; v < 2 * P; v++) acc[r][v] =                        \
            _mm256_fmadd_ps(xr, wv[v], acc[r][v]);                                                 \
      }                                                                                            \
    }                                                                                              \
    STORE_ROWS(R, 2 * P);                                                                          \
  }

ROWS_P(1, 2)
ROWS_P(2, 2)
ROWS_P(1, 1)
ROWS_P(2, 1)
ROWS_P(3, 1)
ROWS_P(4, 1)

typedef void (*RowsP)(int64_t k, const float *x, int64_t ldx, const float *wp, float *y,
                      int64_t ldy, int ncols, int64_t pfo, int add);
static const RowsP rows_p_one[4] = {rows_p_1x1, rows_p_2x1, rows_p_3x1, rows_p_4x1};

/* How far ahead the decode kernel of 7-8 rows prefetches: about this many
 * bytes of panels, at least one panel. */
#define DECODE_PF_BYTES (96 * 1024)
/* The k steps of one panel the two passes of 7-8 rows share: 24 KiB, so
 * that the second pass finds them in L1. */
#define DECODE_KC 384

/* m rows (1..4) over columns [0, n) of the panels at wp: 1-4 rows stream
 * at 85-100% of the DRAM bandwidth without a prefetch (3-4 rows with the
 * 7-8 rows' prefetch: -9% to +14%, 2 threads, 4 x N x K at the bench's
 * shapes, within this guest's noise) */
AVX2 static void rows_p_group(int m, int64_t n, int64_t k, const float *x, int64_t ldx,
                              const float *wp, float *y, int64_t ldy) {
  int64_t j = 0;
  if (m <= 2)
    for (; j + 32 <= n; j += 32)
      (m == 1 ? rows_p_1x2 : rows_p_2x2)(k, x, ldx, wp + j * k, y + j, ldy, 32, 0, 0);
  for (; j < n; j += 16)
    rows_p_one[m - 1](k, x, ldx, wp + j * k, y + j, ldy, (int)(n - j < 16 ? n - j : 16), 0, 0);
}

AVX2 void rt_gemm_rows_p_avx2(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                              const float *wp, float *y, int64_t ldy) {
  if (m <= 0 || n <= 0)
    return;
  if (m <= 4) {
    rows_p_group((int)m, n, k, x, ldx, wp, y, ldy);
    return;
  }
  /* 5-6 rows: the GEMM micro-kernel on x in place, y set to its sums
   * (the same fma chain per element as rows_p's), one pass over w: from
   * cache, one thread, 5 x 768 x 768 341K -> 234K cycles, 6 rows 362K ->
   * 273K; from memory it streams at 83-90% of the DRAM bandwidth. */
  if (m <= MR) {
    const GemmTileExtra set = {NULL, 1, NULL, 0, NULL, 0};
    for (int64_t j = 0; j < n; j += 16)
      (m == 5 ? microa_5 : microa_6)(k, x, ldx, wp + j * k, y + j, ldy, (int)m,
                                     (int)(n - j < 16 ? n - j : 16), &set);
    return;
  }
  /* 7-8 rows: per panel and DECODE_KC steps, rows 0-3 and then the rest,
   * the second pass reading the steps from L1; meanwhile the panel d
   * ahead comes into L2, half of its steps in each pass. Before, rows 0-3
   * passed over 256 KiB of panels from memory and rows 4-7 over the same
   * from L2: the first waited on memory, the second on the FMAs, one after
   * the other. 2 threads, from memory, bench/gemm's gemm_bench, 7
   * alternating runs, medians: 8 x 768 x 768 135 -> 111 us (17.5 -> 21.3
   * GB/s), 8 x 2304 x 768 408 -> 316 us, 8 x 50257 x 768 8.9 -> 6.7 ms
   * (17.3 -> 22.9 GB/s). Whole panels per pass: 5-9% slower; the prefetch
   * one panel or 4 ahead, or 64-128 KiB blocks of panels: less; the 6-row
   * micro-kernel, then 1-2 rows prefetching: slower than before. */
  const int64_t panel = 16 * k, d = (DECODE_PF_BYTES / 4 + panel - 1) / panel;
  for (int64_t j = 0; j < n; j += 16) {
    const int cols = (int)(n - j < 16 ? n - j : 16);
    for (int64_t c = 0; c == 0 || c < k; c += DECODE_KC) { /* K = 0: y = 0 */
      const int64_t kc = k - c < DECODE_KC ? k - c : DECODE_KC;
      const float *w = wp + j * k + 16 * c; /* step c of panel j */
      rows_p_4x1(kc, x + c, ldx, w, y + j, ldy, cols, 4 * d * panel, c > 0);
      rows_p_one[m - 5](kc, x + 4 * ldx + c, ldx, w, y + 4 * ldy + j, ldy, cols,
                        4 * (d * panel + 8 * kc), c > 0);
    }
  }
}

/* ---- bf16 weights (pair panels, rt_gemm_kernels.h), widened to f32 ----
 * A word's low half is the bf16 of the even k-step, its high half the odd
 * one: the f32s are the word shifted left by 16 and the word with its low
 * half cleared. */
AVX2 static inline __m256 bf16_lo(__m256i w) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
AVX2 static inline __m256 bf16_hi(__m256i w) {
  return _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32((int)0xffff0000u)));
}
/* the same by two shifts: no mask constant to hold in a register */
AVX2 static inline __m256 bf16_hi_shifted(__m256i w) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(w, 16), 16));
}

/* C[mr,nr] += A_p^T B over kc (even) steps, A_p f32, B one bf16 pair panel */
AVX2 void rt_gemm_micro_bf16w_avx2(int64_t kc, const void *av, const uint32_t *b, int64_t bs,
                                   float *c, int64_t ldc, int mr, int nr) {
  (void)bs; /* one panel */
  const float *a = av;
  __m256 acc[MR][2];
  _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] =
      _mm256_setzero_ps();
  /* the even k-step of a word pair for every row, then the odd one (the
   * same order per element): 12 accumulators, two weight vectors and a
   * broadcast fill the 16 registers (hence the shifts for the high half,
   * not a mask); by column half instead, both steps' 12 broadcasts were
   * live at once and gcc kept 8 accumulators on the stack */
  for (int64_t q = 0; q < kc / 2; q++) {
    const float *a0 = a + 2 * q * MR, *a1 = a0 + MR;
    const __m256i *wq = (const __m256i *)(b + q * 16);
    _Pragma("GCC unroll 2") for (int e = 0; e < 2; e++) {
      __m256i v0 = _mm256_load_si256(wq), v1 = _mm256_load_si256(wq + 1);
      __m256 w0 = e ? bf16_hi_shifted(v0) : bf16_lo(v0);
      __m256 w1 = e ? bf16_hi_shifted(v1) : bf16_lo(v1);
      _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) {
        __m256 ai = _mm256_broadcast_ss((e ? a1 : a0) + i);
        acc[i][0] = _mm256_fmadd_ps(ai, w0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(ai, w1, acc[i][1]);
      }
    }
  }
  __m256i m0 = lanes8(nr), m1 = lanes8(nr - 8);
  _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) if (i < mr) {
    float *ci = c + i * ldc;
    _mm256_maskstore_ps(ci, m0, _mm256_add_ps(_mm256_maskload_ps(ci, m0), acc[i][0]));
    _mm256_maskstore_ps(ci + 8, m1, _mm256_add_ps(_mm256_maskload_ps(ci + 8, m1), acc[i][1]));
  }
}

/* B_h panel -> B_p panel: step 2q (the words' low halves) and 2q + 1 (their
 * high halves) of 16 columns each */
AVX2 void rt_gemm_widen_bf16_avx2(int64_t kc, const uint32_t *b, float *f) {
  for (int64_t q = 0; q < kc / 2; q++) {
    __m256i v0 = _mm256_load_si256((const __m256i *)(b + q * 16));
    __m256i v1 = _mm256_load_si256((const __m256i *)(b + q * 16 + 8));
    _mm256_store_ps(f + 32 * q, bf16_lo(v0));
    _mm256_store_ps(f + 32 * q + 8, bf16_lo(v1));
    _mm256_store_ps(f + 32 * q + 16, bf16_hi(v0));
    _mm256_store_ps(f + 32 * q + 24, bf16_hi(v1));
  }
}

/* Decode on bf16 pair panels: R rows (1..4) over P panels, one fma chain
 * per element over p in order. A chain waits for its previous FMA (4
 * cycles on Zen 3, two per pair), so a pass needs about 8 chains to keep
 * both FMA ports busy: 1 row x 4 panels, 2 x 2, 3-4 x 1 (1 x 1 alone,
 * 2 chains, ran the 1 x 768 x 768 product at 33 us from cache against 28
 * for f32 weights). 3-4 rows take every row's even step before the odd
 * ones (the same order per element): with both steps per word, their 8
 * broadcasts stayed live and gcc kept accumulators on the stack (4 x 768 x
 * 768, one thread, from cache: 348K -> 190-200K cycles). */
#define ROWS_PB(R, P)                                                                              \
  AVX2 static void rows_pb_##R##x##P(int64_t k, const float *x, int64_t ldx, const uint32_t *wp,  \
                                     int64_t k2, float *y, int64_t ldy, int ncols) {               \
    __m256 acc[R][2 * P];                                                                          \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 8") for (int v = 0; v < 2 * P; v++) acc[r][v] = _mm256_setzero_ps();   \
    for (int64_t q = 0; q < k / 2; q++) {                                                          \
      const uint32_t *wq = wp + q * 16;                                                            \
      if (R <= 2) /* a word's two steps at once: 2 R broadcasts live */                            \
        _Pragma("GCC unroll 8") for (int v = 0; v < 2 * P; v++) {                                  \
          __m256i w = _mm256_load_si256((const __m256i *)(wq + (v / 2) * k2 * 16 + 8 * (v % 2)));  \
          __m256 lo = bf16_lo(w), hi = bf16_hi(w);                                                 \
          _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                    \
            acc[r][v] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + r * ldx + 2 * q), lo, acc[r][v]);  \
            acc[r][v] =                                                                            \
                _mm256_fmadd_ps(_mm256_broadcast_ss(x + r * ldx + 2 * q + 1), hi, acc[r][v]);      \
          }                                                                                        \
        }                                                                                          \
      else /* every row's even step, then the odd: one broadcast live */                           \
        _Pragma("GCC unroll 2") for (int e = 0; e < 2; e++)                                        \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                  \
          __m256 xr = _mm256_broadcast_ss(x + r * ldx + 2 * q + e);                                \
          _Pragma("GCC unroll 8") for (int v = 0; v < 2 * P; v++) {                                \
            __m256i w =                                                                            \
                _mm256_load_si256((const __m256i *)(wq + (v / 2) * k2 * 16 + 8 * (v % 2)));        \
            acc[r][v] =                                                                            \
                _mm256_fmadd_ps(xr, e ? bf16_hi_shifted(w) : bf16_lo(w), acc[r][v]);              \
          }                                                                                        \
        }                                                                                          \
    }                                                                                              \
    if (k % 2)                                                                                     \
      _Pragma("GCC unroll 8") for (int v = 0; v < 2 * P; v++) {                                    \
        __m256 lo = bf16_lo(_mm256_load_si256(                                                     \
            (const __m256i *)(wp + (v / 2) * k2 * 16 + k / 2 * 16 + 8 * (v % 2))));                \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r][v] =                            \
            _mm256_fmadd_ps(_mm256_broadcast_ss(x + r * ldx + k - 1), lo, acc[r][v]);              \
      }                                                                                            \
    STORE_ROWS(R, 2 * P);                                                                          \
  }

ROWS_PB(1, 4)
ROWS_PB(2, 2)
ROWS_PB(1, 1)
ROWS_PB(2, 1)
ROWS_PB(3, 1)
ROWS_PB(4, 1)

typedef void (*RowsPb)(int64_t k, const float *x, int64_t ldx, const uint32_t *wp, int64_t k2,
                       float *y, int64_t ldy, int ncols);
static const RowsPb rows_pb_one[4] = {rows_pb_1x1, rows_pb_2x1, rows_pb_3x1, rows_pb_4x1};

AVX2 void rt_gemm_rows_p_bf16_avx2(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                                   const uint32_t *wp, float *y, int64_t ldy) {
  if (m <= 0 || n <= 0)
    return;
  const int64_t k2 = (k + 1) / 2;
  if (m <= 2) { /* the wide passes of ROWS_PB, then single panels */
    const int64_t wide = m == 1 ? 64 : 32;
    int64_t j = 0;
    for (; j + wide <= n; j += wide)
      (m == 1 ? rows_pb_1x4 : rows_pb_2x2)(k, x, ldx, wp + j * k2, k2, y + j, ldy, (int)wide);
    for (; j < n; j += 16)
      rows_pb_one[m - 1](k, x, ldx, wp + j * k2, k2, y + j, ldy, (int)(n - j < 16 ? n - j : 16));
    return;
  }
  /* 3-8 rows: groups of 4 per panel, the second reading it from cache */
  for (int64_t j = 0; j < n; j += 16) {
    int cols = (int)(n - j < 16 ? n - j : 16);
    for (int64_t r0 = 0; r0 < m; r0 += 4) {
      int r = (int)(m - r0 < 4 ? m - r0 : 4);
      rows_pb_one[r - 1](k, x + r0 * ldx, ldx, wp + j * k2, k2, y + r0 * ldy + j, ldy, cols);
    }
  }
}
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int rt_gemm_avx2_unused;
#endif
