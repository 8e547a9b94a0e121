/* bench/backends/matmul_sum.c — the matmuls of one bert-base forward pass
 * (seq S, batch 1) through the runtime's GEMM entry alone (rt_linear:
 * OpenBLAS, single-threaded inside tfmc's pool), so the compiled model can
 * be compared with the time its matmuls alone take.
 * usage: matmul_sum [S] [RUNS] */
#include "runtime/rt_gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* rt_linear's split policy as the lowering passes it by default
 * (LowerLoopsOptions.linear_task_macs / linear_split_macs, passes/passes.h) */
#define TASK_MACS ((int64_t)1 << 17)
#define SPLIT_MACS ((int64_t)1 << 23)
#define LINEAR(m, n, k, ldx, ldy) \
  rt_linear(pool, m, n, k, x, ldx, w, b, y, ldy, 0, 1.0f, NULL, 0, 128, 2016, 384, TASK_MACS, SPLIT_MACS)

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int64_t s = argc > 1 ? atoll(argv[1]) : 128;
  int runs = argc > 2 ? atoi(argv[2]) : 7;
  if (s < 1 || runs < 1 || runs > 1000) return 2;
  const char *backend = rt_gemm_backend(); /* before the pool's threads */
  RtPool *pool = rt_pool_create(0);
  float *x = calloc((size_t)(s * 3072), 4), *y = calloc((size_t)(s * 3072), 4);
  float *w = calloc(3072 * 768, 4), *b = calloc(3072, 4);
  double *ms = calloc((size_t)runs, sizeof *ms);
  if (!x || !y || !w || !b || !ms) return 1;
  for (int i = 0; i < 3072 * 768; i++) w[i] = (float)(i % 7) * 0.01f;
  for (int64_t i = 0; i < s * 3072; i++) x[i] = (float)(i % 5) * 0.1f;
  for (int r = -1; r < runs; r++) { /* one warm-up */
    double t0 = now_ms();
    for (int l = 0; l < 12; l++) {
      for (int k = 0; k < 4; k++) LINEAR(s, 768, 768, 768, 768); /* q k v o */
      LINEAR(s, 3072, 768, 768, 3072);                            /* ffn up */
      LINEAR(s, 768, 3072, 3072, 768);                            /* ffn down */
    }
    LINEAR(1, 768, 768, 768, 768); /* pooler */
    LINEAR(1, 2, 768, 768, 2);     /* classifier */
    if (r >= 0) ms[r] = now_ms() - t0;
  }
  qsort(ms, (size_t)runs, sizeof *ms, cmp);
  printf("timing: backend matmuls-only (%s), compile 0.0 ms, run median %.3f ms (min %.3f, max %.3f) over %d runs\n",
         backend, runs % 2 ? ms[runs / 2] : (ms[runs / 2 - 1] + ms[runs / 2]) / 2, ms[0], ms[runs - 1], runs);
  rt_pool_destroy(pool);
  return 0;
}
