/* runtime/rt_stepper.c — generation's programs bound once and run through
 * RtGenOps (rt_stepper.h); compiled generation descriptions checked; KV
 * cache rows reordered for beam search.
 *
 * Invariants: every buffer is placed by rt_stepper_init_in at the maxima,
 * in one block (the caller's, or one rt_stepper_init allocates), so no
 * step allocates; the static build (-DTFMC_STATIC, emit-c --static) has
 * only the caller's block and no beam search (no heap at all); a step
 * never runs past max_len or max_rows, nor with an id outside the
 * vocabulary (compiled code trusts its inputs); an encoder_decoder's step
 * never runs before its source was encoded. */
#include "runtime/rt_stepper.h"

#include <stdlib.h>
#include <string.h>

static int sym_index(const RtModelInfo *info, const char *name) {
  for (int i = 0; i < info->n_syms; i++)
    if (info->sym_names[i] && strcmp(info->sym_names[i], name) == 0) return i;
  return -1;
}

int64_t rt_model_sym_max(const RtModelInfo *info, const char *name) {
  int s = info ? sym_index(info, name) : -1;
  return s >= 0 ? info->sym_max[s] : 0;
}

static int input_index(const RtModelInfo *info, const char *name) {
  for (int i = 0; i < info->n_inputs; i++)
    if (info->inputs[i].name && strcmp(info->inputs[i].name, name) == 0) return i;
  return -1;
}

/* Elements of tensor t with every symbol at its maximum. */
static int64_t numel_at_max(const RtModelInfo *info, const RtTensorInfo *t) {
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++) {
    const RtDim *dim = &t->dims[d];
    n *= dim->sym < 0 ? dim->value : info->sym_max[dim->sym];
  }
  return n;
}

/* Buffers are carved from one block, 16-byte aligned each; with base NULL
 * only the bytes are counted (rt_stepper_bytes), so the count and the
 * layout are one piece of code. */
typedef struct Carve {
  unsigned char *base;
  size_t used, cap;
} Carve;

static void *carve(Carve *c, int64_t bytes) {
  size_t at = (c->used + 15) & ~(size_t)15;
  c->used = at + (size_t)bytes;
  return c->base && c->used <= c->cap ? c->base + at : NULL;
}

static int bind_encoder(RtStepper *st, const RtModelInfo *ei, char *err, size_t errlen) {
  const RtModelInfo *info = st->info;
  int eb_sym = sym_index(ei, "B"), es = sym_index(ei, "S");
  st->enc = ei;
  st->enc_in_src = input_index(ei, "src");
  st->enc_in_mask = input_index(ei, "src_mask");
  if (eb_sym < 0 || es < 0 || st->enc_in_src < 0 || st->sym_s < 0 ||
      ei->n_inputs != 1 + (st->enc_in_mask >= 0) || ei->inputs[st->enc_in_src].kind != RT_INPUT_IDS)
    return rt_errorf(err, errlen, "model '%s' has no encode program for generation", ei->name);
  st->max_src = ei->sym_max[es];
  st->src_vocab = ei->inputs[st->enc_in_src].vocab;
  for (int i = 0; i < info->n_inputs; i++) {
    if (info->inputs[i].kind != RT_INPUT_VALUES) continue;
    for (int o = 0; o < ei->n_outputs; o++)
      if (strcmp(ei->outputs[o].name, info->inputs[i].name) == 0) st->value_from[i] = o;
    if (st->value_from[i] < 0)
      return rt_errorf(err, errlen, "the encode program of '%s' does not compute '%s'", ei->name,
                       info->inputs[i].name);
  }
  st->max_enc_rows = ei->sym_max[eb_sym];
  if (st->max_enc_rows > st->max_rows)
    return rt_errorf(err, errlen, "internal: the encode program takes more rows than the step");
  return 0;
}

