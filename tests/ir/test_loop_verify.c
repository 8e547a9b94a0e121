/* tests/ir/test_loop_verify.c — the loop IR verifier (ir/loop_verify.c):
 * every rule with a program that breaks it and the message it gets, a valid
 * hand-built program, and every example spec lowered to loop IR (with and
 * without the graph passes) verifying.
 *
 * The malformed programs the LLVM and C backends' tests used to feed their
 * emitters live here now; those tests keep one case each to show their
 * entry points still refuse a program the verifier rejects. */
#include "frontend/spec.h"
#include "ir/loop.h"
#include "passes/passes.h"
#include "runtime/rt_model.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>

static void refused(const LoopProgram *p, const char *fragment) {
  char err[512] = "";
  cr_expect(!loop_program_verify(p, err, sizeof err), "accepted; expected '%s'", fragment);
  cr_expect(strstr(err, fragment), "message '%s' lacks '%s'", err, fragment);
}

static void accepted(const LoopProgram *p) {
  char err[512] = "";
  cr_expect(loop_program_verify(p, err, sizeof err), "refused: %s", err);
}

/* out[i] = in[i] * w[0] through a variable: a valid program the cases
 * below break.
 *   b0 input 0 f32, b1 output 0 f32, b2 weights +0 f32, b3 arena +0 f32
 *   kernel 0 k0_mul: v0 outer, v1 = tv (f32) */
typedef struct Tiny {
  Arena *a;
  LoopProgram *p;
  LKernel *k;
  LStmt *store;
  int bin, bout, bw, ba, bp, bpb, bpi, tv;
} Tiny;

static Tiny tiny(void) {
  Tiny t;
  t.a = arena_create();
  LoopProgram *p = t.p = loop_program_create(t.a, "tiny");
  p->n_syms = 1;
  p->weights_floats = 16;
  p->arena_bytes = 128;
  t.bin = loop_buffer_add(p, LB_INPUT, 0, 0, LE_F32, "in");
  t.bout = loop_buffer_add(p, LB_OUTPUT, 0, 0, LE_F32, "out");
  t.bw = loop_buffer_add(p, LB_WEIGHT, 0, 0, LE_F32, "w");
  t.ba = loop_buffer_add(p, LB_ARENA, 0, 0, LE_F32, "tmp");
  t.bp = t.bpb = t.bpi = -1;
  LKernel *k = t.k = loop_kernel_add(p, "k0_mul", "mul", 0);
  k->extent = lx_sym(p, 0);
  t.tv = loop_var_new(p, k, LT_F32);
  ls_append(p, k->body, ls_let(p, t.tv, LT_F32, lx_load(p, t.bw, lx_i(p, 0))));
  t.store = ls_store(p, t.bout, lx_var(p, k, k->outer_var),
                     lx_bin(p, LB_MUL, lx_load(p, t.bin, lx_var(p, k, k->outer_var)),
                            lx_var(p, k, t.tv)));
  ls_append(p, k->body, t.store);
  return t;
}

#define OUTER(t) lx_var((t).p, (t).k, (t).k->outer_var)

static LExpr *addr(Tiny *t, int buf) { return lx_addr(t->p, buf, lx_i(t->p, 0)); }

/* The next buffer, once: weights +16 f32 panels[1,1] (16 more floats of
 * weights), for rt_linear_packed's w. */
static int panels_buf(Tiny *t) {
  if (t->bp < 0) {
    t->bp = loop_buffer_add(t->p, LB_WEIGHT, 0, 16, LE_F32, "wp");
    t->p->bufs[t->bp].layout = LW_PANELS;
    t->p->bufs[t->bp].rows = t->p->bufs[t->bp].cols = 1;
    if (t->p->weights_floats < 32) t->p->weights_floats = 32;
  }
  return t->bp;
}

/* The next buffer, once: weights +48 f32 panels_bf16[1,1] (16 floats past
 * the 48 the weights then hold), for rt_linear_packed_bf16's w. */
static int panels_bf16_buf(Tiny *t) {
  if (t->bpb < 0) {
    t->bpb = loop_buffer_add(t->p, LB_WEIGHT, 0, 48, LE_F32, "wb");
    t->p->bufs[t->bpb].layout = LW_PANELS_BF16;
    t->p->bufs[t->bpb].rows = t->p->bufs[t->bpb].cols = 1;
    if (t->p->weights_floats < 64) t->p->weights_floats = 64;
  }
  return t->bpb;
}

/* The next buffer, once: weights +64 f32 panels_i8[1,1] (48 floats: 16
 * columns of 4 bytes, then 16 scales and 16 sums), for rt_linear_packed_i8. */
static int panels_i8_buf(Tiny *t) {
  if (t->bpi < 0) {
    t->bpi = loop_buffer_add(t->p, LB_WEIGHT, 0, 64, LE_F32, "wi");
    t->p->bufs[t->bpi].layout = LW_PANELS_I8;
    t->p->bufs[t->bpi].rows = t->p->bufs[t->bpi].cols = 1;
    t->p->weights_floats = 112;
  }
  return t->bpi;
}

/* A valid call of callee built from its ir/callees.def row (so rows may
 * grow): pointers into the arena buffer, written ones into the output,
 * nullable ones null, values 1. */
