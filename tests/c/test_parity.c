/* tests/c/test_parity.c — every op of the op table through the emitted C
 * against the reference interpreter: graph -> pass_lower_loops -> C
 * project -> compiled with a driver (c_test_util.h) -> run on random
 * inputs with symbolic dims bound below their maxima -> outputs within
 * 1e-5 + 1e-4 |ref| of interp_run's (ints exact, masks as booleans).
 *
 * One test per toolchain: gcc and clang, each with BLAS (OpenBLAS when the
 * machine has it) and with NO_BLAS (the portable GEMM), the generated
 * sources at -std=c99 -pedantic -Werror; then aarch64 and s390x
 * (big-endian) cross builds run under qemu-user, whose outputs must also
 * match the host's. The case table is generated from ops.def: an op
 * without a case function does not compile. Linked with tfmc_interp. */
#include "backends/interp/interp.h"
#include "c_test_util.h"
#include "ir/loop.h"
#include "passes/passes.h"

enum { B = 2, S = 3, MAX_B = 3, MAX_S = 4 };

typedef struct Case {
  Arena *a;
  IrGraph *g;
  int sym_b, sym_s;
  Tensor in[6];
  int64_t vocab[6];
  int n_in;
  Weight w[8];
  int n_w;
  uint64_t rng;
} Case;

static const IrLoc LOC = {"parity.tfm", 2, 5};

static float frand(Case *c) {
  c->rng = c->rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((c->rng >> 40) & 0xFFFFFF) / (float)0x1000000 * 2.0f - 1.0f;
}

static IrType t_bsd(Case *c, IrDtype dt, int64_t d) {
  return ir_type(dt, 3, (IrDim[]){IR_SYM(c->sym_b), IR_SYM(c->sym_s), IR_CONST(d)});
}

/* an input with concrete dims (B, S) and random data; ids < id_bound */
static int input(Case *c, const char *name, IrType t, int64_t id_bound) {
  Tensor *x = &c->in[c->n_in];
  c->vocab[c->n_in++] = id_bound;
  x->name = name;
  x->dtype = t.dtype;
  x->rank = t.rank;
  int64_t n = 1;
  for (int i = 0; i < t.rank; i++) {
    IrDim d = t.dims[i];
    x->dims[i] = d.sym < 0 ? d.value : d.sym == c->sym_b ? B : S;
    n *= x->dims[i];
  }
  x->data = arena_alloc(c->a, (size_t)n * 4 + 4);
  for (int64_t i = 0; i < n; i++) {
    if (t.dtype == IR_F32) ((float *)x->data)[i] = frand(c) * 2;
    else if (t.dtype == IR_I32) ((int32_t *)x->data)[i] = (int32_t)((frand(c) + 1) * 0.5f * (float)id_bound) % (int32_t)id_bound;
    else ((uint8_t *)x->data)[i] = (uint8_t)(i % 3 != 1); /* every row keeps a real token */
  }
  return ir_build_input(c->g, name, t, LOC);
}

static int param(Case *c, const char *name, IrType t, float offset) {
  Weight *w = &c->w[c->n_w++];
  w->name = name;
  w->type = t;
  int64_t n = 1;
  for (int i = 0; i < t.rank; i++) n *= t.dims[i].value;
  w->data = arena_alloc(c->a, (size_t)n * 4);
  for (int64_t i = 0; i < n; i++) w->data[i] = offset + frand(c);
  return ir_build_param(c->g, name, t, LOC);
}

static IrAttrs attrs(void) {
  IrAttrs a;
  memset(&a, 0, sizeof a);
  return a;
}

static int x_in(Case *c, int64_t d) { return input(c, "x", t_bsd(c, IR_F32, d), 0); }
static void out(Case *c, const char *name, int v) { ir_graph_add_output(c->g, name, v); }

static int unary(Case *c, IrOp op) {
  IrAttrs at = attrs();
  at.factor = -1.3;
  return ir_build(c->g, op, (int[]){x_in(c, 6)}, 1, &at, LOC);
}

static int binary(Case *c, IrOp op) {
  int x = x_in(c, 5);
  int y = param(c, "y", ir_type(IR_F32, 2, (IrDim[]){IR_CONST(1), IR_CONST(5)}), op == IR_OP_DIV ? 3.0f : 0.0f);
  return ir_build(c->g, op, (int[]){x, y}, 2, NULL, LOC);
}

