/* ir/parse.c — reads the textual graph IR that print.c writes.
 *
 * Grammar (whitespace and newlines are free; '#' comments to end of line):
 *
 *   file   := 'graph' NAME '{' stmt* '}'
 *   stmt   := 'sym' NAME 'max' INT
 *           | VALUE '=' OP [STRING] [VALUE (',' VALUE)*] [attrs] ':' type [loc]
 *           | 'output' STRING '=' VALUE
 *   attrs  := '{' [IDENT '=' literal (',' IDENT '=' literal)*] '}'   ('{}' if none)
 *   type   := ('f32' | 'i32' | 'bool') '[' [dim (',' dim)*] ']'
 *   dim    := INT | NAME                        a constant or a symbol
 *   loc    := '@' STRING ':' INT ':' INT
 *   NAME   := IDENT | STRING        IDENT = [A-Za-z_][A-Za-z0-9_.]*
 *   VALUE  := '%' DIGITS
 *
 * Invariants kept:
 *  - value numbers in the text must strictly increase in definition order;
 *    they are renumbered to node indices, and an operand must name a value
 *    defined before it, so the graph is in topological order;
 *  - the op's string attributes (the name of input, param) are the STRINGs
 *    after the op name, in attrs.def order; its other attributes must each
 *    be given exactly once in the braces (ir_attr_info says how each reads);
 *  - location file names are interned in the arena (nodes share them);
 *  - every error is reported at file:line:col of the offending token; after an
 *    error the parser skips to the next line that starts a statement, so one
 *    run reports several errors; a statement that uses a value whose own
 *    definition failed is dropped silently (no cascade of errors);
 *  - a graph that parses is then verified (ir_graph_verify) with each node's
 *    location temporarily set to where its definition stands in the text, so
 *    shape errors point into the .tfir file; nodes then get their @ locations.
 * Returns NULL if anything was reported.
 */
#include "ir.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ERRORS 25
#define MAX_INTERNED 64

typedef enum TokKind {
  TK_EOF,
  TK_IDENT,
  TK_VALUE,  /* %N */
  TK_NUMBER, /* anything number-like; validated by its consumer */
  TK_STRING,
  TK_PUNCT, /* = , : [ ] { } @ */
  TK_ERROR, /* a lexical error, already reported */
} TokKind;

typedef struct Tok {
  TokKind kind;
  const char *start;
  size_t len;
  int line, col;
  bool bol;  /* first token on its line */
  char *str; /* TK_STRING: unescaped, arena-owned, NUL-terminated */
  int vnum;  /* TK_VALUE */
} Tok;

typedef struct Parser {
  Arena *a;
  const SrcFile *src;
  Diags *d;
  const char *p, *end, *line_start;
  int line;
  bool bol;
  bool quiet; /* lexing while skipping after an error: no reports */
  Tok tok;
  int n_errors;
  bool stopped; /* too many errors */
  IrGraph *g;
  /* per node, indexed like g->nodes */
  int *vnums;     /* the number the text gave the value */
  IrLoc *defs;    /* where the definition stands in the text */
  IrLoc *locs;    /* the @ location */
  bool *poisoned; /* its statement failed */
  int cap_vnums, cap_defs, cap_locs, cap_poisoned;
  /* outputs: where each was declared (duplicate names are reported there) */
  IrLoc *out_locs;
  int cap_out_locs;
  const char *interned[MAX_INTERNED];
  int n_interned;
} Parser;

/* ---- diagnostics ---- */

static IrLoc tok_loc(const Parser *ps, const Tok *t) {
  return (IrLoc){ps->src->name, t->line, t->col};
}

static void error_at(Parser *ps, const Tok *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void error_at(Parser *ps, const Tok *t, const char *fmt, ...) {
  if (ps->quiet || ps->stopped)
    return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_error(ps->d, tok_loc(ps, t), "%s", msg);
  if (++ps->n_errors >= MAX_ERRORS) {
    diag_error(ps->d, tok_loc(ps, t), "too many errors; stopping");
    ps->stopped = true;
  }
}

/* A short description of a token for "expected X, found Y". */
static const char *tok_describe(const Tok *t, char *buf, size_t n) {
  switch (t->kind) {
  case TK_EOF: return "end of file";
  case TK_STRING: return "a string";
  case TK_ERROR: return "an invalid token";
  case TK_IDENT:
  case TK_VALUE:
  case TK_NUMBER:
  case TK_PUNCT:
    if (t->len > 40)
      snprintf(buf, n, "'%.40s...'", t->start);
    else
      snprintf(buf, n, "'%.*s'", (int)t->len, t->start);
    return buf;
  }
  return "?";
}

/* A name from the input, quoted and made printable for a message: control
 * bytes escaped, long names cut. */
static const char *show(const char *s, size_t len, char *buf, size_t n) {
  size_t k = 0;
  buf[k++] = '\'';
  for (size_t i = 0; i < len && k + 8 < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c == 0x7f)
      k += (size_t)snprintf(buf + k, n - k, "\\x%02X", c);
    else
      buf[k++] = (char)c;
    if (i + 1 < len && k + 8 >= n) {
      memcpy(buf + k, "...", 3);
      k += 3;
    }
  }
  buf[k++] = '\'';
  buf[k] = 0;
  return buf;
}

