/* tests/e2e/test_generate.c — generation with a KV cache (the step graph,
 * LowerOptions.step) against full recomputation: at every step of a
 * 20-token greedy run, the step's logits (prompt in one step, then one
 * token per step) equal the interpreter's full forward pass over the whole
 * sequence so far at its last position, within 1e-4 + 1e-4 |ref|, on the
 * interpreter and on the JIT, for GPT-2-like and torch.nn-tutorial-like
 * specs with random weights. The -O2 pipeline runs on the step graph (so
 * prune-rows shrinks the head to the last row). Encoder-decoders
 * (pytorch-seq2seq- and Annotated-like): the encode program once per source
 * (a padded one too), then the decoder's steps from bos, against the full
 * forward over (src, target so far). */
#include "backends/exec.h"
#include "runtime/rt_generate.h"
#include "runtime/rt_stepper.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#define SPEC_DIR TFMC_SOURCE_DIR "/tests/e2e/generate/"
enum { N_PROMPT = 5, N_NEW = 20 };

static void compile(Arena *a, const char *spec, bool step, DriverStage stage, Compiled *c) {
  static PassPipeline pl;
  cr_assert(pass_pipeline_level(2, &pl));
  Diags d;
  diags_init(&d, a, NULL);
  PassContext pctx = {.diags = &d};
  DriverOptions o = {.seed = 11, .stage = stage, .step = step, .passes = step ? &pl : NULL,
                     .pass_ctx = &pctx};
  char err[1024] = "";
  cr_assert_eq(driver_compile_file(a, &d, spec, &o, c, err, sizeof err), 0, "%s %s", err,
               d.captured ? d.captured : "");
}

/* The interpreter's full forward over ids[0..n): logits of position n-1. */
static const float *full_last(Arena *a, const Compiled *full, const int32_t *ids, int64_t n) {
  Tensor in[2] = {{.name = "tokens", .dtype = IR_I32, .rank = 2, .dims = {1, n}, .data = (void *)ids}};
  int n_in = 1;
  uint8_t ones[64];
  memset(ones, 1, sizeof ones);
  for (int i = 0; i < full->info->n_inputs; i++)
    if (strcmp(full->info->inputs[i].name, "mask") == 0)
      in[n_in++] = (Tensor){.name = "mask", .dtype = IR_BOOL, .rank = 2, .dims = {1, n}, .data = ones};
  Tensor *out;
  int n_out;
  char err[512];
  cr_assert_eq(backend_run_tensors("interp", full->g, full->w, in, n_in, NULL, a, &out, &n_out, NULL,
                                   err, sizeof err), 0, "%s", err);
  int64_t V = out[0].dims[2];
  return (const float *)out[0].data + (n - 1) * V;
}

