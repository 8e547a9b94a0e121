/* backends/exec.c — run a compiled model on a named backend: "interp" (the
 * reference interpreter, over the driver's graph) or "jit" (the driver's
 * loop program -> LLVM -> native code in process). The CLI and the parity
 * tests go through the same entry points.
 *
 * Invariant: both backends take inputs bound once by a runtime binder
 * (RtBound: rt_model_bind, rt_text_bind, or backend_bind_tensors for
 * in-memory tensors) against the compiled model's RtModelInfo, and write
 * their outputs into the bound output buffers, in g->outputs order. */
#include "backends/exec.h"

#include "backends/llvm/llvm_backend.h"
#include "ir/loop.h"
#include "passes/passes.h"
#include "runtime/rt_arena.h"
#include "runtime/rt_gemm.h"
#include "runtime/rt_pool.h"
#include "runtime/rt_profile.h"

#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* ExecTiming's run fields from the runtime's summary. */
static void timing_set(ExecTiming *t, const RtTiming *rt) {
  t->runs = rt->runs;
  t->run_ms_min = rt->min_ms;
  t->run_ms_max = rt->max_ms;
  t->run_ms_median = rt->median_ms;
}

/* Compiles c->prog with LLVM and runs it on b (outputs into b->outputs). */
static int jit_run(Arena *a, const Compiled *c, RtBound *b, const ExecOptions *eo,
                   ExecTiming *timing, char *err, size_t errlen) {
  int rc = 1;
  LlvmJit *jit = NULL;
  RtPool *pool = NULL;
  unsigned char *state = NULL;
  RtArena arena = {0};
  const LoopProgram *prog = c->prog;
  TFMC_ASSERT(prog && c->packed);
  /* choose the GEMM backend (it may set OpenBLAS's environment and dlopen
   * it) before any thread of ours exists */
  (void)rt_gemm_backend();
  double t0 = rt_timing_now_ms();
  /* the arena is planned at the maximum dims: commit what these dims touch */
  if (rt_arena_open(&arena, c->info, err, errlen) || rt_arena_commit(&arena, b->syms, err, errlen))
    goto done;
  if (prog->state_bytes > 0) { /* one fresh sequence: zero state */
    if (!(state = aligned_alloc(64, (size_t)((prog->state_bytes + 63) / 64 * 64)))) {
      snprintf(err, errlen, "out of memory for the %lld-byte state", (long long)prog->state_bytes);
      goto done;
    }
    memset(state, 0, (size_t)prog->state_bytes);
  }
  RtModelRunFn run;
  char e2[1024];
  /* a big model's compile takes a moment: say so on a terminal only */
  int functions = loop_program_functions(prog);
  bool progress = functions >= 16 && isatty(2);
  if (progress) {
    fprintf(stderr, "tfmc: compiling %d kernels (%d functions) with LLVM...", prog->n_kernels,
            functions);
    fflush(stderr);
  }
  int jrc = llvm_jit_compile(prog, NULL, &jit, &run, e2, sizeof e2);
  if (progress) fprintf(stderr, "\r%70s\r", "");
  if (jrc) {
    snprintf(err, errlen, "JIT compilation failed: %s", e2);
    goto done;
  }
  double t1 = rt_timing_now_ms();
  pool = rt_pool_create(eo->threads);
  RtRunArgs args = {b->syms, b->inputs, b->outputs, c->packed, arena.base, pool, NULL /* no profile */,
                    state};
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
  if (eo->profile && rt_profile_runs(c->info->kernels, prog->n_kernels, run, &args,
                                     eo->repeat > 0 ? eo->repeat : 1, stderr)) {
    snprintf(err, errlen, "out of memory");
    goto done;
  }
  (void)a;
  rc = 0;
done:
  if (pool) rt_pool_destroy(pool);
  if (jit) llvm_jit_destroy(jit);
  rt_arena_close(&arena);
  free(state);
  return rc;
}

static IrDtype dtype_of(RtElem e) {
  switch (e) {
  case RT_ELEM_F32: return IR_F32;
  case RT_ELEM_I32: return IR_I32;
  case RT_ELEM_U8: return IR_BOOL;
  case RT_ELEM_COUNT: break;
  }
  TFMC_ASSERT(!"bad element type");
  return IR_F32;
}

