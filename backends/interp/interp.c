/* backends/interp/interp.c — the reference interpreter: binds a graph's
 * inputs, params and symbols, then runs every node in id order with plain,
 * obviously-correct kernels. These kernels are the semantic ground truth for
 * the ops of ir/ops.def; every other backend is checked against them.
 *
 * Invariants:
 *   - Before any kernel runs, the graph is checked node by node (ranks,
 *     dtypes, symbol indices, operand ids earlier than the node, operand
 *     counts, and each node's type equal to what its shape rule infers), every
 *     symbol a node uses is bound from an input within 1..max, and every
 *     param is found with exactly its declared type. So a kernel may rely on
 *     its operands having the shapes its op's shape rule promises; it checks
 *     only what depends on data (embedding ids, take indices).
 *   - Kernels never write their operands: every node's result is a fresh
 *     buffer. Input data is read in place and never modified.
 *   - All memory comes from the caller's arena. A buffer whose last consumer
 *     has run goes back to a small free list and is reused for a later result
 *     of similar size, so peak memory follows liveness, not graph size.
 *     Outputs are pinned: never reused.
 *   - Reductions (dot products, softmax sums, norm statistics) accumulate in
 *     double; elementwise maths is done in double and rounded once to f32.
 *
 * Errors are returned, never fatal: a message "%ID OP at FILE:LINE:COL: ..."
 * for a node, or a plain message for a bad input list. */
#include "interp.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A single tensor larger than this is refused rather than attempted. */
#define INTERP_MAX_BYTES ((int64_t)1 << 40)

#define INTERP_PI 3.14159265358979323846

/* The attention score given to masked positions (masked_fill(mask == 0, -1e9)). */
#define INTERP_MASKED_SCORE (-1e9)

typedef struct PoolBuf {
  void *data;
  size_t cap;
} PoolBuf;

typedef struct Interp {
  const IrGraph *g;
  const WeightSet *w;
  Arena *a;
  int64_t sym_value[IR_MAX_SYMS];   /* 0 = not bound yet */
  const char *sym_from[IR_MAX_SYMS]; /* the input that bound the symbol */
  Tensor *vals;  /* [n_nodes]: each node's result */
  size_t *caps;  /* [n_nodes]: capacity of an owned result buffer */
  bool *owned;   /* [n_nodes]: result buffer came from buf_get (reusable) */
  int *uses;     /* [n_nodes]: consumers not yet run (+1 per output) */
  PoolBuf *pool; /* free buffers */
  int n_pool, cap_pool;
  char *err;
  size_t errlen;
  InterpState *state; /* NULL: a graph with state nodes is refused */
} Interp;

/* ---- errors ---- */

