/* runtime/rt_gemm.c — the GEMM entry of compiled code (see rt_gemm.h):
 * OpenBLAS loaded at run time, or a portable cache-blocked GEMM; a
 * matrix-vector kernel for single rows; rt_linear split over the pool.
 *
 * TFMC_GEMM=portable selects the portable GEMM, TFMC_GEMM=portable-baseline
 * the same without ISA extensions (what a CPU without AVX2 runs; for tests
 * and benchmarks); TFMC_GEMM=openblas or unset, OpenBLAS when it loads (an
 * unknown word does the same and is named in rt_gemm_backend()). TFMC_GEMM_ISA
 * caps the kernel set (avx512 | avx2 | scalar; neon | scalar on aarch64)
 * below what cpuid + xgetbv allow (gemm_isa_detect).
 *
 * Backend choice happens once (pthread_once), at the first call of any entry
 * point; rt_main calls rt_gemm_backend() before it starts threads, because
 * loading OpenBLAS sets environment variables its constructor reads
 * (OPENBLAS_NUM_THREADS=1 always: tfmc's pool owns the cores;
 * OPENBLAS_CORETYPE=SkylakeX when the user did not set one and the CPU and
 * OS support AVX-512F, since OpenBLAS 0.3.21 misdetects such CPUs). Both are
 * restored to what they were once the library is loaded. If OpenBLAS still
 * picks pre-AVX kernels (openblas_get_corename: Prescott, Core2, ...) on a
 * CPU with AVX2+FMA and the user did not choose the core, it is dropped for
 * the portable GEMM, which is ~3.5x faster than those kernels.
 *
 * The portable GEMM (GotoBLAS loop order):
 *   for jc over N by NC:        B block  (KC x NC) packed, lives in L3
 *     for pc over K by KC:
 *       pack op(B)[pc.., jc..] into NR-column panels (zero-padded)
 *       for ic over M by MC:    A block  (MC x KC) packed, lives in L2
 *                               (a last block under MC/4 rows joins the one
 *                               before it: gemm_block_rows)
 *         pack alpha*op(A)[ic.., pc..] into MR-row panels (zero-padded)
 *         for jr (B panel, in L1), for ir (A panel): C[MR,NR] += A_p B_p
 * C is scaled by beta once first (beta == 0 stores zeros, so NaNs in C
 * vanish, as BLAS does). B is packed in panels of 16 columns for every
 * kernel set (rt_gemm_kernels.h); a linear's weights may come prepacked
 * in that layout over all of K (rt_gemm_pack, rt_linear_packed: the
 * pack-weights pass), and then only A is packed. The baseline
 * micro-kernel is plain C that the compiler vectorises (a 4x16 tile); on
 * x86 the AVX2+FMA set (rt_gemm_avx2.c, a 6x16 intrinsics tile), on
 * x86-64 the AVX-512F set (rt_gemm_avx512.c, 6x64: four panels) and on
 * aarch64 the NEON set (rt_gemm_neon.c, 6x16) come beside it; the set (GemmKernels) carries its tile, and packing A
 * follows it. Packing buffers are per thread (pthread key, freed at thread
 * exit), so nothing is allocated on the hot path after the first call.
 *
 * rt_linear with M <= 8 (GEMM_DECODE_ROWS) takes the decode path: the
 * set's rows kernel over blocks of w that stay in L1 while all M rows of x
 * pass, so w streams from memory once and nothing is packed (bf16 weights
 * on a set with rows_p_bf16x: x rounded to bf16 pairs once, in
 * linear_run); the pool splits the columns. Whether a product takes it depends on its M only,
 * never on how it is split, so splits still give the same bits.
 *
 * The static build (-DTFMC_STATIC, runtime/rt_static.c: what `tfmc emit-c
 * --static` compiles for hosts without an OS) keeps the baseline kernels
 * only, chosen at compile time: no BLAS, no cpuid, no threads, no heap and
 * no mutable global; rt_linear takes the decode path's row kernels for
 * every M (they need no packing buffers), and the packing entry points
 * fall back to the unblocked loop (rt_attention does not reach them there).
 *
 * Invariants: every entry point is correct for any m, n, k >= 0, either
 * transpose and any leading dimensions >= the row length; op(A), op(B) are
 * only read, C only inside its M x N window. */
#include "runtime/rt_gemm.h"
#include "runtime/rt_act.h"
#include "runtime/rt_gemm_kernels.h"

#if defined(TFMC_STATIC) && !defined(TFMC_NO_BLAS)
#define TFMC_NO_BLAS 1
#endif
#ifndef TFMC_NO_BLAS
#include <dlfcn.h>
#endif
#include <math.h>
#ifndef TFMC_STATIC
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#endif
#include <string.h>

/* The C kernels' register tile (MR x NR) is what their micro-kernel is
 * written for (each kernel set says its own: GemmKernels.mr, .nr). The
 * cache blocks MC, KC, NC of rt_linear are its caller's (the tile pass
 * chooses them from the target's caches: passes/tile.c); these are the
 * ones rt_sgemm uses and what rt_linear takes for values below 1. KC is
 * the same for every kernel set. */
#define GEMM_MR 4
#define GEMM_NR 16   /* one panel (GEMM_PANEL) */
#define GEMM_MC 128  /* rounded down to a multiple of a set's MR */
#define GEMM_KC 384  /* at most; K is cut into equal blocks (multiples of 8) */
#define GEMM_NC 2016 /* rounded down to a multiple of a set's NR */
/* What rt_linear accepts of its caller's blocks (larger ones are clamped:
 * a block is a per-thread packing buffer, mc x kc and kc x nc floats) */
#define GEMM_MC_MAX 4096
#define GEMM_KC_MAX 8192
#define GEMM_NC_MAX 65536
#define GEMV_NB 64               /* columns per register block in the no-transpose gemv */
#define DECODE_BYTES (24 * 1024) /* w rows per decode block: about this much of L1 */

/* rt_linear's column blocks are multiples of this (a multiple of 16 for
 * BLAS kernels and of NR for ours), so only the last block is ragged. How
 * finely a product is split (task_macs, split_macs) is the caller's. */
#define LINEAR_COL_UNIT 48

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(TFMC_STATIC)
#define GEMM_X86 1
#include <cpuid.h>
#endif

/* ---- the kernels, instantiated per ISA ---- */

/* MADD(a, b, c) = a*b + c; fmaf only where it is one instruction (ISO C
 * mode does not contract a*b+c on its own). */
#ifdef FP_FAST_FMAF
#define MADD_BASE(a, b, c) fmaf(a, b, c)
#else
#define MADD_BASE(a, b, c) ((a) * (b) + (c))
#endif
#define MADD_FMA(a, b, c) fmaf(a, b, c)

/* The baseline micro-kernel: C[mr,nr] (ldc) += A_p[kc,MR]^T B_p[kc,NR]
 * where A_p and B_p are packed panels (one panel of B: NR = GEMM_PANEL);
 * mr <= MR and nr <= NR say how much of the tile is real. The compiler
 * vectorises it for the target's base ISA. */
static void gemm_micro_base(int64_t kc, const float *restrict a, const float *restrict b,
                            int64_t bs, float *restrict c, int64_t ldc, int mr, int nr) {
  (void)bs; /* one panel */
  float acc[GEMM_MR][GEMM_NR] = {{0}};
  for (int64_t p = 0; p < kc; p++) {
    const float *bp = b + p * GEMM_NR, *ap = a + p * GEMM_MR;
    _Pragma("GCC unroll 8") for (int i = 0; i < GEMM_MR; i++) {
      float ai = ap[i];
      _Pragma("GCC unroll 32") for (int j = 0; j < GEMM_NR; j++) acc[i][j] =
          MADD_BASE(ai, bp[j], acc[i][j]);
    }
  }
  if (mr == GEMM_MR && nr == GEMM_NR) {
    _Pragma("GCC unroll 8") for (int i = 0; i < GEMM_MR; i++)
        _Pragma("GCC unroll 32") for (int j = 0; j < GEMM_NR; j++) c[i * ldc + j] += acc[i][j];
  } else { /* constant indices, so acc can stay in registers through the loop */
    _Pragma("GCC unroll 8") for (int i = 0; i < GEMM_MR; i++)
        _Pragma("GCC unroll 32") for (int j = 0; j < GEMM_NR; j++) if (i < mr && j < nr)
            c[i * ldc + j] += acc[i][j];
  }
}

/* Per ISA:
 * gemv_t: y[j] = alpha * dot(x[0..k), w[j*ldw..]) + beta*y[j] for j < n.
 * gemv_n: y[j] = alpha * sum_p x[p] b[p*ldb + j] + beta*y[j] for j < n.
 * rows:   the decode path on unpacked w (rt_gemm_kernels.h). */
#define GEMM_DEFINE_KERNELS(SUFFIX, ATTR, MADD)                                                    \
  ATTR static void gemv_t_##SUFFIX(int64_t n, int64_t k, float alpha, const float *restrict x,     \
                                   const float *restrict w, int64_t ldw, float beta,               \
                                   float *restrict y) {                                            \
    int64_t j = 0, k16 = k & ~(int64_t)15;                                                         \
    for (; j + 4 <= n; j += 4) { /* four rows share each load of x */                              \
      const float *w0 = w + j * ldw, *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;               \
      float s0[16] = {0}, s1[16] = {0}, s2[16] = {0}, s3[16] = {0};                                \
      for (int64_t p = 0; p < k16; p += 16) {                                                      \
        _Pragma("GCC unroll 16") for (int l = 0; l < 16; l++) {                                    \
          float xv = x[p + l];                                                                     \
          s0[l] = MADD(xv, w0[p + l], s0[l]);                                                      \
          s1[l] = MADD(xv, w1[p + l], s1[l]);                                                      \
          s2[l] = MADD(xv, w2[p + l], s2[l]);                                                      \
          s3[l] = MADD(xv, w3[p + l], s3[l]);                                                      \
        }                                                                                          \
      }                                                                                            \
      float t0 = 0, t1 = 0, t2 = 0, t3 = 0;                                                        \
      for (int l = 0; l < 16; l++) {                                                               \
        t0 += s0[l];                                                                               \
        t1 += s1[l];                                                                               \
        t2 += s2[l];                                                                               \
        t3 += s3[l];                                                                               \
      }                                                                                            \
      for (int64_t p = k16; p < k; p++) {                                                          \
        t0 = MADD(x[p], w0[p], t0);                                                                \
        t1 = MADD(x[p], w1[p], t1);                                                                \
        t2 = MADD(x[p], w2[p], t2);                                                                \
        t3 = MADD(x[p], w3[p], t3);                                                                \
      }                                                                                            \
      float t[4] = {t0, t1, t2, t3};                                                               \
      for (int r = 0; r < 4; r++)                                                                  \
        y[j + r] = beta == 0 ? alpha * t[r] : alpha * t[r] + beta * y[j + r];                      \
    }                                                                                              \
    for (; j < n; j++) {                                                                           \
      const float *w0 = w + j * ldw;                                                               \
      float s0[16] = {0}, t0 = 0;                                                                  \
      for (int64_t p = 0; p < k16; p += 16) {                                                      \
        _Pragma("GCC unroll 16") for (int l = 0; l < 16; l++) s0[l] =                              \
            MADD(x[p + l], w0[p + l], s0[l]);                                                      \
      }                                                                                            \
      for (int l = 0; l < 16; l++)                                                                 \
        t0 += s0[l];                                                                               \
      for (int64_t p = k16; p < k; p++)                                                            \
        t0 = MADD(x[p], w0[p], t0);                                                                \
      y[j] = beta == 0 ? alpha * t0 : alpha * t0 + beta * y[j];                                    \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  ATTR static void gemv_n_##SUFFIX(int64_t n, int64_t k, float alpha, const float *restrict x,     \
                                   const float *restrict b, int64_t ldb, float beta,               \
                                   float *restrict y) {                                            \
    int64_t j = 0;                                                                                 \
    for (; j + GEMV_NB <= n; j += GEMV_NB) {                                                       \
      float acc[GEMV_NB] = {0};                                                                    \
      for (int64_t p = 0; p < k; p++) {                                                            \
        float xv = x[p];                                                                           \
        const float *bp = b + p * ldb + j;                                                         \
        _Pragma("GCC unroll 64") for (int l = 0; l < GEMV_NB; l++) acc[l] =                        \
            MADD(xv, bp[l], acc[l]);                                                               \
      }                                                                                            \
      for (int l = 0; l < GEMV_NB; l++)                                                            \
        y[j + l] = beta == 0 ? alpha * acc[l] : alpha * acc[l] + beta * y[j + l];                  \
    }                                                                                              \
    if (j < n) {                                                                                   \
      int64_t r = n - j;                                                                           \
      float acc[GEMV_NB] = {0};                                                                    \
      for (int64_t p = 0; p < k; p++) {                                                            \
        float xv = x[p];                                                                           \
        const float *bp = b + p * ldb + j;                                                         \
        for (int64_t l = 0; l < r; l++)                                                            \
          acc[l] = MADD(xv, bp[l], acc[l]);                                                        \
      }                                                                                            \
      for (int64_t l = 0; l < r; l++)                                                              \
        y[j + l] = beta == 0 ? alpha * acc[l] : alpha * acc[l] + beta * y[j + l];                  \
    }                                                                                              \
  }                                                                                                \
                                                                                                   \
  /* decode: gemv_t per row of x over blocks of w rows that stay in L1, so                         \
   * w streams from memory once and each y[i, j] is gemv_t's value */                              \
  ATTR static void gemm_rows_##SUFFIX(int64_t m, int64_t n, int64_t k, const float *x,             \
                                      int64_t ldx, const float *w, int64_t ldw, float *y,          \
                                      int64_t ldy) {                                               \
    int64_t jb = DECODE_BYTES / (4 * (k > 0 ? k : 1)) & ~(int64_t)3;                               \
    if (jb < 4)                                                                                    \
      jb = 4;                                                                                      \
    for (int64_t j0 = 0; j0 < n; j0 += jb)                                                         \
      for (int64_t i = 0; i < m; i++)                                                              \
        gemv_t_##SUFFIX(n - j0 < jb ? n - j0 : jb, k, 1.0f, x + i * ldx, w + j0 * ldw, ldw, 0.0f,  \
                        y + i * ldy + j0);                                                         \
  }