/* ---- lexer ---- */

static bool is_ident_start(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_ident_char(char c) {
  return is_ident_start(c) || c == '.' || (c >= '0' && c <= '9');
}
static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

static int hex_val(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Reports a lexical error at byte position `at` on the current line. */
static void lex_error(Parser *ps, const char *at, const char *msg, char c) {
  Tok t = {0};
  t.line = ps->line;
  t.col = (int)(at - ps->line_start) + 1;
  if (c) {
    if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
      error_at(ps, &t, "%s '\\x%02X'", msg, (unsigned char)c);
    else
      error_at(ps, &t, "%s '%c'", msg, c);
  } else {
    error_at(ps, &t, "%s", msg);
  }
}

/* Lexes a string; ps->p is at the opening quote. */
static void lex_string(Parser *ps, Tok *t) {
  /* the decoded string is no longer than its source text up to the closing
   * quote or the end of the line */
  const char *q = ps->p + 1;
  while (q < ps->end && *q != '"' && *q != '\n')
    q += (*q == '\\' && q + 1 < ps->end && q[1] != '\n') ? 2 : 1;
  char *buf = arena_alloc(ps->a, (size_t)(q - ps->p) + 1);
  q = ps->p + 1;
  size_t n = 0;
  bool bad = false;
  for (;;) {
    if (q >= ps->end || *q == '\n') {
      lex_error(ps, ps->p, "unterminated string", 0);
      t->kind = TK_ERROR;
      t->len = (size_t)(q - ps->p);
      ps->p = q;
      return;
    }
    char c = *q;
    if (c == '"') {
      q++;
      break;
    }
    if (c == 0) {
      lex_error(ps, q, "a string cannot contain a NUL byte", 0);
      bad = true;
      q++;
      continue;
    }
    if (c != '\\') {
      buf[n++] = c;
      q++;
      continue;
    }
    char e = q + 1 < ps->end ? q[1] : 0;
    switch (e) {
    case '"':
      buf[n++] = '"';
      q += 2;
      break;
    case '\\':
      buf[n++] = '\\';
      q += 2;
      break;
    case 'n':
      buf[n++] = '\n';
      q += 2;
      break;
    case 't':
      buf[n++] = '\t';
      q += 2;
      break;
    case 'x': {
      int h = q + 2 < ps->end ? hex_val(q[2]) : -1;
      int l = h >= 0 && q + 3 < ps->end ? hex_val(q[3]) : -1;
      if (h < 0 || l < 0) {
        lex_error(ps, q, "'\\x' needs two hex digits", 0);
        bad = true;
        q += 2;
      } else if (h == 0 && l == 0) {
        lex_error(ps, q, "a string cannot contain a NUL byte ('\\x00')", 0);
        bad = true;
        q += 4;
      } else {
        buf[n++] = (char)(h * 16 + l);
        q += 4;
      }
      break;
    }
    default:
      if (e == '\n' || e == 0) {
        q++; /* the unterminated-string check reports it */
      } else {
        lex_error(ps, q, "unknown escape", e);
        bad = true;
        q += 2;
      }
    }
  }
  buf[n] = 0;
  t->kind = bad ? TK_ERROR : TK_STRING;
  t->str = buf;
  t->len = (size_t)(q - ps->p);
  ps->p = q;
}

static void lex_next(Parser *ps) {
  for (;;) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r' ||
                               *ps->p == '\n' || *ps->p == '\f' || *ps->p == '\v')) {
      if (*ps->p == '\n') {
        ps->line++;
        ps->line_start = ps->p + 1;
        ps->bol = true;
      }
      ps->p++;
    }
    if (ps->p < ps->end && *ps->p == '#') {
      while (ps->p < ps->end && *ps->p != '\n')
        ps->p++;
      continue;
    }
    break;
  }
  Tok *t = &ps->tok;
  memset(t, 0, sizeof *t);
  t->start = ps->p;
  t->line = ps->line;
  t->col = (int)(ps->p - ps->line_start) + 1;
  t->bol = ps->bol;
  ps->bol = false;
  if (ps->p >= ps->end) {
    t->kind = TK_EOF;
    return;
  }
  const char *s = ps->p;
  char c = *s;
  if (is_ident_start(c)) {
    while (ps->p < ps->end && is_ident_char(*ps->p))
      ps->p++;
    t->kind = TK_IDENT;
  } else if (is_digit(c) || ((c == '-' || c == '+' || c == '.') && s + 1 < ps->end &&
                             (is_digit(s[1]) || (s[1] == '.' && c != '.')))) {
    ps->p++;
    while (ps->p < ps->end) {
      char x = *ps->p;
      if (is_ident_char(x))
        ps->p++;
      else if ((x == '+' || x == '-') && (ps->p[-1] == 'e' || ps->p[-1] == 'E'))
        ps->p++;
      else
        break;
    }
    t->kind = TK_NUMBER;
  } else if (c == '%') {
    ps->p++;
    if (ps->p >= ps->end || !is_digit(*ps->p)) {
      lex_error(ps, s, "expected a value number after '%'", 0);
      t->kind = TK_ERROR;
    } else {
      long long v = 0;
      bool big = false;
      while (ps->p < ps->end && is_ident_char(*ps->p)) {
        if (!is_digit(*ps->p))
          big = true; /* "%12ab" */
        else if (!big) {
          v = v * 10 + (*ps->p - '0');
          if (v > INT_MAX)
            big = true;
        }
        ps->p++;
      }
      if (big) {
        lex_error(ps, s, "bad value number (expected %N with N at most 2147483647)", 0);
        t->kind = TK_ERROR;
      } else {
        t->kind = TK_VALUE;
        t->vnum = (int)v;
      }
    }
  } else if (c == '"') {
    lex_string(ps, t);
    return;
  } else if (c != 0 && strchr("=,:[]{}@", c)) {
    ps->p++;
    t->kind = TK_PUNCT;
  } else {
    lex_error(ps, s, "unexpected character", c);
    ps->p++;
    t->kind = TK_ERROR;
  }
  t->len = (size_t)(ps->p - s);
}

