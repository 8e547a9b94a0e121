/* runtime/rt_gemm_kernels.h — private to rt_gemm*.c: the kernel set one
 * ISA provides to the GEMM entry (rt_gemm.h) and the packed layouts those
 * kernels read.
 *
 * Packed layouts (written by rt_gemm.c's pack functions, read by micro):
 *   A_p  one MR-row panel of alpha*op(A): kc groups of mr floats
 *        (A_p[p*mr + i] = alpha*op(A)[i, p]), rows past the matrix zero
 *   B_p  op(B) in panels of GEMM_PANEL (16) columns: panel q holds columns
 *        16q..16q+15 as consecutive groups of 16 floats, one per step of k
 *        (B_p[q][p*16 + j] = op(B)[p, 16q + j]), columns past the matrix
 *        zero; panels `bs` floats apart, each 64-byte aligned. A kernel
 *        with a register tile of NR = 16v columns reads v panels at once.
 *        The GEMM packs a kc x nc block of op(B) this way per call (bs =
 *        kc * 16); a linear's weights w[N, K] are packed once this way
 *        over the whole of K (rt_gemm_pack: bs = K * 16, and a block at
 *        row p0 of K starts p0 * 16 floats into each panel), so both run
 *        the same micro-kernel and prepacked weights are never repacked.
 *
 *   B_h  bf16 weights (rt_gemm_pack_bf16): the same panels of 16 columns,
 *        each a run of 32-bit words, one per pair of k-steps and column:
 *        word [q][p/2][j] = bf16(w[16q + j, p]) | bf16(w[16q + j, p+1]) << 16
 *        (p even; the high half 0 past K), panels ceil(K/2) * 16 words
 *        apart. The two f32s of a word are its low half shifted up and its
 *        high half with the low one cleared; vdpbf16ps reads it as is.
 *   A_h  (kernels with a_bf16 only) one MR-row panel of op(A) as bf16
 *        pairs: kc/2 groups of mr words, word [p/2][i] = bf16(A[i, p]) |
 *        bf16(A[i, p+1]) << 16.
 *   X_h  (rows_p_bf16x only) rows of x as bf16 pairs, ldx words apart:
 *        word [r][p/2] = bf16(x[r, p]) | bf16(x[r, p+1]) << 16, the high
 *        half 0 past k (rounded as A_h is, by the same function).
 *   B_q  int8 weights (rt_gemm_pack_i8): panels of 16 columns, each
 *        GEMM_I8_PANEL_BYTES(K) bytes: K4 = K rounded up to 4 steps as
 *        K4/4 groups of 16 columns x 4 steps of int8 (byte [p/4][j][p%4]
 *        = qw[16q + j, p], 0 past K), then the 16 columns' f32 scales sw
 *        and their i32 sums of qw over K (what vpdpbusd's unsigned
 *        operand cost when it was x; since the VNNI kernel feeds the
 *        weights as that operand no kernel reads them, and they stay so
 *        that packed files keep their layout).
 *   X_q  activations for int8 products: each row quantised to K4 int8
 *        (0 past K), its scale sx[r] beside.
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
/* Columns per panel of B_p (and of prepacked weights). */
#define GEMM_PANEL 16
/* int8 panels: steps rounded up to 4, bytes per panel of 16 columns */
#define GEMM_I8_K4(k) (((k) + 3) & ~(int64_t)3)
#define GEMM_I8_PANEL_BYTES(k) (GEMM_I8_K4(k) * GEMM_PANEL + 2 * 4 * GEMM_PANEL)
/* The integer sums of an int8 product are exact below this K (K * 127^2
 * < 2^31). */
#define GEMM_I8_MAX_K 133000

/* What micro_a does besides C += A B: with set, C = bias + A B (bias
 * NULL: zeros) without reading C -- a register tile's first K block, the
 * same bits as C = bias then C += A B; with res (the last K block of a
 * linear whose epilogue is a residual add only), each element then + its
 * res[i * ldr + j], as the epilogue would add it; and while its k loop
 * runs it prefetches pf_bytes from pf into L2, a line every other k-step
 * (a slice of the next tile column's B panels; pf_bytes 0: none). */
