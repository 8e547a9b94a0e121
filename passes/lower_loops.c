/* passes/lower_loops.c — graph IR to loop IR, with memory planning.
 *
 * Every graph value gets a buffer: inputs and outputs are the caller's
 * arrays, params live in the packed weights (16-float aligned, in node
 * order), a reshape aliases its operand, everything else gets an offset in
 * one activation arena. Arena offsets are planned by liveness at the
 * maximum dims (first fit; a value is freed after its last use, never
 * before the node that consumes it has been given its own buffer), so the
 * arena size is a compile-time constant and no kernel allocates.
 *
 * Each node becomes one kernel whose outer loop runs over rows (all dims but
 * the last), so the inner loop over the last dim is contiguous and the
 * vectoriser can work on it; matmuls call the runtime's rt_linear and
 * attention its rt_attention (runtime functions: ir/callees.def). A fused
 * node (ir/fused.def) is one kernel too, computing what its decomposition
 * computes; its `result` nodes get their buffers with it and have no
 * kernel of their own. The formula each kernel implements is quoted above
 * its lowering function.
 *
 * Policy (parallel grains, how rt_linear splits a product, rt_attention's
 * query blocks and kernel choice) comes from LowerLoopsOptions (passes.h)
 * and is written into the program: kernel grains and call arguments. */
#include "ir/loop.h"
#include "passes/passes.h"
#include "runtime/rt_act.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct Lw {
  const IrGraph *g;
  LoopProgram *p;
  int *buf;     /* node -> buffer id (-1 none) */
  bool *view;   /* node -> a slice read in place out of its operand's buffer */
  LKernel *k;   /* kernel being built */
  LowerLoopsOptions opt;
} Lw;

/* ---- policy ---- */

LowerLoopsOptions pass_lower_loops_options_default(void) {
  return (LowerLoopsOptions){
      /* ~1 us of work per task: a hand-off to a worker that is spinning
       * costs ~0.3 us, and a kernel whose whole extent fits in one grain
       * runs on the caller. (32k, an earlier value, left the tiny
       * classifier's layernorms and adds serial while the other core
       * waited: 0.295 -> 0.233 ms per forward.) */
      .grain_elems = 4096,
      /* a few microseconds of gelu: below that a hand-off to another
       * thread costs more than it saves */
      .gelu_grain = 1 << 13,
      /* a pool hand-off costs a few microseconds */
      .linear_task_macs = (int64_t)1 << 17,
      /* below 8M multiply-adds every extra piece repacks the shared operand
       * and pays a call's fixed costs, which outweigh what finer pieces gain
       * in balance (128x256x64: 37 -> 29 us on 2 threads) */
      .linear_split_macs = (int64_t)1 << 23,
      /* GotoBLAS-style blocks sized for a 48K L1, 1M L2 (Zen 4/5); the
       * tile pass sizes them for the target instead */
      .gemm_mc = 128,
      .gemm_nc = 2016,
      .gemm_kc = 384,
      /* the scores of a block take block_q x tk floats (512 KiB at tk =
       * 2048), and b * h * ceil(tq / block_q) tasks keep the pool busy even
       * for one sequence */
      .attn_block_q = 64,
      /* K and V of a head stay in L2 while a block sweeps them. Longer
       * keys go to BLAS, which blocks for the cache: at tk = 2048, dh = 64
       * it took 112 ms for 12 heads where the tiled products took 167 ms;
       * at tk = 128 they take 0.39 ms where BLAS took 0.47 (2 threads). */
      .attn_tiled_floats = 16384,
      /* 128 keys x 64 query rows of scores (32 KiB) and K_j^T (32 KiB at
       * dh = 64) stay in L1/L2 while V_j streams; bert-base at seq 128 is
       * one block, the plain form */
      .attn_block_k = 128,
  };
}

/* ---- helpers ---- */

static LExpr *dimx(Lw *L, IrDim d) {
  return d.sym >= 0 ? lx_sym(L->p, d.sym) : lx_i(L->p, d.value);
}

static int64_t dim_max(const IrGraph *g, IrDim d) {
  return d.sym >= 0 ? g->syms[d.sym].max : d.value;
}

static int64_t type_bytes_max(const IrGraph *g, const IrType *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= dim_max(g, t->dims[i]);
  return n * (t->dtype == IR_BOOL ? 1 : 4);
}

/* The extent of an arena buffer of type t at offset off, as a function of
 * the run's symbol values. */
static LArenaBlock arena_block(const IrType *t, int64_t off) {
  LArenaBlock b = {off, t->dtype == IR_BOOL ? 1 : 4, {0}};
  for (int i = 0; i < IR_MAX_RANK; i++) b.syms[i] = -1;
  int k = 0;
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i].sym < 0)
      b.bytes *= t->dims[i].value;
    else
      b.syms[k++] = (int8_t)t->dims[i].sym;
  }
  return b;
}

/* product of dims [from, to) */
static LExpr *prodx(Lw *L, const IrType *t, int from, int to) {
  LExpr *e = lx_i(L->p, 1);
  for (int i = from; i < to; i++) e = lx_bin(L->p, LB_MUL, e, dimx(L, t->dims[i]));
  return e;
}

static LExpr *V(Lw *L, int var) { return lx_var(L->p, L->k, var); }
static LExpr *I(Lw *L, int64_t v) { return lx_i(L->p, v); }
static LExpr *add(Lw *L, LExpr *a, LExpr *b) { return lx_bin(L->p, LB_ADD, a, b); }
static LExpr *mul(Lw *L, LExpr *a, LExpr *b) { return lx_bin(L->p, LB_MUL, a, b); }
static LExpr *f32(Lw *L, double v) { return lx_f32(L->p, v); }

static LExpr *load(Lw *L, int node, LExpr *idx) { return lx_load(L->p, L->buf[node], idx); }

static void emit(Lw *L, LStmt *into, LStmt *s) { ls_append(L->p, into ? into : L->k->body, s); }

static LStmt *for_(Lw *L, LStmt *into, int var, LExpr *hi) {
  LStmt *f = ls_for(L->p, var, I(L, 0), hi);
  emit(L, into, f);
  return f;
}

static int var(Lw *L, LType t) { return loop_var_new(L->p, L->k, t); }

static int64_t type_numel_max(const IrGraph *g, const IrType *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dims[i].sym >= 0 ? g->syms[t->dims[i].sym].max : t->dims[i].value;
  return n;
}

static LKernel *kernel(Lw *L, int node, LExpr *extent, bool parallel) {
  const IrNode *n = &L->g->nodes[node];
  char name[64];
  /* a fused node's kernel is named after its kind: k12_add_layernorm */
  const char *what = n->op == IR_OP_FUSED ? n->attrs.fusion : ir_op_info[n->op].name;
  snprintf(name, sizeof name, "k%d_%s", node, what);
  for (char *c = name; *c; c++)
    if (*c == '.') *c = '_';
  const char *op_text =
      n->op == IR_OP_FUSED ? arena_printf(L->p->arena, "fused %s", n->attrs.fusion)
                           : ir_op_info[n->op].name;
  const char *comment =
      n->loc.file ? arena_printf(L->p->arena, "%s %%%d @%s:%d:%d", op_text, node,
                                 n->loc.file, n->loc.line, n->loc.col)
                  : arena_printf(L->p->arena, "%s %%%d", op_text, node);
  LKernel *k = loop_kernel_add(L->p, name, comment, node);
  k->extent = extent;
  k->parallel = parallel;
  if (parallel) {
    /* at least grain_elems elements of output per task */
    int64_t max[IR_MAX_SYMS] = {0}, iters = 1;
    for (int i = 0; i < L->g->n_syms; i++) max[i] = L->g->syms[i].max;
    if (!loop_expr_eval_i64(extent, max, &iters)) iters = 1;
    int64_t elems = type_numel_max(L->g, &n->type);
    int64_t per_iter = iters > 0 ? (elems + iters - 1) / iters : 1;
    if (per_iter < 1) per_iter = 1;
    int64_t grain_elems = L->opt.grain_elems > 0 ? L->opt.grain_elems : 1;
    k->grain = (grain_elems + per_iter - 1) / per_iter;
  }
  L->k = k;
  return k;
}

/* rows = all dims but the last, d = the last dim */
static LExpr *rowsx(Lw *L, const IrType *t) { return prodx(L, t, 0, t->rank - 1); }

/* Index into operand `t` (aligned to the trailing dims of out type `o`,
 * broadcasting size-1 dims) of the element at out row r, column j. */
