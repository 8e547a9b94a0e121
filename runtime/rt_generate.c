/* runtime/rt_generate.c — the generation loops (rt_generate.h): one
 * sequence, a batch of them, beam search.
 * Invariant: the step function sees every id exactly once, at its cache
 * slot: the prompt at 0..n_prompt-1, generated id i at n_prompt + i (a
 * batch: every live row in lockstep, each row's padding known to the step,
 * a finished row no longer stepped once the live rows were compacted). */
#include "runtime/rt_generate.h"

#include "runtime/rt_model.h"   /* rt_errorf */
#include "runtime/rt_profile.h" /* rt_timing_now_ms */

#include <stdlib.h>

int32_t rt_argmax(const float *x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;
  return (int32_t)best;
}

/* Whether o samples (else greedy). */
static int gen_sampling(const RtGenerateOptions *o) { return o->sample && o->sample->sample; }

/* What the decoders refuse: nothing to generate, an empty prompt, a
 * prompt longer than max_len, sampling options out of range (or without
 * generators and scratch). */
static int gen_check(const RtGenerateOptions *o, int64_t n_prompt, char *err, size_t errlen) {
  if (o->max_new < 1)
    return rt_errorf(err, errlen, "nothing to generate: --generate must be >= 1, got %lld",
                     (long long)o->max_new);
  if (n_prompt < 1) return rt_errorf(err, errlen, "generation needs a prompt of at least one token");
  if (n_prompt > o->max_len)
    return rt_errorf(err, errlen,
                     "the prompt has %lld tokens, more than the model's max_len %lld",
                     (long long)n_prompt, (long long)o->max_len);
  if (gen_sampling(o) && (!o->rng || !o->scratch))
    return rt_errorf(err, errlen, "internal: sampling without a generator or scratch");
  if (gen_sampling(o) && rt_sample_options_check(o->sample, err, errlen)) return 1;
  return 0;
}

/* One id from a row of logits: greedy, or drawn from rng (one draw of the
 * generator per token, rt_sample.h). */
static int pick_id(const RtGenerateOptions *o, const float *logits, RtRng *rng, int32_t *id,
                   char *err, size_t errlen) {
  if (!gen_sampling(o)) {
    *id = rt_argmax(logits, o->vocab);
    return 0;
  }
  int64_t tok;
  if (rt_sample_token(logits, o->vocab, o->sample, rng, o->scratch, &tok, err, errlen)) return 1;
  *id = (int32_t)tok;
  return 0;
}

/* Why a sequence stops after id, its k-th new id (RT_STOP_KIND_COUNT: it
 * goes on): its eos, max_new ids, or a cache that feeding id would overrun. */
static RtStop stop_after(const RtGenerateOptions *o, int32_t id, int64_t k, int64_t n_prompt) {
  return o->eos >= 0 && id == o->eos ? RT_STOP_EOS
         : k >= o->max_new           ? RT_STOP_COUNT
         : n_prompt + k >= o->max_len ? RT_STOP_MAX_LEN
                                      : RT_STOP_KIND_COUNT;
}

int rt_generate(const RtGenerateOptions *o, RtStepFn step, void *step_user,
                const int32_t *prompt, int64_t n_prompt, int32_t *out, RtTokenFn on_token,
                void *token_user, RtGenerateResult *res, char *err, size_t errlen) {
  res->n = 0;
  res->stop = RT_STOP_COUNT;
  res->prefill_ms = res->decode_ms = 0;
  if (gen_check(o, n_prompt, err, errlen)) return 1;
  const float *logits;
  double t0 = rt_timing_now_ms();
  if (step(step_user, prompt, n_prompt, 0, &logits, err, errlen)) return 1;
  res->prefill_ms = rt_timing_now_ms() - t0;
  double t1 = rt_timing_now_ms();
  for (;;) {
    int32_t id;
    if (pick_id(o, logits, o->rng, &id, err, errlen)) return 1;
    out[res->n++] = id;
    if (on_token) on_token(token_user, res->n - 1, id);
    RtStop why = stop_after(o, id, res->n, n_prompt);
    if (why != RT_STOP_KIND_COUNT) {
      res->stop = why;
      break;
    }
    if (step(step_user, &out[res->n - 1], 1, n_prompt + res->n - 1, &logits, err, errlen))
      return 1;
  }
  res->decode_ms = rt_timing_now_ms() - t1;
  return 0;
}

