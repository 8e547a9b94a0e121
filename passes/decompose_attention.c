/* passes/decompose_attention.c — splits every fused attention into its two
 * halves:
 *
 *   attention(q, k, v, mask?) {heads, scale}
 *     -> attn.mix(attn.probs(q, k, mask?) {heads, scale}, v) {heads}
 *
 * i.e. softmax(q_h k_h^T * scale, masked -> -1e9) v_h per head, with the
 * probabilities p f32[B,H,Tq,Tk] made a value of their own. ops.def defines
 * the two forms as equal and the interpreter computes them with the same
 * kernels, so the values are identical; what changes is that the Tq x Tk
 * score matrix is materialised (this is a lowering for experiments and for
 * exposing p, not an optimisation: no -O level runs it).
 *
 * Invariants: both new nodes carry the attention's location; every other
 * node is copied unchanged; outputs keep their names and order. */
#include "passes/passes.h"

#include <string.h>

static int decompose(PassRewrite *rw, int id, void *user) {
  const IrNode *n = &rw->old->nodes[id];
  if (n->op != IR_OP_ATTENTION)
    return PASS_COPY;
  int q = pass_rewrite_operand(rw, id, 0), k = pass_rewrite_operand(rw, id, 1);
  int v = pass_rewrite_operand(rw, id, 2);
  bool masked = n->n_operands == 4;
  int probs_ops[3] = {q, k, masked ? pass_rewrite_operand(rw, id, 3) : -1};
  IrAttrs pa, ma;
  memset(&pa, 0, sizeof pa);
  memset(&ma, 0, sizeof ma);
  pa.heads = ma.heads = n->attrs.heads;
  pa.scale = n->attrs.scale;
  /* p f32[B,H,Tq,Tk] = softmax(q k^T * scale, mask) per head */
  int p = ir_build(rw->g, IR_OP_ATTN_PROBS, probs_ops, masked ? 3 : 2, &pa, n->loc);
  (*(int *)user)++;
  /* out f32[B,Tq,Dv] = p v per head, heads concatenated */
  return ir_build(rw->g, IR_OP_ATTN_MIX, (int[]){p, v}, 2, &ma, n->loc);
}

bool pass_decompose_attention_run(IrGraph *g, PassContext *ctx) {
  int found = 0;
  for (int id = 0; id < g->n_nodes; id++)
    found += g->nodes[id].op == IR_OP_ATTENTION;
  if (found == 0) {
    pass_note(ctx, "no attention to decompose");
    return true;
  }
  int done = 0;
  pass_rewrite(g, NULL, decompose, &done);
  TFMC_ASSERT(done == found);
  pass_note(ctx, "decomposed %d attention op%s into attn.probs + attn.mix", done,
            done == 1 ? "" : "s");
  return true;
}