static LStmt *call_of(Tiny *t, LCallee callee) {
  const LCalleeInfo *ci = &loop_callee_info[callee];
  LExpr *args[LOOP_CALLEE_MAX_ARGS];
  for (int i = 0; i < ci->n_args; i++) {
    switch (ci->args[i].kind) {
    case LA_POOL: args[i] = lx_pool(t->p); break;
    case LA_I64: args[i] = lx_i(t->p, 1); break;
    case LA_F32: args[i] = lx_f32(t->p, 1); break;
    case LA_F32_PTR: args[i] = addr(t, t->ba); break;
    case LA_F32_OUT: args[i] = addr(t, t->bout); break;
    case LA_F32_PANELS: args[i] = addr(t, panels_buf(t)); break;
    case LA_BF16_PANELS: args[i] = addr(t, panels_bf16_buf(t)); break;
    case LA_I8_PANELS: args[i] = addr(t, panels_i8_buf(t)); break;
    case LA_F32_PTR_OR_NULL:
    case LA_F32_OUT_OR_NULL:
    case LA_U8_PTR_OR_NULL:
    case LA_KIND_COUNT: args[i] = lx_null(t->p); break;
    }
  }
  return ls_call(t->p, callee, args, ci->n_args);
}

/* the position of callee's argument called name */
static int arg_at(LCallee callee, const char *name) {
  const LCalleeInfo *ci = &loop_callee_info[callee];
  for (int i = 0; i < ci->n_args; i++)
    if (!strcmp(ci->args[i].name, name)) return i;
  cr_assert_fail("%s has no argument %s", ci->name, name);
  return -1;
}

/* a call of rt_linear with one argument replaced, appended to the kernel */
static void linear_with(Tiny *t, const char *name, LExpr *arg) {
  LStmt *s = call_of(t, LC_LINEAR);
  if (name) s->args[arg_at(LC_LINEAR, name)] = arg;
  ls_append(t->p, t->k->body, s);
}

/* "rt_linear argument <i> (<name>)<rest>" */
static const char *linear_msg(const char *name, const char *rest) {
  static char buf[256];
  snprintf(buf, sizeof buf, "rt_linear argument %d (%s)%s", arg_at(LC_LINEAR, name), name, rest);
  return buf;
}


Test(loop_verify, tiny_program_verifies) {
  Tiny t = tiny();
  accepted(t.p);
  /* with valid calls, a nested loop, a block and a select */
  for (int c = 0; c < LC_CALLEE_COUNT; c++) ls_append(t.p, t.k->body, call_of(&t, (LCallee)c));
  linear_with(&t, "w", addr(&t, t.bw));
  int j = loop_var_new(t.p, t.k, LT_I64);
  LStmt *f = ls_for(t.p, j, lx_i(t.p, 0), lx_sym(t.p, 0));
  LStmt *b = ls_block(t.p);
  ls_append(t.p, b, ls_store(t.p, t.ba, lx_var(t.p, t.k, j),
                             lx_select(t.p, lx_bin(t.p, LB_LT, lx_var(t.p, t.k, j), lx_i(t.p, 2)),
                                       lx_f32(t.p, 1), lx_var(t.p, t.k, t.tv))));
  ls_append(t.p, f, b);
  ls_append(t.p, t.k->body, f);
  accepted(t.p);
  arena_destroy(t.a);
}

Test(loop_verify, empty_program_verifies) {
  Arena *a = arena_create();
  accepted(loop_program_create(a, "empty"));
  arena_destroy(a);
}

/* ---- the program and its buffers ---- */

Test(loop_verify, program_and_buffers) {
  Tiny t;
  refused(NULL, "no program");

  t = tiny();
  t.p->n_syms = 9;
  refused(t.p, "9 symbols; at most 8");
  arena_destroy(t.a);

  t = tiny();
  t.p->n_bufs = -1;
  refused(t.p, "malformed loop program (-1 buffers");
  arena_destroy(t.a);

  t = tiny();
  t.p->arena_bytes = -64;
  refused(t.p, "malformed loop program (arena -64 bytes");
  arena_destroy(t.a);

  t = tiny();
  t.p->bufs[t.bin].kind = LB_KIND_COUNT;
  refused(t.p, "buffer b0 has an unknown kind");
  arena_destroy(t.a);

  t = tiny();
  t.p->bufs[t.bin].kind = (LBufKind)7;
  refused(t.p, "unknown kind 7");
  arena_destroy(t.a);

  t = tiny();
  t.p->bufs[t.bout].elem = (LElem)5;
  refused(t.p, "buffer b1 has an unknown element type 5");
  arena_destroy(t.a);

  t = tiny();
  t.p->bufs[t.bin].index = RT_MAX_IO; /* one past the last (runtime/rt_model.h) */
  char msg[64];
  snprintf(msg, sizeof msg, "buffer b0: input index %d out of range (0..%d)", RT_MAX_IO,
           RT_MAX_IO - 1);
  refused(t.p, msg);
  arena_destroy(t.a);

  t = tiny();
  t.p->bufs[t.bout].index = -1;
  refused(t.p, "buffer b1: output index -1 out of range");
  arena_destroy(t.a);

  t = tiny();
  t.p->bufs[t.bw].offset = 17;
  refused(t.p, "buffer b2: weights offset 17 outside 16 floats");
  arena_destroy(t.a);

  t = tiny();
  t.p->bufs[t.ba].offset = 192;
  refused(t.p, "buffer b3: arena offset 192 outside 128 bytes");
  arena_destroy(t.a);

  t = tiny();
  t.p->bufs[t.ba].offset = 32;
  refused(t.p, "buffer b3: arena offset 32 is not a multiple of 64");
  arena_destroy(t.a);
}

