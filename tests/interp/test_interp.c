/* tests/interp/test_interp.c — the reference interpreter: one test per op
 * of ir/ops.def (a table built from ops.def itself, so an op added without a
 * test here fails to compile), plus binding errors, run-time data errors,
 * attention against hand-written references, and a small full model.
 *
 * Expected values are literals computed independently (Python's math module)
 * or straightforward formulas written out in the test. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "backends/interp/interp.h"

/* ---- fixture: one graph, its weights and its inputs per test ---- */

static const IrLoc LOC = {"t.tfm", 7, 3};
static Arena *A;
static IrGraph *G;
static Weight W[96];
static WeightSet WS;
static Tensor IN[8];
static int N_IN;
static Tensor *OUT;
static int N_OUT;
static char ERR[512];

static void fx_begin(void) {
  A = arena_create();
  G = ir_graph_create(A, "t");
  WS.items = W;
  WS.n = 0;
  N_IN = 0;
  OUT = NULL;
  N_OUT = 0;
  ERR[0] = 0;
}

static void fx_end(void) { arena_destroy(A); }

static IrType ty(IrDtype dt, int rank, const IrDim *dims) {
  return ir_type(dt, rank, dims);
}
#define TY(dt, ...)                                                           \
  ty(dt, (int)(sizeof((IrDim[]){__VA_ARGS__}) / sizeof(IrDim)),               \
     (IrDim[]){__VA_ARGS__})
#define C(v) IR_CONST(v)
#define S(s) IR_SYM(s)

static int64_t type_numel(IrType t) {
  int64_t n = 1;
  for (int i = 0; i < t.rank; i++) n *= t.dims[i].value;
  return n;
}

/* A param with its weight (data copied). */
static int param(const char *name, IrType t, const float *data) {
  cr_assert(WS.n < (int)(sizeof W / sizeof W[0]));
  Weight *w = &W[WS.n++];
  w->name = name;
  w->type = t;
  size_t n = (size_t)type_numel(t);
  w->data = arena_alloc(A, n * sizeof(float) + 1);
  if (data) memcpy(w->data, data, n * sizeof(float));
  return ir_build_param(G, name, t, LOC);
}

static int input(const char *name, IrType t) {
  return ir_build_input(G, name, t, LOC);
}

static int op1(IrOp op, int a, const IrAttrs *at) {
  return ir_build(G, op, (int[]){a}, 1, at, LOC);
}
static int op2(IrOp op, int a, int b, const IrAttrs *at) {
  return ir_build(G, op, (int[]){a, b}, 2, at, LOC);
}
static int op3(IrOp op, int a, int b, int c, const IrAttrs *at) {
  return ir_build(G, op, (int[]){a, b, c}, 3, at, LOC);
}

static void feed(const char *name, IrDtype dt, int rank, const int64_t *dims,
                 const void *data) {
  cr_assert(N_IN < 8);
  Tensor *t = &IN[N_IN++];
  memset(t, 0, sizeof *t);
  t->name = name;
  t->dtype = dt;
  t->rank = rank;
  for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
  t->data = (void *)data;
}

static void run_ok(void) {
  int rc = interp_run(G, &WS, IN, N_IN, A, &OUT, &N_OUT, ERR, sizeof ERR);
  cr_assert_eq(rc, 0, "interp_run failed: %s", ERR);
  cr_assert_eq(N_OUT, G->n_outputs);
}

static const char *run_fails(void) {
  int rc = interp_run(G, &WS, IN, N_IN, A, &OUT, &N_OUT, ERR, sizeof ERR);
  cr_assert_neq(rc, 0, "interp_run should have failed");
  cr_assert(ERR[0] != 0, "no error message");
  return ERR;
}

static void expect_err(const char *want) {
  const char *got = run_fails();
  cr_assert(strstr(got, want) != NULL, "error message\n  %s\nshould contain\n  %s",
            got, want);
}

static const Tensor *out_named(const char *name) {
  for (int i = 0; i < N_OUT; i++)
    if (strcmp(OUT[i].name, name) == 0) return &OUT[i];
  cr_assert_fail("no output '%s'", name);
  return NULL;
}

static void expect_dims(const Tensor *t, int rank, const int64_t *dims) {
  cr_assert_eq(t->rank, rank, "'%s': rank %d, expected %d", t->name, t->rank, rank);
  for (int i = 0; i < rank; i++)
    cr_assert_eq(t->dims[i], dims[i], "'%s' dim %d: %lld, expected %lld", t->name,
                 i, (long long)t->dims[i], (long long)dims[i]);
}
#define DIMS(...) (int64_t[]){__VA_ARGS__}
#define EXPECT_DIMS(t, ...)                                                   \
  expect_dims(t, (int)(sizeof(DIMS(__VA_ARGS__)) / sizeof(int64_t)),          \
              DIMS(__VA_ARGS__))

static void expect_f32(const Tensor *t, const double *want, int64_t n, double tol) {
  cr_assert_eq(t->dtype, IR_F32);
  cr_assert_eq(tensor_numel(t), n, "'%s': %lld elements, expected %lld", t->name,
               (long long)tensor_numel(t), (long long)n);
  const float *y = t->data;
  for (int64_t i = 0; i < n; i++)
    cr_assert(fabs(y[i] - want[i]) <= tol, "'%s'[%lld] = %.9g, expected %.9g",
              t->name, (long long)i, y[i], want[i]);
}

/* deterministic values in [-1, 1) */
static uint32_t rng_state = 12345;
static float rnd(void) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return (float)((rng_state >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
}
static void fill(float *x, int64_t n, float amp) {
  for (int64_t i = 0; i < n; i++) x[i] = rnd() * amp;
}

/* ---- reference attention written out plainly (one head at a time) ----
 * q [B,Tq,D], k/v [B,Tk,D], visible(b,i,j): whether key j is seen by query i.
 * Masked keys are left out of the softmax altogether (what -1e9 achieves). */
typedef bool (*Visible)(int b, int i, int j);

static void ref_attention(const float *q, const float *k, const float *v, int B,
                          int Tq, int Tk, int D, int H, Visible vis, double *p,
                          double *out) {
  int dh = D / H;
  double scale = 1.0 / sqrt((double)dh);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int i = 0; i < Tq; i++) {
        double s[64], mx = -1e300, sum = 0;
        for (int j = 0; j < Tk; j++) {
          double dot = 0;
          for (int d = 0; d < dh; d++)
            dot += q[(b * Tq + i) * D + h * dh + d] * k[(b * Tk + j) * D + h * dh + d];
          s[j] = dot * scale;
          if (vis(b, i, j) && s[j] > mx) mx = s[j];
        }
        for (int j = 0; j < Tk; j++) sum += vis(b, i, j) ? exp(s[j] - mx) : 0;
        for (int j = 0; j < Tk; j++) {
          double pj = vis(b, i, j) ? exp(s[j] - mx) / sum : 0;
          if (p) p[((b * H + h) * Tq + i) * Tk + j] = pj;
        }
        for (int e = 0; e < dh; e++) {
          double acc = 0;
          for (int j = 0; j < Tk; j++)
            if (vis(b, i, j))
              acc += exp(s[j] - mx) / sum * v[(b * Tk + j) * D + h * dh + e];
          if (out) out[(b * Tq + i) * D + h * dh + e] = acc;
        }
      }
}

/* ==== one test per op (op_test_<ENUM>) ==== */

#define IR_OP(e, ...) static void op_test_##e(void);
#include "ir/ops.def"
#undef IR_OP

/* Every op of ops.def must have a row: a missing op_test_X is a build error. */
static void (*const op_tests[IR_OP_COUNT])(void) = {
#define IR_OP(e, ...) [IR_OP_##e] = op_test_##e,
#include "ir/ops.def"
#undef IR_OP
};

static void op_test_INPUT(void) {
  int B = ir_graph_add_symbol(G, "B", 4);
  int x = input("x", TY(IR_F32, S(B), C(3)));
  ir_graph_add_output(G, "x_out", x);
  float data[6] = {1, 2, 3, 4, 5, 6};
  feed("x", IR_F32, 2, DIMS(2, 3), data);
  run_ok();
  const Tensor *o = out_named("x_out");
  EXPECT_DIMS(o, 2, 3);
  expect_f32(o, (double[]){1, 2, 3, 4, 5, 6}, 6, 0);
  cr_assert(o->data != (void *)data, "an output must live in the arena");
}

static void op_test_PARAM(void) {
  int w = param("fc.weight", ir_type2(IR_F32, 2, 3), (float[]){1, -2, 3, -4, 5, -6});
  ir_graph_add_output(G, "w", w);
  run_ok();
  const Tensor *o = out_named("w");
  EXPECT_DIMS(o, 2, 3);
  expect_f32(o, (double[]){1, -2, 3, -4, 5, -6}, 6, 0);
  cr_assert(o->data != (void *)W[0].data, "an output must live in the arena");
}

static void op_test_CONST(void) {
  int c = ir_build(G, IR_OP_CONST, NULL, 0, &(IrAttrs){.value = 2.5}, LOC);
  ir_graph_add_output(G, "c", c);
  run_ok();
  const Tensor *o = out_named("c");
  cr_assert_eq(o->rank, 0);
  cr_assert_eq(tensor_numel(o), 1);
  expect_f32(o, (double[]){2.5}, 1, 0);
}

