/* runtime/rt_pool.c — a persistent pthread pool with a parallel-for (see
 * rt_pool.h).
 *
 * One job at a time: rt_pool_parallel_for writes the job (fn, ctx, the
 * chunking), then publishes it by storing a new `state` (an odd sequence
 * number: active); everyone, the caller included, claims chunk indices from
 * the atomic counter `next` until they run out; the caller then stores the
 * even `state` (inactive) and waits until no worker is inside the job.
 *
 * Between jobs a worker spins on `state` for a bounded time (POOL_SPIN_NS,
 * or TFMC_POOL_SPIN_US) and only then sleeps on a condition variable, so an
 * idle pool burns no CPU while a model's back-to-back kernels never go
 * through the kernel: the fast path (publish, join, leave, wait) is atomics
 * only. (The mutex-based handshake this replaces took ~4 futex calls per
 * job in a bert-base forward: a worker that saw the new job while the
 * caller still held the mutex slept in the kernel.)
 *
 * Invariants:
 *   - a worker reads the job fields only after counting itself in `joined`
 *     and re-reading the same active `state` (seq_cst on both sides): either
 *     the caller's inactive store comes first and the worker sees it and
 *     leaves without touching the job, or the caller's later load of
 *     `joined` sees the worker and waits for it. So the job fields and
 *     `next` are never reset while anyone still uses them;
 *   - every chunk index in [0, n_chunks) is claimed exactly once (fetch_add),
 *     and the chunks tile [0, n) without overlap;
 *   - no lost wake-up: a sleeper counts itself in `sleepers` and re-checks
 *     `state` under `mu` before waiting; the caller stores `state`, then
 *     broadcasts under `mu` if it sees a sleeper (the same for the caller's
 *     own sleep on `done` with `caller_waiting` / `joined`);
 *   - `submit` serialises jobs from different calling threads;
 *   - a thread running a task (worker or caller) has tls_in_task set, so a
 *     nested parallel_for runs serially on it instead of deadlocking.
 * Memory ordering: the job fields are published by the release in the
 * `state` store and read after an acquire of it; chunk results written by
 * workers are published to the caller by the release in the `joined`
 * decrement and the caller's acquire load of `joined`. */
#include "runtime/rt_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define POOL_MAX_THREADS 256
#define POOL_CHUNKS_PER_THREAD 4
/* How long an idle worker (and a caller waiting for the last chunk) spins
 * before it sleeps: long enough to bridge the serial gaps between a model's
 * kernels (tens of microseconds), short enough that a pool left idle costs
 * nothing measurable. */
#define POOL_SPIN_NS 1000000
#define POOL_SPIN_MAX_US 1000000

typedef struct PoolJob {
  RtTaskFn fn;
  void *ctx;
  int64_t n, chunk, n_chunks;
} PoolJob;

struct RtPool {
  int n_threads; /* including the caller */
  int n_workers; /* started threads */
  pthread_t *threads;
  int64_t spin_ns;

  pthread_mutex_t submit; /* one job at a time */
  pthread_mutex_t mu;     /* only for sleeping: cond waits and their wake-ups */
  pthread_cond_t wake;    /* workers: a new job or shutdown */
  pthread_cond_t done;    /* caller: joined dropped to 0 */

  PoolJob job;
  _Atomic uint64_t state; /* odd while a job is active; +1 at each publish and close */
  _Atomic int shutdown;
  _Atomic int joined;         /* workers inside the current job */
  _Atomic int sleepers;       /* workers in (or about to enter) the wake wait */
  _Atomic int caller_waiting; /* the caller in (or about to enter) the done wait */
  _Alignas(64) _Atomic int64_t next;
};

static _Thread_local int tls_in_task;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __asm__ __volatile__("pause");
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Claims and runs chunks of job until none is left. */
static void pool_run_chunks(RtPool *p, const PoolJob *job) {
  for (;;) {
    int64_t c = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
    if (c >= job->n_chunks)
      return;
    int64_t lo = c * job->chunk;
    int64_t hi = lo + job->chunk < job->n ? lo + job->chunk : job->n;
    job->fn(job->ctx, lo, hi);
  }
}

/* Poll i of a bounded spin (deadline 0 before the first): 1 once
 * p->spin_ns have passed since poll 0, else a pause and 0. The clock is
 * read every 64 polls. */
static int spin_over(const RtPool *p, unsigned i, int64_t *deadline) {
  if (i % 64 == 0) {
    int64_t t = now_ns();
    if (*deadline == 0)
      *deadline = t + p->spin_ns;
    else if (t >= *deadline)
      return 1;
  }
  if (i > 0)
    cpu_relax();
  return 0;
}

/* A state a worker should join: active and not the one it last ran. */
static int worth_joining(uint64_t s, uint64_t last) {
  return (s & 1) && s != last;
}

/* Waits for a job other than `last` (spin, then sleep); returns its state,
 * or 0 on shutdown. A wake-up, whatever it finds, goes back to spinning:
 * a woken worker that arrives after the caller has run the whole job
 * (a futex wake-up of an idle vCPU can take longer than a kernel) would
 * otherwise sleep again at once and miss every following job the same
 * way, leaving the caller alone for the rest of the process (seen as
 * whole processes at exactly one thread's speed: bert-base b1 192 ms
 * where 97-102 is usual). */
