/* tests/frontend/test_weights.c — weights_load through every transform,
 * canonical names, rule dropping, the full error report, ignore patterns,
 * F16/BF16 conversion, and weights_random's determinism.
 *
 * Graphs are built by hand with the parameter names lower.c gives them;
 * weight maps are built as the parser would fill them; checkpoints are
 * written with rt_st_write (F32) or assembled byte by byte (F16, BF16, I32)
 * and parsed with rt_st_parse. */
#include "frontend/spec.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { D = 8, H = 2, V = 10, FF = 16 };

/* ---- fixtures ---- */

static Arena *A;
static Diags diags;
static char tmpdir[] = "/tmp/tfmc_weights_XXXXXX";
static int n_files;
static RtSafetensors *opened[32]; /* closed by teardown */
static int n_opened;

static RtSafetensors *keep(RtSafetensors *st) {
  cr_assert(n_opened < 32);
  opened[n_opened++] = st;
  return st;
}

static void setup(void) {
  A = arena_create();
  diags_init(&diags, A, NULL); /* captured */
  cr_assert(mkdtemp(tmpdir) != NULL);
}

static void teardown(void) {
  for (int i = 0; i < n_opened; i++) rt_st_close(opened[i]);
  n_opened = 0;
  for (int i = 0; i < n_files; i++) {
    char p[256];
    snprintf(p, sizeof p, "%s/ck%d.safetensors", tmpdir, i);
    unlink(p);
  }
  rmdir(tmpdir);
  strcpy(tmpdir, "/tmp/tfmc_weights_XXXXXX");
  n_files = 0;
  arena_destroy(A);
}

TestSuite(weights, .init = setup, .fini = teardown);

static const char *captured(void) {
  return diags.captured ? diags.captured : "";
}

/* Values that identify their tensor and position: base + k/100. */
static float *seq(int64_t n, float base) {
  float *p = arena_alloc(A, (size_t)n * sizeof *p);
  for (int64_t k = 0; k < n; k++) p[k] = base + (float)k / 100.0f;
  return p;
}

static float *transpose(const float *x, int64_t rows, int64_t cols) {
  float *t = arena_alloc(A, (size_t)(rows * cols) * sizeof *t);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) t[c * rows + r] = x[r * cols + c];
  return t;
}

/* ---- checkpoints ---- */

typedef struct Ck {
  RtStWrite t[64];
  int n;
} Ck;

static void ck_add(Ck *ck, const char *name, int rank, int64_t d0, int64_t d1,
                   const float *data) {
  cr_assert(ck->n < 64);
  RtStWrite *w = &ck->t[ck->n++];
  memset(w, 0, sizeof *w);
  w->name = name;
  w->dtype = RT_F32;
  w->rank = rank;
  w->shape[0] = d0;
  w->shape[1] = d1;
  w->data = data;
}

static float *ck_add_seq(Ck *ck, const char *name, int rank, int64_t d0,
                         int64_t d1, float base) {
  float *p = seq(rank == 1 ? d0 : d0 * d1, base);
  ck_add(ck, name, rank, d0, d1, p);
  return p;
}

static RtSafetensors *ck_open(Ck *ck) {
  char path[256], err[512];
  snprintf(path, sizeof path, "%s/ck%d.safetensors", tmpdir, n_files++);
  cr_assert_eq(rt_st_write(path, ck->t, ck->n, NULL, 0, err, sizeof err), 0,
               "%s", err);
  RtSafetensors *st = NULL;
  cr_assert_eq(rt_st_open(path, &st, err, sizeof err), 0, "%s", err);
  return keep(st);
}

/* A safetensors buffer made by hand: entries of a given dtype. */
typedef struct RawEntry {
  const char *name, *dtype;
  int rank;
  int64_t d0, d1;
  const void *bytes;
  size_t nbytes;
} RawEntry;

static unsigned char *raw_build(const RawEntry *e, int n, size_t *len) {
  char hdr[4096];
  size_t k = 0, off = 0;
  k += (size_t)snprintf(hdr + k, sizeof hdr - k, "{");
  for (int i = 0; i < n; i++) {
    k += (size_t)snprintf(hdr + k, sizeof hdr - k, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                          i ? "," : "", e[i].name, e[i].dtype);
    if (e[i].rank == 1)
      k += (size_t)snprintf(hdr + k, sizeof hdr - k, "%lld", (long long)e[i].d0);
    else
      k += (size_t)snprintf(hdr + k, sizeof hdr - k, "%lld,%lld",
                            (long long)e[i].d0, (long long)e[i].d1);
    k += (size_t)snprintf(hdr + k, sizeof hdr - k, "],\"data_offsets\":[%zu,%zu]}",
                          off, off + e[i].nbytes);
    off += e[i].nbytes;
  }
  k += (size_t)snprintf(hdr + k, sizeof hdr - k, "}");
  while (k % 8) hdr[k++] = ' ';
  size_t total = 8 + k + off;
  unsigned char *buf = arena_alloc(A, total);
  for (int b = 0; b < 8; b++) buf[b] = (unsigned char)((uint64_t)k >> (8 * b));
  memcpy(buf + 8, hdr, k);
  size_t pos = 8 + k;
  for (int i = 0; i < n; i++) {
    memcpy(buf + pos, e[i].bytes, e[i].nbytes);
    pos += e[i].nbytes;
  }
  *len = total;
  return buf;
}

static RtSafetensors *raw_open(const RawEntry *e, int n) {
  size_t len;
  unsigned char *buf = raw_build(e, n, &len);
  RtSafetensors *st = NULL;
  char err[512];
  cr_assert_eq(rt_st_parse(buf, len, "raw", &st, err, sizeof err), 0, "%s", err);
  return keep(st);
}

/* ---- graphs, as lower.c names their params ---- */

static IrLoc loc0 = {"m.tfm", 1, 1};

static void p2(IrGraph *g, const char *name, int64_t d0, int64_t d1) {
  ir_build_param(g, name, ir_type2(IR_F32, d0, d1), loc0);
}
static void p1(IrGraph *g, const char *name, int64_t d0) {
  ir_build_param(g, name, ir_type1(IR_F32, d0), loc0);
}
static void linear_params(IrGraph *g, const char *prefix, int64_t out, int64_t in) {
  p2(g, arena_printf(A, "%s.weight", prefix), out, in);
  p1(g, arena_printf(A, "%s.bias", prefix), out);
}

