/* passes/loop_stats.c — what one forward of a loop program does, counted
 * statically from the loop IR at bound symbol values (an analysis; it does
 * not change the program): the kernels it runs, the runtime calls it makes
 * and the bytes it stores into the activation arena and the outputs.
 * `tfmc bench` compares these between pipelines to say what a pass removed.
 *
 * Loop IR has no conditionals: every statement of a kernel body runs once
 * per iteration of the loops around it, so a store's count is the product
 * of their trip counts. A loop whose body's trip counts or call sizes do not
 * depend on its variable is counted once and multiplied; one whose counts
 * do (a triangle, a block edge) is walked iteration by iteration with the
 * variable bound. What a runtime call writes comes from its size arguments
 * (call_out_bytes below: one case per row of ir/callees.def). */
#include "ir/loop.h"
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

/* explicit iterations walked at most before giving up (counts inexact) */
#define WALK_LIMIT ((int64_t)1 << 26)

typedef struct Counter {
  const LoopProgram *p;
  const LKernel *k;
  const int64_t *syms;
  int64_t *val;   /* I64 variable values */
  bool *known;    /* val[i] holds the variable's value */
  int64_t walked; /* iterations walked one by one */
  LoopStats *out;
} Counter;

/* An I64 expression of constants, symbols and known variables. */
static bool eval(const Counter *c, const LExpr *e, int64_t *v) {
  int64_t a, b;
  switch (e->kind) {
  case LX_CONST_I: *v = e->ival; return true;
  case LX_SYM: *v = c->syms[e->sym]; return true;
  case LX_VAR:
    if (e->t != LT_I64 || !c->known[e->var]) return false;
    *v = c->val[e->var];
    return true;
  case LX_BIN:
    if (e->t != LT_I64 || !eval(c, e->a, &a) || !eval(c, e->b, &b)) return false;
    switch ((LBinOp)e->op) {
    case LB_ADD: *v = a + b; return true;
    case LB_SUB: *v = a - b; return true;
    case LB_MUL: *v = a * b; return true;
    case LB_DIV: if (!b) return false; *v = a / b; return true;
    case LB_REM: if (!b) return false; *v = a % b; return true;
    case LB_MIN: *v = a < b ? a : b; return true;
    case LB_MAX: *v = a > b ? a : b; return true;
    case LB_LT: *v = a < b; return true;
    case LB_LE: *v = a <= b; return true;
    case LB_EQ: *v = a == b; return true;
    case LB_NE: *v = a != b; return true;
    case LB_AND: *v = a && b; return true;
    case LB_BINOP_COUNT: break;
    }
    return false;
  case LX_SELECT:
    if (e->t != LT_I64 || !eval(c, e->a, &a)) return false;
    return eval(c, a ? e->b : e->c, v);
  case LX_CONST_F:
  case LX_LOAD:
  case LX_ADDR:
  case LX_POOL:
  case LX_NULL:
  case LX_UN:
  case LX_CAST:
  case LX_KIND_COUNT: break;
  }
  return false;
}

static bool uses_var(const LExpr *e, int var) {
  if (!e) return false;
  if (e->kind == LX_VAR && e->var == var) return true;
  return uses_var(e->a, var) || uses_var(e->b, var) || uses_var(e->c, var);
}

/* Whether counting s needs var's value: a loop bound, an integer call
 * argument or an integer variable (which may feed those) computed from it. */
static bool counts_depend(const LStmt *s, int var) {
  switch (s->kind) {
  case LS_FOR:
    if (uses_var(s->lo, var) || uses_var(s->hi, var)) return true;
    break;
  case LS_LET:
  case LS_SET: return s->value->t == LT_I64 && uses_var(s->value, var);
  case LS_CALL:
    for (int i = 0; i < s->n_args; i++)
      if (s->args[i]->kind != LX_ADDR && uses_var(s->args[i], var)) return true;
    return false;
  case LS_STORE: return false;
  case LS_BLOCK: break;
  case LS_KIND_COUNT: return false;
  }
  for (int i = 0; i < s->n_stmts; i++)
    if (counts_depend(s->stmts[i], var)) return true;
  return false;
}

static bool written_region(const LBuffer *b) { return b->kind == LB_ARENA || b->kind == LB_OUTPUT; }

static int64_t elem_bytes(LElem e) { return e == LE_U8 ? 1 : 4; }

/* The value of the call's integer argument of that name (ir/callees.def). */
static bool call_arg(const Counter *c, const LStmt *s, const char *name, int64_t *v) {
  const LCalleeInfo *ci = &loop_callee_info[s->callee];
  for (int i = 0; i < ci->n_args && i < s->n_args; i++)
    if (strcmp(ci->args[i].name, name) == 0) return eval(c, s->args[i], v);
  TFMC_ASSERT(!"no such callee argument");
  return false;
}

/* bytes the call stores through its output argument `name` when that
 * points into the arena or an output (0 for null or another region) */
static int64_t out_bytes(const Counter *c, const LStmt *s, const char *name, int64_t floats) {
  const LCalleeInfo *ci = &loop_callee_info[s->callee];
  for (int i = 0; i < ci->n_args && i < s->n_args; i++)
    if (strcmp(ci->args[i].name, name) == 0)
      return s->args[i]->kind == LX_ADDR && written_region(&c->p->bufs[s->args[i]->buf])
                 ? floats * 4 : 0;
  TFMC_ASSERT(!"no such callee argument");
  return 0;
}

