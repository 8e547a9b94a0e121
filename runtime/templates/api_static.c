/* api_static.c - the C API of model.h for the static build (tfmc emit-c
 * --static; tfmc's runtime/templates/api_static.c, copied as the project's
 * api.c): a model in one caller-provided memory region, weights from a
 * packed image in place (flash), checking caller buffers, running
 * tfmc_model_run on the calling thread. The same for every model; what
 * differs is data: tfmc_model_info and tfmc_model_run in model.c, the sizes
 * in model_config.h.
 *
 * The region, from its first 64-byte boundary:
 *     [TfmcModel, API_HEADER_BYTES][arena][state][derived masks]
 * each part 64-byte aligned, TFMC_*_BYTES of model_config.h rounded up to
 * 64; TFMC_MEM_BYTES (model.h) is their sum plus 64 for the alignment.
 *
 * The weights image is checked by runtime/rt_static.c (rt_static_image_check,
 * shared with the static step API of a generating model, gen_api.c).
 *
 * Invariants: no heap, no stdio (messages are put together by msg_* below),
 * no mutable global, no trap on any input a caller can pass: every failure
 * is a return code and a message. */
#include "model_config.h" /* TFMC_EMBEDDED_WEIGHTS, TFMC_ARENA_BYTES, ... */

#include "model.h"

#include "runtime/rt_model.h"

#include <string.h>

/* The compiled model (model.c) and, when embedded, its weights (weights.c). */
extern const RtModelInfo tfmc_model_info;
void tfmc_model_run(const RtRunArgs *args);
#if TFMC_EMBEDDED_WEIGHTS
extern const unsigned char tfmc_weights_image[];
extern const size_t tfmc_weights_image_size;
#endif
/* The image's layout: a generating model's image holds the forward pass's
 * weights first, then the generation programs' (gen_info.c); the forward
 * pass reads its block at the start either way. */
#if defined(TFMC_GENERATION) && TFMC_GENERATION
#include "runtime/rt_stepper.h"
extern const RtGenInfo tfmc_gen_info;
#define API_IMAGE_INFO (tfmc_gen_info.weights)
#else
#define API_IMAGE_INFO (&tfmc_model_info)
#endif

#define API_ALIGN 64
#define API_HEADER_BYTES 64
#define API_ROUND(n) (((n) + API_ALIGN - 1) / API_ALIGN * API_ALIGN)
#define API_ARENA_OFF API_HEADER_BYTES
#define API_STATE_OFF (API_ARENA_OFF + API_ROUND(TFMC_ARENA_BYTES))
#define API_MASKS_OFF (API_STATE_OFF + API_ROUND(TFMC_STATE_BYTES))
#define API_MEM_BYTES (API_ALIGN + API_MASKS_OFF + API_ROUND(TFMC_MASKS_BYTES))

/* model.h stands alone, so it restates the runtime's rank limit and the
 * region's size; C99 has no static_assert: a negative array size stops the
 * build when they differ. */
typedef char tfmc_max_rank_is_rt_max_rank[TFMC_MAX_RANK == RT_MAX_RANK ? 1 : -1];
#ifdef TFMC_MEM_BYTES
typedef char tfmc_mem_bytes_is_the_layout[TFMC_MEM_BYTES == API_MEM_BYTES ? 1 : -1];
#endif

#define API_MAGIC 0x74666d63u /* "tfmc": a region tfmc_model_init set up */

struct TfmcModel {
  uint32_t magic;
  const float *weights;  /* inside the caller's image */
  unsigned char *arena;  /* the parts of the region */
  unsigned char *state;  /* NULL when the model has none */
  unsigned char *masks;
};
typedef char tfmc_model_fits_its_header[sizeof(struct TfmcModel) <= API_HEADER_BYTES ? 1 : -1];

/* ---- messages without stdio ---- */

typedef struct Msg {
  char *p;
  size_t cap, n;
} Msg;

static void msg_s(Msg *m, const char *s) {
  for (; s && *s && m->n + 1 < m->cap; s++) m->p[m->n++] = *s;
  if (m->cap) m->p[m->n] = '\0';
}

