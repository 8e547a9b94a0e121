/* passes/stats.c — parameter and FLOP counts of a graph (an analysis; it
 * does not change the graph). FLOPs: 2 per multiply-add of linear layers
 * (rows * K * N) and attention (QK^T and PV: 2 * 2 * B * Tq * Tk * D). */
#include "passes/passes.h"

#include <string.h>

static int64_t dim_value(IrDim d, const int64_t *sym) {
  return d.sym >= 0 ? sym[d.sym] : d.value;
}

static double numel(const IrType *t, const int64_t *sym) {
  double n = 1;
  for (int i = 0; i < t->rank; i++) n *= (double)dim_value(t->dims[i], sym);
  return n;
}

void pass_stats_compute(const IrGraph *g, const int64_t *sym, GraphStats *out) {
  memset(out, 0, sizeof *out);
  out->n_nodes = g->n_nodes;
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->op == IR_OP_PARAM) {
      out->n_params += (int64_t)numel(&n->type, sym);
    } else if (n->op == IR_OP_LINEAR) {
      const IrType *w = &g->nodes[n->operands[1]].type;
      double rows = numel(&n->type, sym) / (double)dim_value(w->dims[0], sym);
      out->flops_linear += 2.0 * rows * (double)dim_value(w->dims[0], sym) *
                           (double)dim_value(w->dims[1], sym);
    } else if (n->op == IR_OP_ATTENTION || n->op == IR_OP_ATTENTION_FLASH ||
               n->op == IR_OP_ATTN_PROBS || n->op == IR_OP_ATTN_MIX) {
      /* attention: q [B,Tq,D] k [B,Tk,D]; probs: QK^T only; mix: PV only */
      const IrType *q = &g->nodes[n->operands[0]].type;
      const IrType *k = &g->nodes[n->operands[1]].type;
      double b = (double)dim_value(q->dims[0], sym);
      if (n->op == IR_OP_ATTN_MIX) {
        /* p [B,H,Tq,Tk], v [B,Tk,D] */
        double tq = (double)dim_value(q->dims[2], sym), tk = (double)dim_value(q->dims[3], sym);
        out->flops_attention += 2.0 * b * tq * tk * (double)dim_value(k->dims[2], sym);
        continue;
      }
      double tq = (double)dim_value(q->dims[1], sym), tk = (double)dim_value(k->dims[1], sym);
      double d = (double)dim_value(q->dims[2], sym);
      out->flops_attention += (n->op == IR_OP_ATTN_PROBS ? 2.0 : 4.0) * b * tq * tk * d;
    }
  }
  out->weight_bytes = out->n_params * 4;
  out->flops = out->flops_linear + out->flops_attention;
}