static void op_test_ARANGE(void) {
  int Sy = ir_graph_add_symbol(G, "S", 10);
  input("x", TY(IR_F32, S(Sy)));
  int r = ir_build_typed(G, IR_OP_ARANGE, NULL, 0, NULL, TY(IR_I32, S(Sy)), LOC);
  ir_graph_add_output(G, "r", r);
  feed("x", IR_F32, 1, DIMS(4), (float[]){0, 0, 0, 0});
  run_ok();
  const Tensor *o = out_named("r");
  cr_assert_eq(o->dtype, IR_I32);
  EXPECT_DIMS(o, 4);
  const int32_t *y = o->data;
  for (int i = 0; i < 4; i++) cr_assert_eq(y[i], i);
}

static void op_test_SINUSOID(void) {
  int pos = ir_build_typed(G, IR_OP_ARANGE, NULL, 0, NULL, TY(IR_I32, C(5)), LOC);
  int pe = ir_build_typed(G, IR_OP_SINUSOID, (int[]){pos}, 1, NULL,
                          TY(IR_F32, C(5), C(8)), LOC);
  ir_graph_add_output(G, "pe", pe);
  run_ok();
  const Tensor *o = out_named("pe");
  EXPECT_DIMS(o, 5, 8);
  const float *y = o->data;
  /* PE[3,2i] = sin(3 / 10000^(2i/8)), PE[3,2i+1] = cos(...), i = 0..3 */
  static const double row3[8] = {0.141120008, -0.989992497, 0.295520207,
                                 0.955336489, 0.029995500, 0.999550034,
                                 0.002999996, 0.999995500};
  for (int c = 0; c < 8; c++)
    cr_assert(fabs(y[3 * 8 + c] - row3[c]) < 1e-6, "PE[3,%d] = %.9f, expected %.9f",
              c, y[3 * 8 + c], row3[c]);
  for (int c = 0; c < 8; c++) /* position 0: sin 0 = 0, cos 0 = 1 */
    cr_assert_eq(y[c], c % 2 ? 1.0f : 0.0f);
}

static void op_test_EMBED(void) {
  float tab[12];
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 3; c++) tab[r * 3 + c] = (float)(r * 10 + c);
  int B = ir_graph_add_symbol(G, "B", 4), Sy = ir_graph_add_symbol(G, "S", 8);
  int t = param("embed.weight", ir_type2(IR_F32, 4, 3), tab);
  int ids = input("tokens", TY(IR_I32, S(B), S(Sy)));
  ir_graph_add_output(G, "e", op2(IR_OP_EMBED, t, ids, NULL));
  feed("tokens", IR_I32, 2, DIMS(2, 2), (int32_t[]){3, 0, 1, 3});
  run_ok();
  const Tensor *o = out_named("e");
  EXPECT_DIMS(o, 2, 2, 3);
  expect_f32(o, (double[]){30, 31, 32, 0, 1, 2, 10, 11, 12, 30, 31, 32}, 12, 0);
}

static void op_test_ADD(void) {
  /* [2,3,4] + [3,4] */
  float a[24], b[12];
  for (int i = 0; i < 24; i++) a[i] = (float)i;
  for (int i = 0; i < 12; i++) b[i] = (float)(100 * i);
  int pa = param("a", TY(IR_F32, C(2), C(3), C(4)), a);
  int pb = param("b", ir_type2(IR_F32, 3, 4), b);
  ir_graph_add_output(G, "y", op2(IR_OP_ADD, pa, pb, NULL));
  run_ok();
  double want[24];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++)
        want[(i * 3 + j) * 4 + k] = a[(i * 3 + j) * 4 + k] + b[j * 4 + k];
  const Tensor *o = out_named("y");
  EXPECT_DIMS(o, 2, 3, 4);
  expect_f32(o, want, 24, 0);
}

static void op_test_SUB(void) {
  /* [2,1,3] - [1,4,1] -> [2,4,3]: both sides stretch */
  float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {10, 20, 30, 40};
  int pa = param("a", TY(IR_F32, C(2), C(1), C(3)), a);
  int pb = param("b", TY(IR_F32, C(1), C(4), C(1)), b);
  ir_graph_add_output(G, "y", op2(IR_OP_SUB, pa, pb, NULL));
  run_ok();
  double want[24];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 3; k++) want[(i * 4 + j) * 3 + k] = a[i * 3 + k] - b[j];
  const Tensor *o = out_named("y");
  EXPECT_DIMS(o, 2, 4, 3);
  expect_f32(o, want, 24, 0);
}

static void op_test_MUL(void) {
  /* [2,3] * scalar */
  int pa = param("a", ir_type2(IR_F32, 2, 3), (float[]){1, -2, 3, 4, 0, -6});
  int c = ir_build(G, IR_OP_CONST, NULL, 0, &(IrAttrs){.value = 0.5}, LOC);
  ir_graph_add_output(G, "y", op2(IR_OP_MUL, pa, c, NULL));
  ir_graph_add_output(G, "z", op2(IR_OP_MUL, c, pa, NULL));
  run_ok();
  expect_f32(out_named("y"), (double[]){0.5, -1, 1.5, 2, 0, -3}, 6, 0);
  expect_f32(out_named("z"), (double[]){0.5, -1, 1.5, 2, 0, -3}, 6, 0);
}

static void op_test_DIV(void) {
  /* [2,3] / [2,1] */
  int pa = param("a", ir_type2(IR_F32, 2, 3), (float[]){2, 4, 6, 9, 12, 15});
  int pb = param("b", ir_type2(IR_F32, 2, 1), (float[]){2, 3});
  ir_graph_add_output(G, "y", op2(IR_OP_DIV, pa, pb, NULL));
  run_ok();
  expect_f32(out_named("y"), (double[]){1, 2, 3, 3, 4, 5}, 6, 0);
}

static void op_test_AND(void) {
  /* padding [B,1,T] & causal [1,T,T] -> [B,T,T] */
  int B = ir_graph_add_symbol(G, "B", 4), T = ir_graph_add_symbol(G, "T", 8);
  int pad = input("mask", TY(IR_BOOL, S(B), S(T)));
  int pad3 = ir_build_typed(G, IR_OP_RESHAPE, (int[]){pad}, 1, NULL,
                            TY(IR_BOOL, S(B), C(1), S(T)), LOC);
  int causal = ir_build_typed(G, IR_OP_MASK_CAUSAL, NULL, 0, NULL,
                              TY(IR_BOOL, C(1), S(T), S(T)), LOC);
  ir_graph_add_output(G, "m", op2(IR_OP_AND, pad3, causal, NULL));
  uint8_t pm[6] = {1, 1, 1, 1, 1, 0};
  feed("mask", IR_BOOL, 2, DIMS(2, 3), pm);
  run_ok();
  const Tensor *o = out_named("m");
  cr_assert_eq(o->dtype, IR_BOOL);
  EXPECT_DIMS(o, 2, 3, 3);
  const uint8_t *y = o->data;
  for (int b = 0; b < 2; b++)
    for (int q = 0; q < 3; q++)
      for (int k = 0; k < 3; k++)
        cr_assert_eq(y[(b * 3 + q) * 3 + k], pm[b * 3 + k] && k <= q, "m[%d,%d,%d]",
                     b, q, k);
}

static int unary_graph(IrOp op, const float *x, int n, const IrAttrs *at) {
  int px = param("x", ir_type1(IR_F32, n), x);
  int y = op1(op, px, at);
  ir_graph_add_output(G, "y", y);
  return y;
}

static void op_test_SCALE(void) {
  unary_graph(IR_OP_SCALE, (float[]){-1, 0.5f, 2}, 3, &(IrAttrs){.factor = 3});
  run_ok();
  expect_f32(out_named("y"), (double[]){-3, 1.5, 6}, 3, 0);
}

static void op_test_RELU(void) {
  unary_graph(IR_OP_RELU, (float[]){-2, -0.5f, 0, 0.5f, 2}, 5, NULL);
  run_ok();
  expect_f32(out_named("y"), (double[]){0, 0, 0, 0.5, 2}, 5, 0);
}

static const float ACT_X[8] = {-2, -1, -0.5f, 0, 0.5f, 1, 2, 3};

static void op_test_GELU(void) {
  unary_graph(IR_OP_GELU, ACT_X, 8, NULL);
  run_ok();
  expect_f32(out_named("y"),
             (double[]){-0.045500264, -0.158655254, -0.154268769, 0, 0.345731231,
                        0.841344746, 1.954499736, 2.995950306},
             8, 1e-6);
}

static void op_test_GELU_TANH(void) {
  unary_graph(IR_OP_GELU_TANH, ACT_X, 8, NULL);
  run_ok();
  expect_f32(out_named("y"),
             (double[]){-0.045402306, -0.158808009, -0.154285990, 0, 0.345714010,
                        0.841191991, 1.954597694, 2.996362608},
             8, 1e-6);
}

static void op_test_TANH(void) {
  unary_graph(IR_OP_TANH, ACT_X, 8, NULL);
  run_ok();
  expect_f32(out_named("y"),
             (double[]){-0.964027580, -0.761594156, -0.462117157, 0, 0.462117157,
                        0.761594156, 0.964027580, 0.995054754},
             8, 1e-6);
}