GEMM_DEFINE_KERNELS(base, , MADD_BASE)
#ifdef GEMM_X86
GEMM_DEFINE_KERNELS(avx2, __attribute__((target("avx2,fma"))), MADD_FMA)
#endif

/* Decode on prepacked panels, the portable way: y[r, 16q + l] = one MADD
 * chain over p in order, all m rows over one panel at a time (the panel
 * streams from memory once; the compiler vectorises the 16 lanes). */
static void gemm_rows_p_base(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                             const float *wp, float *y, int64_t ldy) {
  for (int64_t j = 0; j < n; j += GEMM_PANEL) {
    const float *w = wp + j * k;
    int cols = (int)(n - j < GEMM_PANEL ? n - j : GEMM_PANEL);
    /* up to 8 rows per pass (the static build sends every M here) */
    for (int64_t r0 = 0; r0 < m; r0 += GEMM_DECODE_ROWS) {
      int64_t rows = m - r0 < GEMM_DECODE_ROWS ? m - r0 : GEMM_DECODE_ROWS;
      const float *xr0 = x + r0 * ldx;
      float acc[GEMM_DECODE_ROWS][GEMM_PANEL] = {{0}};
      for (int64_t p = 0; p < k; p++)
        for (int64_t r = 0; r < rows; r++) {
          float xr = xr0[r * ldx + p];
          _Pragma("GCC unroll 16") for (int l = 0; l < GEMM_PANEL; l++) acc[r][l] =
              MADD_BASE(xr, w[p * GEMM_PANEL + l], acc[r][l]);
        }
      for (int64_t r = 0; r < rows; r++)
        memcpy(y + (r0 + r) * ldy + j, acc[r], sizeof(float) * (size_t)cols);
    }
  }
}

/* bf16 weights, the portable way: each word widened to its two f32s (the
 * low half shifted up for step 2q, the word with its low half cleared for
 * 2q+1), then the f32 tile; A_p f32. */
static inline float bf16_word_lo(uint32_t w) {
  union {
    uint32_t u;
    float f;
  } v = {w << 16};
  return v.f;
}
static inline float bf16_word_hi(uint32_t w) {
  union {
    uint32_t u;
    float f;
  } v = {w & 0xffff0000u};
  return v.f;
}

static void gemm_micro_bf16_base(int64_t kc, const void *av, const uint32_t *restrict b,
                                 int64_t bs, float *restrict c, int64_t ldc, int mr, int nr) {
  (void)bs; /* one panel */
  const float *a = av;
  float acc[GEMM_MR][GEMM_NR] = {{0}};
  for (int64_t q = 0; q < kc / 2; q++) {
    const uint32_t *bq = b + q * GEMM_PANEL;
    const float *a0 = a + 2 * q * GEMM_MR, *a1 = a0 + GEMM_MR;
    float lo[GEMM_NR], hi[GEMM_NR];
    for (int j = 0; j < GEMM_NR; j++) {
      lo[j] = bf16_word_lo(bq[j]);
      hi[j] = bf16_word_hi(bq[j]);
    }
    _Pragma("GCC unroll 8") for (int i = 0; i < GEMM_MR; i++) {
      _Pragma("GCC unroll 16") for (int j = 0; j < GEMM_NR; j++) {
        acc[i][j] = MADD_BASE(a0[i], lo[j], acc[i][j]);
        acc[i][j] = MADD_BASE(a1[i], hi[j], acc[i][j]);
      }
    }
  }
  _Pragma("GCC unroll 8") for (int i = 0; i < GEMM_MR; i++)
      _Pragma("GCC unroll 32") for (int j = 0; j < GEMM_NR; j++) if (i < mr && j < nr)
          c[i * ldc + j] += acc[i][j];
}

/* Decode on bf16 pair panels: one MADD chain per element over p in order. */
static void gemm_rows_p_bf16_base(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                                  const uint32_t *wp, float *y, int64_t ldy) {
  const int64_t k2 = (k + 1) / 2;
  for (int64_t j = 0; j < n; j += GEMM_PANEL) {
    const uint32_t *w = wp + j * k2;
    int cols = (int)(n - j < GEMM_PANEL ? n - j : GEMM_PANEL);
    for (int64_t r0 = 0; r0 < m; r0 += GEMM_DECODE_ROWS) {
      int64_t rows = m - r0 < GEMM_DECODE_ROWS ? m - r0 : GEMM_DECODE_ROWS;
      const float *xr0 = x + r0 * ldx;
      float acc[GEMM_DECODE_ROWS][GEMM_PANEL] = {{0}};
      for (int64_t p = 0; p < k; p++) {
        const uint32_t *wq = w + p / 2 * GEMM_PANEL;
        float wv[GEMM_PANEL];
        for (int l = 0; l < GEMM_PANEL; l++)
          wv[l] = p % 2 ? bf16_word_hi(wq[l]) : bf16_word_lo(wq[l]);
        for (int64_t r = 0; r < rows; r++) {
          float xr = xr0[r * ldx + p];
          _Pragma("GCC unroll 16") for (int l = 0; l < GEMM_PANEL; l++) acc[r][l] =
              MADD_BASE(xr, wv[l], acc[r][l]);
        }
      }
      for (int64_t r = 0; r < rows; r++)
        memcpy(y + (r0 + r) * ldy + j, acc[r], sizeof(float) * (size_t)cols);
    }
  }
}

static const GemmKernels kernels_base = {
    .isa = "baseline", .mr = GEMM_MR, .nr = GEMM_NR, .mc = GEMM_MC, .nc = GEMM_NC,
    .micro = gemm_micro_base, .gemv_t = gemv_t_base, .gemv_n = gemv_n_base,
    .rows = gemm_rows_base, .rows_p = gemm_rows_p_base, .micro_bf16 = gemm_micro_bf16_base,
    .rows_p_bf16 = gemm_rows_p_bf16_base, .rows_p_bf16x = NULL, .rows_i8 = rt_gemm_rows_i8_base};
#ifdef GEMM_X86
/* no micro_a: on Zen 3 (AVX2 only, 2 threads) the GEMM runs faster on x
 * packed (prepack_x) than on its six rows broadcast in place, 5-12% at
 * M >= 128 with the tile pass's kc 1024 and with kc 512 (6 row streams
 * against one); a tie at M = 16-32. The AVX-512 sets keep theirs. */
static const GemmKernels kernels_avx2 = {
    .isa = "avx2+fma", .mr = GEMM_AVX2_MR, .nr = GEMM_AVX2_NR,
    .mc = GEMM_MC / GEMM_AVX2_MR * GEMM_AVX2_MR, .nc = GEMM_NC / GEMM_AVX2_NR * GEMM_AVX2_NR,
    .micro = rt_gemm_micro_avx2, .gemv_t = gemv_t_avx2,
    .gemv_n = gemv_n_avx2,
    .rows = gemm_rows_avx2, .rows_p = rt_gemm_rows_p_avx2, .micro_bf16 = rt_gemm_micro_bf16w_avx2,
    .widen_bf16 = rt_gemm_widen_bf16_avx2,
    .rows_p_bf16 = rt_gemm_rows_p_bf16_avx2, .rows_p_bf16x = NULL,
    .rows_i8 = rt_gemm_rows_i8_avx2};
#endif
#ifdef GEMM_AVX512
/* the single-row sgemm kernels stay AVX2: they are bound by memory. The
 * decode path on bf16 weights widens them (no rounding of x). */
static const GemmKernels kernels_avx512 = {
    .isa = "avx512f", .mr = GEMM_AVX512_MR, .nr = GEMM_AVX512_NR,
    .mc = GEMM_MC / GEMM_AVX512_MR * GEMM_AVX512_MR,
    .nc = GEMM_NC / GEMM_AVX512_NR * GEMM_AVX512_NR, .micro = rt_gemm_micro_avx512,
    .micro_a = rt_gemm_micro_a_avx512,
    .gemv_t = gemv_t_avx2, .gemv_n = gemv_n_avx2, .rows = rt_gemm_rows_avx512,
    .rows_p = rt_gemm_rows_p_avx512, .micro_bf16 = rt_gemm_micro_bf16w_avx512,
    .rows_p_bf16 = rt_gemm_rows_p_bf16_avx512, .rows_p_bf16x = NULL,
    .rows_i8 = rt_gemm_rows_i8_avx2};
/* AVX512_BF16: the same, but products on bf16 weights run vdpbf16ps on x
 * rounded to bf16 (packed as A_h; the decode path's X_h) */
static const GemmKernels kernels_avx512bf16 = {
    .isa = "avx512f+bf16", .mr = GEMM_AVX512_MR, .nr = GEMM_AVX512_NR,
    .mc = GEMM_MC / GEMM_AVX512_MR * GEMM_AVX512_MR,
    .nc = GEMM_NC / GEMM_AVX512_NR * GEMM_AVX512_NR, .micro = rt_gemm_micro_avx512,
    .micro_a = rt_gemm_micro_a_avx512,
    .gemv_t = gemv_t_avx2, .gemv_n = gemv_n_avx2, .rows = rt_gemm_rows_avx512,
    .rows_p = rt_gemm_rows_p_avx512, .micro_bf16 = rt_gemm_micro_bf16dp_avx512, .a_bf16 = 1,
    .rows_p_bf16 = rt_gemm_rows_p_bf16_avx512, .rows_p_bf16x = rt_gemm_rows_p_bf16dp_avx512,
    .rows_i8 = rt_gemm_rows_i8_avx2};
#endif
#ifdef GEMM_NEON
/* aarch64: NEON micro and decode kernels; the single-row sgemm kernels,
 * the decode path on unpacked weights and int8 stay the (vectorised) C ones */