static LExpr *bcast_index(Lw *L, const IrType *o, const IrType *t, LExpr *r, LExpr *j) {
  if (t->rank == 0) return I(L, 0);
  bool same = t->rank == o->rank;
  for (int i = 0; same && i < o->rank; i++) same = ir_dim_eq(o->dims[i], t->dims[i]);
  if (same) return add(L, mul(L, r, dimx(L, o->dims[o->rank - 1])), j);
  /* decompose r into out indices of dims 0..rank-2 (innermost first) */
  LExpr *idx = I(L, 0), *stride = I(L, 1);
  int off = o->rank - t->rank;
  /* last dim */
  IrDim tl = t->dims[t->rank - 1];
  if (!(tl.sym < 0 && tl.value == 1) || (o->dims[o->rank - 1].sym < 0 && o->dims[o->rank - 1].value == 1))
    idx = j;
  stride = dimx(L, tl);
  LExpr *rem = r;
  for (int i = o->rank - 2; i >= 0; i--) {
    LExpr *oi = lx_bin(L->p, LB_REM, rem, dimx(L, o->dims[i]));
    rem = lx_bin(L->p, LB_DIV, rem, dimx(L, o->dims[i]));
    int ti = i - off;
    if (ti < 0) break;
    IrDim td = t->dims[ti];
    bool broadcast = td.sym < 0 && td.value == 1 && !(o->dims[i].sym < 0 && o->dims[i].value == 1);
    if (!broadcast) idx = add(L, idx, mul(L, oi, stride));
    stride = mul(L, stride, dimx(L, td));
  }
  return idx;
}

/* ---- kernels ---- */

/* out[i] = i */
static void lower_arange(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  LKernel *k = kernel(L, node, dimx(L, n->type.dims[0]), false);
  emit(L, NULL, ls_store(L->p, L->buf[node], V(L, k->outer_var), V(L, k->outer_var)));
}

/* PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D))
 * with 10000^(-2i/D) = exp(2i * -(ln 10000) / D), in double. */
static void lower_sinusoid(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  int64_t D = n->type.dims[n->type.rank - 1].value;
  LKernel *k = kernel(L, node, rowsx(L, &n->type), true); /* one row of D per position */
  int pos = var(L, LT_F64), j = var(L, LT_I64);
  emit(L, NULL, ls_let(L->p, pos, LT_F64, lx_cast(L->p, LT_F64, load(L, n->operands[0], V(L, k->outer_var)))));
  LStmt *f = for_(L, NULL, j, I(L, D));
  LExpr *two_i = lx_cast(L->p, LT_F64, mul(L, lx_bin(L->p, LB_DIV, V(L, j), I(L, 2)), I(L, 2)));
  LExpr *freq = lx_un(L->p, LU_EXP, lx_bin(L->p, LB_MUL, two_i, lx_f64(L->p, -log(10000.0) / (double)D)));
  LExpr *ang = lx_bin(L->p, LB_MUL, V(L, pos), freq);
  LExpr *even = lx_bin(L->p, LB_EQ, lx_bin(L->p, LB_REM, V(L, j), I(L, 2)), I(L, 0));
  LExpr *val = lx_select(L->p, even, lx_un(L->p, LU_SIN, ang), lx_un(L->p, LU_COS, ang));
  emit(L, f, ls_store(L->p, L->buf[node], add(L, mul(L, V(L, k->outer_var), I(L, D)), V(L, j)),
                      lx_cast(L->p, LT_F32, val)));
}

/* out[r, :] = table[ids[r], :] */
static void lower_embed(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  int table = n->operands[0], ids = n->operands[1];
  int64_t D = n->type.dims[n->type.rank - 1].value;
  LKernel *k = kernel(L, node, rowsx(L, &n->type), true);
  int id = var(L, LT_I64), j = var(L, LT_I64);
  emit(L, NULL, ls_let(L->p, id, LT_I64, load(L, ids, V(L, k->outer_var))));
  LStmt *f = for_(L, NULL, j, I(L, D));
  emit(L, f, ls_store(L->p, L->buf[node], add(L, mul(L, V(L, k->outer_var), I(L, D)), V(L, j)),
                      load(L, table, add(L, mul(L, V(L, id), I(L, D)), V(L, j)))));
}

static LExpr *unary_expr(Lw *L, const IrNode *n, LExpr *x) {
  LoopProgram *p = L->p;
  if (n->op == IR_OP_SCALE) return lx_bin(p, LB_MUL, x, f32(L, n->attrs.factor));
  if (n->op == IR_OP_RELU) return lx_bin(p, LB_MAX, x, f32(L, 0));
  if (n->op == IR_OP_TANH) return lx_un(p, LU_TANH, x);
  if (n->op == IR_OP_GELU) /* x/2 (1 + erf(x / sqrt 2)) */
    return lx_bin(p, LB_MUL, lx_bin(p, LB_MUL, f32(L, 0.5), x),
                  lx_bin(p, LB_ADD, f32(L, 1),
                         lx_un(p, LU_ERF, lx_bin(p, LB_MUL, x, f32(L, 0.70710678118654752440)))));
  TFMC_ASSERT(n->op == IR_OP_GELU_TANH);
  /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
  LExpr *x3 = lx_bin(p, LB_MUL, lx_bin(p, LB_MUL, x, x), x);
  LExpr *in = lx_bin(p, LB_MUL, f32(L, 0.7978845608028654),
                     lx_bin(p, LB_ADD, x, lx_bin(p, LB_MUL, f32(L, 0.044715), x3)));
  return lx_bin(p, LB_MUL, lx_bin(p, LB_MUL, f32(L, 0.5), x),
                lx_bin(p, LB_ADD, f32(L, 1), lx_un(p, LU_TANH, in)));
}

/* out[r, j] = f(x[r, j]) */
static void lower_unary(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  const IrType *t = &n->type;
  if (n->op == IR_OP_GELU || n->op == IR_OP_GELU_TANH) {
    /* gelu's erf / tanh are libm calls the vectoriser cannot widen: the
     * runtime's branch-free rt_gelu is ~5x faster */
    LoopProgram *p = L->p;
    kernel(L, node, I(L, 1), false);
    LExpr *args[6] = {lx_pool(p), prodx(L, t, 0, t->rank), lx_addr(p, L->buf[n->operands[0]], I(L, 0)),
                      lx_addr(p, L->buf[node], I(L, 0)), I(L, n->op == IR_OP_GELU_TANH),
                      I(L, L->opt.gelu_grain)};
    emit(L, NULL, ls_call(p, LC_GELU, args, 6));
    return;
  }
  LKernel *k = kernel(L, node, rowsx(L, t), true);
  int j = var(L, LT_I64);
  LExpr *D = dimx(L, t->dims[t->rank - 1]);
  LStmt *f = for_(L, NULL, j, D);
  LExpr *idx = add(L, mul(L, V(L, k->outer_var), D), V(L, j));
  emit(L, f, ls_store(L->p, L->buf[node], idx, unary_expr(L, n, load(L, n->operands[0], idx))));
}

/* out = a OP b with numpy broadcasting */
static void lower_binary(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  const IrType *t = &n->type;
  const IrType *ta = &L->g->nodes[n->operands[0]].type, *tb = &L->g->nodes[n->operands[1]].type;
  LKernel *k = kernel(L, node, rowsx(L, t), true);
  int j = var(L, LT_I64);
  LExpr *D = dimx(L, t->dims[t->rank - 1]);
  LStmt *f = for_(L, NULL, j, D);
  LExpr *r = V(L, k->outer_var);
  LExpr *a = load(L, n->operands[0], bcast_index(L, t, ta, r, V(L, j)));
  LExpr *b = load(L, n->operands[1], bcast_index(L, t, tb, r, V(L, j)));
  LBinOp op = n->op == IR_OP_ADD   ? LB_ADD
              : n->op == IR_OP_SUB ? LB_SUB
              : n->op == IR_OP_MUL ? LB_MUL
              : n->op == IR_OP_DIV ? LB_DIV
                                   : LB_AND;
  TFMC_ASSERT(n->op != IR_OP_AND || op == LB_AND);
  emit(L, f, ls_store(L->p, L->buf[node], add(L, mul(L, r, D), V(L, j)), lx_bin(L->p, op, a, b)));
}

/* per row: mean = sum(x)/D; c = x - mean;
 *   unbiased=false: y = g c / sqrt(sum(c^2)/D + eps) + b
 *   unbiased=true:  y = g c / (sqrt(sum(c^2)/(D-1)) + eps) + b */
