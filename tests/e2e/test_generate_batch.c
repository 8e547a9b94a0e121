/* tests/e2e/test_generate_batch.c — generation over a left-padded batch of
 * prompts (rt_stepper_set_padding + rt_generate_batch) against Hugging
 * Face-style generation in PyTorch (tools/gen_leftpad_golden.py,
 * tests/generate/leftpad): at every step, every live row's logits within
 * 1e-4 + 1e-4 |ref| of PyTorch's (position_ids = cumsum(mask) - 1, the
 * mask extended per step, past keys / values), the ids identical, each row
 * stopping at eos on its own; on the interpreter and on the JIT (-O2). And
 * rt_gen_run, the command line's path, writes the same ids to --outputs
 * (generated [3,N] with -1 after a row's end, generated_lengths [3]).
 * Without PyTorch: for GPT-2-like (learned positions) and torch.nn-LM-like
 * (sinusoidal positions) specs with random weights, every row of a
 * left-padded batch gets at every step the logits of its prompt alone at
 * batch 1, within the same tolerance. */
#include "backends/exec.h"
#include "runtime/rt_generate.h"
#include "runtime/rt_genrun.h"
#include "runtime/rt_safetensors.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LP TFMC_SOURCE_DIR "/tests/generate/leftpad/"
#define WEIGHTS TFMC_SOURCE_DIR "/tests/generate/gpt2/weights.safetensors"
enum { ROWS = 3, MAX_T = 16, MAX_N = 32, V = 100 };

typedef struct Golden {
  int64_t tokens[ROWS * MAX_T], mask[ROWS * MAX_T], t;
  int64_t generated[ROWS * MAX_N], lengths[ROWS], n;
  float *step_logits; /* [n, ROWS, V] */
} Golden;

static void read_tensor(RtSafetensors *sf, const char *name, RtDtype dt, void *dst, size_t cap,
                        int64_t *shape) {
  const RtStTensor *t = rt_st_find(sf, name);
  cr_assert(t, "no '%s' in the golden", name);
  cr_assert_eq(t->dtype, dt, "%s: dtype", name);
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++) n *= (shape[d] = t->shape[d]);
  size_t bytes = (size_t)n * (dt == RT_F32 ? 4 : 8);
  cr_assert(bytes <= cap, "%s: %zu bytes", name, bytes);
  memcpy(dst, t->data, bytes); /* little-endian host: the tests run on x86-64 */
}

static void golden_load(Golden *g) {
  char err[512];
  RtSafetensors *sf = NULL;
  int64_t sh[4];
  cr_assert_eq(rt_st_open(LP "inputs.safetensors", &sf, err, sizeof err), 0, "%s", err);
  read_tensor(sf, "tokens", RT_I64, g->tokens, sizeof g->tokens, sh);
  cr_assert_eq(sh[0], ROWS);
  g->t = sh[1];
  read_tensor(sf, "mask", RT_I64, g->mask, sizeof g->mask, sh);
  rt_st_close(sf);
  cr_assert_eq(rt_st_open(LP "expected.safetensors", &sf, err, sizeof err), 0, "%s", err);
  read_tensor(sf, "generated", RT_I64, g->generated, sizeof g->generated, sh);
  g->n = sh[1];
  read_tensor(sf, "generated_lengths", RT_I64, g->lengths, sizeof g->lengths, sh);
  g->step_logits = malloc((size_t)(g->n * ROWS * V) * sizeof(float));
  read_tensor(sf, "step_logits", RT_F32, g->step_logits, (size_t)(g->n * ROWS * V) * sizeof(float), sh);
  rt_st_close(sf);
}

/* The generation programs of spec for backend at -O2, compiled for rows
 * rows: with weights, else random weights of seed. */
static void compile_gen_of(Arena *a, const char *spec, const char *weights, uint64_t seed,
                           int64_t rows, const char *backend, CompiledGeneration *gen) {
  static PassPipeline pl;
  cr_assert(pass_pipeline_level(2, &pl));
  Diags d;
  diags_init(&d, a, NULL);
  PassContext pctx = {.diags = &d};
  DriverStage stage;
  cr_assert(backend_known(backend, &stage));
  DriverOptions o = {.weights = weights, .seed = seed, .stage = stage, .passes = &pl,
                     .pass_ctx = &pctx, .step_rows = rows};
  char err[1024] = "";
  cr_assert_eq(driver_compile_generation(a, &d, spec, &o, gen, err, sizeof err), 0, "%s %s", err,
               d.captured ? d.captured : "");
}