/* After the rows of finished[] that finished at this step: the live rows
 * moved to the front of the step's batch, n_slots of them before, live
 * after. Each hole left below `live` takes the highest live row above it
 * (parent[i] > i, the rows before it stay: parent[i] = i), so a row is
 * copied only when a hole needs it; slot, row_of and feed follow. */
static void compact_rows(const unsigned char *finished, int64_t *slot, int64_t *row_of,
                         int32_t *feed, int64_t *parent, int64_t n_slots, int64_t live) {
  int64_t hi = n_slots;
  for (int64_t i = 0; i < live; i++) {
    parent[i] = i;
    if (!finished[row_of[i]]) continue;
    do hi--;
    while (finished[row_of[hi]]); /* live rows above `live` fill exactly its holes */
    parent[i] = hi;
    row_of[i] = row_of[hi];
    slot[row_of[i]] = i;
    feed[i] = feed[hi];
  }
}

int rt_generate_batch(const RtGenerateOptions *o, RtBatchStepFn step, RtReorderFn reorder,
                      void *step_user, const int32_t *prompt, int64_t rows, int64_t n_prompt,
                      int32_t *out, int64_t *lengths, RtStop *stop, RtRowDoneFn on_done,
                      void *done_user, RtGenerateResult *res, char *err, size_t errlen) {
  res->n = 0;
  res->stop = RT_STOP_COUNT;
  res->prefill_ms = res->decode_ms = 0;
  if (gen_check(o, n_prompt, err, errlen)) return 1;
  if (rows < 1) return rt_errorf(err, errlen, "generation needs at least one prompt");
  /* feed: the ids of the next step, by slot (a row's place in the step's
   * batch); slot[b] row b's, row_of[s] the row at slot s; parent: a
   * compaction's moves */
  int32_t *feed = malloc((size_t)rows * sizeof *feed);
  int64_t *slot = malloc((size_t)rows * 3 * sizeof *slot), *row_of = slot + rows,
          *parent = slot + 2 * rows;
  unsigned char *finished = calloc((size_t)rows, 1);
  if (!feed || !slot || !finished) {
    free(feed);
    free(slot);
    free(finished);
    return rt_errorf(err, errlen, "out of memory");
  }
  for (int64_t b = 0; b < rows; b++) {
    lengths[b] = 0;
    slot[b] = row_of[b] = b;
  }
  int rc = 1;
  const float *logits;
  double t0 = rt_timing_now_ms();
  if (step(step_user, prompt, rows, n_prompt, 0, &logits, err, errlen)) goto done;
  res->prefill_ms = rt_timing_now_ms() - t0;
  double t1 = rt_timing_now_ms();
  /* k: ids each live row has; n_slots: rows of the last step */
  int64_t live = rows, k = 0, n_slots = rows;
  for (;;) {
    k++;
    for (int64_t b = 0; b < rows; b++) { /* row order: rows done at one step are seen in order */
      if (finished[b]) continue; /* without reorder: still in the batch, fed its last id again */
      int32_t id;
      if (pick_id(o, logits + slot[b] * o->vocab, gen_sampling(o) ? &o->rng[b] : NULL, &id, err,
                  errlen))
        goto done;
      out[b * o->max_new + lengths[b]++] = id;
      feed[slot[b]] = id;
      RtStop why = stop_after(o, id, k, n_prompt);
      if (why == RT_STOP_KIND_COUNT) continue;
      live--;
      finished[b] = 1;
      if (stop) stop[b] = why;
      if (why == RT_STOP_MAX_LEN) res->stop = RT_STOP_MAX_LEN;
      if (on_done) on_done(done_user, b, out + b * o->max_new, lengths[b], why);
    }
    if (!live) break;
    if (reorder && live < n_slots) { /* the live rows' caches to the front */
      compact_rows(finished, slot, row_of, feed, parent, n_slots, live);
      if (reorder(step_user, parent, live, n_prompt + k - 1, err, errlen)) goto done;
      n_slots = live;
    }
    if (step(step_user, feed, n_slots, 1, n_prompt + k - 1, &logits, err, errlen)) goto done;
  }
  res->decode_ms = rt_timing_now_ms() - t1;
  int all_eos = 1;
  for (int64_t b = 0; b < rows; b++) {
    if (lengths[b] > res->n) res->n = lengths[b];
    all_eos &= o->eos >= 0 && out[b * o->max_new + lengths[b] - 1] == o->eos;
  }
  if (res->stop != RT_STOP_MAX_LEN && all_eos) res->stop = RT_STOP_EOS;
  rc = 0;
done:
  free(feed);
  free(slot);
  free(finished);
  return rc;
}

