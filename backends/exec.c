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

#include <stdatomic.h>
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

/* One piece of backend_pack_weights: rows [q0, q1) of a weight in a
 * panels layout (q0 a multiple of 16: the packing of rows [q0, n) is the
 * packing of w + q0 K at the size of the first q0 rows, rt_gemm.h), steps
 * [p0, p1) of K of them (all of K but for a weight viewed transposed), or
 * floats [q0, q1) of a plain one. */
typedef struct PackPiece {
  const LBuffer *lb;
  const WeightSet *set;
  const Weight *wt; /* its data, or (none) read from the set's source */
  const float *v;   /* NULL, or the source's view of it (WeightSource.view) */
  int64_t rs, cs;   /* the view's strides */
  float *dst;       /* the buffer's start */
  int64_t q0, q1, p0, p1;
  struct PackViewed *viewed; /* a viewed weight's pieces left, shared by them */
  int failed;
  char err[200];
} PackPiece;

/* A viewed weight: its pieces not yet done, and the floats of the view
 * they read, dropped when the last is (whatever the pieces did not drop
 * themselves: a transposed view read whole rows into a scratch) */
typedef struct PackViewed {
  atomic_int left;
  const float *lo, *hi;
} PackViewed;

/* a view's floats [a, b) done with (WeightSource.drop) */
static void view_drop(const PackPiece *pc, const float *a, const float *b) {
  const WeightSource *src = pc->set->src;
  if (src->drop && b > a) src->drop(src, a, (size_t)(b - a) * sizeof(float));
}

/* *scratch (*cap floats) grown to n floats; NULL (the piece failed) when
 * out of memory */
static float *scratch_reserve(PackPiece *pc, float **scratch, int64_t *cap, int64_t n) {
  if (n > *cap) {
    free(*scratch);
    *scratch = malloc((size_t)n * sizeof(float));
    *cap = *scratch ? n : 0;
  }
  if (!*scratch) {
    pc->failed = 1;
    snprintf(pc->err, sizeof pc->err, "out of memory");
  }
  return *scratch;
}

/* rows [q0, q1) of a view not in one run into dst ([rows, k]), 16 at a
 * time (a transposed view's 16 floats per stored row in one line) */
static void view_rows(const PackPiece *pc, int64_t k, float *dst) {
  for (int64_t i0 = pc->q0; i0 < pc->q1; i0 += 16) {
    int64_t i1 = pc->q1 - i0 < 16 ? pc->q1 : i0 + 16;
    for (int64_t p = 0; p < k; p++)
      for (int64_t i = i0; i < i1; i++) dst[(i - pc->q0) * k + p] = pc->v[i * pc->rs + p * pc->cs];
  }
}

static void pack_piece_body(PackPiece *pc, float **scratch, int64_t *cap) {
  const LBuffer *lb = pc->lb;
  int64_t k = lb->cols, rows = pc->q1 - pc->q0;
  const float *w = pc->wt->data ? pc->wt->data + pc->q0 * k : NULL;
  if (!w && pc->v && lb->layout == LW_PANELS) { /* from the checkpoint's pages as they lie */
    const float *v = pc->v + pc->q0 * pc->rs;
    rt_gemm_pack_strided(rows, k, pc->p0, pc->p1, v, pc->rs, pc->cs,
                         pc->dst + rt_gemm_packed_floats(pc->q0, k));
    if (pc->cs == 1) /* rows [q0, q1) as stored */
      view_drop(pc, v, v + (rows - 1) * pc->rs + k);
    else /* stored rows [p0, p1) of the transpose (the piece has every column) */
      view_drop(pc, v + pc->p0 * pc->cs, v + (pc->p1 - 1) * pc->cs + rows);
    return;
  }
  if (!w && pc->v && lb->layout == LW_PLAIN) { /* floats [q0, q1) in one run */
    memcpy(pc->dst + pc->q0, pc->v + pc->q0, (size_t)rows * 4);
    view_drop(pc, pc->v + pc->q0, pc->v + pc->q1);
    return;
  }
  const float *viewed = NULL; /* rows in one run: the bf16 and int8 packers read them in place */
  if (!w && pc->v && pc->cs == 1 && pc->rs == k) w = viewed = pc->v + pc->q0 * k;
  if (!w && pc->v) { /* rows of a view not in one run, through a scratch */
    if (!scratch_reserve(pc, scratch, cap, rows * k)) return;
    view_rows(pc, k, *scratch);
    w = *scratch;
  }
  if (!w && lb->layout == LW_PLAIN) { /* straight from the checkpoint into place */
    pc->failed = ir_weight_read(pc->set, pc->wt, pc->q0, pc->q1, pc->dst + pc->q0, pc->err,
                                sizeof pc->err);
    return;
  }
  if (!w) { /* the piece's rows from the checkpoint into a scratch kept in cache */
    if (!scratch_reserve(pc, scratch, cap, rows * k)) return;
    pc->failed = ir_weight_read(pc->set, pc->wt, pc->q0 * k, pc->q1 * k, *scratch, pc->err,
                                sizeof pc->err);
    if (pc->failed) return;
    w = *scratch;
  }
  switch ((LWLayout)lb->layout) {
  case LW_PANELS: /* pack-weights: panels for rt_linear_packed */
    rt_gemm_pack(rows, k, w, pc->dst + rt_gemm_packed_floats(pc->q0, k));
    break;
  case LW_PANELS_BF16: /* --weights-dtype bf16 */
    rt_gemm_pack_bf16(rows, k, w, pc->dst + rt_gemm_packed_bf16_floats(pc->q0, k));
    break;
  case LW_PANELS_I8: /* --weights-dtype int8 */
    rt_gemm_pack_i8(rows, k, w, pc->dst + rt_gemm_packed_i8_floats(pc->q0, k));
    break;
  case LW_PLAIN:
  case LW_LAYOUT_COUNT:
    memcpy(pc->dst + pc->q0, pc->wt->data + pc->q0, (size_t)rows * 4);
    break;
  }
  if (viewed) view_drop(pc, viewed, viewed + rows * k);
}

