/* tests/fuzz/fuzz_genopts.c — fuzz harness for the generation options
 * (rt_gen_args_parse, runtime/rt_genrun.h: what --generate, --sample,
 * --temperature, --top-k, --top-p, --seed, --beams and --length-penalty
 * become, for tfmc run --generate and for generation executables alike) and
 * for what the options then drive: rt_sample_token (greedy or sampled) and
 * a beam search (rt_beam_create / rt_beam_step) over logits taken from the
 * input.
 *
 * Input: byte 0 says which options are given (bit 0 --sample, bits 1-6
 * --temperature, --top-k, --top-p, --seed, --beams, --length-penalty); then
 * seven '\n'-terminated fields, the values of --generate and of those six in
 * that order (a field is used only when its option is given; a missing
 * field is empty); the rest is little-endian f32 logits (at most 64).
 *
 * Invariants (a violation aborts, which the replay driver and libFuzzer
 * report as a crash):
 *   - a refusal is 1 (a bad value) or 2 (bad usage) with a message;
 *   - an acceptance gives max_new >= 1, beams 0 or 1..64 and never with
 *     --sample, a finite length penalty, options that pass
 *     rt_sample_options_check, defaults for everything not given, a seed
 *     only from a string without a minus sign ("--seed takes a
 *     non-negative integer"); printing the values back and parsing them
 *     again gives the same options;
 *   - a token chosen from the logits is in [0, V) and drawable (not NaN or
 *     -inf; +inf when any logit is +inf), greedy or top-k 1 is the first
 *     maximum; a refusal happens only when every logit is -inf or NaN;
 *   - a beam search keeps 0..K live beams whose parents were live, with
 *     tokens in [0, V) other than eos, is done within max_new steps with at
 *     least one hypothesis, hypotheses ordered by score, of 1..max_new
 *     tokens, eos only last. */
#include "runtime/rt_genrun.h"
#include "runtime/rt_sample.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_genopts: invariant broken: %s\n", what);
    abort();
  }
}

enum { F_GENERATE, F_TEMPERATURE, F_TOP_K, F_TOP_P, F_SEED, F_BEAMS, F_LENGTH_PENALTY, F_COUNT };
/* beam search costs K x V candidates per step: kept small enough that a run
 * of the harness stays fast (64 beams over 16 ids for 8 steps) */
enum { MAX_VOCAB = 64, MAX_BEAM_VOCAB = 16, MAX_BEAM_TOKENS = 8 };

static int same_options(const RtGenArgs *a, const RtGenArgs *b) {
  return a->max_new == b->max_new && a->sample.sample == b->sample.sample &&
         a->sample.temperature == b->sample.temperature && a->sample.top_k == b->sample.top_k &&
         a->sample.top_p == b->sample.top_p && a->seed == b->seed && a->beams == b->beams &&
         a->length_penalty == b->length_penalty;
}

/* Prints o back as option strings and parses them again. */
static void check_round_trip(const RtGenArgStrings *a, const RtGenArgs *o) {
  char f[F_COUNT][64];
  snprintf(f[F_GENERATE], 64, "%lld", (long long)o->max_new);
  snprintf(f[F_TEMPERATURE], 64, "%.17g", o->sample.temperature);
  snprintf(f[F_TOP_K], 64, "%lld", (long long)o->sample.top_k);
  snprintf(f[F_TOP_P], 64, "%.17g", o->sample.top_p);
  snprintf(f[F_SEED], 64, "%llu", (unsigned long long)o->seed);
  snprintf(f[F_BEAMS], 64, "%d", o->beams);
  snprintf(f[F_LENGTH_PENALTY], 64, "%.17g", o->length_penalty);
  RtGenArgStrings b = {.generate = f[F_GENERATE],
                       .sample = a->sample,
                       .temperature = a->temperature ? f[F_TEMPERATURE] : NULL,
                       .top_k = a->top_k ? f[F_TOP_K] : NULL,
                       .top_p = a->top_p ? f[F_TOP_P] : NULL,
                       .seed = a->seed ? f[F_SEED] : NULL,
                       .beams = a->beams ? f[F_BEAMS] : NULL,
                       .length_penalty = a->length_penalty ? f[F_LENGTH_PENALTY] : NULL};
  RtGenArgs o2;
  char err[256] = "";
  check(rt_gen_args_parse(&b, &o2, err, sizeof err) == 0, "printed options parse again");
  check(same_options(o, &o2), "printed options parse to the same values");
}

