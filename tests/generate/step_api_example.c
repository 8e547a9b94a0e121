/* tests/generate/step_api_example.c — the README's example of model.h's
 * step API (an emitted decoder or encoder_decoder project): greedy
 * decoding by hand, printing one id per line as the executable does.
 *   step_api_example WEIGHTS N ID...   (ids: the prompt, or the source;
 *                                        WEIGHTS "-": the embedded weights)
 * Built against an emitted project's libmodel.a by run_compiled.sh, which
 * checks it prints the golden ids too. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int32_t argmax(const float *x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return (int32_t)best;
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  int n_new = atoi(argv[2]), n = argc - 3;
  int32_t *ids = malloc((size_t)n * sizeof *ids);
  if (!ids) return 1;
  for (int i = 0; i < n; i++) ids[i] = (int32_t)atoi(argv[3 + i]);
  char err[512];
  /* the KV cache handed in by the caller (64-byte aligned) */
  void *cache = aligned_alloc(64, (tfmc_gen_cache_bytes() + 63) / 64 * 64);
  const char *weights = strcmp(argv[1], "-") == 0 ? NULL : argv[1];
  TfmcGen *g = cache ? tfmc_gen_create(weights, 1, cache, err, sizeof err) : NULL;
  if (!g) {
    fprintf(stderr, "%s\n", cache ? err : "out of memory");
    return 1;
  }
  const float *logits;
  int rc = 0;
  if (tfmc_gen_has_encoder()) { /* the ids are the source; the target starts at bos */
    int32_t bos = (int32_t)tfmc_gen_bos();
    rc = tfmc_gen_encode(g, ids, n, err, sizeof err) ||
         tfmc_gen_prefill(g, &bos, 1, &logits, err, sizeof err);
  } else {
    rc = tfmc_gen_prefill(g, ids, n, &logits, err, sizeof err);
  }
  for (int i = 0; !rc && i < n_new; i++) {
    int32_t tok = argmax(logits, tfmc_gen_vocab());
    printf("%d\n", tok);
    if (tok == tfmc_gen_eos() || tfmc_gen_position(g) >= tfmc_gen_max_len()) break;
    rc = i + 1 < n_new && tfmc_gen_step(g, tok, &logits, err, sizeof err);
  }
  if (rc) fprintf(stderr, "%s\n", err);
  tfmc_gen_destroy(g);
  free(cache);
  free(ids);
  return rc;
}