static void pack_piece(PackPiece *pc, float **scratch, int64_t *cap) {
  pack_piece_body(pc, scratch, cap);
  if (pc->viewed && atomic_fetch_sub(&pc->viewed->left, 1) == 1)
    view_drop(pc, pc->viewed->lo, pc->viewed->hi);
}

/* pieces [lo, hi) (an RtTaskFn) */
static void pack_pieces(void *ctx, int64_t lo, int64_t hi) {
  PackPiece *pieces = ctx;
  float *scratch = NULL;
  int64_t cap = 0;
  for (int64_t i = lo; i < hi; i++) pack_piece(&pieces[i], &scratch, &cap);
  free(scratch);
}

/* The pieces go to a pool of the online CPUs' threads, made for the call:
 * packing is memory-bound and page-faulting, and a model's weights are
 * hundreds of MB (gpt2-small 0.5 GB: 0.4-0.7 s on one thread, 0.12-0.17 s
 * on two). The pieces, ~4 MB of floats each, cut every weight on panel
 * boundaries, so the bytes written are those of one thread packing it
 * whole. */
int backend_pack_weights(const LoopProgram *p, const WeightSet *w, float *dst, int64_t from,
                         char *err, size_t errlen) {
  enum { PIECE_FLOATS = 1 << 20 };
  size_t n = 0, cap = 64;
  PackPiece *pieces = malloc(cap * sizeof *pieces);
  PackViewed *viewed_bufs = malloc((size_t)(p->n_bufs + 1) * sizeof *viewed_bufs);
  TFMC_ASSERT(pieces && viewed_bufs);
  for (int b = 0; b < p->n_bufs; b++) atomic_init(&viewed_bufs[b].left, 0);
  for (int b = 0; b < p->n_bufs; b++) {
    const LBuffer *lb = &p->bufs[b];
    if (lb->kind != LB_WEIGHT || lb->offset < from) continue;
    const Weight *wt = ir_weights_find(w, lb->name);
    TFMC_ASSERT(wt); /* the program's params are the graph's, all loaded */
    int64_t numel = 1;
    for (int d = 0; d < wt->type.rank; d++) numel *= wt->type.dims[d].value;
    int64_t total = numel, step = PIECE_FLOATS;
    if (lb->layout != LW_PLAIN) {
      TFMC_ASSERT(lb->rows * lb->cols == numel);
      total = lb->rows;
      step = PIECE_FLOATS / lb->cols / 16 * 16;
      if (step < 16) step = 16;
    }
    /* a weight without data: the checkpoint's own f32 block where the
     * source has one in the layout the packer reads (plain: one run) */
    const float *v = NULL;
    int64_t rs = 0, cs = 0, kk = lb->layout == LW_PLAIN ? 1 : lb->cols;
    int64_t vcols = lb->layout != LW_PLAIN ? lb->cols /* the view's matrix: numel / vcols rows */
                    : wt->type.rank        ? wt->type.dims[wt->type.rank - 1].value
                                           : 1;
    if (!wt->data && w->src && w->src->view && numel > 0 && vcols > 0) {
      v = w->src->view(w->src, (int)(wt - w->items), vcols, &rs, &cs);
      if (v && lb->layout == LW_PLAIN && !(cs == 1 && rs == vcols)) v = NULL;
    }
    /* pieces of rows with all of K; viewed transposed, pieces of K with
     * every row instead, so that each piece reads, and drops, stored rows
     * of its own */
    int by_k = v && lb->layout == LW_PANELS && cs != 1;
    int64_t kstep = by_k && lb->rows > 0 ? PIECE_FLOATS / lb->rows : kk;
    if (kstep < 1) kstep = 1;
    PackViewed *viewed = v ? &viewed_bufs[b] : NULL;
    if (viewed) { /* the view's first and past its last element */
      viewed->lo = v;
      viewed->hi = v + (numel / vcols - 1) * rs + (vcols - 1) * cs + 1;
    }
    for (int64_t q0 = 0, p0 = 0; q0 < total;) {
      if (n == cap) {
        cap *= 2;
        pieces = realloc(pieces, cap * sizeof *pieces);
        TFMC_ASSERT(pieces);
      }
      int64_t q1 = by_k || total - q0 < step ? total : q0 + step;
      int64_t p1 = by_k && kk - p0 > kstep ? p0 + kstep : kk;
      if (viewed) atomic_fetch_add(&viewed->left, 1);
      pieces[n++] = (PackPiece){lb,     w,  wt, v,  rs, cs, dst + (lb->offset - from),
                                q0,     q1, p0, p1, viewed, 0, ""};
      if (p1 < kk) {
        p0 = p1;
      } else {
        q0 = q1;
        p0 = 0;
      }
    }
  }
  RtPool *pool = n > 1 ? rt_pool_create(0) : NULL; /* NULL: this thread alone */
  rt_pool_parallel_for(pool, (int64_t)n, 1, pack_pieces, pieces);
  rt_pool_destroy(pool);
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++)
    if (pieces[i].failed) {
      snprintf(err, errlen, "reading weight '%s' for packing: %s", pieces[i].wt->name,
               pieces[i].err);
      rc = 1;
    }
  free(pieces);
  free(viewed_bufs);
  return rc;
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
  double compile_ms;      /* JIT: arena, state and LLVM compilation, as jit_run times them */
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
  double t0 = rt_timing_now_ms();
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
  s->compile_ms = rt_timing_now_ms() - t0;
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
      if (parent[i] != i) /* a row that stays is not copied */
        memcpy(s->scratch + (size_t)i * row, base + parent[i] * sm * d, row);
    }
    for (int i = 0; i < n; i++)
      if (parent[i] != i) memcpy(base + (int64_t)i * sm * d, s->scratch + (size_t)i * row, row);
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