/* ---- token helpers ---- */

static bool tok_is_punct(const Tok *t, char c) {
  return t->kind == TK_PUNCT && t->start[0] == c;
}
static bool tok_is_word(const Tok *t, const char *w) {
  return t->kind == TK_IDENT && strlen(w) == t->len && memcmp(t->start, w, t->len) == 0;
}

static void expected(Parser *ps, const char *what) {
  if (ps->tok.kind == TK_ERROR)
    return; /* already reported */
  char buf[64];
  error_at(ps, &ps->tok, "expected %s, found %s", what, tok_describe(&ps->tok, buf, sizeof buf));
}

static bool expect_punct(Parser *ps, char c, const char *what) {
  if (!tok_is_punct(&ps->tok, c)) {
    expected(ps, what);
    return false;
  }
  lex_next(ps);
  return true;
}

/* Parses a decimal integer token (signed if allow_sign) in [lo, hi]. */
static bool parse_int(Parser *ps, int64_t lo, int64_t hi, bool allow_sign, const char *what,
                      int64_t *out) {
  Tok *t = &ps->tok;
  if (t->kind != TK_NUMBER) {
    expected(ps, what);
    return false;
  }
  size_t i = 0;
  bool neg = false;
  if (allow_sign && (t->start[0] == '-' || t->start[0] == '+')) {
    neg = t->start[0] == '-';
    i = 1;
  }
  if (i == t->len) {
    expected(ps, what);
    return false;
  }
  uint64_t v = 0;
  bool overflow = false;
  for (; i < t->len; i++) {
    if (!is_digit(t->start[i])) {
      char buf[64];
      error_at(ps, t, "expected %s, found %s", what, tok_describe(t, buf, sizeof buf));
      return false;
    }
    if (v > (UINT64_MAX - 9) / 10)
      overflow = true;
    else
      v = v * 10 + (uint64_t)(t->start[i] - '0');
  }
  int64_t sv = 0;
  if (!overflow && v <= (uint64_t)INT64_MAX)
    sv = neg ? -(int64_t)v : (int64_t)v;
  else if (!overflow && neg && v == (uint64_t)INT64_MAX + 1)
    sv = INT64_MIN;
  else
    overflow = true;
  if (overflow || sv < lo || sv > hi) {
    char buf[64];
    error_at(ps, t, "%s %s is out of range (%lld..%lld)", what, tok_describe(t, buf, sizeof buf),
             (long long)lo, (long long)hi);
    return false;
  }
  *out = sv;
  lex_next(ps);
  return true;
}

