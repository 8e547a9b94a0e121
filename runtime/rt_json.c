/* runtime/rt_json.c — strict JSON pull reader and UTF-8 validator.
 *
 * Invariants: r->pos never passes r->len and every byte is read only after
 * checking pos < len, so any input (truncated, binary, adversarial) is safe;
 * r->depth counts the open containers and never exceeds RT_JSON_MAX_DEPTH,
 * which also bounds the recursion of rt_json_skip_value; once r->failed is
 * set every call returns -1 and the first message is kept. Decoded strings
 * are always valid UTF-8 (escapes are re-encoded, surrogates must pair). */
#include "rt_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EXACT ((uint64_t)1 << 53)

/* Length of the UTF-8 sequence starting at s (n bytes available), or 0 when
 * it is malformed: a stray continuation byte, an overlong form (C0, C1,
 * E0 80..9F, F0 80..8F), a surrogate (ED A0..BF), a code point above
 * U+10FFFF (F4 90.., F5..FF) or a truncated sequence. */
static size_t utf8_seq_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t need;
  unsigned lo = 0x80, hi = 0xBF;
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0;
  if (c < 0xE0) {
    need = 2;
  } else if (c < 0xF0) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c < 0xF5) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (n < need) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < need; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  return need;
}

int rt_utf8_valid(const void *s, size_t len, size_t *bad_pos) {
  const unsigned char *p = s;
  size_t i = 0;
  while (i < len) {
    if (p[i] < 0x80) {
      i++;
      continue;
    }
    size_t k = utf8_seq_len(p + i, len - i);
    if (!k) {
      if (bad_pos) *bad_pos = i;
      return 0;
    }
    i += k;
  }
  return 1;
}

const char *rt_json_type_name(RtJsonType t) {
  switch (t) {
  case RT_JSON_NULL: return "null";
  case RT_JSON_BOOL: return "a boolean";
  case RT_JSON_NUMBER: return "a number";
  case RT_JSON_STRING: return "a string";
  case RT_JSON_ARRAY: return "an array";
  case RT_JSON_OBJECT: return "an object";
  case RT_JSON_TYPE_COUNT: break;
  }
  return "?";
}

void rt_json_reader_init(RtJsonReader *r, const char *text, size_t len) {
  memset(r, 0, sizeof *r);
  r->text = text;
  r->len = len;
}

void rt_json_reader_free(RtJsonReader *r) {
  free(r->key);
  free(r->str);
  r->key = r->str = NULL;
  r->key_cap = r->str_cap = 0;
}

static int fail_at(RtJsonReader *r, size_t pos, const char *fmt, ...) {
  if (r->failed) return -1;
  r->failed = 1;
  r->err_pos = pos;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof r->msg, fmt, ap);
  va_end(ap);
  return -1;
}

/* "expected X, found 'c'" or "unexpected end of input, expected X". */
static int fail_expected(RtJsonReader *r, const char *what) {
  if (r->pos >= r->len) return fail_at(r, r->pos, "unexpected end of input, expected %s", what);
  unsigned char c = (unsigned char)r->text[r->pos];
  if (c >= 0x20 && c < 0x7F) return fail_at(r, r->pos, "expected %s, found '%c'", what, c);
  return fail_at(r, r->pos, "expected %s, found byte 0x%02x", what, c);
}