static size_t elem_size(RtElem e) { return e == RT_ELEM_U8 ? 1 : 4; }

/* The bound inputs as the interpreter's tensors (sharing b's storage). */
static Tensor *tensors_of_bound(Arena *a, const RtModelInfo *info, const RtBound *b) {
  Tensor *t = arena_alloc(a, (size_t)(info->n_inputs + 1) * sizeof *t);
  for (int i = 0; i < info->n_inputs; i++) {
    const RtTensorInfo *ti = &info->inputs[i];
    t[i].name = ti->name;
    t[i].dtype = dtype_of(ti->elem);
    t[i].rank = ti->rank;
    for (int d = 0; d < ti->rank; d++) t[i].dims[d] = rt_model_dim(&ti->dims[d], b->syms);
    t[i].data = b->inputs[i];
  }
  return t;
}

/* Runs the interpreter on b, copying its outputs into b->outputs. */
static int interp_run_bound(Arena *a, const Compiled *c, RtBound *b, Arena *scratch, char *err,
                            size_t errlen) {
  Tensor *out;
  int n_out;
  const RtModelInfo *info = c->info;
  /* a graph with state runs as one fresh sequence: zero state */
  InterpRunOptions o = {b->syms, NULL};
  if (interp_run_with(c->g, c->w, tensors_of_bound(a, info, b), info->n_inputs, &o, scratch, &out,
                      &n_out, err, errlen))
    return 1;
  TFMC_ASSERT(n_out == info->n_outputs);
  for (int i = 0; i < n_out; i++)
    memcpy(b->outputs[i], out[i].data, (size_t)tensor_numel(&out[i]) * elem_size(info->outputs[i].elem));
  return 0;
}