static int key_mask(Case *c) {
  int m = input(c, "mask", ir_type(IR_BOOL, 2, (IrDim[]){IR_SYM(c->sym_b), IR_SYM(c->sym_s)}), 0);
  return ir_build_typed(c->g, IR_OP_RESHAPE, (int[]){m}, 1, NULL,
                        ir_type(IR_BOOL, 3, (IrDim[]){IR_SYM(c->sym_b), IR_CONST(1), IR_SYM(c->sym_s)}), LOC);
}

static int causal(Case *c) {
  return ir_build_typed(c->g, IR_OP_MASK_CAUSAL, NULL, 0, NULL,
                        ir_type(IR_BOOL, 3, (IrDim[]){IR_CONST(1), IR_SYM(c->sym_s), IR_SYM(c->sym_s)}), LOC);
}

static int arange(Case *c) {
  return ir_build_typed(c->g, IR_OP_ARANGE, NULL, 0, NULL, ir_type(IR_I32, 1, (IrDim[]){IR_SYM(c->sym_s)}), LOC);
}

static int qkv(Case *c, int *k, int *v) {
  int q = input(c, "q", t_bsd(c, IR_F32, 8), 0);
  *k = input(c, "k", t_bsd(c, IR_F32, 8), 0);
  *v = input(c, "v", t_bsd(c, IR_F32, 8), 0);
  return q;
}

/* ---- one case per op ---- */

