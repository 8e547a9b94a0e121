/* tests/passes/test_semantics.c — passes keep meaning: models built from
 * spec texts (encoder with padding and token types, pre-norm decoder with a
 * tied head, encoder-decoder with every mask, one with an attention output,
 * the encoder with every layer's attention as outputs)
 * run through the reference interpreter with and without each pass and each
 * -O pipeline, on random weights and random inputs; the outputs must agree
 * within 1e-6. Dead nodes are added to every graph so dce has work to do.
 * One case also runs the rewritten graph through the JIT. */
#include "backends/exec.h"
#include "frontend/spec.h"
#include "passes/passes.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Model {
  const char *name;
  const char *spec;
  const char *attention_layer; /* LowerOptions */
} Model;

static const char *enc_spec = "model bertish {\n"
                              "  arch encoder\n"
                              "  vocab 30\n"
                              "  d_model 16\n"
                              "  heads 4\n"
                              "  layers 2\n"
                              "  ffn 32 gelu\n"
                              "  norm post eps 1e-12\n"
                              "  position learned max 10\n"
                              "  embed_norm eps 1e-12\n"
                              "  token_types 2\n"
                              "  tokens pad 0\n"
                              "  mask encoder padding\n"
                              "  head classifier 3 pooler\n"
                              "  max_batch 3\n"
                              "}\n";

static const char *dec_spec = "model gptish {\n"
                              "  arch decoder\n"
                              "  vocab 30\n"
                              "  d_model 16\n"
                              "  heads 2\n"
                              "  layers 2\n"
                              "  ffn 64 gelu_tanh\n"
                              "  norm pre\n"
                              "  final_norm yes\n"
                              "  position learned max 12\n"
                              "  head logits tied\n"
                              "  max_batch 3\n"
                              "}\n";

static const char *encdec_spec = "model seq2seq {\n"
                                 "  arch encoder_decoder\n"
                                 "  vocab src 30 tgt 25\n"
                                 "  d_model 16\n"
                                 "  heads 2\n"
                                 "  layers encoder 2 decoder 1\n"
                                 "  ffn 32 relu\n"
                                 "  norm post unbiased_std eps 1e-6\n"
                                 "  position sinusoidal max 12\n"
                                 "  embed_scale sqrt_d_model\n"
                                 "  tokens pad 1 bos 2 eos 3\n"
                                 "  mask encoder padding\n"
                                 "  mask decoder causal padding\n"
                                 "  mask cross padding\n"
                                 "  head log_softmax\n"
                                 "  max_batch 3\n"
                                 "}\n";

static const Model models[] = {
    {"encoder", NULL, NULL},
    {"decoder", NULL, NULL},
    {"encoder_decoder", NULL, NULL},
    {"encoder_decoder+attention", NULL, "decoder.0.cross"},
    {"encoder+attention all", NULL, "all"},
};
enum { N_MODELS = 5 };

static const char *model_spec(int i) {
  return i == 0 || i == 4 ? enc_spec : i == 1 ? dec_spec : encdec_spec;
}

#define N_DEAD 3

/* Lowers the model and appends N_DEAD nodes no output reads: a param, a
 * linear of some hidden state through it, a relu of that. */
static IrGraph *build(Arena *a, int m) {
  Diags d;
  diags_init(&d, a, NULL);
  SrcFile *src = src_file_from_string(a, "model.tfm", model_spec(m));
  diags_add_source(&d, src);
  Spec *spec = spec_parse(a, src, &d);
  cr_assert(spec, "%s", d.captured ? d.captured : "");
  IrGraph *g = spec_lower(a, spec, &(LowerOptions){models[m].attention_layer}, &d);
  cr_assert(g, "%s", d.captured ? d.captured : "");
  int x = -1;
  for (int i = 0; i < g->n_nodes && x < 0; i++)
    if (g->nodes[i].op == IR_OP_LAYERNORM)
      x = i;
  cr_assert_geq(x, 0);
  IrLoc loc = {NULL, 0, 0};
  int w = ir_build_param(g, "dead.weight", ir_type2(IR_F32, 5, 16), loc);
  int y = ir_build(g, IR_OP_LINEAR, (int[]){x, w}, 2, NULL, loc);
  ir_build(g, IR_OP_RELU, &y, 1, NULL, loc);
  cr_assert(ir_graph_verify(g, &d), "%s", d.captured ? d.captured : "");
  return g;
}

