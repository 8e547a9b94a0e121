/* ir/loop.c — loop IR construction helpers and the listing printer.
 *
 * Also the table of runtime functions calls may name (ir/callees.def) and
 * the names of types every consumer prints (loop_type_str, ...). The rules
 * a program obeys are checked in one place, ir/loop_verify.c.
 *
 * Invariants: every expression gets its result type at construction (the
 * emitters never infer); constant I64 arithmetic is folded so index
 * expressions over constant dims stay literal in the generated code. */
#include "ir/loop.h"

#include <math.h>
#include <string.h>

const char *loop_type_str(LType t) {
  switch (t) {
  case LT_I64: return "i64";
  case LT_F32: return "f32";
  case LT_F64: return "f64";
  case LT_COUNT: break;
  }
  return "bad type";
}

const char *loop_elem_str(LElem e) {
  switch (e) {
  case LE_F32: return "f32";
  case LE_I32: return "i32";
  case LE_U8: return "u8";
  case LE_COUNT: break;
  }
  return "bad element type";
}

bool loop_type_is_float(LType t) { return t == LT_F32 || t == LT_F64; }

LoopProgram *loop_program_create(Arena *a, const char *name) {
  LoopProgram *p = arena_alloc(a, sizeof *p);
  p->arena = a;
  p->name = arena_strdup(a, name);
  return p;
}

int loop_buffer_add(LoopProgram *p, LBufKind kind, int index, int64_t offset, LElem elem,
                    const char *name) {
  arena_grow(p->arena, (void **)&p->bufs, &p->cap_bufs, p->n_bufs + 1, sizeof *p->bufs);
  LBuffer *b = &p->bufs[p->n_bufs];
  b->kind = kind;
  b->index = index;
  b->offset = offset;
  b->elem = elem;
  b->name = arena_strdup(p->arena, name ? name : "");
  b->layout = LW_PLAIN;
  b->rows = b->cols = 0;
  return p->n_bufs++;
}

int64_t loop_panels_floats(int64_t rows, int64_t cols) {
  return (rows + 15) / 16 * 16 * cols;
}

int64_t loop_panels_floats_bf16(int64_t rows, int64_t cols) {
  return (rows + 15) / 16 * 16 * ((cols + 1) / 2);
}

int64_t loop_panels_floats_i8(int64_t rows, int64_t cols) {
  return (rows + 15) / 16 * ((16 * ((cols + 3) / 4 * 4) + 128) / 4);
}

int64_t loop_weight_layout_floats(const LBuffer *b) {
  switch (b->layout) {
  case LW_PANELS: return loop_panels_floats(b->rows, b->cols);
  case LW_PANELS_BF16: return loop_panels_floats_bf16(b->rows, b->cols);
  case LW_PANELS_I8: return loop_panels_floats_i8(b->rows, b->cols);
  case LW_PLAIN:
  case LW_LAYOUT_COUNT: break;
  }
  return 0;
}

const char *loop_layout_str(LWLayout l) {
  switch (l) {
  case LW_PANELS: return "panels";
  case LW_PANELS_BF16: return "panels_bf16";
  case LW_PANELS_I8: return "panels_i8";
  case LW_PLAIN:
  case LW_LAYOUT_COUNT: break;
  }
  return NULL;
}

LKernel *loop_kernel_add(LoopProgram *p, const char *name, const char *comment, int node) {
  arena_grow(p->arena, (void **)&p->kernels, &p->cap_kernels, p->n_kernels + 1,
             sizeof *p->kernels);
  LKernel *k = &p->kernels[p->n_kernels++];
  memset(k, 0, sizeof *k);
  k->name = arena_strdup(p->arena, name);
  k->comment = arena_strdup(p->arena, comment ? comment : "");
  k->node = node;
  k->grain = 1;
  k->shares = -1;
  k->outer_var = loop_var_new(p, k, LT_I64);
  k->body = ls_block(p);
  return k;
}