static bool parse_float(Parser *ps, const char *what, double *out) {
  Tok *t = &ps->tok;
  if (t->kind != TK_NUMBER) {
    expected(ps, what);
    return false;
  }
  char buf[128];
  char desc[64];
  if (t->len >= sizeof buf) {
    error_at(ps, t, "number %s is too long", tok_describe(t, desc, sizeof desc));
    return false;
  }
  memcpy(buf, t->start, t->len);
  buf[t->len] = 0;
  /* strtod also takes hex floats, inf and nan; the text form has neither */
  for (size_t i = 0; i < t->len; i++)
    if (!(is_digit(buf[i]) || strchr("+-.eE", buf[i]))) {
      error_at(ps, t, "malformed number %s", tok_describe(t, desc, sizeof desc));
      return false;
    }
  char *endp;
  double v = strtod(buf, &endp);
  if (endp != buf + t->len) {
    error_at(ps, t, "malformed number %s", tok_describe(t, desc, sizeof desc));
    return false;
  }
  if (!isfinite(v)) {
    error_at(ps, t, "number %s is out of range", tok_describe(t, desc, sizeof desc));
    return false;
  }
  *out = v;
  lex_next(ps);
  return true;
}

/* NAME := IDENT | STRING; returns an arena copy. */
static const char *parse_name(Parser *ps, const char *what) {
  Tok *t = &ps->tok;
  const char *s;
  if (t->kind == TK_IDENT)
    s = arena_strndup(ps->a, t->start, t->len);
  else if (t->kind == TK_STRING)
    s = t->str;
  else {
    expected(ps, what);
    return NULL;
  }
  lex_next(ps);
  return s;
}

static const char *intern(Parser *ps, const char *s) {
  for (int i = 0; i < ps->n_interned; i++)
    if (strcmp(ps->interned[i], s) == 0)
      return ps->interned[i];
  const char *c = arena_strdup(ps->a, s);
  if (ps->n_interned < MAX_INTERNED)
    ps->interned[ps->n_interned++] = c;
  return c;
}

/* ---- values ---- */

