/* The C API of a model compiled by tfmc emit-c: the same for every model
 * (tfmc's runtime/templates/model.h; an emitted model.h is a description
 * of its model, its dims, inputs, outputs and weights file, followed by
 * this file as it is).
 *
 * Example:
 *     char err[512];
 *     TfmcModel *m = tfmc_model_create(weights_path, 0, err, sizeof err);
 *     if (!m) { fprintf(stderr, "%s\n", err); return 1; }
 *     int64_t dims[TFMC_MAX_RANK] = {...};     // one value per dimension
 *     const void *inputs[] = {...};            // per input, as listed above
 *     float *outputs[] = {...};                // tfmc_model_output_numel each
 *     if (tfmc_model_run_buffers(m, dims, inputs, outputs, err, sizeof err))
 *       fprintf(stderr, "%s\n", err);
 *     tfmc_model_destroy(m);
 *
 * Ownership: the caller owns every buffer it passes (only read, except
 * outputs, which are overwritten) and the TfmcModel from tfmc_model_create,
 * which owns the mapped weights, the thread pool and the activation arena
 * until tfmc_model_destroy. Strings returned by the tfmc_model_*name
 * functions are static. Every failure is a return code and a message in the
 * caller's err buffer; nothing exits or aborts. */
#ifndef TFMC_MODEL_H
#define TFMC_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A loaded model: its weights, a thread pool and its activation arena. */
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

/* Loads the model. weights_path: a packed-weights file (written by tfmc
 * next to this project as NAME.weights; mapped read-only, checked against
 * this model: layout, size, checksum), or NULL for the weights embedded in
 * the library (emitted with --embed-weights; an error otherwise).
 * n_threads: 0 = one per online CPU, 1 = run on the calling thread only,
 * up to 256. Returns NULL with a message in err on failure.
 * The caller owns the result and frees it with tfmc_model_destroy. */
TfmcModel *tfmc_model_create(const char *weights_path, int n_threads, char *err,
                             size_t errlen);

/* Runs the forward pass on caller-owned buffers.
 *   dims[i]     the value of dimension i (tfmc_model_dim_name(i)), 1..max
 *   inputs[i]   input i, row-major with tfmc_model_input_shape(i, dims):
 *               int32_t token ids (checked < vocab), or a uint8_t mask
 *               (0/1, at least one 1 per sequence); a mask may be NULL: it
 *               is then derived from its ids (ids != pad id when the model
 *               has one, else all real). Only read.
 *   outputs[o]  float buffers of tfmc_model_output_numel(o, dims) elements,
 *               overwritten.
 * Returns 0, or non-zero with a message in err (nothing is run then).
 * One run at a time per TfmcModel (it owns one arena); separate TfmcModels
 * share nothing and may run concurrently. Allocates nothing (the runtime
 * GEMM's per-thread packing buffers aside, made once on first use). The
 * activation arena is planned at the maximum dims and reserved as address
 * space by tfmc_model_create; a run commits the pages its dims touch (on
 * POSIX hosts; elsewhere the whole arena is allocated at create), so a
 * model with large maxima costs what its runs use, and a run whose memory
 * cannot be had returns non-zero with the byte count. */
int tfmc_model_run_buffers(TfmcModel *m, const int64_t *dims, const void *const *inputs,
                           float *const *outputs, char *err, size_t errlen);

/* Runs on a safetensors file of inputs, writing a safetensors file of
 * outputs (replaced atomically), exactly as the executable does: ids of any
 * integer dtype; masks given as mask, lengths, or derived from pad ids.
 * Returns 0 or non-zero with a message. */
int tfmc_model_run_files(TfmcModel *m, const char *inputs_path, const char *outputs_path,
                         char *err, size_t errlen);

/* Frees everything tfmc_model_create allocated (NULL is fine). */
void tfmc_model_destroy(TfmcModel *m);

#ifdef __cplusplus
}
#endif

/* A decoder or encoder_decoder model also generates: its model.h defines
 * TFMC_GENERATION above, and model_gen.h declares the step API (create,
 * encode, prefill, step, reset). */
#ifdef TFMC_GENERATION
#include "model_gen.h"
#endif

#endif
