/* bench/passes/attn_blocks.c — what the tile pass's attention blocks buy:
 * rt_attention_flash (the flash-attention lowering's kernel) at bert-base
 * head dims (12 heads, dh = dv = 64, batch 1, self-attention, no mask) for
 * each (block_q, block_k) given, timed in interleaved rounds in this one
 * process (every setting gets a turn per round, so a noisy stretch of a
 * shared machine hits them alike); prints the median ms and GFLOP/s of
 * each (4 S^2 dh H flops: the two products).
 *
 *   attn_blocks S ROUNDS THREADS BQxBK [BQxBK ...]
 *
 * bench/passes/attn_blocks.sh builds it against build/libtfmc_rt.a and
 * runs the grid the README quotes. */
#include "runtime/rt_attention.h"
#include "runtime/rt_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s S ROUNDS THREADS BQxBK [BQxBK ...]\n", argv[0]);
    return 2;
  }
  int64_t s = atoll(argv[1]), h = 12, dh = 64;
  int rounds = atoi(argv[2]), threads = atoi(argv[3]), n = argc - 4;
  if (s < 1 || rounds < 1 || threads < 0 || n > 64) {
    fprintf(stderr, "attn_blocks: bad arguments\n");
    return 2;
  }
  int64_t bq[64], bk[64];
  for (int i = 0; i < n; i++)
    if (sscanf(argv[4 + i], "%ldx%ld", &bq[i], &bk[i]) != 2 || bq[i] < 1 || bk[i] < 1) {
      fprintf(stderr, "attn_blocks: '%s' is not BQxBK\n", argv[4 + i]);
      return 2;
    }
  int64_t ld = 3 * h * dh; /* q | k | v of one row side by side, as fuse-qkv leaves them */
  float *qkv = malloc((size_t)(s * ld) * sizeof *qkv), *out = malloc((size_t)(s * h * dh) * sizeof *out);
  double *ms = malloc((size_t)(rounds * n) * sizeof *ms);
  if (!qkv || !out || !ms)
    return 1;
  unsigned x = 12345;
  for (int64_t i = 0; i < s * ld; i++) {
    x = x * 1664525u + 1013904223u;
    qkv[i] = (float)((x >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
  RtPool *pool = rt_pool_create(threads);
  for (int r = -1; r < rounds; r++) /* round -1: warm-up, untimed */
    for (int i = 0; i < n; i++) {
      double t0 = now_ms();
      rt_attention_flash(pool, 1, h, s, s, dh, dh, 0.125f, qkv, ld, qkv + h * dh, ld,
                         qkv + 2 * h * dh, ld, s * ld, s * ld, NULL, 1, 1, out, bq[i], bk[i]);
      if (r >= 0)
        ms[i * rounds + r] = now_ms() - t0;
    }
  printf("S %ld, %ld heads of %ld, %d threads, median of %d interleaved rounds\n", (long)s,
         (long)h, (long)dh, threads, rounds);
  printf("%8s %8s %10s %9s\n", "block_q", "block_k", "ms", "GFLOP/s");
  for (int i = 0; i < n; i++) {
    qsort(ms + i * rounds, (size_t)rounds, sizeof *ms, cmp_double);
    double med = ms[i * rounds + rounds / 2];
    printf("%8ld %8ld %10.3f %9.1f\n", (long)bq[i], (long)bk[i], med,
           4.0 * (double)s * (double)s * (double)dh * (double)h / (med * 1e6));
  }
  rt_pool_destroy(pool);
  free(qkv), free(out), free(ms);
  return 0;
}
