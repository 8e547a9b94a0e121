/* tests/runtime/test_profile.c — rt_kernel_run and the profile report
 * (runtime/rt_profile.h), the one profiler of the JIT, built executables
 * and emitted C:
 *   - rt_kernel_run runs a kernel over exactly [0, n) once (serially or on
 *     the pool, with the args as its context), skips n <= 0, and with a
 *     profile adds the kernel's wall time and a call to its entry only;
 *   - the report of a synthetic profile: the exact text of a small one (the
 *     format `tfmc run --profile` has always printed), op kinds grouped by
 *     op string and ordered slowest first with shares that add up to 100%,
 *     the 8 slowest kernels in order with ties in kernel order, hostile
 *     comments kept on one line, edge cases (no kernels, zero times,
 *     runs < 1, a kernel table shorter than the profile). */
#include "runtime/rt_profile.h"
#include "tests/common/profile_report.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- kernels that record what they were given ---- */

#define N_MAX 4096

static _Atomic int hits[N_MAX];
static _Atomic int calls;
static _Atomic int bad_ctx;
static const RtRunArgs *expect_args;

static void reset_hits(void) {
  for (int i = 0; i < N_MAX; i++) atomic_store(&hits[i], 0);
  atomic_store(&calls, 0);
  atomic_store(&bad_ctx, 0);
}

static void record(void *ctx, int64_t lo, int64_t hi) {
  if (ctx != (const void *)expect_args) atomic_fetch_add(&bad_ctx, 1);
  atomic_fetch_add(&calls, 1);
  for (int64_t i = lo; i < hi; i++)
    if (i >= 0 && i < N_MAX) atomic_fetch_add(&hits[i], 1);
}

