/* backends/c/emit.c — loop IR printed as C99: model.c.
 *
 * Each kernel becomes
 *
 *     static void NAME(void *args_, int64_t lo, int64_t hi) {
 *       const RtRunArgs *args = (const RtRunArgs *)args_;
 *       const int64_t s0 = args->syms[0];                        symbols it reads
 *       const float *b3 = args->weights + 1024;                  buffers it touches
 *       float *b7 = (float *)(args->arena + 4096);
 *       for (int64_t v0 = lo; v0 < hi; ++v0) { body }
 *     }
 *
 * and tfmc_model_run calls them in order, each through the runtime's
 * rt_kernel_run (the pool for parallel kernels, a kernel whose extent is
 * not positive skipped, timing under --profile: runtime/rt_profile.c). It
 * means what the LLVM backend's module means (backends/llvm/emit.c):
 *   - a loop's upper bound is evaluated once (printed in place when nothing
 *     in the loop can change it, else held in vN_end);
 *   - a variable is declared where the IR defines it (LS_LET) when every use
 *     is inside that scope, else once at the top of the kernel, zeroed, as
 *     the LLVM backend's allocas are; LS_LET then assigns;
 *   - int64_t arithmetic, tfmc_fminf/tfmc_fmaxf for min/max (fminf/fmaxf
 *     semantics, written out so they vectorise; llvm.minnum/maxnum),
 *     expf/logf/sqrtf/sinf/cosf/tanhf/erff (f64: exp, ...), comparisons as
 *     (int64_t)(a < b), all strict IEEE (no contraction: ISO C mode under
 *     gcc, FP_CONTRACT OFF under clang); the IR's reassoc hints are not
 *     expressible per operation in C, so reassoc ops print as plain ones
 *     (the lane-split loop pass, passes/lane_split.c, is what turns a
 *     reassociable reduction into the 8 independent lanes compilers
 *     vectorise without -ffast-math, in the IR both backends print);
 *   - loads of i32 / u8 buffers are widened to int64_t, stores truncate
 *     (an i32 / u8 load compared with a constant at the edge of its range
 *     goes through tfmc_i64(), or gcc's -Wtype-limits would reject it);
 *   - i64 truth values used as conditions print as plain C conditions:
 *     select(a < b, x, y) is (a < b) ? x : y.
 * Names: kernels keep their IR names when those are k<N>_<op> (see
 * c_kernel_name); buffers are bN, symbols sN (symN in the loop IR
 * listing), variables vN, as in the listing; everything else (buffer names, comments) goes through the
 * escaping printers of text.c.
 *
 * Invariant: c_emit_model prints only programs that the loop IR verifier
 * (ir/loop_verify.c, through c_program_check) accepts and relies on its
 * rules without checking them again; otherwise the output is an #error
 * line with the reason, so a broken program can never compile silently. */
#include "backends/c/c_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct Em {
  const LoopProgram *p;
  const RtModelInfo *info; /* may be NULL: no shape comments, no model info */
  FILE *out;
  const char *entry;       /* the entry function's name (tfmc_model_run) */
  bool use_imin, use_imax; /* helpers needed by some kernel */
  bool use_fmin, use_fmax;
  bool use_widen;
  bool use_callee[LC_CALLEE_COUNT]; /* runtime functions some kernel calls */
  /* per kernel */
  const LKernel *k;
  bool *buf_used, *buf_written; /* [n_bufs] */
  bool sym_used[RT_MAX_SYMS];
  bool uses_pool;
  bool *hoist, *seen, *read; /* [n_vars] */
  int *live;                 /* [n_vars]: depth of the scope declaring it, or -1 */
} Em;

static void indent(Em *E, int depth) { fprintf(E->out, "%*s", 2 * depth, ""); }

static const char *ctype(LType t) {
  switch (t) {
  case LT_I64: return "int64_t";
  case LT_F32: return "float";
  case LT_F64: return "double";
  case LT_COUNT: break;
  }
  return "int64_t";
}

static const char *elem_ctype(LElem e) {
  switch (e) {
  case LE_F32: return "float";
  case LE_I32: return "int32_t";
  case LE_U8: return "uint8_t";
  case LE_COUNT: break;
  }
  return "float";
}

static const char *elem_name(LElem e) {
  switch (e) {
  case LE_F32: return "f32";
  case LE_I32: return "i32";
  case LE_U8: return "u8";
  case LE_COUNT: break;
  }
  return "?";
}

/* ---- kernel names ---- */