static void check(const char *spec, const char *backend) {
  Arena *a = arena_create();
  Compiled full, step;
  compile(a, spec, false, DRIVER_GRAPH, &full);
  DriverStage stage;
  cr_assert(backend_known(backend, &stage));
  compile(a, spec, true, stage, &step);
  BackendStepper st;
  char err[512];
  cr_assert_eq(backend_stepper_init(&st, backend, &step, NULL, &(ExecOptions){2, 0, false}, err, sizeof err), 0,
               "%s", err);
  int32_t seq[N_PROMPT + N_NEW + 1];
  for (int i = 0; i < N_PROMPT; i++) seq[i] = (int32_t)((i * 7 + 3) % st.rs.vocab);
  int64_t n = N_PROMPT;
  const float *logits;
  cr_assert_eq(rt_stepper_step(&st.rs, seq, n, 0, &logits, err, sizeof err), 0, "%s", err);
  double worst = 0;
  for (int k = 0; k < N_NEW; k++) {
    const float *ref = full_last(a, &full, seq, n);
    for (int64_t v = 0; v < st.rs.vocab; v++) {
      double diff = fabs((double)logits[v] - ref[v]);
      if (diff > worst) worst = diff;
      cr_assert(diff <= 1e-4 + 1e-4 * fabs(ref[v]), "%s %s step %d (length %lld) logit %lld: %.7g, full %.7g",
                spec, backend, k, (long long)n, (long long)v, logits[v], ref[v]);
    }
    seq[n] = rt_argmax(logits, st.rs.vocab);
    cr_assert_eq(seq[n], rt_argmax(ref, st.rs.vocab));
    n++;
    if (k + 1 < N_NEW)
      cr_assert_eq(rt_stepper_step(&st.rs, &seq[n - 1], 1, n - 1, &logits, err, sizeof err), 0, "%s", err);
  }
  cr_log_info("%s %s: worst |step - full| %.3g over %d steps", spec, backend, worst, N_NEW);
  /* a new sequence after a reset gives the same first logits */
  exec_session_reset(st.session);
  cr_assert_eq(rt_stepper_step(&st.rs, seq, N_PROMPT, 0, &logits, err, sizeof err), 0, "%s", err);
  const float *ref = full_last(a, &full, seq, N_PROMPT);
  for (int64_t v = 0; v < st.rs.vocab; v++)
    cr_assert(fabs((double)logits[v] - ref[v]) <= 1e-4 + 1e-4 * fabs(ref[v]), "after reset");
  backend_stepper_free(&st);
  arena_destroy(a);
}

Test(generate, gpt2_tiny_interp) { check(SPEC_DIR "gpt2_tiny.tfm", "interp"); }
Test(generate, gpt2_tiny_jit) { check(SPEC_DIR "gpt2_tiny.tfm", "jit"); }
Test(generate, torchnn_lm_tiny_interp) { check(SPEC_DIR "torchnn_lm_tiny.tfm", "interp"); }
Test(generate, torchnn_lm_tiny_jit) { check(SPEC_DIR "torchnn_lm_tiny.tfm", "jit"); }

/* The interpreter's full encoder_decoder forward over src[0..ns) and
 * tgt[0..nt): the output at target position nt-1. */
static const float *full_last_encdec(Arena *a, const Compiled *full, const int32_t *src, int64_t ns,
                                     const int32_t *tgt, int64_t nt, int64_t pad) {
  uint8_t *sm = arena_alloc(a, (size_t)ns), *tm = arena_alloc(a, (size_t)nt);
  for (int64_t i = 0; i < ns; i++) sm[i] = src[i] != pad;
  for (int64_t i = 0; i < nt; i++) tm[i] = tgt[i] != pad;
  Tensor in[4] = {{.name = "src", .dtype = IR_I32, .rank = 2, .dims = {1, ns}, .data = (void *)src},
                  {.name = "tgt", .dtype = IR_I32, .rank = 2, .dims = {1, nt}, .data = (void *)tgt}};
  int n_in = 2;
  for (int i = 0; i < full->info->n_inputs; i++) {
    if (strcmp(full->info->inputs[i].name, "src_mask") == 0)
      in[n_in++] = (Tensor){.name = "src_mask", .dtype = IR_BOOL, .rank = 2, .dims = {1, ns}, .data = sm};
    if (strcmp(full->info->inputs[i].name, "tgt_mask") == 0)
      in[n_in++] = (Tensor){.name = "tgt_mask", .dtype = IR_BOOL, .rank = 2, .dims = {1, nt}, .data = tm};
  }
  Tensor *out;
  int n_out;
  char err[512];
  cr_assert_eq(backend_run_tensors("interp", full->g, full->w, in, n_in, NULL, a, &out, &n_out, NULL,
                                   err, sizeof err), 0, "%s", err);
  int64_t V = out[0].dims[2];
  return (const float *)out[0].data + (nt - 1) * V;
}

