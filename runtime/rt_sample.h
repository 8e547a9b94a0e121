/* runtime/rt_sample.h — decoding strategies for generation: a seeded PRNG,
 * greedy / temperature / top-k / top-p sampling of one token from a row of
 * logits. Model-independent: the generation loop runs the
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
 * rt_sample_scratch_bytes(vocab) bytes, aligned for double (malloc'd memory
 * is), owned by the caller. The options are not checked here (do that once
 * with rt_sample_options_check); invalid ones are reported as an error.
 * Returns 0, or non-zero with a message in err. */
int rt_sample_token(const float *logits, int64_t vocab, const RtSampleOptions *o, RtRng *rng,
                    void *scratch, int64_t *token, char *err, size_t errlen);

#endif
