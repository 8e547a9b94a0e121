/* tests/common/profile_report.h — reads back the profile report
 * (runtime/rt_profile.h) that `tfmc run --profile`, built executables and
 * emitted-C executables print, checks what must hold of any report, and
 * checks a report against the kernels of a loop-IR listing
 * (`tfmc ir SPEC --level loop`).
 *
 *     ProfReport r;
 *     prof_parse(stderr_text, &r);          // fails the test if malformed
 *     prof_check(&r);                       // shares, order, counts
 *     prof_check_listing(&r, listing_text); // right kernels, op kinds, comments
 *
 * Header-only (static inline functions) for the test executables that include it;
 * the runtime, tools and C backend tests share it so the three paths are
 * held to one format. */
#ifndef TFMC_TESTS_PROFILE_REPORT_H
#define TFMC_TESTS_PROFILE_REPORT_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROF_MAX_KINDS 64
#define PROF_MAX_SLOW 8

typedef struct ProfKind {
  char op[64];
  int kernels;
  double ms, share; /* ms per run, percent */
} ProfKind;

typedef struct ProfKernel {
  char name[96];
  double ms;
  char comment[512]; /* as printed (non-printable bytes as \xHH) */
} ProfKernel;

typedef struct ProfReport {
  int n_kernels, runs;
  double ms_per_run;
  int n_kinds;
  ProfKind kinds[PROF_MAX_KINDS];
  int n_slow;
  ProfKernel slow[PROF_MAX_SLOW];
} ProfReport;

/* The line after *p (NULL at the end of text), copied into line. */
static inline const char *prof_next_line(const char *p, char *line, size_t cap) {
  if (!p || !*p) return NULL;
  const char *nl = strchr(p, '\n');
  size_t n = nl ? (size_t)(nl - p) : strlen(p);
  cr_assert_lt(n, cap, "report line too long: %.80s", p);
  memcpy(line, p, n);
  line[n] = '\0';
  return nl ? nl + 1 : p + n;
}

/* Parses the (first) report in text; any deviation from the format fails
 * the test. */
static inline void prof_parse(const char *text, ProfReport *r) {
  memset(r, 0, sizeof *r);
  const char *p = strstr(text, "profile: ");
  cr_assert(p, "no profile report in:\n%s", text);
  char line[1024];
  p = prof_next_line(p, line, sizeof line);
  cr_assert_eq(sscanf(line, "profile: %d kernels, %lf ms per run (mean of %d runs)", &r->n_kernels,
                      &r->ms_per_run, &r->runs),
               3, "bad header: %s", line);
  p = prof_next_line(p, line, sizeof line);
  cr_assert(p && strcmp(line, "  op kind         kernels   ms per run   share") == 0,
            "bad table header: '%s'", line);
  for (;;) {
    p = prof_next_line(p, line, sizeof line);
    cr_assert(p, "report ends inside the op kind table");
    if (strcmp(line, "  slowest kernels:") == 0) break;
    cr_assert_lt(r->n_kinds, PROF_MAX_KINDS);
    ProfKind *k = &r->kinds[r->n_kinds++];
    char pct;
    cr_assert_eq(sscanf(line, "  %63s %d %lf %lf%c", k->op, &k->kernels, &k->ms, &k->share, &pct), 5,
                 "bad op kind line: '%s'", line);
    cr_assert_eq(pct, '%', "bad op kind line: '%s'", line);
  }
  while (r->n_slow < PROF_MAX_SLOW) {
    const char *q = prof_next_line(p, line, sizeof line);
    ProfKernel *k = &r->slow[r->n_slow];
    int used = 0;
    if (!q || sscanf(line, "  %95s %lf ms  %n", k->name, &k->ms, &used) != 2 || used == 0) break;
    snprintf(k->comment, sizeof k->comment, "%s", line + used);
    r->n_slow++;
    p = q;
  }
}

/* What holds of every report: the op kinds' kernels add up to the kernel
 * count and their times to the total, their shares to 100% (each figure
 * rounded as printed: 0.001 ms, 0.1%); kinds and kernels come slowest
 * first, none twice; min(8, kernels) kernels are listed. */