/* The generation programs of spec at -O<level> (pass_pipeline_level)
 * with seed 11 (the weights compile() makes), and when fwd is not NULL
 * the forward pass at -O2 with the same options; with AS_WEIGHTS on the
 * forward pass's weights (weight_set), with AS_PACKED packed like it where
 * they can be (packed_like): both, as tfmc build compiles them. */
enum { AS_WEIGHTS = 1, AS_PACKED = 2, AS_BUILD = 3 };
static void compile_generation_as(Arena *a, const char *spec, DriverStage stage, int level,
                                  int as, CompiledGeneration *gen, Compiled *fwd) {
  static PassPipeline pl, gl;
  cr_assert(pass_pipeline_level(2, &pl));
  cr_assert(pass_pipeline_level(level, &gl));
  Diags d;
  diags_init(&d, a, NULL);
  PassContext pctx = {.diags = &d};
  DriverOptions o = {.seed = 11, .stage = stage, .passes = &pl, .pass_ctx = &pctx};
  char err[1024] = "";
  if (fwd)
    cr_assert_eq(driver_compile_file(a, &d, spec, &o, fwd, err, sizeof err), 0, "%s %s", err,
                 d.captured ? d.captured : "");
  o.passes = &gl;
  if (as & AS_WEIGHTS) o.weight_set = fwd->w;
  if (as & AS_PACKED) o.packed_like = fwd;
  cr_assert_eq(driver_compile_generation(a, &d, spec, &o, gen, err, sizeof err), 0, "%s %s", err,
               d.captured ? d.captured : "");
}

static void compile_generation(Arena *a, const char *spec, DriverStage stage,
                               CompiledGeneration *gen, Compiled *fwd) {
  compile_generation_as(a, spec, stage, 2, 0, gen, fwd);
}

static void check_encdec(const char *spec, const char *backend) {
  Arena *a = arena_create();
  Compiled full;
  compile(a, spec, false, DRIVER_GRAPH, &full);
  DriverStage stage;
  cr_assert(backend_known(backend, &stage));
  /* the same seed: the same random weights as the full graph's (both made
   * from the whole model's params) */
  CompiledGeneration gen;
  compile_generation(a, spec, stage, &gen, NULL);
  char err[1024] = "";
  cr_assert(gen.encoder_decoder);
  if (gen.step.prog) { /* compiled: the self-attention caches are state, the encoder keeps none */
    cr_assert_gt(gen.step.info->state_bytes, 0);
    cr_assert_eq(gen.encode.info->state_bytes, 0);
  }
  BackendStepper st;
  ExecOptions eo = {2, 0, false};
  cr_assert_eq(backend_stepper_init(&st, backend, &gen.step, &gen.encode, &eo, err, sizeof err), 0,
               "%s", err);
  const ModelSpec *m = gen.step.spec->model;
  /* two sources: one plain, one ending in padding (masked in encoder and cross-attention) */
  for (int round = 0; round < 2; round++) {
    int32_t src[9];
    int64_t ns = round ? 9 : 7;
    for (int i = 0; i < ns; i++) src[i] = (int32_t)((i * 5 + 4 + round) % st.rs.src_vocab);
    for (int i = 0; i < ns; i++) if (src[i] == m->pad_id) src[i]++;
    if (round) src[7] = src[8] = (int32_t)m->pad_id;
    cr_assert_eq(rt_stepper_encode(&st.rs, src, ns, err, sizeof err), 0, "%s", err);
    exec_session_reset(st.session);
    int32_t seq[N_NEW + 1] = {(int32_t)m->bos_id};
    int64_t n = 1;
    const float *logits;
    cr_assert_eq(rt_stepper_step(&st.rs, seq, 1, 0, &logits, err, sizeof err), 0, "%s", err);
    double worst = 0;
    for (int k = 0; k < N_NEW; k++) {
      const float *ref = full_last_encdec(a, &full, src, ns, seq, n, m->pad_id);
      for (int64_t v = 0; v < st.rs.vocab; v++) {
        double diff = fabs((double)logits[v] - ref[v]);
        if (diff > worst) worst = diff;
        cr_assert(diff <= 1e-4 + 1e-4 * fabs(ref[v]),
                  "%s %s source %d step %d logit %lld: %.7g, full %.7g", spec, backend, round, k,
                  (long long)v, logits[v], ref[v]);
      }
      seq[n] = rt_argmax(logits, st.rs.vocab);
      cr_assert_eq(seq[n], rt_argmax(ref, st.rs.vocab));
      /* a generated pad would be masked by the full forward's tgt_mask and
       * not by the step's cache: steer around it (the ids stay the model's
       * choice otherwise) */
      if (seq[n] == m->pad_id) seq[n] = (int32_t)m->bos_id;
      n++;
      if (k + 1 < N_NEW)
        cr_assert_eq(rt_stepper_step(&st.rs, &seq[n - 1], 1, n - 1, &logits, err, sizeof err), 0, "%s", err);
    }
    cr_log_info("%s %s source %d: worst |step - full| %.3g over %d steps", spec, backend, round,
                worst, N_NEW);
  }
  /* refusals */
  int32_t bad[2] = {(int32_t)st.rs.src_vocab, 4};
  cr_assert_neq(rt_stepper_encode(&st.rs, bad, 2, err, sizeof err), 0);
  cr_assert(strstr(err, "outside the vocabulary"), "%s", err);
  int32_t pads[2] = {(int32_t)m->pad_id, (int32_t)m->pad_id};
  cr_assert_neq(rt_stepper_encode(&st.rs, pads, 2, err, sizeof err), 0);
  cr_assert(strstr(err, "all padding"), "%s", err);
  backend_stepper_free(&st);
  arena_destroy(a);
}

