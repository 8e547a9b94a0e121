/* runtime/rt_gemm_neon.c — the NEON (AdvSIMD) kernels of the portable GEMM
 * on aarch64 (rt_gemm_kernels.h says what each computes and the packed
 * layouts).
 *
 *   micro        C[6,16] += A_p^T B_p: 24 q-register accumulators (6 rows
 *                x 4 vectors of 4 columns: one panel), 4 loads of B and 2
 *                of A (a q and a d register: the 6 floats of a k-step) per
 *                step, 24 FMAs by element (fmla v.4s, v.4s, v.s[lane]), so
 *                A needs no broadcasts; 30 of the 32 registers. 8 rows
 *                would need 32 accumulators alone and 7 rows 34 registers;
 *                4 rows would load 6 registers per 16 FMAs instead of 24.
 *   rows_p       decode on prepacked panels: each lane one output column;
 *                1 row of x passes over 4 panels, 2 rows over 2, 3-4 rows
 *                over 1 (16 accumulators at most), x read 4 k-steps at a
 *                time into one register per row and used by lane; 5-8 rows
 *                run as two passes of at most 4 rows over column blocks
 *                small enough that the second pass reads them from cache.
 *   micro_bf16   the micro tile on bf16 pair panels, A_p f32: each word
 *                widened in registers (its low half shifted left by 16 for
 *                the even k-step, the word with the low half cleared for
 *                the odd one), then the same FMAs.
 *   rows_p_bf16  decode on bf16 pair panels: 1-4 rows over one panel, x
 *                read a pair of k-steps at a time (a d register).
 *
 * Per output element: acc = fma(a, b, acc) over p in order (fused: one
 * rounding, as fmaf), then C += acc (micro) or y = acc (rows_p), wherever
 * the element lies, so splits never change results.
 *
 * NEON is part of the aarch64 architecture, so these run on every aarch64
 * CPU and need no detection; on other targets (and in the static build)
 * this file compiles to nothing. Lane numbers are literal macro arguments:
 * the intrinsics want constants before any unrolling. */
#include "runtime/rt_gemm_kernels.h"

#ifdef GEMM_NEON
#include <arm_neon.h>
#include <string.h>

#define MR GEMM_NEON_MR

_Static_assert(GEMM_NEON_MR == 6 && GEMM_NEON_NR == 16, "the NEON tile is 6 rows by one panel");

/* acc[i][0..3] += b[0..3] * v[lane], v a q register (laneq) or d register */
#define FMA_ROW_Q(i, v, lane)                                                                      \
  _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) acc[i][u] =                                  \
      vfmaq_laneq_f32(acc[i][u], bv[u], v, lane)
#define FMA_ROW_D(i, v, lane)                                                                      \
  _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) acc[i][u] =                                  \
      vfmaq_lane_f32(acc[i][u], bv[u], v, lane)

/* C[mr, nr] (ldc) += acc, the whole tile with vector adds, a partial one
 * through a buffer (the same one addition per element either way); a
 * macro, as a function taking acc's address kept it in memory. */
#define TILE_ADD(acc, c, ldc, mr, nr)                                                              \
  do {                                                                                             \
    if ((mr) == MR && (nr) == 16) {                                                                \
      _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) {                                       \
        float *ci = (c) + i * (ldc);                                                               \
        _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++)                                        \
            vst1q_f32(ci + 4 * u, vaddq_f32(vld1q_f32(ci + 4 * u), acc[i][u]));                    \
      }                                                                                            \
      break;                                                                                       \
    }                                                                                              \
    float t[MR][16];                                                                               \
    _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                           \
        _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) vst1q_f32(t[i] + 4 * u, acc[i][u]);    \
    for (int i = 0; i < (mr); i++)                                                                 \
      for (int j = 0; j < (nr); j++)                                                               \
        (c)[i * (ldc) + j] += t[i][j];                                                             \
  } while (0)

void rt_gemm_micro_neon(int64_t kc, const float *a, const float *b, int64_t bs, float *c,
                        int64_t ldc, int mr, int nr) {
  (void)bs; /* one panel */
  float32x4_t acc[MR][4];
  _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)
      _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) acc[i][u] = vdupq_n_f32(0.0f);
  for (int64_t p = 0; p < kc; p++) {
    const float *ap = a + p * MR, *bp = b + p * 16;
    float32x4_t bv[4];
    _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) bv[u] = vld1q_f32(bp + 4 * u);
    float32x4_t a03 = vld1q_f32(ap); /* rows 0-3 */
    float32x2_t a45 = vld1_f32(ap + 4); /* rows 4-5 */
    FMA_ROW_Q(0, a03, 0);
    FMA_ROW_Q(1, a03, 1);
    FMA_ROW_Q(2, a03, 2);
    FMA_ROW_Q(3, a03, 3);
    FMA_ROW_D(4, a45, 0);
    FMA_ROW_D(5, a45, 1);
  }
  TILE_ADD(acc, c, ldc, mr, nr);
}

