/* passes/dce.c — dead-code elimination: keeps exactly the nodes some graph
 * output depends on, plus every input.
 *
 * Invariants: the graph's interface does not change (every input node stays,
 * in its order, even when nothing reads it, so callers bind the same inputs;
 * outputs keep their names and order); params nothing reads are dropped
 * (weights are bound by name, so a run simply does not ask for them); the
 * relative order of the kept nodes is the old one, so the result is still
 * topologically ordered. Liveness is recomputed here from the outputs. */
#include "passes/passes.h"

#include <stdlib.h>

bool pass_dce_run(IrGraph *g, PassContext *ctx) {
  bool *live = calloc((size_t)g->n_nodes + 1, sizeof *live);
  if (!live) {
    diag_error(ctx->diags, (IrLoc){NULL, 0, 0}, "dce: out of memory");
    return false;
  }
  for (int i = 0; i < g->n_outputs; i++)
    live[g->outputs[i].value] = true;
  /* operands have smaller ids, so one backward sweep sees every user first */
  for (int id = g->n_nodes - 1; id >= 0; id--) {
    const IrNode *n = &g->nodes[id];
    if (n->op == IR_OP_INPUT)
      live[id] = true;
    if (!live[id])
      continue;
    for (int k = 0; k < n->n_operands; k++)
      live[n->operands[k]] = true;
  }
  int removed = 0, params = 0;
  for (int id = 0; id < g->n_nodes; id++) {
    removed += !live[id];
    params += !live[id] && g->nodes[id].op == IR_OP_PARAM;
  }
  if (removed > 0)
    pass_rewrite(g, live, NULL, NULL);
  free(live);
  if (removed == 0)
    pass_note(ctx, "nothing to remove");
  else
    pass_note(ctx, "removed %d node%s (%d param%s)", removed, removed == 1 ? "" : "s", params,
              params == 1 ? "" : "s");
  return true;
}