static void compile_gen(Arena *a, const char *backend, CompiledGeneration *gen) {
  compile_gen_of(a, LP "generate.tfm", WEIGHTS, 0, ROWS, backend, gen);
}

/* Wraps the stepper's batch step: checks each step's logits of the rows
 * still live against PyTorch's. */
typedef struct Check {
  RtStepper *st;
  const Golden *g;
  const char *backend;
  int64_t step; /* steps run so far (the prefill is step 0) */
  double worst;
} Check;

static int checked_step(void *user, const int32_t *tokens, int64_t rows, int64_t n, int64_t past,
                        const float **logits, char *err, size_t errlen) {
  Check *c = user;
  if (rt_stepper_batch_step(c->st, tokens, rows, n, past, logits, err, errlen)) return 1;
  const Golden *g = c->g;
  for (int64_t b = 0; b < rows; b++) {
    if (c->step >= g->lengths[b]) continue; /* finished: its logits are never read */
    const float *got = *logits + b * V, *ref = g->step_logits + (c->step * ROWS + b) * V;
    for (int64_t v = 0; v < V; v++) {
      double diff = fabs((double)got[v] - ref[v]);
      if (diff > c->worst) c->worst = diff;
      cr_assert(diff <= 1e-4 + 1e-4 * fabs(ref[v]), "%s step %lld row %lld logit %lld: %.7g, PyTorch %.7g",
                c->backend, (long long)c->step, (long long)b, (long long)v, got[v], ref[v]);
    }
  }
  c->step++;
  return 0;
}

static void check_batch(const char *backend) {
  Golden g;
  golden_load(&g);
  Arena *a = arena_create();
  CompiledGeneration gen;
  compile_gen(a, backend, &gen);
  BackendStepper st;
  char err[512];
  cr_assert_eq(backend_stepper_init(&st, backend, &gen.step, NULL, &(ExecOptions){2, 0, false}, err,
                                    sizeof err), 0, "%s", err);
  cr_assert_eq(st.rs.vocab, V);
  /* the golden batch is left-padded: row b's pads are its leading zeros */
  int32_t prompt[ROWS * MAX_T];
  int64_t pad[ROWS] = {0};
  for (int64_t b = 0; b < ROWS; b++)
    for (int64_t i = 0; i < g.t; i++) {
      prompt[b * g.t + i] = (int32_t)g.tokens[b * g.t + i];
      pad[b] += g.mask[b * g.t + i] == 0;
    }
  cr_assert(pad[0] != pad[1] || pad[1] != pad[2], "the golden prompts have one length");
  cr_assert_eq(rt_stepper_set_padding(&st.rs, pad, ROWS, err, sizeof err), 0, "%s", err);
  Check c = {&st.rs, &g, backend, 0, 0};
  int64_t eos = gen.step.spec->model->eos_id, max_new = 16;
  cr_assert(eos >= 0);
  RtGenerateOptions o = {max_new, st.rs.max_len, V, eos, NULL, NULL, NULL};
  int32_t out[ROWS * 16];
  int64_t lengths[ROWS];
  RtStop stop[ROWS];
  RtGenerateResult res;
  cr_assert_eq(rt_generate_batch(&o, checked_step, NULL, &c, prompt, ROWS, g.t, out, lengths, stop, NULL,
                                 NULL, &res, err, sizeof err), 0, "%s", err);
  for (int64_t b = 0; b < ROWS; b++) {
    cr_assert_eq(lengths[b], g.lengths[b], "%s row %lld: %lld ids, PyTorch %lld", backend,
                 (long long)b, (long long)lengths[b], (long long)g.lengths[b]);
    for (int64_t i = 0; i < lengths[b]; i++)
      cr_assert_eq(out[b * max_new + i], g.generated[b * g.n + i], "%s row %lld id %lld", backend,
                   (long long)b, (long long)i);
    cr_assert_eq(stop[b], out[b * max_new + lengths[b] - 1] == eos ? RT_STOP_EOS : RT_STOP_COUNT);
  }
  cr_assert_eq(res.n, g.n);
  cr_log_info("leftpad %s: worst |tfmc - PyTorch| %.3g over %lld steps", backend, c.worst,
              (long long)c.step);

  /* rt_gen_run (tfmc run's and executables' path): the same ids in
   * --outputs, -1 after a row's end */
  rt_stepper_reset(&st.rs);
  char out_path[] = "/tmp/tfmc-leftpad-XXXXXX";
  int fd = mkstemp(out_path);
  cr_assert(fd >= 0);
  close(fd);
  RtGenArgs ga = {.max_new = 16, .sample = rt_sample_options_default(), .length_penalty = 1};
  RtGenRun run = {.prog = "test", .backend = backend, .inputs = LP "inputs.safetensors",
                  .outputs = out_path, .bos = -1, .eos = eos};
  cr_assert_eq(rt_gen_run(&run, &ga, &st.rs), 0);
  RtSafetensors *sf = NULL;
  cr_assert_eq(rt_st_open(out_path, &sf, err, sizeof err), 0, "%s", err);
  int64_t got[ROWS * MAX_N], got_len[ROWS], sh[4];
  read_tensor(sf, "generated", RT_I64, got, sizeof got, sh);
  cr_assert(sh[0] == ROWS && sh[1] == g.n);
  cr_assert_eq(memcmp(got, g.generated, (size_t)(ROWS * g.n) * sizeof *got), 0,
               "--outputs generated differs from PyTorch's (-1 padded)");
  read_tensor(sf, "generated_lengths", RT_I64, got_len, sizeof got_len, sh);
  cr_assert_eq(memcmp(got_len, g.lengths, sizeof got_len), 0);
  rt_st_close(sf);
  unlink(out_path);
  backend_stepper_free(&st);
  free(g.step_logits);
  arena_destroy(a);
}

