/* runtime/rt_profile.c — running one kernel of a compiled model
 * (rt_kernel_run, rt_model.h), optionally timed into a profile, and the
 * profile report (rt_profile.h).
 *
 * Every compiled forward pass, whether JIT-compiled, linked from an object
 * file or emitted as C, calls rt_kernel_run once per kernel per run, so one
 * profiler serves all of them: what `tfmc run --profile` measures is what
 * the executables measure.
 *
 * Invariants: without a profile rt_kernel_run does exactly what generated
 * code did before it existed (skip n <= 0, pool or calling thread) plus one
 * branch; with one it only adds to entries inside the profile's range; the
 * report never reads past either table and prints every byte that came
 * from a spec as printable ASCII. */
#include "runtime/rt_profile.h"

#include "runtime/rt_pool.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROFILE_SLOWEST 8 /* kernels listed under "slowest kernels" */

/* the layout contract of rt_model.h, which generated code relies on */
_Static_assert(sizeof(void *) != 8 || (offsetof(RtRunArgs, pool) == 40 &&
                                       offsetof(RtRunArgs, profile) == 48),
               "RtRunArgs no longer has the byte offsets rt_model.h promises");

static void kernel_call(const RtRunArgs *args, RtTaskFn fn, void *ctx, int64_t n,
                        int64_t grain, int parallel) {
  if (n <= 0)
    return;
  if (parallel)
    rt_pool_parallel_for(args->pool, n, grain, fn, ctx);
  else
    fn(ctx, 0, n);
}

void rt_kernel_run(const RtRunArgs *args, int kernel, RtTaskFn fn, void *ctx, int64_t n,
                   int64_t grain, int parallel) {
  RtProfile *prof = args->profile;
  if (!prof) {
    kernel_call(args, fn, ctx, n, grain, parallel);
    return;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  kernel_call(args, fn, ctx, n, grain, parallel);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (kernel < 0 || kernel >= prof->n_kernels)
    return;
  prof->ms[kernel] +=
      (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  prof->calls[kernel]++;
}

RtProfile *rt_profile_create(int n_kernels) {
  if (n_kernels < 0)
    return NULL;
  RtProfile *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->n_kernels = n_kernels;
  p->ms = calloc((size_t)n_kernels + 1, sizeof *p->ms);
  p->calls = calloc((size_t)n_kernels + 1, sizeof *p->calls);
  if (!p->ms || !p->calls) {
    rt_profile_destroy(p);
    return NULL;
  }
  return p;
}

void rt_profile_destroy(RtProfile *p) {
  if (!p)
    return;
  free(p->ms);
  free(p->calls);
  free(p);
}

/* ---- the report ---- */

/* Writes s (NULL: `none`) with bytes outside printable ASCII and the
 * backslash as \xHH, then spaces up to `width` characters. */
static void put_text(FILE *f, const char *s, const char *none, int width) {
  if (!s)
    s = none;
  int col = 0;
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c >= 0x20 && *c < 0x7f && *c != '\\') {
      fputc(*c, f);
      col++;
    } else {
      fprintf(f, "\\x%02x", *c);
      col += 4;
    }
  }
  for (; col < width; col++)
    fputc(' ', f);
}

static const char *op_of(const RtKernelInfo *k) {
  return k->op ? k->op : "?";
}