static void case_INPUT(Case *c) { out(c, "y", x_in(c, 3)); }
static void case_PARAM(Case *c) { out(c, "y", param(c, "w", ir_type2(IR_F32, 3, 4), 0)); }
static void case_CONST(Case *c) {
  IrAttrs at = attrs();
  at.value = -0.1;
  int k = ir_build(c->g, IR_OP_CONST, NULL, 0, &at, LOC);
  out(c, "y", ir_build(c->g, IR_OP_ADD, (int[]){x_in(c, 3), k}, 2, NULL, LOC));
}
static void case_ARANGE(Case *c) {
  x_in(c, 1); /* binds S */
  out(c, "y", arange(c));
}
static void case_SINUSOID(Case *c) {
  x_in(c, 1);
  out(c, "y", ir_build_typed(c->g, IR_OP_SINUSOID, (int[]){arange(c)}, 1, NULL,
                             ir_type(IR_F32, 2, (IrDim[]){IR_SYM(c->sym_s), IR_CONST(10)}), LOC));
}
static void case_EMBED(Case *c) {
  int table = param(c, "table", ir_type2(IR_F32, 11, 4), 0);
  int ids = input(c, "ids", ir_type(IR_I32, 2, (IrDim[]){IR_SYM(c->sym_b), IR_SYM(c->sym_s)}), 11);
  out(c, "y", ir_build(c->g, IR_OP_EMBED, (int[]){table, ids}, 2, NULL, LOC));
  out(c, "pos", ir_build(c->g, IR_OP_EMBED, (int[]){table, arange(c)}, 2, NULL, LOC));
}
static void case_ADD(Case *c) { out(c, "y", binary(c, IR_OP_ADD)); }
static void case_SUB(Case *c) { out(c, "y", binary(c, IR_OP_SUB)); }
static void case_MUL(Case *c) { out(c, "y", binary(c, IR_OP_MUL)); }
static void case_DIV(Case *c) { out(c, "y", binary(c, IR_OP_DIV)); }
static void case_AND(Case *c) {
  out(c, "y", ir_build(c->g, IR_OP_AND, (int[]){causal(c), key_mask(c)}, 2, NULL, LOC));
}
static void case_SCALE(Case *c) { out(c, "y", unary(c, IR_OP_SCALE)); }
static void case_RELU(Case *c) { out(c, "y", unary(c, IR_OP_RELU)); }
static void case_GELU(Case *c) { out(c, "y", unary(c, IR_OP_GELU)); }
static void case_GELU_TANH(Case *c) { out(c, "y", unary(c, IR_OP_GELU_TANH)); }
static void case_TANH(Case *c) { out(c, "y", unary(c, IR_OP_TANH)); }
static void case_LAYERNORM(Case *c) {
  int x = x_in(c, 7);
  int g = param(c, "g", ir_type1(IR_F32, 7), 1), b = param(c, "b", ir_type1(IR_F32, 7), 0);
  IrAttrs at = attrs();
  at.eps = 1e-5;
  out(c, "y", ir_build(c->g, IR_OP_LAYERNORM, (int[]){x, g, b}, 3, &at, LOC));
  at.eps = 1e-6;
  at.unbiased = true;
  out(c, "z", ir_build(c->g, IR_OP_LAYERNORM, (int[]){x, g, b}, 3, &at, LOC));
}
static void case_LINEAR(Case *c) {
  int x = x_in(c, 9);
  int w = param(c, "w", ir_type2(IR_F32, 13, 9), 0), b = param(c, "b", ir_type1(IR_F32, 13), 0);
  out(c, "y", ir_build(c->g, IR_OP_LINEAR, (int[]){x, w, b}, 3, NULL, LOC));
  out(c, "z", ir_build(c->g, IR_OP_LINEAR, (int[]){x, w}, 2, NULL, LOC));
}
static void case_SOFTMAX(Case *c) {
  out(c, "y", ir_build(c->g, IR_OP_SOFTMAX, (int[]){x_in(c, 9)}, 1, NULL, LOC));
}
static void case_LOG_SOFTMAX(Case *c) {
  out(c, "y", ir_build(c->g, IR_OP_LOG_SOFTMAX, (int[]){x_in(c, 9)}, 1, NULL, LOC));
}
static void case_MASK_CAUSAL(Case *c) {
  x_in(c, 1);
  out(c, "y", causal(c));
}
static void case_RESHAPE(Case *c) {
  out(c, "y", key_mask(c)); /* a reshape that is an output: copied */
  int x = x_in(c, 4);
  int r = ir_build_typed(c->g, IR_OP_RESHAPE, (int[]){x}, 1, NULL,
                         ir_type(IR_F32, 4, (IrDim[]){IR_SYM(c->sym_b), IR_SYM(c->sym_s), IR_CONST(2), IR_CONST(2)}), LOC);
  out(c, "z", ir_build(c->g, IR_OP_RELU, (int[]){r}, 1, NULL, LOC)); /* an aliasing reshape */
}
static void case_TAKE(Case *c) {
  int x = x_in(c, 5);
  IrAttrs at = attrs();
  at.axis = 1;
  at.index = 0;
  out(c, "y", ir_build(c->g, IR_OP_TAKE, (int[]){x}, 1, &at, LOC));
  at.axis = 2;
  at.index = 3;
  out(c, "z", ir_build(c->g, IR_OP_TAKE, (int[]){x}, 1, &at, LOC));
}
static void case_ATTENTION(Case *c) {
  int k, v, q = qkv(c, &k, &v);
  IrAttrs at = attrs();
  at.heads = 2;
  at.scale = 0.5;
  int km = key_mask(c);
  out(c, "y", ir_build(c->g, IR_OP_ATTENTION, (int[]){q, k, v, km}, 4, &at, LOC));
  int both = ir_build(c->g, IR_OP_AND, (int[]){causal(c), km}, 2, NULL, LOC);
  out(c, "z", ir_build(c->g, IR_OP_ATTENTION, (int[]){q, k, v, both}, 4, &at, LOC));
  out(c, "u", ir_build(c->g, IR_OP_ATTENTION, (int[]){q, k, v}, 3, &at, LOC));
}
static void case_ATTN_PROBS(Case *c) {
  int k, v, q = qkv(c, &k, &v);
  (void)v;
  IrAttrs at = attrs();
  at.heads = 4;
  at.scale = 0.7;
  out(c, "y", ir_build(c->g, IR_OP_ATTN_PROBS, (int[]){q, k, causal(c)}, 3, &at, LOC));
}
static void case_ATTN_MIX(Case *c) {
  int k, v, q = qkv(c, &k, &v);
  IrAttrs at = attrs();
  at.heads = 2;
  at.scale = 0.3;
  int p = ir_build(c->g, IR_OP_ATTN_PROBS, (int[]){q, k, key_mask(c)}, 3, &at, LOC);
  out(c, "y", ir_build(c->g, IR_OP_ATTN_MIX, (int[]){p, v}, 2, &at, LOC));
}

static void (*const cases[IR_OP_COUNT])(Case *) = {
#define IR_OP(e, name, mn, mx, at, kind) [IR_OP_##e] = case_##e,
#include "ir/ops.def"
#undef IR_OP
};

/* ---- running one op ---- */

typedef struct Built {
  Case c;
  LoopProgram *p;
  RtModelInfo *info;
  float *packed;
  Tensor *ref;
  int n_ref;
} Built;