/* Node index of text value number v, or -1. */
static int value_lookup(const Parser *ps, int v) {
  int lo = 0, hi = ps->g->n_nodes - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (ps->vnums[mid] == v)
      return mid;
    if (ps->vnums[mid] < v)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

/* Parses a reference to a value among the first `limit` nodes; sets *poison
 * when it names a value whose definition failed. */
static bool parse_use(Parser *ps, int limit, int *id, bool *poison) {
  if (ps->tok.kind != TK_VALUE) {
    expected(ps, "a value (%N)");
    return false;
  }
  int i = value_lookup(ps, ps->tok.vnum);
  if (i < 0 || i >= limit) { /* i == limit: the value being defined */
    error_at(ps, &ps->tok, "undefined value %%%d (a value must be defined before it is used)",
             ps->tok.vnum);
    return false;
  }
  if (ps->poisoned[i])
    *poison = true;
  *id = i;
  lex_next(ps);
  return true;
}

/* ---- types ---- */

static bool parse_type(Parser *ps, IrType *out) {
  Tok *t = &ps->tok;
  IrDtype dt;
  if (tok_is_word(t, "f32"))
    dt = IR_F32;
  else if (tok_is_word(t, "i32"))
    dt = IR_I32;
  else if (tok_is_word(t, "bool"))
    dt = IR_BOOL;
  else if (t->kind == TK_IDENT) {
    char buf[64];
    error_at(ps, t, "unknown dtype %s (expected f32, i32 or bool)",
             tok_describe(t, buf, sizeof buf));
    return false;
  } else {
    expected(ps, "a type such as f32[B,S,64]");
    return false;
  }
  lex_next(ps);
  if (!expect_punct(ps, '[', "'[' after the dtype"))
    return false;
  IrDim dims[IR_MAX_RANK];
  int rank = 0;
  if (!tok_is_punct(t, ']')) {
    for (;;) {
      if (rank == IR_MAX_RANK) {
        error_at(ps, t, "too many dimensions (the rank is at most %d)", IR_MAX_RANK);
        return false;
      }
      if (t->kind == TK_NUMBER) {
        Tok nt = *t;
        int64_t v;
        if (!parse_int(ps, 0, INT64_MAX, false, "a dimension", &v))
          return false;
        if (v == 0) {
          error_at(ps, &nt, "a dimension must be >= 1 (zero-sized tensors are not supported)");
          return false;
        }
        dims[rank++] = IR_CONST(v);
      } else if (t->kind == TK_IDENT || t->kind == TK_STRING) {
        const char *s = t->kind == TK_STRING ? t->str : t->start;
        size_t len = t->kind == TK_STRING ? strlen(t->str) : t->len;
        int sym = ir_graph_find_symbol(ps->g, s, len);
        if (sym < 0) {
          char buf[64];
          error_at(ps, t, "unknown symbol %s (declare it first: sym NAME max N)",
                   show(s, len, buf, sizeof buf));
          return false;
        }
        dims[rank++] = IR_SYM(sym);
        lex_next(ps);
      } else {
        expected(ps, "a dimension (a number or a symbol)");
        return false;
      }
      if (!tok_is_punct(t, ','))
        break;
      lex_next(ps);
    }
  }
  if (!expect_punct(ps, ']', "',' or ']' in the type"))
    return false;
  *out = ir_type(dt, rank, dims);
  return true;
}

/* ---- statements ---- */

/* Reads the value of attribute id (not a string: those are read after the
 * op name) in its kind's text form. */
static bool parse_attr_value(Parser *ps, IrAttrId id, IrAttrs *at) {
  const IrAttrInfo *info = &ir_attr_info[id];
  char what[64];
  int64_t v;
  double f;
  switch (info->kind) {
  case IR_ATTR_KIND_F64:
    snprintf(what, sizeof what, "a number for '%s'", info->name);
    if (!parse_float(ps, what, &f))
      return false;
    ir_attrs_set_f64(at, id, f);
    return true;
  case IR_ATTR_KIND_BOOL:
    if (tok_is_word(&ps->tok, "true"))
      ir_attrs_set_bool(at, id, true);
    else if (tok_is_word(&ps->tok, "false"))
      ir_attrs_set_bool(at, id, false);
    else {
      snprintf(what, sizeof what, "true or false for '%s'", info->name);
      expected(ps, what);
      return false;
    }
    lex_next(ps);
    return true;
  case IR_ATTR_KIND_INT:
  case IR_ATTR_KIND_I64:
    snprintf(what, sizeof what, "an integer for '%s'", info->name);
    if (!parse_int(ps, info->kind == IR_ATTR_KIND_INT ? INT_MIN : INT64_MIN,
                   info->kind == IR_ATTR_KIND_INT ? INT_MAX : INT64_MAX, true, what, &v))
      return false;
    ir_attrs_set_int(at, id, v);
    return true;
  case IR_ATTR_KIND_ACT: {
    int act = ps->tok.kind == TK_IDENT ? ir_act_lookup(ps->tok.start, ps->tok.len) : -1;
    if (act < 0) {
      snprintf(what, sizeof what, "none, relu, gelu or gelu_tanh for '%s'", info->name);
      expected(ps, what);
      return false;
    }
    ir_attrs_set_int(at, id, act);
    lex_next(ps);
    return true;
  }
  case IR_ATTR_KIND_STRING:
  case IR_ATTR_KIND_COUNT: break;
  }
  TFMC_ASSERT(!"attribute without a parser");
  return false;
}

/* attrs := '{' [IDENT '=' literal (',' IDENT '=' literal)*] '}'  (all the
 * op's attributes except its strings, each exactly once; OPTIONAL ones
 * may be left out: they stay zero) */
static bool parse_attrs(Parser *ps, IrOp op, unsigned carried, const Tok *op_tok, IrAttrs *at) {
  const IrOpInfo *info = &ir_op_info[op];
  unsigned want = 0, seen = 0;
  for (int f = 0; f < IR_ATTR_ID_COUNT; f++)
    if (ir_attr_info[f].kind != IR_ATTR_KIND_STRING)
      want |= carried & ir_attr_info[f].bit;
  if (tok_is_punct(&ps->tok, '{')) {
    lex_next(ps);
    while (!tok_is_punct(&ps->tok, '}')) {
      Tok nt = ps->tok;
      if (nt.kind != TK_IDENT) {
        expected(ps, "an attribute name or '}'");
        return false;
      }
      int f = ir_attr_lookup(nt.start, nt.len);
      char buf[64];
      if (f >= 0 && ir_attr_info[f].kind == IR_ATTR_KIND_STRING) {
        if (carried & ir_attr_info[f].bit)
          error_at(ps, &nt, "the %s of '%s' goes in quotes right after the op name",
                   ir_attr_info[f].name, info->name);
        else
          error_at(ps, &nt, "unknown attribute %s", tok_describe(&nt, buf, sizeof buf));
        return false;
      }
      if (f < 0) {
        error_at(ps, &nt, "unknown attribute %s", tok_describe(&nt, buf, sizeof buf));
        return false;
      }
      unsigned bit = ir_attr_info[f].bit;
      if (!(want & bit)) {
        error_at(ps, &nt, "attribute '%s' is not allowed for '%s'", ir_attr_info[f].name,
                 info->name);
        return false;
      }
      if (seen & bit) {
        error_at(ps, &nt, "duplicate attribute '%s'", ir_attr_info[f].name);
        return false;
      }
      lex_next(ps);
      if (!expect_punct(ps, '=', "'=' after the attribute name"))
        return false;
      if (!parse_attr_value(ps, (IrAttrId)f, at))
        return false;
      seen |= bit;
      if (tok_is_punct(&ps->tok, ','))
        lex_next(ps);
      else if (!tok_is_punct(&ps->tok, '}')) {
        expected(ps, "',' or '}' after the attribute");
        return false;
      }
    }
    lex_next(ps);
  }
  for (int f = 0; f < IR_ATTR_ID_COUNT; f++)
    if ((want & ir_attr_info[f].bit) && !(seen & ir_attr_info[f].bit) &&
        ir_attr_info[f].check != IR_ATTR_CHECK_OPTIONAL) {
      error_at(ps, op_tok, "'%s' needs attribute '%s'", info->name, ir_attr_info[f].name);
      return false;
    }
  return true;
}

static void operand_range(const IrOpInfo *info, char *buf, size_t n) {
  if (info->min_operands == info->max_operands)
    snprintf(buf, n, "%d operand%s", info->min_operands, info->min_operands == 1 ? "" : "s");
  else if (info->max_operands == info->min_operands + 1)
    snprintf(buf, n, "%d or %d operands", info->min_operands, info->max_operands);
  else
    snprintf(buf, n, "%d to %d operands", info->min_operands, info->max_operands);
}

/* Appends a node for text value number vnum, poisoned until its statement
 * completes. */
static int node_append(Parser *ps, int vnum, IrLoc def) {
  IrGraph *g = ps->g;
  int n = g->n_nodes;
  arena_grow(ps->a, (void **)&g->nodes, &g->cap_nodes, n + 1, sizeof *g->nodes);
  arena_grow(ps->a, (void **)&ps->vnums, &ps->cap_vnums, n + 1, sizeof *ps->vnums);
  arena_grow(ps->a, (void **)&ps->defs, &ps->cap_defs, n + 1, sizeof *ps->defs);
  arena_grow(ps->a, (void **)&ps->locs, &ps->cap_locs, n + 1, sizeof *ps->locs);
  arena_grow(ps->a, (void **)&ps->poisoned, &ps->cap_poisoned, n + 1, sizeof *ps->poisoned);
  memset(&g->nodes[n], 0, sizeof g->nodes[n]);
  ps->vnums[n] = vnum;
  ps->defs[n] = def;
  ps->locs[n] = (IrLoc){NULL, 0, 0};
  ps->poisoned[n] = true;
  g->n_nodes++;
  return n;
}

/* VALUE '=' OP [STRING] [VALUE (',' VALUE)*] [attrs] ':' type [loc] */
static bool parse_node(Parser *ps) {
  Tok vt = ps->tok;
  int n = ps->g->n_nodes;
  int prev = value_lookup(ps, vt.vnum);
  if (prev >= 0) {
    error_at(ps, &vt, "duplicate value %%%d (first defined at line %d)", vt.vnum,
             ps->defs[prev].line);
    return false;
  }
  if (n > 0 && vt.vnum < ps->vnums[n - 1]) {
    error_at(ps, &vt, "value %%%d defined after %%%d: value numbers must increase", vt.vnum,
             ps->vnums[n - 1]);
    return false;
  }
  int id = node_append(ps, vt.vnum, tok_loc(ps, &vt));
  IrNode *nd = &ps->g->nodes[id];
  lex_next(ps);
  if (!expect_punct(ps, '=', "'=' after the value"))
    return false;

  Tok ot = ps->tok;
  if (ot.kind != TK_IDENT) {
    expected(ps, "an op name");
    return false;
  }
  int op = ir_op_lookup(ot.start, ot.len);
  if (op < 0) {
    char buf[64];
    error_at(ps, &ot, "unknown op %s", tok_describe(&ot, buf, sizeof buf));
    return false;
  }
  nd->op = (IrOp)op;
  const IrOpInfo *info = &ir_op_info[op];
  lex_next(ps);

  /* a fused node carries what its kind's row says, known once the kind
   * (its first string) is read */
  unsigned carried = info->attrs;
  for (int f = 0; f < IR_ATTR_ID_COUNT; f++) {
    if (!(carried & ir_attr_info[f].bit) || ir_attr_info[f].kind != IR_ATTR_KIND_STRING)
      continue;
    if (ps->tok.kind != TK_STRING) {
      char what[64];
      snprintf(what, sizeof what, "the quoted %s after '%s'", ir_attr_info[f].name, info->name);
      expected(ps, what);
      return false;
    }
    Tok st = ps->tok;
    ir_attrs_set_string(&nd->attrs, (IrAttrId)f, ps->tok.str);
    if (f == IR_ATTR_ID_FUSION) {
      if (ir_fused_kind_of(&nd->attrs) < 0) {
        char known[256];
        size_t k = 0;
        known[0] = 0;
        for (int i = 0; i < IR_FUSED_COUNT && k < sizeof known; i++)
          k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", i ? ", " : "",
                                ir_fused_info[i].name);
        char buf[64];
        error_at(ps, &st, "unknown fusion kind %s (fused.def has: %s)",
                 show(st.str, strlen(st.str), buf, sizeof buf), known);
        return false;
      }
      carried = ir_node_attr_mask(nd);
    }
    lex_next(ps);
  }

  bool poison = false;
  int count = 0;
  if (ps->tok.kind == TK_VALUE) {
    for (;;) {
      int u;
      if (!parse_use(ps, id, &u, &poison))
        return false;
      if (count < IR_MAX_OPERANDS)
        nd->operands[count] = u;
      count++;
      if (!tok_is_punct(&ps->tok, ','))
        break;
      lex_next(ps);
    }
  }
  if (count < info->min_operands || count > info->max_operands) {
    char buf[64];
    operand_range(info, buf, sizeof buf);
    error_at(ps, &ot, "'%s' takes %s, got %d", info->name, buf, count);
    return false;
  }
  if (nd->op == IR_OP_FUSED) {
    const IrFusedInfo *fi = &ir_fused_info[ir_fused_kind_of(&nd->attrs)];
    if (count < fi->min_operands || count > fi->max_operands) {
      if (fi->min_operands == fi->max_operands)
        error_at(ps, &ot, "fused '%s' takes %d operands, got %d", fi->name, fi->min_operands,
                 count);
      else
        error_at(ps, &ot, "fused '%s' takes %d to %d operands, got %d", fi->name,
                 fi->min_operands, fi->max_operands, count);
      return false;
    }
  }
  nd->n_operands = count;

  if (!parse_attrs(ps, nd->op, carried, &ot, &nd->attrs))
    return false;
  if (!expect_punct(ps, ':', "':' before the result type"))
    return false;
  if (!parse_type(ps, &nd->type))
    return false;

  if (tok_is_punct(&ps->tok, '@')) {
    lex_next(ps);
    if (ps->tok.kind != TK_STRING) {
      expected(ps, "a quoted file name after '@'");
      return false;
    }
    const char *file = intern(ps, ps->tok.str);
    lex_next(ps);
    int64_t line, col;
    if (!expect_punct(ps, ':', "':' after the location's file") ||
        !parse_int(ps, 0, INT_MAX, false, "a line number", &line) ||
        !expect_punct(ps, ':', "':' after the line number") ||
        !parse_int(ps, 0, INT_MAX, false, "a column number", &col))
      return false;
    ps->locs[id] = (IrLoc){file, (int)line, (int)col};
  }
  ps->poisoned[id] = poison;
  return true;
}