/* Everything rt_stepper_init checks and derives, before any buffer. */
static int bind(RtStepper *st, const RtModelInfo *info, const RtModelInfo *enc,
                const RtGenOps *ops, void *user, char *err, size_t errlen) {
  memset(st, 0, sizeof *st);
  st->info = info;
  st->ops = ops;
  st->user = user;
  st->sym_b = sym_index(info, "B");
  st->sym_t = sym_index(info, "T");
  st->sym_l = sym_index(info, "L");
  st->sym_s = sym_index(info, "S");
  st->in_tokens = input_index(info, "tokens");
  st->in_src_mask = input_index(info, "src_mask");
  st->in_positions = input_index(info, "positions");
  st->in_mask = input_index(info, "mask");
  st->enc_in_src = st->enc_in_mask = -1;
  int inputs_ok = st->in_tokens >= 0 && info->inputs[st->in_tokens].kind == RT_INPUT_IDS &&
                  (st->in_positions < 0 || info->inputs[st->in_positions].kind == RT_INPUT_IDS) &&
                  (st->in_mask < 0 || info->inputs[st->in_mask].rank == 2);
  for (int i = 0; i < info->n_inputs; i++) {
    st->value_from[i] = -1;
    inputs_ok &= i == st->in_tokens || i == st->in_src_mask || i == st->in_positions ||
                 i == st->in_mask || info->inputs[i].kind == RT_INPUT_VALUES;
  }
  if (st->sym_b < 0 || st->sym_t < 0 || st->sym_l < 0 || !inputs_ok || info->n_outputs < 1 ||
      info->outputs[0].rank != 2 || info->outputs[0].dims[1].sym >= 0 ||
      (st->sym_s >= 0) != (enc != NULL))
    return rt_errorf(err, errlen, "model '%s' is not a generation step graph", info->name);
  st->max_len = info->sym_max[st->sym_l];
  st->max_rows = info->sym_max[st->sym_b];
  st->vocab = info->outputs[0].dims[1].value;
  st->out_attn = -1;
  for (int o = 1; o < info->n_outputs; o++) {
    const RtTensorInfo *t = &info->outputs[o];
    if (strcmp(t->name, "attention") != 0) continue;
    if (t->rank != 3 || t->dims[0].sym != st->sym_b || t->dims[1].sym >= 0 || t->dims[1].value < 1 ||
        t->dims[2].sym < 0 || (t->dims[2].sym != st->sym_l && t->dims[2].sym != st->sym_s))
      return rt_errorf(err, errlen, "model '%s': the step's attention output is not [B,H,L|S]",
                       info->name);
    st->out_attn = o;
    st->attn_heads = t->dims[1].value;
  }
  st->token_vocab = info->inputs[st->in_tokens].vocab;
  return enc ? bind_encoder(st, enc, err, errlen) : 0;
}

/* Every buffer at the maxima, from c (the layout rt_stepper_bytes counts). */
static void place(RtStepper *st, Carve *c) {
  const RtModelInfo *info = st->info, *ei = st->enc;
  st->b.inputs[st->in_tokens] = carve(c, st->max_len * st->max_rows * (int64_t)sizeof(int32_t));
  /* the padding, then as much scratch for rt_stepper_reorder */
  st->pad = carve(c, 2 * st->max_rows * (int64_t)sizeof *st->pad);
  if (st->in_positions >= 0)
    st->b.inputs[st->in_positions] = carve(c, st->max_len * st->max_rows * (int64_t)sizeof(int32_t));
  if (st->in_mask >= 0) st->b.inputs[st->in_mask] = carve(c, st->max_len * st->max_rows);
  if (st->in_src_mask >= 0)
    st->b.inputs[st->in_src_mask] = carve(c, numel_at_max(info, &info->inputs[st->in_src_mask]));
  for (int o = 0; o < info->n_outputs; o++)
    st->b.outputs[o] = carve(c, numel_at_max(info, &info->outputs[o]) * (int64_t)sizeof(float) + 4);
  if (!ei) return;
  int64_t cells = st->max_enc_rows * st->max_src;
  st->eb.inputs[st->enc_in_src] = carve(c, cells * (int64_t)sizeof(int32_t));
  if (st->enc_in_mask >= 0) st->eb.inputs[st->enc_in_mask] = carve(c, cells);
  for (int o = 0; o < ei->n_outputs; o++)
    st->eb.outputs[o] = carve(c, numel_at_max(ei, &ei->outputs[o]) * (int64_t)sizeof(float) + 4);
  /* more rows than one (beam search): the source's keys / values copied to
   * every row */
  for (int i = 0; i < info->n_inputs && st->max_rows > 1; i++)
    if (st->value_from[i] >= 0)
      st->b.inputs[i] = st->rows[i] =
          carve(c, numel_at_max(info, &info->inputs[i]) * (int64_t)sizeof(float));
}