static int run_fail(Interp *in, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int run_fail(Interp *in, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (in->err && in->errlen) vsnprintf(in->err, in->errlen, fmt, ap);
  va_end(ap);
  return 1;
}

/* "%12 embed at model.tfm:14:3: " + message */
static int node_fail(Interp *in, int id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int node_fail(Interp *in, int id, const char *fmt, ...) {
  if (!in->err || !in->errlen) return 1;
  const IrNode *nd = &in->g->nodes[id];
  const char *op = (unsigned)nd->op < IR_OP_COUNT ? ir_op_info[nd->op].name : "?";
  int n;
  if (nd->loc.file && nd->loc.line > 0)
    n = snprintf(in->err, in->errlen, "%%%d %s at %s:%d:%d: ", id, op,
                 nd->loc.file, nd->loc.line, nd->loc.col);
  else if (nd->loc.file)
    n = snprintf(in->err, in->errlen, "%%%d %s at %s: ", id, op, nd->loc.file);
  else
    n = snprintf(in->err, in->errlen, "%%%d %s: ", id, op);
  if (n < 0) n = 0;
  if ((size_t)n < in->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(in->err + n, in->errlen - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return 1;
}

/* ---- small helpers ---- */

static size_t dtype_size(IrDtype dt) {
  switch (dt) {
  case IR_F32: return sizeof(float);
  case IR_I32: return sizeof(int32_t);
  case IR_BOOL: return sizeof(uint8_t);
  case IR_DTYPE_COUNT: break;
  }
  return 0;
}

int64_t tensor_numel(const Tensor *t) {
  if (!t || t->rank < 0 || t->rank > IR_MAX_RANK) return -1;
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    int64_t d = t->dims[i];
    if (d < 0) return -1;
    if (d != 0 && n > INT64_MAX / d) return -1;
    n *= d;
  }
  return n;
}

/* "f32[B,S,64]" (symbolic, as the graph declares it) */
static const char *type_str(const IrGraph *g, const IrType *t, char *buf,
                            size_t n) {
  size_t k = (size_t)snprintf(buf, n, "%s[", ir_dtype_name(t->dtype));
  for (int i = 0; i < t->rank && k < n; i++) {
    IrDim d = t->dims[i];
    const char *sep = i ? "," : "";
    if (d.sym >= 0 && d.sym < g->n_syms)
      k += (size_t)snprintf(buf + k, n - k, "%s%s", sep, g->syms[d.sym].name);
    else
      k += (size_t)snprintf(buf + k, n - k, "%s%lld", sep, (long long)d.value);
  }
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

/* "1,3": the multi-index of flat element `flat` of a tensor with dims */
static const char *index_str(const int64_t *dims, int rank, int64_t flat,
                             char *buf, size_t n) {
  int64_t idx[IR_MAX_RANK] = {0};
  for (int i = rank - 1; i >= 0; i--) {
    idx[i] = dims[i] ? flat % dims[i] : 0;
    flat = dims[i] ? flat / dims[i] : 0;
  }
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "",
                          (long long)idx[i]);
  return buf;
}

/* product of all dims but the last: the number of rows a last-dim op sees */
static int64_t rows_of(const Tensor *t) {
  int64_t r = 1;
  for (int i = 0; i + 1 < t->rank; i++) r *= t->dims[i];
  return r;
}

static const Tensor *operand(Interp *in, int id, int k) {
  return &in->vals[in->g->nodes[id].operands[k]];
}

/* ---- buffers: arena memory recycled by liveness ---- */

static void *buf_get(Interp *in, size_t bytes, size_t *cap) {
  int best = -1;
  for (int i = 0; i < in->n_pool; i++) {
    size_t c = in->pool[i].cap;
    /* best fit, but never waste more than half a buffer */
    if (c >= bytes && c / 2 <= bytes && (best < 0 || c < in->pool[best].cap))
      best = i;
  }
  if (best >= 0) {
    void *p = in->pool[best].data;
    *cap = in->pool[best].cap;
    in->pool[best] = in->pool[--in->n_pool];
    return p;
  }
  *cap = bytes;
  return arena_alloc(in->a, bytes);
}

static void buf_put(Interp *in, void *data, size_t cap) {
  arena_grow(in->a, (void **)&in->pool, &in->cap_pool, in->n_pool + 1,
             sizeof *in->pool);
  in->pool[in->n_pool].data = data;
  in->pool[in->n_pool].cap = cap;
  in->n_pool++;
}

/* Resolves a dim of the graph to its run-time value (symbols are bound). */
static int64_t dim_value(const Interp *in, IrDim d) {
  return d.sym >= 0 ? in->sym_value[d.sym] : d.value;
}

/* Allocates node id's result with its type's run-time dims; *out points at it. */
static int out_alloc(Interp *in, int id, Tensor **out) {
  const IrNode *nd = &in->g->nodes[id];
  Tensor *t = &in->vals[id];
  t->dtype = nd->type.dtype;
  t->rank = nd->type.rank;
  for (int i = 0; i < t->rank; i++) t->dims[i] = dim_value(in, nd->type.dims[i]);
  int64_t n = tensor_numel(t);
  size_t es = dtype_size(t->dtype);
  if (n < 0 || (int64_t)es == 0 || n > INTERP_MAX_BYTES / (int64_t)es)
    return node_fail(in, id, "result is too large to allocate");
  t->data = buf_get(in, (size_t)n * es, &in->caps[id]);
  in->owned[id] = true;
  *out = t;
  return 0;
}

/* Scratch memory for one kernel call (released by the caller with buf_put). */
static int scratch_get(Interp *in, int id, int64_t n, size_t es, void **p,
                       size_t *cap) {
  if (n < 0 || n > INTERP_MAX_BYTES / (int64_t)es)
    return node_fail(in, id, "scratch space is too large to allocate");
  *p = buf_get(in, (size_t)n * es, cap);
  return 0;
}

/* ---- checking the graph ---- */

static int check_type(Interp *in, int id, const IrType *t) {
  const IrGraph *g = in->g;
  if ((unsigned)t->dtype >= IR_DTYPE_COUNT)
    return node_fail(in, id, "malformed node: bad dtype %d", (int)t->dtype);
  if (t->rank < 0 || t->rank > IR_MAX_RANK)
    return node_fail(in, id, "malformed node: rank %d", t->rank);
  for (int i = 0; i < t->rank; i++) {
    IrDim d = t->dims[i];
    if (d.sym >= g->n_syms)
      return node_fail(in, id, "malformed node: dim %d refers to symbol %d of %d",
                       i, d.sym, g->n_syms);
    if (d.sym < 0 && d.value < 0)
      return node_fail(in, id, "malformed node: dim %d is %lld", i,
                       (long long)d.value);
  }
  return 0;
}

/* The structural and type checks of the verifier that kernels rely on. */
static int check_graph(Interp *in) {
  const IrGraph *g = in->g;
  if (g->n_syms < 0 || g->n_syms > IR_MAX_SYMS)
    return run_fail(in, "malformed graph: %d symbols", g->n_syms);
  for (int id = 0; id < g->n_nodes; id++) {
    const IrNode *nd = &g->nodes[id];
    if ((unsigned)nd->op >= IR_OP_COUNT)
      return node_fail(in, id, "malformed node: unknown op %d", (int)nd->op);
    const IrOpInfo *info = &ir_op_info[nd->op];
    if (nd->n_operands < info->min_operands || nd->n_operands > info->max_operands)
      return node_fail(in, id, "malformed node: %d operands, '%s' takes %d..%d",
                       nd->n_operands, info->name, info->min_operands,
                       info->max_operands);
    for (int k = 0; k < nd->n_operands; k++)
      if (nd->operands[k] < 0 || nd->operands[k] >= id)
        return node_fail(in, id, "malformed node: operand %d is %%%d", k,
                         nd->operands[k]);
    if (check_type(in, id, &nd->type)) return 1;
    if ((nd->op == IR_OP_INPUT || nd->op == IR_OP_PARAM || nd->op == IR_OP_PARAM_CONCAT) &&
        !nd->attrs.name)
      return node_fail(in, id, "malformed node: no name");
    IrType t = nd->type;
    char msg[256], a[128], b[128];
    if (!ir_infer_type(g, nd->op, nd->operands, nd->n_operands, &nd->attrs, &t,
                       msg, sizeof msg))
      return node_fail(in, id, "malformed node: %s", msg);
    if (!ir_type_eq(&t, &nd->type))
      return node_fail(in, id, "malformed node: type %s, its shape rule says %s",
                       type_str(g, &nd->type, a, sizeof a),
                       type_str(g, &t, b, sizeof b));
  }
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i].value < 0 || g->outputs[i].value >= g->n_nodes)
      return run_fail(in, "malformed graph: output '%s' refers to %%%d",
                      g->outputs[i].name ? g->outputs[i].name : "?",
                      g->outputs[i].value);
  return 0;
}

/* ---- binding inputs, symbols and params ---- */

static const Tensor *find_input(const Tensor *inputs, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(inputs[i].name, name) == 0) return &inputs[i];
  return NULL;
}

/* Binds one input node to its tensor: dtype, rank, constant dims and
 * symbols (each bound by its first use, checked by every later one). */
static int bind_input(Interp *in, int id, const Tensor *t) {
  const IrGraph *g = in->g;
  const IrNode *nd = &g->nodes[id];
  const char *name = nd->attrs.name;
  char want[128];
  if (t->dtype != nd->type.dtype)
    return run_fail(in, "input '%s' has dtype %s, expected %s (%s)", name,
                    ir_dtype_name(t->dtype), ir_dtype_name(nd->type.dtype),
                    type_str(g, &nd->type, want, sizeof want));
  if (t->rank != nd->type.rank)
    return run_fail(in, "input '%s' has rank %d, expected %d (%s)", name,
                    t->rank, nd->type.rank,
                    type_str(g, &nd->type, want, sizeof want));
  for (int i = 0; i < t->rank; i++) {
    IrDim d = nd->type.dims[i];
    int64_t v = t->dims[i];
    if (d.sym < 0) {
      if (v != d.value)
        return run_fail(in, "input '%s' dim %d is %lld, expected %lld (%s)", name,
                        i, (long long)v, (long long)d.value,
                        type_str(g, &nd->type, want, sizeof want));
      continue;
    }
    const IrSymbol *s = &g->syms[d.sym];
    if (in->sym_value[d.sym] == 0) {
      if (v < 1)
        return run_fail(in, "input '%s' dim %d is %lld but %s must be at least 1",
                        name, i, (long long)v, s->name);
      if (v > s->max)
        return run_fail(in, "input '%s' dim %d is %lld but %s max is %lld", name,
                        i, (long long)v, s->name, (long long)s->max);
      in->sym_value[d.sym] = v;
      in->sym_from[d.sym] = name;
    } else if (v != in->sym_value[d.sym]) {
      return run_fail(in, "input '%s' dim %d is %lld but %s is %lld (from '%s')",
                      name, i, (long long)v, s->name,
                      (long long)in->sym_value[d.sym], in->sym_from[d.sym]);
    }
  }
  int64_t n = tensor_numel(t);
  if (n < 0 || n > INTERP_MAX_BYTES / (int64_t)dtype_size(t->dtype))
    return run_fail(in, "input '%s' is too large", name);
  if (n > 0 && !t->data) return run_fail(in, "input '%s' has no data", name);
  Tensor *v = &in->vals[id];
  *v = *t;
  v->name = name;
  in->owned[id] = false; /* the caller's memory: read, never written or reused */
  return 0;
}