/* 'sym' NAME 'max' INT */
/* pad := 'pad' INT   (the padding token id; once) */
static bool parse_pad(Parser *ps) {
  Tok pt = ps->tok;
  lex_next(ps);
  if (ps->g->pad_id >= 0) {
    error_at(ps, &pt, "duplicate pad id");
    return false;
  }
  return parse_int(ps, 0, INT64_MAX, false, "the pad id", &ps->g->pad_id);
}

static bool parse_sym(Parser *ps) {
  lex_next(ps);
  Tok nt = ps->tok;
  const char *name = parse_name(ps, "a symbol name");
  if (!name)
    return false;
  char buf[64];
  if (ir_graph_find_symbol(ps->g, name, strlen(name)) >= 0) {
    error_at(ps, &nt, "duplicate symbol %s", show(name, strlen(name), buf, sizeof buf));
    return false;
  }
  if (ps->g->n_syms >= IR_MAX_SYMS) {
    error_at(ps, &nt, "too many symbols (at most %d)", IR_MAX_SYMS);
    return false;
  }
  if (!tok_is_word(&ps->tok, "max")) {
    expected(ps, "'max' after the symbol name");
    return false;
  }
  lex_next(ps);
  int64_t max;
  Tok mt = ps->tok;
  if (!parse_int(ps, 0, INT64_MAX, false, "the symbol's maximum", &max))
    return false;
  if (max == 0) {
    error_at(ps, &mt, "a symbol's maximum must be >= 1");
    return false;
  }
  ir_graph_add_symbol(ps->g, name, max);
  return true;
}

