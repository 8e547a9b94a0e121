/* tests/c/test_text.c — the C backend's text printers on hostile input:
 * comments that cannot be closed or broken, string literals that decode
 * back to exactly the input bytes (with a decoder that follows the C
 * standard's escape rules, trigraphs included), numbers that read back
 * bit-identical, executable names, kernel names. The compiled round trip
 * through a real compiler is in test_names.c. */
#include "backends/c/c_internal.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const hostile[] = {
    "plain",
    "quote\" and \\backslash\\",
    "*/ int tfmc_injected; /*",
    "/* nested */ */ /*/",
    "line\nbreak\r\ttab\v\f",
    "\"; int tfmc_injected2; static const char *x = \"",
    "trigraphs ?\?= ?\?/ ?\?' ?\?( ?\?) ?\?! ?\?< ?\?> ?\?- ?\?\?= ?\?\?\?/",
    "non-ascii caf\xc3\xa9 \xe2\x80\xae rtl \xff\xfe",
    "octal\0011234567 \0018 \x7f\x80",
    "int",
    "return",
    "%s %n %%",
    "\\",
    "?",
    "?\?",
    "*",
    "/",
    "",
};

static char *capture_string(void (*put)(FILE *, const char *), const char *s) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cr_assert(f);
  put(f, s);
  fclose(f);
  return buf;
}

/* Decodes a C string literal as translation phases 1 (trigraphs) and 5
 * (escapes) do; fails the test on anything a C compiler would read
 * differently from what was meant. */
static char *decode_literal(const char *lit) {
  size_t n = strlen(lit);
  cr_assert(n >= 2 && lit[0] == '"' && lit[n - 1] == '"', "not a literal: %s", lit);
  for (size_t i = 0; i + 1 < n; i++)
    cr_assert(!(lit[i] == '?' && lit[i + 1] == '?'), "trigraph-prone '?""?' in %s", lit);
  char *out = malloc(n + 1);
  size_t o = 0;
  for (size_t i = 1; i < n - 1; i++) {
    unsigned char c = (unsigned char)lit[i];
    cr_assert(c >= 0x20 && c < 0x7f, "raw byte %02x in a literal", c);
    cr_assert(c != '"', "unescaped quote in %s", lit);
    if (c != '\\') {
      out[o++] = (char)c;
      continue;
    }
    char e = lit[++i];
    if (e == '"' || e == '\\' || e == '?' || e == '\'') {
      out[o++] = e;
    } else if (e >= '0' && e <= '7') {
      int v = 0, k = 0;
      while (k < 3 && lit[i] >= '0' && lit[i] <= '7') v = v * 8 + (lit[i++] - '0'), k++;
      i--;
      out[o++] = (char)v;
    } else {
      cr_assert_fail("unexpected escape \\%c in %s", e, lit);
    }
  }
  out[o] = '\0';
  return out;
}

Test(text, string_literals_round_trip) {
  for (size_t i = 0; i < sizeof hostile / sizeof *hostile; i++) {
    char *lit = capture_string(c_put_string, hostile[i]);
    char *back = decode_literal(lit);
    cr_assert_str_eq(back, hostile[i], "literal %s", lit);
    free(back);
    free(lit);
  }
  /* every byte value, each followed by every digit: no escape may absorb it */
  char s[3] = {0};
  for (int b = 1; b < 256; b++)
    for (char d = '0'; d <= '9'; d++) {
      s[0] = (char)b;
      s[1] = d;
      char *lit = capture_string(c_put_string, s);
      char *back = decode_literal(lit);
      cr_assert_str_eq(back, s, "byte %d then '%c': %s", b, d, lit);
      free(back);
      free(lit);
    }
}

Test(text, string_literal_exact_spelling) {
  char *lit = capture_string(c_put_string, "a\"b\\c\n\x01" "7?\?=");
  cr_assert_str_eq(lit, "\"a\\\"b\\\\c\\012\\0017?\\?=\"");
  free(lit);
  lit = capture_string(c_put_string, NULL);
  cr_assert_str_eq(lit, "NULL");
  free(lit);
}