static void op_test_LAYERNORM(void) {
  /* rows [1,2,3,4] and [2,2,2,2]; gain and bias not trivial */
  int x = param("x", ir_type2(IR_F32, 2, 4), (float[]){1, 2, 3, 4, 2, 2, 2, 2});
  int g = param("g", ir_type1(IR_F32, 4), (float[]){1, 2, 0.5f, 1});
  int b = param("b", ir_type1(IR_F32, 4), (float[]){0, 1, 0, -1});
  ir_graph_add_output(G, "biased",
                      op3(IR_OP_LAYERNORM, x, g, b, &(IrAttrs){.eps = 1e-6}));
  ir_graph_add_output(G, "unbiased",
                      op3(IR_OP_LAYERNORM, x, g, b,
                          &(IrAttrs){.eps = 1e-6, .unbiased = true}));
  run_ok();
  /* (x-2.5)/sqrt(1.25+1e-6) and (x-2.5)/(sqrt(5/3)+1e-6) (Python) */
  const double nb[4] = {-1.3416402498438813, -0.44721341661462705,
                        0.44721341661462705, 1.3416402498438813};
  const double nu[4] = {-1.1618941038629222, -0.3872980346209741,
                        0.3872980346209741, 1.1618941038629222};
  const double g4[4] = {1, 2, 0.5, 1}, b4[4] = {0, 1, 0, -1};
  double wb[8], wu[8];
  for (int i = 0; i < 4; i++) {
    wb[i] = g4[i] * nb[i] + b4[i];
    wu[i] = g4[i] * nu[i] + b4[i];
    wb[4 + i] = wu[4 + i] = b4[i]; /* a constant row normalises to 0 */
  }
  expect_f32(out_named("biased"), wb, 8, 1e-6);
  expect_f32(out_named("unbiased"), wu, 8, 1e-6);
}

static void op_test_LINEAR(void) {
  int x = param("x", ir_type2(IR_F32, 2, 3), (float[]){1, 2, 3, 4, 5, 6});
  int w = param("fc.weight", ir_type2(IR_F32, 2, 3), (float[]){1, 0, -1, 0.5f, 0.5f, 0.5f});
  int b = param("fc.bias", ir_type1(IR_F32, 2), (float[]){10, -1});
  ir_graph_add_output(G, "y", op3(IR_OP_LINEAR, x, w, b, NULL));
  ir_graph_add_output(G, "y_nobias", op2(IR_OP_LINEAR, x, w, NULL));
  run_ok();
  /* x w^T + b: [1-3+10, 3-1], [4-6+10, 7.5-1] */
  EXPECT_DIMS(out_named("y"), 2, 2);
  expect_f32(out_named("y"), (double[]){8, 2, 8, 6.5}, 4, 1e-6);
  expect_f32(out_named("y_nobias"), (double[]){-2, 3, -2, 7.5}, 4, 1e-6);
}

static void op_test_SOFTMAX(void) {
  int x = param("x", ir_type2(IR_F32, 3, 3),
                (float[]){1, 2, 3, 1000, 1001, 1002, 0, 0, 0});
  ir_graph_add_output(G, "y", op1(IR_OP_SOFTMAX, x, NULL));
  run_ok();
  const double r[3] = {0.09003057317038046, 0.24472847105479767, 0.6652409557748219};
  const double third = 1.0 / 3.0;
  expect_f32(out_named("y"),
             (double[]){r[0], r[1], r[2], r[0], r[1], r[2], third, third, third}, 9,
             1e-7);
}

static void op_test_LOG_SOFTMAX(void) {
  int x = param("x", ir_type2(IR_F32, 3, 3),
                (float[]){1, 2, 3, 1000, 1001, 1002, 0, 0, 0});
  ir_graph_add_output(G, "y", op1(IR_OP_LOG_SOFTMAX, x, NULL));
  run_ok();
  const double r[3] = {-2.4076059644443806, -1.4076059644443806, -0.4076059644443806};
  const double l3 = -log(3.0);
  expect_f32(out_named("y"), (double[]){r[0], r[1], r[2], r[0], r[1], r[2], l3, l3, l3},
             9, 1e-6);
}

static void op_test_MASK_CAUSAL(void) {
  int T = ir_graph_add_symbol(G, "T", 16);
  input("x", TY(IR_F32, S(T)));
  int m = ir_build_typed(G, IR_OP_MASK_CAUSAL, NULL, 0, NULL,
                         TY(IR_BOOL, C(1), S(T), S(T)), LOC);
  ir_graph_add_output(G, "m", m);
  feed("x", IR_F32, 1, DIMS(4), (float[]){0, 0, 0, 0});
  run_ok();
  const Tensor *o = out_named("m");
  EXPECT_DIMS(o, 1, 4, 4);
  const uint8_t *y = o->data;
  for (int q = 0; q < 4; q++)
    for (int k = 0; k < 4; k++) cr_assert_eq(y[q * 4 + k], k <= q, "m[0,%d,%d]", q, k);
}

/* Tq < Tk: query q is at position q + Tk - Tq */
Test(interp, mask_causal_step) {
  fx_begin();
  int m = ir_build_typed(G, IR_OP_MASK_CAUSAL, NULL, 0, NULL, TY(IR_BOOL, C(1), C(2), C(5)), LOC);
  ir_graph_add_output(G, "m", m);
  run_ok();
  const uint8_t *y = out_named("m")->data;
  for (int q = 0; q < 2; q++)
    for (int k = 0; k < 5; k++) cr_assert_eq(y[q * 5 + k], k <= q + 3, "m[0,%d,%d]", q, k);
  fx_end();
}

static void op_test_RESHAPE(void) {
  float x[12];
  for (int i = 0; i < 12; i++) x[i] = (float)i;
  int px = param("x", ir_type2(IR_F32, 2, 6), x);
  int r = ir_build_typed(G, IR_OP_RESHAPE, (int[]){px}, 1, NULL,
                         TY(IR_F32, C(3), C(2), C(2)), LOC);
  ir_graph_add_output(G, "r", r);
  run_ok();
  double want[12];
  for (int i = 0; i < 12; i++) want[i] = i;
  EXPECT_DIMS(out_named("r"), 3, 2, 2);
  expect_f32(out_named("r"), want, 12, 0);
}

static void op_test_TAKE(void) {
  float x[24];
  for (int i = 0; i < 24; i++) x[i] = (float)i;
  int px = param("x", TY(IR_F32, C(2), C(3), C(4)), x);
  ir_graph_add_output(G, "a1", op1(IR_OP_TAKE, px, &(IrAttrs){.axis = 1, .index = 0}));
  ir_graph_add_output(G, "a0", op1(IR_OP_TAKE, px, &(IrAttrs){.axis = 0, .index = 1}));
  ir_graph_add_output(G, "a2", op1(IR_OP_TAKE, px, &(IrAttrs){.axis = 2, .index = 3}));
  run_ok();
  double w1[8], w0[12], w2[6];
  for (int b = 0; b < 2; b++)
    for (int k = 0; k < 4; k++) w1[b * 4 + k] = x[(b * 3 + 0) * 4 + k];
  for (int j = 0; j < 12; j++) w0[j] = x[12 + j];
  for (int b = 0; b < 2; b++)
    for (int j = 0; j < 3; j++) w2[b * 3 + j] = x[(b * 3 + j) * 4 + 3];
  EXPECT_DIMS(out_named("a1"), 2, 4);
  expect_f32(out_named("a1"), w1, 8, 0);
  EXPECT_DIMS(out_named("a0"), 3, 4);
  expect_f32(out_named("a0"), w0, 12, 0);
  EXPECT_DIMS(out_named("a2"), 2, 3);
  expect_f32(out_named("a2"), w2, 6, 0);
}

/* take with a negative index counts from the end */
Test(interp, take_last) {
  fx_begin();
  float x[24];
  for (int i = 0; i < 24; i++) x[i] = (float)i;
  int px = param("x", TY(IR_F32, C(2), C(3), C(4)), x);
  ir_graph_add_output(G, "y", op1(IR_OP_TAKE, px, &(IrAttrs){.axis = 1, .index = -1}));
  run_ok();
  double w[8];
  for (int b = 0; b < 2; b++)
    for (int k = 0; k < 4; k++) w[b * 4 + k] = x[(b * 3 + 2) * 4 + k];
  expect_f32(out_named("y"), w, 8, 0);
  fx_end();
}

static void op_test_TAIL(void) {
  float x[24];
  for (int i = 0; i < 24; i++) x[i] = (float)i;
  int px = param("x", TY(IR_F32, C(2), C(3), C(4)), x);
  ir_graph_add_output(G, "y", ir_build_typed(G, IR_OP_TAIL, (int[]){px}, 1, &(IrAttrs){.axis = 1},
                                             TY(IR_F32, C(2), C(2), C(4)), LOC));
  run_ok();
  double w[16];
  for (int b = 0; b < 2; b++)
    for (int t = 0; t < 2; t++)
      for (int k = 0; k < 4; k++) w[(b * 2 + t) * 4 + k] = x[(b * 3 + t + 1) * 4 + k];
  EXPECT_DIMS(out_named("y"), 2, 2, 4);
  expect_f32(out_named("y"), w, 16, 0);
}

