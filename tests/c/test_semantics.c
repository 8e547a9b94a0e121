/* tests/c/test_semantics.c — the printed C means what the loop IR means
 * (what the LLVM backend compiles), on a hand-built program that hits the
 * printer's corner cases, checked against values computed here:
 *   - a variable defined in a loop and read after it, a definition that
 *     reads its own variable, a variable never read (declared at the top /
 *     silenced, as the LLVM backend's zeroed allocas behave);
 *   - a loop bound changed inside the loop (evaluated once);
 *   - float min/max with NaN, select, compares (ordered and NE), negation,
 *     f64 math and casts both ways, infinities as constants;
 *   - int64 min/max, division, remainder, logical and, constants beyond
 *     32 bits, stores truncating to i32 and u8;
 *   - kernels that never run (a constant 0 extent; an extent that is 0 at
 *     run time) and so must not touch memory;
 *   - rt_linear with and without bias, at offsets inside its buffers.
 * Built with gcc and clang (-std=c99 -pedantic -Werror), and for aarch64
 * and s390x (big-endian) under qemu when those toolchains are installed. */
#include "c_test_util.h"
#include "ir/loop.h"

enum { N = 5, NMAX = 8 };
static const float xs[N] = {-1.5f, 0.0f, 2.5f, 0.75f, 3.25f};
static const float wts[32] = {0.5f, -1.0f, 2.0f,  1.5f, 0.25f, -0.5f, 3.0f, 1.0f, -2.0f,
                              0.0f, 4.0f,  0.125f, 0, 0, 0, 0,  /* w [4,3], padded */
                              10.0f, 20.0f, 30.0f, 40.0f};       /* bias [4] at 16 */

typedef struct Prog {
  Arena *a;
  LoopProgram *p;
  RtModelInfo info;
  RtTensorInfo in[1], out[7];
  RtWeightInfo w[2];
} Prog;

static LExpr *V(LoopProgram *p, LKernel *k, int v) { return lx_var(p, k, v); }