typedef struct GemmTileExtra {
  const float *bias;
  int set;
  const float *res;
  int64_t ldr;
  const void *pf;
  int64_t pf_bytes;
} GemmTileExtra;

typedef struct GemmKernels {
  const char *isa; /* "avx512f", "avx2+fma", "neon", "baseline" */
  int mr, nr;      /* the micro-kernel's register tile; nr a multiple of GEMM_PANEL */
  int64_t mc, nc;  /* cache blocks: multiples of mr and nr */
  /* C[mr',nr'] (ldc) += A_p^T B_p over kc, B_p's panels bs floats apart;
   * mr' <= mr and nr' <= nr say how much of the tile is inside C (only
   * the panels holding columns < nr' are read). */
  void (*micro)(int64_t kc, const float *a, const float *b, int64_t bs, float *c, int64_t ldc,
                int mr, int nr);
  /* micro on A itself (rows lda apart) instead of A_p, so A is never
   * packed, with the extras of x (GemmTileExtra); NULL where the set has
   * none */
  void (*micro_a)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t bs, float *c,
                  int64_t ldc, int mr, int nr, const struct GemmTileExtra *x);
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
  /* decode on prepacked weights: the same y for w packed as B_p over all of
   * k (panels k*16 floats apart, wp at the panel of column 0); each
   * element is one fma chain over p in order */
  void (*rows_p)(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const float *wp,
                 float *y, int64_t ldy);
  /* bf16 weights: C[mr',nr'] += A^T B_h over kc (even) k-steps, B_h's
   * panels bs words apart; a is A_h when a_bf16, else A_p (f32, kc groups
   * of mr, the padding step zero) */
  void (*micro_bf16)(int64_t kc, const void *a, const uint32_t *b, int64_t bs, float *c,
                     int64_t ldc, int mr, int nr);
  int a_bf16;
  /* one B_h panel of kc (even) k-steps widened to a B_p panel (kc x 16
   * floats), on which micro gives micro_bf16's bits (the same fma chain
   * per element); NULL where the set's micro_bf16 is not that. A row
   * block of many tiles then widens each panel once instead of once per
   * tile (gemm_blocked_bf16). */
  void (*widen_bf16)(int64_t kc, const uint32_t *b, float *f);
  /* decode on B_h over all of k (panels ceil(k/2) * 16 words apart) */
  void (*rows_p_bf16)(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                      const uint32_t *wp, float *y, int64_t ldy);
  /* the same product on x rounded to bf16 pairs (X_h, ldx words apart), or
   * NULL where the set has no such kernel; rt_linear then rounds x once
   * per product and takes this one */
  void (*rows_p_bf16x)(int64_t m, int64_t n, int64_t k, const uint32_t *xh, int64_t ldx,
                       const uint32_t *wp, float *y, int64_t ldy);
  /* int8: y[r, j] = sx[r] sw[j] sum_p xq[r*ldq + p] qw[j, p] for r < m (any
   * m), j < n, on B_q panels (wp at the panel of column 0); exact integer
   * sums, so every kernel gives the same bits */
  void (*rows_i8)(int64_t m, int64_t n, int64_t k, const int8_t *xq, int64_t ldq, const float *sx,
                  const uint8_t *wp, float *y, int64_t ldy);
} GemmKernels;

/* rt_gemm_i8.c: the portable int8 kernel */
void rt_gemm_rows_i8_base(int64_t m, int64_t n, int64_t k, const int8_t *xq, int64_t ldq,
                          const float *sx, const uint8_t *wp, float *y, int64_t ldy);

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(TFMC_STATIC)
/* rt_gemm_avx2.c: built with target("avx2,fma"); call only when the CPU
 * and the OS support AVX2 and FMA. A 6x16 tile. */
#define GEMM_AVX2 1
/* The decode kernels' prefetch of the next tile's weight panels: the line
 * `bytes` past p into L2 (the address formed as an integer: past the last
 * panel it points at nothing, and a prefetch never faults). Expands in
 * the kernel files, which include <immintrin.h>. */
#define GEMM_PREFETCH_L2(p, bytes)                                                                 \
  _mm_prefetch((const char *)((uintptr_t)(p) + (uintptr_t)(bytes)), _MM_HINT_T1)