Test(generate, seq2seq_tiny_interp) { check_encdec(SPEC_DIR "seq2seq_tiny.tfm", "interp"); }
Test(generate, seq2seq_tiny_jit) { check_encdec(SPEC_DIR "seq2seq_tiny.tfm", "jit"); }
Test(generate, annotated_tiny_interp) { check_encdec(SPEC_DIR "annotated_tiny.tfm", "interp"); }
Test(generate, annotated_tiny_jit) { check_encdec(SPEC_DIR "annotated_tiny.tfm", "jit"); }

/* the runtime loop: counts, eos, max_len, refusals */
typedef struct Fake {
  float logits[4];
  int calls;
  int64_t last_past, last_n;
} Fake;

static int fake_step(void *user, const int32_t *tokens, int64_t n, int64_t past, const float **logits,
                     char *err, size_t errlen) {
  Fake *f = user;
  (void)err, (void)errlen;
  f->calls++;
  f->last_past = past;
  f->last_n = n;
  memset(f->logits, 0, sizeof f->logits);
  f->logits[(tokens[n - 1] + 1) % 4] = 1; /* next id = last + 1 mod 4 */
  *logits = f->logits;
  return 0;
}

Test(generate, greedy_loop) {
  Fake f = {0};
  int32_t prompt[2] = {0, 1}, out[8];
  RtGenerateResult r;
  char err[256];
  cr_assert_eq(rt_generate(&(RtGenerateOptions){5, 100, 4, -1}, fake_step, &f, prompt, 2, out,
                                  NULL, NULL, &r, err, sizeof err), 0);
  cr_assert_eq(r.n, 5);
  cr_assert_eq(r.stop, RT_STOP_COUNT);
  int32_t want[5] = {2, 3, 0, 1, 2};
  for (int i = 0; i < 5; i++) cr_assert_eq(out[i], want[i]);
  cr_assert_eq(f.calls, 5); /* prefill + 4 steps: the last id is not fed */
  cr_assert_eq(f.last_past, 5);
  cr_assert_eq(f.last_n, 1);
  f = (Fake){0};
  cr_assert_eq(rt_generate(&(RtGenerateOptions){8, 100, 4, 0}, fake_step, &f, prompt, 2, out,
                                  NULL, NULL, &r, err, sizeof err), 0);
  cr_assert_eq(r.stop, RT_STOP_EOS);
  cr_assert_eq(r.n, 3); /* 2 3 0: eos kept */
  f = (Fake){0};
  cr_assert_eq(rt_generate(&(RtGenerateOptions){8, 4, 4, -1}, fake_step, &f, prompt, 2, out,
                                  NULL, NULL, &r, err, sizeof err), 0);
  cr_assert_eq(r.stop, RT_STOP_MAX_LEN);
  cr_assert_eq(r.n, 2); /* prompt 2 + 2 generated = max_len 4 */
  cr_assert_neq(rt_generate(&(RtGenerateOptions){8, 1, 4, -1}, fake_step, &f, prompt, 2, out,
                                   NULL, NULL, &r, err, sizeof err), 0);
  cr_assert(strstr(err, "more than the model's max_len 1"), "%s", err);
  cr_assert_neq(rt_generate(&(RtGenerateOptions){0, 10, 4, -1}, fake_step, &f, prompt, 2, out,
                                   NULL, NULL, &r, err, sizeof err), 0);
  cr_assert_eq(rt_argmax((float[]){1, 3, 3, 2}, 4), 1);
}

