/* tests/generate/step_api_attention.c — model.h's tfmc_gen_attention on
 * a project emitted with --attention LAYER: greedy decoding by hand, each
 * step's attention row (the probabilities that chose the token) held to a
 * reference attention [1,H,N,K] (a safetensors file: pytorch-seq2seq's
 * translate_sentence for the seq2seq golden) within 1e-4 + 1e-4|ref|.
 *   step_api_attention WEIGHTS N REF.safetensors ID...   (ids: the source)
 * Prints "ok: N rows" and exits 0, or names the first difference and
 * exits 1. Built against an emitted project by run_compiled.sh. */
#include "model.h"
#include "runtime/rt_safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc < 5) return 2;
  int n_new = atoi(argv[2]), n = argc - 4;
  int32_t *ids = malloc((size_t)n * sizeof *ids);
  char err[512];
  RtSafetensors *st = NULL;
  if (!ids || rt_st_open(argv[3], &st, err, sizeof err)) {
    fprintf(stderr, "%s\n", ids ? err : "out of memory");
    return 1;
  }
  const RtStTensor *t = rt_st_find(st, "attention");
  float *ref = t && t->rank == 4 ? malloc((size_t)rt_st_numel(t) * sizeof *ref) : NULL;
  if (!ref || rt_st_read_f32(t, ref, err, sizeof err)) {
    fprintf(stderr, "%s: no attention [1,H,N,K]\n", argv[3]);
    return 1;
  }
  int64_t H = t->shape[1], N = t->shape[2], K = t->shape[3];
  for (int i = 0; i < n; i++) ids[i] = (int32_t)atoi(argv[4 + i]);
  TfmcGen *g = tfmc_gen_create(argv[1], 1, NULL, err, sizeof err);
  const float *logits, *probs;
  int64_t heads, keys, rows = 0;
  int32_t bos = (int32_t)tfmc_gen_bos();
  int rc = !g || tfmc_gen_encode(g, ids, n, err, sizeof err) ||
           tfmc_gen_prefill(g, &bos, 1, &logits, err, sizeof err);
  for (int i = 0; !rc && i < n_new; i++) {
    if (tfmc_gen_attention(g, &probs, &heads, &keys) || heads != H || keys != K || rows >= N) {
      fprintf(stderr, "step %d: no attention row of [%lld, %lld] (%lld of %lld rows)\n", i,
              (long long)H, (long long)K, (long long)rows, (long long)N);
      return 1;
    }
    for (int64_t h = 0; h < H; h++)
      for (int64_t j = 0; j < K; j++) {
        float r = ref[(h * N + rows) * K + j], p = probs[h * K + j];
        if (!(fabsf(p - r) <= 1e-4f + 1e-4f * fabsf(r))) {
          fprintf(stderr, "row %lld head %lld key %lld: %.7g, reference %.7g\n", (long long)rows,
                  (long long)h, (long long)j, p, r);
          return 1;
        }
      }
    rows++;
    int32_t tok = 0;
    for (int64_t v = 1; v < tfmc_gen_vocab(); v++)
      if (logits[v] > logits[tok]) tok = (int32_t)v;
    if (tok == tfmc_gen_eos() || tfmc_gen_position(g) >= tfmc_gen_max_len()) break;
    rc = i + 1 < n_new && tfmc_gen_step(g, tok, &logits, err, sizeof err);
  }
  if (rc) fprintf(stderr, "%s\n", g ? err : "no model");
  if (!rc && rows != N) fprintf(stderr, "%lld rows, the reference has %lld\n", (long long)rows, (long long)N);
  else if (!rc) printf("ok: %lld rows\n", (long long)rows);
  tfmc_gen_destroy(g);
  rt_st_close(st);
  free(ref);
  free(ids);
  return rc || rows != N;
}