/* 'output' STRING '=' VALUE */
static bool parse_output(Parser *ps) {
  lex_next(ps);
  Tok nt = ps->tok;
  if (nt.kind != TK_STRING) {
    expected(ps, "the quoted output name");
    return false;
  }
  lex_next(ps);
  if (!expect_punct(ps, '=', "'=' after the output name"))
    return false;
  int id;
  bool poison = false;
  if (!parse_use(ps, ps->g->n_nodes, &id, &poison))
    return false;
  IrGraph *g = ps->g;
  ir_graph_add_output(g, nt.str, id);
  arena_grow(ps->a, (void **)&ps->out_locs, &ps->cap_out_locs, g->n_outputs, sizeof *ps->out_locs);
  ps->out_locs[g->n_outputs - 1] = tok_loc(ps, &nt);
  return true;
}

typedef struct NameRef {
  const char *name;
  int index;
} NameRef;

static int name_ref_cmp(const void *pa, const void *pb) {
  const NameRef *a = pa, *b = pb;
  int c = strcmp(a->name, b->name);
  return c ? c : (a->index > b->index) - (a->index < b->index);
}

static void check_output_names(Parser *ps) {
  IrGraph *g = ps->g;
  if (g->n_outputs < 2)
    return;
  NameRef *refs = arena_alloc(ps->a, (size_t)g->n_outputs * sizeof *refs);
  for (int i = 0; i < g->n_outputs; i++)
    refs[i] = (NameRef){g->outputs[i].name, i};
  qsort(refs, (size_t)g->n_outputs, sizeof *refs, name_ref_cmp);
  for (int i = 1, first = 0; i < g->n_outputs; i++) {
    if (strcmp(refs[i].name, refs[first].name) != 0) {
      first = i;
      continue;
    }
    char buf[64];
    IrLoc l = ps->out_locs[refs[i].index];
    Tok t = {.line = l.line, .col = l.col};
    error_at(ps, &t, "duplicate output name %s (first declared at line %d)",
             show(refs[i].name, strlen(refs[i].name), buf, sizeof buf),
             ps->out_locs[refs[first].index].line);
  }
}