/* A layernorm's denominator from its row's sum of squared deviations ss
 * (D values): sqrt(ss/D + eps), or with `unbiased` (the Annotated
 * Transformer's) sqrt(ss/(D-1)) + eps. Shared by layernorm and the fused
 * add_layernorm kinds. */
static LExpr *ln_denom(Lw *L, const IrNode *n, int ss, int64_t D) {
  LoopProgram *p = L->p;
  if (n->attrs.unbiased) {
    LExpr *var_u = D > 1 ? lx_bin(p, LB_DIV, V(L, ss), f32(L, (double)(D - 1))) : f32(L, 0);
    return lx_bin(p, LB_ADD, lx_un(p, LU_SQRT, var_u), f32(L, n->attrs.eps));
  }
  return lx_un(p, LU_SQRT, lx_bin(p, LB_ADD, lx_bin(p, LB_DIV, V(L, ss), f32(L, (double)D)),
                                  f32(L, n->attrs.eps)));
}

static void lower_layernorm(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  const IrType *t = &n->type;
  int64_t D = t->dims[t->rank - 1].value;
  int x = n->operands[0], g = n->operands[1], b = n->operands[2];
  LoopProgram *p = L->p;
  LKernel *k = kernel(L, node, rowsx(L, t), true);
  int s = var(L, LT_F32), mean = var(L, LT_F32), ss = var(L, LT_F32), den = var(L, LT_F32);
  int j1 = var(L, LT_I64), j2 = var(L, LT_I64), j3 = var(L, LT_I64);
  LExpr *base = mul(L, V(L, k->outer_var), I(L, D));
  emit(L, NULL, ls_let(p, s, LT_F32, f32(L, 0)));
  LStmt *f1 = for_(L, NULL, j1, I(L, D));
  emit(L, f1, ls_set(p, s, lx_bin_reassoc(p, LB_ADD, V(L, s), load(L, x, add(L, base, V(L, j1))))));
  emit(L, NULL, ls_let(p, mean, LT_F32, lx_bin(p, LB_DIV, V(L, s), f32(L, (double)D))));
  emit(L, NULL, ls_let(p, ss, LT_F32, f32(L, 0)));
  LStmt *f2 = for_(L, NULL, j2, I(L, D));
  LExpr *c2 = lx_bin(p, LB_SUB, load(L, x, add(L, base, V(L, j2))), V(L, mean));
  emit(L, f2, ls_set(p, ss, lx_bin_reassoc(p, LB_ADD, V(L, ss), lx_bin(p, LB_MUL, c2, c2))));
  LExpr *denom = ln_denom(L, n, ss, D);
  /* one division per row, not per element: g ((x - mean) * (1 / den)) + b,
   * as PyTorch's kernel multiplies by rstd */
  emit(L, NULL, ls_let(p, den, LT_F32, lx_bin(p, LB_DIV, f32(L, 1), denom)));
  LStmt *f3 = for_(L, NULL, j3, I(L, D));
  LExpr *c3 = lx_bin(p, LB_SUB, load(L, x, add(L, base, V(L, j3))), V(L, mean));
  LExpr *y = lx_bin(p, LB_ADD, lx_bin(p, LB_MUL, load(L, g, V(L, j3)), lx_bin(p, LB_MUL, c3, V(L, den))),
                    load(L, b, V(L, j3)));
  emit(L, f3, ls_store(p, L->buf[node], add(L, base, V(L, j3)), y));
}

/* y[M,N] = act(x[M,K] w[N,K]^T + b) + r : the runtime's GEMM entry with
 * its epilogue (act none and no residual: the plain product; scale 1) */
static void lower_linear(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  const IrType *tw = &L->g->nodes[n->operands[1]].type;
  LoopProgram *p = L->p;
  kernel(L, node, I(L, 1), false);
  bool has_res = n->attrs.residual;
  bool has_bias = n->n_operands - 2 - (has_res ? 1 : 0) == 1;
  /* IrAct's values are rt_act.h's RtAct (ir/ir.h) */
  _Static_assert((int)IR_ACT_NONE == (int)RT_ACT_NONE && (int)IR_ACT_RELU == (int)RT_ACT_RELU &&
                     (int)IR_ACT_GELU == (int)RT_ACT_GELU &&
                     (int)IR_ACT_GELU_TANH == (int)RT_ACT_GELU_TANH,
                 "IrAct and RtAct differ");
  LExpr *N = I(L, tw->dims[0].value), *K = I(L, tw->dims[1].value);
  LExpr *args[19] = {lx_pool(p),
                     rowsx(L, &n->type),
                     N,
                     K,
                     lx_addr(p, L->buf[n->operands[0]], I(L, 0)),
                     K,
                     lx_addr(p, L->buf[n->operands[1]], I(L, 0)),
                     has_bias ? lx_addr(p, L->buf[n->operands[2]], I(L, 0)) : lx_null(p),
                     lx_addr(p, L->buf[node], I(L, 0)),
                     N,
                     I(L, n->attrs.act),
                     f32(L, 1),
                     has_res ? lx_addr(p, L->buf[n->operands[n->n_operands - 1]], I(L, 0))
                             : lx_null(p),
                     has_res ? N : I(L, 0),
                     I(L, L->opt.gemm_mc),
                     I(L, L->opt.gemm_nc),
                     I(L, L->opt.gemm_kc),
                     I(L, L->opt.linear_task_macs),
                     I(L, L->opt.linear_split_macs)};
  emit(L, NULL, ls_call(p, LC_LINEAR, args, 19));
}

/* softmax: y = exp(x - max) / sum(exp(x - max)); log_softmax: y = x - max - log(sum) */
static void lower_softmax(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  const IrType *t = &n->type;
  LoopProgram *p = L->p;
  int x = n->operands[0];
  LKernel *k = kernel(L, node, rowsx(L, t), true);
  LExpr *D = dimx(L, t->dims[t->rank - 1]);
  int m = var(L, LT_F32), s = var(L, LT_F32), j1 = var(L, LT_I64), j2 = var(L, LT_I64),
      j3 = var(L, LT_I64);
  LExpr *base = mul(L, V(L, k->outer_var), D);
  emit(L, NULL, ls_let(p, m, LT_F32, f32(L, -INFINITY)));
  LStmt *f1 = for_(L, NULL, j1, D);
  emit(L, f1, ls_set(p, m, lx_bin_reassoc(p, LB_MAX, V(L, m), load(L, x, add(L, base, V(L, j1))))));
  emit(L, NULL, ls_let(p, s, LT_F32, f32(L, 0)));
  LStmt *f2 = for_(L, NULL, j2, D);
  LExpr *e = lx_un(p, LU_EXP, lx_bin(p, LB_SUB, load(L, x, add(L, base, V(L, j2))), V(L, m)));
  if (n->op == IR_OP_SOFTMAX) {
    emit(L, f2, ls_store(p, L->buf[node], add(L, base, V(L, j2)), e));
    emit(L, f2, ls_set(p, s, lx_bin_reassoc(p, LB_ADD, V(L, s), load(L, node, add(L, base, V(L, j2))))));
  } else {
    emit(L, f2, ls_set(p, s, lx_bin_reassoc(p, LB_ADD, V(L, s), e)));
  }
  LStmt *f3 = for_(L, NULL, j3, D);
  LExpr *idx = add(L, base, V(L, j3));
  LExpr *y = n->op == IR_OP_SOFTMAX
                 ? lx_bin(p, LB_DIV, load(L, node, idx), V(L, s))
                 : lx_bin(p, LB_SUB, lx_bin(p, LB_SUB, load(L, x, idx), V(L, m)), lx_un(p, LU_LOG, V(L, s)));
  emit(L, f3, ls_store(p, L->buf[node], idx, y));
}

/* out[0, q, k] = k <= q + (Tk - Tq)  (query q at absolute position q + Tk - Tq) */
static void lower_causal(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  LExpr *T = dimx(L, n->type.dims[2]);
  LKernel *k = kernel(L, node, dimx(L, n->type.dims[1]), true);
  int j = var(L, LT_I64);
  LStmt *f = for_(L, NULL, j, T);
  LExpr *q = V(L, k->outer_var);
  if (!ir_dim_eq(n->type.dims[1], n->type.dims[2]))
    q = add(L, q, lx_bin(L->p, LB_SUB, T, dimx(L, n->type.dims[1])));
  emit(L, f, ls_store(L->p, L->buf[node], add(L, mul(L, V(L, k->outer_var), T), V(L, j)),
                      lx_bin(L->p, LB_LE, V(L, j), q)));
}