int loop_var_new(LoopProgram *p, LKernel *k, LType t) {
  LType *nt = arena_alloc(p->arena, (size_t)(k->n_vars + 1) * sizeof *nt);
  if (k->n_vars) memcpy(nt, k->var_types, (size_t)k->n_vars * sizeof *nt);
  nt[k->n_vars] = t;
  k->var_types = nt;
  return k->n_vars++;
}

static LExpr *mk(LoopProgram *p, LExprKind kind, LType t) {
  LExpr *e = arena_alloc(p->arena, sizeof *e);
  e->kind = kind;
  e->t = t;
  return e;
}

LExpr *lx_i(LoopProgram *p, int64_t v) {
  LExpr *e = mk(p, LX_CONST_I, LT_I64);
  e->ival = v;
  return e;
}

LExpr *lx_f32(LoopProgram *p, double v) {
  LExpr *e = mk(p, LX_CONST_F, LT_F32);
  e->fval = (float)v;
  return e;
}

LExpr *lx_f64(LoopProgram *p, double v) {
  LExpr *e = mk(p, LX_CONST_F, LT_F64);
  e->fval = v;
  return e;
}

LExpr *lx_var(LoopProgram *p, LKernel *k, int var) {
  TFMC_ASSERT(var >= 0 && var < k->n_vars);
  LExpr *e = mk(p, LX_VAR, k->var_types[var]);
  e->var = var;
  return e;
}

LExpr *lx_sym(LoopProgram *p, int sym) {
  LExpr *e = mk(p, LX_SYM, LT_I64);
  e->sym = sym;
  return e;
}

LExpr *lx_load(LoopProgram *p, int buf, LExpr *index) {
  TFMC_ASSERT(buf >= 0 && buf < p->n_bufs && index->t == LT_I64);
  LExpr *e = mk(p, LX_LOAD, p->bufs[buf].elem == LE_F32 ? LT_F32 : LT_I64);
  e->buf = buf;
  e->a = index;
  return e;
}

LExpr *lx_addr(LoopProgram *p, int buf, LExpr *index) {
  TFMC_ASSERT(buf >= 0 && buf < p->n_bufs && index->t == LT_I64);
  LExpr *e = mk(p, LX_ADDR, LT_I64);
  e->buf = buf;
  e->a = index;
  return e;
}

LExpr *lx_pool(LoopProgram *p) { return mk(p, LX_POOL, LT_I64); }
LExpr *lx_null(LoopProgram *p) { return mk(p, LX_NULL, LT_I64); }

static bool is_cmp(LBinOp op) {
  return op == LB_LT || op == LB_LE || op == LB_EQ || op == LB_NE;
}

LExpr *lx_bin(LoopProgram *p, LBinOp op, LExpr *a, LExpr *b) {
  TFMC_ASSERT(a->t == b->t);
  if (a->t == LT_I64 && a->kind == LX_CONST_I && b->kind == LX_CONST_I) {
    int64_t x = a->ival, y = b->ival;
    switch (op) {
    case LB_ADD: return lx_i(p, x + y);
    case LB_SUB: return lx_i(p, x - y);
    case LB_MUL: return lx_i(p, x * y);
    case LB_DIV: if (y) return lx_i(p, x / y); break;
    case LB_REM: if (y) return lx_i(p, x % y); break;
    case LB_MIN: return lx_i(p, x < y ? x : y);
    case LB_MAX: return lx_i(p, x > y ? x : y);
    case LB_LT: return lx_i(p, x < y);
    case LB_LE: return lx_i(p, x <= y);
    case LB_EQ: return lx_i(p, x == y);
    case LB_NE: return lx_i(p, x != y);
    case LB_AND: return lx_i(p, x && y);
    case LB_BINOP_COUNT: break;
    }
  }
  if (a->t == LT_I64) { /* x*1, x+0, x*0 */
    if (op == LB_MUL && b->kind == LX_CONST_I && b->ival == 1) return a;
    if (op == LB_MUL && a->kind == LX_CONST_I && a->ival == 1) return b;
    if (op == LB_MUL && ((b->kind == LX_CONST_I && b->ival == 0) ||
                         (a->kind == LX_CONST_I && a->ival == 0)))
      return lx_i(p, 0);
    if (op == LB_ADD && b->kind == LX_CONST_I && b->ival == 0) return a;
    if (op == LB_ADD && a->kind == LX_CONST_I && a->ival == 0) return b;
    if (op == LB_DIV && b->kind == LX_CONST_I && b->ival == 1) return a;
  }
  TFMC_ASSERT(op != LB_REM || a->t == LT_I64);
  TFMC_ASSERT(op != LB_AND || a->t == LT_I64);
  LExpr *e = mk(p, LX_BIN, is_cmp(op) ? LT_I64 : a->t);
  e->op = op;
  e->a = a;
  e->b = b;
  return e;
}