/* rt_generate_beam over a fake batched model: row r's next id is its last
 * id + 1 mod 4 (the cache is the last id per row, reordered as asked) */
typedef struct FakeRows {
  int32_t last[4];
  float logits[4 * 4];
  int reorders;
} FakeRows;

static int fake_rows_step(void *user, const int32_t *tokens, int64_t rows, int64_t n, int64_t past,
                          const float **logits, char *err, size_t errlen) {
  FakeRows *f = user;
  (void)past, (void)err, (void)errlen;
  memset(f->logits, 0, sizeof f->logits);
  for (int64_t r = 0; r < rows; r++) {
    f->last[r] = tokens[r * n + n - 1];
    f->logits[r * 4 + (f->last[r] + 1) % 4] = 5;
  }
  *logits = f->logits;
  return 0;
}

static int fake_rows_reorder(void *user, const int64_t *parent, int64_t rows, int64_t len,
                             char *err, size_t errlen) {
  FakeRows *f = user;
  int32_t old[4];
  (void)len, (void)err, (void)errlen;
  memcpy(old, f->last, sizeof old);
  for (int64_t r = 0; r < rows; r++) f->last[r] = old[parent[r]];
  f->reorders++;
  return 0;
}

Test(generate, beam_loop) {
  FakeRows f = {0};
  int32_t prompt[2] = {0, 1}, out[8];
  RtGenerateResult r;
  char err[256];
  /* 3 beams: the dominant continuation wins, eos (0) kept */
  cr_assert_eq(rt_generate_beam(&(RtGenerateOptions){8, 100, 4, 0}, 3, 1.0, fake_rows_step,
                                fake_rows_reorder, &f, prompt, 2, out, &r, err, sizeof err), 0, "%s", err);
  cr_assert_eq(r.n, 3);
  cr_assert_eq(out[0], 2);
  cr_assert_eq(out[1], 3);
  cr_assert_eq(out[2], 0);
  cr_assert_eq(r.stop, RT_STOP_EOS);
  cr_assert_gt(f.reorders, 0);
  /* no eos: capped by max_len (prompt 2 + 3 = 5) */
  f = (FakeRows){0};
  cr_assert_eq(rt_generate_beam(&(RtGenerateOptions){8, 5, 4, -1}, 2, 0.0, fake_rows_step,
                                fake_rows_reorder, &f, prompt, 2, out, &r, err, sizeof err), 0, "%s", err);
  cr_assert_eq(r.n, 3);
  cr_assert_eq(r.stop, RT_STOP_MAX_LEN);
  int32_t want[3] = {2, 3, 0};
  for (int i = 0; i < 3; i++) cr_assert_eq(out[i], want[i]);
  /* refusals */
  RtSampleOptions so = rt_sample_options_default();
  so.sample = 1;
  cr_assert_neq(rt_generate_beam(&(RtGenerateOptions){8, 100, 4, 0, &so}, 2, 1.0, fake_rows_step,
                                 fake_rows_reorder, &f, prompt, 2, out, &r, err, sizeof err), 0);
  cr_assert(strstr(err, "--beams and --sample"), "%s", err);
  cr_assert_neq(rt_generate_beam(&(RtGenerateOptions){8, 100, 4, 0}, 0, 1.0, fake_rows_step,
                                 fake_rows_reorder, &f, prompt, 2, out, &r, err, sizeof err), 0);
  cr_assert(strstr(err, "--beams"), "%s", err);
  cr_assert_neq(rt_generate_beam(&(RtGenerateOptions){8, 1, 4, 0}, 2, 1.0, fake_rows_step,
                                 fake_rows_reorder, &f, prompt, 2, out, &r, err, sizeof err), 0);
  cr_assert(strstr(err, "more than the model's max_len 1"), "%s", err);
}