static bool k_name_ok(const char *s) {
  if (!s || s[0] != 'k' || s[1] < '0' || s[1] > '9') return false;
  size_t i = 1;
  while (s[i] >= '0' && s[i] <= '9') i++;
  if (s[i] == '\0') return i <= 60;
  if (s[i] != '_') return false;
  for (; s[i]; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return i <= 60;
}

const char *c_kernel_name(const LoopProgram *p, int i, char *buf, size_t buflen) {
  const char *name = p->kernels[i].name;
  bool ok = k_name_ok(name);
  for (int j = 0; ok && j < i; j++) ok = strcmp(p->kernels[j].name ? p->kernels[j].name : "", name);
  if (ok) snprintf(buf, buflen, "%s", name);
  else snprintf(buf, buflen, "tfmc_kernel_%d", i);
  return buf;
}

/* ---- analysis: buffers, symbols and where variables can be declared ---- */

/* gcc's -Wtype-limits sees through casts: `(int64_t)u8 < 0` or
 * `(int64_t)i32 == 5000000000` is "always false" and fails -Werror. Such a
 * compare operand goes through tfmc_i64(), a plain function, instead:
 * side `side` of compare e when it is an i32 / u8 load and the other side
 * a constant at or beyond the edge of the load's range. */
static bool needs_widen(const LoopProgram *p, const LExpr *e, int side) {
  if (e->kind != LX_BIN || !(e->op == LB_LT || e->op == LB_LE || e->op == LB_EQ || e->op == LB_NE))
    return false;
  const LExpr *x = side ? e->b : e->a, *c = side ? e->a : e->b;
  if (x->kind != LX_LOAD || p->bufs[x->buf].elem == LE_F32 || c->kind != LX_CONST_I) return false;
  int64_t lo = p->bufs[x->buf].elem == LE_U8 ? 0 : INT32_MIN;
  int64_t hi = p->bufs[x->buf].elem == LE_U8 ? 255 : INT32_MAX;
  if (e->op == LB_EQ || e->op == LB_NE) return c->ival < lo || c->ival > hi;
  return c->ival <= lo || c->ival >= hi;
}

static void an_expr(Em *E, const LExpr *e) {
  if (!e) return;
  switch (e->kind) {
  case LX_VAR:
    if (E->k) {
      E->seen[e->var] = E->read[e->var] = true;
      if (E->live[e->var] < 0) E->hoist[e->var] = true;
    }
    break;
  case LX_SYM: E->sym_used[e->sym] = true; break;
  case LX_LOAD:
  case LX_ADDR: E->buf_used[e->buf] = true; break;
  case LX_POOL: E->uses_pool = true; break;
  case LX_BIN:
    if (e->t == LT_I64 && e->a && e->a->t == LT_I64) {
      if (e->op == LB_MIN) E->use_imin = true;
      if (e->op == LB_MAX) E->use_imax = true;
    }
    if (e->a && e->a->t == LT_F32) {
      if (e->op == LB_MIN) E->use_fmin = true;
      if (e->op == LB_MAX) E->use_fmax = true;
    }
    if (needs_widen(E->p, e, 0) || needs_widen(E->p, e, 1)) E->use_widen = true;
    break;
  case LX_CONST_I:
  case LX_CONST_F:
  case LX_NULL:
  case LX_UN:
  case LX_SELECT:
  case LX_CAST:
  case LX_KIND_COUNT: break;
  }
  an_expr(E, e->a);
  an_expr(E, e->b);
  an_expr(E, e->c);
}

static bool expr_reads_var(const LExpr *e, int var) {
  if (!e) return false;
  if (e->kind == LX_VAR && e->var == var) return true;
  return expr_reads_var(e->a, var) || expr_reads_var(e->b, var) || expr_reads_var(e->c, var);
}

static void close_scope(Em *E, int depth) {
  for (int v = 0; v < E->k->n_vars; v++)
    if (E->live[v] == depth) E->live[v] = -1;
}

static void an_stmts(Em *E, LStmt *const *stmts, int n, int depth);

/* depth: the depth of the block holding s (the kernel body is depth 1) */
static void an_stmt(Em *E, const LStmt *s, int depth) {
  switch (s->kind) {
  case LS_FOR:
    an_expr(E, s->lo);
    an_expr(E, s->hi);
    E->seen[s->var] = true;
    if (E->live[s->var] >= 0) E->hoist[s->var] = true; /* would shadow a live variable */
    else E->live[s->var] = depth + 1;
    an_stmts(E, s->stmts, s->n_stmts, depth + 1);
    close_scope(E, depth + 1);
    return;
  case LS_LET:
    an_expr(E, s->value);
    E->seen[s->var] = true;
    /* a redefinition, or an initializer reading the variable it defines,
     * only means the same thing in C with one declaration at the top */
    if (E->live[s->var] >= 0 || expr_reads_var(s->value, s->var)) E->hoist[s->var] = true;
    else E->live[s->var] = depth;
    return;
  case LS_SET:
    an_expr(E, s->value);
    E->seen[s->var] = true;
    if (E->live[s->var] < 0) E->hoist[s->var] = true;
    return;
  case LS_STORE:
    an_expr(E, s->index);
    an_expr(E, s->value);
    E->buf_used[s->buf] = E->buf_written[s->buf] = true;
    return;
  case LS_CALL: {
    /* the verifier accepted the call: its arguments match its row */
    const LCalleeInfo *ci = &loop_callee_info[s->callee];
    E->use_callee[s->callee] = true;
    for (int i = 0; i < s->n_args; i++) {
      an_expr(E, s->args[i]);
      LArgKind kind = ci->args[i].kind;
      if ((kind == LA_F32_OUT || kind == LA_F32_OUT_OR_NULL) && s->args[i]->kind == LX_ADDR)
        E->buf_written[s->args[i]->buf] = true;
    }
    return;
  }
  case LS_BLOCK:
    an_stmts(E, s->stmts, s->n_stmts, depth + 1);
    close_scope(E, depth + 1);
    return;
  case LS_KIND_COUNT: return;
  }
}

static void an_stmts(Em *E, LStmt *const *stmts, int n, int depth) {
  for (int i = 0; i < n; i++) an_stmt(E, stmts[i], depth);
}

static void analyse_kernel(Em *E, const LKernel *k) {
  E->k = k;
  memset(E->buf_used, 0, (size_t)E->p->n_bufs + 1);
  memset(E->buf_written, 0, (size_t)E->p->n_bufs + 1);
  memset(E->sym_used, 0, sizeof E->sym_used);
  E->uses_pool = false;
  for (int v = 0; v < k->n_vars; v++) {
    E->hoist[v] = E->seen[v] = E->read[v] = false;
    E->live[v] = -1;
  }
  E->seen[k->outer_var] = true;
  E->live[k->outer_var] = 1;
  an_stmts(E, k->body->stmts, k->body->n_stmts, 1);
}

/* Does anything in stmts read var?  (for the "(void)vN;" of a variable
 * defined and never read, which -Wunused would reject) */
static bool stmts_read_var(LStmt *const *stmts, int n, int var) {
  for (int i = 0; i < n; i++) {
    const LStmt *s = stmts[i];
    if (expr_reads_var(s->lo, var) || expr_reads_var(s->hi, var) ||
        expr_reads_var(s->value, var) || expr_reads_var(s->index, var))
      return true;
    for (int a = 0; s->kind == LS_CALL && a < s->n_args; a++)
      if (expr_reads_var(s->args[a], var)) return true;
    if ((s->kind == LS_FOR || s->kind == LS_BLOCK) && stmts_read_var(s->stmts, s->n_stmts, var))
      return true;
  }
  return false;
}

/* Can a loop bound be printed in the condition (re-evaluated each
 * iteration) and still mean "evaluated once"?  Yes when it loads nothing
 * and no variable it reads is assigned inside the loop. */
static bool stmts_assign_var(LStmt *const *stmts, int n, int var) {
  for (int i = 0; i < n; i++) {
    const LStmt *s = stmts[i];
    if ((s->kind == LS_LET || s->kind == LS_SET || s->kind == LS_FOR) && s->var == var) return true;
    if ((s->kind == LS_FOR || s->kind == LS_BLOCK) && stmts_assign_var(s->stmts, s->n_stmts, var))
      return true;
  }
  return false;
}

static bool bound_invariant(const LExpr *e, const LStmt *loop) {
  if (!e) return true;
  if (e->kind == LX_LOAD) return false;
  if (e->kind == LX_VAR &&
      (e->var == loop->var || stmts_assign_var(loop->stmts, loop->n_stmts, e->var)))
    return false;
  return bound_invariant(e->a, loop) && bound_invariant(e->b, loop) &&
         bound_invariant(e->c, loop);
}

/* ---- expressions ---- */

static void put_expr(Em *E, const LExpr *e, bool top);
static void put_cond(Em *E, const LExpr *e);

static void put_call1(Em *E, const char *fn, const LExpr *a) {
  fprintf(E->out, "%s(", fn);
  put_expr(E, a, true);
  fputc(')', E->out);
}

static void put_call2(Em *E, const char *fn, const LExpr *a, const LExpr *b) {
  fprintf(E->out, "%s(", fn);
  put_expr(E, a, true);
  fputs(", ", E->out);
  put_expr(E, b, true);
  fputc(')', E->out);
}

static const char *bin_token(LBinOp op) {
  switch (op) {
  case LB_ADD: return "+";
  case LB_SUB: return "-";
  case LB_MUL: return "*";
  case LB_DIV: return "/";
  case LB_REM: return "%";
  case LB_LT: return "<";
  case LB_LE: return "<=";
  case LB_EQ: return "==";
  case LB_NE: return "!=";
  case LB_MIN:
  case LB_MAX:
  case LB_AND:
  case LB_BINOP_COUNT: break;
  }
  return "?";
}

static bool is_cond(const LExpr *e) {
  return e->kind == LX_BIN && (e->op == LB_LT || e->op == LB_LE || e->op == LB_EQ ||
                               e->op == LB_NE || e->op == LB_AND);
}

/* An I64 truth value (nonzero = true) as a C condition: compares and
 * logical and as themselves, anything else as `x != 0`. Not parenthesised:
 * the caller puts it where a full expression or a `?:` condition goes. */
static void put_cond(Em *E, const LExpr *e) {
  FILE *o = E->out;
  if (!is_cond(e)) {
    put_expr(E, e, false);
    fputs(" != 0", o);
    return;
  }
  if (e->op == LB_AND) {
    for (int side = 0; side < 2; side++) {
      const LExpr *x = side ? e->b : e->a;
      if (side) fputs(" && ", o);
      if (is_cond(x)) fputc('(', o);
      put_cond(E, x);
      if (is_cond(x)) fputc(')', o);
    }
    return;
  }
  for (int side = 0; side < 2; side++) {
    const LExpr *x = side ? e->b : e->a;
    if (side) fprintf(o, " %s ", bin_token((LBinOp)e->op));
    if (needs_widen(E->p, e, side)) {
      fprintf(o, "tfmc_i64(b%d[", x->buf);
      put_expr(E, x->a, true);
      fputs("])", o);
    } else {
      put_expr(E, x, false);
    }
  }
}

static void put_bin(Em *E, const LExpr *e, bool top) {
  LBinOp op = (LBinOp)e->op;
  LType t = e->a->t;
  FILE *o = E->out;
  switch (op) {
  case LB_MIN:
  case LB_MAX:
    put_call2(E, t == LT_I64   ? (op == LB_MIN ? "tfmc_min_i64" : "tfmc_max_i64")
                 : t == LT_F32 ? (op == LB_MIN ? "tfmc_fminf" : "tfmc_fmaxf")
                               : (op == LB_MIN ? "fmin" : "fmax"),
              e->a, e->b);
    return;
  case LB_LT:
  case LB_LE:
  case LB_EQ:
  case LB_NE:
  case LB_AND:
    fputs("(int64_t)(", o);
    put_cond(E, e);
    fputc(')', o);
    return;
  case LB_ADD:
  case LB_SUB:
  case LB_MUL:
  case LB_DIV:
  case LB_REM:
    if (!top) fputc('(', o);
    /* two literals would be computed in int: make the first int64_t */
    if (t == LT_I64 && e->a->kind == LX_CONST_I && e->b->kind == LX_CONST_I) fputs("(int64_t)", o);
    put_expr(E, e->a, false);
    fprintf(o, " %s ", bin_token(op));
    put_expr(E, e->b, false);
    if (!top) fputc(')', o);
    return;
  case LB_BINOP_COUNT: break;
  }
}

static const char *un_fn(LUnOp op, bool f32) {
  switch (op) {
  case LU_EXP: return f32 ? "expf" : "exp";
  case LU_LOG: return f32 ? "logf" : "log";
  case LU_SQRT: return f32 ? "sqrtf" : "sqrt";
  case LU_TANH: return f32 ? "tanhf" : "tanh";
  case LU_ERF: return f32 ? "erff" : "erf";
  case LU_SIN: return f32 ? "sinf" : "sin";
  case LU_COS: return f32 ? "cosf" : "cos";
  case LU_NEG:
  case LU_UNOP_COUNT: break;
  }
  return "?";
}

/* `buf + index`, or just `buf` at index 0 */
static void put_addr(Em *E, const LExpr *e) {
  if (e->a->kind == LX_CONST_I && e->a->ival == 0) {
    fprintf(E->out, "b%d", e->buf);
    return;
  }
  fprintf(E->out, "b%d + ", e->buf);
  put_expr(E, e->a, false);
}

static void put_expr(Em *E, const LExpr *e, bool top) {
  FILE *o = E->out;
  switch (e->kind) {
  case LX_CONST_I: c_put_i64(o, e->ival); return;
  case LX_CONST_F: c_put_float(o, e->fval, e->t == LT_F32); return;
  case LX_VAR: fprintf(o, "v%d", e->var); return;
  case LX_SYM: fprintf(o, "s%d", e->sym); return;
  case LX_LOAD:
    if (E->p->bufs[e->buf].elem != LE_F32) fputs("(int64_t)", o);
    fprintf(o, "b%d[", e->buf);
    put_expr(E, e->a, true);
    fputc(']', o);
    return;
  case LX_ADDR: put_addr(E, e); return;
  case LX_POOL: fputs("args->pool", o); return;
  case LX_NULL: fputs("NULL", o); return;
  case LX_BIN: put_bin(E, e, top); return;
  case LX_UN:
    if (e->op == LU_NEG) {
      fputs("(-", o);
      put_expr(E, e->a, false);
      fputc(')', o);
    } else {
      put_call1(E, un_fn((LUnOp)e->op, e->t == LT_F32), e->a);
    }
    return;
  case LX_SELECT:
    if (!top) fputc('(', o);
    if (is_cond(e->a)) fputc('(', o);
    put_cond(E, e->a);
    if (is_cond(e->a)) fputc(')', o);
    fputs(" ? ", o);
    put_expr(E, e->b, false);
    fputs(" : ", o);
    put_expr(E, e->c, false);
    if (!top) fputc(')', o);
    return;
  case LX_CAST:
    fprintf(o, "(%s)", ctype(e->t));
    put_expr(E, e->a, false);
    return;
  case LX_KIND_COUNT: break;
  }
}

/* The extent in a comment, with symbol names: "B*S" reads better than
 * "(s0 * s1)". */
static void put_comment_expr(Em *E, const LExpr *e) {
  FILE *o = E->out;
  switch (e->kind) {
  case LX_CONST_I: fprintf(o, "%lld", (long long)e->ival); return;
  case LX_SYM:
    if (E->info && e->sym < E->info->n_syms && E->info->sym_names[e->sym])
      c_put_comment(o, E->info->sym_names[e->sym]);
    else
      fprintf(o, "s%d", e->sym);
    return;
  case LX_BIN:
    if (e->op == LB_ADD || e->op == LB_SUB || e->op == LB_MUL || e->op == LB_DIV) {
      bool paren = e->op == LB_ADD || e->op == LB_SUB;
      if (paren) fputc('(', o);
      put_comment_expr(E, e->a);
      fprintf(o, " %s ", bin_token((LBinOp)e->op));
      put_comment_expr(E, e->b);
      if (paren) fputc(')', o);
      return;
    }
    break;
  case LX_CONST_F:
  case LX_VAR:
  case LX_LOAD:
  case LX_ADDR:
  case LX_POOL:
  case LX_NULL:
  case LX_UN:
  case LX_SELECT:
  case LX_CAST:
  case LX_KIND_COUNT: break;
  }
  fputs("(expression)", o);
}

/* ---- statements ---- */

static void put_stmts(Em *E, LStmt *const *stmts, int n, int depth);

static void put_for(Em *E, const LStmt *s, int depth) {
  FILE *o = E->out;
  int v = s->var;
  bool inv = bound_invariant(s->hi, s);
  bool decl = !E->hoist[v];
  indent(E, depth);
  if (!inv && !decl) { /* the bound needs its own variable and a scope for it */
    fprintf(o, "{\n");
    indent(E, ++depth);
    fprintf(o, "const int64_t v%d_end = ", v);
    put_expr(E, s->hi, true);
    fprintf(o, ";\n");
    indent(E, depth);
  }
  fprintf(o, "for (%sv%d = ", decl ? "int64_t " : "", v);
  put_expr(E, s->lo, true);
  if (!inv && decl) {
    fprintf(o, ", v%d_end = ", v);
    put_expr(E, s->hi, true);
  }
  fprintf(o, "; v%d < ", v);
  if (inv) put_expr(E, s->hi, false);
  else fprintf(o, "v%d_end", v);
  fprintf(o, "; ++v%d) {\n", v);
  put_stmts(E, s->stmts, s->n_stmts, depth + 1);
  indent(E, depth);
  fprintf(o, "}\n");
  if (!inv && !decl) {
    indent(E, depth - 1);
    fprintf(o, "}\n");
  }
}

static void put_call(Em *E, const LStmt *s, int depth) {
  indent(E, depth);
  fprintf(E->out, "%s(", loop_callee_info[s->callee].name);
  for (int i = 0; i < s->n_args; i++) {
    if (i) fputs(", ", E->out);
    put_expr(E, s->args[i], true);
  }
  fputs(");\n", E->out);
}

/* s is stmts[i] of a block: the rest of the block is stmts[i+1..n) */
static void put_stmt(Em *E, LStmt *const *stmts, int i, int n, int depth) {
  const LStmt *s = stmts[i];
  FILE *o = E->out;
  switch (s->kind) {
  case LS_FOR: put_for(E, s, depth); return;
  case LS_LET:
    indent(E, depth);
    if (!E->hoist[s->var]) fprintf(o, "%s ", ctype(s->t));
    fprintf(o, "v%d = ", s->var);
    put_expr(E, s->value, true);
    fprintf(o, ";\n");
    if (!E->hoist[s->var] && !stmts_read_var(stmts + i + 1, n - i - 1, s->var)) {
      indent(E, depth);
      fprintf(o, "(void)v%d;\n", s->var);
    }
    return;
  case LS_SET:
    indent(E, depth);
    fprintf(o, "v%d = ", s->var);
    put_expr(E, s->value, true);
    fprintf(o, ";\n");
    return;
  case LS_STORE: {
    LElem el = E->p->bufs[s->buf].elem;
    indent(E, depth);
    fprintf(o, "b%d[", s->buf);
    put_expr(E, s->index, true);
    fprintf(o, "] = ");
    if (el != LE_F32) {
      fprintf(o, "(%s)", elem_ctype(el));
      put_expr(E, s->value, false);
    } else {
      put_expr(E, s->value, true);
    }
    fprintf(o, ";\n");
    return;
  }
  case LS_CALL: put_call(E, s, depth); return;
  case LS_BLOCK:
    indent(E, depth);
    fprintf(o, "{\n");
    put_stmts(E, s->stmts, s->n_stmts, depth + 1);
    indent(E, depth);
    fprintf(o, "}\n");
    return;
  case LS_KIND_COUNT: return;
  }
}

static void put_stmts(Em *E, LStmt *const *stmts, int n, int depth) {
  for (int i = 0; i < n; i++) put_stmt(E, stmts, i, n, depth);
}

/* ---- buffers and their comments ---- */

static void put_dims(Em *E, const RtTensorInfo *t) {
  fputc('[', E->out);
  for (int d = 0; d < t->rank; d++) {
    if (d) fputc(',', E->out);
    const RtDim *dim = &t->dims[d];
    if (dim->sym >= 0 && dim->sym < E->info->n_syms && E->info->sym_names[dim->sym])
      c_put_comment(E->out, E->info->sym_names[dim->sym]);
    else
      fprintf(E->out, "%lld", (long long)dim->value);
  }
  fputc(']', E->out);
}

static const RtWeightInfo *weight_info(Em *E, const LBuffer *b) {
  if (!E->info) return NULL;
  for (int i = 0; i < E->info->n_weights; i++) {
    const RtWeightInfo *w = &E->info->weights[i];
    if (w->offset == b->offset && w->name && b->name && strcmp(w->name, b->name) == 0) return w;
  }
  return NULL;
}

/* "input tokens i32[B,S]", "weight enc.0.attn.q.weight f32[64,64]",
 * "weight embed.weight f32[13,64] in panels" (a weight gathered from the
 * panels its linear reads: loop.h LW_PANELS), "%12 (arena +4096)" */
static void put_buffer_comment(Em *E, const LBuffer *b) {
  FILE *o = E->out;
  const RtTensorInfo *t = NULL;
  switch (b->kind) {
  case LB_INPUT:
  case LB_OUTPUT:
    fputs(b->kind == LB_INPUT ? "input " : "output ", o);
    if (E->info && b->index < (b->kind == LB_INPUT ? E->info->n_inputs : E->info->n_outputs))
      t = b->kind == LB_INPUT ? &E->info->inputs[b->index] : &E->info->outputs[b->index];
    c_put_comment(o, t ? t->name : b->name);
    fprintf(o, " %s", elem_name(b->elem));
    if (t) put_dims(E, t);
    return;
  case LB_WEIGHT: {
    const RtWeightInfo *w = weight_info(E, b);
    fputs("weight ", o);
    c_put_comment(o, b->name);
    if (w) {
      fputs(" f32[", o);
      for (int d = 0; d < w->rank; d++) fprintf(o, "%s%lld", d ? "," : "", (long long)w->shape[d]);
      fputc(']', o);
    }
    if (loop_layout_str(b->layout)) fprintf(o, " in %s", loop_layout_str(b->layout));
    return;
  }
  case LB_ARENA:
  case LB_STATE:
    c_put_comment(o, b->name);
    fprintf(o, " %s (%s +%lld)", elem_name(b->elem), b->kind == LB_ARENA ? "arena" : "state",
            (long long)b->offset);
    return;
  case LB_KIND_COUNT: return;
  }
}

/* The address of buffer i computed from args (in tfmc_model_run), typed
 * with cq ("" or "const "). */
static void put_buffer_base(Em *E, int i, const char *cq) {
  const LBuffer *b = &E->p->bufs[i];
  FILE *o = E->out;
  const char *ty = elem_ctype(b->elem);
  switch (b->kind) {
  case LB_INPUT: fprintf(o, "(%s%s *)args->inputs[%d]", cq, ty, b->index); break;
  case LB_OUTPUT:
    if (b->elem == LE_F32) fprintf(o, "args->outputs[%d]", b->index);
    else fprintf(o, "(%s%s *)args->outputs[%d]", cq, ty, b->index);
    break;
  case LB_WEIGHT:
    if (b->elem != LE_F32) fprintf(o, "(const %s *)(const void *)(", ty);
    fputs("args->weights", o);
    if (b->offset) {
      fputs(" + ", o);
      c_put_i64(o, b->offset);
    }
    if (b->elem != LE_F32) fputc(')', o);
    break;
  case LB_ARENA:
  case LB_STATE:
    fprintf(o, "(%s%s *)(args->%s", cq, ty, b->kind == LB_ARENA ? "arena" : "state");
    if (b->offset) {
      fputs(" + ", o);
      c_put_i64(o, b->offset);
    }
    fputc(')', o);
    break;
  case LB_KIND_COUNT: break;
  }
}

/* A kernel's buffer: its parameter `param` of the context. */
static void put_buffer_decl(Em *E, int i, int param) {
  const LBuffer *b = &E->p->bufs[i];
  FILE *o = E->out;
  const char *ty = elem_ctype(b->elem);
  const char *cq = E->buf_written[i] ? "" : "const ";
  fprintf(o, "  %s%s *b%d = (%s%s *)ctx[%d]; /* ", cq, ty, i, cq, ty, 1 + param);
  put_buffer_comment(E, b);
  fputs(" */\n", o);
}

static void put_sym_decl(Em *E, int s, int depth) {
  indent(E, depth);
  fprintf(E->out, "const int64_t s%d = args->syms[%d];", s, s);
  if (E->info && s < E->info->n_syms && E->info->sym_names[s]) {
    fputs(" /* ", E->out);
    c_put_comment(E->out, E->info->sym_names[s]);
    fputs(" */", E->out);
  }
  fputc('\n', E->out);
}

/* ---- kernels ---- */

static void put_kernel(Em *E, int ki) {
  const LKernel *k = &E->p->kernels[ki];
  FILE *o = E->out;
  char name[96];
  c_kernel_name(E->p, ki, name, sizeof name);
  analyse_kernel(E, k);

  fprintf(o, "/* %s: ", name);
  c_put_comment(o, k->comment);
  fputs("\n * outer loop: ", o);
  put_comment_expr(E, k->extent);
  bool one = k->extent->kind == LX_CONST_I && k->extent->ival == 1;
  fputs(one ? " iteration" : " iterations", o);
  if (k->parallel) fprintf(o, ", in parallel (grain %lld)", (long long)k->grain);
  else fputs(", on the calling thread", o);
  int sharers = 0;
  for (int i = ki + 1; i < E->p->n_kernels; i++) sharers += E->p->kernels[i].shares == ki;
  if (sharers)
    fprintf(o, "\n * also runs %d later kernel%s with their own buffers (share-kernels)", sharers,
            sharers == 1 ? "" : "s");
  fputs(" */\n", o);

  /* ctx: args, then the kernel's buffers in loop_kernel_params order */
  fprintf(o, "static void %s(void *ctx_, int64_t lo, int64_t hi) {\n", name);
  int *params = arena_alloc(E->p->arena, (size_t)(E->p->n_bufs + 1) * sizeof *params);
  int n_params = loop_kernel_params(E->p, k, params);
  bool uses_args = E->uses_pool;
  for (int s = 0; s < E->p->n_syms; s++) uses_args |= E->sym_used[s];
  if (uses_args || n_params) fputs("  void *const *ctx = (void *const *)ctx_;\n", o);
  else fputs("  (void)ctx_;\n", o);
  if (uses_args) fputs("  const RtRunArgs *args = (const RtRunArgs *)ctx[0];\n", o);
  for (int s = 0; s < E->p->n_syms; s++)
    if (E->sym_used[s]) put_sym_decl(E, s, 1);
  for (int j = 0; j < n_params; j++) put_buffer_decl(E, params[j], j);
  for (int v = 0; v < k->n_vars; v++) {
    if (!E->seen[v] || !E->hoist[v]) continue;
    fprintf(o, "  %s v%d = 0;\n", ctype(k->var_types[v]), v);
    if (!E->read[v] && v != k->outer_var) fprintf(o, "  (void)v%d;\n", v);
  }
  int ov = k->outer_var;
  fprintf(o, "  for (%sv%d = lo; v%d < hi; ++v%d) {\n", E->hoist[ov] ? "" : "int64_t ", ov, ov,
          ov);
  put_stmts(E, k->body->stmts, k->body->n_stmts, 2);
  fputs("  }\n}\n\n", o);
}

static void put_run(Em *E) {
  const LoopProgram *p = E->p;
  FILE *o = E->out;
  bool sym[RT_MAX_SYMS] = {false};
  /* extents read symbols and constants only (loop_program_verify) */
  E->k = NULL;
  for (int i = 0; i < p->n_kernels; i++) {
    memset(E->sym_used, 0, sizeof E->sym_used);
    an_expr(E, p->kernels[i].extent);
    for (int s = 0; s < p->n_syms; s++) sym[s] |= E->sym_used[s];
  }
  fputs("/* The forward pass (runtime/rt_model.h): the kernels in order, each through\n"
        " * rt_kernel_run(args, kernel number, function, context, extent, grain,\n"
        " * parallel), which skips an extent that is not positive and times the\n"
        " * kernel under --profile. A kernel's context is args and then its\n"
        " * buffers: kernels that differ only in their buffers share one function. */\n"
        "void ",
        o);
  fprintf(o, "%s(const RtRunArgs *args) {\n", E->entry);
  for (int s = 0; s < p->n_syms; s++)
    if (sym[s]) put_sym_decl(E, s, 1);
  if (p->n_kernels == 0) fputs("  (void)args;\n", o);
  int *params = arena_alloc(p->arena, (size_t)(p->n_bufs + 1) * sizeof *params);
  bool *written = arena_alloc(p->arena, (size_t)(p->n_bufs + 1) * sizeof *written);
  for (int i = 0; i < p->n_kernels; i++) {
    const LKernel *k = &p->kernels[i];
    char name[96];
    c_kernel_name(p, k->shares >= 0 ? k->shares : i, name, sizeof name);
    /* the context: args, then each buffer's address as the kernel sees it */
    analyse_kernel(E, k);
    memcpy(written, E->buf_written, (size_t)p->n_bufs * sizeof *written);
    E->k = NULL;
    int np = loop_kernel_params(p, k, params);
    fputs("  {\n    void *const ctx[] = {(void *)args", o);
    for (int j = 0; j < np; j++) {
      fputs(",\n                         (void *)(", o);
      put_buffer_base(E, params[j], written[params[j]] ? "" : "const ");
      fputc(')', o);
    }
    fprintf(o, "};\n    rt_kernel_run(args, %d, %s, (void *)ctx, ", i, name);
    put_expr(E, k->extent, true);
    fputs(", ", o);
    c_put_i64(o, k->parallel ? k->grain : 1);
    fprintf(o, ", %d);\n  }\n", k->parallel ? 1 : 0);
  }
  fputs("}\n", o);
}

/* ---- the file ---- */

/* A runtime function's prototype from its ir/callees.def row, after its
 * one-line description, wrapped before 90 columns under the '('. */
static void put_prototype(FILE *o, const LCalleeInfo *ci) {
  fputs("/* ", o);
  c_put_comment(o, ci->doc);
  fputs(" */\n", o);
  int col = fprintf(o, "void %s(", ci->name), open = col;
  for (int i = 0; i < ci->n_args; i++) {
    const char *ct = loop_arg_ctype(ci->args[i].kind);
    bool ptr = ct[strlen(ct) - 1] == '*';
    int len = (int)(strlen(ct) + !ptr + strlen(ci->args[i].name)) + (i + 1 < ci->n_args ? 1 : 2);
    if (i) {
      if (col + 1 + len > 90) {
        col = fprintf(o, ",\n%*s", open, "") - 2;
      } else {
        fputs(", ", o);
        col += 2;
      }
    }
    col += fprintf(o, "%s%s%s", ct, ptr ? "" : " ", ci->args[i].name);
  }
  fputs(");\n", o);
}

static void put_prologue(Em *E) {
  const LoopProgram *p = E->p;
  FILE *o = E->out;
  fputs("/* model.c - generated by tfmc from model ", o);
  c_put_comment(o, E->info && E->info->name ? E->info->name : p->name);
  fprintf(o,
          ": %d kernels,\n"
          " * a %lld-byte activation arena, %lld weight floats. Do not edit: regenerate\n"
          " * with `tfmc emit-c` (the same loop IR gives the same bytes).\n"
          " *\n"
          " * Names as in the loop IR listing (`tfmc ir --level loop`): bN are buffers,\n"
          " * sN run-time dimensions (symN there), vN variables; each kernel's comment\n"
          " * names the graph node and spec line it computes. */\n",
          p->n_kernels, (long long)p->arena_bytes, (long long)p->weights_floats);
  fputs("#include \"runtime/rt_model.h\"\n"
        "\n"
        "#include <math.h>\n"
        "#include <stddef.h>\n"
        "#include <stdint.h>\n"
        "\n"
        "/* strict IEEE like the LLVM backend: no a*b+c contracted into an fma */\n"
        "#if defined(__clang__)\n"
        "#pragma STDC FP_CONTRACT OFF\n"
        "#endif\n"
        "\n"
        "/* The runtime: rt_model.h declares rt_kernel_run, which runs each kernel\n"
        " * (runtime/rt_profile.c); what kernels call is declared here from\n"
        " * ir/callees.def, each with the header that has it. */\n",
        o);
  for (int c = 0; c < LC_CALLEE_COUNT; c++)
    if (E->use_callee[c]) put_prototype(o, &loop_callee_info[c]);
  fprintf(o, "void %s(const RtRunArgs *args);\n\n", E->entry);
  if (E->use_imin)
    fputs("static int64_t tfmc_min_i64(int64_t a, int64_t b) { return a < b ? a : b; }\n", o);
  if (E->use_imax)
    fputs("static int64_t tfmc_max_i64(int64_t a, int64_t b) { return a > b ? a : b; }\n", o);
  if (E->use_fmin || E->use_fmax)
    fputs("/* fminf / fmaxf (a NaN operand yields the other one) written out:\n"
          " * without -ffinite-math-only gcc calls libm for them, which keeps\n"
          " * loops such as relu's from vectorising */\n",
          o);
  if (E->use_fmin)
    fputs("static float tfmc_fminf(float a, float b) { return a < b || b != b ? a : b; }\n", o);
  if (E->use_fmax)
    fputs("static float tfmc_fmaxf(float a, float b) { return a > b || b != b ? a : b; }\n", o);
  if (E->use_widen)
    fputs("/* an i32 / u8 value compared with a constant at the edge of its range */\n"
          "static int64_t tfmc_i64(int64_t x) { return x; }\n",
          o);
  if (E->use_imin || E->use_imax || E->use_widen || E->use_fmin || E->use_fmax) fputc('\n', o);
}

void c_emit_model(const LoopProgram *p, const RtModelInfo *info, FILE *out) {
  c_emit_model_named(p, info, "tfmc_model_run", "tfmc_model_info", out);
}

void c_emit_model_named(const LoopProgram *p, const RtModelInfo *info, const char *entry,
                        const char *info_name, FILE *out) {
  char err[512];
  /* the compile driver will verify the program after lowering and after
   * every loop pass; until it does, the entry point does */
  if (c_program_check(p, err, sizeof err) || (info && c_info_check(info, p, err, sizeof err))) {
    fputs("#error ", out);
    c_put_string(out, err);
    fputc('\n', out);
    return;
  }
  Em E = {.p = p, .info = info, .out = out, .entry = entry};
  int max_vars = 1;
  for (int i = 0; i < p->n_kernels; i++)
    if (p->kernels[i].n_vars > max_vars) max_vars = p->kernels[i].n_vars;
  E.buf_used = calloc((size_t)p->n_bufs + 1, 1);
  E.buf_written = calloc((size_t)p->n_bufs + 1, 1);
  E.hoist = calloc((size_t)max_vars, 1);
  E.seen = calloc((size_t)max_vars, 1);
  E.read = calloc((size_t)max_vars, 1);
  E.live = calloc((size_t)max_vars, sizeof *E.live);
  if (!E.buf_used || !E.buf_written || !E.hoist || !E.seen || !E.read || !E.live) {
    fputs("#error \"tfmc: out of memory while printing the model\"\n", out);
  } else {
    /* helpers first: one pass over all kernels says which are needed */
    for (int i = 0; i < p->n_kernels; i++) analyse_kernel(&E, &p->kernels[i]);
    put_prologue(&E);
    fputs("/* ---- kernels ---- */\n\n", out);
    /* one function per kernel that shares no other's (share-kernels) */
    for (int i = 0; i < p->n_kernels; i++)
      if (p->kernels[i].shares < 0) put_kernel(&E, i);
    put_run(&E);
    if (info) {
      fputc('\n', out);
      c_emit_model_info_named(info, info_name, out);
    }
  }
  free(E.buf_used);
  free(E.buf_written);
  free(E.hoist);
  free(E.seen);
  free(E.read);
  free(E.live);
}