/* a state is zero at first (a fresh one per run without a state object) */
static void op_test_STATE(void) {
  int st = ir_build_typed(G, IR_OP_STATE, NULL, 0, &(IrAttrs){.name = "c"},
                          TY(IR_F32, C(1), C(3), C(2)), LOC);
  ir_graph_add_output(G, "y", op1(IR_OP_RELU, st, NULL));
  run_ok();
  expect_f32(out_named("y"), (double[6]){0}, 6, 0);
  InterpRunOptions o = {NULL, interp_state_create(A, G)};
  cr_assert_eq(interp_run_with(G, &WS, IN, N_IN, &o, A, &OUT, &N_OUT, ERR, sizeof ERR), 0, "%s", ERR);
  expect_f32(out_named("y"), (double[6]){0}, 6, 0);
}

/* two runs append 2 rows then 1 row (P = 0, then 2): the state keeps
 * them, the result is the first L rows */
static void op_test_KV_APPEND(void) {
  int T = ir_graph_add_symbol(G, "T", 4), L = ir_graph_add_symbol(G, "L", 4);
  int x = input("x", TY(IR_F32, C(1), S(T), C(2)));
  int st = ir_build_typed(G, IR_OP_STATE, NULL, 0, &(IrAttrs){.name = "c"},
                          TY(IR_F32, C(1), C(4), C(2)), LOC);
  ir_graph_add_output(G, "y", ir_build_typed(G, IR_OP_KV_APPEND, (int[]){st, x}, 2, NULL,
                                             TY(IR_F32, C(1), S(L), C(2)), LOC));
  InterpRunOptions o = {(int64_t[]){0, 2}, interp_state_create(A, G)};
  feed("x", IR_F32, 3, DIMS(1, 2, 2), (float[]){1, 2, 3, 4});
  cr_assert_eq(interp_run_with(G, &WS, IN, N_IN, &o, A, &OUT, &N_OUT, ERR, sizeof ERR), 0, "%s", ERR);
  expect_f32(out_named("y"), (double[]){1, 2, 3, 4}, 4, 0);
  N_IN = 0;
  feed("x", IR_F32, 3, DIMS(1, 1, 2), (float[]){5, 6});
  o.syms = (int64_t[]){0, 3};
  cr_assert_eq(interp_run_with(G, &WS, IN, N_IN, &o, A, &OUT, &N_OUT, ERR, sizeof ERR), 0, "%s", ERR);
  EXPECT_DIMS(out_named("y"), 1, 3, 2);
  expect_f32(out_named("y"), (double[]){1, 2, 3, 4, 5, 6}, 6, 0);
  /* L < T does not fit */
  o.syms = (int64_t[]){0, 0};
  N_IN = 0;
  feed("x", IR_F32, 3, DIMS(1, 1, 2), (float[]){5, 6});
  cr_assert_neq(interp_run_with(G, &WS, IN, N_IN, &o, A, &OUT, &N_OUT, ERR, sizeof ERR), 0);
}

/* a fused node runs its decomposition: an elementwise body with a gather, a
 * broadcast operand and a scale; add_layernorm with a broadcast addend */
static void op_test_FUSED(void) {
  int ids = input("ids", TY(IR_I32, C(2), C(3)));
  int tab = param("tab", ir_type2(IR_F32, 5, 2), (float[]){0, 1, 10, 11, 20, 21, 30, 31, 40, 41});
  int bias = param("bias", ir_type1(IR_F32, 2), (float[]){0.5f, -0.5f});
  IrAttrs ew = {.fusion = "elementwise", .expr = "scale(add(embed($0, $1), $2), -2)"};
  ir_graph_add_output(G, "y", ir_build(G, IR_OP_FUSED, (int[]){tab, ids, bias}, 3, &ew, LOC));
  int x = param("x", ir_type2(IR_F32, 2, 4), (float[]){1, 2, 3, 4, 2, 2, 2, 2});
  int r = param("r", ir_type1(IR_F32, 4), (float[]){0, 0, 0, 0});
  int g = param("g", ir_type1(IR_F32, 4), (float[]){1, 2, 0.5f, 1});
  int b = param("b", ir_type1(IR_F32, 4), (float[]){0, 1, 0, -1});
  IrAttrs aln = {.fusion = "add_layernorm", .eps = 1e-6};
  ir_graph_add_output(G, "n", ir_build(G, IR_OP_FUSED, (int[]){x, r, g, b}, 4, &aln, LOC));
  feed("ids", IR_I32, 2, DIMS(2, 3), (int32_t[]){0, 4, 2, 1, 1, 3});
  run_ok();
  const int id6[6] = {0, 4, 2, 1, 1, 3};
  double want[12];
  for (int i = 0; i < 6; i++) {
    want[2 * i] = -2 * (10.0 * id6[i] + 0.5);
    want[2 * i + 1] = -2 * (10.0 * id6[i] + 1 - 0.5);
  }
  EXPECT_DIMS(out_named("y"), 2, 3, 2);
  expect_f32(out_named("y"), want, 12, 1e-5);
  /* as op_test_LAYERNORM's biased case: adding a zero row changes nothing */
  const double nb[4] = {-1.3416402498438813, -0.44721341661462705, 0.44721341661462705,
                        1.3416402498438813};
  const double g4[4] = {1, 2, 0.5, 1}, b4[4] = {0, 1, 0, -1};
  double wn[8];
  for (int i = 0; i < 4; i++) {
    wn[i] = g4[i] * nb[i] + b4[i];
    wn[4 + i] = b4[i];
  }
  expect_f32(out_named("n"), wn, 8, 1e-6);
  /* an id beyond the table: refused inside the decomposition */
  N_IN = 0;
  feed("ids", IR_I32, 2, DIMS(2, 3), (int32_t[]){0, 5, 2, 1, 1, 3});
  expect_err("in its decomposition");
}

/* result 1 of add_layernorm_sum is the sum; result 0 the normalised sum */
static void op_test_RESULT(void) {
  int x = param("x", ir_type2(IR_F32, 2, 4), (float[]){1, 2, 3, 4, 2, 2, 2, 2});
  int r = param("r", ir_type1(IR_F32, 4), (float[]){1, 1, 1, 1});
  int g = param("g", ir_type1(IR_F32, 4), (float[]){1, 1, 1, 1});
  int b = param("b", ir_type1(IR_F32, 4), (float[]){0, 0, 0, 0});
  IrAttrs aln = {.fusion = "add_layernorm_sum", .eps = 1e-6};
  int f = ir_build(G, IR_OP_FUSED, (int[]){x, r, g, b}, 4, &aln, LOC);
  ir_graph_add_output(G, "sum", op1(IR_OP_RESULT, f, &(IrAttrs){.index = 1}));
  ir_graph_add_output(G, "n", f);
  run_ok();
  expect_f32(out_named("sum"), (double[]){2, 3, 4, 5, 3, 3, 3, 3}, 8, 0);
  const double nb[4] = {-1.3416402498438813, -0.44721341661462705, 0.44721341661462705,
                        1.3416402498438813};
  expect_f32(out_named("n"), (double[]){nb[0], nb[1], nb[2], nb[3], 0, 0, 0, 0}, 8, 1e-6);
}

/* batch 1's last two keys are padding */
static bool vis_pad(int b, int i, int j) {
  (void)i;
  return b == 0 || j < 2;
}

static void op_test_ATTENTION(void) {
  /* single head, padding mask [B,1,Tk], Tq != Tk */
  enum { B = 2, Tq = 3, Tk = 4, D = 2 };
  float q[B * Tq * D], k[B * Tk * D], v[B * Tk * D];
  fill(q, B * Tq * D, 2);
  fill(k, B * Tk * D, 2);
  fill(v, B * Tk * D, 1);
  int pq = param("q", TY(IR_F32, C(B), C(Tq), C(D)), q);
  int pk = param("k", TY(IR_F32, C(B), C(Tk), C(D)), k);
  int pv = param("v", TY(IR_F32, C(B), C(Tk), C(D)), v);
  int m = input("mask", TY(IR_BOOL, C(B), C(1), C(Tk)));
  int att = ir_build(G, IR_OP_ATTENTION, (int[]){pq, pk, pv, m}, 4,
                     &(IrAttrs){.heads = 1, .scale = 1 / sqrt(2.0)}, LOC);
  ir_graph_add_output(G, "att", att);
  uint8_t mask[B * Tk] = {1, 1, 1, 1, 1, 1, 0, 0};
  feed("mask", IR_BOOL, 3, DIMS(B, 1, Tk), mask);
  run_ok();

  /* by hand: one head, scores q.k / sqrt(2), softmax over the real keys */
  double want[B * Tq * D];
  for (int b = 0; b < B; b++)
    for (int i = 0; i < Tq; i++) {
      int nk = b == 0 ? 4 : 2;
      double s[4], sum = 0;
      for (int j = 0; j < nk; j++) {
        s[j] = (q[(b * Tq + i) * 2] * k[(b * Tk + j) * 2] +
                q[(b * Tq + i) * 2 + 1] * k[(b * Tk + j) * 2 + 1]) /
               sqrt(2.0);
        sum += exp(s[j]);
      }
      for (int e = 0; e < 2; e++) {
        double acc = 0;
        for (int j = 0; j < nk; j++) acc += exp(s[j]) / sum * v[(b * Tk + j) * 2 + e];
        want[(b * Tq + i) * 2 + e] = acc;
      }
    }
  EXPECT_DIMS(out_named("att"), B, Tq, D);
  expect_f32(out_named("att"), want, B * Tq * D, 1e-6);
}