static int interp_run_timed(Arena *a, const Compiled *c, RtBound *b, const ExecOptions *eo,
                            ExecTiming *timing, char *err, size_t errlen) {
  if (interp_run_bound(a, c, b, a, err, errlen)) return 1;
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
    double s0 = rt_timing_now_ms();
    rc = interp_run_bound(scratch, c, b, scratch, err, errlen);
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

void backend_pack_weights(const LoopProgram *p, const WeightSet *w, float *dst) {
  for (int b = 0; b < p->n_bufs; b++) {
    const LBuffer *lb = &p->bufs[b];
    if (lb->kind != LB_WEIGHT) continue;
    const Weight *wt = ir_weights_find(w, lb->name);
    TFMC_ASSERT(wt); /* the program's params are the graph's, all loaded */
    int64_t n = 1;
    for (int d = 0; d < wt->type.rank; d++) n *= wt->type.dims[d].value;
    if (lb->layout == LW_PANELS) { /* pack-weights: panels for rt_linear_packed */
      TFMC_ASSERT(lb->rows * lb->cols == n);
      rt_gemm_pack(lb->rows, lb->cols, wt->data, dst + lb->offset);
    } else if (lb->layout == LW_PANELS_BF16) { /* --weights-dtype bf16 */
      TFMC_ASSERT(lb->rows * lb->cols == n);
      rt_gemm_pack_bf16(lb->rows, lb->cols, wt->data, dst + lb->offset);
    } else if (lb->layout == LW_PANELS_I8) { /* --weights-dtype int8 */
      TFMC_ASSERT(lb->rows * lb->cols == n);
      rt_gemm_pack_i8(lb->rows, lb->cols, wt->data, dst + lb->offset);
    } else {
      memcpy(dst + lb->offset, wt->data, (size_t)n * 4);
    }
  }
}

int backend_run(const char *backend, const Compiled *c, RtBound *b, const ExecOptions *opt,
                ExecTiming *timing, char *err, size_t errlen) {
  ExecOptions none = {0, 0, false};
  const ExecOptions *eo = opt ? opt : &none;
  if (timing) memset(timing, 0, sizeof *timing);
  Arena *a = arena_create();
  int rc;
  if (strcmp(backend, "interp") == 0) {
    rc = interp_run_timed(a, c, b, eo, timing, err, errlen);
  } else if (strcmp(backend, "jit") == 0) {
    rc = jit_run(a, c, b, eo, timing, err, errlen);
  } else {
    snprintf(err, errlen, "unknown backend '%s' (available: jit, interp)", backend);
    rc = 1;
  }
  arena_destroy(a);
  return rc;
}

bool backend_known(const char *backend, DriverStage *stage) {
  if (strcmp(backend, "interp") == 0) {
    *stage = DRIVER_GRAPH;
    return true;
  }
  if (strcmp(backend, "jit") == 0) {
    *stage = DRIVER_PACKED;
    return true;
  }
  return false;
}

int backend_bind_tensors(const RtModelInfo *info, const Tensor *in, int n_in, RtBound *b,
                         char *err, size_t errlen) {
  memset(b, 0, sizeof *b);
  const Tensor *match[RT_MAX_IO] = {0};
  int64_t dims[RT_MAX_IO][RT_MAX_RANK] = {{0}};
  for (int i = 0; i < info->n_inputs; i++) {
    const RtTensorInfo *ti = &info->inputs[i];
    for (int k = 0; k < n_in; k++)
      if (strcmp(in[k].name, ti->name) == 0) match[i] = &in[k];
    if (!match[i] || match[i]->rank != ti->rank)
      return rt_errorf(err, errlen, "missing input '%s'", ti->name);
    for (int d = 0; d < ti->rank; d++) dims[i][d] = match[i]->dims[d];
  }
  /* the symbols by the runtime binder's rules */
  if (rt_model_bind_shapes(info, (const int64_t(*)[RT_MAX_RANK])dims, b, "inputs", err, errlen))
    return 1;
  for (int i = 0; i < info->n_inputs; i++) {
    size_t bytes = (size_t)tensor_numel(match[i]) * elem_size(info->inputs[i].elem);
    if (!(b->inputs[i] = malloc(bytes ? bytes : 1))) {
      rt_model_unbind(info, b);
      return rt_errorf(err, errlen, "out of memory for input '%s'", info->inputs[i].name);
    }
    memcpy(b->inputs[i], match[i]->data, bytes);
  }
  if (rt_model_outputs_alloc(info, b, "inputs", err, errlen)) {
    rt_model_unbind(info, b);
    return 1;
  }
  return 0;
}

int backend_run_tensors(const char *backend, const IrGraph *g, const WeightSet *w,
                        const Tensor *inputs,
                        int n_inputs, const ExecOptions *opt, Arena *a, Tensor **outputs,
                        int *n_outputs, ExecTiming *timing, char *err, size_t errlen) {
  DriverStage stage;
  if (!backend_known(backend, &stage)) {
    snprintf(err, errlen, "unknown backend '%s' (available: jit, interp)", backend);
    return 1;
  }
  Diags d;
  diags_init(&d, a, stderr);
  Compiled c;
  DriverOptions o = {.stage = stage};
  /* no passes run, so neither g nor w is changed */
  if (driver_compile_graph(a, &d, (IrGraph *)g, (WeightSet *)w, &o, &c, err, errlen)) {
    if (!*err) snprintf(err, errlen, "the graph does not compile (%d errors above)", d.n_errors);
    return 1;
  }
  RtBound b;
  if (backend_bind_tensors(c.info, inputs, n_inputs, &b, err, errlen)) return 1;
  int rc = backend_run(backend, &c, &b, opt, timing, err, errlen);
  if (!rc) {
    Tensor *outs = arena_alloc(a, (size_t)(c.info->n_outputs + 1) * sizeof *outs);
    for (int o = 0; o < c.info->n_outputs; o++) {
      const RtTensorInfo *ti = &c.info->outputs[o];
      Tensor *t = &outs[o];
      t->name = ti->name;
      t->dtype = dtype_of(ti->elem);
      t->rank = ti->rank;
      for (int k = 0; k < ti->rank; k++) t->dims[k] = b.output_dims[o][k];
      size_t bytes = (size_t)tensor_numel(t) * elem_size(ti->elem);
      t->data = arena_alloc(a, bytes + 4);
      memcpy(t->data, b.outputs[o], bytes);
    }
    *outputs = outs;
    *n_outputs = c.info->n_outputs;
  }
  rt_model_unbind(c.info, &b);
  return rc;
}

/* ---- sessions: one compiled model run many times, state kept ---- */

struct ExecSession {
  bool jit;
  const Compiled *c;
  /* interp */
  Arena *state_arena;
  InterpState *istate;
  /* jit */
  LlvmJit *lj;
  RtModelRunFn run;
  RtPool *pool;
  RtArena arena;
  unsigned char *state;
  unsigned char *scratch; /* exec_session_reorder's rows, allocated on first use */
  size_t scratch_bytes;
};

void exec_session_destroy(ExecSession *s) {
  if (!s) return;
  if (s->pool) rt_pool_destroy(s->pool);
  if (s->lj) llvm_jit_destroy(s->lj);
  rt_arena_close(&s->arena);
  free(s->state);
  free(s->scratch);
  if (s->state_arena) arena_destroy(s->state_arena);
  free(s);
}

int exec_session_create(const char *backend, const Compiled *c, const ExecOptions *opt,
                        ExecSession **out, char *err, size_t errlen) {
  *out = NULL;
  ExecSession *s = calloc(1, sizeof *s);
  if (!s) return rt_errorf(err, errlen, "out of memory");
  s->c = c;
  if (strcmp(backend, "interp") == 0) {
    s->state_arena = arena_create();
    s->istate = interp_state_create(s->state_arena, c->g);
    *out = s;
    return 0;
  }
  if (strcmp(backend, "jit") != 0) {
    free(s);
    return rt_errorf(err, errlen, "unknown backend '%s' (available: jit, interp)", backend);
  }
  const LoopProgram *prog = c->prog;
  TFMC_ASSERT(prog && c->packed);
  s->jit = true;
  (void)rt_gemm_backend(); /* before any thread of ours exists (see jit_run) */
  if (rt_arena_open(&s->arena, c->info, err, errlen)) {
    exec_session_destroy(s);
    return 1;
  }
  s->state = aligned_alloc(64, (size_t)((prog->state_bytes + 63) / 64 * 64 + 64));
  if (!s->state) {
    exec_session_destroy(s);
    return rt_errorf(err, errlen, "out of memory for the %lld-byte state",
                     (long long)prog->state_bytes);
  }
  memset(s->state, 0, (size_t)prog->state_bytes);
  char e2[1024];
  if (llvm_jit_compile(prog, NULL, &s->lj, &s->run, e2, sizeof e2)) {
    exec_session_destroy(s);
    return rt_errorf(err, errlen, "JIT compilation failed: %s", e2);
  }
  s->pool = rt_pool_create(opt ? opt->threads : 0);
  *out = s;
  return 0;
}

void exec_session_reset(ExecSession *s) {
  if (s->jit) {
    memset(s->state, 0, (size_t)s->c->prog->state_bytes);
  } else {
    arena_destroy(s->state_arena);
    s->state_arena = arena_create();
    s->istate = interp_state_create(s->state_arena, s->c->g);
  }
}

int exec_session_reorder(ExecSession *s, const int64_t *parent, int n, int64_t len, char *err,
                         size_t errlen) {
  const IrGraph *g = s->c->g;
  if (!s->jit) {
    interp_state_reorder(s->istate, parent, n, len, s->state_arena);
    return 0;
  }
  const LoopProgram *prog = s->c->prog;
  for (int id = 0; id < g->n_nodes; id++) {
    const IrNode *nd = &g->nodes[id];
    if (nd->op != IR_OP_STATE) continue;
    int64_t bm = nd->type.dims[0].value, sm = nd->type.dims[1].value, d = nd->type.dims[2].value;
    const LBuffer *lb = NULL;
    for (int k = 0; k < prog->n_bufs && !lb; k++)
      if (prog->bufs[k].kind == LB_STATE && strcmp(prog->bufs[k].name, nd->attrs.name) == 0)
        lb = &prog->bufs[k];
    TFMC_ASSERT(lb && n <= bm && len <= sm);
    size_t row = (size_t)(len * d) * sizeof(float), need = (size_t)n * row;
    if (need > s->scratch_bytes) {
      free(s->scratch);
      if (!(s->scratch = malloc(need))) {
        s->scratch_bytes = 0;
        return rt_errorf(err, errlen, "out of memory reordering the KV cache");
      }
      s->scratch_bytes = need;
    }
    float *base = (float *)(s->state + lb->offset);
    for (int i = 0; i < n; i++) {
      TFMC_ASSERT(parent[i] >= 0 && parent[i] < bm);
      memcpy(s->scratch + (size_t)i * row, base + parent[i] * sm * d, row);
    }
    for (int i = 0; i < n; i++) memcpy(base + (int64_t)i * sm * d, s->scratch + (size_t)i * row, row);
  }
  return 0;
}

int exec_session_run(ExecSession *s, RtBound *b, char *err, size_t errlen) {
  const Compiled *c = s->c;
  if (s->jit) {
    if (rt_arena_commit(&s->arena, b->syms, err, errlen)) return 1;
    RtRunArgs args = {b->syms, b->inputs, b->outputs, c->packed, s->arena.base, s->pool, NULL,
                      s->state};
    s->run(&args);
    return 0;
  }
  Arena *scratch = arena_create();
  Tensor *out;
  int n_out;
  const RtModelInfo *info = c->info;
  InterpRunOptions o = {b->syms, s->istate};
  int rc = interp_run_with(c->g, c->w, tensors_of_bound(scratch, info, b), info->n_inputs, &o,
                           scratch, &out, &n_out, err, errlen);
  for (int i = 0; !rc && i < n_out; i++)
    memcpy(b->outputs[i], out[i].data,
           (size_t)tensor_numel(&out[i]) * elem_size(info->outputs[i].elem));
  arena_destroy(scratch);
  return rc;
}

/* ---- the step function of generation ---- */

static int sym_index(const RtModelInfo *info, const char *name) {
  for (int i = 0; i < info->n_syms; i++)
    if (strcmp(info->sym_names[i], name) == 0) return i;
  return -1;
}

static int input_index(const RtModelInfo *info, const char *name) {
  for (int i = 0; i < info->n_inputs; i++)
    if (strcmp(info->inputs[i].name, name) == 0) return i;
  return -1;
}

/* Elements of tensor t with every symbol at its maximum. */
static int64_t numel_at_max(const RtModelInfo *info, const RtTensorInfo *t) {
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++) {
    const RtDim *dim = &t->dims[d];
    n *= dim->sym < 0 ? dim->value : info->sym_max[dim->sym];
  }
  return n;
}