/* ---- kernels: names, extents, variables, body ---- */

/* state buffers: offsets inside state_bytes, multiples of 64; writable
 * (a KV cache is appended to); a negative state size is malformed */
Test(loop_verify, state_buffers) {
  Tiny t = tiny();
  t.p->state_bytes = 256;
  int bs = loop_buffer_add(t.p, LB_STATE, 0, 128, LE_F32, "cache.decoder.0.k");
  t.store->buf = bs;
  accepted(t.p);
  t.p->bufs[bs].offset = 320;
  refused(t.p, "buffer b4: state offset 320 outside 256 bytes");
  t.p->bufs[bs].offset = 96;
  refused(t.p, "buffer b4: state offset 96 is not a multiple of 64");
  t.p->bufs[bs].offset = 0;
  t.p->state_bytes = -64;
  refused(t.p, "state -64 bytes");
  t.p->state_bytes = 0;
  accepted(t.p); /* offset 0 of an empty region: an empty buffer */
  arena_destroy(t.a);
}

Test(loop_verify, kernels) {
  Tiny t;

  t = tiny();
  loop_kernel_add(t.p, "k0_mul", "again", -1)->extent = lx_i(t.p, 1);
  refused(t.p, "kernel 1 (k0_mul): two kernels have this name");
  arena_destroy(t.a);

  const char *not_identifiers[] = {"9lives", "", "k0.mul", "k0 mul", "k\xc3\xa9"};
  for (size_t i = 0; i < sizeof not_identifiers / sizeof *not_identifiers; i++) {
    t = tiny();
    t.k->name = not_identifiers[i];
    refused(t.p, "not a C identifier");
    arena_destroy(t.a);
  }
  t = tiny();
  t.k->name = NULL;
  refused(t.p, "kernel 0 (unnamed): kernel name is not a C identifier");
  arena_destroy(t.a);

  const char *reserved[] = {"expf", "tanh", "memcpy", "main", "rt_kernel_run", "tfmc_model_run",
                            "tfmc_model_info"};
  for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++) {
    t = tiny();
    t.k->name = reserved[i];
    refused(t.p, "kernel name is reserved");
    arena_destroy(t.a);
  }
  t = tiny();
  t.k->name = "rt_linear";
  refused(t.p, "kernel name is reserved (a runtime function)");
  arena_destroy(t.a);

  t = tiny();
  t.k->extent = NULL;
  refused(t.p, "kernel 0 (k0_mul): extent is missing or not i64");
  arena_destroy(t.a);

  t = tiny();
  t.k->extent = lx_f32(t.p, 4);
  refused(t.p, "extent is missing or not i64");
  arena_destroy(t.a);

  t = tiny();
  t.k->extent = OUTER(t);
  refused(t.p, "uses variable v0 in an extent");
  arena_destroy(t.a);

  t = tiny();
  t.k->extent = lx_sym(t.p, 3);
  refused(t.p, "symbol sym3 out of range");
  arena_destroy(t.a);

  t = tiny();
  t.k->extent = lx_load(t.p, t.bin, lx_i(t.p, 0));
  t.k->extent->t = LT_I64;
  t.p->bufs[t.bin].elem = LE_I32;
  refused(t.p, "reads buffer b0 in an extent");
  arena_destroy(t.a);

  t = tiny();
  t.k->extent = lx_cast(t.p, LT_I64, lx_cast(t.p, LT_F32, lx_sym(t.p, 0)));
  refused(t.p, "extent is not integer arithmetic on constants and symbols");
  arena_destroy(t.a);

  t = tiny();
  t.k->extent = lx_bin(t.p, LB_MUL, lx_sym(t.p, 0), lx_bin(t.p, LB_ADD, lx_sym(t.p, 0), lx_i(t.p, 1)));
  accepted(t.p);
  arena_destroy(t.a);

  t = tiny();
  t.k->parallel = true;
  t.k->grain = 0;
  refused(t.p, "grain 0 is not positive");
  arena_destroy(t.a);

  t = tiny();
  t.k->var_types[t.k->outer_var] = LT_F32;
  refused(t.p, "outer loop variable v0 is not an i64 variable of the kernel");
  arena_destroy(t.a);

  t = tiny();
  t.k->outer_var = 5;
  refused(t.p, "outer loop variable v5");
  arena_destroy(t.a);

  t = tiny();
  t.k->var_types[t.tv] = LT_COUNT;
  refused(t.p, "variable v1 has an unknown type 3");
  arena_destroy(t.a);

  t = tiny();
  t.k->body = ls_for(t.p, t.k->outer_var, lx_i(t.p, 0), lx_i(t.p, 1));
  refused(t.p, "kernel body is missing or not a block");
  arena_destroy(t.a);
}

/* ---- expressions ---- */

