/* api.c - the C API of model.h over the runtime: loading (weights, pool,
 * arena), checking caller buffers, running tfmc_model_run. The same for
 * every model (tfmc's runtime/templates/api.c, copied as it is by
 * tfmc emit-c); what differs per model is data: tfmc_model_info and
 * tfmc_model_run in model.c, and model_config.h.
 * Invariants: every failure is a message, never an exit; a failed create
 * frees what it took; a run allocates nothing (it commits, once, the arena
 * pages its dims touch: runtime/rt_arena.h). */
#include "model_config.h" /* TFMC_EMBEDDED_WEIGHTS */

#include "model.h"

#include "runtime/rt_arena.h"
#include "runtime/rt_model.h"
#include "runtime/rt_safetensors.h"
#include "runtime/rt_weights.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The compiled model (model.c) and, when embedded, its weights (weights.c). */
extern const RtModelInfo tfmc_model_info;
void tfmc_model_run(const RtRunArgs *args);
#if TFMC_EMBEDDED_WEIGHTS
extern const unsigned char tfmc_weights_image[];
extern const size_t tfmc_weights_image_size;
#endif
/* A generating model's weights image holds the generation programs' weights
 * too (tfmc_gen_info.weights, runtime/rt_stepper.h); the forward pass's
 * come first, so it reads the image from its start. */
#ifdef TFMC_ENCODER
#include "runtime/rt_stepper.h"
extern const RtGenInfo tfmc_gen_info;
#define TFMC_IMAGE_INFO (tfmc_gen_info.weights)
#else
#define TFMC_IMAGE_INFO (&tfmc_model_info)
#endif

/* Runtime entry points (runtime/rt_pool.h, runtime/rt_gemm.h), declared
 * here because those headers and rt_model.h each typedef RtPool, which C99
 * allows only once per translation unit. */
RtPool *rt_pool_create(int n_threads);
void rt_pool_destroy(RtPool *p);
const char *rt_gemm_backend(void);

#define TFMC_MAX_THREADS 256

/* model.h stands alone, so it restates the runtime's rank limit; shapes
 * are copied between the two (C99 has no static_assert: a negative array
 * size stops the build when they differ). */
typedef char tfmc_max_rank_is_rt_max_rank[TFMC_MAX_RANK == RT_MAX_RANK ? 1 : -1];

struct TfmcModel {
  RtWeights *weights;             /* mapped file or validated embedded image */
  RtPool *pool;                   /* NULL: runs on the calling thread */
  RtArena arena;                  /* planned at the maximum dims, committed per run */
  uint8_t *masks[RT_MAX_IO];      /* derived masks for mask inputs given as NULL */
};

static int api_fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return 1;
}

/* ---- description ---- */

const char *tfmc_model_name(void) { return tfmc_model_info.name; }
int tfmc_model_n_dims(void) { return tfmc_model_info.n_syms; }

const char *tfmc_model_dim_name(int i) {
  return i >= 0 && i < tfmc_model_info.n_syms ? tfmc_model_info.sym_names[i] : NULL;
}

int64_t tfmc_model_dim_max(int i) {
  return i >= 0 && i < tfmc_model_info.n_syms ? tfmc_model_info.sym_max[i] : 0;
}

int tfmc_model_n_inputs(void) { return tfmc_model_info.n_inputs; }
int tfmc_model_n_outputs(void) { return tfmc_model_info.n_outputs; }

const char *tfmc_model_input_name(int i) {
  return i >= 0 && i < tfmc_model_info.n_inputs ? tfmc_model_info.inputs[i].name : NULL;
}

const char *tfmc_model_output_name(int i) {
  return i >= 0 && i < tfmc_model_info.n_outputs ? tfmc_model_info.outputs[i].name : NULL;
}

int tfmc_model_input_kind(int i) {
  if (i < 0 || i >= tfmc_model_info.n_inputs) return -1;
  return tfmc_model_info.inputs[i].kind == RT_INPUT_MASK ? TFMC_INPUT_MASK : TFMC_INPUT_IDS;
}

int64_t tfmc_model_input_vocab(int i) {
  if (i < 0 || i >= tfmc_model_info.n_inputs) return 0;
  return tfmc_model_info.inputs[i].kind == RT_INPUT_IDS ? tfmc_model_info.inputs[i].vocab : 0;
}

static int dims_ok(const int64_t *dims) {
  if (!dims && tfmc_model_info.n_syms > 0) return 0;
  for (int s = 0; s < tfmc_model_info.n_syms; s++)
    if (dims[s] < 1 || dims[s] > tfmc_model_info.sym_max[s]) return 0;
  return 1;
}

