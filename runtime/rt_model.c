/* runtime/rt_model.c — binding a model's inputs for a run (see rt_model.h):
 * reading and checking ids and masks, binding the run-time dims, sizing the
 * outputs; writing outputs; the weights layout hash.
 *
 * Invariants of a successful rt_model_bind:
 *   - every tensor of the file is something the model takes, and every
 *     required input is present;
 *   - every symbol any input or output uses is bound, to a value in
 *     1..sym_max, and every dim agrees with its symbol or constant;
 *   - ids are in [0, vocab); masks are 0/1 with a real token per row;
 *   - inputs[i] and outputs[i] are malloc'd and sized for the bound dims.
 * On failure nothing stays allocated and *out is zeroed. A malformed
 * RtModelInfo (a compiler bug) is reported as a message, never followed. */
#include "runtime/rt_model.h"

#include "runtime/rt_io.h"
#include "runtime/rt_safetensors.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

/* ---- the layout hash ---- */

static uint64_t fnv1a_bytes(uint64_t h, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= FNV_PRIME;
  }
  return h;
}

static uint64_t fnv1a_i64(uint64_t h, int64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)((uint64_t)v >> (8 * i));
  return fnv1a_bytes(h, b, 8);
}

uint64_t rt_model_layout_hash(const RtWeightInfo *w, int n) {
  uint64_t h = FNV_OFFSET;
  for (int i = 0; i < n; i++) {
    const char *name = w[i].name ? w[i].name : "";
    h = fnv1a_bytes(h, (const unsigned char *)name, strlen(name) + 1); /* with its 0 byte */
    h = fnv1a_i64(h, w[i].rank);
    int rank = w[i].rank < 0 ? 0 : w[i].rank > RT_MAX_RANK ? RT_MAX_RANK : w[i].rank;
    for (int d = 0; d < rank; d++)
      h = fnv1a_i64(h, w[i].shape[d]);
    h = fnv1a_i64(h, w[i].offset);
    if (w[i].layout != RT_WEIGHT_PLAIN) /* plain layouts hash as before layouts existed */
      h = fnv1a_i64(h, 0x4c41594f55540000ll + w[i].layout);
  }
  return h;
}

int64_t rt_weight_floats(const RtWeightInfo *w) {
  if (w->rank < 0 || w->rank > RT_MAX_RANK || (unsigned)w->layout >= RT_WEIGHT_LAYOUT_COUNT)
    return -1;
  bool panels = w->layout != RT_WEIGHT_PLAIN;
  if (panels && w->rank != 2)
    return -1;
  if (w->layout == RT_WEIGHT_PANELS_I8) {
    int64_t n = w->shape[0], k = w->shape[1];
    if (n < 0 || k < 0 || n > ((int64_t)1 << 40) || k > ((int64_t)1 << 40))
      return -1;
    return (n + 15) / 16 * ((16 * ((k + 3) / 4 * 4) + 128) / 4);
  }
  int64_t n = 1;
  for (int d = 0; d < w->rank; d++) {
    int64_t s = w->shape[d];
    if (panels && d == 0)
      s = s > INT64_MAX - 15 ? -1 : (s + 15) / 16 * 16;
    if (w->layout == RT_WEIGHT_PANELS_BF16 && d == 1)
      s = s > INT64_MAX - 1 ? -1 : (s + 1) / 2;
    if (s < 0 || (s && n > INT64_MAX / s))
      return -1;
    n *= s;
  }
  return n;
}

/* ---- dims ---- */

int64_t rt_model_dim(const RtDim *d, const int64_t *syms) {
  if (d->sym < 0)
    return d->value;
  return d->sym < RT_MAX_SYMS ? syms[d->sym] : -1;
}

static const char *sym_name(const RtModelInfo *info, int s) {
  return info->sym_names[s] ? info->sym_names[s] : "?";
}

/* The largest value a dim may take. */
static int64_t dim_max(const RtModelInfo *info, const RtDim *d) {
  return d->sym < 0 ? d->value : info->sym_max[d->sym];
}

/* "[B,S,512]" */
static void dims_str(const RtModelInfo *info, const RtTensorInfo *t, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < t->rank && k < n; i++) {
    const RtDim *d = &t->dims[i];
    if (d->sym >= 0)
      k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? "," : "", sym_name(info, d->sym));
    else
      k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)d->value);
  }
  if (k < n)
    snprintf(buf + k, n - k, "]");
}