static void skip_ws(RtJsonReader *r) {
  while (r->pos < r->len) {
    char c = r->text[r->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    r->pos++;
  }
}

static int at(const RtJsonReader *r, char c) {
  return r->pos < r->len && r->text[r->pos] == c;
}

int rt_json_peek(RtJsonReader *r, RtJsonType *type) {
  if (r->failed) return -1;
  skip_ws(r);
  if (r->pos >= r->len) return fail_expected(r, "a value");
  char c = r->text[r->pos];
  switch (c) {
  case '{': *type = RT_JSON_OBJECT; return 0;
  case '[': *type = RT_JSON_ARRAY; return 0;
  case '"': *type = RT_JSON_STRING; return 0;
  case 't':
  case 'f': *type = RT_JSON_BOOL; return 0;
  case 'n': *type = RT_JSON_NULL; return 0;
  default: break;
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    *type = RT_JSON_NUMBER;
    return 0;
  }
  return fail_expected(r, "a value");
}

/* ---- containers ---- */

static int open_container(RtJsonReader *r, char open, const char *what) {
  if (r->failed) return -1;
  skip_ws(r);
  if (!at(r, open)) return fail_expected(r, what);
  if (r->depth >= RT_JSON_MAX_DEPTH)
    return fail_at(r, r->pos, "nesting deeper than %d levels", RT_JSON_MAX_DEPTH);
  r->pos++;
  r->depth++;
  r->first[r->depth] = 1;
  r->kind[r->depth] = (unsigned char)open;
  return 0;
}

int rt_json_object_begin(RtJsonReader *r) {
  return open_container(r, '{', "'{'");
}

int rt_json_array_begin(RtJsonReader *r) {
  return open_container(r, '[', "'['");
}

/* Reads the separator before the next element of the innermost container,
 * or its closing bracket (then *done = 1 and the container is closed). */
static int next_element(RtJsonReader *r, char open, char close, int *done) {
  if (r->failed) return -1;
  if (r->depth == 0 || r->kind[r->depth] != (unsigned char)open)
    return fail_at(r, r->pos, "internal: reader misuse (not inside '%c')", open);
  skip_ws(r);
  *done = 0;
  if (at(r, close)) {
    r->pos++;
    r->depth--;
    *done = 1;
    return 0;
  }
  if (r->first[r->depth]) {
    r->first[r->depth] = 0;
    return 0;
  }
  if (!at(r, ',')) {
    char what[24];
    snprintf(what, sizeof what, "',' or '%c'", close);
    return fail_expected(r, what);
  }
  r->pos++;
  skip_ws(r);
  if (at(r, close)) return fail_at(r, r->pos, "trailing comma before '%c'", close);
  return 0;
}

int rt_json_array_next(RtJsonReader *r, int *done) {
  return next_element(r, '[', ']', done);
}

/* ---- strings ---- */

static int buf_put(RtJsonReader *r, char **buf, size_t *cap, size_t *n, const void *src, size_t k) {
  if (*n + k + 1 > *cap) {
    size_t nc = *cap ? *cap : 64;
    while (nc < *n + k + 1) nc *= 2;
    char *nb = realloc(*buf, nc);
    if (!nb) return fail_at(r, r->pos, "out of memory decoding a string");
    *buf = nb;
    *cap = nc;
  }
  memcpy(*buf + *n, src, k);
  *n += k;
  return 0;
}

static int hex4(const RtJsonReader *r, size_t pos, unsigned *out) {
  if (r->len - pos < 4) return -1;
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = r->text[pos + (size_t)i];
    unsigned d;
    if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
    else return -1;
    v = v * 16 + d;
  }
  *out = v;
  return 0;
}