static int tensor_shape(const RtTensorInfo *t, const int64_t *dims, int64_t *shape) {
  if (!dims_ok(dims)) return -1;
  for (int d = 0; d < t->rank; d++)
    shape[d] = t->dims[d].sym >= 0 ? dims[t->dims[d].sym] : t->dims[d].value;
  return t->rank;
}

static int64_t tensor_numel(const RtTensorInfo *t, const int64_t *dims) {
  int64_t shape[TFMC_MAX_RANK], n = 1;
  int rank = tensor_shape(t, dims, shape);
  if (rank < 0) return -1;
  for (int d = 0; d < rank; d++) n *= shape[d];
  return n;
}

int tfmc_model_input_shape(int i, const int64_t *dims, int64_t *shape) {
  if (i < 0 || i >= tfmc_model_info.n_inputs || !shape) return -1;
  return tensor_shape(&tfmc_model_info.inputs[i], dims, shape);
}

int tfmc_model_output_shape(int i, const int64_t *dims, int64_t *shape) {
  if (i < 0 || i >= tfmc_model_info.n_outputs || !shape) return -1;
  return tensor_shape(&tfmc_model_info.outputs[i], dims, shape);
}

int64_t tfmc_model_input_numel(int i, const int64_t *dims) {
  if (i < 0 || i >= tfmc_model_info.n_inputs) return -1;
  return tensor_numel(&tfmc_model_info.inputs[i], dims);
}

int64_t tfmc_model_output_numel(int i, const int64_t *dims) {
  if (i < 0 || i >= tfmc_model_info.n_outputs) return -1;
  return tensor_numel(&tfmc_model_info.outputs[i], dims);
}

/* ---- create / destroy ---- */

static int64_t max_numel(const RtTensorInfo *t) {
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++)
    n *= t->dims[d].sym >= 0 ? tfmc_model_info.sym_max[t->dims[d].sym] : t->dims[d].value;
  return n;
}

TfmcModel *tfmc_model_create(const char *weights_path, int n_threads, char *err, size_t errlen) {
  const RtModelInfo *info = &tfmc_model_info;
  if (info->abi_version != RT_ABI_VERSION) {
    api_fail(err, errlen, "model '%s' was compiled for runtime ABI %u; this runtime is ABI %d",
             info->name, info->abi_version, RT_ABI_VERSION);
    return NULL;
  }
  if (n_threads < 0 || n_threads > TFMC_MAX_THREADS) {
    api_fail(err, errlen, "n_threads must be in 0..%d (0: one per CPU), not %d",
             TFMC_MAX_THREADS, n_threads);
    return NULL;
  }
  TfmcModel *m = calloc(1, sizeof *m);
  if (!m) {
    api_fail(err, errlen, "out of memory");
    return NULL;
  }
  int rc;
  if (weights_path) {
    rc = rt_weights_open(weights_path, TFMC_IMAGE_INFO, &m->weights, err, errlen);
  } else {
#if TFMC_EMBEDDED_WEIGHTS
    rc = rt_weights_from_memory(tfmc_weights_image, tfmc_weights_image_size, TFMC_IMAGE_INFO,
                                &m->weights, err, errlen);
#else
    rc = api_fail(err, errlen, "model '%s' has no embedded weights: give the weights file",
                  info->name);
#endif
  }
  if (rc) goto fail;
  if (rt_arena_open(&m->arena, info, err, errlen)) goto fail;
  for (int i = 0; i < info->n_inputs; i++) {
    if (info->inputs[i].kind != RT_INPUT_MASK) continue;
    m->masks[i] = malloc((size_t)max_numel(&info->inputs[i]) + 1);
    if (!m->masks[i]) {
      api_fail(err, errlen, "out of memory");
      goto fail;
    }
  }
  (void)rt_gemm_backend(); /* may set environment variables: before any thread starts */
  if (n_threads != 1) m->pool = rt_pool_create(n_threads); /* NULL: serial */
  return m;
fail:
  tfmc_model_destroy(m);
  return NULL;
}

void tfmc_model_destroy(TfmcModel *m) {
  if (!m) return;
  rt_pool_destroy(m->pool);
  for (int i = 0; i < RT_MAX_IO; i++) free(m->masks[i]);
  rt_arena_close(&m->arena);
  rt_weights_close(m->weights);
  free(m);
}

/* ---- running ---- */

static int find_input(const char *name) {
  for (int i = 0; name && i < tfmc_model_info.n_inputs; i++)
    if (strcmp(tfmc_model_info.inputs[i].name, name) == 0) return i;
  return -1;
}

