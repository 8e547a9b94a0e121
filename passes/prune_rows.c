/* passes/prune_rows.c — computes only the rows a `take` keeps.
 *
 * A classifier reads one position of the last hidden state (BERT's pooler
 * and the "Transformer anatomy" classifier: hidden[:, 0, :]), yet the
 * graph as built computes the last layer's queries, attention output,
 * projection and feed-forward for every position. Row-wise ops commute
 * with taking a row:
 *
 *   take(f(x), axis, i) = f(take(x, axis, i))   f row-wise along axis
 *
 * so this pass moves each take up through such ops until it reaches a value
 * that is needed in full anyway (the last layer's input feeds its keys and
 * values). The last layer of a classifier then runs its query projection,
 * attention, output projection and FFN for one row instead of S (the idea
 * llama.cpp applies to the last layer when only some logits are wanted).
 *
 * Which ops are row-wise along `axis` (a, in the op's result coordinates,
 * result rank R), and which operands carry the row:
 *   scale relu gelu gelu_tanh tanh           operand 0, axis a
 *   layernorm softmax log_softmax linear     operand 0, axis a, if a < R-1
 *                                            (they mix the last dim only);
 *                                            a linear's residual too
 *   add sub mul div and                      each operand that has axis a
 *                                            after right-aligned broadcasting
 *                                            with a dim that is not 1
 *   embed(table, ids)                        ids, axis a, if a < R-1
 *   attention(q, k, v, mask?)                q, if R = 3, a = 1 (a query
 *                                            position) and the mask has no
 *                                            query dim (padding masks do; a
 *                                            causal mask ties keys to the
 *                                            query's position)
 * The query of a pruned attention is reshaped to [B,1,D] and its result back
 * to [B,D], so the shapes stay those of take.
 *
 * Analysis (backwards, so every consumer is seen before its producer): a
 * value's demand is NONE, ROW(axis, index) or FULL; outputs are FULL; a take
 * asks ROW of its operand; a value whose demand is ROW and whose op is
 * row-wise along that axis is "pruned" and asks ROW of its carrying operands
 * and FULL of the rest; any other value asks FULL of all operands. Two
 * different demands meet as FULL.
 *
 * Rewrite (forwards): a pruned value is built as its one-row version (its
 * carrying operands are pruned values, or get a take of their full value);
 * a take of a pruned value becomes that value; everything else is copied.
 *
 * Invariants: values computed are the same up to float summation order (a
 * one-row linear takes the matrix-vector kernel); every new node carries the
 * location of the node it stands for; outputs keep names and order; a value
 * needed in full is never computed twice. */
#include "passes/passes.h"

#include <string.h>

typedef enum DemandKind { DEMAND_NONE, DEMAND_ROW, DEMAND_FULL, DEMAND_KIND_COUNT } DemandKind;

typedef struct Demand {
  DemandKind kind;
  int axis;
  int64_t index;
} Demand;

typedef struct Prune {
  Demand *demand; /* per old node */
  bool *pruned;   /* per old node: built as its one-row version */
  int *taken;     /* per old node: the new take of its full value, or -1 */
  int n_pruned;
} Prune;

static bool dim_is_one(IrDim d) { return d.sym < 0 && d.value == 1; }

static void demand_meet(Demand *d, Demand want) {
  if (d->kind == DEMAND_NONE)
    *d = want;
  else if (d->kind != want.kind || d->axis != want.axis || d->index != want.index)
    d->kind = DEMAND_FULL;
}

/* How an op relates rows of its result to rows of its operands (the
 * table at the top); the one switch over the op enum. */
typedef enum RowRule {
  ROW_NONE,     /* not row-wise along any axis: the take stays below it */
  ROW_UNARY,    /* elementwise: operand 0, any axis */
  ROW_NOT_LAST, /* mixes the last dim only: operand 0, any other axis */
  ROW_BINARY,   /* broadcasting elementwise: each operand that has the axis */
  ROW_EMBED,    /* the ids (operand 1), any axis but the last */
  ROW_QUERY,    /* attention: q (operand 0), axis 1 */
  ROW_RULE_COUNT
} RowRule;