static int bind_inputs(Interp *in, const Tensor *inputs, int n_inputs) {
  const IrGraph *g = in->g;
  if (n_inputs < 0 || (n_inputs > 0 && !inputs))
    return run_fail(in, "bad input list (%d inputs)", n_inputs);
  for (int i = 0; i < n_inputs; i++) {
    if (!inputs[i].name) return run_fail(in, "input %d has no name", i);
    if ((unsigned)inputs[i].dtype >= IR_DTYPE_COUNT)
      return run_fail(in, "input '%s' has a bad dtype", inputs[i].name);
    if (inputs[i].rank < 0 || inputs[i].rank > IR_MAX_RANK)
      return run_fail(in, "input '%s' has rank %d (at most %d)", inputs[i].name,
                      inputs[i].rank, IR_MAX_RANK);
    for (int j = 0; j < i; j++)
      if (strcmp(inputs[j].name, inputs[i].name) == 0)
        return run_fail(in, "input '%s' given twice", inputs[i].name);
  }
  for (int id = 0; id < g->n_nodes; id++) {
    const IrNode *nd = &g->nodes[id];
    if (nd->op != IR_OP_INPUT) continue;
    const Tensor *t = find_input(inputs, n_inputs, nd->attrs.name);
    if (!t) return run_fail(in, "missing input '%s'", nd->attrs.name);
    if (bind_input(in, id, t)) return 1;
  }
  for (int i = 0; i < n_inputs; i++) {
    bool found = false;
    for (int id = 0; id < g->n_nodes && !found; id++)
      found = g->nodes[id].op == IR_OP_INPUT &&
              strcmp(g->nodes[id].attrs.name, inputs[i].name) == 0;
    if (!found) return run_fail(in, "unexpected input '%s'", inputs[i].name);
  }
  /* every symbol any node uses must now be bound */
  for (int id = 0; id < g->n_nodes; id++) {
    const IrType *t = &g->nodes[id].type;
    for (int i = 0; i < t->rank; i++)
      if (t->dims[i].sym >= 0 && in->sym_value[t->dims[i].sym] == 0)
        return node_fail(in, id, "symbol '%s' is not bound by any input",
                         g->syms[t->dims[i].sym].name);
  }
  return 0;
}

static int bind_param(Interp *in, int id) {
  const IrNode *nd = &in->g->nodes[id];
  const char *name = nd->attrs.name;
  const Weight *wt = NULL;
  for (int i = 0; in->w && i < in->w->n && !wt; i++)
    if (in->w->items[i].name && strcmp(in->w->items[i].name, name) == 0)
      wt = &in->w->items[i];
  if (!wt) return node_fail(in, id, "no weight for param '%s'", name);
  char have[128], want[128];
  bool constant = wt->type.rank >= 0 && wt->type.rank <= IR_MAX_RANK;
  for (int i = 0; constant && i < wt->type.rank; i++)
    constant = wt->type.dims[i].sym < 0;
  if (!constant || !ir_type_eq(&wt->type, &nd->type))
    return node_fail(in, id, "param '%s' is %s in the weights, the graph expects %s",
                     name, constant ? type_str(in->g, &wt->type, have, sizeof have)
                                    : "not a constant shape",
                     type_str(in->g, &nd->type, want, sizeof want));
  Tensor *v = &in->vals[id];
  v->name = name;
  v->dtype = nd->type.dtype;
  v->rank = nd->type.rank;
  for (int i = 0; i < v->rank; i++) v->dims[i] = nd->type.dims[i].value;
  int64_t n = tensor_numel(v);
  if (n < 0) return node_fail(in, id, "param '%s' is too large", name);
  v->data = wt->data;
  if (n > 0 && !v->data && in->w->src) { /* a mapped set's: read it whole, once per run */
    char err[256];
    float *data = arena_try_alloc(in->a, (size_t)n * sizeof(float));
    if (!data) return node_fail(in, id, "out of memory reading param '%s'", name);
    if (ir_weight_read(in->w, wt, 0, n, data, err, sizeof err))
      return node_fail(in, id, "param '%s': %s", name, err);
    v->data = data;
  }
  if (n > 0 && !v->data) return node_fail(in, id, "param '%s' has no data", name);
  in->owned[id] = false;
  return 0;
}

/* ---- sources ---- */

/* const {value} -> f32[] */
static int kernel_const(Interp *in, int id) {
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  ((float *)o->data)[0] = (float)in->g->nodes[id].attrs.value;
  return 0;
}

/* arange -> i32[N]: 0, 1, ..., N-1 */
static int kernel_arange(Interp *in, int id) {
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  if (o->dims[0] > INT32_MAX)
    return node_fail(in, id, "arange of %lld does not fit i32",
                     (long long)o->dims[0]);
  int32_t *y = o->data;
  for (int64_t i = 0; i < o->dims[0]; i++) y[i] = (int32_t)i;
  return 0;
}

/* mask.causal -> bool[1,Tq,Tk]: m[0,q,k] = k <= q + (Tk - Tq) (query q is
 * at absolute position q + Tk - Tq) */
static int kernel_mask_causal(Interp *in, int id) {
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  int64_t Tq = o->dims[1], Tk = o->dims[2];
  uint8_t *m = o->data;
  for (int64_t q = 0; q < Tq; q++)
    for (int64_t k = 0; k < Tk; k++) m[q * Tk + k] = k <= q + (Tk - Tq);
  return 0;
}

/* sinusoid(pos i32[N]) -> f32[N,D]:
 *   PE[p,2i] = sin(p * div_i), PE[p,2i+1] = cos(p * div_i),
 *   div_i = exp(2i * -(ln 10000) / D) = 1 / 10000^(2i/D)
 * (the Annotated Transformer's div_term). An odd D ends with a sin column. */
static int kernel_sinusoid(Interp *in, int id) {
  const Tensor *pos = operand(in, id, 0);
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  /* pos i32[...] -> f32[...,D]: one row of D per position */
  int64_t N = tensor_numel(pos), D = o->dims[o->rank - 1];
  const int32_t *p = pos->data;
  float *y = o->data;
  double k = -log(10000.0) / (double)D;
  for (int64_t r = 0; r < N; r++)
    for (int64_t c = 0; c < D; c++) {
      double div = exp((double)(c - c % 2) * k);
      double angle = (double)p[r] * div;
      y[r * D + c] = (float)(c % 2 == 0 ? sin(angle) : cos(angle));
    }
  return 0;
}

