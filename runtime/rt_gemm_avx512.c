/* runtime/rt_gemm_avx512.c — the AVX-512F kernels of the portable GEMM
 * (rt_gemm_kernels.h says what each computes and the packed layouts).
 *
 *   micro  C[6,64] += A_p^T B_p: 24 zmm accumulators (6 rows x 4 panels of
 *          16 columns), 4 loads of B (one per panel) and 6 broadcasts of A
 *          per step of k, 24 FMAs; 29 of the 32 zmm registers; a ragged
 *          tile (1-6 rows, 1-4 panels) has its own instance, so it does
 *          only its own work. The ragged edge of C is
 *          written through lane masks, not a scratch tile. Measured
 *          against 8x48, 12x32 and 14x32 (bench/gemm, one thread, M = 128,
 *          N,K at bert/gpt2 sizes, best of 3 interleaved runs on a loaded
 *          machine): 6x64 was fastest on 3 of 4 shapes, 155-166 GFLOP/s
 *          against 130-156 for the others. Two instances of every tile:
 *          on A_p (packed, MR values per k step) and, for micro_a, on A
 *          itself (row i at a + i lda: the six broadcasts read six rows in
 *          place, so f32 products with alpha 1 skip packing x).
 *   rows   decode, y[m,n] = x[m,k] w[n,k]^T for m <= 8: blocks of w rows
 *          small enough to stay in L1 while every row of x passes over
 *          them, so w streams from memory once; tiles of up to 4 x rows by
 *          4 w rows (16 accumulators, x and w chunks in registers: 8 loads
 *          per 16 FMAs), k in chunks of 16 with a masked last chunk; each
 *          dot product is summed across its 16 lanes at the end.
 *   rows_p decode on prepacked panels: each lane is one output column, so
 *          no horizontal sums; all m rows pass over 2-4 panels at a time.
 *
 * Per output element the operations are the same wherever it lies (full
 * or ragged tile, any block), so splits never change results: micro is
 * acc = fma(a, b, acc) over p in order, then C += acc, the same sequence
 * as the AVX2 kernel; rows is one 16-lane fma chain per element plus
 * _mm512_reduce_add_ps.
 *
 * Built with __attribute__((target("avx512f"))) only, never a global
 * -mavx512f: the rest of the runtime stays baseline and rt_gemm.c calls
 * these only after cpuid and xgetbv say the CPU and OS support zmm state.
 * On other targets this file compiles to nothing. */
#include "runtime/rt_gemm_kernels.h"

#ifdef GEMM_AVX512
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f")))
#define MR GEMM_AVX512_MR
#define NR GEMM_AVX512_NR
#define NV (NR / 16) /* zmm vectors per row of the tile */

_Static_assert(NR % 16 == 0, "the tile's width is whole zmm vectors");

/* lanes [0, n) of a 16-lane mask, n clamped to 0..16 */
AVX512 static inline __mmask16 lanes(int n) {
  return n <= 0 ? 0 : n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* C[mr, nr] += acc for a tile of R rows and NV panels, through lane masks;
 * rows by constant index (an i < mr loop would keep acc in memory through
 * the k loop). Used inside the micro-kernel macro below. */
#define ADD_TILE_RAGGED(R, NV)                                                                     \
  _Pragma("GCC unroll 16") for (int i = 0; i < R; i++) if (i < mr)                                 \
    _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                         \
      __mmask16 m = lanes(nr - 16 * v);                                                            \
      float *ci = c + i * ldc + 16 * v;                                                            \
      _mm512_mask_storeu_ps(ci, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, ci), acc[i][v]));        \
    }

/* C[mr,nr] += A_p^T B_p for a tile of R <= MR rows (the A panel's rows
 * stay MR apart) and NV panels (NV*16 columns); the panels past nr are
 * never read (the last tile of prepacked weights may have fewer than 4).
 * A tile of fewer rows does only its rows' work: M = 128 is 21 tiles of 6
 * rows and one of 2, which the 6-row kernel would do at the cost of 6. */
