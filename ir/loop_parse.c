/* ir/loop_parse.c — reads the loop IR listing that loop_program_print
 * writes (the shape is in ir/loop.h), so loop passes are tested as IR in,
 * IR out.
 *
 * Grammar (one item per line; indentation is two spaces per level and
 * gives the nesting; blank lines and lines starting with '#' are skipped):
 *
 *   file    := header buffer* kernel*
 *   header  := 'loop' 'program' STRING '(' 'arena' INT 'bytes' ',' 'weights' INT 'floats'
 *              ',' 'syms' INT ')'
 *   buffer  := BUF '=' ('input' '[' INT ']' | 'output' '[' INT ']' | 'weights' '+' INT
 *              | 'arena' '+' INT) ':' ELEM [LAYOUT '[' INT ',' INT ']'] STRING
 *   LAYOUT  := 'panels' | 'panels_bf16' | 'panels_i8' 
 *                                                                     (depth 1, b0, b1, ...)
 *   kernel  := 'kernel' (IDENT | STRING) STRING ['node' INT] ('parallel' | 'serial')
 *              'extent' expr ['grain' INT] ['shares' (IDENT | STRING)]
 *              '(' 'outer' VAR ')' ':'                                (depth 0)
 *              'vars' (VAR ':' TYPE)*                                 (depth 1)
 *              stmt*                                                  (depth 1)
 *   stmt    := 'for' VAR 'in' expr '..' expr ':'       its body one level deeper
 *            | 'let' VAR ':' TYPE '=' expr | VAR '=' expr | BUF '[' expr ']' '=' expr
 *            | 'call' IDENT '(' [expr (',' expr)*] ')'
 *            | '{'   (a block: its statements one level deeper, then '}' at this level)
 *   expr    := INT | FLOAT | VAR | 'sym' INT | BUF '[' expr ']' | '&' BUF '[' expr ']'
 *            | 'pool' | 'null' | '(' expr BINOP ['~'] expr ')' | '(' expr '?' expr ':' expr ')'
 *            | ('min' | 'max') ['~'] '(' expr ',' expr ')' | UNOP '(' expr ')' | '-' '(' expr ')'
 *            | TYPE '(' expr ')'                       (a cast)
 *   INT := ['-'] DIGITS    FLOAT := ['-'] (DIGITS ['.' DIGITS] [EXP] | 'inf' | 'nan') ['f']
 *   (an 'f' suffix makes an f32 constant; a FLOAT without one, which has a point,
 *   an exponent, inf or nan, is f64)   VAR := 'v' DIGITS   BUF := 'b' DIGITS
 *
 * Invariants kept:
 *  - nodes are built as written: nothing is folded (the builders' constant
 *    folding would make a program print back differently);
 *  - types are checked as the builders assert them, so a parsed program
 *    never trips an emitter's assert: operands of one type, i64 indices
 *    and bounds, stores of the buffer's element type, lets of the variable's
 *    type, variables / buffers / symbols in range, calls against their row
 *    (loop_call_check);
 *  - every error is reported at file:line:col; the rest of that line is
 *    skipped (and a loop or block whose header failed swallows its body),
 *    so one run reports several errors. Returns NULL if anything was
 *    reported. */
#include "ir/loop.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ERRORS 25
#define MAX_DEPTH 64

typedef struct LP {
  Arena *a;
  const SrcFile *src;
  Diags *d;
  const char *line, *s, *eol; /* the current line, the cursor, its end */
  int lineno;
  int n_errors;
  bool line_failed;
  LoopProgram *p;
  LKernel *k;
  bool vars_seen; /* the kernel's vars line has been read */
} LP;

