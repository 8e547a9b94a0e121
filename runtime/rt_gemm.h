/* runtime/rt_gemm.h — the matrix-multiply entry of compiled code.
 *
 * Backends, chosen once at first use: OpenBLAS, loaded with dlopen AFTER
 * setting OPENBLAS_CORETYPE (when unset and the CPU has AVX-512: Debian 12's
 * OpenBLAS 0.3.21 misdetects such CPUs and falls back to SSE3 kernels 4-5x
 * slower) and OPENBLAS_NUM_THREADS=1 (tfmc's pool owns the cores; BLAS's own
 * threads would spin against it), or the portable blocked GEMM when no
 * OpenBLAS is found, when OpenBLAS reports a pre-AVX core on a CPU with
 * AVX2+FMA (its SSE3 fallback is ~3.5x slower than the portable kernels),
 * or TFMC_GEMM=portable is set (TFMC_GEMM=portable-baseline forces the SSE2
 * kernels, for tests). The choice sets environment variables, so make it
 * (rt_gemm_backend()) before starting any thread. A single row (M = 1) never
 * goes through sgemm: a matrix-vector kernel is 2-3x faster there; nor do
 * rt_linear's products of up to 8 rows (the decode path, below).
 *
 * The portable kernels come in four sets, the widest the CPU and OS run
 * chosen once by cpuid and xgetbv: AVX-512F (6x64 register tile), AVX2+FMA
 * (6x16), on aarch64 NEON (6x16; always there), baseline (a 4x16 C tile
 * built for the target's base ISA; what s390x and pre-AVX2 x86 get). All
 * read B in panels of 16 columns (rt_gemm_kernels.h), packed per call or
 * once (rt_gemm_pack). TFMC_GEMM_ISA=avx512|avx2|neon|scalar
 * caps the choice (baseline is scalar's other name), so one machine can
 * test and time every path; it applies whichever backend does the GEMMs,
 * since the few-row kernels are tfmc's in both. */
#ifndef TFMC_RT_GEMM_H
#define TFMC_RT_GEMM_H

#include "runtime/rt_pool.h"

#include <stdint.h>

/* y[M,N] = act(scale * (x[M,K] w[N,K]^T + bias[N])) + residual[M,N]:
 * a GEMM with an epilogue, row-major; bias may be NULL (none), residual
 * NULL (none; else rows ldr floats apart, not overlapping y); act is an
 * RtAct (runtime/rt_act.h: none, relu, gelu, gelu_tanh); scale 1 and act
 * none with no residual is the plain product. x rows are ldx floats apart,
 * y rows ldy apart; w is dense [N,K]. The epilogue is applied to each
 * output block as soon as its sums are final, while it is in cache: per
 * register tile in tfmc's own GEMM, per mc x nc block after OpenBLAS's
 * sgemm, per block of the decode path; y is written once more at most,
 * never read back from memory for a separate pass.
 *
 * M <= 8 (decoding a few tokens) takes the decode path: no packing, each
 * row of w read from memory once for all M rows of x, the pool splitting
 * the columns (N).
 *
 * The caller's policy (the compiler chooses it: passes/lower_loops.c, and
 * the tile pass from the target's caches, passes/tile.c):
 *   mc, nc, kc  cache blocks of tfmc's own GEMM: an mc x kc block of x and
 *               a kc x nc block of w are packed (per thread), kc bounding
 *               the K blocks (K is cut into equal blocks, multiples of 8);
 *               rounded down to whole register tiles of the CPU's kernel
 *               set, clamped to 4096 / 65536 / 8192; values below 1 mean
 *               128 / 2016 / 384. With OpenBLAS, mc x nc is the block the
 *               epilogue follows sgemm by (only when there is an epilogue).
 *   task_macs   multiply-adds a task gets at least; a product of fewer than
 *               2 * task_macs runs on the calling thread (values below 1
 *               count as 1)
 *   split_macs  a product of fewer multiply-adds is cut into one piece per
 *               thread; larger ones into pieces of at least task_macs
 * Splitting never changes the result: the same bits for any task_macs,
 * split_macs and thread count (the blocks mc, nc may change the bits of
 * OpenBLAS's products; kc those of tfmc's own). */
void rt_linear(RtPool *pool, int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
               const float *w, const float *bias, float *y, int64_t ldy, int64_t act, float scale,
               const float *residual, int64_t ldr, int64_t mc, int64_t nc, int64_t kc,
               int64_t task_macs, int64_t split_macs);

/* rt_linear with w prepacked by rt_gemm_pack: the same y, bit for bit
 * (the same kernels read the same values), but the weights are never
 * repacked and never go through BLAS (TFMC_GEMM=openblas applies to
 * rt_linear only: compile with --disable-pass=pack-weights for that). */
void rt_linear_packed(RtPool *pool, int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                      const float *wp, const float *bias, float *y, int64_t ldy, int64_t act,
                      float scale, const float *residual, int64_t ldr, int64_t mc, int64_t nc,
                      int64_t kc, int64_t task_macs, int64_t split_macs);