#define A_PANEL(i, p) a[(p) * MR + (i)] /* A_p: kc groups of MR */
#define A_ROWS(i, p) a[(i) * lda + (p)]  /* A itself: rows lda apart */
#define MICRO_AT(NAME, AT, R, NV)                                                                  \
  AVX512 static void NAME##_##R##x##NV(int64_t kc, const float *a, int64_t lda, const float *b,    \
                                       int64_t bs, float *c, int64_t ldc, int mr, int nr,          \
                                       const GemmTileExtra *x) {                                   \
    (void)lda;                                                                                     \
    const char *pf = (const char *)x->pf;                                                          \
    const int64_t pf_bytes = pf ? x->pf_bytes : 0, ldr = x->ldr;                                   \
    const float *bias = x->bias, *res = x->res;                                                    \
    const int set = x->set;                                                                        \
    __m512 acc[R][NV];                                                                             \
    _Pragma("GCC unroll 16") for (int i = 0; i < R; i++)                                           \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();      \
    int64_t pf_at = 0;                                                                             \
    for (int64_t p = 0; p < kc; p++) {                                                             \
      if ((p & 1) == 0 && pf_at < pf_bytes) {                                                      \
        GEMM_PREFETCH_L2(pf, pf_at);                                                               \
        pf_at += 64;                                                                               \
      }                                                                                            \
      __m512 bv[NV];                                                                               \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bv[v] =                                 \
          _mm512_load_ps(b + v * bs + p * 16);                                                     \
      _Pragma("GCC unroll 16") for (int i = 0; i < R; i++) {                                       \
        __m512 ai = _mm512_set1_ps(AT(i, p));                                                      \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] =                           \
            _mm512_fmadd_ps(ai, bv[v], acc[i][v]);                                                 \
      }                                                                                            \
    }                                                                                              \
    __m512 b0[NV]; /* set: the start of every row (bias or zeros) */                               \
    _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) b0[v] =                                   \
        set && bias ? _mm512_maskz_loadu_ps(lanes(nr - 16 * v), bias + 16 * v)                     \
                    : _mm512_setzero_ps();                                                         \
    if (mr == R && nr == NV * 16) {                                                                \
      _Pragma("GCC unroll 16") for (int i = 0; i < R; i++)                                         \
          _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                   \
        float *ci = c + i * ldc + 16 * v;                                                          \
        __m512 t = _mm512_add_ps(set ? b0[v] : _mm512_loadu_ps(ci), acc[i][v]);                    \
        if (res)                                                                                   \
          t = _mm512_add_ps(t, _mm512_loadu_ps(res + i * ldr + 16 * v));                           \
        _mm512_storeu_ps(ci, t);                                                                   \
      }                                                                                            \
      return;                                                                                      \
    }                                                                                              \
    _Pragma("GCC unroll 16") for (int i = 0; i < R; i++) if (i < mr)                               \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                       \
        __mmask16 m = lanes(nr - 16 * v);                                                          \
        float *ci = c + i * ldc + 16 * v;                                                          \
        __m512 t = _mm512_add_ps(set ? b0[v] : _mm512_maskz_loadu_ps(m, ci), acc[i][v]);           \
        if (res)                                                                                   \
          t = _mm512_add_ps(t, _mm512_maskz_loadu_ps(m, res + i * ldr + 16 * v));                  \
        _mm512_mask_storeu_ps(ci, m, t);                                                           \
      }                                                                                            \
  }

#define MICRO(R, NV) MICRO_AT(micro, A_PANEL, R, NV) MICRO_AT(microa, A_ROWS, R, NV)
#define MICRO_ROWS(R) MICRO(R, 1) MICRO(R, 2) MICRO(R, 3) MICRO(R, 4)
MICRO_ROWS(1)
MICRO_ROWS(2)
MICRO_ROWS(3)
MICRO_ROWS(4)
MICRO_ROWS(5)
MICRO_ROWS(6)