/* Every weight buffer program c reads, at image + base + its offset,
 * holds what packing c's weights on their own writes there. */
static void check_image_holds(const float *image, int64_t base, const Compiled *c) {
  const LoopProgram *p = c->prog;
  float *own = malloc((size_t)(p->weights_floats + 1) * 4);
  cr_assert(own);
  char err[256];
  cr_assert_eq(backend_pack_weights(p, c->w, own, 0, err, sizeof err), 0, "%s", err);
  for (int b = 0; b < p->n_bufs; b++) {
    const LBuffer *lb = &p->bufs[b];
    if (lb->kind != LB_WEIGHT) continue;
    int64_t n = loop_weight_layout_floats(lb);
    if (lb->layout == LW_PLAIN) {
      const Weight *wt = ir_weights_find(c->w, lb->name);
      cr_assert(wt);
      n = 1;
      for (int d = 0; d < wt->type.rank; d++) n *= wt->type.dims[d].value;
    }
    cr_assert_eq(memcmp(image + base + lb->offset, own + lb->offset, (size_t)n * 4), 0,
                 "weight %s at %lld", lb->name, (long long)lb->offset);
  }
  free(own);
}

/* The weights image a generating executable or project carries
 * (driver_generation_info), of a spec compiled twice. On weights of their
 * own (the same values: the same seed), a decoder's step reads the forward
 * pass's weights in the same layout, so it shares that block by its bytes
 * (offset 0: the image is that block, no copy); an encoder_decoder's
 * encoder and step read blocks of their own after the forward pass's. As
 * tfmc build compiles them (on the forward pass's weights, packed_like),
 * every program reads what the forward block holds from it (offset 0) and
 * packs only the rest, after it: a decoder's image is the forward block,
 * no copy; an encoder_decoder's grows by its encoder's cross-attention keys
 * and values only (the forward pass fuses them), smaller than the three
 * blocks. Every program finds its weights in the image either way. */