static uint64_t rng_state;
static uint32_t rnd(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (uint32_t)(rng_state >> 33);
}

/* Random inputs for every input node: batch 2, S = 5, T = 4, ids below the
 * smallest vocab (or the token types), masks with a random prefix of real
 * tokens (at least one). */
static int make_inputs(Arena *a, const IrGraph *g, Tensor *in) {
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *nd = &g->nodes[i];
    if (nd->op != IR_OP_INPUT)
      continue;
    Tensor *t = &in[n++];
    t->name = nd->attrs.name;
    t->dtype = nd->type.dtype;
    t->rank = nd->type.rank;
    int64_t numel = 1;
    for (int k = 0; k < t->rank; k++) {
      IrDim dm = nd->type.dims[k];
      const char *s = dm.sym >= 0 ? g->syms[dm.sym].name : NULL;
      t->dims[k] = !s ? dm.value : strcmp(s, "B") == 0 ? 2 : strcmp(s, "T") == 0 ? 4 : 5;
      numel *= t->dims[k];
    }
    t->data = arena_alloc(a, (size_t)numel * 4 + 4);
    int64_t len = t->dims[t->rank - 1], real = len;
    for (int64_t e = 0; e < numel; e++) {
      if (e % len == 0)
        real = 1 + (int64_t)(rnd() % (uint32_t)len); /* this row's length */
      if (t->dtype == IR_I32)
        ((int32_t *)t->data)[e] = (int32_t)(rnd() % (strcmp(t->name, "token_types") == 0 ? 2 : 25));
      else if (t->dtype == IR_BOOL)
        ((uint8_t *)t->data)[e] = (uint8_t)(e % len < real);
      else
        ((float *)t->data)[e] = (float)(rnd() % 2000) / 1000.0f - 1.0f;
    }
  }
  return n;
}

static Tensor *run(const char *backend, const IrGraph *g, const WeightSet *w, const Tensor *in,
                   int n_in, Arena *a, int *n_out) {
  Tensor *out;
  char err[1024];
  int rc = backend_run_tensors(backend, g, w, in, n_in, NULL, a, &out, n_out, NULL, err, sizeof err);
  cr_assert_eq(rc, 0, "%s: %s", backend, err);
  return out;
}

/* |got - ref| <= tol * max(1, |ref|) everywhere; returns the max |diff|. */
static double compare(const Tensor *got, int n_got, const Tensor *ref, int n_ref, double tol,
                      const char *what) {
  cr_assert_eq(n_got, n_ref, "%s: %d outputs, expected %d", what, n_got, n_ref);
  double worst = 0;
  for (int i = 0; i < n_ref; i++) {
    cr_assert_str_eq(got[i].name, ref[i].name, "%s", what);
    cr_assert_eq(got[i].rank, ref[i].rank, "%s", what);
    for (int k = 0; k < ref[i].rank; k++)
      cr_assert_eq(got[i].dims[k], ref[i].dims[k], "%s", what);
    const float *x = got[i].data, *y = ref[i].data;
    for (int64_t e = 0; e < tensor_numel(&ref[i]); e++) {
      double diff = fabs((double)x[e] - (double)y[e]);
      cr_assert(isfinite(y[e]), "%s: reference %s is not finite", what, ref[i].name);
      cr_assert(diff <= tol * fmax(1.0, fabs((double)y[e])),
                "%s: output %s[%lld] = %.9g, reference %.9g", what, ref[i].name, (long long)e,
                (double)x[e], (double)y[e]);
      worst = fmax(worst, diff);
    }
  }
  return worst;
}

