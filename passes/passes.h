/* passes/passes.h — analyses and transformations over graph IR.
 *
 * The pass manager (named passes, pipelines, verify-after-each, timing)
 * arrives with the optimisation issues; for now this holds the analyses the
 * CLI reports. */
#ifndef TFMC_PASSES_H
#define TFMC_PASSES_H

#include "ir/ir.h"

typedef struct GraphStats {
  int64_t n_params;      /* scalar parameters (elements of all params) */
  int64_t weight_bytes;  /* as f32 */
  int64_t n_nodes;
  double flops;          /* multiply-adds counted as 2 FLOPs: linear, attention */
  double flops_linear;
  double flops_attention;
} GraphStats;

/* Counts parameters and FLOPs of one forward pass with the symbols bound to
 * sym_values[i] (indexed like g->syms). Elementwise ops, norms and softmax
 * are not counted (they are O(d) per token against O(d^2)). */
void pass_stats_compute(const IrGraph *g, const int64_t *sym_values, GraphStats *out);

/* lower_loops.c: graph IR -> loop IR with the activation arena planned by
 * liveness at the maximum dims. The graph must verify. Buffers: inputs in
 * input-node order, outputs in g->outputs order, params packed in node order
 * at 16-float aligned offsets (LoopProgram.weights_floats in all). */
struct LoopProgram;
struct LoopProgram *pass_lower_loops(Arena *a, const IrGraph *g);

#endif
