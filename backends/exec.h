/* backends/exec.h — run a graph on a named backend ("interp" or "jit").
 *
 *     Tensor *out; int n_out; char err[512];
 *     if (backend_run("jit", g, weights, inputs, n_in, NULL, arena, &out, &n_out,
 *                     NULL, err, sizeof err)) fprintf(stderr, "%s\n", err);
 *
 * Inputs as for interp_run (matched to input nodes by name: ids int32,
 * masks uint8); outputs in g->outputs order, allocated in `a`. */
#ifndef TFMC_EXEC_H
#define TFMC_EXEC_H

#include "backends/interp/interp.h"

typedef struct ExecOptions {
  int threads; /* JIT pool size; 0 = one per CPU */
  int repeat;  /* timed runs after one warm-up run when > 0 (benchmarks) */
  bool profile; /* JIT: after the timed runs, max(repeat, 1) more with every
                   kernel timed; rt_profile_report's table (per op kind, the
                   slowest kernels) on stderr, as executables print it */
} ExecOptions;

typedef struct ExecTiming {
  double compile_ms;                /* JIT: lowering + LLVM compilation */
  double run_ms_median, run_ms_min, run_ms_max;
  int runs;                         /* timed runs (0: no timing asked) */
} ExecTiming;

/* timing may be NULL. With opt->repeat > 0 the forward runs once untimed,
 * then repeat times timed (the outputs are those of the last run). */
int backend_run(const char *backend, const IrGraph *g, const WeightSet *w, const Tensor *inputs,
                int n_inputs, const ExecOptions *opt, Arena *a, Tensor **outputs, int *n_outputs,
                ExecTiming *timing, char *err, size_t errlen);

/* Copies every param of w into dst at the loop program's weight offsets:
 * the packed layout compiled code addresses (LoopProgram.weights_floats
 * floats; the same layout RtModelInfo.weights describes). */
struct LoopProgram;
void backend_pack_weights(const struct LoopProgram *p, const WeightSet *w, float *dst);

/* ---- build.c: standalone executables (tfmc build) ---- */

typedef struct BuildOptions {
  const char *exe;         /* the executable to write; EXE.build/ holds intermediates */
  bool embed_weights;      /* weights in .rodata, else packed into EXE.weights */
  bool keep;               /* leave EXE.build/ in place */
  const char *include_dir; /* holds runtime/rt_model.h and runtime/templates/ */
  const char *runtime_lib; /* libtfmc_rt.a */
} BuildOptions;

/* Emits prog as an object file (LLVM, for this CPU), info's C description and
 * a main calling rt_main, writes the packed weights and links them with $CC
 * (default cc) and the runtime library. Temporary strings live in a.
 * Returns 0, or non-zero with a message in err. */
struct RtModelInfo;
int backend_build_executable(Arena *a, const struct LoopProgram *prog,
                             const struct RtModelInfo *info, const float *packed,
                             const BuildOptions *o, char *err, size_t errlen);

#endif
