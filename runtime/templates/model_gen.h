/* model_gen.h - the step API of a decoder or encoder_decoder model compiled
 * by tfmc emit-c: the same for every such model (tfmc's
 * runtime/templates/model_gen.h), included by its model.h.
 *
 * ---- generation: the step API ----
 * A TfmcGen holds the compiled decoder step (and an encoder_decoder's
 * encoder), the weights, a thread pool, the activation arenas and the KV
 * cache, all sized at compile time (tfmc_gen_cache_bytes()); nothing is
 * allocated per token. The cache is owned by the TfmcGen, or handed in by
 * the caller. A sequence: (encode the source,) prefill the prompt (or, for
 * an encoder_decoder, tfmc_gen_bos()), then one step per token, each
 * returning the next position's logits; reset starts a new sequence.
 *
 *     char err[512];
 *     TfmcGen *g = tfmc_gen_create(weights_path, 0, NULL, err, sizeof err);
 *     if (!g) { fprintf(stderr, "%s\n", err); return 1; }
 *     const float *logits;
 *     int32_t tok = ...;                                  // greedy decoding:
 *     if (tfmc_gen_prefill(g, prompt, n_prompt, &logits, err, sizeof err)) ...
 *     for (int i = 0; i < 20; i++) {
 *       tok = argmax(logits, tfmc_gen_vocab());          // the caller's choice
 *       if (tok == tfmc_gen_eos()) break;
 *       if (tfmc_gen_step(g, tok, &logits, err, sizeof err)) ...   // stops at max_len
 *     }
 *     tfmc_gen_reset(g);                                  // the next sequence
 *     tfmc_gen_destroy(g);
 *
 * An encoder_decoder (tfmc_gen_has_encoder()): tfmc_gen_encode(g, src, n,
 * ...) first, then tfmc_gen_prefill(g, &bos, 1, ...) with bos =
 * tfmc_gen_bos(), then steps. The executable (main.c) runs the same loop
 * with sampling and beam search: EXE --generate N --help. */
#ifndef TFMC_MODEL_GEN_H
#define TFMC_MODEL_GEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TfmcGen TfmcGen;

int64_t tfmc_gen_max_len(void);  /* positions the KV cache holds (prompt + generated) */
int64_t tfmc_gen_vocab(void);    /* logits per position; ids fed are below it */
int64_t tfmc_gen_bos(void);      /* the spec's ids; -1 when it has none */
int64_t tfmc_gen_eos(void);
int tfmc_gen_has_encoder(void);  /* 1: an encoder_decoder (tfmc_gen_encode first) */
int64_t tfmc_gen_max_src(void);  /* an encoder_decoder's longest source; 0 otherwise */
size_t tfmc_gen_cache_bytes(void); /* the KV cache (the step's state) */

/* Loads the model for generation. weights_path: the packed-weights file
 * (the same one tfmc_model_create takes), or NULL for embedded weights.
 * n_threads as tfmc_model_create. cache: NULL, the TfmcGen allocates the
 * KV cache; or the caller's tfmc_gen_cache_bytes() bytes, 64-byte aligned,
 * which it must keep until tfmc_gen_destroy (zeroed here). Returns NULL
 * with a message on failure; the caller owns the result. */
TfmcGen *tfmc_gen_create(const char *weights_path, int n_threads, void *cache, char *err,
                         size_t errlen);
/* encoder_decoder: runs the encoder over src[0..n) (ids below its source
 * vocabulary; padding from its pad id) and resets the cache: the steps
 * after it translate this source. */
int tfmc_gen_encode(TfmcGen *g, const int32_t *src, int64_t n, char *err, size_t errlen);
/* Runs tokens[0..n) at the next n positions (P..P+n-1, P =
 * tfmc_gen_position(g)), appending their keys / values to the cache;
 * *logits: the last position's tfmc_gen_vocab() logits, valid until the
 * next call. Refuses ids outside the vocabulary and positions past
 * tfmc_gen_max_len() (nothing runs then). */
int tfmc_gen_prefill(TfmcGen *g, const int32_t *tokens, int64_t n, const float **logits,
                     char *err, size_t errlen);
/* One token: tfmc_gen_prefill(g, &token, 1, ...). */
int tfmc_gen_step(TfmcGen *g, int32_t token, const float **logits, char *err, size_t errlen);
/* After a prefill or step of a project emitted with --attention
 * decoder.N[.cross]: *probs points at that layer's attention
 * probabilities for the step's last position (the one whose logits came
 * back), [*heads, *keys] row-major (keys: the positions so far, or the
 * source's for cross-attention), valid until the next call. Returns 0, or
 * 1 (emitted without --attention, or no step has run). */
int tfmc_gen_attention(const TfmcGen *g, const float **probs, int64_t *heads, int64_t *keys);
int64_t tfmc_gen_position(const TfmcGen *g); /* tokens in the cache */
void tfmc_gen_reset(TfmcGen *g);             /* a new sequence: the cache emptied */
void tfmc_gen_destroy(TfmcGen *g);           /* NULL is fine */

#ifdef __cplusplus
}
#endif

#endif
