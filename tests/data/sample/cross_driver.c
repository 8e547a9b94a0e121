/* tests/data/sample/cross_driver.c — prints FNV-1a hashes of everything
 * rt_sample computes from fixed inputs: PCG32 outputs, rt_sample_exp/log
 * bits, sampled tokens over varied rows and options, beam search results.
 * tests/runtime/test_sample_cross.c builds it with every toolchain at hand
 * (native gcc/clang, aarch64 and s390x under qemu; C11 and GNU modes) and
 * requires the same lines everywhere. Inputs are made with integer
 * arithmetic and exact float operations only, so they are the same bits on
 * every target whatever the compiler contracts in this file. */
#include "runtime/rt_sample.h"

#include <stdio.h>
#include <string.h>

static unsigned long long h;
/* hashes a value's bytes least significant first: the same on big-endian */
static void mix(uint64_t v) {
  for (int i = 0; i < 8; i++) h = (h ^ ((v >> (8 * i)) & 255u)) * 1099511628211ULL;
}
static void mixd(double d) {
  uint64_t v;
  memcpy(&v, &d, sizeof v); /* doubles and uint64_t share byte order */
  mix(v);
}

int main(void) {
  RtRng g, r;
  rt_rng_seed(&g, 12345);
  h = 1469598103934665603ULL;
  for (int i = 0; i < 100000; i++) {
    uint32_t x = rt_rng_u32(&g);
    mix(x);
  }
  printf("rng %016llx\n", h);

  h = 1469598103934665603ULL;
  for (int i = 0; i < 200000; i++) {
    double x = (double)(int32_t)rt_rng_u32(&g) / 2097152.0; /* exact: [-1024, 1024) */
    double e = rt_sample_exp(x), l = rt_sample_log(e > 0 && e < 1e308 ? e : 1.0);
    mixd(e);
    mixd(l);
  }
  printf("explog %016llx\n", h);

  static float lg[4096];
  static double scratch[8192];
  char err[128];
  rt_rng_seed(&r, 42);
  h = 1469598103934665603ULL;
  for (int it = 0; it < 3000; it++) {
    int V = 1 + (int)(rt_rng_u32(&g) % 4096);
    for (int i = 0; i < V; i++) /* multiples of 1/64 in [-16, 16): exact */
      lg[i] = (float)((int)(rt_rng_u32(&g) % 2048) - 1024) / 64.0f;
    RtSampleOptions o = rt_sample_options_default();
    o.sample = 1;
    o.temperature = (double)(1 + rt_rng_u32(&g) % 40) / 16.0;
    o.top_k = rt_rng_u32(&g) % 3 ? 0 : (int64_t)(rt_rng_u32(&g) % 64);
    o.top_p = rt_rng_u32(&g) % 2 ? 1.0 : (double)(1 + rt_rng_u32(&g) % 1000) / 1000.0;
    int64_t t = -1;
    if (rt_sample_token(lg, V, &o, &r, scratch, &t, err, sizeof err)) t = -2;
    mix((uint64_t)t);
  }
  printf("tokens %016llx\n", h);

  h = 1469598103934665603ULL;
  enum { K = 4, V = 64, MAXN = 20 };
  RtBeam *bs;
  if (rt_beam_create(&bs, K, V, MAXN, 3, 0.75, err, sizeof err)) return 1;
  int n_live = 1, done = 0;
  int64_t last[K] = {0}, parent[K], token[K];
  static float rows[K * V];
  for (int step = 0; !done; step++) {
    for (int b = 0; b < n_live; b++)
      for (int v = 0; v < V; v++) /* a fixed function of (step, last token, v) */
        rows[b * V + v] =
            (float)((int)((step * 131 + last[b] * 31 + v * 17 + v * v * 7) % 257) - 128) / 32.0f;
    if (rt_beam_step(bs, rows, parent, token, &n_live, &done, err, sizeof err)) return 1;
    for (int b = 0; b < K; b++) mix((uint64_t)parent[b]), mix((uint64_t)token[b]);
    for (int b = 0; b < n_live; b++) last[b] = token[b];
  }
  for (int i = 0; i < rt_beam_n_finished(bs); i++) {
    const int64_t *toks;
    int64_t len;
    double score;
    rt_beam_best(bs, i, &toks, &len, &score);
    for (int64_t j = 0; j < len; j++) mix((uint64_t)toks[j]);
    mixd(score);
  }
  rt_beam_destroy(bs);
  printf("beam %016llx\n", h);
  return 0;
}
