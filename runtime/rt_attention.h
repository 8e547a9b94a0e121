/* runtime/rt_attention.h — multi-head scaled dot-product attention through
 * the GEMM entry: what the graph op `attention` (ir/ops.def) compiles to.
 *
 * For every batch element b, head h and query row t:
 *   s[j]   = scale * q[b,t,h*dh : (h+1)*dh] . k[b,j,h*dh : (h+1)*dh]
 *   s[j]   = -1e9 where mask[b|0, t|0, j] == 0   (replaced, not added: a row
 *            whose keys are all masked attends uniformly)
 *   p      = softmax(s)                          (max-subtracted)
 *   out[b,t,h*dv : (h+1)*dv] = sum_j p[j] v[b,j,h*dv : (h+1)*dv]
 *
 * Example (BERT-base self-attention over 2 sequences of 128 tokens with a
 * key padding mask of shape [2,1,128], in blocks of 64 query rows, the AVX2
 * products up to 256 keys):
 *     rt_attention(pool, 2, 12, 128, 128, 64, 64, 0.125f, q, 768, k, 768, v, 768,
 *                  128 * 768, 128 * 768, mask, 2, 1, out, NULL, 64, 256);
 *
 * Work splits over the pool as (b, h, block of block_q query rows) tasks; each
 * computes its block of scores with one single-threaded rt_sgemm straight
 * from q and k (leading dimension h*dh: no transposed copies), masks them,
 * takes the row softmax in place and multiplies by v with a second rt_sgemm
 * that writes into out (leading dimension h*dv); on x86 with AVX2+FMA, when
 * dv is a multiple of 8 and tk <= max_tk_tiled, both products are AVX2
 * register-tiled loops instead (no BLAS packing). The scores of a task are
 * block_q x tk floats in a per-thread scratch buffer that grows on demand and
 * is kept for the thread's life (freed at thread exit), so a long sequence
 * never needs a tq x tk matrix and nothing is allocated once the buffers
 * have reached their size. With probs the scores are computed in probs
 * itself and no scratch is used. Should a scratch buffer ever be refused
 * (out of memory), that task falls back to rt_attention_streaming's loops:
 * slower, never wrong.
 */
#ifndef TFMC_RT_ATTENTION_H
#define TFMC_RT_ATTENTION_H

#include "runtime/rt_pool.h"

#include <stdint.h>

/* Row-major; q, k and v may be views: consecutive rows lie ldq / ldk / ldv
 * floats apart (>= h*dh, h*dv: Q, K and V read in place out of one fused
 * QKV buffer [b, t, 3*h*dh] pass 3*h*dh and addresses 0, h*dh, 2*h*dh into
 * it), q's batch elements tq*ldq apart, k's and v's k_bstride / v_bstride
 * floats apart (a KV cache holding more rows than tk: k_bstride = rows *
 * ldk); contiguous tensors pass h*dh, h*dh, h*dv, tk*h*dh and tk*h*dv:
 *   q     [b, tq, h*dh]           k [b, tk, h*dh]      v [b, tk, h*dv]
 *   mask  NULL, or uint8 [mask_b, mask_q, tk] with mask_b 1 (broadcast over
 *         the batch) or b, mask_q 1 (broadcast over queries) or tq; 0 masks
 *   out   [b, tq, h*dv]           written
 *   probs NULL, or [b, h, tq, tk]: also written with the probabilities
 * out and probs must not overlap each other or the inputs. Sizes may be 0
 * (nothing to do; with tk == 0 out is all zeros). A NULL pool runs on the
 * calling thread.
 * Policy (chosen by the compiler; any values give the same result up to
 * rounding, and the same bits for any thread count):
 *   block_q       query rows per task (values below 1 count as 1)
 *   max_tk_tiled  the AVX2 register-tiled products run when tk <= this
 *                 (and the CPU and dv allow them); 0: always BLAS */
void rt_attention(RtPool *pool, int64_t b, int64_t h, int64_t tq, int64_t tk, int64_t dh,
                  int64_t dv, float scale, const float *q, int64_t ldq, const float *k,
                  int64_t ldk, const float *v, int64_t ldv, int64_t k_bstride,
                  int64_t v_bstride, const uint8_t *mask, int64_t mask_b, int64_t mask_q,
                  float *out, float *probs, int64_t block_q, int64_t max_tk_tiled);

/* The same result in the flash form (what the graph op `attention.flash`
 * compiles to): per task (b, h, block of block_q query rows) the keys are
 * swept in blocks of block_k; each block's scores are computed, masked
 * (-1e9) and folded into a running row max m and sum l with an online
 * softmax, the output rows rescaled by exp(m_old - m_new) and the block's
 * weighted sum of v added:
 *   S = scale Q_blk K_j^T; m' = max(m, rowmax S); P = exp(S - m');
 *   l = l exp(m - m') + rowsum P; O = O exp(m - m') + P V_j;  finally O /= l
 * so no row of scores is ever longer than block_k: a task's scratch is
 * block_q x block_k scores, whatever tk is (plus, per thread, one head's K
 * and V packed for the AVX2 products), and memory stays linear in the
 * sequence length. Layouts and
 * strides as rt_attention's (out contiguous, [b, tq, h*dv]); no probs.
 * Policy: block_q query rows per task, block_k keys per block (values below
 * 1 count as 1); any values give the same result up to rounding, and the
 * same bits for any thread count. */
void rt_attention_flash(RtPool *pool, int64_t b, int64_t h, int64_t tq, int64_t tk, int64_t dh,
                        int64_t dv, float scale, const float *q, int64_t ldq, const float *k,
                        int64_t ldk, const float *v, int64_t ldv, int64_t k_bstride,
                        int64_t v_bstride, const uint8_t *mask, int64_t mask_b, int64_t mask_q,
                        float *out, int64_t block_q, int64_t block_k);

/* The same result without the GEMM and without scratch memory: one query
 * row at a time, online softmax over the keys (running max and sum, the
 * output rescaled as the max grows). What rt_attention falls back to when a
 * scratch buffer cannot be allocated; exposed for tests. Single-threaded. */
void rt_attention_streaming(int64_t b, int64_t h, int64_t tq, int64_t tk, int64_t dh,
                            int64_t dv, float scale, const float *q, const float *k,
                            const float *v, const uint8_t *mask, int64_t mask_b,
                            int64_t mask_q, float *out);

#endif