_Static_assert(NV == 4 && MR == 6, "the table below covers tiles of 1-6 rows and 1-4 panels");

typedef void (*MicroFn)(int64_t, const float *, int64_t, const float *, int64_t, float *, int64_t,
                        int, int, const GemmTileExtra *);
static const GemmTileExtra no_extra; /* C += A B, nothing else */
#define MICRO_ROW(N, R) {N##_##R##x1, N##_##R##x2, N##_##R##x3, N##_##R##x4}
static const MicroFn micro_tiles[MR][NV] = {MICRO_ROW(micro, 1), MICRO_ROW(micro, 2),
                                            MICRO_ROW(micro, 3), MICRO_ROW(micro, 4),
                                            MICRO_ROW(micro, 5), MICRO_ROW(micro, 6)};
static const MicroFn microa_tiles[MR][NV] = {MICRO_ROW(microa, 1), MICRO_ROW(microa, 2),
                                             MICRO_ROW(microa, 3), MICRO_ROW(microa, 4),
                                             MICRO_ROW(microa, 5), MICRO_ROW(microa, 6)};

AVX512 void rt_gemm_micro_avx512(int64_t kc, const float *a, const float *b, int64_t bs, float *c,
                                 int64_t ldc, int mr, int nr) {
  int r = mr < 1 ? 1 : mr > MR ? MR : mr, v = (nr + 15) / 16;
  micro_tiles[r - 1][(v < 1 ? 1 : v > NV ? NV : v) - 1](kc, a, MR, b, bs, c, ldc, mr, nr,
                                                        &no_extra);
}

AVX512 void rt_gemm_micro_a_avx512(int64_t kc, const float *a, int64_t lda, const float *b,
                                   int64_t bs, float *c, int64_t ldc, int mr, int nr,
                                   const GemmTileExtra *x) {
  int r = mr < 1 ? 1 : mr > MR ? MR : mr, v = (nr + 15) / 16;
  microa_tiles[r - 1][(v < 1 ? 1 : v > NV ? NV : v) - 1](kc, a, lda, b, bs, c, ldc, mr, nr, x);
}

AVX512 static inline __m512 load_all(__mmask16 m, const float *p) {
  (void)m;
  return _mm512_loadu_ps(p);
}

/* One chunk of 16 k-steps: acc[r][j] += x[r, p..] * w[j, p..] lane-wise. */
#define ROWS_STEP(R, J, LOAD, M)                                                                   \
  do {                                                                                             \
    __m512 xv[R];                                                                                  \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) xv[r] = LOAD(M, x + r * ldx + p);          \
    _Pragma("GCC unroll 4") for (int j = 0; j < J; j++) {                                          \
      __m512 wv = LOAD(M, w + j * ldw + p);                                                        \
      _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r][j] =                              \
          _mm512_fmadd_ps(xv[r], wv, acc[r][j]);                                                   \
    }                                                                                              \
  } while (0)

/* y[i, j0+jj] for R rows of x and J rows of w starting at w (ldw apart). */
#define ROWS_TILE(R, J)                                                                            \
  AVX512 static void rows_tile_##R##x##J(int64_t k, const float *x, int64_t ldx, const float *w,   \
                                         int64_t ldw, float *y, int64_t ldy) {                     \
    __m512 acc[R][J];                                                                              \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 4") for (int j = 0; j < J; j++) acc[r][j] = _mm512_setzero_ps();       \
    int64_t p = 0;                                                                                 \
    for (; p + 16 <= k; p += 16)                                                                   \
      ROWS_STEP(R, J, load_all, 0);                                                                \
    if (p < k) { /* the last chunk: lanes past k load as zeros */                                  \
      __mmask16 m = lanes((int)(k - p));                                                           \
      ROWS_STEP(R, J, _mm512_maskz_loadu_ps, m);                                                   \
    }                                                                                              \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 4") for (int j = 0; j < J; j++) y[r * ldy + j] =                       \
            _mm512_reduce_add_ps(acc[r][j]);                                                       \
  }

