/* bench/peak_fma.c — measures this machine's peak fp32 FMA throughput, the
 * ceiling the benchmark report divides achieved GFLOP/s by.
 *
 *   cc -O2 -mavx2 -mfma -pthread bench/peak_fma.c -o peak_fma && ./peak_fma [--avx2] [THREADS...]
 *
 * Each thread runs ACC independent chains of fused multiply-adds
 * (acc[i] = acc[i] * m + a) in registers: with ACC >= latency x FMA ports
 * (4 x 2 on Zen 3, 4 x 2 on Skylake) the chains never wait on each other,
 * so the loop retires FMAs as fast as the ports allow. The widest vector
 * unit the CPU and OS support is used: 512-bit (zmm, 16 lanes, 32 FLOPs per
 * FMA) when cpuid says AVX-512F and XCR0 says the OS saves zmm state, else
 * 256-bit (8 lanes, 16 FLOPs); --avx2 forces 256-bit. The AVX-512 loop is
 * a target("avx512f") function, so the build flags stay -mavx2 -mfma. The
 * best of REPS timed repetitions is reported, per thread count (default: 1
 * and 2), as one JSON line each:
 *   {"threads": 1, "gflops": 78.4, "seconds": 0.41, "isa": "avx2"}
 * The accumulators are summed and printed (as "check") so the compiler
 * cannot drop the loop; m and a keep the values finite (m < 1).
 *
 * Invariants: no memory traffic inside the timed loop; the thread start
 * is released by a barrier so all threads run concurrently; the time is
 * the slowest thread's. Exits 1 with a message when the CPU lacks AVX2/FMA
 * or a thread cannot start. */
#define _POSIX_C_SOURCE 200809L
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ACC = 12, REPS = 20, MAX_THREADS = 64 };
static const long ITERS = 20L * 1000 * 1000; /* per thread per repetition: short, so that
                                               * on a shared machine some run undisturbed */

typedef struct FmaJob {
  pthread_barrier_t *start;
  double seconds;
  float check;
  int wide; /* 512-bit FMAs */
} FmaJob;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* fma_thread's loop on zmm registers: the same chains, 16 lanes each. */
__attribute__((target("avx512f"))) static void fma512(FmaJob *job) {
  __m512 acc[ACC];
  for (int i = 0; i < ACC; i++) acc[i] = _mm512_set1_ps(0.001f * (float)(i + 1));
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  pthread_barrier_wait(job->start);
  double t0 = now_seconds();
  for (long it = 0; it < ITERS; it++) {
    acc[0] = _mm512_fmadd_ps(acc[0], m, a);
    acc[1] = _mm512_fmadd_ps(acc[1], m, a);
    acc[2] = _mm512_fmadd_ps(acc[2], m, a);
    acc[3] = _mm512_fmadd_ps(acc[3], m, a);
    acc[4] = _mm512_fmadd_ps(acc[4], m, a);
    acc[5] = _mm512_fmadd_ps(acc[5], m, a);
    acc[6] = _mm512_fmadd_ps(acc[6], m, a);
    acc[7] = _mm512_fmadd_ps(acc[7], m, a);
    acc[8] = _mm512_fmadd_ps(acc[8], m, a);
    acc[9] = _mm512_fmadd_ps(acc[9], m, a);
    acc[10] = _mm512_fmadd_ps(acc[10], m, a);
    acc[11] = _mm512_fmadd_ps(acc[11], m, a);
  }
  job->seconds = now_seconds() - t0;
  float sum = 0;
  for (int i = 0; i < ACC; i++) sum += _mm512_reduce_add_ps(acc[i]);
  job->check = sum;
}

/* AVX-512F in the CPU (cpuid 7.0 EBX bit 16) and zmm state saved by the OS
 * (XCR0 bits 1, 2, 5, 6, 7). */
static int have_avx512f(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1) || __get_cpuid_max(0, NULL) < 7)
    return 0;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  (void)hi;
  __cpuid_count(7, 0, a, b, c, d);
  return ((b >> 16) & 1) && (lo & 0xe6) == 0xe6;
}