#ifndef TFMC_STATIC /* a question for the compiler (emit-c --static) and hosted callers */
int64_t rt_stepper_bytes(const RtModelInfo *step, const RtModelInfo *enc) {
  RtStepper st; /* only its indices are used */
  char err[8];
  if (bind(&st, step, enc, NULL, NULL, err, sizeof err)) return -1;
  Carve c = {NULL, 0, 0};
  place(&st, &c);
  return (int64_t)c.used;
}
#endif

int rt_stepper_init_in(RtStepper *st, const RtModelInfo *step, const RtModelInfo *enc,
                       const RtGenOps *ops, void *user, void *mem, size_t mem_bytes, char *err,
                       size_t errlen) {
  if (bind(st, step, enc, ops, user, err, errlen)) return 1;
  Carve c = {mem, 0, mem_bytes};
  place(st, &c);
  if (!mem || c.used > mem_bytes)
    return rt_errorf(err, errlen, "the step's buffers need %lld bytes, given %lld",
                     (long long)c.used, mem ? (long long)mem_bytes : 0LL);
  memset(mem, 0, c.used);
  return 0;
}

#ifndef TFMC_STATIC
int rt_stepper_init(RtStepper *st, const RtModelInfo *info, const RtModelInfo *enc,
                    const RtGenOps *ops, void *user, char *err, size_t errlen) {
  if (bind(st, info, enc, ops, user, err, errlen)) return 1;
  Carve c = {NULL, 0, 0};
  place(st, &c);
  void *block = malloc(c.used ? c.used : 1);
  if (!block) return rt_errorf(err, errlen, "out of memory");
  if (rt_stepper_init_in(st, info, enc, ops, user, block, c.used, err, errlen)) {
    free(block);
    return 1;
  }
  st->block = block;
  return 0;
}
#endif

int rt_stepper_encode(RtStepper *st, const int32_t *src, int64_t n, char *err, size_t errlen) {
  return rt_stepper_encode_rows(st, src, NULL, 1, n, err, errlen);
}

int rt_stepper_encode_rows(RtStepper *st, const int32_t *src, const uint8_t *src_mask,
                           int64_t rows, int64_t n, char *err, size_t errlen) {
  const RtModelInfo *ei = st->enc, *info = st->info;
  if (!ei) return rt_errorf(err, errlen, "internal: model '%s' has no encoder", info->name);
  if (n < 1 || n > st->max_src)
    return rt_errorf(err, errlen, "the source has %lld tokens; model '%s' takes 1..%lld",
                     (long long)n, info->name, (long long)st->max_src);
  if (rows < 1 || rows > st->max_enc_rows)
    return rt_errorf(err, errlen, "a batch of %lld sources; this model encodes at most %lld at once",
                     (long long)rows, (long long)st->max_enc_rows);
  int32_t *ids = st->eb.inputs[st->enc_in_src];
  /* the mask of rows x n: the encoder's input, else the step's */
  uint8_t *mask = st->enc_in_mask >= 0 ? st->eb.inputs[st->enc_in_mask]
                  : st->in_src_mask >= 0 ? st->b.inputs[st->in_src_mask] : NULL;
  for (int64_t r = 0; r < rows; r++) {
    int64_t real = 0;
    for (int64_t i = r * n; i < (r + 1) * n; i++) {
      if (src[i] < 0 || src[i] >= st->src_vocab)
        return rt_errorf(err, errlen, "source token id %d is outside the vocabulary (0..%lld)",
                         (int)src[i], (long long)st->src_vocab - 1);
      ids[i] = src[i];
      int is_real = src_mask ? src_mask[i] != 0 : ei->pad_id < 0 || src[i] != ei->pad_id;
      real += is_real;
      if (mask) mask[i] = (uint8_t)is_real;
    }
    if (src_mask && real < n && (st->enc_in_mask < 0 || st->in_src_mask < 0))
      return rt_errorf(err, errlen,
                       "source row %lld is padded, but model '%s' does not mask source padding in "
                       "its %s (the spec's 'mask encoder ... padding' and 'mask cross padding'): "
                       "a padded batch would not translate as each source alone",
                       (long long)r, info->name, st->enc_in_mask < 0 ? "encoder" : "cross-attention");
    if ((mask || src_mask) && !real)
      return rt_errorf(err, errlen, src_mask ? "source row %lld is all padding: nothing to translate"
                                             : "the source is all padding (pad id %lld): nothing to translate",
                       src_mask ? (long long)r : (long long)ei->pad_id);
  }
  if (st->in_src_mask >= 0) { /* the step's mask, [rows, S]: one source's on every row, or each's */
    uint8_t *sm = st->b.inputs[st->in_src_mask];
    if (rows > 1 && sm != mask) memcpy(sm, mask, (size_t)(rows * n));
    for (int64_t r = 0; rows == 1 && r < st->max_rows; r++)
      if (sm + r * n != mask) memcpy(sm + r * n, mask, (size_t)n);
  }
  st->eb.syms[sym_index(ei, "B")] = rows;
  st->eb.syms[sym_index(ei, "S")] = n;
  st->encoded = 0;
  if (st->ops->run(st->user, RT_GEN_ENCODE, &st->eb, err, errlen)) return 1;
  st->b.syms[st->sym_s] = n;
  for (int i = 0; i < info->n_inputs; i++) {
    if (st->value_from[i] < 0) continue;
    const float *v = st->eb.outputs[st->value_from[i]];
    if (!st->rows[i] || rows > 1) { /* [rows, n, d] as the step reads it */
      st->b.inputs[i] = (void *)(uintptr_t)v;
      continue;
    }
    st->b.inputs[i] = st->rows[i];
    size_t one = (size_t)(numel_at_max(info, &info->inputs[i]) / st->max_rows / st->max_src * n);
    for (int64_t r = 0; r < st->max_rows; r++) memcpy(st->rows[i] + (size_t)r * one, v, one * sizeof(float));
  }
  st->enc_rows = rows;
  st->encoded = 1;
  return 0;
}

