/* runtime/rt_sample.h — decoding strategies for generation: a seeded PRNG,
 * greedy / temperature / top-k / top-p sampling of one token from a row of
 * logits, and beam search. Model-independent: the generation loop runs the
 * model's step, hands the last position's logits [B, V] here, and feeds the
 * chosen tokens back. The JIT, `tfmc build` executables and emitted C all
 * link this file, so the same seed and options give the same tokens
 * everywhere:
 *   - the PRNG is PCG32 (below), integer arithmetic on uint64_t only;
 *   - probabilities are computed in IEEE double with rt_sample_exp and
 *     rt_sample_log, which use only +, -, *, /, floor, frexp and ldexp (all
 *     exactly rounded), not the platform's libm, so their bits do not depend
 *     on the C library (FP contraction is turned off for clang here; gcc
 *     never contracts in the -std=c99/c11 modes the runtime is built with).
 *
 * Sampling:
 *
 *     RtSampleOptions o = rt_sample_options_default();
 *     o.sample = 1; o.temperature = 0.8; o.top_k = 40; o.top_p = 0.95;
 *     char err[256];
 *     if (rt_sample_options_check(&o, err, sizeof err)) { print err; exit 1 }
 *     RtRng rng;
 *     rt_rng_seed(&rng, seed);
 *     void *scratch = malloc(rt_sample_scratch_bytes(V));
 *     for each step, for b in 0..B-1 (in this order: one rng, drawn in turn):
 *       if (rt_sample_token(logits + b * V, V, &o, &rng, scratch, &tok[b],
 *                           err, sizeof err)) { print err; stop }
 *
 * Beam search (one sequence; the model runs `beams` rows of a batch):
 *
 *     RtBeam *bs;
 *     if (rt_beam_create(&bs, K, V, max_new, eos, alpha, err, sizeof err)) ...
 *     int n_live = 1;            // before the first step only row 0 counts
 *     while (!done) {
 *       run the model on n_live rows -> logits [n_live, V]
 *       rt_beam_step(bs, logits, parent, token, &n_live, &done, err, errlen);
 *       reorder the KV cache: new row i = old row parent[i], i < n_live;
 *       next input of row i = token[i]
 *     }
 *     rt_beam_best(bs, 0, &toks, &len, &score);  // best hypothesis
 *     rt_beam_destroy(bs);
 *
 * Depends on libc only (frexp, ldexp, floor from libm, which are exact);
 * C99. */
#ifndef TFMC_RT_SAMPLE_H
#define TFMC_RT_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

/* ---- PRNG: PCG32 (O'Neill 2014, "PCG XSH RR 64/32", pcg32_random_r of the
 * reference implementation pcg-random.org) ---------------------------------
 *   state' = state * 6364136223846793005 + inc        (mod 2^64)
 *   output = rotr32((uint32)(((state >> 18) ^ state) >> 27), state >> 59)
 * computed from the old state. Seeding is pcg32_srandom_r(initstate, initseq):
 * inc = initseq * 2 + 1; state = 0; step; state += initstate; step. No
 * globals: each generator is one struct, copied freely. */
typedef struct RtRng {
  uint64_t state;
  uint64_t inc; /* always odd */
} RtRng;

/* The stream used by rt_rng_seed: PCG's default increment's initseq. */
#define RT_RNG_DEFAULT_STREAM 0xda3e39cb94b95bdbULL

/* pcg32_srandom_r(rng, seed, stream). */
void rt_rng_seed_stream(RtRng *rng, uint64_t seed, uint64_t stream);
/* rt_rng_seed_stream(rng, seed, RT_RNG_DEFAULT_STREAM): what --seed sets. */
void rt_rng_seed(RtRng *rng, uint64_t seed);
/* The next 32 random bits. */
uint32_t rt_rng_u32(RtRng *rng);
/* One draw: (rt_rng_u32 >> 8) * 2^-24, exactly, in [0, 1) (a float holds
 * it exactly; the sampler uses it as a double). */
