/* passes/fuse_add_norm.c — residual add + layernorm -> one row kernel.
 *
 *   s = add(a, b); y = layernorm(s, g, beta)
 *     ->  y = fused "add_layernorm" a, b, g, beta            (nothing else reads s)
 *     ->  y = fused "add_layernorm_sum" a, b, g, beta        (pre-norm: the residual
 *         s = result y {index=1}                              stream reads s on)
 *
 * The kernel (passes/lower_loops.c) computes a row of s while it normalises
 * it, so s is written only when something reads it, and the row is in cache
 * for the norm's three sweeps: one kernel instead of two per pair. Both
 * kinds are rows of ir/fused.def; their decomposition is exactly the two
 * nodes they replace, so the values are the same up to float rounding of
 * the sums (the same formula, the same order).
 *
 * Conditions: the layernorm's input is an add; no node between the add and
 * the layernorm reads the sum (the fused node takes the layernorm's place in
 * the node order, so such a reader would come before it: left alone). An add
 * read by several layernorms is fused with the first; the others read the
 * sum. An add both of whose operands fuse-elementwise would compute inside
 * the add's tree (an embedding sum: gathers by tokens, types, positions) is
 * left to that pass, which -O2 runs next: one loop nest then computes the
 * whole sum from the tables, one kernel fewer than this row kernel plus a
 * kernel for each operand, and the gathers never stored. Every new node carries the layernorm's location; outputs keep names
 * and order (an output that was the sum becomes the result node).
 */
#include "passes/passes.h"

#include <stdio.h>
#include <string.h>

typedef struct AddNorm {
  int *add_of;   /* per layernorm node: the add it fuses with, or -1 */
  bool *claimed; /* per add node: fused into a layernorm */
  bool *sum_read; /* per add node: something but its layernorm reads it */
} AddNorm;

static int rewrite(PassRewrite *rw, int id, void *user) {
  AddNorm *an = user;
  if (an->claimed[id])
    return PASS_DROP; /* built with its layernorm; its readers come after it */
  int s = an->add_of[id];
  if (s < 0)
    return PASS_COPY;
  const IrNode *ln = &rw->old->nodes[id];
  IrAttrs at;
  memset(&at, 0, sizeof at);
  at.fusion = an->sum_read[s] ? "add_layernorm_sum" : "add_layernorm";
  at.eps = ln->attrs.eps;
  at.unbiased = ln->attrs.unbiased;
  int ops[4] = {pass_rewrite_operand(rw, s, 0), pass_rewrite_operand(rw, s, 1),
                pass_rewrite_operand(rw, id, 1), pass_rewrite_operand(rw, id, 2)};
  int f = ir_build_typed(rw->g, IR_OP_FUSED, ops, 4, &at, ln->type, ln->loc);
  if (an->sum_read[s]) {
    IrAttrs ri;
    memset(&ri, 0, sizeof ri);
    ri.index = 1;
    rw->map[s] = ir_build_typed(rw->g, IR_OP_RESULT, &f, 1, &ri, rw->old->nodes[s].type,
                                rw->old->nodes[s].loc);
  }
  return f;
}

bool pass_fuse_add_norm_run(IrGraph *g, PassContext *ctx) {
  int n = g->n_nodes;
  Arena *a = g->arena;
  AddNorm an = {arena_alloc(a, (size_t)(n + 1) * sizeof(int)),
                arena_alloc(a, (size_t)(n + 1) * sizeof(bool)),
                arena_alloc(a, (size_t)(n + 1) * sizeof(bool))};
  int *readers = arena_alloc(a, (size_t)(n + 1) * sizeof(int));
  int *first_reader = arena_alloc(a, (size_t)(n + 1) * sizeof(int));
  bool *is_output = arena_alloc(a, (size_t)(n + 1) * sizeof(bool));
  for (int i = 0; i < n; i++)
    an.add_of[i] = -1, first_reader[i] = -1;
  for (int i = 0; i < g->n_outputs; i++)
    is_output[g->outputs[i].value] = true;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < g->nodes[i].n_operands; k++) {
      int o = g->nodes[i].operands[k];
      readers[o]++;
      if (first_reader[o] < 0)
        first_reader[o] = i;
    }
  int fused = 0, with_sum = 0, skipped = 0, left_to_elementwise = 0;
  for (int i = 0; i < n; i++) {
    const IrNode *ln = &g->nodes[i];
    if (ln->op != IR_OP_LAYERNORM)
      continue;
    int s = ln->operands[0];
    if (g->nodes[s].op != IR_OP_ADD || an.claimed[s])
      continue;
    if (first_reader[s] != i) { /* read before its layernorm */
      skipped++;
      continue;
    }
    if (pass_fuse_elementwise_joins(g, g->nodes[s].operands[0], s, 0) &&
        pass_fuse_elementwise_joins(g, g->nodes[s].operands[1], s, 1)) {
      left_to_elementwise++;
      continue;
    }
    an.add_of[i] = s;
    an.claimed[s] = true;
    an.sum_read[s] = readers[s] > 1 || is_output[s];
    fused++;
    with_sum += an.sum_read[s];
  }
  char extra[160] = "";
  if (skipped)
    snprintf(extra, sizeof extra, "; %d left alone (the sum read before its norm)", skipped);
  if (left_to_elementwise)
    snprintf(extra + strlen(extra), sizeof extra - strlen(extra),
             "; %d left to fuse-elementwise (an elementwise sum)", left_to_elementwise);
  if (!fused) {
    pass_note(ctx, "no add + layernorm to fuse%s", extra);
    return true;
  }
  pass_rewrite(g, NULL, rewrite, &an);
  pass_note(ctx, "fused %d add + layernorm pair%s into row kernels (%d also write the sum)%s",
            fused, fused == 1 ? "" : "s", with_sum, extra);
  return true;
}