/* record, then sleep 3 ms: a kernel whose time is known from below */
static void record_slowly(void *ctx, int64_t lo, int64_t hi) {
  record(ctx, lo, hi);
  struct timespec ts = {0, 3000000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static void expect_covered_once(int64_t n) {
  for (int64_t i = 0; i < N_MAX; i++)
    cr_assert_eq(atomic_load(&hits[i]), i < n ? 1 : 0, "index %lld ran %d times (n = %lld)",
                 (long long)i, atomic_load(&hits[i]), (long long)n);
  cr_assert_eq(atomic_load(&bad_ctx), 0, "a kernel got another context than the args");
}

Test(profile, kernel_run_covers_the_extent_once) {
  RtPool *pools[2] = {NULL, rt_pool_create(3)};
  for (int pi = 0; pi < 2; pi++) {
    RtRunArgs args = {.pool = pools[pi]};
    expect_args = &args;
    /* empty and negative extents run nothing */
    for (int parallel = 0; parallel < 2; parallel++) {
      reset_hits();
      rt_kernel_run(&args, 0, record, &args, 0, 1, parallel);
      rt_kernel_run(&args, 0, record, &args, -5, 1, parallel);
      cr_assert_eq(atomic_load(&calls), 0);
    }
    /* serial: one call over [0, n) on this thread */
    reset_hits();
    rt_kernel_run(&args, 0, record, &args, 100, 1, 0);
    cr_assert_eq(atomic_load(&calls), 1);
    expect_covered_once(100);
    /* parallel: split by the pool, every index once */
    int64_t sizes[] = {1, 7, 8, 1000, N_MAX};
    for (int s = 0; s < 5; s++) {
      reset_hits();
      rt_kernel_run(&args, 3, record, &args, sizes[s], 7, 1);
      expect_covered_once(sizes[s]);
    }
    if (pools[pi] && rt_pool_size(pools[pi]) > 1) {
      reset_hits();
      rt_kernel_run(&args, 0, record, &args, N_MAX, 7, 1);
      cr_assert_gt(atomic_load(&calls), 1, "a parallel kernel was not split over the pool");
    }
  }
  rt_pool_destroy(pools[1]);
}

Test(profile, kernel_run_times_and_counts_into_the_profile) {
  RtPool *pool = rt_pool_create(2);
  RtProfile *prof = rt_profile_create(3);
  cr_assert(prof);
  cr_assert_eq(prof->n_kernels, 3);
  for (int k = 0; k < 3; k++) cr_assert(prof->ms[k] == 0 && prof->calls[k] == 0);
  RtRunArgs args = {.pool = pool, .profile = prof};
  expect_args = &args;
  reset_hits();
  rt_kernel_run(&args, 0, record, &args, 50, 4, 1);
  rt_kernel_run(&args, 0, record, &args, 50, 4, 0);
  rt_kernel_run(&args, 1, record_slowly, &args, 10, 1, 0);
  rt_kernel_run(&args, 2, record, &args, 0, 1, 1); /* runs nothing, still one call of kernel 2 */
  /* outside the profile: run, but recorded nowhere */
  rt_kernel_run(&args, 3, record, &args, 10, 1, 0);
  rt_kernel_run(&args, -1, record, &args, 10, 1, 0);
  for (int i = 0; i < N_MAX; i++) {
    int want = i < 10 ? 5 : i < 50 ? 2 : 0;
    cr_assert_eq(atomic_load(&hits[i]), want, "index %d ran %d times, want %d", i,
                 atomic_load(&hits[i]), want);
  }
  cr_assert_eq(prof->calls[0], 2);
  cr_assert_eq(prof->calls[1], 1);
  cr_assert_eq(prof->calls[2], 1);
  cr_assert_geq(prof->ms[1], 3.0, "a 3 ms kernel measured %.3f ms", prof->ms[1]);
  cr_assert_lt(prof->ms[1], 3000.0, "a 3 ms kernel measured %.3f ms", prof->ms[1]);
  cr_assert_geq(prof->ms[0], 0.0);
  cr_assert_geq(prof->ms[2], 0.0);
  cr_assert_lt(prof->ms[0], prof->ms[1]);
  /* without a profile nothing is recorded */
  args.profile = NULL;
  rt_kernel_run(&args, 1, record_slowly, &args, 1, 1, 0);
  cr_assert_eq(prof->calls[1], 1);
  rt_profile_destroy(prof);
  rt_pool_destroy(pool);
}

Test(profile, create_and_destroy) {
  cr_assert_null(rt_profile_create(-1));
  RtProfile *p = rt_profile_create(0);
  cr_assert(p);
  cr_assert_eq(p->n_kernels, 0);
  rt_profile_destroy(p);
  rt_profile_destroy(NULL);
}

/* ---- the report ---- */

/* The report of kernels / profile as a malloc'd string. */
static char *report(const RtKernelInfo *k, int n, const RtProfile *p, int runs) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cr_assert(f);
  cr_assert_eq(rt_profile_report(k, n, p, runs, f), 0);
  cr_assert_eq(fclose(f), 0);
  return buf;
}

static RtProfile *synthetic(int n, const double *ms_total) {
  RtProfile *p = rt_profile_create(n);
  cr_assert(p);
  for (int i = 0; i < n; i++) p->ms[i] = ms_total[i];
  return p;
}

Test(profile, report_text_is_the_known_format) {
  static const RtKernelInfo k[3] = {
      {"k1_linear", "linear", "linear %1 @\"m.tfm\":3:1"},
      {"k2_softmax", "softmax", "softmax %2 @\"m.tfm\":4:1"},
      {"k3_linear", "linear", NULL},
  };
  RtProfile *p = synthetic(3, (const double[]){2.0, 6.0, 4.0});
  char *got = report(k, 3, p, 2);
  const char *want = "profile: 3 kernels, 6.000 ms per run (mean of 2 runs)\n"
                     "  op kind         kernels   ms per run   share\n"
                     "  linear                2        3.000   50.0%\n"
                     "  softmax               1        3.000   50.0%\n"
                     "  slowest kernels:\n"
                     "  k2_softmax                    3.000 ms  softmax %2 @\"m.tfm\":4:1\n"
                     "  k3_linear                     2.000 ms  \n"
                     "  k1_linear                     1.000 ms  linear %1 @\"m.tfm\":3:1\n";
  cr_assert_str_eq(got, want);
  ProfReport r;
  prof_parse(got, &r);
  prof_check(&r);
  free(got);
  rt_profile_destroy(p);
}

Test(profile, report_groups_orders_and_shares) {
  /* 10 kernels, 4 op kinds: attention 40 ms, linear 30, add 20, softmax 10
   * (in all, over 4 runs); two kernels tie at 6 ms */
  static const RtKernelInfo k[10] = {
      {"k0_linear", "linear", "linear %0"},   {"k1_add", "add", "add %1"},
      {"k2_attention", "attention", "a %2"},  {"k3_linear", "linear", "linear %3"},
      {"k4_add", "add", "add %4"},            {"k5_softmax", "softmax", "softmax %5"},
      {"k6_attention", "attention", "a %6"},  {"k7_linear", "linear", "linear %7"},
      {"k8_add", "add", "add %8"},            {"k9_linear", "linear", "linear %9"},
  };
  const double ms[10] = {12, 6, 25, 6, 10, 10, 15, 7, 4, 5};
  RtProfile *p = synthetic(10, ms);
  char *text = report(k, 10, p, 4);
  ProfReport r;
  prof_parse(text, &r);
  prof_check(&r);
  cr_assert_eq(r.n_kernels, 10);
  cr_assert_eq(r.runs, 4);
  cr_assert_float_eq(r.ms_per_run, 25.0, 1e-9, "%s", text);
  const char *order[4] = {"attention", "linear", "add", "softmax"};
  const int counts[4] = {2, 4, 3, 1};
  const double kind_ms[4] = {10, 7.5, 5, 2.5}, share[4] = {40, 30, 20, 10};
  cr_assert_eq(r.n_kinds, 4, "%s", text);
  for (int i = 0; i < 4; i++) {
    cr_assert_str_eq(r.kinds[i].op, order[i], "%s", text);
    cr_assert_eq(r.kinds[i].kernels, counts[i], "%s", text);
    cr_assert_float_eq(r.kinds[i].ms, kind_ms[i], 1e-9, "%s", text);
    cr_assert_float_eq(r.kinds[i].share, share[i], 1e-9, "%s", text);
  }
  /* slowest first; k1_add and k3_linear tie (6 ms): kernel order; the two
   * fastest (k9 5 ms, k8 4 ms) are not listed */
  const char *slow[8] = {"k2_attention", "k6_attention", "k0_linear", "k4_add",
                         "k5_softmax",   "k7_linear",    "k1_add",    "k3_linear"};
  cr_assert_eq(r.n_slow, 8);
  for (int i = 0; i < 8; i++) cr_assert_str_eq(r.slow[i].name, slow[i], "%s", text);
  cr_assert_float_eq(r.slow[0].ms, 6.25, 1e-9);
  cr_assert_str_eq(r.slow[0].comment, "a %2");
  cr_assert_null(strstr(text, "k9_linear"));
  cr_assert_null(strstr(text, "k8_add"));
  free(text);
  rt_profile_destroy(p);
}

Test(profile, report_shares_add_up_whatever_the_times) {
  static const char *ops[7] = {"linear", "attention", "layernorm", "add", "gelu", "embed", "x.y"};
  RtKernelInfo k[40];
  char names[40][16];
  double ms[40];
  uint32_t s = 12345;
  for (int trial = 0; trial < 50; trial++) {
    int n = 1 + trial % 40;
    for (int i = 0; i < n; i++) {
      s = s * 1664525u + 1013904223u;
      snprintf(names[i], sizeof names[i], "k%d_t", i);
      k[i] = (RtKernelInfo){names[i], ops[(s >> 8) % 7], "c"};
      s = s * 1664525u + 1013904223u;
      ms[i] = (double)((s >> 8) % 100000) / 977.0 * (trial % 3 ? 1 : 1e-4);
    }
    RtProfile *p = synthetic(n, ms);
    char *text = report(k, n, p, 1 + trial % 5);
    ProfReport r;
    prof_parse(text, &r);
    prof_check(&r);
    cr_assert_eq(r.n_kernels, n);
    free(text);
    rt_profile_destroy(p);
  }
}

Test(profile, report_keeps_hostile_text_on_one_line) {
  static const RtKernelInfo k[2] = {
      {"k1_x", "op\nkind", "file\n.tfm\\ \x01 caf\xc3\xa9"},
      {NULL, NULL, NULL},
  };
  RtProfile *p = synthetic(2, (const double[]){1, 0.5});
  char *text = report(k, 2, p, 1);
  int lines = 0;
  for (const char *c = text; *c; c++) lines += *c == '\n';
  cr_assert_eq(lines, 2 + 2 + 1 + 2, "%s", text);
  cr_assert(strstr(text, "  op\\x0akind "), "%s", text);
  cr_assert(strstr(text, "file\\x0a.tfm\\x5c \\x01 caf\\xc3\\xa9\n"), "%s", text);
  cr_assert(strstr(text, "  ?                     1 "), "%s", text); /* no op: "?" */
  for (const unsigned char *c = (const unsigned char *)text; *c; c++)
    cr_assert((*c >= 0x20 && *c < 0x7f) || *c == '\n', "byte %02x in the report", *c);
  free(text);
  rt_profile_destroy(p);
}

Test(profile, report_edge_cases) {
  /* no kernels at all */
  RtProfile *p0 = rt_profile_create(0);
  char *text = report(NULL, 0, p0, 3);
  cr_assert_str_eq(text, "profile: 0 kernels, 0.000 ms per run (mean of 3 runs)\n"
                         "  op kind         kernels   ms per run   share\n"
                         "  slowest kernels:\n");
  free(text);
  rt_profile_destroy(p0);
  /* nothing took time: shares are 0, not NaN */
  static const RtKernelInfo k[5] = {{"k0_a", "a", ""}, {"k1_b", "b", ""}, {"k2_a", "a", ""},
                                    {"k3_c", "c", ""}, {"k4_c", "c", ""}};
  RtProfile *pz = rt_profile_create(5);
  text = report(k, 5, pz, 1);
  ProfReport r;
  prof_parse(text, &r);
  prof_check(&r);
  cr_assert_eq(r.n_kinds, 3);
  for (int i = 0; i < 3; i++) cr_assert_eq(r.kinds[i].share, 0.0, "%s", text);
  cr_assert_str_eq(r.kinds[0].op, "a"); /* ties: kernel order */
  free(text);
  /* runs < 1 counts as 1 */
  pz->ms[3] = 2;
  text = report(k, 5, pz, 0);
  prof_parse(text, &r);
  cr_assert_eq(r.runs, 1);
  cr_assert_float_eq(r.ms_per_run, 2.0, 1e-9);
  cr_assert_str_eq(r.kinds[0].op, "c");
  free(text);
  /* a kernel table shorter than the profile: only the named kernels */
  text = report(k, 2, pz, 1);
  prof_parse(text, &r);
  prof_check(&r);
  cr_assert_eq(r.n_kernels, 2);
  cr_assert_null(strstr(text, "k3_c"));
  free(text);
  rt_profile_destroy(pz);
}