static void build_op(int op, Built *b) {
  Case *c = &b->c;
  memset(c, 0, sizeof *c);
  c->a = arena_create();
  c->rng = 777 + (uint64_t)op;
  c->g = ir_graph_create(c->a, ir_op_info[op].name);
  c->sym_b = ir_graph_add_symbol(c->g, "B", MAX_B);
  c->sym_s = ir_graph_add_symbol(c->g, "S", MAX_S);
  cases[op](c);
  bool used = false;
  for (int i = 0; i < c->g->n_nodes; i++) used |= (int)c->g->nodes[i].op == op;
  cr_assert(used, "the case for %s does not use it", ir_op_info[op].name);
  Diags d;
  diags_init(&d, c->a, NULL);
  cr_assert(ir_graph_verify(c->g, &d), "%s", d.captured);
  WeightSet ws = {c->w, c->n_w};
  char err[1024];
  cr_assert_eq(interp_run(c->g, &ws, c->in, c->n_in, c->a, &b->ref, &b->n_ref, err, sizeof err), 0,
               "%s: %s", ir_op_info[op].name, err);
  b->p = pass_lower_loops(c->a, c->g);
  b->info = pass_model_info(c->a, c->g, b->p, c->vocab, -1);
  b->packed = arena_alloc(c->a, (size_t)b->info->weights_floats * 4 + 4);
  for (int i = 0; i < b->info->n_weights; i++) {
    const RtWeightInfo *wi = &b->info->weights[i];
    const Weight *w = weights_find(&ws, wi->name);
    cr_assert(w);
    int64_t n = 1;
    for (int r = 0; r < wi->rank; r++) n *= wi->shape[r];
    memcpy(b->packed + wi->offset, w->data, (size_t)n * 4);
  }
}

/* Emits op's project into dir/NAME, writes its inputs to dir/NAME/in.safetensors. */
static void emit_op(const Built *b, const char *proj) {
  char err[1024], path[1024];
  CEmitOptions opt = {false, CT_RUNTIME_DIR};
  cr_assert_eq(c_emit_project(b->p, b->info, b->packed, &opt, proj, err, sizeof err), 0, "%s", err);
  RtStWrite w[6];
  for (int i = 0; i < b->c.n_in; i++) {
    const Tensor *t = &b->c.in[i];
    w[i].name = t->name;
    w[i].dtype = t->dtype == IR_F32 ? RT_F32 : t->dtype == IR_I32 ? RT_I32 : RT_U8;
    w[i].rank = t->rank;
    for (int d = 0; d < t->rank; d++) w[i].shape[d] = t->dims[d];
    w[i].data = t->data;
  }
  snprintf(path, sizeof path, "%.900s/in.safetensors", proj);
  cr_assert_eq(rt_st_write(path, w, b->c.n_in, NULL, 0, err, sizeof err), 0, "%s", err);
}

/* Largest |a - b| over outputs; fails beyond tolerance. */
static double compare(const char *op, const char *what, const Tensor *ref, int n_ref,
                      const char *out_path, float **host) {
  double maxd = 0;
  for (int o = 0; o < n_ref; o++) {
    int64_t n;
    float *got = ct_read_output(out_path, ref[o].name, &n);
    cr_assert_eq(n, tensor_numel(&ref[o]), "%s %s: %s has %lld elements", op, what, ref[o].name,
                 (long long)n);
    for (int64_t i = 0; i < n; i++) {
      float r = ref[o].dtype == IR_F32   ? ((float *)ref[o].data)[i]
                : ref[o].dtype == IR_I32 ? (float)((int32_t *)ref[o].data)[i]
                                         : (float)(((uint8_t *)ref[o].data)[i] != 0);
      float g = ref[o].dtype == IR_BOOL ? (float)(got[i] != 0) : got[i];
      if (ref[o].dtype != IR_F32) {
        cr_assert_eq(g, r, "%s %s: %s[%lld] = %g, interp %g", op, what, ref[o].name, (long long)i, g, r);
      } else {
        double d = fabs((double)g - r);
        if (d > maxd) maxd = d;
        cr_assert(d <= 1e-5 + 1e-4 * fabs(r), "%s %s: %s[%lld] = %.9g, interp %.9g", op, what,
                  ref[o].name, (long long)i, g, r);
      }
      if (host) {
        float h = host[o][i];
        cr_assert(fabsf(g - h) <= 1e-5f + 1e-5f * fabsf(h), "%s %s: %s[%lld] = %.9g, host %.9g", op,
                  what, ref[o].name, (long long)i, g, h);
      }
    }
    free(got);
  }
  return maxd;
}

static void build_and_run(const CtTool *t, const char *proj, const char *libdir, int threads) {
  ct_build_driver(t, proj, libdir);
  CT_RUN("cd %s && %s ./driver *.weights in.safetensors out-%s.safetensors %d", proj, t->run, t->name,
         threads);
}

/* All ops through toolchain t; with host (a native no-BLAS gcc), cross
 * outputs are also compared with the host's. */
