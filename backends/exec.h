/* backends/exec.h — run a compiled model (backends/driver.h) on a named
 * backend ("interp" or "jit").
 *
 *     Compiled c;   // driver_compile_file(..., &(DriverOptions){.stage = stage}, &c, ...)
 *     RtBound b;    // rt_model_bind / rt_text_bind against c.info: inputs bound once
 *     if (backend_run("jit", &c, &b, NULL, NULL, err, sizeof err)) fprintf(stderr, "%s\n", err);
 *     // b.outputs hold the outputs, shaped b.output_dims, in c.info->outputs order
 *
 * backend_known says which driver stage a backend needs (the interpreter
 * runs the graph; the JIT needs the loop program and packed weights). */
#ifndef TFMC_EXEC_H
#define TFMC_EXEC_H

#include "backends/driver.h"
#include "backends/interp/interp.h"
#include "runtime/rt_stepper.h"

typedef struct ExecOptions {
  int threads; /* JIT pool size; 0 = one per CPU */
  int repeat;  /* timed runs after one warm-up run when > 0 (benchmarks) */
  bool profile; /* JIT: after the timed runs, max(repeat, 1) more with every
                   kernel timed; rt_profile_report's table (per op kind, the
                   slowest kernels) on stderr, as executables print it */
} ExecOptions;

typedef struct ExecTiming {
  double compile_ms;                /* JIT: LLVM compilation (the driver lowered already) */
  double run_ms_median, run_ms_min, run_ms_max;
  int runs;                         /* timed runs (0: no timing asked) */
} ExecTiming;

/* True for a backend this build has, with the driver stage it needs. */
bool backend_known(const char *backend, DriverStage *stage);

/* Runs c on b's inputs into b's outputs. timing may be NULL. With
 * opt->repeat > 0 the forward runs once untimed, then repeat times timed
 * (the outputs are those of the last run). Returns 0, or 1 with a message. */
int backend_run(const char *backend, const Compiled *c, RtBound *b, const ExecOptions *opt,
                ExecTiming *timing, char *err, size_t errlen);

/* A session: a compiled model run many times on one backend, its state
 * (KV caches: RtModelInfo.state_bytes, the interpreter's InterpState) kept
 * from one run to the next and zero at first. The JIT compiles once, and
 * arena, state and pool are allocated once: nothing per run. Each run
 * takes b's bound symbols (b->syms, including ones no input binds, such as
 * a step graph's L) and inputs and writes b's outputs. Returns 0, or 1 with
 * a message. c must outlive the session. */
typedef struct ExecSession ExecSession;
int exec_session_create(const char *backend, const Compiled *c, const ExecOptions *opt,
                        ExecSession **out, char *err, size_t errlen);
int exec_session_run(ExecSession *s, RtBound *b, char *err, size_t errlen);
void exec_session_reset(ExecSession *s); /* zero the state: a new sequence */
/* Beam search, and a batch's live rows moved to the front: in every state
 * tensor f32[Bm,Sm,D] (a KV cache), row i < n becomes what row parent[i]
 * held, over the first len positions (a row with parent[i] == i is not
 * copied). Returns 0, or 1 with a message (out of memory). */
int exec_session_reorder(ExecSession *s, const int64_t *parent, int n, int64_t len, char *err,
                         size_t errlen);
void exec_session_destroy(ExecSession *s);

/* Generation's programs (driver_compile_generation) run through sessions:
 * an RtStepper (runtime/rt_stepper.h) whose ops are exec_session_run,
 * _reset and _reorder, so the JIT and the interpreter generate through the
 * same loop as executables and emitted C. Buffers are allocated once (at
 * the maxima): nothing per step.
 *
 *     BackendStepper st;
 *     if (backend_stepper_init(&st, "jit", &gen.step, gen.encoder_decoder ? &gen.encode : NULL,
 *                              &eo, err, sizeof err)) ...
 *     rt_generate(&(RtGenerateOptions){n, st.rs.max_len, st.rs.vocab, eos},
 *                 rt_stepper_step, &st.rs, prompt, n_prompt, out, ...);
 *     backend_stepper_free(&st); */
typedef struct BackendStepper {
  RtStepper rs;       /* the step functions take &rs */
  const Compiled *c;  /* the step program */
  const Compiled *enc; /* the encode program, or NULL */
  ExecSession *session, *enc_session;
  double compile_ms;  /* JIT: the programs' compilation (as ExecTiming.compile_ms); interp: 0 */
} BackendStepper;
/* Refuses (1 + message) a step that is not a generation step graph, an
 * encode program whose outputs are not the step's values inputs. */
int backend_stepper_init(BackendStepper *st, const char *backend, const Compiled *c,
                         const Compiled *enc, const ExecOptions *opt, char *err, size_t errlen);
void backend_stepper_free(BackendStepper *st);

/* Binds in-memory tensors (matched to info's inputs by name: ids int32,
 * masks uint8; every symbol bound from its first use, checked against the
 * others and 1..max) and allocates the outputs, as the runtime's binders
 * do; ids are not range-checked (the interpreter refuses bad ids, compiled
 * code trusts its binder: use rt_model_bind for untrusted data). Returns 0,
 * or 1 with a message and nothing left allocated; rt_model_unbind frees. */
int backend_bind_tensors(const RtModelInfo *info, const Tensor *in, int n_in, RtBound *b,
                         char *err, size_t errlen);

/* For tests and tools holding a graph in memory: driver_compile_graph (no
 * passes) + backend_bind_tensors + backend_run, outputs as tensors
 * allocated in a, in g->outputs order. */
int backend_run_tensors(const char *backend, const IrGraph *g, const WeightSet *w,
                        const Tensor *inputs,
                        int n_inputs, const ExecOptions *opt, Arena *a, Tensor **outputs,
                        int *n_outputs, ExecTiming *timing, char *err, size_t errlen);

/* Copies every param of w into dst at the loop program's weight offsets:
 * the packed layout compiled code addresses (LoopProgram.weights_floats
 * floats; the same layout RtModelInfo.weights describes). from > 0: only
 * the weight buffers at offset >= from, dst holding floats [from,
 * weights_floats) (the rest another program packed: driver.c). Weights
 * without data are read from w's source piece by piece: an f32 block
 * the source lends as it lies (WeightSource.view) packed from there (or
 * its rows gathered into a scratch per thread, for bf16 and int8 panels
 * of a transposed one) and dropped behind (WeightSource.drop), others
 * read (plain ones into place, panels through the scratch). Returns 0,
 * or 1 with a message when a read fails. */
struct LoopProgram;
int backend_pack_weights(const struct LoopProgram *p, const WeightSet *w, float *dst,
                         int64_t from, char *err, size_t errlen);

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

/* The same for a decoder or encoder_decoder spec: one executable that
 * runs the forward pass (forward: driver_compile_file's program, as
 * `tfmc run` runs it without --generate) and generates (gen: from
 * driver_compile_generation; gi and image: driver_generation_info). It
 * links the forward pass's object (tfmc_model_run), the decoder step's
 * (tfmc_step_run) and, for an encoder_decoder, the encoder's
 * (tfmc_encode_run), their descriptions, gi as tfmc_gen_info, the one
 * weights image (EXE.weights or embedded) and a main calling
 * rt_main_generate (runtime/templates/main_gen.c). */
int backend_build_generation(Arena *a, const Compiled *forward, const CompiledGeneration *gen,
                             const RtGenInfo *gi, const float *image, const BuildOptions *o,
                             char *err, size_t errlen);

#endif