/* The packed form of a linear's weights w[N, K] (what rt_linear_packed
 * reads; written once, at build or load time): panels of 16 output
 * columns, panel q holding w[16q + j, p] at [q * K * 16 + p * 16 + j],
 * columns past N zero. The layout is the same on every ISA (the kernels
 * read 1 or 4 panels at a time), so a packed file runs on any CPU.
 * rt_gemm_packed_floats is its size: ceil(N / 16) * 16 * K. The panels
 * lie in order, so for Q a multiple of 16 the packing of rows [Q, N) is
 * that of w + Q K (N - Q rows) at dst + rt_gemm_packed_floats(Q, K): a
 * matrix can be packed in row pieces, by several threads; the same holds
 * for the bf16 and int8 packings with their own sizes. */
int64_t rt_gemm_packed_floats(int64_t n, int64_t k);
void rt_gemm_pack(int64_t n, int64_t k, const float *w, float *dst);
/* The same packing of a strided [N, K] matrix, element (i, p) at
 * w[i * rs + p * cs] (rs = K, cs = 1: rt_gemm_pack's w; rs = 1, cs = N:
 * w stored transposed, as a Conv1D's [in, out]), steps [p0, p1) only,
 * written where they lie in dst (the whole matrix's packing): a matrix
 * can also be packed in pieces of K. */
void rt_gemm_pack_strided(int64_t n, int64_t k, int64_t p0, int64_t p1, const float *w,
                          int64_t rs, int64_t cs, float *dst);

/* bf16 weights (--weights-dtype bf16): w packed by rt_gemm_pack_bf16, the
 * same panels of 16 output columns holding bf16 pairs of k-steps
 * (rt_gemm_kernels.h), half the bytes; sums in f32. Where the CPU has
 * AVX512_BF16, every product rounds x to bf16 (the decode path, M <= 8,
 * once per product) and runs vdpbf16ps; elsewhere the weights are widened
 * to f32 in registers and x is used as it is.
 * rt_gemm_packed_bf16_floats: ceil(N / 16) * 16 * ceil(K / 2), the size in
 * floats (two bf16 per float). Rounding: to nearest even. */
void rt_linear_packed_bf16(RtPool *pool, int64_t m, int64_t n, int64_t k, const float *x,
                           int64_t ldx, const float *wp, const float *bias, float *y, int64_t ldy,
                           int64_t act, float scale, const float *residual, int64_t ldr,
                           int64_t mc, int64_t nc, int64_t kc, int64_t task_macs,
                           int64_t split_macs);
int64_t rt_gemm_packed_bf16_floats(int64_t n, int64_t k);
/* int8 weights (--weights-dtype int8): w packed by rt_gemm_pack_i8 with one
 * symmetric scale per output column (max|w[j, :]| / 127, values rounded to
 * nearest even), in panels of 16 columns x 4 steps (rt_gemm_kernels.h);
 * each row of x is quantised the same way when the product runs, the sums
 * are exact 32-bit integers (vpdpbusd where the CPU has AVX512_VNNI,
 * vpmaddubsw with AVX2, C elsewhere: the same bits on every CPU), then
 * scaled by both scales. K must stay below 133000 (exact sums).
 * rt_gemm_packed_i8_floats: ceil(N / 16) * (16 * ceil4(K) + 128) / 4. */
void rt_linear_packed_i8(RtPool *pool, int64_t m, int64_t n, int64_t k, const float *x,
                         int64_t ldx, const float *wp, const float *bias, float *y, int64_t ldy,
                         int64_t act, float scale, const float *residual, int64_t ldr, int64_t mc,
                         int64_t nc, int64_t kc, int64_t task_macs, int64_t split_macs);
int64_t rt_gemm_packed_i8_floats(int64_t n, int64_t k);
void rt_gemm_pack_i8(int64_t n, int64_t k, const float *w, float *dst);
void rt_gemm_pack_bf16(int64_t n, int64_t k, const float *w, float *dst);

/* C[M,N] = alpha op(A) op(B) + beta C, row-major (op = transpose if t*),
 * single-threaded (callers parallelise over independent products). */
void rt_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
              int64_t ldc);

/* The portable blocked GEMM alone (what rt_sgemm falls back to), exposed
 * for tests and benchmarks. */
void rt_sgemm_portable(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                       const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                       float *c, int64_t ldc);

/* "openblas (coretype SkylakeX)", "portable", ... for reports. */
const char *rt_gemm_backend(void);

/* The vector width, in floats, of the kernel set the GEMM runs (the widest
 * the CPU and OS allow, capped by TFMC_GEMM_ISA): 16 (AVX-512F), 8
 * (AVX2+FMA), 4 (NEON), 1 (baseline). rt_attention's kernels follow the
 * same choice. */
int rt_gemm_lanes(void);

#endif
