/* runtime/rt_gen_model.c — a compiled generation artefact as an RtGenOps
 * backend (rt_gen_model.h): the programs run on their own arenas, the
 * step on the planned state, both on one weights image.
 *
 * Invariants: the step's state is allocated once (zero pages: only what
 * steps write is ever touched) and a reset zeroes exactly what steps wrote
 * since the last one (rows x positions of every cache tensor), so a short
 * generation costs its own tokens only; the encode program reads the image
 * from encode_offset, the step from step_offset; on a failed open nothing
 * stays held. The static build (-DTFMC_STATIC: emit-c --static) has the
 * same ops over the caller's memory (rt_gen_model_init_in) and nothing of
 * the hosted loader: no files, heap, threads, and no beam search. */
#include "runtime/rt_gen_model.h"

#include "runtime/rt_gemm.h"
#include "runtime/rt_pool.h"

#include <stdlib.h>
#include <string.h>

static int sym_of(const RtModelInfo *info, const char *name) {
  for (int i = 0; i < info->n_syms; i++)
    if (info->sym_names[i] && strcmp(info->sym_names[i], name) == 0) return i;
  return -1;
}

static int gm_run(void *user, RtGenProgram which, RtBound *b, char *err, size_t errlen) {
  RtGenModel *m = user;
  const float *w = m->w;
#ifndef TFMC_STATIC
  if (rt_arena_commit(&m->arena[which], b->syms, err, errlen)) return 1;
#else /* the caller's arena, planned at the maxima: nothing to commit */
  (void)err;
  (void)errlen;
#endif
  RtRunArgs args = {b->syms, b->inputs, b->outputs, w + m->gi->encode_offset,
                    m->arena[which].base, m->pool, NULL, NULL};
  if (which == RT_GEN_STEP) {
    const RtModelInfo *info = m->gi->step;
    int sb = sym_of(info, "B"), sl = sym_of(info, "L");
    args.weights = w + m->gi->step_offset;
    args.state = m->state;
    if (b->syms[sb] > m->dirty_rows) m->dirty_rows = b->syms[sb];
    if (b->syms[sl] > m->dirty_len) m->dirty_len = b->syms[sl];
  }
  m->run[which](&args);
  return 0;
}

static void gm_reset(void *user) {
  RtGenModel *m = user;
  for (int k = 0; k < m->gi->n_states && m->dirty_len > 0; k++) {
    const RtStateInfo *s = &m->gi->states[k];
    float *base = (float *)(void *)(m->state + s->offset);
    for (int64_t r = 0; r < m->dirty_rows && r < s->rows; r++)
      memset(base + r * s->positions * s->width, 0,
             (size_t)((m->dirty_len < s->positions ? m->dirty_len : s->positions) * s->width) *
                 sizeof(float));
  }
  m->dirty_rows = m->dirty_len = 0;
}

static int gm_reorder(void *user, const int64_t *parent, int n, int64_t len, char *err,
                      size_t errlen) {
  RtGenModel *m = user;
#ifdef TFMC_STATIC
  (void)parent;
  (void)n;
  (void)len;
  return rt_errorf(err, errlen, "model '%s': the static build has no beam search",
                   m->gi->step->name);
#else
  if (n > m->dirty_rows) m->dirty_rows = n;
  return rt_state_reorder(m->gi->states, m->gi->n_states, m->state, parent, n, len, &m->scratch,
                          &m->scratch_bytes, err, errlen);
#endif
}

static const RtGenOps gen_model_ops = {gm_run, gm_reset, gm_reorder};