float rt_rng_uniform(RtRng *rng);

/* ---- portable exp and log ------------------------------------------------
 * exp and log to within a few ulp, identical bits on every IEEE-754 double
 * platform. rt_sample_exp: exp(-inf) = 0, underflow to 0 below -745.2,
 * +inf above 709.8, NaN for NaN. rt_sample_log: x > 0 finite (else NaN for
 * x < 0 or NaN, -inf for 0, +inf for +inf). */
double rt_sample_exp(double x);
double rt_sample_log(double x);
/* sum over v < n of rt_sample_exp(row[v] - mx), NaN entries left out,
 * added in order of v (beam search's softmax normaliser; mx finite). With
 * portable 0, four exps at a time where the CPU has AVX2: the same bits
 * (tests compare the two). */
double rt_sample_sum_exp(const float *row, int64_t n, double mx, int portable);

/* ---- sampling one token ------------------------------------------------- */

typedef struct RtSampleOptions {
  int sample;         /* 0: greedy (argmax); the fields below are then unused */
  double temperature; /* > 0 and finite: logits are divided by it */
  int64_t top_k;      /* >= 1: keep the k most probable tokens; 0: off */
  double top_p;       /* in (0, 1]: nucleus sampling; 1: off */
} RtSampleOptions;

/* {sample 0, temperature 1, top_k 0, top_p 1}. */
RtSampleOptions rt_sample_options_default(void);

/* Returns 0, or non-zero with a message for the user in err naming the CLI
 * option, e.g. "--temperature must be a finite number > 0 (got 0)". With
 * sample 0, a temperature/top-k/top-p other than the defaults is an error too
 * ("--top-k needs --sample"), so a forgotten --sample is not silently greedy. */
int rt_sample_options_check(const RtSampleOptions *o, char *err, size_t errlen);

/* Bytes of scratch rt_sample_token needs for a vocabulary of `vocab` ids
 * (16 per id); the caller allocates it once (no allocation per token). */
size_t rt_sample_scratch_bytes(int64_t vocab);

/* Picks one token of logits[0..vocab) into *token.
 *
 * Logits: NaN counts as -inf. -inf tokens are never chosen; when every logit
 * is -inf (or NaN) this fails ("all logits are -inf or NaN"). If any logit is
 * +inf, the +inf tokens are the distribution (equally likely: the limit of
 * the softmax) and finite ones are never chosen.
 *
 * Greedy (o->sample == 0): the argmax, the lowest index among equal maxima;
 * consumes nothing from rng (which may be NULL) and no scratch (may be NULL).
 *
 * Sampling: the candidate tokens are sorted by logit descending, then index
 * ascending (the same order as probability descending, then index). Then, in
 * double precision, with x_i = logit_i / temperature:
 *   1. top-k: keep the first k candidates (all when k = 0 or k >= count);
 *   2. w_i = exp(x_i - x_0), Z = sum of the kept w_i in that order;
 *   3. top-p: keep the first n candidates, n the smallest with
 *      (w_0 + ... + w_{n-1}) / Z >= top_p (all of them when rounding keeps
 *      the sum below top_p; always at least one);
 *   4. one draw u = rt_rng_uniform(rng); with Z' = w_0 + ... + w_{n-1}, the
 *      token is candidate j, the first with w_0 + ... + w_j > u * Z' (the
 *      last with w_j > 0 if rounding leaves none).
 * So exactly one rng draw per sampled token. scratch: at least
 * rt_sample_scratch_bytes(vocab) bytes, aligned for double and uint64_t
 * (malloc'd memory is), owned by the caller; vocab < 2^32 when sampling.
 * The options are checked (rt_sample_options_check, cheap) on every sampled
 * token. Cost: O(vocab) (a radix sort; ~1.4 ms for 50257 ids on one core,
 * mostly the exp of every weight; ~0.4 ms with a small top-k). Returns 0,
 * or non-zero with a message in err. */
int rt_sample_token(const float *logits, int64_t vocab, const RtSampleOptions *o, RtRng *rng,
                    void *scratch, int64_t *token, char *err, size_t errlen);