LExpr *lx_bin_reassoc(LoopProgram *p, LBinOp op, LExpr *a, LExpr *b) {
  LExpr *e = lx_bin(p, op, a, b);
  if (e->kind == LX_BIN && e->t != LT_I64) e->reassoc = true;
  return e;
}

LExpr *lx_un(LoopProgram *p, LUnOp op, LExpr *a) {
  TFMC_ASSERT(a->t == LT_F32 || a->t == LT_F64);
  LExpr *e = mk(p, LX_UN, a->t);
  e->op = op;
  e->a = a;
  return e;
}

LExpr *lx_select(LoopProgram *p, LExpr *cond, LExpr *a, LExpr *b) {
  TFMC_ASSERT(cond->t == LT_I64 && a->t == b->t);
  LExpr *e = mk(p, LX_SELECT, a->t);
  e->a = cond;
  e->b = a;
  e->c = b;
  return e;
}

LExpr *lx_cast(LoopProgram *p, LType t, LExpr *a) {
  if (a->t == t) return a;
  if (a->kind == LX_CONST_I && t != LT_I64)
    return t == LT_F32 ? lx_f32(p, (double)a->ival) : lx_f64(p, (double)a->ival);
  LExpr *e = mk(p, LX_CAST, t);
  e->a = a;
  return e;
}

static LStmt *mks(LoopProgram *p, LStmtKind kind) {
  LStmt *s = arena_alloc(p->arena, sizeof *s);
  s->kind = kind;
  return s;
}

LStmt *ls_block(LoopProgram *p) { return mks(p, LS_BLOCK); }

void ls_append(LoopProgram *p, LStmt *block, LStmt *s) {
  TFMC_ASSERT(block->kind == LS_BLOCK || block->kind == LS_FOR);
  arena_grow(p->arena, (void **)&block->stmts, &block->cap_stmts, block->n_stmts + 1,
             sizeof *block->stmts);
  block->stmts[block->n_stmts++] = s;
}

LStmt *ls_for(LoopProgram *p, int var, LExpr *lo, LExpr *hi) {
  TFMC_ASSERT(lo->t == LT_I64 && hi->t == LT_I64);
  LStmt *s = mks(p, LS_FOR);
  s->var = var;
  s->lo = lo;
  s->hi = hi;
  return s;
}

LStmt *ls_let(LoopProgram *p, int var, LType t, LExpr *value) {
  TFMC_ASSERT(value->t == t);
  LStmt *s = mks(p, LS_LET);
  s->var = var;
  s->t = t;
  s->value = value;
  return s;
}

LStmt *ls_set(LoopProgram *p, int var, LExpr *value) {
  LStmt *s = mks(p, LS_SET);
  s->var = var;
  s->value = value;
  return s;
}