/* ---- each row as its prompt alone ---- */

enum { A_ROWS = 3, STEPS = 12, MAX_ROWS = 5, A_STEPS = STEPS };

/* Wraps the stepper's batch step (and its reorder): records each step's
 * logits by row, wherever the row runs in the step's batch. */
typedef struct Tracked {
  RtStepper *st;
  int64_t stride;           /* rows of each step's record */
  int64_t row_of[MAX_ROWS]; /* the row at each place of the step's batch */
  int64_t step, rows_run;   /* steps so far; the rows they ran after the prefill */
  int reorders;
  float *logits;            /* [STEPS, stride, V]: step k's logits of each row run */
} Tracked;

static int tracked_step(void *user, const int32_t *tokens, int64_t rows, int64_t n, int64_t past,
                        const float **logits, char *err, size_t errlen) {
  Tracked *t = user;
  if (rt_stepper_batch_step(t->st, tokens, rows, n, past, logits, err, errlen)) return 1;
  cr_assert(t->step < STEPS);
  int64_t v = t->st->vocab;
  for (int64_t s = 0; s < rows; s++)
    memcpy(t->logits + (t->step * t->stride + t->row_of[s]) * v, *logits + s * v,
           (size_t)v * sizeof(float));
  if (t->step++) t->rows_run += rows;
  return 0;
}

static int tracked_reorder(void *user, const int64_t *parent, int64_t rows, int64_t len,
                           char *err, size_t errlen) {
  Tracked *t = user;
  int64_t was[MAX_ROWS];
  memcpy(was, t->row_of, sizeof was);
  for (int64_t i = 0; i < rows; i++) {
    cr_assert(parent[i] >= i && parent[i] < t->stride, "row %lld from %lld", (long long)i,
              (long long)parent[i]);
    t->row_of[i] = was[parent[i]];
  }
  t->reorders++;
  return rt_stepper_reorder(t->st, parent, rows, len, err, errlen);
}

/* The generation programs of spec with random weights of seed, for rows
 * rows, on backend, bound to a stepper (2 threads). */
static void stepper_of(Arena *a, const char *spec, uint64_t seed, int64_t rows, const char *backend,
                       CompiledGeneration *gen, BackendStepper *st) {
  char err[1024] = "";
  compile_gen_of(a, spec, NULL, seed, rows, backend, gen);
  cr_assert_eq(backend_stepper_init(st, backend, &gen->step, NULL, &(ExecOptions){2, 0, false}, err,
                                    sizeof err), 0, "%s", err);
}