/* out = x, element for element (reshape into an output; outputs of inputs) */
static void lower_copy(Lw *L, int node, int src, int dst_buf) {
  const IrType *t = &L->g->nodes[node].type;
  LKernel *k = kernel(L, node, t->rank ? rowsx(L, t) : I(L, 1), true);
  int j = var(L, LT_I64);
  LExpr *D = t->rank ? dimx(L, t->dims[t->rank - 1]) : I(L, 1);
  LStmt *f = for_(L, NULL, j, D);
  LExpr *idx = add(L, mul(L, V(L, k->outer_var), D), V(L, j));
  emit(L, f, ls_store(L->p, dst_buf, idx, load(L, src, idx)));
}

/* out[..., i_{axis+1}, ...] = x[..., index, i_{axis+1}, ...] */
static void lower_take(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  const IrType *t = &n->type, *ti = &L->g->nodes[n->operands[0]].type;
  int axis = n->attrs.axis;
  LKernel *k = kernel(L, node, prodx(L, t, 0, t->rank), true);
  /* flat out index o -> in index: o = hi * inner + lo with inner = prod of
   * out dims from axis on; in = (hi * in_dim(axis) + index) * inner + lo */
  LExpr *inner = prodx(L, t, axis, t->rank);
  LExpr *o = V(L, k->outer_var);
  LExpr *hi = lx_bin(L->p, LB_DIV, o, inner), *lo = lx_bin(L->p, LB_REM, o, inner);
  /* a negative index counts from the end */
  LExpr *index = n->attrs.index < 0 ? add(L, dimx(L, ti->dims[axis]), I(L, n->attrs.index))
                                    : I(L, n->attrs.index);
  LExpr *in = add(L, mul(L, add(L, mul(L, hi, dimx(L, ti->dims[axis])), index), inner), lo);
  emit(L, NULL, ls_store(L->p, L->buf[node], o, load(L, n->operands[0], in)));
}

/* Floats between batch elements of attention operand `value` f32[B,Tk,D]:
 * Tk*D for a tensor, Sm*D for a kv.append result, which is its state
 * [Bm,Sm,D] read in place (only attention k / v consume one, ir/verify.c) */
static LExpr *row_stride(Lw *L, int value);
static LExpr *batch_stride(Lw *L, int value) {
  const IrNode *n = &L->g->nodes[value];
  if (n->op == IR_OP_KV_APPEND) {
    const IrType *ts = &L->g->nodes[n->operands[0]].type;
    return I(L, ts->dims[1].value * ts->dims[2].value);
  }
  return mul(L, dimx(L, n->type.dims[1]), row_stride(L, value));
}

/* Floats between rows (last-dim vectors) of `value`: its last dim, or for
 * a slice view its operand's (Q, K and V read out of one QKV buffer). */
static LExpr *row_stride(Lw *L, int value) {
  const IrNode *n = &L->g->nodes[value];
  if (L->view[value]) n = &L->g->nodes[n->operands[0]];
  return dimx(L, n->type.dims[n->type.rank - 1]);
}

/* The address of `value`'s first element: a slice view starts `start`
 * floats into its operand's rows. */
static LExpr *view_addr(Lw *L, int value) {
  const IrNode *n = &L->g->nodes[value];
  return lx_addr(L->p, L->buf[value], I(L, L->view[value] ? n->attrs.start : 0));
}

/* Element (row r, column j) of a value read row by row: r * row stride +
 * the view's start + j. */
static LExpr *row_elem(Lw *L, int value, LExpr *r, LExpr *j) {
  const IrNode *n = &L->g->nodes[value];
  LExpr *at = add(L, mul(L, r, row_stride(L, value)), j);
  return L->view[value] ? add(L, at, I(L, n->attrs.start)) : at;
}

/* A window of x along one axis, copied: x as (outer, n, inner), y (outer,
 * m, inner) = x[:, w:w+m, :], flat y index o = (hi * m + i) * inner + lo;
 * w = n - m (tail: the last m) or the slice's start.
 *   tail(x) {axis} -> y
 *   slice(x) {axis, start} -> y (slices read in place have no kernel) */
static void lower_window(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  const IrType *t = &n->type, *ti = &L->g->nodes[n->operands[0]].type;
  int axis = n->attrs.axis;
  LKernel *k = kernel(L, node, prodx(L, t, 0, t->rank), true);
  LExpr *inner = prodx(L, t, axis + 1, t->rank), *m = dimx(L, t->dims[axis]),
        *nn = dimx(L, ti->dims[axis]);
  LExpr *o = V(L, k->outer_var);
  LExpr *lo = lx_bin(L->p, LB_REM, o, inner), *ri = lx_bin(L->p, LB_DIV, o, inner);
  LExpr *i = lx_bin(L->p, LB_REM, ri, m), *hi = lx_bin(L->p, LB_DIV, ri, m);
  LExpr *w = n->op == IR_OP_TAIL ? lx_bin(L->p, LB_SUB, nn, m) : I(L, n->attrs.start);
  LExpr *src = add(L, mul(L, add(L, mul(L, hi, nn), add(L, w, i)), inner), lo);
  emit(L, NULL, ls_store(L->p, L->buf[node], o, load(L, n->operands[0], src)));
}

/* kv.append(s [Bm,Sm,D], x [B,T,D]) -> [B,L,D], P = L - T:
 *   s[b, P+t, :] = x[b, t, :]   (the result is s itself, read in place) */
static void lower_kv_append(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  const IrType *ts = &L->g->nodes[n->operands[0]].type, *tx = &L->g->nodes[n->operands[1]].type;
  int64_t Sm = ts->dims[1].value, D = ts->dims[2].value;
  LExpr *T = dimx(L, tx->dims[1]);
  LKernel *k = kernel(L, node, rowsx(L, tx), true);
  int j = var(L, LT_I64);
  LExpr *r = V(L, k->outer_var);
  LExpr *b = lx_bin(L->p, LB_DIV, r, T), *t = lx_bin(L->p, LB_REM, r, T);
  LExpr *P = lx_bin(L->p, LB_SUB, dimx(L, n->type.dims[1]), T);
  LExpr *row = add(L, mul(L, b, I(L, Sm)), add(L, P, t));
  LStmt *f = for_(L, NULL, j, I(L, D));
  emit(L, f, ls_store(L->p, L->buf[node], add(L, mul(L, row, I(L, D)), V(L, j)),
                      load(L, n->operands[1], row_elem(L, n->operands[1], r, V(L, j)))));
}

typedef struct AttnIdx {
  LExpr *b, *h, *t;  /* batch, head, query position of outer row o = (b*H + h)*Tq + t */
  LExpr *Tq, *Tk;
} AttnIdx;

static AttnIdx attn_idx(Lw *L, const IrType *q, const IrType *kt, int heads) {
  AttnIdx a;
  LExpr *o = V(L, L->k->outer_var);
  a.Tq = dimx(L, q->dims[1]);
  a.Tk = dimx(L, kt->dims[1]);
  a.t = lx_bin(L->p, LB_REM, o, a.Tq);
  LExpr *bh = lx_bin(L->p, LB_DIV, o, a.Tq);
  a.h = lx_bin(L->p, LB_REM, bh, I(L, heads));
  a.b = lx_bin(L->p, LB_DIV, bh, I(L, heads));
  return a;
}

/* score(s) = scale * sum_j q[b,t,h*dh+j] k[b,s,h*dh+j], replaced by -1e9
 * where mask[b|0, t|0, s] == 0.  Appends the computation into `into`,
 * leaving the score in variable `sc`. */