/* y[r, 16q + l] for R rows of x over P panels (columns: ncols of them);
 * four k-steps per iteration read one q register of x per row. */
#define ROWS_P_STEP(R, P, l)                                                                             \
  _Pragma("GCC unroll 16") for (int v = 0; v < 4 * P; v++) {                                       \
    float32x4_t w = vld1q_f32(wp + (v / 4) * ps + (p + l) * 16 + 4 * (v % 4));                     \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r][v] =                                \
        vfmaq_laneq_f32(acc[r][v], w, xv[r], l);                                                   \
  }
#define ROWS_P(R, P)                                                                               \
  static void rows_p_##R##x##P(int64_t k, const float *x, int64_t ldx, const float *wp, float *y,  \
                               int64_t ldy, int ncols) {                                           \
    float32x4_t acc[R][4 * P];                                                                     \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 16") for (int v = 0; v < 4 * P; v++) acc[r][v] = vdupq_n_f32(0.0f);    \
    const int64_t ps = k * 16;                                                                     \
    int64_t p = 0;                                                                                 \
    for (; p + 4 <= k; p += 4) {                                                                   \
      float32x4_t xv[R];                                                                           \
      _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) xv[r] = vld1q_f32(x + r * ldx + p);      \
      ROWS_P_STEP(R, P, 0)                                                                               \
      ROWS_P_STEP(R, P, 1)                                                                               \
      ROWS_P_STEP(R, P, 2)                                                                               \
      ROWS_P_STEP(R, P, 3)                                                                               \
    }                                                                                              \
    for (; p < k; p++)                                                                             \
      _Pragma("GCC unroll 16") for (int v = 0; v < 4 * P; v++) {                                   \
        float32x4_t w = vld1q_f32(wp + (v / 4) * ps + p * 16 + 4 * (v % 4));                       \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r][v] =                            \
            vfmaq_n_f32(acc[r][v], w, x[r * ldx + p]);                                             \
      }                                                                                            \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                        \
      float t[16 * P];                                                                             \
      _Pragma("GCC unroll 16") for (int v = 0; v < 4 * P; v++) vst1q_f32(t + 4 * v, acc[r][v]);    \
      memcpy(y + r * ldy, t, sizeof(float) * (size_t)ncols);                                       \
    }                                                                                              \
  }

ROWS_P(1, 4)
ROWS_P(2, 2)
ROWS_P(1, 1)
ROWS_P(2, 1)
ROWS_P(3, 1)
ROWS_P(4, 1)

typedef void (*RowsP)(int64_t k, const float *x, int64_t ldx, const float *wp, float *y,
                      int64_t ldy, int ncols);
static const RowsP rows_p_one[4] = {rows_p_1x1, rows_p_2x1, rows_p_3x1, rows_p_4x1};

/* m rows (1..4) over columns [0, n) of the panels at wp */
static void rows_p_group(int m, int64_t n, int64_t k, const float *x, int64_t ldx,
                         const float *wp, float *y, int64_t ldy) {
  int64_t j = 0;
  if (m == 1)
    for (; j + 64 <= n; j += 64)
      rows_p_1x4(k, x, ldx, wp + j * k, y + j, ldy, 64);
  if (m == 2)
    for (; j + 32 <= n; j += 32)
      rows_p_2x2(k, x, ldx, wp + j * k, y + j, ldy, 32);
  for (; j < n; j += 16)
    rows_p_one[m - 1](k, x, ldx, wp + j * k, y + j, ldy, (int)(n - j < 16 ? n - j : 16));
}

/* Column blocks of at most this many floats of panels, so that the second
 * group of rows (m > 4) reads them from L2, not memory. */
#define ROWS_P_BLOCK (256 * 1024 / 4)

void rt_gemm_rows_p_neon(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                         const float *wp, float *y, int64_t ldy) {
  if (m <= 0 || n <= 0)
    return;
  if (m <= 4) {
    rows_p_group((int)m, n, k, x, ldx, wp, y, ldy);
    return;
  }
  int64_t jb = ROWS_P_BLOCK / (k > 0 ? k : 1) & ~(int64_t)15;
  if (jb < 16)
    jb = 16;
  for (int64_t j0 = 0; j0 < n; j0 += jb) {
    int64_t cols = n - j0 < jb ? n - j0 : jb;
    rows_p_group(4, cols, k, x, ldx, wp + j0 * k, y + j0, ldy);
    rows_p_group((int)m - 4, cols, k, x + 4 * ldx, ldx, wp + j0 * k, y + 4 * ldy + j0, ldy);
  }
}

/* ---- bf16 weights (pair panels, rt_gemm_kernels.h), widened to f32 ----
 * A word's low half is the bf16 of the even k-step, its high half the odd
 * one: the f32s are the word shifted left by 16 and the word with its low
 * half cleared. */
static inline float32x4_t bf16_lo(uint32x4_t w) {
  return vreinterpretq_f32_u32(vshlq_n_u32(w, 16));
}
static inline float32x4_t bf16_hi(uint32x4_t w) {
  return vreinterpretq_f32_u32(vandq_u32(w, vdupq_n_u32(0xffff0000u)));
}

/* acc[i][u] += lo * a0[i] then += hi * a1[i]: steps 2q and 2q+1 in order */
#define PAIR_ROW_Q(i, lane)                                                                        \
  acc[i][u] = vfmaq_laneq_f32(vfmaq_laneq_f32(acc[i][u], lo, a0l, lane), hi, a1l, lane)
#define PAIR_ROW_D(i, lane)                                                                        \
  acc[i][u] = vfmaq_lane_f32(vfmaq_lane_f32(acc[i][u], lo, a0h, lane), hi, a1h, lane)

/* C[mr,nr] += A_p^T B over kc (even) steps, A_p f32, B one bf16 pair panel */
void rt_gemm_micro_bf16w_neon(int64_t kc, const void *av, const uint32_t *b, int64_t bs,
                              float *c, int64_t ldc, int mr, int nr) {
  (void)bs; /* one panel */
  const float *a = av;
  float32x4_t acc[MR][4];
  _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)
      _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) acc[i][u] = vdupq_n_f32(0.0f);
  for (int64_t q = 0; q < kc / 2; q++) {
    const float *a0 = a + 2 * q * MR, *a1 = a0 + MR; /* steps 2q, 2q+1 */
    float32x4_t a0l = vld1q_f32(a0), a1l = vld1q_f32(a1);
    float32x2_t a0h = vld1_f32(a0 + 4), a1h = vld1_f32(a1 + 4);
    _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
      uint32x4_t w = vld1q_u32(b + q * 16 + 4 * u);
      float32x4_t lo = bf16_lo(w), hi = bf16_hi(w);
      PAIR_ROW_Q(0, 0);
      PAIR_ROW_Q(1, 1);
      PAIR_ROW_Q(2, 2);
      PAIR_ROW_Q(3, 3);
      PAIR_ROW_D(4, 0);
      PAIR_ROW_D(5, 1);
    }
  }
  TILE_ADD(acc, c, ldc, mr, nr);
}