static void check_comment_text(const char *text, const char *from) {
  for (const char *c = text; *c; c++) {
    cr_assert((unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f,
              "byte %02x in comment text for %s", (unsigned char)*c, from);
    if (c[1]) {
      cr_assert(!(c[0] == '*' && c[1] == '/'), "comment closed: %s", text);
      cr_assert(!(c[0] == '/' && c[1] == '*'), "comment nested: %s", text);
      cr_assert(!(c[0] == '?' && c[1] == '?'), "trigraph-prone: %s", text);
    }
    cr_assert(*c != '\\' || c[1] == 'x', "stray backslash in %s", text);
  }
}

static void put_comment_slashes(FILE *f, const char *s) { c_put_comment(f, s); }

Test(text, comments_cannot_be_closed_or_broken) {
  for (size_t i = 0; i < sizeof hostile / sizeof *hostile; i++) {
    char *t = capture_string(put_comment_slashes, hostile[i]);
    check_comment_text(t, hostile[i]);
    free(t);
  }
  char *t = capture_string(put_comment_slashes, "a*/b/*c\nd\\e?\?f//g");
  cr_assert_str_eq(t, "a* /b/ *c\\x0ad\\x5ce? ?f//g");
  free(t);
}

Test(text, comments_keep_harmless_text) {
  /* "//" inside a block comment is plain text: left as is */
  char *t = capture_string(put_comment_slashes, "x//y");
  cr_assert_str_eq(t, "x//y");
  free(t);
}

static double parse_c_float(const char *text, bool f32) {
  char buf[128];
  size_t n = strlen(text);
  cr_assert(n < sizeof buf);
  strcpy(buf, text);
  if (!strcmp(buf, "NAN")) return NAN;
  if (!strcmp(buf, "INFINITY")) return INFINITY;
  if (!strcmp(buf, "(-INFINITY)")) return -INFINITY;
  char *s = buf;
  if (s[0] == '(') {
    cr_assert(s[n - 1] == ')' && s[1] == '-', "bad parentheses: %s", text);
    s[n - 1] = '\0';
    s++;
    n -= 2;
  }
  cr_assert(strpbrk(s, ".e"), "%s reads as an integer", text);
  if (f32) {
    cr_assert(s[n - 1] == 'f', "no f suffix: %s", text);
    s[n - 1] = '\0';
    return strtof(s, NULL);
  }
  return strtod(s, NULL);
}

static char *float_text(double v, bool f32) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  c_put_float(f, v, f32);
  fclose(f);
  return buf;
}

Test(text, floats_read_back_bit_identical) {
  uint64_t rng = 12345;
  for (int i = 0; i < 20000; i++) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    uint32_t bits32 = (uint32_t)(rng >> 32);
    float f;
    memcpy(&f, &bits32, 4);
    double d;
    uint64_t bits64 = rng ^ (rng << 17);
    memcpy(&d, &bits64, 8);
    char *t = float_text(f, true);
    float back = (float)parse_c_float(t, true);
    if (isnan(f)) cr_assert(isnan(back));
    else cr_assert(memcmp(&back, &f, 4) == 0, "%a printed as %s", (double)f, t);
    free(t);
    t = float_text(d, false);
    double dback = parse_c_float(t, false);
    if (isnan(d)) cr_assert(isnan(dback));
    else cr_assert(memcmp(&dback, &d, 8) == 0, "%a printed as %s", d, t);
    free(t);
  }
  char *t = float_text(1.0, true);
  cr_assert_str_eq(t, "1.0f");
  free(t);
  t = float_text(-0.0, true);
  cr_assert_str_eq(t, "(-0.0f)");
  free(t);
  t = float_text(1e-5, true);
  cr_assert_str_eq(t, "1e-05f");
  free(t);
  t = float_text(-INFINITY, false);
  cr_assert_str_eq(t, "(-INFINITY)");
  free(t);
  t = float_text(0.1, false);
  cr_assert_str_eq(t, "0.1");
  free(t);
}

Test(text, integers) {
  static const struct {
    int64_t v;
    const char *text;
  } cases[] = {
      {0, "0"},
      {64, "64"},
      {-3, "(-3)"},
      {2147483647, "2147483647"},
      {2147483648LL, "INT64_C(2147483648)"},
      {-5000000000LL, "(-INT64_C(5000000000))"},
      {INT64_MAX, "INT64_C(9223372036854775807)"},
      {INT64_MIN, "(-INT64_C(9223372036854775807) - 1)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    c_put_i64(f, cases[i].v);
    fclose(f);
    cr_assert_str_eq(buf, cases[i].text);
    free(buf);
  }
}

Test(text, executable_names) {
  static const struct {
    const char *model, *exe;
  } cases[] = {
      {"sort", "sort"},
      {"my model!", "my_model_"},
      {"", "model"},
      {NULL, "model"},
      {"caf\xc3\xa9", "caf__"},
      {"all", "all_model"},
      {"Clean", "Clean_model"},
      {"Makefile", "Makefile_model"},
      {"runtime", "runtime_model"},
      {"int", "int"},
      {"../../etc/passwd", "______etc_passwd"},
      {"a\"b;rm -rf /", "a_b_rm__rf__"},
  };
  char out[80];
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    c_exe_name(cases[i].model, out, sizeof out);
    cr_assert_str_eq(out, cases[i].exe, "for %s", cases[i].model ? cases[i].model : "NULL");
  }
  char long_name[200];
  memset(long_name, 'x', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  c_exe_name(long_name, out, sizeof out);
  cr_assert_eq(strlen(out), 64);
}

Test(text, kernel_names) {
  Arena *a = arena_create();
  LoopProgram *p = loop_program_create(a, "m");
  const char *names[] = {"k1_add", "k1_add", "expf", "k2", "k3_a.b", "k4_layer_norm", "main",
                         "kx_add"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    loop_kernel_add(p, names[i], "", -1);
  const char *want[] = {"k1_add",        "tfmc_kernel_1", "tfmc_kernel_2", "k2",
                        "tfmc_kernel_4", "k4_layer_norm", "tfmc_kernel_6", "tfmc_kernel_7"};
  for (int i = 0; i < p->n_kernels; i++) {
    char buf[96];
    cr_assert_str_eq(c_kernel_name(p, i, buf, sizeof buf), want[i]);
  }
  arena_destroy(a);
}