/* What one call writes, from its size arguments; false when a size is not
 * known statically. One case per callee: a new row of ir/callees.def adds
 * its case here (the switch has no default, so the compiler asks). */
static bool call_out_bytes(const Counter *c, const LStmt *s, int64_t *bytes) {
  int64_t m, n, b, h, tq, tk, dv;
  switch (s->callee) {
  case LC_LINEAR: /* y[M,N] */
  case LC_LINEAR_PACKED:
  case LC_LINEAR_PACKED_BF16:
  case LC_LINEAR_PACKED_I8:
    if (!call_arg(c, s, "m", &m) || !call_arg(c, s, "n", &n)) return false;
    *bytes = out_bytes(c, s, "y", m * n);
    return true;
  case LC_ATTENTION: /* out [B,Tq,H*dv] and probs [B,H,Tq,Tk] */
    if (!call_arg(c, s, "b", &b) || !call_arg(c, s, "h", &h) || !call_arg(c, s, "tq", &tq) ||
        !call_arg(c, s, "tk", &tk) || !call_arg(c, s, "dv", &dv))
      return false;
    *bytes = out_bytes(c, s, "out", b * h * tq * dv) + out_bytes(c, s, "probs", b * h * tq * tk);
    return true;
  case LC_ATTENTION_FLASH: /* out [B,Tq,H*dv]; its scores never leave the task's scratch */
    if (!call_arg(c, s, "b", &b) || !call_arg(c, s, "h", &h) || !call_arg(c, s, "tq", &tq) ||
        !call_arg(c, s, "dv", &dv))
      return false;
    *bytes = out_bytes(c, s, "out", b * h * tq * dv);
    return true;
  case LC_GELU: /* y[n] */
    if (!call_arg(c, s, "n", &n)) return false;
    *bytes = out_bytes(c, s, "y", n);
    return true;
  case LC_CALLEE_COUNT: break;
  }
  return false;
}

static void count_stmt(Counter *c, const LStmt *s, int64_t mult);

static void count_body(Counter *c, const LStmt *s, int64_t mult) {
  for (int i = 0; i < s->n_stmts; i++) count_stmt(c, s->stmts[i], mult);
}

/* A loop var = lo..hi-1 around body (s: its statements' holder). */
static void count_loop(Counter *c, const LStmt *body, int var, int64_t lo, int64_t hi,
                       int64_t mult) {
  if (hi <= lo || mult == 0) return;
  if (!counts_depend(body, var)) {
    c->known[var] = false;
    count_body(c, body, mult * (hi - lo));
    return;
  }
  if ((c->walked += hi - lo) > WALK_LIMIT) {
    c->out->exact = false;
    return;
  }
  for (int64_t i = lo; i < hi; i++) {
    c->val[var] = i;
    c->known[var] = true;
    count_body(c, body, mult);
  }
  c->known[var] = false;
}

static void count_stmt(Counter *c, const LStmt *s, int64_t mult) {
  int64_t lo, hi, v;
  switch (s->kind) {
  case LS_FOR:
    if (!eval(c, s->lo, &lo) || !eval(c, s->hi, &hi)) {
      c->out->exact = false;
      return;
    }
    count_loop(c, s, s->var, lo, hi, mult);
    return;
  case LS_LET:
  case LS_SET:
    if (s->value->t == LT_I64 && eval(c, s->value, &v)) {
      c->val[s->var] = v;
      c->known[s->var] = true;
    } else {
      c->known[s->var] = false;
    }
    return;
  case LS_STORE:
    if (written_region(&c->p->bufs[s->buf]))
      c->out->bytes_written += mult * elem_bytes(c->p->bufs[s->buf].elem);
    return;
  case LS_CALL:
    c->out->calls += mult;
    if (call_out_bytes(c, s, &v)) c->out->bytes_written += mult * v;
    else c->out->exact = false;
    return;
  case LS_BLOCK: count_body(c, s, mult); return;
  case LS_KIND_COUNT: break;
  }
  TFMC_ASSERT(!"bad statement kind");
}

void pass_loop_stats(const LoopProgram *p, const int64_t *syms, LoopStats *out) {
  memset(out, 0, sizeof *out);
  out->exact = true;
  int cap = 0;
  for (int i = 0; i < p->n_kernels; i++)
    if (p->kernels[i].n_vars > cap) cap = p->kernels[i].n_vars;
  int64_t *val = malloc((size_t)(cap + 1) * sizeof *val);
  bool *known = malloc((size_t)(cap + 1) * sizeof *known);
  TFMC_ASSERT(val && known);
  for (int i = 0; i < p->n_kernels; i++) {
    const LKernel *k = &p->kernels[i];
    Counter c = {p, k, syms, val, known, 0, out};
    memset(known, 0, (size_t)(cap + 1) * sizeof *known);
    int64_t extent;
    if (!eval(&c, k->extent, &extent)) {
      out->exact = false;
      continue;
    }
    if (extent <= 0) continue; /* runs no iteration: nothing executed */
    out->kernels++;
    count_loop(&c, k->body, k->outer_var, 0, extent, 1);
  }
  free(val);
  free(known);
}
