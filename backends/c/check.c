/* backends/c/check.c — validation of a loop program and its model
 * description before they are printed as C.
 *
 * The printer assumes what this file checks (the same rules the LLVM
 * backend enforces while it builds its module): a malformed program is
 * reported with the kernel's name and never printed, so the C backend never
 * writes code that fails to compile or reads out of its buffers' kinds.
 *
 * Invariant: the checks only read the program; recursion depth is bounded
 * by the depth of the expression trees (built by the lowering, small). */
#include "backends/c/c_internal.h"

#include <stdarg.h>
#include <string.h>

typedef struct Chk {
  const LoopProgram *p;
  const LKernel *k; /* NULL: checking extents (tfmc_model_run) */
  const char *where;
  char *err;
  size_t errlen;
  bool failed;
} Chk;

static bool bad(Chk *C, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool bad(Chk *C, const char *fmt, ...) {
  if (C->failed) return false;
  C->failed = true;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  c_fail(C->err, C->errlen, "c: %s: %s", C->where ? C->where : "program", msg);
  return false;
}

static bool type_ok(LType t) { return t == LT_I64 || t == LT_F32 || t == LT_F64; }
static bool is_float(LType t) { return t == LT_F32 || t == LT_F64; }

static const char *type_str(LType t) {
  switch (t) {
  case LT_I64: return "i64";
  case LT_F32: return "f32";
  case LT_F64: return "f64";
  case LT_COUNT: break;
  }
  return "bad type";
}

static bool buf_ok(Chk *C, int buf) {
  if (buf < 0 || buf >= C->p->n_bufs) return bad(C, "buffer b%d out of range", buf);
  if (!C->k) return bad(C, "reads buffer b%d in an extent", buf);
  return true;
}

static bool check_expr(Chk *C, const LExpr *e, bool as_arg);

static bool check_index(Chk *C, int buf, const LExpr *index) {
  if (!buf_ok(C, buf)) return false;
  if (!index || index->t != LT_I64) return bad(C, "index into b%d is not i64", buf);
  return check_expr(C, index, false);
}

static bool check_expr(Chk *C, const LExpr *e, bool as_arg) {
  if (C->failed) return false;
  if (!e) return bad(C, "missing expression");
  if (!type_ok(e->t)) return bad(C, "expression has an unknown type %d", (int)e->t);
  switch (e->kind) {
  case LX_CONST_I:
    return e->t == LT_I64 || bad(C, "integer constant typed %s", type_str(e->t));
  case LX_CONST_F:
    return is_float(e->t) || bad(C, "float constant typed i64");
  case LX_VAR:
    if (!C->k) return bad(C, "uses variable v%d in an extent (symbols and constants only)", e->var);
    if (e->var < 0 || e->var >= C->k->n_vars)
      return bad(C, "variable v%d out of range (the kernel has %d)", e->var, C->k->n_vars);
    if (C->k->var_types[e->var] != e->t)
      return bad(C, "v%d is %s but read as %s", e->var, type_str(C->k->var_types[e->var]),
                 type_str(e->t));
    return true;
  case LX_SYM:
    if (e->sym < 0 || e->sym >= C->p->n_syms || e->sym >= RT_MAX_SYMS)
      return bad(C, "symbol sym%d out of range (the program has %d)", e->sym, C->p->n_syms);
    return e->t == LT_I64 || bad(C, "symbol read as %s", type_str(e->t));
  case LX_LOAD: {
    if (!check_index(C, e->buf, e->a)) return false;
    LType want = C->p->bufs[e->buf].elem == LE_F32 ? LT_F32 : LT_I64;
    if (e->t != want)
      return bad(C, "load from b%d has type %s, expected %s", e->buf, type_str(e->t),
                 type_str(want));
    return true;
  }
  case LX_ADDR:
    if (!as_arg) return bad(C, "an address used outside a call argument");
    return check_index(C, e->buf, e->a);
  case LX_POOL:
  case LX_NULL:
    return as_arg || bad(C, "a pool or null operand used outside a call argument");
  case LX_BIN: {
    if (e->op < 0 || e->op >= LB_BINOP_COUNT) return bad(C, "unknown binary operator %d", e->op);
    if (!e->a || !e->b) return bad(C, "binary expression lacks an operand");
    LType t = e->a->t;
    if (!type_ok(t) || e->b->t != t)
      return bad(C, "binary operands have types %s and %s", type_str(t), type_str(e->b->t));
    LBinOp op = (LBinOp)e->op;
    bool cmp = op == LB_LT || op == LB_LE || op == LB_EQ || op == LB_NE;
    LType want = cmp || op == LB_AND ? LT_I64 : t;
    if (e->t != want)
      return bad(C, "binary expression has type %s, expected %s", type_str(e->t), type_str(want));
    if (is_float(t) && (op == LB_REM || op == LB_AND))
      return bad(C, "%s on floats", op == LB_REM ? "remainder" : "logical and");
    if (t == LT_I64 && (op == LB_DIV || op == LB_REM) && e->b->kind == LX_CONST_I && e->b->ival == 0)
      return bad(C, "integer %s by the constant 0", op == LB_DIV ? "division" : "remainder");
    return check_expr(C, e->a, false) && check_expr(C, e->b, false);
  }
  case LX_UN:
    if (e->op < 0 || e->op >= LU_UNOP_COUNT) return bad(C, "unknown unary operator %d", e->op);
    if (!e->a || !is_float(e->a->t) || e->t != e->a->t)
      return bad(C, "unary operator on %s giving %s (floats only)",
                 e->a ? type_str(e->a->t) : "nothing", type_str(e->t));
    return check_expr(C, e->a, false);
  case LX_SELECT:
    if (!e->a || !e->b || !e->c || e->a->t != LT_I64 || e->b->t != e->t || e->c->t != e->t)
      return bad(C, "malformed select");
    return check_expr(C, e->a, false) && check_expr(C, e->b, false) &&
           check_expr(C, e->c, false);
  case LX_CAST:
    if (!e->a || !type_ok(e->a->t)) return bad(C, "malformed cast");
    return check_expr(C, e->a, false);
  case LX_KIND_COUNT: break;
  }
  return bad(C, "unknown expression kind %d", (int)e->kind);
}

static bool check_var(Chk *C, int var, LType t, const char *what) {
  if (var < 0 || var >= C->k->n_vars)
    return bad(C, "%s variable v%d out of range (the kernel has %d)", what, var, C->k->n_vars);
  if (C->k->var_types[var] != t)
    return bad(C, "%s v%d is %s, given %s", what, var, type_str(C->k->var_types[var]),
               type_str(t));
  return true;
}

static bool writable(Chk *C, int buf, const char *how) {
  if (C->p->bufs[buf].kind == LB_WEIGHT) return bad(C, "%s b%d, which is in the weights", how, buf);
  return true;
}

/* A runtime call: the rules of its ir/callees.def row (loop_call_check),
 * then every expression it passes (indices of addresses included). */
static bool check_call(Chk *C, const LStmt *s) {
  char msg[256];
  if (!loop_call_check(C->p, s, msg, sizeof msg)) return bad(C, "%s", msg);
  for (int i = 0; i < s->n_args; i++)
    if (!check_expr(C, s->args[i], true)) return false;
  return true;
}

static bool check_stmt(Chk *C, const LStmt *s, int depth) {
  if (C->failed) return false;
  if (!s) return bad(C, "missing statement");
  if (depth > 64) return bad(C, "statements nested deeper than 64");
  switch (s->kind) {
  case LS_FOR:
    if (!check_var(C, s->var, LT_I64, "loop")) return false;
    if (!s->lo || !s->hi || s->lo->t != LT_I64 || s->hi->t != LT_I64)
      return bad(C, "loop over v%d has non-i64 bounds", s->var);
    if (!check_expr(C, s->lo, false) || !check_expr(C, s->hi, false)) return false;
    break;
  case LS_LET:
  case LS_SET:
    if (!s->value) return bad(C, "assignment to v%d lacks a value", s->var);
    if (s->kind == LS_LET && s->value->t != s->t)
      return bad(C, "let v%d: %s given a %s", s->var, type_str(s->t), type_str(s->value->t));
    return check_var(C, s->var, s->value->t, s->kind == LS_LET ? "let" : "set") &&
           check_expr(C, s->value, false);
  case LS_STORE: {
    if (!check_index(C, s->buf, s->index) || !writable(C, s->buf, "stores into")) return false;
    LType want = C->p->bufs[s->buf].elem == LE_F32 ? LT_F32 : LT_I64;
    if (!s->value || s->value->t != want)
      return bad(C, "store to b%d needs a %s value", s->buf, type_str(want));
    return check_expr(C, s->value, false);
  }
  case LS_CALL: return check_call(C, s);
  case LS_BLOCK: break;
  case LS_KIND_COUNT: return bad(C, "unknown statement kind %d", (int)s->kind);
  }
  if (s->n_stmts < 0 || (s->n_stmts > 0 && !s->stmts)) return bad(C, "block lacks its statements");
  for (int i = 0; i < s->n_stmts; i++)
    if (!check_stmt(C, s->stmts[i], depth + 1)) return false;
  return true;
}

int c_program_check(const LoopProgram *p, char *err, size_t errlen) {
  Chk C = {.p = p, .err = err, .errlen = errlen};
  if (!p) return c_fail(err, errlen, "c: no program");
  if (p->n_bufs < 0 || p->n_kernels < 0 || p->n_syms < 0 || p->n_syms > RT_MAX_SYMS ||
      (p->n_bufs && !p->bufs) || (p->n_kernels && !p->kernels))
    return c_fail(err, errlen, "c: malformed loop program (counts)");
  if (p->arena_bytes < 0 || p->weights_floats < 0)
    return c_fail(err, errlen, "c: malformed loop program (arena %lld bytes, weights %lld floats)",
                  (long long)p->arena_bytes, (long long)p->weights_floats);
  for (int i = 0; i < p->n_bufs; i++) {
    const LBuffer *b = &p->bufs[i];
    if ((unsigned)b->elem >= LE_COUNT)
      return c_fail(err, errlen, "c: buffer b%d has an unknown element type %d", i, (int)b->elem);
    if ((unsigned)b->kind >= LB_KIND_COUNT)
      return c_fail(err, errlen, "c: buffer b%d has an unknown kind %d", i, (int)b->kind);
    switch (b->kind) {
    case LB_INPUT:
    case LB_OUTPUT:
      if (b->index < 0 || b->index >= RT_MAX_IO)
        return c_fail(err, errlen, "c: buffer b%d: input/output index %d out of range", i,
                      b->index);
      break;
    case LB_WEIGHT:
      if (b->offset < 0 || b->offset > p->weights_floats)
        return c_fail(err, errlen, "c: buffer b%d: weights offset %lld outside %lld floats", i,
                      (long long)b->offset, (long long)p->weights_floats);
      break;
    case LB_ARENA:
      if (b->offset < 0 || b->offset > p->arena_bytes)
        return c_fail(err, errlen, "c: buffer b%d: arena offset %lld outside %lld bytes", i,
                      (long long)b->offset, (long long)p->arena_bytes);
      break;
    case LB_KIND_COUNT: break;
    }
  }
  for (int i = 0; i < p->n_kernels; i++) {
    const LKernel *k = &p->kernels[i];
    char where[96];
    snprintf(where, sizeof where, "kernel %d (%.60s)", i, k->name ? k->name : "unnamed");
    C.where = where;
    C.k = NULL;
    if (!k->extent || k->extent->t != LT_I64)
      return (void)bad(&C, "extent is missing or not i64"), 1;
    if (!check_expr(&C, k->extent, false)) return 1;
    if (k->parallel && k->grain < 1)
      return (void)bad(&C, "grain %lld is not positive", (long long)k->grain), 1;
    C.k = k;
    if (k->n_vars < 1 || !k->var_types || k->outer_var < 0 || k->outer_var >= k->n_vars ||
        k->var_types[k->outer_var] != LT_I64)
      return (void)bad(&C, "outer loop variable v%d is not an i64 variable of the kernel",
                       k->outer_var), 1;
    for (int v = 0; v < k->n_vars; v++)
      if (!type_ok(k->var_types[v]))
        return (void)bad(&C, "variable v%d has an unknown type %d", v, (int)k->var_types[v]), 1;
    if (!k->body || k->body->kind != LS_BLOCK)
      return (void)bad(&C, "kernel body is missing or not a block"), 1;
    if (!check_stmt(&C, k->body, 0)) return 1;
  }
  return 0;
}

static int check_tensor(const RtModelInfo *info, const RtTensorInfo *t, const char *what, int i,
                        char *err, size_t errlen) {
  if (!t->name) return c_fail(err, errlen, "c: model info: %s %d has no name", what, i);
  if (t->rank < 0 || t->rank > RT_MAX_RANK)
    return c_fail(err, errlen, "c: model info: %s %d has rank %d", what, i, t->rank);
  if ((unsigned)t->elem >= RT_ELEM_COUNT)
    return c_fail(err, errlen, "c: model info: %s %d has element type %d", what, i, (int)t->elem);
  if ((unsigned)t->kind >= RT_INPUT_KIND_COUNT)
    return c_fail(err, errlen, "c: model info: %s %d has kind %d", what, i, (int)t->kind);
  for (int d = 0; d < t->rank; d++)
    if (t->dims[d].sym < -1 || t->dims[d].sym >= info->n_syms)
      return c_fail(err, errlen, "c: model info: %s %d dim %d names symbol %d", what, i, d,
                    t->dims[d].sym);
  return 0;
}

int c_info_check(const RtModelInfo *info, const LoopProgram *p, char *err, size_t errlen) {
  if (!info) return c_fail(err, errlen, "c: no model info");
  if (info->n_syms < 0 || info->n_syms > RT_MAX_SYMS || info->n_inputs < 0 ||
      info->n_inputs > RT_MAX_IO || info->n_outputs < 0 || info->n_outputs > RT_MAX_IO ||
      info->n_weights < 0 || (info->n_inputs && !info->inputs) ||
      (info->n_outputs && !info->outputs) || (info->n_weights && !info->weights))
    return c_fail(err, errlen, "c: model info: bad symbol, input, output or weight counts");
  if (p && info->n_syms < p->n_syms)
    return c_fail(err, errlen, "c: model info has %d symbols; the program uses %d", info->n_syms,
                  p->n_syms);
  if (info->weights_floats < 0 || info->arena_bytes < 0)
    return c_fail(err, errlen, "c: model info: negative weights or arena size");
  if (p && (info->weights_floats != p->weights_floats || info->arena_bytes != p->arena_bytes))
    return c_fail(err, errlen,
                  "c: model info (%lld weight floats, %lld arena bytes) does not match the "
                  "program (%lld, %lld)",
                  (long long)info->weights_floats, (long long)info->arena_bytes,
                  (long long)p->weights_floats, (long long)p->arena_bytes);
  for (int s = 0; s < info->n_syms; s++)
    if (!info->sym_names[s])
      return c_fail(err, errlen, "c: model info: symbol %d has no name", s);
  for (int i = 0; i < info->n_inputs; i++)
    if (check_tensor(info, &info->inputs[i], "input", i, err, errlen)) return 1;
  for (int i = 0; i < info->n_outputs; i++)
    if (check_tensor(info, &info->outputs[i], "output", i, err, errlen)) return 1;
  if (p)
    for (int i = 0; i < p->n_bufs; i++) {
      const LBuffer *b = &p->bufs[i];
      if ((b->kind == LB_INPUT && b->index >= info->n_inputs) ||
          (b->kind == LB_OUTPUT && b->index >= info->n_outputs))
        return c_fail(err, errlen, "c: buffer b%d is %s %d; the model info has %d", i,
                      b->kind == LB_INPUT ? "input" : "output", b->index,
                      b->kind == LB_INPUT ? info->n_inputs : info->n_outputs);
    }
  if (info->n_kernels < 0 || (info->n_kernels && !info->kernels))
    return c_fail(err, errlen, "c: model info: bad kernel count %d", info->n_kernels);
  if (p && info->n_kernels && info->n_kernels != p->n_kernels)
    return c_fail(err, errlen, "c: model info names %d kernels; the program has %d",
                  info->n_kernels, p->n_kernels);
  for (int i = 0; i < info->n_kernels; i++)
    if (!info->kernels[i].name || !info->kernels[i].op)
      return c_fail(err, errlen, "c: model info: kernel %d has no name or op kind", i);
  for (int i = 0; i < info->n_weights; i++) {
    const RtWeightInfo *w = &info->weights[i];
    if (!w->name) return c_fail(err, errlen, "c: model info: weight %d has no name", i);
    if (w->rank < 0 || w->rank > RT_MAX_RANK)
      return c_fail(err, errlen, "c: model info: weight %d has rank %d", i, w->rank);
    int64_t n = 1;
    for (int d = 0; d < w->rank; d++) {
      if (w->shape[d] < 0 || (w->shape[d] && n > INT64_MAX / w->shape[d]))
        return c_fail(err, errlen, "c: model info: weight %d has a bad shape", i);
      n *= w->shape[d];
    }
    if (w->offset < 0 || w->offset > info->weights_floats || n > info->weights_floats - w->offset)
      return c_fail(err, errlen, "c: model info: weight %d lies outside the %lld weight floats", i,
                    (long long)info->weights_floats);
  }
  return 0;
}