/* embed(table f32[V,D], ids i32[...]) -> f32[...,D]: y[i,:] = table[ids[i],:] */
static int kernel_embed(Interp *in, int id) {
  const IrNode *nd = &in->g->nodes[id];
  const Tensor *table = operand(in, id, 0), *ids = operand(in, id, 1);
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  int64_t V = table->dims[0], D = table->dims[1], n = tensor_numel(ids);
  const int32_t *x = ids->data;
  const float *tab = table->data;
  float *y = o->data;
  for (int64_t i = 0; i < n; i++) {
    if (x[i] < 0 || x[i] >= V) {
      const IrNode *tn = &in->g->nodes[nd->operands[0]];
      char which[160], at[64];
      if (tn->op == IR_OP_PARAM)
        snprintf(which, sizeof which, "'%s'", tn->attrs.name);
      else
        snprintf(which, sizeof which, "%%%d", nd->operands[0]);
      return node_fail(in, id, "embedding %s: id %d at [%s] out of range [0, %lld)",
                       which, (int)x[i],
                       index_str(ids->dims, ids->rank, i, at, sizeof at),
                       (long long)V);
    }
    memcpy(y + i * D, tab + (int64_t)x[i] * D, (size_t)D * sizeof *y);
  }
  return 0;
}

/* ---- elementwise ---- */

typedef enum BinKind { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_AND, BIN_KIND_COUNT } BinKind;

/* Element strides of x aligned to the trailing dims of an output of rank 4
 * (padded on the left); a dim of size 1 that the output stretches gets
 * stride 0 (numpy broadcasting). */
static int broadcast_strides(Interp *in, int id, const Tensor *x,
                             const int64_t od[IR_MAX_RANK],
                             int64_t st[IR_MAX_RANK]) {
  int64_t stride = 1;
  for (int i = IR_MAX_RANK - 1; i >= 0; i--) {
    int xi = x->rank - (IR_MAX_RANK - i);
    int64_t d = xi >= 0 ? x->dims[xi] : 1;
    if (d == od[i]) st[i] = stride;
    else if (d == 1) st[i] = 0;
    else
      return node_fail(in, id, "operand dim %d is %lld, result's is %lld", xi,
                       (long long)d, (long long)od[i]);
    stride *= d;
  }
  return 0;
}

/* add/sub/mul/div(a f32, b f32), and(a bool, b bool): numpy broadcasting.
 *   y[i0,i1,i2,i3] = a[i . sa] OP b[i . sb]  (index padded to rank 4) */
static int kernel_binary(Interp *in, int id, BinKind kind) {
  const Tensor *x = operand(in, id, 0), *z = operand(in, id, 1);
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  int64_t od[IR_MAX_RANK] = {0}, sx[IR_MAX_RANK] = {0}, sz[IR_MAX_RANK] = {0};
  for (int i = 0; i < IR_MAX_RANK; i++) {
    int oi = o->rank - (IR_MAX_RANK - i);
    od[i] = oi >= 0 ? o->dims[oi] : 1;
  }
  if (broadcast_strides(in, id, x, od, sx) || broadcast_strides(in, id, z, od, sz))
    return 1;
  int64_t k = 0;
  for (int64_t i0 = 0; i0 < od[0]; i0++)
    for (int64_t i1 = 0; i1 < od[1]; i1++)
      for (int64_t i2 = 0; i2 < od[2]; i2++)
        for (int64_t i3 = 0; i3 < od[3]; i3++, k++) {
          int64_t ix = i0 * sx[0] + i1 * sx[1] + i2 * sx[2] + i3 * sx[3];
          int64_t iz = i0 * sz[0] + i1 * sz[1] + i2 * sz[2] + i3 * sz[3];
          if (kind == BIN_AND) {
            const uint8_t *a = x->data, *b = z->data;
            ((uint8_t *)o->data)[k] = a[ix] && b[iz];
            continue;
          }
          double a = ((const float *)x->data)[ix], b = ((const float *)z->data)[iz];
          double r = 0;
          switch (kind) {
          case BIN_ADD: r = a + b; break;
          case BIN_SUB: r = a - b; break;
          case BIN_MUL: r = a * b; break;
          case BIN_DIV: r = a / b; break;
          case BIN_AND:
          case BIN_KIND_COUNT: break;
          }
          ((float *)o->data)[k] = (float)r;
        }
  return 0;
}

typedef enum UnKind { UN_SCALE, UN_RELU, UN_GELU, UN_GELU_TANH, UN_TANH, UN_KIND_COUNT } UnKind;

static double unary_apply(UnKind kind, double x, double factor) {
  switch (kind) {
  case UN_SCALE: return x * factor;
  case UN_RELU: return x < 0 ? 0.0 : x;
  case UN_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  case UN_GELU_TANH: {
    double c = sqrt(2.0 / INTERP_PI);
    return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
  }
  case UN_TANH: return tanh(x);
  case UN_KIND_COUNT: break;
  }
  return x;
}

/* scale, relu, gelu, gelu_tanh, tanh: y[i] = f(x[i]) */
static int kernel_unary(Interp *in, int id, UnKind kind) {
  const Tensor *x = operand(in, id, 0);
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  double factor = in->g->nodes[id].attrs.factor;
  int64_t n = tensor_numel(o);
  const float *a = x->data;
  float *y = o->data;
  for (int64_t i = 0; i < n; i++) y[i] = (float)unary_apply(kind, a[i], factor);
  return 0;
}

/* ---- reductions over the last dim ---- */

/* layernorm(x f32[...,D], g f32[D], b f32[D]) {eps, unbiased}, per row:
 *   unbiased=false: y = g (x-mean)/sqrt(var+eps) + b,  var = sum (x-mean)^2 / D
 *   unbiased=true:  y = g (x-mean)/(std+eps) + b,      std = sqrt(sum (x-mean)^2 / (D-1))
 *                   (std = 0 when D == 1) */
static int kernel_layernorm(Interp *in, int id) {
  const IrAttrs *at = &in->g->nodes[id].attrs;
  const Tensor *x = operand(in, id, 0), *gt = operand(in, id, 1),
               *bt = operand(in, id, 2);
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  int64_t R = rows_of(x), D = x->dims[x->rank - 1];
  const float *g = gt->data, *b = bt->data;
  for (int64_t r = 0; r < R && D > 0; r++) {
    const float *xr = (const float *)x->data + r * D;
    float *yr = (float *)o->data + r * D;
    double sum = 0, ss = 0;
    for (int64_t i = 0; i < D; i++) sum += xr[i];
    double mean = sum / (double)D;
    for (int64_t i = 0; i < D; i++) ss += (xr[i] - mean) * (xr[i] - mean);
    double denom;
    if (at->unbiased) denom = (D > 1 ? sqrt(ss / (double)(D - 1)) : 0.0) + at->eps;
    else denom = sqrt(ss / (double)D + at->eps);
    for (int64_t i = 0; i < D; i++)
      yr[i] = (float)((double)g[i] * ((xr[i] - mean) / denom) + (double)b[i]);
  }
  return 0;
}