static int count_op(const IrGraph *g, IrOp op) {
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++)
    n += g->nodes[i].op == op;
  return n;
}

/* attention (or attn.probs) nodes whose queries are one row: [B,1,D] */
static int count_one_query_attention(const IrGraph *g) {
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *nd = &g->nodes[i];
    if (nd->op != IR_OP_ATTENTION && nd->op != IR_OP_ATTENTION_FLASH &&
        nd->op != IR_OP_ATTN_PROBS)
      continue;
    IrDim t = g->nodes[nd->operands[0]].type.dims[1];
    n += t.sym < 0 && t.value == 1;
  }
  return n;
}

static bool has_param(const IrGraph *g, const char *name) {
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_PARAM && strcmp(g->nodes[i].attrs.name, name) == 0)
      return true;
  return false;
}

/* Runs model m with and without the pipeline; checks the outputs agree and
 * the pipeline did what its passes promise. */
static void check(int m, const char *list, int level) {
  Arena *a = arena_create();
  char what[256];
  snprintf(what, sizeof what, "%s with %s", models[m].name, list ? list : "-O");
  IrGraph *ref_g = build(a, m);
  WeightSet *w = weights_random(a, ref_g, 1234 + (uint64_t)m);
  Tensor in[8];
  rng_state = 99 + (uint64_t)m;
  int n_in = make_inputs(a, ref_g, in);
  int n_ref, n_got;
  Tensor *ref = run("interp", ref_g, w, in, n_in, a, &n_ref);

  IrGraph *g = build(a, m);
  int attn_before = count_op(g, IR_OP_ATTENTION), mix_before = count_op(g, IR_OP_ATTN_MIX);
  int nodes_before = g->n_nodes, linears_before = count_op(g, IR_OP_LINEAR);
  PassPipeline pl;
  char err[512];
  if (list)
    cr_assert(pass_pipeline_parse(list, &pl, err, sizeof err), "%s", err);
  else
    cr_assert(pass_pipeline_level(level, &pl));
  Diags d;
  diags_init(&d, a, NULL);
  PassContext ctx = {.diags = &d};
  cr_assert(pass_pipeline_run(g, &pl, &ctx), "%s: %s", what, d.captured ? d.captured : "");
  bool dce = false, decompose = false, prune = false, fuse = false, flash = false;
  for (int i = 0; i < pl.n; i++) {
    dce |= strcmp(pl.passes[i]->name, "dce") == 0;
    fuse |= strcmp(pl.passes[i]->name, "fuse-qkv") == 0;
    flash |= strcmp(pl.passes[i]->name, "flash-attention") == 0;
    decompose |= strcmp(pl.passes[i]->name, "decompose-attention") == 0;
    prune |= strcmp(pl.passes[i]->name, "prune-rows") == 0;
  }
  if (dce) {
    cr_expect_not(has_param(g, "dead.weight"), "%s: the dead param survived", what);
    if (!prune) /* (prune-rows adds takes and reshapes) */
      cr_expect_leq(g->n_nodes, nodes_before - N_DEAD + (decompose ? attn_before : 0), "%s",
                    what);
  }
  if (prune && m == 0) /* the classifier's last attention runs one query */
    cr_expect_eq(count_one_query_attention(g), 1, "%s", what);
  if (fuse && attn_before) /* every attention's projections share inputs */
    cr_expect_lt(count_op(g, IR_OP_LINEAR), linears_before, "%s: nothing fused", what);
  if (fuse && !attn_before)
    cr_expect_eq(count_op(g, IR_OP_PARAM_CONCAT), 0, "%s: attn.probs' projections fused", what);
  if (flash)
    cr_expect_eq(count_op(g, IR_OP_ATTENTION_FLASH), attn_before, "%s", what);
  if (flash || decompose)
    cr_expect_eq(count_op(g, IR_OP_ATTENTION), 0, "%s", what);
  if (decompose) {
    cr_expect_eq(count_op(g, IR_OP_ATTENTION), 0, "%s", what);
    cr_expect_eq(count_op(g, IR_OP_ATTN_MIX), mix_before + attn_before, "%s", what);
  }
  cr_expect_eq(count_op(g, IR_OP_INPUT), n_in, "%s: the inputs changed", what);
  Tensor *got = run("interp", g, w, in, n_in, a, &n_got);
  compare(got, n_got, ref, n_ref, 1e-6, what);
  arena_destroy(a);
}