static const GemmKernels kernels_neon = {
    .isa = "neon", .mr = GEMM_NEON_MR, .nr = GEMM_NEON_NR,
    .mc = GEMM_MC / GEMM_NEON_MR * GEMM_NEON_MR, .nc = GEMM_NC / GEMM_NEON_NR * GEMM_NEON_NR,
    .micro = rt_gemm_micro_neon, .gemv_t = gemv_t_base, .gemv_n = gemv_n_base,
    .rows = gemm_rows_base, .rows_p = rt_gemm_rows_p_neon, .micro_bf16 = rt_gemm_micro_bf16w_neon,
    .rows_p_bf16 = rt_gemm_rows_p_bf16_neon, .rows_p_bf16x = NULL,
    .rows_i8 = rt_gemm_rows_i8_base};
#endif

/* ---- backend selection ---- */

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
typedef void (*CblasSgemm32)(int order, int ta, int tb, int m, int n, int k, float alpha,
                             const float *a, int lda, const float *b, int ldb, float beta, float *c,
                             int ldc);
typedef void (*CblasSgemm64)(int order, int ta, int tb, int64_t m, int64_t n, int64_t k,
                             float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                             float beta, float *c, int64_t ldc);

typedef struct GemmBackend {
  const GemmKernels *k;
  /* int8 products: the set's kernel, or VNNI's where an AVX-512 set runs
   * on a CPU with AVX512_VNNI and AVX512BW (the same bits either way) */
  void (*rows_i8)(int64_t m, int64_t n, int64_t k, const int8_t *xq, int64_t ldq,
                  const float *sx, const uint8_t *wp, float *y, int64_t ldy);
  void *blas_handle;
  CblasSgemm32 sgemm32; /* exactly one of these is set when BLAS is in use */
  CblasSgemm64 sgemm64;
  char name[256];
} GemmBackend;

#ifdef TFMC_STATIC
/* fixed at compile time: nothing to choose, nothing written */
#define GEMM_ROWS_ONLY 1
static const GemmBackend gemm = {&kernels_base, rt_gemm_rows_i8_base, NULL, NULL, NULL,
                                 "portable (baseline kernels; static build)"};

static void gemm_ensure_init(void) {}

const char *rt_gemm_backend(void) {
  return gemm.name;
}

int rt_gemm_lanes(void) {
  return 1;
}
#else
#define GEMM_ROWS_ONLY 0
static GemmBackend gemm;

static pthread_once_t gemm_once = PTHREAD_ONCE_INIT;

/* The kernel sets, narrowest first (NEON, aarch64's, beside the x86
 * ones: gemm_isa_runs); TFMC_GEMM_ISA names one by these words to cap
 * what the CPU would get. */
typedef enum GemmIsa {
  GEMM_ISA_BASELINE,
  GEMM_ISA_NEON,
  GEMM_ISA_AVX2,
  GEMM_ISA_AVX512,
  GEMM_ISA_AVX512_BF16,
  GEMM_ISA_COUNT
} GemmIsa;
static const char *const gemm_isa_words[GEMM_ISA_COUNT] = {"baseline", "neon", "avx2", "avx512",
                                                           "avx512bf16"};

/* The widest set this CPU and its OS can run: cpuid says what the CPU
 * has, XCR0 (xgetbv) which register state the OS saves on a context
 * switch (ymm: bits 1-2; zmm: also opmask and both zmm halves, bits 5-7).
 * A CPU with AVX-512F under an OS that does not save zmm gets AVX2. */
static GemmIsa gemm_isa_detect(void) {
#ifdef GEMM_X86
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return GEMM_ISA_BASELINE;
  int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
  if (!osxsave || !avx || __get_cpuid_max(0, NULL) < 7)
    return GEMM_ISA_BASELINE;
  unsigned xcr0_lo, xcr0_hi;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  (void)xcr0_hi;
  __cpuid_count(7, 0, a, b, c, d);
  int avx2 = (b >> 5) & 1, avx512f = (b >> 16) & 1;
  if (!avx2 || !fma || (xcr0_lo & 0x6) != 0x6)
    return GEMM_ISA_BASELINE;
#ifdef GEMM_AVX512
  if (avx512f && (xcr0_lo & 0xe6) == 0xe6) {
    /* AVX512_BF16: leaf 7, subleaf 1, EAX bit 5 */
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    if (a >= 1)
      __cpuid_count(7, 1, a1, b1, c1, d1);
    (void)b1, (void)c1, (void)d1;
    return (a1 >> 5) & 1 ? GEMM_ISA_AVX512_BF16 : GEMM_ISA_AVX512;
  }
#else
  (void)avx512f;
#endif
  return GEMM_ISA_AVX2;
#elif defined(GEMM_NEON)
  return GEMM_ISA_NEON; /* architectural on aarch64 */
#else
  return GEMM_ISA_BASELINE;
#endif
}

/* Whether a machine whose widest set is have runs the set want: baseline
 * everywhere, NEON on aarch64 only, an x86 set on x86 up to have. */
static int gemm_isa_runs(GemmIsa want, GemmIsa have) {
  if (want == GEMM_ISA_BASELINE || want == have)
    return 1;
  if (want == GEMM_ISA_NEON || have == GEMM_ISA_NEON)
    return 0;
  return want <= have;
}

static const GemmKernels *gemm_kernels_for(GemmIsa isa) {
  switch (isa) {
  case GEMM_ISA_AVX512_BF16:
#ifdef GEMM_AVX512
    return &kernels_avx512bf16;
#endif
    /* fall through */
  case GEMM_ISA_AVX512:
#ifdef GEMM_AVX512
    return &kernels_avx512;
#endif
    /* fall through (only detected where it is built) */
  case GEMM_ISA_AVX2:
#ifdef GEMM_X86
    return &kernels_avx2;
#endif
    /* fall through */
  case GEMM_ISA_NEON:
#ifdef GEMM_NEON
    return &kernels_neon;
#endif
    /* fall through */
  case GEMM_ISA_BASELINE:
  case GEMM_ISA_COUNT: break;
  }
  return &kernels_base;
}

#ifndef TFMC_NO_BLAS
/* Looks a symbol up without a data-pointer-to-function-pointer cast. */
static void dl_fn(void *h, const char *name, void *fnptr, size_t size) {
  void *sym = dlsym(h, name);
  if (sym)
    memcpy(fnptr, &sym, size);
}

/* Sets var=value for the library's constructor; remembers the old value. */
static void env_push(const char *var, const char *value, char **saved, int *had) {
  const char *old = getenv(var);
  *had = old != NULL;
  *saved = old ? strdup(old) : NULL;
  setenv(var, value, 1);
}

static void env_pop(const char *var, char *saved, int had) {
  if (had && saved)
    setenv(var, saved, 1);
  else if (!had)
    unsetenv(var);
  free(saved);
}

/* OpenBLAS core names whose kernels predate AVX (its fallbacks for CPUs it
 * does not know). */
static int core_is_pre_avx(const char *core) {
  static const char *const weak[] = {"Prescott",  "Core2",  "Penryn",  "Dunnington",
                                     "Nehalem",   "Atom",   "Katmai",  "Coppermine",
                                     "Northwood", "Banias", "Opteron", "Opteron_SSE3",
                                     "Barcelona", "Bobcat", "Nano"};
  for (size_t i = 0; i < sizeof weak / sizeof weak[0]; i++)
    if (strcmp(core, weak[i]) == 0)
      return 1;
  return 0;
}

static int gemm_load_openblas(char *why, size_t whylen) {
  static const char *const libs[] = {"libopenblas.so.0", "libopenblas.so", "libopenblas.dylib"};
  char *saved_threads = NULL, *saved_core = NULL;
  int had_threads = 0, had_core = 0, set_core = 0;
  int user_core = getenv("OPENBLAS_CORETYPE") != NULL;
  env_push("OPENBLAS_NUM_THREADS", "1", &saved_threads, &had_threads);
  if (!user_core && gemm_isa_detect() >= GEMM_ISA_AVX512) {
    env_push("OPENBLAS_CORETYPE", "SkylakeX", &saved_core, &had_core);
    set_core = 1;
  }
  void *h = NULL;
  for (size_t i = 0; i < sizeof libs / sizeof libs[0] && !h; i++)
    h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
  env_pop("OPENBLAS_NUM_THREADS", saved_threads, had_threads);
  if (set_core)
    env_pop("OPENBLAS_CORETYPE", saved_core, had_core);
  if (!h) {
    snprintf(why, whylen, "no OpenBLAS found");
    return 1;
  }
  void *sgemm = NULL;
  dl_fn(h, "cblas_sgemm", &sgemm, sizeof sgemm);
  if (!sgemm) {
    snprintf(why, whylen, "OpenBLAS has no cblas_sgemm");
    dlclose(h);
    return 1;
  }
  void (*set_threads)(int) = NULL;
  char *(*corename)(void) = NULL, *(*config)(void) = NULL;
  dl_fn(h, "openblas_set_num_threads", &set_threads, sizeof set_threads);
  dl_fn(h, "openblas_get_corename", &corename, sizeof corename);
  dl_fn(h, "openblas_get_config", &config, sizeof config);
  if (set_threads)
    set_threads(1);
  const char *core = corename ? corename() : NULL;
  if (core && !user_core && gemm_isa_detect() >= GEMM_ISA_AVX2 && core_is_pre_avx(core)) {
    /* OpenBLAS did not recognise this CPU: its SSE kernels run at a quarter
     * of the speed of our AVX2 ones (measured: Prescott 20 GFLOP/s, ours 70,
     * Zen 87 at M=128 N=K=768). */
    snprintf(why, whylen, "OpenBLAS chose SSE-era kernels (core %s) for this AVX2 CPU", core);
    dlclose(h);
    return 1;
  }
  const char *cfg = config ? config() : NULL;
  if (cfg && strstr(cfg, "USE64BITINT"))
    memcpy(&gemm.sgemm64, &sgemm, sizeof sgemm);
  else
    memcpy(&gemm.sgemm32, &sgemm, sizeof sgemm);
  gemm.blas_handle = h;
  snprintf(gemm.name, sizeof gemm.name, "openblas (core %s%s; %s kernels for few rows)",
           core ? core : "unknown", set_core ? ", coretype SkylakeX set by tfmc" : "", gemm.k->isa);
  return 0;
}
#else
/* Built with TFMC_NO_BLAS: no dlopen at all, the portable GEMM only. */
static int gemm_load_openblas(char *why, size_t whylen) {
  snprintf(why, whylen, "built without BLAS (TFMC_NO_BLAS)");
  return 1;
}
#endif

/* The kernel set: the widest the machine runs, capped by TFMC_GEMM_ISA
 * (avx512 | avx2 | neon | baseline, or scalar for baseline) so that one machine
 * can test and time every path; a cap above what the machine runs, or an
 * unknown word, changes nothing and is noted in note. */
static GemmIsa gemm_isa_choose(char *note, size_t notelen) {
  GemmIsa isa = gemm_isa_detect();
  const char *cap = getenv("TFMC_GEMM_ISA");
  note[0] = 0;
  if (!cap || !*cap)
    return isa;
  int want = -1;
  for (int i = 0; i < GEMM_ISA_COUNT; i++)
    if (strcmp(cap, gemm_isa_words[i]) == 0)
      want = i;
  if (strcmp(cap, "scalar") == 0)
    want = GEMM_ISA_BASELINE;
  if (strcmp(cap, "avx512f") == 0)
    want = GEMM_ISA_AVX512;
  if (want < 0)
    snprintf(note, notelen, ", TFMC_GEMM_ISA=%.16s unknown", cap);
  else if (!gemm_isa_runs((GemmIsa)want, isa))
    snprintf(note, notelen, ", TFMC_GEMM_ISA=%.16s not supported here", cap);
  else
    isa = (GemmIsa)want;
  return isa;
}

#ifdef GEMM_AVX512
/* AVX512_VNNI and AVX512BW (leaf 7: ECX bit 11, EBX bit 30). Only where
 * it is called: elsewhere an unused static function breaks -Werror
 * builds (aarch64). */
static int gemm_has_vnni(void) {
  unsigned a, b, c, d;
  if (__get_cpuid_max(0, NULL) < 7)
    return 0;
  __cpuid_count(7, 0, a, b, c, d);
  return (c >> 11) & 1 && (b >> 30) & 1;
}
#endif

