/* tests/e2e/test_generate_batch.c — generation over a left-padded batch of
 * prompts (rt_stepper_set_padding + rt_generate_batch) against Hugging
 * Face-style generation in PyTorch (tools/gen_leftpad_golden.py,
 * tests/generate/leftpad): at every step, every live row's logits within
 * 1e-4 + 1e-4 |ref| of PyTorch's (position_ids = cumsum(mask) - 1, the
 * mask extended per step, past keys / values), the ids identical, each row
 * stopping at eos on its own; on the interpreter and on the JIT (-O2). And
 * rt_gen_run, the command line's path, writes the same ids to --outputs
 * (generated [3,N] with -1 after a row's end, generated_lengths [3]). */
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

static void compile_gen(Arena *a, const char *backend, CompiledGeneration *gen) {
  static PassPipeline pl;
  cr_assert(pass_pipeline_level(2, &pl));
  Diags d;
  diags_init(&d, a, NULL);
  PassContext pctx = {.diags = &d};
  DriverStage stage;
  cr_assert(backend_known(backend, &stage));
  DriverOptions o = {.weights = WEIGHTS, .stage = stage, .passes = &pl, .pass_ctx = &pctx,
                     .step_rows = ROWS};
  char err[1024] = "";
  cr_assert_eq(driver_compile_generation(a, &d, LP "generate.tfm", &o, gen, err, sizeof err), 0,
               "%s %s", err, d.captured ? d.captured : "");
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
  cr_assert_eq(rt_generate_batch(&o, checked_step, &c, prompt, ROWS, g.t, out, lengths, stop, NULL,
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

Test(generate_batch, leftpad_gpt2_interp) { check_batch("interp"); }
Test(generate_batch, leftpad_gpt2_jit) { check_batch("jit"); }