/* In place over a row of n scores: s = softmax(s) (max-subtracted). */
static void softmax_row(double *s, int64_t n) {
  double mx = -INFINITY, sum = 0;
  for (int64_t j = 0; j < n; j++) mx = s[j] > mx ? s[j] : mx;
  for (int64_t j = 0; j < n; j++) {
    s[j] = exp(s[j] - mx);
    sum += s[j];
  }
  for (int64_t j = 0; j < n; j++) s[j] /= sum;
}

/* softmax, log_softmax(x f32[...,N]) over the last dim:
 *   softmax:     y = exp(x - max) / sum exp(x - max)
 *   log_softmax: y = (x - max) - log(sum exp(x - max)) */
static int kernel_softmax(Interp *in, int id, bool log_form) {
  const Tensor *x = operand(in, id, 0);
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  int64_t R = rows_of(x), N = x->dims[x->rank - 1];
  double *row = arena_alloc(in->a, (size_t)(N > 0 ? N : 1) * sizeof *row);
  for (int64_t r = 0; r < R; r++) {
    const float *xr = (const float *)x->data + r * N;
    float *yr = (float *)o->data + r * N;
    for (int64_t j = 0; j < N; j++) row[j] = xr[j];
    if (!log_form) {
      softmax_row(row, N);
      for (int64_t j = 0; j < N; j++) yr[j] = (float)row[j];
      continue;
    }
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < N; j++) mx = row[j] > mx ? row[j] : mx;
    for (int64_t j = 0; j < N; j++) sum += exp(row[j] - mx);
    double lse = log(sum);
    for (int64_t j = 0; j < N; j++) yr[j] = (float)((row[j] - mx) - lse);
  }
  return 0;
}

/* linear(x f32[...,K], w f32[N,K], b f32[N]?, r f32[...,N]?) {act, residual}
 *   t[m,n] = (f32)(sum_k x[m,k] w[n,k] + b[n])
 *   y[m,n] = (f32)((f32)act(t[m,n]) + r[m,n])
 * rounded to f32 at the same steps as linear, then relu / gelu / gelu_tanh,
 * then add compute them, so a fused linear is exactly the composition.
 * Loop order m-n-k: with w in PyTorch's [out,in] layout both rows of the
 * dot product are contiguous. */
static int kernel_linear(Interp *in, int id) {
  const IrNode *nd = &in->g->nodes[id];
  int n_bias = nd->n_operands - 2 - (nd->attrs.residual ? 1 : 0);
  const Tensor *x = operand(in, id, 0), *w = operand(in, id, 1);
  const float *b = n_bias == 1 ? operand(in, id, 2)->data : NULL;
  const float *res = nd->attrs.residual ? operand(in, id, nd->n_operands - 1)->data : NULL;
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  int64_t M = rows_of(x), K = x->dims[x->rank - 1], N = w->dims[0];
  const float *xs = x->data, *ws = w->data;
  float *y = o->data;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      const float *xr = xs + m * K, *wr = ws + n * K;
      double acc = 0;
      for (int64_t k = 0; k < K; k++) acc += (double)xr[k] * (double)wr[k];
      if (b) acc += b[n];
      float t = (float)acc;
      switch (nd->attrs.act) {
      case IR_ACT_NONE: break;
      case IR_ACT_RELU: t = (float)unary_apply(UN_RELU, t, 0); break;
      case IR_ACT_GELU: t = (float)unary_apply(UN_GELU, t, 0); break;
      case IR_ACT_GELU_TANH: t = (float)unary_apply(UN_GELU_TANH, t, 0); break;
      case IR_ACT_COUNT: break;
      }
      if (res) t = (float)((double)t + (double)res[m * N + n]);
      y[m * N + n] = t;
    }
  return 0;
}

/* ---- shape ---- */

/* reshape(x) -> T: the same elements in row-major order */
static int kernel_reshape(Interp *in, int id) {
  const Tensor *x = operand(in, id, 0);
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  int64_t n = tensor_numel(o);
  if (n != tensor_numel(x))
    return node_fail(in, id, "reshape of %lld elements to %lld",
                     (long long)tensor_numel(x), (long long)n);
  memcpy(o->data, x->data, (size_t)n * dtype_size(o->dtype));
  return 0;
}

/* take(x) {axis, index}: x viewed as (outer, n, inner) -> y (outer, inner) =
 * x[:, index, :] */
static int kernel_take(Interp *in, int id) {
  const IrAttrs *at = &in->g->nodes[id].attrs;
  const Tensor *x = operand(in, id, 0);
  int64_t n = x->dims[at->axis], index = at->index < 0 ? n + at->index : at->index;
  if (index < 0 || index >= n)
    return node_fail(in, id, "take index %lld is out of range for axis %d of size %lld",
                     (long long)at->index, at->axis, (long long)n);
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < at->axis; i++) outer *= x->dims[i];
  for (int i = at->axis + 1; i < x->rank; i++) inner *= x->dims[i];
  size_t es = dtype_size(x->dtype);
  const char *src = x->data;
  char *dst = o->data;
  for (int64_t r = 0; r < outer; r++)
    memcpy(dst + (size_t)(r * inner) * es,
           src + (size_t)((r * n + index) * inner) * es, (size_t)inner * es);
  return 0;
}

/* tail(x) {axis} -> y: x viewed as (outer, n, inner), y (outer, m, inner) =
 * x[:, n-m:n, :] */
static int kernel_tail(Interp *in, int id) {
  int axis = in->g->nodes[id].attrs.axis;
  const Tensor *x = operand(in, id, 0);
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  int64_t n = x->dims[axis], m = o->dims[axis], outer = 1, inner = 1;
  if (m > n)
    return node_fail(in, id, "tail of %lld entries of an axis of %lld", (long long)m,
                     (long long)n);
  for (int i = 0; i < axis; i++) outer *= x->dims[i];
  for (int i = axis + 1; i < x->rank; i++) inner *= x->dims[i];
  size_t es = dtype_size(x->dtype);
  for (int64_t r = 0; r < outer; r++)
    memcpy((char *)o->data + (size_t)(r * m * inner) * es,
           (const char *)x->data + (size_t)((r * n + n - m) * inner) * es,
           (size_t)(m * inner) * es);
  return 0;
}

/* ---- state ---- */

struct InterpState {
  const IrGraph *g;
  float **data; /* per node: a state node's tensor (zeroed at creation), else NULL */
};

