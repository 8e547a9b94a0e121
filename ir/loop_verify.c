/* ir/loop_verify.c — the loop IR verifier: the rules listed above
 * loop_program_verify in ir/loop.h, checked in one place.
 *
 * One walk over the program: the counts, the buffers, then each kernel's
 * name, extent, variables and body in statement order. The first problem
 * is reported, naming the kernel; nothing is changed. Both code generators
 * (backends/llvm/emit.c, backends/c/emit.c) rely on what this file checks
 * and only assert it, so a rule either of them needs belongs here.
 *
 * Invariants: reads p only (its scratch is malloc'd and freed here); the
 * recursion is bounded by the statement nesting (at most 64 deep) and by
 * the depth of the expression trees the lowering builds. */
#include "ir/loop.h"
#include "runtime/rt_model.h" /* RT_MAX_SYMS, RT_MAX_IO: the RtRunArgs contract */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(IR_MAX_SYMS <= RT_MAX_SYMS, "graph symbols must fit the runtime's syms[]");

#define MAX_DEPTH 64

/* Names a kernel may not take: functions generated code defines or calls
 * besides the kernels (the runtime functions of ir/callees.def are checked
 * from the table), and libm / libc functions a code generator may call
 * while lowering intrinsics or min / max. */
static const char *const reserved_names[] = {
    "expf",    "exp",     "logf",    "log",     "sinf",   "sin",     "cosf",
    "cos",     "sincosf", "sincos",  "sqrtf",   "sqrt",   "tanhf",   "tanh",
    "erff",    "erf",     "fminf",   "fmaxf",   "fmin",   "fmax",    "memcpy",
    "memset",  "memmove", "main",    "rt_pool_parallel_for", "rt_kernel_run",
    "tfmc_model_run",     "tfmc_model_info"};

typedef struct Vf {
  const LoopProgram *p;
  int ki;           /* the kernel being checked, -1: the program's own fields */
  const LKernel *k; /* NULL while checking an extent (no variables, no buffers) */
  bool *in_loop;    /* [n_vars]: the variable drives an enclosing loop */
  bool *defined;    /* [n_vars]: a statement defining it has started */
  char *err;
  size_t errlen;
  bool failed;
} Vf;