static int drawable(float x, int any_posinf) {
  return x == x && x != -INFINITY && (!any_posinf || x == INFINITY);
}

static void check_token(const float *logits, int64_t v, const RtGenArgs *o) {
  int any_posinf = 0, any_drawable = 0;
  int64_t first_max = -1;
  for (int64_t i = 0; i < v; i++)
    any_posinf |= logits[i] == INFINITY;
  for (int64_t i = 0; i < v; i++)
    if (drawable(logits[i], any_posinf)) {
      any_drawable = 1;
      if (first_max < 0 || logits[i] > logits[first_max])
        first_max = i;
    }
  RtRng rng;
  rt_rng_seed(&rng, o->seed);
  static uint64_t scratch[2 * MAX_VOCAB]; /* rt_sample_scratch_bytes(MAX_VOCAB) */
  check(rt_sample_scratch_bytes(v) <= sizeof scratch, "scratch size");
  int64_t tok = -1;
  char err[256] = "";
  if (rt_sample_token(logits, v, &o->sample, &rng, scratch, &tok, err, sizeof err)) {
    check(err[0] != 0, "sampling refusal has a message");
    check(!any_drawable, "sampling refuses only logits that are all -inf or NaN");
    return;
  }
  check(tok >= 0 && tok < v, "token in [0, V)");
  check(drawable(logits[tok], any_posinf), "token is drawable");
  if (!o->sample.sample || o->sample.top_k == 1)
    check(tok == first_max, "greedy: first maximum");
}