static bool is_stmt_start(const Tok *t) {
  return t->kind == TK_VALUE || tok_is_word(t, "sym") || tok_is_word(t, "pad") ||
         tok_is_word(t, "output") ||
         tok_is_punct(t, '}');
}

/* After an error: resume at the next line that starts with a statement. The
 * token where the error was found is kept if it begins such a line. */
static void recover(Parser *ps, int stmt_line) {
  Tok *t = &ps->tok;
  if (t->bol && t->line > stmt_line && is_stmt_start(t))
    return;
  ps->quiet = true;
  do {
    while (ps->p < ps->end && *ps->p != '\n')
      ps->p++;
    lex_next(ps);
  } while (t->kind != TK_EOF && !(t->bol && is_stmt_start(t)));
  ps->quiet = false;
}

IrGraph *ir_graph_parse(Arena *a, const SrcFile *src, Diags *d) {
  diags_add_source(d, src);
  Parser ps;
  memset(&ps, 0, sizeof ps);
  ps.a = a;
  ps.src = src;
  ps.d = d;
  ps.p = src->text;
  ps.end = src->text + src->len;
  ps.line_start = src->text;
  ps.line = 1;
  ps.bol = true;
  lex_next(&ps);
  if (!tok_is_word(&ps.tok, "graph")) {
    expected(&ps, "'graph' at the start of the file");
    return NULL;
  }
  lex_next(&ps);
  const char *name = parse_name(&ps, "the graph name");
  if (!name || !expect_punct(&ps, '{', "'{' after the graph name"))
    return NULL;
  ps.g = ir_graph_create(a, name);
  bool failed = false;
  while (!ps.stopped) {
    Tok *t = &ps.tok;
    if (tok_is_punct(t, '}')) {
      lex_next(&ps);
      if (t->kind != TK_EOF) {
        expected(&ps, "end of file after the graph's closing '}'");
        failed = true;
      }
      break;
    }
    if (t->kind == TK_EOF) {
      expected(&ps, "'}' to close the graph");
      failed = true;
      break;
    }
    int line = t->line;
    bool ok;
    if (t->kind == TK_VALUE)
      ok = parse_node(&ps);
    else if (tok_is_word(t, "sym"))
      ok = parse_sym(&ps);
    else if (tok_is_word(t, "pad"))
      ok = parse_pad(&ps);
    else if (tok_is_word(t, "output"))
      ok = parse_output(&ps);
    else {
      expected(&ps, "a statement ('%N = ...', 'sym', 'pad' or 'output') or '}'");
      ok = false;
    }
    if (!ok) {
      failed = true;
      recover(&ps, line);
    }
  }
  check_output_names(&ps);
  if (failed || ps.n_errors) {
    if (ps.n_errors == 0) /* every failing path reports; keep the promise anyway */
      diag_error(d, (IrLoc){src->name, 0, 0}, "malformed graph IR");
    return NULL;
  }
  IrGraph *g = ps.g;
  for (int i = 0; i < g->n_nodes; i++)
    g->nodes[i].loc = ps.defs[i];
  bool ok = ir_graph_verify(g, d);
  for (int i = 0; i < g->n_nodes; i++)
    g->nodes[i].loc = ps.locs[i];
  return ok ? g : NULL;
}