int rt_errorf(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return 1;
}

/* ---- checking the model description ---- */

static int info_check_tensor(const RtModelInfo *info, const RtTensorInfo *t, const char *what,
                             char *err, size_t errlen) {
  if (!t->name)
    return rt_errorf(err, errlen, "model info: an %s has no name", what);
  if (t->rank < 0 || t->rank > RT_MAX_RANK)
    return rt_errorf(err, errlen, "model info: %s '%s' has rank %d", what, t->name, t->rank);
  for (int d = 0; d < t->rank; d++) {
    const RtDim *dim = &t->dims[d];
    if (dim->sym >= info->n_syms || dim->sym < -1 || (dim->sym < 0 && dim->value < 0))
      return rt_errorf(err, errlen, "model info: %s '%s' dim %d is malformed", what, t->name, d);
  }
  return 0;
}

static int info_find_input(const RtModelInfo *info, const char *name) {
  for (int i = 0; name && i < info->n_inputs; i++)
    if (info->inputs[i].name && strcmp(info->inputs[i].name, name) == 0)
      return i;
  return -1;
}

int rt_model_refuse_state(const RtModelInfo *info, char *err, size_t errlen) {
  if (info->state_bytes != 0) /* whoever runs it must keep the state: forward runs do not */
    return rt_errorf(err, errlen, "model '%s' keeps state across runs (a generation step); "
                     "it runs through generation (--generate), not as a single forward pass",
                     info->name ? info->name : "?");
  return 0;
}

int rt_model_info_check(const RtModelInfo *info, char *err, size_t errlen) {
  if (info->abi_version != RT_ABI_VERSION)
    return rt_errorf(err, errlen, "model '%s' was compiled for runtime ABI %u; this runtime is ABI %d",
                info->name ? info->name : "?", info->abi_version, RT_ABI_VERSION);
  if (info->n_syms < 0 || info->n_syms > RT_MAX_SYMS || info->n_inputs < 0 ||
      info->n_inputs > RT_MAX_IO || info->n_outputs < 0 || info->n_outputs > RT_MAX_IO ||
      (info->n_inputs && !info->inputs) || (info->n_outputs && !info->outputs))
    return rt_errorf(err, errlen, "model info: bad symbol, input or output counts");
  if (info->state_bytes < 0)
    return rt_errorf(err, errlen, "model info: negative state size");
  for (int s = 0; s < info->n_syms; s++)
    if (info->sym_max[s] < 1)
      return rt_errorf(err, errlen, "model info: symbol %s has maximum %lld", sym_name(info, s),
                  (long long)info->sym_max[s]);
  if (info->n_arena_blocks < 0 || (info->n_arena_blocks && !info->arena_blocks))
    return rt_errorf(err, errlen, "model info: bad arena block count");
  for (int i = 0; i < info->n_arena_blocks; i++) {
    /* at the maximum dims every block lies inside the arena */
    const RtArenaBlock *b = &info->arena_blocks[i];
    int64_t end = b->bytes;
    bool ok = b->offset >= 0 && b->bytes >= 0 && b->offset % 64 == 0;
    for (int d = 0; ok && d < RT_MAX_RANK && b->syms[d] >= 0; d++) {
      ok = b->syms[d] < info->n_syms && (end == 0 || info->sym_max[b->syms[d]] <= INT64_MAX / end);
      if (ok) end *= info->sym_max[b->syms[d]];
    }
    if (!ok || end > info->arena_bytes - b->offset)
      return rt_errorf(err, errlen, "model info: arena block %d is malformed", i);
  }
  for (int i = 0; i < info->n_inputs; i++) {
    const RtTensorInfo *t = &info->inputs[i];
    if (info_check_tensor(info, t, "input", err, errlen))
      return 1;
    switch (t->kind) {
    case RT_INPUT_IDS:
      if (t->elem != RT_ELEM_I32 || t->vocab < 1 || t->rank < 1)
        return rt_errorf(err, errlen, "model info: ids input '%s' is malformed", t->name);
      break;
    case RT_INPUT_MASK: {
      /* a generation step's source mask pads ids only its encoder takes
       * (rt_stepper.h binds it; the forward binders refuse state) */
      int ids = info_find_input(info, t->ids_input);
      if (ids < 0 && info->state_bytes > 0 && t->elem == RT_ELEM_U8 && t->rank == 2) break;
      if (t->elem != RT_ELEM_U8 || t->rank != 2 || ids < 0 ||
          info->inputs[ids].kind != RT_INPUT_IDS || info->inputs[ids].rank != 2)
        return rt_errorf(err, errlen, "model info: mask input '%s' is malformed", t->name);
      break;
    }
    case RT_INPUT_VALUES:
      if (t->elem != RT_ELEM_F32)
        return rt_errorf(err, errlen, "model info: values input '%s' is not f32", t->name);
      break;
    case RT_INPUT_KIND_COUNT:
      return rt_errorf(err, errlen, "model info: input '%s' has an unknown kind", t->name);
    }
  }
  for (int i = 0; i < info->n_outputs; i++) {
    const RtTensorInfo *t = &info->outputs[i];
    if (info_check_tensor(info, t, "output", err, errlen))
      return 1;
    if (t->elem != RT_ELEM_F32)
      return rt_errorf(err, errlen, "model info: output '%s' is not f32", t->name);
  }
  return 0;
}