static inline void prof_check(const ProfReport *r) {
  cr_assert_gt(r->runs, 0);
  cr_assert_geq(r->ms_per_run, 0);
  int kernels = 0;
  double ms = 0, share = 0;
  for (int i = 0; i < r->n_kinds; i++) {
    const ProfKind *k = &r->kinds[i];
    cr_assert_gt(k->kernels, 0, "kind %s with no kernels", k->op);
    kernels += k->kernels;
    ms += k->ms;
    share += k->share;
    if (i) cr_assert_geq(r->kinds[i - 1].ms, k->ms, "kinds not slowest first: %s", k->op);
    for (int j = 0; j < i; j++) cr_assert_str_neq(r->kinds[j].op, k->op, "kind listed twice");
  }
  cr_assert_eq(kernels, r->n_kernels, "kinds hold %d kernels, header says %d", kernels,
               r->n_kernels);
  cr_assert_leq(fabs(ms - r->ms_per_run), 0.0005 * (r->n_kinds + 1) + 1e-9,
                "kinds add up to %.4f ms, header says %.3f", ms, r->ms_per_run);
  /* shares are of the unrounded total: 100 up to rounding, or all 0 when
   * nothing took measurable time */
  cr_assert(fabs(share - 100) <= 0.05 * r->n_kinds + 1e-9 || (share == 0 && r->ms_per_run == 0),
            "shares add up to %.2f%%", share);
  cr_assert_eq(r->n_slow, r->n_kernels < PROF_MAX_SLOW ? r->n_kernels : PROF_MAX_SLOW);
  for (int i = 0; i < r->n_slow; i++) {
    if (i) cr_assert_geq(r->slow[i - 1].ms, r->slow[i].ms, "slowest kernels out of order");
    cr_assert_leq(r->slow[i].ms, r->ms_per_run + 0.001);
    for (int j = 0; j < i; j++)
      cr_assert_str_neq(r->slow[j].name, r->slow[i].name, "kernel listed twice");
  }
}

/* Checks r against a loop-IR listing: as many kernels, the same op kinds
 * with the same kernel counts (a kernel's op kind is the first word of its
 * comment, the IR op of its node), and every slowest kernel is one of the
 * listing's, with its comment. */
static inline void prof_check_listing(const ProfReport *r, const char *listing) {
  enum { MAX_OPS = 256 };
  char ops[MAX_OPS][64];
  int count[MAX_OPS] = {0}, n_ops = 0, n = 0;
  bool slow_found[PROF_MAX_SLOW] = {false};
  char line[2048];
  for (const char *p = listing; (p = prof_next_line(p, line, sizeof line)) != NULL;) {
    if (strncmp(line, "kernel ", 7) != 0) continue;
    char name[96], op[64];
    cr_assert_eq(sscanf(line, "kernel %95s \"%63[^ \"]", name, op), 2, "listing line: %s", line);
    n++;
    int k = 0;
    while (k < n_ops && strcmp(ops[k], op) != 0) k++;
    if (k == n_ops) {
      cr_assert_lt(n_ops, MAX_OPS);
      snprintf(ops[n_ops++], sizeof ops[0], "%s", op);
    }
    count[k]++;
    for (int i = 0; i < r->n_slow; i++)
      if (strcmp(r->slow[i].name, name) == 0) {
        char want[700];
        snprintf(want, sizeof want, "kernel %s \"%s\" ", name, r->slow[i].comment);
        cr_assert(strncmp(line, want, strlen(want)) == 0, "listing has '%s', report says '%s'",
                  line, want);
        slow_found[i] = true;
      }
  }
  cr_assert_gt(n, 0, "no kernels in the listing");
  cr_assert_eq(r->n_kernels, n, "report has %d kernels, the loop IR %d", r->n_kernels, n);
  cr_assert_eq(r->n_kinds, n_ops, "report has %d op kinds, the loop IR %d", r->n_kinds, n_ops);
  for (int k = 0; k < n_ops; k++) {
    const ProfKind *found = NULL;
    for (int i = 0; i < r->n_kinds; i++)
      if (strcmp(r->kinds[i].op, ops[k]) == 0) found = &r->kinds[i];
    cr_assert(found, "op kind %s missing from the report", ops[k]);
    cr_assert_eq(found->kernels, count[k], "%s: %d kernels in the report, %d in the loop IR",
                 ops[k], found->kernels, count[k]);
  }
  for (int i = 0; i < r->n_slow; i++)
    cr_assert(slow_found[i], "slow kernel %s is not in the loop IR", r->slow[i].name);
}

/* Finds `op` in r's kinds (NULL if absent). */
static inline const ProfKind *prof_kind(const ProfReport *r, const char *op) {
  for (int i = 0; i < r->n_kinds; i++)
    if (strcmp(r->kinds[i].op, op) == 0) return &r->kinds[i];
  return NULL;
}

#endif