static void gemm_init(void) {
  char isa_note[128];
  GemmIsa isa = gemm_isa_choose(isa_note, sizeof isa_note);
  gemm.k = gemm_kernels_for(isa);
  gemm.rows_i8 = gemm.k->rows_i8;
#ifdef GEMM_AVX512
  if (isa >= GEMM_ISA_AVX512 && gemm_has_vnni())
    gemm.rows_i8 = rt_gemm_rows_i8_vnni;
#endif
  const char *want = getenv("TFMC_GEMM");
  char why[128] = "";
  if (want && strcmp(want, "portable-baseline") == 0) { /* what a CPU without AVX2 runs */
    gemm.k = &kernels_base;
    gemm.rows_i8 = kernels_base.rows_i8;
    snprintf(why, sizeof why, "TFMC_GEMM=portable-baseline");
  } else if (want && strcmp(want, "portable") == 0) {
    snprintf(why, sizeof why, "TFMC_GEMM=portable");
  } else {
    if (want && *want && strcmp(want, "openblas") != 0) /* a typo must not pass for a choice */
      snprintf(isa_note + strlen(isa_note), sizeof isa_note - strlen(isa_note),
               ", TFMC_GEMM=%.16s unknown", want);
    if (gemm_load_openblas(why, sizeof why) == 0) {
      size_t used = strlen(gemm.name);
      snprintf(gemm.name + used, sizeof gemm.name - used, "%s", isa_note);
      return;
    }
  }
  snprintf(gemm.name, sizeof gemm.name, "portable (%s kernels; %s%s)", gemm.k->isa, why, isa_note);
}

static void gemm_ensure_init(void) {
  pthread_once(&gemm_once, gemm_init);
}

const char *rt_gemm_backend(void) {
  gemm_ensure_init();
  return gemm.name;
}

int rt_gemm_lanes(void) {
  gemm_ensure_init();
  const char *isa = gemm.k->isa;
  if (strncmp(isa, "avx512", 6) == 0)
    return 16;
  if (strncmp(isa, "avx2", 4) == 0)
    return 8;
  return strcmp(isa, "neon") == 0 ? 4 : 1;
}
#endif /* TFMC_STATIC */

/* ---- per-thread packing buffers ---- */

typedef struct PackBufs {
  float *a; /* a_cap floats: an mc x kc block of A, packed */
  float *b; /* b_cap floats: a kc x nc block of B, packed */
  float *x; /* gathered vector for strided single rows */
  float *xa; /* xa_cap floats: a whole product's A, packed once for all its column pieces */
  int64_t a_cap, b_cap, x_cap, xa_cap;
} PackBufs;

#ifdef TFMC_STATIC
/* no heap: the callers' unblocked fallbacks */
static PackBufs *pack_bufs(void) {
  return NULL;
}
#else
static pthread_key_t pack_key;
static pthread_once_t pack_once = PTHREAD_ONCE_INIT;
static int pack_key_ok;

static void pack_bufs_free(void *p) {
  PackBufs *pb = p;
  if (!pb)
    return;
  free(pb->a);
  free(pb->b);
  free(pb->x);
  free(pb->xa);
  free(pb);
}

static void pack_key_init(void) {
  pack_key_ok = pthread_key_create(&pack_key, pack_bufs_free) == 0;
}

/* The calling thread's buffers, allocated at its first GEMM; NULL when out
 * of memory (callers then fall back to the unblocked loop). */
static PackBufs *pack_bufs(void) {
  pthread_once(&pack_once, pack_key_init);
  if (!pack_key_ok)
    return NULL;
  PackBufs *pb = pthread_getspecific(pack_key);
  if (pb)
    return pb;
  pb = calloc(1, sizeof *pb);
  if (!pb)
    return NULL;
  if (pthread_setspecific(pack_key, pb) != 0) {
    pack_bufs_free(pb);
    return NULL;
  }
  return pb;
}
#endif

#ifndef TFMC_STATIC
/* *buf holds at least floats floats, 64-byte aligned (grown, never shrunk;
 * the old contents are not kept); false when memory runs out. */
static int pack_grow(float **buf, int64_t *cap, int64_t floats) {
  if (*cap >= floats)
    return 1;
  size_t bytes = ((size_t)floats * sizeof(float) + 63) & ~(size_t)63;
  float *n = aligned_alloc(64, bytes);
  if (!n)
    return 0;
  free(*buf);
  *buf = n;
  *cap = floats;
  return 1;
}
#endif

/* Makes pb's packing buffers hold at least a_floats and b_floats (grown
 * when a caller's blocks are larger than any before on this thread; never
 * shrunk). False when memory runs out (the caller then takes the
 * unblocked loop). */
static int pack_reserve(PackBufs *pb, int64_t a_floats, int64_t b_floats) {
#ifdef TFMC_STATIC
  (void)pb, (void)a_floats, (void)b_floats;
  return 0;
#else
  return pack_grow(&pb->a, &pb->a_cap, a_floats) && pack_grow(&pb->b, &pb->b_cap, b_floats);
#endif
}

/* Makes pb->xa hold at least floats floats; false when memory runs out. */
static int pack_reserve_xa(PackBufs *pb, int64_t floats) {
#ifdef TFMC_STATIC
  (void)pb, (void)floats;
  return 0;
#else
  return pack_grow(&pb->xa, &pb->xa_cap, floats);
#endif
}

/* ---- the epilogue: y = act(scale * y) + residual on an output block ---- */

/* What rt_linear applies to each output block once its sums are final
 * (the bias is in them already). r points at the residual element of the
 * GEMM's y[0, 0] (NULL: none), rows ldr apart. */
typedef struct LinearEpi {
  int64_t act; /* RtAct */
  float scale;
  const float *r;
  int64_t ldr;
} LinearEpi;

static int epi_active(const LinearEpi *e) {
  return e && (e->act != RT_ACT_NONE || e->scale != 1.0f || e->r);
}

/* y[i, j] = act(scale * y[i, j]) + r[(i0 + i) * ldr + j0 + j] for i < rows,
 * j < cols: the block at row i0, column j0 of the GEMM's y. */
static void epi_apply(const LinearEpi *e, float *y, int64_t ldy, int64_t i0, int64_t j0,
                      int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; i++) {
    float *yi = y + i * ldy;
    if (e->scale != 1.0f)
      for (int64_t j = 0; j < cols; j++)
        yi[j] *= e->scale;
    rt_act_row(e->act, yi, cols);
    if (e->r) {
      const float *ri = e->r + (i0 + i) * e->ldr + j0;
      for (int64_t j = 0; j < cols; j++)
        yi[j] += ri[j];
    }
  }
}

/* The caller's cache blocks, made what the kernels can use. */
typedef struct GemmBlocks {
  int64_t mc, nc, kc;
} GemmBlocks;

static GemmBlocks gemm_blocks_fit(const GemmKernels *gk, int64_t mc, int64_t nc, int64_t kc) {
  GemmBlocks b = {mc > 0 ? mc : GEMM_MC, nc > 0 ? nc : GEMM_NC, kc > 0 ? kc : GEMM_KC};
  if (b.mc > GEMM_MC_MAX)
    b.mc = GEMM_MC_MAX;
  if (b.nc > GEMM_NC_MAX)
    b.nc = GEMM_NC_MAX;
  if (b.kc > GEMM_KC_MAX)
    b.kc = GEMM_KC_MAX;
  b.mc = b.mc / gk->mr * gk->mr; /* whole register tiles, at least one */
  if (b.mc < gk->mr)
    b.mc = gk->mr;
  b.nc = b.nc / gk->nr * gk->nr;
  if (b.nc < gk->nr)
    b.nc = gk->nr;
  b.kc = (b.kc + 7) & ~(int64_t)7; /* K blocks are multiples of 8 */
  return b;
}

/* ---- the portable GEMM ---- */

/* C[m,n] *= beta (beta == 0: zeros). */
static void gemm_scale_c(int64_t m, int64_t n, float beta, float *c, int64_t ldc) {
  if (beta == 1)
    return;
  for (int64_t i = 0; i < m; i++) {
    float *ci = c + i * ldc;
    if (beta == 0)
      memset(ci, 0, (size_t)n * sizeof *ci);
    else
      for (int64_t j = 0; j < n; j++)
        ci[j] *= beta;
  }
}

/* C[mr,nr] = bias[0..nr) in every row (zeros without a bias): a register
 * tile's start, written just before its first K block so the micro-kernel
 * finds it in L1. Setting all of C first (memset / bias rows over the
 * block) wrote the C block once more and, for a wide product (gpt2's LM
 * head, 128 x 50257: 25.7 MB), had it read back from L3 or DRAM. */
static void gemm_tile_start(float *c, int64_t ldc, int mr, int nr, const float *bias) {
  for (int i = 0; i < mr; i++) {
    if (bias)
      memcpy(c + i * ldc, bias, sizeof(float) * (size_t)nr);
    else
      memset(c + i * ldc, 0, sizeof(float) * (size_t)nr);
  }
}

/* Packs alpha * op(A)[i0.., p0..] (mc x kc) as mr-row panels: panel q holds
 * rows q*mr.. as kc groups of mr values, zero past mc. */
static void gemm_pack_a(int trans, const float *a, int64_t lda, int64_t i0, int64_t p0, int64_t mc,
                        int64_t kc, float alpha, int mr, float *restrict dst) {
  for (int64_t q = 0; q < mc; q += mr) {
    int64_t rows = mc - q < mr ? mc - q : mr;
    float *d = dst + q * kc;
    if (!trans && rows == 4 && mr == 4) { /* the C kernels' tile: interleave 4 rows */
      const float *r0 = a + (i0 + q) * lda + p0, *r1 = r0 + lda, *r2 = r1 + lda, *r3 = r2 + lda;
      for (int64_t p = 0; p < kc; p++) {
        d[p * 4 + 0] = alpha * r0[p];
        d[p * 4 + 1] = alpha * r1[p];
        d[p * 4 + 2] = alpha * r2[p];
        d[p * 4 + 3] = alpha * r3[p];
      }
    } else if (!trans && rows == 6 && mr == 6) { /* the SIMD kernels' tile, in k order */
      const float *r = a + (i0 + q) * lda + p0;
      for (int64_t p = 0; p < kc; p++)
        _Pragma("GCC unroll 6") for (int i = 0; i < 6; i++) d[p * 6 + i] = alpha * r[i * lda + p];
    } else if (!trans) { /* A[i, p] = a[i*lda + p]: row by row, zeros past mc */
      for (int64_t i = 0; i < mr; i++) {
        const float *r = a + (i0 + q + i) * lda + p0;
        if (i < rows)
          for (int64_t p = 0; p < kc; p++)
            d[p * mr + i] = alpha * r[p];
        else
          for (int64_t p = 0; p < kc; p++)
            d[p * mr + i] = 0.0f;
      }
    } else { /* A[i, p] = a[p*lda + i] */
      for (int64_t p = 0; p < kc; p++) {
        const float *s = a + (p0 + p) * lda + i0 + q;
        for (int i = 0; i < mr; i++)
          d[p * mr + i] = i < rows ? alpha * s[i] : 0.0f;
      }
    }
  }
}

/* Packs op(B)[p0.., j0..] (kc x nc) as B_p (rt_gemm_kernels.h): panels of
 * GEMM_PANEL columns, kc * 16 floats apart, zero past nc. */
static void gemm_pack_b(int trans, const float *b, int64_t ldb, int64_t p0, int64_t j0, int64_t kc,
                        int64_t nc, float *restrict dst) {
  enum { W = GEMM_PANEL };
  for (int64_t q = 0; q < nc; q += W) {
    int64_t cols = nc - q < W ? nc - q : W;
    float *d = dst + q * kc;
    if (!trans) { /* B[p, j] = b[p*ldb + j]: rows of the panel are contiguous */
      for (int64_t p = 0; p < kc; p++) {
        const float *s = b + (p0 + p) * ldb + j0 + q;
        memcpy(d + p * W, s, sizeof(float) * (size_t)cols);
        for (int64_t j = cols; j < W; j++)
          d[p * W + j] = 0.0f;
      }
    } else { /* B[p, j] = b[j*ldb + p]: a transpose, done in 8-deep strips */
      if (cols < W)
        memset(d, 0, sizeof(float) * (size_t)(kc * W));
      int64_t p = 0;
      for (; p + 8 <= kc; p += 8)
        for (int64_t j = 0; j < cols; j++) {
          const float *s = b + (j0 + q + j) * ldb + p0 + p;
          for (int l = 0; l < 8; l++)
            d[(p + l) * W + j] = s[l];
        }
      for (; p < kc; p++)
        for (int64_t j = 0; j < cols; j++)
          d[p * W + j] = b[(j0 + q + j) * ldb + p0 + p];
    }
  }
}

