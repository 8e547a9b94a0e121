/* tests/c/test_derived.c — derived parameters (param.concat, made by
 * fuse-qkv) end to end: the packed weights hold each derived tensor once,
 * equal to the concatenation of the checkpoint's tensors, and not the
 * tensors it replaced; an executable from `tfmc build` (weights file) and
 * one from an `emit-c` project (weights embedded) read them and agree with
 * PyTorch and with each other. The model is the seq2seq golden: Q/K/V of
 * every self-attention and K/V of every cross-attention fuse (but the one
 * whose probabilities the golden asks for). */
#include "backends/driver.h"
#include "c_test_util.h"
#include "runtime/rt_gemm.h"

#define TFMC TFMC_BINARY_DIR "/tfmc"
#define SEQ2SEQ TFMC_SOURCE_DIR "/tests/golden/seq2seq"

static Compiled compile(Arena *a, const char *level) {
  PassPipeline pl = {.n = 0};
  cr_assert(pass_pipeline_level(level[2] - '0', &pl));
  Diags d;
  diags_init(&d, a, NULL);
  PassContext pctx = {.diags = &d};
  DriverOptions o = {.weights = SEQ2SEQ "/weights.safetensors", .passes = &pl, .pass_ctx = &pctx,
                     .stage = DRIVER_PACKED};
  Compiled c;
  char err[1024];
  cr_assert_eq(driver_compile_file(a, &d, SEQ2SEQ "/model.tfm", &o, &c, err, sizeof err), 0,
               "%s %s", err, d.captured ? d.captured : "");
  return c;
}

static const RtWeightInfo *packed_weight(const Compiled *c, const char *name) {
  for (int i = 0; i < c->info->n_weights; i++)
    if (strcmp(c->info->weights[i].name, name) == 0) return &c->info->weights[i];
  return NULL;
}

Test(derived, packed_once_as_the_concatenation) {
  Arena *a = arena_create();
  Compiled c0 = compile(a, "-O0"), c2 = compile(a, "-O2");
  int derived = 0;
  for (int i = 0; i < c2.g->n_nodes; i++) {
    const IrNode *n = &c2.g->nodes[i];
    if (n->op != IR_OP_PARAM_CONCAT) continue;
    derived++;
    const RtWeightInfo *wi = packed_weight(&c2, n->attrs.name);
    cr_assert(wi, "derived param '%s' is not packed", n->attrs.name);
    /* rows of each operand, in order (axis 0); a weight in panels
     * (pack-weights) holds that concatenation as rt_gemm_pack lays it out */
    int64_t total = 1;
    for (int d = 0; d < n->type.rank; d++) total *= n->type.dims[d].value;
    float *want = malloc((size_t)total * sizeof(float)), *at = want;
    for (int k = 0; k < n->n_operands; k++) {
      const IrNode *p = &c2.g->nodes[n->operands[k]];
      const Weight *w = ir_weights_find(c0.w, p->attrs.name); /* as the checkpoint gave it */
      cr_assert(w);
      int64_t count = 1;
      for (int d = 0; d < w->type.rank; d++) count *= w->type.dims[d].value;
      char err[256];
      /* (a packing compile's weights are read from the checkpoint as needed) */
      cr_assert_eq(ir_weight_read(c0.w, w, 0, count, at, err, sizeof err), 0, "%s", err);
      at += count;
      cr_assert_null(packed_weight(&c2, p->attrs.name), "'%s' is packed besides '%s'",
                     p->attrs.name, n->attrs.name);
    }
    int64_t floats = rt_weight_floats(wi);
    float *laid = malloc((size_t)floats * sizeof(float));
    if (wi->layout == RT_WEIGHT_PANELS) {
      cr_assert_eq(wi->rank, 2);
      rt_gemm_pack(wi->shape[0], wi->shape[1], want, laid);
    } else {
      cr_assert_eq(floats, total);
      memcpy(laid, want, (size_t)total * sizeof(float));
    }
    cr_assert(memcmp(c2.packed + wi->offset, laid, (size_t)floats * sizeof(float)) == 0,
              "'%s' is not the concatenation of its parts%s", n->attrs.name,
              wi->layout == RT_WEIGHT_PANELS ? " (in panels)" : "");
    free(want);
    free(laid);
  }
  /* 2 encoder + 3 decoder self-attentions, 3 cross k/v; weights and biases */
  cr_assert_eq(derived, 2 * (2 + 3 + 3), "%d derived params", derived);
  /* nothing packed twice: the same floats up to the 16-float alignment of
   * each tensor, plus the rows panels add (N rounded up to 16) */
  int64_t pad = 0;
  for (int i = 0; i < c2.info->n_weights; i++) {
    const RtWeightInfo *w = &c2.info->weights[i];
    if (w->layout == RT_WEIGHT_PANELS) pad += rt_weight_floats(w) - w->shape[0] * w->shape[1];
  }
  cr_assert_gt(pad, 0, "the output projections (vocab rows) are not whole panels");
  cr_assert_leq(c2.prog->weights_floats, c0.prog->weights_floats + pad,
                "-O2 %lld floats, -O0 %lld, panel rows %lld", (long long)c2.prog->weights_floats,
                (long long)c0.prog->weights_floats, (long long)pad);
  arena_destroy(a);
}