/* attention.flash means what attention means: the same graph with the
 * flash op gives the same bits (the interpreter's kernel is the same) */
static void op_test_ATTENTION_FLASH(void) {
  enum { B = 2, T = 5, D = 4 };
  float q[B * T * D], k[B * T * D], v[B * T * D];
  fill(q, B * T * D, 2);
  fill(k, B * T * D, 2);
  fill(v, B * T * D, 1);
  int pq = param("q", TY(IR_F32, C(B), C(T), C(D)), q);
  int pk = param("k", TY(IR_F32, C(B), C(T), C(D)), k);
  int pv = param("v", TY(IR_F32, C(B), C(T), C(D)), v);
  int m = ir_build_typed(G, IR_OP_MASK_CAUSAL, NULL, 0, NULL, TY(IR_BOOL, C(1), C(T), C(T)), LOC);
  IrAttrs at = {.heads = 2, .scale = 0.7};
  ir_graph_add_output(G, "plain", ir_build(G, IR_OP_ATTENTION, (int[]){pq, pk, pv, m}, 4, &at, LOC));
  ir_graph_add_output(G, "flash",
                      ir_build(G, IR_OP_ATTENTION_FLASH, (int[]){pq, pk, pv, m}, 4, &at, LOC));
  run_ok();
  const Tensor *a = out_named("plain"), *f = out_named("flash");
  EXPECT_DIMS(f, B, T, D);
  cr_assert(memcmp(a->data, f->data, sizeof(float) * B * T * D) == 0);
}

/* param.concat: along axis 0 (Wq|Wk|Wv) and axis 1; computed from the
 * operands when the weights do not hold it, read by name when they do
 * (ir_weights_derive computed it once) */