static void check_image(const char *spec, bool decoder) {
  int64_t image_floats[2];
  for (int as_build = 0; as_build < 2; as_build++) {
    Arena *a = arena_create();
    Compiled fwd;
    CompiledGeneration gen;
    compile_generation_as(a, spec, DRIVER_PACKED, 2, as_build ? AS_BUILD : 0, &gen, &fwd);
    cr_assert_eq(gen.encoder_decoder, !decoder);
    char err[1024] = "";
    RtGenInfo *gi;
    float *image;
    cr_assert_eq(driver_generation_info(a, &fwd, &gen, &gi, &image, err, sizeof err), 0, "%s",
                 err);
    cr_assert_eq(rt_gen_info_check(gi, err, sizeof err), 0, "%s", err);
    int64_t f = fwd.info->weights_floats, s = gen.step.info->weights_floats;
    image_floats[as_build] = gi->weights->weights_floats;
    cr_assert_eq(image == fwd.packed, decoder);
    cr_assert_eq(gen.step.packed == fwd.packed, as_build);
    cr_assert_eq(gen.step.packed_base == &fwd, as_build);
    check_image_holds(image, 0, &fwd);
    check_image_holds(image, gi->step_offset, &gen.step);
    if (!decoder) check_image_holds(image, gi->encode_offset, &gen.encode);
    if (decoder) {
      cr_assert_eq(gi->step_offset, 0);
      cr_assert_eq(gi->weights->weights_floats, f);
      cr_assert_eq(gi->weights->n_weights, fwd.info->n_weights);
    } else if (as_build) {
      cr_assert_eq(gen.encode.packed_base, &fwd);
      cr_assert_eq(gi->encode_offset, 0);
      cr_assert_eq(gi->step_offset, 0);
      cr_assert_geq(gen.encode.packed_from, f); /* cross-attention k and v */
      cr_assert_eq(gen.step.packed, fwd.packed); /* nothing the forward pass lacks */
      cr_assert_eq(gi->weights->weights_floats, gen.encode.info->weights_floats);
    } else {
      int64_t e = gen.encode.info->weights_floats;
      cr_assert_geq(gi->encode_offset, f);
      cr_assert_geq(gi->step_offset, gi->encode_offset + e);
      cr_assert_eq(gi->weights->weights_floats, gi->step_offset + s);
    }
    /* a block that leaves the image is refused */
    RtGenInfo bad = *gi;
    bad.step_offset = gi->weights->weights_floats - s + 16;
    cr_assert_neq(rt_gen_info_check(&bad, err, sizeof err), 0);
    arena_destroy(a);
  }
  if (decoder)
    cr_assert_eq(image_floats[1], image_floats[0]);
  else
    cr_assert_lt(image_floats[1], image_floats[0]);
}

Test(generate, image_decoder_step_shares_the_forward_block) {
  check_image(SPEC_DIR "gpt2_tiny.tfm", true);
}
Test(generate, image_encoder_decoder_blocks) {
  check_image(SPEC_DIR "seq2seq_tiny.tfm", false);
  check_image(SPEC_DIR "annotated_tiny.tfm", false);
}

/* packed_like moves only buffers that hold the very same weights in the
 * same layout: a step packed like the forward pass but from weights of
 * its own (equal values: the same seed; not the same data) packs its own
 * block, as without packed_like; a step at -O1 (no pack-weights: its
 * linears' weights plain, not in panels) on the forward pass's weights
 * reads the plain weights they share (norms, biases, embeddings) from the
 * forward block and packs the rest after it, into an image that holds
 * both. */
Test(generate, packed_like_declines_other_weights_or_layout) {
  Arena *a = arena_create();
  Compiled fwd;
  CompiledGeneration gen;
  compile_generation_as(a, SPEC_DIR "gpt2_tiny.tfm", DRIVER_PACKED, 2, AS_PACKED, &gen, &fwd);
  cr_assert_null(gen.step.packed_base);
  cr_assert_neq(gen.step.packed, fwd.packed);
  cr_assert_eq(memcmp(gen.step.packed, fwd.packed, (size_t)fwd.info->weights_floats * 4), 0);
  compile_generation_as(a, SPEC_DIR "gpt2_tiny.tfm", DRIVER_PACKED, 1, AS_BUILD, &gen, &fwd);
  cr_assert_eq(gen.step.packed_base, &fwd);
  cr_assert_geq(gen.step.packed_from, fwd.info->weights_floats);
  char err[1024] = "";
  RtGenInfo *gi;
  float *image;
  cr_assert_eq(driver_generation_info(a, &fwd, &gen, &gi, &image, err, sizeof err), 0, "%s", err);
  cr_assert_eq(rt_gen_info_check(gi, err, sizeof err), 0, "%s", err);
  cr_assert_neq(image, fwd.packed);
  cr_assert_eq(gi->step_offset, 0);
  cr_assert_eq(gi->weights->weights_floats, gen.step.info->weights_floats);
  check_image_holds(image, 0, &fwd);
  check_image_holds(image, 0, &gen.step);
  arena_destroy(a);
}