static void *fma_thread(void *arg) {
  FmaJob *job = arg;
  if (job->wide) {
    fma512(job);
    return NULL;
  }
  __m256 acc[ACC];
  for (int i = 0; i < ACC; i++) acc[i] = _mm256_set1_ps(0.001f * (float)(i + 1));
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  pthread_barrier_wait(job->start);
  double t0 = now_seconds();
  for (long it = 0; it < ITERS; it++) {
    /* twelve independent chains, written out so each stays in a register */
    acc[0] = _mm256_fmadd_ps(acc[0], m, a);
    acc[1] = _mm256_fmadd_ps(acc[1], m, a);
    acc[2] = _mm256_fmadd_ps(acc[2], m, a);
    acc[3] = _mm256_fmadd_ps(acc[3], m, a);
    acc[4] = _mm256_fmadd_ps(acc[4], m, a);
    acc[5] = _mm256_fmadd_ps(acc[5], m, a);
    acc[6] = _mm256_fmadd_ps(acc[6], m, a);
    acc[7] = _mm256_fmadd_ps(acc[7], m, a);
    acc[8] = _mm256_fmadd_ps(acc[8], m, a);
    acc[9] = _mm256_fmadd_ps(acc[9], m, a);
    acc[10] = _mm256_fmadd_ps(acc[10], m, a);
    acc[11] = _mm256_fmadd_ps(acc[11], m, a);
  }
  job->seconds = now_seconds() - t0;
  float lanes[8], sum = 0;
  for (int i = 0; i < ACC; i++) {
    _mm256_storeu_ps(lanes, acc[i]);
    for (int k = 0; k < 8; k++) sum += lanes[k];
  }
  job->check = sum;
  return NULL;
}

/* Runs one timed repetition on n threads; returns the slowest thread's
 * seconds, or a negative value when a thread cannot start. */
static double fma_run(int n, int wide, float *check) {
  pthread_barrier_t start;
  pthread_t tid[MAX_THREADS];
  FmaJob job[MAX_THREADS];
  pthread_barrier_init(&start, NULL, (unsigned)n);
  int started = 0;
  for (int t = 1; t < n; t++) {
    job[t] = (FmaJob){&start, 0, 0, wide};
    if (pthread_create(&tid[t], NULL, fma_thread, &job[t])) break;
    started++;
  }
  if (started != n - 1) {
    /* the barrier can never open: report, do not hang (threads leak; we exit) */
    fprintf(stderr, "peak_fma: cannot start %d threads\n", n);
    return -1;
  }
  job[0] = (FmaJob){&start, 0, 0, wide};
  fma_thread(&job[0]);
  double worst = job[0].seconds;
  *check = job[0].check;
  for (int t = 1; t < n; t++) {
    pthread_join(tid[t], NULL);
    if (job[t].seconds > worst) worst = job[t].seconds;
    *check += job[t].check;
  }
  pthread_barrier_destroy(&start);
  return worst;
}

int main(int argc, char **argv) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    fprintf(stderr, "peak_fma: this CPU lacks AVX2 or FMA; nothing to measure\n");
    return 1;
  }
  int counts[MAX_THREADS], n_counts = 0, first = 1, wide = have_avx512f();
  if (argc > 1 && strcmp(argv[1], "--avx2") == 0) {
    wide = 0;
    first = 2;
  }
  if (argc == first) {
    counts[n_counts++] = 1;
    counts[n_counts++] = 2;
  }
  for (int i = first; i < argc && n_counts < MAX_THREADS; i++) {
    char *end;
    long n = strtol(argv[i], &end, 10);
    if (*end || n < 1 || n > MAX_THREADS) {
      fprintf(stderr, "peak_fma: thread count '%s' is not in 1..%d\n", argv[i], MAX_THREADS);
      return 1;
    }
    counts[n_counts++] = (int)n;
  }
  for (int c = 0; c < n_counts; c++) {
    double best = 0;
    float check = 0;
    for (int r = 0; r < REPS; r++) {
      double s = fma_run(counts[c], wide, &check);
      if (s < 0) return 1;
      if (best == 0 || s < best) best = s;
    }
    double flops = (double)counts[c] * (double)ITERS * ACC * (wide ? 16 : 8) * 2;
    printf("{\"threads\": %d, \"gflops\": %.2f, \"seconds\": %.4f, \"check\": %.3g, "
           "\"isa\": \"%s\"}\n",
           counts[c], flops / best * 1e-9, best, (double)check, wide ? "avx512f" : "avx2");
    fflush(stdout);
  }
  return 0;
}
