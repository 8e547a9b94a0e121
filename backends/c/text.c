/* backends/c/text.c — putting arbitrary bytes into generated C safely.
 *
 * Names reach the generated files from the spec (model name, weight names,
 * input and output names, the spec's file name in kernel comments) and may
 * hold anything: quotes, comment terminators, backslashes, newlines,
 * non-ASCII bytes, C keywords. They only ever appear inside comments or
 * string literals, never as identifiers, and these printers make sure they
 * stay there.
 *
 * Invariants: the output is printable ASCII (plus nothing else: no
 * newlines); string literals read back to exactly the input bytes under
 * C99 (trigraphs included) and C11; numbers read back bit-identical. */
#include "backends/c/c_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int c_fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return 1;
}

static bool printable(unsigned char c) { return c >= 0x20 && c < 0x7f; }

void c_put_comment(FILE *out, const char *s) {
  if (!s) return;
  unsigned char last = 0; /* the last character written */
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (!printable(*c) || *c == '\\') {
      fprintf(out, "\\x%02x", *c);
      last = '0';
      continue;
    }
    /* split what would end or nest a comment, or form a trigraph */
    if ((last == '*' && *c == '/') || (last == '/' && *c == '*') || (last == '?' && *c == '?'))
      fputc(' ', out);
    fputc(*c, out);
    last = *c;
  }
}

void c_put_string(FILE *out, const char *s) {
  if (!s) {
    fputs("NULL", out);
    return;
  }
  fputc('"', out);
  bool after_q = false;
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') {
      fputc('\\', out);
      fputc(*c, out);
    } else if (*c == '?') {
      fputs(after_q ? "\\?" : "?", out);
    } else if (printable(*c)) {
      fputc(*c, out);
    } else {
      fprintf(out, "\\%03o", *c);
    }
    after_q = *c == '?';
  }
  fputc('"', out);
}

void c_put_i64(FILE *out, int64_t v) {
  if (v == INT64_MIN) {
    fputs("(-INT64_C(9223372036854775807) - 1)", out);
  } else if (v >= -2147483647 && v <= 2147483647) {
    fprintf(out, v < 0 ? "(%lld)" : "%lld", (long long)v);
  } else {
    fprintf(out, v < 0 ? "(-INT64_C(%lld))" : "INT64_C(%lld)", (long long)(v < 0 ? -v : v));
  }
}

void c_put_float(FILE *out, double v, bool is_f32) {
  if (isnan(v)) {
    fputs("NAN", out);
    return;
  }
  if (isinf(v)) {
    fputs(v < 0 ? "(-INFINITY)" : "INFINITY", out);
    return;
  }
  if (is_f32) v = (float)v;
  char buf[64];
  for (int prec = is_f32 ? 6 : 15; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    bool same = is_f32 ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v;
    /* -0 compares equal to 0: the sign is in the text either way */
    if (same) break;
  }
  bool has_point = strpbrk(buf, ".e") != NULL;
  bool neg = buf[0] == '-';
  fprintf(out, "%s%s%s%s%s", neg ? "(" : "", buf, has_point ? "" : ".0", is_f32 ? "f" : "",
          neg ? ")" : "");
}

/* Names the project uses itself (files, directories, make and CMake
 * targets), compared without regard to case. */
static const char *const reserved_exe[] = {
    "all",          "clean",         "help",           "install",
    "test",         "package",       "package_source", "edit_cache",
    "rebuild_cache", "list_install_components", "depend", "preinstall",
    "all_build",    "zero_check",    "run_tests",      "runtime",
    "makefile",     "gnumakefile",   "cmakelists",     "cmakefiles",
    "cmakecache",   "build",         "tfmc_model_lib", "tfmc_model_gen",
    "tfmc_model_runtime", "libmodel", "model_h",       "lib",
};

void c_exe_name(const char *model_name, char *out, size_t outlen) {
  enum { MAX_LEN = 64 };
  char buf[MAX_LEN + 8];
  size_t n = 0;
  for (const unsigned char *c = (const unsigned char *)(model_name ? model_name : "");
       *c && n < MAX_LEN; c++)
    buf[n++] = (isalnum(*c) && *c < 0x80) || *c == '_' ? (char)*c : '_';
  buf[n] = '\0';
  if (n == 0) snprintf(buf, sizeof buf, "model");
  for (size_t i = 0; i < sizeof reserved_exe / sizeof *reserved_exe; i++) {
    bool same = strlen(reserved_exe[i]) == strlen(buf);
    for (size_t k = 0; same && buf[k]; k++)
      same = tolower((unsigned char)buf[k]) == reserved_exe[i][k];
    if (same) {
      strcat(buf, "_model");
      break;
    }
  }
  snprintf(out, outlen, "%s", buf);
}