/* f32 -> bf16, round to nearest even; NaN stays NaN (quiet). */
static inline uint32_t f32_to_bf16(float f) {
  union {
    float f;
    uint32_t u;
  } v = {f};
  uint32_t rounded = (v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16, quiet = (v.u >> 16) | 0x40u;
  return (v.u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded; /* a select, no branch */
}

/* Packs op(A)[i0.., p0..] (mc x kc, not transposed) as mr-row panels over
 * kc2 (kc rounded up to even) steps, the padding step zero: f32 A_p
 * (panel q at q * kc2 floats) or, bf16, A_h (bf16 pairs, panel q at
 * q * kc2 / 2 words). */
static void gemm_pack_a_even(const float *a, int64_t lda, int64_t i0, int64_t p0, int64_t mc,
                             int64_t kc, int mr, int bf16, void *dst) {
  int64_t kc2 = (kc + 1) & ~(int64_t)1;
  for (int64_t q = 0; q < mc; q += mr) {
    int64_t rows = mc - q < mr ? mc - q : mr;
    if (bf16 && rows == 6 && mr == 6 && kc2 == kc) { /* the SIMD kernels' tile, in k order */
      uint32_t *d = (uint32_t *)dst + q * kc2 / 2;
      const float *r = a + (i0 + q) * lda + p0;
      for (int64_t p = 0; p < kc; p += 2)
        _Pragma("GCC unroll 6") for (int i = 0; i < 6; i++) d[p / 2 * 6 + i] =
            f32_to_bf16(r[i * lda + p]) | f32_to_bf16(r[i * lda + p + 1]) << 16;
    } else if (bf16) {
      uint32_t *d = (uint32_t *)dst + q * kc2 / 2;
      for (int64_t i = 0; i < mr; i++) {
        const float *r = a + (i0 + q + i) * lda + p0;
        for (int64_t p = 0; p < kc2; p += 2) {
          uint32_t lo = i < rows ? f32_to_bf16(r[p]) : 0;
          uint32_t hi = i < rows && p + 1 < kc ? f32_to_bf16(r[p + 1]) : 0;
          d[p / 2 * mr + i] = lo | hi << 16;
        }
      }
    } else if (rows == 6 && mr == 6 && kc2 == kc) {
      float *d = (float *)dst + q * kc2;
      const float *r = a + (i0 + q) * lda + p0;
      for (int64_t p = 0; p < kc; p++)
        _Pragma("GCC unroll 6") for (int i = 0; i < 6; i++) d[p * 6 + i] = r[i * lda + p];
    } else {
      float *d = (float *)dst + q * kc2;
      for (int64_t i = 0; i < mr; i++) {
        const float *r = a + (i0 + q + i) * lda + p0;
        for (int64_t p = 0; p < kc2; p++)
          d[p * mr + i] = i < rows && p < kc ? r[p] : 0.0f;
      }
    }
  }
}

/* Element (i, p) of op(A), for the unblocked fallback. */
static inline float gemm_at(int trans, const float *a, int64_t ld, int64_t i, int64_t p) {
  return trans ? a[p * ld + i] : a[i * ld + p];
}

/* C += alpha op(A) op(B) without packing (only when buffers are missing). */
static void gemm_unblocked(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                           const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                           int64_t ldc) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float s = 0;
      for (int64_t p = 0; p < k; p++)
        s += gemm_at(ta, a, lda, i, p) * gemm_at(tb, b, ldb, p, j);
      c[i * ldc + j] += alpha * s;
    }
}

/* C += alpha A B for prepacked B (wp: panels k * 16 floats apart), without
 * packing A (only when buffers are missing). */
static void gemm_unblocked_packed(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                                  int64_t lda, const float *wp, float *c, int64_t ldc) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      const float *w = wp + (j / GEMM_PANEL) * k * GEMM_PANEL + j % GEMM_PANEL;
      float s = 0;
      for (int64_t p = 0; p < k; p++)
        s += a[i * lda + p] * w[p * GEMM_PANEL];
      c[i * ldc + j] += alpha * s;
    }
}

/* The same for bf16 pair panels (wp: panels ceil(k/2) * 16 words apart). */
static void gemm_unblocked_bf16(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                                int64_t lda, const uint32_t *wp, float *c, int64_t ldc) {
  const int64_t k2 = (k + 1) / 2;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      const uint32_t *w = wp + (j / GEMM_PANEL) * k2 * GEMM_PANEL + j % GEMM_PANEL;
      float s = 0;
      for (int64_t p = 0; p < k; p++) {
        uint32_t word = w[p / 2 * GEMM_PANEL];
        s += a[i * lda + p] * (p % 2 ? bf16_word_hi(word) : bf16_word_lo(word));
      }
      c[i * ldc + j] += alpha * s;
    }
}

/* y[0..n) = alpha * x op(B) + beta y for one row x (contiguous). */
static void gemm_row(int tb, int64_t n, int64_t k, float alpha, const float *x, const float *b,
                     int64_t ldb, float beta, float *y) {
  if (tb)
    gemm.k->gemv_t(n, k, alpha, x, b, ldb, beta, y);
  else
    gemm.k->gemv_n(n, k, alpha, x, b, ldb, beta, y);
}

/* The single-row case: x is row 0 of op(A), gathered when strided. */
static void gemm_single_row(int ta, int tb, int64_t n, int64_t k, float alpha, const float *a,
                            int64_t lda, const float *b, int64_t ldb, float beta, float *c) {
  if (!ta || lda == 1 || k <= 1) {
    gemm_row(tb, n, k, alpha, a, b, ldb, beta, c);
    return;
  }
  PackBufs *pb = pack_bufs();
#ifndef TFMC_STATIC
  if (pb && pb->x_cap < k) {
    float *nx = realloc(pb->x, sizeof(float) * (size_t)k);
    if (nx) {
      pb->x = nx;
      pb->x_cap = k;
    }
  }
#endif
  if (!pb || pb->x_cap < k) {
    gemm_scale_c(1, n, beta, c, n);
    gemm_unblocked(ta, tb, 1, n, k, alpha, a, lda, b, ldb, c, n);
    return;
  }
  for (int64_t p = 0; p < k; p++)
    pb->x[p] = a[p * lda];
  gemm_row(tb, n, k, alpha, pb->x, b, ldb, beta, c);
}

/* n rounded up to a multiple of r. */
static inline int64_t gemm_round_up(int64_t n, int64_t r) {
  return (n + r - 1) / r * r;
}

/* Rows of the row block that starts with rest rows left: mc, or all of
 * them when they are at most gemm_block_rows_cap(mc), i.e. when fewer than
 * a quarter of mc would be left after it. A row block passes every B panel
 * of its column block once; a thin last block makes that pass for a few
 * rows (M = 128 at the tile pass's mc = 120 on a 512K L2: 8 rows, 2 tiles,
 * against 3 MB of panels from L3 per K block), while 1.25 mc rows of A
 * still fit the half of L2 that mc is sized for. The packing buffer holds
 * gemm_block_rows_cap(mc) rows rounded up to whole register tiles. */
static inline int64_t gemm_block_rows_cap(int64_t mc) {
  return mc + mc / 4;
}

static inline int64_t gemm_block_rows(int64_t rest, int64_t mc) {
  return rest <= gemm_block_rows_cap(mc) ? rest : mc;
}

/* The K blocks' width: equal blocks of at most bl->kc, multiples of 8
 * (K = 512 runs as 2 x 256, not 384 + 128); the last may be shorter. */
static int64_t gemm_kc_step(int64_t k, const GemmBlocks *bl) {
  int64_t k_blocks = (k + bl->kc - 1) / bl->kc;
  int64_t kc_step = ((k + k_blocks - 1) / k_blocks + 7) & ~(int64_t)7;
  return kc_step > bl->kc ? bl->kc : kc_step;
}

/* the row tiles from which a row block widens bf16 panels once (widen_bf16) */
enum { WIDEN_TILES = 3 };

/* floats of one tile column's bf16 panels widened, K block kc */
static int64_t widened_floats(const GemmKernels *gk, int64_t kc) {
  return gemm_round_up(kc, 2) * gemm_round_up(gk->nr, GEMM_PANEL);
}

/* One K block (steps pc..pc+kc) of the product on bf16 pair panels: for
 * every row block, A packed (f32, or bf16 pairs for a_bf16 kernels) over
 * kc rounded up to even, then the bf16 micro-kernel per tile (start: the
 * first K block, each tile set to bias first, gemm_tile_start); the
 * epilogue (epi, when this is the last K block) per tile, at column j0 +
 * jr of the GEMM's y. wb: the panels of this column block, from step 0. */
static void gemm_blocked_bf16(const GemmKernels *gk, int64_t m, int64_t nc, int64_t k, int64_t pc,
                              int64_t kc, const float *a, int64_t lda, const void *apre,
                              const uint32_t *wb, float *c, int64_t ldc, const GemmBlocks *bl,
                              PackBufs *pb, const LinearEpi *epi, int64_t j0, int start,
                              const float *bias) {
  const int64_t MR = gk->mr, NR = gk->nr, MC = bl->mc, kc2 = (kc + 1) & ~(int64_t)1;
  const int64_t bs = (k + 1) / 2 * GEMM_PANEL;
  const uint32_t *bblk = wb + pc / 2 * GEMM_PANEL;
  for (int64_t ic = 0, mc; ic < m; ic += mc) {
    mc = gemm_block_rows(m - ic, MC);
    /* the block's panels: packed now, or in apre (gemm_prepack_a's layout:
     * K block pc at (m rounded up to MR) * pc values, its panel at row i
     * i * kc2 values in; a value: a float, or a bf16 half word) */
    const void *ablk = pb->a;
    if (apre)
      ablk = gk->a_bf16 ? (const void *)((const uint16_t *)apre + gemm_round_up(m, MR) * pc +
                                         ic * kc2)
                        : (const void *)((const float *)apre + gemm_round_up(m, MR) * pc + ic * kc2);
    else
      gemm_pack_a_even(a, lda, ic, pc, mc, kc, gk->mr, gk->a_bf16, pb->a);
    /* WIDEN_TILES or more row tiles: each tile column's panels widened
     * once into pb->b, the f32 micro-kernel on them (the same bits) */
    const int64_t panels = (NR + GEMM_PANEL - 1) / GEMM_PANEL;
    const int widen = gk->widen_bf16 && !gk->a_bf16 && mc >= WIDEN_TILES * MR &&
                      pb->b_cap >= widened_floats(gk, kc);
    for (int64_t jr = 0; jr < nc; jr += NR) {
      int nr = (int)(nc - jr < NR ? nc - jr : NR);
      const uint32_t *bp = bblk + jr / GEMM_PANEL * bs;
      if (widen)
        for (int64_t t = 0; t < panels && jr + t * GEMM_PANEL < nc; t++)
          gk->widen_bf16(kc2, bp + t * bs, pb->b + t * kc2 * GEMM_PANEL);
      for (int64_t ir = 0; ir < mc; ir += MR) {
        int mr = (int)(mc - ir < MR ? mc - ir : MR);
        float *ct = c + (ic + ir) * ldc + jr;
        const void *ap = gk->a_bf16 ? (const void *)((const uint16_t *)ablk + ir * kc2)
                                    : (const void *)((const float *)ablk + ir * kc2);
        if (start)
          gemm_tile_start(ct, ldc, mr, nr, bias ? bias + jr : NULL);
        if (widen)
          gk->micro(kc2, (const float *)ap, pb->b, kc2 * GEMM_PANEL, ct, ldc, mr, nr);
        else
          gk->micro_bf16(kc2, ap, bp, bs, ct, ldc, mr, nr);
        if (epi)
          epi_apply(epi, ct, ldc, ic + ir, j0 + jr, mr, nr);
      }
    }
  }
}