ROWS_TILE(1, 4)
ROWS_TILE(2, 4)
ROWS_TILE(3, 4)
ROWS_TILE(4, 4)
ROWS_TILE(1, 1)
ROWS_TILE(2, 1)
ROWS_TILE(3, 1)
ROWS_TILE(4, 1)

typedef void (*RowsTile)(int64_t k, const float *x, int64_t ldx, const float *w, int64_t ldw,
                         float *y, int64_t ldy);
static const RowsTile tiles4[] = {rows_tile_1x4, rows_tile_2x4, rows_tile_3x4, rows_tile_4x4};
static const RowsTile tiles1[] = {rows_tile_1x1, rows_tile_2x1, rows_tile_3x1, rows_tile_4x1};

/* w rows per block: the block (rows x k floats) stays within ~24 KiB of L1
 * while up to 8 rows of x pass over it. */
#define ROWS_BLOCK_BYTES (24 * 1024)

AVX512 void rt_gemm_rows_avx512(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                                const float *w, int64_t ldw, float *y, int64_t ldy) {
  int64_t jb = ROWS_BLOCK_BYTES / (4 * (k > 0 ? k : 1)) & ~(int64_t)3;
  if (jb < 4)
    jb = 4;
  for (int64_t j0 = 0; j0 < n; j0 += jb) {
    int64_t j1 = j0 + jb < n ? j0 + jb : n;
    for (int64_t i0 = 0; i0 < m; i0 += 4) {
      int r = (int)(m - i0 < 4 ? m - i0 : 4);
      const float *xi = x + i0 * ldx;
      float *yi = y + i0 * ldy;
      int64_t j = j0;
      for (; j + 4 <= j1; j += 4)
        tiles4[r - 1](k, xi, ldx, w + j * ldw, ldw, yi + j, ldy);
      for (; j < j1; j++)
        tiles1[r - 1](k, xi, ldx, w + j * ldw, ldw, yi + j, ldy);
    }
  }
}

/* Decode on prepacked panels: y[r, 16q + l] = sum_p x[r, p] wp[q][p*16 + l],
 * one fma chain per element over p in order. P panels at a time (P = 4
 * for up to 4 rows, else 2) so that 8-16 chains are in flight: every
 * panel streams from memory once for all m rows. */
#define ROWS_P(R, P)                                                                               \
  AVX512 static void rows_p_##R##x##P(int64_t k, const float *x, int64_t ldx, const float *wp,     \
                                      float *y, int64_t ldy, int ncols) {                          \
    __m512 acc[R][P];                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 4") for (int v = 0; v < P; v++) acc[r][v] = _mm512_setzero_ps();       \
    const int64_t ps = k * 16;                                                                     \
    for (int64_t p = 0; p < k; p++) {                                                              \
      __m512 wv[P];                                                                                \
      _Pragma("GCC unroll 4") for (int v = 0; v < P; v++) wv[v] =                                  \
          _mm512_load_ps(wp + v * ps + p * 16);                                                    \
      _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                                        \
        __m512 xr = _mm512_set1_ps(x[r * ldx + p]);                                                \
        _Pragma("GCC unroll 4") for (int v = 0; v < P; v++) acc[r][v] =                            \
            _mm512_fmadd_ps(xr, wv[v], acc[r][v]);                                                 \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 4") for (int v = 0; v < P; v++)                                        \
            _mm512_mask_storeu_ps(y + r * ldy + 16 * v, lanes(ncols - 16 * v), acc[r][v]);         \
  }

#define ROWS_P_R(R, P) ROWS_P(R, P) ROWS_P(R, 1)
ROWS_P_R(1, 4)
ROWS_P_R(2, 4)
ROWS_P_R(3, 4)
ROWS_P_R(4, 4)
ROWS_P_R(5, 2)
ROWS_P_R(6, 2)
ROWS_P_R(7, 2)
ROWS_P_R(8, 2)

