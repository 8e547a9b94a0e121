/* runtime/rt_gemm_avx512bf16.c — the GEMM micro-kernel for bf16 weights on
 * CPUs with AVX512_BF16 (rt_gemm_kernels.h says what it computes and the
 * packed layouts).
 *
 *   micro  C[6,64] += A^T B over kc steps with vdpbf16ps: A packed as bf16
 *          pairs (the x rows rounded to bf16 as they are packed), B the
 *          weights' bf16 pair panels; one instruction multiplies a pair of
 *          k-steps for 16 columns and adds both products to f32 sums, so
 *          each step of the tile is 4 loads of B, 6 broadcasts of A and 24
 *          vdpbf16ps for 2 k-steps: twice the multiply-adds of the f32
 *          tile per instruction. 29 of the 32 zmm registers.
 *   rows_p decode (M <= 8) on the same panels, x given as bf16 pairs
 *          (X_h, rounded by rt_gemm.c with the function that packs A_h,
 *          so decode and prefill see the same x): per pair of k-steps,
 *          one vdpbf16ps per row and panel, 16 accumulators; the next
 *          tile's panels prefetched into L2 as the current one streams.
 *
 * The same operations per output element wherever it lies, so splits never
 * change results. Built with target("avx512f,avx512bf16") only; rt_gemm.c
 * calls it after cpuid says the CPU has AVX512_BF16 and the OS saves zmm
 * state. On other targets this file compiles to nothing. */
#include "runtime/rt_gemm_kernels.h"

#ifdef GEMM_AVX512
#include <immintrin.h>

#define BF16 __attribute__((target("avx512f,avx512bf16")))
#define MR GEMM_AVX512_MR

BF16 static inline __mmask16 lanes(int n) {
  return n <= 0 ? 0 : n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* A tile of R <= MR rows (the A panel's rows stay MR apart) and NV
 * panels: a tile of fewer rows does only its rows' work (M = 128: 21 tiles
 * of 6 rows and one of 2). */
#define MICRO_DP(R, NV)                                                                            \
  BF16 static void micro_dp_##R##x##NV(int64_t kc, const void *av, const uint32_t *b, int64_t bs,  \
                                       float *c, int64_t ldc, int mr, int nr) {                    \
    const uint32_t *a = av;                                                                        \
    __m512 acc[R][NV];                                                                             \
    _Pragma("GCC unroll 16") for (int i = 0; i < R; i++)                                           \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();      \
    for (int64_t q = 0; q < kc / 2; q++) {                                                         \
      __m512bh bv[NV];                                                                             \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bv[v] =                                 \
          (__m512bh)_mm512_load_si512((const void *)(b + v * bs + q * 16));                        \
      _Pragma("GCC unroll 16") for (int i = 0; i < R; i++) {                                       \
        __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[q * MR + i]);                             \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] =                           \
            _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);                                                \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 16") for (int i = 0; i < R; i++) if (i < mr)                               \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                       \
        __mmask16 m = lanes(nr - 16 * v);                                                          \
        float *ci = c + i * ldc + 16 * v;                                                          \
        _mm512_mask_storeu_ps(ci, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, ci), acc[i][v]));      \
      }                                                                                            \
  }

#define MICRO_DP_ROWS(R) MICRO_DP(R, 1) MICRO_DP(R, 2) MICRO_DP(R, 3) MICRO_DP(R, 4)
MICRO_DP_ROWS(1)
MICRO_DP_ROWS(2)
MICRO_DP_ROWS(3)
MICRO_DP_ROWS(4)
MICRO_DP_ROWS(5)
MICRO_DP_ROWS(6)

_Static_assert(MR == 6 && GEMM_AVX512_NR == 64, "the table covers tiles of 1-6 rows, 1-4 panels");

typedef void (*MicroDpFn)(int64_t, const void *, const uint32_t *, int64_t, float *, int64_t, int,
                          int);
#define MICRO_DP_ROW(R) {micro_dp_##R##x1, micro_dp_##R##x2, micro_dp_##R##x3, micro_dp_##R##x4}
static const MicroDpFn micro_dp_tiles[MR][4] = {MICRO_DP_ROW(1), MICRO_DP_ROW(2), MICRO_DP_ROW(3),
                                                MICRO_DP_ROW(4), MICRO_DP_ROW(5), MICRO_DP_ROW(6)};

BF16 void rt_gemm_micro_bf16dp_avx512(int64_t kc, const void *a, const uint32_t *b, int64_t bs,
                                      float *c, int64_t ldc, int mr, int nr) {
  int r = mr < 1 ? 1 : mr > MR ? MR : mr, v = (nr + 15) / 16;
  micro_dp_tiles[r - 1][(v < 1 ? 1 : v > 4 ? 4 : v) - 1](kc, a, b, bs, c, ldc, mr, nr);
}