LStmt *ls_store(LoopProgram *p, int buf, LExpr *index, LExpr *value) {
  TFMC_ASSERT(buf >= 0 && buf < p->n_bufs && index->t == LT_I64);
  TFMC_ASSERT((p->bufs[buf].elem == LE_F32) == (value->t == LT_F32));
  LStmt *s = mks(p, LS_STORE);
  s->buf = buf;
  s->index = index;
  s->value = value;
  return s;
}

LStmt *ls_call(LoopProgram *p, LCallee callee, LExpr **args, int n) {
  LStmt *s = mks(p, LS_CALL);
  s->callee = callee;
  s->args = arena_alloc(p->arena, (size_t)n * sizeof *args);
  if (n > 0) memcpy(s->args, args, (size_t)n * sizeof *args); /* args may be NULL when n is 0 */
  s->n_args = n;
  return s;
}

/* ---- runtime calls ---- */

const LCalleeInfo loop_callee_info[LC_CALLEE_COUNT] = {
#define LOOP_ARG(kind, name) {LA_##kind, #name}
#define LOOP_CALLEE(e, fn, doc, ...)                                                    \
  [LC_##e] = {#fn, doc, (int)(sizeof((LCalleeArg[]){__VA_ARGS__}) / sizeof(LCalleeArg)), \
              {__VA_ARGS__}},
#include "ir/callees.def"
#undef LOOP_CALLEE
#undef LOOP_ARG
};

const char *loop_arg_ctype(LArgKind k) {
  switch (k) {
#define LOOP_ARG_KIND_CTYPE(kind, ctype, what) \
  case LA_##kind: return #ctype;
    LOOP_ARG_KINDS(LOOP_ARG_KIND_CTYPE)
#undef LOOP_ARG_KIND_CTYPE
  case LA_KIND_COUNT: break;
  }
  return "?";
}

/* ---- evaluation of integer expressions (kernel extents) ---- */

bool loop_expr_eval_i64(const LExpr *e, const int64_t *syms, int64_t *out) {
  int64_t a, b;
  switch (e->kind) {
  case LX_CONST_I: *out = e->ival; return true;
  case LX_SYM: *out = syms[e->sym]; return true;
  case LX_BIN:
    if (e->t != LT_I64 || !loop_expr_eval_i64(e->a, syms, &a) || !loop_expr_eval_i64(e->b, syms, &b))
      return false;
    switch ((LBinOp)e->op) {
    case LB_ADD: *out = a + b; return true;
    case LB_SUB: *out = a - b; return true;
    case LB_MUL: *out = a * b; return true;
    case LB_DIV: *out = b ? a / b : 0; return true;
    case LB_REM: *out = b ? a % b : 0; return true;
    case LB_MIN: *out = a < b ? a : b; return true;
    case LB_MAX: *out = a > b ? a : b; return true;
    case LB_LT: *out = a < b; return true;
    case LB_LE: *out = a <= b; return true;
    case LB_EQ: *out = a == b; return true;
    case LB_NE: *out = a != b; return true;
    case LB_AND: *out = a && b; return true;
    case LB_BINOP_COUNT: break;
    }
    return false;
  case LX_CONST_F:
  case LX_VAR:
  case LX_LOAD:
  case LX_ADDR:
  case LX_POOL:
  case LX_NULL:
  case LX_UN:
  case LX_SELECT:
  case LX_CAST:
  case LX_KIND_COUNT:
    break;
  }
  return false;
}

/* ---- printer ---- */

static const char *bin_name[LB_BINOP_COUNT] = {"+", "-", "*", "/", "%", "min", "max",
                                               "<", "<=", "==", "!=", "&&"};
static const char *un_name[LU_UNOP_COUNT] = {"-", "exp", "log", "sqrt", "tanh", "erf", "sin", "cos"};
static const char *type_name[LT_COUNT] = {"i64", "f32", "f64"};

/* f32: the shortest %g that reads back to the same float, then 'f'; f64:
 * 17 digits, with ".0" when %g printed an integer (so it is no i64) */