static void attn_score(Lw *L, LStmt *into, const IrNode *n, AttnIdx *a, int s, int sc, int *vb,
                       int *vt) {
  LoopProgram *p = L->p;
  const IrType *tq = &L->g->nodes[n->operands[0]].type;
  int64_t D = tq->dims[2].value, dh = D / n->attrs.heads;
  int j = var(L, LT_I64);
  LExpr *qbase = add(L, mul(L, add(L, mul(L, V(L, *vb), a->Tq), V(L, *vt)), I(L, D)),
                     mul(L, a->h, I(L, dh)));
  LExpr *kbase = add(L, add(L, mul(L, V(L, *vb), batch_stride(L, n->operands[1])),
                             mul(L, V(L, s), I(L, D))),
                     mul(L, a->h, I(L, dh)));
  emit(L, into, ls_let(p, sc, LT_F32, f32(L, 0)));
  LStmt *f = for_(L, into, j, I(L, dh));
  emit(L, f, ls_set(p, sc, lx_bin_reassoc(p, LB_ADD, V(L, sc),
                                          lx_bin(p, LB_MUL, load(L, n->operands[0], add(L, qbase, V(L, j))),
                                                 load(L, n->operands[1], add(L, kbase, V(L, j)))))));
  emit(L, into, ls_set(p, sc, lx_bin(p, LB_MUL, V(L, sc), f32(L, n->attrs.scale))));
  if (n->n_operands > 2) { /* attn.probs(q, k, mask) */
    int mask = n->operands[2];
    const IrType *tm = &L->g->nodes[mask].type;
    LExpr *mb = (tm->dims[0].sym < 0 && tm->dims[0].value == 1) ? I(L, 0) : V(L, *vb);
    LExpr *mt = (tm->dims[1].sym < 0 && tm->dims[1].value == 1) ? I(L, 0) : V(L, *vt);
    LExpr *mq = (tm->dims[1].sym < 0 && tm->dims[1].value == 1) ? I(L, 1) : a->Tq;
    LExpr *midx = add(L, mul(L, add(L, mul(L, mb, mq), mt), a->Tk), V(L, s));
    emit(L, into, ls_set(p, sc, lx_select(p, lx_bin(p, LB_NE, load(L, mask, midx), I(L, 0)), V(L, sc),
                                          f32(L, -1e9))));
  }
}

/* The largest tk with dh * round_up(tk, 8) <= floats and dv * tk <= floats
 * (attn_tiled_floats, passes.h), 0 when floats <= 0. */
static int64_t attn_max_tk_tiled(int64_t floats, int64_t dh, int64_t dv) {
  if (floats <= 0) return 0;
  int64_t by_k = dh > 0 ? floats / dh / 8 * 8 : INT64_MAX;
  int64_t by_v = dv > 0 ? floats / dv : INT64_MAX;
  return by_k < by_v ? by_k : by_v;
}

/* attention(q,k,v,mask) = softmax(q_h k_h^T * scale, masked -1e9) v_h per
 * head h: the runtime's rt_attention (two GEMMs per block of query rows,
 * parallel over batch x heads x blocks inside), called once from a serial
 * kernel. The mask bool[B|1, Tq|1, Tk] goes with its first two dims, 1 or
 * the run-time B / Tq, which rt_attention broadcasts. */
static void lower_attention(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  LoopProgram *p = L->p;
  const IrType *tq = &L->g->nodes[n->operands[0]].type, *tk = &L->g->nodes[n->operands[1]].type;
  const IrType *tv = &L->g->nodes[n->operands[2]].type;
  int H = n->attrs.heads;
  kernel(L, node, I(L, 1), false);
  bool masked = n->n_operands == 4;
  const IrType *tm = masked ? &L->g->nodes[n->operands[3]].type : NULL;
  int64_t dh = tq->dims[2].value / H, dv = tv->dims[2].value / H;
  bool flash = n->op == IR_OP_ATTENTION_FLASH;
  LExpr *args[23] = {lx_pool(p),
                     dimx(L, tq->dims[0]),
                     I(L, H),
                     dimx(L, tq->dims[1]),
                     dimx(L, tk->dims[1]),
                     I(L, dh),
                     I(L, dv),
                     f32(L, n->attrs.scale),
                     view_addr(L, n->operands[0]),
                     row_stride(L, n->operands[0]),
                     view_addr(L, n->operands[1]),
                     row_stride(L, n->operands[1]),
                     view_addr(L, n->operands[2]),
                     row_stride(L, n->operands[2]),
                     batch_stride(L, n->operands[1]),
                     batch_stride(L, n->operands[2]),
                     masked ? lx_addr(p, L->buf[n->operands[3]], I(L, 0)) : lx_null(p),
                     masked ? dimx(L, tm->dims[0]) : I(L, 1),
                     masked ? dimx(L, tm->dims[1]) : I(L, 1),
                     lx_addr(p, L->buf[node], I(L, 0)),
                     NULL, NULL, NULL};
  int n_args = 20;
  if (flash) {
    /* rt_attention_flash: no probs; keys in blocks of block_k */
    args[n_args++] = I(L, L->opt.attn_block_q);
    args[n_args++] = I(L, L->opt.attn_block_k);
  } else {
    args[n_args++] = lx_null(p);
    args[n_args++] = I(L, L->opt.attn_block_q);
    args[n_args++] = I(L, attn_max_tk_tiled(L->opt.attn_tiled_floats, dh, dv));
  }
  emit(L, NULL, ls_call(p, flash ? LC_ATTENTION_FLASH : LC_ATTENTION, args, n_args));
}

/* p[b,h,t,:] = softmax(scores(b,h,t,:)) */
static void lower_attn_probs(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  LoopProgram *p = L->p;
  const IrType *tq = &L->g->nodes[n->operands[0]].type, *tk = &L->g->nodes[n->operands[1]].type;
  int H = n->attrs.heads;
  LKernel *k = kernel(L, node, mul(L, mul(L, dimx(L, tq->dims[0]), I(L, H)), dimx(L, tq->dims[1])), true);
  AttnIdx a = attn_idx(L, tq, tk, H);
  int vb = var(L, LT_I64), vt = var(L, LT_I64), vh = var(L, LT_I64), row = var(L, LT_I64);
  emit(L, NULL, ls_let(p, vb, LT_I64, a.b));
  emit(L, NULL, ls_let(p, vt, LT_I64, a.t));
  emit(L, NULL, ls_let(p, vh, LT_I64, a.h));
  a.h = V(L, vh);
  emit(L, NULL, ls_let(p, row, LT_I64, mul(L, V(L, k->outer_var), a.Tk)));
  int m = var(L, LT_F32), sum = var(L, LT_F32), s = var(L, LT_I64), sc = var(L, LT_F32),
      s2 = var(L, LT_I64), s3 = var(L, LT_I64);
  emit(L, NULL, ls_let(p, m, LT_F32, f32(L, -INFINITY)));
  LStmt *f1 = for_(L, NULL, s, a.Tk);
  attn_score(L, f1, n, &a, s, sc, &vb, &vt);
  emit(L, f1, ls_store(p, L->buf[node], add(L, V(L, row), V(L, s)), V(L, sc)));
  emit(L, f1, ls_set(p, m, lx_bin(p, LB_MAX, V(L, m), V(L, sc))));
  emit(L, NULL, ls_let(p, sum, LT_F32, f32(L, 0)));
  LStmt *f2 = for_(L, NULL, s2, a.Tk);
  LExpr *i2 = add(L, V(L, row), V(L, s2));
  emit(L, f2, ls_store(p, L->buf[node], i2, lx_un(p, LU_EXP, lx_bin(p, LB_SUB, load(L, node, i2), V(L, m)))));
  emit(L, f2, ls_set(p, sum, lx_bin_reassoc(p, LB_ADD, V(L, sum), load(L, node, i2))));
  LStmt *f3 = for_(L, NULL, s3, a.Tk);
  LExpr *i3 = add(L, V(L, row), V(L, s3));
  emit(L, f3, ls_store(p, L->buf[node], i3, lx_bin(p, LB_DIV, load(L, node, i3), V(L, sum))));
}

/* out[b,t,h*dv+j] = sum_s p[b,h,t,s] v[b,s,h*dv+j] */
static void lower_attn_mix(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  LoopProgram *p = L->p;
  const IrType *tp = &L->g->nodes[n->operands[0]].type, *tv = &L->g->nodes[n->operands[1]].type;
  int H = n->attrs.heads;
  int64_t Dv = tv->dims[2].value, dv = Dv / H;
  LExpr *Tq = dimx(L, tp->dims[2]), *Tk = dimx(L, tp->dims[3]);
  LKernel *k = kernel(L, node, mul(L, mul(L, dimx(L, tp->dims[0]), I(L, H)), Tq), true);
  LExpr *o = V(L, k->outer_var);
  int vb = var(L, LT_I64), vt = var(L, LT_I64), vh = var(L, LT_I64), obase = var(L, LT_I64);
  emit(L, NULL, ls_let(p, vb, LT_I64, lx_bin(p, LB_DIV, lx_bin(p, LB_DIV, o, Tq), I(L, H))));
  emit(L, NULL, ls_let(p, vh, LT_I64, lx_bin(p, LB_REM, lx_bin(p, LB_DIV, o, Tq), I(L, H))));
  emit(L, NULL, ls_let(p, vt, LT_I64, lx_bin(p, LB_REM, o, Tq)));
  emit(L, NULL, ls_let(p, obase, LT_I64,
                       add(L, mul(L, add(L, mul(L, V(L, vb), Tq), V(L, vt)), I(L, Dv)), mul(L, V(L, vh), I(L, dv)))));
  int j0 = var(L, LT_I64), s = var(L, LT_I64), pv = var(L, LT_F32), j = var(L, LT_I64);
  LStmt *z = for_(L, NULL, j0, I(L, dv));
  emit(L, z, ls_store(p, L->buf[node], add(L, V(L, obase), V(L, j0)), f32(L, 0)));
  LStmt *fs = for_(L, NULL, s, Tk);
  emit(L, fs, ls_let(p, pv, LT_F32, load(L, n->operands[0], add(L, mul(L, o, Tk), V(L, s)))));
  LExpr *vbase = add(L, add(L, mul(L, V(L, vb), batch_stride(L, n->operands[1])), mul(L, V(L, s), I(L, Dv))),
                     mul(L, V(L, vh), I(L, dv)));
  LStmt *fj = for_(L, fs, j, I(L, dv));
  LExpr *oi = add(L, V(L, obase), V(L, j));
  emit(L, fj, ls_store(p, L->buf[node], oi,
                       lx_bin(p, LB_ADD, load(L, node, oi),
                              lx_bin(p, LB_MUL, V(L, pv), load(L, n->operands[1], add(L, vbase, V(L, j)))))));
}