/* Decode on B_h with x as bf16 pairs (X_h): y[r, 16q + l] = the chain of
 * vdpbf16ps over the word pairs w in order, one per pair of k-steps. R
 * rows over P panels at a time: P = 4 for up to 4 rows, else 2, so 8-16
 * chains are in flight and every panel streams from memory once for all
 * rows; a pair of k-steps costs P loads, R broadcasts of x's word and
 * R*P vdpbf16ps. With pf, each step also prefetches the same line of the
 * next tile's panels into L2: the hardware prefetcher ramps up again at
 * each new panel, and with panels of K = 768 (24 KiB) that left M = 8 at
 * 15-17 GB/s of weights on one thread; with the prefetch 22 (K = 3072:
 * 20 -> 22.5). For 1-4 rows (4 panels a tile) it is taken only for
 * panels of K <= 1536: at K = 3072 the 4 extra streams cost 1 x 768 x
 * 3072 10-15% (186-207 us against 172-176 without). The last tile's
 * prefetches run past its panels (a prefetch never faults). */
#define ROWS_DP(R, P)                                                                              \
  BF16 static void rows_dp_##R##x##P(int64_t k2, const uint32_t *xh, int64_t ldx,                  \
                                     const uint32_t *wp, float *y, int64_t ldy, int ncols,         \
                                     int pf) {                                                     \
    __m512 acc[R][P];                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 4") for (int v = 0; v < P; v++) acc[r][v] = _mm512_setzero_ps();       \
    const int64_t ps = k2 * 16;                                                                    \
    for (int64_t q = 0; q < k2; q++) {                                                             \
      __m512bh wv[P];                                                                              \
      _Pragma("GCC unroll 4") for (int v = 0; v < P; v++) wv[v] =                                  \
          (__m512bh)_mm512_load_si512((const void *)(wp + v * ps + q * 16));                       \
      if (pf) /* the next tile's panels, to L2 */                                                  \
        _Pragma("GCC unroll 4") for (int v = 0; v < P; v++)                                        \
            GEMM_PREFETCH_L2(wp + v * ps + q * 16, P * ps * 4);                                     \
      _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                                        \
        __m512bh xr = (__m512bh)_mm512_set1_epi32((int)xh[r * ldx + q]);                           \
        _Pragma("GCC unroll 4") for (int v = 0; v < P; v++) acc[r][v] =                            \
            _mm512_dpbf16_ps(acc[r][v], wv[v], xr);                                                \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 4") for (int v = 0; v < P; v++)                                        \
            _mm512_mask_storeu_ps(y + r * ldy + 16 * v, lanes(ncols - 16 * v), acc[r][v]);         \
  }

#define ROWS_DP_R(R, P) ROWS_DP(R, P) ROWS_DP(R, 1)
ROWS_DP_R(1, 4)
ROWS_DP_R(2, 4)
ROWS_DP_R(3, 4)
ROWS_DP_R(4, 4)
ROWS_DP_R(5, 2)
ROWS_DP_R(6, 2)
ROWS_DP_R(7, 2)
ROWS_DP_R(8, 2)

typedef void (*RowsDp)(int64_t k2, const uint32_t *xh, int64_t ldx, const uint32_t *wp, float *y,
                       int64_t ldy, int ncols, int pf);
static const RowsDp rows_dp_wide[GEMM_DECODE_ROWS] = {rows_dp_1x4, rows_dp_2x4, rows_dp_3x4,
                                                      rows_dp_4x4, rows_dp_5x2, rows_dp_6x2,
                                                      rows_dp_7x2, rows_dp_8x2};
static const RowsDp rows_dp_one[GEMM_DECODE_ROWS] = {rows_dp_1x1, rows_dp_2x1, rows_dp_3x1,
                                                     rows_dp_4x1, rows_dp_5x1, rows_dp_6x1,
                                                     rows_dp_7x1, rows_dp_8x1};

BF16 void rt_gemm_rows_p_bf16dp_avx512(int64_t m, int64_t n, int64_t k, const uint32_t *xh,
                                       int64_t ldx, const uint32_t *wp, float *y, int64_t ldy) {
  const int64_t k2 = (k + 1) / 2;
  for (int64_t r0 = 0; r0 < m; r0 += GEMM_DECODE_ROWS) { /* one pass from rt_linear (m <= 8) */
    int r = (int)(m - r0 < GEMM_DECODE_ROWS ? m - r0 : GEMM_DECODE_ROWS);
    const uint32_t *xr = xh + r0 * ldx;
    float *yr = y + r0 * ldy;
    const int64_t wide = r <= 4 ? 64 : 32;
    const int pf = r > 4 || k2 <= 768; /* K <= 1536: see ROWS_DP */
    int64_t j = 0;
    for (; j + wide <= n; j += wide)
      rows_dp_wide[r - 1](k2, xr, ldx, wp + j * k2, yr + j, ldy, (int)wide, pf);
    for (; j < n; j += 16)
      rows_dp_one[r - 1](k2, xr, ldx, wp + j * k2, yr + j, ldy, (int)(n - j < 16 ? n - j : 16), pf);
  }
}
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int rt_gemm_avx512bf16_unused;
#endif
