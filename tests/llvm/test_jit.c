/* tests/llvm/test_jit.c — the LLVM backend's JIT: hand-built loop programs
 * compiled with ORC LLJIT and run on hand-made RtRunArgs, compared with C
 * references; malformed loop IR must give messages, not crashes. */
#include "tests/llvm/llvm_cases.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static LlvmJit *compile_ok(const LoopProgram *p, const LlvmOptions *o, RtModelRunFn *run) {
  LlvmJit *jit = NULL;
  char err[2048] = "";
  int rc = llvm_jit_compile(p, o, &jit, run, err, sizeof err);
  cr_assert_eq(rc, 0, "compile failed: %s", err);
  cr_assert(jit && *run);
  return jit;
}

static void run_once(const LoopProgram *p, const LlvmOptions *o, Case *c, RtPool *pool) {
  RtModelRunFn run;
  LlvmJit *jit = compile_ok(p, o, &run);
  RtRunArgs a = case_args(c, pool);
  run(&a);
  llvm_jit_destroy(jit);
}

static void expect_close(const float *got, const float *want, int64_t n, double rel,
                         const char *what) {
  int64_t i = first_mismatch(got, want, n, rel);
  cr_expect_eq(i, -1, "%s: element %lld: got %.9g want %.9g", what, (long long)i,
               i >= 0 ? got[i] : 0.0, i >= 0 ? want[i] : 0.0);
}

Test(llvm_jit, gelu_erf_elementwise) {
  Arena *a = arena_create();
  Case c;
  case_gelu(&c, 13, 100); /* 100: not a multiple of the vector width */
  float *want = malloc(13 * 100 * 4);
  ref_gelu(c.in[0], want, 13 * 100);
  run_once(prog_gelu(a, 100, false), NULL, &c, NULL);
  expect_close(c.out[0], want, 13 * 100, 1e-6, "gelu serial");
  case_clear_outputs(&c);
  run_once(prog_gelu(a, 100, true), NULL, &c, NULL); /* parallel kernel, NULL pool */
  expect_close(c.out[0], want, 13 * 100, 1e-6, "gelu parallel, no pool");
  free(want);
  case_free(&c);
  arena_destroy(a);
}

Test(llvm_jit, every_opt_level_agrees) {
  Arena *a = arena_create();
  Case c;
  case_gelu(&c, 5, 33);
  float *want = malloc(5 * 33 * 4);
  ref_gelu(c.in[0], want, 5 * 33);
  for (int lvl = 0; lvl <= 3; lvl++) {
    LlvmOptions o = {.opt_level = lvl};
    case_clear_outputs(&c);
    run_once(prog_gelu(a, 33, true), &o, &c, NULL);
    char what[32];
    snprintf(what, sizeof what, "gelu -O%d", lvl);
    expect_close(c.out[0], want, 5 * 33, 1e-6, what);
  }
  free(want);
  case_free(&c);
  arena_destroy(a);
}

Test(llvm_jit, softmax_reassoc_reductions) {
  Arena *a = arena_create();
  const int64_t rows = 11, d = 77;
  Case c;
  case_softmax(&c, rows, d);
  float *want = malloc((size_t)(rows * d) * 4);
  ref_softmax(c.in[0], want, rows, d);
  run_once(prog_softmax(a, d), NULL, &c, NULL);
  expect_close(c.out[0], want, rows * d, 1e-6, "softmax");
  for (int64_t r = 0; r < rows; r++) {
    double s = 0;
    for (int64_t j = 0; j < d; j++)
      s += c.out[0][r * d + j];
    cr_expect(fabs(s - 1) < 1e-5, "row %lld sums to %.9g", (long long)r, s);
  }
  free(want);
  case_free(&c);
  arena_destroy(a);
}