InterpState *interp_state_create(Arena *a, const IrGraph *g) {
  InterpState *st = arena_alloc(a, sizeof *st);
  st->g = g;
  st->data = arena_alloc(a, (size_t)(g->n_nodes + 1) * sizeof *st->data);
  for (int id = 0; id < g->n_nodes; id++) {
    const IrNode *nd = &g->nodes[id];
    st->data[id] = NULL;
    if (nd->op != IR_OP_STATE) continue;
    size_t n = 1;
    for (int i = 0; i < nd->type.rank; i++) n *= (size_t)nd->type.dims[i].value;
    st->data[id] = arena_alloc(a, n * sizeof(float));
    memset(st->data[id], 0, n * sizeof(float));
  }
  return st;
}

void interp_state_reorder(InterpState *st, const int64_t *parent, int n, int64_t len, Arena *a) {
  const IrGraph *g = st->g;
  for (int id = 0; id < g->n_nodes; id++) {
    if (!st->data[id]) continue;
    const IrType *t = &g->nodes[id].type;
    int64_t bm = t->dims[0].value, sm = t->dims[1].value, d = t->dims[2].value;
    TFMC_ASSERT(n <= bm && len <= sm);
    size_t row = (size_t)(len * d);
    float *tmp = arena_alloc(a, (size_t)n * row * sizeof(float) + 4);
    for (int i = 0; i < n; i++) {
      TFMC_ASSERT(parent[i] >= 0 && parent[i] < bm);
      memcpy(tmp + (size_t)i * row, st->data[id] + parent[i] * sm * d, row * sizeof(float));
    }
    for (int i = 0; i < n; i++)
      memcpy(st->data[id] + (int64_t)i * sm * d, tmp + (size_t)i * row, row * sizeof(float));
  }
}

/* state -> f32[Bm,Sm,D]: the run's InterpState tensor, kept across runs */
static int kernel_state(Interp *in, int id) {
  const IrNode *nd = &in->g->nodes[id];
  if (in->state->g != in->g)
    return node_fail(in, id, "state '%s': the state object is another graph's", nd->attrs.name);
  Tensor *v = &in->vals[id];
  v->name = nd->attrs.name;
  v->dtype = IR_F32;
  v->rank = 3;
  for (int i = 0; i < 3; i++) v->dims[i] = nd->type.dims[i].value;
  v->data = in->state->data[id];
  in->owned[id] = false;
  return 0;
}

/* kv.append(s, x f32[B,T,D]) -> f32[B,L,D], P = L - T:
 *   s[b, P+t, :] = x[b, t, :];  y[b, j, :] = s[b, j, :] for j < L */
static int kernel_kv_append(Interp *in, int id) {
  const Tensor *s = operand(in, id, 0), *x = operand(in, id, 1);
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  int64_t B = x->dims[0], T = x->dims[1], D = x->dims[2], L = o->dims[1];
  int64_t Bm = s->dims[0], Sm = s->dims[1];
  if (B > Bm || L > Sm || T > L)
    return node_fail(in, id, "kv.append of %lld x %lld rows at %lld..%lld does not fit the "
                     "state [%lld,%lld,%lld]", (long long)B, (long long)T, (long long)(L - T),
                     (long long)L, (long long)Bm, (long long)Sm, (long long)D);
  float *sd = s->data;
  const float *xd = x->data;
  for (int64_t b = 0; b < B; b++) {
    memcpy(sd + (b * Sm + L - T) * D, xd + b * T * D, (size_t)(T * D) * sizeof(float));
    memcpy((float *)o->data + b * L * D, sd + b * Sm * D, (size_t)(L * D) * sizeof(float));
  }
  return 0;
}

/* ---- attention ---- */

/* q (B,Tq,D), k (B,Tk,D), mask (Bm,Tqm,Tk)? with Bm in {1,B}, Tqm in {1,Tq}
 *   -> p (B,H,Tq,Tk):
 *   s[j] = (q[b,i,h*dh:(h+1)*dh] . k[b,j,h*dh:(h+1)*dh]) * scale, dh = D/H
 *   s[j] = -1e9 where mask[b|0, i|0, j] == 0
 *   p[b,h,i,:] = softmax(s) */
static int attn_probs(Interp *in, int id, const Tensor *q, const Tensor *k,
                      const Tensor *mask, int H, double scale, float *p) {
  int64_t B = q->dims[0], Tq = q->dims[1], D = q->dims[2], Tk = k->dims[1];
  int64_t dh = D / H, mb = 0, mq = 0;
  if (mask) {
    if ((mask->dims[0] != 1 && mask->dims[0] != B) ||
        (mask->dims[1] != 1 && mask->dims[1] != Tq) || mask->dims[2] != Tk)
      return node_fail(in, id, "attention mask does not fit the scores");
    mb = mask->dims[0] == 1 ? 0 : mask->dims[1] * Tk;
    mq = mask->dims[1] == 1 ? 0 : Tk;
  }
  double *s = arena_alloc(in->a, (size_t)(Tk > 0 ? Tk : 1) * sizeof *s);
  const float *qs = q->data, *ks = k->data;
  const uint8_t *ms = mask ? mask->data : NULL;
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < Tq; i++) {
        const float *qi = qs + (b * Tq + i) * D + h * dh;
        for (int64_t j = 0; j < Tk; j++) {
          const float *kj = ks + (b * Tk + j) * D + h * dh;
          double dot = 0;
          for (int64_t d = 0; d < dh; d++) dot += (double)qi[d] * (double)kj[d];
          s[j] = dot * scale;
          if (ms && !ms[b * mb + i * mq + j]) s[j] = INTERP_MASKED_SCORE;
        }
        softmax_row(s, Tk);
        float *pi = p + ((b * H + h) * Tq + i) * Tk;
        for (int64_t j = 0; j < Tk; j++) pi[j] = (float)s[j];
      }
  return 0;
}

/* p (B,H,Tq,Tk), v (B,Tk,Dv) -> y (B,Tq,Dv):
 *   y[b,i,h*dvh+e] = sum_j p[b,h,i,j] v[b,j,h*dvh+e],  dvh = Dv/H */
static void attn_mix(const float *p, const float *v, int64_t B, int H,
                     int64_t Tq, int64_t Tk, int64_t Dv, double *acc, float *y) {
  int64_t dvh = Dv / H;
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < Tq; i++) {
        const float *pi = p + ((b * H + h) * Tq + i) * Tk;
        for (int64_t e = 0; e < dvh; e++) acc[e] = 0;
        for (int64_t j = 0; j < Tk; j++) {
          const float *vj = v + (b * Tk + j) * Dv + h * dvh;
          for (int64_t e = 0; e < dvh; e++) acc[e] += (double)pi[j] * (double)vj[e];
        }
        float *yi = y + (b * Tq + i) * Dv + h * dvh;
        for (int64_t e = 0; e < dvh; e++) yi[e] = (float)acc[e];
      }
}

