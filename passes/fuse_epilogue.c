/* passes/fuse_epilogue.c — folds what follows a matmul into its epilogue.
 *
 * A transformer's feed-forward block and its projections end in elementwise
 * work that reads the product once more from memory:
 *
 *   t = linear(x, w, b)            the GEMM writes t
 *   u = gelu(t)                    reads t, writes u
 *   y = add(u, r)  (or add(r, u))  reads u and r, writes y
 *
 * rt_linear applies act(...) + r to each output tile while it is still in
 * cache (runtime/rt_gemm.h), so this pass rewrites the chain as one node
 *
 *   y = linear(x, w, b, r) {act=gelu, residual=true}
 *
 * with the same values: the op is defined as exactly that composition,
 * each step rounded to f32 as the separate ops round it (ir/ops.def). What
 * it fuses, in the node order of the graph:
 *   - relu / gelu / gelu_tanh of a linear without an epilogue;
 *   - add(v, r) or add(r, v) where v is such a linear (with its activation
 *     fused or none) and r has the add's type exactly (no broadcasting:
 *     the residual is read as a [M, N] matrix), r not v itself.
 * A linear or activation is folded in only when the fused node is its one
 * consumer and it is no graph output (its value is then never needed on
 * its own); when an add could take either operand, the later-defined one
 * is folded (the other is usually the block's input, the residual).
 *
 * Invariants: values and their f32 rounding are those of the graph before;
 * the fused node stands at the place of the node it replaces last (the act
 * or the add), so every operand is defined before it, and carries that
 * node's location; outputs keep names and order; running the pass again
 * changes nothing (a linear with an activation takes no second one, one
 * with a residual no second add). */
#include "passes/passes.h"

#include <string.h>

typedef enum Role {
  ROLE_COPY,     /* kept as it is */
  ROLE_FOLDED,   /* folded into the fused node that consumes it: dropped */
  ROLE_FUSE_ACT, /* an activation: becomes linear {act} of its operand */
  ROLE_FUSE_ADD, /* an add: becomes linear {act?, residual} of one operand */
  ROLE_COUNT
} Role;

typedef struct Fuse {
  Role *role;    /* per old node */
  int *linear;   /* FUSE_*: the old linear whose x, w, b the fused node takes */
  IrAct *act;    /* FUSE_*: the fused activation */
  int *residual; /* FUSE_ADD: the old value added */
  int n_act, n_add;
} Fuse;

/* The epilogue activation an op is, or none. */
static IrAct act_of(IrOp op) {
  return op == IR_OP_RELU        ? IR_ACT_RELU
         : op == IR_OP_GELU      ? IR_ACT_GELU
         : op == IR_OP_GELU_TANH ? IR_ACT_GELU_TANH
                                 : IR_ACT_NONE;
}

/* Whether old value v may be folded into its one consumer: used once, and
 * no output. */
static bool foldable(const int *uses, const bool *is_output, int v) {
  return uses[v] == 1 && !is_output[v];
}

/* The linear (and its activation) old value v stands for if it is a plain
 * linear, a linear with only an activation, or an activation this pass
 * fuses; else -1. */
static int linear_behind(const IrGraph *g, const Fuse *f, int v, IrAct *act) {
  const IrNode *n = &g->nodes[v];
  if (n->op == IR_OP_LINEAR && !n->attrs.residual) {
    *act = n->attrs.act;
    return v;
  }
  if (f->role[v] == ROLE_FUSE_ACT) {
    *act = f->act[v];
    return f->linear[v];
  }
  return -1;
}

