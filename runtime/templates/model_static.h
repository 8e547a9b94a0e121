/* The C API of a model compiled by tfmc emit-c --static: the same for every
 * model (tfmc's runtime/templates/model_static.h; an emitted model.h is a
 * description of its model and its memory, TFMC_MEM_BYTES among it,
 * followed by this file as it is). For hosts without an OS: no heap, no
 * threads, no files, no stdio, no mutable global.
 *
 * Example:
 *     static unsigned char mem[TFMC_MEM_BYTES];  // all the RAM a model uses
 *     char err[128];
 *     TfmcModel *m = tfmc_model_init(mem, sizeof mem, NULL, 0, err, sizeof err);
 *     if (!m) { report(err); return; }
 *     int64_t dims[TFMC_MAX_RANK] = {...};      // one value per dimension
 *     const void *inputs[] = {...};             // per input, as listed above
 *     float *outputs[] = {...};                 // tfmc_model_output_numel each
 *     if (tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err))
 *       report(err);
 *
 * Memory: everything a run needs beyond its inputs, outputs and weights
 * (the activation arena, the state kept between runs, the masks derived
 * from ids) lives in the one region the caller hands to tfmc_model_init,
 * TFMC_MEM_BYTES bytes at any address; the TfmcModel returned points into
 * it. Two regions make two independent models. Weights: the packed image
 * (the NAME.weights file tfmc wrote, or the const array of weights.c with
 * --embed-weights: flash on a microcontroller), checked against this model
 * at init (layout, size, checksum) and only read.
 * Ownership: the caller owns the region, the weights image and every
 * buffer it passes (only read, except outputs, which are overwritten), for
 * as long as it uses the TfmcModel; there is nothing to free. Strings
 * returned by the tfmc_model_*name functions are static. Every failure is
 * a return code and a message in the caller's err buffer; nothing exits,
 * aborts or traps. */
#ifndef TFMC_MODEL_H
#define TFMC_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A model living in a caller's memory region. */
typedef struct TfmcModel TfmcModel;

#define TFMC_MAX_RANK 4
#define TFMC_INPUT_IDS 0  /* int32 token ids, each in [0, vocab) */
#define TFMC_INPUT_MASK 1 /* uint8 padding mask [batch, length], 1 = real token */

/* ---- what the model takes and gives (no TfmcModel needed) ----
 * Strings returned are static; an index out of range gives NULL / 0 / -1. */
const char *tfmc_model_name(void);
int tfmc_model_n_dims(void);             /* run-time dimensions (batch, lengths) */
const char *tfmc_model_dim_name(int i);
int64_t tfmc_model_dim_max(int i);       /* each dim is 1..max at run time */
int tfmc_model_n_inputs(void);
const char *tfmc_model_input_name(int i);
int tfmc_model_input_kind(int i);        /* TFMC_INPUT_IDS or TFMC_INPUT_MASK */
int64_t tfmc_model_input_vocab(int i);   /* ids: the exclusive bound; masks: 0 */
int tfmc_model_n_outputs(void);
const char *tfmc_model_output_name(int i);
/* The shape of input / output i when the dims take the values dims[0..n_dims):
 * writes the extents to shape[0..rank) and returns rank (<= TFMC_MAX_RANK),
 * or -1 when i or a dim value is out of range. *_numel: the element count. */
int tfmc_model_input_shape(int i, const int64_t *dims, int64_t *shape);
int tfmc_model_output_shape(int i, const int64_t *dims, int64_t *shape);
int64_t tfmc_model_input_numel(int i, const int64_t *dims);
int64_t tfmc_model_output_numel(int i, const int64_t *dims);

/* ---- running ---- */

/* Sets up a model in mem (mem_bytes >= TFMC_MEM_BYTES, any alignment) with
 * the packed weights image (image_bytes bytes; NULL for the image linked in
 * with --embed-weights, an error otherwise), checked against this model:
 * magic, layout, size, checksum (a pass over the weights, once). The state
 * starts zeroed. Returns the model (inside mem), or NULL with a message. */
TfmcModel *tfmc_model_init(void *mem, size_t mem_bytes, const void *image, size_t image_bytes,
                           char *err, size_t errlen);

/* Runs the forward pass on caller-owned buffers, on the calling thread.
 *   dims[i]     the value of dimension i (tfmc_model_dim_name(i)), 1..max
 *   inputs[i]   input i, row-major with tfmc_model_input_shape(i, dims):
 *               int32_t token ids (checked < vocab), or a uint8_t mask
 *               (0/1, at least one 1 per sequence); a mask may be NULL: it
 *               is then derived from its ids (ids != pad id when the model
 *               has one, else all real) into the region. Only read.
 *   outputs[o]  float buffers of tfmc_model_output_numel(o, dims) elements,
 *               overwritten.
 * Returns 0, or non-zero with a message in err (nothing is run then).
 * One run at a time per TfmcModel. Allocates nothing. */
int tfmc_model_run_buffers(TfmcModel *m, const int64_t *dims, const void *const *inputs,
                           float *const *outputs, char *err, size_t errlen);

/* Zeroes the state kept between runs (a model with a KV cache: before a
 * new sequence); nothing to do for a model without state. */
void tfmc_model_reset(TfmcModel *m);

#ifdef __cplusplus
}
#endif

/* A decoder or encoder_decoder model also generates: its model.h defines
 * TFMC_GENERATION and TFMC_GEN_MEM_BYTES above, and model_gen.h declares
 * the static step API (tfmc_gen_init, encode, prefill, step, reset). */
#ifdef TFMC_GENERATION
#include "model_gen.h"
#endif

#endif