int rt_generate_beam(const RtGenerateOptions *o, int beams, double length_penalty,
                     RtBatchStepFn step, RtReorderFn reorder, void *step_user,
                     const int32_t *prompt, int64_t n_prompt, int32_t *out,
                     RtGenerateResult *res, char *err, size_t errlen) {
  res->n = 0;
  res->stop = RT_STOP_COUNT;
  res->prefill_ms = res->decode_ms = 0;
  if (gen_sampling(o))
    return rt_errorf(err, errlen, "--beams and --sample do not go together: beam search is "
                                  "deterministic");
  if (gen_check(o, n_prompt, err, errlen)) return 1;
  /* as rt_generate: prompt + generated stays within max_len (one id at least) */
  int64_t room = o->max_len - n_prompt > 1 ? o->max_len - n_prompt : 1;
  int64_t max_new = o->max_new < room ? o->max_new : room;
  RtBeam *bs = NULL;
  if (rt_beam_create(&bs, beams, o->vocab, max_new, o->eos, length_penalty, err, errlen)) return 1;
  int rc = 1;
  int64_t *parent = malloc((size_t)beams * sizeof *parent);
  int64_t *token = malloc((size_t)beams * sizeof *token);
  int32_t *feed = malloc((size_t)beams * sizeof *feed);
  if (!parent || !token || !feed) {
    rt_errorf(err, errlen, "out of memory");
    goto done;
  }
  const float *logits;
  double t0 = rt_timing_now_ms();
  if (step(step_user, prompt, 1, n_prompt, 0, &logits, err, errlen)) goto done;
  res->prefill_ms = rt_timing_now_ms() - t0;
  double t1 = rt_timing_now_ms();
  int n_live = 1, finished = 0;
  for (int64_t past = n_prompt;; past++) {
    if (rt_beam_step(bs, logits, parent, token, &n_live, &finished, err, errlen)) goto done;
    if (finished) break;
    /* every live beam continues on its row: its parent's cache, its token */
    if (reorder(step_user, parent, n_live, past, err, errlen)) goto done;
    for (int i = 0; i < n_live; i++) feed[i] = (int32_t)token[i];
    if (step(step_user, feed, n_live, 1, past, &logits, err, errlen)) goto done;
  }
  res->decode_ms = rt_timing_now_ms() - t1;
  const int64_t *best;
  double score;
  if (rt_beam_best(bs, 0, &best, &res->n, &score)) {
    rt_errorf(err, errlen, "internal: beam search finished without a hypothesis");
    goto done;
  }
  for (int64_t i = 0; i < res->n; i++) out[i] = (int32_t)best[i];
  if (o->eos >= 0 && res->n > 0 && out[res->n - 1] == o->eos) res->stop = RT_STOP_EOS;
  else if (res->n >= room && room < o->max_new) res->stop = RT_STOP_MAX_LEN;
  rc = 0;
done:
  free(parent);
  free(token);
  free(feed);
  rt_beam_destroy(bs);
  return rc;
}
