/* tests/frontend/test_diag.c — diagnostics goldens: every
 * tests/frontend/diag/NAME.tfm must fail spec_parse and print exactly
 * NAME.err (the file named "NAME.tfm", as `tfmc check NAME.tfm` run from
 * that directory would). On a mismatch both texts are printed. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/spec.h"

#define DIAG_DIR TFMC_SOURCE_DIR "/tests/frontend/diag"

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .tfm files of the directory, sorted. */
static char **list_specs(int *n) {
  DIR *dir = opendir(DIAG_DIR);
  cr_assert_not_null(dir, "cannot open %s", DIAG_DIR);
  char **names = NULL;
  int count = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(dir))) {
    size_t len = strlen(de->d_name);
    if (len < 5 || strcmp(de->d_name + len - 4, ".tfm") != 0) continue;
    if (count == cap) {
      cap = cap ? cap * 2 : 64;
      names = realloc(names, (size_t)cap * sizeof *names);
      cr_assert_not_null(names);
    }
    names[count++] = strdup(de->d_name);
  }
  closedir(dir);
  if (count) qsort(names, (size_t)count, sizeof *names, cmp_names);
  *n = count;
  return names;
}

/* Checks one golden; returns true when it matches. */
static bool check_one(const char *name) {
  Arena *a = arena_create();
  char err[512];
  const char *path = arena_printf(a, "%s/%s", DIAG_DIR, name);
  SrcFile *src = src_file_read(a, path, err, sizeof err);
  if (!src) {
    cr_log_error("%s", err);
    arena_destroy(a);
    return false;
  }
  src->name = name;
  size_t base_len = strlen(name) - 4;
  const char *err_path = arena_printf(a, "%s/%.*s.err", DIAG_DIR, (int)base_len, name);
  SrcFile *expected = src_file_read(a, err_path, err, sizeof err);
  if (!expected) {
    cr_log_error("%s: no expected output: %s", name, err);
    arena_destroy(a);
    return false;
  }
  Diags d;
  diags_init(&d, a, NULL);
  Spec *spec = spec_parse(a, src, &d);
  const char *actual = d.captured ? d.captured : "";
  bool ok = true;
  if (spec || d.n_errors == 0) {
    cr_log_error("%s: expected errors, spec_parse succeeded", name);
    ok = false;
  }
  if (strcmp(actual, expected->text) != 0) {
    cr_log_error("%s: diagnostics differ\n--- expected (%.*s.err)\n%s--- actual\n%s---", name,
                 (int)base_len, name, expected->text, actual);
    ok = false;
  }
  arena_destroy(a);
  return ok;
}

Test(diag, goldens_match) {
  int n;
  char **names = list_specs(&n);
  cr_expect_geq(n, 30, "only %d diagnostics goldens", n);
  int failed = 0;
  for (int i = 0; i < n; i++) {
    if (!check_one(names[i])) failed++;
    free(names[i]);
  }
  free(names);
  cr_expect_eq(failed, 0, "%d of %d diagnostics goldens differ", failed, n);
}

/* Every .err belongs to a .tfm (a renamed spec would leave a stale golden
 * that nothing checks). */
Test(diag, no_orphan_err_files) {
  DIR *dir = opendir(DIAG_DIR);
  cr_assert_not_null(dir);
  struct dirent *de;
  while ((de = readdir(dir))) {
    size_t len = strlen(de->d_name);
    if (len < 5 || strcmp(de->d_name + len - 4, ".err") != 0) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%.*s.tfm", DIAG_DIR, (int)(len - 4), de->d_name);
    FILE *f = fopen(path, "rb");
    cr_expect_not_null(f, "%s has no .tfm", de->d_name);
    if (f) fclose(f);
  }
  closedir(dir);
}
