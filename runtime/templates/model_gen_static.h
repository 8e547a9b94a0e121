/* model_gen.h - the step API of a decoder or encoder_decoder model compiled
 * by tfmc emit-c --static: the same for every such model (tfmc's
 * runtime/templates/model_gen_static.h), included by its model.h. For
 * hosts without an OS: no heap, threads, files, stdio or mutable global.
 *
 * ---- generation: the step API ----
 * The decoder step (and an encoder_decoder's encoder), planned for one
 * sequence at a time (batch 1), run on the calling thread in one
 * caller-provided memory region of TFMC_GEN_MEM_BYTES (model.h): its
 * activation arena, the KV cache of max_len positions and the step's
 * buffers. Weights: the packed image, as tfmc_model_init takes it (the
 * same image holds the forward pass's and the generation programs'
 * weights). A sequence: (encode the source,) prefill the prompt (or, for
 * an encoder_decoder, tfmc_gen_bos()), then one step per token, each
 * returning the next position's logits; the caller picks the token
 * (greedy: the argmax; sampling and beam search are the hosted project's,
 * not in the static build); reset starts a new sequence.
 *
 *     static unsigned char gen_mem[TFMC_GEN_MEM_BYTES];   // all the RAM it uses
 *     char err[128];
 *     TfmcGen *g = tfmc_gen_init(gen_mem, sizeof gen_mem, NULL, 0, err, sizeof err);
 *     if (!g) { report(err); return; }
 *     const float *logits;
 *     if (tfmc_gen_prefill(g, prompt, n_prompt, &logits, err, sizeof err)) ...
 *     for (int i = 0; i < 20; i++) {
 *       int32_t tok = argmax(logits, tfmc_gen_vocab());
 *       if (tok == tfmc_gen_eos() || tfmc_gen_position(g) >= tfmc_gen_max_len()) break;
 *       if (tfmc_gen_step(g, tok, &logits, err, sizeof err)) ...
 *     }
 *     tfmc_gen_reset(g);                                   // the next sequence
 *
 * An encoder_decoder (tfmc_gen_has_encoder()): tfmc_gen_encode(g, src, n,
 * ...) first, then tfmc_gen_prefill(g, &bos, 1, ...) with bos =
 * tfmc_gen_bos(), then steps. Ownership: the caller owns the region and
 * the image for as long as it uses the TfmcGen; there is nothing to free.
 * Two regions are two independent generators. */
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
size_t tfmc_gen_cache_bytes(void); /* the KV cache (part of TFMC_GEN_MEM_BYTES) */

/* Sets up generation in mem (mem_bytes >= TFMC_GEN_MEM_BYTES, any
 * alignment) with the packed weights image (image_bytes bytes; NULL for
 * the image linked in with --embed-weights, an error otherwise), checked
 * against this model (magic, layout, size, checksum). The cache starts
 * empty. Returns the generator (inside mem), or NULL with a message. */
TfmcGen *tfmc_gen_init(void *mem, size_t mem_bytes, const void *image, size_t image_bytes,
                       char *err, size_t errlen);
/* encoder_decoder: runs the encoder over src[0..n) (ids below its source
 * vocabulary; padding from its pad id) and resets the cache: the steps
 * after it translate this source. */
int tfmc_gen_encode(TfmcGen *g, const int32_t *src, int64_t n, char *err, size_t errlen);
/* Runs tokens[0..n) at the next n positions (P..P+n-1, P =
 * tfmc_gen_position(g)), appending their keys / values to the cache;
 * *logits: the last position's tfmc_gen_vocab() logits (inside the
 * region), valid until the next call. Refuses ids outside the vocabulary
 * and positions past tfmc_gen_max_len() (nothing runs then). */
int tfmc_gen_prefill(TfmcGen *g, const int32_t *tokens, int64_t n, const float **logits,
                     char *err, size_t errlen);
/* One token: tfmc_gen_prefill(g, &token, 1, ...). */
int tfmc_gen_step(TfmcGen *g, int32_t token, const float **logits, char *err, size_t errlen);
int64_t tfmc_gen_position(const TfmcGen *g); /* tokens in the cache */
void tfmc_gen_reset(TfmcGen *g);             /* a new sequence: the cache emptied */

#ifdef __cplusplus
}
#endif

#endif