static bool bad(Vf *V, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool bad(Vf *V, const char *fmt, ...) {
  if (V->failed) return false;
  V->failed = true;
  if (!V->err || !V->errlen) return false;
  char msg[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (V->ki < 0) {
    snprintf(V->err, V->errlen, "%s", msg);
  } else {
    const char *name = V->p->kernels[V->ki].name;
    snprintf(V->err, V->errlen, "kernel %d (%.60s): %s", V->ki, name ? name : "unnamed", msg);
  }
  return false;
}

static bool type_ok(LType t) { return t == LT_I64 || t == LT_F32 || t == LT_F64; }

static bool is_identifier(const char *s) {
  if (!s || !*s) return false;
  for (const char *c = s; *c; c++) {
    bool alpha = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_';
    bool digit = *c >= '0' && *c <= '9';
    if (!alpha && !(digit && c != s)) return false;
  }
  return true;
}

/* ---- expressions ---- */

static bool check_expr(Vf *V, const LExpr *e, bool as_arg);

static bool check_buf(Vf *V, int buf) {
  if (buf < 0 || buf >= V->p->n_bufs) return bad(V, "buffer b%d out of range", buf);
  if (!V->k) return bad(V, "reads buffer b%d in an extent", buf);
  return true;
}

static bool check_index(Vf *V, int buf, const LExpr *index) {
  if (!check_buf(V, buf)) return false;
  if (!index || index->t != LT_I64) return bad(V, "index into b%d is not i64", buf);
  return check_expr(V, index, false);
}

static bool check_expr(Vf *V, const LExpr *e, bool as_arg) {
  if (V->failed) return false;
  if (!e) return bad(V, "missing expression");
  if (!type_ok(e->t)) return bad(V, "expression has an unknown type %d", (int)e->t);
  switch (e->kind) {
  case LX_CONST_I:
    return e->t == LT_I64 || bad(V, "integer constant typed %s", loop_type_str(e->t));
  case LX_CONST_F: return loop_type_is_float(e->t) || bad(V, "float constant typed i64");
  case LX_VAR:
    if (!V->k)
      return bad(V, "uses variable v%d in an extent (symbols and constants only)", e->var);
    if (e->var < 0 || e->var >= V->k->n_vars)
      return bad(V, "variable v%d out of range (the kernel has %d)", e->var, V->k->n_vars);
    if (V->k->var_types[e->var] != e->t)
      return bad(V, "v%d is %s but read as %s", e->var, loop_type_str(V->k->var_types[e->var]),
                 loop_type_str(e->t));
    if (!V->defined[e->var]) return bad(V, "reads v%d before any statement defines it", e->var);
    return true;
  case LX_SYM:
    if (e->sym < 0 || e->sym >= V->p->n_syms)
      return bad(V, "symbol sym%d out of range (the program has %d)", e->sym, V->p->n_syms);
    return e->t == LT_I64 || bad(V, "symbol read as %s", loop_type_str(e->t));
  case LX_LOAD: {
    if (!check_index(V, e->buf, e->a)) return false;
    LWLayout l = V->p->bufs[e->buf].layout;
    if (l != LW_PLAIN && l != LW_PANELS) /* f32 panels: a load reads one of their floats */
      return bad(V, "loads from b%d, which is in %s layout (only rt_linear_packed_* reads it)",
                 e->buf, loop_layout_str(l));
    LType want = V->p->bufs[e->buf].elem == LE_F32 ? LT_F32 : LT_I64;
    if (e->t != want)
      return bad(V, "load from b%d has type %s, expected %s", e->buf, loop_type_str(e->t),
                 loop_type_str(want));
    return true;
  }
  case LX_ADDR:
    if (!as_arg) return bad(V, "an address used outside a call argument");
    return check_index(V, e->buf, e->a);
  case LX_POOL:
  case LX_NULL: return as_arg || bad(V, "a pool or null operand used outside a call argument");
  case LX_BIN: {
    if (e->op < 0 || e->op >= LB_BINOP_COUNT) return bad(V, "unknown binary operator %d", e->op);
    if (!e->a || !e->b) return bad(V, "binary expression lacks an operand");
    LType t = e->a->t;
    if (!type_ok(t) || e->b->t != t)
      return bad(V, "binary operands have types %s and %s", loop_type_str(t),
                 loop_type_str(e->b->t));
    LBinOp op = (LBinOp)e->op;
    bool cmp = op == LB_LT || op == LB_LE || op == LB_EQ || op == LB_NE;
    LType want = cmp || op == LB_AND ? LT_I64 : t;
    if (e->t != want)
      return bad(V, "binary expression has type %s, expected %s", loop_type_str(e->t),
                 loop_type_str(want));
    if (loop_type_is_float(t) && (op == LB_REM || op == LB_AND))
      return bad(V, "%s on floats", op == LB_REM ? "remainder" : "logical and");
    if (t == LT_I64 && (op == LB_DIV || op == LB_REM) && e->b->kind == LX_CONST_I &&
        e->b->ival == 0)
      return bad(V, "integer %s by the constant 0", op == LB_DIV ? "division" : "remainder");
    return check_expr(V, e->a, false) && check_expr(V, e->b, false);
  }
  case LX_UN:
    if (e->op < 0 || e->op >= LU_UNOP_COUNT) return bad(V, "unknown unary operator %d", e->op);
    if (!e->a || !loop_type_is_float(e->a->t) || e->t != e->a->t)
      return bad(V, "unary operator on %s giving %s (floats only)",
                 e->a ? loop_type_str(e->a->t) : "nothing", loop_type_str(e->t));
    return check_expr(V, e->a, false);
  case LX_SELECT:
    if (!e->a || !e->b || !e->c || e->a->t != LT_I64 || e->b->t != e->t || e->c->t != e->t)
      return bad(V, "malformed select");
    return check_expr(V, e->a, false) && check_expr(V, e->b, false) &&
           check_expr(V, e->c, false);
  case LX_CAST:
    if (!e->a || !type_ok(e->a->t)) return bad(V, "malformed cast");
    return check_expr(V, e->a, false);
  case LX_KIND_COUNT: break;
  }
  return bad(V, "unknown expression kind %d", (int)e->kind);
}

/* ---- runtime calls: the rules of each ir/callees.def row ---- */

static const char *arg_kind_what(LArgKind k) {
  switch (k) {
#define LOOP_ARG_KIND_WHAT(kind, ctype, what) \
  case LA_##kind: return what;
    LOOP_ARG_KINDS(LOOP_ARG_KIND_WHAT)
#undef LOOP_ARG_KIND_WHAT
  case LA_KIND_COUNT: break;
  }
  return "?";
}

/* What a pointer kind points at and may be; false for value kinds. */
static bool arg_kind_pointer(LArgKind k, LElem *elem, bool *nullable, bool *written) {
  *nullable = *written = false;
  *elem = LE_F32;
  switch (k) {
  case LA_POOL:
  case LA_I64:
  case LA_F32: return false;
  case LA_F32_PTR: return true;
  case LA_F32_PTR_OR_NULL: *nullable = true; return true;
  case LA_F32_OUT: *written = true; return true;
  case LA_F32_OUT_OR_NULL: *nullable = *written = true; return true;
  case LA_U8_PTR_OR_NULL: *elem = LE_U8; *nullable = true; return true;
  case LA_F32_PANELS:
  case LA_BF16_PANELS:
  case LA_I8_PANELS: return true;
  case LA_KIND_COUNT: break;
  }
  return false;
}

/* The layout a pointer kind's buffer must have (a panels kind takes only
 * its own; every other pointer only plain buffers). */
static LWLayout arg_layout(LArgKind k) {
  return k == LA_F32_PANELS    ? LW_PANELS
         : k == LA_BF16_PANELS ? LW_PANELS_BF16
         : k == LA_I8_PANELS   ? LW_PANELS_I8
                               : LW_PLAIN;
}

static bool is_pointer_expr(const LExpr *e) {
  return e->kind == LX_ADDR || e->kind == LX_POOL || e->kind == LX_NULL;
}

/* Buffers nobody writes: the weights (mapped read-only) and the caller's
 * inputs. how: "stores into", "rt_linear writes". */
static bool check_writable(Vf *V, int buf, const char *how) {
  switch (V->p->bufs[buf].kind) {
  case LB_WEIGHT: return bad(V, "%s b%d, which is in the weights", how, buf);
  case LB_INPUT: return bad(V, "%s b%d, which is an input", how, buf);
  case LB_OUTPUT:
  case LB_ARENA:
  case LB_STATE:
  case LB_KIND_COUNT: break;
  }
  return true;
}

/* The call's row: a known callee, the argument count, each argument of its
 * kind. */
static bool check_call_row(Vf *V, const LStmt *s) {
  if ((unsigned)s->callee >= LC_CALLEE_COUNT)
    return bad(V, "unknown runtime function %d", (int)s->callee);
  const LCalleeInfo *ci = &loop_callee_info[s->callee];
  if (s->n_args != ci->n_args || (s->n_args > 0 && !s->args))
    return bad(V, "%s takes %d arguments, given %d", ci->name, ci->n_args, s->n_args);
  for (int i = 0; i < ci->n_args; i++) {
    const LExpr *a = s->args[i];
    LArgKind kind = ci->args[i].kind;
    const char *fn = ci->name, *an = ci->args[i].name;
    if (!a) return bad(V, "%s argument %d (%s) is missing", fn, i, an);
    LElem elem;
    bool nullable, written;
    if (kind == LA_POOL) {
      if (a->kind != LX_POOL && a->kind != LX_NULL)
        return bad(V, "%s argument %d (%s) must be %s", fn, i, an, arg_kind_what(kind));
    } else if (!arg_kind_pointer(kind, &elem, &nullable, &written)) {
      LType want = kind == LA_I64 ? LT_I64 : LT_F32;
      if (a->t != want || is_pointer_expr(a))
        return bad(V, "%s argument %d (%s) must be %s", fn, i, an, arg_kind_what(kind));
    } else if (a->kind == LX_NULL) {
      if (!nullable) return bad(V, "%s argument %d (%s) may not be null", fn, i, an);
    } else if (a->kind != LX_ADDR) {
      return bad(V, "%s argument %d (%s) must be %s", fn, i, an, arg_kind_what(kind));
    } else if (a->buf < 0 || a->buf >= V->p->n_bufs) {
      return bad(V, "%s argument %d (%s): buffer b%d out of range", fn, i, an, a->buf);
    } else if (V->p->bufs[a->buf].elem != elem) {
      return bad(V, "%s argument %d (%s) points into b%d, which is not %s", fn, i, an, a->buf,
                 loop_elem_str(elem));
    } else if (arg_layout(kind) != V->p->bufs[a->buf].layout) {
      LWLayout has = V->p->bufs[a->buf].layout;
      return bad(V, "%s argument %d (%s) points into b%d, which is %s%s layout", fn, i, an, a->buf,
                 has == LW_PLAIN ? "not in " : "in ",
                 loop_layout_str(has == LW_PLAIN ? arg_layout(kind) : has));
    } else if (arg_layout(kind) != LW_PLAIN &&
               (!a->a || a->a->kind != LX_CONST_I || a->a->ival != 0)) {
      return bad(V, "%s argument %d (%s) must be the whole of b%d (element 0)", fn, i, an, a->buf);
    } else if (written) {
      char how[96];
      snprintf(how, sizeof how, "%s writes", fn);
      if (!check_writable(V, a->buf, how)) return false;
    }
  }
  return true;
}

/* The row, then every expression the call passes (indices of addresses
 * included). */
static bool check_call(Vf *V, const LStmt *s) {
  if (!check_call_row(V, s)) return false;
  for (int i = 0; i < s->n_args; i++)
    if (!check_expr(V, s->args[i], true)) return false;
  return true;
}

bool loop_call_check(const LoopProgram *p, const LStmt *s, char *err, size_t errlen) {
  Vf V = {.p = p, .ki = -1, .err = err, .errlen = errlen};
  return check_call_row(&V, s);
}

/* ---- statements ---- */

static bool check_var(Vf *V, int var, LType t, const char *what) {
  if (var < 0 || var >= V->k->n_vars)
    return bad(V, "%s variable v%d out of range (the kernel has %d)", what, var, V->k->n_vars);
  if (V->k->var_types[var] != t)
    return bad(V, "%s v%d is %s, given %s", what, var, loop_type_str(V->k->var_types[var]),
               loop_type_str(t));
  return true;
}

static bool check_stmt(Vf *V, const LStmt *s, int depth);

/* the statements of an LS_BLOCK or an LS_FOR's body */
static bool check_body(Vf *V, const LStmt *s, int depth) {
  if (s->n_stmts < 0 || (s->n_stmts > 0 && !s->stmts)) return bad(V, "block lacks its statements");
  for (int i = 0; i < s->n_stmts; i++)
    if (!check_stmt(V, s->stmts[i], depth + 1)) return false;
  return true;
}

static bool check_stmt(Vf *V, const LStmt *s, int depth) {
  if (V->failed) return false;
  if (!s) return bad(V, "missing statement");
  if (depth > MAX_DEPTH) return bad(V, "statements nested deeper than %d", MAX_DEPTH);
  switch (s->kind) {
  case LS_FOR: {
    if (!check_var(V, s->var, LT_I64, "loop")) return false;
    if (!s->lo || !s->hi || s->lo->t != LT_I64 || s->hi->t != LT_I64)
      return bad(V, "loop over v%d has non-i64 bounds", s->var);
    if (!check_expr(V, s->lo, false) || !check_expr(V, s->hi, false)) return false;
    /* a nested loop over the same variable, or an assignment to it inside
     * the loop, could keep the loop from ever finishing */
    if (V->in_loop[s->var]) return bad(V, "v%d drives two nested loops", s->var);
    V->defined[s->var] = V->in_loop[s->var] = true;
    bool ok = check_body(V, s, depth);
    V->in_loop[s->var] = false;
    return ok;
  }
  case LS_LET:
  case LS_SET: {
    if (!s->value) return bad(V, "assignment to v%d lacks a value", s->var);
    if (s->kind == LS_LET && s->value->t != s->t)
      return bad(V, "let v%d: %s given a %s", s->var, loop_type_str(s->t),
                 loop_type_str(s->value->t));
    if (!check_var(V, s->var, s->value->t, s->kind == LS_LET ? "let" : "set")) return false;
    V->defined[s->var] = true; /* the value may read the previous value (0 at first) */
    if (!check_expr(V, s->value, false)) return false;
    if (V->in_loop[s->var]) return bad(V, "assigns v%d inside the loop it drives", s->var);
    return true;
  }
  case LS_STORE: {
    if (!check_index(V, s->buf, s->index) || !check_writable(V, s->buf, "stores into"))
      return false;
    LType want = V->p->bufs[s->buf].elem == LE_F32 ? LT_F32 : LT_I64;
    if (!s->value || s->value->t != want)
      return bad(V, "store to b%d needs a %s value", s->buf, loop_type_str(want));
    return check_expr(V, s->value, false);
  }
  case LS_CALL: return check_call(V, s);
  case LS_BLOCK: return check_body(V, s, depth);
  case LS_KIND_COUNT: break;
  }
  return bad(V, "unknown statement kind %d", (int)s->kind);
}

/* ---- kernels and the program ---- */

static bool check_name(Vf *V, const LKernel *k) {
  if (!is_identifier(k->name)) return bad(V, "kernel name is not a C identifier");
  for (size_t i = 0; i < sizeof reserved_names / sizeof *reserved_names; i++)
    if (!strcmp(k->name, reserved_names[i])) return bad(V, "kernel name is reserved");
  for (int c = 0; c < LC_CALLEE_COUNT; c++)
    if (!strcmp(k->name, loop_callee_info[c].name))
      return bad(V, "kernel name is reserved (a runtime function)");
  for (int j = 0; j < V->ki; j++)
    if (V->p->kernels[j].name && !strcmp(V->p->kernels[j].name, k->name))
      return bad(V, "two kernels have this name (kernel %d has it too)", j);
  return true;
}

static bool check_kernel(Vf *V, int ki) {
  const LKernel *k = &V->p->kernels[ki];
  V->ki = ki;
  V->k = NULL;
  if (!check_name(V, k)) return false;
  /* the extent is evaluated by the entry function, outside the kernel */
  if (!k->extent || k->extent->t != LT_I64) return bad(V, "extent is missing or not i64");
  if (!check_expr(V, k->extent, false)) return false;
  int64_t zeros[RT_MAX_SYMS] = {0}, n;
  if (!loop_expr_eval_i64(k->extent, zeros, &n))
    return bad(V, "extent is not integer arithmetic on constants and symbols");
  if (k->parallel && k->grain < 1) return bad(V, "grain %lld is not positive", (long long)k->grain);
  if (k->n_vars < 1 || !k->var_types || k->outer_var < 0 || k->outer_var >= k->n_vars ||
      k->var_types[k->outer_var] != LT_I64)
    return bad(V, "outer loop variable v%d is not an i64 variable of the kernel", k->outer_var);
  for (int v = 0; v < k->n_vars; v++)
    if (!type_ok(k->var_types[v]))
      return bad(V, "variable v%d has an unknown type %d", v, (int)k->var_types[v]);
  if (!k->body || k->body->kind != LS_BLOCK)
    return bad(V, "kernel body is missing or not a block");
  V->k = k;
  V->in_loop = calloc((size_t)k->n_vars * 2, sizeof *V->in_loop);
  if (!V->in_loop) return bad(V, "out of memory");
  V->defined = V->in_loop + k->n_vars;
  V->in_loop[k->outer_var] = V->defined[k->outer_var] = true;
  bool ok = check_body(V, k->body, 0);
  free(V->in_loop);
  V->in_loop = V->defined = NULL;
  /* share-kernels: the function of an earlier unshared kernel with the same
   * body up to buffers runs this one */
  if (ok && k->shares != -1) {
    if (k->shares < 0 || k->shares >= ki)
      return bad(V, "shares kernel %d, which is not an earlier kernel", k->shares);
    const LKernel *o = &V->p->kernels[k->shares];
    if (o->shares != -1)
      return bad(V, "shares kernel %d, which itself shares kernel %d", k->shares, o->shares);
    if (!loop_kernel_same(V->p, o, k))
      return bad(V, "shares kernel %d (%s) but their bodies differ beyond their buffers",
                 k->shares, o->name);
  }
  return ok;
}

static bool check_buffer(Vf *V, int i) {
  const LoopProgram *p = V->p;
  const LBuffer *b = &p->bufs[i];
  if ((unsigned)b->elem >= LE_COUNT)
    return bad(V, "buffer b%d has an unknown element type %d", i, (int)b->elem);
  if (b->kind != LB_WEIGHT && b->layout != LW_PLAIN)
    return bad(V, "buffer b%d: only weights have a layout", i);
  switch (b->kind) {
  case LB_INPUT:
  case LB_OUTPUT:
    if (b->index < 0 || b->index >= RT_MAX_IO)
      return bad(V, "buffer b%d: %s index %d out of range (0..%d)", i,
                 b->kind == LB_INPUT ? "input" : "output", b->index, RT_MAX_IO - 1);
    return true;
  case LB_WEIGHT:
    if (b->offset < 0 || b->offset > p->weights_floats)
      return bad(V, "buffer b%d: weights offset %lld outside %lld floats", i,
                 (long long)b->offset, (long long)p->weights_floats);
    if ((unsigned)b->layout >= LW_LAYOUT_COUNT)
      return bad(V, "buffer b%d has an unknown layout %d", i, (int)b->layout);
    if (b->layout != LW_PLAIN) {
      const int64_t lim = (int64_t)1 << 40;
      if (b->elem != LE_F32 || b->rows < 1 || b->cols < 1 || b->rows > lim || b->cols > lim)
        return bad(V, "buffer b%d: %s of %lld x %lld %s values", i, loop_layout_str(b->layout),
                   (long long)b->rows, (long long)b->cols, loop_elem_str(b->elem));
      if (b->offset % 16 || loop_weight_layout_floats(b) > p->weights_floats - b->offset)
        return bad(V, "buffer b%d: %s of %lld x %lld at offset %lld do not fit %lld floats "
                   "of weights at a multiple of 16", i, loop_layout_str(b->layout),
                   (long long)b->rows, (long long)b->cols, (long long)b->offset,
                   (long long)p->weights_floats);
    }
    return true;
  case LB_ARENA:
    if (b->offset < 0 || b->offset > p->arena_bytes)
      return bad(V, "buffer b%d: arena offset %lld outside %lld bytes", i, (long long)b->offset,
                 (long long)p->arena_bytes);
    if (b->offset % 64)
      return bad(V, "buffer b%d: arena offset %lld is not a multiple of 64", i,
                 (long long)b->offset);
    return true;
  case LB_STATE:
    if (b->offset < 0 || b->offset > p->state_bytes)
      return bad(V, "buffer b%d: state offset %lld outside %lld bytes", i, (long long)b->offset,
                 (long long)p->state_bytes);
    if (b->offset % 64)
      return bad(V, "buffer b%d: state offset %lld is not a multiple of 64", i,
                 (long long)b->offset);
    return true;
  case LB_KIND_COUNT: break;
  }
  return bad(V, "buffer b%d has an unknown kind %d", i, (int)b->kind);
}

bool loop_program_verify(const LoopProgram *p, char *err, size_t errlen) {
  Vf V = {.p = p, .ki = -1, .err = err, .errlen = errlen};
  if (!p) return bad(&V, "no program");
  if (p->n_bufs < 0 || p->n_kernels < 0 || (p->n_bufs && !p->bufs) ||
      (p->n_kernels && !p->kernels))
    return bad(&V, "malformed loop program (%d buffers, %d kernels)", p->n_bufs, p->n_kernels);
  if (p->n_syms < 0 || p->n_syms > RT_MAX_SYMS)
    return bad(&V, "malformed loop program (%d symbols; at most %d)", p->n_syms, RT_MAX_SYMS);
  if (p->arena_bytes < 0 || p->weights_floats < 0 || p->state_bytes < 0)
    return bad(&V, "malformed loop program (arena %lld bytes, weights %lld floats, state %lld bytes)",
               (long long)p->arena_bytes, (long long)p->weights_floats, (long long)p->state_bytes);
  for (int i = 0; i < p->n_bufs; i++)
    if (!check_buffer(&V, i)) return false;
  for (int i = 0; i < p->n_kernels; i++)
    if (!check_kernel(&V, i)) return false;
  return true;
}
