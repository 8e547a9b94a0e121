/* gen_api.c - model_gen.h's step API for the static build (tfmc emit-c
 * --static of a decoder or encoder_decoder; tfmc's
 * runtime/templates/api_gen_static.c, copied as the project's gen_api.c):
 * greedy-ready generation in one caller-provided memory region, weights
 * from the packed image in place (flash), on the calling thread. The loop
 * under it is the hosted one's: RtGenModel's ops and RtStepper
 * (runtime/rt_gen_model.h, rt_stepper.h, built with -DTFMC_STATIC), placed
 * by rt_gen_model_init_in into the region. What differs per model is data:
 * tfmc_gen_info (gen_info.c), tfmc_step_run (step.c), tfmc_encode_run
 * (encode.c), the sizes in model_config.h.
 *
 * The region, from its first 64-byte boundary:
 *     [TfmcGen, TFMC_GEN_HEADER_BYTES][arena][KV cache][step buffers]
 * each part 64-byte aligned, TFMC_GEN_*_BYTES of model_config.h rounded up
 * to 64; TFMC_GEN_MEM_BYTES (model.h) is their sum plus 64 for the
 * alignment. The arena serves the encoder and the step (never run at once).
 *
 * Invariants: no heap, no stdio, no mutable global, no trap on any input a
 * caller can pass: every failure is a return code and a message; a step
 * allocates nothing; the position only advances after a step that ran. */
#include "model_config.h" /* TFMC_EMBEDDED_WEIGHTS, TFMC_ENCODER, TFMC_GEN_*_BYTES */

#include "model.h"
#include "model_gen.h" /* model.h includes it too, in a generating project */

#include "runtime/rt_gen_model.h"

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

#define GEN_ALIGN 64
#define GEN_ROUND(n) (((n) + GEN_ALIGN - 1) / GEN_ALIGN * GEN_ALIGN)
#define GEN_ARENA_OFF GEN_ROUND(TFMC_GEN_HEADER_BYTES)
#define GEN_STATE_OFF (GEN_ARENA_OFF + GEN_ROUND(TFMC_GEN_ARENA_BYTES))
#define GEN_STEPPER_OFF (GEN_STATE_OFF + GEN_ROUND(TFMC_GEN_STATE_BYTES))
#define GEN_MEM_BYTES (GEN_ALIGN + GEN_STEPPER_OFF + GEN_ROUND(TFMC_GEN_STEPPER_BYTES))

/* model.h restates the region's size; C99 has no static_assert: a negative
 * array size stops the build when they differ */
#ifdef TFMC_GEN_MEM_BYTES
typedef char tfmc_gen_mem_bytes_is_the_layout[TFMC_GEN_MEM_BYTES == GEN_MEM_BYTES ? 1 : -1];
#endif

#define GEN_MAGIC 0x74666d67u /* "tfmg": a region tfmc_gen_init set up */

struct TfmcGen {
  uint32_t magic;
  int64_t position; /* tokens in the cache */
  RtGenModel m;     /* the programs, the image, the arena, the KV cache; m.st steps */
};
typedef char tfmc_gen_fits_its_header[sizeof(struct TfmcGen) <= TFMC_GEN_HEADER_BYTES ? 1 : -1];

int64_t tfmc_gen_max_len(void) { return rt_model_sym_max(tfmc_gen_info.step, "L"); }
int64_t tfmc_gen_vocab(void) { return tfmc_gen_info.step->outputs[0].dims[1].value; }
int64_t tfmc_gen_bos(void) { return tfmc_gen_info.bos; }
int64_t tfmc_gen_eos(void) { return tfmc_gen_info.eos; }
int tfmc_gen_has_encoder(void) { return tfmc_gen_info.encode != NULL; }
int64_t tfmc_gen_max_src(void) { return rt_model_sym_max(tfmc_gen_info.encode, "S"); }
size_t tfmc_gen_cache_bytes(void) { return (size_t)tfmc_gen_info.step->state_bytes; }

static int live(const TfmcGen *g) { return g && g->magic == GEN_MAGIC; }

