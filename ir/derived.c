/* ir/derived.c — derived parameters: the values of `param.concat` nodes
 * (ir/ops.def), computed from the weights of the params they concatenate.
 *
 * A pass may create a derived param (fuse-qkv: Wq|Wk|Wv -> one [3d, d]
 * weight); its value is a pure function of the weights, so it is computed
 * once, when the weights are bound to the graph the backends run (the
 * compile driver, after the graph passes), and from then on read by name
 * like any param: the interpreter binds it, the packer copies it into the
 * packed weights that `tfmc build` writes and emitted C embeds. Nothing
 * computes it per run.
 *
 * Invariant: the WeightSet returned holds w's weights unchanged (the same
 * data pointers: w may be shared by several compiles, as tfmc bench does)
 * plus one weight per derived param it does not hold yet, named as its
 * node. */
#include "ir/ir.h"
#include "runtime/rt_weights.h" /* rt_weights_advise_huge */

#include <stdio.h>
#include <string.h>

static int64_t numel(const IrType *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dims[i].value;
  return n;
}

bool ir_param_concat_compute(const IrGraph *g, int id, const WeightSet *w, float *dst,
                             char *err, size_t errlen) {
  const IrNode *n = &g->nodes[id];
  TFMC_ASSERT(n->op == IR_OP_PARAM_CONCAT);
  int axis = n->attrs.axis;
  /* [outer, dim(axis), inner]: each operand contributes its dim(axis) *
   * inner floats to every outer row, in operand order */
  int64_t outer = 1, inner = 1, row = 0;
  for (int d = 0; d < axis; d++) outer *= n->type.dims[d].value;
  for (int d = axis + 1; d < n->type.rank; d++) inner *= n->type.dims[d].value;
  const Weight *src[IR_MAX_OPERANDS];
  for (int k = 0; k < n->n_operands; k++) {
    const IrNode *p = &g->nodes[n->operands[k]];
    src[k] = ir_weights_find(w, p->attrs.name);
    if (!src[k] || !ir_type_eq(&src[k]->type, &p->type) ||
        (numel(&p->type) && !src[k]->data && !w->src)) {
      snprintf(err, errlen, "derived param '%s' needs weight '%s' as %s", n->attrs.name,
               p->attrs.name, src[k] ? "the graph declares it" : "loaded");
      return false;
    }
  }
  for (int64_t o = 0; o < outer; o++)
    for (int k = 0; k < n->n_operands; k++) {
      int64_t chunk = src[k]->type.dims[axis].value * inner;
      /* from the checkpoint itself when the operand was never read */
      if (ir_weight_read(w, src[k], o * chunk, (o + 1) * chunk, dst + row, err, errlen))
        return false;
      row += chunk;
    }
  return true;
}

WeightSet *ir_weights_derive(Arena *a, const IrGraph *g, const WeightSet *w, char *err,
                             size_t errlen) {
  int n_derived = 0;
  for (int i = 0; i < g->n_nodes; i++) n_derived += g->nodes[i].op == IR_OP_PARAM_CONCAT;
  if (!n_derived) return (WeightSet *)w;
  int have = w ? w->n : 0;
  WeightSet *out = arena_alloc(a, sizeof *out);
  out->items = arena_alloc(a, (size_t)(have + n_derived) * sizeof *out->items);
  if (have) memcpy(out->items, w->items, (size_t)have * sizeof *out->items);
  out->n = have;
  /* the same items first, so w's source reads them by the same index */
  out->src = w ? w->src : NULL;
  out->nonfinite = NULL;
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->op != IR_OP_PARAM_CONCAT) continue;
    /* already derived by an earlier compile of the same graph whose
     * weights this one reuses (tfmc bench): a derived param's name is
     * unique among the graph's params, and its value a function of them */
    const Weight *old = ir_weights_find(w, n->attrs.name);
    if (old && ir_type_eq(&old->type, &n->type)) continue;
    int64_t count = numel(&n->type);
    float *data = arena_try_alloc(a, (size_t)(count ? count : 1) * sizeof(float));
    if (!data) {
      snprintf(err, errlen, "out of memory: derived param '%s' needs %lld bytes", n->attrs.name,
               (long long)count * 4);
      return NULL;
    }
    /* on 2 MiB pages before the copy first writes them (as the loaded
     * weights are): GPT-2's fused q/k/v, 85 MB, faulted in 4 KiB pages
     * took ~0.1 s */
    rt_weights_advise_huge(data, (size_t)count * sizeof(float));
    if (!ir_param_concat_compute(g, i, w, data, err, errlen)) return NULL;
    out->items[out->n++] = (Weight){n->attrs.name, n->type, data};
  }
  return out;
}