Test(loop_verify, expressions) {
  Tiny t;
  LExpr *e;

  t = tiny(); /* in the backends' tests: a load from b99 */
  t.store->value->a->buf = 99;
  refused(t.p, "kernel 0 (k0_mul): buffer b99 out of range");
  arena_destroy(t.a);

  t = tiny();
  t.store->index->var = 7;
  refused(t.p, "variable v7 out of range (the kernel has 2)");
  arena_destroy(t.a);

  t = tiny();
  e = lx_var(t.p, t.k, t.tv);
  e->var = 42;
  ls_append(t.p, t.k->body, ls_set(t.p, t.tv, e));
  refused(t.p, "variable v42 out of range");
  arena_destroy(t.a);

  t = tiny();
  e = OUTER(t);
  e->t = LT_F32;
  ls_append(t.p, t.k->body, ls_set(t.p, t.tv, e));
  refused(t.p, "v0 is i64 but read as f32");
  arena_destroy(t.a);

  t = tiny(); /* read before anything defines it */
  {
    int u = loop_var_new(t.p, t.k, LT_F32);
    ls_append(t.p, t.k->body, ls_set(t.p, t.tv, lx_var(t.p, t.k, u)));
    ls_append(t.p, t.k->body, ls_let(t.p, u, LT_F32, lx_f32(t.p, 1)));
  }
  refused(t.p, "reads v2 before any statement defines it");
  arena_destroy(t.a);

  t = tiny(); /* a loop variable read in its own bounds */
  {
    int j = loop_var_new(t.p, t.k, LT_I64);
    ls_append(t.p, t.k->body, ls_for(t.p, j, lx_i(t.p, 0), lx_var(t.p, t.k, j)));
  }
  refused(t.p, "reads v2 before any statement defines it");
  arena_destroy(t.a);

  t = tiny(); /* a let reading the value before it (0): allowed, as both backends zero variables */
  {
    int acc = loop_var_new(t.p, t.k, LT_F32);
    ls_append(t.p, t.k->body,
              ls_let(t.p, acc, LT_F32, lx_bin(t.p, LB_ADD, lx_var(t.p, t.k, acc), lx_f32(t.p, 1))));
  }
  accepted(t.p);
  arena_destroy(t.a);

  t = tiny(); /* a loop variable read after its loop: allowed */
  {
    int j = loop_var_new(t.p, t.k, LT_I64);
    ls_append(t.p, t.k->body, ls_for(t.p, j, lx_i(t.p, 0), lx_i(t.p, 3)));
    ls_append(t.p, t.k->body, ls_store(t.p, t.bout, lx_var(t.p, t.k, j), lx_f32(t.p, 0)));
  }
  accepted(t.p);
  arena_destroy(t.a);

  t = tiny();
  e = lx_i(t.p, 1);
  e->t = LT_F32;
  ls_append(t.p, t.k->body, ls_set(t.p, t.tv, e));
  refused(t.p, "integer constant typed f32");
  arena_destroy(t.a);

  t = tiny();
  e = lx_f32(t.p, 1);
  e->t = LT_I64;
  ls_append(t.p, t.k->body, ls_set(t.p, t.k->outer_var, e));
  refused(t.p, "float constant typed i64");
  arena_destroy(t.a);

  t = tiny();
  e = lx_sym(t.p, 0);
  e->t = LT_F32;
  ls_append(t.p, t.k->body, ls_set(t.p, t.tv, e));
  refused(t.p, "symbol read as f32");
  arena_destroy(t.a);

  t = tiny();
  t.store->value->a->t = LT_I64;
  refused(t.p, "binary operands have types i64 and f32");
  arena_destroy(t.a);

  t = tiny();
  e = lx_load(t.p, t.bin, lx_i(t.p, 0));
  e->t = LT_F64;
  ls_append(t.p, t.k->body, ls_store(t.p, t.ba, lx_i(t.p, 0), lx_cast(t.p, LT_F32, e)));
  refused(t.p, "load from b0 has type f64, expected f32");
  arena_destroy(t.a);

  t = tiny();
  t.store->index = lx_f32(t.p, 0);
  refused(t.p, "index into b1 is not i64");
  arena_destroy(t.a);

  t = tiny(); /* pointer operands only as call arguments */
  t.store->value = lx_cast(t.p, LT_F32, addr(&t, t.bin));
  refused(t.p, "an address used outside a call argument");
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body, ls_set(t.p, t.k->outer_var, addr(&t, t.bin)));
  refused(t.p, "an address used outside a call argument");
  arena_destroy(t.a);

  t = tiny();
  t.store->value = lx_cast(t.p, LT_F32, lx_pool(t.p));
  refused(t.p, "a pool or null operand used outside a call argument");
  arena_destroy(t.a);

  t = tiny();
  t.store->value = lx_cast(t.p, LT_F32, lx_null(t.p));
  refused(t.p, "a pool or null operand used outside a call argument");
  arena_destroy(t.a);

  t = tiny();
  e = lx_bin(t.p, LB_ADD, lx_f32(t.p, 1), lx_f32(t.p, 2));
  e->op = 99;
  ls_append(t.p, t.k->body, ls_set(t.p, t.tv, e));
  refused(t.p, "unknown binary operator 99");
  arena_destroy(t.a);

  t = tiny();
  e = lx_bin(t.p, LB_ADD, lx_f32(t.p, 1), lx_f32(t.p, 2));
  e->b = NULL;
  ls_append(t.p, t.k->body, ls_set(t.p, t.tv, e));
  refused(t.p, "binary expression lacks an operand");
  arena_destroy(t.a);

  t = tiny();
  e = lx_bin(t.p, LB_ADD, lx_f32(t.p, 1), lx_f32(t.p, 2));
  e->op = LB_REM;
  t.store->value = e;
  refused(t.p, "remainder on floats");
  arena_destroy(t.a);

  t = tiny();
  e = lx_bin(t.p, LB_LT, lx_f32(t.p, 1), lx_f32(t.p, 2));
  e->op = LB_AND;
  ls_append(t.p, t.k->body, ls_set(t.p, t.k->outer_var, e));
  refused(t.p, "logical and on floats");
  arena_destroy(t.a);

  t = tiny(); /* a compare yields i64 */
  e = lx_bin(t.p, LB_LT, lx_f32(t.p, 1), lx_f32(t.p, 2));
  e->t = LT_F32;
  ls_append(t.p, t.k->body, ls_set(t.p, t.tv, e));
  refused(t.p, "binary expression has type f32, expected i64");
  arena_destroy(t.a);

  t = tiny();
  e = lx_bin(t.p, LB_ADD, lx_f32(t.p, 1), lx_f32(t.p, 2));
  e->t = LT_F64;
  t.store->value = lx_cast(t.p, LT_F32, e);
  refused(t.p, "binary expression has type f64, expected f32");
  arena_destroy(t.a);

  t = tiny(); /* undefined in both backends */
  e = lx_bin(t.p, LB_DIV, OUTER(t), lx_i(t.p, 2));
  e->b = lx_i(t.p, 0);
  ls_append(t.p, t.k->body, ls_set(t.p, t.k->outer_var, e));
  refused(t.p, "integer division by the constant 0");
  arena_destroy(t.a);

  t = tiny();
  e = lx_bin(t.p, LB_REM, OUTER(t), lx_i(t.p, 2));
  e->b = lx_i(t.p, 0);
  t.store->index = e;
  refused(t.p, "integer remainder by the constant 0");
  arena_destroy(t.a);

  t = tiny();
  e = lx_un(t.p, LU_EXP, lx_f32(t.p, 1));
  e->op = 99;
  t.store->value = e;
  refused(t.p, "unknown unary operator 99");
  arena_destroy(t.a);

  t = tiny();
  e = lx_un(t.p, LU_EXP, lx_f32(t.p, 1));
  e->a = lx_i(t.p, 1);
  e->t = LT_I64;
  ls_append(t.p, t.k->body, ls_set(t.p, t.k->outer_var, e));
  refused(t.p, "unary operator on i64 giving i64 (floats only)");
  arena_destroy(t.a);

  t = tiny();
  e = lx_un(t.p, LU_EXP, lx_f32(t.p, 1));
  e->t = LT_F64;
  t.store->value = lx_cast(t.p, LT_F32, e);
  refused(t.p, "unary operator on f32 giving f64");
  arena_destroy(t.a);

  t = tiny();
  e = lx_select(t.p, lx_i(t.p, 1), lx_f32(t.p, 1), lx_f32(t.p, 2));
  e->a = lx_f32(t.p, 1);
  t.store->value = e;
  refused(t.p, "malformed select");
  arena_destroy(t.a);

  t = tiny();
  e = lx_select(t.p, lx_i(t.p, 1), lx_f32(t.p, 1), lx_f32(t.p, 2));
  e->c = lx_f64(t.p, 2);
  t.store->value = e;
  refused(t.p, "malformed select");
  arena_destroy(t.a);

  t = tiny();
  e = lx_cast(t.p, LT_F32, OUTER(t));
  e->a = NULL;
  t.store->value = e;
  refused(t.p, "malformed cast");
  arena_destroy(t.a);

  t = tiny();
  t.store->value->kind = LX_KIND_COUNT;
  refused(t.p, "unknown expression kind");
  arena_destroy(t.a);
}