#define GEMM_AVX2_MR 6
#define GEMM_AVX2_NR 16
void rt_gemm_micro_avx2(int64_t kc, const float *a, const float *b, int64_t bs, float *c,
                        int64_t ldc, int mr, int nr);
void rt_gemm_rows_p_avx2(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                         const float *wp, float *y, int64_t ldy);
void rt_gemm_micro_bf16w_avx2(int64_t kc, const void *a, const uint32_t *b, int64_t bs, float *c,
                              int64_t ldc, int mr, int nr);
void rt_gemm_widen_bf16_avx2(int64_t kc, const uint32_t *b, float *f);
void rt_gemm_rows_p_bf16_avx2(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                              const uint32_t *wp, float *y, int64_t ldy);
void rt_gemm_rows_i8_avx2(int64_t m, int64_t n, int64_t k, const int8_t *xq, int64_t ldq,
                          const float *sx, const uint8_t *wp, float *y, int64_t ldy);
#endif

#if defined(__GNUC__) && defined(__x86_64__) && !defined(TFMC_STATIC)
/* rt_gemm_avx512.c: built with target("avx512f"); call only when the CPU
 * and the OS support AVX-512F (rt_gemm.c checks cpuid and xgetbv). */
#define GEMM_AVX512 1
#ifndef GEMM_AVX512_MR /* the tile; -D overrides are for measuring others */
#define GEMM_AVX512_MR 6
#define GEMM_AVX512_NR 64
#endif
void rt_gemm_micro_avx512(int64_t kc, const float *a, const float *b, int64_t bs, float *c,
                          int64_t ldc, int mr, int nr);
void rt_gemm_micro_a_avx512(int64_t kc, const float *a, int64_t lda, const float *b, int64_t bs,
                            float *c, int64_t ldc, int mr, int nr, const GemmTileExtra *x);
void rt_gemm_rows_avx512(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                         const float *w, int64_t ldw, float *y, int64_t ldy);
void rt_gemm_rows_p_avx512(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                           const float *wp, float *y, int64_t ldy);
void rt_gemm_micro_bf16w_avx512(int64_t kc, const void *a, const uint32_t *b, int64_t bs,
                                float *c, int64_t ldc, int mr, int nr);
void rt_gemm_rows_p_bf16_avx512(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                                const uint32_t *wp, float *y, int64_t ldy);
/* rt_gemm_avx512bf16.c: target("avx512f,avx512bf16"); only when cpuid says
 * AVX512_BF16 too. A is A_h (a_bf16). */
void rt_gemm_micro_bf16dp_avx512(int64_t kc, const void *a, const uint32_t *b, int64_t bs,
                                 float *c, int64_t ldc, int mr, int nr);
void rt_gemm_rows_p_bf16dp_avx512(int64_t m, int64_t n, int64_t k, const uint32_t *xh, int64_t ldx,
                                  const uint32_t *wp, float *y, int64_t ldy);
/* rt_gemm_i8.c: target("avx512f,avx512bw,avx512vnni"); only when cpuid
 * says AVX512_VNNI and AVX512BW too. */
void rt_gemm_rows_i8_vnni(int64_t m, int64_t n, int64_t k, const int8_t *xq, int64_t ldq,
                          const float *sx, const uint8_t *wp, float *y, int64_t ldy);
#endif

#if defined(__GNUC__) && defined(__aarch64__) && defined(__ARM_NEON) && !defined(TFMC_STATIC)
/* rt_gemm_neon.c: NEON is architectural on aarch64, so always callable
 * there. A 6x16 tile (24 of the 32 q registers accumulate). */
#define GEMM_NEON 1
#define GEMM_NEON_MR 6
#define GEMM_NEON_NR 16
void rt_gemm_micro_neon(int64_t kc, const float *a, const float *b, int64_t bs, float *c,
                        int64_t ldc, int mr, int nr);
void rt_gemm_rows_p_neon(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                         const float *wp, float *y, int64_t ldy);
void rt_gemm_micro_bf16w_neon(int64_t kc, const void *a, const uint32_t *b, int64_t bs, float *c,
                              int64_t ldc, int mr, int nr);
void rt_gemm_rows_p_bf16_neon(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                              const uint32_t *wp, float *y, int64_t ldy);
#endif

#endif