/* attn.probs(q, k, mask?) {heads, scale} -> f32[B,H,Tq,Tk] */
static int kernel_attn_probs(Interp *in, int id) {
  const IrNode *nd = &in->g->nodes[id];
  const Tensor *mask = nd->n_operands == 3 ? operand(in, id, 2) : NULL;
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  return attn_probs(in, id, operand(in, id, 0), operand(in, id, 1), mask,
                    nd->attrs.heads, nd->attrs.scale, o->data);
}

/* attn.mix(p f32[B,H,Tq,Tk], v f32[B,Tk,D]) {heads} -> f32[B,Tq,D] */
static int kernel_attn_mix(Interp *in, int id) {
  const Tensor *p = operand(in, id, 0), *v = operand(in, id, 1);
  int H = in->g->nodes[id].attrs.heads;
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  int64_t dvh = v->dims[2] / H;
  double *acc = arena_alloc(in->a, (size_t)(dvh > 0 ? dvh : 1) * sizeof *acc);
  attn_mix(p->data, v->data, p->dims[0], H, p->dims[2], p->dims[3], v->dims[2],
           acc, o->data);
  return 0;
}

/* attention(q, k, v, mask?) {heads, scale} -> f32[B,Tq,Dv]
 *   = attn.mix(attn.probs(q, k, mask), v), by construction: the same two
 *   kernels run over a scratch p (B,H,Tq,Tk). */
static int kernel_attention(Interp *in, int id) {
  const IrNode *nd = &in->g->nodes[id];
  const Tensor *q = operand(in, id, 0), *k = operand(in, id, 1),
               *v = operand(in, id, 2);
  const Tensor *mask = nd->n_operands == 4 ? operand(in, id, 3) : NULL;
  int H = nd->attrs.heads;
  int64_t B = q->dims[0], Tq = q->dims[1], Tk = k->dims[1], Dv = v->dims[2];
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  Tensor pt = {.dtype = IR_F32, .rank = 4, .dims = {B, H, Tq, Tk}};
  int64_t np = tensor_numel(&pt); /* -1 on overflow */
  void *p = NULL;
  size_t cap = 0;
  if (scratch_get(in, id, np, sizeof(float), &p, &cap)) return 1;
  int rc = attn_probs(in, id, q, k, mask, H, nd->attrs.scale, p);
  if (rc == 0) {
    int64_t dvh = Dv / H;
    double *acc = arena_alloc(in->a, (size_t)(dvh > 0 ? dvh : 1) * sizeof *acc);
    attn_mix(p, v->data, B, H, Tq, Tk, Dv, acc, o->data);
  }
  buf_put(in, p, cap);
  return rc;
}

/* param.concat {name, axis}: a derived param. Bound by name when the
 * weights hold it (ir_weights_derive computed it once, as the compile
 * driver does), else computed here from its operands' weights (a graph run
 * on its raw weights: the op's definition). */
static int kernel_param_concat(Interp *in, int id) {
  const IrNode *nd = &in->g->nodes[id];
  if (ir_weights_find(in->w, nd->attrs.name)) return bind_param(in, id);
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  char msg[256];
  if (!ir_param_concat_compute(in->g, id, in->w, o->data, msg, sizeof msg))
    return node_fail(in, id, "%s", msg);
  return 0;
}

/* slice(x) {axis, start} -> x[..., start:start+m, ...] along axis */
static int kernel_slice(Interp *in, int id) {
  const IrNode *nd = &in->g->nodes[id];
  int axis = nd->attrs.axis;
  const Tensor *x = operand(in, id, 0);
  Tensor *o;
  if (out_alloc(in, id, &o)) return 1;
  int64_t n = x->dims[axis], m = o->dims[axis], start = nd->attrs.start, outer = 1, inner = 1;
  if (start < 0 || start + m > n)
    return node_fail(in, id, "slice %lld..%lld of an axis of %lld", (long long)start,
                     (long long)(start + m), (long long)n);
  for (int i = 0; i < axis; i++) outer *= x->dims[i];
  for (int i = axis + 1; i < x->rank; i++) inner *= x->dims[i];
  size_t es = dtype_size(x->dtype);
  for (int64_t r = 0; r < outer; r++)
    memcpy((char *)o->data + (size_t)(r * m * inner) * es,
           (const char *)x->data + (size_t)((r * n + start) * inner) * es,
           (size_t)(m * inner) * es);
  return 0;
}

/* ---- the driver ---- */

/* A fused node runs its decomposition (ir/fused.c) as a graph of its own,
 * in a scratch arena, on its operands' tensors; its result 0 becomes the
 * node's value and result i >= 1 the value of the `result {index=i}` node
 * that reads it (filled here, before that node's turn). So a fusion needs no
 * kernel of its own: the decomposition is the reference. */
static int kernel_fused(Interp *in, int id) {
  const IrNode *nd = &in->g->nodes[id];
  Arena *ta = arena_create();
  char msg[512];
  IrGraph *body = ir_fused_body(ta, in->g, id, msg, sizeof msg);
  if (!body) {
    arena_destroy(ta);
    return node_fail(in, id, "malformed fused node: %s", msg);
  }
  Tensor args[IR_MAX_OPERANDS];
  for (int k = 0; k < nd->n_operands; k++) {
    args[k] = *operand(in, id, k);
    args[k].name = body->nodes[k].attrs.name; /* "$k" */
  }
  InterpRunOptions opt = {in->sym_value, NULL};
  Tensor *outs;
  int n_outs;
  if (interp_run_with(body, NULL, args, nd->n_operands, &opt, ta, &outs, &n_outs, msg,
                      sizeof msg)) {
    arena_destroy(ta);
    return node_fail(in, id, "in its decomposition: %s", msg);
  }
  int rc = 0;
  for (int r = 0; r < n_outs && !rc; r++) {
    int v = id;
    if (r > 0) { /* the node that reads result r, if any */
      v = -1;
      for (int i = id + 1; i < in->g->n_nodes && v < 0; i++)
        if (in->g->nodes[i].op == IR_OP_RESULT && in->g->nodes[i].operands[0] == id &&
            in->g->nodes[i].attrs.index == r)
          v = i;
      if (v < 0) continue;
    }
    Tensor *t;
    if ((rc = out_alloc(in, v, &t))) break;
    memcpy(t->data, outs[r].data, (size_t)tensor_numel(t) * dtype_size(t->dtype));
  }
  arena_destroy(ta);
  return rc;
}

/* result {index=i} of a fused node: its fused node filled the value */
static int kernel_result(Interp *in, int id) {
  if (!in->vals[id].data && tensor_numel(&in->vals[id]) != 0)
    return node_fail(in, id, "its fused node did not compute result %lld",
                     (long long)in->g->nodes[id].attrs.index);
  return 0;
}