static RowRule row_rule(IrOp op) {
  switch (op) {
  case IR_OP_SCALE:
  case IR_OP_RELU:
  case IR_OP_GELU:
  case IR_OP_GELU_TANH:
  case IR_OP_TANH:
    return ROW_UNARY;
  case IR_OP_LAYERNORM:
  case IR_OP_SOFTMAX:
  case IR_OP_LOG_SOFTMAX:
  case IR_OP_LINEAR:
    return ROW_NOT_LAST;
  case IR_OP_ADD:
  case IR_OP_SUB:
  case IR_OP_MUL:
  case IR_OP_DIV:
  case IR_OP_AND:
    return ROW_BINARY;
  case IR_OP_EMBED:
    return ROW_EMBED;
  case IR_OP_ATTENTION:
  case IR_OP_ATTENTION_FLASH:
    return ROW_QUERY;
  case IR_OP_INPUT:
  case IR_OP_PARAM:
  case IR_OP_CONST:
  case IR_OP_ARANGE:
  case IR_OP_SINUSOID:
  case IR_OP_MASK_CAUSAL:
  case IR_OP_RESHAPE:
  case IR_OP_TAKE:
  case IR_OP_ATTN_PROBS:
  case IR_OP_ATTN_MIX:
  case IR_OP_TAIL:
  case IR_OP_STATE:
  case IR_OP_KV_APPEND:
  case IR_OP_FUSED:  /* fusions run after prune-rows (-O2 order) */
  case IR_OP_RESULT:
  case IR_OP_PARAM_CONCAT:
  case IR_OP_SLICE:
  case IR_OP_COUNT:
    break;
  }
  return ROW_NONE;
}

/* True when taking row `a` of n's result equals applying n to the taken
 * rows of its carrying operands. */
static bool row_wise(const IrGraph *g, const IrNode *n, int a) {
  int R = n->type.rank;
  if (a < 0 || a >= R)
    return false;
  switch (row_rule(n->op)) {
  case ROW_UNARY:
  case ROW_BINARY:
    return true;
  case ROW_NOT_LAST:
  case ROW_EMBED:
    return a < R - 1;
  case ROW_QUERY:
    if (R != 3 || a != 1)
      return false;
    /* a mask with a query dim (causal) depends on the query position */
    return n->n_operands < 4 || dim_is_one(g->nodes[n->operands[3]].type.dims[1]);
  case ROW_NONE:
  case ROW_RULE_COUNT:
    break;
  }
  return false;
}

/* The axis operand k of n carries when n is taken along axis a, or -1 when
 * operand k is read in full. n must be row-wise along a (row_wise). */
static int carried_axis(const IrGraph *g, const IrNode *n, int k, int a) {
  const IrType *t = &g->nodes[n->operands[k]].type;
  switch (row_rule(n->op)) {
  case ROW_NOT_LAST:
    if (n->op == IR_OP_LINEAR && n->attrs.residual && k == n->n_operands - 1)
      return a; /* the residual is added row by row */
    return k == 0 ? a : -1;
  case ROW_UNARY:
  case ROW_QUERY:
    return k == 0 ? a : -1;
  case ROW_EMBED:
    return k == 1 ? a : -1;
  case ROW_BINARY: {
    int ak = a - (n->type.rank - t->rank); /* numpy broadcasting aligns trailing dims */
    return ak >= 0 && !dim_is_one(t->dims[ak]) ? ak : -1;
  }
  case ROW_NONE:
  case ROW_RULE_COUNT:
    break;
  }
  return -1;
}

static void analyse(const IrGraph *g, Prune *p) {
  for (int i = 0; i < g->n_outputs; i++)
    p->demand[g->outputs[i].value].kind = DEMAND_FULL;
  for (int id = g->n_nodes - 1; id >= 0; id--) {
    const IrNode *n = &g->nodes[id];
    Demand d = p->demand[id];
    if (n->op == IR_OP_TAKE) {
      demand_meet(&p->demand[n->operands[0]],
                  (Demand){DEMAND_ROW, n->attrs.axis, n->attrs.index});
      continue;
    }
    p->pruned[id] = d.kind == DEMAND_ROW && row_wise(g, n, d.axis);
    /* a take of a rank-1 operand would be a scalar: not worth a special case */
    for (int k = 0; p->pruned[id] && k < n->n_operands; k++)
      if (carried_axis(g, n, k, d.axis) >= 0 && g->nodes[n->operands[k]].type.rank < 2)
        p->pruned[id] = false;
    p->n_pruned += p->pruned[id];
    for (int k = 0; k < n->n_operands; k++) {
      int ak = p->pruned[id] ? carried_axis(g, n, k, d.axis) : -1;
      demand_meet(&p->demand[n->operands[k]],
                  ak >= 0 ? (Demand){DEMAND_ROW, ak, d.index} : (Demand){DEMAND_FULL, 0, 0});
    }
  }
}