int rt_profile_report(const RtKernelInfo *kernels, int n_kernels, const RtProfile *p, int runs,
                      FILE *f) {
  int n = p && p->n_kernels > 0 ? p->n_kernels : 0;
  if (!kernels || n_kernels < 0)
    n_kernels = 0;
  if (n > n_kernels)
    n = n_kernels;
  if (runs < 1)
    runs = 1;
  /* kind[i]: the first kernel with kernel i's op; kind_ms / kind_n are
   * indexed by that first kernel; picked marks what was printed */
  int *kind = malloc(((size_t)n + 1) * sizeof *kind);
  int *kind_n = calloc((size_t)n + 1, sizeof *kind_n);
  double *kind_ms = calloc((size_t)n + 1, sizeof *kind_ms);
  unsigned char *picked = calloc((size_t)n + 1, 1);
  if (!kind || !kind_n || !kind_ms || !picked) {
    free(kind);
    free(kind_n);
    free(kind_ms);
    free(picked);
    fprintf(f, "profile: out of memory for the report\n");
    return -1;
  }
  double total = 0;
  for (int i = 0; i < n; i++) {
    kind[i] = i;
    for (int j = 0; j < i; j++)
      if (kind[j] == j && strcmp(op_of(&kernels[j]), op_of(&kernels[i])) == 0) {
        kind[i] = j;
        break;
      }
    kind_ms[kind[i]] += p->ms[i];
    kind_n[kind[i]]++;
    total += p->ms[i];
  }
  fprintf(f, "profile: %d kernels, %.3f ms per run (mean of %d runs)\n", n, total / runs, runs);
  fprintf(f, "  %-14s %8s %12s %7s\n", "op kind", "kernels", "ms per run", "share");
  for (;;) {
    int best = -1;
    for (int i = 0; i < n; i++)
      if (kind[i] == i && !picked[i] && (best < 0 || kind_ms[i] > kind_ms[best]))
        best = i;
    if (best < 0)
      break;
    picked[best] = 1;
    fputs("  ", f);
    put_text(f, op_of(&kernels[best]), "?", 14);
    fprintf(f, " %8d %12.3f %6.1f%%\n", kind_n[best], kind_ms[best] / runs,
            total > 0 ? 100 * kind_ms[best] / total : 0.0);
  }
  memset(picked, 0, (size_t)n + 1);
  fprintf(f, "  slowest kernels:\n");
  for (int r = 0; r < PROFILE_SLOWEST && r < n; r++) {
    int best = -1;
    for (int i = 0; i < n; i++)
      if (!picked[i] && (best < 0 || p->ms[i] > p->ms[best]))
        best = i;
    picked[best] = 1;
    fputs("  ", f);
    put_text(f, kernels[best].name, "?", 24);
    fprintf(f, " %10.3f ms  ", p->ms[best] / runs);
    put_text(f, kernels[best].comment, "", 0);
    fputc('\n', f);
  }
  free(kind);
  free(kind_n);
  free(kind_ms);
  free(picked);
  return 0;
}

int rt_profile_runs(const RtKernelInfo *kernels, int n_kernels, RtModelRunFn run,
                    RtRunArgs *args, int runs, FILE *f) {
  RtProfile *prof = rt_profile_create(n_kernels);
  if (!prof)
    return 1;
  args->profile = prof;
  for (int r = 0; r < runs; r++)
    run(args);
  args->profile = NULL;
  int rc = rt_profile_report(kernels, n_kernels, prof, runs, f) != 0;
  rt_profile_destroy(prof);
  return rc;
}

/* ---- timing ---- */

double rt_timing_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

void rt_timing_summarise(double *ms, int n, RtTiming *t) {
  qsort(ms, (size_t)n, sizeof *ms, cmp_double);
  t->runs = n;
  t->min_ms = ms[0];
  t->max_ms = ms[n - 1];
  t->median_ms = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
}

int rt_time_runs(RtModelRunFn run, const RtRunArgs *args, int n, RtTiming *t) {
  double *ms = malloc((size_t)n * sizeof *ms);
  if (!ms)
    return 1;
  /* On a terminal, a loop that takes more than a second shows how far it
   * is: one stderr line rewritten at most five times a second and cleared
   * at the end. Redirected stderr (logs, tests) sees nothing of it. */
  int tty = isatty(2), shown = 0;
  double start = rt_timing_now_ms(), last = start;
  for (int r = 0; r < n; r++) {
    double t0 = rt_timing_now_ms();
    run(args);
    double t1 = rt_timing_now_ms();
    ms[r] = t1 - t0;
    if (tty && t1 - start > 1000 && t1 - last > 200) {
      fprintf(stderr, "\rtiming: run %d of %d", r + 1, n);
      fflush(stderr);
      last = t1;
      shown = 1;
    }
  }
  if (shown)
    fprintf(stderr, "\r%40s\r", "");
  rt_timing_summarise(ms, n, t);
  free(ms);
  return 0;
}