/* ---- binding ---- */

typedef struct Binder {
  const RtModelInfo *info;
  const char *label;
  RtBound *b;
  const char *from[RT_MAX_SYMS];        /* the input that bound each symbol, or NULL */
  int64_t dims[RT_MAX_IO][RT_MAX_RANK]; /* actual dims of each input */
} Binder;

/* Binds or checks dim d of input t against the actual value v. */
static int bind_dim(Binder *bd, const RtTensorInfo *t, int d, int64_t v, char *err, size_t errlen) {
  const RtModelInfo *info = bd->info;
  const RtDim *dim = &t->dims[d];
  if (dim->sym < 0) {
    if (v != dim->value)
      return rt_errorf(err, errlen, "%s: input '%s' dim %d is %lld; the model takes exactly %lld",
                  bd->label, t->name, d, (long long)v, (long long)dim->value);
    return 0;
  }
  int s = dim->sym;
  if (!bd->from[s]) {
    if (v < 1 || v > info->sym_max[s])
      return rt_errorf(err, errlen, "%s: input '%s' dim %d is %lld; %s must be in 1..%lld", bd->label,
                  t->name, d, (long long)v, sym_name(info, s), (long long)info->sym_max[s]);
    bd->b->syms[s] = v;
    bd->from[s] = t->name;
    return 0;
  }
  if (bd->b->syms[s] != v)
    return rt_errorf(err, errlen, "%s: input '%s' dim %d is %lld but %s is %lld (from '%s')", bd->label,
                t->name, d, (long long)v, sym_name(info, s), (long long)bd->b->syms[s],
                bd->from[s]);
  return 0;
}

int rt_model_bind_shapes(const RtModelInfo *info, const int64_t (*dims)[RT_MAX_RANK],
                         RtBound *b, const char *label, char *err, size_t errlen) {
  Binder bd = {.info = info, .label = label ? label : "inputs", .b = b};
  for (int i = 0; i < info->n_inputs && i < RT_MAX_IO; i++)
    for (int d = 0; d < info->inputs[i].rank && d < RT_MAX_RANK; d++)
      if (bind_dim(&bd, &info->inputs[i], d, dims[i][d], err, errlen)) return 1;
  return 0;
}

/* Ids of rank 2 go through rt_io_read_ids; other ranks are read here with
 * the same checks. */
static int bind_ids(Binder *bd, const RtSafetensors *st, int i, char *err, size_t errlen) {
  const RtModelInfo *info = bd->info;
  const RtTensorInfo *t = &info->inputs[i];
  if (t->rank == 2) {
    int32_t *ids;
    int64_t b, len;
    if (rt_io_read_ids(st, bd->label, t->name, t->vocab, dim_max(info, &t->dims[0]),
                       dim_max(info, &t->dims[1]), &ids, &b, &len, err, errlen))
      return 1;
    bd->b->inputs[i] = ids;
    bd->dims[i][0] = b;
    bd->dims[i][1] = len;
    return bind_dim(bd, t, 0, b, err, errlen) || bind_dim(bd, t, 1, len, err, errlen);
  }
  const RtStTensor *s = rt_st_find(st, t->name);
  char want[96];
  dims_str(info, t, want, sizeof want);
  if (!s)
    return rt_errorf(err, errlen, "%s: missing input '%s' (token ids %s)", bd->label, t->name, want);
  if (s->rank != t->rank)
    return rt_errorf(err, errlen, "%s: input '%s' has rank %d; expected %s", bd->label, t->name, s->rank,
                want);
  for (int d = 0; d < t->rank; d++) {
    bd->dims[i][d] = s->shape[d];
    if (bind_dim(bd, t, d, s->shape[d], err, errlen))
      return 1;
  }
  int64_t n = rt_st_numel(s);
  int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
  if (!ids)
    return rt_errorf(err, errlen, "%s: out of memory", bd->label);
  char e2[512];
  if (rt_st_read_i32(s, ids, 0, t->vocab - 1, e2, sizeof e2)) {
    free(ids);
    return rt_errorf(err, errlen, "%s: token ids must be in [0, %lld): %s", bd->label,
                (long long)t->vocab, e2);
  }
  bd->b->inputs[i] = ids;
  return 0;
}