static void build(Prog *P) {
  Arena *a = P->a = arena_create();
  LoopProgram *p = P->p = loop_program_create(a, "corners");
  p->n_syms = 1;
  p->weights_floats = 32;
  p->arena_bytes = 128;
  int bx = loop_buffer_add(p, LB_INPUT, 0, 0, LE_F32, "x");
  int by = loop_buffer_add(p, LB_OUTPUT, 0, 0, LE_F32, "y");
  int bz = loop_buffer_add(p, LB_OUTPUT, 1, 0, LE_F32, "z");
  int bi = loop_buffer_add(p, LB_OUTPUT, 2, 0, LE_I32, "ii");
  int bu = loop_buffer_add(p, LB_OUTPUT, 3, 0, LE_U8, "u");
  int b4 = loop_buffer_add(p, LB_OUTPUT, 4, 0, LE_F32, "o4");
  int b5 = loop_buffer_add(p, LB_OUTPUT, 5, 0, LE_F32, "o5");
  int bw = loop_buffer_add(p, LB_WEIGHT, 0, 0, LE_F32, "w");
  int bb = loop_buffer_add(p, LB_WEIGHT, 0, 16, LE_F32, "bias");
  int ba = loop_buffer_add(p, LB_ARENA, 0, 0, LE_F32, "%a0");
  int bc = loop_buffer_add(p, LB_OUTPUT, 6, 0, LE_I32, "c");
  LExpr *Nx = lx_sym(p, 0);

  /* k0: y[i] = t + cnt + acc, t defined in a loop and read after it,
   * a bound changed in its loop, acc defined from itself */
  LKernel *k = loop_kernel_add(p, "k0_hoist", "hoist %0", -1);
  k->extent = Nx;
  int i = k->outer_var;
  int t = loop_var_new(p, k, LT_F32), j = loop_var_new(p, k, LT_I64);
  int lim = loop_var_new(p, k, LT_I64), cnt = loop_var_new(p, k, LT_I64);
  int j2 = loop_var_new(p, k, LT_I64), acc = loop_var_new(p, k, LT_F32);
  int blk = loop_var_new(p, k, LT_F32), unused = loop_var_new(p, k, LT_F32);
  LStmt *f = ls_for(p, j, lx_i(p, 0), lx_i(p, 3));
  ls_append(p, f, ls_let(p, t, LT_F32, lx_bin(p, LB_MUL, lx_load(p, bx, V(p, k, i)),
                                              lx_cast(p, LT_F32, V(p, k, j)))));
  ls_append(p, k->body, f);
  ls_append(p, k->body, ls_let(p, lim, LT_I64, lx_i(p, 3)));
  ls_append(p, k->body, ls_let(p, cnt, LT_I64, lx_i(p, 0)));
  LStmt *f2 = ls_for(p, j2, lx_i(p, 0), V(p, k, lim));
  ls_append(p, f2, ls_set(p, lim, lx_bin(p, LB_SUB, V(p, k, lim), lx_i(p, 1))));
  ls_append(p, f2, ls_set(p, cnt, lx_bin(p, LB_ADD, V(p, k, cnt), lx_i(p, 1))));
  ls_append(p, k->body, f2);
  ls_append(p, k->body, ls_let(p, acc, LT_F32, lx_bin(p, LB_ADD, V(p, k, acc), lx_f32(p, 1))));
  LStmt *b = ls_block(p);
  ls_append(p, b, ls_let(p, blk, LT_F32, lx_f32(p, 0.5)));
  ls_append(p, b, ls_let(p, unused, LT_F32, lx_f32(p, 7)));
  ls_append(p, b, ls_set(p, acc, lx_bin(p, LB_ADD, V(p, k, acc), V(p, k, blk))));
  ls_append(p, k->body, b);
  ls_append(p, k->body,
            ls_store(p, by, V(p, k, i),
                     lx_bin(p, LB_ADD, lx_bin(p, LB_ADD, V(p, k, t), lx_cast(p, LT_F32, V(p, k, cnt))),
                            V(p, k, acc))));

  /* k1: float operations */
  k = loop_kernel_add(p, "k1_float", "float %1", -1);
  k->extent = Nx;
  k->parallel = true;
  k->grain = 2;
  i = k->outer_var;
  int va = loop_var_new(p, k, LT_F32), vd = loop_var_new(p, k, LT_F64);
  int ve = loop_var_new(p, k, LT_F32), never = loop_var_new(p, k, LT_F32);
  ls_append(p, k->body, ls_let(p, va, LT_F32, lx_load(p, bx, V(p, k, i))));
  ls_append(p, k->body, ls_let(p, never, LT_F32, lx_f32(p, 1)));
  LExpr *A = V(p, k, va);
  LExpr *absa = lx_select(p, lx_bin(p, LB_LT, A, lx_f32(p, 0)), lx_un(p, LU_NEG, A), A);
  LExpr *e2 = lx_bin(p, LB_MIN, absa, lx_f32(p, NAN));
  LExpr *e3 = lx_bin(p, LB_MAX, e2, lx_f32(p, -INFINITY));
  ls_append(p, k->body, ls_let(p, ve, LT_F32, e3));
  LExpr *E = V(p, k, ve);
  ls_append(p, k->body, ls_let(p, vd, LT_F64, lx_cast(p, LT_F64, E)));
  LExpr *e4 = lx_cast(p, LT_F32, lx_un(p, LU_EXP, lx_bin(p, LB_MUL, V(p, k, vd), lx_f64(p, 0.5))));
  LExpr *e5 = lx_bin(p, LB_ADD,
                     lx_bin(p, LB_ADD, lx_un(p, LU_TANH, E), lx_un(p, LU_ERF, E)),
                     lx_bin(p, LB_ADD, lx_un(p, LU_LOG, lx_bin(p, LB_ADD, E, lx_f32(p, 1))),
                            lx_bin(p, LB_MUL, lx_un(p, LU_SIN, E), lx_un(p, LU_COS, E))));
  LExpr *e6 = lx_select(p, lx_bin(p, LB_NE, A, A), lx_f32(p, 1e30), lx_f32(p, 0));
  LExpr *e7 = lx_select(p, lx_bin(p, LB_LE, A, lx_f32(p, 2.5)), lx_f32(p, 1), lx_f32(p, 0));
  LExpr *e8 = lx_cast(p, LT_F32, lx_cast(p, LT_I64, lx_bin(p, LB_MUL, A, lx_f32(p, 10))));
  LExpr *e9 = lx_cast(p, LT_F32, lx_un(p, LU_SQRT, lx_bin(p, LB_ADD, V(p, k, vd), lx_f64(p, 1))));
  LExpr *e10 = lx_select(p, lx_bin(p, LB_EQ, A, lx_f32(p, 0)), lx_f32(p, 100), lx_f32(p, 0));
  ls_append(p, k->body,
            ls_store(p, bz, V(p, k, i),
                     lx_bin(p, LB_ADD,
                            lx_bin(p, LB_ADD, lx_bin(p, LB_ADD, e4, e5), lx_bin(p, LB_ADD, e6, e7)),
                            lx_bin(p, LB_ADD, lx_bin(p, LB_ADD, e8, e9), e10))));

  /* k2: int64 operations, truncating stores */
  k = loop_kernel_add(p, "k2_int", "int %2", -1);
  k->extent = Nx;
  k->parallel = true;
  i = k->outer_var;
  int q = loop_var_new(p, k, LT_I64);
  LExpr *I = V(p, k, i);
  ls_append(p, k->body,
            ls_let(p, q, LT_I64, lx_bin(p, LB_ADD, lx_bin(p, LB_MUL, I, lx_i(p, 7)), lx_i(p, 3))));
  LExpr *Q = V(p, k, q);
  LExpr *sum = lx_bin(p, LB_ADD, lx_bin(p, LB_MIN, lx_bin(p, LB_DIV, Q, lx_i(p, 2)), lx_i(p, 9)),
                      lx_bin(p, LB_MAX, lx_bin(p, LB_REM, Q, lx_i(p, 5)), lx_i(p, 2)));
  sum = lx_bin(p, LB_ADD, sum,
               lx_bin(p, LB_MUL,
                      lx_bin(p, LB_AND, lx_bin(p, LB_LT, I, lx_i(p, 3)), lx_bin(p, LB_NE, I, lx_i(p, 1))),
                      lx_i(p, 100)));
  sum = lx_bin(p, LB_ADD, sum, lx_bin(p, LB_MUL, lx_bin(p, LB_LE, I, lx_i(p, 2)), lx_i(p, 1000)));
  sum = lx_bin(p, LB_ADD, sum, lx_bin(p, LB_MUL, lx_bin(p, LB_EQ, Q, lx_i(p, 10)), lx_i(p, 10000)));
  sum = lx_bin(p, LB_SUB, lx_bin(p, LB_ADD, sum, lx_i(p, 5000000000LL)), lx_i(p, 4999999999LL));
  ls_append(p, k->body, ls_store(p, bi, I, sum));
  ls_append(p, k->body,
            ls_store(p, bu, I, lx_bin(p, LB_ADD, lx_bin(p, LB_MUL, Q, lx_i(p, 37)), lx_i(p, 250))));

  /* k3, k4: never run; they would overwrite y */
  k = loop_kernel_add(p, "k3_never", "never %3", -1);
  k->extent = lx_i(p, 0);
  ls_append(p, k->body, ls_store(p, by, lx_i(p, 0), lx_f32(p, 1e9)));
  k = loop_kernel_add(p, "k4_never", "never %4", -1);
  k->extent = lx_bin(p, LB_SUB, lx_sym(p, 0), lx_sym(p, 0));
  k->parallel = true;
  ls_append(p, k->body, ls_store(p, by, V(p, k, k->outer_var), lx_f32(p, 1e9)));

  /* k5: a0[i, j] = x[i] * (j + 1) */
  k = loop_kernel_add(p, "k5_fill", "fill %5", -1);
  k->extent = Nx;
  i = k->outer_var;
  j = loop_var_new(p, k, LT_I64);
  f = ls_for(p, j, lx_i(p, 0), lx_i(p, 3));
  ls_append(p, f, ls_store(p, ba, lx_bin(p, LB_ADD, lx_bin(p, LB_MUL, V(p, k, i), lx_i(p, 3)), V(p, k, j)),
                           lx_bin(p, LB_MUL, lx_load(p, bx, V(p, k, i)),
                                  lx_cast(p, LT_F32, lx_bin(p, LB_ADD, V(p, k, j), lx_i(p, 1))))));
  ls_append(p, k->body, f);

  /* k6: o4 = a0 w^T;  k7: o5 = a0 w[2:4]^T + bias[2:4] */
  k = loop_kernel_add(p, "k6_linear", "linear %6", -1);
  k->extent = lx_i(p, 1);
  LExpr *args6[19] = {lx_pool(p), Nx, lx_i(p, 4), lx_i(p, 3), lx_addr(p, ba, lx_i(p, 0)), lx_i(p, 3),
                      lx_addr(p, bw, lx_i(p, 0)), lx_null(p), lx_addr(p, b4, lx_i(p, 0)), lx_i(p, 4),
                      lx_i(p, 0), lx_f32(p, 1), lx_null(p), lx_i(p, 0), lx_i(p, 128),
                      lx_i(p, 2016), lx_i(p, 384), lx_i(p, 1 << 17), lx_i(p, 1 << 23)};
  ls_append(p, k->body, ls_call(p, LC_LINEAR, args6, 19));
  k = loop_kernel_add(p, "k7_linear", "linear %7", -1);
  k->extent = lx_i(p, 1);
  LExpr *args7[19] = {lx_pool(p), Nx, lx_i(p, 2), lx_i(p, 3), lx_addr(p, ba, lx_i(p, 0)), lx_i(p, 3),
                      lx_addr(p, bw, lx_i(p, 6)), lx_addr(p, bb, lx_i(p, 2)),
                      lx_addr(p, b5, lx_i(p, 0)), lx_i(p, 2), lx_i(p, 0), lx_f32(p, 1), lx_null(p),
                      lx_i(p, 0), lx_i(p, 128), lx_i(p, 2016), lx_i(p, 384), lx_i(p, 1), lx_i(p, 0)};
  ls_append(p, k->body, ls_call(p, LC_LINEAR, args7, 19));

  /* k8: narrow loads compared with constants at the edges of their range */
  k = loop_kernel_add(p, "k8_edges", "edges %8", -1);
  k->extent = Nx;
  I = V(p, k, k->outer_var);
  LExpr *U = lx_load(p, bu, I), *II = lx_load(p, bi, I);
  LExpr *c = lx_bin(p, LB_ADD, lx_bin(p, LB_LT, U, lx_i(p, 0)),
                    lx_bin(p, LB_MUL, lx_bin(p, LB_LE, U, lx_i(p, 255)), lx_i(p, 10)));
  c = lx_bin(p, LB_ADD, c, lx_bin(p, LB_MUL, lx_bin(p, LB_EQ, II, lx_i(p, 5000000000LL)), lx_i(p, 100)));
  c = lx_bin(p, LB_ADD, c, lx_bin(p, LB_MUL, lx_bin(p, LB_NE, U, lx_i(p, 0)), lx_i(p, 1000)));
  c = lx_bin(p, LB_ADD, c, lx_bin(p, LB_MUL, lx_bin(p, LB_LT, lx_i(p, 255), U), lx_i(p, 10000)));
  ls_append(p, k->body, ls_store(p, bc, I, c));

  /* the description */
  RtModelInfo *m = &P->info;
  memset(m, 0, sizeof *m);
  m->abi_version = RT_ABI_VERSION;
  m->name = "corners";
  m->n_syms = 1;
  m->sym_names[0] = "N";
  m->sym_max[0] = NMAX;
  RtDim dn = {0, 0};
  P->in[0] = (RtTensorInfo){.name = "x", .elem = RT_ELEM_F32, .rank = 1, .dims = {dn}};
  const char *onames[7] = {"y", "z", "ii", "u", "o4", "o5", "c"};
  RtElem oel[7] = {RT_ELEM_F32, RT_ELEM_F32, RT_ELEM_I32, RT_ELEM_U8,
                   RT_ELEM_F32, RT_ELEM_F32, RT_ELEM_I32};
  for (int o = 0; o < 7; o++)
    P->out[o] = (RtTensorInfo){.name = onames[o], .elem = oel[o], .rank = 1, .dims = {dn}};
  P->out[4].rank = P->out[5].rank = 2;
  P->out[4].dims[1] = (RtDim){-1, 4};
  P->out[5].dims[1] = (RtDim){-1, 2};
  P->w[0] = (RtWeightInfo){.name = "w", .rank = 2, .shape = {4, 3}, .offset = 0};
  P->w[1] = (RtWeightInfo){.name = "bias", .rank = 1, .shape = {4}, .offset = 16};
  m->n_inputs = 1;
  m->inputs = P->in;
  m->n_outputs = 7;
  m->outputs = P->out;
  m->n_weights = 2;
  m->weights = P->w;
  m->weights_floats = 32;
  m->layout_hash = rt_model_layout_hash(P->w, 2);
  m->arena_bytes = 128;
  m->pad_id = -1;
}

