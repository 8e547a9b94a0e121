/* backends/interp/interp.h — the reference interpreter: runs any graph IR
 * with plain, obviously-correct kernels. It defines what every op means;
 * every other backend is checked against it.
 *
 * Example:
 *     Tensor in[1] = {{.name = "tokens", .dtype = IR_I32, .rank = 2,
 *                      .dims = {2, 7}, .data = ids}};
 *     Tensor *out; int n_out; char err[512];
 *     if (interp_run(g, weights, in, 1, a, &out, &n_out, err, sizeof err))
 *       fprintf(stderr, "%s\n", err);
 *
 * Kernels compute in float (f32 storage) with double accumulation where a
 * reduction is long (sums in layernorm, softmax, matmul dot products), so the
 * reference is at least as accurate as what it checks.
 */
#ifndef TFMC_INTERP_H
#define TFMC_INTERP_H

#include "ir/ir.h"

/* A concrete tensor: constant dims, row-major, host-endian. */
typedef struct Tensor {
  const char *name;
  IrDtype dtype; /* IR_F32: float, IR_I32: int32_t, IR_BOOL: uint8_t 0/1 */
  int rank;
  int64_t dims[IR_MAX_RANK];
  void *data;
} Tensor;

int64_t tensor_numel(const Tensor *t);

/* Runs g. Inputs are matched to the graph's input nodes by name (each must be
 * present, with the node's dtype and rank); symbolic dims are bound from the
 * inputs and checked against their maxima and for consistency; params come
 * from w by name. Run-time data errors (an embedding id out of range, ...)
 * are refused. Outputs (named as the graph's outputs, in order) and all
 * scratch memory are allocated in a. Returns 0, or non-zero with a message
 * in err. */
int interp_run(const IrGraph *g, const WeightSet *w, const Tensor *inputs,
               int n_inputs, Arena *a, Tensor **outputs, int *n_outputs,
               char *err, size_t errlen);

/* Tensors that persist across runs of one graph: every `state` node's
 * f32 tensor (its constant dims), zero when created. Lives in a. */
typedef struct InterpState InterpState;
InterpState *interp_state_create(Arena *a, const IrGraph *g);
/* Beam search's cache reorder: in every state tensor f32[Bm,Sm,D], row i
 * (i < n) becomes what row parent[i] held, over the first len positions
 * (parent[i] in [0, Bm), n <= Bm). Temporaries live in a. */
void interp_state_reorder(InterpState *st, const int64_t *parent, int n, int64_t len, Arena *a);

typedef struct InterpRunOptions {
  const int64_t *syms; /* NULL, or per symbol a value bound before the inputs
                          (0 = bound from the inputs): symbols no input has,
                          such as a step's total length L */
  InterpState *state;  /* created for g; NULL: a fresh (zero) state for this run */
} InterpRunOptions;

/* interp_run with options (NULL: as interp_run). */
int interp_run_with(const IrGraph *g, const WeightSet *w, const Tensor *inputs,
                    int n_inputs, const InterpRunOptions *opt, Arena *a, Tensor **outputs,
                    int *n_outputs, char *err, size_t errlen);

#endif