static int bind_mask(Binder *bd, const RtSafetensors *st, int i, char *err, size_t errlen) {
  const RtTensorInfo *t = &bd->info->inputs[i];
  int ids = info_find_input(bd->info, t->ids_input);
  int64_t b = bd->dims[ids][0], len = bd->dims[ids][1];
  if (bind_dim(bd, t, 0, b, err, errlen) || bind_dim(bd, t, 1, len, err, errlen))
    return 1;
  uint8_t *m = malloc((size_t)(b * len));
  if (!m)
    return rt_errorf(err, errlen, "%s: out of memory", bd->label);
  bd->b->inputs[i] = m;
  bd->dims[i][0] = b;
  bd->dims[i][1] = len;
  return rt_io_key_mask(st, bd->label, t->name, t->lengths_name, bd->b->inputs[ids], b, len,
                        bd->info->pad_id, m, err, errlen);
}

/* An f32 values input, any float dtype in the file, shaped as the model takes it. */
static int bind_values(Binder *bd, const RtSafetensors *st, int i, char *err, size_t errlen) {
  const RtTensorInfo *t = &bd->info->inputs[i];
  const RtStTensor *s = rt_st_find(st, t->name);
  char want[96];
  dims_str(bd->info, t, want, sizeof want);
  if (!s)
    return rt_errorf(err, errlen, "%s: missing input '%s' (f32 %s)", bd->label, t->name, want);
  if (s->rank != t->rank)
    return rt_errorf(err, errlen, "%s: input '%s' has rank %d; expected %s", bd->label, t->name,
                     s->rank, want);
  for (int d = 0; d < t->rank; d++) {
    bd->dims[i][d] = s->shape[d];
    if (bind_dim(bd, t, d, s->shape[d], err, errlen))
      return 1;
  }
  int64_t n = rt_st_numel(s);
  float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  if (!v)
    return rt_errorf(err, errlen, "%s: out of memory", bd->label);
  char e2[512];
  if (rt_st_read_f32(s, v, e2, sizeof e2)) {
    free(v);
    return rt_errorf(err, errlen, "%s: input '%s': %s", bd->label, t->name, e2);
  }
  bd->b->inputs[i] = v;
  return 0;
}

/* Refuses a tensor the model does not take, listing what it takes. */
static int check_unexpected(const Binder *bd, const RtSafetensors *st, char *err, size_t errlen) {
  const RtModelInfo *info = bd->info;
  for (int k = 0; k < rt_st_count(st); k++) {
    const char *name = rt_st_get(st, k)->name;
    int ok = 0;
    for (int i = 0; i < info->n_inputs && !ok; i++) {
      const RtTensorInfo *t = &info->inputs[i];
      ok = strcmp(t->name, name) == 0 ||
           (t->kind == RT_INPUT_MASK && t->lengths_name && strcmp(t->lengths_name, name) == 0);
    }
    if (ok)
      continue;
    char list[512] = "";
    size_t len = 0;
    for (int i = 0; i < info->n_inputs && len < sizeof list; i++) {
      const RtTensorInfo *t = &info->inputs[i];
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", t->name);
      if (t->kind == RT_INPUT_MASK && t->lengths_name && len < sizeof list)
        len += (size_t)snprintf(list + len, sizeof list - len, ", %s", t->lengths_name);
    }
    /* a mask or lengths the model has no use for would be silently ignored */
    int has_mask = 0;
    for (int i = 0; i < info->n_inputs; i++) has_mask |= info->inputs[i].kind == RT_INPUT_MASK;
    int padding = strstr(name, "mask") || strstr(name, "lengths");
    return rt_errorf(err, errlen, "%s: unexpected input '%s'; model '%s' takes: %s%s", bd->label, name,
                info->name ? info->name : "?", info->n_inputs ? list : "nothing",
                padding && !has_mask ? " (it was compiled without a padding mask: add a "
                                       "'mask ... padding' line to its spec)"
                                     : "");
  }
  return 0;
}

