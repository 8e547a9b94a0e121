/* runtime/rt_attention.c — multi-head attention as two GEMMs per block of
 * query rows (see rt_attention.h for the formula and the layouts).
 *
 * Per task (batch element bi, head hd, query rows t0 .. t0+rows):
 *   S[rows, tk]  = scale * Q[t0.., hd] K[.., hd]^T     rt_sgemm, no transpose copy:
 *                                                      Q and K rows are h*dh apart
 *   S[r, j]      = -1e9 where the mask row says 0
 *   S[r, :]      = softmax(S[r, :])                    max-subtracted, in place
 *   O[t0.., hd]  = S V[.., hd]                         rt_sgemm into out, ldc = h*dv
 * Tasks are numbered ((bi * h) + hd) * n_blocks + block, so the tasks a
 * thread gets in a row mostly share one head's K and V.
 *
 * Invariants: every task writes only its own rows of its own head's columns
 * of out (and of probs), so tasks never race; S lives in the probs output
 * when there is one, else in the calling thread's scratch buffer (a pthread
 * key, freed at thread exit, grown only when a task needs more than any
 * before it), so steady-state runs do not allocate. A refused allocation
 * sends that task to the streaming loops, which need no memory at all. */
#include "runtime/rt_attention.h"

#include "runtime/rt_gemm.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Query rows per task: the scores of a block take ATTN_BLOCK x tk floats
 * (512 KiB at tk = 2048), and b * h * ceil(tq / ATTN_BLOCK) tasks keep the
 * pool busy even for one sequence. */
#define ATTN_BLOCK 64

/* masked_fill(mask == 0, -1e9), as the interpreter and PyTorch do */
#define ATTN_MASKED_SCORE (-1e9f)

typedef struct AttnJob {
  int64_t b, h, tq, tk, dh, dv, n_blocks;
  float scale;
  const float *q, *k, *v;
  const uint8_t *mask;
  int64_t mask_b, mask_q;
  float *out, *probs;
} AttnJob;

/* ---- per-thread scratch for the scores ---- */

typedef struct AttnScratch {
  float *data;
  int64_t cap; /* floats */
} AttnScratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free(void *p) {
  AttnScratch *s = p;
  if (!s)
    return;
  free(s->data);
  free(s);
}