/* ---- statements ---- */

Test(loop_verify, statements) {
  Tiny t;

  t = tiny();
  t.store->value = addr(&t, t.bin);
  refused(t.p, "store to b1 needs a f32 value");
  arena_destroy(t.a);

  t = tiny();
  t.store->value = NULL;
  refused(t.p, "store to b1 needs a f32 value");
  arena_destroy(t.a);

  t = tiny();
  {
    int ids = loop_buffer_add(t.p, LB_OUTPUT, 1, 0, LE_I32, "ids");
    ls_append(t.p, t.k->body, ls_store(t.p, ids, lx_i(t.p, 0), lx_i(t.p, 1)));
    t.k->body->stmts[2]->value = lx_f32(t.p, 1);
  }
  refused(t.p, "store to b4 needs a i64 value");
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body, ls_store(t.p, t.bw, lx_i(t.p, 0), lx_f32(t.p, 1)));
  refused(t.p, "stores into b2, which is in the weights");
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body, ls_store(t.p, t.bin, lx_i(t.p, 0), lx_f32(t.p, 1)));
  refused(t.p, "stores into b0, which is an input");
  arena_destroy(t.a);

  t = tiny();
  t.store->buf = 12;
  refused(t.p, "buffer b12 out of range");
  arena_destroy(t.a);

  t = tiny();
  {
    int f = loop_var_new(t.p, t.k, LT_F32);
    ls_append(t.p, t.k->body, ls_set(t.p, f, lx_i(t.p, 1)));
  }
  refused(t.p, "set v2 is f32, given i64");
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body, ls_set(t.p, 9, lx_f32(t.p, 1)));
  refused(t.p, "set variable v9 out of range (the kernel has 2)");
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body, ls_let(t.p, t.tv, LT_F32, lx_f32(t.p, 1)));
  t.k->body->stmts[2]->t = LT_F64;
  refused(t.p, "let v1: f64 given a f32");
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body, ls_set(t.p, t.tv, lx_f32(t.p, 1)));
  t.k->body->stmts[2]->value = NULL;
  refused(t.p, "assignment to v1 lacks a value");
  arena_destroy(t.a);

  t = tiny();
  {
    int j = loop_var_new(t.p, t.k, LT_I64);
    LStmt *outer = ls_for(t.p, j, lx_i(t.p, 0), lx_i(t.p, 4));
    ls_append(t.p, outer, ls_for(t.p, j, lx_i(t.p, 0), lx_i(t.p, 2)));
    ls_append(t.p, t.k->body, outer);
  }
  refused(t.p, "v2 drives two nested loops");
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body, ls_for(t.p, t.k->outer_var, lx_i(t.p, 0), lx_i(t.p, 2)));
  refused(t.p, "v0 drives two nested loops");
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body, ls_set(t.p, t.k->outer_var, lx_i(t.p, 0)));
  refused(t.p, "assigns v0 inside the loop it drives");
  arena_destroy(t.a);

  t = tiny();
  {
    int j = loop_var_new(t.p, t.k, LT_I64);
    LStmt *f = ls_for(t.p, j, lx_i(t.p, 0), lx_i(t.p, 4));
    ls_append(t.p, f, ls_set(t.p, j, lx_i(t.p, 4)));
    ls_append(t.p, t.k->body, f);
  }
  refused(t.p, "assigns v2 inside the loop it drives");
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body, ls_for(t.p, t.tv, lx_i(t.p, 0), lx_i(t.p, 2)));
  refused(t.p, "loop v1 is f32, given i64");
  arena_destroy(t.a);

  t = tiny();
  {
    int j = loop_var_new(t.p, t.k, LT_I64);
    LStmt *f = ls_for(t.p, j, lx_i(t.p, 0), lx_i(t.p, 2));
    f->hi = lx_f32(t.p, 2);
    ls_append(t.p, t.k->body, f);
  }
  refused(t.p, "loop over v2 has non-i64 bounds");
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body, NULL);
  refused(t.p, "missing statement");
  arena_destroy(t.a);

  t = tiny();
  t.store->kind = LS_KIND_COUNT;
  refused(t.p, "unknown statement kind");
  arena_destroy(t.a);

  t = tiny();
  {
    LStmt *b = ls_block(t.p);
    b->n_stmts = 2;
    ls_append(t.p, t.k->body, b);
  }
  refused(t.p, "block lacks its statements");
  arena_destroy(t.a);

  t = tiny();
  {
    LStmt *s = t.k->body;
    for (int i = 0; i < 70; i++) {
      LStmt *b = ls_block(t.p);
      ls_append(t.p, s, b);
      s = b;
    }
  }
  refused(t.p, "statements nested deeper than 64");
  arena_destroy(t.a);
}

