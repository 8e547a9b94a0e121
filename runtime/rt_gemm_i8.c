/* runtime/rt_gemm_i8.c — products on int8 weights (--weights-dtype int8):
 * the portable kernel, and the AVX2 and AVX-512 VNNI ones (each built with
 * its own target attribute; rt_gemm.c calls them only where cpuid says the
 * CPU has the instructions).
 *
 * Weights (rt_gemm_pack_i8, rt_gemm_kernels.h I8 layout): per output
 * column j a scale sw[j] = max|w[j, :]| / 127 and qw[j, p] = round(w[j, p]
 * / sw[j]) in -127..127; activations: each row of x quantised the same way
 * when the product runs, sx[r] = max|x[r, :]| / 127 (llama2.c's runq,
 * with one group per row). Then
 *     y[r, j] = sx[r] * sw[j] * sum_p qx[r, p] qw[j, p]
 * with the sum exact in 32-bit integers (|sum| <= K * 127^2 < 2^31 for
 * K < 133000, which rt_linear_packed_i8 checks). Because the integer sum
 * is exact, every kernel gives the same bits: the ISA, the tile and the
 * split never change a result.
 *
 *   VNNI  vpdpbusd multiplies 4 unsigned bytes by 4 signed bytes per lane
 *         and adds the four products to a 32-bit lane: the weights are fed
 *         as qw + 128 (unsigned) and x as it is, broadcast, and 128 * sum_p
 *         qx[r, p] (per row, computed per call) is taken off at the end.
 *         Up to 8 rows per pass, so a decode of M = 8 reads its weights
 *         once: 8 rows x 2 panels or 4 x 4, 16 accumulators.
 *   AVX2  vpmaddubsw on |qx| and qw with qx's sign moved onto qw (pairs of
 *         products stay below 2^15: 2 * 127 * 127), vpmaddwd by ones to
 *         32-bit lanes. 4 rows x 1 panel (two ymm per panel).
 *   base  the sum in C. */
#include "runtime/rt_gemm_kernels.h"

#include <string.h>

/* y[r, j] for the panels' columns [0, n) */
static inline float i8_out(int32_t sum, float sx, float sw) {
  return (float)sum * (sx * sw);
}

void rt_gemm_rows_i8_base(int64_t m, int64_t n, int64_t k, const int8_t *xq, int64_t ldq,
                          const float *sx, const uint8_t *wp, float *y, int64_t ldy) {
  const int64_t k4 = GEMM_I8_K4(k), ps = GEMM_I8_PANEL_BYTES(k);
  for (int64_t j = 0; j < n; j += GEMM_PANEL) {
    const uint8_t *panel = wp + j / GEMM_PANEL * ps;
    const int8_t *qw = (const int8_t *)panel;
    float sw[GEMM_PANEL];
    memcpy(sw, panel + k4 * GEMM_PANEL, sizeof sw);
    int cols = (int)(n - j < GEMM_PANEL ? n - j : GEMM_PANEL);
    for (int64_t r = 0; r < m; r++) {
      int32_t sum[GEMM_PANEL] = {0};
      const int8_t *x = xq + r * ldq;
      for (int64_t p = 0; p < k4; p += 4)
        for (int l = 0; l < GEMM_PANEL; l++) {
          const int8_t *w = qw + p * GEMM_PANEL + 4 * l;
          sum[l] += x[p] * w[0] + x[p + 1] * w[1] + x[p + 2] * w[2] + x[p + 3] * w[3];
        }
      for (int l = 0; l < cols; l++)
        y[r * ldy + j + l] = i8_out(sum[l], sx[r], sw[l]);
    }
  }
}

#ifdef GEMM_AVX2
#include <immintrin.h>

#define T_AVX2 __attribute__((target("avx2,fma")))
#define T_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