/* ---- beam search ----------------------------------------------------------
 * Keeps `beams` (K) live hypotheses for one sequence. Scores use the formula
 * of HF transformers' length_penalty (BeamHypotheses.add, alpha =
 * length_penalty), not GNMT's ((5 + len) / 6)^alpha:
 *   score = sum of the tokens' log-probs / len^alpha
 * where log-probs are log_softmax of each step's logits (double, NaN as
 * -inf) and len is the number of generated tokens of the hypothesis,
 * counting its EOS. (HF's len leaves the EOS out, and counts the prompt too
 * in releases before 4.36; counting the EOS keeps len >= 1 for a
 * hypothesis that is EOS alone.) alpha > 0 favours longer, alpha < 0
 * shorter hypotheses; alpha = 0 ranks by total log-probability.
 *
 * One step, with live beams 0..n_live-1 (n_live = 1 before the first step:
 * every row starts from the same prompt):
 *   1. every (beam b, token v) is a candidate with sum_b + logprob_b[v];
 *      candidates are ranked by that sum descending, ties by b then v
 *      ascending; only the first 2K ranked are looked at (candidates with a
 *      -inf sum never are);
 *   2. in rank order: a candidate whose token is eos finishes a hypothesis
 *      (beam b's tokens + eos) if its rank is < K, else is skipped; any other
 *      becomes the next live beam, until there are K;
 *   3. at max_new generated tokens every live beam finishes as it is.
 * Finished hypotheses: the best K are kept, by score descending, then the
 * order they finished in (earlier first; within a step, rank order).
 * The search is done when max_new tokens are generated, when no live beam is
 * left, or when K hypotheses are finished and no live beam can beat the
 * worst of them: sums only fall, so a live beam's best possible score is
 * best_sum / L^alpha with L = max_new when alpha > 0 and best_sum < 0, else
 * the next length (HF's early_stopping="never" bound; exact, not a
 * heuristic). */
typedef struct RtBeam RtBeam;

/* Creates a search (owned by the caller: rt_beam_destroy). beams >= 1,
 * vocab >= 1, max_new >= 1, eos in [0, vocab) or -1 for none, length_penalty
 * finite. Returns 0, or non-zero with a message naming the CLI option
 * ("--beams must be >= 1 (got 0)") and *out = NULL. */
int rt_beam_create(RtBeam **out, int beams, int64_t vocab, int64_t max_new, int64_t eos,
                   double length_penalty, char *err, size_t errlen);
void rt_beam_destroy(RtBeam *bs);

/* One step. logits: [n_live, vocab] f32, row i the next-token logits of live
 * beam i (n_live as returned by the previous step, 1 before the first).
 * On return, for i < *n_live: the new live beam i continues old beam
 * parent[i] with token[i] (the caller copies KV-cache row parent[i] to row
 * i and feeds token[i] at the next position); for *n_live <= i < beams:
 * parent[i] = 0, token[i] = eos (or 0 without eos), rows the caller may
 * compute or skip. parent and token are [beams], caller-owned. *done is set
 * when the search is finished (further steps fail). Returns 0, or non-zero
 * with a message (a row that is all -inf/NaN; a step after done). */
int rt_beam_step(RtBeam *bs, const float *logits, int64_t *parent, int64_t *token, int *n_live,
                 int *done, char *err, size_t errlen);

/* Number of finished hypotheses kept (<= beams; >= 1 once done). */
int rt_beam_n_finished(const RtBeam *bs);
/* Finished hypothesis `rank` (0 = best) in the order above: *tokens points
 * into bs (valid until the next step or destroy), *len tokens (with the EOS
 * if it ended with one), *score as defined above. Returns 0, or non-zero
 * when rank is out of range. Before done, only hypotheses finished so far
 * are here (call rt_beam_step until done for the search's answer). */
int rt_beam_best(const RtBeam *bs, int rank, const int64_t **tokens, int64_t *len, double *score);

#endif