/* ---- fused nodes (ir/fused.def): one kernel each ---- */

static bool dim_is_one(IrDim d) { return d.sym < 0 && d.value == 1; }

/* The node of g that reads result `index` of fused node f, or -1. */
static int fused_result_node(const IrGraph *g, int f, int64_t index) {
  for (int i = f + 1; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_RESULT && g->nodes[i].operands[0] == f &&
        g->nodes[i].attrs.index == index)
      return i;
  return -1;
}

/* Row coordinates of the kernel's output type o: the outer variable r
 * split into c[0..rank-2] (let variables); c[rank-1] is left to the
 * caller's inner loop. */
static void row_coords(Lw *L, const IrType *o, LExpr **c) {
  LExpr *rem = V(L, L->k->outer_var);
  for (int i = o->rank - 2; i >= 0; i--) {
    int v = var(L, LT_I64);
    LExpr *ci = i == 0 ? rem : lx_bin(L->p, LB_REM, rem, dimx(L, o->dims[i]));
    emit(L, NULL, ls_let(L->p, v, LT_I64, ci));
    c[i] = V(L, v);
    if (i > 0) rem = lx_bin(L->p, LB_DIV, rem, dimx(L, o->dims[i]));
  }
}

/* The flat index into a value of type t whose last dim lines up with dim
 * `a` of the output type o, at output coordinates c: numpy broadcasting (a
 * constant 1 facing a larger dim is read at 0). */
static LExpr *coord_index(Lw *L, const IrType *o, LExpr *const *c, const IrType *t, int a) {
  if (a == o->rank - 1 && ir_type_eq(t, o) && o->rank > 0) /* row r of o itself: r*D + j */
    return add(L, mul(L, V(L, L->k->outer_var), dimx(L, o->dims[a])), c[a]);
  LExpr *idx = I(L, 0), *stride = I(L, 1);
  for (int i = t->rank - 1; i >= 0; i--) {
    int od = a - (t->rank - 1 - i);
    TFMC_ASSERT(od >= 0 && od < o->rank);
    if (!(dim_is_one(t->dims[i]) && !dim_is_one(o->dims[od])))
      idx = add(L, idx, mul(L, c[od], stride));
    stride = mul(L, stride, dimx(L, t->dims[i]));
  }
  return idx;
}

/* The value of body node k of fused node f (body b: inputs "$i" are f's
 * operands, in order) at output coordinates c, k's type lined up with dim
 * `a` of the output type o. F32 for f32 values, I64 for i32 / bool. */
static LExpr *body_expr(Lw *L, const IrGraph *b, const IrNode *f, const IrType *o, LExpr **c,
                        int k, int a) {
  const IrNode *n = &b->nodes[k];
  LoopProgram *p = L->p;
  switch (n->op) {
  case IR_OP_INPUT:
    return lx_load(p, L->buf[f->operands[k]], coord_index(L, o, c, &n->type, a));
  case IR_OP_SCALE:
  case IR_OP_RELU:
  case IR_OP_GELU:
  case IR_OP_GELU_TANH:
  case IR_OP_TANH:
    return unary_expr(L, n, body_expr(L, b, f, o, c, n->operands[0], a));
  case IR_OP_ADD:
  case IR_OP_SUB:
  case IR_OP_MUL:
  case IR_OP_DIV:
  case IR_OP_AND: {
    LBinOp op = n->op == IR_OP_ADD ? LB_ADD : n->op == IR_OP_SUB ? LB_SUB
                : n->op == IR_OP_MUL ? LB_MUL : n->op == IR_OP_DIV ? LB_DIV : LB_AND;
    return lx_bin(p, op, body_expr(L, b, f, o, c, n->operands[0], a),
                  body_expr(L, b, f, o, c, n->operands[1], a));
  }
  case IR_OP_EMBED: { /* table[ids[..], j]: the ids line up one dim to the left */
    int table = n->operands[0];
    TFMC_ASSERT(b->nodes[table].op == IR_OP_INPUT); /* fused.c: the table is an operand */
    int64_t D = b->nodes[table].type.dims[1].value;
    LExpr *id = body_expr(L, b, f, o, c, n->operands[1], a - 1);
    LExpr *j = dim_is_one(n->type.dims[n->type.rank - 1]) && !dim_is_one(o->dims[a]) ? I(L, 0) : c[a];
    return lx_load(p, L->buf[f->operands[table]], add(L, mul(L, id, I(L, D)), j));
  }
  case IR_OP_ARANGE: /* out[i] = i */
    return dim_is_one(n->type.dims[0]) && !dim_is_one(o->dims[a]) ? I(L, 0) : c[a];
  case IR_OP_MASK_CAUSAL: { /* [0, q, k] = k <= q + (Tk - Tq) */
    IrDim tq = n->type.dims[1], tk = n->type.dims[2];
    LExpr *q = dim_is_one(tq) && !dim_is_one(o->dims[a - 1]) ? I(L, 0) : c[a - 1];
    LExpr *kk = dim_is_one(tk) && !dim_is_one(o->dims[a]) ? I(L, 0) : c[a];
    if (!ir_dim_eq(tq, tk)) q = add(L, q, lx_bin(p, LB_SUB, dimx(L, tk), dimx(L, tq)));
    return lx_bin(p, LB_LE, kk, q);
  }
  case IR_OP_PARAM:
  case IR_OP_CONST:
  case IR_OP_SINUSOID:
  case IR_OP_LAYERNORM:
  case IR_OP_LINEAR:
  case IR_OP_SOFTMAX:
  case IR_OP_LOG_SOFTMAX:
  case IR_OP_RESHAPE:
  case IR_OP_TAKE:
  case IR_OP_ATTENTION:
  case IR_OP_ATTN_PROBS:
  case IR_OP_ATTN_MIX:
  case IR_OP_TAIL:
  case IR_OP_STATE:
  case IR_OP_KV_APPEND:
  case IR_OP_FUSED:
  case IR_OP_RESULT:
  case IR_OP_ATTENTION_FLASH:
  case IR_OP_PARAM_CONCAT:
  case IR_OP_SLICE:
  case IR_OP_COUNT:
    break;
  }
  TFMC_ASSERT(!"an op fused.c does not let into an elementwise body");
  return NULL;
}

/* fused elementwise: out[r, j] = body(operands at r, j), one loop nest over
 * the output's rows and its contiguous last dim; nothing in between is
 * stored */
static void lower_fused_elementwise(Lw *L, int node, const IrGraph *b) {
  const IrNode *n = &L->g->nodes[node];
  const IrType *t = &n->type;
  int R = t->rank;
  LExpr *c[IR_MAX_RANK];
  int root = b->outputs[0].value;
  if (R == 0) {
    kernel(L, node, I(L, 1), false);
    emit(L, NULL, ls_store(L->p, L->buf[node], I(L, 0), body_expr(L, b, n, t, c, root, -1)));
    return;
  }
  LKernel *k = kernel(L, node, rowsx(L, t), true);
  /* the row's coordinates, unless every leaf is read at the row itself */
  bool coords = false;
  for (int i = 0; i < b->n_nodes; i++) {
    const IrNode *bn = &b->nodes[i];
    coords |= bn->op == IR_OP_EMBED || bn->op == IR_OP_ARANGE || bn->op == IR_OP_MASK_CAUSAL ||
              (bn->op == IR_OP_INPUT && !ir_type_eq(&bn->type, t));
  }
  if (coords) row_coords(L, t, c);
  int j = var(L, LT_I64);
  LExpr *D = dimx(L, t->dims[R - 1]);
  LStmt *f = for_(L, NULL, j, D);
  c[R - 1] = V(L, j);
  emit(L, f, ls_store(L->p, L->buf[node], add(L, mul(L, V(L, k->outer_var), D), V(L, j)),
                      body_expr(L, b, n, t, c, root, R - 1)));
}