static uint64_t pool_wait_job(RtPool *p, uint64_t last) {
  for (;;) {
    int64_t deadline = 0;
    for (unsigned i = 0; !spin_over(p, i, &deadline); i++) {
      if (atomic_load_explicit(&p->shutdown, memory_order_relaxed))
        return 0;
      uint64_t s = atomic_load_explicit(&p->state, memory_order_acquire);
      if (worth_joining(s, last))
        return s;
    }
    atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
    pthread_mutex_lock(&p->mu);
    int down = atomic_load_explicit(&p->shutdown, memory_order_seq_cst);
    uint64_t s = down ? 0 : atomic_load_explicit(&p->state, memory_order_seq_cst);
    int found = down || worth_joining(s, last);
    if (!found)
      pthread_cond_wait(&p->wake, &p->mu); /* once: then spin again */
    pthread_mutex_unlock(&p->mu);
    atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed);
    if (found)
      return s;
  }
}

static void *pool_worker_main(void *arg) {
  RtPool *p = arg;
  uint64_t last = 0;
  tls_in_task = 1; /* everything a worker runs is a task */
  for (;;) {
    uint64_t s = pool_wait_job(p, last);
    if (s == 0)
      return NULL;
    atomic_fetch_add_explicit(&p->joined, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&p->state, memory_order_seq_cst) == s) {
      PoolJob job = p->job;
      pool_run_chunks(p, &job);
    }
    last = s;
    if (atomic_fetch_sub_explicit(&p->joined, 1, memory_order_seq_cst) == 1 &&
        atomic_load_explicit(&p->caller_waiting, memory_order_seq_cst)) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->mu);
    }
  }
}

/* TFMC_POOL_SPIN_US overrides the spin (0 = sleep at once; experiments). */
static int64_t pool_spin_ns(void) {
  const char *e = getenv("TFMC_POOL_SPIN_US");
  if (!e || !*e)
    return POOL_SPIN_NS;
  char *end;
  long v = strtol(e, &end, 10);
  if (*end || v < 0 || v > POOL_SPIN_MAX_US)
    return POOL_SPIN_NS; /* not a number we take: the default */
  return (int64_t)v * 1000;
}

RtPool *rt_pool_create(int n_threads) {
  if (n_threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads = n > 0 ? (int)(n < POOL_MAX_THREADS ? n : POOL_MAX_THREADS) : 1;
  }
  if (n_threads > POOL_MAX_THREADS)
    n_threads = POOL_MAX_THREADS;
  RtPool *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->threads = calloc((size_t)n_threads, sizeof *p->threads);
  if (!p->threads) {
    free(p);
    return NULL;
  }
  p->spin_ns = pool_spin_ns();
  pthread_mutex_init(&p->submit, NULL);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  atomic_init(&p->state, 0);
  atomic_init(&p->shutdown, 0);
  atomic_init(&p->joined, 0);
  atomic_init(&p->sleepers, 0);
  atomic_init(&p->caller_waiting, 0);
  atomic_init(&p->next, 0);
  for (int i = 0; i < n_threads - 1; i++) {
    if (pthread_create(&p->threads[i], NULL, pool_worker_main, p) != 0)
      break;
    p->n_workers++;
  }
  if (n_threads > 1 && p->n_workers == 0) { /* no thread at all: run serially */
    rt_pool_destroy(p);
    return NULL;
  }
  p->n_threads = p->n_workers + 1;
  return p;
}

void rt_pool_destroy(RtPool *p) {
  if (!p)
    return;
  atomic_store_explicit(&p->shutdown, 1, memory_order_seq_cst);
  pthread_mutex_lock(&p->mu);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n_workers; i++)
    pthread_join(p->threads[i], NULL);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->submit);
  free(p->threads);
  free(p);
}

int rt_pool_size(const RtPool *p) {
  return p ? p->n_threads : 1;
}

/* Waits (spin, then sleep) until no worker is inside the job. */
static void pool_wait_joined(RtPool *p) {
  int64_t deadline = 0;
  for (unsigned i = 0; !spin_over(p, i, &deadline); i++)
    if (atomic_load_explicit(&p->joined, memory_order_seq_cst) == 0)
      return;
  atomic_store_explicit(&p->caller_waiting, 1, memory_order_seq_cst);
  pthread_mutex_lock(&p->mu);
  while (atomic_load_explicit(&p->joined, memory_order_seq_cst) != 0)
    pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
  atomic_store_explicit(&p->caller_waiting, 0, memory_order_relaxed);
}

void rt_pool_parallel_for(RtPool *p, int64_t n, int64_t grain, RtTaskFn fn, void *ctx) {
  if (n <= 0)
    return;
  if (grain < 1)
    grain = 1;
  if (!p || p->n_workers == 0 || n <= grain || tls_in_task) {
    int outer = tls_in_task;
    tls_in_task = 1;
    fn(ctx, 0, n);
    tls_in_task = outer;
    return;
  }
  /* About POOL_CHUNKS_PER_THREAD chunks per thread, each >= grain. */
  int64_t want = (int64_t)p->n_threads * POOL_CHUNKS_PER_THREAD;
  int64_t chunk = (n + want - 1) / want;
  if (chunk < grain)
    chunk = grain;
  PoolJob job = {fn, ctx, n, chunk, (n + chunk - 1) / chunk};

  pthread_mutex_lock(&p->submit);
  /* The previous job ended with joined == 0 and an inactive state: nobody
   * reads the fields now. */
  p->job = job;
  atomic_store_explicit(&p->next, 0, memory_order_relaxed);
  uint64_t s = atomic_load_explicit(&p->state, memory_order_relaxed) + 1; /* even -> odd */
  atomic_store_explicit(&p->state, s, memory_order_seq_cst);
  if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
  }

  tls_in_task = 1;
  pool_run_chunks(p, &job);
  tls_in_task = 0;

  /* Every chunk is claimed: close the job, then wait for the workers still
   * running theirs. */
  atomic_store_explicit(&p->state, s + 1, memory_order_seq_cst);
  pool_wait_joined(p);
  pthread_mutex_unlock(&p->submit);
}