static void check_alone(const char *spec, const char *backend) {
  Arena *a = arena_create();
  CompiledGeneration gen;
  BackendStepper st;
  char err[1024] = "";
  stepper_of(a, spec, 5, A_ROWS, backend, &gen, &st);
  int64_t vocab = st.rs.vocab, len[A_ROWS] = {5, 2, 4}, t = 5, pad[A_ROWS];
  int32_t prompt[A_ROWS * 5];
  for (int64_t b = 0; b < A_ROWS; b++) {
    pad[b] = t - len[b];
    for (int64_t i = 0; i < t; i++) /* pads: id 1; the prompt's ids after them */
      prompt[b * t + i] = i < pad[b] ? 1 : (int32_t)((b * 11 + i * 7 + 3) % vocab);
  }
  /* the batch: no eos, A_STEPS ids per row (the prefill and A_STEPS - 1 steps) */
  RtGenerateOptions go = {A_STEPS, st.rs.max_len, vocab, -1, NULL, NULL, NULL};
  Tracked batch = {&st.rs, A_ROWS, {0, 1, 2}, 0, 0, 0,
                   malloc((size_t)(A_STEPS * A_ROWS * vocab) * sizeof(float))};
  int32_t out[A_ROWS * A_STEPS], one[A_STEPS];
  int64_t lengths[A_ROWS];
  RtGenerateResult res;
  cr_assert_eq(rt_stepper_set_padding(&st.rs, pad, A_ROWS, err, sizeof err), 0, "%s", err);
  cr_assert_eq(rt_generate_batch(&go, tracked_step, NULL, &batch, prompt, A_ROWS, t, out, lengths, NULL,
                                 NULL, NULL, &res, err, sizeof err), 0, "%s", err);
  cr_assert_eq(batch.step, A_STEPS); /* the prefill and A_STEPS - 1 steps */
  Tracked alone = {&st.rs, 1, {0}, 0, 0, 0, malloc((size_t)(A_STEPS * vocab) * sizeof(float))};
  double worst = 0;
  for (int64_t b = 0; b < A_ROWS; b++) {
    rt_stepper_reset(&st.rs);
    alone.step = 0;
    int64_t one_len;
    cr_assert_eq(rt_generate_batch(&go, tracked_step, NULL, &alone, prompt + b * t + pad[b], 1, len[b],
                                   one, &one_len, NULL, NULL, NULL, &res, err, sizeof err), 0, "%s", err);
    cr_assert_eq(one_len, lengths[b]);
    for (int64_t k = 0; k < A_STEPS; k++) {
      cr_assert_eq(out[b * A_STEPS + k], one[k], "%s %s row %lld id %lld: batch %d, alone %d", spec,
                   backend, (long long)b, (long long)k, out[b * A_STEPS + k], one[k]);
      const float *got = batch.logits + (k * A_ROWS + b) * vocab, *ref = alone.logits + k * vocab;
      for (int64_t v = 0; v < vocab; v++) {
        double diff = fabs((double)got[v] - ref[v]);
        if (diff > worst) worst = diff;
        cr_assert(diff <= 1e-4 + 1e-4 * fabs(ref[v]), "%s %s row %lld step %lld logit %lld: batch %.7g, alone %.7g",
                  spec, backend, (long long)b, (long long)k, (long long)v, got[v], ref[v]);
      }
    }
  }
  cr_log_info("%s %s: worst |batch row - alone| %.3g", spec, backend, worst);
  free(batch.logits);
  free(alone.logits);
  backend_stepper_free(&st);
  arena_destroy(a);
}

/* ---- finished rows leave the batch ----
 * rt_generate_batch with a reorder runs only the live rows (their caches
 * moved to the front): each row's ids and the logits that chose them are,
 * to the bit, those of the same batch with finished rows kept in place (no
 * reorder: every step runs every row) and those of its prompt alone, while
 * the steps run fewer rows as rows end at their eos. */

enum { C_ROWS = 5, C_STEPS = STEPS };

typedef struct BatchRun {
  int32_t out[C_ROWS * C_STEPS];
  int64_t lengths[C_ROWS];
  RtStop stop[C_ROWS];
  Tracked t;
} BatchRun;

/* The batch prompt[C_ROWS, t] with its left padding, from a fresh cache;
 * compact: with a reorder. Sampling (o->sample set): row b from seed + b. */