int backend_stepper_init(BackendStepper *st, const char *backend, const Compiled *c,
                         const ExecOptions *opt, char *err, size_t errlen) {
  memset(st, 0, sizeof *st);
  const RtModelInfo *info = c->info;
  st->c = c;
  st->sym_b = sym_index(info, "B");
  st->sym_t = sym_index(info, "T");
  st->sym_l = sym_index(info, "L");
  st->sym_s = sym_index(info, "S");
  st->in_tokens = input_index(info, "tokens");
  st->in_src_mask = input_index(info, "src_mask");
  st->enc_in_src = st->enc_in_mask = -1;
  bool inputs_ok = st->in_tokens >= 0;
  for (int i = 0; i < info->n_inputs; i++) {
    st->value_from[i] = -1;
    inputs_ok &= i == st->in_tokens || i == st->in_src_mask ||
                 info->inputs[i].kind == RT_INPUT_VALUES;
  }
  if (st->sym_b < 0 || st->sym_t < 0 || st->sym_l < 0 || !inputs_ok || info->n_outputs < 1 ||
      info->outputs[0].rank != 2 || info->outputs[0].dims[1].sym >= 0)
    return rt_errorf(err, errlen, "model '%s' is not a generation step graph", info->name);
  st->max_len = info->sym_max[st->sym_l];
  st->max_rows = info->sym_max[st->sym_b];
  st->vocab = info->outputs[0].dims[1].value;
  st->b.inputs[st->in_tokens] = malloc((size_t)(st->max_len * st->max_rows) * sizeof(int32_t));
  bool ok = st->b.inputs[st->in_tokens] != NULL;
  if (st->in_src_mask >= 0)
    ok &= (st->b.inputs[st->in_src_mask] = malloc((size_t)numel_at_max(info, &info->inputs[st->in_src_mask]))) != NULL;
  for (int o = 0; o < info->n_outputs && ok; o++)
    ok &= (st->b.outputs[o] = malloc((size_t)numel_at_max(info, &info->outputs[o]) * sizeof(float) + 4)) != NULL;
  if (!ok) {
    backend_stepper_free(st);
    return rt_errorf(err, errlen, "out of memory");
  }
  if (exec_session_create(backend, c, opt, &st->session, err, errlen)) {
    backend_stepper_free(st);
    return 1;
  }
  return 0;
}

