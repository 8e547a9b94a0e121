/* runtime/rt_generate.h — generation over a step function with a KV cache
 * (a step graph: frontend/spec.h LowerOptions.step): greedy, or sampled
 * through rt_sample.h.
 *
 *     RtGenerateOptions o = {.max_new = 20, .max_len = 1024, .vocab = 50257, .eos = 50256};
 *     RtGenerateResult r;
 *     int32_t out[20];
 *     if (rt_generate(&o, step, model, prompt, n_prompt, out, print_id, NULL, &r,
 *                     err, sizeof err)) ...   // out[0..r.n): the generated ids
 *
 * The loop: prefill, one step over the whole prompt (T = prompt length,
 * P = 0); the next id is the argmax of the last position's logits (the
 * first maximum on ties); then steps of T = 1 at P = prompt + generated - 1
 * feed each new id back, until max_new ids, the eos id (kept as the last
 * id), or the sequence (prompt + generated) reaching max_len, the positions
 * the cache holds (r.stop says which). Each id goes to on_token as soon as
 * it is chosen. The step function owns its cache: it keeps what earlier
 * steps appended, and the caller zeroes it before a new sequence.
 *
 * libc only; rt_generate allocates nothing. rt_generate runs one sequence;
 * rt_generate_batch a batch of them (below); rt_generate_beam one sequence's
 * beams. */
#ifndef TFMC_RT_GENERATE_H
#define TFMC_RT_GENERATE_H

#include "runtime/rt_sample.h"

#include <stddef.h>
#include <stdint.h>

/* Runs the model on tokens[0..n) at positions past..past+n-1 of the
 * sequence and points *logits at the last position's logits (vocab
 * floats, valid until the next call). Returns 0, or non-zero with a
 * message in err. */
typedef int (*RtStepFn)(void *user, const int32_t *tokens, int64_t n, int64_t past,
                        const float **logits, char *err, size_t errlen);
/* Called with each generated id, in order (index = its place in out). */
typedef void (*RtTokenFn)(void *user, int64_t index, int32_t id);

typedef enum RtStop {
  RT_STOP_COUNT,   /* max_new ids generated */
  RT_STOP_EOS,     /* the eos id was generated */
  RT_STOP_MAX_LEN, /* prompt + generated reached max_len */
  RT_STOP_KIND_COUNT
} RtStop;

typedef struct RtGenerateOptions {
  int64_t max_new; /* >= 1 */
  int64_t max_len; /* positions the cache holds, >= the prompt length */
  int64_t vocab;   /* logits per position */
  int64_t eos;     /* -1: none */
  /* NULL or not sampling: greedy (rt_argmax). Else each id is drawn by
   * rt_sample_token with rng (seeded by the caller: same seed, same ids on
   * every backend) and scratch (rt_sample_scratch_bytes(vocab) bytes);
   * rt_generate_batch: rng[b] for row b. */
  const RtSampleOptions *sample;
  RtRng *rng;
  void *scratch;
} RtGenerateOptions;

typedef struct RtGenerateResult {
  int64_t n;         /* ids written to out */
  RtStop stop;
  double prefill_ms; /* the prompt's step */
  double decode_ms;  /* every later step together (n - 1 of them) */
} RtGenerateResult;

/* out has room for max_new ids; on_token may be NULL. Refuses (returns 1
 * with a message) an empty prompt, a prompt longer than max_len, max_new <
 * 1; a failing step stops the loop with its message. */
int rt_generate(const RtGenerateOptions *o, RtStepFn step, void *step_user,
                const int32_t *prompt, int64_t n_prompt, int32_t *out, RtTokenFn on_token,
                void *token_user, RtGenerateResult *res, char *err, size_t errlen);

/* ---- beam search over a batched step (rt_sample.h's RtBeam) ----
 * Runs rows x n tokens (row-major) at positions past..past+n-1 of every row
 * and points *logits at the last position's logits of each row, [rows, V]. */
typedef int (*RtBatchStepFn)(void *user, const int32_t *tokens, int64_t rows, int64_t n,
                             int64_t past, const float **logits, char *err, size_t errlen);
/* Reorders the cache: row i < rows becomes old row parent[i], over its first
 * len positions. */
typedef int (*RtReorderFn)(void *user, const int64_t *parent, int64_t rows, int64_t len,
                           char *err, size_t errlen);

/* Beam search with `beams` live hypotheses (the step function takes up to
 * that many rows) and HF's length penalty (score = sum of log-probs /
 * len^length_penalty, rt_sample.h): the prompt runs once on row 0
 * (prefill), then each step feeds every live beam's new token on its row,
 * after the cache rows were reordered to the beams' parents. At most
 * max_new ids, and prompt + generated within max_len as rt_generate has
 * it (then res->stop is RT_STOP_MAX_LEN unless the best ends with eos). out gets
 * the best finished hypothesis (eos kept), res->n its length; o->sample
 * must be unset. The ids are known only when the search is done, so there
 * is no on_token callback. Returns 0, or 1 with a message (bad options as
 * rt_beam_create words them, a failing step). */
int rt_generate_beam(const RtGenerateOptions *o, int beams, double length_penalty,
                     RtBatchStepFn step, RtReorderFn reorder, void *step_user,
                     const int32_t *prompt, int64_t n_prompt, int32_t *out,
                     RtGenerateResult *res, char *err, size_t errlen);

/* ---- a batch of prompts (or of sources) at once ----
 * Called when row `row` is done: its ids ids[0..n), why it stopped. */
typedef void (*RtRowDoneFn)(void *user, int64_t row, const int32_t *ids, int64_t n, RtStop stop);

/* Greedy or sampled generation for `rows` sequences at once: the prompts
 * prompt[rows, n_prompt] (row-major, each row's own padding already known
 * to the step function: rt_stepper_set_padding) run as one step (prefill),
 * then every live row feeds its new id back, one step of live x 1 tokens
 * at a time. Each row stops on its own, at its eos (kept) or max_new ids.
 * When rows have finished, reorder moves the live rows' caches to the
 * front (row i < live becomes old row parent[i], parent[i] >= i: a hole
 * takes a row from above, the others stay) and the next steps run live
 * rows only, so a finished row costs nothing more; each row's ids are
 * those of its prompt alone. reorder NULL: a finished row keeps its place,
 * fed its last id again, its later ids ignored (every step runs `rows`).
 * All rows stop at max_len cache slots (n_prompt + generated, the padding
 * counted).
 * out[rows, max_new] gets row b's ids at out + b * max_new, lengths[b]
 * their count, stop[b] (may be NULL) why it stopped; on_done (may be NULL)
 * sees each row once, when it is done, rows finishing at one step in row
 * order. Sampling: row b draws from o->rng[b] (rows generators, seeded by
 * the caller). res->n is the longest row's count; res->stop RT_STOP_MAX_LEN
 * when the cache filled up first, else RT_STOP_EOS when every row ended at
 * its eos, else RT_STOP_COUNT. Returns 0, or 1 with a message (as
 * rt_generate's refusals, a failing step). */
int rt_generate_batch(const RtGenerateOptions *o, RtBatchStepFn step, RtReorderFn reorder,
                      void *step_user, const int32_t *prompt, int64_t rows, int64_t n_prompt,
                      int32_t *out, int64_t *lengths, RtStop *stop, RtRowDoneFn on_done,
                      void *done_user, RtGenerateResult *res, char *err, size_t errlen);

/* The index of the first maximum of x[0..n) (NaNs never win); 0 if n < 1. */
int32_t rt_argmax(const float *x, int64_t n);

#endif