/* fused add_layernorm(a, b, g, beta), per row (x = a + b, broadcasting):
 *   mean = sum(x)/D; c = x - mean; y = g c / sqrt(sum(c^2)/D + eps) + beta
 *   (unbiased: g c / (sqrt(sum(c^2)/(D-1)) + eps) + beta), as layernorm's
 * kernel computes it; x is recomputed from a and b in each sweep, or, when
 * result 1 (the sum, add_layernorm_sum) is read, stored there first and read
 * back: one row kernel, the row in cache from the first sweep on. */
static void lower_fused_add_layernorm(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  const IrType *t = &n->type;
  int R = t->rank;
  int64_t D = t->dims[R - 1].value;
  int a = n->operands[0], bb = n->operands[1], g = n->operands[2], beta = n->operands[3];
  const IrType *ta = &L->g->nodes[a].type, *tb = &L->g->nodes[bb].type;
  LoopProgram *p = L->p;
  int sum_node = fused_result_node(L->g, node, 1);
  LKernel *k = kernel(L, node, rowsx(L, t), true);
  LExpr *c[IR_MAX_RANK];
  if (!ir_type_eq(ta, t) || !ir_type_eq(tb, t)) /* an addend broadcast: row coordinates */
    row_coords(L, t, c);
  LExpr *base = mul(L, V(L, k->outer_var), I(L, D));
  int s = var(L, LT_F32), mean = var(L, LT_F32), ss = var(L, LT_F32), den = var(L, LT_F32);
  int j0 = var(L, LT_I64), j1 = var(L, LT_I64), j2 = var(L, LT_I64), j3 = var(L, LT_I64);
#define X_AT(jv)                                                                              \
  (c[R - 1] = V(L, jv),                                                                       \
   sum_node >= 0 ? load(L, sum_node, add(L, base, V(L, jv)))                                  \
                 : lx_bin(p, LB_ADD, load(L, a, coord_index(L, t, c, ta, R - 1)),              \
                          load(L, bb, coord_index(L, t, c, tb, R - 1))))
  if (sum_node >= 0) { /* the sum, written once */
    LStmt *f0 = for_(L, NULL, j0, I(L, D));
    c[R - 1] = V(L, j0);
    emit(L, f0, ls_store(p, L->buf[sum_node], add(L, base, V(L, j0)),
                         lx_bin(p, LB_ADD, load(L, a, coord_index(L, t, c, ta, R - 1)),
                                load(L, bb, coord_index(L, t, c, tb, R - 1)))));
  }
  emit(L, NULL, ls_let(p, s, LT_F32, f32(L, 0)));
  LStmt *f1 = for_(L, NULL, j1, I(L, D));
  emit(L, f1, ls_set(p, s, lx_bin_reassoc(p, LB_ADD, V(L, s), X_AT(j1))));
  emit(L, NULL, ls_let(p, mean, LT_F32, lx_bin(p, LB_DIV, V(L, s), f32(L, (double)D))));
  emit(L, NULL, ls_let(p, ss, LT_F32, f32(L, 0)));
  LStmt *f2 = for_(L, NULL, j2, I(L, D));
  LExpr *c2 = lx_bin(p, LB_SUB, X_AT(j2), V(L, mean));
  emit(L, f2, ls_set(p, ss, lx_bin_reassoc(p, LB_ADD, V(L, ss), lx_bin(p, LB_MUL, c2, c2))));
  LExpr *denom = ln_denom(L, n, ss, D);
  emit(L, NULL, ls_let(p, den, LT_F32, lx_bin(p, LB_DIV, f32(L, 1), denom)));
  LStmt *f3 = for_(L, NULL, j3, I(L, D));
  LExpr *c3 = lx_bin(p, LB_SUB, X_AT(j3), V(L, mean));
  LExpr *y = lx_bin(p, LB_ADD, lx_bin(p, LB_MUL, load(L, g, V(L, j3)), lx_bin(p, LB_MUL, c3, V(L, den))),
                    load(L, beta, V(L, j3)));
  emit(L, f3, ls_store(p, L->buf[node], add(L, base, V(L, j3)), y));
#undef X_AT
}

/* A fused node: the kernel of its kind. */
static void lower_fused(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  int kind = ir_fused_kind_of(&n->attrs);
  TFMC_ASSERT(kind >= 0); /* the graph verified */
  switch ((IrFusedKind)kind) {
  case IR_FUSED_ADD_LAYERNORM:
  case IR_FUSED_ADD_LAYERNORM_SUM:
    lower_fused_add_layernorm(L, node);
    return;
  case IR_FUSED_ELEMENTWISE: {
    char err[256];
    Arena *ba = arena_create();
    IrGraph *b = ir_fused_body(ba, L->g, node, err, sizeof err);
    if (!b) tfmc_assert_fail(__FILE__, __LINE__, err); /* the graph verified */
    lower_fused_elementwise(L, node, b);
    arena_destroy(ba); /* the loop IR built refers to buffers, not to the body */
    return;
  }
  case IR_FUSED_COUNT:
    break;
  }
  TFMC_ASSERT(!"fused kind without a kernel");
}

/* a scalar literal */
static void lower_const(Lw *L, int node) {
  const IrNode *n = &L->g->nodes[node];
  kernel(L, node, I(L, 1), false);
  emit(L, NULL, ls_store(L->p, L->buf[node], I(L, 0), f32(L, n->attrs.value)));
}

/* ---- memory planning ---- */

typedef struct Block {
  int64_t off, size;
  int node;
} Block;

static int64_t align64(int64_t v) { return (v + 63) & ~(int64_t)63; }

static LElem elem_of(IrDtype dt) {
  switch (dt) {
  case IR_F32: return LE_F32;
  case IR_I32: return LE_I32;
  case IR_BOOL: return LE_U8;
  case IR_DTYPE_COUNT: break;
  }
  return LE_F32;
}

LoopProgram *pass_lower_loops(Arena *a, const IrGraph *g) {
  LowerLoopsOptions opts = pass_lower_loops_options_default();
  return pass_lower_loops_with(a, g, &opts);
}