static void check_beams(const float *logits, int64_t v, const RtGenArgs *o) {
  if (v > MAX_BEAM_VOCAB)
    v = MAX_BEAM_VOCAB;
  int64_t eos = (int64_t)(o->seed % (uint64_t)(v + 1)) - 1; /* -1: none */
  int K = o->beams;
  int64_t max_new = o->max_new < MAX_BEAM_TOKENS ? o->max_new : MAX_BEAM_TOKENS;
  RtBeam *bs = NULL;
  char err[256] = "";
  check(rt_beam_create(&bs, K, v, max_new, eos, o->length_penalty, err, sizeof err) == 0,
        "beam search accepts parsed options");
  float *rows = malloc((size_t)K * (size_t)v * sizeof *rows);
  int64_t parent[RT_GEN_MAX_BEAMS], token[RT_GEN_MAX_BEAMS];
  check(rows != NULL, "malloc");
  int n_live = 1, done = 0;
  int64_t steps = 0;
  while (!done) {
    check(steps < max_new, "beam search is done within max_new steps");
    for (int r = 0; r < n_live; r++) /* row r of step t: the logits rotated by t + r */
      for (int64_t i = 0; i < v; i++)
        rows[r * v + i] = logits[(i + steps + r) % v];
    int prev = n_live;
    if (rt_beam_step(bs, rows, parent, token, &n_live, &done, err, sizeof err)) {
      check(err[0] != 0, "beam refusal has a message");
      int any = 0;
      for (int64_t i = 0; i < v; i++)
        any |= logits[i] == logits[i] && logits[i] != -INFINITY;
      check(!any, "beam search refuses only rows that are all -inf or NaN");
      goto out;
    }
    steps++;
    check(n_live >= 0 && n_live <= K, "0..K live beams");
    for (int i = 0; i < n_live; i++) {
      check(parent[i] >= 0 && parent[i] < prev, "a live beam's parent was live");
      check(token[i] >= 0 && token[i] < v && token[i] != eos, "live tokens in [0, V), not eos");
    }
  }
  int nf = rt_beam_n_finished(bs);
  check(nf >= 1 && nf <= K, "1..K hypotheses when done");
  double prev_score = INFINITY;
  for (int h = 0; h < nf; h++) {
    const int64_t *toks;
    int64_t len;
    double score;
    check(rt_beam_best(bs, h, &toks, &len, &score) == 0, "hypothesis h < n_finished");
    check(len >= 1 && len <= max_new, "1..max_new tokens");
    check(!(score > prev_score), "hypotheses ordered by score");
    prev_score = score;
    for (int64_t i = 0; i < len; i++)
      check(toks[i] >= 0 && toks[i] < v && (toks[i] != eos || i == len - 1),
            "hypothesis tokens in [0, V), eos only last");
  }
  check(rt_beam_best(bs, nf, NULL, NULL, NULL) != 0, "no hypothesis past n_finished");
out:
  free(rows);
  rt_beam_destroy(bs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  unsigned given = data[0];
  data++, size--;
  /* seven fields, each up to its '\n' (NUL-terminated copies) */
  char *text = malloc(size + F_COUNT + 1);
  check(text != NULL, "malloc");
  const char *field[F_COUNT];
  size_t at = 0, out = 0;
  for (int f = 0; f < F_COUNT; f++) {
    field[f] = text + out;
    while (at < size && data[at] != '\n')
      text[out++] = (char)data[at++];
    text[out++] = 0;
    if (at < size)
      at++; /* the '\n' */
  }
  RtGenArgStrings a = {.generate = field[F_GENERATE],
                       .sample = given & 1,
                       .temperature = given & 2 ? field[F_TEMPERATURE] : NULL,
                       .top_k = given & 4 ? field[F_TOP_K] : NULL,
                       .top_p = given & 8 ? field[F_TOP_P] : NULL,
                       .seed = given & 16 ? field[F_SEED] : NULL,
                       .beams = given & 32 ? field[F_BEAMS] : NULL,
                       .length_penalty = given & 64 ? field[F_LENGTH_PENALTY] : NULL};
  RtGenArgs o;
  char err[256] = "";
  int rc = rt_gen_args_parse(&a, &o, err, sizeof err);
  if (rc != 0) {
    check(rc == 1 || rc == 2, "refusal is 1 (value) or 2 (usage)");
    check(err[0] != 0, "refusal has a message");
    free(text);
    return 0;
  }
  check(o.max_new >= 1, "--generate >= 1");
  check(o.sample.sample == (int)(given & 1), "--sample as given");
  check(o.beams == 0 || (o.beams >= 1 && o.beams <= RT_GEN_MAX_BEAMS), "beams 0 or 1..64");
  check(!(o.beams && o.sample.sample), "no beams with --sample");
  check(!a.beams == !o.beams, "--beams as given");
  check(!a.seed || !strchr(a.seed, '-'), "--seed: a non-negative integer, no minus sign");
  check(isfinite(o.length_penalty) && (a.length_penalty || o.length_penalty == 1.0),
        "length penalty finite, 1 by default");
  check(a.temperature || o.sample.temperature == 1.0, "temperature 1 by default");
  check(a.top_k || o.sample.top_k == 0, "top-k 0 by default");
  check(a.top_p || o.sample.top_p == 1.0, "top-p 1 by default");
  check(a.seed || o.seed == 0, "seed 0 by default");
  check(rt_sample_options_check(&o.sample, err, sizeof err) == 0, "options pass the check");
  check_round_trip(&a, &o);

  /* what the options drive, over the input's logits */
  size_t nl = (size - at) / 4;
  int64_t v = (int64_t)(nl < MAX_VOCAB ? nl : MAX_VOCAB);
  if (v >= 1) {
    float logits[MAX_VOCAB];
    memcpy(logits, data + at, (size_t)v * sizeof *logits);
    check_token(logits, v, &o);
    if (o.beams)
      check_beams(logits, v, &o);
  }
  free(text);
  return 0;
}