TfmcGen *tfmc_gen_init(void *mem, size_t mem_bytes, const void *image, size_t image_bytes,
                       char *err, size_t errlen) {
  const RtGenInfo *gi = &tfmc_gen_info;
  if ((uint64_t)GEN_MEM_BYTES > (uint64_t)SIZE_MAX) {
    rt_errorf(err, errlen,
              "generation needs a memory region of %lld bytes, more than this target addresses",
              (long long)GEN_MEM_BYTES);
    return NULL;
  }
  if (!mem || mem_bytes < (size_t)GEN_MEM_BYTES) {
    rt_errorf(err, errlen, "generation needs a memory region of TFMC_GEN_MEM_BYTES = %lld bytes, "
                           "given %lld",
              (long long)GEN_MEM_BYTES, mem ? (long long)mem_bytes : 0LL);
    return NULL;
  }
  if (gi->step->arena_bytes > TFMC_GEN_ARENA_BYTES ||
      (gi->encode && gi->encode->arena_bytes > TFMC_GEN_ARENA_BYTES) ||
      gi->step->state_bytes > TFMC_GEN_STATE_BYTES) {
    rt_errorf(err, errlen, "model_config.h does not belong to this step.c (sizes differ)");
    return NULL;
  }
  if (!image) {
#if TFMC_EMBEDDED_WEIGHTS
    image = tfmc_weights_image;
    image_bytes = tfmc_weights_image_size;
#else
    rt_errorf(err, errlen, "model '%s' has no embedded weights: give the weights image",
              gi->step->name);
    return NULL;
#endif
  }
  if (rt_static_image_check(image, image_bytes, gi->weights, err, errlen)) return NULL;
  unsigned char *base = (unsigned char *)mem + (GEN_ALIGN - (uintptr_t)mem % GEN_ALIGN) % GEN_ALIGN;
  memset(base, 0, GEN_ARENA_OFF);
  TfmcGen *g = (TfmcGen *)(void *)base;
  if (rt_gen_model_init_in(&g->m, gi, tfmc_step_run, TFMC_ENCODE_RUN,
                           (const float *)(const void *)((const unsigned char *)image + 64),
                           base + GEN_ARENA_OFF, TFMC_GEN_STATE_BYTES ? base + GEN_STATE_OFF : NULL,
                           base + GEN_STEPPER_OFF, (size_t)TFMC_GEN_STEPPER_BYTES, err, errlen))
    return NULL;
  g->magic = GEN_MAGIC;
  return g;
}

int tfmc_gen_encode(TfmcGen *g, const int32_t *src, int64_t n, char *err, size_t errlen) {
  if (!live(g) || !src) return rt_errorf(err, errlen, "no model (tfmc_gen_init first) or source");
  if (!tfmc_gen_info.encode)
    return rt_errorf(err, errlen, "model '%s' is a decoder: it has no encoder",
                     tfmc_gen_info.step->name);
  if (rt_stepper_encode(&g->m.st, src, n, err, errlen)) return 1;
  tfmc_gen_reset(g);
  return 0;
}

int tfmc_gen_prefill(TfmcGen *g, const int32_t *tokens, int64_t n, const float **logits,
                     char *err, size_t errlen) {
  if (!live(g) || !tokens || !logits)
    return rt_errorf(err, errlen, "no model (tfmc_gen_init first), tokens or logits");
  if (n < 1 || g->position + n > g->m.st.max_len)
    return rt_errorf(err, errlen, "%lld tokens at position %lld do not fit max_len %lld",
                     (long long)n, (long long)g->position, (long long)g->m.st.max_len);
  if (tfmc_gen_info.encode && !g->m.st.encoded)
    return rt_errorf(err, errlen, "encode a source first (tfmc_gen_encode)");
  if (rt_stepper_step(&g->m.st, tokens, n, g->position, logits, err, errlen)) return 1;
  g->position += n;
  if (err && errlen) err[0] = '\0';
  return 0;
}

int tfmc_gen_step(TfmcGen *g, int32_t token, const float **logits, char *err, size_t errlen) {
  return tfmc_gen_prefill(g, &token, 1, logits, err, errlen);
}

int64_t tfmc_gen_position(const TfmcGen *g) { return live(g) ? g->position : 0; }

void tfmc_gen_reset(TfmcGen *g) {
  if (!live(g)) return;
  rt_stepper_reset(&g->m.st);
  g->position = 0;
}