static void scratch_key_init(void) {
  scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

/* The calling thread's buffer of at least n floats (n >= 1), or NULL when
 * memory is refused. The contents are left over from earlier tasks. */
static float *scratch_get(int64_t n) {
  pthread_once(&scratch_once, scratch_key_init);
  if (!scratch_key_ok)
    return NULL;
  AttnScratch *s = pthread_getspecific(scratch_key);
  if (!s) {
    s = calloc(1, sizeof *s);
    if (!s)
      return NULL;
    if (pthread_setspecific(scratch_key, s) != 0) {
      free(s);
      return NULL;
    }
  }
  if (s->cap < n) {
    if ((uint64_t)n > SIZE_MAX / sizeof(float))
      return NULL;
    float *d = malloc((size_t)n * sizeof(float)); /* old contents are not needed */
    if (!d)
      return NULL;
    free(s->data);
    s->data = d;
    s->cap = n;
  }
  return s->data;
}

/* ---- the pieces ---- */

/* The mask row for query t of batch element bi (broadcast dims read row
 * 0), or NULL without a mask. */
static const uint8_t *mask_row(const AttnJob *j, int64_t bi, int64_t t) {
  if (!j->mask)
    return NULL;
  int64_t mb = j->mask_b == 1 ? 0 : bi, mq = j->mask_q == 1 ? 0 : t;
  return j->mask + (mb * j->mask_q + mq) * j->tk;
}

/* exp(x) for x <= 0 (the softmax's x - max), within 2e-7 relative, written
 * without branches or calls so the loops below vectorise: x = n ln2 + r
 * with n = round(x / ln2) (the 1.5 * 2^23 trick; ln2 split in two so n ln2
 * is exact enough), e^r by its Taylor series to r^7 (|r| <= ln2/2: error
 * < 6e-9), then 2^n added to the exponent bits. Below -86 the result is 0
 * (e^-86 = 4.5e-38 is nothing next to the row's largest term, 1), as
 * expf's denormals would be; a NaN stays NaN. */
static inline float attn_exp(float x) {
  const float shift = 12582912.0f;
  float t = x * 1.44269504088896341f + shift;
  float n = t - shift;
  float r = x - n * 0.693145751953125f - n * 1.42860682030941723e-6f;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  uint32_t tb, pb, xb;
  memcpy(&tb, &t, sizeof tb);
  memcpy(&pb, &p, sizeof pb);
  memcpy(&xb, &x, sizeof xb);
  pb += (tb - 0x4B400000u) << 23;                              /* * 2^n */
  pb &= -(uint32_t)!(x < -86.0f);                              /* underflow: 0 */
  uint32_t nan = -(uint32_t)((xb & 0x7FFFFFFFu) > 0x7F800000u); /* x is NaN: x */
  pb = (pb & ~nan) | (xb & nan);
  float y;
  memcpy(&y, &pb, sizeof y);
  return y;
}

/* Loops over rows run in blocks of ATTN_LANES with a scalar tail: a fixed
 * trip count the compiler vectorises at -O2. */
#define ATTN_LANES 16

/* row[0..tk) = softmax(row masked by m, when m is not NULL), tk >= 1. */
static void softmax_row(float *restrict row, int64_t tk, const uint8_t *restrict m) {
  int64_t full = tk - tk % ATTN_LANES, x;
  if (m) {
    for (x = 0; x < full; x += ATTN_LANES)
      for (int l = 0; l < ATTN_LANES; l++) {
        float v = row[x + l]; /* loaded either way: no conditional load */
        row[x + l] = m[x + l] ? v : ATTN_MASKED_SCORE;
      }
    for (x = full; x < tk; x++)
      row[x] = m[x] ? row[x] : ATTN_MASKED_SCORE;
  }
  float lane[ATTN_LANES];
  for (int l = 0; l < ATTN_LANES; l++)
    lane[l] = row[0];
  for (x = 0; x < full; x += ATTN_LANES)
    for (int l = 0; l < ATTN_LANES; l++)
      lane[l] = row[x + l] > lane[l] ? row[x + l] : lane[l];
  float mx = row[0];
  for (int l = 0; l < ATTN_LANES; l++)
    mx = lane[l] > mx ? lane[l] : mx;
  for (x = full; x < tk; x++)
    mx = row[x] > mx ? row[x] : mx;
  for (int l = 0; l < ATTN_LANES; l++)
    lane[l] = 0;
  for (x = 0; x < full; x += ATTN_LANES)
    for (int l = 0; l < ATTN_LANES; l++) {
      float e = attn_exp(row[x + l] - mx);
      row[x + l] = e;
      lane[l] += e;
    }
  double sum = 0;
  for (int l = 0; l < ATTN_LANES; l++)
    sum += lane[l];
  for (x = full; x < tk; x++) {
    row[x] = attn_exp(row[x] - mx);
    sum += row[x];
  }
  float inv = (float)(1.0 / sum);
  for (x = 0; x < full; x += ATTN_LANES)
    for (int l = 0; l < ATTN_LANES; l++)
      row[x + l] *= inv;
  for (x = full; x < tk; x++)
    row[x] *= inv;
}

/* s[r, :] (rows of tk floats, contiguous) = softmax(masked s[r, :]) for the
 * query rows t0 .. t0+rows of batch element bi. tk >= 1. */
static void softmax_rows(const AttnJob *j, int64_t bi, int64_t t0, float *s, int64_t rows) {
  for (int64_t r = 0; r < rows; r++)
    softmax_row(s + r * j->tk, j->tk, mask_row(j, bi, t0 + r));
}

/* out row of query t, head hd = softmax(scores) v with an online softmax:
 * the running max mx and sum l; when a score beats mx, what was summed so
 * far is rescaled by exp(old mx - new mx). Needs no memory. tk >= 1. */
static void attn_row_streaming(const AttnJob *j, int64_t bi, int64_t hd, int64_t t) {
  int64_t ldq = j->h * j->dh, ldv = j->h * j->dv;
  const float *qr = j->q + (bi * j->tq + t) * ldq + hd * j->dh;
  float *o = j->out + (bi * j->tq + t) * ldv + hd * j->dv;
  const uint8_t *m = mask_row(j, bi, t);
  for (int64_t c = 0; c < j->dv; c++)
    o[c] = 0;
  float mx = -INFINITY;
  double l = 0;
  for (int64_t x = 0; x < j->tk; x++) {
    const float *kr = j->k + (bi * j->tk + x) * ldq + hd * j->dh;
    float sc = 0;
    for (int64_t d = 0; d < j->dh; d++)
      sc += qr[d] * kr[d];
    sc *= j->scale;
    if (m && !m[x])
      sc = ATTN_MASKED_SCORE;
    if (sc > mx) { /* (from -inf the rescale factor is 0, and o and l are 0) */
      float c = expf(mx - sc);
      l *= c;
      for (int64_t e = 0; e < j->dv; e++)
        o[e] *= c;
      mx = sc;
    }
    float e = expf(sc - mx);
    l += e;
    const float *vr = j->v + (bi * j->tk + x) * ldv + hd * j->dv;
    for (int64_t c = 0; c < j->dv; c++)
      o[c] += e * vr[c];
  }
  float inv = (float)(1.0 / l);
  for (int64_t c = 0; c < j->dv; c++)
    o[c] *= inv;
}

/* One task: query rows t0 .. t0+rows of head hd of batch element bi. */
static void attn_block(const AttnJob *j, int64_t bi, int64_t hd, int64_t t0, int64_t rows) {
  int64_t ldq = j->h * j->dh, ldv = j->h * j->dv;
  float *s = j->probs ? j->probs + ((bi * j->h + hd) * j->tq + t0) * j->tk
                      : scratch_get(rows * j->tk);
  if (!s) {
    for (int64_t r = 0; r < rows; r++)
      attn_row_streaming(j, bi, hd, t0 + r);
    return;
  }
  /* S[rows, tk] = scale * Q_blk[rows, dh] K_h[tk, dh]^T */
  rt_sgemm(0, 1, rows, j->tk, j->dh, j->scale, j->q + (bi * j->tq + t0) * ldq + hd * j->dh, ldq,
           j->k + bi * j->tk * ldq + hd * j->dh, ldq, 0.0f, s, j->tk);
  softmax_rows(j, bi, t0, s, rows);
  /* O_blk[rows, dv] = P[rows, tk] V_h[tk, dv] */
  rt_sgemm(0, 0, rows, j->dv, j->tk, 1.0f, s, j->tk, j->v + bi * j->tk * ldv + hd * j->dv, ldv,
           0.0f, j->out + (bi * j->tq + t0) * ldv + hd * j->dv, ldv);
}

static void attn_task(void *ctx, int64_t lo, int64_t hi) {
  const AttnJob *j = ctx;
  for (int64_t task = lo; task < hi; task++) {
    int64_t block = task % j->n_blocks, bh = task / j->n_blocks;
    int64_t t0 = block * ATTN_BLOCK;
    int64_t rows = j->tq - t0 < ATTN_BLOCK ? j->tq - t0 : ATTN_BLOCK;
    attn_block(j, bh / j->h, bh % j->h, t0, rows);
  }
}

/* With no keys every output is an empty sum: zeros. */
static void zero_out(int64_t b, int64_t h, int64_t tq, int64_t dv, float *out) {
  int64_t n = b * tq * h * dv;
  if (n > 0)
    memset(out, 0, (size_t)n * sizeof *out);
}

void rt_attention(RtPool *pool, int64_t b, int64_t h, int64_t tq, int64_t tk, int64_t dh,
                  int64_t dv, float scale, const float *q, const float *k, const float *v,
                  const uint8_t *mask, int64_t mask_b, int64_t mask_q, float *out,
                  float *probs) {
  if (b <= 0 || h <= 0 || tq <= 0)
    return;
  if (tk <= 0) {
    zero_out(b, h, tq, dv, out);
    return;
  }
  int64_t n_blocks = (tq + ATTN_BLOCK - 1) / ATTN_BLOCK;
  AttnJob j = {b, h, tq, tk, dh, dv, n_blocks, scale, q, k, v, mask, mask_b, mask_q, out, probs};
  rt_pool_parallel_for(pool, b * h * n_blocks, 1, attn_task, &j);
}

void rt_attention_streaming(int64_t b, int64_t h, int64_t tq, int64_t tk, int64_t dh,
                            int64_t dv, float scale, const float *q, const float *k,
                            const float *v, const uint8_t *mask, int64_t mask_b,
                            int64_t mask_q, float *out) {
  if (b <= 0 || h <= 0 || tq <= 0)
    return;
  if (tk <= 0) {
    zero_out(b, h, tq, dv, out);
    return;
  }
  AttnJob j = {b, h, tq, tk, dh, dv, 1, scale, q, k, v, mask, mask_b, mask_q, out, NULL};
  for (int64_t bi = 0; bi < b; bi++)
    for (int64_t hd = 0; hd < h; hd++)
      for (int64_t t = 0; t < tq; t++)
        attn_row_streaming(&j, bi, hd, t);
}