static void batch_run(RtStepper *st, RtGenerateOptions *o, const int32_t *prompt, int64_t t,
                      const int64_t *pad, int compact, uint64_t seed, BatchRun *r) {
  char err[512];
  RtGenerateResult res;
  memset(r->out, 0, sizeof r->out);
  r->t = (Tracked){st, C_ROWS, {0, 1, 2, 3, 4}, 0, 0, 0, r->t.logits};
  for (int64_t b = 0; o->sample && b < C_ROWS; b++) rt_rng_seed(&o->rng[b], seed + (uint64_t)b);
  rt_stepper_reset(st);
  cr_assert_eq(rt_stepper_set_padding(st, pad, C_ROWS, err, sizeof err), 0, "%s", err);
  cr_assert_eq(rt_generate_batch(o, tracked_step, compact ? tracked_reorder : NULL, &r->t, prompt,
                                 C_ROWS, t, r->out, r->lengths, r->stop, NULL, NULL, &res, err,
                                 sizeof err), 0, "%s", err);
}

static void check_compact(const char *spec, const char *backend, int sample) {
  Arena *a = arena_create();
  CompiledGeneration gen;
  BackendStepper st;
  char err[1024] = "";
  stepper_of(a, spec, 9, C_ROWS, backend, &gen, &st);
  int64_t vocab = st.rs.vocab, len[C_ROWS] = {5, 2, 4, 3, 5}, t = 5, pad[C_ROWS];
  int32_t prompt[C_ROWS * 5];
  for (int64_t b = 0; b < C_ROWS; b++) {
    pad[b] = t - len[b];
    for (int64_t i = 0; i < t; i++)
      prompt[b * t + i] = i < pad[b] ? 1 : (int32_t)((b * 13 + i * 5 + 2) % vocab);
  }
  RtSampleOptions so = rt_sample_options_default();
  so.sample = 1;
  so.temperature = 4; /* the random models' logits are peaked */
  RtRng rngs[C_ROWS];
  void *scratch = malloc(rt_sample_scratch_bytes(vocab) + 64);
  RtGenerateOptions o = {C_STEPS, st.rs.max_len, vocab, -1, sample ? &so : NULL, rngs, scratch};
  size_t logit_bytes = (size_t)(C_STEPS * C_ROWS * vocab) * sizeof(float);
  BatchRun *kept = calloc(1, sizeof *kept), *compact = calloc(1, sizeof *compact),
           *alone = calloc(1, sizeof *alone);
  kept->t.logits = calloc(1, logit_bytes);
  compact->t.logits = calloc(1, logit_bytes);
  alone->t.logits = calloc(1, logit_bytes);
  /* the eos: the id whose first appearance ends the most rows at distinct
   * steps without eos, one row at least running to the end */
  batch_run(&st.rs, &o, prompt, t, pad, 0, 3, kept);
  int64_t best = -1, best_score = 0;
  for (int64_t v = 0; v < vocab; v++) {
    int64_t first[C_ROWS], score = 0, runs_on = 0;
    for (int64_t b = 0; b < C_ROWS; b++) {
      first[b] = C_STEPS;
      for (int64_t k = C_STEPS - 1; k >= 0; k--)
        if (kept->out[b * C_STEPS + k] == v) first[b] = k;
      runs_on |= first[b] >= C_STEPS - 1;
      int fresh = first[b] < C_STEPS - 1;
      for (int64_t c = 0; c < b && fresh; c++) fresh = first[c] != first[b];
      score += fresh;
    }
    if (runs_on && score > best_score) best = v, best_score = score;
  }
  cr_assert_geq(best_score, 2, "%s %s: no id ends rows at two steps", spec, backend);
  o.eos = best;

  batch_run(&st.rs, &o, prompt, t, pad, 0, 3, kept);
  batch_run(&st.rs, &o, prompt, t, pad, 1, 3, compact);
  cr_assert_gt(compact->t.reorders, 0);
  cr_assert_lt(compact->t.rows_run, kept->t.rows_run, "%s %s: compaction ran %lld rows, kept %lld",
               spec, backend, (long long)compact->t.rows_run, (long long)kept->t.rows_run);
  for (int64_t b = 0; b < C_ROWS; b++) { /* each row alone, from its own generator */
    BatchRun one;
    one.t = (Tracked){&st.rs, C_ROWS, {0}, 0, 0, 0, alone->t.logits + b * vocab};
    rt_stepper_reset(&st.rs);
    if (sample) rt_rng_seed(&rngs[0], 3 + (uint64_t)b);
    RtGenerateResult res;
    /* its logits land in row b of alone's [step, C_ROWS, V]: the record is
     * offset by b rows */
    cr_assert_eq(rt_generate_batch(&o, tracked_step, NULL, &one.t, prompt + b * t + pad[b], 1,
                                   len[b], alone->out + b * C_STEPS, &alone->lengths[b],
                                   &alone->stop[b], NULL, NULL, &res, err, sizeof err), 0, "%s", err);
  }
  for (int64_t b = 0; b < C_ROWS; b++) {
    cr_assert_eq(compact->lengths[b], kept->lengths[b], "%s %s row %lld", spec, backend, (long long)b);
    cr_assert_eq(alone->lengths[b], kept->lengths[b], "%s %s row %lld", spec, backend, (long long)b);
    cr_assert_eq(compact->stop[b], kept->stop[b]);
    cr_assert_eq(alone->stop[b], kept->stop[b]);
    for (int64_t k = 0; k < kept->lengths[b]; k++) {
      int32_t want = kept->out[b * C_STEPS + k];
      cr_assert_eq(compact->out[b * C_STEPS + k], want, "%s %s row %lld id %lld", spec, backend,
                   (long long)b, (long long)k);
      cr_assert_eq(alone->out[b * C_STEPS + k], want, "%s %s row %lld id %lld alone", spec,
                   backend, (long long)b, (long long)k);
      /* the logits that chose id k, to the bit */
      const float *ref = kept->t.logits + (k * C_ROWS + b) * vocab;
      cr_assert_eq(memcmp(compact->t.logits + (k * C_ROWS + b) * vocab, ref, (size_t)vocab * 4), 0,
                   "%s %s row %lld step %lld: compacted logits differ", spec, backend, (long long)b,
                   (long long)k);
      /* alone: to the bit without padding; a padded row's keys sit one
       * cache slot further in the batch, and the JIT's attention sums them
       * in other groups (as without compaction: check_alone) */
      const float *one = alone->t.logits + (k * C_ROWS + b) * vocab;
      for (int64_t v = 0; v < vocab; v++)
        cr_assert(pad[b] ? fabs((double)one[v] - ref[v]) <= 1e-4 + 1e-4 * fabs(ref[v])
                         : memcmp(&one[v], &ref[v], sizeof *ref) == 0,
                  "%s %s row %lld (pad %lld) step %lld logit %lld: alone %.9g, batch %.9g", spec,
                  backend, (long long)b, (long long)pad[b], (long long)k, (long long)v, one[v],
                  ref[v]);
    }
  }
  cr_log_info("%s %s%s: eos %lld, lengths %lld %lld %lld %lld %lld; rows stepped %lld compacted, "
              "%lld kept", spec, backend, sample ? " sampled" : "", (long long)best,
              (long long)kept->lengths[0], (long long)kept->lengths[1], (long long)kept->lengths[2],
              (long long)kept->lengths[3], (long long)kept->lengths[4],
              (long long)compact->t.rows_run, (long long)kept->t.rows_run);
  free(kept->t.logits);
  free(compact->t.logits);
  free(alone->t.logits);
  free(kept);
  free(compact);
  free(alone);
  free(scratch);
  backend_stepper_free(&st);
  arena_destroy(a);
}