/* the same computations in C */
static void reference(float *y, float *z, float *ii, float *u, float *o4, float *o5, float *c) {
  for (int i = 0; i < N; i++) {
    float a = xs[i];
    y[i] = a * 2.0f + 3.0f + ((float)(i + 1) + 0.5f * (float)(i + 1));
    float e = a < 0 ? -a : a;
    double d = e;
    float zi = (float)exp(d * 0.5) + ((tanhf(e) + erff(e)) + (logf(e + 1.0f) + sinf(e) * cosf(e)));
    zi += 0.0f + (a <= 2.5f ? 1.0f : 0.0f);
    zi += (float)(int64_t)(a * 10.0f) + (float)sqrt(d + 1.0);
    zi += a == 0.0f ? 100.0f : 0.0f;
    z[i] = zi;
    int64_t q = i * 7 + 3;
    int64_t s = (q / 2 < 9 ? q / 2 : 9) + (q % 5 > 2 ? q % 5 : 2) + (i < 3 && i != 1) * 100 +
                (i <= 2) * 1000 + (q == 10) * 10000 + 1;
    ii[i] = (float)(int32_t)s;
    u[i] = (float)(uint8_t)(q * 37 + 250);
    c[i] = 10.0f + (u[i] != 0 ? 1000.0f : 0.0f);
    float a0[3] = {a, a * 2.0f, a * 3.0f};
    for (int n = 0; n < 4; n++)
      o4[i * 4 + n] = a0[0] * wts[n * 3] + a0[1] * wts[n * 3 + 1] + a0[2] * wts[n * 3 + 2];
    for (int n = 0; n < 2; n++)
      o5[i * 2 + n] = a0[0] * wts[(n + 2) * 3] + a0[1] * wts[(n + 2) * 3 + 1] +
                      a0[2] * wts[(n + 2) * 3 + 2] + wts[16 + 2 + n];
  }
}

