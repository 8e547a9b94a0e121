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
/* Beam search: in every state tensor f32[Bm,Sm,D] (a KV cache), row i < n
 * becomes what row parent[i] held, over the first len positions. Returns 0,
 * or 1 with a message (out of memory). */
int exec_session_reorder(ExecSession *s, const int64_t *parent, int n, int64_t len, char *err,
                         size_t errlen);
void exec_session_destroy(ExecSession *s);

/* A step graph (LowerOptions.step: input "tokens" i32[B,T], symbols B, T,
 * L; output 0 the last position's logits [B,V]) run through a session as
 * runtime/rt_generate.h's step function, batch 1. Its token and logit
 * buffers are allocated once (max_len ids, V floats): nothing per step.
 *
 *     BackendStepper st;
 *     if (backend_stepper_init(&st, "jit", &gen.step, &eo, err, sizeof err)) ...
 *     // encoder_decoder: the encode program, then once per source
 *     if (backend_stepper_init_encoder(&st, "jit", &gen.encode, &eo, err, sizeof err)) ...
 *     if (backend_stepper_encode(&st, src, n_src, err, sizeof err)) ...
 *     rt_generate(&(RtGenerateOptions){n, st.max_len, st.vocab, eos},
 *                        backend_stepper_step, &st, prompt, n_prompt, out, ...);
 *     backend_stepper_free(&st); */
typedef struct BackendStepper {
  ExecSession *session;
  const Compiled *c;
  RtBound b;          /* syms set per step; inputs[in_tokens] = tokens, outputs[0] = logits */
  int sym_b, sym_t, sym_l, sym_s; /* sym_s: encoder_decoder's source length, else -1 */
  int in_tokens, in_src_mask;     /* step inputs (in_src_mask -1: none) */
  int64_t max_len;    /* L's maximum: the positions the cache holds */
  int64_t max_rows;   /* B's maximum: 1, or the beams of a beam search */
  int64_t vocab;      /* V */
  float *rows[RT_MAX_IO]; /* max_rows > 1: values input i copied to every row */
  /* encoder_decoder: the encode program, its session and buffers (inputs
   * src and src_mask, outputs the cross keys / values the step's
   * RT_INPUT_VALUES inputs point at); enc NULL for decoder-only */
  const Compiled *enc;
  ExecSession *enc_session;
  RtBound eb;
  int enc_in_src, enc_in_mask;    /* enc_in_mask -1: the encoder takes no mask */
  int value_from[RT_MAX_IO];      /* step input i <- encode output value_from[i], or -1 */
  int64_t max_src, src_vocab;     /* S's maximum; ids of src are < src_vocab */
  bool encoded;                   /* backend_stepper_encode has run */
} BackendStepper;
/* Refuses (1 + message) a compiled model that is not a step graph. */
int backend_stepper_init(BackendStepper *st, const char *backend, const Compiled *c,
                         const ExecOptions *opt, char *err, size_t errlen);
/* encoder_decoder: adds the encode program (CompiledGeneration.encode),
 * whose outputs must be the step's values inputs by name. Buffers at the
 * maxima, allocated once. Returns 0 or 1 + message (the stepper is then
 * to be freed). */
int backend_stepper_init_encoder(BackendStepper *st, const char *backend, const Compiled *enc,
                                 const ExecOptions *opt, char *err, size_t errlen);
/* Runs the encoder over src[0..n) (batch 1; src_mask = ids != the spec's
 * pad, refused when every id is pad) and hands its keys / values to the
 * step graph: the steps after it translate this source. The caller resets
 * the step's KV cache (exec_session_reset(st->session)) for a new
 * sequence. Refuses ids outside the source vocabulary and n outside
 * 1..max_src. */
int backend_stepper_encode(BackendStepper *st, const int32_t *src, int64_t n, char *err,
                           size_t errlen);
/* Runs rows x n new tokens (row-major; rows <= max_rows) at positions
 * past..past+n-1 of every row; *logits: [rows, V]. */
int backend_stepper_step_rows(BackendStepper *st, const int32_t *tokens, int64_t rows, int64_t n,
                              int64_t past, const float **logits, char *err, size_t errlen);
/* An RtStepFn (runtime/rt_generate.h), one row: user is the BackendStepper. */
int backend_stepper_step(void *user, const int32_t *tokens, int64_t n, int64_t past,
                         const float **logits, char *err, size_t errlen);
/* RtBatchStepFn and RtReorderFn (rt_generate_beam): user is the BackendStepper. */
int backend_stepper_batch_step(void *user, const int32_t *tokens, int64_t rows, int64_t n,
                               int64_t past, const float **logits, char *err, size_t errlen);
int backend_stepper_reorder(void *user, const int64_t *parent, int64_t rows, int64_t len,
                            char *err, size_t errlen);
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