/* ---- runtime calls ---- */

/* A weight in panels layout is read whole by rt_linear_packed and, when
 * the panels hold f32, by element loads (a gather from a tied weight,
 * pack-weights); bf16 / int8 panels by their calls only; it fits the
 * weights. */
Test(loop_verify, panels_weights) {
  Tiny t = tiny();
  ls_append(t.p, t.k->body, call_of(&t, LC_LINEAR_PACKED));
  accepted(t.p);
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body, ls_let(t.p, t.tv, LT_F32, lx_load(t.p, panels_buf(&t), lx_i(t.p, 0))));
  accepted(t.p);
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body,
            ls_let(t.p, t.tv, LT_F32, lx_load(t.p, panels_bf16_buf(&t), lx_i(t.p, 0))));
  refused(t.p, "which is in panels_bf16 layout (only rt_linear_packed_* reads it)");
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body,
            ls_let(t.p, t.tv, LT_F32, lx_load(t.p, panels_i8_buf(&t), lx_i(t.p, 0))));
  refused(t.p, "which is in panels_i8 layout");
  arena_destroy(t.a);

  t = tiny();
  linear_with(&t, "w", addr(&t, panels_buf(&t)));
  refused(t.p, linear_msg("w", " points into b4, which is in panels layout"));
  arena_destroy(t.a);

  t = tiny();
  {
    LStmt *s = call_of(&t, LC_LINEAR_PACKED);
    s->args[arg_at(LC_LINEAR_PACKED, "w")] = addr(&t, t.bw);
    ls_append(t.p, t.k->body, s);
  }
  refused(t.p, "points into b2, which is not in panels layout");
  arena_destroy(t.a);

  t = tiny();
  {
    LStmt *s = call_of(&t, LC_LINEAR_PACKED);
    s->args[arg_at(LC_LINEAR_PACKED, "w")] = lx_addr(t.p, t.bp, lx_i(t.p, 1));
    ls_append(t.p, t.k->body, s);
  }
  refused(t.p, "must be the whole of b4");
  arena_destroy(t.a);

  t = tiny();
  t.p->bufs[panels_buf(&t)].rows = 17; /* two panels: 32 floats from offset 16 */
  refused(t.p, "buffer b4: panels of 17 x 1 at offset 16 do not fit 32 floats");
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body, call_of(&t, LC_LINEAR_PACKED_BF16));
  accepted(t.p);
  arena_destroy(t.a);

  t = tiny(); /* each panels kind takes its own layout only */
  {
    LStmt *s = call_of(&t, LC_LINEAR_PACKED_BF16);
    s->args[arg_at(LC_LINEAR_PACKED_BF16, "w")] = addr(&t, panels_buf(&t));
    ls_append(t.p, t.k->body, s);
  }
  refused(t.p, "which is in panels layout");
  arena_destroy(t.a);

  t = tiny();
  {
    LStmt *s = call_of(&t, LC_LINEAR_PACKED);
    s->args[arg_at(LC_LINEAR_PACKED, "w")] = addr(&t, panels_bf16_buf(&t));
    ls_append(t.p, t.k->body, s);
  }
  refused(t.p, "which is in panels_bf16 layout");
  arena_destroy(t.a);

  t = tiny();
  ls_append(t.p, t.k->body, call_of(&t, LC_LINEAR_PACKED_I8));
  accepted(t.p);
  arena_destroy(t.a);

  t = tiny();
  {
    LStmt *s = call_of(&t, LC_LINEAR_PACKED_I8);
    s->args[arg_at(LC_LINEAR_PACKED_I8, "w")] = addr(&t, panels_bf16_buf(&t));
    ls_append(t.p, t.k->body, s);
  }
  refused(t.p, "which is in panels_bf16 layout");
  arena_destroy(t.a);

  t = tiny();
  panels_i8_buf(&t);
  t.p->weights_floats = 100; /* 48 floats from 64 do not fit */
  refused(t.p, "panels_i8 of 1 x 1 at offset 64 do not fit 100 floats");
  arena_destroy(t.a);

  t = tiny();
  t.p->bufs[t.ba].layout = LW_PANELS; /* only weights have a layout */
  refused(t.p, "buffer b3");
  arena_destroy(t.a);
}

