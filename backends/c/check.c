/* backends/c/check.c — validation of a loop program and its model
 * description before they are printed as C.
 *
 * The printer assumes what the loop IR verifier (ir/loop_verify.c) and
 * c_info_check accept: a malformed program or description is reported
 * (with the kernel's name) and never printed, so the C backend never writes
 * code that fails to compile or reads out of its buffers' kinds.
 *
 * Invariant: the checks only read the program and the description. */
#include "backends/c/c_internal.h"

#include <string.h>

/* The rules of loop IR are ir/loop_verify.c's; the C backend adds none of
 * its own (kernel names that are not k<N>_... are renamed by
 * c_kernel_name, not refused). The compile driver will run the verifier
 * after lowering and after every loop pass; until it does, the entry points
 * (c_emit_model, c_emit_project) call it here. */
int c_program_check(const LoopProgram *p, char *err, size_t errlen) {
  char msg[400];
  if (!loop_program_verify(p, msg, sizeof msg)) return c_fail(err, errlen, "c: %s", msg);
  return 0;
}

static int check_tensor(const RtModelInfo *info, const RtTensorInfo *t, const char *what, int i,
                        char *err, size_t errlen) {
  if (!t->name) return c_fail(err, errlen, "c: model info: %s %d has no name", what, i);
  if (t->rank < 0 || t->rank > RT_MAX_RANK)
    return c_fail(err, errlen, "c: model info: %s %d has rank %d", what, i, t->rank);
  if ((unsigned)t->elem >= RT_ELEM_COUNT)
    return c_fail(err, errlen, "c: model info: %s %d has element type %d", what, i, (int)t->elem);
  if ((unsigned)t->kind >= RT_INPUT_KIND_COUNT)
    return c_fail(err, errlen, "c: model info: %s %d has kind %d", what, i, (int)t->kind);
  for (int d = 0; d < t->rank; d++)
    if (t->dims[d].sym < -1 || t->dims[d].sym >= info->n_syms)
      return c_fail(err, errlen, "c: model info: %s %d dim %d names symbol %d", what, i, d,
                    t->dims[d].sym);
  return 0;
}

int c_info_check(const RtModelInfo *info, const LoopProgram *p, char *err, size_t errlen) {
  if (!info) return c_fail(err, errlen, "c: no model info");
  if (info->n_syms < 0 || info->n_syms > RT_MAX_SYMS || info->n_inputs < 0 ||
      info->n_inputs > RT_MAX_IO || info->n_outputs < 0 || info->n_outputs > RT_MAX_IO ||
      info->n_weights < 0 || (info->n_inputs && !info->inputs) ||
      (info->n_outputs && !info->outputs) || (info->n_weights && !info->weights))
    return c_fail(err, errlen, "c: model info: bad symbol, input, output or weight counts");
  if (p && info->n_syms < p->n_syms)
    return c_fail(err, errlen, "c: model info has %d symbols; the program uses %d", info->n_syms,
                  p->n_syms);
  if (info->weights_floats < 0 || info->arena_bytes < 0)
    return c_fail(err, errlen, "c: model info: negative weights or arena size");
  if (p && (info->weights_floats != p->weights_floats || info->arena_bytes != p->arena_bytes))
    return c_fail(err, errlen,
                  "c: model info (%lld weight floats, %lld arena bytes) does not match the "
                  "program (%lld, %lld)",
                  (long long)info->weights_floats, (long long)info->arena_bytes,
                  (long long)p->weights_floats, (long long)p->arena_bytes);
  for (int s = 0; s < info->n_syms; s++)
    if (!info->sym_names[s])
      return c_fail(err, errlen, "c: model info: symbol %d has no name", s);
  for (int i = 0; i < info->n_inputs; i++)
    if (check_tensor(info, &info->inputs[i], "input", i, err, errlen)) return 1;
  for (int i = 0; i < info->n_outputs; i++)
    if (check_tensor(info, &info->outputs[i], "output", i, err, errlen)) return 1;
  if (p)
    for (int i = 0; i < p->n_bufs; i++) {
      const LBuffer *b = &p->bufs[i];
      if ((b->kind == LB_INPUT && b->index >= info->n_inputs) ||
          (b->kind == LB_OUTPUT && b->index >= info->n_outputs))
        return c_fail(err, errlen, "c: buffer b%d is %s %d; the model info has %d", i,
                      b->kind == LB_INPUT ? "input" : "output", b->index,
                      b->kind == LB_INPUT ? info->n_inputs : info->n_outputs);
    }
  if (info->n_kernels < 0 || (info->n_kernels && !info->kernels))
    return c_fail(err, errlen, "c: model info: bad kernel count %d", info->n_kernels);
  if (p && info->n_kernels && info->n_kernels != p->n_kernels)
    return c_fail(err, errlen, "c: model info names %d kernels; the program has %d",
                  info->n_kernels, p->n_kernels);
  for (int i = 0; i < info->n_kernels; i++)
    if (!info->kernels[i].name || !info->kernels[i].op)
      return c_fail(err, errlen, "c: model info: kernel %d has no name or op kind", i);
  for (int i = 0; i < info->n_weights; i++) {
    const RtWeightInfo *w = &info->weights[i];
    if (!w->name) return c_fail(err, errlen, "c: model info: weight %d has no name", i);
    if (w->rank < 0 || w->rank > RT_MAX_RANK)
      return c_fail(err, errlen, "c: model info: weight %d has rank %d", i, w->rank);
    int64_t n = rt_weight_floats(w);
    if (n < 0) return c_fail(err, errlen, "c: model info: weight %d has a bad shape or layout", i);
    if (w->offset < 0 || w->offset > info->weights_floats || n > info->weights_floats - w->offset)
      return c_fail(err, errlen, "c: model info: weight %d lies outside the %lld weight floats", i,
                    (long long)info->weights_floats);
  }
  return 0;
}
