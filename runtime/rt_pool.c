/* runtime/rt_pool.c — a persistent pthread pool with a parallel-for (see
 * rt_pool.h).
 *
 * One job at a time: rt_pool_parallel_for publishes a job (fn, ctx, the
 * chunking) under the pool mutex, bumps `generation` and wakes the workers;
 * everyone, the caller included, claims chunk indices from the atomic
 * counter `next` until they run out. Workers sleep on a condition variable
 * between jobs after a short bounded spin, so an idle pool burns no CPU.
 *
 * Invariants:
 *   - a worker joins a job only under the mutex, while `job_active` is set,
 *     and counts itself in `joined`; the caller clears `job_active` (under the
 *     mutex) only after every chunk is claimed and `joined` has dropped to 0.
 *     So the job fields and `next` are never reset while anyone still uses
 *     them, and a worker that wakes late sees an inactive job and sleeps again;
 *   - every chunk index in [0, n_chunks) is claimed exactly once (fetch_add),
 *     and the chunks tile [0, n) without overlap;
 *   - `submit` serialises jobs from different calling threads;
 *   - a thread running a task (worker or caller) has tls_in_task set, so a
 *     nested parallel_for runs serially on it instead of deadlocking.
 * Memory ordering: the mutex orders the job fields; chunk results written by
 * workers are published to the caller by the mutex release in the `joined`
 * decrement (or, on the spin path, the acquire load of `joined`). */
#include "runtime/rt_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define POOL_MAX_THREADS 256
#define POOL_CHUNKS_PER_THREAD 4
#define POOL_SPIN_WORKER 2000 /* polls of `generation` before sleeping: ~50 us */
#define POOL_SPIN_CALLER 2000 /* polls of `joined` before sleeping */

typedef struct PoolJob {
  RtTaskFn fn;
  void *ctx;
  int64_t n, chunk, n_chunks;
} PoolJob;

struct RtPool {
  int n_threads; /* including the caller */
  int n_workers; /* started threads */
  pthread_t *threads;

  pthread_mutex_t submit; /* one job at a time */
  pthread_mutex_t mu;     /* guards job, job_active, shutdown; cond waits */
  pthread_cond_t wake;    /* workers: a new generation or shutdown */
  pthread_cond_t done;    /* caller: joined dropped to 0 */

  PoolJob job;
  int job_active;
  int shutdown;
  _Atomic uint64_t generation;
  _Atomic int joined;
  _Atomic int64_t next;
};

static _Thread_local int tls_in_task;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __asm__ __volatile__("pause");
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
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

static void *pool_worker_main(void *arg) {
  RtPool *p = arg;
  uint64_t seen = 0;
  tls_in_task = 1; /* everything a worker runs is a task */
  for (;;) {
    for (int i = 0; i < POOL_SPIN_WORKER; i++) {
      if (atomic_load_explicit(&p->generation, memory_order_acquire) != seen)
        break;
      cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    while (!p->shutdown && atomic_load_explicit(&p->generation, memory_order_relaxed) == seen)
      pthread_cond_wait(&p->wake, &p->mu);
    if (p->shutdown) {
      pthread_mutex_unlock(&p->mu);
      return NULL;
    }
    seen = atomic_load_explicit(&p->generation, memory_order_relaxed);
    if (!p->job_active) { /* woke after the job ended */
      pthread_mutex_unlock(&p->mu);
      continue;
    }
    PoolJob job = p->job;
    atomic_fetch_add_explicit(&p->joined, 1, memory_order_relaxed);
    pthread_mutex_unlock(&p->mu);

    pool_run_chunks(p, &job);

    pthread_mutex_lock(&p->mu);
    if (atomic_fetch_sub_explicit(&p->joined, 1, memory_order_release) == 1)
      pthread_cond_signal(&p->done);
    pthread_mutex_unlock(&p->mu);
  }
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
  pthread_mutex_init(&p->submit, NULL);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  atomic_init(&p->generation, 0);
  atomic_init(&p->joined, 0);
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
  pthread_mutex_lock(&p->mu);
  p->shutdown = 1;
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
  pthread_mutex_lock(&p->mu);
  p->job = job;
  p->job_active = 1;
  atomic_store_explicit(&p->next, 0, memory_order_relaxed);
  atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);

  tls_in_task = 1;
  pool_run_chunks(p, &job);
  tls_in_task = 0;

  /* Every chunk is claimed; wait for the workers still running theirs. */
  for (int i = 0; i < POOL_SPIN_CALLER; i++) {
    if (atomic_load_explicit(&p->joined, memory_order_acquire) == 0)
      break;
    cpu_relax();
  }
  pthread_mutex_lock(&p->mu);
  while (atomic_load_explicit(&p->joined, memory_order_acquire) != 0)
    pthread_cond_wait(&p->done, &p->mu);
  p->job_active = 0;
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->submit);
}