/* Decode on bf16 pair panels: R rows (1..4) over one panel, one fma chain
 * per element over p in order. */
#define ROWS_PB(R)                                                                                 \
  static void rows_pb_##R(int64_t k, const float *x, int64_t ldx, const uint32_t *wp, float *y,   \
                          int64_t ldy, int ncols) {                                                \
    float32x4_t acc[R][4];                                                                         \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                            \
        _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) acc[r][u] = vdupq_n_f32(0.0f);         \
    for (int64_t q = 0; q < k / 2; q++) {                                                          \
      float32x2_t xv[R]; /* x[r, 2q], x[r, 2q+1] */                                                \
      _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) xv[r] = vld1_f32(x + r * ldx + 2 * q);   \
      _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {                                        \
        uint32x4_t w = vld1q_u32(wp + q * 16 + 4 * u);                                             \
        float32x4_t lo = bf16_lo(w), hi = bf16_hi(w);                                              \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r][u] =                            \
            vfmaq_lane_f32(vfmaq_lane_f32(acc[r][u], lo, xv[r], 0), hi, xv[r], 1);                 \
      }                                                                                            \
    }                                                                                              \
    if (k % 2) /* the last word: its low half only */                                              \
      _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {                                        \
        float32x4_t lo = bf16_lo(vld1q_u32(wp + k / 2 * 16 + 4 * u));                              \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r][u] =                            \
            vfmaq_n_f32(acc[r][u], lo, x[r * ldx + k - 1]);                                        \
      }                                                                                            \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                        \
      float t[16];                                                                                 \
      _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) vst1q_f32(t + 4 * u, acc[r][u]);         \
      memcpy(y + r * ldy, t, sizeof(float) * (size_t)ncols);                                       \
    }                                                                                              \
  }

ROWS_PB(1)
ROWS_PB(2)
ROWS_PB(3)
ROWS_PB(4)

typedef void (*RowsPb)(int64_t k, const float *x, int64_t ldx, const uint32_t *wp, float *y,
                       int64_t ldy, int ncols);
static const RowsPb rows_pb[4] = {rows_pb_1, rows_pb_2, rows_pb_3, rows_pb_4};

void rt_gemm_rows_p_bf16_neon(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                              const uint32_t *wp, float *y, int64_t ldy) {
  if (m <= 0 || n <= 0)
    return;
  const int64_t k2 = (k + 1) / 2;
  /* 5-8 rows: two groups per panel, the second reading it from cache */
  for (int64_t j = 0; j < n; j += 16) {
    int cols = (int)(n - j < 16 ? n - j : 16);
    for (int64_t r0 = 0; r0 < m; r0 += 4) {
      int r = (int)(m - r0 < 4 ? m - r0 : 4);
      rows_pb[r - 1](k, x + r0 * ldx, ldx, wp + j * k2, y + r0 * ldy + j, ldy, cols);
    }
  }
}
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int rt_gemm_neon_unused;
#endif