static void run_with(const CtTool *t) {
  Prog P;
  build(&P);
  char *dir = ct_mkdtemp("sem");
  char proj[512], err[1024];
  snprintf(proj, sizeof proj, "%s/corners", dir);
  CEmitOptions opt = {false, CT_RUNTIME_DIR};
  cr_assert_eq(c_emit_project(P.p, &P.info, wts, &opt, proj, err, sizeof err), 0, "%s", err);
  ct_build_runtime(t, proj, dir);
  ct_build_driver(t, proj, dir);
  char path[512];
  snprintf(path, sizeof path, "%s/in.safetensors", dir);
  RtStWrite in = {"x", RT_F32, 1, {N}, xs};
  cr_assert_eq(rt_st_write(path, &in, 1, NULL, 0, err, sizeof err), 0, "%s", err);
  for (int threads = 1; threads <= 3; threads += 2) {
    CT_RUN("cd %s && %s ./driver corners.weights ../in.safetensors ../out.safetensors %d", proj,
           t->run, threads);
    float want[7][N * 4];
    reference(want[0], want[1], want[2], want[3], want[4], want[5], want[6]);
    const char *names[7] = {"y", "z", "ii", "u", "o4", "o5", "c"};
    int64_t counts[7] = {N, N, N, N, N * 4, N * 2, N};
    snprintf(path, sizeof path, "%s/out.safetensors", dir);
    for (int o = 0; o < 7; o++) {
      int64_t n;
      float *got = ct_read_output(path, names[o], &n);
      cr_assert_eq(n, counts[o], "%s: %s has %lld elements", t->name, names[o], (long long)n);
      for (int64_t e = 0; e < n; e++) {
        float w = want[o][e], g = got[e];
        cr_assert(fabsf(g - w) <= 1e-5f * (1 + fabsf(w)), "%s, %d threads: %s[%lld] = %.9g, want %.9g",
                  t->name, threads, names[o], (long long)e, g, w);
      }
      free(got);
    }
  }
  arena_destroy(P.a);
  ct_rmdir(dir);
}

