/* backends/exec.c — run a graph on a named backend: "interp" (the
 * reference interpreter) or "jit" (graph -> loop IR -> LLVM -> native code
 * in process). One entry point for the CLI and the parity tests, so both
 * exercise exactly the same path.
 *
 * Invariant: both backends take the same inputs (interp.h Tensors matched to
 * input nodes by name) and return outputs in g->outputs order, allocated in
 * the caller's arena. */
#include "backends/exec.h"

#include "backends/llvm/llvm_backend.h"
#include "ir/loop.h"
#include "passes/passes.h"
#include "runtime/rt_gemm.h"
#include "runtime/rt_pool.h"
#include "runtime/rt_profile.h"

#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>


/* ExecTiming's run fields from the runtime's summary. */
static void timing_set(ExecTiming *t, const RtTiming *rt) {
  t->runs = rt->runs;
  t->run_ms_min = rt->min_ms;
  t->run_ms_max = rt->max_ms;
  t->run_ms_median = rt->median_ms;
}

static int64_t sym_value_or(const int64_t *syms, IrDim d) {
  return d.sym >= 0 ? syms[d.sym] : d.value;
}

/* Runs g through the LLVM JIT with the same inputs and weights the
 * interpreter takes; outputs are allocated in a. */
static int jit_run(Arena *a, const IrGraph *g, const WeightSet *w, const Tensor *in_t, int in_n,
                   const ExecOptions *eo, Tensor **outputs, int *n_outputs, ExecTiming *timing,
                   char *err, size_t errlen) {
  int rc = 1;
  LlvmJit *jit = NULL;
  RtPool *pool = NULL;
  float *packed = NULL;
  unsigned char *arena = NULL;
  /* choose the GEMM backend (it may set OpenBLAS's environment and dlopen
   * it) before any thread of ours exists */
  (void)rt_gemm_backend();
  double t0 = rt_timing_now_ms();
  LoopProgram *prog = pass_lower_loops(a, g);
  /* bind symbols from the inputs, in input-node order */
  int64_t syms[IR_MAX_SYMS] = {0};
  void *inputs[RT_MAX_IO] = {0};
  int n_in = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *nd = &g->nodes[i];
    if (nd->op != IR_OP_INPUT) continue;
    const Tensor *t = NULL;
    for (int k = 0; k < in_n; k++)
      if (strcmp(in_t[k].name, nd->attrs.name) == 0) t = &in_t[k];
    if (!t || t->rank != nd->type.rank) {
      snprintf(err, errlen, "missing input '%s'", nd->attrs.name);
      goto done;
    }
    for (int d = 0; d < t->rank; d++) {
      IrDim dim = nd->type.dims[d];
      if (dim.sym < 0) {
        if (t->dims[d] != dim.value) {
          snprintf(err, errlen, "input '%s' dim %d is %lld, expected %lld", nd->attrs.name, d,
                   (long long)t->dims[d], (long long)dim.value);
          goto done;
        }
      } else if (syms[dim.sym] == 0) {
        if (t->dims[d] < 1 || t->dims[d] > g->syms[dim.sym].max) {
          snprintf(err, errlen, "input '%s' dim %d is %lld but %s must be in 1..%lld", nd->attrs.name,
                   d, (long long)t->dims[d], g->syms[dim.sym].name, (long long)g->syms[dim.sym].max);
          goto done;
        }
        syms[dim.sym] = t->dims[d];
      } else if (syms[dim.sym] != t->dims[d]) {
        snprintf(err, errlen, "input '%s' dim %d is %lld but %s is %lld", nd->attrs.name, d,
                 (long long)t->dims[d], g->syms[dim.sym].name, (long long)syms[dim.sym]);
        goto done;
      }
    }
    inputs[n_in++] = t->data;
  }
  /* pack the weights at the program's offsets */
  packed = aligned_alloc(64, (size_t)((prog->weights_floats * 4 + 63) / 64 * 64 + 64));
  if (!packed) {
    snprintf(err, errlen, "out of memory packing %lld weights", (long long)prog->weights_floats);
    goto done;
  }
  backend_pack_weights(prog, w, packed);
  arena = aligned_alloc(64, (size_t)((prog->arena_bytes + 63) / 64 * 64 + 64));
  Tensor *outs = arena_alloc(a, (size_t)(g->n_outputs + 1) * sizeof *outs);
  float *out_ptrs[RT_MAX_IO] = {0};
  for (int o = 0; o < g->n_outputs; o++) {
    const IrNode *nd = &g->nodes[g->outputs[o].value];
    Tensor *t = &outs[o];
    t->name = g->outputs[o].name;
    t->dtype = nd->type.dtype;
    t->rank = nd->type.rank;
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->dims[d] = sym_value_or(syms, nd->type.dims[d]);
    /* output pointers are typed float* in RtRunArgs; i32 / bool outputs
     * (test graphs) use the same storage reinterpreted */
    t->data = out_ptrs[o] = arena_alloc(a, (size_t)n * (nd->type.dtype == IR_BOOL ? 1 : 4) + 4);
  }
  if (!arena) {
    snprintf(err, errlen, "out of memory for the %lld-byte activation arena", (long long)prog->arena_bytes);
    goto done;
  }
  RtModelRunFn run;
  char e2[1024];
  if (llvm_jit_compile(prog, NULL, &jit, &run, e2, sizeof e2)) {
    snprintf(err, errlen, "JIT compilation failed: %s", e2);
    goto done;
  }
  double t1 = rt_timing_now_ms();
  pool = rt_pool_create(eo->threads);
  RtRunArgs args = {syms, inputs, out_ptrs, packed, arena, pool, NULL /* no profile */};
  run(&args);
  if (eo->repeat > 0) {
    RtTiming rt;
    if (rt_time_runs(run, &args, eo->repeat, &rt)) {
      snprintf(err, errlen, "out of memory");
      goto done;
    }
    if (timing) timing_set(timing, &rt);
  }
  if (timing) timing->compile_ms = t1 - t0;
  if (eo->profile && rt_profile_runs(pass_kernel_table(a, g, prog), prog->n_kernels, run, &args,
                                     eo->repeat > 0 ? eo->repeat : 1, stderr)) {
    snprintf(err, errlen, "out of memory");
    goto done;
  }
  *outputs = outs;
  *n_outputs = g->n_outputs;
  rc = 0;