int backend_stepper_init_encoder(BackendStepper *st, const char *backend, const Compiled *enc,
                                 const ExecOptions *opt, char *err, size_t errlen) {
  const RtModelInfo *ei = enc->info, *info = st->c->info;
  int eb_sym = sym_index(ei, "B"), es = sym_index(ei, "S");
  st->enc = enc;
  st->enc_in_src = input_index(ei, "src");
  st->enc_in_mask = input_index(ei, "src_mask");
  if (eb_sym < 0 || es < 0 || st->enc_in_src < 0 || st->sym_s < 0 ||
      ei->n_inputs != 1 + (st->enc_in_mask >= 0))
    return rt_errorf(err, errlen, "model '%s' has no encode program for generation", ei->name);
  st->max_src = ei->sym_max[es];
  st->src_vocab = ei->inputs[st->enc_in_src].vocab;
  for (int i = 0; i < info->n_inputs; i++) {
    if (info->inputs[i].kind != RT_INPUT_VALUES) continue;
    for (int o = 0; o < ei->n_outputs; o++)
      if (strcmp(ei->outputs[o].name, info->inputs[i].name) == 0) st->value_from[i] = o;
    if (st->value_from[i] < 0)
      return rt_errorf(err, errlen, "the encode program of '%s' does not compute '%s'", ei->name,
                       info->inputs[i].name);
  }
  if (ei->sym_max[eb_sym] != 1)
    return rt_errorf(err, errlen, "internal: the encode program runs one source (max batch 1)");
  bool ok = (st->eb.inputs[st->enc_in_src] = malloc((size_t)st->max_src * sizeof(int32_t))) != NULL;
  if (st->enc_in_mask >= 0) ok &= (st->eb.inputs[st->enc_in_mask] = malloc((size_t)st->max_src)) != NULL;
  for (int o = 0; o < ei->n_outputs && ok; o++)
    ok &= (st->eb.outputs[o] = malloc((size_t)numel_at_max(ei, &ei->outputs[o]) * sizeof(float) + 4)) != NULL;
  /* more rows than one (beam search): the source's keys / values copied to
   * every row */
  for (int i = 0; i < info->n_inputs && ok && st->max_rows > 1; i++)
    if (st->value_from[i] >= 0)
      ok &= (st->b.inputs[i] = st->rows[i] = malloc((size_t)numel_at_max(info, &info->inputs[i]) * sizeof(float))) != NULL;
  if (!ok) return rt_errorf(err, errlen, "out of memory");
  return exec_session_create(backend, enc, opt, &st->enc_session, err, errlen);
}