/* The printed kernels declare what they should where they should. */
Test(semantics, printed_shape) {
  Prog P;
  build(&P);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  c_emit_model(P.p, &P.info, f);
  fclose(f);
  /* t is read after its loop: declared once at the top, zeroed */
  cr_assert(strstr(buf, "  float v1 = 0;\n"), "%s", buf);
  /* the bound lim is assigned in its loop: evaluated once */
  cr_assert(strstr(buf, "for (int64_t v5 = 0, v5_end = v3; v5 < v5_end; ++v5)"), "%s", buf);
  /* acc reads itself: hoisted; blk lives in its block */
  cr_assert(strstr(buf, "  float v6 = 0;\n"), "%s", buf);
  cr_assert(strstr(buf, "float v7 = 0.5f;"), "%s", buf);
  cr_assert(strstr(buf, "float v8 = 7.0f;\n      (void)v8;"), "%s", buf);
  cr_assert(strstr(buf, "fminf(") && strstr(buf, "fmaxf(") && strstr(buf, "(-INFINITY)") &&
                strstr(buf, "NAN") && strstr(buf, "tfmc_min_i64(") && strstr(buf, "INT64_C(5000000000)"),
            "%s", buf);
  /* every kernel goes through the runtime, which skips extents <= 0 */
  cr_assert(strstr(buf, "    rt_kernel_run(args, 3, k3_never, (void *)ctx, 0, 1, 0);\n") &&
                strstr(buf, "    rt_kernel_run(args, 4, k4_never, (void *)ctx, s0 - s0, 1, 1);\n"),
            "%s", buf);
  cr_assert(strstr(buf, "rt_linear(args->pool, s0, 2, 3, b9, 3, b7 + 6, b8 + 2, b6, 2, 0, 1.0f, NULL, 0, 128, 2016, 384, 1, 0);"), "%s", buf);
  cr_assert(strstr(buf, "b3[v0] = (int32_t)"), "%s", buf);
  cr_assert(strstr(buf, "b4[v0] = (uint8_t)"), "%s", buf);
  /* edge compares go through tfmc_i64; the mask-style != 0 does not */
  cr_assert(strstr(buf, "(int64_t)(tfmc_i64(b4[v0]) < 0)") && strstr(buf, "(int64_t)((int64_t)b4[v0] != 0)") &&
                strstr(buf, "(int64_t)(255 < tfmc_i64(b4[v0]))"),
            "%s", buf);
  free(buf);
  arena_destroy(P.a);
}