#define SPECS TFMC_SOURCE_DIR "/tests/e2e/generate/"
Test(generate_batch, compact_gpt2_tiny_interp) { check_compact(SPECS "gpt2_tiny.tfm", "interp", 0); }
Test(generate_batch, compact_gpt2_tiny_jit) { check_compact(SPECS "gpt2_tiny.tfm", "jit", 0); }
Test(generate_batch, compact_gpt2_tiny_jit_sampled) { check_compact(SPECS "gpt2_tiny.tfm", "jit", 1); }
Test(generate_batch, compact_torchnn_lm_tiny_jit) { check_compact(SPECS "torchnn_lm_tiny.tfm", "jit", 0); }
Test(generate_batch, alone_gpt2_tiny_interp) { check_alone(SPECS "gpt2_tiny.tfm", "interp"); }
Test(generate_batch, alone_gpt2_tiny_jit) { check_alone(SPECS "gpt2_tiny.tfm", "jit"); }
Test(generate_batch, alone_torchnn_lm_tiny_interp) { check_alone(SPECS "torchnn_lm_tiny.tfm", "interp"); }
Test(generate_batch, alone_torchnn_lm_tiny_jit) { check_alone(SPECS "torchnn_lm_tiny.tfm", "jit"); }

Test(generate_batch, leftpad_gpt2_interp) { check_batch("interp"); }
Test(generate_batch, leftpad_gpt2_jit) { check_batch("jit"); }