/* Encoder, `layers` layers: embed, per layer attn q/k/v/o, norm1, ffn w1/w2,
 * norm2; then head (untied, with bias) unless tied. */
static IrGraph *graph_encoder(int layers, bool tied) {
  IrGraph *g = ir_graph_create(A, "m");
  p2(g, "embed.weight", V, D);
  for (int i = 0; i < layers; i++) {
    static const char *const qkvo[] = {"q", "k", "v", "o"};
    for (int k = 0; k < 4; k++)
      linear_params(g, arena_printf(A, "enc.%d.attn.%s", i, qkvo[k]), D, D);
    p1(g, arena_printf(A, "enc.%d.norm1.weight", i), D);
    p1(g, arena_printf(A, "enc.%d.norm1.bias", i), D);
    linear_params(g, arena_printf(A, "enc.%d.ffn.w1", i), FF, D);
    linear_params(g, arena_printf(A, "enc.%d.ffn.w2", i), D, FF);
    p1(g, arena_printf(A, "enc.%d.norm2.weight", i), D);
    p1(g, arena_printf(A, "enc.%d.norm2.bias", i), D);
  }
  if (!tied) linear_params(g, "head", V, D);
  return g;
}

/* A graph of the given params only (name, rank, d0, d1). */
typedef struct PDef {
  const char *name;
  int rank;
  int64_t d0, d1;
} PDef;

static IrGraph *graph_of(const PDef *p, int n) {
  IrGraph *g = ir_graph_create(A, "m");
  for (int i = 0; i < n; i++) {
    if (p[i].rank == 1) p1(g, p[i].name, p[i].d0);
    else p2(g, p[i].name, p[i].d0, p[i].d1);
  }
  return g;
}

static ModelSpec *model_encoder(int layers, bool tied) {
  ModelSpec *m = arena_alloc(A, sizeof *m);
  m->name = "m";
  m->arch = ARCH_ENCODER;
  m->vocab_src = V;
  m->d_model = D;
  m->heads = H;
  m->d_ff = FF;
  m->layers_enc = layers;
  m->norm_eps = 1e-5;
  m->pos = POS_SINUSOIDAL;
  m->embed_scale = 1;
  m->head = HEAD_LOGITS;
  m->head_tied = tied;
  m->head_bias = !tied;
  m->pad_id = m->bos_id = m->eos_id = -1;
  m->max_batch = 4;
  m->max_src = 16;
  return m;
}

/* ---- weight maps ---- */

static WeightRule rule(const char *target, WeightXform x, const char *source) {
  return (WeightRule){.loc = {"m.tfm", 20, 3},
                      .target = target,
                      .xform = x,
                      .source = source,
                      .weight_suffix = "weight",
                      .bias_suffix = "bias"};
}

static WeightMap *map_of(const WeightRule *rules, int n, const char *const *ignore,
                         int n_ignore) {
  WeightMap *m = arena_alloc(A, sizeof *m);
  m->loc = (IrLoc){"m.tfm", 19, 1};
  m->model_name = "m";
  m->root = "";
  m->rules = arena_alloc(A, (size_t)(n + 1) * sizeof *m->rules);
  memcpy(m->rules, rules, (size_t)n * sizeof *rules);
  m->n_rules = n;
  m->ignore = arena_alloc(A, (size_t)(n_ignore + 1) * sizeof *m->ignore);
  m->ignore_loc = arena_alloc(A, (size_t)(n_ignore + 1) * sizeof *m->ignore_loc);
  for (int i = 0; i < n_ignore; i++) m->ignore[i] = ignore[i];
  m->n_ignore = n_ignore;
  return m;
}

static Spec *spec_of(ModelSpec *m, WeightMap *w) {
  Spec *s = arena_alloc(A, sizeof *s);
  s->model = m;
  s->weights = w;
  return s;
}

static const float *get(const WeightSet *ws, const char *name) {
  const Weight *w = ir_weights_find(ws, name);
  cr_assert_not_null(w, "no weight %s", name);
  return w->data;
}

static void assert_floats(const float *got, const float *want, int64_t n,
                          const char *what) {
  for (int64_t k = 0; k < n; k++)
    cr_assert_eq(got[k], want[k], "%s[%lld]: got %g want %g", what, (long long)k,
                 (double)got[k], (double)want[k]);
}

static void assert_has(const char *needle) {
  cr_assert(strstr(captured(), needle) != NULL, "expected\n  %s\nin:\n%s",
            needle, captured());
}

/* A checkpoint holding every param of g under its canonical name. */
static void ck_canonical(Ck *ck, const IrGraph *g) {
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->op != IR_OP_PARAM) continue;
    if (n->type.rank == 1)
      ck_add_seq(ck, n->attrs.name, 1, n->type.dims[0].value, 0, (float)i);
    else
      ck_add_seq(ck, n->attrs.name, 2, n->type.dims[0].value,
                 n->type.dims[1].value, (float)i);
  }
}

/* ---- canonical names ---- */

Test(weights, canonical_names_without_map) {
  IrGraph *g = graph_encoder(2, false);
  Ck ck = {0};
  ck_canonical(&ck, g);
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(2, false), NULL),
                               ck_open(&ck), &diags);
  cr_assert_not_null(ws, "%s", captured());
  cr_assert_eq(diags.n_errors, 0);
  int n_params = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->op != IR_OP_PARAM) continue;
    n_params++;
    const Weight *w = ir_weights_find(ws, n->attrs.name);
    cr_assert_not_null(w);
    cr_assert(ir_type_eq(&w->type, &n->type));
    int64_t numel = n->type.dims[0].value *
                    (n->type.rank == 2 ? n->type.dims[1].value : 1);
    assert_floats(w->data, seq(numel, (float)i), numel, n->attrs.name);
  }
  cr_assert_eq(ws->n, n_params);
  cr_assert_null(ir_weights_find(ws, "enc.5.attn.q.weight"));
}