typedef void (*RowsP)(int64_t k, const float *x, int64_t ldx, const float *wp, float *y,
                      int64_t ldy, int ncols);
static const RowsP rows_p_wide[GEMM_DECODE_ROWS] = {rows_p_1x4, rows_p_2x4, rows_p_3x4, rows_p_4x4,
                                                    rows_p_5x2, rows_p_6x2, rows_p_7x2, rows_p_8x2};
static const RowsP rows_p_one[GEMM_DECODE_ROWS] = {rows_p_1x1, rows_p_2x1, rows_p_3x1, rows_p_4x1,
                                                   rows_p_5x1, rows_p_6x1, rows_p_7x1, rows_p_8x1};

AVX512 void rt_gemm_rows_p_avx512(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                                  const float *wp, float *y, int64_t ldy) {
  if (m <= 0 || n <= 0)
    return;
  const int64_t wide = m <= 4 ? 64 : 32; /* columns per call of the wide kernel */
  int64_t j = 0;
  for (; j + wide <= n; j += wide)
    rows_p_wide[m - 1](k, x, ldx, wp + j * k, y + j, ldy, (int)wide);
  for (; j < n; j += 16)
    rows_p_one[m - 1](k, x, ldx, wp + j * k, y + j, ldy, (int)(n - j < 16 ? n - j : 16));
}


/* ---- bf16 weights (panels of bf16 pairs, rt_gemm_kernels.h), widened ----
 * A 32-bit word holds the bf16 of k-step 2q in its low half and of 2q+1 in
 * its high half; a bf16 is the top half of its f32, so the f32 values are
 * the word shifted left by 16 (even step) and the word with its low half
 * cleared (odd step): two integer ops per 16 columns, then f32 FMAs. */
AVX512 static inline __m512 bf16_lo(__m512i w) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
AVX512 static inline __m512 bf16_hi(__m512i w) {
  return _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xffff0000u)));
}

/* C[mr,nr] += A_p^T B over kc (even) steps: A_p f32 (kc groups of MR),
 * B bf16 pair panels (bs words apart). */
#define MICRO_BF16W(NV)                                                                            \
  AVX512 static void micro_bf16w_##NV(int64_t kc, const float *a, const uint32_t *b, int64_t bs,   \
                                      float *c, int64_t ldc, int mr, int nr) {                     \
    __m512 acc[MR][NV];                                                                            \
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                          \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();      \
    for (int64_t q = 0; q < kc / 2; q++) {                                                         \
      const float *a0 = a + 2 * q * MR, *a1 = a0 + MR;                                             \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                       \
        __m512i w = _mm512_load_si512((const void *)(b + v * bs + q * 16));                        \
        __m512 lo = bf16_lo(w), hi = bf16_hi(w);                                                   \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                    \
          acc[i][v] = _mm512_fmadd_ps(_mm512_set1_ps(a0[i]), lo, acc[i][v]);                       \
          acc[i][v] = _mm512_fmadd_ps(_mm512_set1_ps(a1[i]), hi, acc[i][v]);                       \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    ADD_TILE_RAGGED(MR, NV);                                                                       \
  }

MICRO_BF16W(1)
MICRO_BF16W(2)
MICRO_BF16W(3)
MICRO_BF16W(4)

AVX512 void rt_gemm_micro_bf16w_avx512(int64_t kc, const void *a, const uint32_t *b, int64_t bs,
                                       float *c, int64_t ldc, int mr, int nr) {
  switch ((nr + 15) / 16) {
  case 4: micro_bf16w_4(kc, a, b, bs, c, ldc, mr, nr); break;
  case 3: micro_bf16w_3(kc, a, b, bs, c, ldc, mr, nr); break;
  case 2: micro_bf16w_2(kc, a, b, bs, c, ldc, mr, nr); break;
  default: micro_bf16w_1(kc, a, b, bs, c, ldc, mr, nr); break;
  }
}

/* Decode on bf16 pair panels: y[r, 16q + l] = sum_p x[r, p] w[p, 16q + l],
 * one fma chain per element over p in order (the even step, then the odd
 * one of each pair). */
#define ROWS_P_BF16(R, P)                                                                          \
  AVX512 static void rows_pb_##R##x##P(int64_t k, const float *x, int64_t ldx,                     \
                                       const uint32_t *wp, float *y, int64_t ldy, int ncols) {     \
    __m512 acc[R][P];                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 4") for (int v = 0; v < P; v++) acc[r][v] = _mm512_setzero_ps();       \
    const int64_t ps = (k + 1) / 2 * 16;                                                           \
    for (int64_t q = 0; q < k / 2; q++) {                                                          \
      _Pragma("GCC unroll 4") for (int v = 0; v < P; v++) {                                        \
        __m512i w = _mm512_load_si512((const void *)(wp + v * ps + q * 16));                       \
        __m512 lo = bf16_lo(w), hi = bf16_hi(w);                                                   \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                                      \
          acc[r][v] = _mm512_fmadd_ps(_mm512_set1_ps(x[r * ldx + 2 * q]), lo, acc[r][v]);          \
          acc[r][v] = _mm512_fmadd_ps(_mm512_set1_ps(x[r * ldx + 2 * q + 1]), hi, acc[r][v]);      \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    if (k % 2) { /* the last step alone: its pair's high half is padding */                        \
      _Pragma("GCC unroll 4") for (int v = 0; v < P; v++) {                                        \
        __m512 lo = bf16_lo(_mm512_load_si512((const void *)(wp + v * ps + k / 2 * 16)));          \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) acc[r][v] =                            \
            _mm512_fmadd_ps(_mm512_set1_ps(x[r * ldx + k - 1]), lo, acc[r][v]);                    \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 4") for (int v = 0; v < P; v++)                                        \
            _mm512_mask_storeu_ps(y + r * ldy + 16 * v, lanes(ncols - 16 * v), acc[r][v]);         \
  }