Test(semantics, gcc, .timeout = 300) {
  CtTool t = {"gcc", "gcc", "ar", "", false};
  run_with(&t);
}

Test(semantics, clang_no_blas, .timeout = 300) {
  if (!ct_have("clang")) cr_skip_test("clang is not installed (Debian package clang)");
  CtTool t = {"clang", "clang", "ar", "", true};
  run_with(&t);
}

Test(semantics, aarch64, .timeout = 600) {
  if (!ct_have("aarch64-linux-gnu-gcc") || !ct_have("qemu-aarch64"))
    cr_skip_test("no aarch64 cross toolchain (Debian: gcc-aarch64-linux-gnu, qemu-user)");
  CtTool t = {"aarch64", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-ar",
              "qemu-aarch64 -L /usr/aarch64-linux-gnu", true};
  run_with(&t);
}

Test(semantics, s390x_big_endian, .timeout = 600) {
  if (!ct_have("s390x-linux-gnu-gcc") || !ct_have("qemu-s390x"))
    cr_skip_test("no s390x cross toolchain (Debian: gcc-s390x-linux-gnu, qemu-user)");
  CtTool t = {"s390x", "s390x-linux-gnu-gcc", "s390x-linux-gnu-ar",
              "qemu-s390x -L /usr/s390x-linux-gnu", true};
  run_with(&t);
}