static void print_float(const LExpr *e, FILE *out) {
  char buf[64];
  if (e->t == LT_F32) {
    fprintf(out, "%.9gf", e->fval);
    return;
  }
  snprintf(buf, sizeof buf, "%.17g", e->fval);
  fputs(buf, out);
  if (!strpbrk(buf, ".eEn")) fputs(".0", out); /* inf, nan have an n */
}

static void print_expr(const LoopProgram *p, const LExpr *e, FILE *out) {
  switch (e->kind) {
  case LX_CONST_I: fprintf(out, "%lld", (long long)e->ival); return;
  case LX_CONST_F: print_float(e, out); return;
  case LX_VAR: fprintf(out, "v%d", e->var); return;
  case LX_SYM: fprintf(out, "sym%d", e->sym); return;
  case LX_LOAD:
  case LX_ADDR:
    fprintf(out, "%sb%d[", e->kind == LX_ADDR ? "&" : "", e->buf);
    print_expr(p, e->a, out);
    fprintf(out, "]");
    return;
  case LX_POOL: fprintf(out, "pool"); return;
  case LX_NULL: fprintf(out, "null"); return;
  case LX_BIN:
    if (e->op == LB_MIN || e->op == LB_MAX) {
      fprintf(out, "%s%s(", bin_name[e->op], e->reassoc ? "~" : "");
      print_expr(p, e->a, out);
      fprintf(out, ", ");
      print_expr(p, e->b, out);
      fprintf(out, ")");
      return;
    }
    fprintf(out, "(");
    print_expr(p, e->a, out);
    fprintf(out, " %s%s ", bin_name[e->op], e->reassoc ? "~" : "");
    print_expr(p, e->b, out);
    fprintf(out, ")");
    return;
  case LX_UN:
    fprintf(out, "%s(", un_name[e->op]);
    print_expr(p, e->a, out);
    fprintf(out, ")");
    return;
  case LX_SELECT:
    fprintf(out, "(");
    print_expr(p, e->a, out);
    fprintf(out, " ? ");
    print_expr(p, e->b, out);
    fprintf(out, " : ");
    print_expr(p, e->c, out);
    fprintf(out, ")");
    return;
  case LX_CAST:
    fprintf(out, "%s(", type_name[e->t]);
    print_expr(p, e->a, out);
    fprintf(out, ")");
    return;
  case LX_KIND_COUNT: break;
  }
  fprintf(out, "?");
}

static void print_stmt(const LoopProgram *p, const LStmt *s, int depth, FILE *out) {
  fprintf(out, "%*s", depth * 2, "");
  switch (s->kind) {
  case LS_FOR:
    fprintf(out, "for v%d in ", s->var);
    print_expr(p, s->lo, out);
    fprintf(out, "..");
    print_expr(p, s->hi, out);
    fprintf(out, ":\n");
    for (int i = 0; i < s->n_stmts; i++) print_stmt(p, s->stmts[i], depth + 1, out);
    return;
  case LS_LET:
    fprintf(out, "let v%d: %s = ", s->var, type_name[s->t]);
    print_expr(p, s->value, out);
    fprintf(out, "\n");
    return;
  case LS_SET:
    fprintf(out, "v%d = ", s->var);
    print_expr(p, s->value, out);
    fprintf(out, "\n");
    return;
  case LS_STORE:
    fprintf(out, "b%d[", s->buf);
    print_expr(p, s->index, out);
    fprintf(out, "] = ");
    print_expr(p, s->value, out);
    fprintf(out, "\n");
    return;
  case LS_CALL:
    fprintf(out, "call %s(",
            (unsigned)s->callee < LC_CALLEE_COUNT ? loop_callee_info[s->callee].name : "?");
    for (int i = 0; i < s->n_args; i++) {
      if (i) fprintf(out, ", ");
      print_expr(p, s->args[i], out);
    }
    fprintf(out, ")\n");
    return;
  case LS_BLOCK:
    fprintf(out, "{\n");
    for (int i = 0; i < s->n_stmts; i++) print_stmt(p, s->stmts[i], depth + 1, out);
    fprintf(out, "%*s}\n", depth * 2, "");
    return;
  case LS_KIND_COUNT: break;
  }
  fprintf(out, "?\n");
}