static size_t utf8_encode(unsigned cp, unsigned char *o) {
  if (cp < 0x80) {
    o[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (unsigned char)(0xC0 | (cp >> 6));
    o[1] = (unsigned char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xE0 | (cp >> 12));
    o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (unsigned char)(0xF0 | (cp >> 18));
  o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Decodes the string at r->pos (which must be '"') into *buf. */
static int decode_string(RtJsonReader *r, char **buf, size_t *cap, size_t *out_len) {
  size_t start = r->pos, n = 0;
  if (!at(r, '"')) return fail_expected(r, "a string");
  r->pos++;
  for (;;) {
    if (r->pos >= r->len) return fail_at(r, start, "unterminated string");
    unsigned char c = (unsigned char)r->text[r->pos];
    if (c == '"') {
      r->pos++;
      break;
    }
    if (c < 0x20)
      return fail_at(r, r->pos, "control character 0x%02x in a string (must be escaped)", c);
    if (c != '\\') {
      /* Copy a run of plain characters at once. */
      size_t run = r->pos;
      while (run < r->len) {
        unsigned char d = (unsigned char)r->text[run];
        if (d == '"' || d == '\\' || d < 0x20) break;
        size_t k = d < 0x80 ? 1 : utf8_seq_len((const unsigned char *)r->text + run, r->len - run);
        if (!k) return fail_at(r, run, "invalid UTF-8 in a string");
        run += k;
      }
      if (buf_put(r, buf, cap, &n, r->text + r->pos, run - r->pos)) return -1;
      r->pos = run;
      continue;
    }
    size_t esc = r->pos;
    if (r->pos + 1 >= r->len) return fail_at(r, start, "unterminated string");
    char e = r->text[r->pos + 1];
    char lit;
    switch (e) {
    case '"': lit = '"'; break;
    case '\\': lit = '\\'; break;
    case '/': lit = '/'; break;
    case 'b': lit = '\b'; break;
    case 'f': lit = '\f'; break;
    case 'n': lit = '\n'; break;
    case 'r': lit = '\r'; break;
    case 't': lit = '\t'; break;
    case 'u': lit = 0; break;
    default:
      if ((unsigned char)e >= 0x20 && (unsigned char)e < 0x7F)
        return fail_at(r, esc, "invalid escape '\\%c' in a string", e);
      return fail_at(r, esc, "invalid escape in a string");
    }
    if (e != 'u') {
      if (buf_put(r, buf, cap, &n, &lit, 1)) return -1;
      r->pos += 2;
      continue;
    }
    unsigned cp;
    if (hex4(r, r->pos + 2, &cp)) return fail_at(r, esc, "\\u must be followed by 4 hex digits");
    r->pos += 6;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
      return fail_at(r, esc, "unpaired low surrogate \\u%04X in a string", cp);
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      unsigned lo;
      if (r->len - r->pos < 6 || r->text[r->pos] != '\\' || r->text[r->pos + 1] != 'u' ||
          hex4(r, r->pos + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
        return fail_at(r, esc, "unpaired high surrogate \\u%04X in a string", cp);
      r->pos += 6;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    unsigned char u[4];
    if (buf_put(r, buf, cap, &n, u, utf8_encode(cp, u))) return -1;
  }
  if (buf_put(r, buf, cap, &n, "", 0)) return -1; /* ensures room for the NUL */
  (*buf)[n] = '\0';
  *out_len = n;
  return 0;
}

int rt_json_object_next(RtJsonReader *r, const char **key, size_t *klen, int *done) {
  if (next_element(r, '{', '}', done)) return -1;
  if (*done) return 0;
  skip_ws(r);
  if (!at(r, '"')) return fail_expected(r, "a string key");
  if (decode_string(r, &r->key, &r->key_cap, klen)) return -1;
  skip_ws(r);
  if (!at(r, ':')) return fail_expected(r, "':' after an object key");
  r->pos++;
  *key = r->key;
  return 0;
}

int rt_json_read_string(RtJsonReader *r, const char **s, size_t *len) {
  if (r->failed) return -1;
  skip_ws(r);
  if (decode_string(r, &r->str, &r->str_cap, len)) return -1;
  *s = r->str;
  return 0;
}

/* ---- numbers and literals ---- */

static int is_digit(const RtJsonReader *r) {
  return r->pos < r->len && r->text[r->pos] >= '0' && r->text[r->pos] <= '9';
}

int rt_json_read_number(RtJsonReader *r, RtJsonNumber *n) {
  if (r->failed) return -1;
  skip_ws(r);
  memset(n, 0, sizeof *n);
  size_t start = r->pos;
  int big = 0;
  if (at(r, '-')) {
    n->negative = 1;
    r->pos++;
  }
  if (!is_digit(r)) return fail_expected(r, "a number");
  if (at(r, '0')) {
    r->pos++;
    if (is_digit(r)) return fail_at(r, start, "number with a leading zero");
  } else {
    while (is_digit(r)) {
      unsigned d = (unsigned)(r->text[r->pos] - '0');
      if (!big) {
        n->magnitude = n->magnitude * 10 + d;
        if (n->magnitude > MAX_EXACT) big = 1;
      }
      r->pos++;
    }
  }
  n->integral = 1;
  if (at(r, '.')) {
    r->pos++;
    if (!is_digit(r)) return fail_expected(r, "a digit after '.'");
    while (is_digit(r)) r->pos++;
    n->integral = 0;
  }
  if (at(r, 'e') || at(r, 'E')) {
    r->pos++;
    if (at(r, '+') || at(r, '-')) r->pos++;
    if (!is_digit(r)) return fail_expected(r, "a digit in the exponent");
    while (is_digit(r)) r->pos++;
    n->integral = 0;
  }
  n->exact = n->integral && !big;
  if (!n->exact) n->magnitude = 0;
  n->text = r->text + start;
  n->len = r->pos - start;
  return 0;
}

static int read_literal(RtJsonReader *r) {
  static const char *const words[] = {"true", "false", "null"};
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
    size_t k = strlen(words[i]);
    if (r->len - r->pos >= k && memcmp(r->text + r->pos, words[i], k) == 0) {
      r->pos += k;
      return 0;
    }
  }
  return fail_expected(r, "a value");
}

int rt_json_skip_value(RtJsonReader *r) {
  RtJsonType t;
  int done;
  const char *s;
  size_t len;
  RtJsonNumber num;
  if (rt_json_peek(r, &t)) return -1;
  switch (t) {
  case RT_JSON_NULL:
  case RT_JSON_BOOL: return read_literal(r);
  case RT_JSON_NUMBER: return rt_json_read_number(r, &num);
  case RT_JSON_STRING: return rt_json_read_string(r, &s, &len);
  case RT_JSON_ARRAY:
    if (rt_json_array_begin(r)) return -1;
    for (;;) {
      if (rt_json_array_next(r, &done)) return -1;
      if (done) return 0;
      if (rt_json_skip_value(r)) return -1;
    }
  case RT_JSON_OBJECT:
    if (rt_json_object_begin(r)) return -1;
    for (;;) {
      if (rt_json_object_next(r, &s, &len, &done)) return -1;
      if (done) return 0;
      if (rt_json_skip_value(r)) return -1;
    }
  case RT_JSON_TYPE_COUNT: break;
  }
  return fail_at(r, r->pos, "internal: unknown value type");
}

int rt_json_finish(RtJsonReader *r) {
  if (r->failed) return -1;
  if (r->depth != 0) return fail_at(r, r->pos, "internal: reader misuse (unclosed container)");
  skip_ws(r);
  if (r->pos < r->len) return fail_expected(r, "end of input after the JSON value");
  return 0;
}