Test(loop_verify, calls) {
  Tiny t;
  char want[128];

  t = tiny();
  {
    LExpr *args[3] = {lx_pool(t.p), lx_i(t.p, 1), lx_i(t.p, 1)};
    ls_append(t.p, t.k->body, ls_call(t.p, LC_LINEAR, args, 3));
  }
  snprintf(want, sizeof want, "rt_linear takes %d arguments, given 3",
           loop_callee_info[LC_LINEAR].n_args);
  refused(t.p, want);
  arena_destroy(t.a);

  t = tiny();
  {
    LStmt *s = call_of(&t, LC_LINEAR);
    s->callee = LC_CALLEE_COUNT;
    ls_append(t.p, t.k->body, s);
  }
  refused(t.p, "unknown runtime function");
  arena_destroy(t.a);

  t = tiny();
  {
    int ids = loop_buffer_add(t.p, LB_INPUT, 1, 0, LE_I32, "ids");
    linear_with(&t, "x", addr(&t, ids));
  }
  refused(t.p, linear_msg("x", " points into b4, which is not f32"));
  arena_destroy(t.a);

  t = tiny();
  linear_with(&t, "y", addr(&t, t.bw));
  refused(t.p, "rt_linear writes b2, which is in the weights");
  arena_destroy(t.a);

  t = tiny();
  linear_with(&t, "y", addr(&t, t.bin));
  refused(t.p, "rt_linear writes b0, which is an input");
  arena_destroy(t.a);

  t = tiny();
  linear_with(&t, "w", lx_null(t.p));
  refused(t.p, linear_msg("w", " may not be null"));
  arena_destroy(t.a);

  t = tiny();
  linear_with(&t, "w", lx_i(t.p, 0));
  refused(t.p, linear_msg("w", " must be the address of an f32 buffer"));
  arena_destroy(t.a);

  t = tiny();
  linear_with(&t, "m", addr(&t, t.ba));
  refused(t.p, linear_msg("m", " must be an i64 value"));
  arena_destroy(t.a);

  t = tiny();
  linear_with(&t, "pool", lx_i(t.p, 0));
  refused(t.p, linear_msg("pool", " must be the pool or null"));
  arena_destroy(t.a);

  t = tiny();
  linear_with(&t, "k", NULL);
  refused(t.p, linear_msg("k", " is missing"));
  arena_destroy(t.a);

  t = tiny();
  {
    LExpr *e = addr(&t, t.bout);
    e->buf = 20;
    linear_with(&t, "y", e);
  }
  refused(t.p, linear_msg("y", ": buffer b20 out of range"));
  arena_destroy(t.a);

  t = tiny(); /* the expressions passed are checked too */
  linear_with(&t, "m", lx_sym(t.p, 5));
  refused(t.p, "symbol sym5 out of range");
  arena_destroy(t.a);

  t = tiny();
  {
    LExpr *e = addr(&t, t.bout);
    e->a = lx_f32(t.p, 0);
    linear_with(&t, "y", e);
  }
  refused(t.p, "index into b1 is not i64");
  arena_destroy(t.a);

  t = tiny();
  {
    LExpr *e = addr(&t, t.bout);
    e->t = (LType)9;
    linear_with(&t, "y", e);
  }
  refused(t.p, "expression has an unknown type 9");
  arena_destroy(t.a);
}