/* ---- generation: the programs run through sessions (rt_stepper.h's ops) ---- */

static int stepper_run(void *user, RtGenProgram which, RtBound *b, char *err, size_t errlen) {
  BackendStepper *st = user;
  return exec_session_run(which == RT_GEN_ENCODE ? st->enc_session : st->session, b, err, errlen);
}

static void stepper_reset(void *user) {
  exec_session_reset(((BackendStepper *)user)->session);
}

static int stepper_reorder(void *user, const int64_t *parent, int n, int64_t len, char *err,
                           size_t errlen) {
  return exec_session_reorder(((BackendStepper *)user)->session, parent, n, len, err, errlen);
}

static const RtGenOps stepper_ops = {stepper_run, stepper_reset, stepper_reorder};

int backend_stepper_init(BackendStepper *st, const char *backend, const Compiled *c,
                         const Compiled *enc, const ExecOptions *opt, char *err, size_t errlen) {
  memset(st, 0, sizeof *st);
  st->c = c;
  st->enc = enc;
  if (rt_stepper_init(&st->rs, c->info, enc ? enc->info : NULL, &stepper_ops, st, err, errlen) ||
      exec_session_create(backend, c, opt, &st->session, err, errlen) ||
      (enc && exec_session_create(backend, enc, opt, &st->enc_session, err, errlen))) {
    backend_stepper_free(st);
    return 1;
  }
  st->compile_ms = st->session->compile_ms + (enc ? st->enc_session->compile_ms : 0);
  return 0;
}

void backend_stepper_free(BackendStepper *st) {
  exec_session_destroy(st->session);
  exec_session_destroy(st->enc_session);
  rt_stepper_free(&st->rs);
  memset(st, 0, sizeof *st);
}