int rt_stepper_set_padding(RtStepper *st, const int64_t *pad, int64_t rows, char *err,
                           size_t errlen) {
  if (rows < 1 || rows > st->max_rows)
    return rt_errorf(err, errlen, "padding for %lld rows; the step takes 1..%lld", (long long)rows,
                     (long long)st->max_rows);
  for (int64_t r = 0; r < rows; r++)
    if (pad && (pad[r] < 0 || pad[r] >= st->max_len))
      return rt_errorf(err, errlen, "row %lld: %lld pads do not fit max_len %lld", (long long)r,
                       (long long)pad[r], (long long)st->max_len);
  if (pad && st->in_mask < 0)
    for (int64_t r = 0; r < rows; r++)
      if (pad[r])
        return rt_errorf(err, errlen, "model '%s' takes no padding in its step", st->info->name);
  for (int64_t r = 0; r < st->max_rows; r++) st->pad[r] = pad && r < rows ? pad[r] : 0;
  return 0;
}

void rt_stepper_reset(RtStepper *st) {
  st->ops->reset(st->user);
  memset(st->pad, 0, (size_t)st->max_rows * sizeof *st->pad);
}

int rt_stepper_step_rows(RtStepper *st, const int32_t *tokens, int64_t rows, int64_t n,
                         int64_t past, const float **logits, char *err, size_t errlen) {
  if (rows < 1 || rows > st->max_rows || n < 1 || past < 0 || past + n > st->max_len)
    return rt_errorf(err, errlen, "a step of %lld x %lld tokens at %lld does not fit %lld rows of "
                     "max_len %lld", (long long)rows, (long long)n, (long long)past,
                     (long long)st->max_rows, (long long)st->max_len);
  if (st->enc && !st->encoded)
    return rt_errorf(err, errlen, "internal: a decoder step before the source was encoded");
  if (st->enc && st->enc_rows > 1 && rows != st->enc_rows)
    return rt_errorf(err, errlen, "internal: a step of %lld rows over a batch of %lld sources",
                     (long long)rows, (long long)st->enc_rows);
  for (int64_t i = 0; i < rows * n; i++) {
    if (tokens[i] < 0 || tokens[i] >= st->token_vocab)
      return rt_errorf(err, errlen, "token id %d is outside the vocabulary (0..%lld)", (int)tokens[i],
                       (long long)st->token_vocab - 1);
    ((int32_t *)st->b.inputs[st->in_tokens])[i] = tokens[i];
  }
  /* each row's positions of its new tokens and its real cache slots: row b's
   * first pad[b] slots are pads (position 0, masked), slot s >= pad[b] is
   * position s - pad[b] */
  int32_t *pos = st->in_positions >= 0 ? st->b.inputs[st->in_positions] : NULL;
  uint8_t *mask = st->in_mask >= 0 ? st->b.inputs[st->in_mask] : NULL;
  for (int64_t r = 0; r < rows; r++) {
    int64_t pr = st->pad[r];
    for (int64_t t = 0; pos && t < n; t++)
      pos[r * n + t] = (int32_t)(past + t >= pr ? past + t - pr : 0);
    for (int64_t s = 0; mask && s < past + n; s++) mask[r * (past + n) + s] = s >= pr;
  }
  st->b.syms[st->sym_b] = rows;
  st->b.syms[st->sym_t] = n;
  st->b.syms[st->sym_l] = past + n;
  if (st->ops->run(st->user, RT_GEN_STEP, &st->b, err, errlen)) return 1;
  *logits = st->b.outputs[0];
  return 0;
}

