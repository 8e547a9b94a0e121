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
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int rt_gemm_avx512bf16_unused;
#endif