int tfmc_model_run_buffers(TfmcModel *m, const int64_t *dims, const void *const *inputs,
                           float *const *outputs, char *err, size_t errlen) {
  const RtModelInfo *info = &tfmc_model_info;
  void *in[RT_MAX_IO] = {NULL};
  if (!m) return api_fail(err, errlen, "no model");
  if ((info->n_inputs && !inputs) || (info->n_outputs && !outputs))
    return api_fail(err, errlen, "no input or output array");
  if (info->n_syms && !dims) return api_fail(err, errlen, "no dims array");
  for (int s = 0; s < info->n_syms; s++)
    if (dims[s] < 1 || dims[s] > info->sym_max[s])
      return api_fail(err, errlen, "dimension %s is %lld; it must be in 1..%lld",
                      info->sym_names[s], (long long)dims[s], (long long)info->sym_max[s]);
  /* ids first: a mask given as NULL is derived from the ids it pads */
  for (int i = 0; i < info->n_inputs; i++) {
    const RtTensorInfo *t = &info->inputs[i];
    if (t->kind == RT_INPUT_MASK) continue;
    if (!inputs[i]) return api_fail(err, errlen, "input '%s' is missing", t->name);
    in[i] = (void *)(uintptr_t)inputs[i]; /* only read */
    if (t->elem != RT_ELEM_I32) continue;
    const int32_t *ids = inputs[i];
    int64_t n = tensor_numel(t, dims);
    for (int64_t k = 0; k < n; k++)
      if (ids[k] < 0 || (t->vocab > 0 && ids[k] >= t->vocab))
        return api_fail(err, errlen, "input '%s'[%lld] is %ld; token ids must be in [0, %lld)",
                        t->name, (long long)k, (long)ids[k], (long long)t->vocab);
  }
  for (int i = 0; i < info->n_inputs; i++) {
    const RtTensorInfo *t = &info->inputs[i];
    if (t->kind != RT_INPUT_MASK) continue;
    int64_t shape[TFMC_MAX_RANK];
    if (tensor_shape(t, dims, shape) != 2)
      return api_fail(err, errlen, "mask input '%s' is not [batch, length]", t->name);
    const uint8_t *mask = inputs[i];
    if (!mask) { /* ids != pad id, else every token real */
      int ids = find_input(t->ids_input);
      const int32_t *tok = ids >= 0 ? inputs[ids] : NULL;
      for (int64_t k = 0; k < shape[0] * shape[1]; k++)
        m->masks[i][k] = (uint8_t)(!tok || info->pad_id < 0 || tok[k] != info->pad_id);
      mask = m->masks[i];
    }
    for (int64_t b = 0; b < shape[0]; b++) {
      int64_t real = 0;
      for (int64_t l = 0; l < shape[1]; l++) {
        uint8_t v = mask[b * shape[1] + l];
        if (v > 1)
          return api_fail(err, errlen, "mask '%s'[%lld,%lld] is %d; masks hold 0 or 1", t->name,
                          (long long)b, (long long)l, v);
        real += v;
      }
      if (real == 0)
        return api_fail(err, errlen, "mask '%s': sequence %lld has no real token", t->name,
                        (long long)b);
    }
    in[i] = (void *)(uintptr_t)mask;
  }
  for (int o = 0; o < info->n_outputs; o++)
    if (!outputs[o])
      return api_fail(err, errlen, "output '%s' has no buffer", info->outputs[o].name);
  if (rt_arena_commit(&m->arena, dims, err, errlen)) return 1;
  RtRunArgs args = {dims, in, outputs, rt_weights_data(m->weights), m->arena.base, m->pool, NULL,
                    NULL /* no state: rt_model_info_check */};
  tfmc_model_run(&args);
  return 0;
}

int tfmc_model_run_files(TfmcModel *m, const char *inputs_path, const char *outputs_path,
                         char *err, size_t errlen) {
  if (!m || !inputs_path || !outputs_path) return api_fail(err, errlen, "no model or file name");
  RtSafetensors *st = NULL;
  RtBound b;
  if (rt_st_open(inputs_path, &st, err, errlen)) return 1;
  int rc = rt_model_bind(&tfmc_model_info, st, inputs_path, &b, err, errlen);
  rt_st_close(st);
  if (rc) return 1;
  if (rt_arena_commit(&m->arena, b.syms, err, errlen)) {
    rt_model_unbind(&tfmc_model_info, &b);
    return 1;
  }
  RtRunArgs args = {b.syms, b.inputs, b.outputs, rt_weights_data(m->weights), m->arena.base, m->pool,
                    NULL, NULL /* no state: rt_model_info_check */};
  tfmc_model_run(&args);
  rc = rt_model_write_outputs(&tfmc_model_info, &b, outputs_path, err, errlen);
  rt_model_unbind(&tfmc_model_info, &b);
  return rc;
}