Test(llvm_jit, integer_loads_gather_and_mask) {
  Arena *a = arena_create();
  Case c;
  case_gather(&c);
  float rows[GATHER_T * GATHER_D], wide[2 * GATHER_T];
  ref_gather(&c, rows, wide);
  run_once(prog_gather(a), NULL, &c, NULL);
  expect_close(c.out[0], rows, GATHER_T * GATHER_D, 0, "gathered rows");
  expect_close(c.out[1], wide, 2 * GATHER_T, 0, "widened ids / mask / truncated stores");
  cr_expect_eq(c.out[1][4], -5.0f, "i32 loads sign-extend");
  const int32_t *ids = c.in[0];
  cr_expect_eq(c.out[1][7], (float)ids[7] + 200000.0f, "u8 loads zero-extend");
  cr_expect_eq(c.out[1][GATHER_T + 7], (float)(3 * ids[7] - 7) + 1000.0f * 194.0f,
               "u8 stores truncate");
  case_free(&c);
  arena_destroy(a);
}

Test(llvm_jit, nested_loops_with_symbol_bounds) {
  Arena *a = arena_create();
  Case c;
  case_nested(&c, 12, 10);
  RtModelRunFn run;
  LlvmJit *jit = compile_ok(prog_nested(a), NULL, &run);
  float grid[120], tri[120];
  const int64_t dims[][2] = {{12, 10}, {3, 7}, {10, 4}, {1, 1}};
  for (size_t t = 0; t < sizeof dims / sizeof *dims; t++) {
    c.syms[0] = dims[t][0];
    c.syms[1] = dims[t][1];
    case_clear_outputs(&c);
    RtRunArgs args = case_args(&c, NULL);
    run(&args);
    ref_nested(dims[t][0], dims[t][1], grid, tri);
    int64_t n = dims[t][0] * dims[t][1];
    expect_close(c.out[0], grid, n, 0, "grid");
    expect_close(c.out[1], tri, n, 0, "triangle");
    for (int64_t i = n; i < 120; i++)
      cr_expect(c.out[0][i] == 0 && c.out[1][i] == 0, "wrote past the bound dims at %lld",
                (long long)i);
  }
  /* extent 0: the kernels must not run */
  c.syms[0] = 0;
  c.syms[1] = 5;
  for (int i = 0; i < 120; i++)
    c.out[0][i] = c.out[1][i] = 42;
  RtRunArgs args = case_args(&c, NULL);
  run(&args);
  for (int i = 0; i < 120; i++)
    cr_expect(c.out[0][i] == 42 && c.out[1][i] == 42);
  llvm_jit_destroy(jit);
  case_free(&c);
  arena_destroy(a);
}

Test(llvm_jit, select_cast_f64_and_every_operator) {
  Arena *a = arena_create();
  Case c;
  case_ops(&c);
  float want[OPS_N * OPS_COLS];
  ref_ops(c.in[0], want);
  run_once(prog_ops(a), NULL, &c, NULL);
  for (int col = 0; col < OPS_COLS; col++)
    for (int i = 0; i < OPS_N; i++) {
      float g = c.out[0][i * OPS_COLS + col], w = want[i * OPS_COLS + col];
      cr_expect(fabs((double)g - w) <= 1e-6 * fmax(1, fabs(w)),
                "column %d row %d (x=%.9g): got %.9g want %.9g", col, i, ((float *)c.in[0])[i], g,
                w);
    }
  case_free(&c);
  arena_destroy(a);
}

Test(llvm_jit, rt_linear_call) {
  Arena *a = arena_create();
  Case c;
  case_linear(&c);
  float y0[LIN_M * LIN_LDY], y1[(LIN_M - 1) * LIN_N];
  ref_linear(&c, y0, y1);
  RtPool *pool = rt_pool_create(2);
  run_once(prog_linear(a), NULL, &c, pool);
  expect_close(c.out[0], y0, LIN_M * LIN_LDY, 1e-5, "linear with bias");
  expect_close(c.out[1], y1, (LIN_M - 1) * LIN_N, 1e-5, "linear without bias, null pool");
  /* the padding columns of y0 stay untouched */
  for (int m = 0; m < LIN_M; m++)
    for (int n = LIN_N; n < LIN_LDY; n++)
      cr_expect_eq(c.out[0][m * LIN_LDY + n], 0.0f);
  rt_pool_destroy(pool);
  case_free(&c);
  arena_destroy(a);
}