/* y for R rows over one panel: two ymm of 8 columns x 4 k-steps each */
#define I8_AVX2(R)                                                                                 \
  T_AVX2 static void i8_avx2_##R(int64_t k4, const int8_t *xq, int64_t ldq, const float *sx,      \
                                 const uint8_t *panel, float *y, int64_t ldy, int cols) {          \
    __m256i sum[R][2];                                                                             \
    const __m256i ones = _mm256_set1_epi16(1);                                                     \
    for (int r = 0; r < R; r++)                                                                    \
      sum[r][0] = sum[r][1] = _mm256_setzero_si256();                                              \
    for (int64_t p = 0; p < k4; p += 4) {                                                          \
      __m256i w0 = _mm256_load_si256((const __m256i *)(panel + p * 16));                           \
      __m256i w1 = _mm256_load_si256((const __m256i *)(panel + p * 16 + 32));                      \
      _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                        \
        int32_t x4;                                                                                \
        memcpy(&x4, xq + r * ldq + p, 4);                                                          \
        __m256i xb = _mm256_set1_epi32(x4), ax = _mm256_abs_epi8(xb);                              \
        __m256i p0 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(w0, xb));                           \
        __m256i p1 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(w1, xb));                           \
        sum[r][0] = _mm256_add_epi32(sum[r][0], _mm256_madd_epi16(p0, ones));                      \
        sum[r][1] = _mm256_add_epi32(sum[r][1], _mm256_madd_epi16(p1, ones));                      \
      }                                                                                            \
    }                                                                                              \
    __m256 sw0 = _mm256_loadu_ps((const float *)(const void *)(panel + k4 * 16));                  \
    __m256 sw1 = _mm256_loadu_ps((const float *)(const void *)(panel + k4 * 16) + 8);              \
    for (int r = 0; r < R; r++) {                                                                  \
      __m256 s = _mm256_set1_ps(sx[r]);                                                            \
      float out[16];                                                                               \
      _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_cvtepi32_ps(sum[r][0]), _mm256_mul_ps(s, sw0)));  \
      _mm256_storeu_ps(out + 8,                                                                    \
                       _mm256_mul_ps(_mm256_cvtepi32_ps(sum[r][1]), _mm256_mul_ps(s, sw1)));       \
      memcpy(y + r * ldy, out, sizeof(float) * (size_t)cols);                                      \
    }                                                                                              \
  }

I8_AVX2(1)
I8_AVX2(2)
I8_AVX2(3)
I8_AVX2(4)

typedef void (*I8Avx2)(int64_t k4, const int8_t *xq, int64_t ldq, const float *sx,
                       const uint8_t *panel, float *y, int64_t ldy, int cols);
static const I8Avx2 i8_avx2[4] = {i8_avx2_1, i8_avx2_2, i8_avx2_3, i8_avx2_4};

/* Panels per column block: the block stays in L2 while every group of 4
 * rows (AVX2; 8 for VNNI) passes over it (a prefill), read from memory
 * once; a
 * multiple of 4 where it can be, so the VNNI kernel's 4-panel tiles cover
 * it (21 panels at K = 768 left one for the 1-panel kernel per block). */
static int64_t i8_block_panels(int64_t k) {
  int64_t b = (256 * 1024) / GEMM_I8_PANEL_BYTES(k);
  return b < 1 ? 1 : b < 4 ? b : b / 4 * 4;
}

T_AVX2 void rt_gemm_rows_i8_avx2(int64_t m, int64_t n, int64_t k, const int8_t *xq, int64_t ldq,
                                 const float *sx, const uint8_t *wp, float *y, int64_t ldy) {
  const int64_t k4 = GEMM_I8_K4(k), ps = GEMM_I8_PANEL_BYTES(k), bp = i8_block_panels(k);
  for (int64_t j0 = 0; j0 < n; j0 += bp * GEMM_PANEL) {
    int64_t j1 = j0 + bp * GEMM_PANEL < n ? j0 + bp * GEMM_PANEL : n;
    for (int64_t r0 = 0; r0 < m; r0 += 4) {
      int r = (int)(m - r0 < 4 ? m - r0 : 4);
      for (int64_t j = j0; j < j1; j += GEMM_PANEL)
        i8_avx2[r - 1](k4, xq + r0 * ldq, ldq, sx + r0, wp + j / GEMM_PANEL * ps,
                       y + r0 * ldy + j, ldy, (int)(n - j < GEMM_PANEL ? n - j : GEMM_PANEL));
    }
  }
}

