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

/* model_info.c: the run-time description of a compiled model (what
 * standalone executables and emitted C carry: runtime/rt_model.h). Inputs
 * are the graph's input nodes in order; ids inputs take their exclusive
 * bound from input_vocab[k] (k = input index; ignored for masks); a mask
 * input "mask" / "src_mask" / "tgt_mask" pads the ids input "tokens" / "src"
 * / "tgt" and may be given as "lengths" / "src_lengths" / "tgt_lengths".
 * Everything is allocated in a. */
struct RtModelInfo;
struct RtModelInfo *pass_model_info(Arena *a, const IrGraph *g, const struct LoopProgram *p,
                                    const int64_t *input_vocab, int64_t pad_id);
/* The ids input a mask input pads and the name of its lengths alternative. */
void pass_mask_names(const char *mask_input, const char **ids_input, const char **lengths);

#endif
