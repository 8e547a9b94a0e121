/* frontend/lexer.c — the .tfm lexer: source bytes -> tokens.
 *
 * Tokens: IDENT [A-Za-z_][A-Za-z0-9_]*, INT (decimal, optional '-'), FLOAT
 * (0.5, 1e-5, 2.5E3, optional '-'), STRING "..." with the escapes \" \\ \n
 * \t \xHH, the punctuation { } [ ] = ., and NEWLINE (lines are significant).
 * '#' starts a comment that runs to the end of the line; "\r\n" counts as one
 * newline; a run of newlines (blank and comment-only lines) is one NEWLINE
 * token, so memory follows the content, not the line count.
 *
 * Invariants: the whole input is consumed (the text's length is used, not
 * its NUL, so a stray NUL byte is an error, not the end); the array always
 * ends with exactly one TOK_EOF; each lexical error is reported once and
 * yields one TOK_ERROR token covering the bad text, so the parser never sees
 * half a token; locations are the 1-based line:col of a token's first byte,
 * col counted in bytes.
 */
#include "frontend/parse_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Lexer {
  Arena *a;
  const SrcFile *src;
  Diags *d;
  const char *p, *end;
  const char *line_start;
  int line;
  Token *toks;
  int n, cap;
} Lexer;

static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

static bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_ident_char(char c) {
  return is_ident_start(c) || is_digit(c);
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if it is not one
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). */
static int utf8_seq_len(const unsigned char *p, const unsigned char *end) {
  unsigned c = p[0];
  if (c < 0x80) return 1;
  int n;
  unsigned min;
  unsigned cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, min = 0x80, cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, min = 0x800, cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, min = 0x10000, cp = c & 0x07;
  } else {
    return 0;
  }
  if (end - p < n) return 0;
  for (int i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

static IrLoc loc_at(const Lexer *lx, const char *p) {
  return (IrLoc){lx->src->name, lx->line, (int)(p - lx->line_start) + 1};
}

static Token *push(Lexer *lx, TokKind kind, const char *start, const char *stop) {
  arena_grow(lx->a, (void **)&lx->toks, &lx->cap, lx->n + 1, sizeof(Token));
  Token *t = &lx->toks[lx->n++];
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->start = start;
  t->len = (int)(stop - start);
  t->loc = loc_at(lx, start);
  return t;
}

/* Does a token, a blank or a comment begin at p? Anything else is an
 * unexpected character. */
static bool starts_something(const Lexer *lx, const char *p) {
  char c = *p;
  if (is_ident_char(c)) return true;
  switch (c) {
  case ' ': case '\t': case '\n': case '#': case '"':
  case '{': case '}': case '[': case ']': case '=': case '.':
    return true;
  case '-': return p + 1 < lx->end && is_digit(p[1]);
  case '\r': return p + 1 < lx->end && p[1] == '\n';
  default: return false;
  }
}

/* A run of characters that cannot start a token: one error for the run,
 * naming its first character. */
static void lex_unexpected(Lexer *lx) {
  const char *s = lx->p;
  const unsigned char *u = (const unsigned char *)s;
  int k = utf8_seq_len(u, (const unsigned char *)lx->end);
  IrLoc loc = loc_at(lx, s);
  if (u[0] > 0x20 && u[0] < 0x7F)
    diag_error(lx->d, loc, "unexpected character '%c'", s[0]);
  else if (k > 1)
    diag_error(lx->d, loc, "unexpected character '%.*s' (only ASCII is allowed outside "
               "strings and comments)", k, s);
  else
    diag_error(lx->d, loc, "unexpected character '\\x%02X'", u[0]);
  lx->p += k > 1 ? k : 1;
  while (lx->p < lx->end && !starts_something(lx, lx->p)) lx->p++;
  push(lx, TOK_ERROR, s, lx->p);
}

static void lex_number(Lexer *lx) {
  const char *s = lx->p, *p = s, *end = lx->end;
  bool is_float = false;
  if (*p == '-') p++;
  while (p < end && is_digit(*p)) p++;
  if (p + 1 < end && *p == '.' && is_digit(p[1])) {
    is_float = true;
    p++;
    while (p < end && is_digit(*p)) p++;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    const char *q = p + 1;
    if (q < end && (*q == '+' || *q == '-')) q++;
    if (q < end && is_digit(*q)) {
      is_float = true;
      p = q;
      while (p < end && is_digit(*p)) p++;
    }
  }
  lx->p = p;
  IrLoc loc = loc_at(lx, s);
  if (p < end && is_ident_char(*p)) {
    while (lx->p < end && (is_ident_char(*lx->p) || *lx->p == '.')) lx->p++;
    diag_error(lx->d, loc, "malformed number '%s'",
               spec_clip(lx->a, arena_strndup(lx->a, s, (size_t)(lx->p - s))));
    push(lx, TOK_ERROR, s, lx->p);
    return;
  }
  char *text = arena_strndup(lx->a, s, (size_t)(p - s));
  if (is_float) {
    double v = strtod(text, NULL);
    if (!isfinite(v)) {
      diag_error(lx->d, loc, "number '%s' is out of range", spec_clip(lx->a, text));
      push(lx, TOK_ERROR, s, p);
      return;
    }
    Token *t = push(lx, TOK_FLOAT, s, p);
    t->fval = v;
    return;
  }
  errno = 0;
  long long v = strtoll(text, NULL, 10);
  if (errno == ERANGE) {
    diag_error(lx->d, loc, "integer '%s' is out of range", spec_clip(lx->a, text));
    push(lx, TOK_ERROR, s, p);
    return;
  }
  Token *t = push(lx, TOK_INT, s, p);
  t->ival = (int64_t)v;
  t->fval = (double)v;
}

/* A string: the closing quote must be on the same line. The first error in
 * a string is reported; the token then becomes TOK_ERROR. */
static void lex_string(Lexer *lx) {
  const char *s = lx->p, *end = lx->end;
  /* find where the string ends: the closing quote, or a line end / EOF */
  const char *q = s + 1;
  bool closed = false;
  while (q < end) {
    if (*q == '"') {
      closed = true;
      break;
    }
    if (*q == '\n' || (*q == '\r' && q + 1 < end && q[1] == '\n')) break;
    if (*q == '\\' && q + 1 < end && q[1] != '\n' && q[1] != '\r') q++;
    q++;
  }
  if (!closed) {
    diag_error(lx->d, loc_at(lx, s), "unterminated string");
    lx->p = q;
    push(lx, TOK_ERROR, s, q);
    return;
  }
  char *buf = arena_alloc(lx->a, (size_t)(q - s));
  size_t n = 0;
  bool bad = false, escaped_high = false;
  for (const char *p = s + 1; p < q && !bad;) {
    unsigned char c = (unsigned char)*p;
    if (c == '\\') {
      char e = p[1];
      switch (e) {
      case '"': buf[n++] = '"'; p += 2; continue;
      case '\\': buf[n++] = '\\'; p += 2; continue;
      case 'n': buf[n++] = '\n'; p += 2; continue;
      case 't': buf[n++] = '\t'; p += 2; continue;
      case 'x': {
        int h1 = p + 2 < q ? hex_value(p[2]) : -1;
        int h2 = h1 >= 0 && p + 3 < q ? hex_value(p[3]) : -1;
        if (h1 < 0 || h2 < 0) {
          diag_error(lx->d, loc_at(lx, p), "'\\x' in a string takes two hex digits");
          bad = true;
          continue;
        }
        int v = h1 * 16 + h2;
        if (v == 0) {
          diag_error(lx->d, loc_at(lx, p), "'\\x00' is not allowed in a string");
          bad = true;
          continue;
        }
        if (v >= 0x80) escaped_high = true;
        buf[n++] = (char)v;
        p += 4;
        continue;
      }
      default: {
        unsigned char ue = (unsigned char)e;
        if (ue > 0x20 && ue < 0x7F)
          diag_error(lx->d, loc_at(lx, p), "unknown escape '\\%c' in a string "
                     "(known: \\\" \\\\ \\n \\t \\xHH)", e);
        else
          diag_error(lx->d, loc_at(lx, p), "unknown escape in a string "
                     "(known: \\\" \\\\ \\n \\t \\xHH)");
        bad = true;
        continue;
      }
      }
    }
    if (c < 0x20 && c != '\t') {
      diag_error(lx->d, loc_at(lx, p), "control character '\\x%02X' in a string "
                 "(write it as an escape)", c);
      bad = true;
      continue;
    }
    int k = utf8_seq_len((const unsigned char *)p, (const unsigned char *)q);
    if (k == 0) {
      diag_error(lx->d, loc_at(lx, p), "invalid UTF-8 in a string");
      bad = true;
      continue;
    }
    memcpy(buf + n, p, (size_t)k);
    n += (size_t)k;
    p += k;
  }
  if (!bad && escaped_high) {
    const unsigned char *u = (const unsigned char *)buf, *ue = u + n;
    while (u < ue) {
      int k = utf8_seq_len(u, ue);
      if (k == 0) {
        diag_error(lx->d, loc_at(lx, s), "string is not valid UTF-8 (check its \\x escapes)");
        bad = true;
        break;
      }
      u += k;
    }
  }
  lx->p = q + 1;
  if (bad) {
    push(lx, TOK_ERROR, s, lx->p);
    return;
  }
  buf[n] = 0;
  Token *t = push(lx, TOK_STRING, s, lx->p);
  t->str = buf;
}

Token *lex_tokens(Arena *a, const SrcFile *src, Diags *d, int *n_out) {
  Lexer lx = {.a = a, .src = src, .d = d, .line = 1};
  lx.p = lx.line_start = src->text;
  lx.end = src->text + src->len;
  while (lx.p < lx.end) {
    const char *s = lx.p;
    char c = *s;
    if (c == ' ' || c == '\t') {
      lx.p++;
      continue;
    }
    if (c == '#') {
      while (lx.p < lx.end && *lx.p != '\n') lx.p++;
      continue;
    }
    if (c == '\n' || (c == '\r' && s + 1 < lx.end && s[1] == '\n')) {
      lx.p += c == '\n' ? 1 : 2;
      /* blank and comment lines add no token: memory follows content */
      if (lx.n == 0 || lx.toks[lx.n - 1].kind != TOK_NEWLINE) push(&lx, TOK_NEWLINE, s, lx.p);
      lx.line++;
      lx.line_start = lx.p;
      continue;
    }
    if (is_ident_start(c)) {
      while (lx.p < lx.end && is_ident_char(*lx.p)) lx.p++;
      Token *t = push(&lx, TOK_IDENT, s, lx.p);
      t->str = arena_strndup(a, s, (size_t)(lx.p - s));
      continue;
    }
    if (is_digit(c) || (c == '-' && s + 1 < lx.end && is_digit(s[1]))) {
      lex_number(&lx);
      continue;
    }
    TokKind k = TOK_ERROR;
    switch (c) {
    case '{': k = TOK_LBRACE; break;
    case '}': k = TOK_RBRACE; break;
    case '[': k = TOK_LBRACKET; break;
    case ']': k = TOK_RBRACKET; break;
    case '=': k = TOK_EQUALS; break;
    case '.': k = TOK_DOT; break;
    case '"': lex_string(&lx); continue;
    default: lex_unexpected(&lx); continue;
    }
    lx.p++;
    push(&lx, k, s, lx.p);
  }
  push(&lx, TOK_EOF, lx.p, lx.p);
  *n_out = lx.n;
  return lx.toks;
}