static float *read_all(const char *path, const char *name, int64_t *n) {
  float *x = ct_read_output(path, name, n);
  cr_assert(x, "%s: no '%s'", path, name);
  return x;
}

Test(derived, build_and_emit_c_read_them, .timeout = 600) {
  cr_assert(access(TFMC, X_OK) == 0, "%s is not built", TFMC);
  char *tmp = ct_mkdtemp("derived");
  /* with the golden's attention output: that layer keeps its probabilities
   * (attn.probs, its projections unfused), the others are flash */
  CT_RUN("%s build %s/model.tfm --weights %s/weights.safetensors -O2 --attention decoder.2.cross "
         "-o %s/exe", TFMC, SEQ2SEQ, SEQ2SEQ, tmp);
  CT_RUN("%s emit-c %s/model.tfm --weights %s/weights.safetensors -O2 --attention decoder.2.cross "
         "--embed-weights -o %s/proj", TFMC, SEQ2SEQ, SEQ2SEQ, tmp);
  CT_RUN("%s ir %s/model.tfm -O2 --level loop > %s/listing.txt", TFMC, SEQ2SEQ, tmp);
  CT_RUN("grep -qF 'dec.1.cross.{k,v}.weight' %s/listing.txt", tmp);
  CT_RUN("grep -q 'rt_attention_flash' %s/listing.txt", tmp);
  CT_RUN("cd %s/proj && make >/dev/null", tmp);
  CT_RUN("cd %s && ./exe --inputs %s/inputs.safetensors --outputs exe.safetensors --threads 2", tmp,
         SEQ2SEQ);
  CT_RUN("cd %s/proj && ./seq2seq --inputs %s/inputs.safetensors --outputs ../c.safetensors "
         "--threads 2", tmp, SEQ2SEQ);
  CT_RUN("%s compare %s/exe.safetensors %s/expected.safetensors", TFMC, tmp, SEQ2SEQ);
  CT_RUN("%s compare %s/c.safetensors %s/expected.safetensors", TFMC, tmp, SEQ2SEQ);
  char p1[600], p2[600];
  snprintf(p1, sizeof p1, "%s/exe.safetensors", tmp);
  snprintf(p2, sizeof p2, "%s/c.safetensors", tmp);
  int64_t n1, n2;
  float *x = read_all(p1, "logits", &n1), *y = read_all(p2, "logits", &n2);
  cr_assert_eq(n1, n2);
  for (int64_t i = 0; i < n1; i++)
    cr_assert(fabsf(x[i] - y[i]) <= 1e-5f + 1e-5f * fabsf(y[i]), "logits[%lld]: exe %.7g, C %.7g",
              (long long)i, x[i], y[i]);
  free(x);
  free(y);
  ct_rmdir(tmp);
}