static int run_node(Interp *in, int id) {
  switch (in->g->nodes[id].op) {
  case IR_OP_INPUT: return 0; /* bound before the run */
  case IR_OP_PARAM: return bind_param(in, id);
  case IR_OP_CONST: return kernel_const(in, id);
  case IR_OP_ARANGE: return kernel_arange(in, id);
  case IR_OP_SINUSOID: return kernel_sinusoid(in, id);
  case IR_OP_EMBED: return kernel_embed(in, id);
  case IR_OP_ADD: return kernel_binary(in, id, BIN_ADD);
  case IR_OP_SUB: return kernel_binary(in, id, BIN_SUB);
  case IR_OP_MUL: return kernel_binary(in, id, BIN_MUL);
  case IR_OP_DIV: return kernel_binary(in, id, BIN_DIV);
  case IR_OP_AND: return kernel_binary(in, id, BIN_AND);
  case IR_OP_SCALE: return kernel_unary(in, id, UN_SCALE);
  case IR_OP_RELU: return kernel_unary(in, id, UN_RELU);
  case IR_OP_GELU: return kernel_unary(in, id, UN_GELU);
  case IR_OP_GELU_TANH: return kernel_unary(in, id, UN_GELU_TANH);
  case IR_OP_TANH: return kernel_unary(in, id, UN_TANH);
  case IR_OP_LAYERNORM: return kernel_layernorm(in, id);
  case IR_OP_LINEAR: return kernel_linear(in, id);
  case IR_OP_SOFTMAX: return kernel_softmax(in, id, false);
  case IR_OP_LOG_SOFTMAX: return kernel_softmax(in, id, true);
  case IR_OP_MASK_CAUSAL: return kernel_mask_causal(in, id);
  case IR_OP_RESHAPE: return kernel_reshape(in, id);
  case IR_OP_TAKE: return kernel_take(in, id);
  case IR_OP_ATTENTION: return kernel_attention(in, id);
  case IR_OP_ATTN_PROBS: return kernel_attn_probs(in, id);
  case IR_OP_ATTN_MIX: return kernel_attn_mix(in, id);
  case IR_OP_TAIL: return kernel_tail(in, id);
  case IR_OP_STATE: return kernel_state(in, id);
  case IR_OP_KV_APPEND: return kernel_kv_append(in, id);
  case IR_OP_FUSED: return kernel_fused(in, id);
  case IR_OP_RESULT: return kernel_result(in, id);
  /* attention.flash means what attention means: only its compiled form differs */
  case IR_OP_ATTENTION_FLASH: return kernel_attention(in, id);
  case IR_OP_PARAM_CONCAT: return kernel_param_concat(in, id);
  case IR_OP_SLICE: return kernel_slice(in, id);
  case IR_OP_COUNT: break;
  }
  return node_fail(in, id, "no kernel for this op");
}

/* After node id has run: operands whose last consumer it was, and id itself
 * if nothing consumes it, give their buffers back for reuse. */
static void release_dead(Interp *in, int id) {
  const IrNode *nd = &in->g->nodes[id];
  for (int k = 0; k < nd->n_operands; k++) {
    int v = nd->operands[k];
    if (--in->uses[v] == 0 && in->owned[v]) {
      buf_put(in, in->vals[v].data, in->caps[v]);
      in->owned[v] = false;
    }
  }
  if (in->uses[id] == 0 && in->owned[id]) {
    buf_put(in, in->vals[id].data, in->caps[id]);
    in->owned[id] = false;
  }
}

int interp_run(const IrGraph *g, const WeightSet *w, const Tensor *inputs,
               int n_inputs, Arena *a, Tensor **outputs, int *n_outputs,
               char *err, size_t errlen) {
  return interp_run_with(g, w, inputs, n_inputs, NULL, a, outputs, n_outputs, err, errlen);
}

int interp_run_with(const IrGraph *g, const WeightSet *w, const Tensor *inputs,
                    int n_inputs, const InterpRunOptions *opt, Arena *a, Tensor **outputs,
                    int *n_outputs, char *err, size_t errlen) {
  Interp in;
  memset(&in, 0, sizeof in);
  in.err = err;
  in.errlen = errlen;
  in.state = opt ? opt->state : NULL;
  if (!in.state && g) /* without a state object: one run of a fresh sequence */
    in.state = interp_state_create(a, g);
  if (err && errlen) err[0] = 0;
  if (!g || !a || !outputs || !n_outputs)
    return run_fail(&in, "interp_run: missing graph, arena or output pointers");
  *outputs = NULL;
  *n_outputs = 0;
  if (g->n_nodes < 0 || (g->n_nodes > 0 && !g->nodes) || g->n_outputs < 0 ||
      (g->n_outputs > 0 && !g->outputs))
    return run_fail(&in, "malformed graph");
  in.g = g;
  in.w = w;
  in.a = a;
  size_t nn = (size_t)(g->n_nodes > 0 ? g->n_nodes : 1);
  in.vals = arena_alloc(a, nn * sizeof *in.vals);
  in.caps = arena_alloc(a, nn * sizeof *in.caps);
  in.owned = arena_alloc(a, nn * sizeof *in.owned);
  in.uses = arena_alloc(a, nn * sizeof *in.uses);

  if (check_graph(&in)) return 1;
  for (int i = 0; opt && opt->syms && i < g->n_syms; i++) {
    if (opt->syms[i] < 0 || opt->syms[i] > g->syms[i].max)
      return run_fail(&in, "symbol '%s' is %lld, outside 1..%lld", g->syms[i].name,
                      (long long)opt->syms[i], (long long)g->syms[i].max);
    if (opt->syms[i] > 0) {
      in.sym_value[i] = opt->syms[i];
      in.sym_from[i] = "the caller";
    }
  }
  if (bind_inputs(&in, inputs, n_inputs)) return 1;

  for (int id = 0; id < g->n_nodes; id++)
    for (int k = 0; k < g->nodes[id].n_operands; k++) in.uses[g->nodes[id].operands[k]]++;
  for (int i = 0; i < g->n_outputs; i++) in.uses[g->outputs[i].value]++; /* pinned */

  for (int id = 0; id < g->n_nodes; id++) {
    if (run_node(&in, id)) return 1;
    release_dead(&in, id);
  }

  Tensor *outs = arena_alloc(a, (size_t)(g->n_outputs > 0 ? g->n_outputs : 1) *
                                    sizeof *outs);
  for (int i = 0; i < g->n_outputs; i++) {
    int v = g->outputs[i].value;
    outs[i] = in.vals[v];
    outs[i].name = g->outputs[i].name;
    IrOp op = g->nodes[v].op;
    if (op == IR_OP_INPUT || op == IR_OP_PARAM || op == IR_OP_PARAM_CONCAT) {
      /* outputs live in the arena: copy the caller's or the weights' memory */
      size_t bytes = (size_t)tensor_numel(&outs[i]) * dtype_size(outs[i].dtype);
      void *copy = arena_alloc(a, bytes);
      if (bytes) memcpy(copy, outs[i].data, bytes);
      outs[i].data = copy;
    }
  }
  *outputs = outs;
  *n_outputs = g->n_outputs;
  return 0;
}