static void plan(const IrGraph *g, Fuse *f) {
  int *uses = arena_alloc(g->arena, (size_t)(g->n_nodes + 1) * sizeof *uses);
  bool *is_output = arena_alloc(g->arena, (size_t)(g->n_nodes + 1) * sizeof *is_output);
  for (int id = 0; id < g->n_nodes; id++)
    for (int k = 0; k < g->nodes[id].n_operands; k++)
      uses[g->nodes[id].operands[k]]++;
  for (int i = 0; i < g->n_outputs; i++) {
    uses[g->outputs[i].value]++;
    is_output[g->outputs[i].value] = true;
  }
  for (int id = 0; id < g->n_nodes; id++) {
    const IrNode *n = &g->nodes[id];
    IrAct act = act_of(n->op);
    if (act != IR_ACT_NONE) {
      int l = n->operands[0];
      const IrNode *ln = &g->nodes[l];
      if (ln->op == IR_OP_LINEAR && ln->attrs.act == IR_ACT_NONE && !ln->attrs.residual &&
          f->role[l] == ROLE_COPY && foldable(uses, is_output, l)) {
        f->role[id] = ROLE_FUSE_ACT;
        f->role[l] = ROLE_FOLDED;
        f->linear[id] = l;
        f->act[id] = act;
      }
      continue;
    }
    if (n->op != IR_OP_ADD)
      continue;
    /* the later operand first: the earlier one is usually the residual */
    int a = n->operands[0], b = n->operands[1];
    int order[2] = {a > b ? a : b, a > b ? b : a};
    for (int i = 0; i < 2; i++) {
      int v = order[i], r = order[1 - i];
      IrAct va = IR_ACT_NONE;
      if (v == r || !foldable(uses, is_output, v) ||
          (f->role[v] != ROLE_COPY && f->role[v] != ROLE_FUSE_ACT))
        continue;
      int l = linear_behind(g, f, v, &va);
      if (l < 0 || !ir_type_eq(&g->nodes[v].type, &n->type) ||
          !ir_type_eq(&g->nodes[r].type, &n->type))
        continue;
      f->role[v] = ROLE_FOLDED;
      if (l != v)
        f->role[l] = ROLE_FOLDED;
      f->role[id] = ROLE_FUSE_ADD;
      f->linear[id] = l;
      f->act[id] = va;
      f->residual[id] = r;
      break;
    }
  }
  /* what the note reports: activation nodes and adds folded away */
  for (int id = 0; id < g->n_nodes; id++) {
    f->n_act += act_of(g->nodes[id].op) != IR_ACT_NONE && f->role[id] != ROLE_COPY;
    f->n_add += f->role[id] == ROLE_FUSE_ADD;
  }
}

static int rewrite(PassRewrite *rw, int id, void *user) {
  Fuse *f = user;
  switch (f->role[id]) {
  case ROLE_COPY: return PASS_COPY;
  case ROLE_FOLDED: return PASS_DROP;
  case ROLE_FUSE_ACT:
  case ROLE_FUSE_ADD: break;
  case ROLE_COUNT: TFMC_ASSERT(!"role count");
  }
  const IrNode *n = &rw->old->nodes[id];
  int l = f->linear[id];
  const IrNode *ln = &rw->old->nodes[l];
  int ops[IR_MAX_OPERANDS], n_ops = 0;
  for (int k = 0; k < ln->n_operands; k++) /* x, w, bias? */
    ops[n_ops++] = pass_rewrite_operand(rw, l, k);
  IrAttrs at = ln->attrs;
  at.act = f->act[id];
  if (f->role[id] == ROLE_FUSE_ADD) {
    int r = rw->map[f->residual[id]];
    TFMC_ASSERT(r >= 0); /* the residual is kept: only folded values go */
    ops[n_ops++] = r;
    at.residual = true;
  }
  return ir_build(rw->g, IR_OP_LINEAR, ops, n_ops, &at, n->loc);
}

bool pass_fuse_epilogue_run(IrGraph *g, PassContext *ctx) {
  size_t n = (size_t)g->n_nodes + 1;
  Fuse f = {arena_alloc(g->arena, n * sizeof *f.role), arena_alloc(g->arena, n * sizeof *f.linear),
            arena_alloc(g->arena, n * sizeof *f.act), arena_alloc(g->arena, n * sizeof *f.residual),
            0, 0};
  plan(g, &f);
  if (f.n_act == 0 && f.n_add == 0) {
    pass_note(ctx, "no linear followed by relu / gelu / gelu_tanh or a residual add");
    return true;
  }
  int before = g->n_nodes;
  pass_rewrite(g, NULL, rewrite, &f);
  pass_note(ctx, "fused %d activation%s and %d residual add%s into linear epilogues (%d -> %d nodes)",
            f.n_act, f.n_act == 1 ? "" : "s", f.n_add, f.n_add == 1 ? "" : "s", before,
            g->n_nodes);
  return true;
}
