/* runtime/rt_gemm_kernels.h — private to rt_gemm*.c: the kernel set one
 * ISA provides to the GEMM entry (rt_gemm.h) and the packed layouts those
 * kernels read.
 *
 * Packed layouts (written by rt_gemm.c's pack functions, read by micro):
 *   A_p  one MR-row panel of alpha*op(A): kc groups of mr floats
 *        (A_p[p*mr + i] = alpha*op(A)[i, p]), rows past the matrix zero
 *   B_p  one NR-column panel of op(B): kc groups of nr floats
 *        (B_p[p*nr + j] = op(B)[p, j]), columns past the matrix zero;
 *        64-byte aligned when nr*4 is a multiple of 64
 *
 * Every kernel computes each output element with the same operations in
 * the same order wherever the element lies in its tile or block, so how a
 * product is cut (rows, columns, threads) never changes a result. */
#ifndef TFMC_RT_GEMM_KERNELS_H
#define TFMC_RT_GEMM_KERNELS_H

#include <stdint.h>

/* rt_linear's decode path (GEMV-like, weights streamed once) takes products
 * of at most this many rows. */
#define GEMM_DECODE_ROWS 8

typedef struct GemmKernels {
  const char *isa; /* "avx512f", "avx2+fma", "baseline" */
  int mr, nr;      /* the micro-kernel's register tile */
  int64_t mc, nc;  /* cache blocks: multiples of mr and nr */
  /* C[mr',nr'] (ldc) += A_p^T B_p over kc; mr' <= mr and nr' <= nr say how
   * much of the tile is inside C. */
  void (*micro)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int mr,
                int nr);
  /* y[j] = alpha dot(x[0..k), w[j*ldw..]) + beta y[j] for j < n */
  void (*gemv_t)(int64_t n, int64_t k, float alpha, const float *x, const float *w, int64_t ldw,
                 float beta, float *y);
  /* y[j] = alpha sum_p x[p] b[p*ldb + j] + beta y[j] for j < n */
  void (*gemv_n)(int64_t n, int64_t k, float alpha, const float *x, const float *b, int64_t ldb,
                 float beta, float *y);
  /* decode: y[i, j] = dot(x[i*ldx..], w[j*ldw..]) over k, i < m <= GEMM_DECODE_ROWS,
   * j < n; reads each row of w from memory once for all m rows of x */
  void (*rows)(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const float *w,
               int64_t ldw, float *y, int64_t ldy);
} GemmKernels;

#if defined(__GNUC__) && defined(__x86_64__) && !defined(TFMC_STATIC)
#define GEMM_AVX512 1
/* rt_gemm_avx512.c: built with target("avx512f"); call only when the CPU
 * and the OS support AVX-512F (rt_gemm.c checks cpuid and xgetbv). */
#ifndef GEMM_AVX512_MR /* the tile; -D overrides are for measuring others */
#define GEMM_AVX512_MR 6
#define GEMM_AVX512_NR 64
#endif
void rt_gemm_micro_avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                          int mr, int nr);
void rt_gemm_rows_avx512(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                         const float *w, int64_t ldw, float *y, int64_t ldy);
#endif

#endif
