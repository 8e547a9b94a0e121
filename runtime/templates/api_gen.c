/* gen_api.c - model.h's step API (tfmc_gen_*) over the runtime's compiled
 * generation model (runtime/rt_gen_model.h): the same for every decoder and
 * encoder_decoder model (tfmc's runtime/templates/api_gen.c, copied as it
 * is by tfmc emit-c); what differs per model is data: tfmc_gen_info
 * (gen_info.c) and the programs tfmc_step_run (step.c) and tfmc_encode_run
 * (encode.c). Invariants: every failure is a message, never an exit; a step
 * allocates nothing; the position only advances after a step that ran. */
#include "model_config.h" /* TFMC_EMBEDDED_WEIGHTS, TFMC_ENCODER */

#include "model.h"
#include "model_gen.h" /* model.h includes it too, in a generating project */

#include "runtime/rt_gen_model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const RtGenInfo tfmc_gen_info;
void tfmc_step_run(const RtRunArgs *args);
#if TFMC_ENCODER
void tfmc_encode_run(const RtRunArgs *args);
#define TFMC_ENCODE_RUN tfmc_encode_run
#else
#define TFMC_ENCODE_RUN NULL
#endif
#if TFMC_EMBEDDED_WEIGHTS
extern const unsigned char tfmc_weights_image[];
extern const size_t tfmc_weights_image_size;
#endif

struct TfmcGen {
  RtGenModel m;     /* programs, weights, pool, arenas, KV cache; m.st steps */
  int64_t position; /* tokens in the cache */
};

static int gen_fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return 1;
}

int64_t tfmc_gen_max_len(void) { return rt_model_sym_max(tfmc_gen_info.step, "L"); }
int64_t tfmc_gen_vocab(void) { return tfmc_gen_info.step->outputs[0].dims[1].value; }
int64_t tfmc_gen_bos(void) { return tfmc_gen_info.bos; }
int64_t tfmc_gen_eos(void) { return tfmc_gen_info.eos; }
int tfmc_gen_has_encoder(void) { return tfmc_gen_info.encode != NULL; }
int64_t tfmc_gen_max_src(void) { return rt_model_sym_max(tfmc_gen_info.encode, "S"); }
size_t tfmc_gen_cache_bytes(void) { return (size_t)tfmc_gen_info.step->state_bytes; }

TfmcGen *tfmc_gen_create(const char *weights_path, int n_threads, void *cache, char *err,
                         size_t errlen) {
  if (n_threads < 0 || n_threads > 256) {
    gen_fail(err, errlen, "n_threads must be in 0..256 (0: one per CPU), not %d", n_threads);
    return NULL;
  }
  TfmcGen *g = calloc(1, sizeof *g);
  if (!g) {
    gen_fail(err, errlen, "out of memory");
    return NULL;
  }
  const void *image = NULL;
  size_t image_len = 0;
  if (!weights_path) {
#if TFMC_EMBEDDED_WEIGHTS
    image = tfmc_weights_image;
    image_len = tfmc_weights_image_size;
#else
    gen_fail(err, errlen, "model '%s' has no embedded weights: give the weights file",
             tfmc_gen_info.step->name);
    free(g);
    return NULL;
#endif
  }
  if (rt_gen_model_open(&g->m, &tfmc_gen_info, tfmc_step_run, TFMC_ENCODE_RUN, weights_path,
                        image, image_len, n_threads, cache, err, errlen)) {
    free(g);
    return NULL;
  }
  return g;
}

int tfmc_gen_encode(TfmcGen *g, const int32_t *src, int64_t n, char *err, size_t errlen) {
  if (!g || !src) return gen_fail(err, errlen, "no model or source");
  if (!tfmc_gen_info.encode)
    return gen_fail(err, errlen, "model '%s' is a decoder: it has no encoder",
                    tfmc_gen_info.step->name);
  if (rt_stepper_encode(&g->m.st, src, n, err, errlen)) return 1;
  tfmc_gen_reset(g);
  return 0;
}

int tfmc_gen_prefill(TfmcGen *g, const int32_t *tokens, int64_t n, const float **logits,
                     char *err, size_t errlen) {
  if (!g || !tokens || !logits) return gen_fail(err, errlen, "no model, tokens or logits");
  if (n < 1 || g->position + n > g->m.st.max_len)
    return gen_fail(err, errlen, "%lld tokens at position %lld do not fit max_len %lld",
                    (long long)n, (long long)g->position, (long long)g->m.st.max_len);
  if (tfmc_gen_info.encode && !g->m.st.encoded)
    return gen_fail(err, errlen, "encode a source first (tfmc_gen_encode)");
  if (rt_stepper_step(&g->m.st, tokens, n, g->position, logits, err, errlen)) return 1;
  g->position += n;
  return 0;
}

int tfmc_gen_step(TfmcGen *g, int32_t token, const float **logits, char *err, size_t errlen) {
  return tfmc_gen_prefill(g, &token, 1, logits, err, errlen);
}

int tfmc_gen_attention(const TfmcGen *g, const float **probs, int64_t *heads, int64_t *keys) {
  if (!g || !probs || !heads || !keys || g->position == 0) return 1;
  if (rt_stepper_attention(&g->m.st, probs, keys)) return 1;
  *heads = g->m.st.attn_heads;
  return 0;
}

int64_t tfmc_gen_position(const TfmcGen *g) { return g ? g->position : 0; }

void tfmc_gen_reset(TfmcGen *g) {
  if (!g) return;
  rt_stepper_reset(&g->m.st);
  g->position = 0;
}

void tfmc_gen_destroy(TfmcGen *g) {
  if (!g) return;
  rt_gen_model_close(&g->m);
  free(g);
}