/* The new value of row `index` along `axis` of old operand k of node id:
 * the operand's pruned version, or a take of its full value (one per
 * operand and row: consumers that read different rows of it get a take
 * each). */
static int taken_operand(PassRewrite *rw, Prune *p, int id, int k, int axis, int64_t index) {
  const IrNode *n = &rw->old->nodes[id];
  int o = n->operands[k], v = pass_rewrite_operand(rw, id, k);
  if (p->pruned[o])
    return v;
  if (p->taken[o] >= 0) {
    const IrNode *t = &rw->g->nodes[p->taken[o]];
    if (t->attrs.axis == axis && t->attrs.index == index)
      return p->taken[o];
  }
  IrAttrs at;
  memset(&at, 0, sizeof at);
  at.axis = axis;
  at.index = index;
  p->taken[o] = ir_build(rw->g, IR_OP_TAKE, &v, 1, &at, n->loc);
  return p->taken[o];
}

static int rewrite(PassRewrite *rw, int id, void *user) {
  Prune *p = user;
  const IrNode *n = &rw->old->nodes[id];
  if (n->op == IR_OP_TAKE && p->pruned[n->operands[0]])
    return pass_rewrite_operand(rw, id, 0); /* already one row */
  if (!p->pruned[id])
    return PASS_COPY;
  Demand d = p->demand[id];
  int ops[IR_MAX_OPERANDS];
  for (int k = 0; k < n->n_operands; k++) {
    int ak = carried_axis(rw->old, n, k, d.axis);
    ops[k] = ak >= 0 ? taken_operand(rw, p, id, k, ak, d.index) : pass_rewrite_operand(rw, id, k);
  }
  if (n->op != IR_OP_ATTENTION && n->op != IR_OP_ATTENTION_FLASH)
    return ir_build(rw->g, n->op, ops, n->n_operands, &n->attrs, n->loc);
  /* attention over one query: q [B,D] -> [B,1,D]; out [B,1,Dv] -> [B,Dv] */
  const IrType *tq = &rw->g->nodes[ops[0]].type;
  IrType q3 = ir_type(IR_F32, 3, (IrDim[]){tq->dims[0], IR_CONST(1), tq->dims[1]});
  ops[0] = ir_build_typed(rw->g, IR_OP_RESHAPE, &ops[0], 1, NULL, q3, n->loc);
  int att = ir_build(rw->g, n->op, ops, n->n_operands, &n->attrs, n->loc);
  const IrType *ta = &rw->g->nodes[att].type;
  IrType o2 = ir_type(IR_F32, 2, (IrDim[]){ta->dims[0], ta->dims[2]});
  return ir_build_typed(rw->g, IR_OP_RESHAPE, &att, 1, NULL, o2, n->loc);
}

bool pass_prune_rows_run(IrGraph *g, PassContext *ctx) {
  size_t n = (size_t)g->n_nodes + 1;
  Prune p = {arena_alloc(g->arena, n * sizeof *p.demand), arena_alloc(g->arena, n * sizeof *p.pruned),
             arena_alloc(g->arena, n * sizeof *p.taken), 0};
  memset(p.demand, 0, n * sizeof *p.demand);
  memset(p.pruned, 0, n * sizeof *p.pruned);
  memset(p.taken, -1, n * sizeof *p.taken);
  analyse(g, &p);
  if (p.n_pruned == 0) {
    pass_note(ctx, "no row-wise value feeds only a take");
    return true;
  }
  int n_before = g->n_nodes;
  pass_rewrite(g, NULL, rewrite, &p);
  pass_note(ctx, "%d value%s computed for the taken row only (%d -> %d nodes)", p.n_pruned,
            p.n_pruned == 1 ? "" : "s", n_before, g->n_nodes);
  return true;
}