#ifdef GEMM_AVX512
/* VNNI: R rows over P panels, one zmm (16 columns x 4 k-steps) each. The
 * weights are vpdpbusd's unsigned operand, qw + 128 (one xor per panel
 * and step), and the x bytes its signed one, broadcast: per step P loads,
 * P xors, R broadcasts and R*P vpdpbusd. The sum is sum_p (qw + 128) qx
 * = sum_p qw qx + 128 xs[r], xs[r] = sum_p qx[r, p], taken off at the end
 * (all mod 2^32, so exact once the true sum fits 32 bits). With pf, each
 * step prefetches the same line of the next tile's panels into L2, as the
 * bf16 decode kernel does: the hardware prefetcher restarts at each panel
 * (12 KiB at K = 768), and without the prefetch 8 rows per pass were no
 * faster than 4 (8 x 2304 x 768, one thread: 137-167 us either way, 97-101
 * with it). For 1-4 rows (4 panels a tile) only for K <= 1024: at K =
 * 3072 the 4 extra streams made 4 x 768 x 3072 113-126 us against 100-112
 * without. */
#define I8_VNNI(R, P)                                                                              \
  T_VNNI static void i8_vnni_##R##x##P(int64_t k4, int64_t ps, const int8_t *xq, int64_t ldq,      \
                                       const float *sx, const uint32_t *xs, const uint8_t *wp,     \
                                       float *y, int64_t ldy, int64_t cols, int pf) {              \
    __m512i sum[R][P];                                                                             \
    const __m512i flip = _mm512_set1_epi8((char)0x80);                                             \
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 4") for (int v = 0; v < P; v++) sum[r][v] = _mm512_setzero_si512();    \
    for (int64_t p = 0; p < k4; p += 4) {                                                          \
      __m512i w[P];                                                                                \
      _Pragma("GCC unroll 4") for (int v = 0; v < P; v++) w[v] =                                   \
          _mm512_xor_si512(_mm512_load_si512((const void *)(wp + v * ps + p * 16)), flip);         \
      if (pf) /* the next tile's panels, to L2 */                                                  \
        _Pragma("GCC unroll 4") for (int v = 0; v < P; v++)                                        \
            GEMM_PREFETCH_L2(wp + v * ps + p * 16, P * ps);                                          \
      _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                                        \
        int32_t x4;                                                                                \
        memcpy(&x4, xq + r * ldq + p, 4);                                                          \
        __m512i xb = _mm512_set1_epi32(x4);                                                        \
        _Pragma("GCC unroll 4") for (int v = 0; v < P; v++) sum[r][v] =                            \
            _mm512_dpbusd_epi32(sum[r][v], w[v], xb);                                              \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 4") for (int v = 0; v < P; v++) {                                          \
      __m512 sw = _mm512_loadu_ps((const float *)(const void *)(wp + v * ps + k4 * 16));           \
      __mmask16 mk = cols - 16 * v >= 16  ? (__mmask16)0xffff                                      \
                     : cols - 16 * v <= 0 ? (__mmask16)0                                           \
                                          : (__mmask16)((1u << (cols - 16 * v)) - 1);              \
      _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                                        \
        __m512 s = _mm512_mul_ps(_mm512_set1_ps(sx[r]), sw);                                       \
        __m512i off = _mm512_set1_epi32((int)(xs[r] << 7));                                        \
        __m512 out = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum[r][v], off)), s);       \
        _mm512_mask_storeu_ps(y + r * ldy + 16 * v, mk, out);                                      \
      }                                                                                            \
    }                                                                                              \
  }