int rt_model_outputs_alloc(const RtModelInfo *info, RtBound *b, const char *label, char *err,
                           size_t errlen) {
  if (!label)
    label = "inputs";
  for (int i = 0; i < info->n_outputs; i++) {
    const RtTensorInfo *t = &info->outputs[i];
    size_t n = 1;
    for (int d = 0; d < t->rank; d++) {
      const RtDim *dim = &t->dims[d];
      if (dim->sym >= 0 && b->syms[dim->sym] < 1) /* bound values are >= 1 */
        return rt_errorf(err, errlen, "model info: output '%s' uses %s, which no input binds", t->name,
                    sym_name(info, dim->sym));
      int64_t v = rt_model_dim(dim, b->syms);
      b->output_dims[i][d] = v;
      if (v > 0 && n > SIZE_MAX / sizeof(float) / (size_t)v)
        return rt_errorf(err, errlen, "%s: output '%s' would not fit in memory", label, t->name);
      n *= (size_t)v;
    }
    b->outputs[i] = calloc(n ? n : 1, sizeof(float));
    if (!b->outputs[i])
      return rt_errorf(err, errlen, "%s: out of memory for output '%s' (%zu floats)", label, t->name,
                  n);
  }
  return 0;
}

int rt_model_bind(const RtModelInfo *info, const RtSafetensors *st, const char *label, RtBound *out,
                  char *err, size_t errlen) {
  if (!out)
    return rt_errorf(err, errlen, "internal: rt_model_bind without an output");
  memset(out, 0, sizeof *out);
  if (!info || !st)
    return rt_errorf(err, errlen, "internal: rt_model_bind without model or inputs");
  if (rt_model_info_check(info, err, errlen) || rt_model_refuse_state(info, err, errlen))
    return 1;
  Binder bd = {.info = info, .label = label ? label : "inputs", .b = out};
  int rc = check_unexpected(&bd, st, err, errlen);
  /* ids first: masks derive from them */
  for (int i = 0; i < info->n_inputs && !rc; i++)
    if (info->inputs[i].kind == RT_INPUT_IDS)
      rc = bind_ids(&bd, st, i, err, errlen);
  for (int i = 0; i < info->n_inputs && !rc; i++)
    if (info->inputs[i].kind == RT_INPUT_MASK)
      rc = bind_mask(&bd, st, i, err, errlen);
    else if (info->inputs[i].kind == RT_INPUT_VALUES)
      rc = bind_values(&bd, st, i, err, errlen);
  if (!rc)
    rc = rt_model_outputs_alloc(info, out, bd.label, err, errlen);
  if (rc)
    rt_model_unbind(info, out);
  return rc;
}

void rt_model_unbind(const RtModelInfo *info, RtBound *b) {
  (void)info;
  if (!b)
    return;
  for (int i = 0; i < RT_MAX_IO; i++) {
    free(b->inputs[i]);
    free(b->outputs[i]);
  }
  memset(b, 0, sizeof *b);
}

int rt_model_write_outputs(const RtModelInfo *info, const RtBound *b, const char *path, char *err,
                           size_t errlen) {
  if (!info || !b || !path)
    return rt_errorf(err, errlen, "internal: rt_model_write_outputs arguments");
  if (info->n_outputs < 0 || info->n_outputs > RT_MAX_IO)
    return rt_errorf(err, errlen, "model info: bad output count");
  RtStWrite w[RT_MAX_IO];
  for (int i = 0; i < info->n_outputs; i++) {
    const RtTensorInfo *t = &info->outputs[i];
    w[i] = (RtStWrite){.name = t->name, .dtype = RT_F32, .rank = t->rank, .data = b->outputs[i]};
    for (int d = 0; d < t->rank; d++)
      w[i].shape[d] = b->output_dims[i][d];
  }
  return rt_st_write(path, w, info->n_outputs, NULL, 0, err, errlen);
}
