/* bench/gemm/gemm_bench.c — GFLOP/s of y[M,N] = x[M,K] w[N,K]^T + bias at
 * bert-base and gpt2 shapes, through tfmc's rt_linear or straight through
 * OpenBLAS, one JSON line per shape (bench/gemm/run.sh runs it once per
 * configuration, interleaved, and tabulates medians).
 *
 *   gemm_bench tfmc     [--threads T] [--quick] [--label L]   rt_linear on a pool of T
 *       threads with the lowering's default policy; backend and kernels as
 *       the runtime chooses them (TFMC_GEMM, TFMC_GEMM_ISA)
 *   gemm_bench packed   [--threads T] [--quick] [--label L]   rt_linear_packed on weights
 *       packed once by rt_gemm_pack (what the pack-weights pass compiles to)
 *   gemm_bench bf16     [--threads T] [--quick] [--label L]   rt_linear_packed_bf16 on
 *       weights packed once by rt_gemm_pack_bf16 (--weights-dtype bf16)
 *   gemm_bench int8     [--threads T] [--quick] [--label L]   rt_linear_packed_i8 on
 *       weights packed once by rt_gemm_pack_i8 (--weights-dtype int8)
 *   gemm_bench openblas [--threads T] [--quick] [--label L]   cblas_sgemm (cblas_sgemv
 *       for M = 1) from libopenblas.so.0, its own T threads, the core type
 *       its OPENBLAS_CORETYPE and CPU detection give (printed)
 *
 * --blocks MC,NC,KC (tfmc, packed, bf16, int8): rt_linear's cache blocks,
 * as the tile pass writes them into a model's calls (bench/gemm/run.sh
 * passes the pass's choice for this machine); without it, rt_linear's
 * defaults (rt_gemm.h; the lowering writes the same). The backend field
 * names them.
 *
 * Shapes: M in {1, 8, 128, 1024} x (N, K) in {(768, 768) attention out,
 * (2304, 768) gpt2 QKV, (3072, 768) FFN up, (768, 3072) FFN down, (50257,
 * 768) gpt2 LM head}; --quick drops M = 1024 and the LM head at M >= 128.
 * Each line: {"label" (L, default the mode), "mode", "backend", "m", "n", "k", "seconds" (median per
 * call), "gflops", "weight_gbps" (bytes of w / seconds), "best_gflops"
 * (the fastest call: on a loaded machine the least disturbed)}; a last line
 * {"others_busy_cores"} says how many cores the rest of the machine kept
 * busy meanwhile (/proc/stat minus this process's CPU time).
 *
 * So that small-M rows measure memory, not cache: the weights rotate
 * through enough copies to exceed 256 MiB (the L3 here is 32 MiB), as a
 * model's layers do. Each shape: one warm-up call per copy, then calls
 * until 0.4 s and at least 5 calls; the median call time is reported. */
#define _GNU_SOURCE
#include "runtime/rt_gemm.h"
#include "runtime/rt_pool.h"
#include "runtime/rt_weights.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <time.h>

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
typedef void (*SgemmFn)(int, int, int, int, int, int, float, const float *, int, const float *,
                        int, float, float *, int);
typedef void (*SgemvFn)(int, int, int, int, float, const float *, int, const float *, int, float,
                        float *, int);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* busy and total jiffies of all CPUs (steal counts as busy) */
static void proc_stat(double *busy, double *total) {
  unsigned long long v[10] = {0};
  FILE *f = fopen("/proc/stat", "r");
  *busy = *total = 0;
  if (!f)
    return;
  if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
             &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]) >= 8) {
    for (int i = 0; i < 8; i++)
      *total += (double)v[i];
    *busy = *total - (double)v[3] - (double)v[4]; /* minus idle and iowait */
  }
  fclose(f);
}

static double self_cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

typedef struct Blas {
  SgemmFn sgemm;
  SgemvFn sgemv;
  char core[64];
} Blas;

static int blas_open(Blas *b, int threads) {
  void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "gemm_bench: cannot load libopenblas.so.0: %s\n", dlerror());
    return 1;
  }
  void *sg = dlsym(h, "cblas_sgemm"), *sv = dlsym(h, "cblas_sgemv");
  void *st = dlsym(h, "openblas_set_num_threads"), *cn = dlsym(h, "openblas_get_corename");
  if (!sg || !sv) {
    fprintf(stderr, "gemm_bench: libopenblas.so.0 has no cblas_sgemm/cblas_sgemv\n");
    return 1;
  }
  memcpy(&b->sgemm, &sg, sizeof sg);
  memcpy(&b->sgemv, &sv, sizeof sv);
  if (st) {
    void (*set)(int);
    memcpy(&set, &st, sizeof st);
    set(threads);
  }
  snprintf(b->core, sizeof b->core, "unknown");
  if (cn) {
    char *(*core)(void);
    memcpy(&core, &cn, sizeof cn);
    snprintf(b->core, sizeof b->core, "%s", core());
  }
  return 0;
}