static void parity(const CtTool *t, const CtTool *host) {
  if (!ct_have(t->cc)) cr_skip_test("%s is not installed", t->cc);
  char *tmp = ct_mkdtemp("parity");
  char libdir[600], hostlib[600];
  snprintf(libdir, sizeof libdir, "%s/lib-%s", tmp, t->name);
  snprintf(hostlib, sizeof hostlib, "%s/lib-host", tmp);
  mkdir(libdir, 0755);
  mkdir(hostlib, 0755);
  double worst = 0, worst_host = 0;
  for (int op = 0; op < IR_OP_COUNT; op++) {
    Built b;
    build_op(op, &b);
    char proj[700], what[160], out[800];
    snprintf(proj, sizeof proj, "%s/%s", tmp, ir_op_info[op].name);
    for (char *ch = strrchr(proj, '/'); *ch; ch++)
      if (*ch == '.') *ch = '_';
    emit_op(&b, proj);
    if (op == 0) {
      ct_build_runtime(t, proj, libdir);
      if (host) ct_build_runtime(host, proj, hostlib);
    }
    float *host_out[8] = {0};
    if (host) {
      build_and_run(host, proj, hostlib, 2);
      snprintf(out, sizeof out, "%s/out-%s.safetensors", proj, host->name);
      for (int o = 0; o < b.n_ref; o++) {
        int64_t n;
        host_out[o] = ct_read_output(out, b.ref[o].name, &n);
      }
    }
    build_and_run(t, proj, libdir, op % 2 ? 3 : 1);
    snprintf(out, sizeof out, "%s/out-%s.safetensors", proj, t->name);
    snprintf(what, sizeof what, "(%s%s)", t->name, t->no_blas ? ", no BLAS" : "");
    double d = compare(ir_op_info[op].name, what, b.ref, b.n_ref, out, host ? host_out : NULL);
    if (d > worst) worst = d;
    if (host) {
      for (int o = 0; o < b.n_ref; o++) {
        int64_t n;
        float *g = ct_read_output(out, b.ref[o].name, &n);
        for (int64_t i = 0; i < n; i++)
          if (fabsf(g[i] - host_out[o][i]) > worst_host) worst_host = fabsf(g[i] - host_out[o][i]);
        free(g);
        free(host_out[o]);
      }
    }
    arena_destroy(b.c.a);
  }
  fprintf(stderr, "parity %-8s%s: %d ops, max |diff| vs interp %.3g", t->name,
          t->no_blas ? " no BLAS" : "", IR_OP_COUNT, worst);
  if (host) fprintf(stderr, ", vs host %.3g", worst_host);
  fputc('\n', stderr);
  ct_rmdir(tmp);
}

Test(parity, gcc_blas, .timeout = 600) {
  CtTool t = {"gcc", "gcc", "ar", "", false};
  parity(&t, NULL);
}
Test(parity, gcc_no_blas, .timeout = 600) {
  CtTool t = {"gcc", "gcc", "ar", "", true};
  parity(&t, NULL);
}
Test(parity, clang_blas, .timeout = 600) {
  if (!ct_have("clang")) cr_skip_test("clang is not installed (Debian package clang)");
  CtTool t = {"clang", "clang", "ar", "", false};
  parity(&t, NULL);
}
Test(parity, clang_no_blas, .timeout = 600) {
  if (!ct_have("clang")) cr_skip_test("clang is not installed (Debian package clang)");
  CtTool t = {"clang", "clang", "ar", "", true};
  parity(&t, NULL);
}

static const CtTool host_gcc = {"host", "gcc", "ar", "", true};

Test(parity, aarch64_qemu, .timeout = 900) {
  if (!ct_have("aarch64-linux-gnu-gcc") || !ct_have("qemu-aarch64"))
    cr_skip_test("no aarch64 cross toolchain (Debian: gcc-aarch64-linux-gnu, qemu-user)");
  CtTool t = {"aarch64", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-ar",
              "qemu-aarch64 -L /usr/aarch64-linux-gnu", true};
  parity(&t, &host_gcc);
}
Test(parity, s390x_big_endian_qemu, .timeout = 900) {
  if (!ct_have("s390x-linux-gnu-gcc") || !ct_have("qemu-s390x"))
    cr_skip_test("no s390x cross toolchain (Debian: gcc-s390x-linux-gnu, qemu-user)");
  CtTool t = {"s390x", "s390x-linux-gnu-gcc", "s390x-linux-gnu-ar",
              "qemu-s390x -L /usr/s390x-linux-gnu", true};
  parity(&t, &host_gcc);
}