#define I8_VNNI_R(R, P) I8_VNNI(R, P) I8_VNNI(R, 1)
I8_VNNI_R(1, 4)
I8_VNNI_R(2, 4)
I8_VNNI_R(3, 4)
I8_VNNI_R(4, 4)
I8_VNNI_R(5, 2)
I8_VNNI_R(6, 2)
I8_VNNI_R(7, 2)
I8_VNNI_R(8, 2)

typedef void (*I8Vnni)(int64_t k4, int64_t ps, const int8_t *xq, int64_t ldq, const float *sx,
                       const uint32_t *xs, const uint8_t *wp, float *y, int64_t ldy, int64_t cols,
                       int pf);
static const I8Vnni i8_vnni_wide[8] = {i8_vnni_1x4, i8_vnni_2x4, i8_vnni_3x4, i8_vnni_4x4,
                                       i8_vnni_5x2, i8_vnni_6x2, i8_vnni_7x2, i8_vnni_8x2};
static const I8Vnni i8_vnni_one[8] = {i8_vnni_1x1, i8_vnni_2x1, i8_vnni_3x1, i8_vnni_4x1,
                                      i8_vnni_5x1, i8_vnni_6x1, i8_vnni_7x1, i8_vnni_8x1};

/* xs[r] = sum_p xq[r, p] over k4 bytes (mod 2^32), by vpdpbusd with bytes
 * of 1 as the unsigned operand: 64 bytes per instruction. */
T_VNNI static void i8_row_sums(int rows, int64_t k4, const int8_t *xq, int64_t ldq, uint32_t *xs) {
  const __m512i ones = _mm512_set1_epi8(1);
  for (int r = 0; r < rows; r++) {
    const int8_t *x = xq + r * ldq;
    __m512i acc = _mm512_setzero_si512();
    int64_t p = 0;
    for (; p + 64 <= k4; p += 64)
      acc = _mm512_dpbusd_epi32(acc, ones, _mm512_loadu_si512((const void *)(x + p)));
    if (p < k4)
      acc =
          _mm512_dpbusd_epi32(acc, ones, _mm512_maskz_loadu_epi8(~0ull >> (64 - (k4 - p)), x + p));
    xs[r] = (uint32_t)_mm512_reduce_add_epi32(acc);
  }
}

T_VNNI void rt_gemm_rows_i8_vnni(int64_t m, int64_t n, int64_t k, const int8_t *xq, int64_t ldq,
                                 const float *sx, const uint8_t *wp, float *y, int64_t ldy) {
  const int64_t k4 = GEMM_I8_K4(k), ps = GEMM_I8_PANEL_BYTES(k), bp = i8_block_panels(k);
  for (int64_t j0 = 0; j0 < n; j0 += bp * GEMM_PANEL) {
    int64_t j1 = j0 + bp * GEMM_PANEL < n ? j0 + bp * GEMM_PANEL : n;
    for (int64_t r0 = 0; r0 < m; r0 += 8) {
      int r = (int)(m - r0 < 8 ? m - r0 : 8);
      const int64_t wide = (r <= 4 ? 4 : 2) * GEMM_PANEL;
      const int pf = r > 4 || k4 <= 1024; /* see I8_VNNI */
      uint32_t xs[8];
      i8_row_sums(r, k4, xq + r0 * ldq, ldq, xs);
      int64_t j = j0;
      for (; j + wide <= j1; j += wide)
        i8_vnni_wide[r - 1](k4, ps, xq + r0 * ldq, ldq, sx + r0, xs, wp + j / GEMM_PANEL * ps,
                            y + r0 * ldy + j, ldy, wide, pf);
      for (; j < j1; j += GEMM_PANEL)
        i8_vnni_one[r - 1](k4, ps, xq + r0 * ldq, ldq, sx + r0, xs, wp + j / GEMM_PANEL * ps,
                           y + r0 * ldy + j, ldy, n - j < GEMM_PANEL ? n - j : GEMM_PANEL, pf);
    }
  }
}
#endif
#endif