int rt_stepper_step(void *user, const int32_t *tokens, int64_t n, int64_t past,
                    const float **logits, char *err, size_t errlen) {
  return rt_stepper_step_rows(user, tokens, 1, n, past, logits, err, errlen);
}

int rt_stepper_batch_step(void *user, const int32_t *tokens, int64_t rows, int64_t n,
                          int64_t past, const float **logits, char *err, size_t errlen) {
  return rt_stepper_step_rows(user, tokens, rows, n, past, logits, err, errlen);
}

/* Row r of a per-row buffer of rows of `bytes` becomes row parent[r], for
 * r < n, copied in place front to back: parent[r] >= r (checked by the
 * caller), so no row is read after it was written. */
static void move_rows(unsigned char *base, size_t bytes, const int64_t *parent, int64_t n) {
  for (int64_t r = 0; r < n; r++)
    if (parent[r] != r) memcpy(base + (size_t)r * bytes, base + (size_t)parent[r] * bytes, bytes);
}

int rt_stepper_reorder(void *user, const int64_t *parent, int64_t rows, int64_t len, char *err,
                       size_t errlen) {
  RtStepper *st = user;
  if (rows < 1 || rows > st->max_rows || len < 0 || len > st->max_len)
    return rt_errorf(err, errlen, "internal: reordering %lld rows over %lld positions",
                     (long long)rows, (long long)len);
  /* a batch of sources: row r's source moves with it (in place; one source
   * on every row, beam search's, stays) */
  int per_source = st->enc && st->encoded && st->enc_rows > 1;
  for (int64_t r = 0; r < rows; r++)
    if (parent[r] < 0 || parent[r] >= st->max_rows || (per_source && parent[r] < r))
      return rt_errorf(err, errlen, "internal: row %lld from row %lld of a batch of %lld",
                       (long long)r, (long long)parent[r], (long long)st->max_rows);
  if (st->ops->reorder(st->user, parent, (int)rows, len, err, errlen)) return 1;
  int64_t *pad = st->pad + st->max_rows; /* the scratch half */
  for (int64_t r = 0; r < rows; r++) pad[r] = st->pad[parent[r]];
  memcpy(st->pad, pad, (size_t)rows * sizeof *pad);
  if (per_source) {
    const RtModelInfo *info = st->info;
    int64_t s = st->b.syms[st->sym_s];
    for (int i = 0; i < info->n_inputs; i++)
      if (st->value_from[i] >= 0) /* [B, S, d]: the encode program's output */
        move_rows(st->b.inputs[i],
                  (size_t)(numel_at_max(info, &info->inputs[i]) / st->max_rows / st->max_src * s) *
                      sizeof(float),
                  parent, rows);
    if (st->in_src_mask >= 0) move_rows(st->b.inputs[st->in_src_mask], (size_t)s, parent, rows);
    st->enc_rows = rows;
  }
  return 0;
}

int rt_stepper_attention(const RtStepper *st, const float **probs, int64_t *keys) {
  if (st->out_attn < 0) return 1;
  *probs = st->b.outputs[st->out_attn];
  *keys = st->b.syms[st->info->outputs[st->out_attn].dims[2].sym];
  return 0;
}

