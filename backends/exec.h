/* backends/exec.h — run a graph on a named backend ("interp" or "jit").
 *
 *     Tensor *out; int n_out; char err[512];
 *     if (backend_run("jit", g, weights, inputs, n_in, 0, arena, &out, &n_out,
 *                     err, sizeof err)) fprintf(stderr, "%s\n", err);
 *
 * Inputs as for interp_run (matched to input nodes by name: ids int32,
 * masks uint8); outputs in g->outputs order, allocated in `a`. threads: the
 * JIT's pool size (0 = one per CPU); ignored by the interpreter. */
#ifndef TFMC_EXEC_H
#define TFMC_EXEC_H

#include "backends/interp/interp.h"

int backend_run(const char *backend, const IrGraph *g, const WeightSet *w, const Tensor *inputs,
                int n_inputs, int threads, Arena *a, Tensor **outputs, int *n_outputs, char *err,
                size_t errlen);

#endif