int backend_stepper_encode(BackendStepper *st, const int32_t *src, int64_t n, char *err,
                           size_t errlen) {
  const RtModelInfo *ei = st->enc->info, *info = st->c->info;
  if (n < 1 || n > st->max_src)
    return rt_errorf(err, errlen, "the source has %lld tokens; model '%s' takes 1..%lld",
                     (long long)n, info->name, (long long)st->max_src);
  int64_t real = 0;
  int32_t *ids = st->eb.inputs[st->enc_in_src];
  uint8_t *mask = st->enc_in_mask >= 0 ? st->eb.inputs[st->enc_in_mask]
                  : st->in_src_mask >= 0 ? st->b.inputs[st->in_src_mask] : NULL;
  for (int64_t i = 0; i < n; i++) {
    if (src[i] < 0 || src[i] >= st->src_vocab)
      return rt_errorf(err, errlen, "source token id %d is outside the vocabulary (0..%lld)",
                       src[i], (long long)st->src_vocab - 1);
    ids[i] = src[i];
    bool is_real = ei->pad_id < 0 || src[i] != ei->pad_id;
    real += is_real;
    if (mask) mask[i] = is_real;
  }
  if (mask && !real)
    return rt_errorf(err, errlen, "the source is all padding (pad id %lld): nothing to translate",
                     (long long)ei->pad_id);
  if (st->in_src_mask >= 0) { /* the step's mask, [rows, S]: every row the source's */
    uint8_t *sm = st->b.inputs[st->in_src_mask];
    for (int64_t r = 0; r < st->max_rows; r++)
      if (sm + r * n != mask) memcpy(sm + r * n, mask, (size_t)n);
  }
  st->eb.syms[sym_index(ei, "B")] = 1;
  st->eb.syms[sym_index(ei, "S")] = n;
  if (exec_session_run(st->enc_session, &st->eb, err, errlen)) return 1;
  st->b.syms[st->sym_s] = n;
  for (int i = 0; i < info->n_inputs; i++) {
    if (st->value_from[i] < 0) continue;
    const float *v = st->eb.outputs[st->value_from[i]];
    if (!st->rows[i]) {
      st->b.inputs[i] = (void *)v;
      continue;
    }
    size_t one = (size_t)(numel_at_max(info, &info->inputs[i]) / st->max_rows / st->max_src * n);
    for (int64_t r = 0; r < st->max_rows; r++) memcpy(st->rows[i] + (size_t)r * one, v, one * sizeof(float));
  }
  st->encoded = true;
  return 0;
}