static void msg_i(Msg *m, int64_t v) {
  char buf[24];
  int i = (int)sizeof buf - 1;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  buf[i] = '\0';
  do {
    buf[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) buf[--i] = '-';
  msg_s(m, buf + i);
}

static Msg msg_start(char *err, size_t errlen) {
  Msg m = {err, err ? errlen : 0, 0};
  if (m.cap) m.p[0] = '\0';
  return m;
}

/* err = a, returns 1 */
static int api_fail(char *err, size_t errlen, const char *a) {
  Msg m = msg_start(err, errlen);
  msg_s(&m, a);
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

/* ---- init ---- */

/* The derived mask of input i: inputs in order, each max_numel bytes
 * rounded up to 8 (the sum is TFMC_MASKS_BYTES, as the emitter counts). */
static int64_t max_numel(const RtTensorInfo *t) {
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++)
    n *= t->dims[d].sym >= 0 ? tfmc_model_info.sym_max[t->dims[d].sym] : t->dims[d].value;
  return n;
}

static int64_t mask_offset(int input) {
  int64_t off = 0;
  for (int i = 0; i < input; i++)
    if (tfmc_model_info.inputs[i].kind == RT_INPUT_MASK)
      off += (max_numel(&tfmc_model_info.inputs[i]) + 7) / 8 * 8;
  return off;
}

TfmcModel *tfmc_model_init(void *mem, size_t mem_bytes, const void *image, size_t image_bytes,
                           char *err, size_t errlen) {
  const RtModelInfo *info = &tfmc_model_info;
  if (info->abi_version != RT_ABI_VERSION) {
    api_fail(err, errlen, "model.c was compiled for another runtime ABI");
    return NULL;
  }
  if ((uint64_t)API_MEM_BYTES > (uint64_t)SIZE_MAX) {
    Msg m = msg_start(err, errlen);
    msg_s(&m, "the model needs a memory region of ");
    msg_i(&m, (int64_t)API_MEM_BYTES);
    msg_s(&m, " bytes, more than this target addresses (lower the spec's max_batch / max lengths)");
    return NULL;
  }
  if (!mem || mem_bytes < (size_t)API_MEM_BYTES) {
    Msg m = msg_start(err, errlen);
    msg_s(&m, "the model needs a memory region of TFMC_MEM_BYTES = ");
    msg_i(&m, (int64_t)API_MEM_BYTES);
    msg_s(&m, " bytes, given ");
    msg_i(&m, mem ? (int64_t)mem_bytes : 0);
    return NULL;
  }
  if (info->arena_bytes > TFMC_ARENA_BYTES || info->state_bytes > TFMC_STATE_BYTES ||
      mask_offset(info->n_inputs) > TFMC_MASKS_BYTES) {
    api_fail(err, errlen, "model_config.h does not belong to this model.c (sizes differ)");
    return NULL;
  }
  if (!image) {
#if TFMC_EMBEDDED_WEIGHTS
    image = tfmc_weights_image;
    image_bytes = tfmc_weights_image_size;
#else
    Msg m = msg_start(err, errlen);
    msg_s(&m, "model '");
    msg_s(&m, info->name);
    msg_s(&m, "' has no embedded weights: give the weights image");
    return NULL;
#endif
  }
  if (rt_static_image_check(image, image_bytes, API_IMAGE_INFO, err, errlen)) return NULL;
  unsigned char *base = (unsigned char *)mem + (API_ALIGN - (uintptr_t)mem % API_ALIGN) % API_ALIGN;
  memset(base, 0, (size_t)API_MEM_BYTES - API_ALIGN); /* the state starts zeroed */
  TfmcModel *m = (TfmcModel *)(void *)base;
  m->weights = (const float *)(const void *)((const unsigned char *)image + 64);
  m->arena = base + API_ARENA_OFF;
  m->state = TFMC_STATE_BYTES ? base + API_STATE_OFF : NULL;
  m->masks = base + API_MASKS_OFF;
  m->magic = API_MAGIC;
  return m;
}

void tfmc_model_reset(TfmcModel *m) {
  if (m && m->magic == API_MAGIC && m->state) memset(m->state, 0, (size_t)TFMC_STATE_BYTES);
}

/* ---- running ---- */

static int find_input(const char *name) {
  for (int i = 0; name && i < tfmc_model_info.n_inputs; i++)
    if (strcmp(tfmc_model_info.inputs[i].name, name) == 0) return i;
  return -1;
}

/* "input 'NAME'" + what + "is missing" style messages */
static int fail_named(char *err, size_t errlen, const char *a, const char *name, const char *b) {
  Msg m = msg_start(err, errlen);
  msg_s(&m, a);
  msg_s(&m, name);
  msg_s(&m, b);
  return 1;
}

int tfmc_model_run_buffers(TfmcModel *m, const int64_t *dims, const void *const *inputs,
                           float *const *outputs, char *err, size_t errlen) {
  const RtModelInfo *info = &tfmc_model_info;
  void *in[RT_MAX_IO] = {NULL};
  if (!m || m->magic != API_MAGIC)
    return api_fail(err, errlen, "no model (tfmc_model_init first)");
  if ((info->n_inputs && !inputs) || (info->n_outputs && !outputs))
    return api_fail(err, errlen, "no input or output array");
  if (info->n_syms && !dims) return api_fail(err, errlen, "no dims array");
  for (int s = 0; s < info->n_syms; s++)
    if (dims[s] < 1 || dims[s] > info->sym_max[s]) {
      Msg g = msg_start(err, errlen);
      msg_s(&g, "dimension ");
      msg_s(&g, info->sym_names[s]);
      msg_s(&g, " is ");
      msg_i(&g, dims[s]);
      msg_s(&g, "; it must be in 1..");
      msg_i(&g, info->sym_max[s]);
      return 1;
    }
  /* ids first: a mask given as NULL is derived from the ids it pads */
  for (int i = 0; i < info->n_inputs; i++) {
    const RtTensorInfo *t = &info->inputs[i];
    if (t->kind == RT_INPUT_MASK) continue;
    if (!inputs[i]) return fail_named(err, errlen, "input '", t->name, "' is missing");
    in[i] = (void *)(uintptr_t)inputs[i]; /* only read */
    if (t->elem != RT_ELEM_I32) continue;
    const int32_t *ids = inputs[i];
    int64_t n = tensor_numel(t, dims);
    for (int64_t k = 0; k < n; k++)
      if (ids[k] < 0 || (t->vocab > 0 && ids[k] >= t->vocab)) {
        Msg g = msg_start(err, errlen);
        msg_s(&g, "input '");
        msg_s(&g, t->name);
        msg_s(&g, "'[");
        msg_i(&g, k);
        msg_s(&g, "] is ");
        msg_i(&g, ids[k]);
        msg_s(&g, "; token ids must be in [0, ");
        msg_i(&g, t->vocab);
        msg_s(&g, ")");
        return 1;
      }
  }
  for (int i = 0; i < info->n_inputs; i++) {
    const RtTensorInfo *t = &info->inputs[i];
    if (t->kind != RT_INPUT_MASK) continue;
    int64_t shape[TFMC_MAX_RANK];
    if (tensor_shape(t, dims, shape) != 2)
      return fail_named(err, errlen, "mask input '", t->name, "' is not [batch, length]");
    const uint8_t *mask = inputs[i];
    if (!mask) { /* ids != pad id, else every token real */
      int ids = find_input(t->ids_input);
      const int32_t *tok = ids >= 0 ? inputs[ids] : NULL;
      uint8_t *derived = m->masks + mask_offset(i);
      for (int64_t k = 0; k < shape[0] * shape[1]; k++)
        derived[k] = (uint8_t)(!tok || info->pad_id < 0 || tok[k] != info->pad_id);
      mask = derived;
    }
    for (int64_t b = 0; b < shape[0]; b++) {
      int64_t real = 0;
      for (int64_t l = 0; l < shape[1]; l++) {
        uint8_t v = mask[b * shape[1] + l];
        if (v > 1) return fail_named(err, errlen, "mask '", t->name, "' holds a value other than 0 or 1");
        real += v;
      }
      if (real == 0) {
        Msg g = msg_start(err, errlen);
        msg_s(&g, "mask '");
        msg_s(&g, t->name);
        msg_s(&g, "': sequence ");
        msg_i(&g, b);
        msg_s(&g, " has no real token");
        return 1;
      }
    }
    in[i] = (void *)(uintptr_t)mask;
  }
  for (int o = 0; o < info->n_outputs; o++)
    if (!outputs[o]) return fail_named(err, errlen, "output '", info->outputs[o].name, "' has no buffer");
  RtRunArgs args = {dims, in, outputs, m->weights, m->arena, NULL, NULL, m->state};
  tfmc_model_run(&args);
  if (err && errlen) err[0] = '\0';
  return 0;
}
