/* passes/flash_attention.c — every attention becomes its flash form:
 *
 *   attention(q, k, v, mask?) {heads, scale}
 *     -> attention.flash(q, k, v, mask?) {heads, scale}
 *
 * the same values (ir/ops.def; the interpreter runs both with one kernel),
 * compiled to rt_attention_flash: per block of block_q query rows the keys
 * are swept in blocks of block_k (LowerLoopsOptions.attn_block_k, default
 * 128), each block's scores computed, masked, folded into a running max and
 * sum (online softmax) and its weighted sum of v added to the rescaled
 * output, so no row of scores longer than block_k exists and the Tq x Tk
 * matrix is never materialised: memory stays linear in the sequence length.
 *
 * An attention whose probabilities are asked for (--attention) is built as
 * attn.probs + attn.mix by the frontend, not as attention: this pass leaves
 * it alone, so the probabilities are still written.
 *
 * Invariants: operands, attributes, types and locations are kept; every
 * other node is copied unchanged; a second run finds nothing to do. */
#include "passes/passes.h"

static int to_flash(PassRewrite *rw, int id, void *user) {
  const IrNode *n = &rw->old->nodes[id];
  if (n->op != IR_OP_ATTENTION)
    return PASS_COPY;
  int ops[IR_MAX_OPERANDS];
  for (int k = 0; k < n->n_operands; k++) ops[k] = pass_rewrite_operand(rw, id, k);
  (*(int *)user)++;
  return ir_build(rw->g, IR_OP_ATTENTION_FLASH, ops, n->n_operands, &n->attrs, n->loc);
}

bool pass_flash_attention_run(IrGraph *g, PassContext *ctx) {
  int found = 0, probs = 0;
  for (int id = 0; id < g->n_nodes; id++) {
    found += g->nodes[id].op == IR_OP_ATTENTION;
    probs += g->nodes[id].op == IR_OP_ATTN_PROBS;
  }
  if (found == 0) {
    pass_note(ctx, "no attention to replace%s", probs ? " (attn.probs stay: their probabilities are used)" : "");
    return true;
  }
  int done = 0;
  pass_rewrite(g, NULL, to_flash, &done);
  TFMC_ASSERT(done == found);
  pass_note(ctx, "%d attention op%s -> attention.flash%s", done, done == 1 ? "" : "s",
            probs ? "; attn.probs kept (their probabilities are used)" : "");
  return true;
}