static void print_escaped(const char *s, FILE *out) {
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') fprintf(out, "\\%c", *c);
    else if (*c < 32 || *c == 127) fprintf(out, "\\x%02x", *c);
    else fputc(*c, out);
  }
}

static bool is_ident(const char *s) {
  if (!s || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_'))
      return false;
  return true;
}

void loop_program_print(const LoopProgram *p, FILE *out) {
  static const char *kinds[LB_KIND_COUNT] = {"input", "output", "weights", "arena", "state"};
  static const char *elems[LE_COUNT] = {"f32", "i32", "u8"};
  fprintf(out, "loop program \"");
  print_escaped(p->name, out);
  fprintf(out, "\" (arena %lld bytes, weights %lld floats, syms %d", (long long)p->arena_bytes,
          (long long)p->weights_floats, p->n_syms);
  if (p->state_bytes) fprintf(out, ", state %lld bytes", (long long)p->state_bytes);
  fprintf(out, ")\n");
  for (int i = 0; i < p->n_bufs; i++) {
    const LBuffer *b = &p->bufs[i];
    fprintf(out, "  b%d = %s", i, kinds[b->kind]);
    if (b->kind == LB_INPUT || b->kind == LB_OUTPUT) fprintf(out, "[%d]", b->index);
    else fprintf(out, "+%lld", (long long)b->offset);
    fprintf(out, " : %s", elems[b->elem]);
    if (loop_layout_str(b->layout))
      fprintf(out, " %s[%lld,%lld]", loop_layout_str(b->layout), (long long)b->rows,
              (long long)b->cols);
    fprintf(out, "  \"");
    print_escaped(b->name, out);
    fprintf(out, "\"\n");
  }
  for (int i = 0; i < p->n_kernels; i++) {
    const LKernel *k = &p->kernels[i];
    if (is_ident(k->name)) {
      fprintf(out, "kernel %s \"", k->name);
    } else {
      fprintf(out, "kernel \"");
      print_escaped(k->name ? k->name : "", out);
      fprintf(out, "\" \"");
    }
    print_escaped(k->comment, out);
    fprintf(out, "\"");
    if (k->node >= 0) fprintf(out, " node %d", k->node);
    fprintf(out, " %s extent ", k->parallel ? "parallel" : "serial");
    print_expr(p, k->extent, out);
    if (k->parallel || k->grain != 1) fprintf(out, " grain %lld", (long long)k->grain);
    if (k->shares >= 0 && k->shares < p->n_kernels) {
      /* share-kernels: this kernel runs through that one's function */
      const char *sn = p->kernels[k->shares].name;
      if (sn && is_ident(sn)) {
        fprintf(out, " shares %s", sn);
      } else {
        fprintf(out, " shares \"");
        print_escaped(sn ? sn : "", out);
        fprintf(out, "\"");
      }
    }
    fprintf(out, " (outer v%d):\n", k->outer_var);
    fprintf(out, "  vars");
    for (int v = 0; v < k->n_vars; v++)
      fprintf(out, " v%d:%s", v,
              (unsigned)k->var_types[v] < LT_COUNT ? type_name[k->var_types[v]] : "?");
    fprintf(out, "\n");
    for (int j = 0; j < k->body->n_stmts; j++) print_stmt(p, k->body->stmts[j], 1, out);
  }
}

int loop_callee_arg(LCallee c, const char *name) {
  const LCalleeInfo *ci = &loop_callee_info[c];
  for (int i = 0; i < ci->n_args; i++)
    if (strcmp(ci->args[i].name, name) == 0) return i;
  TFMC_ASSERT(!"no such callee argument");
  return -1;
}
