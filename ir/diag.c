/* ir/diag.c — user diagnostics: "file:line:col: error: msg", the source
 * line, a caret under the column.
 *
 * Diagnostics are collected (the count is kept in Diags.n_errors) so a phase
 * can report several and stop at its end. Output goes to Diags.out, or, when
 * out is NULL, into an in-memory buffer (used by the tests). */
#include "ir.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void diags_init(Diags *d, Arena *a, FILE *out) {
  memset(d, 0, sizeof *d);
  d->arena = a;
  d->out = out;
}

void diags_add_source(Diags *d, const SrcFile *f) {
  for (int i = 0; i < d->n_files; i++)
    if (d->files[i] == f) return;
  if (d->n_files < (int)(sizeof d->files / sizeof d->files[0]))
    d->files[d->n_files++] = f;
}

static void emit(Diags *d, const char *s) {
  if (d->out) {
    fputs(s, d->out);
    return;
  }
  size_t n = strlen(s);
  if (d->captured_len + n + 1 > d->captured_cap) {
    size_t cap = d->captured_cap ? d->captured_cap * 2 : 1024;
    while (cap < d->captured_len + n + 1) cap *= 2;
    char *p = arena_alloc(d->arena, cap);
    if (d->captured) memcpy(p, d->captured, d->captured_len);
    d->captured = p;
    d->captured_cap = cap;
  }
  memcpy(d->captured + d->captured_len, s, n + 1);
  d->captured_len += n;
}

static const SrcFile *find_src(Diags *d, const char *name) {
  if (!name) return NULL;
  for (int i = 0; i < d->n_files; i++)
    if (d->files[i]->name == name || strcmp(d->files[i]->name, name) == 0)
      return d->files[i];
  return NULL;
}

static void vreport(Diags *d, IrLoc loc, const char *kind, const char *fmt,
                    va_list ap) {
  char msg[2048];
  vsnprintf(msg, sizeof msg, fmt, ap);
  char head[2400];
  if (loc.file && loc.line > 0)
    snprintf(head, sizeof head, "%s:%d:%d: %s: %s\n", loc.file, loc.line,
             loc.col, kind, msg);
  else if (loc.file)
    snprintf(head, sizeof head, "%s: %s: %s\n", loc.file, kind, msg);
  else
    snprintf(head, sizeof head, "%s: %s\n", kind, msg);
  emit(d, head);
  const SrcFile *f = find_src(d, loc.file);
  if (!f || loc.line <= 0) return;
  /* find the line */
  const char *p = f->text, *end = f->text + f->len;
  for (int l = 1; l < loc.line && p < end; p++)
    if (*p == '\n') l++;
  if (p > end) return;
  const char *e = p;
  while (e < end && *e != '\n') e++;
  size_t n = (size_t)(e - p);
  if (n > 1000) n = 1000;
  char line[1100], caret[1100];
  /* tabs are kept so the caret lines up; other control bytes shown as ' ' */
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)p[i];
    line[k++] = (c < 32 && c != '\t') ? ' ' : (char)c;
  }
  line[k] = 0;
  size_t col = loc.col > 0 ? (size_t)loc.col - 1 : 0;
  if (col > n) col = n;
  size_t j = 0;
  for (size_t i = 0; i < col && j < sizeof caret - 2; i++)
    caret[j++] = p[i] == '\t' ? '\t' : ' ';
  caret[j++] = '^';
  caret[j] = 0;
  char buf[2300];
  snprintf(buf, sizeof buf, "  %s\n  %s\n", line, caret);
  emit(d, buf);
}

/* Past this many errors the rest are counted, not printed: a hostile file
 * with thousands of mistakes must not take minutes to report. */
#define DIAG_MAX_SHOWN 100

void diag_error(Diags *d, IrLoc loc, const char *fmt, ...) {
  if (d->n_errors >= DIAG_MAX_SHOWN) {
    if (d->n_errors++ == DIAG_MAX_SHOWN)
      emit(d, "error: too many errors; only the first 100 are shown\n");
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vreport(d, loc, "error", fmt, ap);
  va_end(ap);
  d->n_errors++;
}

void diag_warning(Diags *d, IrLoc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(d, loc, "warning", fmt, ap);
  va_end(ap);
}

void diag_note(Diags *d, IrLoc loc, const char *fmt, ...) {
  if (d->n_errors > DIAG_MAX_SHOWN) return;
  va_list ap;
  va_start(ap, fmt);
  vreport(d, loc, "note", fmt, ap);
  va_end(ap);
}

SrcFile *src_file_from_string(Arena *a, const char *name, const char *text) {
  SrcFile *f = arena_alloc(a, sizeof *f);
  f->name = arena_strdup(a, name);
  f->len = strlen(text);
  f->text = arena_strndup(a, text, f->len);
  return f;
}

SrcFile *src_file_read(Arena *a, const char *path, char *err, size_t errlen) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  if (!buf) {
    fclose(fp);
    snprintf(err, errlen, "%s: out of memory", path);
    return NULL;
  }
  for (;;) {
    if (len + 4096 > cap) {
      if (cap > ((size_t)64 << 20)) {
        free(buf);
        fclose(fp);
        snprintf(err, errlen, "%s: file too large (over 64 MiB)", path);
        return NULL;
      }
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        fclose(fp);
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
      }
      buf = nb;
      cap *= 2;
    }
    size_t r = fread(buf + len, 1, cap - len - 1, fp);
    len += r;
    if (r == 0) break;
  }
  int bad = ferror(fp);
  fclose(fp);
  if (bad) {
    free(buf);
    snprintf(err, errlen, "%s: read error", path);
    return NULL;
  }
  if (memchr(buf, 0, len)) {
    free(buf);
    snprintf(err, errlen, "%s: contains a NUL byte; not a text file", path);
    return NULL;
  }
  SrcFile *f = arena_alloc(a, sizeof *f);
  f->name = arena_strdup(a, path);
  f->text = arena_strndup(a, buf, len);
  f->len = len;
  free(buf);
  return f;
}
