/* bench/stream_read.c — measures DRAM read bandwidth by streaming a 1 GiB
 * buffer (far larger than any cache here), the ceiling for memory-bound
 * kernels in the benchmark report.
 *
 *   cc -O2 -mavx2 -pthread bench/stream_read.c -o stream_read && ./stream_read [THREADS...]
 *
 * The buffer is allocated and written once (so every page is resident),
 * then each thread sums its contiguous share with 256-bit loads into four
 * independent accumulators (the adds never limit the loads). The best of
 * REPS passes is reported per thread count (default 1 and 2) as one JSON
 * line each:  {"threads": 2, "gbytes_per_s": 21.3, "bytes": 1073741824}
 * (GB = 1e9 bytes). The sum is printed as "check" so the loads cannot be
 * dropped.
 *
 * Invariants: each pass reads every byte exactly once; threads start
 * together (barrier) and the time is the slowest thread's. Exits 1 with a
 * message when memory or threads are unavailable or AVX2 is missing. */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { REPS = 5, MAX_THREADS = 64 };
static const size_t BYTES = (size_t)1 << 30;

typedef struct ReadJob {
  const float *begin;
  size_t n_floats; /* a multiple of 32 */
  pthread_barrier_t *start;
  double seconds;
  double sum;
} ReadJob;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *read_thread(void *arg) {
  ReadJob *job = arg;
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  const float *p = job->begin;
  pthread_barrier_wait(job->start);
  double t0 = now_seconds();
  for (size_t i = 0; i < job->n_floats; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(p + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(p + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(p + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(p + i + 24));
  }
  job->seconds = now_seconds() - t0;
  float lanes[8];
  _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  job->sum = 0;
  for (int k = 0; k < 8; k++) job->sum += lanes[k];
  return NULL;
}

/* One pass over buf on n threads: the slowest thread's seconds, or < 0. */
static double read_pass(const float *buf, int n, double *check) {
  pthread_barrier_t start;
  pthread_t tid[MAX_THREADS];
  ReadJob job[MAX_THREADS];
  size_t total = BYTES / sizeof(float), share = total / (size_t)n / 32 * 32;
  pthread_barrier_init(&start, NULL, (unsigned)n);
  for (int t = 0; t < n; t++) {
    size_t len = t == n - 1 ? total - share * (size_t)(n - 1) : share;
    job[t] = (ReadJob){buf + share * (size_t)t, len, &start, 0, 0};
  }
  for (int t = 1; t < n; t++)
    if (pthread_create(&tid[t], NULL, read_thread, &job[t])) {
      fprintf(stderr, "stream_read: cannot start %d threads\n", n);
      return -1; /* the barrier never opens for the others; the caller exits */
    }
  read_thread(&job[0]);
  double worst = job[0].seconds;
  *check = job[0].sum;
  for (int t = 1; t < n; t++) {
    pthread_join(tid[t], NULL);
    if (job[t].seconds > worst) worst = job[t].seconds;
    *check += job[t].sum;
  }
  pthread_barrier_destroy(&start);
  return worst;
}

int main(int argc, char **argv) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2")) {
    fprintf(stderr, "stream_read: this CPU lacks AVX2\n");
    return 1;
  }
  int counts[MAX_THREADS], n_counts = 0;
  if (argc == 1) {
    counts[n_counts++] = 1;
    counts[n_counts++] = 2;
  }
  for (int i = 1; i < argc && n_counts < MAX_THREADS; i++) {
    char *end;
    long n = strtol(argv[i], &end, 10);
    if (*end || n < 1 || n > MAX_THREADS) {
      fprintf(stderr, "stream_read: thread count '%s' is not in 1..%d\n", argv[i], MAX_THREADS);
      return 1;
    }
    counts[n_counts++] = (int)n;
  }
  float *buf = aligned_alloc(64, BYTES);
  if (!buf) {
    fprintf(stderr, "stream_read: cannot allocate %zu bytes\n", BYTES);
    return 1;
  }
  for (size_t i = 0; i < BYTES / sizeof(float); i++) buf[i] = (float)(i & 1023) * 1e-3f;
  for (int c = 0; c < n_counts; c++) {
    double best = 0, check = 0;
    for (int r = 0; r < REPS; r++) {
      double s = read_pass(buf, counts[c], &check);
      if (s < 0) return 1;
      if (best == 0 || s < best) best = s;
    }
    printf("{\"threads\": %d, \"gbytes_per_s\": %.2f, \"bytes\": %zu, \"check\": %.6g}\n", counts[c],
           (double)BYTES / best * 1e-9, BYTES, check);
    fflush(stdout);
  }
  free(buf);
  return 0;
}