LoopProgram *pass_lower_loops_with(Arena *a, const IrGraph *g, const LowerLoopsOptions *opts) {
  LoopProgram *p = loop_program_create(a, g->name);
  p->n_syms = g->n_syms;
  Lw L = {g, p, arena_alloc(a, (size_t)g->n_nodes * sizeof(int)),
          arena_alloc(a, (size_t)g->n_nodes * sizeof(bool)), NULL, *opts};
  int *out_of = arena_alloc(a, (size_t)g->n_nodes * sizeof(int)); /* node -> first output idx */
  int *base = arena_alloc(a, (size_t)g->n_nodes * sizeof(int));   /* alias root */
  int *last = arena_alloc(a, (size_t)g->n_nodes * sizeof(int));
  for (int i = 0; i < g->n_nodes; i++) out_of[i] = -1, L.buf[i] = -1, last[i] = i;
  for (int o = g->n_outputs - 1; o >= 0; o--) out_of[g->outputs[o].value] = o;
  /* A param that derived params read, and nothing else, is not packed (the
   * derived one is);
   * a slice of the last axis that only attention q/k/v and kv.append rows
   * read is a view: they take row strides, so they read it in place. */
  bool *packed = arena_alloc(a, (size_t)g->n_nodes * sizeof(bool));
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    L.view[i] = n->op == IR_OP_SLICE && n->attrs.axis == n->type.rank - 1 && out_of[i] < 0;
    packed[i] = true;
  }
  bool *derived_only = arena_alloc(a, (size_t)g->n_nodes * sizeof(bool));
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; g->nodes[i].op == IR_OP_PARAM_CONCAT && k < g->nodes[i].n_operands; k++)
      derived_only[g->nodes[i].operands[k]] = true;
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    for (int k = 0; k < n->n_operands; k++) {
      int o = n->operands[k];
      if (n->op != IR_OP_PARAM_CONCAT) derived_only[o] = false;
      bool reads_rows = ((n->op == IR_OP_ATTENTION || n->op == IR_OP_ATTENTION_FLASH) && k < 3) ||
                        (n->op == IR_OP_KV_APPEND && k == 1);
      if (!reads_rows) L.view[o] = false;
    }
  }
  for (int i = 0; i < g->n_nodes; i++) packed[i] = !derived_only[i] || out_of[i] >= 0;
  /* reshapes alias their operand unless they are an output themselves;
   * views alias theirs */
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    base[i] = ((n->op == IR_OP_RESHAPE && out_of[i] < 0) || L.view[i]) ? base[n->operands[0]] : i;
  }
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_operands; k++) {
      int b = base[g->nodes[i].operands[k]];
      if (last[b] < i) last[b] = i;
    }
  /* inputs, params */
  int n_in = 0;
  int64_t wofs = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->op == IR_OP_INPUT)
      L.buf[i] = loop_buffer_add(p, LB_INPUT, n_in++, 0, elem_of(n->type.dtype), n->attrs.name);
    else if ((n->op == IR_OP_PARAM && packed[i]) || n->op == IR_OP_PARAM_CONCAT) {
      L.buf[i] = loop_buffer_add(p, LB_WEIGHT, 0, wofs, LE_F32, n->attrs.name);
      wofs += (type_bytes_max(g, &n->type) / 4 + 15) & ~(int64_t)15;
    }
  }
  p->weights_floats = wofs;
  /* states: their own region, in node order, never freed; a kv.append
   * result is its state, read in place */
  int64_t sofs = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->op == IR_OP_STATE) {
      L.buf[i] = loop_buffer_add(p, LB_STATE, 0, sofs, LE_F32, n->attrs.name);
      sofs += align64(type_bytes_max(g, &n->type));
    } else if (n->op == IR_OP_KV_APPEND) {
      const LBuffer *s = &p->bufs[L.buf[n->operands[0]]];
      L.buf[i] = loop_buffer_add(p, LB_STATE, 0, s->offset, LE_F32,
                                 arena_printf(a, "%%%d (rows of %s)", i, s->name));
    }
  }
  p->state_bytes = sofs;
  /* arena blocks, first fit by liveness */
  Block *live = arena_alloc(a, (size_t)(g->n_nodes + 1) * sizeof *live);
  p->arena_blocks = arena_alloc(a, (size_t)(g->n_nodes + 1) * sizeof *p->arena_blocks);
  int n_live = 0;
  int64_t peak = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->op == IR_OP_INPUT || n->op == IR_OP_PARAM || n->op == IR_OP_STATE ||
        n->op == IR_OP_KV_APPEND || n->op == IR_OP_PARAM_CONCAT)
      continue;
    if (base[i] != i) {
      L.buf[i] = loop_buffer_add(p, p->bufs[L.buf[base[i]]].kind, p->bufs[L.buf[base[i]]].index,
                                 p->bufs[L.buf[base[i]]].offset, elem_of(n->type.dtype),
                                 arena_printf(a, "%%%d (%s of %%%d)", i,
                                              L.view[i] ? "slice" : "reshape", base[i]));
      continue;
    }
    /* a fused node's kernel also writes the values of its result nodes:
     * they get their buffers with it, before its operands are freed */
    int plan[1 + IR_FUSED_MAX_RESULTS], n_plan = 0;
    if (L.buf[i] < 0) plan[n_plan++] = i;
    for (int r = 1; n->op == IR_OP_FUSED && r < IR_FUSED_MAX_RESULTS; r++) {
      int rn = fused_result_node(g, i, r);
      if (rn >= 0 && base[rn] == rn && L.buf[rn] < 0) plan[n_plan++] = rn;
    }
    for (int q = 0; q < n_plan; q++) {
      int v = plan[q];
      const IrType *tv = &g->nodes[v].type;
      if (out_of[v] >= 0) {
        L.buf[v] = loop_buffer_add(p, LB_OUTPUT, out_of[v], 0, elem_of(tv->dtype), g->outputs[out_of[v]].name);
        continue;
      }
      int64_t size = align64(type_bytes_max(g, tv)), off = 0;
      /* live blocks are sorted by offset: take the first gap that fits */
      int at = 0;
      for (; at < n_live; at++) {
        if (live[at].off - off >= size) break;
        off = live[at].off + live[at].size;
      }
      memmove(&live[at + 1], &live[at], (size_t)(n_live - at) * sizeof *live);
      live[at] = (Block){off, size, v};
      n_live++;
      if (off + size > peak) peak = off + size;
      L.buf[v] = loop_buffer_add(p, LB_ARENA, 0, off, elem_of(tv->dtype), arena_printf(a, "%%%d", v));
      p->arena_blocks[p->n_arena_blocks++] = arena_block(tv, off);
    }
    /* free operands whose last use is this node (after this node got its buffer) */
    for (int b = 0; b < n_live;) {
      int nd = live[b].node;
      if (last[nd] <= i && nd != i && nd < i) {
        memmove(&live[b], &live[b + 1], (size_t)(n_live - b - 1) * sizeof *live);
        n_live--;
      } else {
        b++;
      }
    }
  }
  p->arena_bytes = peak;
  /* kernels */
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    switch (n->op) {
    case IR_OP_INPUT:
    case IR_OP_PARAM:
      break;
    case IR_OP_RESHAPE:
      if (base[i] == i) lower_copy(&L, i, n->operands[0], L.buf[i]);
      break;
    case IR_OP_CONST: lower_const(&L, i); break;
    case IR_OP_ARANGE: lower_arange(&L, i); break;
    case IR_OP_SINUSOID: lower_sinusoid(&L, i); break;
    case IR_OP_EMBED: lower_embed(&L, i); break;
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
    case IR_OP_DIV:
    case IR_OP_AND: lower_binary(&L, i); break;
    case IR_OP_SCALE:
    case IR_OP_RELU:
    case IR_OP_GELU:
    case IR_OP_GELU_TANH:
    case IR_OP_TANH: lower_unary(&L, i); break;
    case IR_OP_LAYERNORM: lower_layernorm(&L, i); break;
    case IR_OP_LINEAR: lower_linear(&L, i); break;
    case IR_OP_SOFTMAX:
    case IR_OP_LOG_SOFTMAX: lower_softmax(&L, i); break;
    case IR_OP_MASK_CAUSAL: lower_causal(&L, i); break;
    case IR_OP_TAKE: lower_take(&L, i); break;
    case IR_OP_ATTENTION: lower_attention(&L, i); break;
    case IR_OP_ATTN_PROBS: lower_attn_probs(&L, i); break;
    case IR_OP_ATTN_MIX: lower_attn_mix(&L, i); break;
    case IR_OP_TAIL: lower_window(&L, i); break;
    case IR_OP_STATE: break;
    case IR_OP_KV_APPEND: lower_kv_append(&L, i); break;
    case IR_OP_FUSED: lower_fused(&L, i); break;
    case IR_OP_RESULT: break; /* written by its fused node's kernel */
    case IR_OP_ATTENTION_FLASH: lower_attention(&L, i); break;
    case IR_OP_PARAM_CONCAT: break; /* packed: ir_weights_derive */
    case IR_OP_SLICE:
      if (!L.view[i]) lower_window(&L, i);
      break;
    case IR_OP_COUNT: TFMC_ASSERT(!"op count");
    }
  }
  /* outputs whose value lives elsewhere (an input, a param, an alias, or a
   * value already written to an earlier output) get a copy */
  for (int o = 0; o < g->n_outputs; o++) {
    int v = g->outputs[o].value;
    if (L.buf[v] >= 0 && p->bufs[L.buf[v]].kind == LB_OUTPUT && p->bufs[L.buf[v]].index == o) continue;
    int dst = loop_buffer_add(p, LB_OUTPUT, o, 0, elem_of(g->nodes[v].type.dtype), g->outputs[o].name);
    lower_copy(&L, v, v, dst);
    /* named after the output: the value's own kernel (or another output's
     * copy of it, as when --output hidden and encoder.out name one value)
     * has the node's name already */
    L.k->name = arena_printf(p->arena, "k%d_copy_out%d", v, o);
  }
#ifndef NDEBUG
  /* what this file builds must verify: a failure is a lowering bug, not a
   * user error (the compile driver will also verify after every loop pass) */
  char bad[400];
  if (!loop_program_verify(p, bad, sizeof bad)) tfmc_assert_fail(__FILE__, __LINE__, bad);
#endif
  return p;
}