static void error_at(LP *P, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void error_at(LP *P, const char *at, const char *fmt, ...) {
  if (P->line_failed) return; /* one error per line */
  P->line_failed = true;
  if (++P->n_errors > MAX_ERRORS) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  IrLoc loc = {P->src->name, P->lineno, (int)(at - P->line) + 1};
  diag_error(P->d, loc, "%s", msg);
  if (P->n_errors == MAX_ERRORS) diag_error(P->d, loc, "too many errors; stopping");
}

/* ---- lexing within the line ---- */

static void skip_ws(LP *P) {
  while (P->s < P->eol && (*P->s == ' ' || *P->s == '\t')) P->s++;
}

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool starts(const LP *P, const char *t) {
  size_t n = strlen(t);
  return (size_t)(P->eol - P->s) >= n && memcmp(P->s, t, n) == 0;
}

/* the punctuation or keyword t (a keyword must not run on into an identifier) */
static bool accept(LP *P, const char *t) {
  skip_ws(P);
  size_t n = strlen(t);
  if (!starts(P, t)) return false;
  if (is_alpha(t[n - 1]) && P->s + n < P->eol && (is_alpha(P->s[n]) || is_digit(P->s[n])))
    return false;
  P->s += n;
  return true;
}

static bool expect(LP *P, const char *t) {
  if (accept(P, t)) return true;
  error_at(P, P->s, "expected '%s'", t);
  return false;
}

static bool parse_int(LP *P, int64_t *out) {
  skip_ws(P);
  const char *s = P->s;
  if (s < P->eol && *s == '-') s++;
  if (s >= P->eol || !is_digit(*s)) {
    error_at(P, P->s, "expected an integer");
    return false;
  }
  char buf[32];
  while (s < P->eol && is_digit(*s)) s++;
  if (s - P->s >= (long)sizeof buf) {
    error_at(P, P->s, "integer too long");
    return false;
  }
  memcpy(buf, P->s, (size_t)(s - P->s));
  buf[s - P->s] = 0;
  *out = strtoll(buf, NULL, 10);
  P->s = s;
  return true;
}

/* 'v' DIGITS / 'b' DIGITS */
static bool parse_numbered(LP *P, char prefix, int *out) {
  skip_ws(P);
  const char *at = P->s;
  int64_t v;
  if (P->s >= P->eol || *P->s != prefix || P->s + 1 >= P->eol || !is_digit(P->s[1])) {
    error_at(P, at, "expected %s", prefix == 'v' ? "a variable vN" : "a buffer bN");
    return false;
  }
  P->s++;
  if (!parse_int(P, &v)) return false;
  if (v > 1000000000) {
    error_at(P, at, "number too large");
    return false;
  }
  *out = (int)v;
  return true;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* "..." with \" \\ \xHH escapes, as print_escaped writes them */
static const char *parse_string(LP *P) {
  skip_ws(P);
  if (P->s >= P->eol || *P->s != '"') {
    error_at(P, P->s, "expected a string");
    return NULL;
  }
  const char *start = P->s++;
  char *out = arena_alloc(P->a, (size_t)(P->eol - P->s) + 1);
  size_t n = 0;
  while (P->s < P->eol && *P->s != '"') {
    if (*P->s == '\\') {
      if (P->s + 1 < P->eol && (P->s[1] == '"' || P->s[1] == '\\')) {
        out[n++] = P->s[1];
        P->s += 2;
      } else if (P->s + 3 < P->eol && P->s[1] == 'x' && hexval(P->s[2]) >= 0 &&
                 hexval(P->s[3]) >= 0) {
        out[n++] = (char)(hexval(P->s[2]) * 16 + hexval(P->s[3]));
        P->s += 4;
      } else {
        error_at(P, P->s, "unknown escape in a string");
        return NULL;
      }
    } else {
      out[n++] = *P->s++;
    }
  }
  if (P->s >= P->eol) {
    error_at(P, start, "unterminated string");
    return NULL;
  }
  P->s++;
  out[n] = 0;
  return out;
}

static bool parse_type(LP *P, LType *t) {
  static const char *names[LT_COUNT] = {"i64", "f32", "f64"};
  for (int i = 0; i < LT_COUNT; i++)
    if (accept(P, names[i])) {
      *t = (LType)i;
      return true;
    }
  error_at(P, P->s, "expected a type (i64, f32, f64)");
  return false;
}

/* ---- expressions ---- */

static LExpr *node(LP *P, LExprKind kind, LType t) {
  LExpr *e = arena_alloc(P->a, sizeof *e);
  e->kind = kind;
  e->t = t;
  return e;
}

static LExpr *parse_expr(LP *P);

static bool is_float_type(LType t) { return t == LT_F32 || t == LT_F64; }

static LExpr *parse_number(LP *P) {
  const char *start = P->s, *s = P->s;
  bool is_float = false;
  if (*s == '-') s++;
  if ((size_t)(P->eol - s) >= 3 && (memcmp(s, "inf", 3) == 0 || memcmp(s, "nan", 3) == 0)) {
    s += 3;
    is_float = true;
  } else {
    while (s < P->eol && is_digit(*s)) s++;
    if (s + 1 < P->eol && *s == '.' && is_digit(s[1])) {
      is_float = true;
      for (s++; s < P->eol && is_digit(*s); s++) {}
    }
    if (s < P->eol && (*s == 'e' || *s == 'E')) {
      const char *e = s + 1;
      if (e < P->eol && (*e == '+' || *e == '-')) e++;
      if (e < P->eol && is_digit(*e)) {
        is_float = true;
        for (s = e; s < P->eol && is_digit(*s); s++) {}
      }
    }
  }
  char buf[64];
  if (s - start >= (long)sizeof buf) {
    error_at(P, start, "number too long");
    return NULL;
  }
  memcpy(buf, start, (size_t)(s - start));
  buf[s - start] = 0;
  bool f32 = s < P->eol && *s == 'f';
  if (f32) s++;
  if (s < P->eol && (is_alpha(*s) || is_digit(*s))) {
    error_at(P, start, "malformed number");
    return NULL;
  }
  P->s = s;
  if (!is_float && !f32) {
    LExpr *e = node(P, LX_CONST_I, LT_I64);
    e->ival = strtoll(buf, NULL, 10);
    return e;
  }
  double v = strtod(buf, NULL);
  LExpr *e = node(P, LX_CONST_F, f32 ? LT_F32 : LT_F64);
  e->fval = f32 ? (double)(float)v : v;
  return e;
}

static bool bin_types_ok(LP *P, const char *at, LBinOp op, const LExpr *a, const LExpr *b) {
  if (a->t != b->t) {
    error_at(P, at, "operands of different types");
    return false;
  }
  if ((op == LB_REM || op == LB_AND) && a->t != LT_I64) {
    error_at(P, at, "%s takes i64 operands", op == LB_REM ? "%" : "&&");
    return false;
  }
  return true;
}

static LExpr *mk_bin(LP *P, LBinOp op, LExpr *a, LExpr *b, bool reassoc) {
  bool cmp = op == LB_LT || op == LB_LE || op == LB_EQ || op == LB_NE;
  LExpr *e = node(P, LX_BIN, cmp ? LT_I64 : a->t);
  e->op = op;
  e->a = a;
  e->b = b;
  e->reassoc = reassoc;
  return e;
}

/* '(' already read: "a OP b)" or "c ? a : b)" */
static LExpr *parse_paren(LP *P) {
  LExpr *a = parse_expr(P);
  if (!a) return NULL;
  skip_ws(P);
  const char *at = P->s;
  if (accept(P, "?")) {
    LExpr *b = parse_expr(P);
    if (!b || !expect(P, ":")) return NULL;
    LExpr *c = parse_expr(P);
    if (!c || !expect(P, ")")) return NULL;
    if (a->t != LT_I64 || b->t != c->t) {
      error_at(P, at, "a select takes an i64 condition and two values of one type");
      return NULL;
    }
    LExpr *e = node(P, LX_SELECT, b->t);
    e->a = a;
    e->b = b;
    e->c = c;
    return e;
  }
  static const struct { const char *tok; LBinOp op; } ops[] = {
      {"<=", LB_LE}, {"<", LB_LT}, {"==", LB_EQ}, {"!=", LB_NE}, {"&&", LB_AND},
      {"+", LB_ADD}, {"-", LB_SUB}, {"*", LB_MUL}, {"/", LB_DIV}, {"%", LB_REM},
  };
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
    if (!accept(P, ops[i].tok)) continue;
    bool reassoc = P->s < P->eol && *P->s == '~';
    if (reassoc) P->s++;
    LExpr *b = parse_expr(P);
    if (!b || !expect(P, ")")) return NULL;
    if (!bin_types_ok(P, at, ops[i].op, a, b)) return NULL;
    return mk_bin(P, ops[i].op, a, b, reassoc);
  }
  error_at(P, at, "expected a binary operator or '?'");
  return NULL;
}

/* 'b' N '[' index ']' (kind LX_LOAD or LX_ADDR) */
static LExpr *parse_buffer_ref(LP *P, LExprKind kind) {
  skip_ws(P);
  const char *at = P->s;
  int buf;
  if (!parse_numbered(P, 'b', &buf) || !expect(P, "[")) return NULL;
  if (buf >= P->p->n_bufs) {
    error_at(P, at, "no buffer b%d (the program has %d)", buf, P->p->n_bufs);
    return NULL;
  }
  LExpr *i = parse_expr(P);
  if (!i || !expect(P, "]")) return NULL;
  if (i->t != LT_I64) {
    error_at(P, at, "an index must be i64");
    return NULL;
  }
  LType t = kind == LX_ADDR ? LT_I64 : P->p->bufs[buf].elem == LE_F32 ? LT_F32 : LT_I64;
  LExpr *e = node(P, kind, t);
  e->buf = buf;
  e->a = i;
  return e;
}

static LExpr *parse_expr(LP *P) {
  skip_ws(P);
  const char *at = P->s;
  if (P->s >= P->eol) {
    error_at(P, at, "expected an expression");
    return NULL;
  }
  char c = *P->s, c1 = P->s + 1 < P->eol ? P->s[1] : 0;
  if (is_digit(c) || (c == '-' && c1 != '(') || starts(P, "inf") || starts(P, "nan"))
    return parse_number(P);
  if (accept(P, "(")) return parse_paren(P);
  if (accept(P, "&")) return parse_buffer_ref(P, LX_ADDR);
  if (c == '-') { /* -( a ) */
    P->s++;
    if (!expect(P, "(")) return NULL;
    LExpr *a = parse_expr(P);
    if (!a || !expect(P, ")")) return NULL;
    if (!is_float_type(a->t)) {
      error_at(P, at, "'-' takes a float");
      return NULL;
    }
    LExpr *e = node(P, LX_UN, a->t);
    e->op = LU_NEG;
    e->a = a;
    return e;
  }
  if (c == 'b' && is_digit(c1)) return parse_buffer_ref(P, LX_LOAD);
  if (c == 'v' && is_digit(c1)) {
    int var;
    if (!parse_numbered(P, 'v', &var)) return NULL;
    if (!P->k || !P->vars_seen) {
      error_at(P, at, "a kernel's extent reads only constants and symbols");
      return NULL;
    }
    if (var >= P->k->n_vars) {
      error_at(P, at, "no variable v%d (the kernel has %d)", var, P->k->n_vars);
      return NULL;
    }
    LExpr *e = node(P, LX_VAR, P->k->var_types[var]);
    e->var = var;
    return e;
  }
  if (starts(P, "sym") && P->s + 3 < P->eol && is_digit(P->s[3])) {
    P->s += 3;
    int64_t sym;
    if (!parse_int(P, &sym)) return NULL;
    if (sym < 0 || sym >= P->p->n_syms) {
      error_at(P, at, "no symbol sym%lld (the program has %d)", (long long)sym, P->p->n_syms);
      return NULL;
    }
    LExpr *e = node(P, LX_SYM, LT_I64);
    e->sym = (int)sym;
    return e;
  }
  if (accept(P, "pool")) return node(P, LX_POOL, LT_I64);
  if (accept(P, "null")) return node(P, LX_NULL, LT_I64);
  for (int op = LB_MIN; op <= LB_MAX; op++) {
    if (!accept(P, op == LB_MIN ? "min" : "max")) continue;
    bool reassoc = P->s < P->eol && *P->s == '~';
    if (reassoc) P->s++;
    if (!expect(P, "(")) return NULL;
    LExpr *a = parse_expr(P);
    if (!a || !expect(P, ",")) return NULL;
    LExpr *b = parse_expr(P);
    if (!b || !expect(P, ")")) return NULL;
    if (!bin_types_ok(P, at, (LBinOp)op, a, b)) return NULL;
    return mk_bin(P, (LBinOp)op, a, b, reassoc);
  }
  static const char *un[LU_UNOP_COUNT] = {"-", "exp", "log", "sqrt", "tanh", "erf", "sin", "cos"};
  for (int op = LU_EXP; op < LU_UNOP_COUNT; op++) {
    if (!accept(P, un[op])) continue;
    if (!expect(P, "(")) return NULL;
    LExpr *a = parse_expr(P);
    if (!a || !expect(P, ")")) return NULL;
    if (!is_float_type(a->t)) {
      error_at(P, at, "%s takes a float", un[op]);
      return NULL;
    }
    LExpr *e = node(P, LX_UN, a->t);
    e->op = op;
    e->a = a;
    return e;
  }
  static const char *types[LT_COUNT] = {"i64", "f32", "f64"};
  for (int t = 0; t < LT_COUNT; t++) {
    if (!accept(P, types[t])) continue;
    if (!expect(P, "(")) return NULL;
    LExpr *a = parse_expr(P);
    if (!a || !expect(P, ")")) return NULL;
    LExpr *e = node(P, LX_CAST, (LType)t);
    e->a = a;
    return e;
  }
  error_at(P, at, "expected an expression");
  return NULL;
}

/* ---- statements ---- */

static LStmt *stmt(LP *P, LStmtKind kind) {
  LStmt *s = arena_alloc(P->a, sizeof *s);
  s->kind = kind;
  return s;
}

static bool var_in_range(LP *P, const char *at, int var) {
  if (var < P->k->n_vars) return true;
  error_at(P, at, "no variable v%d (the kernel has %d)", var, P->k->n_vars);
  return false;
}

static bool value_ok(LP *P, const char *at, const LExpr *e, LType t, const char *what) {
  if (e->t == t) return true;
  static const char *names[LT_COUNT] = {"i64", "f32", "f64"};
  error_at(P, at, "%s must be %s", what, names[t]);
  return false;
}

static LStmt *parse_stmt(LP *P) {
  skip_ws(P);
  const char *at = P->s;
  int var;
  if (accept(P, "{")) return stmt(P, LS_BLOCK);
  if (accept(P, "for")) {
    if (!parse_numbered(P, 'v', &var) || !var_in_range(P, at, var) || !expect(P, "in")) return NULL;
    LExpr *lo = parse_expr(P);
    if (!lo || !expect(P, "..")) return NULL;
    LExpr *hi = parse_expr(P);
    if (!hi || !expect(P, ":")) return NULL;
    if (!value_ok(P, at, lo, LT_I64, "a loop bound") || !value_ok(P, at, hi, LT_I64, "a loop bound") ||
        !value_ok(P, at, lx_var(P->p, P->k, var), LT_I64, "a loop variable"))
      return NULL;
    LStmt *s = stmt(P, LS_FOR);
    s->var = var;
    s->lo = lo;
    s->hi = hi;
    return s;
  }
  if (accept(P, "let")) {
    LType t;
    if (!parse_numbered(P, 'v', &var) || !var_in_range(P, at, var) || !expect(P, ":") ||
        !parse_type(P, &t) || !expect(P, "="))
      return NULL;
    LExpr *v = parse_expr(P);
    if (!v || !value_ok(P, at, v, t, "the value") ||
        !value_ok(P, at, lx_var(P->p, P->k, var), t, "the variable"))
      return NULL;
    LStmt *s = stmt(P, LS_LET);
    s->var = var;
    s->t = t;
    s->value = v;
    return s;
  }
  if (accept(P, "call")) {
    skip_ws(P);
    const char *name = P->s;
    while (P->s < P->eol && (is_alpha(*P->s) || is_digit(*P->s))) P->s++;
    size_t len = (size_t)(P->s - name);
    int callee = -1;
    for (int c = 0; c < LC_CALLEE_COUNT; c++)
      if (strlen(loop_callee_info[c].name) == len && memcmp(loop_callee_info[c].name, name, len) == 0)
        callee = c;
    if (callee < 0) {
      error_at(P, name, "unknown runtime function '%.*s'", (int)len, name);
      return NULL;
    }
    if (!expect(P, "(")) return NULL;
    LExpr *args[LOOP_CALLEE_MAX_ARGS + 1];
    int n = 0;
    if (!accept(P, ")")) {
      do {
        if (n > LOOP_CALLEE_MAX_ARGS) {
          error_at(P, P->s, "too many arguments");
          return NULL;
        }
        if (!(args[n++] = parse_expr(P))) return NULL;
      } while (accept(P, ","));
      if (!expect(P, ")")) return NULL;
    }
    LStmt *s = stmt(P, LS_CALL);
    s->callee = (LCallee)callee;
    s->n_args = n;
    s->args = arena_alloc(P->a, (size_t)(n + 1) * sizeof *args);
    memcpy(s->args, args, (size_t)n * sizeof *args);
    char why[400];
    if (!loop_call_check(P->p, s, why, sizeof why)) {
      error_at(P, at, "%s", why);
      return NULL;
    }
    return s;
  }
  if (P->s < P->eol && *P->s == 'v') {
    if (!parse_numbered(P, 'v', &var) || !var_in_range(P, at, var) || !expect(P, "=")) return NULL;
    LExpr *v = parse_expr(P);
    if (!v || !value_ok(P, at, v, P->k->var_types[var], "the value")) return NULL;
    LStmt *s = stmt(P, LS_SET);
    s->var = var;
    s->value = v;
    return s;
  }
  if (P->s < P->eol && *P->s == 'b') {
    LExpr *ref = parse_buffer_ref(P, LX_LOAD);
    if (!ref || !expect(P, "=")) return NULL;
    LExpr *v = parse_expr(P);
    if (!v) return NULL;
    LType want = P->p->bufs[ref->buf].elem == LE_F32 ? LT_F32 : LT_I64;
    if (!value_ok(P, at, v, want, "the stored value")) return NULL;
    LStmt *s = stmt(P, LS_STORE);
    s->buf = ref->buf;
    s->index = ref->a;
    s->value = v;
    return s;
  }
  error_at(P, at, "expected a statement (for, let, call, vN =, bN[...] =, '{' or '}')");
  return NULL;
}

/* ---- program structure ---- */

static bool at_eol(LP *P) {
  skip_ws(P);
  if (P->s >= P->eol) return true;
  error_at(P, P->s, "unexpected text at the end of the line");
  return false;
}

static void parse_header(LP *P) {
  int64_t arena, weights, syms, state = 0;
  const char *name;
  if (!expect(P, "loop") || !expect(P, "program") || !(name = parse_string(P)) || !expect(P, "(") ||
      !expect(P, "arena") || !parse_int(P, &arena) || !expect(P, "bytes") || !expect(P, ",") ||
      !expect(P, "weights") || !parse_int(P, &weights) || !expect(P, "floats") ||
      !expect(P, ",") || !expect(P, "syms") || !parse_int(P, &syms))
    return;
  if (accept(P, ",") && (!expect(P, "state") || !parse_int(P, &state) || !expect(P, "bytes")))
    return;
  if (!expect(P, ")") || !at_eol(P))
    return;
  P->p->state_bytes = state;
  if (syms < 0 || syms > IR_MAX_SYMS) {
    error_at(P, P->line, "a program has 0 to %d symbols", IR_MAX_SYMS);
    return;
  }
  P->p->name = name;
  P->p->arena_bytes = arena;
  P->p->weights_floats = weights;
  P->p->n_syms = (int)syms;
}

static void parse_buffer(LP *P) {
  static const char *kinds[LB_KIND_COUNT] = {"input", "output", "weights", "arena", "state"};
  static const char *elems[LE_COUNT] = {"f32", "i32", "u8"};
  const char *at = P->s;
  int n;
  if (!parse_numbered(P, 'b', &n)) return;
  if (n != P->p->n_bufs) {
    error_at(P, at, "expected buffer b%d next", P->p->n_bufs);
    return;
  }
  if (!expect(P, "=")) return;
  int kind = -1, elem = -1;
  for (int i = 0; i < LB_KIND_COUNT && kind < 0; i++)
    if (accept(P, kinds[i])) kind = i;
  if (kind < 0) {
    error_at(P, P->s, "expected input, output, weights, arena or state");
    return;
  }
  int64_t index = 0, offset = 0;
  if (kind == LB_INPUT || kind == LB_OUTPUT) {
    if (!expect(P, "[") || !parse_int(P, &index) || !expect(P, "]")) return;
  } else if (!expect(P, "+") || !parse_int(P, &offset)) {
    return;
  }
  if (!expect(P, ":")) return;
  for (int i = 0; i < LE_COUNT && elem < 0; i++)
    if (accept(P, elems[i])) elem = i;
  if (elem < 0) {
    error_at(P, P->s, "expected an element type (f32, i32, u8)");
    return;
  }
  int64_t rows = 0, cols = 0;
  LWLayout layout = accept(P, "panels_bf16") ? LW_PANELS_BF16
                    : accept(P, "panels_i8") ? LW_PANELS_I8
                    : accept(P, "panels")    ? LW_PANELS
                                             : LW_PLAIN;
  bool panels = layout != LW_PLAIN;
  if (panels && (!expect(P, "[") || !parse_int(P, &rows) || !expect(P, ",") ||
                 !parse_int(P, &cols) || !expect(P, "]")))
    return;
  const char *name = parse_string(P);
  if (!name || !at_eol(P)) return;
  int b = loop_buffer_add(P->p, (LBufKind)kind, (int)index, offset, (LElem)elem, name);
  if (panels) { /* the verifier checks where panels may be and their size */
    P->p->bufs[b].layout = layout;
    P->p->bufs[b].rows = rows;
    P->p->bufs[b].cols = cols;
  }
}

static void parse_kernel(LP *P) {
  P->k = NULL;
  P->vars_seen = false;
  if (!expect(P, "kernel")) return;
  const char *name;
  skip_ws(P);
  if (P->s < P->eol && *P->s == '"') {
    name = parse_string(P);
  } else {
    const char *s = P->s;
    while (P->s < P->eol && (is_alpha(*P->s) || is_digit(*P->s))) P->s++;
    name = P->s > s ? arena_strndup(P->a, s, (size_t)(P->s - s)) : NULL;
    if (!name) error_at(P, s, "expected the kernel's name");
  }
  const char *comment = name ? parse_string(P) : NULL;
  if (!comment) return;
  int64_t node_id = -1, grain = 1;
  if (accept(P, "node") && !parse_int(P, &node_id)) return;
  bool parallel = accept(P, "parallel");
  if (!parallel && !expect(P, "serial")) return;
  if (!expect(P, "extent")) return;
  LExpr *extent = parse_expr(P);
  if (!extent) return;
  if (extent->t != LT_I64) {
    error_at(P, P->s, "an extent must be i64");
    return;
  }
  if (accept(P, "grain") && !parse_int(P, &grain)) return;
  int shares = -1;
  if (accept(P, "shares")) {
    /* an earlier kernel, by name (share-kernels) */
    skip_ws(P);
    const char *at = P->s, *sn;
    if (P->s < P->eol && *P->s == '"') {
      sn = parse_string(P);
    } else {
      while (P->s < P->eol && (is_alpha(*P->s) || is_digit(*P->s))) P->s++;
      sn = P->s > at ? arena_strndup(P->a, at, (size_t)(P->s - at)) : NULL;
    }
    if (!sn) {
      error_at(P, at, "expected the name of the kernel this one shares");
      return;
    }
    for (int j = 0; j < P->p->n_kernels && shares < 0; j++)
      if (P->p->kernels[j].name && strcmp(P->p->kernels[j].name, sn) == 0) shares = j;
    if (shares < 0) {
      error_at(P, at, "no earlier kernel is named '%s'", sn);
      return;
    }
  }
  int outer;
  if (!expect(P, "(") || !expect(P, "outer") || !parse_numbered(P, 'v', &outer) ||
      !expect(P, ")") || !expect(P, ":") || !at_eol(P))
    return;
  LKernel *k = loop_kernel_add(P->p, name, comment, (int)node_id);
  k->extent = extent;
  k->parallel = parallel;
  k->grain = grain;
  k->shares = shares;
  k->outer_var = outer;
  k->n_vars = 0;
  P->k = k;
}

static void parse_vars(LP *P) {
  LKernel *k = P->k;
  const char *at = P->s;
  if (!expect(P, "vars")) return;
  int n = 0, cap = 0;
  LType *types = NULL;
  for (;;) {
    skip_ws(P);
    if (P->s >= P->eol) break;
    const char *vat = P->s;
    int v;
    LType t;
    if (!parse_numbered(P, 'v', &v) || !expect(P, ":") || !parse_type(P, &t)) return;
    if (v != n) {
      error_at(P, vat, "expected v%d next", n);
      return;
    }
    arena_grow(P->a, (void **)&types, &cap, n + 1, sizeof *types);
    types[n++] = t;
  }
  if (k->outer_var >= n || types[k->outer_var] != LT_I64) {
    error_at(P, at, "the outer variable v%d must be one of the kernel's i64 variables",
             k->outer_var);
    return;
  }
  k->var_types = types;
  k->n_vars = n;
  P->vars_seen = true;
}

LoopProgram *loop_program_parse(Arena *a, const SrcFile *src, Diags *d) {
  diags_add_source(d, src);
  LP P = {.a = a, .src = src, .d = d};
  P.p = loop_program_create(a, "");
  LStmt *stack[MAX_DEPTH + 2] = {NULL}; /* stack[depth]: where statements at depth go */
  bool open_block[MAX_DEPTH + 2] = {false}; /* stack[depth] is a '{' awaiting its '}' */
  bool header = false, dead = false; /* dead: inside a statement that failed */
  int dead_depth = 0;
  const char *end = src->text + src->len;
  for (const char *line = src->text; line < end && P.n_errors < MAX_ERRORS;) {
    const char *eol = memchr(line, '\n', (size_t)(end - line));
    if (!eol) eol = end;
    P.lineno++;
    P.line = P.s = line;
    P.eol = eol > line && eol[-1] == '\r' ? eol - 1 : eol;
    P.line_failed = false;
    line = eol + 1;
    int spaces = 0;
    while (P.s < P.eol && *P.s == ' ') P.s++, spaces++;
    if (P.s >= P.eol || *P.s == '#') continue;
    int depth = spaces / 2;
    if (spaces % 2) {
      error_at(&P, P.s, "indentation must be a multiple of two spaces");
      continue;
    }
    if (dead && depth > dead_depth) continue; /* the body of a statement that failed */
    dead = false;
    if (!header) {
      if (depth != 0) error_at(&P, P.s, "expected 'loop program'");
      else parse_header(&P);
      header = true;
    } else if (depth == 0) {
      if (P.k && !P.vars_seen)
        error_at(&P, P.s, "the kernel before this one has no 'vars' line");
      for (int j = 1; j <= MAX_DEPTH; j++)
        if (open_block[j]) error_at(&P, P.s, "a block ('{') is missing its '}'");
      memset(stack, 0, sizeof stack);
      memset(open_block, 0, sizeof open_block);
      parse_kernel(&P);
      if (P.k) stack[1] = P.k->body;
      else dead = true, dead_depth = 0;
    } else if (!P.k && P.p->n_kernels == 0 && depth == 1) {
      parse_buffer(&P);
    } else if (!P.k) {
      error_at(&P, P.s, "a statement outside a kernel");
    } else if (!P.vars_seen) {
      if (depth != 1) error_at(&P, P.s, "expected the kernel's 'vars' line");
      else parse_vars(&P);
      if (!P.vars_seen) dead = true, dead_depth = 0;
    } else if (depth > MAX_DEPTH) {
      error_at(&P, P.s, "nested too deeply");
    } else if (P.s + 1 == P.eol && *P.s == '}') {
      if (!open_block[depth + 1]) error_at(&P, P.s, "a '}' without its '{'");
      for (int j = depth + 2; j <= MAX_DEPTH; j++)
        if (open_block[j]) error_at(&P, P.s, "a block ('{') is missing its '}'");
      for (int j = depth + 1; j <= MAX_DEPTH + 1; j++) stack[j] = NULL, open_block[j] = false;
    } else if (!stack[depth]) {
      error_at(&P, P.s, "indented deeper than the loop or block it would belong to");
    } else {
      for (int j = depth + 1; j <= MAX_DEPTH; j++)
        if (open_block[j]) error_at(&P, P.s, "a block ('{') is missing its '}'");
      for (int j = depth + 1; j <= MAX_DEPTH + 1; j++) stack[j] = NULL, open_block[j] = false;
      LStmt *s = parse_stmt(&P);
      if (s && at_eol(&P)) {
        ls_append(P.p, stack[depth], s);
        if (s->kind == LS_FOR || s->kind == LS_BLOCK) stack[depth + 1] = s;
        open_block[depth + 1] = s->kind == LS_BLOCK;
      } else {
        dead = true, dead_depth = depth;
      }
    }
  }
  if (P.k && !P.vars_seen && !dead) {
    P.line = P.s = P.eol = end;
    P.line_failed = false;
    error_at(&P, end, "the last kernel has no 'vars' line");
  }
  for (int j = 1; j <= MAX_DEPTH; j++)
    if (open_block[j]) {
      P.line = P.s = P.eol = end;
      P.line_failed = false;
      error_at(&P, end, "a block ('{') is missing its '}' at the end of the file");
      break;
    }
  if (!header && P.n_errors == 0) {
    IrLoc loc = {src->name, 1, 1};
    diag_error(d, loc, "empty loop IR: expected 'loop program'");
    P.n_errors++;
  }
  for (int i = 0; i < P.p->n_kernels && P.n_errors == 0; i++)
    if (!P.p->kernels[i].extent) P.n_errors++;
  return P.n_errors ? NULL : P.p;
}