static float *filled(size_t n, unsigned seed) {
  float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
  if (!p) {
    fprintf(stderr, "gemm_bench: out of memory (%zu floats)\n", n);
    exit(1);
  }
  for (size_t i = 0; i < n; i++)
    p[i] = (float)((i * 2654435761u + seed) % 2001) * 1e-3f - 1.0f;
  return p;
}

int main(int argc, char **argv) {
  long long mc = 0, nc = 0, kc = 0; /* below 1: rt_linear's defaults */
  int threads = 2, quick = 0, use_blas = 0, use_packed = 0;
  int64_t only_m = 0, only_n = 0, only_k = 0;
  const char *label = argc > 1 ? argv[1] : "";
  if (argc < 2 || (strcmp(argv[1], "tfmc") != 0 && strcmp(argv[1], "openblas") != 0 &&
                   strcmp(argv[1], "packed") != 0 && strcmp(argv[1], "bf16") != 0 &&
                   strcmp(argv[1], "int8") != 0)) {
    fprintf(stderr, "usage: gemm_bench tfmc|packed|bf16|int8|openblas [--threads T] [--quick] [--label L] "
                    "[--shape MxNxK] [--blocks MC,NC,KC]\n");
    return 2;
  }
  use_blas = strcmp(argv[1], "openblas") == 0;
  use_packed = strcmp(argv[1], "packed") == 0 ? 1
               : strcmp(argv[1], "bf16") == 0 ? 2
               : strcmp(argv[1], "int8") == 0 ? 3
                                              : 0;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--label") == 0 && i + 1 < argc)
      label = argv[++i];
    else if (strcmp(argv[i], "--blocks") == 0 && i + 1 < argc) {
      char tail;
      if (sscanf(argv[++i], "%lld,%lld,%lld%c", &mc, &nc, &kc, &tail) != 3 || mc < 1 || nc < 1 ||
          kc < 1) {
        fprintf(stderr, "gemm_bench: --blocks wants MC,NC,KC (positive integers)\n");
        return 2;
      }
    } else if (strcmp(argv[i], "--quick") == 0)
      quick = 1;
    else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
      long long a, b, c;
      if (sscanf(argv[++i], "%lldx%lldx%lld", &a, &b, &c) != 3 || a < 1 || b < 1 || c < 1) {
        fprintf(stderr, "gemm_bench: --shape wants MxNxK\n");
        return 2;
      }
      only_m = a, only_n = b, only_k = c;
    }
    else {
      fprintf(stderr, "gemm_bench: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (threads < 1)
    threads = 1;
  Blas blas = {0};
  RtPool *pool = NULL;
  char backend[200];
  if (use_blas) {
    if (blas_open(&blas, threads))
      return 1;
    snprintf(backend, sizeof backend, "openblas core %s", blas.core);
  } else {
    if (mc > 0) /* --blocks gives all three */
      snprintf(backend, sizeof backend, "%s; blocks mc=%lld nc=%lld kc=%lld", rt_gemm_backend(), mc,
               nc, kc); /* before any thread */
    else
      snprintf(backend, sizeof backend, "%s; rt_linear's default blocks", rt_gemm_backend());
    pool = rt_pool_create(threads);
  }
  static const int64_t ms[] = {1, 8, 128, 1024};
  static const int64_t nks[][2] = {{768, 768}, {2304, 768}, {3072, 768}, {768, 3072}, {50257, 768}};
  double busy0, total0, self0 = self_cpu_seconds();
  proc_stat(&busy0, &total0);
  for (size_t s = 0; s < sizeof nks / sizeof *nks; s++)
    for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
      int64_t m = ms[mi], n = nks[s][0], k = nks[s][1];
      if (only_m && (s > 0 || mi > 0))
        continue;
      if (only_m)
        m = only_m, n = only_n, k = only_k;
      else if (quick && (m == 1024 || (n == 50257 && m >= 128)))
        continue;
      size_t wfloats = (size_t)(n * k); /* the f32 weights' size */
      size_t wbytes = use_packed == 3 ? (size_t)rt_gemm_packed_i8_floats(n, k) * 4
                      : wfloats * (use_packed == 2 ? 2 : 4); /* what a call streams */
      int copies = (int)((256u << 20) / wbytes) + 1;
      /* the copies in one region on transparent huge pages, as a model's
       * weights are (the JIT's packed block, a weights file's mapping:
       * rt_weights_advise_huge), for every configuration alike */
      size_t held = 4 * (size_t)(use_packed == 3   ? rt_gemm_packed_i8_floats(n, k)
                                 : use_packed == 2 ? rt_gemm_packed_bf16_floats(n, k)
                                 : use_packed      ? rt_gemm_packed_floats(n, k)
                                                   : (int64_t)wfloats);
      size_t stride = (held + 63) / 64 * 64;
      char *region = aligned_alloc(64, stride * (size_t)copies);
      float **w = malloc(sizeof *w * (size_t)copies);
      if (!region || !w) {
        fprintf(stderr, "gemm_bench: out of memory (%d copies of %zu bytes)\n", copies, wbytes);
        return 1;
      }
      rt_weights_advise_huge(region, stride * (size_t)copies);
      for (int c = 0; c < copies; c++) {
        w[c] = (float *)(region + stride * (size_t)c);
        float *src = filled(wfloats, 7u * (unsigned)c + 1);
        if (use_packed == 3) /* packed once, as the pack-weights pass does */
          rt_gemm_pack_i8(n, k, src, w[c]);
        else if (use_packed == 2)
          rt_gemm_pack_bf16(n, k, src, w[c]);
        else if (use_packed)
          rt_gemm_pack(n, k, src, w[c]);
        else
          memcpy(w[c], src, wfloats * sizeof(float));
        free(src);
      }
      float *x = filled((size_t)(m * k), 3), *bias = filled((size_t)n, 5);
      float *y = filled((size_t)(m * n), 9);
      double times[4096];
      int calls = 0;
      double t_all = 0;
      for (int it = -copies; calls < (int)(sizeof times / sizeof *times); it++) {
        const float *wc = w[(it + copies) % copies];
        double t0 = now();
        if (use_packed == 3) {
          rt_linear_packed_i8(pool, m, n, k, x, k, wc, bias, y, n, 0, 1.0f, NULL, 0, mc, nc, kc,
                              (int64_t)1 << 17, (int64_t)1 << 23);
        } else if (use_packed == 2) {
          rt_linear_packed_bf16(pool, m, n, k, x, k, wc, bias, y, n, 0, 1.0f, NULL, 0, mc, nc, kc,
                                (int64_t)1 << 17, (int64_t)1 << 23);
        } else if (use_packed) {
          rt_linear_packed(pool, m, n, k, x, k, wc, bias, y, n, 0, 1.0f, NULL, 0, mc, nc, kc,
                           (int64_t)1 << 17, (int64_t)1 << 23);
        } else if (!use_blas) {
          rt_linear(pool, m, n, k, x, k, wc, bias, y, n, 0, 1.0f, NULL, 0, mc, nc, kc,
                    (int64_t)1 << 17, (int64_t)1 << 23);
        } else {
          memcpy(y, bias, sizeof(float) * (size_t)n); /* y = bias, then y += x w^T */
          for (int64_t r = 1; r < m; r++)
            memcpy(y + r * n, bias, sizeof(float) * (size_t)n);
          if (m == 1)
            blas.sgemv(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, (int)n, (int)k, 1.0f, wc, (int)k, x, 1,
                       1.0f, y, 1);
          else
            blas.sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS, (int)m, (int)n, (int)k, 1.0f,
                       x, (int)k, wc, (int)k, 1.0f, y, (int)n);
        }
        double dt = now() - t0;
        if (it < 0)
          continue; /* warm-up: every copy once */
        times[calls++] = dt;
        t_all += dt;
        if (t_all > 0.4 && calls >= 5)
          break;
      }
      qsort(times, (size_t)calls, sizeof *times, cmp_double);
      double med = times[calls / 2];
      printf("{\"label\": \"%s\", \"mode\": \"%s\", \"backend\": \"%s\", \"threads\": %d, \"m\": %lld, \"n\": %lld, "
             "\"k\": %lld, \"calls\": %d, \"seconds\": %.6g, \"gflops\": %.2f, "
             "\"weight_gbps\": %.2f, \"best_gflops\": %.2f}\n",
             label, argv[1], backend, threads, (long long)m, (long long)n, (long long)k, calls, med,
             2.0 * (double)m * (double)n * (double)k / med * 1e-9,
             (double)wbytes / med * 1e-9,
             2.0 * (double)m * (double)n * (double)k / times[0] * 1e-9);
      fflush(stdout);
      free(region);
      free(w);
      free(x);
      free(bias);
      free(y);
    }
  double busy1, total1, self1 = self_cpu_seconds();
  proc_stat(&busy1, &total1);
  double hz = (double)sysconf(_SC_CLK_TCK), wall_cores = (total1 - total0) / hz;
  int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  double others = wall_cores > 0 ? ((busy1 - busy0) / hz - (self1 - self0)) / (wall_cores / ncpu)
                                 : 0;
  printf("{\"label\": \"%s\", \"mode\": \"%s\", \"backend\": \"%s\", "
         "\"others_busy_cores\": %.2f}\n",
         label, argv[1], backend, others < 0 ? 0 : others);
  rt_pool_destroy(pool);
  return 0;
}