int backend_stepper_step_rows(BackendStepper *st, const int32_t *tokens, int64_t rows, int64_t n,
                              int64_t past, const float **logits, char *err, size_t errlen) {
  if (rows < 1 || rows > st->max_rows || n < 1 || past < 0 || past + n > st->max_len)
    return rt_errorf(err, errlen, "a step of %lld x %lld tokens at %lld does not fit %lld rows of "
                     "max_len %lld", (long long)rows, (long long)n, (long long)past,
                     (long long)st->max_rows, (long long)st->max_len);
  if (st->sym_s >= 0 && !st->encoded)
    return rt_errorf(err, errlen, "internal: a decoder step before the source was encoded");
  const RtModelInfo *info = st->c->info;
  const RtTensorInfo *ti = &info->inputs[st->in_tokens];
  for (int64_t i = 0; i < rows * n; i++) {
    if (tokens[i] < 0 || tokens[i] >= ti->vocab)
      return rt_errorf(err, errlen, "token id %d is outside the vocabulary (0..%lld)", tokens[i],
                       (long long)ti->vocab - 1);
    ((int32_t *)st->b.inputs[st->in_tokens])[i] = tokens[i];
  }
  st->b.syms[st->sym_b] = rows;
  st->b.syms[st->sym_t] = n;
  st->b.syms[st->sym_l] = past + n;
  if (exec_session_run(st->session, &st->b, err, errlen)) return 1;
  *logits = st->b.outputs[0];
  return 0;
}

int backend_stepper_step(void *user, const int32_t *tokens, int64_t n, int64_t past,
                         const float **logits, char *err, size_t errlen) {
  return backend_stepper_step_rows(user, tokens, 1, n, past, logits, err, errlen);
}

int backend_stepper_batch_step(void *user, const int32_t *tokens, int64_t rows, int64_t n,
                               int64_t past, const float **logits, char *err, size_t errlen) {
  return backend_stepper_step_rows(user, tokens, rows, n, past, logits, err, errlen);
}

int backend_stepper_reorder(void *user, const int64_t *parent, int64_t rows, int64_t len,
                            char *err, size_t errlen) {
  BackendStepper *st = user;
  return exec_session_reorder(st->session, parent, (int)rows, len, err, errlen);
}

void backend_stepper_free(BackendStepper *st) {
  exec_session_destroy(st->session);
  exec_session_destroy(st->enc_session);
  if (st->c) {
    free(st->b.inputs[st->in_tokens]);
    if (st->in_src_mask >= 0) free(st->b.inputs[st->in_src_mask]);
  }
  for (int o = 0; o < RT_MAX_IO; o++) {
    free(st->b.outputs[o]);
    free(st->rows[o]);
    free(st->eb.inputs[o]);
    free(st->eb.outputs[o]);
  }
  memset(st, 0, sizeof *st);
}