int rt_gen_model_init_in(RtGenModel *m, const RtGenInfo *gi, RtModelRunFn step,
                         RtModelRunFn encode, const float *weights, unsigned char *arena,
                         unsigned char *state, void *stepper, size_t stepper_bytes, char *err,
                         size_t errlen) {
  memset(m, 0, sizeof *m);
  if (!gi || gi->version != RT_GEN_INFO_VERSION || !gi->step || !step || !gi->encode != !encode ||
      gi->step->abi_version != RT_ABI_VERSION ||
      (gi->encode && gi->encode->abi_version != RT_ABI_VERSION))
    return rt_errorf(err, errlen, "internal: the compiled functions do not match the model");
  if (!weights || !arena || (gi->step->state_bytes && !state) || (uintptr_t)arena % 64 ||
      (uintptr_t)state % 64)
    return rt_errorf(err, errlen, "internal: no weights, or an arena or KV cache not 64-byte aligned");
  m->gi = gi;
  m->run[RT_GEN_STEP] = step;
  m->run[RT_GEN_ENCODE] = encode;
  m->w = weights;
  /* the programs never run at once: one arena serves both */
  m->arena[RT_GEN_STEP].base = m->arena[RT_GEN_ENCODE].base = arena;
  m->state = state;
  if (state) memset(state, 0, (size_t)gi->step->state_bytes);
  return rt_stepper_init_in(&m->st, gi->step, gi->encode, &gen_model_ops, m, stepper,
                            stepper_bytes, err, errlen);
}

#ifndef TFMC_STATIC

int rt_gen_model_open(RtGenModel *m, const RtGenInfo *gi, RtModelRunFn step, RtModelRunFn encode,
                      const char *weights_path, const void *image, size_t image_len,
                      int n_threads, void *state, char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  if (rt_gen_info_check(gi, err, errlen)) return 1;
  if (!step || !gi->encode != !encode)
    return rt_errorf(err, errlen, "internal: the compiled functions do not match the model");
  m->gi = gi;
  m->run[RT_GEN_STEP] = step;
  m->run[RT_GEN_ENCODE] = encode;
  int64_t bytes = gi->step->state_bytes;
  if (state && ((uintptr_t)state % 64))
    return rt_errorf(err, errlen, "the KV cache handed in is not 64-byte aligned");
  if (image ? rt_weights_from_memory(image, image_len, gi->weights, &m->weights, err, errlen)
            : !weights_path ? rt_errorf(err, errlen, "no weights: give the packed-weights file")
                            : rt_weights_open(weights_path, gi->weights, &m->weights, err, errlen))
    goto fail;
  m->w = rt_weights_data(m->weights);
  if (rt_arena_open(&m->arena[RT_GEN_STEP], gi->step, err, errlen) ||
      (gi->encode && rt_arena_open(&m->arena[RT_GEN_ENCODE], gi->encode, err, errlen)))
    goto fail;
  if (state) {
    m->state = state;
    memset(state, 0, (size_t)bytes);
  } else {
    /* calloc: zero pages, committed as the steps write them */
    if (!(m->state_raw = calloc(1, (size_t)bytes + 64))) {
      rt_errorf(err, errlen, "out of memory for the %lld-byte KV cache", (long long)bytes);
      goto fail;
    }
    m->state = (unsigned char *)(((uintptr_t)m->state_raw + 63) & ~(uintptr_t)63);
  }
  if (rt_stepper_init(&m->st, gi->step, gi->encode, &gen_model_ops, m, err, errlen)) goto fail;
  (void)rt_gemm_backend(); /* may set environment variables: before any thread starts */
  if (n_threads != 1) m->pool = rt_pool_create(n_threads); /* NULL: serial */
  return 0;
fail:
  rt_gen_model_close(m);
  return 1;
}

void rt_gen_model_close(RtGenModel *m) {
  rt_stepper_free(&m->st);
  rt_pool_destroy(m->pool);
  for (int i = 0; i < RT_GEN_PROGRAM_COUNT; i++)
    if (m->arena[i].base || m->arena[i].raw) rt_arena_close(&m->arena[i]);
  free(m->state_raw);
  free(m->scratch);
  rt_weights_close(m->weights);
  memset(m, 0, sizeof *m);
}
#endif