/* ---- every example, lowered ---- */

static int lowered = 0;

static void lower_and_verify(const char *path, const char *pipeline) {
  Arena *a = arena_create();
  char err[512] = "";
  Diags d;
  diags_init(&d, a, NULL);
  SrcFile *src = src_file_read(a, path, err, sizeof err);
  cr_assert(src, "%s", err);
  diags_add_source(&d, src);
  Spec *spec = spec_parse(a, src, &d);
  cr_assert(spec, "%s: %s", path, d.captured ? d.captured : "");
  IrGraph *g = spec_lower(a, spec, &(LowerOptions){0}, &d);
  cr_assert(g, "%s: %s", path, d.captured ? d.captured : "");
  if (pipeline) {
    PassPipeline pl;
    cr_assert(pass_pipeline_parse(pipeline, &pl, err, sizeof err), "%s", err);
    PassContext ctx = {.diags = &d};
    cr_assert(pass_pipeline_run(g, &pl, &ctx), "%s: %s", path, d.captured ? d.captured : "");
  }
  LoopProgram *p = pass_lower_loops(a, g);
  cr_assert(p);
  cr_expect(loop_program_verify(p, err, sizeof err), "%s (%s): %s", path,
            pipeline ? pipeline : "no passes", err);
  cr_expect_gt(p->n_kernels, 0);
  lowered++;
  arena_destroy(a);
}

static void each_example(const char *pipeline) {
  const char *dir = TFMC_SOURCE_DIR "/examples";
  DIR *dp = opendir(dir);
  cr_assert(dp, "cannot open %s", dir);
  struct dirent *de;
  char path[1024];
  while ((de = readdir(dp))) {
    size_t n = strlen(de->d_name);
    if (n > 4 && !strcmp(de->d_name + n - 4, ".tfm")) {
      snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
      lower_and_verify(path, pipeline);
    }
  }
  closedir(dp);
  lower_and_verify(TFMC_SOURCE_DIR "/examples/sort/model.tfm", pipeline);
}

Test(loop_verify, lowered_examples_verify, .timeout = 120) {
  lowered = 0;
  each_example(NULL);
  cr_expect_geq(lowered, 5, "only %d examples lowered", lowered);
  each_example("prune-rows,decompose-attention,dce");
}

/* share-kernels: a kernel may run through an earlier unshared kernel's
 * function only when their bodies are equal up to buffers that keep their
 * region and element type (ir/loop_kernel.c). */
Test(loop_verify, shared_kernels) {
  Tiny t = tiny();
  LoopProgram *p = t.p;
  /* a second kernel: the same body over other buffers of the same regions */
  int bin2 = loop_buffer_add(p, LB_INPUT, 0, 0, LE_F32, "in (again)");
  int bout2 = loop_buffer_add(p, LB_OUTPUT, 0, 0, LE_F32, "out (again)");
  int bw2 = loop_buffer_add(p, LB_WEIGHT, 0, 0, LE_F32, "w2");
  LKernel *k2 = loop_kernel_add(p, "k1_mul", "mul", 1);
  k2->extent = lx_sym(p, 0);
  int tv = loop_var_new(p, k2, LT_F32);
  ls_append(p, k2->body, ls_let(p, tv, LT_F32, lx_load(p, bw2, lx_i(p, 0))));
  LStmt *store = ls_store(p, bout2, lx_var(p, k2, k2->outer_var),
                          lx_bin(p, LB_MUL, lx_load(p, bin2, lx_var(p, k2, k2->outer_var)),
                                 lx_var(p, k2, tv)));
  ls_append(p, k2->body, store);
  LKernel *k1 = &p->kernels[0];
  cr_assert(loop_kernel_same(p, k1, k2));
  cr_assert_eq(loop_kernel_hash(p, k1), loop_kernel_hash(p, k2));
  pass_share_kernels_run(p, NULL);
  cr_assert_eq(p->kernels[1].shares, 0);
  accepted(p);
  /* parameters pair up in walk order: weight, output, input */
  int pa[8], pb[8];
  cr_assert_eq(loop_kernel_params(p, &p->kernels[0], pa), 3);
  cr_assert_eq(loop_kernel_params(p, &p->kernels[1], pb), 3);
  cr_assert(pa[0] == t.bw && pa[1] == t.bout && pa[2] == t.bin);
  cr_assert(pb[0] == bw2 && pb[1] == bout2 && pb[2] == bin2);

  p->kernels[1].shares = 1;
  refused(p, "shares kernel 1, which is not an earlier kernel");
  p->kernels[1].shares = -7;
  refused(p, "shares kernel -7");
  /* the weight read from the arena instead: another region */
  p->kernels[1].shares = 0;
  p->bufs[bw2].kind = LB_ARENA;
  cr_assert(!loop_kernel_same(p, &p->kernels[0], &p->kernels[1]));
  refused(p, "bodies differ beyond their buffers");
  p->bufs[bw2].kind = LB_WEIGHT;
  accepted(p);
  /* a different constant */
  store->index = lx_i(p, 3);
  refused(p, "bodies differ beyond their buffers");
  pass_share_kernels_run(p, NULL);
  cr_assert_eq(p->kernels[1].shares, -1, "different kernels must not share");
  accepted(p);
  arena_destroy(t.a);
}