static void op_test_PARAM_CONCAT(void) {
  float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {7, 8, 9, 10}, c[2] = {11, 12};
  int pa = param("a", TY(IR_F32, C(3), C(2)), a);
  int pb = param("b", TY(IR_F32, C(2), C(2)), b);
  int pc = param("c", TY(IR_F32, C(1), C(2)), c);
  int rows = ir_build(G, IR_OP_PARAM_CONCAT, (int[]){pa, pb, pc}, 3,
                      &(IrAttrs){.name = "abc", .axis = 0}, LOC);
  cr_assert_eq(G->nodes[rows].type.dims[0].value, 6);
  int cols = ir_build(G, IR_OP_PARAM_CONCAT, (int[]){pb, pb}, 2,
                      &(IrAttrs){.name = "bb", .axis = 1}, LOC);
  ir_graph_add_output(G, "rows", rows);
  ir_graph_add_output(G, "cols", cols);
  run_ok();
  EXPECT_DIMS(out_named("rows"), 6, 2);
  expect_f32(out_named("rows"), (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 12, 0);
  EXPECT_DIMS(out_named("cols"), 2, 4);
  expect_f32(out_named("cols"), (double[]){7, 8, 7, 8, 9, 10, 9, 10}, 8, 0);
  char err[256];
  WeightSet *d = ir_weights_derive(A, G, &WS, err, sizeof err);
  cr_assert_not_null(d, "%s", err);
  const Weight *abc = ir_weights_find(d, "abc");
  cr_assert_not_null(abc);
  abc->data[0] = 100; /* the interpreter reads the derived weight, not a copy */
  cr_assert_eq(interp_run(G, d, IN, N_IN, A, &OUT, &N_OUT, ERR, sizeof ERR), 0, "%s", ERR);
  expect_f32(out_named("rows"), (double[]){100, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 12, 0);
  cr_assert_null(ir_weights_find(&WS, "abc"), "the original set is left as it was");
}

/* slice along the last axis (what fuse-qkv makes) and along a middle one */
static void op_test_SLICE(void) {
  float x[24];
  for (int i = 0; i < 24; i++) x[i] = (float)i;
  int px = param("x", TY(IR_F32, C(2), C(3), C(4)), x);
  ir_graph_add_output(G, "last", ir_build_typed(G, IR_OP_SLICE, (int[]){px}, 1,
                                                &(IrAttrs){.axis = 2, .start = 1},
                                                TY(IR_F32, C(2), C(3), C(2)), LOC));
  ir_graph_add_output(G, "mid", ir_build_typed(G, IR_OP_SLICE, (int[]){px}, 1,
                                               &(IrAttrs){.axis = 1, .start = 2},
                                               TY(IR_F32, C(2), C(1), C(4)), LOC));
  run_ok();
  double w[12];
  for (int r = 0; r < 6; r++)
    for (int j = 0; j < 2; j++) w[r * 2 + j] = x[r * 4 + 1 + j];
  expect_f32(out_named("last"), w, 12, 0);
  double m[8];
  for (int b = 0; b < 2; b++)
    for (int j = 0; j < 4; j++) m[b * 4 + j] = x[(b * 3 + 2) * 4 + j];
  EXPECT_DIMS(out_named("mid"), 2, 1, 4);
  expect_f32(out_named("mid"), m, 8, 0);
}

static bool vis_causal(int b, int i, int j) {
  (void)b;
  return j <= i;
}

static void op_test_ATTN_PROBS(void) {
  /* two heads, causal mask */
  enum { B = 1, T = 3, D = 4, H = 2 };
  float q[B * T * D], k[B * T * D];
  fill(q, B * T * D, 2);
  fill(k, B * T * D, 2);
  int pq = param("q", TY(IR_F32, C(B), C(T), C(D)), q);
  int pk = param("k", TY(IR_F32, C(B), C(T), C(D)), k);
  int m = ir_build_typed(G, IR_OP_MASK_CAUSAL, NULL, 0, NULL,
                         TY(IR_BOOL, C(1), C(T), C(T)), LOC);
  int p = ir_build(G, IR_OP_ATTN_PROBS, (int[]){pq, pk, m}, 3,
                   &(IrAttrs){.heads = H, .scale = 1 / sqrt(2.0)}, LOC);
  ir_graph_add_output(G, "p", p);
  run_ok();
  double want[B * H * T * T];
  ref_attention(q, k, k, B, T, T, D, H, vis_causal, want, NULL);
  const Tensor *o = out_named("p");
  EXPECT_DIMS(o, B, H, T, T);
  expect_f32(o, want, B * H * T * T, 1e-6);
  const float *y = o->data;
  for (int h = 0; h < H; h++) /* masked keys get exactly nothing */
    for (int i = 0; i < T; i++)
      for (int j = i + 1; j < T; j++) cr_assert_eq(y[(h * T + i) * T + j], 0.0f);
}

static void op_test_ATTN_MIX(void) {
  /* p [1,2,2,3], v [1,3,4]: y[0,i,h*2+e] = sum_j p[0,h,i,j] v[0,j,h*2+e] */
  float p[12] = {0.2f, 0.3f, 0.5f, 1, 0, 0, 0, 0, 1, 0.25f, 0.25f, 0.5f};
  float v[12];
  for (int i = 0; i < 12; i++) v[i] = (float)(i + 1);
  int pp = param("p", TY(IR_F32, C(1), C(2), C(2), C(3)), p);
  int pv = param("v", TY(IR_F32, C(1), C(3), C(4)), v);
  ir_graph_add_output(G, "y", op2(IR_OP_ATTN_MIX, pp, pv, &(IrAttrs){.heads = 2}));
  run_ok();
  double want[8];
  for (int i = 0; i < 2; i++)
    for (int h = 0; h < 2; h++)
      for (int e = 0; e < 2; e++) {
        double acc = 0;
        for (int j = 0; j < 3; j++) acc += p[(h * 2 + i) * 3 + j] * v[j * 4 + h * 2 + e];
        want[i * 4 + h * 2 + e] = acc;
      }
  EXPECT_DIMS(out_named("y"), 1, 2, 4);
  expect_f32(out_named("y"), want, 8, 1e-6);
}

ParameterizedTestParameters(interp_op, each) {
  static int ops[IR_OP_COUNT];
  for (int i = 0; i < IR_OP_COUNT; i++) ops[i] = i;
  return cr_make_param_array(int, ops, IR_OP_COUNT);
}

/* Runs the op's test and checks that it did build that op. */
ParameterizedTest(int *op, interp_op, each) {
  cr_log_info("op '%s'", ir_op_info[*op].name);
  cr_assert(op_tests[*op] != NULL, "op '%s' has no interpreter test",
            ir_op_info[*op].name);
  fx_begin();
  op_tests[*op]();
  bool built = false;
  for (int i = 0; i < G->n_nodes; i++) built |= G->nodes[i].op == (IrOp)*op;
  cr_assert(built, "the test for '%s' never builds it", ir_op_info[*op].name);
  fx_end();
}

Test(interp_op, table_complete) {
  for (int i = 0; i < IR_OP_COUNT; i++)
    cr_assert(op_tests[i] != NULL, "op '%s' has no interpreter test",
              ir_op_info[i].name);
}

/* ==== more semantics ==== */

Test(interp, sinusoid_odd_width) {
  fx_begin();
  int pos = ir_build_typed(G, IR_OP_ARANGE, NULL, 0, NULL, TY(IR_I32, C(4)), LOC);
  int pe = ir_build_typed(G, IR_OP_SINUSOID, (int[]){pos}, 1, NULL,
                          TY(IR_F32, C(4), C(5)), LOC);
  ir_graph_add_output(G, "pe", pe);
  run_ok();
  const float *y = out_named("pe")->data;
  for (int p = 0; p < 4; p++)
    for (int c = 0; c < 5; c++) {
      double a = p / pow(10000.0, (c - c % 2) / 5.0);
      double want = c % 2 ? cos(a) : sin(a); /* the last column (4) is a sin */
      cr_assert(fabs(y[p * 5 + c] - want) < 1e-6, "PE[%d,%d]", p, c);
    }
  fx_end();
}

Test(interp, layernorm_unbiased_width_one) {
  fx_begin();
  int x = param("x", ir_type2(IR_F32, 2, 1), (float[]){5, -3});
  int g = param("g", ir_type1(IR_F32, 1), (float[]){2});
  int b = param("b", ir_type1(IR_F32, 1), (float[]){0.25f});
  ir_graph_add_output(G, "y", op3(IR_OP_LAYERNORM, x, g, b,
                                  &(IrAttrs){.eps = 1e-6, .unbiased = true}));
  run_ok();
  expect_f32(out_named("y"), (double[]){0.25, 0.25}, 2, 0);
  fx_end();
}

Test(interp, layernorm_eps_placement) {
  /* a large eps tells sqrt(var+eps) from sqrt(var)+eps and std+eps */
  fx_begin();
  int x = param("x", ir_type2(IR_F32, 1, 4), (float[]){1, 2, 3, 4});
  int g = param("g", ir_type1(IR_F32, 4), (float[]){1, 1, 1, 1});
  int b = param("b", ir_type1(IR_F32, 4), (float[]){0, 0, 0, 0});
  ir_graph_add_output(G, "biased", op3(IR_OP_LAYERNORM, x, g, b, &(IrAttrs){.eps = 1}));
  ir_graph_add_output(G, "unbiased", op3(IR_OP_LAYERNORM, x, g, b,
                                         &(IrAttrs){.eps = 1, .unbiased = true}));
  run_ok();
  /* (x-2.5)/sqrt(1.25+1) and (x-2.5)/(sqrt(5/3)+1) */
  expect_f32(out_named("biased"), (double[]){-1, -1.0 / 3, 1.0 / 3, 1}, 4, 1e-6);
  expect_f32(out_named("unbiased"),
             (double[]){-0.6547375096555628, -0.21824583655185426,
                        0.21824583655185426, 0.6547375096555628},
             4, 1e-6);
  fx_end();
}

Test(interp, linear_rank3_symbolic) {
  fx_begin();
  int B = ir_graph_add_symbol(G, "B", 4), Sy = ir_graph_add_symbol(G, "S", 9);
  int x = input("x", TY(IR_F32, S(B), S(Sy), C(3)));
  float w[12], b[4], xv[2 * 3 * 3];
  fill(w, 12, 1);
  fill(b, 4, 1);
  fill(xv, 18, 1);
  int pw = param("w", ir_type2(IR_F32, 4, 3), w);
  int pb = param("b", ir_type1(IR_F32, 4), b);
  ir_graph_add_output(G, "y", op3(IR_OP_LINEAR, x, pw, pb, NULL));
  feed("x", IR_F32, 3, DIMS(2, 3, 3), xv);
  run_ok();
  double want[24];
  for (int m = 0; m < 6; m++)
    for (int n = 0; n < 4; n++) {
      double acc = b[n];
      for (int k = 0; k < 3; k++) acc += (double)xv[m * 3 + k] * w[n * 3 + k];
      want[m * 4 + n] = acc;
    }
  EXPECT_DIMS(out_named("y"), 2, 3, 4);
  expect_f32(out_named("y"), want, 24, 1e-6);
  fx_end();
}

Test(interp, attention_equals_mix_of_probs) {
  enum { B = 2, T = 5, D = 8, H = 2 };
  fx_begin();
  float q[B * T * D], k[B * T * D], v[B * T * D];
  fill(q, B * T * D, 1.5f);
  fill(k, B * T * D, 1.5f);
  fill(v, B * T * D, 1);
  int pq = param("q", TY(IR_F32, C(B), C(T), C(D)), q);
  int pk = param("k", TY(IR_F32, C(B), C(T), C(D)), k);
  int pv = param("v", TY(IR_F32, C(B), C(T), C(D)), v);
  int m = ir_build_typed(G, IR_OP_MASK_CAUSAL, NULL, 0, NULL,
                         TY(IR_BOOL, C(1), C(T), C(T)), LOC);
  IrAttrs at = {.heads = H, .scale = 0.5};
  int att = ir_build(G, IR_OP_ATTENTION, (int[]){pq, pk, pv, m}, 4, &at, LOC);
  int p = ir_build(G, IR_OP_ATTN_PROBS, (int[]){pq, pk, m}, 3, &at, LOC);
  int mix = ir_build(G, IR_OP_ATTN_MIX, (int[]){p, pv}, 2, &at, LOC);
  ir_graph_add_output(G, "fused", att);
  ir_graph_add_output(G, "split", mix);
  run_ok();
  const float *a = out_named("fused")->data, *s = out_named("split")->data;
  for (int i = 0; i < B * T * D; i++)
    cr_assert(fabsf(a[i] - s[i]) <= 1e-6f, "[%d]: %.9g vs %.9g", i, a[i], s[i]);
  /* and both against the plain reference */
  double want[B * T * D];
  ref_attention(q, k, v, B, T, T, D, H, vis_causal, NULL, want);
  /* the reference uses 1/sqrt(dh) = 0.5 for dh = 4, as the node does */
  expect_f32(out_named("fused"), want, B * T * D, 1e-6);
  fx_end();
}

Test(interp, attention_two_heads_padding_cross) {
  /* cross-attention shapes: Tq = 3 queries over Tk = 4 keys, mask [B,1,Tk] */
  enum { B = 2, Tq = 3, Tk = 4, D = 6, H = 2 };
  fx_begin();
  float q[B * Tq * D], k[B * Tk * D], v[B * Tk * D];
  fill(q, B * Tq * D, 2);
  fill(k, B * Tk * D, 2);
  fill(v, B * Tk * D, 1);
  int Bs = ir_graph_add_symbol(G, "B", 4), Ss = ir_graph_add_symbol(G, "S", 8),
      Ts = ir_graph_add_symbol(G, "T", 8);
  int iq = input("q", TY(IR_F32, S(Bs), S(Ts), C(D)));
  int ik = input("k", TY(IR_F32, S(Bs), S(Ss), C(D)));
  int iv = input("v", TY(IR_F32, S(Bs), S(Ss), C(D)));
  int im = input("src_mask", TY(IR_BOOL, S(Bs), S(Ss)));
  int m3 = ir_build_typed(G, IR_OP_RESHAPE, (int[]){im}, 1, NULL,
                          TY(IR_BOOL, S(Bs), C(1), S(Ss)), LOC);
  int att = ir_build(G, IR_OP_ATTENTION, (int[]){iq, ik, iv, m3}, 4,
                     &(IrAttrs){.heads = H, .scale = 1 / sqrt(3.0)}, LOC);
  ir_graph_add_output(G, "att", att);
  uint8_t mask[B * Tk] = {1, 1, 1, 1, 1, 1, 0, 0};
  feed("q", IR_F32, 3, DIMS(B, Tq, D), q);
  feed("k", IR_F32, 3, DIMS(B, Tk, D), k);
  feed("v", IR_F32, 3, DIMS(B, Tk, D), v);
  feed("src_mask", IR_BOOL, 2, DIMS(B, Tk), mask);
  run_ok();
  double want[B * Tq * D];
  ref_attention(q, k, v, B, Tq, Tk, D, H, vis_pad, NULL, want);
  EXPECT_DIMS(out_named("att"), B, Tq, D);
  expect_f32(out_named("att"), want, B * Tq * D, 1e-6);
  fx_end();
}

Test(interp, fully_masked_row_is_uniform) {
  /* masked_fill(-1e9) on every key: softmax of equal scores, as PyTorch does */
  fx_begin();
  int pq = param("q", TY(IR_F32, C(1), C(1), C(2)), (float[]){1, 2});
  int pk = param("k", TY(IR_F32, C(1), C(2), C(2)), (float[]){3, 4, -5, 6});
  int m = input("m", TY(IR_BOOL, C(1), C(1), C(2)));
  int p = ir_build(G, IR_OP_ATTN_PROBS, (int[]){pq, pk, m}, 3,
                   &(IrAttrs){.heads = 1, .scale = 1}, LOC);
  ir_graph_add_output(G, "p", p);
  feed("m", IR_BOOL, 3, DIMS(1, 1, 2), (uint8_t[]){0, 0});
  run_ok();
  expect_f32(out_named("p"), (double[]){0.5, 0.5}, 2, 0);
  fx_end();
}

Test(interp, outputs_survive_buffer_reuse) {
  /* y1 is an output and also consumed; later results must not reuse it */
  fx_begin();
  float x[64];
  for (int i = 0; i < 64; i++) x[i] = (float)(i - 32);
  int px = param("x", ir_type1(IR_F32, 64), x);
  int y1 = op1(IR_OP_RELU, px, NULL);
  int cur = y1;
  for (int i = 0; i < 10; i++) cur = op1(IR_OP_SCALE, cur, &(IrAttrs){.factor = 2});
  int last = op2(IR_OP_SUB, cur, y1, NULL);
  ir_graph_add_output(G, "y1", y1);
  ir_graph_add_output(G, "last", last);
  run_ok();
  double w1[64], wl[64];
  for (int i = 0; i < 64; i++) {
    w1[i] = x[i] > 0 ? x[i] : 0;
    wl[i] = w1[i] * 1024 - w1[i];
  }
  expect_f32(out_named("y1"), w1, 64, 0);
  expect_f32(out_named("last"), wl, 64, 0);
  fx_end();
}

Test(interp, buffer_kept_until_last_consumer) {
  /* y1 has two consumers; y3 (same size) must not land in y1's buffer */
  fx_begin();
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = (float)(i - 8);
  int px = param("x", ir_type1(IR_F32, 16), x);
  int y1 = op1(IR_OP_RELU, px, NULL);
  int y2 = op1(IR_OP_SCALE, y1, &(IrAttrs){.factor = 2});
  int y3 = op1(IR_OP_SCALE, y2, &(IrAttrs){.factor = 2});
  ir_graph_add_output(G, "y4", op2(IR_OP_ADD, y3, y1, NULL));
  run_ok();
  double want[16];
  for (int i = 0; i < 16; i++) want[i] = 5.0 * (x[i] > 0 ? x[i] : 0);
  expect_f32(out_named("y4"), want, 16, 0);
  fx_end();
}

Test(interp, inputs_are_never_modified) {
  fx_begin();
  int B = ir_graph_add_symbol(G, "B", 4);
  int x = input("x", TY(IR_F32, S(B), C(4)));
  int g = param("g", ir_type1(IR_F32, 4), (float[]){1, 1, 1, 1});
  int b = param("b", ir_type1(IR_F32, 4), (float[]){0, 0, 0, 0});
  int n = op3(IR_OP_LAYERNORM, x, g, b, &(IrAttrs){.eps = 1e-5});
  int r = op1(IR_OP_RELU, n, NULL);
  int s = op1(IR_OP_SOFTMAX, op2(IR_OP_ADD, r, x, NULL), NULL);
  ir_graph_add_output(G, "s", s);
  float data[8] = {1, -2, 3, -4, 5, 6, -7, 8}, copy[8];
  memcpy(copy, data, sizeof data);
  feed("x", IR_F32, 2, DIMS(2, 4), data);
  run_ok();
  cr_assert(memcmp(data, copy, sizeof data) == 0, "input data was modified");
  fx_end();
}

Test(interp, tensor_numel) {
  Tensor t = {.rank = 3, .dims = {2, 3, 4}};
  cr_assert_eq(tensor_numel(&t), 24);
  t.rank = 0;
  cr_assert_eq(tensor_numel(&t), 1);
  t.rank = 2;
  t.dims[1] = 0;
  cr_assert_eq(tensor_numel(&t), 0);
  t.dims[1] = -1;
  cr_assert_eq(tensor_numel(&t), -1);
  Tensor big = {.rank = 4, .dims = {INT64_MAX / 2, 4, 1, 1}};
  cr_assert_eq(tensor_numel(&big), -1);
}

/* ==== errors: binding ==== */

/* src [B,S], tgt [B,T] (i32), symbols B max 4, S max 128, T max 16 */
static void two_inputs(void) {
  int B = ir_graph_add_symbol(G, "B", 4), Sy = ir_graph_add_symbol(G, "S", 128),
      T = ir_graph_add_symbol(G, "T", 16);
  int src = input("src", TY(IR_I32, S(B), S(Sy)));
  int tgt = input("tgt", TY(IR_I32, S(B), S(T)));
  ir_graph_add_output(G, "s", src);
  ir_graph_add_output(G, "t", tgt);
}

static int32_t zeros[4096];

Test(interp_err, missing_input) {
  fx_begin();
  two_inputs();
  feed("src", IR_I32, 2, DIMS(3, 5), zeros);
  expect_err("missing input 'tgt'");
  fx_end();
}

Test(interp_err, unexpected_input) {
  fx_begin();
  two_inputs();
  feed("src", IR_I32, 2, DIMS(3, 5), zeros);
  feed("tgt", IR_I32, 2, DIMS(3, 5), zeros);
  feed("foo", IR_I32, 1, DIMS(3), zeros);
  expect_err("unexpected input 'foo'");
  fx_end();
}

Test(interp_err, duplicate_input) {
  fx_begin();
  two_inputs();
  feed("src", IR_I32, 2, DIMS(3, 5), zeros);
  feed("src", IR_I32, 2, DIMS(3, 5), zeros);
  expect_err("input 'src' given twice");
  fx_end();
}

Test(interp_err, inconsistent_symbol) {
  fx_begin();
  two_inputs();
  feed("src", IR_I32, 2, DIMS(3, 5), zeros);
  feed("tgt", IR_I32, 2, DIMS(4, 5), zeros);
  expect_err("input 'tgt' dim 0 is 4 but B is 3 (from 'src')");
  fx_end();
}

Test(interp_err, symbol_max_exceeded) {
  fx_begin();
  two_inputs();
  feed("src", IR_I32, 2, DIMS(1, 200), zeros);
  feed("tgt", IR_I32, 2, DIMS(1, 5), zeros);
  expect_err("'src' dim 1 is 200 but S max is 128");
  fx_end();
}

Test(interp, symbol_at_max_is_accepted) {
  fx_begin();
  two_inputs();
  feed("src", IR_I32, 2, DIMS(4, 128), zeros);
  feed("tgt", IR_I32, 2, DIMS(4, 16), zeros);
  run_ok();
  EXPECT_DIMS(out_named("s"), 4, 128);
  EXPECT_DIMS(out_named("t"), 4, 16);
  fx_end();
}

Test(interp_err, symbol_one_past_max) {
  fx_begin();
  two_inputs();
  feed("src", IR_I32, 2, DIMS(4, 128), zeros);
  feed("tgt", IR_I32, 2, DIMS(4, 17), zeros);
  expect_err("input 'tgt' dim 1 is 17 but T max is 16");
  fx_end();
}

Test(interp_err, symbol_zero) {
  fx_begin();
  two_inputs();
  feed("src", IR_I32, 2, DIMS(2, 0), zeros);
  feed("tgt", IR_I32, 2, DIMS(2, 5), zeros);
  expect_err("'src' dim 1 is 0 but S must be at least 1");
  fx_end();
}

Test(interp_err, wrong_dtype) {
  fx_begin();
  two_inputs();
  feed("src", IR_F32, 2, DIMS(2, 5), zeros);
  feed("tgt", IR_I32, 2, DIMS(2, 5), zeros);
  expect_err("input 'src' has dtype f32, expected i32 (i32[B,S])");
  fx_end();
}

Test(interp_err, wrong_rank) {
  fx_begin();
  two_inputs();
  feed("src", IR_I32, 1, DIMS(10), zeros);
  feed("tgt", IR_I32, 2, DIMS(2, 5), zeros);
  expect_err("input 'src' has rank 1, expected 2 (i32[B,S])");
  fx_end();
}

Test(interp_err, constant_dim_mismatch) {
  fx_begin();
  int B = ir_graph_add_symbol(G, "B", 4);
  ir_graph_add_output(G, "x", input("x", TY(IR_F32, S(B), C(8))));
  feed("x", IR_F32, 2, DIMS(2, 7), zeros);
  expect_err("input 'x' dim 1 is 7, expected 8 (f32[B,8])");
  fx_end();
}

Test(interp_err, input_without_data) {
  fx_begin();
  int B = ir_graph_add_symbol(G, "B", 4);
  ir_graph_add_output(G, "x", input("x", TY(IR_F32, S(B), C(8))));
  feed("x", IR_F32, 2, DIMS(2, 8), NULL);
  expect_err("input 'x' has no data");
  fx_end();
}

Test(interp_err, missing_param) {
  fx_begin();
  int x = param("x", ir_type2(IR_F32, 2, 3), NULL);
  int w = ir_build_param(G, "fc.weight", ir_type2(IR_F32, 4, 3), LOC);
  ir_graph_add_output(G, "y", op2(IR_OP_LINEAR, x, w, NULL));
  expect_err("%1 param at t.tfm:7:3: no weight for param 'fc.weight'");
  fx_end();
}

Test(interp_err, no_weight_set) {
  fx_begin();
  ir_graph_add_output(G, "w", ir_build_param(G, "w", ir_type1(IR_F32, 3), LOC));
  int rc = interp_run(G, NULL, NULL, 0, A, &OUT, &N_OUT, ERR, sizeof ERR);
  cr_assert_neq(rc, 0);
  cr_assert(strstr(ERR, "no weight for param 'w'"), "%s", ERR);
  fx_end();
}

Test(interp_err, param_shape_mismatch) {
  fx_begin();
  int w = param("fc.weight", ir_type2(IR_F32, 4, 3), NULL);
  W[0].type = ir_type2(IR_F32, 3, 4); /* the checkpoint has it transposed */
  ir_graph_add_output(G, "w", w);
  expect_err("param 'fc.weight' is f32[3,4] in the weights, the graph expects f32[4,3]");
  fx_end();
}

/* ==== errors: run-time data ==== */

Test(interp_err, embed_id_out_of_range) {
  fx_begin();
  int B = ir_graph_add_symbol(G, "B", 4), Sy = ir_graph_add_symbol(G, "S", 8);
  int t = param("src_embed.weight", ir_type2(IR_F32, 5, 2), NULL);
  int ids = input("src", TY(IR_I32, S(B), S(Sy)));
  IrLoc l14 = {"model.tfm", 14, 3};
  int e = ir_build(G, IR_OP_EMBED, (int[]){t, ids}, 2, NULL, l14);
  ir_graph_add_output(G, "e", e);
  feed("src", IR_I32, 2, DIMS(2, 4), (int32_t[]){0, 1, 2, 3, 4, 0, 1, 9000});
  const char *msg = run_fails();
  cr_assert_str_eq(msg, "%2 embed at model.tfm:14:3: embedding 'src_embed.weight': "
                        "id 9000 at [1,3] out of range [0, 5)");
  fx_end();
}

Test(interp_err, embed_negative_id_no_loc) {
  fx_begin();
  int t = param("tab", ir_type2(IR_F32, 5, 2), NULL);
  int r = op1(IR_OP_RELU, t, NULL); /* a table that is not a param */
  int ids = input("ids", TY(IR_I32, C(3)));
  int e = ir_build(G, IR_OP_EMBED, (int[]){r, ids}, 2, NULL, (IrLoc){0});
  ir_graph_add_output(G, "e", e);
  feed("ids", IR_I32, 1, DIMS(3), (int32_t[]){0, -1, 2});
  const char *msg = run_fails();
  cr_assert_str_eq(msg, "%3 embed: embedding %1: id -1 at [1] out of range [0, 5)");
  fx_end();
}

Test(interp_err, embed_id_equal_to_vocab) {
  fx_begin();
  int t = param("embed.weight", ir_type2(IR_F32, 5, 2), NULL);
  int ids = input("ids", TY(IR_I32, C(2)));
  ir_graph_add_output(G, "e", op2(IR_OP_EMBED, t, ids, NULL));
  feed("ids", IR_I32, 1, DIMS(2), (int32_t[]){4, 5});
  expect_err("embedding 'embed.weight': id 5 at [1] out of range [0, 5)");
  fx_end();
}

Test(interp_err, take_index_beyond_bound_dim) {
  fx_begin();
  int Sy = ir_graph_add_symbol(G, "S", 8);
  int x = input("x", TY(IR_F32, C(2), S(Sy)));
  ir_graph_add_output(G, "y", op1(IR_OP_TAKE, x, &(IrAttrs){.axis = 1, .index = 3}));
  feed("x", IR_F32, 2, DIMS(2, 2), (float[]){1, 2, 3, 4});
  expect_err("take index 3 is out of range for axis 1 of size 2");
  fx_end();
}

Test(interp_err, malformed_graph) {
  fx_begin();
  int x = param("x", ir_type1(IR_F32, 3), NULL);
  int y = op1(IR_OP_RELU, x, NULL);
  G->nodes[y].type = ir_type1(IR_F32, 4); /* corrupted after building */
  ir_graph_add_output(G, "y", y);
  expect_err("%1 relu at t.tfm:7:3: malformed node: type f32[4], its shape rule says f32[3]");
  fx_end();
}

Test(interp_err, operand_not_earlier) {
  fx_begin();
  int x = param("x", ir_type1(IR_F32, 3), NULL);
  int y = op1(IR_OP_RELU, x, NULL);
  G->nodes[y].operands[0] = y;
  ir_graph_add_output(G, "y", y);
  expect_err("malformed node: operand 0 is %1");
  fx_end();
}

/* ==== a whole model: 2-layer post-norm encoder, d_model 128 ==== */

/* A param "p<N>" of type t filled with values in [-amp, amp). */
static int rand_param(IrType t, float amp) {
  float *data = arena_alloc(A, (size_t)type_numel(t) * sizeof(float));
  fill(data, type_numel(t), amp);
  return param(arena_printf(A, "p%d", WS.n), t, data);
}

Test(interp, small_encoder_runs_fast) {
  enum { V = 100, D = 128, H = 4, F = 512, L = 2, Bn = 3, Sn = 20 };
  fx_begin();
  int B = ir_graph_add_symbol(G, "B", 8), Sy = ir_graph_add_symbol(G, "S", 64);
  int tok = input("tokens", TY(IR_I32, S(B), S(Sy)));
  int pad = input("mask", TY(IR_BOOL, S(B), S(Sy)));
  int m = ir_build_typed(G, IR_OP_RESHAPE, (int[]){pad}, 1, NULL,
                         TY(IR_BOOL, S(B), C(1), S(Sy)), LOC);
  int x = op2(IR_OP_EMBED, rand_param(ir_type2(IR_F32, V, D), 1), tok, NULL);
  x = op1(IR_OP_SCALE, x, &(IrAttrs){.factor = sqrt((double)D)});
  int pos = ir_build_typed(G, IR_OP_ARANGE, NULL, 0, NULL, TY(IR_I32, S(Sy)), LOC);
  int pe = ir_build_typed(G, IR_OP_SINUSOID, (int[]){pos}, 1, NULL,
                          TY(IR_F32, S(Sy), C(D)), LOC);
  x = op2(IR_OP_ADD, x, pe, NULL);
  float wamp = 1.0f / sqrtf((float)D);
  for (int l = 0; l < L; l++) {
    int q = op3(IR_OP_LINEAR, x, rand_param(ir_type2(IR_F32, D, D), wamp),
                rand_param(ir_type1(IR_F32, D), wamp), NULL);
    int k = op3(IR_OP_LINEAR, x, rand_param(ir_type2(IR_F32, D, D), wamp),
                rand_param(ir_type1(IR_F32, D), wamp), NULL);
    int v = op3(IR_OP_LINEAR, x, rand_param(ir_type2(IR_F32, D, D), wamp),
                rand_param(ir_type1(IR_F32, D), wamp), NULL);
    int a = ir_build(G, IR_OP_ATTENTION, (int[]){q, k, v, m}, 4,
                     &(IrAttrs){.heads = H, .scale = 1 / sqrt((double)D / H)}, LOC);
    a = op3(IR_OP_LINEAR, a, rand_param(ir_type2(IR_F32, D, D), wamp),
            rand_param(ir_type1(IR_F32, D), wamp), NULL);
    x = op3(IR_OP_LAYERNORM, op2(IR_OP_ADD, x, a, NULL),
            rand_param(ir_type1(IR_F32, D), 1), rand_param(ir_type1(IR_F32, D), 1),
            &(IrAttrs){.eps = 1e-5});
    int f = op3(IR_OP_LINEAR, x, rand_param(ir_type2(IR_F32, F, D), wamp),
                rand_param(ir_type1(IR_F32, F), wamp), NULL);
    f = op1(IR_OP_GELU, f, NULL);
    f = op3(IR_OP_LINEAR, f, rand_param(ir_type2(IR_F32, D, F), 1.0f / sqrtf((float)F)),
            rand_param(ir_type1(IR_F32, D), wamp), NULL);
    x = op3(IR_OP_LAYERNORM, op2(IR_OP_ADD, x, f, NULL),
            rand_param(ir_type1(IR_F32, D), 1), rand_param(ir_type1(IR_F32, D), 1),
            &(IrAttrs){.eps = 1e-5, .unbiased = true});
  }
  int logits = op3(IR_OP_LINEAR, x, rand_param(ir_type2(IR_F32, V, D), wamp),
                   rand_param(ir_type1(IR_F32, V), wamp), NULL);
  ir_graph_add_output(G, "log_probs", op1(IR_OP_LOG_SOFTMAX, logits, NULL));
  ir_graph_add_output(G, "cls", op1(IR_OP_TANH, op1(IR_OP_TAKE, x,
                                                    &(IrAttrs){.axis = 1}), NULL));
  int32_t ids[Bn * Sn];
  uint8_t mask[Bn * Sn];
  for (int i = 0; i < Bn * Sn; i++) {
    ids[i] = (i * 37 + 11) % V;
    mask[i] = (i % Sn) < Sn - 3 * (i / Sn); /* lengths 20, 17, 14 */
  }
  feed("tokens", IR_I32, 2, DIMS(Bn, Sn), ids);
  feed("mask", IR_BOOL, 2, DIMS(Bn, Sn), mask);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  run_ok();
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
  cr_log_info("2-layer d_model=128 encoder, batch 3, length 20: %.1f ms", secs * 1e3);
  cr_assert(secs < 0.5, "took %.3f s", secs);
  const Tensor *lp = out_named("log_probs");
  EXPECT_DIMS(lp, Bn, Sn, V);
  const float *y = lp->data;
  for (int r = 0; r < Bn * Sn; r++) {
    double sum = 0;
    for (int j = 0; j < V; j++) {
      cr_assert(isfinite(y[r * V + j]));
      sum += exp(y[r * V + j]);
    }
    cr_assert(fabs(sum - 1) < 1e-5, "row %d: probabilities sum to %.9f", r, sum);
  }
  EXPECT_DIMS(out_named("cls"), Bn, D);
  fx_end();
}