/* tfmc bench's variants: a forward program compiled with packed_like on
 * the first one's weights runs on that block when every weight buffer it
 * reads is there (-O2 without flash-attention: the same weights packed
 * alike), with the very outputs of the same pipeline compiled on its own;
 * one that needs weights of its own (-O1: its linears' weights plain) is
 * packed as before, since a JIT session runs on one block. */
static void forward_compile(Arena *a, const PassPipeline *pl, const Compiled *like, Compiled *c) {
  Diags d;
  diags_init(&d, a, NULL);
  PassContext pctx = {.diags = &d};
  DriverOptions o = {.seed = 11, .stage = DRIVER_PACKED, .passes = pl, .pass_ctx = &pctx,
                     .weight_set = like ? like->w : NULL, .packed_like = like};
  char err[1024] = "";
  cr_assert_eq(driver_compile_file(a, &d, SPEC_DIR "gpt2_tiny.tfm", &o, c, err, sizeof err), 0,
               "%s %s", err, d.captured ? d.captured : "");
}

static void forward_logits(const Compiled *c, float *out, int64_t n) {
  int32_t ids[7] = {3, 14, 15, 9, 26, 5, 35};
  uint8_t mask[7] = {1, 1, 1, 1, 1, 1, 1};
  Tensor in[2] = {{.name = "tokens", .dtype = IR_I32, .rank = 2, .dims = {1, 7}, .data = ids},
                  {.name = "mask", .dtype = IR_BOOL, .rank = 2, .dims = {1, 7}, .data = mask}};
  RtBound b;
  char err[512] = "";
  int n_in = 0;
  for (int i = 0; i < c->info->n_inputs; i++)
    for (int k = 0; k < 2; k++)
      if (strcmp(c->info->inputs[i].name, in[k].name) == 0) in[n_in++] = in[k];
  cr_assert_eq(backend_bind_tensors(c->info, in, n_in, &b, err, sizeof err), 0, "%s", err);
  cr_assert_eq(backend_run("jit", c, &b, NULL, NULL, err, sizeof err), 0, "%s", err);
  int64_t numel = 1;
  for (int k = 0; k < c->info->outputs[0].rank; k++) numel *= b.output_dims[0][k];
  cr_assert_eq(numel, n);
  memcpy(out, b.outputs[0], (size_t)n * sizeof(float));
  rt_model_unbind(c->info, &b);
}

Test(generate, packed_like_forward_runs_on_the_shared_block) {
  Arena *a = arena_create();
  PassPipeline o2, part, o1;
  char err[256];
  cr_assert(pass_pipeline_level(2, &o2));
  part = o2;
  cr_assert(pass_pipeline_disable(&part, "flash-attention", err, sizeof err), "%s", err);
  cr_assert(pass_pipeline_level(1, &o1));
  Compiled first, shared, alone, own;
  forward_compile(a, &o2, NULL, &first);
  forward_compile(a, &part, &first, &shared);
  forward_compile(a, &part, NULL, &alone);
  forward_compile(a, &o1, &first, &own);
  cr_assert_eq(shared.packed_base, &first);
  cr_assert_eq(shared.packed, first.packed);
  cr_assert_null(alone.packed_base);
  cr_assert_null(own.packed_base);
  cr_assert_neq(own.packed, first.packed);
  enum { N = 7 * 61 };
  float x[N], y[N];
  forward_logits(&shared, x, N);
  forward_logits(&alone, y, N);
  cr_assert_eq(memcmp(x, y, sizeof x), 0);
  arena_destroy(a);
}