/* The blocked GEMM for any m >= 1 (no single-row shortcut), with cache
 * blocks bl (gemm_blocks_fit) and, when epi is active, the epilogue applied
 * to each register tile right after its last K block, while it is in L1.
 * beta 0: C = bias (columns 0..n; NULL: zeros) + alpha op(A) op(B), each
 * tile set just before its first K block; otherwise bias must be NULL and
 * C is scaled by beta first.
 * An element's value does not depend on where it lies in C (the K
 * blocking depends on k and kc only), so splitting a product into row or
 * column blocks gives the same bits as computing it whole. */
static void gemm_blocked_with(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                              float alpha, const float *a, int64_t lda, const void *apre,
                              const float *b, int64_t ldb, const float *bp_all, int b_bf16,
                              float beta, const float *bias, float *c, int64_t ldc,
                              const GemmBlocks *bl, const LinearEpi *epi) {
  int with_epi = epi_active(epi);
  PackBufs *pb = k > 0 && alpha != 0 ? pack_bufs() : NULL;
  const int64_t a_rows = gemm_round_up(gemm_block_rows_cap(bl->mc), gemm.k->mr);
  /* B: packed now, or (bf16 panels on a set that widens them) one tile
   * column's panels widened */
  int64_t b_floats = !bp_all                        ? bl->kc * bl->nc
                     : b_bf16 && gemm.k->widen_bf16 ? widened_floats(gemm.k, bl->kc)
                                                    : 0;
  if (pb && !pack_reserve(pb, a_rows * (bl->kc + 1), b_floats))
    pb = NULL;
  const int tile_start = beta == 0 && pb; /* else C is set (scaled) here */
  if (!tile_start) {
    if (beta == 0 && bias)
      for (int64_t i = 0; i < m; i++)
        memcpy(c + i * ldc, bias, sizeof(float) * (size_t)n);
    else
      gemm_scale_c(m, n, beta, c, ldc);
  }
  if (!pb) {
    if (k > 0 && alpha != 0 && bp_all)
      b_bf16 ? gemm_unblocked_bf16(m, n, k, alpha, a, lda, (const uint32_t *)bp_all, c, ldc)
             : gemm_unblocked_packed(m, n, k, alpha, a, lda, bp_all, c, ldc);
    else if (k > 0 && alpha != 0)
      gemm_unblocked(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, c, ldc);
    if (with_epi)
      epi_apply(epi, c, ldc, 0, 0, m, n);
    return;
  }
  const int64_t kc_step = gemm_kc_step(k, bl);
  const GemmKernels *gk = gemm.k;
  /* A read in place by the set's micro_a (no packing) where it is A itself */
  const int direct_a = gk->micro_a && !apre && !trans_a && alpha == 1.0f && !b_bf16;
  /* an epilogue that only adds a residual: micro_a adds it (GemmTileExtra) */
  const int res_only = with_epi && epi->act == RT_ACT_NONE && epi->scale == 1.0f && epi->r;
  const int64_t MR = gk->mr, NR = gk->nr, MC = bl->mc, NC = bl->nc;
  for (int64_t jc = 0; jc < n; jc += NC) {
    int64_t nc = n - jc < NC ? n - jc : NC;
    for (int64_t pc = 0; pc < k; pc += kc_step) {
      int64_t kc = k - pc < kc_step ? k - pc : kc_step;
      int last = pc + kc >= k;
      /* the panels of this block: op(B) packed now, or the prepacked
       * weights' panels from row pc on */
      const float *bblk;
      int64_t bs;
      if (b_bf16) { /* K blocks start at even steps (kc_step is a multiple of 8) */
        gemm_blocked_bf16(gk, m, nc, k, pc, kc, a, lda, apre,
                          (const uint32_t *)bp_all + jc * ((k + 1) / 2), c + jc, ldc, bl, pb,
                          last && with_epi ? epi : NULL, jc, tile_start && pc == 0,
                          bias ? bias + jc : NULL);
        continue;
      }
      if (bp_all) {
        bblk = bp_all + jc * k + pc * GEMM_PANEL;
        bs = k * GEMM_PANEL;
      } else {
        gemm_pack_b(trans_b, b, ldb, pc, jc, kc, nc, pb->b);
        bblk = pb->b;
        bs = kc * GEMM_PANEL;
      }
      for (int64_t ic = 0, mc; ic < m; ic += mc) {
        mc = gemm_block_rows(m - ic, MC);
        const float *ablk = pb->a; /* packed now, or gemm_prepack_a's */
        if (apre)
          ablk = (const float *)apre + gemm_round_up(m, MR) * pc + ic * kc;
        else if (direct_a)
          ablk = NULL;
        else
          gemm_pack_a(trans_a, a, lda, ic, pc, mc, kc, alpha, gk->mr, pb->a);
        for (int64_t jr = 0; jr < nc; jr += NR) {
          int nr = (int)(nc - jr < NR ? nc - jr : NR);
          const float *bp = bblk + jr / GEMM_PANEL * bs;
          /* the next tile column's panels, where they are one contiguous
           * run (this block's rows are all of them: B packed now, or one K
           * block of prepacked weights), prefetched into L2 a slice per
           * row tile while this column's tiles run from L2: weights come
           * from DRAM, and without it the column's first tile waits for
           * them (one thread's 6x64 tile eats a panel at ~40 GB/s) */
          int64_t pf_bytes = 0, pf_slice = 0;
          const char *pf = NULL;
          if (direct_a && jr + NR < nc && bs == kc * GEMM_PANEL) {
            int64_t cols = nc - jr - NR < NR ? nc - jr - NR : NR;
            pf = (const char *)(bp + NR / GEMM_PANEL * bs);
            pf_bytes = (cols + GEMM_PANEL - 1) / GEMM_PANEL * bs * (int64_t)sizeof(float);
            pf_slice = (pf_bytes / ((mc + MR - 1) / MR) + 63) & ~(int64_t)63;
          }
          for (int64_t ir = 0; ir < mc; ir += MR) {
            int mr = (int)(mc - ir < MR ? mc - ir : MR);
            float *ct = c + (ic + ir) * ldc + jc + jr;
            const float *tbias = bias ? bias + jc + jr : NULL;
            if (direct_a) { /* the tile starts (and a residual ends) inside the kernel */
              GemmTileExtra x = {tbias, tile_start && pc == 0, NULL, 0, NULL, 0};
              if (last && res_only) {
                x.res = epi->r + (ic + ir) * epi->ldr + jc + jr;
                x.ldr = epi->ldr;
              }
              int64_t at = ir / MR * pf_slice; /* this row tile's slice */
              if (pf && at < pf_bytes) {
                x.pf = pf + at;
                x.pf_bytes = pf_bytes - at < pf_slice ? pf_bytes - at : pf_slice;
              }
              gk->micro_a(kc, a + (ic + ir) * lda + pc, lda, bp, bs, ct, ldc, mr, nr, &x);
            } else {
              if (tile_start && pc == 0)
                gemm_tile_start(ct, ldc, mr, nr, tbias);
              gk->micro(kc, ablk + ir * kc, bp, bs, ct, ldc, mr, nr);
            }
            if (last && with_epi && !(direct_a && res_only))
              epi_apply(epi, ct, ldc, ic + ir, jc + jr, mr, nr);
          }
        }
      }
    }
  }
}

static void gemm_blocked(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                         float *c, int64_t ldc) {
  GemmBlocks bl = {gemm.k->mc, gemm.k->nc, GEMM_KC};
  gemm_blocked_with(trans_a, trans_b, m, n, k, alpha, a, lda, NULL, b, ldb, NULL, 0, beta, NULL, c,
                    ldc, &bl, NULL);
}