Test(llvm_jit, parallel_kernels_on_a_pool) {
  Arena *a = arena_create();
  const int64_t rows = 1001, d = 64;
  RtPool *pool = rt_pool_create(4);
  cr_assert(pool);
  Case c;
  case_softmax(&c, rows, d);
  float *want = malloc((size_t)(rows * d) * 4);
  ref_softmax(c.in[0], want, rows, d);
  RtModelRunFn run;
  LlvmJit *jit = compile_ok(prog_softmax(a, d), NULL, &run);
  RtRunArgs args = case_args(&c, pool);
  run(&args);
  expect_close(c.out[0], want, rows * d, 1e-6, "softmax on 4 threads");
  float *serial = malloc((size_t)(rows * d) * 4);
  memcpy(serial, c.out[0], (size_t)(rows * d) * 4);
  case_clear_outputs(&c);
  args = case_args(&c, NULL);
  run(&args);
  cr_expect_eq(memcmp(serial, c.out[0], (size_t)(rows * d) * 4), 0, "pool and serial runs differ");
  llvm_jit_destroy(jit);

  /* the grid kernel is parallel with grain 1: every row written exactly once */
  Case g;
  case_nested(&g, 97, 5);
  run_once(prog_nested(a), NULL, &g, pool);
  float grid[97 * 5], tri[97 * 5];
  ref_nested(97, 5, grid, tri);
  expect_close(g.out[0], grid, 97 * 5, 0, "parallel grid");
  case_free(&g);
  free(serial);
  free(want);
  case_free(&c);
  rt_pool_destroy(pool);
  arena_destroy(a);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

Test(llvm_jit, two_hundred_kernels, .timeout = 300) {
  Arena *a = arena_create();
  const int n = 200;
  const int64_t rows = 8;
  LoopProgram *p = prog_chain(a, n, rows);
  Case c;
  memset(&c, 0, sizeof c);
  c.syms[0] = rows;
  float *x = case_input(&c, rows * CHAIN_D * 4);
  fill_uniform(x, rows * CHAIN_D, 7, -2, 2);
  case_output(&c, rows * CHAIN_D);
  case_arena(&c, p->arena_bytes);
  for (int lvl = 3; lvl >= 0; lvl -= 3) {
    LlvmOptions o = {.opt_level = lvl};
    double t0 = now_s();
    RtModelRunFn run;
    LlvmJit *jit = compile_ok(p, &o, &run);
    double t1 = now_s();
    RtRunArgs args = case_args(&c, NULL);
    run(&args);
    double t2 = now_s();
    fprintf(stderr, "llvm_jit: %d kernels: compile -O%d %.3f s, run %.6f s\n", n, lvl, t1 - t0,
            t2 - t1);
    llvm_jit_destroy(jit);
  }
  float *want = malloc((size_t)(rows * CHAIN_D) * 4);
  ref_chain(x, want, n, rows);
  expect_close(c.out[0], want, rows * CHAIN_D, 1e-4, "200-kernel chain");
  free(want);
  case_free(&c);
  arena_destroy(a);
}

/* one LLVMContext per compile: compiles on two threads at once */
static void *compile_thread(void *arg) {
  int seed = *(int *)arg;
  Arena *a = arena_create();
  Case c;
  case_softmax(&c, 9, 40 + seed);
  float *want = malloc((size_t)(9 * (40 + seed)) * 4);
  ref_softmax(c.in[0], want, 9, 40 + seed);
  LlvmJit *jit = NULL;
  RtModelRunFn run;
  char err[512];
  intptr_t bad = 1;
  if (!llvm_jit_compile(prog_softmax(a, 40 + seed), NULL, &jit, &run, err, sizeof err)) {
    RtRunArgs args = case_args(&c, NULL);
    run(&args);
    bad = first_mismatch(c.out[0], want, 9 * (40 + seed), 1e-6) >= 0 ? 2 : 0;
    llvm_jit_destroy(jit);
  }
  free(want);
  case_free(&c);
  arena_destroy(a);
  return (void *)bad;
}

Test(llvm_jit, concurrent_compiles) {
  pthread_t th[2];
  int seeds[2] = {1, 2};
  for (int i = 0; i < 2; i++)
    cr_assert_eq(pthread_create(&th[i], NULL, compile_thread, &seeds[i]), 0);
  for (int i = 0; i < 2; i++) {
    void *r;
    pthread_join(th[i], &r);
    cr_expect_eq((intptr_t)r, 0, "thread %d failed (%d)", i, (int)(intptr_t)r);
  }
}

Test(llvm_jit, empty_program_runs) {
  Arena *a = arena_create();
  RtModelRunFn run;
  LlvmJit *jit = compile_ok(loop_program_create(a, "empty"), NULL, &run);
  RtRunArgs args = {0};
  run(&args);
  llvm_jit_destroy(jit);
  arena_destroy(a);
}

/* ---- malformed loop IR: a message, never a crash ---- */

static void expect_error(const LoopProgram *p, const LlvmOptions *o, const char *fragment) {
  LlvmJit *jit = NULL;
  RtModelRunFn run = NULL;
  char err[1024] = "";
  int rc = llvm_jit_compile(p, o, &jit, &run, err, sizeof err);
  cr_expect_neq(rc, 0, "expected an error mentioning '%s'", fragment);
  cr_expect(!jit && !run);
  cr_expect(strstr(err, fragment), "message '%s' lacks '%s'", err, fragment);
  if (!rc)
    llvm_jit_destroy(jit);
}

/* a one-kernel program y[i] = x[i], handing out its pieces for corruption */
static LoopProgram *tiny(Arena *a, LKernel **k, LStmt **store) {
  LoopProgram *p = loop_program_create(a, "tiny");
  p->n_syms = 1;
  int x = loop_buffer_add(p, LB_INPUT, 0, 0, LE_F32, "x");
  int y = loop_buffer_add(p, LB_OUTPUT, 0, 0, LE_F32, "y");
  *k = loop_kernel_add(p, "k0_copy", "copy", -1);
  (*k)->extent = lx_sym(p, 0);
  *store =
      ls_store(p, y, lx_var(p, *k, (*k)->outer_var), lx_load(p, x, lx_var(p, *k, (*k)->outer_var)));
  ls_append(p, (*k)->body, *store);
  return p;
}

Test(llvm_jit, malformed_programs_are_errors) {
  Arena *a = arena_create();
  LKernel *k;
  LStmt *st;
  LoopProgram *p;

  p = tiny(a, &k, &st);
  st->value->buf = 99;
  expect_error(p, NULL, "k0_copy: buffer index b99 out of range");

  p = tiny(a, &k, &st);
  st->index->var = 7;
  expect_error(p, NULL, "variable v7 out of range");

  p = tiny(a, &k, &st);
  st->value = lx_addr(p, 0, lx_i(p, 0));
  expect_error(p, NULL, "store to b1 needs a f32 value");

  p = tiny(a, &k, &st);
  st->value = lx_cast(p, LT_F32, lx_addr(p, 0, lx_i(p, 0)));
  expect_error(p, NULL, "outside a call argument");

  p = tiny(a, &k, &st);
  k->extent = lx_var(p, k, k->outer_var);
  expect_error(p, NULL, "outside a kernel");

  p = tiny(a, &k, &st);
  k->extent = lx_sym(p, 3);
  expect_error(p, NULL, "symbol sym3 out of range");

  p = tiny(a, &k, &st);
  k->extent = NULL;
  expect_error(p, NULL, "extent is missing");

  p = tiny(a, &k, &st);
  k->parallel = true;
  k->grain = 0;
  expect_error(p, NULL, "grain 0 is not positive");

  p = tiny(a, &k, &st);
  loop_kernel_add(p, "k0_copy", "again", -1)->extent = lx_i(p, 1);
  expect_error(p, NULL, "two kernels have this name");

  p = tiny(a, &k, &st);
  k->name = "9lives";
  expect_error(p, NULL, "not a C identifier");

  p = tiny(a, &k, &st);
  k->name = "expf";
  expect_error(p, NULL, "reserved");

  p = tiny(a, &k, &st);
  {
    int f = loop_var_new(p, k, LT_F32);
    ls_append(p, k->body, ls_set(p, f, lx_i(p, 1)));
  }
  expect_error(p, NULL, "set v1 is f32, given i64");

  p = tiny(a, &k, &st);
  {
    LExpr *args[3] = {lx_pool(p), lx_i(p, 1), lx_i(p, 1)};
    ls_append(p, k->body, ls_call(p, LC_LINEAR, args, 3));
  }
  expect_error(p, NULL, "rt_linear takes 12 arguments");

  p = tiny(a, &k, &st);
  {
    int ids = loop_buffer_add(p, LB_INPUT, 1, 0, LE_I32, "ids");
    LExpr *args[12] = {lx_pool(p),
                       lx_i(p, 1),
                       lx_i(p, 1),
                       lx_i(p, 1),
                       lx_addr(p, ids, lx_i(p, 0)),
                       lx_i(p, 1),
                       lx_addr(p, 0, lx_i(p, 0)),
                       lx_null(p),
                       lx_addr(p, 1, lx_i(p, 0)),
                       lx_i(p, 1),
                       lx_i(p, 1 << 17),
                       lx_i(p, 1 << 23)};
    ls_append(p, k->body, ls_call(p, LC_LINEAR, args, 12));
  }
  expect_error(p, NULL, "not f32");

  p = tiny(a, &k, &st);
  p->bufs[0].kind = LB_KIND_COUNT;
  expect_error(p, NULL, "unknown kind");

  p = tiny(a, &k, &st);
  st->value = lx_un(p, LU_EXP, lx_f32(p, 1));
  ((LExpr *)st->value)->op = 99;
  expect_error(p, NULL, "unknown unary operator 99");

  p = tiny(a, &k, &st);
  {
    LExpr *e = lx_bin(p, LB_ADD, lx_f32(p, 1), lx_f32(p, 2));
    e->op = LB_REM;
    st->value = e;
  }
  expect_error(p, NULL, "remainder on floats");

  p = tiny(a, &k, &st);
  {
    int j = loop_var_new(p, k, LT_I64);
    LStmt *outer = ls_for(p, j, lx_i(p, 0), lx_i(p, 4));
    ls_append(p, outer, ls_for(p, j, lx_i(p, 0), lx_i(p, 2)));
    ls_append(p, k->body, outer);
  }
  expect_error(p, NULL, "v1 drives two nested loops");

  p = tiny(a, &k, &st);
  ls_append(p, k->body, ls_set(p, k->outer_var, lx_i(p, 0)));
  expect_error(p, NULL, "assigns v0 inside the loop it drives");

  p = tiny(a, &k, &st);
  LlvmOptions bad = {.opt_level = 7};
  expect_error(p, &bad, "optimisation level 7");

  LlvmOptions no64 = {.opt_level = 2, .features = "+avx2,-64bit"};
  expect_error(p, &no64, "disable 64-bit mode");

  /* an unknown CPU name: LLVM warns on stderr and generates generic x86-64
   * code (without the explicit +64bit feature it would abort the process) */
  LlvmOptions nocpu = {.opt_level = 2, .cpu = "no-such-cpu-xyz"};
  RtModelRunFn run;
  LlvmJit *jit = compile_ok(prog_gelu(a, 20, false), &nocpu, &run);
  Case c;
  case_gelu(&c, 3, 20);
  float want[60];
  ref_gelu(c.in[0], want, 60);
  RtRunArgs args = case_args(&c, NULL);
  run(&args);
  expect_close(c.out[0], want, 60, 1e-6, "gelu on a generic CPU");
  llvm_jit_destroy(jit);
  case_free(&c);
  arena_destroy(a);
}