Test(weights, canonical_names_all_missing_suggests_a_map) {
  PDef ps[] = {{"embed.weight", 2, V, D}, {"head.weight", 2, V, D}};
  IrGraph *g = graph_of(ps, 2);
  Ck ck = {0};
  ck_add_seq(&ck, "transformer.wte.weight", 2, V, D, 0);
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(0, false), NULL),
                               ck_open(&ck), &diags);
  cr_assert_null(ws);
  cr_assert_eq(diags.n_errors, 3);
  assert_has("error: missing tensor 'embed.weight' for embed.weight, expected [10,8]\n");
  assert_has("error: missing tensor 'head.weight' for head.weight, expected [10,8]\n");
  assert_has("error: unexpected tensor 'transformer.wte.weight' [10,8] in the "
             "checkpoint: the model has no parameter of that name");
  assert_has("note: none of the model's parameters is in the checkpoint");
}

/* ---- transforms ---- */

Test(weights, linear_copies_weight_and_bias) {
  PDef ps[] = {{"enc.0.attn.q.weight", 2, D, 4}, {"enc.0.attn.q.bias", 1, D, 0},
               {"enc.1.attn.q.weight", 2, D, 4}, {"enc.1.attn.q.bias", 1, D, 0}};
  IrGraph *g = graph_of(ps, 4);
  Ck ck = {0};
  float *w0 = ck_add_seq(&ck, "layers.0.q.weight", 2, D, 4, 1);
  float *b0 = ck_add_seq(&ck, "layers.0.q.bias", 1, D, 0, 2);
  float *w1 = ck_add_seq(&ck, "layers.1.q.weight", 2, D, 4, 3);
  float *b1 = ck_add_seq(&ck, "layers.1.q.bias", 1, D, 0, 4);
  WeightRule r[] = {rule("enc[i].attn.q", WX_LINEAR, "layers.{i}.q")};
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(2, false), map_of(r, 1, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_not_null(ws, "%s", captured());
  assert_floats(get(ws, "enc.0.attn.q.weight"), w0, D * 4, "w0");
  assert_floats(get(ws, "enc.0.attn.q.bias"), b0, D, "b0");
  assert_floats(get(ws, "enc.1.attn.q.weight"), w1, D * 4, "w1");
  assert_floats(get(ws, "enc.1.attn.q.bias"), b1, D, "b1");
}

Test(weights, conv1d_transposes_in_out) {
  PDef ps[] = {{"dec.0.ffn.w1.weight", 2, FF, D}, {"dec.0.ffn.w1.bias", 1, FF, 0}};
  IrGraph *g = graph_of(ps, 2);
  Ck ck = {0};
  float *stored = ck_add_seq(&ck, "h.0.mlp.c_fc.weight", 2, D, FF, 1); /* [in,out] */
  float *bias = ck_add_seq(&ck, "h.0.mlp.c_fc.bias", 1, FF, 0, 5);
  WeightRule r[] = {rule("dec[i].ffn.w1", WX_CONV1D, "h.{i}.mlp.c_fc")};
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(0, false), map_of(r, 1, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_not_null(ws, "%s", captured());
  const float *w = get(ws, "dec.0.ffn.w1.weight");
  /* W[o][i] = stored[i][o] */
  cr_assert_eq(w[0 * D + 1], stored[1 * FF + 0]);
  cr_assert_eq(w[3 * D + 5], stored[5 * FF + 3]);
  assert_floats(w, transpose(stored, D, FF), FF * D, "w1");
  assert_floats(get(ws, "dec.0.ffn.w1.bias"), bias, FF, "bias");
}

/* got == want everywhere; one assertion naming the first difference */
static void assert_floats_fast(const float *got, const float *want, int64_t n, const char *what) {
  int64_t k = 0;
  while (k < n && got[k] == want[k]) k++;
  cr_assert_eq(k, n, "%s[%lld]: got %g want %g", what, (long long)k,
               k < n ? (double)got[k] : 0.0, k < n ? (double)want[k] : 0.0);
}

/* Weights of more than a read piece (2^20 floats): read in pieces on a
 * pool, transposed (conv1d, split_conv1d) and not (linear), every value
 * where it belongs. */
Test(weights, large_weights_read_in_pieces) {
  enum { IN = 1100, OUT = 1000, QD = 600, QIN = 700 };
  PDef ps[] = {{"dec.0.ffn.w1.weight", 2, OUT, IN},  {"dec.0.ffn.w1.bias", 1, OUT, 0},
               {"dec.0.ffn.w2.weight", 2, OUT, IN},  {"dec.0.ffn.w2.bias", 1, OUT, 0},
               {"enc.0.attn.q.weight", 2, QD, QIN}, {"enc.0.attn.q.bias", 1, QD, 0},
               {"enc.0.attn.k.weight", 2, QD, QIN}, {"enc.0.attn.k.bias", 1, QD, 0},
               {"enc.0.attn.v.weight", 2, QD, QIN}, {"enc.0.attn.v.bias", 1, QD, 0}};
  IrGraph *g = graph_of(ps, 10);
  Ck ck = {0};
  float *c1 = ck_add_seq(&ck, "h.0.mlp.c_fc.weight", 2, IN, OUT, 1); /* [in,out] */
  ck_add_seq(&ck, "h.0.mlp.c_fc.bias", 1, OUT, 0, 2);
  float *l2 = ck_add_seq(&ck, "l.0.w2.weight", 2, OUT, IN, 3); /* [out,in] */
  ck_add_seq(&ck, "l.0.w2.bias", 1, OUT, 0, 4);
  float *qkv = ck_add_seq(&ck, "h.0.attn.c_attn.weight", 2, QIN, 3 * QD, 5); /* [in,3d] */
  float *qkv_b = ck_add_seq(&ck, "h.0.attn.c_attn.bias", 1, 3 * QD, 0, 6);
  WeightRule r[] = {rule("dec[i].ffn.w1", WX_CONV1D, "h.{i}.mlp.c_fc"),
                    rule("dec[i].ffn.w2", WX_LINEAR, "l.{i}.w2"),
                    rule("enc[i].attn.qkv", WX_SPLIT_CONV1D, "h.{i}.attn.c_attn")};
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(1, false), map_of(r, 3, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_not_null(ws, "%s", captured());
  assert_floats_fast(get(ws, "dec.0.ffn.w1.weight"), transpose(c1, IN, OUT), (int64_t)IN * OUT,
                     "w1");
  assert_floats_fast(get(ws, "dec.0.ffn.w2.weight"), l2, (int64_t)IN * OUT, "w2");
  float *qkv_t = transpose(qkv, QIN, 3 * QD); /* [3d,in]: q rows, then k, then v */
  static const char *const s[] = {"q", "k", "v"};
  for (int k = 0; k < 3; k++) {
    assert_floats_fast(get(ws, arena_printf(A, "enc.0.attn.%s.weight", s[k])),
                       qkv_t + (int64_t)k * QD * QIN, (int64_t)QD * QIN, s[k]);
    assert_floats_fast(get(ws, arena_printf(A, "enc.0.attn.%s.bias", s[k])), qkv_b + k * QD, QD,
                       s[k]);
  }
}

/* NaN and Inf values are loaded as they are and counted per weight,
 * transposed or not, one weight from several reads (heads) summed. */
Test(weights, nonfinite_values_are_counted_per_weight) {
  PDef ps[] = {{"dec.0.ffn.w1.weight", 2, FF, D}, {"dec.0.ffn.w1.bias", 1, FF, 0},
               {"enc.0.attn.k.weight", 2, D, D}, {"enc.0.attn.k.bias", 1, D, 0}};
  IrGraph *g = graph_of(ps, 4);
  Ck ck = {0};
  float *c = ck_add_seq(&ck, "h.0.mlp.c_fc.weight", 2, D, FF, 1); /* [in,out] */
  c[3] = NAN;
  c[D * FF - 1] = INFINITY;
  c[7] = -INFINITY;
  ck_add_seq(&ck, "h.0.mlp.c_fc.bias", 1, FF, 0, 5);
  float *h1 = ck_add_seq(&ck, "l.0.heads.1.k.weight", 2, D / H, D, 2);
  h1[0] = NAN;
  ck_add_seq(&ck, "l.0.heads.0.k.weight", 2, D / H, D, 1)[5] = -NAN;
  ck_add_seq(&ck, "l.0.heads.0.k.bias", 1, D / H, 0, 3);
  ck_add_seq(&ck, "l.0.heads.1.k.bias", 1, D / H, 0, 4);
  WeightRule r[] = {rule("dec[i].ffn.w1", WX_CONV1D, "h.{i}.mlp.c_fc"),
                    rule("enc[i].attn.k", WX_HEADS, "l.{i}.heads.{h}.k")};
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(1, false), map_of(r, 2, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_not_null(ws, "%s", captured());
  cr_assert_not_null(ws->nonfinite);
  static const char *const names[] = {"dec.0.ffn.w1.weight", "dec.0.ffn.w1.bias",
                                      "enc.0.attn.k.weight", "enc.0.attn.k.bias"};
  static const int64_t want[] = {3, 0, 2, 0};
  for (int i = 0; i < 4; i++) {
    const Weight *w = ir_weights_find(ws, names[i]);
    cr_assert_not_null(w);
    cr_assert_eq(ws->nonfinite[w - ws->items], want[i], "%s: %lld", names[i],
                 (long long)ws->nonfinite[w - ws->items]);
  }
  const float *w1 = get(ws, "dec.0.ffn.w1.weight"); /* [out,in]: stored [i][o] at [o][i] */
  cr_assert(isnan(w1[3 * D + 0]) && isinf(w1[(FF - 1) * D + D - 1]) && isinf(w1[7 * D]));
}

Test(weights, heads_concatenate_along_output_dim) {
  PDef ps[] = {{"enc.0.attn.k.weight", 2, D, D}, {"enc.0.attn.k.bias", 1, D, 0}};
  IrGraph *g = graph_of(ps, 2);
  Ck ck = {0};
  float *w_h0 = ck_add_seq(&ck, "l.0.heads.0.k.weight", 2, D / H, D, 1);
  float *w_h1 = ck_add_seq(&ck, "l.0.heads.1.k.weight", 2, D / H, D, 2);
  float *b_h0 = ck_add_seq(&ck, "l.0.heads.0.k.bias", 1, D / H, 0, 3);
  float *b_h1 = ck_add_seq(&ck, "l.0.heads.1.k.bias", 1, D / H, 0, 4);
  WeightRule r[] = {rule("enc[i].attn.k", WX_HEADS, "l.{i}.heads.{h}.k")};
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(1, false), map_of(r, 1, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_not_null(ws, "%s", captured());
  const float *w = get(ws, "enc.0.attn.k.weight");
  assert_floats(w, w_h0, (D / H) * D, "head 0 rows");
  assert_floats(w + (D / H) * D, w_h1, (D / H) * D, "head 1 rows");
  const float *b = get(ws, "enc.0.attn.k.bias");
  assert_floats(b, b_h0, D / H, "head 0 bias");
  assert_floats(b + D / H, b_h1, D / H, "head 1 bias");
}

static const PDef qkv_params[] = {
    {"enc.0.attn.q.weight", 2, D, D}, {"enc.0.attn.q.bias", 1, D, 0},
    {"enc.0.attn.k.weight", 2, D, D}, {"enc.0.attn.k.bias", 1, D, 0},
    {"enc.0.attn.v.weight", 2, D, D}, {"enc.0.attn.v.bias", 1, D, 0}};

Test(weights, split_takes_rows_in_qkv_order) {
  IrGraph *g = graph_of(qkv_params, 6);
  Ck ck = {0};
  float *w = ck_add_seq(&ck, "enc.0.sa.in_proj_weight", 2, 3 * D, D, 1);
  float *b = ck_add_seq(&ck, "enc.0.sa.in_proj_bias", 1, 3 * D, 0, 7);
  WeightRule r[] = {rule("enc[i].attn.qkv", WX_SPLIT, "enc.{i}.sa")};
  r[0].weight_suffix = "in_proj_weight";
  r[0].bias_suffix = "in_proj_bias";
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(1, false), map_of(r, 1, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_not_null(ws, "%s", captured());
  static const char *const s[] = {"q", "k", "v"};
  for (int k = 0; k < 3; k++) {
    assert_floats(get(ws, arena_printf(A, "enc.0.attn.%s.weight", s[k])),
                  w + k * D * D, D * D, s[k]);
    assert_floats(get(ws, arena_printf(A, "enc.0.attn.%s.bias", s[k])),
                  b + k * D, D, s[k]);
  }
}

Test(weights, split_conv1d_takes_columns_and_transposes) {
  IrGraph *g = graph_of(qkv_params, 6);
  Ck ck = {0};
  float *w = ck_add_seq(&ck, "h.0.attn.c_attn.weight", 2, D, 3 * D, 1); /* [in,3d] */
  float *b = ck_add_seq(&ck, "h.0.attn.c_attn.bias", 1, 3 * D, 0, 7);
  WeightRule r[] = {rule("enc[i].attn.qkv", WX_SPLIT_CONV1D, "h.{i}.attn.c_attn")};
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(1, false), map_of(r, 1, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_not_null(ws, "%s", captured());
  static const char *const s[] = {"q", "k", "v"};
  for (int k = 0; k < 3; k++) {
    const float *got = get(ws, arena_printf(A, "enc.0.attn.%s.weight", s[k]));
    for (int o = 0; o < D; o++)     /* out row */
      for (int i = 0; i < D; i++) /* in column */
        cr_assert_eq(got[o * D + i], w[i * 3 * D + k * D + o], "%s[%d][%d]",
                     s[k], o, i);
    assert_floats(get(ws, arena_printf(A, "enc.0.attn.%s.bias", s[k])),
                  b + k * D, D, s[k]);
  }
}

Test(weights, norm_with_custom_suffixes) {
  PDef ps[] = {{"enc.0.norm1.weight", 1, D, 0}, {"enc.0.norm1.bias", 1, D, 0},
               {"enc.norm.weight", 1, D, 0}, {"enc.norm.bias", 1, D, 0}};
  IrGraph *g = graph_of(ps, 4);
  Ck ck = {0};
  float *a2 = ck_add_seq(&ck, "encoder.layers.0.sublayer.0.norm.a_2", 1, D, 0, 1);
  float *b2 = ck_add_seq(&ck, "encoder.layers.0.sublayer.0.norm.b_2", 1, D, 0, 2);
  float *fa = ck_add_seq(&ck, "encoder.norm.a_2", 1, D, 0, 3);
  float *fb = ck_add_seq(&ck, "encoder.norm.b_2", 1, D, 0, 4);
  WeightRule r[] = {rule("enc[i].norm1", WX_NORM, "encoder.layers.{i}.sublayer.0.norm"),
                    rule("enc.norm", WX_NORM, "encoder.norm")};
  for (int k = 0; k < 2; k++) {
    r[k].weight_suffix = "a_2";
    r[k].bias_suffix = "b_2";
    r[k].from_preset = true;
  }
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(1, false), map_of(r, 2, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_not_null(ws, "%s", captured());
  assert_floats(get(ws, "enc.0.norm1.weight"), a2, D, "a_2");
  assert_floats(get(ws, "enc.0.norm1.bias"), b2, D, "b_2");
  assert_floats(get(ws, "enc.norm.weight"), fa, D, "final a_2");
  assert_floats(get(ws, "enc.norm.bias"), fb, D, "final b_2");
}

Test(weights, tensor_rule_and_explicit_rule_overrides_preset) {
  PDef ps[] = {{"embed.weight", 2, V, D}, {"enc.0.attn.q.weight", 2, D, D},
               {"enc.0.attn.q.bias", 1, D, 0}, {"enc.0.attn.k.weight", 2, D, D},
               {"enc.0.attn.k.bias", 1, D, 0}};
  IrGraph *g = graph_of(ps, 5);
  Ck ck = {0};
  float *e = ck_add_seq(&ck, "wte", 2, V, D, 1);
  float *qw = ck_add_seq(&ck, "", 2, D, D, 2);
  float *qb = ck_add_seq(&ck, "", 1, D, 0, 3);
  float *fw = ck_add_seq(&ck, "", 2, 3 * D, D, 4);
  float *fb = ck_add_seq(&ck, "", 1, 3 * D, 0, 5);
  /* the explicit q rule comes first and wins over the preset's q rule; the
   * preset's qkv split still supplies k */
  ck.t[1].name = "my_0.weight";
  ck.t[2].name = "my_0.bias";
  ck.t[3].name = "fused_0.in_proj_weight";
  ck.t[4].name = "fused_0.in_proj_bias";
  WeightRule r[] = {rule("embed", WX_TENSOR, "wte"),
                    rule("enc[i].attn.q", WX_LINEAR, "my_{i}"),
                    rule("enc[i].attn.qkv", WX_SPLIT, "fused_{i}"),
                    rule("enc[i].attn.q", WX_LINEAR, "preset_q.{i}")};
  r[2].weight_suffix = "in_proj_weight";
  r[2].bias_suffix = "in_proj_bias";
  r[2].from_preset = r[3].from_preset = true;
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(1, false), map_of(r, 4, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_not_null(ws, "%s", captured());
  assert_floats(get(ws, "embed.weight"), e, V * D, "embed");
  assert_floats(get(ws, "enc.0.attn.q.weight"), qw, D * D, "q from explicit");
  assert_floats(get(ws, "enc.0.attn.q.bias"), qb, D, "q bias from explicit");
  assert_floats(get(ws, "enc.0.attn.k.weight"), fw + D * D, D * D, "k from split");
  assert_floats(get(ws, "enc.0.attn.k.bias"), fb + D, D, "k bias from split");
}

/* ---- tied heads ---- */

static WeightSet *load_tied(bool equal, bool tied_model, bool explicit_rule) {
  PDef ps_tied[] = {{"embed.weight", 2, V, D}};
  PDef ps_untied[] = {{"embed.weight", 2, V, D}, {"head.weight", 2, V, D}};
  IrGraph *g = tied_model ? graph_of(ps_tied, 1) : graph_of(ps_untied, 2);
  Ck ck = {0};
  ck_add_seq(&ck, "wte.weight", 2, V, D, 1);
  float *copy = seq(V * D, 1);
  if (!equal) copy[3 * D + 2] += 0.5f;
  ck_add(&ck, "lm_head.weight", 2, V, D, copy);
  WeightRule r[] = {rule("embed", WX_TENSOR, "wte.weight"),
                    rule("head", WX_TIED, "lm_head.weight")};
  r[1].from_preset = !explicit_rule;
  ModelSpec *m = model_encoder(0, tied_model);
  return weights_load(A, g, spec_of(m, map_of(r, 2, NULL, 0)), ck_open(&ck), &diags);
}

Test(weights, tied_copy_equal_is_consumed) {
  WeightSet *ws = load_tied(true, true, false);
  cr_assert_not_null(ws, "%s", captured());
  cr_assert_eq(ws->n, 1);
  cr_assert_eq(diags.n_errors, 0);
}

Test(weights, tied_copy_differs_is_an_error) {
  WeightSet *ws = load_tied(false, true, false);
  cr_assert_null(ws);
  cr_assert_eq(diags.n_errors, 1, "%s", captured());
  assert_has("m.tfm:20:3: error: lm_head.weight: stored copy of a tied weight "
             "differs from embed.weight (max |diff| 0.5 at [3,2])");
}

Test(weights, tied_copy_absent_is_fine) {
  PDef ps[] = {{"embed.weight", 2, V, D}};
  IrGraph *g = graph_of(ps, 1);
  Ck ck = {0};
  ck_add_seq(&ck, "wte.weight", 2, V, D, 1);
  WeightRule r[] = {rule("embed", WX_TENSOR, "wte.weight"),
                    rule("head", WX_TIED, "lm_head.weight")};
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(0, true), map_of(r, 2, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_not_null(ws, "%s", captured());
}

Test(weights, tied_rule_on_untied_head_explicit_is_an_error) {
  WeightSet *ws = load_tied(true, false, true);
  cr_assert_null(ws);
  cr_assert_eq(diags.n_errors, 1, "%s", captured());
  assert_has("m.tfm:20:3: error: 'head = tied ...' but the head is not tied in "
             "model 'm' (add 'tied' to the head line)");
}

Test(weights, tied_rule_from_preset_on_untied_head_loads_the_copy) {
  WeightSet *ws = load_tied(true, false, false);
  cr_assert_not_null(ws, "%s", captured());
  assert_floats(get(ws, "head.weight"), seq(V * D, 1), V * D, "head");
}

Test(weights, tied_canonical_head_copy_is_checked_without_map) {
  PDef ps[] = {{"embed.weight", 2, V, D}};
  IrGraph *g = graph_of(ps, 1);
  Ck ck = {0};
  ck_add_seq(&ck, "embed.weight", 2, V, D, 1);
  float *copy = seq(V * D, 1);
  copy[0] = -7;
  ck_add(&ck, "head.weight", 2, V, D, copy);
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(0, true), NULL),
                               ck_open(&ck), &diags);
  cr_assert_null(ws);
  cr_assert_eq(diags.n_errors, 1, "%s", captured());
  assert_has("error: head.weight: stored copy of a tied weight differs from "
             "embed.weight (max |diff| 8 at [0,0])");
}

/* ---- rules for targets the model lacks ---- */

Test(weights, preset_rules_for_absent_targets_are_dropped) {
  PDef ps[] = {{"enc.0.norm1.weight", 1, D, 0}, {"enc.0.norm1.bias", 1, D, 0}};
  IrGraph *g = graph_of(ps, 2);
  Ck ck = {0};
  ck_add_seq(&ck, "n.0.weight", 1, D, 0, 1);
  ck_add_seq(&ck, "n.0.bias", 1, D, 0, 2);
  WeightRule r[] = {rule("enc[i].norm1", WX_NORM, "n.{i}"),
                    rule("dec[i].cross.q", WX_LINEAR, "d.{i}.cross.q"),
                    rule("enc.norm", WX_NORM, "encoder.norm"),
                    rule("pos", WX_TENSOR, "pos.weight"),
                    rule("head", WX_LINEAR, "generator.proj")};
  for (int k = 0; k < 5; k++) r[k].from_preset = true;
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(1, false), map_of(r, 5, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_not_null(ws, "%s", captured());
  cr_assert_eq(diags.n_errors, 0);
}

Test(weights, explicit_rules_for_absent_targets_are_errors) {
  PDef ps[] = {{"enc.0.norm1.weight", 1, D, 0}, {"enc.0.norm1.bias", 1, D, 0}};
  IrGraph *g = graph_of(ps, 2);
  Ck ck = {0};
  ck_add_seq(&ck, "n.0.weight", 1, D, 0, 1);
  ck_add_seq(&ck, "n.0.bias", 1, D, 0, 2);
  /* what the bad rules name is not reported again as unexpected */
  ck_add_seq(&ck, "d.0.cross.q.weight", 2, D, D, 2);
  ck_add_seq(&ck, "pos.weight", 2, 4, D, 2);
  WeightRule r[] = {rule("enc[i].norm1", WX_NORM, "n.{i}"),
                    rule("dec[i].cross.q", WX_LINEAR, "d.{i}.cross.q"),
                    rule("pos", WX_TENSOR, "pos.weight")};
  r[1].loc = (IrLoc){"m.tfm", 21, 3};
  r[2].loc = (IrLoc){"m.tfm", 22, 3};
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(1, false), map_of(r, 3, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_null(ws);
  cr_assert_eq(diags.n_errors, 2, "%s", captured());
  assert_has("m.tfm:21:3: error: weight target 'dec[i].cross.q' does not exist "
             "in model 'm' (an encoder model has no decoder)");
  assert_has("m.tfm:22:3: error: weight target 'pos' does not exist in model 'm' "
             "(the model's positions are not learned)");
}

Test(weights, bad_rule_shapes_are_reported_once) {
  IrGraph *g = graph_of(qkv_params, 6);
  Ck ck = {0};
  ck_add_seq(&ck, "x.0.weight", 2, D, D, 2);
  WeightRule r[] = {rule("enc[i].attn.qkv", WX_LINEAR, "x.{i}"),
                    rule("enc[i].attn.q", WX_SPLIT, "y.{i}")};
  r[1].loc = (IrLoc){"m.tfm", 21, 3};
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(1, false), map_of(r, 2, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_null(ws);
  cr_assert_eq(diags.n_errors, 2, "%s", captured());
  assert_has("m.tfm:20:3: error: 'enc[i].attn.qkv' is a fused Q/K/V target: it "
             "takes 'split' or 'split_conv1d', not 'linear'");
  assert_has("m.tfm:21:3: error: 'split' splits a fused Q/K/V tensor: its target "
             "must end in .qkv");
}

/* ---- the full report ---- */

Test(weights, report_lists_every_problem_at_once) {
  IrGraph *g = graph_encoder(2, false);
  Ck ck = {0};
  ck_canonical(&ck, g);
  WeightRule r[] = {rule("enc[i].attn.qkv", WX_SPLIT, "encoder.layers.{i}.self_attn")};
  r[0].weight_suffix = "in_proj_weight";
  r[0].bias_suffix = "in_proj_bias";
  r[0].from_preset = true;
  /* replace q/k/v by fused tensors: layer 0 complete, layer 1 without bias */
  Ck ck2 = {0};
  for (int i = 0; i < ck.n; i++)
    if (!strstr(ck.t[i].name, "attn.q") && !strstr(ck.t[i].name, "attn.k") &&
        !strstr(ck.t[i].name, "attn.v") && strcmp(ck.t[i].name, "head.bias") != 0)
      ck2.t[ck2.n++] = ck.t[i];
  ck_add_seq(&ck2, "encoder.layers.0.self_attn.in_proj_weight", 2, 3 * D, D, 1);
  ck_add_seq(&ck2, "encoder.layers.0.self_attn.in_proj_bias", 1, 3 * D, 0, 1);
  ck_add_seq(&ck2, "encoder.layers.1.self_attn.in_proj_weight", 2, 3 * D, D, 1);
  /* mis-shaped: ffn.w2 of layer 1 stored transposed */
  for (int i = 0; i < ck2.n; i++)
    if (strcmp(ck2.t[i].name, "enc.1.ffn.w2.weight") == 0) {
      ck2.t[i].shape[0] = FF;
      ck2.t[i].shape[1] = D;
    }
  ck_add_seq(&ck2, "foo.bar", 2, 3, 4, 0);
  ck_add_seq(&ck2, "enc.0.attn.bias", 1, 5, 0, 0);
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(2, false), map_of(r, 1, NULL, 0)),
                               ck_open(&ck2), &diags);
  cr_assert_null(ws);
  cr_assert_eq(diags.n_errors, 5, "%s", captured());
  assert_has("m.tfm:20:3: error: missing tensor "
             "'encoder.layers.1.self_attn.in_proj_bias' for enc.1.attn.q/k/v.bias, "
             "expected [24]\n");
  assert_has("error: missing tensor 'head.bias' for head.bias, expected [10] (no "
             "weight-map rule for 'head', so its canonical name was used)\n");
  assert_has("error: tensor 'enc.1.ffn.w2.weight' has shape [16,8], expected "
             "[8,16] (for enc.1.ffn.w2.weight)\n");
  assert_has("error: unexpected tensor 'foo.bar' [3,4] in the checkpoint: no "
             "weight-map rule uses it (add `ignore \"foo.bar\"` to the weights "
             "block if that is intended)\n");
  assert_has("error: unexpected tensor 'enc.0.attn.bias' [5] in the checkpoint");
  /* missing before mis-shaped (graph order), unexpected last, in file order */
  const char *t = captured();
  const char *m1 = strstr(t, "in_proj_bias' for"), *s1 = strstr(t, "has shape");
  const char *u1 = strstr(t, "'foo.bar'"), *u2 = strstr(t, "'enc.0.attn.bias'");
  cr_assert(m1 && s1 && u1 && u2);
  cr_assert(m1 < s1 && s1 < u1);
  /* rt_st_write lays tensors out in name order: enc.0.attn.bias first */
  cr_assert(u2 < u1, "%s", t);
}

Test(weights, transposed_linear_gets_a_hint) {
  PDef ps[] = {{"enc.0.ffn.w1.weight", 2, FF, D}, {"enc.0.ffn.w1.bias", 1, FF, 0}};
  IrGraph *g = graph_of(ps, 2);
  Ck ck = {0};
  ck_add_seq(&ck, "f.0.weight", 2, D, FF, 1);
  ck_add_seq(&ck, "f.0.bias", 1, FF, 0, 1);
  WeightRule r[] = {rule("enc[i].ffn.w1", WX_LINEAR, "f.{i}")};
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(1, false), map_of(r, 1, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_null(ws);
  cr_assert_eq(diags.n_errors, 1, "%s", captured());
  assert_has("tensor 'f.0.weight' has shape [8,16], expected [16,8] (for "
             "enc.0.ffn.w1.weight); it looks stored as [in,out]: use 'conv1d'");
}

Test(weights, no_bias_rule_with_model_bias_is_an_error) {
  IrGraph *g = graph_of(qkv_params, 6);
  Ck ck = {0};
  ck_add_seq(&ck, "a.0.w", 2, 3 * D, D, 1);
  WeightRule r[] = {rule("enc[i].attn.qkv", WX_SPLIT, "a.{i}")};
  r[0].weight_suffix = "w";
  r[0].bias_suffix = "";
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(1, false), map_of(r, 1, NULL, 0)),
                               ck_open(&ck), &diags);
  cr_assert_null(ws);
  cr_assert_eq(diags.n_errors, 1, "%s", captured());
  assert_has("m.tfm:20:3: error: enc.0.attn.q/k/v.bias: the weight map says the "
             "checkpoint stores no bias for 'enc[i].attn.qkv' (bias \"\"), but the "
             "model has a bias there");
}

Test(weights, integer_tensor_is_a_dtype_error) {
  PDef ps[] = {{"embed.weight", 2, 2, 2}};
  IrGraph *g = graph_of(ps, 1);
  int32_t ints[4] = {1, 2, 3, 4};
  RawEntry e[] = {{"embed.weight", "I32", 2, 2, 2, ints, sizeof ints}};
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(0, false), NULL),
                               raw_open(e, 1), &diags);
  cr_assert_null(ws);
  cr_assert_eq(diags.n_errors, 1, "%s", captured());
  assert_has("error: tensor 'embed.weight' has dtype I32, expected a "
             "floating-point tensor (F32, F16, BF16 or F64) (for embed.weight)");
}

/* ---- ignore patterns ---- */

Test(weights, ignore_patterns_with_layer_index_and_star) {
  PDef ps[] = {{"embed.weight", 2, V, D}};
  IrGraph *g = graph_of(ps, 1);
  Ck ck = {0};
  ck_add_seq(&ck, "embed.weight", 2, V, D, 1);
  ck_add_seq(&ck, "h.0.attn.bias", 1, 4, 0, 0);
  ck_add_seq(&ck, "h.11.attn.bias", 1, 4, 0, 0);
  ck_add_seq(&ck, "h.x.attn.bias", 1, 4, 0, 0);     /* {i} needs digits */
  ck_add_seq(&ck, "h..attn.bias", 1, 4, 0, 0);      /* {i} needs one at least */
  ck_add_seq(&ck, "opt.state.a.b", 1, 4, 0, 0);     /* * spans dots */
  ck_add_seq(&ck, "opt.state", 1, 4, 0, 0);         /* ...but needs the dot */
  ck_add_seq(&ck, "pe.head3", 1, 4, 0, 0);          /* {h} */
  WeightRule r[] = {rule("embed", WX_TENSOR, "embed.weight")};
  const char *ign[] = {"h.{i}.attn.bias", "opt.state.*", "pe.head{h}"};
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(0, false), map_of(r, 1, ign, 3)),
                               ck_open(&ck), &diags);
  cr_assert_null(ws);
  cr_assert_eq(diags.n_errors, 3, "%s", captured());
  assert_has("unexpected tensor 'h.x.attn.bias'");
  assert_has("unexpected tensor 'h..attn.bias'");
  assert_has("unexpected tensor 'opt.state' [4]");
  cr_assert_null(strstr(captured(), "'h.0.attn.bias'"));
  cr_assert_null(strstr(captured(), "'h.11.attn.bias'"));
  cr_assert_null(strstr(captured(), "'opt.state.a.b'"));
  cr_assert_null(strstr(captured(), "'pe.head3'"));
}

Test(weights, pathological_ignore_pattern_is_fast) {
  PDef ps[] = {{"embed.weight", 2, 1, 1}};
  IrGraph *g = graph_of(ps, 1);
  char name[301];
  memset(name, '1', 300);
  name[300] = 0;
  Ck ck = {0};
  ck_add_seq(&ck, "embed.weight", 2, 1, 1, 0);
  ck_add_seq(&ck, name, 1, 1, 0, 0);
  WeightRule r[] = {rule("embed", WX_TENSOR, "embed.weight")};
  const char *ign[] = {"*{i}*{i}*{i}*{i}*{i}*{i}*{i}*{i}*x"};
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(0, false), map_of(r, 1, ign, 1)),
                               ck_open(&ck), &diags);
  cr_assert_null(ws); /* no 'x': not ignored */
  cr_assert_eq(diags.n_errors, 1);
}

/* ---- F16 / BF16 ---- */

Test(weights, f16_and_bf16_are_converted) {
  PDef ps[] = {{"enc.0.norm1.weight", 1, 4, 0}, {"enc.0.norm1.bias", 1, 4, 0}};
  IrGraph *g = graph_of(ps, 2);
  /* F16: 1.0, -2.0, 0.5, 65504 ; BF16: 1.0, -1.5, 0.25, 3.0 */
  unsigned char f16[8] = {0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38, 0xff, 0x7b};
  unsigned char bf16[8] = {0x80, 0x3f, 0xc0, 0xbf, 0x80, 0x3e, 0x40, 0x40};
  RawEntry e[] = {{"ln.0.weight", "F16", 1, 4, 0, f16, 8},
                  {"ln.0.bias", "BF16", 1, 4, 0, bf16, 8}};
  WeightRule r[] = {rule("enc[i].norm1", WX_NORM, "ln.{i}")};
  WeightSet *ws = weights_load(A, g, spec_of(model_encoder(1, false), map_of(r, 1, NULL, 0)),
                               raw_open(e, 2), &diags);
  cr_assert_not_null(ws, "%s", captured());
  float want_w[4] = {1.0f, -2.0f, 0.5f, 65504.0f};
  float want_b[4] = {1.0f, -1.5f, 0.25f, 3.0f};
  assert_floats(get(ws, "enc.0.norm1.weight"), want_w, 4, "f16");
  assert_floats(get(ws, "enc.0.norm1.bias"), want_b, 4, "bf16");
}

/* ---- random init ---- */

Test(weights, random_is_deterministic_and_in_range) {
  IrGraph *g = graph_encoder(2, false);
  WeightSet *a = weights_random(A, g, 42);
  WeightSet *b = weights_random(A, g, 42);
  WeightSet *c = weights_random(A, g, 43);
  cr_assert_not_null(a);
  cr_assert_eq(a->n, b->n);
  int differ = 0;
  for (int i = 0; i < a->n; i++) {
    const Weight *w = &a->items[i];
    cr_assert_str_eq(w->name, b->items[i].name);
    int64_t n = w->type.dims[0].value * (w->type.rank == 2 ? w->type.dims[1].value : 1);
    assert_floats(w->data, b->items[i].data, n, w->name);
    for (int64_t k = 0; k < n; k++) differ += w->data[k] != c->items[i].data[k];
    bool bias = strstr(w->name, ".bias") != NULL, norm = strstr(w->name, "norm") != NULL;
    double lo, hi;
    if (norm && !bias) lo = 0.9, hi = 1.1;
    else if (bias) lo = -0.1, hi = 0.1;
    else if (strcmp(w->name, "embed.weight") == 0) lo = -1, hi = 1;
    else lo = -1.0 / sqrt((double)w->type.dims[1].value), hi = -lo;
    float mn = INFINITY, mx = -INFINITY;
    for (int64_t k = 0; k < n; k++) {
      cr_assert(w->data[k] >= lo - 1e-6 && w->data[k] <= hi + 1e-6, "%s[%lld]=%g",
                w->name, (long long)k, (double)w->data[k]);
      mn = fminf(mn, w->data[k]);
      mx = fmaxf(mx, w->data[k]);
    }
    if (n >= 64) /* spread over the range, not constant */
      cr_assert(mx - mn > (hi - lo) * 0.5, "%s spans [%g,%g]", w->name, (double)mn,
                (double)mx);
  }
  cr_assert_gt(differ, 500);
}

Test(weights, random_values_are_pinned) {
  /* A different platform or a refactor must give exactly these. */
  PDef ps[] = {{"embed.weight", 2, 1, 3}};
  IrGraph *g = graph_of(ps, 1);
  WeightSet *ws = weights_random(A, g, 1);
  const float *d = get(ws, "embed.weight");
  WeightSet *again = weights_random(A, graph_of(ps, 1), 1);
  assert_floats(get(again, "embed.weight"), d, 3, "again");
  /* values depend on the name, not on the param's position in the graph */
  PDef ps2[] = {{"pos.weight", 2, 4, 4}, {"embed.weight", 2, 1, 3}};
  WeightSet *other = weights_random(A, graph_of(ps2, 2), 1);
  assert_floats(get(other, "embed.weight"), d, 3, "order-independent");
  cr_assert_eq(d[0], -0.962714911f, "%.9g", (double)d[0]);
  cr_assert_eq(d[1], -0.127529025f, "%.9g", (double)d[1]);
  cr_assert_eq(d[2], 0.0611982346f, "%.9g", (double)d[2]);
}