done:
  if (pool) rt_pool_destroy(pool);
  if (jit) llvm_jit_destroy(jit);
  free(packed);
  free(arena);
  return rc;
}

void backend_pack_weights(const LoopProgram *p, const WeightSet *w, float *dst) {
  for (int b = 0; b < p->n_bufs; b++) {
    const LBuffer *lb = &p->bufs[b];
    if (lb->kind != LB_WEIGHT) continue;
    const Weight *wt = ir_weights_find(w, lb->name);
    TFMC_ASSERT(wt); /* the program's params are the graph's, all loaded */
    int64_t n = 1;
    for (int d = 0; d < wt->type.rank; d++) n *= wt->type.dims[d].value;
    memcpy(dst + lb->offset, wt->data, (size_t)n * 4);
  }
}

int backend_run(const char *backend, const IrGraph *g, const WeightSet *w, const Tensor *inputs,
                int n_inputs, const ExecOptions *opt, Arena *a, Tensor **outputs, int *n_outputs,
                ExecTiming *timing, char *err, size_t errlen) {
  ExecOptions none = {0, 0, false};
  const ExecOptions *eo = opt ? opt : &none;
  if (timing) memset(timing, 0, sizeof *timing);
  if (strcmp(backend, "interp") == 0) {
    if (interp_run(g, w, inputs, n_inputs, a, outputs, n_outputs, err, errlen)) return 1;
    if (eo->repeat <= 0) return 0;
    double *ms = malloc((size_t)eo->repeat * sizeof *ms);
    if (!ms) {
      snprintf(err, errlen, "out of memory");
      return 1;
    }
    int rc = 0;
    for (int r = 0; r < eo->repeat && !rc; r++) {
      /* each run allocates its tensors in a fresh arena, dropped after */
      Arena *scratch = arena_create();
      Tensor *o;
      int n;
      double s0 = rt_timing_now_ms();
      rc = interp_run(g, w, inputs, n_inputs, scratch, &o, &n, err, errlen);
      ms[r] = rt_timing_now_ms() - s0;
      arena_destroy(scratch);
    }
    if (!rc && timing) {
      RtTiming rt;
      rt_timing_summarise(ms, eo->repeat, &rt);
      timing_set(timing, &rt);
    }
    free(ms);
    return rc;
  }
  if (strcmp(backend, "jit") == 0)
    return jit_run(a, g, w, inputs, n_inputs, eo, outputs, n_outputs, timing, err, errlen);
  snprintf(err, errlen, "unknown backend '%s' (available: jit, interp)", backend);
  return 1;
}