static const char *pipelines[] = {"dce,decompose-attention", "decompose-attention,dce",
                                  "prune-rows,decompose-attention,dce"};

/* every registered pass alone (a new pass is covered without an edit here),
 * then in combination */
Test(semantics, every_pass_keeps_every_model_s_outputs) {
  int n_reg;
  const PassInfo *reg = pass_registry(&n_reg);
  for (int m = 0; m < N_MODELS; m++) {
    for (int p = 0; p < n_reg; p++)
      check(m, reg[p].name, 0);
    for (size_t p = 0; p < sizeof pipelines / sizeof pipelines[0]; p++)
      check(m, pipelines[p], 0);
  }
}

Test(semantics, every_level_keeps_every_model_s_outputs) {
  for (int m = 0; m < N_MODELS; m++)
    for (int level = 0; level <= 3; level++)
      check(m, NULL, level);
}

/* Rewritten graphs also compile (the decomposed attention; -O2's one-query
 * attention and one-row linears; fused projections read through slices by
 * the flash attention): JIT of the rewritten graph against the
 * interpreter on the original one (compiled code differs in rounding). */
Test(semantics, the_jit_runs_rewritten_graphs) {
  static const char *const jit_pipelines[] = {"dce,decompose-attention", "prune-rows,dce",
                                              "prune-rows,fuse-qkv,flash-attention,dce"};
  enum { N_JIT = sizeof jit_pipelines / sizeof *jit_pipelines };
  for (int c = 0; c < N_JIT * N_MODELS; c++) {
    int m = c % N_MODELS;
    Arena *a = arena_create();
    IrGraph *ref_g = build(a, m);
    WeightSet *w = weights_random(a, ref_g, 5);
    Tensor in[8];
    rng_state = 7;
    int n_in = make_inputs(a, ref_g, in);
    int n_ref, n_got;
    Tensor *ref = run("interp", ref_g, w, in, n_in, a, &n_ref);
    IrGraph *g = build(a, m);
    PassPipeline pl;
    char err[512];
    cr_assert(pass_pipeline_parse(jit_pipelines[c / N_MODELS], &pl, err, sizeof err));
    Diags d;
    diags_init(&d, a, NULL);
    PassContext ctx = {.diags = &d};
    cr_assert(pass_pipeline_run(g, &pl, &ctx), "%s", d.captured ? d.captured : "");
    Tensor *got = run("jit", g, w, in, n_in, a, &n_got);
    compare(got, n_got, ref, n_ref, 1e-4, models[m].name);
    arena_destroy(a);
  }
}

/* The comparison is not vacuous: a graph that computes something else (one
 * attention's scale changed) is caught. */
Test(semantics, a_changed_graph_is_caught) {
  Arena *a = arena_create();
  IrGraph *g = build(a, 1);
  WeightSet *w = weights_random(a, g, 3);
  Tensor in[8];
  rng_state = 11;
  int n_in = make_inputs(a, g, in);
  int n_ref, n_got;
  Tensor *ref = run("interp", g, w, in, n_in, a, &n_ref);
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_ATTENTION) {
      g->nodes[i].attrs.scale *= 1.01;
      break;
    }
  Tensor *got = run("interp", g, w, in, n_in, a, &n_got);
  double worst = 0;
  for (int i = 0; i < n_ref; i++)
    for (int64_t e = 0; e < tensor_numel(&ref[i]); e++)
      worst = fmax(worst, fabs((double)((float *)got[i].data)[e] - ((float *)ref[i].data)[e]));
  cr_expect_gt(worst, 1e-5, "a 1%% change of an attention scale went unnoticed (%g)", worst);
  arena_destroy(a);
}