void rt_sgemm_portable(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                       const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                       float *c, int64_t ldc) {
  gemm_ensure_init();
  if (m <= 0 || n <= 0)
    return;
  if (m == 1 && k > 0 && alpha != 0)
    gemm_single_row(trans_a, trans_b, n, k, alpha, a, lda, b, ldb, beta, c);
  else
    gemm_blocked(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* ---- the BLAS path ---- */

/* True when BLAS takes these arguments as they are (32-bit sizes, leading
 * dimensions at least the stored row length and >= 1). */
static int blas_fits(int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                     int64_t ldc) {
  const int64_t lim = gemm.sgemm64 ? INT64_MAX : 0x7fffffff;
  int64_t rows_a = ta ? m : k, rows_b = tb ? k : n; /* stored row lengths */
  if (m > lim || n > lim || k > lim || lda > lim || ldb > lim || ldc > lim)
    return 0;
  return lda >= (rows_a > 1 ? rows_a : 1) && ldb >= (rows_b > 1 ? rows_b : 1) &&
         ldc >= (n > 1 ? n : 1);
}

/* A product of m >= 1 rows through BLAS when it takes the arguments, else
 * the blocked GEMM; never the single-row kernel. */
static void gemm_rows(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                      float *c, int64_t ldc) {
  if (k <= 0 || alpha == 0 || (!gemm.sgemm32 && !gemm.sgemm64) ||
      !blas_fits(trans_a, trans_b, m, n, k, lda, ldb, ldc)) {
    gemm_blocked(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  int ta = trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS, tb = trans_b ? CBLAS_TRANS : CBLAS_NO_TRANS;
  if (gemm.sgemm64)
    gemm.sgemm64(CBLAS_ROW_MAJOR, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    gemm.sgemm32(CBLAS_ROW_MAJOR, ta, tb, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb,
                 beta, c, (int)ldc);
}

void rt_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
              int64_t ldc) {
  gemm_ensure_init();
  if (m <= 0 || n <= 0)
    return;
  if (m == 1)
    rt_sgemm_portable(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    gemm_rows(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* ---- rt_linear: y = act(scale (x w^T + bias)) + residual over the pool ---- */

typedef struct LinearJob {
  int64_t m, n, k, ldx, ldy, unit; /* unit: columns (split_n) or rows per index */
  const float *x, *w, *bias;
  int packed; /* w is prepacked: 1 rt_gemm_pack (f32), 2 rt_gemm_pack_bf16; 0 [N, K] */
  float *y;
  int split_n;
  LinearEpi epi;
  GemmBlocks bl;     /* the caller's, fitted to the kernel set */
  const void *apre; /* split_n: x packed once (prepack_x; int8: quantised, xq then
                        m scales), or NULL: each piece packs it; bf16 decode on a
                        set with rows_p_bf16x: x as X_h (linear_run) */
} LinearJob;

/* The BLAS product of rows x cols with the epilogue: sgemm per mc x nc
 * block, then the epilogue on that block while it is still in L2 (one
 * sgemm over the whole product would leave it to be read back from
 * memory). */
static void linear_blas_blocks(const LinearJob *j, int64_t r0, int64_t c0, int64_t rows,
                               int64_t cols, const float *x, const float *w, float *y, float beta) {
  for (int64_t jc = 0; jc < cols; jc += j->bl.nc) {
    int64_t nc = cols - jc < j->bl.nc ? cols - jc : j->bl.nc;
    for (int64_t ic = 0; ic < rows; ic += j->bl.mc) {
      int64_t mc = rows - ic < j->bl.mc ? rows - ic : j->bl.mc;
      float *yb = y + ic * j->ldy + jc;
      gemm_rows(0, 1, mc, nc, j->k, 1.0f, x + ic * j->ldx, j->ldx, w + jc * j->k, j->k, beta, yb,
                j->ldy);
      epi_apply(&j->epi, yb, j->ldy, r0 + ic, c0 + jc, mc, nc);
    }
  }
}

/* f32 -> int8 for an int8 product: v * inv rounded to nearest even (inv =
 * 127 / max|row|, so |result| <= 127). */
static inline int8_t quantise(float v, float inv) {
  /* round half to even by hand (|v * inv| <= 127, so the truncation is
   * exact): nearbyintf would be libm's, which the static runtime avoids */
  float f = v * inv;
  int t = (int)f; /* towards zero */
  float d = f - (float)t;
  int odd = t & 1; /* selects, not branches: the row loops vectorise */
  t += ((d > 0.5f) | ((d == 0.5f) & odd)) - ((d < -0.5f) | ((d == -0.5f) & odd));
  return (int8_t)t;
}

/* gcc's -O2 cost model ("very cheap") declines the quantising loops (they
 * need an alias check); ask for the "cheap" one, as rt_act.c and
 * rt_attention.c do for theirs. */
#if defined(__GNUC__) && !defined(__clang__)
#define GEMM_VEC __attribute__((optimize("tree-vectorize", "vect-cost-model=cheap")))
#else
#define GEMM_VEC
#endif

/* Quantises rows of x (rows x k, ldx apart) for an int8 product: per row
 * sx = max|x| / 127 and qx = quantise(x, 127 / max|x|), K4 bytes per row,
 * 0 past k; a row of zeros gets sx = 0. */
GEMM_VEC static void quantise_rows(int64_t rows, int64_t k, const float *restrict x, int64_t ldx,
                                   int8_t *restrict xq, float *restrict sx) {
  const int64_t k4 = GEMM_I8_K4(k);
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    int8_t *q = xq + r * k4;
    /* max |x| in 8 running lanes (a select each: fmaxf would be a call) */
    float lane[8] = {0};
    int64_t p8 = k - k % 8;
    for (int64_t p = 0; p < p8; p += 8)
      for (int l = 0; l < 8; l++) {
        float a = fabsf(xr[p + l]);
        lane[l] = a > lane[l] ? a : lane[l];
      }
    for (int64_t p = p8; p < k; p++) {
      float a = fabsf(xr[p]);
      lane[0] = a > lane[0] ? a : lane[0];
    }
    float amax = 0;
    for (int l = 0; l < 8; l++)
      amax = lane[l] > amax ? lane[l] : amax;
    float inv = amax > 0 ? 127.0f / amax : 0.0f;
    sx[r] = amax / 127.0f;
    for (int64_t p = 0; p < k; p++)
      q[p] = quantise(xr[p], inv);
    for (int64_t p = k; p < k4; p++)
      q[p] = 0;
  }
}

/* Rounds rows of x (rows x k, ldx apart) to bf16 pairs for a decode set's
 * rows_p_bf16x (X_h: k2 = ceil(k/2) words per row, the high half 0 past
 * k), with f32_to_bf16, the rounding that packs A_h for the prefill
 * kernels: a row gives the same bf16 values whichever path it takes. */
GEMM_VEC static void round_rows_bf16(int64_t rows, int64_t k, const float *restrict x, int64_t ldx,
                                     uint32_t *restrict xh) {
  const int64_t k2 = (k + 1) / 2;
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    uint32_t *d = xh + r * k2;
    for (int64_t q = 0; q < k / 2; q++)
      d[q] = f32_to_bf16(xr[2 * q]) | f32_to_bf16(xr[2 * q + 1]) << 16;
    if (k % 2)
      d[k / 2] = f32_to_bf16(xr[k - 1]);
  }
}

/* y[r, c] (rows x cols) of an int8 product without buffers (out of
 * memory): the same integer sums, each activation quantised as it is
 * read. wq: the panels of column 0. */
static void i8_unbuffered(int64_t rows, int64_t cols, int64_t k, const float *x, int64_t ldx,
                          const uint8_t *wq, float *y, int64_t ldy) {
  const int64_t k4 = GEMM_I8_K4(k), ps = GEMM_I8_PANEL_BYTES(k);
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    float amax = 0;
    for (int64_t p = 0; p < k; p++)
      amax = fmaxf(amax, fabsf(xr[p]));
    float inv = amax > 0 ? 127.0f / amax : 0.0f, sx = amax / 127.0f;
    for (int64_t c = 0; c < cols; c++) {
      const uint8_t *panel = wq + c / GEMM_PANEL * ps;
      int64_t l = c % GEMM_PANEL;
      int32_t sum = 0;
      for (int64_t p = 0; p < k; p++)
        sum += quantise(xr[p], inv) * (int8_t)panel[p / 4 * 4 * GEMM_PANEL + l * 4 + p % 4];
      float sw;
      memcpy(&sw, panel + k4 * GEMM_PANEL + 4 * l, 4);
      y[r * ldy + c] = (float)sum * (sx * sw);
    }
  }
}

/* y[r, c] += bias[c] for r < rows, c < cols (vectorised: the scalar loop
 * took 4% of an int8 bert-base). */
GEMM_VEC static void add_bias(int64_t rows, int64_t cols, float *restrict y, int64_t ldy,
                              const float *restrict bias) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++)
      y[r * ldy + c] += bias[c];
}

/* y[r0..r1, c0..c1] = epilogue(x[r0..r1] w[c0..c1]^T + bias[c0..c1]). */
static void linear_block(const LinearJob *j, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  int64_t rows = r1 - r0, cols = c1 - c0;
  /* prepacked: column c0 (a multiple of GEMM_PANEL) starts c0 * k floats
   * in, as does row c0 of an unpacked w */
  const float *x = j->x + r0 * j->ldx, *w = j->w + c0 * j->k;
  if (j->packed == 2) /* bf16 pairs: column c0 starts c0 * ceil(k/2) words in */
    w = (const float *)(const void *)((const uint32_t *)(const void *)j->w + c0 * ((j->k + 1) / 2));
  float *y = j->y + r0 * j->ldy + c0;
  int with_epi = epi_active(&j->epi);
  if (j->packed == 3) { /* int8: x quantised per row here, then integer sums */
    PackBufs *pb = pack_bufs();
    const int64_t k4 = GEMM_I8_K4(j->k);
    const uint8_t *wq =
        (const uint8_t *)(const void *)j->w + c0 / GEMM_PANEL * GEMM_I8_PANEL_BYTES(j->k);
    /* rows quantised at once: as many as fit 64 KiB of bytes (at least 4) */
    int64_t step = (64 * 1024) / (k4 + 4);
    step = step < 4 ? 4 : step > rows ? rows : step;
    if (j->apre) { /* quantised once for every piece (prepack_x): rows 0..m */
      const int8_t *xq = j->apre;
      const float *sx = (const float *)j->apre + (j->m * k4 + 3) / 4;
      for (int64_t i = 0; i < rows; i += step) {
        int64_t n_i = rows - i < step ? rows - i : step;
        gemm.rows_i8(n_i, cols, j->k, xq + (r0 + i) * k4, k4, sx + r0 + i, wq, y + i * j->ldy,
                     j->ldy);
      }
    } else if (!pb || !pack_reserve(pb, (step * k4 + 3) / 4 + step, 0)) {
      i8_unbuffered(rows, cols, j->k, x, j->ldx, wq, y, j->ldy);
    } else {
      int8_t *xq = (int8_t *)(void *)pb->a;
      float *sx = pb->a + (step * k4 + 3) / 4;
      for (int64_t i = 0; i < rows; i += step) {
        int64_t n_i = rows - i < step ? rows - i : step;
        quantise_rows(n_i, j->k, x + i * j->ldx, j->ldx, xq, sx);
        gemm.rows_i8(n_i, cols, j->k, xq, k4, sx, wq, y + i * j->ldy, j->ldy);
      }
    }
    if (j->bias)
      add_bias(rows, cols, y, j->ldy, j->bias + c0);
    if (with_epi)
      epi_apply(&j->epi, y, j->ldy, r0, c0, rows, cols);
    return;
  }
  if (GEMM_ROWS_ONLY ||
      j->m <= GEMM_DECODE_ROWS) { /* decode: y = x W^T (+ bias), one pass over W */
    if (j->packed == 2 && j->apre && gemm.k->rows_p_bf16x) /* x as bf16 pairs (linear_run) */
      gemm.k->rows_p_bf16x(rows, cols, j->k, (const uint32_t *)j->apre + r0 * ((j->k + 1) / 2),
                           (j->k + 1) / 2, (const uint32_t *)(const void *)w, y, j->ldy);
    else if (j->packed == 2)
      gemm.k->rows_p_bf16(rows, cols, j->k, x, j->ldx, (const uint32_t *)(const void *)w, y,
                          j->ldy);
    else if (j->packed)
      gemm.k->rows_p(rows, cols, j->k, x, j->ldx, w, y, j->ldy);
    else
      gemm.k->rows(rows, cols, j->k, x, j->ldx, w, j->k, y, j->ldy);
    if (j->bias)
      add_bias(rows, cols, y, j->ldy, j->bias + c0);
    if (with_epi) /* at most 8 rows: the block is still in L1 / L2 */
      epi_apply(&j->epi, y, j->ldy, r0, c0, rows, cols);
    return;
  }
  /* a one-row block of a taller product still takes the GEMM path, so the
   * split never changes the result */
  if (!j->packed && (gemm.sgemm32 || gemm.sgemm64)) {
    float beta = 0.0f;
    if (j->bias) { /* start from the bias, accumulate the product onto it */
      for (int64_t r = 0; r < rows; r++)
        memcpy(y + r * j->ldy, j->bias + c0, sizeof(float) * (size_t)cols);
      beta = 1.0f;
    }
    if (with_epi)
      linear_blas_blocks(j, r0, c0, rows, cols, x, w, y, beta);
    else
      gemm_rows(0, 1, rows, cols, j->k, 1.0f, x, j->ldx, w, j->k, beta, y, j->ldy);
    return;
  }
  LinearEpi epi = j->epi; /* the residual at this block's origin */
  if (epi.r)
    epi.r += r0 * epi.ldr + c0;
  /* y starts from the bias, tile by tile (gemm_tile_start) */
  gemm_blocked_with(0, 1, rows, cols, j->k, 1.0f, x, j->ldx, j->apre, w, j->k,
                    j->packed ? w : NULL, j->packed == 2, 0.0f, j->bias ? j->bias + c0 : NULL, y,
                    j->ldy, &j->bl, &epi);
}

static void linear_task(void *ctx, int64_t lo, int64_t hi) {
  const LinearJob *j = ctx;
  if (j->split_n) {
    int64_t c1 = hi * j->unit < j->n ? hi * j->unit : j->n;
    linear_block(j, 0, j->m, lo * j->unit, c1);
  } else {
    linear_block(j, lo, hi, 0, j->n);
  }
}

/* x packed once for a product split into column pieces, each of which
 * would pack all of x again (at M = 128 on 2 threads, 4 pieces: 8% of
 * bert-base's time went to packing). All threads pack it, MR-row panels
 * each, into the calling thread's buffer, in the layout gemm_blocked_with
 * reads from apre: K block pc at (m rounded up to MR) * pc values, the
 * panel of row i at i * kc values in (kc rounded up to even for bf16
 * panels; a value: a float, or a bf16 half word for a_bf16 kernels). The
 * panels hold what each piece would have packed, so results do not
 * change. */
typedef struct PrepackJob {
  const LinearJob *j;
  const GemmKernels *gk;
  int64_t kc_step, m_pad;
  void *dst;
} PrepackJob;

static void prepack_task(void *ctx, int64_t lo, int64_t hi) {
  const PrepackJob *q = ctx;
  const LinearJob *j = q->j;
  if (j->packed == 3) { /* int8: rows lo..hi quantised (xq, then the scales) */
    const int64_t k4 = GEMM_I8_K4(j->k);
    quantise_rows(hi - lo, j->k, j->x + lo * j->ldx, j->ldx, (int8_t *)q->dst + lo * k4,
                  (float *)q->dst + (j->m * k4 + 3) / 4 + lo);
    return;
  }
  const int64_t mr = q->gk->mr, i0 = lo * mr, i1 = hi * mr < j->m ? hi * mr : j->m;
  for (int64_t pc = 0; pc < j->k; pc += q->kc_step) {
    int64_t kc = j->k - pc < q->kc_step ? j->k - pc : q->kc_step;
    if (j->packed == 2) {
      int64_t off = q->m_pad * pc + i0 * ((kc + 1) & ~(int64_t)1);
      void *d = q->gk->a_bf16 ? (void *)((uint16_t *)q->dst + off) : (void *)((float *)q->dst + off);
      gemm_pack_a_even(j->x, j->ldx, i0, pc, i1 - i0, kc, (int)mr, q->gk->a_bf16, d);
    } else {
      gemm_pack_a(0, j->x, j->ldx, i0, pc, i1 - i0, kc, 1.0f, (int)mr,
                  (float *)q->dst + q->m_pad * pc + i0 * kc);
    }
  }
}

/* Packs j->x once over the pool (prepack_task) and sets j->apre; leaves it
 * NULL (each piece packs) when there is no buffer. */
static void prepack_x(RtPool *pool, LinearJob *j) {
  PackBufs *pb = pack_bufs();
  const GemmKernels *gk = gemm.k;
  PrepackJob q = {j, gk, gemm_kc_step(j->k, &j->bl), gemm_round_up(j->m, gk->mr), NULL};
  int64_t values = q.m_pad * ((j->k + 1) & ~(int64_t)1);
  int64_t floats = j->packed == 2 && gk->a_bf16 ? (values + 1) / 2 : values;
  if (j->packed == 3) /* int8: m rows of K4 bytes, then m scales */
    floats = (j->m * GEMM_I8_K4(j->k) + 3) / 4 + j->m;
  if (!pb || !pack_reserve_xa(pb, floats))
    return;
  q.dst = pb->xa;
  /* units: MR-row panels (int8: rows) */
  int64_t units = j->packed == 3 ? j->m : q.m_pad / gk->mr, threads = rt_pool_size(pool);
  rt_pool_parallel_for(pool, units, (units + threads - 1) / threads, prepack_task, &q);
  j->apre = pb->xa;
}

static void linear_run(RtPool *pool, int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                       const float *w, int packed, const float *bias, float *y, int64_t ldy,
                       int64_t act, float scale, const float *residual, int64_t ldr, int64_t mc,
                       int64_t nc, int64_t kc, int64_t task_macs, int64_t split_macs) {
  gemm_ensure_init();
  if (m <= 0 || n <= 0)
    return;
  LinearJob j = {m,
                 n,
                 k,
                 ldx,
                 ldy,
                 1,
                 x,
                 w,
                 bias,
                 packed,
                 y,
                 0,
                 {act, scale, residual, ldr},
                 gemm_blocks_fit(gemm.k, mc, nc, kc),
                 NULL};
  /* bf16 decode where the set multiplies bf16 x (vdpbf16ps): x rounded to
   * bf16 pairs once, here, for every piece. Without a buffer (out of
   * memory) the pieces take the set's widening kernel on x as it is. */
  if (packed == 2 && m <= GEMM_DECODE_ROWS && gemm.k->rows_p_bf16x && k > 0) {
    PackBufs *pb = pack_bufs();
    if (pb && pack_reserve_xa(pb, m * ((k + 1) / 2))) {
      round_rows_bf16(m, k, x, ldx, (uint32_t *)(void *)pb->xa);
      j.apre = pb->xa;
    }
  }
  int threads = rt_pool_size(pool);
  int64_t macs = m * n * (k > 0 ? k : 1);
  if (task_macs < 1)
    task_macs = 1;
  if (threads <= 1 || macs / 2 < task_macs) { /* macs < 2 task_macs, without overflow */
    linear_block(&j, 0, m, 0, n);
    return;
  }
  /* Few rows: split the columns (each thread streams its share of w once);
   * many rows: split the rows unless w is the larger operand, as every row
   * block packs all of w. The decode path always splits the columns. */
  j.split_n = m <= GEMM_DECODE_ROWS || m < 4 * threads || n * 2 > m;
  int64_t units, per_unit;
  if (j.split_n) {
    j.unit = LINEAR_COL_UNIT;
    units = (n + j.unit - 1) / j.unit;
    per_unit = m * j.unit * (k > 0 ? k : 1);
  } else {
    units = m;
    per_unit = n * (k > 0 ? k : 1);
  }
  int64_t grain = task_macs / per_unit + (task_macs % per_unit != 0); /* rounded up */
  if (macs < split_macs) {
    /* A small product: one piece per thread. Every piece repacks the
     * operand it shares (x for column pieces, w for row pieces) and pays a
     * call's fixed costs, which at this size outweigh what finer pieces
     * gain in balance (128x256x64: 37 -> 29 us on 2 threads). Column
     * pieces in units of 16, so 2 threads split 256 columns evenly. */
    if (j.split_n) {
      j.unit = 16;
      units = (n + j.unit - 1) / j.unit;
    }
    grain = (units + threads - 1) / threads;
  } else if (j.split_n) {
    /* Every column block packs all of x: two blocks per thread, not the
     * pool's usual four, measured ~10% faster at M=128 on 2 cores while
     * still leaving some slack for an unevenly loaded machine. */
    int64_t two_per_thread = (units + 2 * threads - 1) / (2 * threads);
    if (grain < two_per_thread)
      grain = two_per_thread;
  }
  /* column pieces of a product on tfmc's kernels share one packing of x
   * (int8: one quantisation, also for a few rows; the BLAS path packs its
   * own; f32 on a set with micro_a reads x in place, no packing at all:
   * bert-base b1, 2 threads, linears 103 -> 99 ms a forward) */
  if (j.split_n && units > grain && k > 0 &&
      (packed == 3 ||
       (!GEMM_ROWS_ONLY && m > GEMM_DECODE_ROWS &&
        (packed == 2 || (!gemm.k->micro_a && (packed == 1 || (packed == 0 && !gemm.sgemm32 &&
                                                                !gemm.sgemm64)))))))
    prepack_x(pool, &j);
  rt_pool_parallel_for(pool, units, grain, linear_task, &j);
}

void rt_linear(RtPool *pool, int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
               const float *w, const float *bias, float *y, int64_t ldy, int64_t act, float scale,
               const float *residual, int64_t ldr, int64_t mc, int64_t nc, int64_t kc,
               int64_t task_macs, int64_t split_macs) {
  linear_run(pool, m, n, k, x, ldx, w, 0, bias, y, ldy, act, scale, residual, ldr, mc, nc, kc,
             task_macs, split_macs);
}

void rt_linear_packed_i8(RtPool *pool, int64_t m, int64_t n, int64_t k, const float *x,
                         int64_t ldx, const float *wp, const float *bias, float *y, int64_t ldy,
                         int64_t act, float scale, const float *residual, int64_t ldr, int64_t mc,
                         int64_t nc, int64_t kc, int64_t task_macs, int64_t split_macs) {
  linear_run(pool, m, n, k, x, ldx, wp, 3, bias, y, ldy, act, scale, residual, ldr, mc, nc, kc,
             task_macs, split_macs);
}

void rt_linear_packed_bf16(RtPool *pool, int64_t m, int64_t n, int64_t k, const float *x,
                           int64_t ldx, const float *wp, const float *bias, float *y, int64_t ldy,
                           int64_t act, float scale, const float *residual, int64_t ldr,
                           int64_t mc, int64_t nc, int64_t kc, int64_t task_macs,
                           int64_t split_macs) {
  linear_run(pool, m, n, k, x, ldx, wp, 2, bias, y, ldy, act, scale, residual, ldr, mc, nc, kc,
             task_macs, split_macs);
}

void rt_linear_packed(RtPool *pool, int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                      const float *wp, const float *bias, float *y, int64_t ldy, int64_t act,
                      float scale, const float *residual, int64_t ldr, int64_t mc, int64_t nc,
                      int64_t kc, int64_t task_macs, int64_t split_macs) {
  linear_run(pool, m, n, k, x, ldx, wp, 1, bias, y, ldy, act, scale, residual, ldr, mc, nc, kc,
             task_macs, split_macs);
}

/* ---- prepacked weights ---- */

int64_t rt_gemm_packed_floats(int64_t n, int64_t k) {
  return (n + GEMM_PANEL - 1) / GEMM_PANEL * GEMM_PANEL * k;
}

void rt_gemm_pack(int64_t n, int64_t k, const float *w, float *dst) {
  rt_gemm_pack_strided(n, k, 0, k, w, k, 1, dst);
}

void rt_gemm_pack_strided(int64_t n, int64_t k, int64_t p0, int64_t p1, const float *w,
                          int64_t rs, int64_t cs, float *dst) {
  if (cs != 1) { /* a step's columns lie rs apart (1: one run): step by step, every panel
                  * (panel by panel, every step: 2x as long, a stored row per step) */
    for (int64_t p = p0; p < p1; p++)
      for (int64_t q = 0; q < n; q += GEMM_PANEL) {
        const float *src = w + p * cs + q * rs;
        float *d = dst + q * k + p * GEMM_PANEL;
        int64_t cols = n - q < GEMM_PANEL ? n - q : GEMM_PANEL;
        for (int64_t j = 0; j < GEMM_PANEL; j++) d[j] = j < cols ? src[j * rs] : 0.0f;
      }
    return;
  }
  /* rows as stored: a panel's 16 rows side by side, step by step, so that
   * each step's 16 floats are written at once (a row's whole K at a time,
   * written 64 bytes apart, took 1.8x as long: 3072 x 768, 3.4 -> 1.9 ms) */
  for (int64_t q = 0; q < n; q += GEMM_PANEL) {
    float *d = dst + q * k;
    int64_t cols = n - q < GEMM_PANEL ? n - q : GEMM_PANEL;
    const float *src[GEMM_PANEL];
    for (int64_t j = 0; j < GEMM_PANEL; j++) src[j] = w + (j < cols ? q + j : q) * rs;
    for (int64_t p = p0; p < p1; p++)
      for (int64_t j = 0; j < GEMM_PANEL; j++) d[p * GEMM_PANEL + j] = j < cols ? src[j][p] : 0.0f;
  }
}

int64_t rt_gemm_packed_bf16_floats(int64_t n, int64_t k) {
  return (n + GEMM_PANEL - 1) / GEMM_PANEL * GEMM_PANEL * ((k + 1) / 2);
}

void rt_gemm_pack_bf16(int64_t n, int64_t k, const float *w, float *dst) {
  uint32_t *d0 = (uint32_t *)(void *)dst;
  const int64_t k2 = (k + 1) / 2;
  for (int64_t q = 0; q < n; q += GEMM_PANEL) {
    uint32_t *d = d0 + q * k2;
    for (int64_t j = 0; j < GEMM_PANEL; j++) {
      const float *src = w + (q + j) * k;
      for (int64_t p = 0; p < k2 * 2; p += 2) {
        uint32_t lo = q + j < n ? f32_to_bf16(src[p]) : 0;
        uint32_t hi = q + j < n && p + 1 < k ? f32_to_bf16(src[p + 1]) : 0;
        d[p / 2 * GEMM_PANEL + j] = lo | hi << 16;
      }
    }
  }
}

int64_t rt_gemm_packed_i8_floats(int64_t n, int64_t k) {
  return (n + GEMM_PANEL - 1) / GEMM_PANEL * (GEMM_I8_PANEL_BYTES(k) / 4);
}

void rt_gemm_pack_i8(int64_t n, int64_t k, const float *w, float *dst) {
  const int64_t k4 = GEMM_I8_K4(k), ps = GEMM_I8_PANEL_BYTES(k);
  for (int64_t q = 0; q < n; q += GEMM_PANEL) {
    uint8_t *panel = (uint8_t *)(void *)dst + q / GEMM_PANEL * ps;
    float sw[GEMM_PANEL];
    int32_t sum[GEMM_PANEL];
    for (int64_t j = 0; j < GEMM_PANEL; j++) {
      const float *src = w + (q + j) * k;
      float amax = 0;
      for (int64_t p = 0; q + j < n && p < k; p++)
        amax = fmaxf(amax, fabsf(src[p]));
      float inv = amax > 0 ? 127.0f / amax : 0.0f;
      sw[j] = amax / 127.0f;
      sum[j] = 0;
      for (int64_t p = 0; p < k4; p++) {
        int8_t v = q + j < n && p < k ? quantise(src[p], inv) : 0;
        panel[p / 4 * 4 * GEMM_PANEL + j * 4 + p % 4] = (uint8_t)v;
        sum[j] += v;
      }
    }
    memcpy(panel + k4 * GEMM_PANEL, sw, sizeof sw);
    memcpy(panel + k4 * GEMM_PANEL + sizeof sw, sum, sizeof sum);
  }
}
