/* tests/runtime/test_pool.c — rt_pool: every index runs exactly once for
 * any n and grain, chunks respect the grain, nested and concurrent calls,
 * 100k tiny jobs without a deadlock, idle workers sleep, and a timing
 * report (1 vs 2 threads on a large job; printed, not asserted). */
#include "runtime/rt_pool.h"

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- coverage: each index exactly once, chunks >= grain ---- */

typedef struct Cover {
  _Atomic int *hits;
  int64_t n, grain;
  _Atomic int small_chunks; /* chunks shorter than grain that are not the last */
  _Atomic int chunks;
} Cover;

static void cover_task(void *ctx, int64_t lo, int64_t hi) {
  Cover *c = ctx;
  cr_assert(0 <= lo && lo < hi && hi <= c->n, "bad chunk [%lld,%lld) of %lld", (long long)lo,
            (long long)hi, (long long)c->n);
  if (hi - lo < c->grain && hi != c->n)
    atomic_fetch_add(&c->small_chunks, 1);
  atomic_fetch_add(&c->chunks, 1);
  for (int64_t i = lo; i < hi; i++)
    atomic_fetch_add(&c->hits[i], 1);
}

static void check_cover(RtPool *p, int64_t n, int64_t grain) {
  Cover c = {calloc((size_t)(n ? n : 1), sizeof(_Atomic int)), n, grain < 1 ? 1 : grain, 0, 0};
  cr_assert_not_null(c.hits);
  rt_pool_parallel_for(p, n, grain, cover_task, &c);
  for (int64_t i = 0; i < n; i++)
    cr_assert_eq(atomic_load(&c.hits[i]), 1, "n=%lld grain=%lld: index %lld ran %d times",
                 (long long)n, (long long)grain, (long long)i, atomic_load(&c.hits[i]));
  cr_assert_eq(atomic_load(&c.small_chunks), 0, "a chunk below the grain (n=%lld grain=%lld)",
               (long long)n, (long long)grain);
  int threads = rt_pool_size(p);
  if (n > 0 && grain >= 1 && n > grain && threads > 1)
    cr_assert_leq(atomic_load(&c.chunks), 4 * threads + 1, "too many chunks: %d",
                  atomic_load(&c.chunks));
  free(c.hits);
}

Test(pool, covers_every_index_once) {
  const int sizes[] = {1, 2, 3, 8};
  const int64_t ns[] = {0, 1, 2, 3, 7, 8, 9, 31, 100, 1000, 4097};
  const int64_t grains[] = {-3, 0, 1, 2, 5, 64, 5000};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    RtPool *p = rt_pool_create(sizes[s]);
    cr_assert_not_null(p);
    cr_assert_eq(rt_pool_size(p), sizes[s]);
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
      for (size_t g = 0; g < sizeof grains / sizeof *grains; g++)
        check_cover(p, ns[i], grains[g]);
    rt_pool_destroy(p);
  }
  check_cover(NULL, 100, 1); /* a NULL pool runs serially */
  cr_assert_eq(rt_pool_size(NULL), 1);
}

Test(pool, default_size_and_cap) {
  RtPool *p = rt_pool_create(0);
  cr_assert_not_null(p);
  cr_assert_geq(rt_pool_size(p), 1);
  rt_pool_destroy(p);
  p = rt_pool_create(100000);
  cr_assert_not_null(p);
  cr_assert_leq(rt_pool_size(p), 256);
  check_cover(p, 10000, 1);
  rt_pool_destroy(p);
  rt_pool_destroy(NULL);
}

/* ---- 100k tiny jobs ---- */

static void add_task(void *ctx, int64_t lo, int64_t hi) {
  atomic_fetch_add((_Atomic int64_t *)ctx, hi - lo);
}

Test(pool, many_small_jobs_no_deadlock, .timeout = 120) {
  RtPool *p = rt_pool_create(2);
  cr_assert_not_null(p);
  _Atomic int64_t total = 0;
  double t0 = now();
  for (int i = 0; i < 100000; i++)
    rt_pool_parallel_for(p, 8 + i % 5, 1, add_task, &total);
  double dt = now() - t0;
  int64_t want = 0;
  for (int i = 0; i < 100000; i++)
    want += 8 + i % 5;
  cr_assert_eq(atomic_load(&total), want);
  fprintf(stderr, "pool: 100000 tiny jobs on 2 threads: %.3f s (%.2f us per job)\n", dt,
          dt * 1e6 / 100000);
  rt_pool_destroy(p);
}

/* Create and destroy repeatedly, with and without jobs in between. */
Test(pool, create_destroy_cycles, .timeout = 60) {
  for (int i = 0; i < 200; i++) {
    RtPool *p = rt_pool_create(1 + i % 4);
    cr_assert_not_null(p);
    if (i % 2)
      check_cover(p, 50, 1);
    rt_pool_destroy(p);
  }
}

/* ---- nesting and concurrent callers ---- */

typedef struct Nest {
  RtPool *p;
  _Atomic int64_t inner_total;
} Nest;