void rt_stepper_free(RtStepper *st) {
#ifndef TFMC_STATIC
  free(st->block);
#endif
  memset(st, 0, sizeof *st);
}

/* ---- compiled generation artefacts ---- */

#ifndef TFMC_STATIC /* rt_model_info_check and realloc: the hosted runtime's */
int rt_gen_info_check(const RtGenInfo *gi, char *err, size_t errlen) {
  if (!gi || gi->version != RT_GEN_INFO_VERSION)
    return rt_errorf(err, errlen, "generation info version %u; this runtime reads version %d",
                     gi ? gi->version : 0, RT_GEN_INFO_VERSION);
  if (!gi->step || !gi->weights)
    return rt_errorf(err, errlen, "generation info: no step program or weights layout");
  if (rt_model_info_check(gi->step, err, errlen) ||
      (gi->encode && rt_model_info_check(gi->encode, err, errlen)) ||
      (gi->forward && rt_model_info_check(gi->forward, err, errlen)))
    return 1;
  if (gi->weights->abi_version != RT_ABI_VERSION)
    return rt_errorf(err, errlen, "generation info: the weights layout is for ABI %u",
                     gi->weights->abi_version);
  /* the blocks: forward [0, f), encode [encode_offset, +e), step
   * [step_offset, +s), each inside the image (the encoder's and the step's
   * may be the forward pass's own) */
  int64_t f = gi->forward ? gi->forward->weights_floats : 0, all = gi->weights->weights_floats;
  int64_t e = gi->encode ? gi->encode->weights_floats : 0, s = gi->step->weights_floats;
  if (f < 0 || e < 0 || s < 0 || gi->encode_offset % 16 || gi->step_offset % 16 ||
      gi->encode_offset < 0 || gi->step_offset < 0 || f > all || e > all - gi->encode_offset ||
      s > all - gi->step_offset)
    return rt_errorf(err, errlen, "generation info: the weights image does not hold the programs");
  if (gi->n_states < 0 || (gi->n_states && !gi->states))
    return rt_errorf(err, errlen, "generation info: bad state count");
  for (int i = 0; i < gi->n_states; i++) {
    const RtStateInfo *st = &gi->states[i];
    if (st->offset < 0 || st->offset % 64 || st->rows < 1 || st->positions < 1 || st->width < 1 ||
        st->rows > gi->step->state_bytes / st->positions / st->width / 4 ||
        st->rows * st->positions * st->width * 4 > gi->step->state_bytes - st->offset)
      return rt_errorf(err, errlen, "generation info: state tensor %d is malformed", i);
  }
  return 0;
}

int rt_state_reorder(const RtStateInfo *states, int n_states, unsigned char *state,
                     const int64_t *parent, int n, int64_t len, void **scratch,
                     size_t *scratch_bytes, char *err, size_t errlen) {
  for (int k = 0; k < n_states; k++) {
    const RtStateInfo *s = &states[k];
    if (n > s->rows || len > s->positions || len < 0)
      return rt_errorf(err, errlen, "internal: reordering %d rows of %lld positions of '%s'", n,
                       (long long)len, s->name);
    size_t row = (size_t)(len * s->width) * sizeof(float), need = (size_t)n * row;
    if (need > *scratch_bytes) {
      void *p = realloc(*scratch, need);
      if (!p) return rt_errorf(err, errlen, "out of memory reordering the KV cache");
      *scratch = p;
      *scratch_bytes = need;
    }
    float *base = (float *)(void *)(state + s->offset);
    unsigned char *tmp = *scratch;
    for (int i = 0; i < n; i++) {
      if (parent[i] < 0 || parent[i] >= s->rows)
        return rt_errorf(err, errlen, "internal: beam parent %lld of %lld rows",
                         (long long)parent[i], (long long)s->rows);
      if (parent[i] != i) /* a row that stays is not copied */
        memcpy(tmp + (size_t)i * row, base + parent[i] * s->positions * s->width, row);
    }
    for (int i = 0; i < n; i++)
      if (parent[i] != i)
        memcpy(base + (int64_t)i * s->positions * s->width, tmp + (size_t)i * row, row);
  }
  return 0;
}
#endif