#define ROWS_P_BF16_R(R, P) ROWS_P_BF16(R, P) ROWS_P_BF16(R, 1)
ROWS_P_BF16_R(1, 4)
ROWS_P_BF16_R(2, 4)
ROWS_P_BF16_R(3, 4)
ROWS_P_BF16_R(4, 4)
ROWS_P_BF16_R(5, 2)
ROWS_P_BF16_R(6, 2)
ROWS_P_BF16_R(7, 2)
ROWS_P_BF16_R(8, 2)

typedef void (*RowsPb)(int64_t k, const float *x, int64_t ldx, const uint32_t *wp, float *y,
                       int64_t ldy, int ncols);
static const RowsPb rows_pb_wide[GEMM_DECODE_ROWS] = {rows_pb_1x4, rows_pb_2x4, rows_pb_3x4,
                                                      rows_pb_4x4, rows_pb_5x2, rows_pb_6x2,
                                                      rows_pb_7x2, rows_pb_8x2};
static const RowsPb rows_pb_one[GEMM_DECODE_ROWS] = {rows_pb_1x1, rows_pb_2x1, rows_pb_3x1,
                                                     rows_pb_4x1, rows_pb_5x1, rows_pb_6x1,
                                                     rows_pb_7x1, rows_pb_8x1};

AVX512 void rt_gemm_rows_p_bf16_avx512(int64_t m, int64_t n, int64_t k, const float *x,
                                       int64_t ldx, const uint32_t *wp, float *y, int64_t ldy) {
  if (m <= 0 || n <= 0)
    return;
  const int64_t wide = m <= 4 ? 64 : 32, k2 = (k + 1) / 2;
  int64_t j = 0;
  for (; j + wide <= n; j += wide)
    rows_pb_wide[m - 1](k, x, ldx, wp + j * k2, y + j, ldy, (int)wide);
  for (; j < n; j += 16)
    rows_pb_one[m - 1](k, x, ldx, wp + j * k2, y + j, ldy, (int)(n - j < 16 ? n - j : 16));
}
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int rt_gemm_avx512_unused;
#endif