static void nest_outer(void *ctx, int64_t lo, int64_t hi) {
  Nest *n = ctx;
  for (int64_t i = lo; i < hi; i++)
    rt_pool_parallel_for(n->p, 100, 1, add_task, (void *)&n->inner_total);
}

Test(pool, nested_calls_run_serially, .timeout = 60) {
  RtPool *p = rt_pool_create(4);
  Nest n = {p, 0};
  rt_pool_parallel_for(p, 64, 1, nest_outer, &n);
  cr_assert_eq(atomic_load(&n.inner_total), 64 * 100);
  /* and the pool still works afterwards */
  check_cover(p, 1000, 3);
  rt_pool_destroy(p);
}

typedef struct Caller {
  RtPool *p;
  _Atomic int64_t total;
} Caller;

static void *caller_main(void *arg) {
  Caller *c = arg;
  for (int i = 0; i < 2000; i++)
    rt_pool_parallel_for(c->p, 16, 1, add_task, (void *)&c->total);
  return NULL;
}

Test(pool, concurrent_callers_share_the_pool, .timeout = 120) {
  RtPool *p = rt_pool_create(2);
  Caller c[3] = {{p, 0}, {p, 0}, {p, 0}};
  pthread_t th[3];
  for (int i = 0; i < 3; i++)
    cr_assert_eq(pthread_create(&th[i], NULL, caller_main, &c[i]), 0);
  for (int i = 0; i < 3; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(atomic_load(&c[i].total), 2000 * 16);
  rt_pool_destroy(p);
}

/* ---- who runs the chunks ---- */

typedef struct Who {
  pthread_t caller;
  _Atomic int by_caller, by_worker;
} Who;

static void who_task(void *ctx, int64_t lo, int64_t hi) {
  Who *w = ctx;
  (void)lo;
  (void)hi;
  struct timespec d = {0, 200000}; /* 0.2 ms: long enough for a worker to wake */
  nanosleep(&d, NULL);
  if (pthread_equal(pthread_self(), w->caller))
    atomic_fetch_add(&w->by_caller, 1);
  else
    atomic_fetch_add(&w->by_worker, 1);
}

Test(pool, caller_and_workers_take_part, .timeout = 60) {
  RtPool *p = rt_pool_create(3);
  Who w = {pthread_self(), 0, 0};
  for (int i = 0; i < 50; i++)
    rt_pool_parallel_for(p, 12, 1, who_task, &w);
  cr_assert_eq(atomic_load(&w.by_caller) + atomic_load(&w.by_worker), 50 * 12);
  cr_assert_gt(atomic_load(&w.by_caller), 0, "the caller never ran a chunk");
  cr_assert_gt(atomic_load(&w.by_worker), 0, "no worker ever ran a chunk");
  rt_pool_destroy(p);
}

/* ---- idle workers sleep ---- */

Test(pool, idle_pool_uses_no_cpu, .timeout = 60) {
  RtPool *p = rt_pool_create(4);
  check_cover(p, 1000, 1);
  struct timespec settle = {0, 50 * 1000000}; /* past the bounded spin */
  nanosleep(&settle, NULL);
  double c0 = cpu_now();
  struct timespec idle = {0, 300 * 1000000};
  nanosleep(&idle, NULL);
  double used = cpu_now() - c0;
  fprintf(stderr, "pool: 3 idle workers used %.1f ms of CPU in 300 ms\n", used * 1e3);
  cr_assert_lt(used, 0.030, "idle workers burned %.1f ms of CPU in 300 ms", used * 1e3);
  rt_pool_destroy(p);
}

/* ---- timing report: 1 vs 2 threads (printed, not asserted) ---- */

typedef struct Work {
  double *out;
} Work;

static void work_task(void *ctx, int64_t lo, int64_t hi) {
  Work *w = ctx;
  for (int64_t i = lo; i < hi; i++) {
    double s = 0;
    for (int k = 1; k <= 200; k++)
      s += sin((double)(i + k)) / k;
    w->out[i] = s;
  }
}

Test(pool, timing_report_one_vs_two_threads, .timeout = 120) {
  const int64_t n = 1 << 16;
  Work w = {malloc(sizeof(double) * (size_t)n)};
  double t[3] = {0};
  for (int threads = 1; threads <= 2; threads++) {
    RtPool *p = rt_pool_create(threads);
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
      double t0 = now();
      rt_pool_parallel_for(p, n, 64, work_task, &w);
      double dt = now() - t0;
      if (dt < best)
        best = dt;
    }
    t[threads] = best;
    rt_pool_destroy(p);
  }
  double check = 0;
  for (int64_t i = 0; i < n; i++)
    check += w.out[i];
  cr_assert(isfinite(check));
  fprintf(stderr,
          "pool: large job (%lld items): 1 thread %.1f ms, 2 threads %.1f ms (speedup %.2fx)\n",
          (long long)n, t[1] * 1e3, t[2] * 1e3, t[1] / t[2]);
  free(w.out);
}
